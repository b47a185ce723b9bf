-- Queues II: administration (alter_queue, purge by condition, AQ$ views, catalog views), queue
-- owners, and the upgrade from 0.3.0.
CREATE TYPE admin_ot AS (body text, n integer);
SELECT aq.create_queue_table('admin_qt', 'admin_ot', comment => 'orders');
SELECT aq.create_queue('admin_q', 'admin_qt', max_retries => 2, comment => 'first');
SELECT aq.create_queue('admin_q2', 'admin_qt');
SELECT aq.start_queue('admin_q');
SELECT aq.start_queue('admin_q2', dequeue => false);

------------------------------------------------------------------------------ catalog views
SELECT name, queue_table, queue_type, max_retries, retry_delay, retention, enqueue_enabled, dequeue_enabled, state, user_comment
  FROM aq.all_queues ORDER BY qid;
SELECT queue_table, object_type, sort_order, queues, table_exists, user_comment, owner = current_user AS mine
  FROM aq.all_queue_tables;
SELECT count(*) = (SELECT count(*) FROM aq.all_queues) AS user_queues_are_mine FROM aq.user_queues;

------------------------------------------------------------------------------ alter_queue
SELECT aq.alter_queue('admin_q', max_retries => 7, retry_delay => '30 s', retention_time => '1 day', comment => 'second');
SELECT aq.alter_queue('admin_q', comment => 'third');   -- NULL leaves the others as they are
SELECT max_retries, retry_delay, retention, user_comment FROM aq.all_queues WHERE name = 'admin_q';
SELECT try_sql($$SELECT aq.alter_queue('admin_q', max_retries => -1)$$);
SELECT try_sql($$SELECT aq.alter_queue('admin_q', retry_delay => '-1 s')$$);
SELECT try_sql($$SELECT aq.alter_queue('no_such_q', max_retries => 1)$$);
SELECT aq.stop_queue('admin_q2', enqueue => false);
SELECT name, state FROM aq.all_queues WHERE queue_table = 'admin_qt' ORDER BY qid;
SELECT aq.start_queue('admin_q2');

------------------------------------------------------------------------------ the AQ$ view
SELECT aq.enqueue_array('admin_q',
       ARRAY[ROW('a', 1), ROW('b', 2), ROW('c', 3), ROW('d', 4)]::admin_ot[],
       ARRAY[aq.message_properties(correlation => 'red-1'), aq.message_properties(correlation => 'blue-1', priority => 3),
             aq.message_properties(delay => '1 hour'), aq.message_properties(expiration => '1 ms')]) IS NOT NULL AS enqueued;
SELECT aq.enqueue('admin_q2', ROW('e', 5)::admin_ot, aq.message_properties(correlation => 'red-2')) > 0 AS enqueued;
-- A second passes for the one that expires after 1 ms (moved into the past rather than waited for).
UPDATE admin_qt SET enq_time = enq_time - interval '1 s', expiration = expiration - interval '1 s'
 WHERE expiration IS NOT NULL;
SELECT queue, corr_id, msg_priority, msg_state, delay IS NOT NULL AS delayed, expiration IS NOT NULL AS expires,
       enq_user_id = current_user AS by_me, retry_count, exception_queue, (user_data).body
  FROM "aq$admin_qt" ORDER BY msg_id;
SELECT obj_description('"aq$admin_qt"'::regclass) AS view_comment;
SELECT reloptions FROM pg_class WHERE oid = '"aq$admin_qt"'::regclass;

------------------------------------------------------------------------------ purge by condition
-- Each field narrows the purge; the values are parameters, never SQL.
BEGIN;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(msg_state => 'expired')) AS expired;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(msg_state => 'WAITING')) AS waiting;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(correlation => 'red%', queue_name => 'admin_q2')) AS red_in_q2;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(msgids => ARRAY[(SELECT min(msgid) FROM admin_qt)])) AS by_msgid;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(enqueued_before => now() - interval '1 day')) AS old;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(correlation => $$x' OR true --$$)) AS injection;
SELECT (user_data).body FROM admin_qt ORDER BY msgid;
SELECT aq.purge_queue_table('admin_qt', NULL::aq.purge_condition) AS everything;
ROLLBACK;
SELECT aq.purge_queue_table('admin_qt', aq.purge_condition('admin_q2')) AS one_queue;
SELECT try_sql($$SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(msg_state => 'processed'))$$);
SELECT try_sql($$SELECT aq.purge_queue_table('admin_qt', aq.purge_condition(queue_name => 'no_such_q'))$$);
SELECT try_sql($$SELECT aq.purge_queue_table('no_such_qt', aq.purge_condition())$$);
SELECT aq.create_queue_table('other_qt', 'text');
SELECT try_sql($$SELECT aq.purge_queue_table('other_qt', aq.purge_condition(queue_name => 'admin_q'))$$);
SELECT count(*) AS still_there FROM admin_qt;

------------------------------------------------------------------------------ exception queues
SELECT try_sql($$SELECT aq.drop_queue('aq$_admin_qt_e')$$);
SELECT try_sql($$SELECT aq.create_queue('aq$_other_qt_e', 'admin_qt')$$);
SELECT try_sql($$SELECT aq.create_queue_table('other_qt', 'text')$$);

------------------------------------------------------------------------------ owners manage their queue tables
CREATE ROLE aq_admin_owner;
CREATE ROLE aq_admin_other;
GRANT CREATE ON SCHEMA public TO aq_admin_owner, aq_admin_other;
GRANT EXECUTE ON FUNCTION aq.create_queue_table, aq.drop_queue_table, aq.create_queue(text, text, integer, interval, interval, text, text),
      aq.alter_queue, aq.start_queue, aq.stop_queue, aq.drop_queue, aq.purge_queue_table,
      aq.grant_queue_privilege, aq.revoke_queue_privilege TO aq_admin_owner, aq_admin_other;
SET ROLE aq_admin_owner;
SELECT aq.create_queue_table('owned_qt', 'text');
SELECT aq.create_queue('owned_q', 'owned_qt');
SELECT aq.start_queue('owned_q');
SELECT aq.enqueue('owned_q', 'mine'::text) > 0 AS enqueued;
SELECT name, owner FROM aq.user_queues ORDER BY qid;
SET ROLE aq_admin_other;
SELECT try_sql($$SELECT aq.alter_queue('owned_q', max_retries => 0)$$);
SELECT try_sql($$SELECT aq.stop_queue('owned_q')$$);
SELECT try_sql($$SELECT aq.create_queue('intruder_q', 'owned_qt')$$);
SELECT try_sql($$SELECT aq.purge_queue_table('owned_qt', aq.purge_condition())$$);
SELECT try_sql($$SELECT aq.grant_queue_privilege('dequeue', 'owned_q', 'aq_admin_other')$$);
SELECT try_sql($$SELECT aq.drop_queue_table('owned_qt', force => true)$$);
-- Nor around the functions: the catalog rows of others' queue tables are out of reach.
WITH changed AS (UPDATE aq.queues SET max_retries = 0 WHERE queue_name = 'owned_q' RETURNING 1)
SELECT count(*) AS rows_changed FROM changed;
SELECT try_sql($$INSERT INTO aq.queues (queue_name, queue_table_id) SELECT 'intruder_q', queue_table_id FROM aq.queue_tables WHERE queue_table = 'owned_qt'$$);
SELECT split_part(try_sql($$SELECT aq.alter_queue('admin_q', comment => 'not yours')$$), ' (', 1) AS superusers_queue;
-- Nor registers a table of its own around create_queue_table: not a temporary one (it would
-- leave a dangling row), and never with an id of its choosing.
CREATE TEMP TABLE my_temp (id int);
SELECT try_sql($$INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type)
                 VALUES ('squatter', 'pg_temp', 'my_temp'::regclass, 'text')$$) AS temp_table;
SELECT try_sql($$INSERT INTO aq.queues (queue_id, queue_name, queue_table_id) OVERRIDING SYSTEM VALUE
                 SELECT 1000, 'squatter_q', queue_table_id FROM aq.queue_tables WHERE queue_table = 'owned_qt'$$) AS chosen_id;
DROP TABLE my_temp;
RESET ROLE;
SET ROLE aq_admin_owner;
SELECT aq.stop_queue('owned_q');
SELECT aq.drop_queue_table('owned_qt', force => true);
RESET ROLE;
-- Managing queues is not using them: no queue privilege, no enqueue.
SELECT try_sql($$SET ROLE aq_admin_other; SELECT aq.enqueue('admin_q', ROW('x', 0)::admin_ot)$$);
RESET ROLE;
REVOKE ALL ON SCHEMA public FROM aq_admin_owner, aq_admin_other;
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA aq FROM aq_admin_owner, aq_admin_other;
DROP ROLE aq_admin_owner;
DROP ROLE aq_admin_other;

------------------------------------------------------------------------------ grant option
CREATE ROLE aq_admin_enq;
CREATE ROLE aq_admin_go;
GRANT EXECUTE ON FUNCTION aq.revoke_queue_privilege, aq.grant_queue_privilege TO aq_admin_go;
SELECT aq.grant_queue_privilege('enqueue', 'admin_q', 'aq_admin_enq');
SELECT aq.grant_queue_privilege('all', 'admin_q', 'aq_admin_go', grant_option => true);
SET ROLE aq_admin_go;
SELECT aq.grant_queue_privilege('dequeue', 'admin_q', 'aq_admin_enq');
-- It revokes what it granted (DEQUEUE), and leaves the owner's ENQUEUE alone.
SELECT aq.revoke_queue_privilege('dequeue', 'admin_q', 'aq_admin_enq');
RESET ROLE;
SELECT has_table_privilege('aq_admin_enq', 'admin_qt', 'DELETE') AS can_dequeue,
       has_column_privilege('aq_admin_enq', 'admin_qt', 'user_data', 'INSERT') AS can_enqueue,
       has_column_privilege('aq_admin_enq', 'admin_qt', 'msgid', 'SELECT') AS reads_msgid;
-- Once the owner revokes ENQUEUE, nothing is left (no SELECT (msgid) granted back by the other).
SELECT aq.revoke_queue_privilege('enqueue', 'admin_q', 'aq_admin_enq');
SELECT has_any_column_privilege('aq_admin_enq', 'admin_qt', 'SELECT') AS reads_anything,
       has_any_column_privilege('aq_admin_enq', 'admin_qt', 'INSERT') AS inserts_anything;
SELECT aq.revoke_queue_privilege('all', 'admin_q', 'aq_admin_go');
REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA aq FROM aq_admin_go;
DROP ROLE aq_admin_enq;
DROP ROLE aq_admin_go;

------------------------------------------------------------------------------ dropping
SELECT aq.stop_queue('admin_q');
SELECT aq.stop_queue('admin_q2');
SELECT try_sql($$SELECT aq.drop_queue_table('admin_qt')$$);
SELECT aq.drop_queue('admin_q');
SELECT aq.drop_queue('admin_q2');
-- The default exception queue and the view go with the queue table.
SELECT aq.drop_queue_table('admin_qt');
SELECT aq.drop_queue_table('other_qt');
SELECT to_regclass('"aq$admin_qt"') AS view_left, count(*) AS queues_left FROM aq.queues;
DROP TYPE admin_ot;

------------------------------------------------------------------------------ upgrade from 0.3.0
SELECT current_database() AS test_database \gset
CREATE DATABASE aq_upgrade_test;
\c aq_upgrade_test
SET client_min_messages = warning;
CREATE EXTENSION aq VERSION '0.3.0';
SELECT aq.create_queue_table('old_qt', 'text');
SELECT aq.create_queue('old_q', 'old_qt');
SELECT aq.start_queue('old_q');
INSERT INTO old_qt (q_id, enq_time, corrid, user_data)
SELECT queue_id, now(), 'c1', 'from 0.3.0' FROM aq.queues WHERE queue_name = 'old_q';
-- The library with the SQL objects of 0.3.0 says what to do.
SELECT aq.enqueue('old_q', 'x'::text);
ALTER EXTENSION aq UPDATE;
SELECT extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'aq') AS updated_to_default
  FROM pg_extension WHERE extname = 'aq';
SELECT name, queue_type FROM aq.all_queues ORDER BY qid;
SELECT count(*) AS indexes FROM pg_indexes WHERE tablename = 'old_qt';
SELECT queue, corr_id, msg_state, user_data FROM "aq$old_qt";
SELECT payload FROM aq.dequeue('old_q', NULL::text, aq.dequeue_options(wait => '0', correlation => 'c1'));
\c :test_database
DROP DATABASE aq_upgrade_test;
