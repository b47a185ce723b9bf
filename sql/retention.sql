-- Retention (src/queue/retention.hpp): a queue with a retention_time keeps what its dequeues
-- remove, as PROCESSED in aq$<queue_table>, until the time has passed; no dequeue ever sees it.
\set VERBOSITY terse
SELECT aq.create_queue_table('ret_qt', 'text');
SELECT aq.create_queue('ret_q', 'ret_qt', retention_time => '1 hour');
SELECT aq.create_queue('ret_none', 'ret_qt');
SELECT aq.start_queue('ret_q');
SELECT aq.start_queue('ret_none');
SELECT count(*) AS enqueued FROM (SELECT aq.enqueue('ret_q', 'm' || g, aq.message_properties(correlation => 'c' || g)) FROM generate_series(1, 50) g) e;
SELECT count(*) AS enqueued FROM (SELECT aq.enqueue('ret_none', 'n' || g) FROM generate_series(1, 3) g) e;

-- 1: every remove path keeps a copy: a single dequeue, and in one transaction several single
-- dequeues and a batch of 40 (the walk), a correlation (the statement) and remove_nodata.
SELECT payload FROM aq.dequeue('ret_q', NULL::text);
BEGIN;
SELECT payload FROM aq.dequeue('ret_q', NULL::text);
SELECT payload FROM aq.dequeue('ret_q', NULL::text);
SELECT count(*) AS batch FROM aq.dequeue_array('ret_q', NULL::text, 40);
SELECT payload FROM aq.dequeue('ret_q', NULL::text, aq.dequeue_options(correlation => 'c45'));
SELECT msgid IS NOT NULL AS removed FROM aq.dequeue('ret_q', NULL::text, aq.dequeue_options(dequeue_mode => 'remove_nodata'));
COMMIT;
SELECT queue, msg_state, count(*), count(deq_timestamp) AS with_deq_time, count(delay) AS with_delay,
       count(expiration) AS with_expiration
  FROM aq$ret_qt GROUP BY 1, 2 ORDER BY 1, 2;
-- The copy is the message: same msgid, payload, correlation, enqueue time.
SELECT v.corr_id, v.user_data FROM aq$ret_qt v WHERE v.msg_state = 'PROCESSED' AND v.corr_id IN ('c1', 'c45') ORDER BY 1;
SELECT count(*) AS duplicated_msgids FROM (SELECT msg_id FROM aq$ret_qt GROUP BY msg_id HAVING count(*) > 1) d;
-- Its retention ends retention_time after the dequeue.
SELECT DISTINCT expiration - delay AS retained_for FROM ret_qt WHERE q_id < 0;

-- A rolled-back dequeue keeps no copy; the message is back.
BEGIN;
SELECT payload FROM aq.dequeue('ret_q', NULL::text);
ROLLBACK;
SELECT count(*) FILTER (WHERE msg_state = 'PROCESSED') AS processed, count(*) FILTER (WHERE msg_state = 'READY') AS ready
  FROM aq$ret_qt WHERE queue = 'ret_q';

-- 2: no dequeue path sees a copy: browse, by msgid, and a dequeue of everything left.
SELECT count(*) AS browsed FROM aq.dequeue_array('ret_q', NULL::text, 100, aq.dequeue_options(dequeue_mode => 'browse'));
SELECT try_sql($$SELECT aq.dequeue('ret_q', NULL::text,
    aq.dequeue_options(msgid => (SELECT min(msg_id) FROM aq$ret_qt WHERE msg_state = 'PROCESSED'), wait => 0))$$);
SELECT count(*) AS rest FROM aq.dequeue_array('ret_q', NULL::text, 100, aq.dequeue_options(wait => 0));
SELECT payload FROM aq.dequeue('ret_q', NULL::text, aq.dequeue_options(wait => 0));
SELECT ready, waiting, expired FROM aq.queue_health WHERE queue = 'ret_q';
-- A queue without retention keeps nothing.
SELECT count(*) AS taken FROM aq.dequeue_array('ret_none', NULL::text, 10);
SELECT count(*) AS kept FROM aq$ret_qt WHERE queue = 'ret_none';

-- aq.purge_queue_table takes PROCESSED, alone or with the queue's name.
SELECT aq.purge_queue_table('ret_qt', aq.purge_condition(queue_name => 'ret_none', msg_state => 'PROCESSED')) AS purged;
SELECT aq.purge_queue_table('ret_qt', aq.purge_condition(queue_name => 'ret_q', msg_state => 'processed')) AS purged;
SELECT count(*) AS left_over FROM ret_qt;
SELECT try_sql($$SELECT aq.purge_queue_table('ret_qt', aq.purge_condition(msg_state => 'DONE'))$$);

-- 3: without a time manager (this suite's aq.tm_processes = 0), a consuming dequeue purges the
-- copies whose retention ended, at most once a second per table in a session.
SELECT aq.alter_queue('ret_q', retention_time => '1 millisecond');
SELECT count(*) AS enqueued FROM (SELECT aq.enqueue('ret_q', 'r' || g) FROM generate_series(1, 3) g) e;
SELECT payload FROM aq.dequeue('ret_q', NULL::text);
SELECT count(*) AS processed FROM aq$ret_qt WHERE msg_state = 'PROCESSED';
\c
SELECT payload FROM aq.dequeue('ret_q', NULL::text);
-- The first copy ended (1 ms), the second was made by this dequeue after its purge.
SELECT user_data FROM aq$ret_qt WHERE msg_state = 'PROCESSED';
\set VERBOSITY terse

-- A ring keeps its copies in its current segment, payloads stored out of line included.
SELECT aq.create_queue_table('ret_ring', 'text', segments => 3);
SELECT aq.create_queue('ret_ring_q', 'ret_ring', retention_time => '1 day');
SELECT aq.start_queue('ret_ring_q');
SELECT count(*) AS enqueued FROM (SELECT aq.enqueue('ret_ring_q', g || repeat(md5(g::text), 400)) FROM generate_series(1, 4) g) e;
SELECT aq._switch_segment('ret_ring');
SELECT length(payload) FROM aq.dequeue_array('ret_ring_q', NULL::text, 2);
SELECT length(payload) FROM aq.dequeue('ret_ring_q', NULL::text, aq.dequeue_options(dequeue_mode => 'browse'));
SELECT tableoid::regclass AS segment, q_id < 0 AS retained, count(*), min(length(user_data)) FROM ret_ring GROUP BY 1, 2 ORDER BY 1, 2;
SELECT msg_state, count(*) FROM aq$ret_ring GROUP BY 1 ORDER BY 1;
-- A dropped queue takes what it retained with it.
SELECT aq.stop_queue('ret_ring_q');
SELECT aq.drop_queue('ret_ring_q');
SELECT count(*) AS left_in_ring FROM ret_ring;

-- 4: a queue table with a trigger cannot take the copy: the dequeue fails, nothing is removed.
CREATE FUNCTION ret_trigger() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER ret_t BEFORE INSERT ON ret_qt FOR EACH ROW EXECUTE FUNCTION ret_trigger();
SELECT aq.alter_queue('ret_q', retention_time => '1 hour');
SELECT try_sql($$SELECT aq.dequeue('ret_q', NULL::text)$$);
-- Refused before it claimed anything: no attempt is counted (max_retries would send it to the
-- exception queue).
SELECT count(*) AS ready, max(retry_count) AS retries FROM aq$ret_qt WHERE msg_state = 'READY';
DROP TRIGGER ret_t ON ret_qt;

-- A multi-consumer queue stores retention_time but does not apply it yet.
SELECT aq.create_queue_table('ret_multi', 'text', multiple_consumers => true);
SELECT aq.create_queue('ret_multi_q', 'ret_multi', retention_time => '1 hour');
SELECT aq.start_queue('ret_multi_q');
SELECT aq.add_subscriber('ret_multi_q', aq.agent('s1'));
SELECT aq.enqueue('ret_multi_q', 'x'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('ret_multi_q', NULL::text, aq.dequeue_options(consumer_name => 's1'));
SELECT count(*) AS kept FROM ret_multi;

-- The view goes beside its table in the schema the table is in now (it may have been renamed).
CREATE SCHEMA ret_s1;
SELECT aq.create_queue_table('ret_moved_qt', 'text', queue_table_schema => 'ret_s1');
ALTER SCHEMA ret_s1 RENAME TO ret_s2;
SELECT aq.create_queue('ret_moved_q', 'ret_moved_qt', retention_time => '1 hour');
SELECT aq.alter_queue('ret_moved_q', retention_time => '2 hours');
SELECT count(*) AS views FROM pg_views WHERE schemaname = 'ret_s2' AND viewname = 'aq$ret_moved_qt';
SELECT aq.drop_queue_table('ret_moved_qt', force => true);
DROP SCHEMA ret_s2;

-- With the aq objects of 0.6.0 (the library updated first, ALTER EXTENSION aq UPDATE not run yet)
-- nothing is retained: those objects' views and drop_queue know no copies.  The update then
-- gives the views PROCESSED, except one with more than aq made (here a column grant), which is
-- left as it was until a queue of its table is given a retention_time.
SELECT current_database() AS ret_database \gset
CREATE DATABASE aq_retention_upgrade;
\c aq_retention_upgrade
\set VERBOSITY terse
CREATE EXTENSION aq VERSION '0.6.0';
SELECT aq.create_queue_table('old_ret_qt', 'text');
SELECT aq.create_queue('old_ret_q', 'old_ret_qt', retention_time => '1 day');
SELECT aq.start_queue('old_ret_q');
SELECT aq.create_queue_table('old_granted_qt', 'text');
GRANT SELECT (msg_id) ON "aq$old_granted_qt" TO PUBLIC;
SELECT aq.enqueue('old_ret_q', 'before'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('old_ret_q', NULL::text);
SELECT count(*) AS copies FROM old_ret_qt;
ALTER EXTENSION aq UPDATE;
SELECT pg_get_viewdef('"aq$old_ret_qt"'::regclass) LIKE '%PROCESSED%' AS replaced,
       pg_get_viewdef('"aq$old_granted_qt"'::regclass) LIKE '%PROCESSED%' AS granted_replaced;
SELECT aq.enqueue('old_ret_q', 'after'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('old_ret_q', NULL::text);
SELECT queue, msg_state, user_data FROM "aq$old_ret_qt";
SELECT aq.create_queue('old_granted_q', 'old_granted_qt', retention_time => '1 hour');
SELECT pg_get_viewdef('"aq$old_granted_qt"'::regclass) LIKE '%PROCESSED%' AS granted_replaced,
       (SELECT attacl IS NOT NULL FROM pg_attribute WHERE attrelid = '"aq$old_granted_qt"'::regclass AND attname = 'msg_id') AS column_grant_kept;
\c :ret_database
DROP DATABASE aq_retention_upgrade;
\set VERBOSITY terse

SELECT aq.drop_queue_table('ret_qt', force => true);
SELECT aq.drop_queue_table('ret_ring', force => true);
SELECT aq.drop_queue_table('ret_multi', force => true);
DROP FUNCTION ret_trigger();
