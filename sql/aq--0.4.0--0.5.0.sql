-- aq 0.5.0: hardening — every guarantee aq states holds at the edges a production database meets.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.5.0'" to load this file. \quit

-- ---------------------------------------------------------------- privileges

-- ---------------------------------------------------------------- objects users built (upgrade repairs)

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
