-- aq 0.5.0: hardening — every guarantee aq states holds at the edges a production database meets.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------- privileges

-- The extension lives in schema aq (aq.control: schema = aq), not in the schema that was first
-- in search_path when it was created (public, usually): DROP SCHEMA public CASCADE, which a
-- non-superuser database owner may run, must not drop aq with it.  Fresh installs get that from
-- CREATE EXTENSION; an installation made before moves here.  Schema aq is then no longer a
-- member of the extension (it holds it), exactly as in a fresh install.
DO $$
DECLARE
    ext oid := (SELECT e.oid FROM pg_catalog.pg_extension e WHERE e.extname OPERATOR(pg_catalog.=) 'aq');
    nsp oid := (SELECT n.oid FROM pg_catalog.pg_namespace n WHERE n.nspname OPERATOR(pg_catalog.=) 'aq');
BEGIN
    IF EXISTS (SELECT FROM pg_catalog.pg_depend d
                WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                  AND d.objid OPERATOR(pg_catalog.=) nsp
                  AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
                  AND d.refobjid OPERATOR(pg_catalog.=) ext AND d.deptype OPERATOR(pg_catalog.=) 'e') THEN
        ALTER EXTENSION aq DROP SCHEMA aq;
    END IF;
    IF (SELECT e.extnamespace FROM pg_catalog.pg_extension e WHERE e.oid OPERATOR(pg_catalog.=) ext)
       OPERATOR(pg_catalog.<>) nsp THEN
        UPDATE pg_catalog.pg_depend d SET refobjid = nsp
         WHERE d.classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_extension'::pg_catalog.regclass
           AND d.objid OPERATOR(pg_catalog.=) ext
           AND d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass;
        UPDATE pg_catalog.pg_extension e SET extnamespace = nsp WHERE e.oid OPERATOR(pg_catalog.=) ext;
    END IF;
END $$;

-- Waiting dequeues are woken by a trigger of aq.queues when their queue is stopped, altered or
-- dropped, instead of by aq._wake_waiters(queue_id), which any role could call for any queue
-- (and so keep another role's waiters spinning).  A trigger function cannot be called directly.
CREATE FUNCTION aq._queues_changed() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'aq_queues_changed';
REVOKE EXECUTE ON FUNCTION aq._queues_changed() FROM PUBLIC;
CREATE TRIGGER queues_changed AFTER UPDATE OR DELETE ON aq.queues
    FOR EACH ROW EXECUTE FUNCTION aq._queues_changed();

-- The admin functions that called aq._wake_waiters, without it (CREATE OR REPLACE keeps the
-- EXECUTE grants users made).  drop_queue deletes the queue's messages from the queue table
-- ONLY: a table inheriting from it is not part of the queue.
CREATE OR REPLACE FUNCTION aq.drop_queue_table(queue_table text, force boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    queue_count integer;
BEGIN
    PERFORM aq._check_owner(t);
    -- The default exception queue goes with its queue table, as in Oracle.
    SELECT count(*) INTO queue_count FROM aq.queues q
     WHERE q.queue_table_id = t.queue_table_id AND q.queue_name <> aq._default_exception_queue(t.queue_table);
    IF queue_count > 0 AND NOT coalesce(force, false) THEN
        RAISE EXCEPTION 'queue table "%" still has % queue(s)', queue_table, queue_count
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Drop the queues first, or pass force => true.';
    END IF;
    DELETE FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;  -- wakes their waiters
    DELETE FROM aq.queue_tables qt WHERE qt.queue_table_id = t.queue_table_id;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        -- Its aq$ view: the view of that name beside the table that reads the table (found by
        -- its dependency, never by a name alone).
        PERFORM aq._drop_queue_table_view(t);
        EXECUTE format('DROP TABLE %s', t.relid);
    END IF;
END $$;

CREATE OR REPLACE FUNCTION aq.drop_queue(queue_name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._owned_queue(queue_name);
    t aq.queue_tables;
BEGIN
    IF q.enqueue_enabled OR q.dequeue_enabled THEN
        RAISE EXCEPTION 'queue "%" must be stopped before it is dropped', queue_name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Call aq.stop_queue(%L) first.', queue_name);
    END IF;
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF q.queue_name = aq._default_exception_queue(t.queue_table) THEN
        RAISE EXCEPTION 'queue "%" is the default exception queue of queue table "%"', queue_name, t.queue_table
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'It is dropped with its queue table.';
    END IF;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        EXECUTE format('DELETE FROM ONLY %s WHERE q_id = $1', t.relid) USING q.queue_id;
    END IF;
    DELETE FROM aq.queues qq WHERE qq.queue_id = q.queue_id;  -- wakes its waiters
END $$;

CREATE OR REPLACE FUNCTION aq.stop_queue(queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._owned_queue(queue_name);
BEGIN
    -- The update wakes the queue's waiting dequeues: they see the stop and give up.
    UPDATE aq.queues qq
       SET enqueue_enabled = qq.enqueue_enabled AND NOT coalesce(stop_queue.enqueue, false),
           dequeue_enabled = qq.dequeue_enabled AND NOT coalesce(stop_queue.dequeue, false)
     WHERE qq.queue_id = q.queue_id;
END $$;

DROP FUNCTION aq._wake_waiters(integer);

-- Every name in generated SQL is qualified: the correlation index's collation too.
CREATE OR REPLACE FUNCTION aq._queue_table_objects(t aq.queue_tables) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    by_priority boolean := t.sort_list = 'priority,enq_time';
    order_columns text := CASE WHEN by_priority THEN 'priority, enq_time, msgid' ELSE 'enq_time, msgid' END;
BEGIN
    IF by_priority THEN
        EXECUTE format('CREATE INDEX ON %s (q_id, priority, enq_time, msgid)', t.relid);
    END IF;
    EXECUTE format('CREATE INDEX ON %s (q_id, corrid COLLATE pg_catalog."C", %s) WHERE corrid IS NOT NULL', t.relid, order_columns);
    EXECUTE format('CREATE INDEX ON %s (q_id, delay) WHERE delay IS NOT NULL', t.relid);
    EXECUTE format('CREATE INDEX ON %s (q_id, expiration) WHERE expiration IS NOT NULL', t.relid);
    EXECUTE format(
        'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
        ' SELECT q.queue_name AS queue, m.msgid AS msg_id, m.corrid AS corr_id, m.priority AS msg_priority,'
        '        CASE WHEN q.queue_type = ''exception_queue'' OR m.expiration <= pg_catalog.now() THEN ''EXPIRED'''
        '             WHEN m.delay > pg_catalog.now() THEN ''WAITING'' ELSE ''READY'' END AS msg_state,'
        '        m.delay, m.expiration, m.enq_time, m.enq_uid AS enq_user_id, m.retry_count,'
        '        coalesce(m.exception_queue, %L) AS exception_queue,'
        '        m.user_data'
        '   FROM %s m LEFT JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) m.q_id',
        t.table_schema, aq._queue_table_view(t.queue_table), aq._default_exception_queue(t.queue_table), t.relid);
    -- Reading it needs the table's privileges anyway (security_invoker).
    EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', t.table_schema, aq._queue_table_view(t.queue_table));
    EXECUTE format('COMMENT ON VIEW %I.%I IS %L', t.table_schema, aq._queue_table_view(t.queue_table),
                   format('The messages of aq queue table %s with their queue and state (Oracle''s AQ$%s).',
                          t.queue_table, t.queue_table));
    INSERT INTO aq.queues (queue_name, queue_table_id, queue_type, comment)
    VALUES (aq._default_exception_queue(t.queue_table), t.queue_table_id, 'exception_queue',
            format('default exception queue of %s', t.queue_table));
END $$;

-- purge_queue_table deletes from the queue table ONLY too.
CREATE OR REPLACE FUNCTION aq.purge_queue_table(queue_table text, purge_condition aq.purge_condition DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    c aq.purge_condition := coalesce(purge_condition, ROW(NULL, NULL, NULL, NULL, NULL)::aq.purge_condition);
    q aq.queues;
    state text := upper(c.msg_state);
    exception_queues integer[];
    purged bigint;
BEGIN
    PERFORM aq._check_owner(t);
    IF c.queue_name IS NOT NULL THEN
        q := aq._queue(c.queue_name);
        IF q.queue_table_id <> t.queue_table_id THEN
            RAISE EXCEPTION 'queue "%" is not in queue table "%"', c.queue_name, queue_table
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
    END IF;
    IF state NOT IN ('READY', 'WAITING', 'EXPIRED') THEN
        RAISE EXCEPTION 'invalid msg_state: "%"', c.msg_state USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Valid values are READY, WAITING, EXPIRED.';
    END IF;
    SELECT coalesce(array_agg(e.queue_id), '{}') INTO exception_queues FROM aq.queues e
     WHERE e.queue_table_id = t.queue_table_id AND e.queue_type = 'exception_queue';
    EXECUTE format(
        'DELETE FROM ONLY %s m'
        ' WHERE ($1::integer IS NULL OR m.q_id = $1)'
        '   AND ($2::text IS NULL OR $2 = CASE WHEN m.q_id = ANY ($6) OR m.expiration <= now() THEN ''EXPIRED'''
        '                                      WHEN m.delay > now() THEN ''WAITING'' ELSE ''READY'' END)'
        '   AND ($3::text IS NULL OR m.corrid LIKE $3)'
        '   AND ($4::timestamptz IS NULL OR m.enq_time < $4)'
        '   AND ($5::bigint[] IS NULL OR m.msgid = ANY ($5))',
        aq._queue_relation(t))
    USING q.queue_id, state, c.correlation, c.enqueued_before, c.msgids, exception_queues;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END $$;

-- ---------------------------------------------------------------- objects users built (upgrade repairs)

-- The aq$<queue_table> view of a queue table is its owner's object, as create_queue_table
-- makes it: not a member of the extension (pg_dump dumps it, DROP EXTENSION does not take it
-- along, drop_queue_table drops it) and owned by the queue table's owner.  A database that
-- went through 0.3.0 -> 0.4.0 before 0.5.0 has the views of its queue tables of then as
-- members, owned by the role that ran that upgrade: they become the users' objects again.
-- (The EXECUTE grants that upgrade dropped with four admin functions are not recorded
-- anywhere: they cannot be restored here.)  Extension scripts run with pg_catalog first in
-- search_path.
DO $$
DECLARE v record;
BEGIN
    FOR v IN SELECT n.nspname, c.relname, tbl.relowner
               FROM aq.queue_tables t
               JOIN pg_class tbl ON tbl.oid = t.relid
               JOIN pg_class c ON c.relnamespace = tbl.relnamespace AND c.relkind = 'v'
                               AND c.relname = aq._queue_table_view(t.queue_table)
               JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE EXISTS (SELECT FROM pg_depend d JOIN pg_extension e ON e.oid = d.refobjid
                             WHERE d.classid = 'pg_class'::regclass AND d.objid = c.oid
                               AND d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
                               AND e.extname = 'aq')
              ORDER BY t.queue_table_id
    LOOP
        EXECUTE format('ALTER EXTENSION aq DROP VIEW %I.%I', v.nspname, v.relname);
        EXECUTE format('ALTER VIEW %I.%I OWNER TO %s', v.nspname, v.relname, v.relowner::regrole);
    END LOOP;
END $$;

-- ---------------------------------------------------------------- dequeue attempts
-- A rolled-back dequeue leaves its claim in the row (its xmax); the settler counts it.  The
-- dequeue statements skip rows whose attempt is not counted yet with this filter, in the
-- caller's own statement: so every role that dequeues executes it.  It reads one row
-- version's header and requires SELECT on the table.
CREATE FUNCTION aq._claimable(queue_table pg_catalog.oid, row_version pg_catalog.tid) RETURNS boolean
LANGUAGE c VOLATILE STRICT PARALLEL RESTRICTED COST 10 AS 'MODULE_PATHNAME', 'aq__claimable';
REVOKE ALL ON FUNCTION aq._claimable(pg_catalog.oid, pg_catalog.tid) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION aq._claimable(pg_catalog.oid, pg_catalog.tid) TO PUBLIC;

-- ---------------------------------------------------------------- fast ingest

-- A writer sees its own rejected rows (the drain records the writing role's name in
-- role_name); administrators (superusers, the table's owner) see every row.  Read-only for
-- everyone else: only the drain writes the table.
ALTER TABLE aq.fast_ingest_rejects ENABLE ROW LEVEL SECURITY;
CREATE POLICY writer_sees_own_rejects ON aq.fast_ingest_rejects FOR SELECT TO PUBLIC
    USING (role_name OPERATOR(pg_catalog.=) CAST(CURRENT_USER AS pg_catalog.text));
GRANT SELECT ON aq.fast_ingest_rejects TO PUBLIC;

-- The fast-ingest registry and the rejects name their table by regclass (and the enabling role
-- by regrole), not by OID: pg_dump writes such a value as the name and the restore reads the
-- new OID back, where an oid column kept the old number, which names another relation of the
-- new cluster or none.  Both types are oid underneath (no rewrite); pg_upgrade keeps them.
-- Only the rows of tables that still exist are dumped: the OID of a dropped one would name
-- whatever relation the restore gives that number.
ALTER TABLE aq.fast_ingest_tables
    ALTER COLUMN relid TYPE pg_catalog.regclass,
    ALTER COLUMN enabled_by TYPE pg_catalog.regrole;
ALTER TABLE aq.fast_ingest_rejects ALTER COLUMN relid TYPE pg_catalog.regclass;
SELECT pg_catalog.pg_extension_config_dump('aq.fast_ingest_tables',
    'WHERE EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) relid)');

-- A restored aq.fast_ingest_progress brings the epochs of the server it was dumped from; a new
-- cluster would take the same epochs again (its counter in $PGDATA/pg_aq_epoch starts afresh),
-- and its ids would repeat that server's.  Only the drain writes the table: a row inserted by
-- anyone else (pg_restore) raises this server's epoch counter above the row's.
CREATE FUNCTION aq._progress_restored() RETURNS trigger
LANGUAGE c AS 'MODULE_PATHNAME', 'aq_progress_restored';
REVOKE EXECUTE ON FUNCTION aq._progress_restored() FROM PUBLIC;
CREATE TRIGGER progress_restored AFTER INSERT ON aq.fast_ingest_progress
    FOR EACH ROW EXECUTE FUNCTION aq._progress_restored();
