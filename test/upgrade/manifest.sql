-- manifest.sql: everything of the database of test/upgrade/populate.sql that a dump and restore
-- must keep, one line per item, in a fixed order and a fixed format.
--
--   psql -X -At -v ON_ERROR_STOP=1 -U postgres -d aq_moved -f test/upgrade/manifest.sql > manifest.txt
--
-- Run by tools/dump-restore-check on the source (before the dump) and on the restored
-- database (before verify.sql changes anything), with the same psql; the two outputs must be
-- identical.  It reads only (temporary functions aside) and works on PostgreSQL 15 to 18: the
-- output does not depend on the server version (17's MAINTAIN privilege is left out), on OIDs
-- or on the session's settings.  Lines: messages (every column of every queue table, by
-- msgid), aq's catalog, sequences, grants (tables, columns, schemas, aq's functions), roles and
-- memberships, settings per database and role, the fast-ingest registry, rejects, progress
-- and target table, the composite payload type, the aq$ views, the extension's version.
\set ON_ERROR_STOP 1
\set QUIET 1
SET search_path = pg_catalog;   -- every regclass and regtype printed schema-qualified
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, MDY';
SET IntervalStyle = 'postgres';
SET extra_float_digits = 1;
SET bytea_output = 'hex';
\pset format unaligned
\pset tuples_only on

-- Every message of every queue table, every column, by queue table then msgid.
CREATE FUNCTION pg_temp.messages() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE t record; line text;
BEGIN
    FOR t IN SELECT queue_table, relid FROM aq.queue_tables ORDER BY queue_table LOOP
        FOR line IN EXECUTE format(
            'SELECT concat_ws(''|'', ''message'', %L, m.msgid, q.queue_name, m.enq_time, m.priority, m.delay,'
            ' m.expiration, m.corrid, m.retry_count, m.exception_queue, m.enq_uid, m.user_data, m.tableoid::regclass)'
            ' FROM %s m LEFT JOIN aq.queues q ON q.queue_id = m.q_id ORDER BY m.msgid',
            t.queue_table, t.relid)
        LOOP
            RETURN NEXT line;
        END LOOP;
    END LOOP;
END $$;
SELECT * FROM pg_temp.messages();

SELECT concat_ws('|', 'extension', extname, extversion, extnamespace::regnamespace, extrelocatable)
  FROM pg_extension WHERE extname = 'aq';
SELECT concat_ws('|', 'queue_table', queue_table_id, queue_table, table_schema, relid, payload_type, sort_list,
                 comment, created)
  FROM aq.queue_tables ORDER BY queue_table_id;
SELECT concat_ws('|', 'segment', t.queue_table, s.segment, s.relid, s.receipts)
  FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id) ORDER BY t.queue_table, s.segment;
SELECT concat_ws('|', 'segment_log', t.queue_table, l.generation, l.segment, l.opened)
  FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id) ORDER BY t.queue_table, l.generation;
SELECT concat_ws('|', 'queue', q.queue_id, q.queue_name, t.queue_table, q.queue_type, q.enqueue_enabled,
                 q.dequeue_enabled, q.max_retries, q.retry_delay, q.retention_time, q.comment, q.created)
  FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id) ORDER BY q.queue_id;

-- Sequences (aq's catalog identities and the queue tables' msgid identities).
SELECT concat_ws('|', 'sequence', schemaname, sequencename, last_value, increment_by, min_value, max_value, cycle)
  FROM pg_sequences WHERE schemaname IN ('aq', 'app', 'public') ORDER BY schemaname, sequencename;

-- Tables, views and types of the users, and their owners.
SELECT concat_ws('|', 'relation', c.oid::regclass, c.relkind, c.relowner::regrole, c.relrowsecurity,
                 array_to_string(c.reloptions, ','), obj_description(c.oid, 'pg_class'))
  FROM pg_class c
 WHERE c.relnamespace IN ('app'::regnamespace, 'public'::regnamespace) AND c.relkind IN ('r', 'v', 'S', 'p')
 ORDER BY 1;
SELECT concat_ws('|', 'view', c.oid::regclass, regexp_replace(pg_get_viewdef(c.oid), '\s+', ' ', 'g'))
  FROM pg_class c
 WHERE c.relnamespace IN ('app'::regnamespace, 'public'::regnamespace) AND c.relkind = 'v' ORDER BY 1;
SELECT concat_ws('|', 'index', i.indexrelid::regclass, pg_get_indexdef(i.indexrelid))
  FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
 WHERE c.relnamespace IN ('app'::regnamespace, 'public'::regnamespace) ORDER BY 1;
SELECT concat_ws('|', 'type_attribute', a.attrelid::regclass, a.attnum, a.attname, format_type(a.atttypid, a.atttypmod))
  FROM pg_type t JOIN pg_attribute a ON a.attrelid = t.typrelid
 WHERE t.oid = 'app.order_t'::regtype AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attnum;

-- Grants: tables and views, columns, schemas, aq's functions (the default ACL where none is
-- recorded, so that "never granted" and "granted the defaults" look the same).
SELECT concat_ws('|', 'table_grant', c.oid::regclass, a.grantee::regrole, a.grantor::regrole, a.privilege_type, a.is_grantable)
  FROM pg_class c, aclexplode(coalesce(c.relacl, acldefault('r', c.relowner))) a
 WHERE c.relnamespace IN ('app'::regnamespace, 'public'::regnamespace, 'aq'::regnamespace)
   AND c.relkind IN ('r', 'v', 'S', 'p') AND a.privilege_type <> 'MAINTAIN'
 ORDER BY 1;
SELECT concat_ws('|', 'column_grant', c.oid::regclass, att.attname, a.grantee::regrole, a.grantor::regrole,
                 a.privilege_type, a.is_grantable)
  FROM pg_class c JOIN pg_attribute att ON att.attrelid = c.oid AND att.attnum > 0 AND att.attacl IS NOT NULL,
       aclexplode(att.attacl) a
 WHERE c.relnamespace IN ('app'::regnamespace, 'public'::regnamespace, 'aq'::regnamespace)
 ORDER BY 1;
SELECT concat_ws('|', 'schema_grant', n.nspname, n.nspowner::regrole, a.grantee::regrole, a.grantor::regrole,
                 a.privilege_type, a.is_grantable)
  FROM pg_namespace n, aclexplode(coalesce(n.nspacl, acldefault('n', n.nspowner))) a
 WHERE n.nspname IN ('app', 'aq') ORDER BY 1;
SELECT concat_ws('|', 'function_grant', p.oid::regprocedure, a.grantee::regrole, a.privilege_type, a.is_grantable)
  FROM pg_proc p, aclexplode(coalesce(p.proacl, acldefault('f', p.proowner))) a
 WHERE p.pronamespace = 'aq'::regnamespace ORDER BY 1;

-- Roles, memberships, settings.
SELECT concat_ws('|', 'role', rolname, rolsuper, rolinherit, rolcreaterole, rolcreatedb, rolcanlogin,
                 rolreplication, rolbypassrls, rolconnlimit)
  FROM pg_roles WHERE rolname LIKE 'aq\_mv\_%' ORDER BY rolname;
SELECT concat_ws('|', 'membership', m.roleid::regrole, m.member::regrole, m.admin_option)
  FROM pg_auth_members m WHERE m.roleid::regrole::text LIKE 'aq\_mv\_%' ORDER BY 1;
SELECT concat_ws('|', 'setting', coalesce(d.datname, '(all databases)'), coalesce(r.rolname, '(all roles)'), s.setting)
  FROM pg_db_role_setting rs
  LEFT JOIN pg_database d ON d.oid = rs.setdatabase
  LEFT JOIN pg_roles r ON r.oid = rs.setrole,
       unnest(rs.setconfig) s(setting)
 WHERE (d.datname = current_database() OR rs.setdatabase = 0)
   AND (r.rolname LIKE 'aq\_mv\_%' OR rs.setrole = 0)
 ORDER BY 1;

-- Fast ingest: the registry (by name), the rejects, the progress, the target table.
SELECT concat_ws('|', 'fast_ingest_table', relid::regclass, enabled_by::regrole, enabled_at)
  FROM aq.fast_ingest_tables ORDER BY 1;
SELECT concat_ws('|', 'reject', seqid, table_name, relid::regclass, role_name, row_text, sqlstate, message, detail,
                 rejected_at)
  FROM aq.fast_ingest_rejects ORDER BY seqid, row_text;
SELECT concat_ws('|', 'progress', epoch, applied_hwm, applied_rows, rejected_rows, batches, updated_at)
  FROM aq.fast_ingest_progress ORDER BY epoch;
SELECT concat_ws('|', 'readings', count(*), md5(string_agg(concat_ws(',', id, v, at), ';' ORDER BY id)))
  FROM app.readings;
