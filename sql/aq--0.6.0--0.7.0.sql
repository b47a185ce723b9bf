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
