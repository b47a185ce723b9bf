-- aq 0.7.0: the upgrade from 0.6.0.  The schema of 0.7.0 is sql/aq--0.7.0.sql, the script a fresh
-- install runs; this script brings an installation of 0.6.0 to the same schema (test/t/015_upgrade.pl
-- compares the two).  A change of this release goes into both files.
\echo Use "ALTER EXTENSION aq UPDATE TO '0.7.0'" to load this file. \quit

-- The subscribers were readable by every role; now by the roles that may use their queue.
-- A queue's subscribers are seen by the roles that may use the queue: those that may dequeue from
-- it (SELECT on its queue table), enqueue into it (the fan-out reads them as the enqueuer) or
-- manage it (their privileges include both).
DROP POLICY everyone_reads ON aq.subscribers;
CREATE POLICY queue_users_read ON aq.subscribers FOR SELECT USING (
    EXISTS (SELECT FROM aq.queues q JOIN aq.queue_tables t ON t.queue_table_id OPERATOR(pg_catalog.=) q.queue_table_id
             WHERE q.queue_id OPERATOR(pg_catalog.=) subscribers.queue_id
               AND (pg_catalog.has_table_privilege(t.relid, 'SELECT')
                    OR pg_catalog.has_any_column_privilege(t.relid, 'INSERT'))));
