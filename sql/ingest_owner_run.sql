-- hardening B4: the fast-ingest drain applies each writer's rows as that writer, with the
-- writer's own settings (ALTER ROLE ... SET, ALTER ROLE ... IN DATABASE ... SET) and the
-- search_path its session had when it inserted them, never with the database-level settings
-- that a non-superuser database owner controls; and settings are reset between batches and
-- roles, so a writer's trigger that SETs default_transaction_read_only cannot make later rows
-- vanish.  A fresh database: its drain worker starts after the database owner's settings.
SET client_min_messages = warning;
CREATE ROLE regress_aq_dbowner NOLOGIN;
CREATE ROLE regress_aq_writer NOLOGIN;
CREATE DATABASE regress_aq_b4 OWNER regress_aq_dbowner;
ALTER ROLE regress_aq_writer IN DATABASE regress_aq_b4 SET regress.mark = 'writer in b4';
\c regress_aq_b4
SET client_min_messages = warning;
CREATE EXTENSION aq;

-- The database owner (not a superuser) puts a look-alike lower() first in the database's
-- search_path.  It records who ran it.
SET ROLE regress_aq_dbowner;
CREATE SCHEMA trap;
GRANT USAGE ON SCHEMA trap TO PUBLIC;
CREATE TABLE trap.log (who text);
GRANT INSERT ON trap.log TO PUBLIC;
CREATE FUNCTION trap.lower(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO trap.log VALUES (current_user);
  RETURN pg_catalog.lower($1);
END $$;
ALTER DATABASE regress_aq_b4 SET search_path = trap, pg_catalog, public;
RESET ROLE;

-- A superuser's table whose trigger calls lower() and notes a role setting.
SET search_path = public;
CREATE TABLE b4_t (id int, name text, lowered text, mark text, path text);
CREATE FUNCTION b4_fill() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.lowered := lower(NEW.name);
  NEW.mark := current_setting('regress.mark', true);
  NEW.path := current_setting('search_path');
  RETURN NEW;
END $$;
CREATE TRIGGER b4_fill BEFORE INSERT ON b4_t FOR EACH ROW EXECUTE FUNCTION b4_fill();
SELECT aq.enable_fast_ingest('b4_t');
GRANT INSERT ON b4_t TO regress_aq_writer;

-- The superuser writes with its session's search_path (public): the drain must use it.
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b4_t (id, name) VALUES (1, 'SUPERUSER');
SELECT aq.write_end();
-- The writer role gets its ALTER ROLE ... IN DATABASE setting, and its own search_path.
SET ROLE regress_aq_writer;
SET search_path = pg_catalog, public;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO public.b4_t (id, name) VALUES (2, 'WRITER');
SELECT aq.write_end();
RESET ROLE;
SET search_path = public;
SELECT id, lowered, mark, path FROM b4_t ORDER BY id;
SELECT count(*) AS lookalike_calls FROM trap.log;

-- A writer's trigger that switches default_transaction_read_only (and search_path) on: the
-- next batch, of another table, is applied all the same, and nothing is rejected.
CREATE TABLE b4_switch (id int);
CREATE FUNCTION b4_switch() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM set_config('default_transaction_read_only', 'on', false);
  SET search_path = trap, pg_catalog;
  RETURN NEW;
END $$;
CREATE TRIGGER b4_switch BEFORE INSERT ON b4_switch FOR EACH ROW EXECUTE FUNCTION b4_switch();
CREATE TABLE b4_after (id int, name text);
SELECT aq.enable_fast_ingest('b4_switch');
SELECT aq.enable_fast_ingest('b4_after');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b4_switch VALUES (1);
SELECT aq.write_end();
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b4_after VALUES (1, 'after the switch');
SELECT aq.write_end();
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b4_t (id, name) VALUES (3, 'AFTER');
SELECT aq.write_end();
SELECT * FROM b4_switch;
SELECT * FROM b4_after;
SELECT id, lowered, path FROM b4_t WHERE id = 3;
SELECT count(*) AS rejected FROM aq.fast_ingest_rejects;
SELECT count(*) AS lookalike_calls FROM trap.log;

-- The database owner sets default_transaction_read_only on the database: a drain started
-- afterwards still applies the rows (they could otherwise be neither applied nor kept as
-- rejects).  The running drain is stopped, and waited for, so that the next one starts anew.
SET ROLE regress_aq_dbowner;
ALTER DATABASE regress_aq_b4 SET default_transaction_read_only = on;
RESET ROLE;
DO $$
BEGIN
  PERFORM pg_terminate_backend(pid) FROM pg_stat_activity
    WHERE backend_type = 'aq fast ingest drain' AND datname = current_database();
  WHILE EXISTS (SELECT FROM pg_stat_activity
                 WHERE backend_type = 'aq fast ingest drain' AND datname = current_database()) LOOP
    PERFORM pg_sleep(0.01);
    PERFORM pg_stat_clear_snapshot();
  END LOOP;
END $$;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b4_after VALUES (2, 'read-only database default');
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO b4_t (id, name) VALUES (4, 'READ-ONLY DEFAULT');
SELECT aq.write_end();
SELECT * FROM b4_after ORDER BY id;
SELECT id, lowered FROM b4_t WHERE id = 4;
SELECT count(*) AS rejected FROM aq.fast_ingest_rejects;

\c contrib_regression
DROP DATABASE regress_aq_b4 WITH (FORCE);
DROP ROLE regress_aq_writer;
DROP ROLE regress_aq_dbowner;
