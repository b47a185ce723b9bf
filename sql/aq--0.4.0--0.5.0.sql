-- aq 0.5.0: hardening — every guarantee aq states holds at the edges a production database meets.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------- privileges

-- ---------------------------------------------------------------- objects users built (upgrade repairs)

-- ---------------------------------------------------------------- dequeue attempts

-- ---------------------------------------------------------------- fast ingest

-- A writer sees its own rejected rows (the drain records the writing role's name in
-- role_name); administrators (superusers, the table's owner) see every row.  Read-only for
-- everyone else: only the drain writes the table.
ALTER TABLE aq.fast_ingest_rejects ENABLE ROW LEVEL SECURITY;
CREATE POLICY writer_sees_own_rejects ON aq.fast_ingest_rejects FOR SELECT TO PUBLIC
    USING (role_name OPERATOR(pg_catalog.=) CAST(CURRENT_USER AS pg_catalog.text));
GRANT SELECT ON aq.fast_ingest_rejects TO PUBLIC;
