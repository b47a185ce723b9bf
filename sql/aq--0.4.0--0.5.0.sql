-- aq 0.5.0: hardening — every guarantee aq states holds at the edges a production database meets.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------- privileges

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

-- ---------------------------------------------------------------- fast ingest

-- A writer sees its own rejected rows (the drain records the writing role's name in
-- role_name); administrators (superusers, the table's owner) see every row.  Read-only for
-- everyone else: only the drain writes the table.
ALTER TABLE aq.fast_ingest_rejects ENABLE ROW LEVEL SECURITY;
CREATE POLICY writer_sees_own_rejects ON aq.fast_ingest_rejects FOR SELECT TO PUBLIC
    USING (role_name OPERATOR(pg_catalog.=) CAST(CURRENT_USER AS pg_catalog.text));
GRANT SELECT ON aq.fast_ingest_rejects TO PUBLIC;
