-- aq 0.4.0: Queues II — message properties served by indexes, sort orders, dequeue modes,
-- exception queues, purge by condition, AQ$<queue_table> views, catalog views, and queue
-- administration by the queue table's owner.
\echo Use "ALTER EXTENSION aq UPDATE TO '0.4.0'" to load this file. \quit

------------------------------------------------------------------------------ catalog

-- Oracle's queue types: a NORMAL_QUEUE takes enqueues; an EXCEPTION_QUEUE receives the
-- messages of its queue table's queues that expired, and is only dequeued from.
ALTER TABLE aq.queues ADD COLUMN queue_type text NOT NULL DEFAULT 'normal_queue'
    CHECK (queue_type IN ('normal_queue', 'exception_queue'));

-- The queue table's default exception queue, AQ$_<queue_table>_E in Oracle.
CREATE FUNCTION aq._default_exception_queue(queue_table text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'aq$_' || queue_table || '_e' $$;

-- The AQ$<queue_table> view's name.
CREATE FUNCTION aq._queue_table_view(queue_table text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'aq$' || queue_table $$;

------------------------------------------------------------------------------ ownership
--
-- A queue table belongs to the role that created it (the owner of its table).  That role
-- (or a member of it, or a superuser) manages the queue table and its queues; everyone
-- else gets 42501.  The admin functions run as the caller, so the catalog is writable by
-- PUBLIC but row-level security limits each role to the rows of queue tables it owns:
-- calling the catalog directly gives no more than the functions do.

-- The caller may manage the table relid (owner, member of the owner, or superuser).
CREATE FUNCTION aq._manages(relid oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = relid),
                    (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user))
$$;

CREATE FUNCTION aq._check_owner(t aq.queue_tables) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT aq._manages(t.relid) THEN
        RAISE EXCEPTION 'must be owner of queue table "%"', t.queue_table
            USING ERRCODE = 'insufficient_privilege',
                  DETAIL = format('Queue table "%s" is owned by %s.', t.queue_table,
                                  (SELECT c.relowner::regrole FROM pg_class c WHERE c.oid = t.relid)),
                  HINT = 'A queue table and its queues are managed by the role that created it, or by a superuser.';
    END IF;
END $$;

-- Writes go through policies per command:
--   INSERT: a permanent table the role manages, and only a role that may run the admin
--           function that makes such rows (so no one registers names around the functions);
--   UPDATE: the queue settings the admin functions change, of queues the role manages
--           (queue tables are never updated: their names and schema stay what they were made);
--   DELETE: rows the role manages.
-- The identity columns are not granted: no row can take another's id.
CREATE FUNCTION aq._registrable(relid oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT aq._manages(relid)
       AND EXISTS (SELECT FROM pg_class c WHERE c.oid = relid AND c.relkind = 'r' AND c.relpersistence = 'p')
       AND has_function_privilege('aq.create_queue_table(text, regtype, text, text, text)', 'EXECUTE')
$$;

ALTER TABLE aq.queue_tables ENABLE ROW LEVEL SECURITY;
ALTER TABLE aq.queues ENABLE ROW LEVEL SECURITY;
CREATE POLICY everyone_reads ON aq.queue_tables FOR SELECT USING (true);
CREATE POLICY owner_registers ON aq.queue_tables FOR INSERT WITH CHECK (aq._registrable(relid));
CREATE POLICY owner_deletes ON aq.queue_tables FOR DELETE USING (aq._manages(relid));
CREATE POLICY everyone_reads ON aq.queues FOR SELECT USING (true);
CREATE POLICY owner_creates ON aq.queues FOR INSERT
    WITH CHECK (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queues.queue_table_id
                                                        AND aq._manages(t.relid))
                AND (has_function_privilege('aq.create_queue_table(text, regtype, text, text, text)', 'EXECUTE')
                     OR has_function_privilege('aq.create_queue(text, text, integer, interval, interval, text, text)', 'EXECUTE')));
CREATE POLICY owner_alters ON aq.queues FOR UPDATE
    USING (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queues.queue_table_id AND aq._manages(t.relid)))
    WITH CHECK (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queues.queue_table_id AND aq._manages(t.relid)));
CREATE POLICY owner_deletes ON aq.queues FOR DELETE
    USING (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queues.queue_table_id AND aq._manages(t.relid)));
GRANT INSERT (queue_table, table_schema, relid, payload_type, sort_list, comment), DELETE ON aq.queue_tables TO PUBLIC;
GRANT INSERT (queue_name, queue_table_id, enqueue_enabled, dequeue_enabled, max_retries, retry_delay, retention_time,
              comment, queue_type),
      UPDATE (enqueue_enabled, dequeue_enabled, max_retries, retry_delay, retention_time, comment),
      DELETE ON aq.queues TO PUBLIC;

------------------------------------------------------------------------------ queue table objects

-- The objects create_queue_table makes around the table (also run by this upgrade for the
-- queue tables that exist):
--   - the index of the sort order: (q_id, enq_time, msgid) or (q_id, priority, enq_time, msgid);
--   - partial indexes for dequeue by correlation (LIKE prefixes, in the C collation the
--     dequeue compares with), for the next delayed message and for expired messages;
--   - the default exception queue aq$_<queue_table>_e;
--   - the view aq$<queue_table>, with security_invoker: reading it needs the privileges
--     the table needs.
CREATE FUNCTION aq._queue_table_objects(t aq.queue_tables) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    by_priority boolean := t.sort_list = 'priority,enq_time';
    order_columns text := CASE WHEN by_priority THEN 'priority, enq_time, msgid' ELSE 'enq_time, msgid' END;
BEGIN
    IF by_priority THEN
        EXECUTE format('CREATE INDEX ON %s (q_id, priority, enq_time, msgid)', t.relid);
    END IF;
    EXECUTE format('CREATE INDEX ON %s (q_id, corrid COLLATE "C", %s) WHERE corrid IS NOT NULL', t.relid, order_columns);
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

-- The queue tables of 0.3.0 get the new objects (their names fit unless longer than 57 bytes).
-- The view is the user's object, as create_queue_table makes it: not a member of the
-- extension (an object this script creates would be, and pg_dump would then omit it, DROP
-- EXTENSION drop it and drop_queue_table fail), and owned by the queue table's owner.
DO $$
DECLARE t aq.queue_tables;
BEGIN
    FOR t IN SELECT * FROM aq.queue_tables ORDER BY queue_table_id LOOP
        IF octet_length(t.queue_table) > 57 THEN
            RAISE WARNING 'queue table "%" keeps no exception queue and no AQ$ view: its name is longer than 57 bytes', t.queue_table;
        ELSIF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
            PERFORM aq._queue_table_objects(t);
            EXECUTE format('ALTER EXTENSION aq DROP VIEW %I.%I', t.table_schema, aq._queue_table_view(t.queue_table));
            EXECUTE format('ALTER VIEW %I.%I OWNER TO %s', t.table_schema, aq._queue_table_view(t.queue_table),
                           (SELECT c.relowner::regrole FROM pg_class c WHERE c.oid = t.relid));
        END IF;
    END LOOP;
END $$;

------------------------------------------------------------------------------ DBMS_AQADM

-- CREATE OR REPLACE where the signature stays: the EXECUTE grants users made are kept.
-- sort_list: 'enq_time' (first in, first out) or 'priority,enq_time' (lower priority number
-- first, then first in); each is served by an index, so a dequeue's cost does not grow
-- with the queue's length.  Queue table names are limited to 57 bytes, so that the
-- exception queue aq$_<name>_e fits in a name (Oracle limits them to 24 characters).
CREATE OR REPLACE FUNCTION aq.create_queue_table(
    queue_table text,
    queue_payload_type regtype,
    sort_list text DEFAULT 'enq_time',
    comment text DEFAULT NULL,
    queue_table_schema text DEFAULT pg_catalog.current_schema())
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sort_order text := lower(replace(sort_list, ' ', ''));
    t aq.queue_tables;
BEGIN
    PERFORM aq._check_name('queue_table', queue_table);
    IF octet_length(queue_table) > 57 THEN
        RAISE EXCEPTION 'queue table name "%" is too long', queue_table USING ERRCODE = 'invalid_name',
            DETAIL = format('%s bytes; queue table names are limited to 57 bytes, so that the exception queue aq$_%s_e fits in 63.',
                            octet_length(queue_table), queue_table);
    END IF;
    IF queue_payload_type IS NULL THEN
        RAISE EXCEPTION 'queue_payload_type must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF queue_table_schema IS NULL THEN
        RAISE EXCEPTION 'queue_table_schema must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'No schema is selected: set search_path or pass queue_table_schema.';
    END IF;
    PERFORM aq._check_name('queue_table_schema', queue_table_schema);
    IF sort_order IS NULL OR sort_order NOT IN ('enq_time', 'priority,enq_time') THEN
        RAISE EXCEPTION 'invalid sort_list: "%"', sort_list USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Valid values are enq_time and priority,enq_time.';
    END IF;
    IF EXISTS (SELECT FROM aq.queue_tables qt WHERE qt.queue_table = create_queue_table.queue_table) THEN
        RAISE EXCEPTION 'queue table "%" already exists', queue_table USING ERRCODE = 'duplicate_table';
    END IF;
    IF EXISTS (SELECT FROM aq.queues q WHERE q.queue_name = aq._default_exception_queue(create_queue_table.queue_table)) THEN
        RAISE EXCEPTION 'queue "%" already exists', aq._default_exception_queue(queue_table)
            USING ERRCODE = 'duplicate_object',
                  DETAIL = 'The queue table''s default exception queue would take that name.';
    END IF;
    IF (SELECT typtype FROM pg_type WHERE oid = queue_payload_type) = 'p' THEN
        RAISE EXCEPTION 'queue_payload_type % is a pseudo-type', queue_payload_type
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF (SELECT typarray FROM pg_type WHERE oid = queue_payload_type) = 0 THEN
        RAISE EXCEPTION 'queue_payload_type % has no array type', queue_payload_type
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = 'enqueue_array and dequeue_array need arrays of the payload type.',
                  HINT = 'Wrap it in a composite type, e.g. CREATE TYPE t AS (items integer[]).';
    END IF;

    EXECUTE format(
        'CREATE TABLE %I.%I ('
        '  msgid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,'
        '  q_id integer NOT NULL,'
        '  enq_time timestamptz NOT NULL,'
        '  priority integer NOT NULL DEFAULT 1,'
        '  delay timestamptz,'
        '  expiration timestamptz,'
        '  corrid text,'
        '  retry_count integer NOT NULL DEFAULT 0,'
        '  exception_queue text,'
        '  enq_uid text NOT NULL DEFAULT current_user,'
        '  user_data %s NOT NULL'
        ') WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05)',
        queue_table_schema, queue_table, queue_payload_type);
    -- The enq_time order's index serves every queue table (the exception queues' order, and
    -- the first-in order of a priority queue table's browse by msgid).
    EXECUTE format('CREATE INDEX ON %I.%I (q_id, enq_time, msgid)', queue_table_schema, queue_table);
    EXECUTE format('COMMENT ON TABLE %I.%I IS %L', queue_table_schema, queue_table,
                   coalesce(comment, format('aq queue table of %s', queue_payload_type)));

    INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type, sort_list, comment)
    VALUES (queue_table, queue_table_schema, format('%I.%I', queue_table_schema, queue_table)::regclass,
            queue_payload_type, sort_order, comment)
    RETURNING * INTO t;
    PERFORM aq._queue_table_objects(t);
END $$;

CREATE FUNCTION aq._drop_queue_table_view(t aq.queue_tables) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE view_oid oid;
BEGIN
    SELECT v.oid INTO view_oid
      FROM pg_class tbl JOIN pg_class v ON v.relnamespace = tbl.relnamespace
     WHERE tbl.oid = t.relid AND v.relname = aq._queue_table_view(t.queue_table) AND v.relkind = 'v'
       AND EXISTS (SELECT FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                    WHERE r.ev_class = v.oid AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.relid);
    IF view_oid IS NOT NULL THEN
        EXECUTE format('DROP VIEW %s', view_oid::regclass);
    END IF;
END $$;

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
    PERFORM aq._wake_waiters(q.queue_id) FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;
    DELETE FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;
    DELETE FROM aq.queue_tables qt WHERE qt.queue_table_id = t.queue_table_id;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        -- Its aq$ view: the view of that name beside the table that reads the table (found by
        -- its dependency, never by a name alone).
        PERFORM aq._drop_queue_table_view(t);
        EXECUTE format('DROP TABLE %s', t.relid);
    END IF;
END $$;

-- A structured purge condition (Oracle's is a SQL string; aq never runs one).  NULL fields
-- do not restrict; the given ones must all hold.
CREATE TYPE aq.purge_condition AS (
    queue_name      text,         -- messages of this queue
    msg_state       text,         -- READY, WAITING or EXPIRED, as the AQ$ view shows them
    correlation     text,         -- LIKE pattern on the correlation
    enqueued_before timestamptz,
    msgids          bigint[]
);

CREATE FUNCTION aq.purge_condition(
    queue_name text DEFAULT NULL, msg_state text DEFAULT NULL, correlation text DEFAULT NULL,
    enqueued_before timestamptz DEFAULT NULL, msgids bigint[] DEFAULT NULL)
RETURNS aq.purge_condition LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(queue_name, msg_state, correlation, enqueued_before, msgids)::aq.purge_condition $$;

-- Removes the messages of the queue table that match the condition (all of them without
-- one); returns how many.  One DELETE whose WHERE clause is fixed: the condition's values
-- are parameters.  Oracle's parameter order; 0.1.0's (queue_table, queue_name) form is
-- purge_condition => aq.purge_condition(queue_name => ...) now (one function per name, so
-- that named arguments are never ambiguous).
-- (0.3.0's form is dropped at the end of this script, once its grants are carried over.)
CREATE FUNCTION aq.purge_queue_table(queue_table text, purge_condition aq.purge_condition DEFAULT NULL)
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
        'DELETE FROM %s m'
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

-- (0.3.0's form is dropped at the end of this script, once its grants are carried over.)
-- queue_type: 'normal_queue' or 'exception_queue' (DBMS_AQADM.NORMAL_QUEUE / EXCEPTION_QUEUE);
-- an exception queue of a queue table can be named in a message's exception_queue property.
CREATE FUNCTION aq.create_queue(
    queue_name text,
    queue_table text,
    max_retries integer DEFAULT 5,
    retry_delay interval DEFAULT '0',
    retention_time interval DEFAULT '0',
    comment text DEFAULT NULL,
    queue_type text DEFAULT 'normal_queue')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables;
    kind text := lower(queue_type);
BEGIN
    PERFORM aq._check_name('queue_name', queue_name);
    t := aq._queue_table(queue_table);
    PERFORM aq._check_owner(t);
    IF kind IS NULL OR kind NOT IN ('normal_queue', 'exception_queue') THEN
        RAISE EXCEPTION 'invalid queue_type: "%"', queue_type USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Valid values are normal_queue, exception_queue.';
    END IF;
    IF max_retries IS NULL OR max_retries < 0 THEN
        RAISE EXCEPTION 'max_retries must be 0 or more' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM aq._check_interval('retry_delay', coalesce(retry_delay, '0'));
    PERFORM aq._check_interval('retention_time', coalesce(retention_time, '0'));
    IF EXISTS (SELECT FROM aq.queues q WHERE q.queue_name = create_queue.queue_name) THEN
        RAISE EXCEPTION 'queue "%" already exists', queue_name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO aq.queues (queue_name, queue_table_id, max_retries, retry_delay, retention_time, comment, queue_type)
    VALUES (queue_name, t.queue_table_id, max_retries, coalesce(retry_delay, '0'),
            coalesce(retention_time, '0'), comment, kind);
END $$;

-- The queue table of a queue, after checking that the caller manages it.
CREATE FUNCTION aq._owned_queue(queue_name text) RETURNS aq.queues
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._queue(queue_name);
    t aq.queue_tables;
BEGIN
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    PERFORM aq._check_owner(t);
    RETURN q;
END $$;

-- NULL leaves a setting as it is.
CREATE OR REPLACE FUNCTION aq.alter_queue(
    queue_name text,
    max_retries integer DEFAULT NULL,
    retry_delay interval DEFAULT NULL,
    retention_time interval DEFAULT NULL,
    comment text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._owned_queue(queue_name);
BEGIN
    IF max_retries < 0 THEN
        RAISE EXCEPTION 'max_retries must be 0 or more' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM aq._check_interval('retry_delay', retry_delay);
    PERFORM aq._check_interval('retention_time', retention_time);
    UPDATE aq.queues qq
       SET max_retries = coalesce(alter_queue.max_retries, qq.max_retries),
           retry_delay = coalesce(alter_queue.retry_delay, qq.retry_delay),
           retention_time = coalesce(alter_queue.retention_time, qq.retention_time),
           comment = coalesce(alter_queue.comment, qq.comment)
     WHERE qq.queue_id = q.queue_id;
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
        EXECUTE format('DELETE FROM %s WHERE q_id = $1', t.relid) USING q.queue_id;
    END IF;
    DELETE FROM aq.queues qq WHERE qq.queue_id = q.queue_id;
    PERFORM aq._wake_waiters(q.queue_id);
END $$;

-- An exception queue takes no enqueue (as in Oracle): starting one enables dequeue only.
CREATE OR REPLACE FUNCTION aq.start_queue(queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._owned_queue(queue_name);
BEGIN
    IF q.queue_type = 'exception_queue' AND coalesce(enqueue, false) THEN
        RAISE NOTICE 'queue "%" is an exception queue: it is started for dequeue only', queue_name;
    END IF;
    UPDATE aq.queues qq
       SET enqueue_enabled = qq.enqueue_enabled OR (coalesce(start_queue.enqueue, false) AND q.queue_type = 'normal_queue'),
           dequeue_enabled = qq.dequeue_enabled OR coalesce(start_queue.dequeue, false)
     WHERE qq.queue_id = q.queue_id;
END $$;

CREATE OR REPLACE FUNCTION aq.stop_queue(queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._owned_queue(queue_name);
BEGIN
    UPDATE aq.queues qq
       SET enqueue_enabled = qq.enqueue_enabled AND NOT coalesce(stop_queue.enqueue, false),
           dequeue_enabled = qq.dequeue_enabled AND NOT coalesce(stop_queue.dequeue, false)
     WHERE qq.queue_id = q.queue_id;
    PERFORM aq._wake_waiters(q.queue_id);  -- waiting dequeues see the stop and give up
END $$;

-- The owner grants, and so does a role that holds the privilege WITH GRANT OPTION
-- (PostgreSQL's own rule); anyone else gets 42501 (GRANT itself would only warn).
CREATE FUNCTION aq._check_grantor(t aq.queue_tables, privilege text) RETURNS void
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    kind text := upper(privilege);
    can boolean;
BEGIN
    IF aq._manages(t.relid) THEN
        RETURN;
    END IF;
    can := CASE kind
        WHEN 'ENQUEUE' THEN has_column_privilege(t.relid, 'user_data', 'INSERT WITH GRANT OPTION')
        WHEN 'DEQUEUE' THEN has_table_privilege(t.relid, 'DELETE WITH GRANT OPTION')
        ELSE has_column_privilege(t.relid, 'user_data', 'INSERT WITH GRANT OPTION')
             AND has_table_privilege(t.relid, 'DELETE WITH GRANT OPTION') END;
    IF NOT coalesce(can, false) THEN
        RAISE EXCEPTION 'permission denied to grant or revoke % on queue table "%"', kind, t.queue_table
            USING ERRCODE = 'insufficient_privilege',
                  HINT = 'The queue table''s owner grants queue privileges, and so does a role granted them with grant_option.';
    END IF;
END $$;

CREATE OR REPLACE FUNCTION aq.grant_queue_privilege(
    privilege text, queue_name text, grantee text, grant_option boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._queue(queue_name);
    t aq.queue_tables;
    privileges text := aq._queue_privileges(privilege);
BEGIN
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    PERFORM aq._check_grantor(t, privilege);
    EXECUTE format('GRANT %s ON TABLE %s TO %s%s', privileges, aq._queue_relation(t),
                   aq._grantee(grantee), CASE WHEN grant_option THEN ' WITH GRANT OPTION' ELSE '' END);
END $$;

-- The grantor check, then the revokes.  A role that holds the privileges WITH GRANT OPTION
-- (column-level for ENQUEUE) revokes them in the form they were granted; the owner also
-- revokes at table level, which takes any column-level grant of the same kind with it.
CREATE OR REPLACE FUNCTION aq.revoke_queue_privilege(privilege text, queue_name text, grantee text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._queue(queue_name);
    t aq.queue_tables;
    kind text := upper(coalesce(privilege, ''));
    role_sql text;
    role_oid oid;
    relation regclass;
    revoking_grantor oid;
    had_msgid boolean;
BEGIN
    PERFORM aq._queue_privileges(privilege);  -- validates the name
    role_sql := aq._grantee(grantee);
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    relation := aq._queue_relation(t);
    PERFORM aq._check_grantor(t, privilege);
    role_oid := CASE WHEN role_sql = 'PUBLIC' THEN 0
                     ELSE (SELECT r.oid FROM pg_roles r WHERE r.rolname = revoke_queue_privilege.grantee) END;
    -- The grants this call can revoke are those made by its grantor: the owner for whoever
    -- manages the table, the caller otherwise (PostgreSQL's rule).
    revoking_grantor := CASE WHEN aq._manages(t.relid) THEN (SELECT c.relowner FROM pg_class c WHERE c.oid = t.relid)
                    ELSE (SELECT r.oid FROM pg_roles r WHERE r.rolname = current_user) END;
    had_msgid := EXISTS (SELECT FROM pg_attribute a, aclexplode(a.attacl) acl
                          WHERE a.attrelid = t.relid AND a.attname = 'msgid' AND acl.privilege_type = 'SELECT'
                            AND acl.grantee = role_oid AND acl.grantor = revoking_grantor);
    IF kind IN ('ENQUEUE', 'ALL') THEN
        EXECUTE format('REVOKE %s ON TABLE %s FROM %s CASCADE', aq._enqueue_grant(), relation, role_sql);
    END IF;
    IF kind IN ('DEQUEUE', 'ALL') THEN
        EXECUTE format('REVOKE %s ON TABLE %s FROM %s CASCADE', aq._dequeue_grant(), relation, role_sql);
    END IF;
    IF aq._manages(t.relid) THEN
        EXECUTE format('REVOKE %s ON TABLE %s FROM %s CASCADE',
                       CASE kind WHEN 'ENQUEUE' THEN 'INSERT' WHEN 'DEQUEUE' THEN 'SELECT, DELETE, UPDATE'
                                 ELSE 'INSERT, SELECT, DELETE, UPDATE' END,
                       relation, role_sql);
    END IF;
    -- Revoking DEQUEUE's SELECT also took the SELECT (msgid) of an ENQUEUE from the same
    -- grantor: give it back if the grantee can still enqueue by that grantor's grant.
    IF kind = 'DEQUEUE' AND had_msgid AND EXISTS (
           SELECT FROM pg_attribute a, aclexplode(a.attacl) acl
            WHERE a.attrelid = t.relid AND a.attname = 'user_data'
              AND acl.privilege_type = 'INSERT' AND acl.grantee = role_oid AND acl.grantor = revoking_grantor) THEN
        EXECUTE format('GRANT SELECT (msgid) ON TABLE %s TO %s', relation, role_sql);
    END IF;
END $$;

------------------------------------------------------------------------------ catalog views

-- Oracle's ALL_QUEUE_TABLES / USER_QUEUE_TABLES: the queue tables the caller owns or may
-- use (any queue privilege), with their sort order and queues.
CREATE VIEW aq.all_queue_tables AS
SELECT c.relowner::regrole::text AS owner, t.queue_table, t.table_schema, t.payload_type::text AS object_type,
       t.sort_list AS sort_order,
       (SELECT count(*) FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id) AS queues,
       c.oid IS NOT NULL AS table_exists, t.comment AS user_comment, t.created
  FROM aq.queue_tables t LEFT JOIN pg_catalog.pg_class c ON c.oid = t.relid
 WHERE c.oid IS NULL OR pg_has_role(c.relowner, 'USAGE')
    OR has_table_privilege(c.oid, 'SELECT') OR has_any_column_privilege(c.oid, 'INSERT');

CREATE VIEW aq.user_queue_tables AS
SELECT v.* FROM aq.all_queue_tables v WHERE v.owner = current_user::regrole::text;

-- Oracle's ALL_QUEUES / USER_QUEUES, with the queue's state.
CREATE VIEW aq.all_queues AS
SELECT v.owner, q.queue_name AS name, q.queue_table, q.queue_id AS qid, upper(q.queue_type) AS queue_type,
       q.max_retries, q.retry_delay, q.retention_time AS retention,
       q.enqueue_enabled, q.dequeue_enabled,
       CASE WHEN q.enqueue_enabled AND q.dequeue_enabled THEN 'STARTED'
            WHEN q.enqueue_enabled THEN 'ENQUEUE ONLY'
            WHEN q.dequeue_enabled THEN 'DEQUEUE ONLY'
            ELSE 'STOPPED' END AS state,
       q.comment AS user_comment, q.created
  FROM (SELECT qq.*, t.queue_table FROM aq.queues qq JOIN aq.queue_tables t USING (queue_table_id)) q
  JOIN aq.all_queue_tables v ON v.queue_table = q.queue_table;

CREATE VIEW aq.user_queues AS
SELECT v.* FROM aq.all_queues v WHERE v.owner = current_user::regrole::text;

GRANT SELECT ON aq.all_queue_tables, aq.user_queue_tables, aq.all_queues, aq.user_queues TO PUBLIC;

------------------------------------------------------------------------------ privileges

-- The admin functions stay revoked from PUBLIC (as DBMS_AQADM is in Oracle): a superuser
-- grants EXECUTE on them to the roles that create queues, and those roles then manage the
-- queue tables they own.  The read-only helpers they call are harmless to everyone.
-- Only the two new functions are named: a GRANT or REVOKE in an extension script also records
-- the object's whole ACL as the extension's initial privileges (pg_init_privs), and pg_dump
-- dumps only what differs from them — naming a function users have granted EXECUTE on would
-- make pg_dump leave their grants out.
REVOKE EXECUTE ON FUNCTION
    aq.purge_queue_table(text, aq.purge_condition),
    aq.create_queue(text, text, integer, interval, interval, text, text)
FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    aq._queue_table(text),
    aq._queue(text),
    aq._queue_privileges(text),
    aq._enqueue_grant(),
    aq._dequeue_grant(),
    aq._queue_relation(aq.queue_tables),
    aq._grantee(text)
TO PUBLIC;

-- The two admin functions whose signature changed replace their 0.3.0 forms.  The EXECUTE
-- grants made on the old form are made again on the new one, by the same grantor and in
-- the same order (a grantee's own grants after the grant that allowed them); the new
-- form's initial privileges stay the extension's own, so pg_dump dumps those grants as the
-- users' (as it dumps them after a fresh install).  No statement sets an object's initial
-- privileges (every GRANT in this script adds to them): the script, run by a superuser,
-- writes them back into pg_init_privs.
DO $$
DECLARE
    f record;
    g record;
    extension_acl aclitem[];
    prior_role text := current_setting('role');
BEGIN
    FOR f IN SELECT v.old_form, v.new_form FROM (VALUES
            ('aq.purge_queue_table(text, text)'::regprocedure,
             'aq.purge_queue_table(text, aq.purge_condition)'::regprocedure),
            ('aq.create_queue(text, text, integer, interval, interval, text)'::regprocedure,
             'aq.create_queue(text, text, integer, interval, interval, text, text)'::regprocedure)) v(old_form, new_form)
    LOOP
        SELECT p.proacl INTO extension_acl FROM pg_proc p WHERE p.oid = f.new_form;
        FOR g IN SELECT a.grantor, a.grantee, a.is_grantable, p.proowner
                   FROM pg_proc p, aclexplode(p.proacl) WITH ORDINALITY a(grantor, grantee, privilege_type, is_grantable, n)
                  WHERE p.oid = f.old_form AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
                  ORDER BY a.n
        LOOP
            IF g.grantor <> g.proowner THEN
                EXECUTE format('SET LOCAL ROLE %s', g.grantor::regrole);
            END IF;
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s%s', f.new_form,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                           CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
            IF g.grantor <> g.proowner THEN
                EXECUTE format('SET LOCAL ROLE %s', CASE WHEN prior_role = 'none' THEN 'NONE' ELSE quote_ident(prior_role) END);
            END IF;
        END LOOP;
        UPDATE pg_catalog.pg_init_privs ip SET initprivs = extension_acl
         WHERE ip.objoid = f.new_form AND ip.classoid = 'pg_catalog.pg_proc'::regclass AND ip.objsubid = 0;
        EXECUTE format('DROP FUNCTION %s', f.old_form);
    END LOOP;
END $$;
