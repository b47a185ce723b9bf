-- Commit modes: Oracle's COMMIT_WAIT x COMMIT_LOGGING at every level PostgreSQL has,
-- checked at commit (aq.last_commit() reports the mode the last commit actually ran with).
--
-- Each case sets its value at one level, the opposite at every less specific level, and —
-- for FORCE_WAIT — NOWAIT (and synchronous_commit = off) at every more specific level.
-- A fresh connection (dblink) picks up the database and role levels, applies the session
-- and transaction levels, commits one row, and reports the mode of that commit.
CREATE EXTENSION dblink;
CREATE TABLE commit_probe (n int);

CREATE FUNCTION here() RETURNS text LANGUAGE sql AS $$
  SELECT format('host=%s port=%s dbname=%s', split_part(current_setting('unix_socket_directories'), ',', 1),
                current_setting('port'), current_database())
$$;

-- Runs one statement in its own connection, outside this transaction (ALTER SYSTEM must).
CREATE FUNCTION outside(statement text) RETURNS void LANGUAGE sql AS $$
  SELECT dblink_exec(here(), statement)
$$;

-- Sets (or, for NULL, resets) a parameter at the system, database or role level.
CREATE FUNCTION set_at(lvl text, param text, val text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE target text := CASE lvl WHEN 'system' THEN 'SYSTEM'
                                WHEN 'database' THEN format('DATABASE %I', current_database())
                                WHEN 'role' THEN format('ROLE %I', current_user) END;
BEGIN
  PERFORM outside(CASE WHEN val IS NULL THEN format('ALTER %s RESET %s', target, param)
                       ELSE format('ALTER %s SET %s = %L', target, param, val) END);
END $$;

-- Reloads and waits until the postmaster publishes the system level (the list of
-- system-level aq parameters equals `expected`).
CREATE FUNCTION reload_system(expected text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE got text;
BEGIN
  PERFORM pg_reload_conf();
  FOR i IN 1..1000 LOOP
    SELECT coalesce(string_agg(parameter || '=' || value, ' ' ORDER BY parameter), '') INTO got
      FROM aq.commit_settings() WHERE level = 'system' AND parameter LIKE 'aq.%';
    IF got = expected THEN RETURN; END IF;
    PERFORM pg_sleep(0.01);
  END LOOP;
  RAISE EXCEPTION 'system level is "%", expected "%"', got, expected;
END $$;

CREATE FUNCTION opposite(val text) RETURNS text LANGUAGE sql AS $$
  SELECT CASE val WHEN 'wait' THEN 'nowait' WHEN 'force_wait' THEN 'nowait' WHEN 'nowait' THEN 'wait'
                  WHEN 'immediate' THEN 'batch' WHEN 'batch' THEN 'immediate' END
$$;

-- One case: `wait_param`/`logging_param` are the parameters used for the tested level
-- (aq.commit_wait + aq.commit_logging, or aq.commit_write for both halves).
CREATE FUNCTION run_case(lvl text, w text, g text, combined boolean DEFAULT false,
                         OUT commit_wait text, OUT commit_logging text, OUT synchronous_commit text)
LANGUAGE plpgsql AS $$
DECLARE
  levels text[] := ARRAY['system', 'database', 'role', 'session', 'transaction'];
  pos int := array_position(levels, lvl);
  lw text; lg text; cw text; sys text := '';
  session_sql text := ''; txn_sql text := '';
  conn text := 'commit_case';
BEGIN
  FOR i IN 1..5 LOOP
    lw := NULL; lg := NULL; cw := NULL;
    IF i = pos THEN
      IF combined THEN cw := g || ',' || w; ELSE lw := w; lg := g; END IF;
    ELSIF i < pos THEN
      lw := opposite(w); lg := opposite(g);
    ELSIF w = 'force_wait' THEN
      lw := 'nowait';
    END IF;
    IF i <= 3 THEN
      PERFORM set_at(levels[i], 'aq.commit_wait', lw);
      PERFORM set_at(levels[i], 'aq.commit_logging', lg);
      PERFORM set_at(levels[i], 'aq.commit_write', cw);
      IF i = 1 THEN
        sys := concat_ws(' ', 'aq.commit_logging=' || lg, 'aq.commit_wait=' || lw, 'aq.commit_write=' || cw);
      END IF;
    ELSE
      IF lw IS NOT NULL OR lg IS NOT NULL OR cw IS NOT NULL THEN
        DECLARE stmt text := concat(
            CASE WHEN lw IS NOT NULL THEN format('SET %s aq.commit_wait = %L; ', CASE WHEN i = 5 THEN 'LOCAL' END, lw) END,
            CASE WHEN lg IS NOT NULL THEN format('SET %s aq.commit_logging = %L; ', CASE WHEN i = 5 THEN 'LOCAL' END, lg) END,
            CASE WHEN cw IS NOT NULL THEN format('SET %s aq.commit_write = %L; ', CASE WHEN i = 5 THEN 'LOCAL' END, cw) END,
            -- FORCE_WAIT must also beat PostgreSQL's own setting below it.
            CASE WHEN i > pos AND w = 'force_wait' THEN format('SET %s synchronous_commit = off; ', CASE WHEN i = 5 THEN 'LOCAL' END) END);
        BEGIN
          IF i = 4 THEN session_sql := stmt; ELSE txn_sql := stmt; END IF;
        END;
      END IF;
    END IF;
  END LOOP;
  PERFORM reload_system(sys);
  PERFORM dblink_connect(conn, here());
  IF session_sql <> '' THEN PERFORM dblink_exec(conn, session_sql); END IF;
  PERFORM dblink_exec(conn, 'BEGIN; ' || txn_sql || 'INSERT INTO commit_probe VALUES (1); COMMIT');
  SELECT r.w, r.g, r.s INTO commit_wait, commit_logging, synchronous_commit
    FROM dblink(conn, 'SELECT commit_wait, commit_logging, synchronous_commit FROM aq.last_commit()')
         AS r(w text, g text, s text);
  PERFORM dblink_disconnect(conn);
END $$;

-- The matrix: {WAIT, NOWAIT, FORCE_WAIT} x {IMMEDIATE, BATCH} x {system, database, role,
-- session, transaction}.  Expected: the level's own value wins over everything less
-- specific; FORCE_WAIT also wins over NOWAIT and synchronous_commit = off below it.
SELECT lvl AS level, w AS set_wait, g AS set_logging, r.*
  FROM unnest(ARRAY['system', 'database', 'role', 'session', 'transaction']) WITH ORDINALITY AS l(lvl, lo),
       unnest(ARRAY['wait', 'nowait', 'force_wait']) WITH ORDINALITY AS a(w, wo),
       unnest(ARRAY['immediate', 'batch']) WITH ORDINALITY AS b(g, go),
       LATERAL run_case(lvl, w, g) r
 ORDER BY lo, wo, go;

-- The combined form, aq.commit_write = '<logging>,<wait>', at every level, over opposite
-- aq.commit_wait / aq.commit_logging values at every less specific level.
SELECT lvl AS level, g || ',' || w AS commit_write, r.*
  FROM unnest(ARRAY['system', 'database', 'role', 'session', 'transaction']) WITH ORDINALITY AS l(lvl, lo),
       unnest(ARRAY['wait', 'nowait']) WITH ORDINALITY AS a(w, wo),
       unnest(ARRAY['immediate', 'batch']) WITH ORDINALITY AS b(g, go),
       LATERAL run_case(lvl, w, g, true) r
 ORDER BY lo, wo, go;

-- Clean up every level.
SELECT set_at(l, p, NULL)
  FROM unnest(ARRAY['system', 'database', 'role']) l,
       unnest(ARRAY['aq.commit_wait', 'aq.commit_logging', 'aq.commit_write']) p;
SELECT reload_system('');

-- ---------------------------------------------------------------- in one session

-- Nothing set: aq leaves the commit to synchronous_commit.
SELECT commit_wait, commit_logging, synchronous_commit, wait_decided_by, forced FROM aq.commit_mode();
SET synchronous_commit = off;
INSERT INTO commit_probe VALUES (2);
SELECT commit_wait, commit_logging, synchronous_commit FROM aq.last_commit();
RESET synchronous_commit;

-- Either half of the combined form may be omitted: it takes its default.
SET aq.commit_wait = nowait;
SET aq.commit_logging = batch;
SET aq.commit_write = 'nowait';   -- set later, at the same level: it wins, logging = IMMEDIATE
SHOW aq.commit_write;
SELECT commit_wait, commit_logging, wait_decided_by, logging_decided_by FROM aq.commit_mode();
SET aq.commit_logging = batch;    -- now aq.commit_logging is the later one
SELECT commit_wait, commit_logging, wait_decided_by, logging_decided_by FROM aq.commit_mode();
SET aq.commit_write = ' Write  BATCH ';
SHOW aq.commit_write;
SELECT commit_wait, commit_logging FROM aq.commit_mode();
RESET ALL;

-- A more specific synchronous_commit beats a less specific aq setting ...
SET aq.commit_wait = wait;
BEGIN;
SET LOCAL synchronous_commit = off;
SELECT commit_wait, synchronous_commit, wait_decided_by FROM aq.commit_mode();
INSERT INTO commit_probe VALUES (3);
COMMIT;
SELECT commit_wait, synchronous_commit FROM aq.last_commit();
-- ... but never FORCE_WAIT, and a session FORCE_WAIT beats the transaction's NOWAIT.
SET aq.commit_wait = force_wait;
BEGIN;
SET LOCAL synchronous_commit = off;
SET LOCAL aq.commit_write = 'batch,nowait';
SELECT * FROM aq.commit_settings() ORDER BY level, parameter;
SELECT commit_wait, commit_logging, synchronous_commit, wait_decided_by, forced FROM aq.commit_mode();
INSERT INTO commit_probe VALUES (4);
COMMIT;
SELECT commit_wait, commit_logging, synchronous_commit, durable_on_return FROM aq.last_commit();
-- Re-setting COMMIT_WAIT lifts the session's FORCE_WAIT (Oracle: FORCE_WAIT is no longer valid).
SET aq.commit_wait = nowait;
SELECT commit_wait, forced FROM aq.commit_mode();
RESET ALL;

-- WAIT means aq.commit_wait_level, but never weakens a synchronous_commit someone set.
SET synchronous_commit = remote_apply;
SET aq.commit_wait = wait;
SELECT synchronous_commit FROM aq.commit_mode();
RESET synchronous_commit;
SET aq.commit_wait_level = remote_apply;
SELECT synchronous_commit FROM aq.commit_mode();
SET aq.commit_wait_level = local;   -- synchronous_commit only at its default: 'local' it is
SELECT synchronous_commit FROM aq.commit_mode();
SET synchronous_commit = on;        -- explicitly stronger: WAIT keeps it
SELECT synchronous_commit FROM aq.commit_mode();
SET aq.commit_wait = nowait;
SELECT synchronous_commit FROM aq.commit_mode();
RESET ALL;

-- An ordinary role asks for BATCH (and NOWAIT) and gets it: no superuser setting is involved.
CREATE ROLE commit_modes_app;
GRANT INSERT ON commit_probe TO commit_modes_app;
SET ROLE commit_modes_app;
SET aq.commit_write = 'batch,wait';
INSERT INTO commit_probe VALUES (5);
SELECT commit_wait, commit_logging, synchronous_commit, durable_on_return FROM aq.last_commit();
SET aq.commit_write = 'batch,nowait';
INSERT INTO commit_probe VALUES (6);
SELECT commit_wait, commit_logging, synchronous_commit FROM aq.last_commit();
SET commit_delay = 10;   -- PostgreSQL's own knob stays superuser-only
RESET ROLE;
RESET ALL;

-- ---------------------------------------------------------------- aq.commit()

-- At top level (outside BEGIN) it commits the current transaction in the given mode; the
-- procedure goes on in a new transaction, which records what aq.last_commit() said.
CREATE TABLE commit_seen (n int, commit_wait text, commit_logging text, synchronous_commit text);
CREATE PROCEDURE insert_and_commit(n int, mode text) LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO commit_probe VALUES (n);
  CALL aq.commit(mode);
  INSERT INTO commit_seen SELECT n, commit_wait, commit_logging, synchronous_commit FROM aq.last_commit();
END $$;
CALL insert_and_commit(10, 'WRITE BATCH NOWAIT');
CALL insert_and_commit(20, 'write immediate wait');
CALL insert_and_commit(30, 'nowait');
SET aq.commit_logging = batch;
CALL insert_and_commit(40, NULL);   -- no clause: the session's settings
RESET aq.commit_logging;
SELECT * FROM commit_seen ORDER BY n;
-- The clause is only for that commit: the session is unchanged.
SHOW aq.commit_write;

-- The article's loop, as a procedure that commits each row.
CREATE PROCEDURE article_loop(iterations int, mode text) LANGUAGE plpgsql AS $$
DECLARE l_dummy int;
BEGIN
  FOR i IN 1..iterations LOOP
    INSERT INTO commit_probe VALUES (i);
    CALL aq.commit(mode);
    SELECT count(*) INTO l_dummy FROM commit_probe WHERE false;
  END LOOP;
END $$;
SELECT commits AS before FROM aq.commit_stats() \gset
CALL article_loop(50, 'WRITE BATCH NOWAIT');
SELECT commits - :before AS commits FROM aq.commit_stats();

-- Where PostgreSQL does not allow a procedure to commit, the error says what to do instead.
\set SHOW_CONTEXT never
BEGIN;
INSERT INTO commit_probe VALUES (40);
CALL aq.commit('WRITE BATCH NOWAIT');
\echo :LAST_ERROR_SQLSTATE
ROLLBACK;
CREATE FUNCTION commit_inside_function() RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  CALL aq.commit('write nowait');
END $$;
SELECT commit_inside_function();
\echo :LAST_ERROR_SQLSTATE
DO $$ BEGIN BEGIN CALL aq.commit('batch'); EXCEPTION WHEN division_by_zero THEN NULL; END; END $$;
\echo :LAST_ERROR_SQLSTATE
\set SHOW_CONTEXT errors

-- ---------------------------------------------------------------- bad values

SET aq.commit_wait = 'never';
SET aq.commit_logging = 'fast';
SET aq.commit_write = 'batch,sometimes';
SET aq.commit_write = 'wait,nowait';
SET aq.commit_write = 'force_wait';
SET aq.commit_wait_level = 'remote';
SET aq.batch_commit_window = 5000;
SET aq.commit_wiat = wait;   -- aq's prefix is reserved: a typo is an error, not a silent placeholder
ALTER SYSTEM SET aq.commit_write = 'batch nowait now';
ALTER DATABASE contrib_regression SET aq.commit_logging = 'later';
CALL aq.commit('WRITE SOMETIMES');
\echo :LAST_ERROR_SQLSTATE
-- Nothing above changed anything.
SELECT * FROM aq.commit_settings() WHERE parameter LIKE 'aq.%';
SHOW aq.commit_wait;
DROP OWNED BY commit_modes_app;
DROP ROLE commit_modes_app;
