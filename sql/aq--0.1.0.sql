-- aq 0.1.0: Oracle Advanced Queuing (DBMS_AQADM / DBMS_AQ) with array enqueue/dequeue.
\echo Use "CREATE EXTENSION aq" to load this file. \quit

-- Everything lives in schema aq, the extension's schema (aq.control: schema = aq), which
-- CREATE EXTENSION creates when it is missing; DROP SCHEMA of any other schema (public
-- CASCADE, say) leaves aq alone.  A schema aq that someone else made, that others may create
-- objects in, or that holds anything, makes CREATE EXTENSION fail rather than adopt objects someone else created.  Every reference
-- below is schema-qualified, and every function runs with search_path = pg_catalog, pg_temp, so
-- nothing here depends on the caller's search_path.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_namespace n JOIN pg_catalog.pg_roles r ON r.oid OPERATOR(pg_catalog.=) n.nspowner
                    WHERE n.nspname OPERATOR(pg_catalog.=) 'aq' AND r.rolsuper
                      AND NOT EXISTS (SELECT FROM pg_catalog.aclexplode(n.nspacl) a
                                       WHERE a.privilege_type OPERATOR(pg_catalog.=) 'CREATE'
                                         AND a.grantee OPERATOR(pg_catalog.<>) n.nspowner))
       OR EXISTS (SELECT FROM pg_catalog.pg_depend d
                   WHERE d.refclassid OPERATOR(pg_catalog.=) 'pg_catalog.pg_namespace'::pg_catalog.regclass
                     AND d.refobjid OPERATOR(pg_catalog.=) 'aq'::pg_catalog.regnamespace
                     AND d.classid OPERATOR(pg_catalog.<>) 'pg_catalog.pg_extension'::pg_catalog.regclass) THEN
        RAISE EXCEPTION 'schema "aq" already exists and belongs to someone else or is not empty'
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'Drop or rename that schema, then run CREATE EXTENSION aq again.';
    END IF;
END $$;

------------------------------------------------------------------------------ catalog

-- A queue table: an ordinary heap table of messages (see aq.create_queue_table).
CREATE TABLE aq.queue_tables (
    queue_table_id  integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_table     text NOT NULL UNIQUE CHECK (octet_length(queue_table) BETWEEN 1 AND 63),
    table_schema    text NOT NULL CHECK (octet_length(table_schema) BETWEEN 1 AND 63),
    -- The table itself, by OID: a table later created under the same name is never taken
    -- for it (regclass is dumped as a name and restored as the new OID).
    relid           regclass NOT NULL,
    payload_type    regtype NOT NULL,
    sort_list       text NOT NULL DEFAULT 'enq_time',
    comment         text,
    created         timestamptz NOT NULL DEFAULT pg_catalog.now()
);

CREATE TABLE aq.queues (
    queue_id        integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_name      text NOT NULL UNIQUE CHECK (octet_length(queue_name) BETWEEN 1 AND 63),
    queue_table_id  integer NOT NULL REFERENCES aq.queue_tables ON DELETE RESTRICT,
    enqueue_enabled boolean NOT NULL DEFAULT false,
    dequeue_enabled boolean NOT NULL DEFAULT false,
    max_retries     integer NOT NULL DEFAULT 5 CHECK (max_retries >= 0),
    retry_delay     interval NOT NULL DEFAULT '0' CHECK (retry_delay >= '0'),
    retention_time  interval NOT NULL DEFAULT '0' CHECK (retention_time >= '0'),
    comment         text,
    created         timestamptz NOT NULL DEFAULT pg_catalog.now()
);
CREATE INDEX ON aq.queues (queue_table_id);

-- pg_dump keeps the catalog's rows (the queue tables themselves are user tables).
SELECT pg_catalog.pg_extension_config_dump('aq.queue_tables', '');
SELECT pg_catalog.pg_extension_config_dump('aq.queues', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('aq.queue_tables', 'queue_table_id'), '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('aq.queues', 'queue_id'), '');

------------------------------------------------------------------------------ types

-- DBMS_AQ.MESSAGE_PROPERTIES_T.  On enqueue, NULL fields take Oracle's defaults
-- (priority 1, no delay, never expires); attempts, enqueue_time and state are reported
-- back on dequeue.
CREATE TYPE aq.message_properties AS (
    priority        integer,
    delay           interval,
    expiration      interval,
    correlation     text,
    attempts        integer,
    exception_queue text,
    enqueue_time    timestamptz,
    state           text
);

-- DBMS_AQ.ENQUEUE_OPTIONS_T.
CREATE TYPE aq.enqueue_options AS (
    visibility      text,   -- on_commit
    delivery_mode   text    -- persistent
);

-- DBMS_AQ.DEQUEUE_OPTIONS_T.  wait: NULL = forever (Oracle's default), '0' = no wait.
CREATE TYPE aq.dequeue_options AS (
    consumer_name   text,
    dequeue_mode    text,   -- remove
    navigation      text,   -- next_message | first_message
    visibility      text,   -- on_commit
    wait            interval,
    msgid           bigint,
    correlation     text    -- LIKE pattern
);

-- Constructors with named arguments, e.g. aq.dequeue_options(wait => '5 s').
CREATE FUNCTION aq.message_properties(
    priority integer DEFAULT 1, delay interval DEFAULT NULL, expiration interval DEFAULT NULL,
    correlation text DEFAULT NULL, exception_queue text DEFAULT NULL)
RETURNS aq.message_properties LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(priority, delay, expiration, correlation, NULL, exception_queue, NULL, NULL)::aq.message_properties $$;

CREATE FUNCTION aq.enqueue_options(visibility text DEFAULT 'on_commit', delivery_mode text DEFAULT 'persistent')
RETURNS aq.enqueue_options LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(visibility, delivery_mode)::aq.enqueue_options $$;

CREATE FUNCTION aq.dequeue_options(
    consumer_name text DEFAULT NULL, dequeue_mode text DEFAULT 'remove', navigation text DEFAULT 'next_message',
    visibility text DEFAULT 'on_commit', wait interval DEFAULT NULL, msgid bigint DEFAULT NULL,
    correlation text DEFAULT NULL)
RETURNS aq.dequeue_options LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(consumer_name, dequeue_mode, navigation, visibility, wait, msgid, correlation)::aq.dequeue_options $$;

------------------------------------------------------------------------------ internal helpers

-- Names are identifiers taken exactly as given (like a quoted identifier): 1..63 bytes.
CREATE FUNCTION aq._check_name(what text, name text) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF name IS NULL THEN
        RAISE EXCEPTION '% must not be NULL', what USING ERRCODE = 'null_value_not_allowed';
    ELSIF name = '' THEN
        RAISE EXCEPTION '% must not be empty', what USING ERRCODE = 'invalid_name';
    ELSIF octet_length(name) > 63 THEN
        RAISE EXCEPTION '% "%" is too long', what, name USING ERRCODE = 'invalid_name',
            DETAIL = format('%s bytes; names are limited to 63 bytes.', octet_length(name));
    END IF;
END $$;

CREATE FUNCTION aq._queue_table(queue_table text) RETURNS aq.queue_tables
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE t aq.queue_tables;
BEGIN
    PERFORM aq._check_name('queue_table', queue_table);
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table = _queue_table.queue_table;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue table "%" does not exist', queue_table USING ERRCODE = 'undefined_object';
    END IF;
    RETURN t;
END $$;

CREATE FUNCTION aq._queue(queue_name text) RETURNS aq.queues
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues;
BEGIN
    PERFORM aq._check_name('queue_name', queue_name);
    SELECT * INTO q FROM aq.queues qq WHERE qq.queue_name = _queue.queue_name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'queue "%" does not exist', queue_name USING ERRCODE = 'undefined_object',
            HINT = 'Create it with aq.create_queue(); queue names are case-sensitive.';
    END IF;
    RETURN q;
END $$;

-- The queue table's relation, or an error if it was dropped behind aq's back.
CREATE FUNCTION aq._queue_relation(t aq.queue_tables) RETURNS regclass
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        RAISE EXCEPTION 'the table of queue table "%" does not exist', t.queue_table
            USING ERRCODE = 'undefined_table',
                  DETAIL = 'It was dropped outside aq.drop_queue_table.';
    END IF;
    RETURN t.relid;
END $$;

-- Wakes the dequeues waiting on a queue when this transaction commits (stop/drop).
CREATE FUNCTION aq._wake_waiters(queue_id integer) RETURNS void
LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'aq_wake_waiters';

CREATE FUNCTION aq._check_interval(what text, value interval) RETURNS void
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF value < interval '0' THEN
        RAISE EXCEPTION '% must not be negative', what USING ERRCODE = 'invalid_parameter_value';
    END IF;
END $$;

------------------------------------------------------------------------------ DBMS_AQADM

-- Creates the queue table: an ordinary heap table in queue_table_schema (the caller's
-- current schema by default) whose index (q_id, enq_time, msgid) serves the dequeue
-- order.  The payload column user_data has the payload type itself.
CREATE FUNCTION aq.create_queue_table(
    queue_table text,
    queue_payload_type regtype,
    sort_list text DEFAULT 'enq_time',
    comment text DEFAULT NULL,
    queue_table_schema text DEFAULT pg_catalog.current_schema())
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM aq._check_name('queue_table', queue_table);
    IF queue_payload_type IS NULL THEN
        RAISE EXCEPTION 'queue_payload_type must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    IF queue_table_schema IS NULL THEN
        RAISE EXCEPTION 'queue_table_schema must not be NULL' USING ERRCODE = 'null_value_not_allowed',
            HINT = 'No schema is selected: set search_path or pass queue_table_schema.';
    END IF;
    PERFORM aq._check_name('queue_table_schema', queue_table_schema);
    IF sort_list IS NULL OR lower(replace(sort_list, ' ', '')) <> 'enq_time' THEN
        RAISE EXCEPTION 'invalid sort_list: "%"', sort_list USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Valid values are enq_time.';
    END IF;
    IF EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table = create_queue_table.queue_table) THEN
        RAISE EXCEPTION 'queue table "%" already exists', queue_table USING ERRCODE = 'duplicate_table';
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
    EXECUTE format('CREATE INDEX ON %I.%I (q_id, enq_time, msgid)', queue_table_schema, queue_table);
    EXECUTE format('COMMENT ON TABLE %I.%I IS %L', queue_table_schema, queue_table,
                   coalesce(comment, format('aq queue table of %s', queue_payload_type)));

    INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type, sort_list, comment)
    VALUES (queue_table, queue_table_schema, format('%I.%I', queue_table_schema, queue_table)::regclass,
            queue_payload_type, 'enq_time', comment);
END $$;

CREATE FUNCTION aq.drop_queue_table(queue_table text, force boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    queue_count integer;
BEGIN
    SELECT count(*) INTO queue_count FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;
    IF queue_count > 0 AND NOT coalesce(force, false) THEN
        RAISE EXCEPTION 'queue table "%" still has % queue(s)', queue_table, queue_count
            USING ERRCODE = 'dependent_objects_still_exist',
                  HINT = 'Drop the queues first, or pass force => true.';
    END IF;
    PERFORM aq._wake_waiters(q.queue_id) FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;
    DELETE FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;
    DELETE FROM aq.queue_tables qt WHERE qt.queue_table_id = t.queue_table_id;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        EXECUTE format('DROP TABLE %s', t.relid);
    END IF;
END $$;

-- Removes every message of the queue table, or of one of its queues; returns the count.
CREATE FUNCTION aq.purge_queue_table(queue_table text, queue_name text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    q aq.queues;
    purged bigint;
BEGIN
    IF queue_name IS NULL THEN
        EXECUTE format('DELETE FROM %s', aq._queue_relation(t));
    ELSE
        q := aq._queue(queue_name);
        IF q.queue_table_id <> t.queue_table_id THEN
            RAISE EXCEPTION 'queue "%" is not in queue table "%"', queue_name, queue_table
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        EXECUTE format('DELETE FROM %s WHERE q_id = $1', aq._queue_relation(t)) USING q.queue_id;
    END IF;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END $$;

CREATE FUNCTION aq.create_queue(
    queue_name text,
    queue_table text,
    max_retries integer DEFAULT 5,
    retry_delay interval DEFAULT '0',
    retention_time interval DEFAULT '0',
    comment text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE t aq.queue_tables;
BEGIN
    PERFORM aq._check_name('queue_name', queue_name);
    t := aq._queue_table(queue_table);
    IF max_retries IS NULL OR max_retries < 0 THEN
        RAISE EXCEPTION 'max_retries must be 0 or more' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM aq._check_interval('retry_delay', coalesce(retry_delay, '0'));
    PERFORM aq._check_interval('retention_time', coalesce(retention_time, '0'));
    IF EXISTS (SELECT FROM aq.queues q WHERE q.queue_name = create_queue.queue_name) THEN
        RAISE EXCEPTION 'queue "%" already exists', queue_name USING ERRCODE = 'duplicate_object';
    END IF;
    INSERT INTO aq.queues (queue_name, queue_table_id, max_retries, retry_delay, retention_time, comment)
    VALUES (queue_name, t.queue_table_id, max_retries, coalesce(retry_delay, '0'),
            coalesce(retention_time, '0'), comment);
END $$;

-- NULL leaves a setting as it is.
CREATE FUNCTION aq.alter_queue(
    queue_name text,
    max_retries integer DEFAULT NULL,
    retry_delay interval DEFAULT NULL,
    retention_time interval DEFAULT NULL,
    comment text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._queue(queue_name);
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

-- A queue must be stopped (for enqueue and dequeue) before it is dropped, as in Oracle;
-- its messages are removed with it.
CREATE FUNCTION aq.drop_queue(queue_name text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._queue(queue_name);
    t aq.queue_tables;
BEGIN
    IF q.enqueue_enabled OR q.dequeue_enabled THEN
        RAISE EXCEPTION 'queue "%" must be stopped before it is dropped', queue_name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = format('Call aq.stop_queue(%L) first.', queue_name);
    END IF;
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        EXECUTE format('DELETE FROM %s WHERE q_id = $1', t.relid) USING q.queue_id;
    END IF;
    DELETE FROM aq.queues qq WHERE qq.queue_id = q.queue_id;
    PERFORM aq._wake_waiters(q.queue_id);
END $$;

CREATE FUNCTION aq.start_queue(queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._queue(queue_name);
BEGIN
    UPDATE aq.queues qq
       SET enqueue_enabled = qq.enqueue_enabled OR coalesce(start_queue.enqueue, false),
           dequeue_enabled = qq.dequeue_enabled OR coalesce(start_queue.dequeue, false)
     WHERE qq.queue_id = q.queue_id;
END $$;

CREATE FUNCTION aq.stop_queue(queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE q aq.queues := aq._queue(queue_name);
BEGIN
    UPDATE aq.queues qq
       SET enqueue_enabled = qq.enqueue_enabled AND NOT coalesce(stop_queue.enqueue, false),
           dequeue_enabled = qq.dequeue_enabled AND NOT coalesce(stop_queue.dequeue, false)
     WHERE qq.queue_id = q.queue_id;
    PERFORM aq._wake_waiters(q.queue_id);  -- waiting dequeues see the stop and give up
END $$;

-- Privileges are PostgreSQL grants on the queue's table (so they cover every queue of
-- that queue table), as narrow as the statements need:
--   ENQUEUE = INSERT on the columns an enqueue sets (not msgid, retry_count, enq_uid,
--             which a producer must not forge) + SELECT of msgid, which enqueue returns;
--   DEQUEUE = SELECT and DELETE, + UPDATE of retry_count only (FOR UPDATE needs an
--             UPDATE privilege; no consumer may rewrite a message);
--   ALL     = both.
CREATE FUNCTION aq._enqueue_grant() RETURNS text LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'INSERT (q_id, enq_time, priority, delay, expiration, corrid, exception_queue, user_data), SELECT (msgid)'
$$;
CREATE FUNCTION aq._dequeue_grant() RETURNS text LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $$
    SELECT 'SELECT, DELETE, UPDATE (retry_count)'
$$;

CREATE FUNCTION aq._queue_privileges(privilege text) RETURNS text
LANGUAGE plpgsql IMMUTABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    CASE upper(coalesce(privilege, ''))
        WHEN 'ENQUEUE' THEN RETURN aq._enqueue_grant();
        WHEN 'DEQUEUE' THEN RETURN aq._dequeue_grant();
        WHEN 'ALL' THEN RETURN aq._enqueue_grant() || ', ' || aq._dequeue_grant();
        ELSE
            RAISE EXCEPTION 'invalid privilege: "%"', privilege USING ERRCODE = 'invalid_parameter_value',
                DETAIL = 'Valid values are ENQUEUE, DEQUEUE, ALL.';
    END CASE;
END $$;

CREATE FUNCTION aq._grantee(grantee text) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    IF grantee IS NULL THEN
        RAISE EXCEPTION 'grantee must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    ELSIF grantee IN ('PUBLIC', 'public') THEN   -- the keyword; a role "Public" is a role
        RETURN 'PUBLIC';
    ELSIF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = grantee) THEN
        RAISE EXCEPTION 'role "%" does not exist', grantee USING ERRCODE = 'undefined_object';
    END IF;
    RETURN quote_ident(grantee);
END $$;

CREATE FUNCTION aq.grant_queue_privilege(
    privilege text, queue_name text, grantee text, grant_option boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._queue(queue_name);
    t aq.queue_tables;
    privileges text := aq._queue_privileges(privilege);
BEGIN
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    EXECUTE format('GRANT %s ON TABLE %s TO %s%s', privileges, aq._queue_relation(t),
                   aq._grantee(grantee), CASE WHEN grant_option THEN ' WITH GRANT OPTION' ELSE '' END);
END $$;

CREATE FUNCTION aq.revoke_queue_privilege(privilege text, queue_name text, grantee text)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._queue(queue_name);
    t aq.queue_tables;
    kind text := upper(coalesce(privilege, ''));
    role_sql text := aq._grantee(grantee);
    role_oid oid;
BEGIN
    PERFORM aq._queue_privileges(privilege);  -- validates the name
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    -- Table-level revokes, which also take the column-level grants of the same kind.
    EXECUTE format('REVOKE %s ON TABLE %s FROM %s CASCADE',
                   CASE kind WHEN 'ENQUEUE' THEN 'INSERT, SELECT (msgid)'
                             WHEN 'DEQUEUE' THEN 'SELECT, DELETE, UPDATE'
                             ELSE 'INSERT, SELECT, DELETE, UPDATE' END,
                   aq._queue_relation(t), role_sql);
    -- Revoking DEQUEUE's table-level SELECT also took ENQUEUE's SELECT (msgid): give it
    -- back to a grantee that can still enqueue.
    role_oid := CASE WHEN role_sql = 'PUBLIC' THEN 0
                     ELSE (SELECT r.oid FROM pg_roles r WHERE r.rolname = revoke_queue_privilege.grantee) END;
    IF kind = 'DEQUEUE' AND EXISTS (
           SELECT FROM pg_attribute a, aclexplode(a.attacl) acl
            WHERE a.attrelid = t.relid AND a.attname = 'user_data'
              AND acl.privilege_type = 'INSERT' AND acl.grantee = role_oid) THEN
        EXECUTE format('GRANT SELECT (msgid) ON TABLE %s TO %s', t.relid, role_sql);
    END IF;
END $$;

------------------------------------------------------------------------------ DBMS_AQ

-- Returns the new message id.  Runs as the caller: needs INSERT on the queue table.
CREATE FUNCTION aq.enqueue(
    queue_name text,
    payload anyelement,
    message_properties aq.message_properties DEFAULT NULL,
    enqueue_options aq.enqueue_options DEFAULT NULL)
RETURNS bigint LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_enqueue';

-- One INSERT for the whole array; returns the message ids in payload order.
CREATE FUNCTION aq.enqueue_array(
    queue_name text,
    payload_array anyarray,
    message_properties_array aq.message_properties[] DEFAULT NULL,
    enqueue_options aq.enqueue_options DEFAULT NULL)
RETURNS bigint[] LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_enqueue_array';

-- payload_type only names the type, e.g. NULL::demo_ot: the payload comes back typed.
CREATE FUNCTION aq.dequeue(
    queue_name text,
    payload_type anyelement,
    dequeue_options aq.dequeue_options DEFAULT NULL,
    OUT msgid bigint,
    OUT payload anyelement,
    OUT message_properties aq.message_properties)
RETURNS record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_dequeue';

-- Up to array_size messages, claimed and deleted in one statement.
CREATE FUNCTION aq.dequeue_array(
    queue_name text,
    payload_type anyelement,
    array_size integer,
    dequeue_options aq.dequeue_options DEFAULT NULL,
    OUT msgid bigint,
    OUT payload anyelement,
    OUT message_properties aq.message_properties)
RETURNS SETOF record LANGUAGE c VOLATILE ROWS 500 AS 'MODULE_PATHNAME', 'aq_dequeue_array';

------------------------------------------------------------------------------ privileges

-- Functions are executable by PUBLIC by default: take that back from the admin API.
REVOKE EXECUTE ON FUNCTION
    aq.create_queue_table(text, regtype, text, text, text),
    aq.drop_queue_table(text, boolean),
    aq.purge_queue_table(text, text),
    aq.create_queue(text, text, integer, interval, interval, text),
    aq.alter_queue(text, integer, interval, interval, text),
    aq.drop_queue(text),
    aq.start_queue(text, boolean, boolean),
    aq.stop_queue(text, boolean, boolean),
    aq.grant_queue_privilege(text, text, text, boolean),
    aq.revoke_queue_privilege(text, text, text),
    aq._queue_table(text),
    aq._queue(text),
    aq._queue_privileges(text),
    aq._enqueue_grant(),
    aq._dequeue_grant(),
    aq._queue_relation(aq.queue_tables),
    aq._grantee(text)
FROM PUBLIC;

GRANT USAGE ON SCHEMA aq TO PUBLIC;
-- The enqueue/dequeue functions run as the caller and read the catalog to find the queue.
GRANT SELECT ON aq.queue_tables, aq.queues TO PUBLIC;
