-- Queues II: message properties, sort orders and dequeue options.
CREATE FUNCTION deq(queue text, options aq.dequeue_options DEFAULT aq.dequeue_options(wait => '0'))
RETURNS text LANGUAGE sql AS $$ SELECT payload FROM aq.dequeue(queue, NULL::text, options) $$;
CREATE FUNCTION deq_all(queue text, options aq.dequeue_options DEFAULT aq.dequeue_options(wait => '0'))
RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(payload, ' ' ORDER BY n) FROM aq.dequeue_array(queue, NULL::text, 1000, options) WITH ORDINALITY AS d(msgid, payload, props, n)
$$;

------------------------------------------------------------------------------ sort orders
SELECT aq.create_queue_table('prio_qt', 'text', sort_list => 'Priority, Enq_Time');
SELECT sort_list FROM aq.queue_tables WHERE queue_table = 'prio_qt';
SELECT indexdef FROM pg_indexes WHERE tablename = 'prio_qt' AND indexdef LIKE '%priority%';
SELECT aq.create_queue('prio_q', 'prio_qt');
SELECT aq.start_queue('prio_q');
SELECT aq.create_queue_table('fifo_qt', 'text');
SELECT aq.create_queue('fifo_q', 'fifo_qt');
SELECT aq.start_queue('fifo_q');

-- Lower priority numbers first, then first in (as Oracle); negative priorities are allowed.
SELECT cardinality(aq.enqueue_array(q, ARRAY['p5', 'p1', 'p3', 'p1-second', 'default', 'minus'],
       ARRAY[aq.message_properties(priority => 5), aq.message_properties(priority => 1),
             aq.message_properties(priority => 3), aq.message_properties(priority => 1),
             NULL, aq.message_properties(priority => -2)])) AS enqueued
  FROM unnest(ARRAY['prio_q', 'fifo_q']) q;
SELECT deq_all('prio_q') AS priority_order, deq_all('fifo_q') AS enq_time_order;

-- A single enqueue with properties; priority comes back on dequeue.
SELECT aq.enqueue('prio_q', 'later'::text, aq.message_properties(priority => 9)) > 0 AS enqueued;
SELECT aq.enqueue('prio_q', 'urgent'::text, aq.message_properties(priority => 0)) > 0 AS enqueued;
SELECT payload, (message_properties).priority FROM aq.dequeue_array('prio_q', NULL::text, 10, aq.dequeue_options(wait => '0'));

------------------------------------------------------------------------------ properties reported back
SELECT aq.enqueue('fifo_q', 'props'::text,
       aq.message_properties(priority => 4, delay => NULL, expiration => '1 day', correlation => 'ord-7',
                             exception_queue => 'aq$_fifo_qt_e')) > 0 AS enqueued;
SELECT payload, (p).priority, (p).delay, (p).expiration, (p).correlation, (p).attempts, (p).exception_queue,
       (p).enqueue_time BETWEEN now() - interval '1 minute' AND clock_timestamp() AS enqueue_time_now, (p).state
  FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(msgid, payload, p);

------------------------------------------------------------------------------ browse
SELECT aq.enqueue_array('fifo_q', ARRAY['b1', 'b2', 'b3']) IS NOT NULL AS enqueued;
-- Browse reads without removing; NEXT_MESSAGE walks on across calls and transactions of the
-- session, FIRST_MESSAGE starts again from the head; past the end: no message (QA228).
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', wait => '0')) AS browse_1;
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', wait => '0')) AS browse_2;
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', wait => '0')) AS browse_3;
SELECT try_sql($$SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', wait => '0'))$$) AS browse_4;
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', navigation => 'first_message', wait => '0')) AS browse_first;
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', wait => '0')) AS browse_next;
SELECT deq_all('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', navigation => 'first_message', wait => '0')) AS browse_array;
SELECT count(*) AS still_queued FROM fifo_qt;
-- Browse by msgid (by correlation: below).
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', wait => '0',
                                        msgid => (SELECT max(msgid) FROM fifo_qt))) AS browse_by_msgid;

------------------------------------------------------------------------------ locked, then removed by msgid
BEGIN;
SELECT msgid AS locked_msgid, payload AS locked FROM aq.dequeue('fifo_q', NULL::text,
       aq.dequeue_options(dequeue_mode => 'locked', wait => '0')) \gset
SELECT :'locked' AS locked_first;
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'locked', wait => '0')) AS locked_next;
-- The locked rows are still in the table, locked by this transaction.
SELECT count(*) AS rows_in_table FROM fifo_qt;
SELECT deq('fifo_q', aq.dequeue_options(msgid => :locked_msgid, wait => '0')) AS removed_by_msgid;
COMMIT;
-- b1 was removed; b2 was only locked, so it is back; b3 was never touched.
SELECT deq_all('fifo_q', aq.dequeue_options(dequeue_mode => 'browse', navigation => 'first_message', wait => '0')) AS left_after_commit;
-- A locked message whose transaction rolls back is not removed.
BEGIN;
SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'locked', wait => '0')) AS locked_then_rolled_back;
ROLLBACK;
SELECT deq_all('fifo_q') AS removed_all;

------------------------------------------------------------------------------ navigation and msgid
SELECT aq.enqueue_array('fifo_q', ARRAY['n1', 'n2', 'n3', 'n4']) IS NOT NULL AS enqueued;
BEGIN;
SELECT deq('fifo_q') AS next_1, deq('fifo_q') AS next_2;
-- FIRST_MESSAGE from the head (n1 and n2 are already removed by this transaction); a
-- rolled-back savepoint returns its messages, which the next NEXT_MESSAGE finds again.
SAVEPOINT s;
SELECT deq('fifo_q', aq.dequeue_options(navigation => 'first_message', wait => '0')) AS first_in_savepoint;
ROLLBACK TO SAVEPOINT s;
SELECT deq('fifo_q') AS next_after_rollback;
COMMIT;
-- Dequeue by msgid: the message with that id only (there is none left with the old id).
SELECT try_sql(format('SELECT deq(%L, aq.dequeue_options(msgid => %s, wait => %L))', 'fifo_q',
               (SELECT min(msgid) - 1 FROM fifo_qt), '0')) AS missing_msgid;
SELECT deq('fifo_q', aq.dequeue_options(msgid => (SELECT max(msgid) FROM fifo_qt), wait => '0')) AS by_msgid;
SELECT count(*) AS messages_left FROM fifo_qt;

------------------------------------------------------------------------------ correlation
SELECT aq.enqueue_array('prio_q', ARRAY['o-1', 'inv-1', 'o-22', 'o_x', 'none'],
       ARRAY[aq.message_properties(correlation => 'order-1'), aq.message_properties(correlation => 'invoice-1'),
             aq.message_properties(priority => 0, correlation => 'order-22'),
             aq.message_properties(correlation => 'order_x'), aq.message_properties()]) IS NOT NULL AS enqueued;
-- Oracle's patterns: _ one character, % any; exact values; the priority order holds within a match.
SELECT deq_all('prio_q', aq.dequeue_options(correlation => 'order-_', wait => '0', dequeue_mode => 'browse', navigation => 'first_message')) AS one_char;
SELECT deq_all('prio_q', aq.dequeue_options(correlation => 'order%', wait => '0', dequeue_mode => 'browse', navigation => 'first_message')) AS prefix;
SELECT deq_all('prio_q', aq.dequeue_options(correlation => 'order\_x', wait => '0', dequeue_mode => 'browse', navigation => 'first_message')) AS escaped;
-- (an exact value takes a generic plan on the correlation index; a pattern, a plan made for
-- it, in which a constant prefix, multibyte or not, is an index range)
SELECT aq.enqueue('prio_q', 'café'::text, aq.message_properties(correlation => 'café-1')) > 0 AS enqueued;
SELECT deq('prio_q', aq.dequeue_options(correlation => 'café%', wait => '0')) AS multibyte_prefix;
SELECT deq_all('prio_q', aq.dequeue_options(correlation => 'order-2%', wait => '0', dequeue_mode => 'browse', navigation => 'first_message')) AS prefix_2;
SELECT deq('prio_q', aq.dequeue_options(correlation => 'invoice-1', wait => '0')) AS exact;
SELECT try_sql($$SELECT deq('prio_q', aq.dequeue_options(correlation => 'invoice-1', wait => '0'))$$) AS exact_again;
SELECT deq_all('prio_q', aq.dequeue_options(correlation => '%', wait => '0')) AS any_correlation;
SELECT deq_all('prio_q') AS without_correlation;

------------------------------------------------------------------------------ delay
SELECT aq.enqueue('fifo_q', 'delayed'::text, aq.message_properties(delay => '0.5 s')) > 0 AS enqueued;
SELECT try_sql($$SELECT deq('fifo_q')$$) AS before_delay;
SELECT msg_state FROM "aq$fifo_qt";
-- A waiting dequeue wakes when the message becomes visible, with no commit to wake it.
SELECT clock_timestamp() AS started \gset
SELECT deq('fifo_q', aq.dequeue_options(wait => '30 s')) AS after_delay,
       clock_timestamp() - :'started'::timestamptz < interval '10 s' AS woke_before_wait_ended;
-- The dequeued delay is reported as the interval it was.
SELECT aq.enqueue('fifo_q', 'd2'::text, aq.message_properties(delay => '0.1 s')) > 0 AS enqueued;
SELECT (p).delay FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(wait => '10 s')) AS d(m, payload, p);

------------------------------------------------------------------------------ expiration and exception queues
SELECT aq.create_queue('fifo_errors', 'fifo_qt', queue_type => 'exception_queue');
SELECT aq.start_queue('fifo_errors', enqueue => false);
SELECT aq.start_queue('aq$_fifo_qt_e', enqueue => false);
SELECT aq.enqueue_array('fifo_q', ARRAY['expires', 'expires-to-named', 'expires-to-unknown', 'keeps'],
       ARRAY[aq.message_properties(expiration => '0.1 s'),
             aq.message_properties(expiration => '0.1 s', exception_queue => 'fifo_errors'),
             aq.message_properties(expiration => '0.1 s', exception_queue => 'no such queue'),
             aq.message_properties(expiration => '1 hour')]) IS NOT NULL AS enqueued;
-- A second passes for the short-lived ones (moved into the past rather than waited for).
UPDATE fifo_qt SET enq_time = enq_time - interval '1 s', expiration = expiration - interval '1 s'
 WHERE expiration < now() + interval '1 minute';
-- Never delivered once expired.
SELECT deq_all('fifo_q') AS delivered;
SELECT msg_state, user_data FROM "aq$fifo_qt" ORDER BY msg_id;
-- They move to their exception queues when those are read (and, at most once a second per
-- queue table and session, when a normal queue is).
SELECT payload, (p).state, (p).expiration, (p).exception_queue
  FROM aq.dequeue_array('aq$_fifo_qt_e', NULL::text, 10, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
SELECT payload, (p).state FROM aq.dequeue_array('fifo_errors', NULL::text, 10, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
SELECT msg_state, queue, user_data FROM "aq$fifo_qt" ORDER BY msg_id;
-- Exception queues take no enqueue.
SELECT try_sql($$SELECT aq.enqueue('fifo_errors', 'x'::text)$$);
SELECT enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'fifo_errors';

------------------------------------------------------------------------------ attempts, max_retries, retry_delay
-- A rolled-back dequeue is an attempt (as Oracle counts them); past max_retries the message
-- goes to its exception queue.  The count is written by the session's next aq call.
SELECT aq.create_queue('retry_q', 'fifo_qt', max_retries => 2);
SELECT aq.start_queue('retry_q');
SELECT aq.enqueue('retry_q', 'poison'::text) > 0 AS enqueued;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('retry_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
ROLLBACK;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('retry_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
SAVEPOINT inner_try;
SELECT aq.enqueue('retry_q', 'unrelated'::text) > 0 AS enqueued;
ROLLBACK TO SAVEPOINT inner_try;
ROLLBACK;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('retry_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
ROLLBACK;
-- The third rollback passed max_retries: the message is in the exception queue.
SELECT try_sql($$SELECT deq('retry_q')$$) AS after_max_retries;
SELECT payload, (p).attempts, (p).state FROM aq.dequeue('aq$_fifo_qt_e', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
-- A rollback to a savepoint counts; a locked message removed by msgid is one attempt.
SELECT aq.alter_queue('retry_q', retry_delay => '0.3 s');
SELECT aq.enqueue('retry_q', 'twice'::text) > 0 AS enqueued;
BEGIN;
SAVEPOINT a;
SELECT msgid AS twice_id FROM aq.dequeue('retry_q', NULL::text, aq.dequeue_options(dequeue_mode => 'locked', wait => '0')) \gset
SELECT deq('retry_q', aq.dequeue_options(msgid => :twice_id, wait => '0')) AS removed;
ROLLBACK TO SAVEPOINT a;
COMMIT;
-- retry_delay: the message comes back only after it.
SELECT try_sql($$SELECT deq('retry_q')$$) AS during_retry_delay;
SELECT payload, (p).attempts FROM aq.dequeue('retry_q', NULL::text, aq.dequeue_options(wait => '10 s')) AS d(m, payload, p);

------------------------------------------------------------------------------ remove_nodata
-- Removes without returning the payload (Oracle's REMOVE_NODATA): typically a message browsed
-- or locked before, removed by msgid.  The properties come back.
SELECT cardinality(aq.enqueue_array('fifo_q', ARRAY['nodata-1', 'nodata-2', 'nodata-3', 'nodata-4'],
       ARRAY[aq.message_properties(priority => 7), NULL, NULL, NULL])) AS enqueued;
CREATE TEMP TABLE browsed AS
SELECT msgid, payload FROM aq.dequeue('fifo_q', NULL::text,
       aq.dequeue_options(dequeue_mode => 'browse', navigation => 'first_message', wait => '0'));
SELECT payload AS browsed FROM browsed;
SELECT d.msgid = b.msgid AS same_message, d.payload IS NULL AS no_payload, (d.p).priority
  FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(dequeue_mode => 'remove_nodata', msgid => (SELECT msgid FROM browsed),
                                                           wait => '0')) AS d(msgid, payload, p), browsed b;
-- The array form (the bulk path), and the single form without msgid.
SELECT count(*) AS removed, count(payload) AS payloads
  FROM aq.dequeue_array('fifo_q', NULL::text, 2, aq.dequeue_options(dequeue_mode => 'REMOVE_NODATA', wait => '0'));
SELECT payload IS NULL AS no_payload FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(dequeue_mode => 'remove_nodata', wait => '0'));
SELECT count(*) AS left_in_fifo_qt FROM fifo_qt WHERE user_data LIKE 'nodata-%';
DROP TABLE browsed;

------------------------------------------------------------------------------ waits in Oracle's forms
-- aq.wait_time: 'forever' (or NULL), 'no_wait' (or 0), a number of seconds (-1 is
-- DBMS_AQ.FOREVER), or an interval; integers, numerics and intervals convert implicitly.
SELECT 'forever'::aq.wait_time AS forever, 'DBMS_AQ.FOREVER'::aq.wait_time AS qualified, '-1'::aq.wait_time AS minus_one,
       'no_wait'::aq.wait_time AS no_wait, '5'::aq.wait_time AS five, '2.5 s'::aq.wait_time AS interval_text,
       '00:01:00'::aq.wait_time AS minute, 0.25::aq.wait_time AS numeric, 3::aq.wait_time AS integer,
       interval '1 day'::aq.wait_time AS a_day, 1e12::aq.wait_time AS beyond_years,
       2::smallint::aq.wait_time AS smallint, 4::bigint::aq.wait_time AS bigint, 0.5::float8::aq.wait_time AS float8;
-- A driver's typed parameter of any integer type, one implicit step.
PREPARE wait_param(bigint) AS SELECT (aq.dequeue_options(wait => $1)).wait;
EXECUTE wait_param(-1);
EXECUTE wait_param(9);
DEALLOCATE wait_param;
-- The constructor takes every form; the options keep an interval (NULL = forever).
SELECT (aq.dequeue_options(wait => 5)).wait AS five, (aq.dequeue_options(wait => -1)).wait IS NULL AS minus_one_forever,
       (aq.dequeue_options(wait => 'forever')).wait IS NULL AS forever, (aq.dequeue_options(wait => 'no_wait')).wait AS no_wait,
       (aq.dequeue_options(wait => 1.5)).wait AS numeric, (aq.dequeue_options(wait => interval '2 min')).wait AS an_interval,
       (aq.dequeue_options(wait => '3 s')).wait AS text_interval, (aq.dequeue_options()).wait IS NULL AS default_forever;
SELECT aq.enqueue('fifo_q', 'waited'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(wait => 'no_wait'));
SELECT try_sql($$SELECT deq('fifo_q', aq.dequeue_options(wait => 0))$$) AS zero_waits_not;
-- Oracle's constants as Oracle code names them, DBMS_AQ.<name>, for every enumerated option.
SELECT aq.enqueue('fifo_q', 'constants'::text, enqueue_options => aq.enqueue_options(visibility => 'DBMS_AQ.ON_COMMIT',
       delivery_mode => 'dbms_aq.persistent')) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(dequeue_mode => 'DBMS_AQ.BROWSE',
       navigation => 'DBMS_AQ.FIRST_MESSAGE', visibility => 'DBMS_AQ.ON_COMMIT', wait => 'DBMS_AQ.NO_WAIT'));
SELECT payload FROM aq.dequeue('fifo_q', NULL::text, aq.dequeue_options(dequeue_mode => 'dbms_aq.remove', wait => 'dbms_aq.no_wait'));
SELECT try_sql($$SELECT deq('fifo_q', aq.dequeue_options(dequeue_mode => 'DBMS_AQ.DESTROY', wait => '0'))$$) AS unknown_constant;
-- Any role may use the type (its input and output, its casts).
CREATE ROLE regress_wait_user;
SET ROLE regress_wait_user;
SELECT ('2.5'::aq.wait_time)::text AS as_text, 7::aq.wait_time AS cast, (aq.dequeue_options(wait => 'forever')).wait IS NULL AS forever;
RESET ROLE;
DROP ROLE regress_wait_user;
-- Wrong ones.
SELECT try_sql($$SELECT aq.dequeue_options(wait => 'soon')$$) AS not_a_wait;
SELECT try_sql($$SELECT aq.dequeue_options(wait => -2)$$) AS minus_two;
SELECT try_sql($$SELECT aq.dequeue_options(wait => '-0.5')$$) AS minus_half;
SELECT try_sql($$SELECT aq.dequeue_options(wait => interval '-1 s')$$) AS negative_interval;
SELECT try_sql($$SELECT 'NaN'::float8::aq.wait_time$$) AS nan;

------------------------------------------------------------------------------ bad options
SELECT try_sql($$SELECT aq.enqueue_array('fifo_q', ARRAY['a', 'b'], ARRAY[aq.message_properties()])$$);
SELECT try_sql($$SELECT deq('fifo_q', aq.dequeue_options(navigation => 'next_transaction', wait => '0'))$$);
SELECT try_sql($$SELECT aq.create_queue('q_bad_type', 'fifo_qt', queue_type => 'persistent')$$);

SELECT aq.drop_queue_table(t, force => true) FROM unnest(ARRAY['prio_qt', 'fifo_qt']) t;
DROP FUNCTION deq(text, aq.dequeue_options);
DROP FUNCTION deq_all(text, aq.dequeue_options);
