-- Set-up for tools/bench/ingest-bench (the fast-ingest benchmark, Oracle's MEMOPTIMIZE FOR WRITE):
-- schema ingest_bench with the article's two tables and its row-by-row PL/SQL blocks as PL/pgSQL
-- procedures.  ../shared/articles/memoptimize-for-write-fast-ingest.txt:
--
--   CREATE TABLE test_fast_ingest (id NUMBER(20) PRIMARY KEY, test_col VARCHAR2(15))
--     segment creation immediate MEMOPTIMIZE FOR WRITE;
--   CREATE TABLE test_standard    (id NUMBER(20) PRIMARY KEY, test_col VARCHAR2(15));
--
-- NUMBER(20) is bigint here; MEMOPTIMIZE FOR WRITE is aq.enable_fast_ingest(), which ingest-bench
-- calls itself (so that the standard-table half also runs on an aq without fast ingest).
-- Leftovers of an interrupted run are dropped first; ingest-bench drops the schema at the end.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS aq;
DROP SCHEMA IF EXISTS ingest_bench CASCADE;
CREATE SCHEMA ingest_bench;

-- Autovacuum is off on both tables: since PostgreSQL 13 a million inserts start an autovacuum of
-- the table, which would compete with the next measurement for the 2 cores.  Every measurement
-- starts from TRUNCATE, so nothing needs vacuuming.
CREATE TABLE ingest_bench.test_fast_ingest (id bigint PRIMARY KEY, test_col varchar(15))
    WITH (autovacuum_enabled = off);
CREATE TABLE ingest_bench.test_standard (id bigint PRIMARY KEY, test_col varchar(15))
    WITH (autovacuum_enabled = off);

-- (b), the article's second block, "commit row by row":
--   begin
--     for i in 1..1000000 loop
--       INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (i,'test');
--     commit;
--     end loop;
--   end;
-- as procedures (COMMIT inside a loop needs a procedure or a DO block run outside a transaction
-- block).  Static SQL: the INSERT is prepared once per session, its text keeps the hint comment.
CREATE PROCEDURE ingest_bench.commit_loop_fast(n integer)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ingest_bench.test_fast_ingest VALUES (i, 'test');
        COMMIT;
    END LOOP;
END $$;

CREATE PROCEDURE ingest_bench.commit_loop_standard(n integer)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        INSERT INTO ingest_bench.test_standard VALUES (i, 'test');
        COMMIT;
    END LOOP;
END $$;

-- The reference of (b): the same loop, its INSERT inserting no row (WHERE false: the executor starts
-- and ends the statement, no row is formed): about the cost of the loop itself.
CREATE PROCEDURE ingest_bench.commit_loop_empty(n integer)
LANGUAGE plpgsql AS $$
BEGIN
    FOR i IN 1..n LOOP
        INSERT INTO ingest_bench.test_standard SELECT i, 'test' WHERE false;
        COMMIT;
    END LOOP;
END $$;
