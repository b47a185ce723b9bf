-- Fast ingest at the edges of a transaction: PREPARE and savepoints, statements the drain could
-- not apply as written (views, rules), the writer's view of its rejected rows, and a commit that
-- waits for ring space while the drain waits for one of its locks.
CREATE TABLE xact_fi (id int PRIMARY KEY, v text);
SELECT aq.enable_fast_ingest('xact_fi');

-- hardening A1: a hinted insert rolled back to a savepoint, then PREPARE TRANSACTION: the
-- writer's state of that transaction (in its memory, gone with it) survived, and the session's
-- next hinted insert and COMMIT crashed the server.  Now the prepared transaction leaves nothing
-- behind: the next transactions' rows are all applied, and no writer stays counted.
BEGIN;
SAVEPOINT s;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi VALUES (1, 'rolled back');
ROLLBACK TO SAVEPOINT s;
PREPARE TRANSACTION 'xact_fi_p1';
SELECT writers FROM aq.memoptimize_write_area;
BEGIN;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi SELECT g, 'after prepare' FROM generate_series(10, 2000) g;
SELECT count(*) > 0 AS catalog_read FROM pg_class;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi SELECT g, 'after prepare' FROM generate_series(3000, 5000) g;
COMMIT;
COMMIT PREPARED 'xact_fi_p1';
-- The same through an exception block (a subtransaction PL/pgSQL rolls back), then ROLLBACK
-- PREPARED, then a savepoint in the next transaction.
BEGIN;
DO $$
BEGIN
  INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi VALUES (2, 'rolled back');
  RAISE EXCEPTION 'undo';
EXCEPTION WHEN raise_exception THEN NULL;
END $$;
PREPARE TRANSACTION 'xact_fi_p2';
ROLLBACK PREPARED 'xact_fi_p2';
BEGIN;
SAVEPOINT a;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi VALUES (6000, 'savepoint after prepare');
RELEASE SAVEPOINT a;
COMMIT;
-- Rows left in the transaction: PREPARE refuses them (0A000) and the transaction rolls back;
-- the session goes on as before.
BEGIN;
SAVEPOINT b;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi VALUES (3, 'prepared rows');
RELEASE SAVEPOINT b;
\set VERBOSITY sqlstate
PREPARE TRANSACTION 'xact_fi_p3';
\set VERBOSITY default
SELECT count(*) AS prepared FROM pg_prepared_xacts;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fi VALUES (6001, 'after a refused prepare');
SELECT aq.write_end();
SELECT v, count(*), min(id), max(id) FROM xact_fi GROUP BY v ORDER BY v;
SELECT writers FROM aq.memoptimize_write_area;

-- hardening 8: an INSERT the drain could not apply as the statement meant it is refused at
-- statement time (0A000), not accepted ("INSERT 0 1") and rejected later: through a view's
-- INSTEAD rule or an updatable view (whose privileges are the view owner's, while the drain
-- applies as the writer: it rejected the row with 42501), through a view WITH CHECK OPTION
-- (never checked), into a table with an INSERT rule (which the drain's insert would run a
-- second time).  Without the hint each is an ordinary insert.
CREATE ROLE xact_writer;
CREATE ROLE xact_other;
GRANT USAGE ON SCHEMA public TO xact_writer, xact_other;
CREATE TABLE xact_base (id int, v text);
SELECT aq.enable_fast_ingest('xact_base');
CREATE VIEW xact_ruled AS SELECT id, v FROM xact_base;
CREATE RULE xact_ruled_insert AS ON INSERT TO xact_ruled DO INSTEAD INSERT INTO xact_base VALUES (NEW.id, NEW.v);
CREATE VIEW xact_auto AS SELECT id, v FROM xact_base;
CREATE VIEW xact_checked_view WITH (security_invoker) AS SELECT id, v FROM xact_base WHERE id > 0 WITH CHECK OPTION;
GRANT INSERT ON xact_ruled, xact_auto TO xact_writer;
SET ROLE xact_writer;
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_ruled VALUES (1, 'through a rule')$$);
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_auto VALUES (2, 'through a view')$$);
INSERT INTO xact_ruled VALUES (3, 'ordinary, rule');
INSERT INTO xact_auto VALUES (4, 'ordinary, view');
SET aq.memoptimize_write = on;
INSERT INTO xact_ruled VALUES (5, 'by setting, rule');
RESET aq.memoptimize_write;
RESET ROLE;
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_ruled VALUES (6, 'superuser, rule')$$);
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_checked_view VALUES (-7, 'fails the check')$$);
CREATE TABLE xact_log (id int);
CREATE RULE xact_base_log AS ON INSERT TO xact_base DO ALSO INSERT INTO xact_log VALUES (NEW.id);
SELECT try_sql($$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_base VALUES (8, 'table with a rule')$$);
DROP RULE xact_base_log ON xact_base;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_base VALUES (9, 'hinted, direct');
SELECT aq.write_end();
SELECT * FROM xact_base ORDER BY id;
SELECT count(*) AS rejected FROM aq.fast_ingest_rejects WHERE relid = 'xact_base'::regclass;

-- hardening 8: a writer sees its own rejected rows in aq.fast_ingest_rejects (they held the
-- error only a superuser could read); another role sees none of them.
CREATE TABLE xact_checked (id int PRIMARY KEY, v int CHECK (v > 0));
SELECT aq.enable_fast_ingest('xact_checked');
GRANT INSERT ON xact_checked TO xact_writer, xact_other;
SET ROLE xact_writer;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_checked VALUES (1, 1), (2, -2);
SELECT aq.write_end();
SELECT table_name, role_name, row_text, sqlstate FROM aq.fast_ingest_rejects ORDER BY seqid;
RESET ROLE;
SET ROLE xact_other;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_checked VALUES (1, 3);
SELECT aq.write_end();
SELECT table_name, role_name, row_text, sqlstate FROM aq.fast_ingest_rejects ORDER BY seqid;
SELECT try_sql($$DELETE FROM aq.fast_ingest_rejects$$);
RESET ROLE;
SELECT role_name, row_text, sqlstate FROM aq.fast_ingest_rejects WHERE relid = 'xact_checked'::regclass ORDER BY seqid;

-- hardening 10: a commit while the drain waits for a lock of its transaction.  Here the drain's
-- insert of a duplicate key waits for this transaction's own uncommitted row of that key, with
-- more rows behind it than the ring holds at once.  PostgreSQL's deadlock detector cannot see
-- such a cycle (a commit waiting for ring space waits on a condition variable; on 0.4.0 it
-- waited the whole aq.fast_ingest_wait_timeout and failed with 53000).  Now the cycle cannot
-- hold: the drain works on copies of the records it took, so their ring space is free while it
-- waits, and a run that waits past its time budget is deferred while the other tables' rows go
-- on; and a commit that still waits for space finds a drain waiting for its locks within about
-- deadlock_timeout and fails with 40P01 (the case of aq.writes_flush below).  So this COMMIT
-- succeeds, and the drain's duplicate row is rejected afterwards.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS dblink;
RESET client_min_messages;
CREATE TABLE xact_unique (id int PRIMARY KEY, v text);
CREATE TABLE xact_fill (id bigint PRIMARY KEY, test_col varchar(15));
SELECT aq.enable_fast_ingest('xact_unique'), aq.enable_fast_ingest('xact_fill');
SELECT dblink_connect('xact_w', format('host=%s port=%s dbname=%s',
    split_part(current_setting('unix_socket_directories'), ',', 1), current_setting('port'), current_database()));
BEGIN;
SET LOCAL deadlock_timeout = '100ms';
SET LOCAL aq.fast_ingest_wait_timeout = '30s';
INSERT INTO xact_unique VALUES (1, 'the writer''s own row');
SELECT dblink_exec('xact_w', $$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_unique VALUES (1, 'drained later')$$);
SELECT dblink_exec('xact_w', $$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fill SELECT g, 'fill' FROM generate_series(100001, 180000) g$$);
SELECT dblink_exec('xact_w', $$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fill SELECT g, 'fill' FROM generate_series(180001, 260000) g$$);
SELECT dblink_exec('xact_w', $$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fill SELECT g, 'fill' FROM generate_series(260001, 340000) g$$);
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_fill SELECT g, 'no room' FROM generate_series(340001, 420000) g;
\set VERBOSITY sqlstate
COMMIT;
\set VERBOSITY default
SELECT aq.writes_flush();
SELECT * FROM xact_unique;
SELECT row_text, sqlstate FROM aq.fast_ingest_rejects WHERE relid = 'xact_unique'::regclass ORDER BY seqid;
SELECT test_col, count(*) FROM xact_fill GROUP BY test_col ORDER BY test_col;
-- The same cycle for a session that waits for the drain to apply rows (aq.writes_flush here,
-- aq.write_end alike) in a transaction holding the lock the drain waits for: 40P01 at once (it
-- waited until its timeout, forever without one).
BEGIN;
SET LOCAL deadlock_timeout = '100ms';
INSERT INTO xact_unique VALUES (2, 'the waiter''s own row');
SELECT dblink_exec('xact_w', $$INSERT /*+ MEMOPTIMIZE_WRITE */ INTO xact_unique VALUES (2, 'drained later')$$);
\set VERBOSITY sqlstate
SELECT aq.writes_flush('30 s');
\set VERBOSITY default
ROLLBACK;
SELECT dblink_disconnect('xact_w');
SELECT aq.writes_flush();
SELECT * FROM xact_unique ORDER BY id;

-- hardening 10: aq.fast_ingest_wait_timeout is at most 60 s.  (PostgreSQL 17 writes the range
-- with its units, 15 without: the range is shown in one form.)
SELECT regexp_replace(try_sql($$SET aq.fast_ingest_wait_timeout = '61s'$$), ' \(0( ms)? \.\. 60000( ms)?\)$', ' (0 .. 60000 ms)');
SELECT regexp_replace(try_sql($$SET aq.fast_ingest_wait_timeout = '1h'$$), ' \(0( ms)? \.\. 60000( ms)?\)$', ' (0 .. 60000 ms)');
SET aq.fast_ingest_wait_timeout = '60s';
SHOW aq.fast_ingest_wait_timeout;
RESET aq.fast_ingest_wait_timeout;

DROP TABLE xact_fi, xact_checked, xact_unique, xact_fill, xact_log;
DROP VIEW xact_ruled, xact_auto, xact_checked_view;
DROP TABLE xact_base;
DROP OWNED BY xact_writer, xact_other;
DROP ROLE xact_writer, xact_other;
