-- pgTAP: commit modes — the parameters, who may set what, and the SQL functions as an
-- ordinary role sees them.  The level-by-level matrix is in sql/commit_modes.sql (pg_regress),
-- which can reconnect and reload.  Run as a superuser; everything is rolled back.
BEGIN;
SELECT plan(37);

SET LOCAL search_path = public;
SET LOCAL client_min_messages = warning;

------------------------------------------------------------------------------ the objects

SELECT has_function('aq', 'commit', ARRAY['text'], 'procedure aq.commit(text) exists');
SELECT is((SELECT prokind FROM pg_proc WHERE oid = 'aq.commit(text)'::regprocedure), 'p'::"char",
          'aq.commit is a procedure (CALL aq.commit(...))');
SELECT has_function('aq', 'commit_mode', 'aq.commit_mode() exists');
SELECT has_function('aq', 'commit_settings', 'aq.commit_settings() exists');
SELECT has_function('aq', 'last_commit', 'aq.last_commit() exists');
SELECT has_function('aq', 'commit_stats', ARRAY['boolean'], 'aq.commit_stats(boolean) exists');

------------------------------------------------------------------------------ the parameters

-- Every commit parameter is settable by any role, like Oracle's ALTER SESSION: it can only
-- change that session's own commits (FORCE_WAIT above cannot be lowered from below).
SELECT is(context, 'user', name || ' is settable by every role (USERSET)')
  FROM pg_settings
 WHERE name IN ('aq.commit_wait', 'aq.commit_logging', 'aq.commit_write', 'aq.commit_wait_level',
                'aq.batch_commit_window')
 ORDER BY name;
SELECT is(enumvals, ARRAY['wait', 'nowait', 'force_wait'], 'aq.commit_wait takes Oracle''s three values')
  FROM pg_settings WHERE name = 'aq.commit_wait';
SELECT is(enumvals, ARRAY['immediate', 'batch'], 'aq.commit_logging takes Oracle''s two values')
  FROM pg_settings WHERE name = 'aq.commit_logging';
SELECT is(boot_val, 'wait', 'aq.commit_wait defaults to WAIT, as in Oracle')
  FROM pg_settings WHERE name = 'aq.commit_wait';
SELECT is(boot_val, 'immediate', 'aq.commit_logging defaults to IMMEDIATE, as in Oracle')
  FROM pg_settings WHERE name = 'aq.commit_logging';
-- PostgreSQL's own group-commit knob stays superuser-only: aq's BATCH does not use it.
SELECT is(context, 'superuser', 'commit_delay is still superuser-only')
  FROM pg_settings WHERE name = 'commit_delay';

------------------------------------------------------------------------------ as an ordinary role

CREATE ROLE aq_commit_app LOGIN;
CREATE TABLE commit_app_t (n int);
GRANT INSERT ON commit_app_t TO aq_commit_app;
SET LOCAL ROLE aq_commit_app;

SELECT lives_ok($$SET LOCAL aq.commit_write = 'batch,nowait'$$, 'an ordinary role sets aq.commit_write');
SELECT is((SELECT commit_wait || '/' || commit_logging || '/' || synchronous_commit FROM aq.commit_mode()),
          'nowait/batch/off', 'and its transaction would commit NOWAIT/BATCH with synchronous_commit off');
SELECT lives_ok($$SET LOCAL aq.commit_wait = 'force_wait'$$, 'an ordinary role may force waiting on itself');
SELECT is((SELECT forced FROM aq.commit_mode()), true, 'FORCE_WAIT is then in force');
SELECT is((SELECT synchronous_commit FROM aq.commit_mode()), 'on', 'and the commit waits');
SELECT lives_ok($$SET LOCAL aq.batch_commit_window = 500$$,
                'aq.batch_commit_window is the role''s own: only its commits wait that long');
SELECT throws_ok($$SET LOCAL commit_delay = 1000$$, '42501', NULL,
                 'commit_delay is refused to an ordinary role, and aq never sets it on its behalf');
SELECT is(has_parameter_privilege('aq_commit_app', 'aq.commit_wait', 'ALTER SYSTEM'), false,
          'only a superuser (or a role granted ALTER SYSTEM on it) sets the system level');
SELECT throws_ok($$SET LOCAL aq.commit_wait = 'sometimes'$$, '22023', NULL, 'a bad value is 22023');
SELECT throws_ok($$SET LOCAL aq.commit_write = 'batch,later'$$, '22023', NULL,
                 'a bad combined value is 22023');
SELECT throws_ok($$CALL aq.commit('write batch nowait')$$, '2D000', 'aq.commit() cannot commit the transaction here',
                 'aq.commit() inside a transaction block says it cannot commit here');
SELECT lives_ok($$SELECT * FROM aq.commit_settings()$$, 'an ordinary role lists the levels');
SELECT lives_ok($$SELECT * FROM aq.last_commit()$$, 'an ordinary role asks about its last commit');
SELECT lives_ok($$SELECT * FROM aq.commit_stats(true)$$, 'an ordinary role reads the commit counters');
SELECT isnt((SELECT commits FROM aq.commit_stats(true)), NULL::bigint, 'cluster-wide counters are numbers');

RESET ROLE;

------------------------------------------------------------------------------ levels as the role sees them

-- ALTER ROLE ... SET (role level) needs no superuser for the role's own USERSET parameters;
-- it applies to the role's next sessions, so here it only has to be accepted and recorded.
SET LOCAL ROLE aq_commit_app;
SELECT lives_ok($$ALTER ROLE aq_commit_app SET aq.commit_write = 'batch,wait'$$,
                'a role sets its own role-level commit mode');
RESET ROLE;
SELECT is((SELECT setconfig FROM pg_db_role_setting WHERE setrole = 'aq_commit_app'::regrole),
          ARRAY['aq.commit_write=batch,wait'], 'stored as a role-level setting');
SELECT throws_ok($$ALTER ROLE aq_commit_app SET aq.commit_logging = 'eventually'$$, '22023', NULL,
                 'a bad role-level value is refused when set, not at the next login');

------------------------------------------------------------------------------ transaction level in this session

RESET aq.commit_wait;
SET LOCAL aq.commit_write = 'immediate,nowait';
SELECT is((SELECT value FROM aq.commit_settings() WHERE level = 'transaction' AND parameter = 'aq.commit_write'),
          'immediate,nowait', 'SET LOCAL is the transaction level');
SELECT is((SELECT wait_decided_by FROM aq.commit_mode()), 'aq.commit_write gives nowait (transaction)',
          'aq.commit_mode() says which setting decided');
SELECT is((SELECT logging_decided_by FROM aq.commit_mode()), 'aq.commit_write gives immediate (transaction)',
          'for each half');

SELECT * FROM finish();
ROLLBACK;
