-- aq 0.3.0: fast ingest (Oracle's MEMOPTIMIZE FOR WRITE, DBMS_MEMOPTIMIZE, V$MEMOPTIMIZE_WRITE_AREA).
-- Rows inserted with the /*+ MEMOPTIMIZE_WRITE */ hint (or with aq.memoptimize_write = on) into
-- an enabled table go to a shared-memory ring when their transaction commits; a background
-- drain applies them in batches.  Needs shared_preload_libraries = 'aq'.
\echo Use "ALTER EXTENSION aq UPDATE TO '0.3.0'" to load this file. \quit

-- Tables enabled with aq.enable_fast_ingest (Oracle: ALTER TABLE ... MEMOPTIMIZE FOR WRITE).
CREATE TABLE aq.fast_ingest_tables (
    relid oid PRIMARY KEY,
    enabled_by oid NOT NULL,
    enabled_at timestamptz NOT NULL DEFAULT now()
);

-- Per epoch (one incarnation of the ring: it changes at every server start and crash restart),
-- the highest id such that every row of this database with an id at or below it was applied
-- (or rejected).  Written in each drain batch's own transaction, so it survives a crash: after
-- one, the ids of the ended epoch above applied_hwm are the rows that were lost.
CREATE TABLE aq.fast_ingest_progress (
    epoch integer PRIMARY KEY,
    applied_hwm bigint NOT NULL,
    applied_rows bigint NOT NULL,
    rejected_rows bigint NOT NULL,
    batches bigint NOT NULL,
    updated_at timestamptz NOT NULL
);

-- Rows the drain could not apply (duplicate key, check, not-null or foreign-key violation,
-- privilege revoked, table dropped or altered), kept with their error.  Oracle drops them.
CREATE TABLE aq.fast_ingest_rejects (
    seqid bigint NOT NULL,
    table_name text,
    relid oid NOT NULL,
    role_name text,
    row_text text,
    sqlstate text NOT NULL,
    message text NOT NULL,
    detail text,
    rejected_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ON aq.fast_ingest_rejects (relid, seqid);

SELECT pg_catalog.pg_extension_config_dump('aq.fast_ingest_tables', '');
SELECT pg_catalog.pg_extension_config_dump('aq.fast_ingest_progress', '');
SELECT pg_catalog.pg_extension_config_dump('aq.fast_ingest_rejects', '');

REVOKE ALL ON aq.fast_ingest_tables, aq.fast_ingest_progress, aq.fast_ingest_rejects FROM PUBLIC;
GRANT SELECT ON aq.fast_ingest_tables, aq.fast_ingest_progress TO PUBLIC;

-- ALTER TABLE t MEMOPTIMIZE FOR WRITE / NO MEMOPTIMIZE FOR WRITE.  The table's owner only.
CREATE FUNCTION aq.enable_fast_ingest(tbl regclass) RETURNS void
LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'aq_enable_fast_ingest';
CREATE FUNCTION aq.disable_fast_ingest(tbl regclass) RETURNS void
LANGUAGE c STRICT VOLATILE AS 'MODULE_PATHNAME', 'aq_disable_fast_ingest';

-- DBMS_MEMOPTIMIZE.GET_WRITE_HWM_SEQID: the last sequence id this session's committed
-- fast-ingest rows got (NULL before any).
CREATE FUNCTION aq.get_write_hwm_seqid() RETURNS bigint
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_get_write_hwm_seqid';
-- DBMS_MEMOPTIMIZE.GET_APPLY_HWM_SEQID: in this database, every row with an id at or below it
-- is in its table (or in aq.fast_ingest_rejects).
CREATE FUNCTION aq.get_apply_hwm_seqid() RETURNS bigint
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_get_apply_hwm_seqid';
-- DBMS_MEMOPTIMIZE.WRITE_END: waits until this session's committed rows are applied.
CREATE FUNCTION aq.write_end(timeout interval DEFAULT NULL) RETURNS void
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_write_end';
-- DBMS_MEMOPTIMIZE_ADMIN.WRITES_FLUSH: waits until every row committed so far, by any session
-- in any database, is applied.  Administrators only (EXECUTE is not granted to PUBLIC).
CREATE FUNCTION aq.writes_flush(timeout interval DEFAULT NULL) RETURNS void
LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_writes_flush';
REVOKE EXECUTE ON FUNCTION aq.writes_flush(interval) FROM PUBLIC;

-- The epoch a sequence id belongs to.
CREATE FUNCTION aq.seqid_epoch(seqid bigint) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE SET search_path = pg_catalog, pg_temp
AS 'SELECT (seqid >> 40)::integer';

CREATE FUNCTION aq._memoptimize_write_area(
    OUT total_bytes bigint,
    OUT used_bytes bigint,
    OUT free_bytes bigint,
    OUT rows_buffered bigint,
    OUT writers integer,
    OUT applied_rows bigint,
    OUT rejected_rows bigint,
    OUT batches bigint,
    OUT epoch integer,
    OUT write_hwm bigint,
    OUT apply_hwm bigint,
    OUT drain_workers integer,
    OUT oldest_undrained timestamptz)
RETURNS record LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_memoptimize_write_area';

-- V$MEMOPTIMIZE_WRITE_AREA, with the drain's figures: rows_buffered are committed (or
-- committing) rows not yet applied; writers are sessions with fast-ingest rows in their
-- transaction; drain_lag is the age of the oldest committed row not yet applied.
CREATE VIEW aq.memoptimize_write_area AS
SELECT total_bytes, used_bytes, free_bytes, rows_buffered, writers, applied_rows, rejected_rows, batches,
       coalesce(clock_timestamp() - oldest_undrained, interval '0') AS drain_lag,
       epoch, write_hwm, apply_hwm, drain_workers
FROM aq._memoptimize_write_area();
GRANT SELECT ON aq.memoptimize_write_area TO PUBLIC;
