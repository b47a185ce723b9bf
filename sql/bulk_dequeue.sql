-- The bulk dequeue (src/queue/bulk_dequeue.hpp): a remove-mode dequeue without msgid or
-- correlation deletes on the order index and the heap directly, starting at the queue's
-- scan floor, unless the queue table has triggers, rules, row-level security, altered
-- columns or no order index in the sort order, or the caller lacks table-level SELECT and
-- DELETE or USAGE on the schema: then the SQL statement runs.  Both must deliver the same
-- messages, in the same order, with the same properties.  A queue table with a trigger
-- that does nothing forces the statement, so each "fast" queue below has a "slow" twin.
CREATE FUNCTION bd_deq(queue text, n integer DEFAULT 1000, nav text DEFAULT 'next_message')
RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(payload, ' ' ORDER BY ord)
      FROM aq.dequeue_array(queue, NULL::text, n, aq.dequeue_options(navigation => nav, wait => '0'))
           WITH ORDINALITY AS d(msgid, payload, p, ord)
$$;
CREATE FUNCTION bd_keep_row() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN OLD; END $$;

------------------------------------------------------------------------------ properties: bulk = statement
CREATE TYPE bd_ot AS (id integer, body text);
SELECT aq.create_queue_table('bd_fast_qt', 'bd_ot');
SELECT aq.create_queue_table('bd_slow_qt', 'bd_ot');
CREATE TRIGGER bd_noop BEFORE DELETE ON bd_slow_qt FOR EACH ROW EXECUTE FUNCTION bd_keep_row();
SELECT aq.create_queue(q || '_q', q || '_qt'), aq.start_queue(q || '_q') FROM unnest(ARRAY['bd_fast', 'bd_slow']) q;
-- One message with an attempt: dequeued and rolled back (the next aq call writes the attempt).
SELECT cardinality(aq.enqueue_array(q, ARRAY[ROW(1, 'retried')]::bd_ot[])) FROM unnest(ARRAY['bd_fast_q', 'bd_slow_q']) q;
BEGIN;
SELECT (payload).body FROM aq.dequeue_array('bd_fast_q', NULL::bd_ot, 10, aq.dequeue_options(wait => '0'));
SELECT (payload).body FROM aq.dequeue_array('bd_slow_q', NULL::bd_ot, 10, aq.dequeue_options(wait => '0'));
ROLLBACK;
-- Every property, alone and together; 9 expires before the dequeue, 4, 6 and 10 wait 1 s.
SELECT cardinality(aq.enqueue_array(q,
         ARRAY[ROW(2, 'plain'), ROW(3, 'priority 7'), ROW(4, 'delay'), ROW(5, 'expires in 1 h'),
               ROW(6, 'delay and expiry'), ROW(7, 'correlation'), ROW(8, 'exception queue'),
               ROW(9, 'expired'), ROW(10, 'everything')]::bd_ot[],
         ARRAY[NULL, aq.message_properties(priority => 7), aq.message_properties(delay => '1 s'),
               aq.message_properties(expiration => '1 hour'),
               aq.message_properties(delay => '1 s', expiration => '1 day'),
               aq.message_properties(correlation => 'c-7'), aq.message_properties(exception_queue => 'bd_errors'),
               aq.message_properties(expiration => '1 s'),
               aq.message_properties(priority => -3, delay => '1 s', expiration => '2 hours',
                                     correlation => 'all', exception_queue => 'bd_errors')]))
  FROM unnest(ARRAY['bd_fast_q', 'bd_slow_q']) q;
SELECT cardinality(aq.enqueue_array(q, ARRAY[ROW(11, 'single 1'), ROW(12, 'single 2')]::bd_ot[],
                                    ARRAY[aq.message_properties(priority => 2, correlation => 's'), NULL]))
  FROM unnest(ARRAY['bd_fast_q', 'bd_slow_q']) q;
-- Not yet: the delayed ones wait.
SELECT string_agg((payload).body, ', ') AS before_delay
  FROM aq.dequeue_array('bd_fast_q', NULL::bd_ot, 100, aq.dequeue_options(dequeue_mode => 'browse', wait => '0'));
SELECT pg_sleep(1.2);
CREATE TEMP TABLE bd_enq AS
SELECT 'fast' AS path, msgid, enq_time FROM bd_fast_qt UNION ALL SELECT 'slow', msgid, enq_time FROM bd_slow_qt;
CREATE TEMP TABLE bd_props (path text, ord bigint, id integer, body text, priority integer, delay interval,
                            expiration interval, correlation text, attempts integer, exception_queue text,
                            state text, enqueue_time_is_enq_time boolean);
-- dequeue_array for all but the last two, then single dequeues.
INSERT INTO bd_props
SELECT q.path, d.ord, (d.payload).id, (d.payload).body, (d.p).priority, (d.p).delay, (d.p).expiration,
       (d.p).correlation, (d.p).attempts, (d.p).exception_queue, (d.p).state,
       (d.p).enqueue_time = (SELECT e.enq_time FROM bd_enq e WHERE e.path = q.path AND e.msgid = d.msgid)
  FROM (VALUES ('fast'), ('slow')) q(path),
       aq.dequeue_array('bd_' || q.path || '_q', NULL::bd_ot, 9, aq.dequeue_options(wait => '0'))
         WITH ORDINALITY AS d(msgid, payload, p, ord);
PREPARE bd_single(text, integer) AS
INSERT INTO bd_props
SELECT $1, $2, (d.payload).id, (d.payload).body, (d.p).priority, (d.p).delay, (d.p).expiration,
       (d.p).correlation, (d.p).attempts, (d.p).exception_queue, (d.p).state,
       (d.p).enqueue_time = (SELECT e.enq_time FROM bd_enq e WHERE e.path = $1 AND e.msgid = d.msgid)
  FROM aq.dequeue('bd_' || $1 || '_q', NULL::bd_ot, aq.dequeue_options(wait => '0')) AS d(msgid, payload, p);
EXECUTE bd_single('fast', 10);
EXECUTE bd_single('fast', 11);
EXECUTE bd_single('slow', 10);
EXECUTE bd_single('slow', 11);
DEALLOCATE bd_single;
SELECT ord, id, body, priority, delay, expiration, correlation, attempts, exception_queue, state, enqueue_time_is_enq_time
  FROM bd_props WHERE path = 'fast' ORDER BY ord;
-- Row for row the same through the statement (no row here means none differs).
SELECT coalesce(f.ord, s.ord) AS ord, f.body AS fast, s.body AS slow
  FROM (SELECT * FROM bd_props WHERE path = 'fast') f
  FULL JOIN (SELECT * FROM bd_props WHERE path = 'slow') s ON s.ord = f.ord
 WHERE (f.id, f.body, f.priority, f.delay, f.expiration, f.correlation, f.attempts, f.exception_queue, f.state,
        f.enqueue_time_is_enq_time)
       IS DISTINCT FROM
       (s.id, s.body, s.priority, s.delay, s.expiration, s.correlation, s.attempts, s.exception_queue, s.state,
        s.enqueue_time_is_enq_time);
-- Only the expired message is left (in its queue or already moved to the exception queue).
SELECT (user_data).body, count(*) FROM bd_fast_qt GROUP BY 1 ORDER BY 1;
SELECT (user_data).body, count(*) FROM bd_slow_qt GROUP BY 1 ORDER BY 1;
SELECT try_sql($$SELECT aq.dequeue('bd_fast_q', NULL::bd_ot, aq.dequeue_options(wait => '0'))$$) AS fast_empty,
       try_sql($$SELECT aq.dequeue('bd_slow_q', NULL::bd_ot, aq.dequeue_options(wait => '0'))$$) AS slow_empty;
-- An expired message not yet moved to the exception queue (the sweep runs at most once a
-- second per queue table and session; it last ran at the dequeues above, before this
-- expiration) is skipped by the dequeue itself.
SELECT cardinality(aq.enqueue_array(q, ARRAY[ROW(13, 'expires in 0.3 s'), ROW(14, 'stays')]::bd_ot[],
                                    ARRAY[aq.message_properties(expiration => '0.3 s'), NULL]))
  FROM unnest(ARRAY['bd_fast_q', 'bd_slow_q']) q;
SELECT string_agg((payload).body, ', ') AS browsed
  FROM unnest(ARRAY['bd_fast_q', 'bd_slow_q']) q,
       aq.dequeue_array(q, NULL::bd_ot, 100, aq.dequeue_options(dequeue_mode => 'browse', wait => '0'));
SELECT pg_sleep(0.5);
SELECT string_agg((payload).body, ', ') AS fast_after_expiry
  FROM aq.dequeue_array('bd_fast_q', NULL::bd_ot, 100, aq.dequeue_options(wait => '0'));
SELECT string_agg((payload).body, ', ') AS slow_after_expiry
  FROM aq.dequeue_array('bd_slow_q', NULL::bd_ot, 100, aq.dequeue_options(wait => '0'));
SELECT (user_data).body, count(*) FROM bd_fast_qt GROUP BY 1 ORDER BY 1;
DROP TABLE bd_enq, bd_props;

------------------------------------------------------------------------------ priority order: bulk = statement
SELECT aq.create_queue_table(q || '_qt', 'text', sort_list => 'priority,enq_time') FROM unnest(ARRAY['bd_pfast', 'bd_pslow']) q;
CREATE TRIGGER bd_noop BEFORE DELETE ON bd_pslow_qt FOR EACH ROW EXECUTE FUNCTION bd_keep_row();
SELECT aq.create_queue(q || '_q', q || '_qt'), aq.start_queue(q || '_q') FROM unnest(ARRAY['bd_pfast', 'bd_pslow']) q;
SELECT cardinality(aq.enqueue_array(q, ARRAY['p5', 'p1', 'p3', 'p1-second', 'default', 'minus'],
       ARRAY[aq.message_properties(priority => 5), aq.message_properties(priority => 1),
             aq.message_properties(priority => 3), aq.message_properties(priority => 1),
             NULL, aq.message_properties(priority => -2)])) FROM unnest(ARRAY['bd_pfast_q', 'bd_pslow_q']) q;
SELECT cardinality(aq.enqueue_array(q, ARRAY['later-p0', 'later-p1', 'later-p5'],
       ARRAY[aq.message_properties(priority => 0), aq.message_properties(priority => 1),
             aq.message_properties(priority => 5)])) FROM unnest(ARRAY['bd_pfast_q', 'bd_pslow_q']) q;
-- Two at a time; in a transaction NEXT_MESSAGE continues after its position: a message of
-- higher priority enqueued meanwhile (urgent) comes once nothing is after the position.
BEGIN;
SELECT bd_deq('bd_pfast_q', 2) AS fast_1, bd_deq('bd_pslow_q', 2) AS slow_1;
SELECT bd_deq('bd_pfast_q', 2) AS fast_2, bd_deq('bd_pslow_q', 2) AS slow_2;
SELECT cardinality(aq.enqueue_array(q, ARRAY['urgent'], ARRAY[aq.message_properties(priority => -9)]))
  FROM unnest(ARRAY['bd_pfast_q', 'bd_pslow_q']) q;
SELECT bd_deq('bd_pfast_q', 3) AS fast_3, bd_deq('bd_pslow_q', 3) AS slow_3;
COMMIT;
-- A rolled-back batch comes back first (it has the most urgent of what is left).
BEGIN;
SELECT bd_deq('bd_pfast_q', 2) AS fast_rolled_back, bd_deq('bd_pslow_q', 2) AS slow_rolled_back;
ROLLBACK;
SELECT bd_deq('bd_pfast_q') AS fast_rest, bd_deq('bd_pslow_q') AS slow_rest;
SELECT try_sql($$SELECT bd_deq('bd_pfast_q', 1, 'first_message')$$) AS fast_empty;

------------------------------------------------------------------------------ a DELETE trigger: the statement, once per message
CREATE TABLE bd_trigger_log (seq serial, msgid bigint, body text);
CREATE FUNCTION bd_log_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO bd_trigger_log (msgid, body) VALUES (OLD.msgid, OLD.user_data);
  RETURN OLD;
END $$;
SELECT aq.create_queue_table('bd_trig_qt', 'text');
SELECT aq.create_queue('bd_trig_q', 'bd_trig_qt'), aq.start_queue('bd_trig_q');
CREATE TRIGGER bd_log AFTER DELETE ON bd_trig_qt FOR EACH ROW EXECUTE FUNCTION bd_log_delete();
SELECT cardinality(aq.enqueue_array('bd_trig_q', ARRAY['t1', 't2', 't3', 't4', 't5', 't6']));
SELECT bd_deq('bd_trig_q', 3) AS three;
SELECT payload AS single FROM aq.dequeue('bd_trig_q', NULL::text, aq.dequeue_options(wait => '0'));
BEGIN;
SELECT bd_deq('bd_trig_q', 1) AS rolled_back;
ROLLBACK;
SELECT bd_deq('bd_trig_q') AS rest;
-- Each dequeued message fired the trigger once (the rolled-back one's row went with it).
SELECT string_agg(body, ' ' ORDER BY msgid) AS fired, count(*) AS times, count(DISTINCT msgid) AS messages FROM bd_trigger_log;

------------------------------------------------------------------------------ row-level security: the statement
CREATE ROLE aq_bd_consumer;
SELECT aq.create_queue_table('bd_rls_qt', 'bd_ot');
SELECT aq.create_queue('bd_rls_q', 'bd_rls_qt'), aq.start_queue('bd_rls_q');
SELECT aq.grant_queue_privilege('DEQUEUE', 'bd_rls_q', 'aq_bd_consumer');
ALTER TABLE bd_rls_qt ENABLE ROW LEVEL SECURITY;
CREATE POLICY bd_even ON bd_rls_qt USING ((user_data).id % 2 = 0);
SELECT cardinality(aq.enqueue_array('bd_rls_q', ARRAY(SELECT ROW(i, 'r' || i)::bd_ot FROM generate_series(1, 6) i)));
SET ROLE aq_bd_consumer;
-- Only what the policy lets the role see and delete.
SELECT string_agg((payload).body, ' ' ORDER BY ord) AS consumer_gets
  FROM aq.dequeue_array('bd_rls_q', NULL::bd_ot, 100, aq.dequeue_options(wait => '0')) WITH ORDINALITY AS d(m, payload, p, ord);
SELECT try_sql($$SELECT aq.dequeue('bd_rls_q', NULL::bd_ot, aq.dequeue_options(wait => '0'))$$) AS consumer_again;
RESET ROLE;
-- The owner is not subject to its own policy (not forced).
SELECT string_agg((payload).body, ' ' ORDER BY ord) AS owner_gets
  FROM aq.dequeue_array('bd_rls_q', NULL::bd_ot, 100, aq.dequeue_options(wait => '0')) WITH ORDINALITY AS d(m, payload, p, ord);

------------------------------------------------------------------------------ a role with DEQUEUE only
SELECT aq.create_queue_table('bd_priv_qt', 'text');
SELECT aq.create_queue('bd_priv_q', 'bd_priv_qt'), aq.start_queue('bd_priv_q');
SELECT aq.grant_queue_privilege('DEQUEUE', 'bd_priv_q', 'aq_bd_consumer');
CREATE ROLE aq_bd_nobody;
SELECT cardinality(aq.enqueue_array('bd_priv_q', ARRAY['g1', 'g2', 'g3', 'g4']));
SET ROLE aq_bd_consumer;
SELECT bd_deq('bd_priv_q', 1) AS consumer_1;
BEGIN;
SELECT bd_deq('bd_priv_q', 2) AS consumer_rolled_back;
ROLLBACK;
-- Its attempts are written for it (as the owner) by its next call.
SELECT payload, (message_properties).attempts FROM aq.dequeue_array('bd_priv_q', NULL::text, 100, aq.dequeue_options(wait => '0'));
RESET ROLE;
SELECT count(*) AS left_in_table FROM bd_priv_qt;
-- Without the privilege: 42501, and nothing is removed.
SELECT cardinality(aq.enqueue_array('bd_priv_q', ARRAY['g5']));
SET ROLE aq_bd_nobody;
SELECT try_sql($$SELECT bd_deq('bd_priv_q')$$) AS nobody;
RESET ROLE;
-- DEQUEUE on the table but no USAGE on its schema: 42501 as well.
CREATE SCHEMA bd_private;
SELECT aq.create_queue_table('bd_hidden_qt', 'text', queue_table_schema => 'bd_private');
SELECT aq.create_queue('bd_hidden_q', 'bd_hidden_qt'), aq.start_queue('bd_hidden_q');
SELECT aq.grant_queue_privilege('DEQUEUE', 'bd_hidden_q', 'aq_bd_consumer');
SELECT cardinality(aq.enqueue_array('bd_hidden_q', ARRAY['h1']));
SET ROLE aq_bd_consumer;
SELECT try_sql($$SELECT bd_deq('bd_hidden_q')$$) AS without_usage;
RESET ROLE;
SELECT bd_deq('bd_priv_q') AS owner_gets, bd_deq('bd_hidden_q') AS owner_gets_hidden;

------------------------------------------------------------------------------ no order index in the sort order; added columns
SELECT aq.create_queue_table(q || '_qt', 'text') FROM unnest(ARRAY['bd_desc', 'bd_wide']) q;
SELECT aq.create_queue(q || '_q', q || '_qt'), aq.start_queue(q || '_q') FROM unnest(ARRAY['bd_desc', 'bd_wide']) q;
DROP INDEX bd_desc_qt_q_id_enq_time_msgid_idx;
CREATE INDEX bd_desc_order ON bd_desc_qt (q_id, enq_time DESC, msgid DESC);
ALTER TABLE bd_wide_qt ADD COLUMN note text DEFAULT 'n';
SELECT cardinality(aq.enqueue_array(q, ARRAY['w1', 'w2', 'w3'])) FROM unnest(ARRAY['bd_desc_q', 'bd_wide_q']) q;
SELECT cardinality(aq.enqueue_array(q, ARRAY['w4', 'w5'])) FROM unnest(ARRAY['bd_desc_q', 'bd_wide_q']) q;
SELECT bd_deq('bd_desc_q', 2) AS desc_index_2, bd_deq('bd_wide_q', 2) AS added_column_2;
SELECT bd_deq('bd_desc_q') AS desc_index_rest, bd_deq('bd_wide_q') AS added_column_rest;

------------------------------------------------------------------------------ first_message after messages were consumed
SELECT aq.create_queue_table('bd_nav_qt', 'text');
SELECT aq.create_queue('bd_nav_q', 'bd_nav_qt'), aq.start_queue('bd_nav_q');
SELECT aq.enqueue('bd_nav_q', t) > 0 AS enqueued FROM unnest(ARRAY['f1', 'f2', 'f3', 'f4', 'f5', 'f6']) t;
SELECT bd_deq('bd_nav_q', 2) AS consumed;
SELECT bd_deq('bd_nav_q', 1, 'first_message') AS first_after_consumed;
-- A row written into the table by hand, dated before everything consumed: FIRST_MESSAGE
-- starts at the head and finds it.
INSERT INTO bd_nav_qt (q_id, enq_time, user_data)
SELECT queue_id, now() - interval '1 hour', 'by hand' FROM aq.queues WHERE queue_name = 'bd_nav_q';
BEGIN;
SELECT bd_deq('bd_nav_q', 1, 'first_message') AS first_in_tx;
SELECT bd_deq('bd_nav_q', 1) AS next_in_tx;
SELECT bd_deq('bd_nav_q', 1, 'first_message') AS first_again_in_tx;
COMMIT;
SELECT bd_deq('bd_nav_q') AS rest;
SELECT count(*) AS left_in_table FROM bd_nav_qt;
-- NEXT_MESSAGE finds such a row too: a dequeue scans from the head at most once a second, so a
-- dequeue that waits (no commit wakes it: nothing was enqueued) finds it on its next pass.
DO $$ BEGIN PERFORM bd_deq('bd_nav_q'); EXCEPTION WHEN SQLSTATE 'QA228' THEN RAISE NOTICE 'empty: the floor moves past it all'; END $$;
INSERT INTO bd_nav_qt (q_id, enq_time, user_data)
SELECT queue_id, now() - interval '1 hour', 'by hand, next' FROM aq.queues WHERE queue_name = 'bd_nav_q';
SELECT payload AS next_finds_hand_row
  FROM aq.dequeue_array('bd_nav_q', NULL::text, 10, aq.dequeue_options(wait => '3 s'));
SELECT count(*) AS left_after_next FROM bd_nav_qt;

------------------------------------------------------------------------------ large (TOASTed) payloads
SELECT aq.create_queue_table('bd_big_qt', 'text');
SELECT aq.create_queue('bd_big_q', 'bd_big_qt'), aq.start_queue('bd_big_q');
CREATE TEMP TABLE bd_big_src AS
SELECT 1 AS id, repeat('x', 100000) AS body                                             -- compressed inline
UNION ALL SELECT 2, (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 3000) i)  -- 96 kB, stored out of line
UNION ALL SELECT 3, 'small'
UNION ALL SELECT 4, (SELECT string_agg(md5(i::text), '' ORDER BY i DESC) FROM generate_series(1, 40000) i);  -- 1.28 MB
SELECT cardinality(aq.enqueue_array('bd_big_q', ARRAY(SELECT body FROM bd_big_src ORDER BY id)));
SELECT (user_data = s.body) AS same, octet_length(user_data) AS bytes, pg_column_size(user_data) < 2000 AS small_in_row
  FROM bd_big_qt m JOIN bd_big_src s ON s.body = m.user_data ORDER BY s.id;
SELECT reltoastrelid::regclass AS bd_toast FROM pg_class WHERE oid = 'bd_big_qt'::regclass \gset
SELECT count(DISTINCT chunk_id) AS values_out_of_line FROM :bd_toast;
-- Dequeued in a transaction into a table; compared after the commit.
BEGIN;
CREATE TABLE bd_big_got AS
SELECT d.ord, d.payload FROM aq.dequeue_array('bd_big_q', NULL::text, 3, aq.dequeue_options(wait => '0'))
       WITH ORDINALITY AS d(m, payload, p, ord);
SELECT payload AS single INTO bd_big_single FROM aq.dequeue('bd_big_q', NULL::text, aq.dequeue_options(wait => '0'));
COMMIT;
SELECT g.ord, s.id, octet_length(g.payload) AS bytes, md5(g.payload) = md5(s.body) AS intact
  FROM bd_big_got g JOIN bd_big_src s ON s.id = g.ord ORDER BY g.ord;
SELECT octet_length(single) AS bytes, md5(single) = (SELECT md5(body) FROM bd_big_src WHERE id = 4) AS intact FROM bd_big_single;
SELECT count(*) AS left_in_table FROM bd_big_qt;
-- Read straight from dequeue_array's result, after the rows and their TOAST are deleted.
SELECT cardinality(aq.enqueue_array('bd_big_q', ARRAY(SELECT body FROM bd_big_src WHERE id IN (2, 4) ORDER BY id)));
SELECT octet_length(payload) AS bytes, md5(payload) = md5(s.body) AS intact
  FROM aq.dequeue_array('bd_big_q', NULL::text, 10, aq.dequeue_options(wait => '0')) d
  JOIN bd_big_src s ON s.id IN (2, 4) AND octet_length(s.body) = octet_length(d.payload) ORDER BY 1;
DROP TABLE bd_big_got, bd_big_single, bd_big_src;

------------------------------------------------------------------------------ jsonb and composite payloads
SELECT aq.create_queue_table('bd_json_qt', 'jsonb');
SELECT aq.create_queue('bd_json_q', 'bd_json_qt'), aq.start_queue('bd_json_q');
SELECT cardinality(aq.enqueue_array('bd_json_q', ARRAY['{"id": 1, "tags": ["a", "b"]}', '{"id": 2, "nested": {"x": null}}', '[1, 2.5, "three"]',
       (SELECT jsonb_build_object('id', 4, 'items', jsonb_agg(i)) FROM generate_series(1, 20000) i)]::jsonb[]));
SELECT payload->>'id' AS id, CASE WHEN payload ? 'items' THEN jsonb_array_length(payload->'items')::text ELSE payload::text END AS payload
  FROM aq.dequeue_array('bd_json_q', NULL::jsonb, 10, aq.dequeue_options(wait => '0'));
CREATE TYPE bd_inner AS (x integer, tags text[]);
CREATE TYPE bd_outer AS (id integer, inner_part bd_inner, doc jsonb, at timestamptz);
SELECT aq.create_queue_table('bd_comp_qt', 'bd_outer');
SELECT aq.create_queue('bd_comp_q', 'bd_comp_qt'), aq.start_queue('bd_comp_q');
SELECT cardinality(aq.enqueue_array('bd_comp_q', ARRAY[
       ROW(1, ROW(10, ARRAY['a', NULL, 'c'])::bd_inner, '{"k": "v"}', '2020-01-01 00:00:00+00'),
       ROW(2, NULL, NULL, NULL),
       ROW(3, ROW(NULL, ARRAY[]::text[])::bd_inner, 'null', 'infinity')]::bd_outer[]));
SELECT (payload).id, (payload).inner_part, (payload).inner_part.tags[3] AS third_tag, (payload).doc, (payload).at
  FROM aq.dequeue_array('bd_comp_q', NULL::bd_outer, 10, aq.dequeue_options(wait => '0'));

------------------------------------------------------------------------------ enqueue and dequeue in one transaction; REPEATABLE READ
SELECT aq.create_queue_table('bd_tx_qt', 'text');
SELECT aq.create_queue('bd_tx_q', 'bd_tx_qt'), aq.start_queue('bd_tx_q');
BEGIN;
SELECT cardinality(aq.enqueue_array('bd_tx_q', ARRAY['s1', 's2']));
SELECT bd_deq('bd_tx_q') AS own_enqueue;
SELECT cardinality(aq.enqueue_array('bd_tx_q', ARRAY['s3']));
SELECT bd_deq('bd_tx_q') AS own_enqueue_again;
COMMIT;
BEGIN;
SELECT cardinality(aq.enqueue_array('bd_tx_q', ARRAY['s4']));
SELECT bd_deq('bd_tx_q') AS rolled_back;
ROLLBACK;
SELECT try_sql($$SELECT bd_deq('bd_tx_q')$$) AS nothing_left;
SELECT cardinality(aq.enqueue_array('bd_tx_q', ARRAY['s5', 's6']));
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT bd_deq('bd_tx_q', 1) AS repeatable_read_1;
SELECT bd_deq('bd_tx_q', 1) AS repeatable_read_2;
COMMIT;
SELECT count(*) AS left_in_table FROM bd_tx_qt;

------------------------------------------------------------------------------ purge_queue_table
SELECT aq.create_queue_table('bd_purge_qt', 'text');
SELECT aq.create_queue('bd_purge_q', 'bd_purge_qt'), aq.start_queue('bd_purge_q');
SELECT aq.enqueue('bd_purge_q', t) > 0 AS enqueued FROM unnest(ARRAY['u1', 'u2', 'u3', 'u4']) t;
SELECT bd_deq('bd_purge_q', 1) AS before_purge;
SELECT aq.purge_queue_table('bd_purge_qt') AS purged;
SELECT try_sql($$SELECT bd_deq('bd_purge_q')$$) AS after_purge;
SELECT aq.enqueue('bd_purge_q', 'u5'::text) > 0 AS enqueued;
SELECT bd_deq('bd_purge_q') AS enqueued_after_purge;
-- A purge rolled back: its messages come back, in order (while it was open, this
-- transaction's own dequeue found nothing).
SELECT aq.enqueue('bd_purge_q', t) > 0 AS enqueued FROM unnest(ARRAY['u6', 'u7', 'u8']) t;
BEGIN;
SELECT aq.purge_queue_table('bd_purge_qt') AS purged;
SELECT try_sql($$SELECT bd_deq('bd_purge_q')$$) AS inside_purge;
ROLLBACK;
SELECT bd_deq('bd_purge_q') AS after_rolled_back_purge;

------------------------------------------------------------------------------ 20,000 messages
-- Enqueued 1,000 at a time and dequeued 500 at a time, each round its own transaction, then
-- (after a VACUUM of the dead entries) drained two arrays of 500 per transaction.  Every
-- payload is its rank in enqueue order: delivered once each, in that order.
SELECT aq.create_queue_table('bd_many_qt', 'integer');
SELECT aq.create_queue('bd_many_q', 'bd_many_qt'), aq.start_queue('bd_many_q');
CREATE TABLE bd_many_got (seq bigserial PRIMARY KEY, msgid bigint NOT NULL, n integer NOT NULL);
CREATE PROCEDURE bd_take(batches integer) LANGUAGE plpgsql AS $$
BEGIN
  FOR b IN 1 .. batches LOOP
    INSERT INTO bd_many_got (msgid, n)
    SELECT msgid, payload FROM aq.dequeue_array('bd_many_q', NULL::integer, 500, aq.dequeue_options(wait => '0'))
           WITH ORDINALITY AS d(msgid, payload, p, ord) ORDER BY ord;
  END LOOP;
END $$;
DO $$
BEGIN
  FOR r IN 0 .. 19 LOOP
    PERFORM aq.enqueue_array('bd_many_q', ARRAY(SELECT g FROM generate_series(r * 1000 + 1, r * 1000 + 1000) g));
    CALL bd_take(1);
    COMMIT;
  END LOOP;
END $$;
SELECT count(*) AS delivered, (SELECT count(*) FROM bd_many_qt) AS left_in_table FROM bd_many_got;
VACUUM bd_many_qt;
DO $$
BEGIN
  FOR r IN 1 .. 10 LOOP
    CALL bd_take(2);
    COMMIT;
  END LOOP;
END $$;
SELECT try_sql($$CALL bd_take(1)$$) AS drained;
SELECT count(*) AS delivered, count(DISTINCT n) AS distinct_payloads, min(n), max(n),
       count(*) FILTER (WHERE n <> rank) AS out_of_order,
       count(*) FILTER (WHERE msgid <= previous_msgid) AS msgid_not_increasing,
       (SELECT count(*) FROM bd_many_qt) AS left_in_table
  FROM (SELECT n, msgid, row_number() OVER (ORDER BY seq) AS rank, lag(msgid) OVER (ORDER BY seq) AS previous_msgid
          FROM bd_many_got) s;
SELECT count(*) AS missing FROM generate_series(1, 20000) g WHERE NOT EXISTS (SELECT FROM bd_many_got WHERE n = g);
DROP PROCEDURE bd_take(integer);
DROP TABLE bd_many_got;

------------------------------------------------------------------------------ cleanup
SELECT aq.drop_queue_table(t, force => true)
  FROM unnest(ARRAY['bd_fast_qt', 'bd_slow_qt', 'bd_pfast_qt', 'bd_pslow_qt', 'bd_trig_qt', 'bd_rls_qt', 'bd_priv_qt',
                    'bd_hidden_qt', 'bd_desc_qt', 'bd_wide_qt', 'bd_nav_qt', 'bd_big_qt', 'bd_json_qt', 'bd_comp_qt',
                    'bd_tx_qt', 'bd_purge_qt', 'bd_many_qt']) t;
DROP SCHEMA bd_private;
DROP ROLE aq_bd_consumer;
DROP ROLE aq_bd_nobody;
DROP TABLE bd_trigger_log;
DROP FUNCTION bd_log_delete();
------------------------------------------------------------------------------ the lookup cache across catalog rewrites
-- Each backend caches its queue lookups while their aq.queues / aq.queue_tables row versions
-- stay current.  A VACUUM that truncates aq.queues leaves a cached TID past the table's end,
-- and VACUUM FULL moves rows to new TIDs keeping their xmin: neither may break or fool it.
SELECT aq.create_queue_table('bd_cache_qt', 'text');
SELECT count(aq.create_queue('bd_cache_' || i, 'bd_cache_qt')) AS created FROM generate_series(1, 200) i;
SELECT count(aq.start_queue('bd_cache_' || i)) AS started FROM generate_series(1, 200) i;
SELECT (ctid::text::point)[0]::int AS cached_block FROM aq.queues WHERE queue_name = 'bd_cache_200' \gset
SELECT :cached_block > 0 AS beyond_first_page;
SELECT cardinality(aq.enqueue_array('bd_cache_200', ARRAY['cached'])) AS enqueued;
SELECT bd_deq('bd_cache_200') AS dequeued;
SELECT count(aq.stop_queue('bd_cache_' || i)) AS stopped FROM generate_series(1, 200) i;
SELECT count(aq.drop_queue('bd_cache_' || i)) AS dropped FROM generate_series(1, 200) i;
VACUUM aq.queues;
SELECT :cached_block >= pg_relation_size('aq.queues') / 8192 AS cached_tid_past_end;
SELECT aq.create_queue('bd_cache_200', 'bd_cache_qt'), aq.start_queue('bd_cache_200');
SELECT cardinality(aq.enqueue_array('bd_cache_200', ARRAY['after truncation'])) AS enqueued;
SELECT bd_deq('bd_cache_200') AS dequeued;
-- Three queues made in one transaction share an xmin; after b is dropped, VACUUM FULL may put
-- c where b was.
BEGIN;
SELECT aq.create_queue(q, 'bd_cache_qt'), aq.start_queue(q) FROM unnest(ARRAY['bd_vf_a', 'bd_vf_b', 'bd_vf_c']) q;
COMMIT;
SELECT cardinality(aq.enqueue_array('bd_vf_b', ARRAY['to b'])) AS enqueued;
SELECT bd_deq('bd_vf_b') AS dequeued;
SELECT aq.stop_queue('bd_vf_b'), aq.drop_queue('bd_vf_b');
VACUUM FULL aq.queues;
SELECT try_sql($$SELECT aq.enqueue_array('bd_vf_b', ARRAY['to a dropped queue'])$$) AS dropped_queue;
SELECT cardinality(aq.enqueue_array('bd_vf_c', ARRAY['to c'])) AS enqueued;
SELECT bd_deq('bd_vf_c') AS dequeued_c;
SELECT aq.drop_queue_table('bd_cache_qt', force => true);

DROP FUNCTION bd_keep_row();
DROP FUNCTION bd_deq(text, integer, text);
DROP TYPE bd_outer;
DROP TYPE bd_inner;
DROP TYPE bd_ot;
