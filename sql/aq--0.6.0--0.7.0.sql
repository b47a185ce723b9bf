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

-- What each consumer of a queue has waiting, and what holds the queue's removal back (PgQ's
-- get_consumer_info): a row per normal queue and consumer (consumer NULL on a single-consumer
-- queue) that the caller may dequeue from.  waiting: its messages (deliveries) in the queue;
-- ready: those a dequeue could take now by time (not delayed, not expired); oldest_enq_time and
-- lag: its oldest waiting message; unsettled: rows holding the attempt of a rolled-back or dead
-- dequeue that the settler has not counted yet (no dequeue takes them until it has); holds_removal:
-- its oldest delivery is the queue's oldest, so the messages from there on stay until it moves;
-- removable: messages of the queue that no delivery is left for, waiting for a sweep.
CREATE FUNCTION aq.consumer_info(queue_name text DEFAULT NULL)
RETURNS TABLE (queue text, consumer text, waiting bigint, ready bigint, oldest_enq_time timestamptz,
               lag interval, unsettled bigint, holds_removal boolean, removable bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q record;
BEGIN
    FOR q IN SELECT qq.queue_id, qq.queue_name, t.relid, t.delivery_relid
               FROM aq.queues qq JOIN aq.queue_tables t ON t.queue_table_id = qq.queue_table_id
              WHERE qq.queue_type = 'normal_queue'
                AND (consumer_info.queue_name IS NULL OR qq.queue_name = consumer_info.queue_name)
                AND has_table_privilege(t.relid, 'SELECT')
                AND (t.delivery_relid IS NULL OR has_table_privilege(t.delivery_relid, 'SELECT'))
              ORDER BY qq.queue_name
    LOOP
        IF q.delivery_relid IS NULL THEN
            RETURN QUERY EXECUTE format(
                'SELECT $1, NULL::text, count(*), count(*) FILTER (WHERE (delay IS NULL OR delay <= now())'
                '           AND (expiration IS NULL OR expiration > now())),'
                '       min(enq_time), now() - min(enq_time),'
                '       count(*) FILTER (WHERE xmax <> ''0''::xid AND NOT aq._claimable(tableoid, ctid)),'
                '       false, 0::bigint'
                '  FROM ONLY %s WHERE q_id = $2', q.relid)
                USING q.queue_name, q.queue_id;
        ELSE
            RETURN QUERY EXECUTE format(
                'WITH d AS (SELECT consumer_name::text AS consumer, count(*) AS waiting,'
                '                  count(*) FILTER (WHERE (delay IS NULL OR delay <= now())'
                '                      AND (expiration IS NULL OR expiration > now())) AS ready,'
                '                  min(enq_time) AS oldest, (array_agg(msgid ORDER BY enq_time, msgid))[1] AS first_msgid,'
                '                  count(*) FILTER (WHERE xmax <> ''0''::xid AND NOT aq._claimable(tableoid, ctid)) AS unsettled'
                '             FROM ONLY %1$s WHERE q_id = $2 GROUP BY consumer_name),'
                '     r AS (SELECT count(*) AS removable FROM ONLY %2$s m'
                '            WHERE m.q_id = $2 AND NOT EXISTS (SELECT FROM ONLY %1$s x WHERE x.msgid = m.msgid))'
                ' SELECT $1, d.consumer, d.waiting, d.ready, d.oldest, now() - d.oldest, d.unsettled,'
                '        d.first_msgid = (SELECT f.first_msgid FROM d f ORDER BY f.oldest, f.first_msgid LIMIT 1), r.removable'
                '   FROM d, r ORDER BY d.consumer', q.delivery_relid, q.relid)
                USING q.queue_name, q.queue_id;
        END IF;
    END LOOP;
END $$;

-- ---------------------------------------------------------------- health

-- What holds the xmin horizon back: a row per session, prepared transaction, standby's feedback
-- and replication slot that keeps an old transaction id alive, oldest first.  As long as it is
-- there, vacuum cannot remove the row versions deleted after it began: dequeued messages stay in
-- the queue tables as dead rows, and the tables and their indexes grow.
--   kind: 'session' (pg_stat_activity: its transaction's xid, or the xmin of its snapshot),
--         'standby feedback' (a walsender whose standby sends hot_standby_feedback without a
--         slot), 'prepared transaction' (pg_prepared_xacts), 'replication slot' (its xmin, or a
--         logical slot's catalog_xmin);
--   xid, xmin: the transaction id it holds and its snapshot's xmin; xmin_age: the age of the
--         older of the two, in transactions; since: the start of its transaction (sessions),
--         its PREPARE (prepared transactions), unknown for the others;
--   holds_database: whether it holds back the rows of this database's tables, queue tables
--         included.  PostgreSQL's rule (ComputeXidHorizons in procarray.c): a session or
--         prepared transaction counts only for its own database (the others' count for the
--         shared catalogs alone); a standby's feedback and a slot's xmin count for every
--         database; a logical slot's catalog_xmin counts for the system catalogs only; a
--         session running VACUUM (not FULL) and a logical walsender count for no table; on a
--         standby everything counts.
-- The caller's own session is left out when its transaction is only this statement.  The view
-- is security_invoker, so a role sees what PostgreSQL's views show it: every holder, but the
-- state, query and transaction start of other roles' sessions only as a member of
-- pg_read_all_stats (or of those roles).
CREATE VIEW aq.xmin_holders WITH (security_invoker = true) AS
WITH holder AS (
    SELECT CASE WHEN a.backend_type = 'walsender' AND a.datid IS NULL THEN 'standby feedback' ELSE 'session' END AS kind,
           a.pid, a.usename AS role, a.datname AS database, a.application_name, a.state,
           a.backend_xid AS xid, a.backend_xmin AS xmin,
           CASE WHEN a.backend_type = 'walsender' AND a.datid IS NULL THEN NULL ELSE a.xact_start END AS since,
           a.query, NULL::name AS slot_name, NULL::text AS gid,
           CASE WHEN pg_catalog.pg_is_in_recovery() THEN true
                WHEN a.backend_type = 'walsender' THEN a.datid IS NULL
                WHEN EXISTS (SELECT FROM pg_catalog.pg_stat_progress_vacuum v WHERE v.pid = a.pid) THEN false
                ELSE a.datname = pg_catalog.current_database() END AS holds_database
      FROM pg_catalog.pg_stat_activity a
     WHERE (a.backend_xid IS NOT NULL OR a.backend_xmin IS NOT NULL)
       AND NOT (a.pid = pg_catalog.pg_backend_pid() AND a.xact_start >= a.query_start)
    UNION ALL
    SELECT 'prepared transaction', NULL, p.owner, p.database, NULL, NULL, p.transaction, NULL, p.prepared,
           NULL, NULL, p.gid, pg_catalog.pg_is_in_recovery() OR p.database = pg_catalog.current_database()
      FROM pg_catalog.pg_prepared_xacts p
    UNION ALL
    SELECT 'replication slot', s.active_pid, NULL, s.database, NULL,
           CASE WHEN s.active THEN 'active' ELSE 'inactive' END, NULL, coalesce(s.xmin, s.catalog_xmin), NULL,
           NULL, s.slot_name, NULL, pg_catalog.pg_is_in_recovery() OR s.xmin IS NOT NULL
      FROM pg_catalog.pg_replication_slots s
     WHERE s.xmin IS NOT NULL OR s.catalog_xmin IS NOT NULL)
SELECT h.kind, h.pid, h.role, h.database, h.application_name, h.state, h.xid, h.xmin,
       greatest(pg_catalog.age(h.xid), pg_catalog.age(h.xmin)) AS xmin_age, h.since, h.query, h.slot_name, h.gid,
       h.holds_database
  FROM holder h
 ORDER BY xmin_age DESC, h.kind, h.pid, h.slot_name, h.gid;
GRANT SELECT ON aq.xmin_holders TO PUBLIC;
COMMENT ON VIEW aq.xmin_holders IS
    'What holds the xmin horizon back (sessions, prepared transactions, standby feedback, replication slots), oldest first; holds_database: it keeps dead rows in this database''s tables';

-- The backlog of aq.queue_health: a row per queue of every queue table and, on a multi-consumer
-- queue table, per consumer (its subscribers and the recipients it has deliveries for; NULL when
-- it has none).  ready: messages (deliveries) a dequeue could take now by time; waiting: delayed;
-- expired: expired, not yet moved to the exception queue (an exception queue's messages are all
-- ready: its dequeues take them whatever their delay and expiration); oldest_ready: the ready
-- message's enq_time that is oldest.  The names of the queue tables are known only here, so a
-- statement per queue table counts them (a scan of the table).  The counts are NULL where the
-- caller may not read the queue table (and its delivery table), or the table is gone.
CREATE FUNCTION aq._queue_health()
RETURNS TABLE (queue_id integer, consumer_name text, ready bigint, waiting bigint, expired bigint,
               oldest_ready timestamptz)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t record;
BEGIN
    FOR t IN SELECT qt.queue_table_id, qt.relid, qt.delivery_relid,
                    coalesce(has_table_privilege(qt.relid, 'SELECT'), false)
                    AND (qt.delivery_relid IS NULL OR coalesce(has_table_privilege(qt.delivery_relid, 'SELECT'), false))
                    AS readable
               FROM aq.queue_tables qt ORDER BY qt.queue_table
    LOOP
        IF NOT t.readable THEN
            -- The subscribers the caller may see (aq.subscribers' policy), without counts.
            RETURN QUERY
                SELECT q.queue_id, s.consumer_name, NULL::bigint, NULL::bigint, NULL::bigint, NULL::timestamptz
                  FROM aq.queues q LEFT JOIN aq.subscribers s ON s.queue_id = q.queue_id
                 WHERE q.queue_table_id = t.queue_table_id;
            CONTINUE;
        END IF;
        RETURN QUERY EXECUTE format(
            'WITH r AS (SELECT m.q_id, %2$s AS consumer_name, m.enq_time,'
            '                  CASE WHEN q.queue_type = ''exception_queue'' THEN ''ready'''
            '                       WHEN m.expiration <= now() THEN ''expired'''
            '                       WHEN m.delay > now() THEN ''waiting'' ELSE ''ready'' END AS state'
            '             FROM ONLY %1$s m JOIN aq.queues q ON q.queue_id = m.q_id),'
            '     c AS (SELECT r.q_id, r.consumer_name,'
            '                  count(*) FILTER (WHERE r.state = ''ready'') AS ready,'
            '                  count(*) FILTER (WHERE r.state = ''waiting'') AS waiting,'
            '                  count(*) FILTER (WHERE r.state = ''expired'') AS expired,'
            '                  min(r.enq_time) FILTER (WHERE r.state = ''ready'') AS oldest_ready'
            '             FROM r GROUP BY r.q_id, r.consumer_name),'
            '     k AS (SELECT s.queue_id, s.consumer_name FROM aq.subscribers s JOIN aq.queues q ON q.queue_id = s.queue_id'
            '            WHERE q.queue_table_id = $1'
            '           UNION SELECT c.q_id, c.consumer_name FROM c WHERE c.consumer_name IS NOT NULL)'
            ' SELECT q.queue_id, k.consumer_name, coalesce(c.ready, 0), coalesce(c.waiting, 0), coalesce(c.expired, 0),'
            '        c.oldest_ready'
            '   FROM aq.queues q LEFT JOIN k ON k.queue_id = q.queue_id'
            '   LEFT JOIN c ON c.q_id = q.queue_id AND c.consumer_name IS NOT DISTINCT FROM k.consumer_name'
            '  WHERE q.queue_table_id = $1',
            coalesce(t.delivery_relid, t.relid),
            CASE WHEN t.delivery_relid IS NULL THEN 'NULL::text' ELSE 'm.consumer_name COLLATE "default"' END)
            USING t.queue_table_id;
    END LOOP;
END $$;

-- Health at a glance: a row per queue and, on a multi-consumer queue table, per consumer, with
-- its backlog (aq._queue_health), its queue table's size, rows and last vacuum (the delivery
-- table's in the delivery_ columns), and the age of the oldest transaction that holds back the
-- removal of dead rows in this database (aq.xmin_holders).  Sizes: pg_table_size (the table
-- with its TOAST table) and pg_indexes_size; last_vacuum: the later of the last VACUUM and the
-- last autovacuum.  Every queue table is listed; the counts are NULL where the caller may not
-- read it.
CREATE VIEW aq.queue_health WITH (security_invoker = true) AS
SELECT t.queue_table, q.queue_name AS queue, h.consumer_name, h.ready, h.waiting, h.expired,
       h.oldest_ready AS oldest_ready_enq_time, pg_catalog.now() - h.oldest_ready AS oldest_ready_age,
       pg_catalog.pg_table_size(t.relid) AS table_bytes, pg_catalog.pg_indexes_size(t.relid) AS index_bytes,
       st.n_live_tup AS live_rows, st.n_dead_tup AS dead_rows,
       greatest(st.last_vacuum, st.last_autovacuum) AS last_vacuum,
       pg_catalog.pg_table_size(t.delivery_relid) AS delivery_table_bytes,
       pg_catalog.pg_indexes_size(t.delivery_relid) AS delivery_index_bytes,
       sd.n_live_tup AS delivery_live_rows, sd.n_dead_tup AS delivery_dead_rows,
       greatest(sd.last_vacuum, sd.last_autovacuum) AS delivery_last_vacuum,
       x.oldest_xmin_age
  FROM aq._queue_health() h
  JOIN aq.queues q ON q.queue_id = h.queue_id
  JOIN aq.queue_tables t ON t.queue_table_id = q.queue_table_id
  LEFT JOIN pg_catalog.pg_stat_user_tables st ON st.relid = t.relid
  LEFT JOIN pg_catalog.pg_stat_user_tables sd ON sd.relid = t.delivery_relid
 CROSS JOIN (SELECT max(xh.xmin_age) AS oldest_xmin_age FROM aq.xmin_holders xh WHERE xh.holds_database) x
 ORDER BY t.queue_table, q.queue_name, h.consumer_name;
GRANT SELECT ON aq.queue_health TO PUBLIC;
COMMENT ON VIEW aq.queue_health IS
    'Health at a glance: per queue and consumer, its ready, waiting and expired messages and the oldest ready one; its queue table''s sizes, live and dead rows and last vacuum; the age of the oldest xmin holding this database back';

-- The time manager (Oracle's QMON), per database it has served since the server started: its
-- worker's pid (NULL: none runs now), the next time a delay or an expiration passes, its last
-- round and how late that round started after its due time (the largest lag too), how many
-- rounds ran, messages it moved to exception queues, queues it woke because a delay passed,
-- and its failures with the last error.  Needs aq in shared_preload_libraries (55000 without).
CREATE FUNCTION aq._queue_monitor(
    OUT database oid,
    OUT pid integer,
    OUT next_due timestamptz,
    OUT last_round timestamptz,
    OUT last_lag interval,
    OUT max_lag interval,
    OUT rounds bigint,
    OUT expired bigint,
    OUT woken bigint,
    OUT failures bigint,
    OUT last_error text)
RETURNS SETOF record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_queue_monitor';

CREATE VIEW aq.queue_monitor WITH (security_invoker = true) AS
SELECT d.datname AS database, m.pid, m.next_due, m.last_round, m.last_lag, m.max_lag, m.rounds,
       m.expired, m.woken, m.failures, m.last_error
  FROM aq._queue_monitor() m
  LEFT JOIN pg_catalog.pg_database d ON d.oid = m.database
 ORDER BY d.datname;
GRANT SELECT ON aq.queue_monitor TO PUBLIC;
COMMENT ON VIEW aq.queue_monitor IS
    'The time manager: per database, its worker, next due time, last round and lag, rounds, messages expired, queues woken for delays, failures';
