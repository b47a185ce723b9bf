-- Set-up for tools/bench/commit-bench (the commit-modes benchmark): schema commit_bench with the
-- article's table t, the table the pgbench sessions insert into, and the article's PL/SQL block
-- as two PL/pgSQL procedures.  Oracle's `SELECT ... FROM dual` is PostgreSQL's SELECT without
-- FROM (Oracle itself has answered it without touching a table since 10g, "FAST DUAL").
-- Leftovers of an interrupted run are dropped first; commit-bench drops the schema at the end.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS aq;
DROP SCHEMA IF EXISTS commit_bench CASCADE;
CREATE SCHEMA commit_bench;

-- The whole cluster's WAL writes and syncs: pg_stat_wal's wal_write and wal_sync up to PostgreSQL
-- 17; PostgreSQL 18 counts them in pg_stat_io (object 'wal', context 'normal': not the zero-fill
-- of new segments, which pg_stat_wal did not count either).
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 180000 THEN
        CREATE FUNCTION commit_bench.wal_counts(OUT wal_write bigint, OUT wal_sync bigint)
        LANGUAGE sql STABLE AS $f$
            SELECT sum(writes)::bigint, sum(fsyncs)::bigint FROM pg_stat_io WHERE object = 'wal' AND context = 'normal'
        $f$;
    ELSE
        CREATE FUNCTION commit_bench.wal_counts(OUT wal_write bigint, OUT wal_sync bigint)
        LANGUAGE sql STABLE AS $f$ SELECT wal_write, wal_sync FROM pg_stat_wal $f$;
    END IF;
END $$;

-- Autovacuum is off on these tables: its WAL writes and syncs would land in the measurements.
CREATE TABLE commit_bench.t (id integer, pad varchar(100)) WITH (autovacuum_enabled = off);
CREATE TABLE commit_bench.p (id integer, pad varchar(100)) WITH (autovacuum_enabled = off);

-- The article's block:
--   FOR i IN 1..1000 LOOP
--     INSERT INTO t VALUES (i, rpad('*',100,'*'));
--     COMMIT;
--     SELECT count(*) INTO l_dummy FROM dual;
--   END LOOP;
-- with FROM dual dropped, as PostgreSQL code does.
-- The plain COMMIT takes the session's aq.commit_write.
CREATE PROCEDURE commit_bench.article_loop(n integer DEFAULT 1000)
LANGUAGE plpgsql AS $$
DECLARE
    l_dummy integer;
BEGIN
    FOR i IN 1..n LOOP
        INSERT INTO commit_bench.t VALUES (i, rpad('*', 100, '*'));
        COMMIT;
        SELECT count(*) INTO l_dummy;
    END LOOP;
END $$;

-- The same with the per-transaction form: COMMIT WRITE <mode> instead of COMMIT.
CREATE PROCEDURE commit_bench.article_loop_aq_commit(mode text, n integer DEFAULT 1000)
LANGUAGE plpgsql AS $$
DECLARE
    l_dummy integer;
BEGIN
    FOR i IN 1..n LOOP
        INSERT INTO commit_bench.t VALUES (i, rpad('*', 100, '*'));
        CALL aq.commit(mode);
        SELECT count(*) INTO l_dummy;
    END LOOP;
END $$;
