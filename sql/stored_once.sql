-- A multi-consumer queue table that stores each message once (create_queue_table with
-- multiple_consumers and segments; src/queue/once_walk.hpp): one row per message whatever the
-- number of subscribers, and receipts of what each consumer took.
\set VERBOSITY terse
SELECT aq.create_queue_table('once_qt', 'text', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('once_q', 'once_qt');
SELECT aq.start_queue('once_q');
SELECT s.segment, s.relid, s.receipts FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id)
 WHERE t.queue_table = 'once_qt' ORDER BY segment;

-- No subscriber: no recipient (ORA-24033 analogue), nothing stored.
SELECT try_sql($$SELECT aq.enqueue('once_q', 'lost'::text)$$);
SELECT aq.add_subscriber('once_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B', 'C']) s;

-- One row per message, for three subscribers.
SELECT aq.enqueue_array('once_q', ARRAY['m1', 'm2', 'm3', 'm4']) AS ids;
SELECT count(*) AS rows FROM once_qt;

-- Each consumer takes each message once, in order; a batch and single dequeues.
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 2, aq.dequeue_options(consumer_name => 'A'));
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B'));
SELECT payload FROM aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
-- Browse shows what the consumer has not taken, and takes nothing.
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'browse'));
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'C', dequeue_mode => 'browse'));
-- A rolled-back dequeue takes nothing; the message is the consumer's again.
BEGIN;
SELECT payload FROM aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
-- ... and the same transaction does not get it twice.
SELECT try_sql($$SELECT aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$);
ROLLBACK;
-- ... with the attempt counted for A (a receipt of kind 'r', written by the settler before
-- ROLLBACK returns).
SELECT payload, (p).attempts FROM aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
SELECT try_sql($$SELECT aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'B', wait => 0))$$);
-- FIRST_MESSAGE from the head finds nothing more for B either.
SELECT try_sql($$SELECT aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'B', navigation => 'first_message', wait => 0))$$);
-- The messages are still stored once; the receipts say who took what.
SELECT count(*) AS rows FROM once_qt;
CREATE VIEW once_taken AS  -- a receipt's runs [lo, hi] of msgids, one row per message taken
  SELECT r.tableoid::regclass AS receipts, r.consumer, g.msgid
    FROM (SELECT tableoid, * FROM "once_qt$0_r" UNION ALL SELECT tableoid, * FROM "once_qt$1_r"
          UNION ALL SELECT tableoid, * FROM "once_qt$2_r") r,
         generate_series(1, cardinality(r.runs) / 2) i, generate_series(r.runs[2 * i - 1], r.runs[2 * i]) g(msgid)
   WHERE r.kind = 't';
SELECT t.consumer, string_agg(m.user_data, ',' ORDER BY m.msgid) AS took, count(*) - count(DISTINCT m.msgid) AS twice
  FROM once_qt m JOIN once_taken t ON t.msgid = m.msgid GROUP BY 1 ORDER BY 1;
-- One receipt per dequeue: A's three calls, B's one.
SELECT consumer, count(*) AS receipts FROM "once_qt$0_r" WHERE kind = 't' GROUP BY 1 ORDER BY 1;
-- The view aq$once_qt: a row per message and consumer, PROCESSED once the consumer took it.
SELECT queue, msg_id, msg_state, consumer_name, retry_count, user_data FROM "aq$once_qt" ORDER BY msg_id, consumer_name;
-- aq.queue_health counts, per subscriber, what it has not taken (from the receipts).
SELECT queue, consumer_name, ready, waiting, expired FROM aq.queue_health WHERE queue_table = 'once_qt' ORDER BY 1, 2;
-- A consumer that is no subscriber gets nothing.
SELECT try_sql($$SELECT aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'Z', wait => 0))$$);

-- Messages across a switch, in order, for C.
SELECT aq._switch_segment('once_qt');
SELECT aq.enqueue('once_q', 'm5'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'C'));
SELECT receipts, consumer, count(*) FROM once_taken GROUP BY 1, 2 ORDER BY 1, 2;

-- A subscriber receives what is enqueued after it subscribed (Oracle's rule).
SELECT aq.add_subscriber('once_q', aq.agent('D'));
SELECT aq.enqueue('once_q', 'm6'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'D'));

-- Truncation (ring.hpp, T2): segment 0 (m1..m4) goes with its receipts once every subscriber it
-- is for took all of it; C has, A and B have; D's messages start later.
SELECT aq._switch_segment('once_qt');
SELECT aq._rotate_segments('once_qt') AS truncated;
SELECT pg_relation_size('"once_qt$0"') = 0 AS seg0_empty, pg_relation_size('"once_qt$0_r"') = 0 AS receipts0_empty;
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
-- Segment 1 (m5, m6): B has not taken them, so it stays.
SELECT aq._rotate_segments('once_qt') AS truncated;
SELECT pg_relation_size('"once_qt$1"') > 0 AS seg1_kept;
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B'));
SELECT payload FROM aq.dequeue_array('once_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'C'));
SELECT aq._switch_segment('once_qt');
SELECT aq._rotate_segments('once_qt') AS truncated;
SELECT pg_relation_size('"once_qt$1"') = 0 AS seg1_empty, pg_relation_size('"once_qt$1_r"') = 0 AS receipts1_empty;
SELECT count(*) AS left_in_ring FROM once_qt;

-- Attempts (once_walk.hpp, 5): a rolled-back dequeue counts for that consumer only, and the
-- message is that consumer's again after the queue's retry_delay, with its attempts.
SELECT aq.create_queue('once_rq', 'once_qt');
SELECT aq.start_queue('once_rq');
SELECT aq.add_subscriber('once_rq', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT aq.enqueue_array('once_rq', ARRAY['r1', 'r2']) IS NOT NULL AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue_array('once_rq', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
ROLLBACK;
-- ROLLBACK TO SAVEPOINT: seen at once inside the transaction, which goes on and commits.
BEGIN;
SAVEPOINT s;
SELECT payload, (p).attempts FROM aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
ROLLBACK TO SAVEPOINT s;
SELECT payload, (p).attempts FROM aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
COMMIT;
SELECT payload, (p).attempts FROM aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
-- B's are its own: no attempt.
SELECT payload, (p).attempts FROM aq.dequeue_array('once_rq', NULL::text, 10, aq.dequeue_options(consumer_name => 'B')) AS d(m, payload, p);
-- A retry_delay keeps the message from A until it passes; B takes it meanwhile.
SELECT aq.alter_queue('once_rq', retry_delay => '1 hour');
SELECT aq.enqueue('once_rq', 'r3'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A'));
ROLLBACK;
SELECT try_sql($$SELECT aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$) AS a_waits;
SELECT try_sql($$SELECT aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'browse', wait => 0))$$) AS a_browses_nothing;
SELECT payload, (p).attempts FROM aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'B')) AS d(m, payload, p);
SELECT r.consumer, r.kind, count(*) AS receipts, count(*) FILTER (WHERE r.at > now() + interval '50 minutes') AS held_an_hour
  FROM (SELECT * FROM "once_qt$0_r" UNION ALL SELECT * FROM "once_qt$1_r" UNION ALL SELECT * FROM "once_qt$2_r") r
 WHERE r.kind = 'r' GROUP BY 1, 2 ORDER BY 1, 2;
-- An attempt is no receipt of what was taken: r3's segment stays while A has not taken it.
SELECT aq._switch_segment('once_qt');
SELECT aq._rotate_segments('once_qt') AS truncated;
SELECT count(*) AS r3_kept FROM once_qt WHERE user_data = 'r3';
-- LISTEN returns a consumer's agent when that consumer could take a message now: not while A's r3
-- waits for its retry_delay, nor for B, which took everything of once_q.
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent('A', 'once_rq'), aq.agent('B', 'once_q')], wait => 0)$$) AS nothing_yet;
SELECT aq.enqueue('once_rq', 'r4'::text) > 0 AS enqueued;
SELECT a.name, a.address FROM aq.listen(ARRAY[aq.agent('B', 'once_q'), aq.agent('A', 'once_rq')], wait => 0) AS a;
SELECT payload FROM aq.dequeue('once_rq', NULL::text, aq.dequeue_options(consumer_name => 'A'));

-- Past max_retries a consumer's message moves to the exception queue, as that consumer's copy (a
-- receipt of kind 'x'); the other consumers' are untouched.
SELECT aq.create_queue_table('oncex_qt', 'text', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('oncex_q', 'oncex_qt', max_retries => 1);
SELECT aq.start_queue('oncex_q');
SELECT aq.start_queue('aq$_oncex_qt_e', enqueue => false);
SELECT aq.add_subscriber('oncex_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT aq.enqueue_array('oncex_q', ARRAY['x1', 'x2']) IS NOT NULL AS enqueued;
SELECT aq._switch_segment('oncex_qt');  -- the copy goes into the current segment, $1
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('oncex_q', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
ROLLBACK;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('oncex_q', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
ROLLBACK;
SELECT payload, (p).attempts FROM aq.dequeue_array('oncex_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => 0)) AS d(m, payload, p);
SELECT m.tableoid::regclass AS segment, q.queue_name, m.user_data, m.retry_count, m.consumer_name
  FROM oncex_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_type = 'exception_queue';
SELECT payload, (p).attempts FROM aq.dequeue_array('oncex_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B')) AS d(m, payload, p);
-- The exception queue gives a consumer its own copies, or anyone's without a consumer_name.
SELECT try_sql($$SELECT aq.dequeue('aq$_oncex_qt_e', NULL::text, aq.dequeue_options(consumer_name => 'B', wait => 0))$$) AS b_has_none;
SELECT payload, (p).attempts FROM aq.dequeue('aq$_oncex_qt_e', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'browse', wait => 0)) AS d(m, payload, p);
-- Truncation: segment 0 goes (A took x1 into the exception queue and x2, B both); segment 1 stays
-- while A's copy is in it.
SELECT aq._switch_segment('oncex_qt');
SELECT aq._rotate_segments('oncex_qt') AS truncated;
SELECT pg_relation_size('"oncex_qt$0"') = 0 AS seg0_empty, pg_relation_size('"oncex_qt$1"') > 0 AS seg1_kept;
SELECT payload, (p).attempts FROM aq.dequeue('aq$_oncex_qt_e', NULL::text, aq.dequeue_options(wait => 0)) AS d(m, payload, p);
SELECT aq._switch_segment('oncex_qt');
SELECT aq._rotate_segments('oncex_qt') AS truncated;
SELECT pg_relation_size('"oncex_qt$1"') = 0 AS seg1_empty, count(*) AS left_in_ring FROM oncex_qt;
SELECT aq.drop_queue_table('oncex_qt', force => true);

-- By msgid and by correlation (a LIKE pattern): each consumer's own, as any dequeue.
SELECT aq.create_queue_table('oncem_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncem_q', 'oncem_qt');
SELECT aq.start_queue('oncem_q');
SELECT aq.add_subscriber('oncem_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT aq.enqueue('oncem_q', 'c1'::text, aq.message_properties(correlation => 'red')) AS c1 \gset
SELECT aq.enqueue('oncem_q', 'c2'::text, aq.message_properties(correlation => 'blue')) AS c2 \gset
SELECT aq.enqueue('oncem_q', 'c3'::text, aq.message_properties(correlation => 'reddish')) AS c3 \gset
BEGIN;
SELECT payload FROM aq.dequeue('oncem_q', NULL::text, aq.dequeue_options(consumer_name => 'A', msgid => :c2));
-- What the dequeue keeps locked: the segment it took from and its receipts; not the other segment
-- nor its receipts (it read the message's position in a look and wrote no receipt there).
SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
 WHERE l.pid = pg_backend_pid() AND c.relname LIKE 'oncem_qt$%' AND c.relkind = 'r' ORDER BY 1, 2;
COMMIT;
SELECT try_sql(format($$SELECT aq.dequeue('oncem_q', NULL::text, aq.dequeue_options(consumer_name => 'A', msgid => %s, wait => 0))$$, :c2)) AS taken_already;
SELECT string_agg(payload, ',') FROM aq.dequeue_array('oncem_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', correlation => 'red%'));
SELECT try_sql($$SELECT aq.dequeue('oncem_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$) AS a_done;
SELECT payload FROM aq.dequeue('oncem_q', NULL::text, aq.dequeue_options(consumer_name => 'B', msgid => :c3, dequeue_mode => 'browse'));
SELECT try_sql($$SELECT aq.dequeue('oncem_q', NULL::text, aq.dequeue_options(consumer_name => 'B', correlation => 'green', wait => 0))$$) AS no_green;
SELECT string_agg(payload, ',') FROM aq.dequeue_array('oncem_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B'));
SELECT aq.drop_queue_table('oncem_qt', force => true);

-- By an exact correlation the walk reads the correlation index of each segment: that correlation's
-- messages alone, in the queue's order, across segments; the others are not fetched.
SELECT aq.create_queue_table('oncek_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncek_q', 'oncek_qt');
SELECT aq.start_queue('oncek_q');
SELECT aq.add_subscriber('oncek_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT count(*) FROM (SELECT aq.enqueue_array('oncek_q', array_agg('k' || i ORDER BY i),
                                              array_agg(aq.message_properties(correlation => CASE WHEN i % 1000 = 0 THEN 'needle' ELSE 'hay' END) ORDER BY i))
                        FROM generate_series(1, 3000) i GROUP BY i / 100) x;
SELECT aq._switch_segment('oncek_qt');
SELECT count(*) FROM (SELECT aq.enqueue_array('oncek_q', array_agg('k' || i ORDER BY i),
                                              array_agg(aq.message_properties(correlation => CASE WHEN i % 1000 = 0 THEN 'needle' ELSE 'hay' END) ORDER BY i))
                        FROM generate_series(3001, 5000) i GROUP BY i / 100) x;
CREATE FUNCTION oncek_fetched() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(coalesce(idx_tup_fetch, 0))::bigint FROM pg_stat_user_tables WHERE relid IN ('"oncek_qt$0"'::regclass, '"oncek_qt$1"'::regclass) $$;
SELECT pg_stat_force_next_flush();
SELECT oncek_fetched() AS fetched \gset
SELECT string_agg(payload, ',') FROM aq.dequeue_array('oncek_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', correlation => 'needle'));
SELECT pg_stat_force_next_flush();
SELECT oncek_fetched() - :fetched <= 20 AS needles_alone;
-- One at a time, with navigation, and then as the other consumer: each its own.
SELECT payload FROM aq.dequeue('oncek_q', NULL::text, aq.dequeue_options(consumer_name => 'B', correlation => 'needle', navigation => 'FIRST_MESSAGE', dequeue_mode => 'browse'));
SELECT payload FROM aq.dequeue('oncek_q', NULL::text, aq.dequeue_options(consumer_name => 'B', correlation => 'needle', navigation => 'NEXT_MESSAGE', dequeue_mode => 'browse'));
SELECT payload FROM aq.dequeue('oncek_q', NULL::text, aq.dequeue_options(consumer_name => 'B', correlation => 'needle', wait => 0));
SELECT try_sql($$SELECT aq.dequeue('oncek_q', NULL::text, aq.dequeue_options(consumer_name => 'A', correlation => 'needle', wait => 0))$$) AS a_has_none;
SELECT count(*) AS a_rest, count(*) FILTER (WHERE payload LIKE '%000') AS a_needles
  FROM aq.dequeue_array('oncek_q', NULL::text, 10000, aq.dequeue_options(consumer_name => 'A', wait => 0));
DROP FUNCTION oncek_fetched();
SELECT aq.drop_queue_table('oncek_qt', force => true);
-- In priority order (the correlation index is in priority order then: not a walk's) the walk filters the order index.
SELECT aq.create_queue_table('oncekp_qt', 'text', multiple_consumers => true, segments => 2, sort_list => 'priority,enq_time');
SELECT aq.create_queue('oncekp_q', 'oncekp_qt');
SELECT aq.start_queue('oncekp_q');
SELECT aq.add_subscriber('oncekp_q', aq.agent('A'));
SELECT aq.enqueue_array('oncekp_q', ARRAY['p1', 'p2', 'p3', 'p4'],
                        ARRAY[aq.message_properties(correlation => 'x', priority => 5), aq.message_properties(correlation => 'y', priority => 1),
                              aq.message_properties(correlation => 'x', priority => 1), aq.message_properties(priority => 0)]) IS NOT NULL AS enqueued;
SELECT string_agg(payload, ',') FROM aq.dequeue_array('oncekp_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', correlation => 'x'));
SELECT aq.drop_queue_table('oncekp_qt', force => true);

-- Locked mode: a receipt of kind 'l'.  The transaction that locked a message removes it by msgid; a
-- commit without that makes it the consumer's again (no attempt), a rollback counts an attempt.
SELECT aq.create_queue_table('oncel_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncel_q', 'oncel_qt');
SELECT aq.start_queue('oncel_q');
SELECT aq.add_subscriber('oncel_q', aq.agent('A'));
SELECT aq.enqueue('oncel_q', 'l1'::text) AS l1 \gset
SELECT aq.enqueue('oncel_q', 'l2'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'locked'));
SELECT payload FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', msgid => :l1));
COMMIT;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'locked')) AS d(m, payload, p);
COMMIT;
SELECT payload, (p).attempts FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'browse', wait => 0)) AS d(m, payload, p);
-- A lock is no receipt of what was taken: segment 0 stays while l2 is A's.
SELECT aq._switch_segment('oncel_qt');
SELECT aq._rotate_segments('oncel_qt') AS truncated;
BEGIN;
SELECT payload FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'locked'));
ROLLBACK;
SELECT payload, (p).attempts FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A')) AS d(m, payload, p);
SELECT kind, count(*) FROM "oncel_qt$0_r" GROUP BY 1 ORDER BY 1;
-- One message is one attempt however many receipts of the transaction cover it: locked, then
-- removed by msgid, then all rolled back; locked again inside a savepoint rolled back while the
-- outer lock stays (no attempt).
SELECT aq.enqueue('oncel_q', 'l3'::text) AS l3 \gset
BEGIN;
SELECT payload FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'locked'));
SELECT payload FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', msgid => :l3));
ROLLBACK;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'locked')) AS d(m, payload, p);
SAVEPOINT s;
SELECT payload FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'locked', navigation => 'first_message'));
ROLLBACK TO SAVEPOINT s;
SELECT payload, (p).attempts FROM aq.dequeue('oncel_q', NULL::text, aq.dequeue_options(consumer_name => 'A', msgid => :l3)) AS d(m, payload, p);
COMMIT;
-- Segment 0 goes once l1 and l2 are taken.
SELECT aq._rotate_segments('oncel_qt') AS truncated;
SELECT aq.drop_queue_table('oncel_qt', force => true);

-- A receipt's run split by the settler into retries and moves (messages of other priorities between
-- them), the copies landing in the messages' own segment, beside them.
SELECT aq.create_queue_table('oncep_qt', 'text', sort_list => 'priority,enq_time', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('oncep_q', 'oncep_qt', max_retries => 1);
SELECT aq.start_queue('oncep_q');
SELECT aq.start_queue('aq$_oncep_qt_e', enqueue => false);
SELECT aq.add_subscriber('oncep_q', aq.agent('A'));
SELECT count(aq.enqueue('oncep_q', 'm' || i, aq.message_properties(priority => CASE WHEN i IN (2, 4) THEN 1 ELSE 5 END)))
  FROM generate_series(1, 5) i;
BEGIN;
SELECT string_agg(payload, ',') FROM aq.dequeue_array('oncep_q', NULL::text, 2, aq.dequeue_options(consumer_name => 'A', wait => 0));
ROLLBACK;
BEGIN;
SELECT string_agg(payload || ':' || (p).attempts, ',') FROM aq.dequeue_array('oncep_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => 0)) AS d(m, payload, p);
ROLLBACK;
SELECT string_agg(payload || ':' || (p).attempts, ',') FROM aq.dequeue_array('oncep_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => 0)) AS d(m, payload, p);
SELECT m.tableoid::regclass AS segment, m.user_data, m.retry_count, m.consumer_name
  FROM oncep_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_type = 'exception_queue' ORDER BY m.msgid;
SELECT aq.drop_queue_table('oncep_qt', force => true);

-- An expired message goes to the exception queue for each subscriber that has not taken it (here by
-- a dequeue: these suites run without the time manager); the message itself then expires no more.
SELECT aq.create_queue_table('oncee_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncee_q', 'oncee_qt');
SELECT aq.start_queue('oncee_q');
SELECT aq.start_queue('aq$_oncee_qt_e', enqueue => false);
SELECT aq.add_subscriber('oncee_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B', 'C']) s;
SELECT aq.enqueue('oncee_q', 'e1'::text, aq.message_properties(expiration => '1 s')) > 0 AS enqueued;
SELECT aq.enqueue('oncee_q', 'e2'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('oncee_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
SELECT set_config('aq_test.a_dequeued', clock_timestamp()::text, false) IS NOT NULL AS noted;
-- Until e1 has expired, and a second has passed since A's dequeue looked for expired messages (a
-- dequeue looks at most once a second per queue table without a time manager).
DO $$ BEGIN
  WHILE clock_timestamp() <= (SELECT enq_time + interval '1 s' FROM oncee_qt WHERE user_data = 'e1')
     OR clock_timestamp() <= current_setting('aq_test.a_dequeued')::timestamptz + interval '1.1 s' LOOP
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
BEGIN;
SELECT payload FROM aq.dequeue_array('oncee_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B'));
-- The move took each subscriber's walk lock for a moment, not to the end of this transaction.
SELECT count(*) AS walk_locks_held FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 4 AND pid = pg_backend_pid();
COMMIT;
SELECT m.user_data, m.consumer_name, m.retry_count, q.queue_name
  FROM oncee_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_type = 'exception_queue' ORDER BY 2;
SELECT user_data, expiration FROM oncee_qt WHERE consumer_name IS NULL ORDER BY msgid;
SELECT payload FROM aq.dequeue_array('oncee_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'C'));
SELECT try_sql($$SELECT aq.dequeue('aq$_oncee_qt_e', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$) AS a_has_none;
SELECT payload, (p).state FROM aq.dequeue('aq$_oncee_qt_e', NULL::text, aq.dequeue_options(consumer_name => 'C')) AS d(m, payload, p);
-- A message for nobody (its subscribers removed) expires no more either: nothing looks at it again.
SELECT aq.enqueue('oncee_q', 'e3'::text, aq.message_properties(expiration => '1 s')) > 0 AS enqueued;
SELECT aq.remove_subscriber('oncee_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B', 'C']) s;
DO $$ BEGIN
  WHILE clock_timestamp() <= (SELECT enq_time + interval '1 s' FROM oncee_qt WHERE user_data = 'e3') LOOP
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
SELECT aq.add_subscriber('oncee_q', aq.agent('Z'));  -- a dequeue that commits, after which e3 ...
SELECT aq.enqueue('oncee_q', 'z'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('oncee_q', NULL::text, aq.dequeue_options(consumer_name => 'Z'));
SELECT user_data, expiration FROM oncee_qt WHERE user_data = 'e3';  -- ... expires no more
-- A batch of the move is a batch of messages with all their subscribers (10,000 messages; here 10,002
-- for three): none is cleared with a subscriber left out, whose walk would then take it.
SELECT aq.add_subscriber('oncee_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT cardinality(aq.enqueue_array('oncee_q', array_agg('b' || i),
                                    array_agg(aq.message_properties(expiration => '1 s')))) AS enqueued
  FROM generate_series(1, 10002) i;
SELECT aq.enqueue('oncee_q', 'fresh'::text) > 0 AS enqueued;
DO $$ BEGIN
  WHILE clock_timestamp() <= (SELECT max(enq_time) + interval '1 s' FROM oncee_qt WHERE user_data LIKE 'b%') LOOP
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
SELECT payload FROM aq.dequeue('oncee_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));  -- moves a batch
SELECT consumer_name, count(*) AS copies FROM oncee_qt WHERE consumer_name IS NOT NULL AND user_data LIKE 'b%' GROUP BY 1 ORDER BY 1;
SELECT count(*) FILTER (WHERE expiration IS NULL) AS cleared, count(*) FILTER (WHERE expiration IS NOT NULL) AS expiring
  FROM oncee_qt WHERE consumer_name IS NULL AND user_data LIKE 'b%';
SELECT payload FROM aq.dequeue_array('oncee_q', NULL::text, 100, aq.dequeue_options(consumer_name => 'B'));
SELECT aq.drop_queue_table('oncee_qt', force => true);

-- A batch of the move holds at most 100,000 (message, consumer) rows: of 101 messages for 999
-- listed consumers each, the first 100 are moved (copies for every consumer), the last one later.
SELECT aq.create_queue_table('onceb_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('onceb_q', 'onceb_qt');
SELECT aq.start_queue('onceb_q');
SELECT aq.start_queue('aq$_onceb_qt_e', enqueue => false);
SELECT aq.add_subscriber('onceb_q', aq.agent('A'));
SELECT cardinality(aq.enqueue_array('onceb_q', array_agg('b' || i),
         array_agg(aq.message_properties(expiration => '1 s', recipient_list =>
           (SELECT array_agg(aq.agent('c' || k)) FROM generate_series(1, 999) k))))) AS enqueued
  FROM generate_series(1, 101) i;
SELECT aq.enqueue('onceb_q', 'for A'::text) > 0 AS enqueued;
DO $$ BEGIN
  WHILE clock_timestamp() <= (SELECT max(enq_time) + interval '1.1 s' FROM onceb_qt) LOOP
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
SELECT payload FROM aq.dequeue('onceb_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
SELECT count(*) FILTER (WHERE expiration IS NULL) AS cleared, count(*) FILTER (WHERE expiration IS NOT NULL) AS expiring
  FROM onceb_qt WHERE consumer_name IS NULL AND user_data LIKE 'b%';
SELECT count(*) AS copies FROM onceb_qt WHERE consumer_name IS NOT NULL;
SELECT aq.drop_queue_table('onceb_qt', force => true);

-- A dequeue condition (deq_condition) is evaluated by the walk on each message the consumer would
-- take: its properties and payload by Oracle's names, retry_count the consumer's own count.
CREATE TYPE oncec_t AS (amount int, tag text);
SELECT aq.create_queue_table('oncec_qt', 'oncec_t', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('oncec_q', 'oncec_qt', max_retries => 5);
SELECT aq.start_queue('oncec_q');
SELECT aq.add_subscriber('oncec_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT cardinality(aq.enqueue_array('oncec_q', array_agg(ROW(i * 10, 't' || i)::oncec_t ORDER BY i),
                                    array_agg(aq.message_properties(priority => i % 3) ORDER BY i))) AS enqueued
  FROM generate_series(1, 6) i;
SELECT aq._switch_segment('oncec_qt');  -- the condition is analyzed against every segment
SELECT aq.enqueue('oncec_q', ROW(70, 'u7')::oncec_t) > 0 AS enqueued;
SELECT (payload).amount FROM aq.dequeue_array('oncec_q', NULL::oncec_t, 10,
  aq.dequeue_options(consumer_name => 'A', deq_condition => 'tab.user_data.amount > 30'));
-- B's condition, on a property and a payload field (its own name, without tab).
SELECT (payload).amount FROM aq.dequeue_array('oncec_q', NULL::oncec_t, 10,
  aq.dequeue_options(consumer_name => 'B', deq_condition => 'priority = 0 AND user_data.tag LIKE ''t%'''));
-- What a condition passed stays the consumer's, in order (the floor did not rise past it).
SELECT (payload).amount FROM aq.dequeue_array('oncec_q', NULL::oncec_t, 10,
  aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'browse'));
-- A browse with a condition takes nothing.
SELECT (payload).amount FROM aq.dequeue_array('oncec_q', NULL::oncec_t, 10,
  aq.dequeue_options(consumer_name => 'B', dequeue_mode => 'browse', deq_condition => 'user_data.amount < 30'));
-- retry_count is the consumer's: B's rolled-back dequeue of 10 is an attempt of B's, not of A's.
BEGIN;
SELECT (payload).amount FROM aq.dequeue('oncec_q', NULL::oncec_t,
  aq.dequeue_options(consumer_name => 'B', deq_condition => 'user_data.amount = 10'));
ROLLBACK;
SELECT (payload).amount, (p).attempts FROM aq.dequeue_array('oncec_q', NULL::oncec_t, 10,
  aq.dequeue_options(consumer_name => 'B', deq_condition => 'retry_count = 1')) AS d(m, payload, p);
SELECT try_sql($$SELECT aq.dequeue_array('oncec_q', NULL::oncec_t, 10,
  aq.dequeue_options(consumer_name => 'A', deq_condition => 'retry_count > 0', wait => 0))$$);
-- With a msgid and a condition: that message, if it holds.
SELECT try_sql(format($$SELECT (payload).amount FROM aq.dequeue('oncec_q', NULL::oncec_t,
  aq.dequeue_options(consumer_name => 'A', msgid => %s, deq_condition => 'user_data.amount > 20', wait => 0))$$,
  (SELECT msgid FROM oncec_qt WHERE (user_data).amount = 20)));
SELECT try_sql(format($$SELECT (payload).amount FROM aq.dequeue('oncec_q', NULL::oncec_t,
  aq.dequeue_options(consumer_name => 'A', msgid => %s, deq_condition => 'user_data.amount < 30', wait => 0))$$,
  (SELECT msgid FROM oncec_qt WHERE (user_data).amount = 20)));
-- A condition's errors are the statement's, with their positions: syntax (42601), an unknown
-- field (42703), not boolean (42804), a subquery (22023), a failing function (22012).
SELECT try_sql($$SELECT aq.dequeue('oncec_q', NULL::oncec_t, aq.dequeue_options(consumer_name => 'A', deq_condition => 'priority >', wait => 0))$$);
SELECT try_sql($$SELECT aq.dequeue('oncec_q', NULL::oncec_t, aq.dequeue_options(consumer_name => 'A', deq_condition => 'tab.user_data.nope > 1', wait => 0))$$);
SELECT try_sql($$SELECT aq.dequeue('oncec_q', NULL::oncec_t, aq.dequeue_options(consumer_name => 'A', deq_condition => 'priority + 1', wait => 0))$$);
SELECT try_sql($$SELECT aq.dequeue('oncec_q', NULL::oncec_t, aq.dequeue_options(consumer_name => 'A', deq_condition => 'msgid IN (SELECT 1)', wait => 0))$$);
SELECT try_sql($$SELECT aq.dequeue('oncec_q', NULL::oncec_t, aq.dequeue_options(consumer_name => 'A', deq_condition => '1 / (user_data.amount - 10) > 0', wait => 0))$$);
-- ... and a failed dequeue took nothing.
SELECT (payload).amount FROM aq.dequeue_array('oncec_q', NULL::oncec_t, 10, aq.dequeue_options(consumer_name => 'A'));
SELECT aq.drop_queue_table('oncec_qt', force => true);
DROP TYPE oncec_t;

-- A recipient list: the message is for exactly those consumers, subscribers or not, each once.
SELECT aq.create_queue_table('oncer_qt', 'text', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('oncer_q', 'oncer_qt');
SELECT aq.start_queue('oncer_q');
-- Without any subscriber a listed message has its recipients.
SELECT aq.enqueue('oncer_q', 'to X'::text,
                  aq.message_properties(recipient_list => ARRAY[aq.agent('X'), aq.agent('X')])) > 0 AS enqueued;
SELECT user_data, recipients FROM oncer_qt;
SELECT try_sql($$SELECT aq.enqueue('oncer_q', 'nobody'::text)$$);
SELECT aq.add_subscriber('oncer_q', aq.agent(s)) FROM unnest(ARRAY['A', 'B']) s;
SELECT cardinality(aq.enqueue_array('oncer_q', ARRAY['all', 'to A X', 'to B'],
         ARRAY[aq.message_properties(),
               aq.message_properties(recipient_list => ARRAY[aq.agent('A'), aq.agent('X')]),
               aq.message_properties(recipient_list => ARRAY[aq.agent('B')])])) AS enqueued;
-- The list's errors are the classic table's.
SELECT try_sql($$SELECT aq.enqueue('oncer_q', 'bad'::text,
                   aq.message_properties(recipient_list => ARRAY[aq.agent('A', 'elsewhere')]))$$);
SELECT try_sql($$SELECT aq.enqueue('oncer_q', 'bad'::text,
                   aq.message_properties(recipient_list => ARRAY[aq.agent(NULL)]))$$);
-- Each consumer browses what is for it; Y, named nowhere, nothing.
SELECT c, (SELECT string_agg(payload, ', ') FROM aq.dequeue_array('oncer_q', NULL::text, 10,
             aq.dequeue_options(consumer_name => c, dequeue_mode => 'browse', wait => 0))) AS for_it
  FROM unnest(ARRAY['A', 'B', 'X']) c;
SELECT try_sql($$SELECT aq.dequeue('oncer_q', NULL::text, aq.dequeue_options(consumer_name => 'Y', wait => 0))$$);
SELECT queue, consumer_name, ready FROM aq.queue_health WHERE queue_table = 'oncer_qt' ORDER BY 1, 2;
-- X is no subscriber and takes its two; A takes its two.
SELECT payload FROM aq.dequeue_array('oncer_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'X'));
SELECT payload FROM aq.dequeue_array('oncer_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
-- The segment waits for B alone (T2 over the lists) ...
SELECT aq._switch_segment('oncer_qt');
SELECT aq._rotate_segments('oncer_qt') AS truncated;
-- ... and B, removed, is done with it: what B had not taken is no longer B's, listed or not.
SELECT aq.remove_subscriber('oncer_q', aq.agent('B'));
SELECT aq._rotate_segments('oncer_qt') AS truncated;
SELECT count(*) AS left_in_ring FROM oncer_qt;
-- The removal's receipt covers what the consumer took besides (the runs overlap): A takes one
-- message by msgid, is removed, and gets none of the others.
SELECT cardinality(aq.enqueue_array('oncer_q', ARRAY['r1', 'r2', 'r3'],
         array_fill(aq.message_properties(recipient_list => ARRAY[aq.agent('A'), aq.agent('X')]), ARRAY[3]))) AS enqueued;
SELECT payload FROM aq.dequeue('oncer_q', NULL::text,
  aq.dequeue_options(consumer_name => 'A', msgid => (SELECT msgid FROM oncer_qt WHERE user_data = 'r2')));
SELECT aq.remove_subscriber('oncer_q', aq.agent('A'));
SELECT try_sql($$SELECT aq.dequeue('oncer_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$);
SELECT payload FROM aq.dequeue_array('oncer_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'X'));
SELECT aq.add_subscriber('oncer_q', aq.agent('A'));
-- A removal from one queue takes nothing of another queue of the table.
SELECT aq.create_queue('oncer_q2', 'oncer_qt');
SELECT aq.start_queue('oncer_q2');
SELECT aq.add_subscriber('oncer_q2', aq.agent('A'));
SELECT cardinality(aq.enqueue_array('oncer_q2', ARRAY['q2 a', 'q2 b'])) AS enqueued;
SELECT aq.enqueue('oncer_q', 'q1 c'::text) > 0 AS enqueued;
SELECT aq.remove_subscriber('oncer_q', aq.agent('A'));
SELECT payload FROM aq.dequeue_array('oncer_q2', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
SELECT try_sql($$SELECT aq.dequeue('oncer_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$);
-- The view looks the removal's runs up by range: msgids far beyond the messages cost nothing.
SELECT setval(pg_get_serial_sequence('oncer_qt', 'msgid'), 5000000);
SELECT aq.enqueue('oncer_q2', 'q2 far'::text, aq.message_properties(recipient_list => ARRAY[aq.agent('A')])) > 0 AS enqueued;
SELECT aq.remove_subscriber('oncer_q2', aq.agent('A'));
SET statement_timeout = '20s';
SELECT queue, msg_state, consumer_name, user_data FROM "aq$oncer_qt" WHERE queue = 'oncer_q2' ORDER BY msg_id;
RESET statement_timeout;
SELECT aq.add_subscriber('oncer_q', aq.agent('A'));
-- B subscribes again: it receives what comes now, and a message that names it.
SELECT aq.add_subscriber('oncer_q', aq.agent('B'));
SELECT cardinality(aq.enqueue_array('oncer_q', ARRAY['all 2', 'to B 2'],
         ARRAY[aq.message_properties(), aq.message_properties(recipient_list => ARRAY[aq.agent('B')])])) AS enqueued;
SELECT payload FROM aq.dequeue_array('oncer_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B'));
-- A listed message that expires goes to the exception queue as each listed consumer's copy.
SELECT aq.enqueue('oncer_q', 'to X, expiring'::text,
                  aq.message_properties(recipient_list => ARRAY[aq.agent('X')], expiration => '1 s')) > 0 AS enqueued;
DO $$ BEGIN
  WHILE clock_timestamp() <= (SELECT enq_time + interval '1 s' FROM oncer_qt WHERE user_data = 'to X, expiring') LOOP
    PERFORM pg_sleep(0.01);
  END LOOP;
END $$;
SELECT try_sql($$SELECT aq.dequeue('oncer_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$);
SELECT m.user_data, m.consumer_name, q.queue_name
  FROM oncer_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_type = 'exception_queue';
-- In the view: each listed consumer's row, and X's copy in the exception queue.
SELECT queue, msg_state, consumer_name, user_data FROM "aq$oncer_qt" ORDER BY msg_id, queue, consumer_name;
SELECT aq.drop_queue_table('oncer_qt', force => true);

-- A deq_condition that dequeues for the same consumer is refused (it would take again what the
-- outer dequeue is taking).
SELECT aq.create_queue_table('oncen_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncen_q', 'oncen_qt');
SELECT aq.start_queue('oncen_q');
SELECT aq.add_subscriber('oncen_q', aq.agent('A'));
SELECT cardinality(aq.enqueue_array('oncen_q', ARRAY['n1', 'n2'])) AS enqueued;
CREATE FUNCTION oncen_inner() RETURNS boolean LANGUAGE sql
  AS $$ SELECT aq.dequeue('oncen_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0)) IS NOT NULL $$;
SELECT try_sql($$SELECT aq.dequeue('oncen_q', NULL::text, aq.dequeue_options(consumer_name => 'A', deq_condition => 'oncen_inner()'))$$);
SELECT payload FROM aq.dequeue_array('oncen_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A'));
DROP FUNCTION oncen_inner();
SELECT aq.drop_queue_table('oncen_qt', force => true);

-- Subscriber rules: evaluated at the enqueue, as the owner, on the message's columns (its msgid
-- included); a message gets the list of the subscribers it is for, rules or not.
CREATE TYPE onceu_t AS (amount int, tag text);
SELECT aq.create_queue_table('onceu_qt', 'onceu_t', multiple_consumers => true, segments => 3);
SELECT aq.create_queue('onceu_q', 'onceu_qt');
SELECT aq.start_queue('onceu_q');
SELECT aq.add_subscriber('onceu_q', aq.agent('big'), rule => 'tab.user_data.amount >= 100');
SELECT aq.add_subscriber('onceu_q', aq.agent('urgent'), rule => 'priority < 1 OR corrid LIKE ''u%''');
SELECT aq.add_subscriber('onceu_q', aq.agent('even'), rule => 'msgid % 2 = 0');
-- A rule's errors are add_subscriber's, as for a classic table.
SELECT try_sql($$SELECT aq.add_subscriber('onceu_q', aq.agent('bad'), rule => 'tab.user_data.nope > 1')$$);
SELECT cardinality(aq.enqueue_array('onceu_q',
         ARRAY[ROW(5, 'a'), ROW(150, 'b'), ROW(7, 'c'), ROW(300, 'd')]::onceu_t[],
         ARRAY[aq.message_properties(correlation => 'ua'), aq.message_properties(priority => 0),
               aq.message_properties(correlation => 'u1'), aq.message_properties()])) AS enqueued;
SELECT (user_data).tag, msgid % 2 = 0 AS even, recipients FROM onceu_qt ORDER BY msgid;
-- A message no rule holds for, without a list, is refused (ORA-24033), and nothing is stored.
SELECT try_sql($$SELECT aq.enqueue('onceu_q', ROW(1, 'none')::onceu_t)$$);
SELECT count(*) AS stored FROM onceu_qt WHERE (user_data).tag = 'none';
-- A recipient list overrides the rules.
SELECT aq.enqueue('onceu_q', ROW(1, 'listed')::onceu_t,
                  aq.message_properties(recipient_list => ARRAY[aq.agent('big')])) > 0 AS enqueued;
-- A subscriber without a rule is on every list.
SELECT aq.add_subscriber('onceu_q', aq.agent('all'));
SELECT aq.enqueue('onceu_q', ROW(1, 'plain')::onceu_t) > 0 AS enqueued;
SELECT (user_data).tag, recipients FROM onceu_qt WHERE (user_data).tag IN ('listed', 'plain') ORDER BY msgid;
SELECT c, (SELECT string_agg((payload).tag, ', ') FROM aq.dequeue_array('onceu_q', NULL::onceu_t, 10,
             aq.dequeue_options(consumer_name => c, wait => 0))) AS took
  FROM unnest(ARRAY['all', 'big', 'urgent']) c;
-- A rule runs as the owner with search_path pinned: a function of another schema is named with it
-- (unqualified, alter_subscriber does not find it: 42883).
CREATE FUNCTION public.onceu_check(int) RETURNS boolean LANGUAGE sql AS 'SELECT $1 > 0';
SELECT try_sql($$SELECT aq.alter_subscriber('onceu_q', aq.agent('all'), rule => 'onceu_check(tab.user_data.amount)')$$);
SELECT aq.alter_subscriber('onceu_q', aq.agent('all'), rule => 'public.onceu_check(tab.user_data.amount)');
SELECT aq.enqueue('onceu_q', ROW(2, 'qualified')::onceu_t) > 0 AS enqueued;
SELECT (user_data).tag, recipients FROM onceu_qt WHERE (user_data).tag = 'qualified';
-- The rule's plan is analyzed again after an invalidation (any DDL), from another call depth.
CREATE SCHEMA onceu_s;
DROP SCHEMA onceu_s;
DO $$ BEGIN PERFORM aq.enqueue('onceu_q', ROW(3, 'again')::onceu_t); END $$;
SELECT (user_data).tag, recipients FROM onceu_qt WHERE (user_data).tag = 'again';
-- A rule is evaluated only on the messages without a recipient_list.
SELECT aq.alter_subscriber('onceu_q', aq.agent('big'), rule => '1 / tab.user_data.amount > 0');
SELECT cardinality(aq.enqueue_array('onceu_q', ARRAY[ROW(0, 'zero, listed'), ROW(4, 'four')]::onceu_t[],
         ARRAY[aq.message_properties(recipient_list => ARRAY[aq.agent('urgent')]), aq.message_properties()])) AS enqueued;
SELECT (user_data).tag, recipients FROM onceu_qt WHERE (user_data).tag IN ('zero, listed', 'four') ORDER BY msgid;
SELECT aq.drop_queue_table('onceu_qt', force => true);
DROP FUNCTION public.onceu_check(int);
DROP TYPE onceu_t;

-- Privileges are the queue's (aq.grant_queue_privilege): a role with DEQUEUE takes, browses and
-- reads the view and the health counts (SELECT on the segments and receipts comes with it); a role
-- without it is refused as for any queue (42501).
CREATE ROLE once_deq;
CREATE ROLE once_enq;
SELECT aq.create_queue_table('oncep2_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncep2_q', 'oncep2_qt');
SELECT aq.start_queue('oncep2_q');
SELECT aq.add_subscriber('oncep2_q', aq.agent('A'));
SELECT aq.grant_queue_privilege('enqueue', 'oncep2_q', 'once_enq');
SELECT aq.grant_queue_privilege('dequeue', 'oncep2_q', 'once_deq');
SET ROLE once_enq;
SELECT cardinality(aq.enqueue_array('oncep2_q', ARRAY['p1', 'p2'])) AS enqueued;
SELECT try_sql($$SELECT aq.dequeue('oncep2_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$);
RESET ROLE;
SET ROLE once_deq;
SELECT payload FROM aq.dequeue('oncep2_q', NULL::text, aq.dequeue_options(consumer_name => 'A', dequeue_mode => 'browse', wait => 0));
SELECT payload FROM aq.dequeue('oncep2_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0));
SELECT msg_id, msg_state, consumer_name, user_data FROM "aq$oncep2_qt" ORDER BY msg_id;
SELECT queue, consumer_name, ready FROM aq.queue_health WHERE queue_table = 'oncep2_qt' ORDER BY 1, 2;
RESET ROLE;
SELECT aq.revoke_queue_privilege('dequeue', 'oncep2_q', 'once_deq');
SET ROLE once_deq;
SELECT try_sql($$SELECT count(*) FROM "aq$oncep2_qt"$$);
-- ... and a dequeue by msgid says nothing of whether that message exists.
SELECT try_sql($$SELECT aq.dequeue('oncep2_q', NULL::text, aq.dequeue_options(consumer_name => 'A', msgid => 999999, wait => 0))$$);
SELECT try_sql($$SELECT aq.dequeue('oncep2_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$);
RESET ROLE;
-- A grantor given the grant option on the queue table by hand (not on its segments) grants and
-- revokes DEQUEUE; the segments' SELECT is only the owner's and its grantees' to give.
CREATE ROLE once_gopt;
GRANT SELECT, DELETE, UPDATE (retry_count) ON oncep2_qt TO once_gopt WITH GRANT OPTION;
GRANT EXECUTE ON FUNCTION aq.grant_queue_privilege(text, text, text, boolean), aq.revoke_queue_privilege(text, text, text) TO once_gopt;
SET ROLE once_gopt;
SELECT aq.grant_queue_privilege('dequeue', 'oncep2_q', 'once_deq');
SELECT aq.revoke_queue_privilege('dequeue', 'oncep2_q', 'once_deq');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION aq.grant_queue_privilege(text, text, text, boolean), aq.revoke_queue_privilege(text, text, text) FROM once_gopt;
SELECT aq.drop_queue_table('oncep2_qt', force => true);
DROP ROLE once_deq;
DROP ROLE once_enq;
DROP ROLE once_gopt;

-- A receipts table with an index of its own would miss the receipts a walk inserts: refused (55000).
CREATE INDEX once_extra ON "once_qt$0_r" (at);
SELECT try_sql($$SELECT aq.dequeue('once_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$) AS refused;
DROP INDEX once_extra;

-- The view and aq.queue_health read each receipt's runs once, whatever the number of messages:
-- the rows their plan's nodes produce or filter out (EXPLAIN ANALYZE, over all loops) stay within
-- a few times the rows there are, where looking up each message's runs read every run per message
-- and consumer (4,000 x 400 here; 20,000 messages to 3 subscribers took 77 s through the view).
CREATE FUNCTION once_plan_rows(query text) RETURNS numeric LANGUAGE plpgsql AS $$
DECLARE plan jsonb;
BEGIN
    EXECUTE 'EXPLAIN (ANALYZE, TIMING OFF, SUMMARY OFF, FORMAT JSON) ' || query INTO plan;
    RETURN (SELECT coalesce(sum(((n->>'Actual Rows')::numeric + coalesce((n->>'Rows Removed by Filter')::numeric, 0)
                                 + coalesce((n->>'Rows Removed by Join Filter')::numeric, 0))
                                * (n->>'Actual Loops')::numeric), 0)
              FROM jsonb_path_query(plan, 'lax $.** ? (exists (@."Node Type"))') n);
END $$;
SELECT aq.create_queue_table('oncev_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncev_q', 'oncev_qt');
SELECT aq.start_queue('oncev_q');
SELECT aq.add_subscriber('oncev_q', aq.agent('A'));
SELECT aq.add_subscriber('oncev_q', aq.agent('B'));
SELECT count(*) FROM (SELECT aq.enqueue_array('oncev_q', array_agg('v' || i)) FROM generate_series(1, 2000) i GROUP BY i / 100) x;
DO $$ BEGIN
    FOR k IN 1..190 LOOP
        PERFORM aq.dequeue_array('oncev_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => 0));
        PERFORM aq.dequeue_array('oncev_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B', wait => 0));
    END LOOP;
END $$;
SELECT consumer_name, msg_state, count(*) FROM "aq$oncev_qt" GROUP BY 1, 2 ORDER BY 1, 2;
SELECT once_plan_rows('SELECT * FROM "aq$oncev_qt"') < 200000 AS view_linear;
SELECT queue, consumer_name, ready FROM aq.queue_health WHERE queue_table = 'oncev_qt' ORDER BY 1, 2;
SELECT once_plan_rows(aq._backlog_query(qt)) < 200000 AS health_linear FROM aq.queue_tables qt WHERE queue_table = 'oncev_qt';
-- 200 attempts of A at its first 10 messages ('r' receipts, written here by hand): the view counts
-- them per message through the segment's index, not by reading every attempt for every row.
INSERT INTO "oncev_qt$0_r" (consumer, kind, hi_priority, hi_enq_time, hi_msgid, runs, at)
SELECT 'A', 'r', 1, m.enq_time, m.msgid + 9, ARRAY[m.msgid, m.msgid + 9], now()
  FROM (SELECT min(msgid) AS msgid, min(enq_time) AS enq_time FROM oncev_qt) m, generate_series(1, 200);
SELECT consumer_name, retry_count, count(*) FROM "aq$oncev_qt" WHERE retry_count > 0 GROUP BY 1, 2;
SELECT once_plan_rows('SELECT * FROM "aq$oncev_qt"') < 200000 AS view_attempts_linear;
SELECT aq.drop_queue_table('oncev_qt', force => true);
DROP FUNCTION once_plan_rows(text);

-- The time manager's proof that a segment's messages are all taken (src/queue/ring.cpp,
-- once_settled) looks at each (message, subscriber) once: joining every run to the messages by
-- range looked the subscribers up for each of 2,000 messages and 400 receipts here (67 s for
-- 20,000 messages taken by 3 subscribers in 5,700 receipts, the time manager stalled meanwhile).
SELECT aq.create_queue_table('oncet_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('oncet_q', 'oncet_qt');
SELECT aq.start_queue('oncet_q');
SELECT aq.add_subscriber('oncet_q', aq.agent('A'));
SELECT aq.add_subscriber('oncet_q', aq.agent('B'));
SELECT count(*) FROM (SELECT aq.enqueue_array('oncet_q', array_agg('t' || i)) FROM generate_series(1, 2000) i GROUP BY i / 100) x;
SELECT aq._switch_segment('oncet_qt');
DO $$ BEGIN
    FOR k IN 1..200 LOOP
        PERFORM aq.dequeue_array('oncet_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => 0));
        PERFORM aq.dequeue_array('oncet_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B', wait => 0));
    END LOOP;
END $$;
CREATE FUNCTION oncet_reads() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0) + coalesce(seq_scan, 0) + coalesce(idx_scan, 0))::bigint
    FROM pg_stat_user_tables WHERE relid IN ('"oncet_qt$0"'::regclass, 'aq.subscribers'::regclass) $$;
SELECT pg_stat_force_next_flush();
SELECT oncet_reads() AS reads \gset
SELECT aq._rotate_segments('oncet_qt') AS truncated;
SELECT pg_stat_force_next_flush();
SELECT oncet_reads() - :reads <= 50000 AS proof_linear;
DROP FUNCTION oncet_reads();
SELECT aq.drop_queue_table('oncet_qt', force => true);

-- A ring its owner broke costs its own health counts only: a run no dequeue writes (lo > hi) is
-- ignored by the view and the counts, as by the walks; a receipts table that is not one (here put
-- in the catalog by a superuser) makes that table's counts NULL, and the others' stay.
SELECT aq.create_queue_table('onceh_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('onceh_q', 'onceh_qt');
SELECT aq.start_queue('onceh_q');
SELECT aq.add_subscriber('onceh_q', aq.agent('A'));
SELECT aq.enqueue('onceh_q', 'h1'::text) IS NOT NULL AS enqueued;
INSERT INTO "onceh_qt$0_r" VALUES ('A', 't', 2147483647, 'infinity', 9223372036854775807, '{5,1}', now());
SELECT consumer_name, msg_state FROM "aq$onceh_qt";
SELECT queue, consumer_name, ready FROM aq.queue_health WHERE queue_table = 'onceh_qt' ORDER BY 1, 2;
CREATE TABLE onceh_bad (consumer integer, kind text, runs text);
UPDATE aq.queue_segments SET receipts = 'onceh_bad' WHERE relid = '"onceh_qt$1"'::regclass;
SELECT queue, consumer_name, ready FROM aq.queue_health WHERE queue_table IN ('onceh_qt', 'once_qt') ORDER BY 1, 2;
UPDATE aq.queue_segments SET receipts = '"onceh_qt$1_r"' WHERE relid = '"onceh_qt$1"'::regclass;
DROP TABLE onceh_bad;
SELECT aq.drop_queue_table('onceh_qt', force => true);

-- A role that is no superuser makes such a table in a schema of its own, gives another role
-- DEQUEUE, which dequeues and reads the views, changes its comment and drops it.
CREATE ROLE onceo_owner;
CREATE ROLE onceo_reader;
CREATE SCHEMA onceo AUTHORIZATION onceo_owner;
GRANT EXECUTE ON FUNCTION aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer),
    aq.alter_queue_table(text, text, integer), aq.drop_queue_table(text, boolean),
    aq.create_queue(text, text, integer, interval, interval, text, text), aq.start_queue(text, boolean, boolean),
    aq.add_subscriber(text, aq.agent, text, text, boolean, text), aq.grant_queue_privilege(text, text, text, boolean)
    TO onceo_owner;
SET ROLE onceo_owner;
SELECT aq.create_queue_table('onceo_qt', 'text', queue_table_schema => 'onceo', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('onceo_q', 'onceo_qt');
SELECT aq.start_queue('onceo_q');
SELECT aq.add_subscriber('onceo_q', aq.agent('A'));
SELECT aq.add_subscriber('onceo_q', aq.agent('B'));
SELECT aq.enqueue_array('onceo_q', ARRAY['o1', 'o2', 'o3']) IS NOT NULL AS enqueued;
SELECT aq.grant_queue_privilege('DEQUEUE', 'onceo_q', 'onceo_reader');
GRANT USAGE ON SCHEMA onceo TO onceo_reader;
SELECT aq.alter_queue_table('onceo_qt', comment => 'stored once');
SELECT comment FROM aq.queue_tables WHERE queue_table = 'onceo_qt';
SELECT relname, relowner::regrole FROM pg_class WHERE relnamespace = 'onceo'::regnamespace AND relkind = 'r' ORDER BY relname;
-- Its view and subscriber view, read by the owner.
SELECT consumer_name, count(*) FROM onceo."aq$onceo_qt" GROUP BY 1 ORDER BY 1;
SELECT queue, name FROM onceo."aq$onceo_qt_s" ORDER BY name;
-- A segment registered with receipts for a table that does not store messages once is refused.
SELECT aq.create_queue_table('onceo_single', 'text', queue_table_schema => 'onceo', segments => 2);
SELECT try_sql(format($$INSERT INTO aq.queue_segments (queue_table_id, segment, relid, receipts) VALUES (%s, 5, %L, %L)$$,
               (SELECT queue_table_id FROM aq.queue_tables WHERE queue_table = 'onceo_single'),
               'onceo."onceo_single$0"', 'onceo."onceo_qt$0_r"')) AS receipts_refused;
SELECT aq.drop_queue_table('onceo_single');
-- Nor is a table that has not a receipts table's columns, for its own ring.
CREATE TABLE onceo.bad_r (consumer integer, kind text, runs text);
SELECT try_sql(format($$INSERT INTO aq.queue_segments (queue_table_id, segment, relid, receipts) VALUES (%s, 7, %L, %L)$$,
               (SELECT queue_table_id FROM aq.queue_tables WHERE queue_table = 'onceo_qt'),
               'onceo."onceo_qt$0"', 'onceo.bad_r')) AS bad_shape_refused;
DROP TABLE onceo.bad_r;
SET ROLE onceo_reader;
SELECT (aq.dequeue_array('onceo_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => 0))).payload;
SELECT consumer_name, msg_state, count(*) FROM onceo."aq$onceo_qt" GROUP BY 1, 2 ORDER BY 1, 2;
RESET ROLE;
SET ROLE onceo_owner;
SELECT aq.drop_queue_table('onceo_qt', force => true);
RESET ROLE;
SELECT count(*) AS left_behind FROM pg_class WHERE relnamespace = 'onceo'::regnamespace;
DROP SCHEMA onceo;
DROP OWNED BY onceo_owner;
DROP ROLE onceo_reader;
DROP ROLE onceo_owner;

-- A multi-consumer queue table with a row per recipient does not become a ring (0A000).
SELECT aq.create_queue_table('oncec_classic', 'text', multiple_consumers => true);
SELECT try_sql($$SELECT aq.alter_queue_table('oncec_classic', segments => 4)$$) AS refused;
SELECT aq.drop_queue_table('oncec_classic');

DROP VIEW once_taken;
SELECT aq.drop_queue_table('once_qt', force => true);
SELECT count(*) AS left_behind FROM pg_class WHERE relname LIKE 'once_qt%';
