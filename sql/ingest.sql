-- Fast ingest (Oracle's MEMOPTIMIZE FOR WRITE): the article's walk-through, every function,
-- every error, and rolled-back rows never applied.  The drain is asynchronous: every check of
-- the table comes after aq.write_end(), which waits for this session's rows.
CREATE TABLE test_fast_ingest (id bigint PRIMARY KEY, test_col varchar(15));
SELECT aq.enable_fast_ingest('test_fast_ingest');
SELECT relid::regclass FROM aq.fast_ingest_tables;

-- Oracle's hint, verbatim; the statement reports the rows it accepted.
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (1, 'test');
SELECT aq.get_write_hwm_seqid() > aq.seqid_epoch(aq.get_write_hwm_seqid())::bigint << 40 AS has_write_hwm;
SELECT aq.write_end();
SELECT * FROM test_fast_ingest;
SELECT aq.get_apply_hwm_seqid() >= aq.get_write_hwm_seqid() AS applied;
SELECT aq.seqid_epoch(aq.get_write_hwm_seqid()) = epoch AS same_epoch FROM aq.memoptimize_write_area;

-- Several rows, INSERT ... SELECT, a PL/pgSQL loop (ROW_COUNT is what the statement accepted).
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (2, 'two'), (3, 'three');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest SELECT g, 'row ' || g FROM generate_series(10, 1009) g;
DO $$
DECLARE n bigint; total bigint := 0;
BEGIN
  FOR i IN 2001..3000 LOOP
    INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (i, 'loop');
    GET DIAGNOSTICS n = ROW_COUNT;
    total := total + n;
  END LOOP;
  RAISE NOTICE 'loop reported % rows', total;
END $$;
SELECT aq.write_end();
SELECT count(*), min(id), max(id) FROM test_fast_ingest;

-- A procedure committing every row (the article's second loop).
CREATE PROCEDURE ingest_commit_each(first bigint, last bigint) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN first..last LOOP
    INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (i, 'commit each');
    COMMIT;
  END LOOP;
END $$;
CALL ingest_commit_each(5001, 5500);
SELECT aq.write_end();
SELECT count(*) FROM test_fast_ingest WHERE test_col = 'commit each';

-- Rolled back: never applied.  A rolled-back savepoint drops only its own rows.
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (-1, 'rolled back');
ROLLBACK;
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (-2, 'kept');
SAVEPOINT s;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (-3, 'savepoint rb');
ROLLBACK TO SAVEPOINT s;
SAVEPOINT t;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (-4, 'savepoint ok');
RELEASE SAVEPOINT t;
COMMIT;
DO $$
BEGIN
  BEGIN
    INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (-5, 'exception rb');
    RAISE EXCEPTION 'undo';
  EXCEPTION WHEN raise_exception THEN NULL;
  END;
END $$;
SELECT aq.write_end();
SELECT * FROM test_fast_ingest WHERE id < 0 ORDER BY id;

-- Not visible until drained (as in Oracle).  To look at rows before they are applied, another
-- session (dblink) locks aq.fast_ingest_progress, which the drain's batch transaction updates
-- before it commits: the drain waits there until that session commits.
SET client_min_messages = warning;  -- commit_modes may have created it already
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
SELECT dblink_connect('locker', format('host=%s port=%s dbname=%s',
    split_part(current_setting('unix_socket_directories'), ',', 1), current_setting('port'), current_database()));
SELECT dblink_exec('locker', 'BEGIN');
SELECT dblink_exec('locker', 'LOCK TABLE aq.fast_ingest_progress IN EXCLUSIVE MODE');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (7000, 'held');
SELECT count(*) AS visible_before_drain FROM test_fast_ingest WHERE id = 7000;
SELECT rows_buffered, used_bytes > 0 AS ring_used, drain_lag > interval '0' AS lagging FROM aq.memoptimize_write_area;
SELECT split_part(try_sql($$SELECT aq.write_end(timeout => '100 ms')$$), ' (', 1);
SELECT dblink_exec('locker', 'COMMIT');
SELECT aq.write_end();
SELECT count(*) AS visible_after_drain FROM test_fast_ingest WHERE id = 7000;
SELECT rows_buffered, used_bytes, total_bytes = used_bytes + free_bytes AS sizes_add_up, writers, drain_workers
FROM aq.memoptimize_write_area;

-- A full ring (here: the database's share of it, three quarters): the commit waits for space
-- (aq.fast_ingest_wait_timeout), then fails clearly and rolls back; committed rows are kept and
-- applied once the drain runs again.
SELECT dblink_exec('locker', 'BEGIN');
SELECT dblink_exec('locker', 'LOCK TABLE aq.fast_ingest_progress IN EXCLUSIVE MODE');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest SELECT g, 'fill' FROM generate_series(100001, 180000) g;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest SELECT g, 'fill' FROM generate_series(180001, 260000) g;
SET aq.fast_ingest_wait_timeout = '200ms';
\set VERBOSITY sqlstate
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest SELECT g, 'no room' FROM generate_series(340001, 420000) g;
\set VERBOSITY default
RESET aq.fast_ingest_wait_timeout;
SELECT rows_buffered FROM aq.memoptimize_write_area;
SELECT dblink_exec('locker', 'COMMIT');
SELECT dblink_disconnect('locker');
SELECT aq.write_end();
SELECT count(*) FILTER (WHERE test_col = 'fill') AS filled, count(*) FILTER (WHERE test_col = 'no room') AS no_room
FROM test_fast_ingest;

-- Bad rows do not lose the rest of their batch: kept in aq.fast_ingest_rejects with the error.
CREATE TABLE checked (id int PRIMARY KEY, v int NOT NULL CHECK (v > 0));
SELECT aq.enable_fast_ingest('checked');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO checked VALUES (1, 1), (1, 2), (2, -1), (3, NULL), (4, 4);
SELECT aq.write_end();
SELECT * FROM checked ORDER BY id;
SELECT table_name, role_name = current_user AS writer_role, row_text, sqlstate, message
FROM aq.fast_ingest_rejects WHERE relid = 'checked'::regclass ORDER BY seqid;
SELECT rejected_rows FROM aq.memoptimize_write_area;

-- Triggers and foreign keys apply in the drain, as for an ordinary insert.
CREATE TABLE parent (id int PRIMARY KEY);
INSERT INTO parent VALUES (1);
CREATE TABLE child (id int PRIMARY KEY, parent_id int REFERENCES parent, note text);
CREATE FUNCTION child_note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN NEW.note := coalesce(NEW.note, '') || ' by trigger as ' || current_user; RETURN NEW; END $$;
CREATE TRIGGER child_note BEFORE INSERT ON child FOR EACH ROW EXECUTE FUNCTION child_note();
SELECT aq.enable_fast_ingest('child');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO child VALUES (1, 1, 'a'), (2, 99, 'b');
SELECT aq.write_end();
SELECT id, parent_id, note = 'a by trigger as ' || current_user AS trigger_ran FROM child;
SELECT row_text, sqlstate FROM aq.fast_ingest_rejects WHERE relid = 'child'::regclass;

-- Identity columns (GENERATED ALWAYS) keep the writer's value, on both paths; a partition's
-- bound is checked like any constraint.
CREATE TABLE ident (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, parent_id int REFERENCES parent, v text);
CREATE TABLE ident_plain (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v text);
SELECT aq.enable_fast_ingest('ident'), aq.enable_fast_ingest('ident_plain');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ident (parent_id, v) VALUES (1, 'a'), (1, 'b');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO ident_plain (v) VALUES ('a'), ('b');
CREATE TABLE measured (at date, v int) PARTITION BY RANGE (at);
CREATE TABLE measured_2024 PARTITION OF measured FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
SELECT aq.enable_fast_ingest('measured_2024');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO measured_2024 VALUES ('2024-06-01', 1), ('2025-06-01', 2);
SELECT aq.write_end();
SELECT id, v FROM ident ORDER BY id;
SELECT id, v FROM ident_plain ORDER BY id;
SELECT * FROM measured;
SELECT row_text, sqlstate FROM aq.fast_ingest_rejects WHERE relid IN ('ident'::regclass, 'measured_2024'::regclass);

-- A savepoint per row (a PL/pgSQL exception block in a loop): rows of the rolled-back ones are
-- dropped, the others kept, in few chunks.
CREATE TABLE guarded (id int PRIMARY KEY);
SELECT aq.enable_fast_ingest('guarded');
DO $$
BEGIN
  FOR i IN 1..20000 LOOP
    BEGIN
      INSERT /*+ MEMOPTIMIZE_WRITE */ INTO guarded VALUES (i);
      IF i % 1000 = 0 THEN RAISE EXCEPTION 'undo %', i; END IF;
    EXCEPTION WHEN raise_exception THEN NULL;
    END;
  END LOOP;
END $$;
SELECT aq.write_end();
SELECT count(*), count(*) FILTER (WHERE id % 1000 = 0) AS rolled_back_present FROM guarded;

-- The caller's search_path cannot choose the operators of aq's own statements (they run as
-- the owner of aq's tables).
CREATE SCHEMA trap;
CREATE FUNCTION trap.oid_eq(oid, oid) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN RAISE NOTICE 'trap operator ran as %', current_user; RETURN $1 OPERATOR(pg_catalog.=) $2; END $$;
CREATE OPERATOR trap.= (LEFTARG = oid, RIGHTARG = oid, FUNCTION = trap.oid_eq);
SET search_path = trap, pg_catalog, public;
SELECT aq.disable_fast_ingest('guarded');
RESET search_path;
DROP SCHEMA trap CASCADE;

-- aq.memoptimize_write = on: plain inserts go to the ring; what it cannot take stays ordinary.
-- (Whether the drain has applied the row yet is a race: the session's write mark says it went
-- through the ring.)
SET aq.memoptimize_write = on;
SELECT COALESCE(aq.get_write_hwm_seqid(), 0) AS hwm_before \gset
INSERT INTO test_fast_ingest VALUES (8000, 'by setting');
SELECT aq.get_write_hwm_seqid() > :hwm_before AS through_the_ring;
SELECT aq.write_end();
SELECT count(*) AS visible_after_drain FROM test_fast_ingest WHERE id = 8000;
INSERT INTO test_fast_ingest VALUES (8001, 'upsert') ON CONFLICT (id) DO NOTHING;
SELECT count(*) AS upsert_visible_at_once FROM test_fast_ingest WHERE id = 8001;
INSERT INTO test_fast_ingest VALUES (8002, 'returning') RETURNING id;
RESET aq.memoptimize_write;
INSERT INTO test_fast_ingest VALUES (8003, 'no hint');
SELECT count(*) AS ordinary_visible_at_once FROM test_fast_ingest WHERE id = 8003;
EXPLAIN (COSTS OFF) INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (1, 'x');
EXPLAIN (COSTS OFF) INSERT INTO test_fast_ingest VALUES (1, 'x');

-- The hint must follow INSERT; elsewhere it is an ordinary comment.
INSERT INTO /*+ MEMOPTIMIZE_WRITE */ test_fast_ingest VALUES (8004, 'late hint');
SELECT count(*) AS late_hint_is_ordinary FROM test_fast_ingest WHERE id = 8004;

-- Errors.
CREATE TABLE plain (id int);
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO plain VALUES (1)$$);
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (1, 'x') ON CONFLICT DO NOTHING$$);
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (9000, 'x') RETURNING id$$);
CREATE TABLE wide (id int, t text);
SELECT aq.enable_fast_ingest('wide');
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO wide VALUES (1, repeat('x', 2000000))$$);
SELECT split_part(try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest SELECT g, 'x' FROM generate_series(100000, 400000) g$$), ' (', 1);
CREATE VIEW a_view AS SELECT 1 AS x;
SELECT try_sql($$SELECT aq.enable_fast_ingest('a_view')$$);
CREATE TEMP TABLE a_temp (id int);
SELECT try_sql($$SELECT aq.enable_fast_ingest('a_temp')$$);
CREATE TABLE a_parted (id int) PARTITION BY RANGE (id);
SELECT try_sql($$SELECT aq.enable_fast_ingest('a_parted')$$);
SELECT try_sql($$SELECT aq.enable_fast_ingest('no_such_table')$$);
SELECT try_sql($$SELECT aq.write_end(timeout => '-1 s')$$);
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (9002, 'prepared');
PREPARE TRANSACTION 'ingest';
SELECT count(*) FROM pg_prepared_xacts;

-- Privileges: an ordinary role needs INSERT (42501 at insert time), cannot enable others'
-- tables, cannot flush everyone's writes; with INSERT its rows are applied as itself.
CREATE ROLE ingest_user;
GRANT USAGE ON SCHEMA public TO ingest_user;
SET ROLE ingest_user;
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (9003, 'no privilege')$$);
SELECT try_sql($$SELECT aq.enable_fast_ingest('test_fast_ingest')$$);
SELECT try_sql($$SELECT aq.writes_flush()$$);
RESET ROLE;
GRANT INSERT ON child TO ingest_user;
SET ROLE ingest_user;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO child VALUES (3, 1, 'u');
SELECT aq.write_end();
RESET ROLE;
SELECT id, note FROM child WHERE id = 3;
-- Column privileges: INSERT on the columns the statement names is enough, as for any insert.
CREATE TABLE col_priv (id int, v text, at timestamptz DEFAULT '2000-01-01');
SELECT aq.enable_fast_ingest('col_priv');
GRANT INSERT (id, v) ON col_priv TO ingest_user;
SET ROLE ingest_user;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO col_priv (id, v) VALUES (1, 'columns');
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO col_priv VALUES (2, 'all', now())$$);
SELECT aq.write_end();
RESET ROLE;
-- The same through the per-row path (a table with a trigger).
CREATE FUNCTION pass_through() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$;
CREATE TRIGGER pass_through BEFORE INSERT ON col_priv FOR EACH ROW EXECUTE FUNCTION pass_through();
SET ROLE ingest_user;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO col_priv (id, v) VALUES (3, 'with trigger');
SELECT aq.write_end();
RESET ROLE;
SELECT * FROM col_priv ORDER BY id;

-- The administrator's flush, and disabling.
SELECT aq.writes_flush();
SELECT aq.disable_fast_ingest('test_fast_ingest');
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO test_fast_ingest VALUES (9004, 'disabled')$$);
SELECT relid::regclass FROM aq.fast_ingest_tables ORDER BY 1;
SELECT applied_rows > 0 AND batches > 0 AS progress_recorded FROM aq.fast_ingest_progress
WHERE epoch = (SELECT epoch FROM aq.memoptimize_write_area);

DROP TABLE test_fast_ingest, checked, child, ident, ident_plain, parent, plain, a_parted, wide, col_priv, measured, guarded;
DROP VIEW a_view;
DROP PROCEDURE ingest_commit_each;
DROP FUNCTION child_note, pass_through;
DROP OWNED BY ingest_user;
DROP ROLE ingest_user;
