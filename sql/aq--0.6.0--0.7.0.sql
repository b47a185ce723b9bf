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


-- ---------------------------------------------------------------- ring storage

-- 0: classic storage (the messages in the table itself); 2..16: a ring of that many segments,
-- the table's inheritance children (aq.queue_segments).
ALTER TABLE aq.queue_tables
    ADD COLUMN segment_count smallint NOT NULL DEFAULT 0 CHECK (segment_count = 0 OR segment_count BETWEEN 2 AND 16);
GRANT INSERT (segment_count) ON aq.queue_tables TO PUBLIC;

-- A ring queue table (create_queue_table(..., segments => N)) keeps its messages in N segments:
-- the inheritance children <queue_table>$0 .. $<N-1> of the queue table, made with it and never
-- changed (docs/design-horizon-storage.md, section 1).
CREATE TABLE aq.queue_segments (
    queue_table_id  integer NOT NULL REFERENCES aq.queue_tables ON DELETE CASCADE,
    segment         smallint NOT NULL,
    -- The segment's table, by OID (as aq.queue_tables.relid).
    relid           regclass NOT NULL,
    -- A multi-consumer ring's receipts of the segment's messages (src/queue/once_walk.hpp), or NULL.
    receipts        regclass,
    PRIMARY KEY (queue_table_id, segment),
    UNIQUE (relid),
    UNIQUE (receipts)
);

-- A ring's switch ledger, append-only: a row per switch.  Generation g writes segment
-- g % segment_count; the current segment is the row with the highest generation.
-- create_queue_table writes generation 0 (segment 0).
CREATE TABLE aq.segment_log (
    queue_table_id  integer NOT NULL REFERENCES aq.queue_tables ON DELETE CASCADE,
    generation      bigint NOT NULL,
    segment         smallint NOT NULL,
    opened          timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (queue_table_id, generation)
);

-- Read by everyone, as aq.queue_tables.
GRANT SELECT ON aq.queue_segments, aq.segment_log TO PUBLIC;

-- aq.alter_queue_table changes a queue table's comment and makes a classic one a ring.
CREATE POLICY owner_alters ON aq.queue_tables FOR UPDATE
    USING (aq._manages(relid))
    WITH CHECK (aq._manages(relid)
                AND segment_count = (SELECT count(*) FROM aq.queue_segments s
                                      WHERE s.queue_table_id = queue_tables.queue_table_id)
                -- (a table with a row per message and recipient never gets segments, and one that
                -- stores each message once keeps them)
                AND (segment_count = 0 OR delivery_relid IS NULL)
                AND (segment_count > 0 OR delivery_relid IS NOT NULL OR NOT multiple_consumers)
                AND has_function_privilege('aq.alter_queue_table(text, text, integer)', 'EXECUTE'));
-- A multi-consumer table has a delivery table or segments (each message stored once).
ALTER POLICY owner_registers ON aq.queue_tables
    WITH CHECK (aq._registrable(relid) AND (delivery_relid IS NULL OR aq._registrable(delivery_relid))
                -- a multi-consumer table has a delivery table or segments (each message stored once)
                AND (segment_count > 0 OR delivery_relid IS NOT NULL OR NOT multiple_consumers));
GRANT UPDATE (comment, segment_count) ON aq.queue_tables TO PUBLIC;

-- The policies name the new form of create_queue_table (below).
CREATE OR REPLACE FUNCTION aq._registrable(relid oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT aq._manages(relid)
       AND EXISTS (SELECT FROM pg_class c WHERE c.oid = relid AND c.relkind = 'r' AND c.relpersistence = 'p')
       AND has_function_privilege('aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer)', 'EXECUTE')
$$;

-- A table with the columns of a receipts table (_create_segments), in order, none dropped: what
-- aq.queue_segments takes as receipts (the walks check the same, src/queue/once_walk.cpp).
CREATE FUNCTION aq._receipts_shape(relid oid) RETURNS boolean
LANGUAGE sql STABLE SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(a.atttypid::regtype::text ORDER BY a.attnum), '{}')
           = '{text,"\"char\"",integer,"timestamp with time zone",bigint,bigint[],"timestamp with time zone"}'
      FROM pg_attribute a WHERE a.attrelid = relid AND a.attnum > 0
$$;

ALTER POLICY owner_creates ON aq.queues
    WITH CHECK (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queues.queue_table_id
                                                        AND aq._manages(t.relid))
                AND (has_function_privilege('aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer)', 'EXECUTE')
                     OR has_function_privilege('aq.create_queue(text, text, integer, interval, interval, text, text)', 'EXECUTE')));

-- The ring's rows, as aq.queue_tables': a role inserts those of queue tables it manages, and only
-- through the functions that make them (a segment must be a permanent table the role manages);
-- they go with their queue table (ON DELETE CASCADE).  Never updated.
ALTER TABLE aq.queue_segments ENABLE ROW LEVEL SECURITY;
CREATE POLICY everyone_reads ON aq.queue_segments FOR SELECT USING (true);
CREATE POLICY owner_registers ON aq.queue_segments FOR INSERT
    WITH CHECK (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queue_segments.queue_table_id
                                                        AND aq._manages(t.relid)
                                                        -- receipts: those of a table that stores each message once
                                                        AND (receipts IS NULL) = (t.delivery_relid IS NOT NULL OR NOT t.multiple_consumers))
                AND aq._registrable(relid)
                AND (receipts IS NULL OR (aq._registrable(receipts) AND aq._receipts_shape(receipts))));
CREATE POLICY owner_deletes ON aq.queue_segments FOR DELETE
    USING (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = queue_segments.queue_table_id
                                                   AND aq._manages(t.relid)));
GRANT INSERT (queue_table_id, segment, relid, receipts), DELETE ON aq.queue_segments TO PUBLIC;

ALTER TABLE aq.segment_log ENABLE ROW LEVEL SECURITY;
CREATE POLICY everyone_reads ON aq.segment_log FOR SELECT USING (true);
CREATE POLICY owner_switches ON aq.segment_log FOR INSERT
    WITH CHECK (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = segment_log.queue_table_id
                                                        AND aq._manages(t.relid))
                AND (has_function_privilege('aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer)', 'EXECUTE')
                     OR has_function_privilege('aq.alter_queue_table(text, text, integer)', 'EXECUTE')
                     OR has_function_privilege('aq._switch_segment(text)', 'EXECUTE')));
CREATE POLICY owner_deletes ON aq.segment_log FOR DELETE
    USING (EXISTS (SELECT FROM aq.queue_tables t WHERE t.queue_table_id = segment_log.queue_table_id
                                                   AND aq._manages(t.relid)));
GRANT INSERT (queue_table_id, generation, segment), DELETE ON aq.segment_log TO PUBLIC;

-- The indexes of a segment of a ring queue table: its own primary key (msgid), and the indexes
-- the queue table has from create_queue_table and aq._queue_table_objects, with the same keys,
-- collations, options and predicates (a walk uses a segment's indexes as it uses the table's).
-- Names are PostgreSQL's choice, as the table's: <segment>_pkey, <segment>_q_id_enq_time_msgid_idx, ...
CREATE FUNCTION aq._segment_indexes(t aq.queue_tables, segment regclass) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    by_priority boolean := t.sort_list = 'priority,enq_time';
    order_columns text := CASE WHEN by_priority THEN 'priority, enq_time, msgid' ELSE 'enq_time, msgid' END;
BEGIN
    PERFORM aq._check_owner(t);
    IF t.multiple_consumers THEN
        -- Each message stored once, beside at most one copy per consumer in an exception queue.
        EXECUTE format('CREATE UNIQUE INDEX ON %s (msgid, consumer_name) NULLS NOT DISTINCT', segment);
    ELSE
        EXECUTE format('ALTER TABLE %s ADD PRIMARY KEY (msgid)', segment);
    END IF;
    EXECUTE format('CREATE INDEX ON %s (q_id, enq_time, msgid)', segment);
    IF by_priority THEN
        EXECUTE format('CREATE INDEX ON %s (q_id, priority, enq_time, msgid)', segment);
    END IF;
    IF t.message_grouping = 'transactional' THEN
        EXECUTE format('CREATE INDEX ON %s (q_id, transaction_group, enq_time, msgid) WITH (deduplicate_items = off)',
                       segment);
    END IF;
    EXECUTE format('CREATE INDEX ON %s (q_id, corrid COLLATE pg_catalog."C", %s) WHERE corrid IS NOT NULL', segment, order_columns);
    EXECUTE format('CREATE INDEX ON %s (q_id, delay) WHERE delay IS NOT NULL', segment);
    EXECUTE format('CREATE INDEX ON %s (q_id, expiration) WHERE expiration IS NOT NULL', segment);
END $$;

-- create_queue_table gains segments (after the existing arguments, so that calls by position keep
-- their meaning).  A new signature: the old form's EXECUTE grants are carried over below.
-- The ring of queue table t (t.segment_count segments, none for 0): its segments <table>$0 ..
-- made as inheritance children of the table, every column inherited (none of the segment's own), so
-- a segment has the table's columns in the table's order, its NOT NULL and CHECK constraints,
-- defaults and storage options, and follows an ALTER TABLE of the table; identity is not
-- inherited, so a segment's msgid is NOT NULL with no default (msgid comes from the table's
-- identity sequence).  Then the ledger's first generation, in segment 0.
CREATE FUNCTION aq._create_segments(t aq.queue_tables) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    segment_options text;
    segment_name text;
    seg regclass;
    receipts regclass;
BEGIN
    PERFORM aq._check_owner(t);
    SELECT ' WITH (' || string_agg(format('%I = %L', o.option_name, o.option_value), ', ') || ')'
      INTO segment_options
      FROM pg_class c, pg_options_to_table(c.reloptions) o WHERE c.oid = t.relid;
    FOR k IN 0 .. t.segment_count - 1 LOOP
        segment_name := format('%s$%s', t.queue_table, k);
        EXECUTE format('CREATE TABLE %I.%I () INHERITS (%s)%s',
                       t.table_schema, segment_name, t.relid, coalesce(segment_options, ''));
        seg := format('%I.%I', t.table_schema, segment_name)::regclass;
        PERFORM aq._segment_indexes(t, seg);
        EXECUTE format('COMMENT ON TABLE %s IS %L', seg, format('aq segment %s of queue table %s', k, t.queue_table));
        receipts := NULL;
        IF t.multiple_consumers THEN
            -- Each message stored once: what each consumer took of the segment's messages.
            -- A receipt: what one dequeue of the consumer took of the segment's messages, as runs
            -- [lo, hi] of msgids, and the last of them in the queue's order (hi_*).
            EXECUTE format('CREATE TABLE %I.%I (consumer text COLLATE pg_catalog."C" NOT NULL, kind "char" NOT NULL,'
                           ' hi_priority integer NOT NULL, hi_enq_time timestamptz NOT NULL, hi_msgid bigint NOT NULL,'
                           ' runs bigint[] NOT NULL, at timestamptz NOT NULL)%s',
                           t.table_schema, segment_name || '_r', coalesce(segment_options, ''));
            receipts := format('%I.%I', t.table_schema, segment_name || '_r')::regclass;
            EXECUTE format('CREATE INDEX ON %s (consumer, hi_priority, hi_enq_time, hi_msgid)', receipts);
            EXECUTE format('COMMENT ON TABLE %s IS %L', receipts,
                           format('aq receipts of segment %s of queue table %s', k, t.queue_table));
        END IF;
        IF receipts IS NULL THEN
            INSERT INTO aq.queue_segments (queue_table_id, segment, relid) VALUES (t.queue_table_id, k, seg);
        ELSE
            INSERT INTO aq.queue_segments (queue_table_id, segment, relid, receipts) VALUES (t.queue_table_id, k, seg, receipts);
        END IF;
    END LOOP;
    IF t.segment_count > 0 THEN
        INSERT INTO aq.segment_log (queue_table_id, generation, segment) VALUES (t.queue_table_id, 0, 0);
    END IF;
END $$;

-- Creates the queue table: an ordinary heap table in queue_table_schema (the caller's current
-- schema by default) with the payload column user_data of the payload type itself, and the
-- objects around it (aq._queue_table_objects).  sort_list: 'enq_time' (first in, first out)
-- or 'priority,enq_time' (lower priority number first, then first in); each is served by an
-- index, so a dequeue's cost does not grow with the queue's length.  multiple_consumers and
-- message_grouping are Oracle's.  Queue table names are limited to 57 bytes, so that the
-- exception queue aq$_<name>_e fits in a name (Oracle limits them to 24 characters).
-- segments: 0 (or NULL) keeps the messages in the table itself (classic storage); 2..16 makes
-- the table the parent of a ring of that many segments, its inheritance children
-- <queue_table>$0 .. $<segments-1> (aq.queue_segments), each with the table's columns, options
-- and indexes (aq._segment_indexes), owned by the same role, with no grants of their own
-- (a read through the table checks only the table's privileges).  A multi-consumer queue table
-- with segments stores each message once, whatever the number of its consumers, with what each
-- consumer took of a segment's messages in that segment's receipts table <segment>_r
-- (src/queue/once_walk.hpp); without segments, a delivery table holds a row per message and
-- recipient.
CREATE FUNCTION aq.create_queue_table(
    queue_table text,
    queue_payload_type regtype,
    sort_list text DEFAULT 'enq_time',
    comment text DEFAULT NULL,
    queue_table_schema text DEFAULT pg_catalog.current_schema(),
    multiple_consumers boolean DEFAULT false,
    message_grouping text DEFAULT 'none',
    segments integer DEFAULT 0)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    sort_order text := lower(replace(sort_list, ' ', ''));
    grouping text := lower(message_grouping);
    multi boolean := coalesce(multiple_consumers, false);
    ring integer := coalesce(segments, 0);
    once boolean := multi AND ring <> 0;
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
    IF ring <> 0 AND ring NOT BETWEEN 2 AND 16 THEN
        RAISE EXCEPTION 'segments must be 0 or between 2 and 16, not %', segments USING ERRCODE = 'invalid_parameter_value',
            DETAIL = '0 keeps the messages in the queue table itself; 2 to 16 make a ring of that many segments.';
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
        CASE WHEN grouping = 'transactional' THEN ', transaction_group bigint NOT NULL'
             -- Each message stored once: a message is every subscriber's, a copy in an exception
             -- queue one consumer's (NULL: a message); a message with a recipient list is for
             -- exactly those consumers (NULL: every subscriber).
             WHEN once THEN ', consumer_name text COLLATE pg_catalog."C", recipients text[] COLLATE pg_catalog."C"'
             ELSE '' END);
    -- The enq_time order's index serves every queue table (the exception queues' order, and
    -- the first-in order of a priority queue table's browse by msgid).
    EXECUTE format('CREATE INDEX ON %I.%I (q_id, enq_time, msgid)', queue_table_schema, queue_table);
    EXECUTE format('COMMENT ON TABLE %I.%I IS %L', queue_table_schema, queue_table,
                   coalesce(comment, format('aq queue table of %s', queue_payload_type)));
    IF multi AND NOT once THEN
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
                                 multiple_consumers, message_grouping, delivery_relid, segment_count)
    VALUES (queue_table, queue_table_schema, format('%I.%I', queue_table_schema, queue_table)::regclass,
            queue_payload_type, sort_order, comment, multi, grouping, deliveries, ring)
    RETURNING * INTO t;
    -- (The view of a table that stores each message once reads the segments' receipts.)
    PERFORM aq._create_segments(t);
    PERFORM aq._queue_table_objects(t);
END $$;

-- Oracle's DBMS_AQADM.ALTER_QUEUE_TABLE: a new comment (NULL leaves it), and, aq's own, segments:
-- a classic queue table (segments 0) becomes a ring of that many (2..16), as create_queue_table
-- makes one.  Its messages stay where they are, in the table itself, where every dequeue finds them
-- in the queue's order as before (and VACUUM reclaims them once consumed); new messages go into the
-- segments.  It waits for the transactions using the table (ACCESS EXCLUSIVE).  A ring's number of
-- segments cannot be changed (0A000), nor can a multi-consumer queue table become one; a table
-- that another table inherits from cannot either (55000).
CREATE FUNCTION aq.alter_queue_table(queue_table text, comment text DEFAULT NULL, segments integer DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    inheritor regclass;
BEGIN
    PERFORM aq._check_owner(t);
    IF segments IS NOT NULL AND segments <> t.segment_count THEN
        IF segments <> 0 AND segments NOT BETWEEN 2 AND 16 THEN
            RAISE EXCEPTION 'segments must be 0 or between 2 and 16, not %', segments USING ERRCODE = 'invalid_parameter_value',
                DETAIL = '0 keeps the messages in the queue table itself; 2 to 16 make a ring of that many segments.';
        END IF;
        IF t.segment_count <> 0 THEN
            RAISE EXCEPTION 'the segments of ring queue table "%" cannot be changed', queue_table
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = format('It has %s segments.', t.segment_count);
        END IF;
        IF t.multiple_consumers THEN
            RAISE EXCEPTION 'multi-consumer queue table "%" cannot become a ring', queue_table
                USING ERRCODE = 'feature_not_supported',
                      DETAIL = 'Its messages have a row per recipient; a multi-consumer ring stores each message once.',
                      HINT = 'Create a new queue table with multiple_consumers => true and segments, and move the consumers to its queues.';
        END IF;
        EXECUTE format('LOCK TABLE %s IN ACCESS EXCLUSIVE MODE', t.relid);
        SELECT i.inhrelid::regclass INTO inheritor FROM pg_inherits i WHERE i.inhparent = t.relid LIMIT 1;
        IF inheritor IS NOT NULL THEN
            RAISE EXCEPTION 'table % inherits from queue table "%"', inheritor, queue_table
                USING ERRCODE = 'object_not_in_prerequisite_state',
                      DETAIL = 'A ring queue table''s inheritance children are its segments, which every dequeue reads through it.',
                      HINT = format('Remove the inheritance first: ALTER TABLE %s NO INHERIT %s.', inheritor, t.relid);
        END IF;
        t.segment_count := segments;
        PERFORM aq._create_segments(t);
        UPDATE aq.queue_tables qt SET segment_count = segments WHERE qt.queue_table_id = t.queue_table_id;
    END IF;
    IF comment IS NOT NULL THEN
        UPDATE aq.queue_tables qt SET comment = alter_queue_table.comment WHERE qt.queue_table_id = t.queue_table_id;
        EXECUTE format('COMMENT ON TABLE %s IS %L', t.relid, comment);
    END IF;
END $$;

-- The admin functions stay revoked from PUBLIC (DBMS_AQADM); the new create_queue_table form
-- takes over the old one's EXECUTE grants (as 0.6.0 did: same grantors, same order, the
-- extension's initial privileges written back), and the old form goes.
REVOKE EXECUTE ON FUNCTION aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer) FROM PUBLIC;
-- As every admin function (DBMS_AQADM): a superuser grants it to the roles that manage queues.
REVOKE EXECUTE ON FUNCTION aq.alter_queue_table(text, text, integer) FROM PUBLIC;
DO $$
DECLARE
    old_form regprocedure := 'aq.create_queue_table(text, regtype, text, text, text, boolean, text)'::regprocedure;
    new_form regprocedure := 'aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer)'::regprocedure;
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

-- Subscribers of a queue table that stores each message once receive from since_msgid on.
ALTER TABLE aq.subscribers ADD COLUMN since_msgid bigint;
GRANT INSERT (since_msgid) ON aq.subscribers TO PUBLIC;
CREATE OR REPLACE FUNCTION aq.add_subscriber(
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
    IF t.multiple_consumers AND t.delivery_relid IS NULL AND t.segment_count > 0 THEN
        -- Each message stored once (src/queue/once_walk.hpp): the subscriber receives what is
        -- enqueued after it subscribed, as in Oracle.  The enqueues in progress are waited for
        -- (they hold ROW EXCLUSIVE on the queue table; its dequeues only ACCESS SHARE), then every
        -- message enqueued before has a msgid up to the sequence's last value, and every later one
        -- a higher msgid.  A rule is evaluated at each enqueue (src/queue/audience.hpp).
        EXECUTE format('LOCK TABLE ONLY %s IN SHARE MODE', t.relid);
        INSERT INTO aq.subscribers (queue_id, consumer_name, rule, since_msgid)
        VALUES (q.queue_id, subscriber.name, rule,
                coalesce(pg_sequence_last_value(pg_get_serial_sequence(t.relid::text, 'msgid')::regclass), 0));
        RETURN;
    END IF;
    INSERT INTO aq.subscribers (queue_id, consumer_name, rule) VALUES (q.queue_id, subscriber.name, rule);
END $$;

-- Oracle's DBMS_AQADM.REMOVE_SUBSCRIBER: the subscriber and the messages waiting for it (in the
-- queue itself; what reached an exception queue stays there).
CREATE OR REPLACE FUNCTION aq.remove_subscriber(queue_name text, subscriber aq.agent)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._subscribed_queue(queue_name, subscriber);
    t aq.queue_tables;
    removed bigint[];
    seg regclass;
    receipts regclass;
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
    IF t.multiple_consumers AND t.delivery_relid IS NULL AND t.segment_count > 0 THEN
        -- Each message stored once (src/queue/once_walk.hpp): what the subscriber had not taken of
        -- this queue is no longer its, the messages whose recipient list names it included (as a
        -- classic table's deliveries are deleted): after the enqueues in progress (SHARE, as
        -- add_subscriber), a receipt in every segment takes the queue's messages there, as the runs
        -- of consecutive msgids among the segment's messages (another queue's are not in them).  A
        -- later message may name it again.
        EXECUTE format('LOCK TABLE ONLY %s IN SHARE MODE', t.relid);
        FOR seg, receipts IN SELECT s.relid, s.receipts FROM aq.queue_segments s
                              WHERE s.queue_table_id = t.queue_table_id AND s.receipts IS NOT NULL LOOP
            EXECUTE format(
                'INSERT INTO %s (consumer, kind, hi_priority, hi_enq_time, hi_msgid, runs, at)'
                ' SELECT $1, ''t'', 2147483647, ''infinity'', 9223372036854775807, r.runs, now()'
                '   FROM (SELECT array_agg(v.x ORDER BY i.lo, v.k) AS runs'
                '           FROM (SELECT min(mine.msgid) AS lo, max(mine.msgid) AS hi'
                '                   FROM (SELECT m.msgid, m.q_id, m.pos OPERATOR(pg_catalog.-)'
                '                                pg_catalog.row_number() OVER (ORDER BY m.msgid) AS island'
                '                           FROM (SELECT x.msgid, x.q_id, pg_catalog.row_number() OVER (ORDER BY x.msgid) AS pos'
                '                                   FROM ONLY %s x WHERE x.consumer_name IS NULL) m'
                '                          WHERE m.q_id OPERATOR(pg_catalog.=) $2) mine'
                '                  GROUP BY mine.island) i,'
                '                LATERAL (VALUES (1, i.lo), (2, i.hi)) v(k, x)) r'
                '  WHERE r.runs IS NOT NULL',
                receipts, seg)
              USING subscriber.name, q.queue_id;
        END LOOP;
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

-- The default exception queue goes with its queue table, as in Oracle; a ring's segments too
-- (before the table; their catalog rows go with the queue table's).
CREATE OR REPLACE FUNCTION aq.drop_queue_table(queue_table text, force boolean DEFAULT false)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    queue_count integer;
    segments regclass[];
    seg regclass;
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
    -- The segments, and a multi-consumer ring's receipts after them.
    SELECT coalesce(array_agg(s.relid ORDER BY s.segment), '{}')
           || coalesce(array_agg(s.receipts ORDER BY s.segment) FILTER (WHERE s.receipts IS NOT NULL), '{}')
      INTO segments
      FROM aq.queue_segments s WHERE s.queue_table_id = t.queue_table_id;
    DELETE FROM aq.queues q WHERE q.queue_table_id = t.queue_table_id;  -- wakes their waiters; takes their subscribers
    DELETE FROM aq.queue_tables qt WHERE qt.queue_table_id = t.queue_table_id;
    IF t.delivery_relid IS NOT NULL AND EXISTS (SELECT FROM pg_class c WHERE c.oid = t.delivery_relid) THEN
        PERFORM aq._drop_dependent_view(t.delivery_relid, aq._subscriber_view(t.queue_table));
        PERFORM aq._drop_dependent_view(t.delivery_relid, aq._queue_table_view(t.queue_table));
        EXECUTE format('DROP TABLE %s', t.delivery_relid);
    END IF;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        -- Before the segments: a stored-once table's view reads them and their receipts.
        PERFORM aq._drop_dependent_view(t.relid, aq._queue_table_view(t.queue_table));
        PERFORM aq._drop_dependent_view(t.relid, aq._subscriber_view(t.queue_table));
    END IF;
    FOREACH seg IN ARRAY segments LOOP
        IF EXISTS (SELECT FROM pg_class c WHERE c.oid = seg) THEN
            EXECUTE format('DROP TABLE %s', seg);
        END IF;
    END LOOP;
    IF EXISTS (SELECT FROM pg_class c WHERE c.oid = t.relid) THEN
        PERFORM aq._drop_dependent_view(t.relid, aq._queue_table_view(t.queue_table));
        EXECUTE format('DROP TABLE %s', t.relid);
    END IF;
END $$;

-- ---------------------------------------------------------------- the message rules, in SQL
-- Of a queue table that stores each message once (src/queue/once_walk.hpp), the two rules every
-- statement over its messages and receipts needs: the view aq$<qt>, aq.queue_health, the time
-- manager's expiry and its proof that a segment may be truncated.  (The walks apply the same rules
-- in C++: once_walk.cpp.)  SQL-bodied, not strict, not volatile and without settings, so that the
-- planner inlines each into the statement that calls it: they cost what the join they stand for
-- costs.  Harmless to everyone: they read only what the caller may read.

-- Who a message is for (once_walk.hpp, 3): its recipient list, or else every subscriber of its
-- queue that subscribed before it (since_msgid).  A consumer's copy in an exception queue is that
-- consumer's alone (consumer_name); the callers take those apart.  The subscriber part as a join
-- condition (with s.queue_id = m.q_id), for a statement that joins the subscribers to a whole
-- segment's messages (a hash join: the truncation proof, src/queue/ring.cpp):
CREATE FUNCTION aq._subscriber_receives(since_msgid bigint, msgid bigint, recipients text[])
RETURNS boolean LANGUAGE sql IMMUTABLE PARALLEL SAFE
RETURN recipients IS NULL AND (since_msgid IS NULL OR msgid > since_msgid);

-- ... and the whole rule, a message at a time:
CREATE FUNCTION aq._message_recipients(q_id integer, msgid bigint, recipients text[])
RETURNS TABLE (consumer text) LANGUAGE sql STABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT s.consumer_name COLLATE "C" FROM aq.subscribers s
     WHERE s.queue_id = _message_recipients.q_id
       AND aq._subscriber_receives(s.since_msgid, _message_recipients.msgid, _message_recipients.recipients)
    UNION ALL
    SELECT l.consumer COLLATE "C" FROM unnest(_message_recipients.recipients) l(consumer);
END;

-- The msgids a receipt says its consumer is done with (once_walk.hpp, 5): those of its runs when it
-- took them ('t') or had them moved to an exception queue ('x'); not an attempt's ('r'), whose
-- messages are the consumer's again, nor a lock's ('l'), which ends with its transaction.  Runs are
-- pairs lo, hi; hi = 9223372036854775807 is unbounded; a run with lo > hi is nobody's (no dequeue
-- writes one).  Ranges, to be joined with range_agg into one multirange per consumer: a run may
-- span every msgid so far and is never expanded.
CREATE FUNCTION aq._taken_ranges(kind "char", runs bigint[])
RETURNS SETOF int8range LANGUAGE sql IMMUTABLE PARALLEL SAFE
BEGIN ATOMIC
    SELECT int8range(_taken_ranges.runs[2 * i - 1],
                     CASE WHEN _taken_ranges.runs[2 * i] < 9223372036854775807 THEN _taken_ranges.runs[2 * i] + 1 END)
      FROM generate_series(1, cardinality(_taken_ranges.runs) / 2) i
     WHERE _taken_ranges.kind IN ('t', 'x') AND _taken_ranges.runs[2 * i - 1] <= _taken_ranges.runs[2 * i];
END;

-- The view aq$<queue_table> of a single-consumer queue table: its messages with their queue and
-- state, READY, WAITING, EXPIRED (in an exception queue, or past its expiration) or PROCESSED (a
-- message a dequeue removed from a queue with a retention_time, kept until deq_timestamp plus that
-- time: src/queue/retention.hpp stores it with q_id = minus its queue's id, its dequeue time in
-- delay and the end of its retention in expiration).  Created, or replaced in place (keeping its
-- owner and grants): create_queue and alter_queue replace a view made before 0.7.0, which knew no
-- PROCESSED, when they give a queue a retention_time (only_existing: a view found by its dependency
-- on the table; one dropped by hand stays dropped).
CREATE FUNCTION aq._message_view(t aq.queue_tables, only_existing boolean DEFAULT false) RETURNS void
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
BEGIN
    PERFORM aq._check_owner(t);
    IF only_existing AND NOT EXISTS (
            SELECT FROM pg_class tbl JOIN pg_class v ON v.relnamespace = tbl.relnamespace
             WHERE tbl.oid = t.relid AND v.relname = aq._queue_table_view(t.queue_table) AND v.relkind = 'v'
               AND EXISTS (SELECT FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                            WHERE r.ev_class = v.oid AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.relid)) THEN
        RETURN;
    END IF;
    IF t.multiple_consumers AND t.delivery_relid IS NULL AND t.segment_count > 0 THEN
        -- Each message stored once (src/queue/once_walk.hpp): a row per message and consumer it is
        -- for (aq._message_recipients), PROCESSED once a receipt of the consumer took or moved it
        -- (aq._taken_ranges, joined into a multirange per segment and consumer, looked up per
        -- message), its retry_count with the consumer's attempts ('r'); a consumer's copy in an
        -- exception queue is a row of that consumer.  An attempt's run (at most a dequeue's 100,000
        -- messages) is counted per msgid.
        EXECUTE format(
            'CREATE OR REPLACE VIEW %I.%I WITH (security_invoker = true) AS'
            ' WITH rc AS (%s),'
            '      done AS (SELECT rc.seg, rc.consumer, pg_catalog.range_agg(t.r) AS taken'
            '                 FROM rc CROSS JOIN LATERAL aq._taken_ranges(rc.kind, rc.runs) t(r)'
            '                GROUP BY rc.seg, rc.consumer),'
            '      attempts AS (SELECT x.seg, x.consumer, x.msgid, pg_catalog.count(*) AS n FROM (%s) x'
            '                    GROUP BY x.seg, x.consumer, x.msgid)'
            ' SELECT q.queue_name AS queue, m.msgid AS msg_id, m.corrid AS corr_id, m.priority AS msg_priority,'
            '        CASE WHEN d.taken OPERATOR(pg_catalog.@>) m.msgid THEN ''PROCESSED'''
            '             WHEN q.queue_type OPERATOR(pg_catalog.=) ''exception_queue'' OR m.expiration OPERATOR(pg_catalog.<=) pg_catalog.now() THEN ''EXPIRED'''
            '             WHEN m.delay OPERATOR(pg_catalog.>) pg_catalog.now() THEN ''WAITING'' ELSE ''READY'' END AS msg_state,'
            '        m.delay, m.expiration, m.enq_time, m.enq_uid AS enq_user_id,'
            '        m.retry_count OPERATOR(pg_catalog.+) COALESCE(a.n, 0)::integer AS retry_count,'
            '        COALESCE(m.exception_queue, %L) AS exception_queue,'
            '        c.consumer::text AS consumer_name,'
            '        m.user_data'
            '   FROM %s m JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) m.q_id'
            '   CROSS JOIN LATERAL (SELECT m.consumer_name WHERE m.consumer_name IS NOT NULL'
            '                       UNION ALL'
            '                       SELECT f.consumer FROM aq._message_recipients(m.q_id, m.msgid, m.recipients) f'
            '                        WHERE m.consumer_name IS NULL) c(consumer)'
            '   LEFT JOIN done d ON m.consumer_name IS NULL AND d.seg OPERATOR(pg_catalog.=) m.tableoid'
            '                   AND d.consumer OPERATOR(pg_catalog.=) c.consumer'
            '   LEFT JOIN attempts a ON m.consumer_name IS NULL AND a.seg OPERATOR(pg_catalog.=) m.tableoid'
            '                       AND a.consumer OPERATOR(pg_catalog.=) c.consumer AND a.msgid OPERATOR(pg_catalog.=) m.msgid',
            (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t.relid),
            aq._queue_table_view(t.queue_table),
            -- (A segment by name, as a regclass constant: a dump and restore gives it a new OID.)
            (SELECT string_agg(format('SELECT %L::pg_catalog.regclass::pg_catalog.oid AS seg, r.consumer, r.kind, r.runs FROM ONLY %s r',
                                      s.relid::text, s.receipts),
                               ' UNION ALL ' ORDER BY s.segment)
               FROM aq.queue_segments s WHERE s.queue_table_id = t.queue_table_id),
            -- The attempts ('r' receipts, few): each run's msgids, counted per message and joined to
            -- the messages by msgid (scanning every run for every row was rows x attempts).  An
            -- attempt's run is what one dequeue took, at most 100,000 messages: no wider one is aq's.
            (SELECT string_agg(format('SELECT %L::pg_catalog.regclass::pg_catalog.oid AS seg, r.consumer, g.msgid'
                                      '  FROM ONLY %s r, pg_catalog.generate_series(1, pg_catalog.cardinality(r.runs) OPERATOR(pg_catalog./) 2) i,'
                                      '       pg_catalog.generate_series(r.runs[2 OPERATOR(pg_catalog.*) i OPERATOR(pg_catalog.-) 1],'
                                      '                                  r.runs[2 OPERATOR(pg_catalog.*) i]) g(msgid)'
                                      ' WHERE r.kind OPERATOR(pg_catalog.=) ''r'''
                                      '   AND r.runs[2 OPERATOR(pg_catalog.*) i]::pg_catalog.numeric'
                                      '       OPERATOR(pg_catalog.-) r.runs[2 OPERATOR(pg_catalog.*) i OPERATOR(pg_catalog.-) 1]::pg_catalog.numeric'
                                      '       OPERATOR(pg_catalog.<) 100000',
                                      s.relid::text, s.receipts),
                               ' UNION ALL ' ORDER BY s.segment)
               FROM aq.queue_segments s WHERE s.queue_table_id = t.queue_table_id),
            aq._default_exception_queue(t.queue_table), t.relid);
        RETURN;
    END IF;
    EXECUTE format(
        'CREATE OR REPLACE VIEW %I.%I WITH (security_invoker = true) AS'
        ' SELECT q.queue_name AS queue, m.msgid AS msg_id, m.corrid AS corr_id, m.priority AS msg_priority,'
        '        CASE WHEN m.q_id < 0 THEN ''PROCESSED'''
        '             WHEN q.queue_type = ''exception_queue'' OR m.expiration <= pg_catalog.now() THEN ''EXPIRED'''
        '             WHEN m.delay > pg_catalog.now() THEN ''WAITING'' ELSE ''READY'' END AS msg_state,'
        '        CASE WHEN m.q_id >= 0 THEN m.delay END AS delay,'
        '        CASE WHEN m.q_id >= 0 THEN m.expiration END AS expiration,'
        '        m.enq_time, m.enq_uid AS enq_user_id, m.retry_count,'
        '        coalesce(m.exception_queue, %L) AS exception_queue,'
        '        m.user_data,'
        '        CASE WHEN m.q_id < 0 THEN m.delay END AS deq_timestamp'
        '   FROM %s m LEFT JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) pg_catalog.abs(m.q_id)',
        -- Beside the table, in the schema it is in now (it may have been renamed since).
        (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = t.relid),
        aq._queue_table_view(t.queue_table), aq._default_exception_queue(t.queue_table), t.relid);
END $$;

-- Its single-consumer view is made by aq._message_view now.
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
        PERFORM aq._message_view(t);
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
    END IF;
    IF t.multiple_consumers THEN
        -- The subscriber view names the delivery table (or, each message stored once, the queue
        -- table) in a clause that reads nothing, so that it is found by that dependency when the
        -- queue table is dropped (never by a name alone), and reading it needs the privileges on
        -- the queue that reading the messages needs.
        EXECUTE format(
            'CREATE VIEW %I.%I WITH (security_invoker = true) AS'
            ' SELECT q.queue_name AS queue, s.consumer_name AS name, s.address, s.protocol, s.rule, s.created'
            '   FROM aq.subscribers s JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) s.queue_id'
            '  WHERE q.queue_table_id OPERATOR(pg_catalog.=) %s'
            '    AND NOT EXISTS (SELECT FROM %s d WHERE false)',
            t.table_schema, aq._subscriber_view(t.queue_table), t.queue_table_id, coalesce(t.delivery_relid, t.relid));
        EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', t.table_schema, aq._subscriber_view(t.queue_table));
        EXECUTE format('COMMENT ON VIEW %I.%I IS %L', t.table_schema, aq._subscriber_view(t.queue_table),
                       format('The subscribers of the queues of aq queue table %s (Oracle''s AQ$%s_S).',
                              t.queue_table, t.queue_table));
    END IF;
    -- Reading it needs the table's privileges anyway (security_invoker).
    EXECUTE format('GRANT SELECT ON %I.%I TO PUBLIC', t.table_schema, view_name);
    EXECUTE format('COMMENT ON VIEW %I.%I IS %L', t.table_schema, view_name,
                   format('The messages of aq queue table %s with their queue%s and state (Oracle''s AQ$%s).',
                          t.queue_table, CASE WHEN t.multiple_consumers THEN ', consumer' ELSE '' END, t.queue_table));
    INSERT INTO aq.queues (queue_name, queue_table_id, queue_type, comment)
    VALUES (aq._default_exception_queue(t.queue_table), t.queue_table_id, 'exception_queue',
            format('default exception queue of %s', t.queue_table));
END $$;

-- They give the queue table's view PROCESSED when a queue is given a retention_time.
CREATE OR REPLACE FUNCTION aq.create_queue(
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
    IF retention_time > '0' AND t.delivery_relid IS NULL THEN
        PERFORM aq._message_view(t, true);  -- it shows what the queue retains
    END IF;
END $$;

CREATE OR REPLACE FUNCTION aq.alter_queue(
    queue_name text,
    max_retries integer DEFAULT NULL,
    retry_delay interval DEFAULT NULL,
    retention_time interval DEFAULT NULL,
    comment text DEFAULT NULL)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q aq.queues := aq._owned_queue(queue_name);
    t aq.queue_tables;
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
    SELECT * INTO t FROM aq.queue_tables qt WHERE qt.queue_table_id = q.queue_table_id;
    IF alter_queue.retention_time > '0' AND t.delivery_relid IS NULL THEN
        PERFORM aq._message_view(t, true);  -- it shows what the queue retains
    END IF;
END $$;

-- The views of the existing single-consumer queue tables learn PROCESSED and deq_timestamp, as a
-- new queue table's.  An extension script may not replace an object it does not own, so each view
-- (found by its dependency on its table, never by a name alone) is dropped and made again by
-- aq._message_view, given back its owner, comment and grants, and taken out of the extension.  A view
-- with more than aq made (a view built on it, a trigger or rule of its own, column grants, grants by
-- another role, a security label) is left as it was, with a notice: giving one of its queues a
-- retention_time (create_queue, alter_queue, outside this script) replaces it in place.
DO $$
DECLARE
    t aq.queue_tables;
    v record;
    g record;
    made text;
BEGIN
    FOR t IN SELECT * FROM aq.queue_tables qt WHERE qt.delivery_relid IS NULL
                AND EXISTS (SELECT FROM pg_class c WHERE c.oid = qt.relid) ORDER BY qt.queue_table_id LOOP
        SELECT vc.oid, vc.relowner, vc.relacl INTO v
          FROM pg_class tbl JOIN pg_class vc ON vc.relnamespace = tbl.relnamespace
         WHERE tbl.oid = t.relid AND vc.relname = aq._queue_table_view(t.queue_table) AND vc.relkind = 'v'
           AND EXISTS (SELECT FROM pg_rewrite r JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = r.oid
                        WHERE r.ev_class = vc.oid AND d.refclassid = 'pg_class'::regclass AND d.refobjid = t.relid);
        CONTINUE WHEN NOT FOUND;
        -- Only a view as create_queue_table made it, with table-level grants by its owner: anything
        -- more (a view built on it, a trigger, a rule of its own, column grants, grants by another
        -- role, security labels) would not survive the drop.
        IF EXISTS (SELECT FROM pg_depend d WHERE d.refclassid = 'pg_class'::regclass AND d.refobjid = v.oid
                      AND NOT (d.classid = 'pg_rewrite'::regclass
                               AND d.objid IN (SELECT r.oid FROM pg_rewrite r WHERE r.ev_class = v.oid))
                      AND d.deptype <> 'i')
           OR EXISTS (SELECT FROM pg_rewrite r WHERE r.ev_class = v.oid AND r.rulename <> '_RETURN')
           OR EXISTS (SELECT FROM pg_trigger tg WHERE tg.tgrelid = v.oid)
           OR EXISTS (SELECT FROM pg_attribute a WHERE a.attrelid = v.oid AND a.attacl IS NOT NULL)
           OR EXISTS (SELECT FROM aclexplode(v.relacl) a WHERE a.grantor <> v.relowner)
           OR EXISTS (SELECT FROM pg_seclabel l WHERE l.classoid = 'pg_class'::regclass AND l.objoid = v.oid) THEN
            RAISE NOTICE 'aq: view % is left as it was: it has more than aq made', v.oid::regclass
                USING DETAIL = 'Another view, a trigger or rule of its own, column grants, grants by another role or a security label.',
                      HINT = 'aq.alter_queue(..., retention_time => ...) of one of its queues replaces it in place.';
            CONTINUE;
        END IF;
        EXECUTE format('DROP VIEW %s', v.oid::regclass);
        PERFORM aq._message_view(t);
        made := format('%I.%I', (SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                                   WHERE c.oid = t.relid), aq._queue_table_view(t.queue_table));
        EXECUTE format('ALTER VIEW %s OWNER TO %I', made, (SELECT rolname FROM pg_roles WHERE oid = v.relowner));
        EXECUTE format('COMMENT ON VIEW %s IS %L', made,
                       format('The messages of aq queue table %s with their queue and state (Oracle''s AQ$%s).',
                              t.queue_table, t.queue_table));
        FOR g IN SELECT a.grantee, a.privilege_type, a.is_grantable FROM aclexplode(v.relacl) a
                  WHERE a.grantee <> v.relowner LOOP
            EXECUTE format('GRANT %s ON %s TO %s%s', g.privilege_type, made,
                           CASE WHEN g.grantee = 0 THEN 'PUBLIC' ELSE quote_ident((SELECT rolname FROM pg_roles WHERE oid = g.grantee)) END,
                           CASE WHEN g.is_grantable THEN ' WITH GRANT OPTION' ELSE '' END);
        END LOOP;
        -- Last: taking it out of the extension also forgets the privileges the script gave it as
        -- the extension's initial ones (pg_init_privs).
        EXECUTE format('ALTER EXTENSION aq DROP VIEW %s', made);
    END LOOP;
END $$;

-- Removes the messages of the queue table that match the condition (all of them without
-- one); returns how many.  One DELETE whose WHERE clause is fixed: the condition's values
-- are parameters.  Of a multi-consumer queue table, the deliveries that match and then the
-- messages that no delivery is left for.  Messages are deleted from the queue table ONLY: a
-- table inheriting from it is not part of the queue; but a ring's messages are in its segments,
-- the table's children: from a ring table, with them.
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
    IF state NOT IN ('READY', 'WAITING', 'EXPIRED', 'PROCESSED') THEN
        RAISE EXCEPTION 'invalid msg_state: "%"', c.msg_state USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'Valid values are READY, WAITING, EXPIRED, PROCESSED.';
    END IF;
    SELECT coalesce(array_agg(e.queue_id), '{}') INTO exception_queues FROM aq.queues e
     WHERE e.queue_table_id = t.queue_table_id AND e.queue_type = 'exception_queue';
    IF t.delivery_relid IS NULL THEN
        EXECUTE format(
            'DELETE FROM %s%s m'
            ' WHERE ($1::integer IS NULL OR m.q_id = $1 OR m.q_id = -$1)'
            '   AND ($2::text IS NULL OR $2 = CASE WHEN m.q_id < 0 THEN ''PROCESSED'''
            '                                      WHEN m.q_id = ANY ($6) OR m.expiration <= now() THEN ''EXPIRED'''
            '                                      WHEN m.delay > now() THEN ''WAITING'' ELSE ''READY'' END)'
            '   AND ($3::text IS NULL OR m.corrid LIKE $3)'
            '   AND ($4::timestamptz IS NULL OR m.enq_time < $4)'
            '   AND ($5::bigint[] IS NULL OR m.msgid = ANY ($5))',
            CASE WHEN t.segment_count > 0 THEN '' ELSE 'ONLY ' END, aq._queue_relation(t))
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

-- A queue must be stopped (for enqueue and dequeue) before it is dropped, as in Oracle;
-- its messages are removed with it (of a ring table, from its segments too).
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
        -- With the messages it retained (q_id = minus its id: src/queue/retention.hpp).
        EXECUTE format('DELETE FROM %s%s WHERE q_id = $1 OR q_id = -$1', CASE WHEN t.segment_count > 0 THEN '' ELSE 'ONLY ' END, t.relid)
            USING q.queue_id;
    END IF;
    DELETE FROM aq.queues qq WHERE qq.queue_id = q.queue_id;  -- wakes its waiters; takes its subscribers
END $$;

-- For tests, until the time manager switches rings: makes the next segment of a ring queue table
-- its current one (a new generation in aq.segment_log) if that segment is empty on disk, and
-- returns it; 55000 if it is not (segments are not truncated yet, so a ring switches only while
-- it has unused segments).  Its owner or a superuser, with EXECUTE granted (not to PUBLIC).
-- Switches of a queue table are serialised by the transaction-level advisory lock
-- pg_advisory_xact_lock(24945, queue_table_id): the two-key form (its lock tag's fourth field is
-- 2; aq's group locks use 3, groups.hpp), first key 24945 = 0x6171, "aq".
CREATE FUNCTION aq._switch_segment(queue_table text) RETURNS smallint
LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    t aq.queue_tables := aq._queue_table(queue_table);
    current_generation bigint;
    next_segment smallint;
    seg regclass;
BEGIN
    PERFORM aq._check_owner(t);
    IF t.segment_count = 0 THEN
        RAISE EXCEPTION 'queue table "%" has no segments', queue_table USING ERRCODE = 'invalid_parameter_value',
            DETAIL = 'It keeps its messages in the table itself (created with segments => 0).';
    END IF;
    PERFORM pg_advisory_xact_lock(24945, t.queue_table_id);
    SELECT max(l.generation) INTO current_generation FROM aq.segment_log l WHERE l.queue_table_id = t.queue_table_id;
    IF current_generation IS NULL THEN
        RAISE EXCEPTION 'the segment log of queue table "%" is empty', queue_table
            USING ERRCODE = 'object_not_in_prerequisite_state';
    END IF;
    next_segment := ((current_generation + 1) % t.segment_count)::smallint;
    SELECT s.relid INTO seg FROM aq.queue_segments s
     WHERE s.queue_table_id = t.queue_table_id AND s.segment = next_segment;
    IF seg IS NULL OR NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = seg) THEN
        RAISE EXCEPTION 'segment % of queue table "%" does not exist', next_segment, queue_table
            USING ERRCODE = 'undefined_table', DETAIL = 'It was dropped outside aq.drop_queue_table.';
    END IF;
    IF pg_relation_size(seg) <> 0 THEN
        RAISE EXCEPTION 'segment % of queue table "%" is not empty', next_segment, queue_table
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  DETAIL = format('%s has pages on disk; a segment is written again only once truncated.', seg);
    END IF;
    INSERT INTO aq.segment_log (queue_table_id, generation, segment)
    VALUES (t.queue_table_id, current_generation + 1, next_segment);
    RETURN next_segment;
END $$;
REVOKE EXECUTE ON FUNCTION aq._switch_segment(text) FROM PUBLIC;

-- One rotation of a ring queue table now, as the time manager makes every second while the ring
-- holds rows: truncates each segment but the current one whose messages are all gone (consumed by
-- committed transactions), under a lock it takes only if granted at once, and switches to the next
-- segment when the current one is due (aq.segment_size, aq.segment_max_age) and the next is empty;
-- when the next one still holds a few messages (at most a tenth of its rows), it carries them
-- forward into the current one.  switch_due: as if the current segment were due.  Returns how many
-- segments it truncated.  Its owner or a superuser, with EXECUTE granted.
CREATE FUNCTION aq._rotate_segments(queue_table regclass, switch_due boolean DEFAULT false) RETURNS integer
LANGUAGE c VOLATILE STRICT AS 'MODULE_PATHNAME', 'aq_rotate_segments';
REVOKE EXECUTE ON FUNCTION aq._rotate_segments(regclass, boolean) FROM PUBLIC;

-- What each consumer of a queue has waiting, and what holds the queue's removal back (PgQ's
-- get_consumer_info): a row per normal queue and consumer (consumer NULL on a single-consumer
-- queue) that the caller may dequeue from.  waiting: its messages (deliveries) in the queue;
-- ready: those a dequeue could take now by time (not delayed, not expired); oldest_enq_time and
-- lag: its oldest waiting message; unsettled: rows holding the attempt of a rolled-back or dead
-- dequeue that the settler has not counted yet (no dequeue takes them until it has); holds_removal:
-- its oldest delivery is the queue's oldest, so the messages from there on stay until it moves;
-- removable: messages of the queue that no delivery is left for, waiting for a sweep.  A ring
-- table's messages are counted in its segments too.
CREATE FUNCTION aq.consumer_info(queue_name text DEFAULT NULL)
RETURNS TABLE (queue text, consumer text, waiting bigint, ready bigint, oldest_enq_time timestamptz,
               lag interval, unsettled bigint, holds_removal boolean, removable bigint)
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    q record;
BEGIN
    FOR q IN SELECT qq.queue_id, qq.queue_name, t.relid, t.delivery_relid, t.segment_count
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
                '  FROM %s%s WHERE q_id = $2', CASE WHEN q.segment_count > 0 THEN '' ELSE 'ONLY ' END, q.relid)
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

-- The statement that counts the backlog of queue table t per queue and consumer, for
-- aq._queue_health (a scan of the table; of a table that stores each message once, its segments and
-- their receipts, each read once: the runs that took or moved messages joined into a multirange
-- per segment and consumer, looked up per message).
CREATE FUNCTION aq._backlog_query(t aq.queue_tables) RETURNS text
LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $$
DECLARE
    messages text;  -- the query's first part: r, a row per message (and consumer) with its state
    receipts text := (SELECT string_agg(format('SELECT %s::oid AS seg, r.consumer, r.kind, r.runs FROM ONLY %s r',
                                               s.relid::oid, s.receipts), ' UNION ALL ')
                        FROM aq.queue_segments s
                       WHERE s.queue_table_id = t.queue_table_id AND s.receipts IS NOT NULL);
BEGIN
    IF receipts IS NOT NULL THEN
        -- Each message stored once: per consumer, the messages for it (aq._message_recipients)
        -- that no receipt of its took or moved (aq._taken_ranges); and each consumer's copies in
        -- the exception queues.
        messages := format(
            'rc AS (%2$s),'
            ' done AS (SELECT rc.seg, rc.consumer, range_agg(t.r) AS taken'
            '            FROM rc CROSS JOIN LATERAL aq._taken_ranges(rc.kind, rc.runs) t(r) GROUP BY rc.seg, rc.consumer),'
            ' r AS (SELECT m.q_id, s.consumer COLLATE "default" AS consumer_name, m.enq_time,'
            '              CASE WHEN m.expiration <= now() THEN ''expired'''
            '                   WHEN m.delay > now() THEN ''waiting'' ELSE ''ready'' END AS state'
            '         FROM %1$s m CROSS JOIN LATERAL aq._message_recipients(m.q_id, m.msgid, m.recipients) s'
            '         LEFT JOIN done d ON d.seg = m.tableoid AND d.consumer = s.consumer'
            '        WHERE m.consumer_name IS NULL AND NOT coalesce(d.taken @> m.msgid, false)'
            '       UNION ALL'
            '       SELECT m.q_id, m.consumer_name COLLATE "default", m.enq_time, ''ready'''
            '         FROM %1$s m WHERE m.consumer_name IS NOT NULL)',
            t.relid, receipts);
    ELSE
        -- A message per row (a delivery per row of a multi-consumer table with deliveries).
        messages := format(
            'r AS (SELECT m.q_id, %2$s AS consumer_name, m.enq_time,'
            '              CASE WHEN q.queue_type = ''exception_queue'' THEN ''ready'''
            '                   WHEN m.expiration <= now() THEN ''expired'''
            '                   WHEN m.delay > now() THEN ''waiting'' ELSE ''ready'' END AS state'
            '         FROM %3$s%1$s m JOIN aq.queues q ON q.queue_id = m.q_id)',
            coalesce(t.delivery_relid, t.relid),
            CASE WHEN t.delivery_relid IS NULL THEN 'NULL::text' ELSE 'm.consumer_name COLLATE "default"' END,
            -- A ring table's messages are in its segments too.
            CASE WHEN t.delivery_relid IS NULL AND t.segment_count > 0 THEN '' ELSE 'ONLY ' END);
    END IF;
    -- The counts per queue and consumer, and a row for every subscriber without any.
    RETURN 'WITH ' || messages || ','
        '     c AS (SELECT r.q_id, r.consumer_name,'
        '                  count(*) FILTER (WHERE r.state = ''ready'') AS ready,'
        '                  count(*) FILTER (WHERE r.state = ''waiting'') AS waiting,'
        '                  count(*) FILTER (WHERE r.state = ''expired'') AS expired,'
        '                  min(r.enq_time) FILTER (WHERE r.state = ''ready'') AS oldest_ready'
        '             FROM r GROUP BY r.q_id, r.consumer_name),'
        '     k AS (SELECT s.queue_id, s.consumer_name FROM aq.subscribers s JOIN aq.queues q ON q.queue_id = s.queue_id'
        '            WHERE q.queue_table_id = ' || t.queue_table_id ||
        '           UNION SELECT c.q_id, c.consumer_name FROM c WHERE c.consumer_name IS NOT NULL)'
        ' SELECT q.queue_id, k.consumer_name, coalesce(c.ready, 0), coalesce(c.waiting, 0), coalesce(c.expired, 0),'
        '        c.oldest_ready'
        '   FROM aq.queues q LEFT JOIN k ON k.queue_id = q.queue_id'
        '   LEFT JOIN c ON c.q_id = q.queue_id AND c.consumer_name IS NOT DISTINCT FROM k.consumer_name'
        '  WHERE q.queue_table_id = ' || t.queue_table_id;
END $$;

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
    ids integer[];
    consumers text[];
    ready_counts bigint[];
    waiting_counts bigint[];
    expired_counts bigint[];
    oldest timestamptz[];
BEGIN
    FOR t IN SELECT qt.queue_table_id, qt.relid, qt.delivery_relid, qt.segment_count,
                    coalesce(has_table_privilege(qt.relid, 'SELECT'), false)
                    AND (qt.delivery_relid IS NULL OR coalesce(has_table_privilege(qt.delivery_relid, 'SELECT'), false))
                    AND coalesce((SELECT bool_and(coalesce(has_table_privilege(s.receipts, 'SELECT'), false))
                                    FROM aq.queue_segments s
                                   WHERE s.queue_table_id = qt.queue_table_id AND s.receipts IS NOT NULL), true)
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
        -- Whole or not at all: a table its owner broke (a receipts table altered, say) costs its
        -- own counts only, not the view.
        BEGIN
            EXECUTE 'SELECT array_agg(b.q), array_agg(b.c), array_agg(b.r), array_agg(b.w), array_agg(b.e), array_agg(b.o)'
                    ' FROM (' || aq._backlog_query((SELECT qt FROM aq.queue_tables qt WHERE qt.queue_table_id = t.queue_table_id))
                    || ') b(q, c, r, w, e, o)'
               INTO ids, consumers, ready_counts, waiting_counts, expired_counts, oldest;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING 'aq.queue_health: queue table % cannot be counted: %', t.relid::regclass, SQLERRM;
            RETURN QUERY
                SELECT q.queue_id, s.consumer_name, NULL::bigint, NULL::bigint, NULL::bigint, NULL::timestamptz
                  FROM aq.queues q LEFT JOIN aq.subscribers s ON s.queue_id = q.queue_id
                 WHERE q.queue_table_id = t.queue_table_id;
            CONTINUE;
        END;
        RETURN QUERY SELECT * FROM unnest(ids, consumers, ready_counts, waiting_counts, expired_counts, oldest);
    END LOOP;
END $$;

-- Health at a glance: a row per queue and, on a multi-consumer queue table, per consumer, with
-- its backlog (aq._queue_health), its queue table's size, rows and last vacuum (the delivery
-- table's in the delivery_ columns), and the age of the oldest transaction that holds back the
-- removal of dead rows in this database (aq.xmin_holders).  Sizes: pg_table_size (the table
-- with its TOAST table) and pg_indexes_size; last_vacuum: the later of the last VACUUM and the
-- last autovacuum.  Of a ring table, the sums over the table, its segments and their receipts tables (the latest
-- vacuum of any).  Every queue table is listed; the counts are NULL where the caller may not
-- read it.  storage: 'ring' (segment_count > 0) or 'classic'; of a ring, segments (how many),
-- current_segment and generation (the ledger's latest row, aq.segment_log); NULL for a classic
-- table (aq.ring_segments has a row per segment).
CREATE VIEW aq.queue_health WITH (security_invoker = true) AS
SELECT t.queue_table, q.queue_name AS queue, h.consumer_name, h.ready, h.waiting, h.expired,
       h.oldest_ready AS oldest_ready_enq_time, pg_catalog.now() - h.oldest_ready AS oldest_ready_age,
       st.table_bytes, st.index_bytes, st.live_rows, st.dead_rows, st.last_vacuum,
       pg_catalog.pg_table_size(t.delivery_relid) AS delivery_table_bytes,
       pg_catalog.pg_indexes_size(t.delivery_relid) AS delivery_index_bytes,
       sd.n_live_tup AS delivery_live_rows, sd.n_dead_tup AS delivery_dead_rows,
       greatest(sd.last_vacuum, sd.last_autovacuum) AS delivery_last_vacuum,
       x.oldest_xmin_age,
       CASE WHEN t.segment_count > 0 THEN 'ring' ELSE 'classic' END AS storage,
       NULLIF(t.segment_count, 0)::integer AS segments,
       cur.segment::integer AS current_segment, cur.generation
  FROM aq._queue_health() h
  JOIN aq.queues q ON q.queue_id = h.queue_id
  JOIN aq.queue_tables t ON t.queue_table_id = q.queue_table_id
  CROSS JOIN LATERAL (
        SELECT sum(pg_catalog.pg_table_size(r.relid))::bigint AS table_bytes,
               sum(pg_catalog.pg_indexes_size(r.relid))::bigint AS index_bytes,
               sum(s.n_live_tup)::bigint AS live_rows, sum(s.n_dead_tup)::bigint AS dead_rows,
               max(greatest(s.last_vacuum, s.last_autovacuum)) AS last_vacuum
          FROM (SELECT t.relid UNION ALL
                SELECT g.relid FROM aq.queue_segments g WHERE g.queue_table_id = t.queue_table_id UNION ALL
                SELECT g.receipts FROM aq.queue_segments g
                 WHERE g.queue_table_id = t.queue_table_id AND g.receipts IS NOT NULL) r (relid)
          LEFT JOIN pg_catalog.pg_stat_user_tables s ON s.relid = r.relid) st
  LEFT JOIN pg_catalog.pg_stat_user_tables sd ON sd.relid = t.delivery_relid
  LEFT JOIN LATERAL (
        SELECT l.segment, l.generation FROM aq.segment_log l
         WHERE l.queue_table_id = t.queue_table_id AND t.segment_count > 0
         ORDER BY l.generation DESC LIMIT 1) cur ON true
 CROSS JOIN (SELECT max(xh.xmin_age) AS oldest_xmin_age FROM aq.xmin_holders xh WHERE xh.holds_database) x
 ORDER BY t.queue_table, q.queue_name, h.consumer_name;
GRANT SELECT ON aq.queue_health TO PUBLIC;
COMMENT ON VIEW aq.queue_health IS
    'Health at a glance: per queue and consumer, its ready, waiting and expired messages and the oldest ready one; its queue table''s sizes, live and dead rows and last vacuum; the age of the oldest xmin holding this database back; its storage (classic or ring: segments, current segment, generation)';

-- The segments of the ring queue tables: a row per segment (aq.queue_segments) of every ring
-- queue table, by queue table and segment.
--   state: 'current' (the segment of the ledger's latest generation, aq.segment_log), 'empty'
--         (no pages on disk: truncated, or never written), 'sealed' (pages, not current: it waits
--         for its messages to be gone for good, then the time manager truncates it); NULL when
--         the segment's table is gone (dropped by hand; its sizes are NULL too);
--   generation, opened: the latest generation that wrote this segment and when it began (NULL
--         if none did yet);
--   bytes, total_bytes: pg_relation_size and pg_total_relation_size (with indexes and TOAST);
--   live_rows, dead_rows: pg_stat_all_tables' estimates;
--   next_switch_blocked: the segment is the next one after the current and has pages, so the
--         ring cannot switch until it is truncated (the current one grows meanwhile).
-- Security_invoker, as aq.queue_health: the queue tables are those the caller sees in
-- aq.queue_tables; sizes and statistics need no privilege on the segments.
CREATE VIEW aq.ring_segments WITH (security_invoker = true) AS
SELECT t.queue_table, s.segment::integer AS segment, s.relid,
       CASE WHEN s.segment = cur.segment THEN 'current'
            WHEN sz.bytes = 0 THEN 'empty'
            WHEN sz.bytes > 0 THEN 'sealed' END AS state,
       w.generation, w.opened, sz.bytes, sz.total_bytes,
       st.n_live_tup AS live_rows, st.n_dead_tup AS dead_rows,
       s.segment = (cur.generation + 1) % t.segment_count AND sz.bytes > 0 AS next_switch_blocked,
       hold.pids AS held_by, hold.gids AS held_by_prepared
  FROM aq.queue_tables t
  JOIN aq.queue_segments s ON s.queue_table_id = t.queue_table_id
  LEFT JOIN pg_catalog.pg_class c ON c.oid = s.relid
  LEFT JOIN pg_catalog.pg_stat_all_tables st ON st.relid = c.oid
  CROSS JOIN LATERAL (SELECT pg_catalog.pg_relation_size(c.oid) AS bytes,
                             pg_catalog.pg_total_relation_size(c.oid) AS total_bytes) sz
  LEFT JOIN LATERAL (
        SELECT l.segment, l.generation FROM aq.segment_log l
         WHERE l.queue_table_id = t.queue_table_id ORDER BY l.generation DESC LIMIT 1) cur ON true
  LEFT JOIN LATERAL (
        SELECT l.generation, l.opened FROM aq.segment_log l
         WHERE l.queue_table_id = t.queue_table_id AND l.segment = s.segment
         ORDER BY l.generation DESC LIMIT 1) w ON true
  -- The other sessions and the prepared transactions holding a lock on the segment: a truncation
  -- waits for none of them (it is tried again a second later), so they are what keeps a segment all
  -- gone from truncation.  A prepared transaction's locks have no pid: it is found by the lock on
  -- its transaction id, which it holds under the same virtual transaction.
  LEFT JOIN LATERAL (
        SELECT pg_catalog.array_agg(DISTINCT lk.pid ORDER BY lk.pid) FILTER (WHERE lk.pid IS NOT NULL) AS pids,
               pg_catalog.array_agg(DISTINCT p.gid ORDER BY p.gid) FILTER (WHERE p.gid IS NOT NULL) AS gids
          FROM pg_catalog.pg_locks lk
          LEFT JOIN (pg_catalog.pg_locks x JOIN pg_catalog.pg_prepared_xacts p ON p.transaction = x.transactionid)
            ON lk.pid IS NULL AND x.pid IS NULL AND x.locktype = 'transactionid'
           AND x.virtualtransaction = lk.virtualtransaction
         WHERE lk.locktype = 'relation' AND lk.relation = s.relid AND lk.granted
           AND lk.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
           AND lk.pid IS DISTINCT FROM pg_catalog.pg_backend_pid()) hold ON true
 WHERE t.segment_count > 0
 ORDER BY t.queue_table, s.segment;
GRANT SELECT ON aq.ring_segments TO PUBLIC;
COMMENT ON VIEW aq.ring_segments IS
    'The segments of the ring queue tables: per segment, its state (current, empty, sealed), the last generation that wrote it, its sizes and live and dead rows, whether it blocks the next switch, and the other sessions and prepared transactions holding a lock on it (what keeps it from truncation)';

-- The time manager (Oracle's QMON), per database it has served since the server started: its
-- worker's pid (NULL: none runs now), the next time a delay or an expiration passes, its last
-- round and how late that round started after its due time (the largest lag too), how many
-- rounds ran, messages it moved to exception queues, queues it woke because a delay passed,
-- ring segments it truncated, messages it carried forward in rings, segments all gone that it
-- left for later because a reader held them, and its failures with the last error.  Needs aq in shared_preload_libraries (55000 without).
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
    OUT truncated bigint,
    OUT carried bigint,
    OUT rotation_skips bigint,
    OUT failures bigint,
    OUT last_error text)
RETURNS SETOF record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_queue_monitor';

CREATE VIEW aq.queue_monitor WITH (security_invoker = true) AS
SELECT d.datname AS database, m.pid, m.next_due, m.last_round, m.last_lag, m.max_lag, m.rounds,
       m.expired, m.woken, m.truncated, m.carried, m.rotation_skips, m.failures, m.last_error
  FROM aq._queue_monitor() m
  LEFT JOIN pg_catalog.pg_database d ON d.oid = m.database
 ORDER BY d.datname;
GRANT SELECT ON aq.queue_monitor TO PUBLIC;
COMMENT ON VIEW aq.queue_monitor IS
    'The time manager: per database, its worker, next due time, last round and lag, rounds, messages expired, queues woken for delays, ring segments truncated, messages carried forward, truncations put off, failures';

-- ---------------------------------------------------------------- stored once: read grants

-- A stored-once table's segments and receipts tables are read directly by its view aq$<queue table>
-- (src/queue/once_walk.hpp): DEQUEUE gives SELECT on them too, and its revoke takes it back.
CREATE FUNCTION aq._once_read_grants(t aq.queue_tables, granting boolean, role_sql text, grant_option boolean)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
DECLARE rel regclass;
BEGIN
    IF NOT (t.multiple_consumers AND t.delivery_relid IS NULL AND t.segment_count > 0) THEN
        RETURN;
    END IF;
    FOR rel IN SELECT r FROM aq.queue_segments s, LATERAL (VALUES (s.relid), (s.receipts)) v(r)
                WHERE s.queue_table_id = t.queue_table_id AND v.r IS NOT NULL
                  AND EXISTS (SELECT FROM pg_class c WHERE c.oid = v.r)
                  -- A grantor without the grant option there (given it on the queue table by hand)
                  -- grants and revokes the queue's privileges alone: nothing to do there.
                  AND has_table_privilege(v.r, 'SELECT WITH GRANT OPTION') LOOP
        IF granting THEN
            EXECUTE format('GRANT SELECT ON TABLE %s TO %s%s', rel, role_sql,
                           CASE WHEN grant_option THEN ' WITH GRANT OPTION' ELSE '' END);
        ELSE
            EXECUTE format('REVOKE SELECT ON TABLE %s FROM %s CASCADE', rel, role_sql);
        END IF;
    END LOOP;
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
    IF t.delivery_relid IS NOT NULL AND upper(privilege) IN ('DEQUEUE', 'ALL') THEN
        EXECUTE format('GRANT %s ON TABLE %s TO %s%s', aq._dequeue_grant(), t.delivery_relid,
                       aq._grantee(grantee), CASE WHEN grant_option THEN ' WITH GRANT OPTION' ELSE '' END);
    END IF;
    IF upper(privilege) IN ('DEQUEUE', 'ALL') THEN
        PERFORM aq._once_read_grants(t, true, aq._grantee(grantee), grant_option);
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
        PERFORM aq._once_read_grants(t, false, role_sql, false);
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

-- ---------------------------------------------------------------- pg_dump

SELECT pg_catalog.pg_extension_config_dump('aq.queue_segments', '');
SELECT pg_catalog.pg_extension_config_dump('aq.segment_log', '');
