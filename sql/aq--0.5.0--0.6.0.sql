-- aq 0.6.0: the rest of Oracle AQ's messaging model.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.6.0'" to load this file. \quit

-- ---------------------------------------------------------------- waits in Oracle's forms

-- A dequeue's or LISTEN's wait as an Oracle application writes it (src/pg/wait_time.cpp):
-- 'forever' or NULL, 'no_wait' or 0, a number of seconds (-1 = DBMS_AQ.FOREVER), an interval.
CREATE TYPE aq.wait_time;
CREATE FUNCTION aq._wait_time_in(cstring) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_in';
CREATE FUNCTION aq._wait_time_out(aq.wait_time) RETURNS cstring
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_out';
CREATE FUNCTION aq._wait_time_recv(internal) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_recv';
CREATE FUNCTION aq._wait_time_send(aq.wait_time) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_send';
CREATE TYPE aq.wait_time (
    INPUT = aq._wait_time_in, OUTPUT = aq._wait_time_out, RECEIVE = aq._wait_time_recv, SEND = aq._wait_time_send,
    INTERNALLENGTH = 8, PASSEDBYVALUE, ALIGNMENT = double);
COMMENT ON TYPE aq.wait_time IS
    'A wait (Oracle''s WAIT): ''forever'' or NULL, ''no_wait'' or 0, a number of seconds (-1 = forever), or an interval';
CREATE FUNCTION aq._wait_time(smallint) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_int2';
CREATE FUNCTION aq._wait_time(integer) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_int4';
CREATE FUNCTION aq._wait_time(bigint) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_int8';
CREATE FUNCTION aq._wait_time(numeric) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_numeric';
CREATE FUNCTION aq._wait_time(double precision) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_float8';
CREATE FUNCTION aq._wait_time(interval) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_interval';
-- Every integer type, as drivers send a number of seconds as whichever fits (one step only: an
-- implicit cast is never chained in a function call).
CREATE CAST (smallint AS aq.wait_time) WITH FUNCTION aq._wait_time(smallint) AS IMPLICIT;
CREATE CAST (integer AS aq.wait_time) WITH FUNCTION aq._wait_time(integer) AS IMPLICIT;
CREATE CAST (bigint AS aq.wait_time) WITH FUNCTION aq._wait_time(bigint) AS IMPLICIT;
CREATE CAST (numeric AS aq.wait_time) WITH FUNCTION aq._wait_time(numeric) AS IMPLICIT;
CREATE CAST (double precision AS aq.wait_time) WITH FUNCTION aq._wait_time(double precision) AS IMPLICIT;
CREATE CAST (interval AS aq.wait_time) WITH FUNCTION aq._wait_time(interval) AS IMPLICIT;
-- The interval that aq.dequeue_options holds (NULL = forever, as before): the constructor below
-- takes an aq.wait_time and stores this.
CREATE FUNCTION aq._wait_interval(aq.wait_time) RETURNS interval
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_interval';
-- The type's input and output (a cast to text calls them as the caller), its casts and
-- _wait_interval run in the caller's expressions: PUBLIC keeps EXECUTE on them (they only convert).

-- ---------------------------------------------------------------- dequeue conditions

-- Oracle's DEQ_CONDITION: a boolean expression over the message's properties and payload
-- (tab.user_data.<field>, priority, corrid, ...), parsed by PostgreSQL's parser as one
-- expression and evaluated with the caller's privileges (src/queue/condition.hpp).
ALTER TYPE aq.dequeue_options ADD ATTRIBUTE deq_condition text;

-- The constructor gains the argument and takes an aq.wait_time (a new signature: the old one is
-- replaced, and with it PUBLIC's EXECUTE, which is all it ever had).
DROP FUNCTION aq.dequeue_options(text, text, text, text, interval, bigint, text);
CREATE FUNCTION aq.dequeue_options(
    consumer_name text DEFAULT NULL, dequeue_mode text DEFAULT 'remove', navigation text DEFAULT 'next_message',
    visibility text DEFAULT 'on_commit', wait aq.wait_time DEFAULT NULL, msgid bigint DEFAULT NULL,
    correlation text DEFAULT NULL, deq_condition text DEFAULT NULL)
RETURNS aq.dequeue_options LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(consumer_name, dequeue_mode, navigation, visibility, aq._wait_interval(wait), msgid, correlation,
                 deq_condition)::aq.dequeue_options $$;

-- ---------------------------------------------------------------- LISTEN

-- Oracle's SYS.AQ$_AGENT: a consumer (name; NULL for a single-consumer queue), the queue it
-- listens on (address: the queue's name) and a protocol (0, the only one: local queues).
CREATE TYPE aq.agent AS (name text, address text, protocol integer);
CREATE FUNCTION aq.agent(name text DEFAULT NULL, address text DEFAULT NULL, protocol integer DEFAULT 0)
RETURNS aq.agent LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(name, address, protocol)::aq.agent $$;

-- Oracle's DBMS_AQ.LISTEN: waits until one of the agents' queues has a message a dequeue could
-- take now, and returns that agent (the first in the list that has one); it takes nothing.  A
-- commit wakes it, as it wakes a waiting dequeue.  wait: NULL waits forever, '0' not at all; at
-- the end of the wait QA254 (ORA-25254).  The caller needs SELECT on the queue tables (DEQUEUE).
CREATE FUNCTION aq.listen(agent_list aq.agent[], wait aq.wait_time DEFAULT NULL)
RETURNS aq.agent LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_listen';

-- ---------------------------------------------------------------- multi-consumer queue tables
--
-- A multi-consumer queue table (create_queue_table(..., multiple_consumers => true)) keeps each
-- message once, in the queue table, and one delivery row per recipient in its delivery table
-- aq$_<queue_table>_i (Oracle's AQ$_<qt>_I), made by the enqueue: to every subscriber of the
-- queue whose rule the message matches, or to the message's own recipient_list.  A dequeue with
-- consumer_name claims that consumer's delivery rows as a single-consumer dequeue claims messages
-- (FOR UPDATE SKIP LOCKED, the row's xmax is the claim: retries.hpp), so each consumer has its own
-- order, attempts, retries and exception queue; the message row goes once no delivery is left
-- (src/queue/deliveries.hpp).  A delivery row has the columns of a message that a dequeue orders,
-- filters and retries by, under the same names.

ALTER TABLE aq.queue_tables
    ADD COLUMN multiple_consumers boolean NOT NULL DEFAULT false,
    ADD COLUMN message_grouping text NOT NULL DEFAULT 'none' CHECK (message_grouping IN ('none', 'transactional')),
    -- The delivery table of a multi-consumer queue table, by OID (as relid).
    ADD COLUMN delivery_relid regclass;
GRANT INSERT (multiple_consumers, message_grouping, delivery_relid) ON aq.queue_tables TO PUBLIC;

-- Oracle's subscribers (DBMS_AQADM.ADD_SUBSCRIBER): the consumers of a multi-consumer queue that
-- receive its messages without being named in them.  rule: a condition over the message
-- (src/queue/condition.hpp), checked when it is set; NULL takes every message.
CREATE TABLE aq.subscribers (
    subscriber_id   integer GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    queue_id        integer NOT NULL REFERENCES aq.queues ON DELETE CASCADE,
    consumer_name   text NOT NULL CHECK (octet_length(consumer_name) BETWEEN 1 AND 63),
    address         text,
    protocol        integer NOT NULL DEFAULT 0,
    rule            text,
    created         timestamptz NOT NULL DEFAULT pg_catalog.now(),
    UNIQUE (queue_id, consumer_name)
);
SELECT pg_catalog.pg_extension_config_dump('aq.subscribers', '');
SELECT pg_catalog.pg_extension_config_dump(pg_catalog.pg_get_serial_sequence('aq.subscribers', 'subscriber_id'), '');

-- The delivery table's and the subscriber view's names.
CREATE FUNCTION aq._delivery_table(queue_table text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'aq$_' || queue_table || '_i' $$;
CREATE FUNCTION aq._subscriber_view(queue_table text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT SET search_path = pg_catalog, pg_temp
AS $$ SELECT 'aq$' || queue_table || '_s' $$;

-- A rule, parsed and analyzed against the queue table as a dequeue condition is (42601, 22023
-- and PostgreSQL's own SQLSTATEs, with the position in the rule).
-- Called by add_subscriber and alter_subscriber, which run as the caller (the queue table's owner):
-- so executable by PUBLIC, as the other helpers of the admin functions.  It parses and analyzes the
-- rule against the table's row type and runs nothing.
CREATE FUNCTION aq._check_rule(queue_table regclass, rule text) RETURNS void
LANGUAGE c STABLE STRICT AS 'MODULE_PATHNAME', 'aq_check_rule';

-- create_queue_table gains Oracle's multiple_consumers and message_grouping (after the existing
-- arguments, so that calls by position keep their meaning).  A new signature: the old form's
-- EXECUTE grants are carried over below.
CREATE FUNCTION aq.create_queue_table(
    queue_table text,
    queue_payload_type regtype,
    sort_list text DEFAULT 'enq_time',
    comment text DEFAULT NULL,
    queue_table_schema text DEFAULT pg_catalog.current_schema(),
    multiple_consumers boolean DEFAULT false,
    message_grouping text DEFAULT 'none')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sort_order text := lower(replace(sort_list, ' ', ''));
    grouping text := lower(message_grouping);
    multi boolean := coalesce(multiple_consumers, false);
    t aq.queue_tables;
    deliveries regclass;
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
    IF grouping IN ('dbms_aqadm.none', 'dbms_aqadm.transactional') THEN
        grouping := substr(grouping, 12);
    END IF;
    IF grouping IS NULL OR grouping NOT IN ('none', 'transactional') THEN
        RAISE EXCEPTION 'invalid message_grouping: "%"', message_grouping USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Valid values are none and transactional.';
    END IF;
    IF grouping = 'transactional' AND multi THEN
        RAISE EXCEPTION 'message_grouping transactional is not supported yet for multi-consumer queue tables'
            USING ERRCODE = 'feature_not_supported';
    END IF;
    IF grouping = 'transactional' AND sort_order <> 'enq_time' THEN
        RAISE EXCEPTION 'message_grouping transactional orders a queue table by its transaction groups'
            USING ERRCODE = 'feature_not_supported',
                  DETAIL = format('sort_list %s cannot be combined with it.', sort_list),
                  HINT = 'Leave sort_list at enq_time.';
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
        '  user_data %s NOT NULL%s'
        ') WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05)',
        queue_table_schema, queue_table, queue_payload_type,
        -- The enqueuing transaction's group (groups.hpp).
        CASE WHEN grouping = 'transactional' THEN ', transaction_group bigint NOT NULL' ELSE '' END);
    -- The enq_time order's index serves every queue table (the exception queues' order, and
    -- the first-in order of a priority queue table's browse by msgid).
    EXECUTE format('CREATE INDEX ON %I.%I (q_id, enq_time, msgid)', queue_table_schema, queue_table);
    EXECUTE format('COMMENT ON TABLE %I.%I IS %L', queue_table_schema, queue_table,
                   coalesce(comment, format('aq queue table of %s', queue_payload_type)));
    IF multi THEN
        EXECUTE format(
            'CREATE TABLE %I.%I ('
            '  msgid bigint NOT NULL,'
            '  consumer_name text COLLATE pg_catalog."C" NOT NULL,'
            '  q_id integer NOT NULL,'
            '  priority integer NOT NULL,'
            '  enq_time timestamptz NOT NULL,'
            '  delay timestamptz,'
            '  expiration timestamptz,'
            '  retry_count integer NOT NULL DEFAULT 0,'
            '  exception_queue text,'
            -- Set when the delivery moves to an exception queue: it then keeps its message with it.
            '  corrid text,'
            '  enq_uid text,'
            '  user_data %s'
            ') WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05)',
            queue_table_schema, aq._delivery_table(queue_table), queue_payload_type);
        deliveries := format('%I.%I', queue_table_schema, aq._delivery_table(queue_table))::regclass;
        EXECUTE format('COMMENT ON TABLE %s IS %L', deliveries,
                       format('aq deliveries of multi-consumer queue table %s: one row per message and recipient', queue_table));
    END IF;

    INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type, sort_list, comment,
                                 multiple_consumers, message_grouping, delivery_relid)
    VALUES (queue_table, queue_table_schema, format('%I.%I', queue_table_schema, queue_table)::regclass,
            queue_payload_type, sort_order, comment, multi, grouping, deliveries)
    RETURNING * INTO t;
    PERFORM aq._queue_table_objects(t);
END $$;

-- The objects around a queue table (create_queue_table): for a multi-consumer one also the
-- delivery table's indexes (per consumer in the queue's order; delays and expirations), an
-- AQ$ view with a row per message and recipient (Oracle's CONSUMER_NAME column), and the
-- subscriber view aq$<queue_table>_s.
CREATE OR REPLACE FUNCTION aq._queue_table_objects(t aq.queue_tables) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    by_priority boolean := t.sort_list = 'priority,enq_time';
    order_columns text := CASE WHEN by_priority THEN 'priority, enq_time, msgid' ELSE 'enq_time, msgid' END;
    view_name text := aq._queue_table_view(t.queue_table);
BEGIN
    IF by_priority THEN
        EXECUTE format('CREATE INDEX ON %s (q_id, priority, enq_time, msgid)', t.relid);
    END IF;
    IF t.message_grouping = 'transactional' THEN
        -- The order of a grouped queue table: group by group (groups.hpp).
        EXECUTE format('CREATE INDEX ON %s (q_id, transaction_group, enq_time, msgid) WITH (deduplicate_items = off)',
                       t.relid);
    END IF;
    EXECUTE format('CREATE INDEX ON %s (q_id, corrid COLLATE pg_catalog."C", %s) WHERE corrid IS NOT NULL', t.relid, order_columns);
    EXECUTE format('CREATE INDEX ON %s (q_id, delay) WHERE delay IS NOT NULL', t.relid);
    EXECUTE format('CREATE INDEX ON %s (q_id, expiration) WHERE expiration IS NOT NULL', t.relid);
    IF t.delivery_relid IS NULL THEN
        EXECUTE format(
            'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
            ' SELECT q.queue_name AS queue, m.msgid AS msg_id, m.corrid AS corr_id, m.priority AS msg_priority,'
            '        CASE WHEN q.queue_type = ''exception_queue'' OR m.expiration <= pg_catalog.now() THEN ''EXPIRED'''
            '             WHEN m.delay > pg_catalog.now() THEN ''WAITING'' ELSE ''READY'' END AS msg_state,'
            '        m.delay, m.expiration, m.enq_time, m.enq_uid AS enq_user_id, m.retry_count,'
            '        coalesce(m.exception_queue, %L) AS exception_queue,'
            '        m.user_data'
            '   FROM %s m LEFT JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) m.q_id',
            t.table_schema, view_name, aq._default_exception_queue(t.queue_table), t.relid);
    ELSE
        -- A consumer's deliveries in the queue's order (a dequeue reads only its own).  Its keys
        -- are unique (msgid): deduplication would only cost the fan-out a pass per full page.
        EXECUTE format('CREATE INDEX ON %s (q_id, consumer_name, %s) WITH (deduplicate_items = off)', t.delivery_relid,
                       order_columns);
        EXECUTE format('CREATE INDEX ON %s (q_id, delay) WHERE delay IS NOT NULL', t.delivery_relid);
        EXECUTE format('CREATE INDEX ON %s (q_id, expiration) WHERE expiration IS NOT NULL', t.delivery_relid);
        EXECUTE format(
            'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
            ' SELECT q.queue_name AS queue, d.msgid AS msg_id, coalesce(d.corrid, m.corrid) AS corr_id, d.priority AS msg_priority,'
            '        CASE WHEN q.queue_type = ''exception_queue'' OR d.expiration <= pg_catalog.now() THEN ''EXPIRED'''
            '             WHEN d.delay > pg_catalog.now() THEN ''WAITING'' ELSE ''READY'' END AS msg_state,'
            '        d.delay, d.expiration, d.enq_time, coalesce(d.enq_uid, m.enq_uid) AS enq_user_id, d.retry_count,'
            '        coalesce(d.exception_queue, %L) AS exception_queue,'
            '        d.consumer_name::text AS consumer_name,'
            '        coalesce(d.user_data, m.user_data) AS user_data'
            '   FROM %s d LEFT JOIN %s m ON m.msgid OPERATOR(pg_catalog.=) d.msgid'
            '   LEFT JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) d.q_id',
            t.table_schema, view_name, aq._default_exception_queue(t.queue_table), t.delivery_relid, t.relid);
        -- The subscriber view names the delivery table in a clause that reads nothing, so that
        -- it is found by that dependency when the queue table is dropped (never by a name alone),
        -- and reading it needs the privileges on the queue that reading the deliveries needs.
        EXECUTE format(
            'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
            ' SELECT q.queue_name AS queue, s.consumer_name AS name, s.address, s.protocol, s.rule, s.created'
            '   FROM aq.subscribers s JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) s.queue_id'
            '  WHERE q.queue_table_id OPERATOR(pg_catalog.=) %s'
            '    AND NOT EXISTS (SELECT FROM %s d WHERE false)',
            t.table_schema, aq._subscriber_view(t.queue_table), t.queue_table_id, t.delivery_relid);
        EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', t.table_schema, aq._subscriber_view(t.queue_table));
        EXECUTE format('COMMENT ON VIEW %I.%I IS %L', t.table_schema, aq._subscriber_view(t.queue_table),
                       format('The subscribers of the queues of aq queue table %s (Oracle''s AQ$%s_S).',
                              t.queue_table, t.queue_table));
    END IF;
    -- Reading it needs the table's privileges anyway (security_invoker).
    EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', t.table_schema, view_name);
    EXECUTE format('COMMENT ON VIEW %I.%I IS %L', t.table_schema, view_name,
                   format('The messages of aq queue table %s with their queue and state (Oracle''s AQ$%s).',
                          t.queue_table, t.queue_table));
    INSERT INTO aq.queues (queue_name, queue_table_id, queue_type, comment)
    VALUES (aq._default_exception_queue(t.queue_table), t.queue_table_id, 'exception_queue',
            format('default exception queue of %s', t.queue_table));
END $$;

-- The view of that name beside the table that depends on the table (found by the dependency,
-- never by a name alone).
CREATE FUNCTION aq._drop_dependent_view(relid regclass, view_name text) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE view_oid oid;
BEGIN
    SELECT v.oid INTO view_oid
      FROM pg_class tbl JOIN pg_class v ON v.relnamespace = tbl.relnamespace
     WHERE tbl.oid = relid AND v.relname = view_name AND v.relkind = 'v'
       AND EXISTS (SELECT FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                    WHERE r.ev_class = v.oid AND d.refclassid = 'pg_class'::regclass AND d.refobjid = relid);
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
    DELETE FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;  -- wakes their waiters; takes their subscribers
    DELETE FROM aq.queue_tables qt WHERE qt.queue_table_id = t.queue_table_id;
    IF t.delivery_relid IS NOT NULL AND EXISTS (SELECT FROM pg_class c WHERE c.oid = t.delivery_relid) THEN
        PERFORM aq._drop_dependent_view(t.delivery_relid, aq._subscriber_view(t.queue_table));
        PERFORM aq._drop_dependent_view(t.delivery_relid, aq._queue_table_view(t.queue_table));
        EXECUTE format('DROP TABLE %s', t.delivery_relid);
    END IF;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        PERFORM aq._drop_dependent_view(t.relid, aq._queue_table_view(t.queue_table));
        EXECUTE format('DROP TABLE %s', t.relid);
    END IF;
END $$;
DROP FUNCTION aq._drop_queue_table_view(aq.queue_tables);

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
    IF t.delivery_relid IS NOT NULL AND EXISTS (SELECT FROM pg_class c WHERE c.oid = t.delivery_relid) THEN
        EXECUTE format('DELETE FROM ONLY %s WHERE q_id = $1', t.delivery_relid) USING q.queue_id;
        -- Its messages that reached another queue (an exception queue) stay for those deliveries.
        EXECUTE format('DELETE FROM ONLY %s m WHERE m.q_id = $1 AND NOT EXISTS (SELECT FROM ONLY %s d WHERE d.msgid = m.msgid)',
                       t.relid, t.delivery_relid) USING q.queue_id;
    ELSIF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        EXECUTE format('DELETE FROM ONLY %s WHERE q_id = $1', t.relid) USING q.queue_id;
    END IF;
    DELETE FROM aq.queues qq WHERE qq.queue_id = q.queue_id;  -- wakes its waiters; takes its subscribers
END $$;

-- Of a multi-consumer queue table, the deliveries that match and then the messages that no
-- delivery is left for; returns how many messages were removed.
CREATE OR REPLACE FUNCTION aq.purge_queue_table(queue_table text, purge_condition aq.purge_condition DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    c aq.purge_condition := coalesce(purge_condition, ROW(NULL, NULL, NULL, NULL, NULL)::aq.purge_condition);
    q aq.queues;
    state text := upper(c.msg_state);
    exception_queues integer[];
    purged bigint;
    purged_ids bigint[];
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
    IF t.delivery_relid IS NULL THEN
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
    ELSE
        -- Two statements: the second must see what the first deleted.
        EXECUTE format(
            'WITH purged AS ('
            '  DELETE FROM ONLY %s d'
            '   WHERE ($1::integer IS NULL OR d.q_id = $1)'
            '     AND ($2::text IS NULL OR $2 = CASE WHEN d.q_id = ANY ($6) OR d.expiration <= now() THEN ''EXPIRED'''
            '                                        WHEN d.delay > now() THEN ''WAITING'' ELSE ''READY'' END)'
            '     AND ($3::text IS NULL OR coalesce(d.corrid, (SELECT m.corrid FROM ONLY %s m WHERE m.msgid = d.msgid)) LIKE $3)'
            '     AND ($4::timestamptz IS NULL OR d.enq_time < $4)'
            '     AND ($5::bigint[] IS NULL OR d.msgid = ANY ($5))'
            '  RETURNING d.msgid)'
            ' SELECT coalesce(array_agg(DISTINCT msgid), ''{}'') FROM purged',
            t.delivery_relid, aq._queue_relation(t))
        INTO purged_ids
        USING q.queue_id, state, c.correlation, c.enqueued_before, c.msgids, exception_queues;
        EXECUTE format('DELETE FROM ONLY %s m WHERE m.msgid = ANY ($1)'
                       '   AND NOT EXISTS (SELECT FROM ONLY %s d WHERE d.msgid = m.msgid)',
                       t.relid, t.delivery_relid)
        USING purged_ids;
    END IF;
    GET DIAGNOSTICS purged = ROW_COUNT;
    RETURN purged;
END $$;

-- The queue of queue_name after checking that the caller manages it and that it is a normal
-- queue of a multi-consumer queue table (Oracle's ORA-24039 otherwise).
CREATE FUNCTION aq._subscribed_queue(queue_name text, subscriber aq.agent) RETURNS aq.queues
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._owned_queue(queue_name);
    t aq.queue_tables;
BEGIN
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF NOT t.multiple_consumers THEN
        RAISE EXCEPTION 'queue "%" is a single-consumer queue', queue_name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('Queue table "%s" was not created for multiple consumers (ORA-24039 analogue).', t.queue_table),
                  HINT = 'Create the queue table with multiple_consumers => true.';
    END IF;
    IF q.queue_type = 'exception_queue' THEN
        RAISE EXCEPTION 'queue "%" is an exception queue', queue_name
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = 'An exception queue has no subscribers: its messages keep the consumer they were for.';
    END IF;
    IF subscriber IS NULL THEN
        RAISE EXCEPTION 'subscriber must not be NULL' USING ERRCODE = 'null_value_not_allowed';
    END IF;
    PERFORM aq._check_name('subscriber name', subscriber.name);
    IF subscriber.address IS NOT NULL OR coalesce(subscriber.protocol, 0) <> 0 THEN
        RAISE EXCEPTION 'subscriber "%" has an address', subscriber.name USING ERRCODE = 'feature_not_supported',
            DETAIL = 'Subscribers are consumers of this queue; forwarding to another queue (propagation) is not supported.',
            HINT = 'Pass aq.agent(name => ...) without address and protocol.';
    END IF;
    RETURN q;
END $$;

-- Oracle's DBMS_AQADM.ADD_SUBSCRIBER: from now on, every message enqueued to the queue without
-- a recipient_list is delivered to the subscriber too, if it matches the rule (NULL: every one).
CREATE FUNCTION aq.add_subscriber(
    queue_name text,
    subscriber aq.agent,
    rule text DEFAULT NULL,
    transformation text DEFAULT NULL,
    queue_to_queue boolean DEFAULT false,
    delivery_mode text DEFAULT 'persistent')
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._subscribed_queue(queue_name, subscriber);
    t aq.queue_tables;
BEGIN
    IF transformation IS NOT NULL THEN
        RAISE EXCEPTION 'transformations are not supported' USING ERRCODE = 'feature_not_supported',
            HINT = 'Pass transformation => NULL.';
    END IF;
    IF coalesce(queue_to_queue, false) THEN
        RAISE EXCEPTION 'queue_to_queue propagation is not supported' USING ERRCODE = 'feature_not_supported';
    END IF;
    IF lower(coalesce(delivery_mode, 'persistent')) NOT IN ('persistent', 'dbms_aqadm.persistent') THEN
        RAISE EXCEPTION 'invalid delivery_mode: "%"', delivery_mode USING ERRCODE = 'feature_not_supported',
            DETAIL = 'Messages are persistent; buffered messages are not part of aq.';
    END IF;
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF rule IS NOT NULL THEN
        PERFORM aq._check_rule(t.relid, rule);
    END IF;
    IF EXISTS (SELECT FROM aq.subscribers s WHERE s.queue_id = q.queue_id AND s.consumer_name = subscriber.name) THEN
        RAISE EXCEPTION 'subscriber "%" of queue "%" already exists', subscriber.name, queue_name
            USING ERRCODE = 'duplicate_object', DETAIL = 'ORA-24034 analogue.';
    END IF;
    INSERT INTO aq.subscribers (queue_id, consumer_name, rule) VALUES (q.queue_id, subscriber.name, rule);
END $$;

-- Oracle's DBMS_AQADM.ALTER_SUBSCRIBER: a new rule, for messages enqueued from now on.
CREATE FUNCTION aq.alter_subscriber(
    queue_name text,
    subscriber aq.agent,
    rule text,
    transformation text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._subscribed_queue(queue_name, subscriber);
    t aq.queue_tables;
BEGIN
    IF transformation IS NOT NULL THEN
        RAISE EXCEPTION 'transformations are not supported' USING ERRCODE = 'feature_not_supported',
            HINT = 'Pass transformation => NULL.';
    END IF;
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF rule IS NOT NULL THEN
        PERFORM aq._check_rule(t.relid, rule);
    END IF;
    UPDATE aq.subscribers s SET rule = alter_subscriber.rule
     WHERE s.queue_id = q.queue_id AND s.consumer_name = subscriber.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'subscriber "%" of queue "%" does not exist', subscriber.name, queue_name
            USING ERRCODE = 'undefined_object', DETAIL = 'ORA-24035 analogue.';
    END IF;
END $$;

-- Oracle's DBMS_AQADM.REMOVE_SUBSCRIBER: the subscriber and the messages waiting for it (in the
-- queue itself; what reached an exception queue stays there).
CREATE FUNCTION aq.remove_subscriber(queue_name text, subscriber aq.agent)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._subscribed_queue(queue_name, subscriber);
    t aq.queue_tables;
    removed bigint[];
BEGIN
    -- An enqueue in progress may have read the subscriber and written deliveries for it that
    -- this transaction cannot see yet.  Every enqueue holds ROW EXCLUSIVE on the delivery table
    -- from before it reads the subscribers (deliveries.hpp): SHARE waits for those in progress
    -- and holds back those that start later until this transaction ends (they then see the
    -- subscriber gone); the statements below see what the waited-for ones wrote.  So it needs a
    -- new snapshot per statement.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'remove_subscriber must run in a READ COMMITTED transaction'
            USING ERRCODE = 'invalid_transaction_state',
                  DETAIL = 'It removes the deliveries that enqueues in progress wrote for the subscriber; a '
                           'transaction snapshot would not show them.';
    END IF;
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.delivery_relid) THEN
        EXECUTE format('LOCK TABLE ONLY %s IN SHARE MODE', t.delivery_relid);
    END IF;
    DELETE FROM aq.subscribers s WHERE s.queue_id = q.queue_id AND s.consumer_name = subscriber.name;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'subscriber "%" of queue "%" does not exist', subscriber.name, queue_name
            USING ERRCODE = 'undefined_object', DETAIL = 'ORA-24035 analogue.';
    END IF;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.delivery_relid) THEN
        EXECUTE format('WITH gone AS (DELETE FROM ONLY %s d WHERE d.q_id = $1 AND d.consumer_name = $2 RETURNING d.msgid)'
                       ' SELECT coalesce(array_agg(msgid), ''{}'') FROM gone', t.delivery_relid)
        INTO removed USING q.queue_id, subscriber.name;
        EXECUTE format('DELETE FROM ONLY %s m WHERE m.msgid = ANY ($1)'
                       '   AND NOT EXISTS (SELECT FROM ONLY %s d WHERE d.msgid = m.msgid)',
                       t.relid, t.delivery_relid)
        USING removed;
    END IF;
END $$;

-- Subscribers are managed as the queues are: rows of queues the role manages, written only
-- through the admin functions' privileges.
ALTER TABLE aq.subscribers ENABLE ROW LEVEL SECURITY;
CREATE FUNCTION aq._manages_queue(queue_id integer) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce((SELECT aq._manages(t.relid) FROM aq.queues q JOIN aq.queue_tables t ON t.queue_table_id = q.queue_table_id
                      WHERE q.queue_id = _manages_queue.queue_id), false)
$$;
CREATE POLICY everyone_reads ON aq.subscribers FOR SELECT USING (true);
CREATE POLICY owner_subscribes ON aq.subscribers FOR INSERT
    WITH CHECK (aq._manages_queue(queue_id)
                AND has_function_privilege('aq.add_subscriber(text, aq.agent, text, text, boolean, text)', 'EXECUTE'));
CREATE POLICY owner_alters ON aq.subscribers FOR UPDATE
    USING (aq._manages_queue(queue_id)) WITH CHECK (aq._manages_queue(queue_id));
CREATE POLICY owner_deletes ON aq.subscribers FOR DELETE USING (aq._manages_queue(queue_id));
GRANT SELECT ON aq.subscribers TO PUBLIC;
GRANT INSERT (queue_id, consumer_name, address, protocol, rule), UPDATE (rule), DELETE ON aq.subscribers TO PUBLIC;

-- A delivery table is registered only with its queue table, by a role that manages both.
CREATE OR REPLACE FUNCTION aq._registrable(relid oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT aq._manages(relid)
       AND EXISTS (SELECT FROM pg_class c WHERE c.oid = relid AND c.relkind = 'r' AND c.relpersistence = 'p')
       AND has_function_privilege('aq.create_queue_table(text, regtype, text, text, text, boolean, text)', 'EXECUTE')
$$;
ALTER POLICY owner_registers ON aq.queue_tables
    WITH CHECK (aq._registrable(relid) AND (delivery_relid IS NULL OR aq._registrable(delivery_relid)));
ALTER POLICY owner_creates ON aq.queues
    WITH CHECK (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queues.queue_table_id
                                                        AND aq._manages(t.relid))
                AND (has_function_privilege('aq.create_queue_table(text, regtype, text, text, text, boolean, text)', 'EXECUTE')
                     OR has_function_privilege('aq.create_queue(text, text, integer, interval, interval, text, text)', 'EXECUTE')));

-- DEQUEUE covers a multi-consumer queue table's deliveries too (the enqueue's fan-out writes them
-- as the queue table's owner: ENQUEUE needs nothing there).
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
    IF t.delivery_relid IS NOT NULL AND upper(privilege) IN ('DEQUEUE', 'ALL') THEN
        EXECUTE format('GRANT %s ON TABLE %s TO %s%s', aq._dequeue_grant(), t.delivery_relid,
                       aq._grantee(grantee), CASE WHEN grant_option THEN ' WITH GRANT OPTION' ELSE '' END);
    END IF;
END $$;

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
        IF t.delivery_relid IS NOT NULL THEN
            EXECUTE format('REVOKE %s ON TABLE %s FROM %s CASCADE', aq._dequeue_grant(), t.delivery_relid, role_sql);
        END IF;
    END IF;
    IF aq._manages(t.relid) THEN
        EXECUTE format('REVOKE %s ON TABLE %s FROM %s CASCADE',
                       CASE kind WHEN 'ENQUEUE' THEN 'INSERT' WHEN 'DEQUEUE' THEN 'SELECT, DELETE, UPDATE'
                                 ELSE 'INSERT, SELECT, DELETE, UPDATE' END,
                       relation, role_sql);
        IF t.delivery_relid IS NOT NULL AND kind IN ('DEQUEUE', 'ALL') THEN
            EXECUTE format('REVOKE SELECT, DELETE, UPDATE ON TABLE %s FROM %s CASCADE', t.delivery_relid, role_sql);
        END IF;
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

-- Oracle's MESSAGE_PROPERTIES_T fields for multiple consumers and transaction groups:
-- recipient_list (on enqueue: the consumers of this message instead of the subscribers),
-- transaction_group and end_of_group (on dequeue from a transactional queue table).
ALTER TYPE aq.message_properties
    ADD ATTRIBUTE recipient_list aq.agent[],
    ADD ATTRIBUTE transaction_group text,
    ADD ATTRIBUTE end_of_group boolean;
DROP FUNCTION aq.message_properties(integer, interval, interval, text, text);
CREATE FUNCTION aq.message_properties(
    priority integer DEFAULT 1, delay interval DEFAULT NULL, expiration interval DEFAULT NULL,
    correlation text DEFAULT NULL, exception_queue text DEFAULT NULL, recipient_list aq.agent[] DEFAULT NULL)
RETURNS aq.message_properties LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(priority, delay, expiration, correlation, NULL, exception_queue, NULL, NULL, recipient_list, NULL, NULL)::aq.message_properties $$;

-- The admin functions stay revoked from PUBLIC (DBMS_AQADM); the new create_queue_table form
-- takes over the old one's EXECUTE grants (as 0.4.0 did for its changed forms: same grantors,
-- same order, the extension's initial privileges written back), and the old form goes.
REVOKE EXECUTE ON FUNCTION
    aq.create_queue_table(text, regtype, text, text, text, boolean, text),
    aq.add_subscriber(text, aq.agent, text, text, boolean, text),
    aq.alter_subscriber(text, aq.agent, text, text),
    aq.remove_subscriber(text, aq.agent)
FROM PUBLIC;
DO $$
DECLARE
    old_form regprocedure := 'aq.create_queue_table(text, regtype, text, text, text)'::regprocedure;
    new_form regprocedure := 'aq.create_queue_table(text, regtype, text, text, text, boolean, text)'::regprocedure;
    g record;
    extension_acl aclitem[];
    prior_role text := current_setting('role');
BEGIN
    SELECT p.proacl INTO extension_acl FROM pg_proc p WHERE p.oid = new_form;
    FOR g IN SELECT a.grantor, a.grantee, a.is_grantable, p.proowner
               FROM pg_proc p, aclexplode(p.proacl) WITH ORDINALITY a(grantor, grantee, privilege_type, is_grantable, n)
              WHERE p.oid = old_form AND a.privilege_type = 'EXECUTE' AND a.grantee <> p.proowner
              ORDER BY a.n
    LOOP
        IF g.grantor <> g.proowner THEN
            EXECUTE format('SET LOCAL ROLE %s', g.grantor::regrole);
        END IF;
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %s%s', new_form,
                       CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE g.grantee::regrole::text END,
                       CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        IF g.grantor <> g.proowner THEN
            EXECUTE format('SET LOCAL ROLE %s', CASE WHEN prior_role = 'none' THEN 'NONE' ELSE quote_ident(prior_role) END);
        END IF;
    END LOOP;
    UPDATE pg_catalog.pg_init_privs ip SET initprivs = extension_acl
     WHERE ip.objoid = new_form AND ip.classoid = 'pg_catalog.pg_proc'::regclass AND ip.objsubid = 0;
    EXECUTE format('DROP FUNCTION %s', old_form);
END $$;
