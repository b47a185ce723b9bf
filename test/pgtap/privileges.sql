-- pgTAP: privileges of aq 0.1.0 — who may call what, and the ENQUEUE / DEQUEUE / ALL queue privileges
-- (PostgreSQL grants on the queue table) checked with roles created inside the test transaction.
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.  Run as a superuser;
-- everything (roles included) is rolled back.
BEGIN;
SELECT plan(132);

SET LOCAL search_path = public;
SET LOCAL client_min_messages = warning;

------------------------------------------------------------------------------ function privileges of PUBLIC

CREATE TEMP TABLE t_admin (sig text PRIMARY KEY);
INSERT INTO t_admin VALUES
    ('aq.create_queue_table(text,regtype,text,text,text)'),
    ('aq.drop_queue_table(text,boolean)'),
    ('aq.purge_queue_table(text,text)'),
    ('aq.create_queue(text,text,integer,interval,interval,text)'),
    ('aq.alter_queue(text,integer,interval,interval,text)'),
    ('aq.drop_queue(text)'),
    ('aq.start_queue(text,boolean,boolean)'),
    ('aq.stop_queue(text,boolean,boolean)'),
    ('aq.grant_queue_privilege(text,text,text,boolean)'),
    ('aq.revoke_queue_privilege(text,text,text)');

CREATE TEMP TABLE t_public (sig text PRIMARY KEY);
INSERT INTO t_public VALUES
    ('aq.enqueue(text,anyelement,aq.message_properties,aq.enqueue_options)'),
    ('aq.enqueue_array(text,anyarray,aq.message_properties[],aq.enqueue_options)'),
    ('aq.dequeue(text,anyelement,aq.dequeue_options)'),
    ('aq.dequeue_array(text,anyelement,integer,aq.dequeue_options)'),
    ('aq.message_properties(integer,interval,interval,text,text)'),
    ('aq.enqueue_options(text,text)'),
    ('aq.dequeue_options(text,text,text,text,interval,bigint,text)');

SELECT ok(NOT has_function_privilege('public', sig::regprocedure, 'EXECUTE'),
          format('PUBLIC has no EXECUTE on %s', sig))
  FROM t_admin ORDER BY sig;
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p, aclexplode(p.proacl) a
       WHERE p.oid IN (SELECT sig::regprocedure FROM t_admin) AND a.grantee <> p.proowner$$,
    'the admin functions have no EXECUTE grant to anyone but their owner');
SELECT ok(NOT has_function_privilege('public', sig::regprocedure, 'EXECUTE'),
          format('PUBLIC has no EXECUTE on the internal %s', sig))
  FROM (VALUES ('aq._queue_table(text)'), ('aq._queue(text)'), ('aq._queue_privileges(text)'),
               ('aq._grantee(text)')) AS v(sig) ORDER BY sig;
SELECT ok(has_function_privilege('public', sig::regprocedure, 'EXECUTE'),
          format('PUBLIC has EXECUTE on %s', sig))
  FROM t_public ORDER BY sig;

SELECT ok(has_schema_privilege('public', 'aq', 'USAGE'), 'PUBLIC has USAGE on schema aq');
SELECT ok(NOT has_schema_privilege('public', 'aq', 'CREATE'), 'PUBLIC has no CREATE on schema aq');
SELECT ok(has_table_privilege('public', 'aq.queues', 'SELECT'), 'PUBLIC may read aq.queues');
SELECT ok(has_table_privilege('public', 'aq.queue_tables', 'SELECT'), 'PUBLIC may read aq.queue_tables');
SELECT ok(NOT has_table_privilege('public', 'aq.queues', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'PUBLIC may not modify aq.queues');
SELECT ok(NOT has_table_privilege('public', 'aq.queue_tables', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'PUBLIC may not modify aq.queue_tables');

------------------------------------------------------------------------------ set-up: roles, queue tables, queues

CREATE ROLE aq_tap_none NOLOGIN;
CREATE ROLE aq_tap_enq NOLOGIN;
CREATE ROLE aq_tap_deq NOLOGIN;
CREATE ROLE aq_tap_all NOLOGIN;
CREATE ROLE aq_tap_mix1 NOLOGIN;
CREATE ROLE aq_tap_mix2 NOLOGIN;
CREATE ROLE aq_tap_mix3 NOLOGIN;
CREATE ROLE aq_tap_go NOLOGIN;
CREATE ROLE aq_tap_sch NOLOGIN;
CREATE ROLE "aq tap ""Quoted"" Role" NOLOGIN;

CREATE TYPE public.priv_ot AS (message text);

-- dequeue without waiting, as the current role: 'msgid:message' / the number of rows, or
-- 'ERROR <sqlstate>: <message>' so that a failing dequeue fails its assertion instead of aborting the script
CREATE FUNCTION pg_temp.dq(queue_name text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    SELECT d.msgid, (d.payload).message AS message INTO r
      FROM aq.dequeue(queue_name, NULL::public.priv_ot, aq.dequeue_options(wait => '0')) d;
    RETURN r.msgid || ':' || r.message;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
CREATE FUNCTION pg_temp.dqa(queue_name text, array_size integer) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT count(*)
              FROM aq.dequeue_array(queue_name, NULL::public.priv_ot, array_size, aq.dequeue_options(wait => '0')))::text;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
DO $$
BEGIN
    PERFORM aq.create_queue_table('priv_qt', 'priv_ot');
    PERFORM aq.create_queue('priv_q', 'priv_qt');
    PERFORM aq.create_queue('priv_q2', 'priv_qt');
    PERFORM aq.start_queue('priv_q');
    PERFORM aq.start_queue('priv_q2');
    PERFORM aq.enqueue_array('priv_q', array_agg(ROW('m' || i)::priv_ot ORDER BY i)) FROM generate_series(1, 20) i;
END $$;

-- a view of the messages of priv_q that the superuser uses to check what the roles did
CREATE TEMP VIEW v_priv_q AS
    SELECT m.msgid, (m.user_data).message, m.enq_uid
      FROM public.priv_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_name = 'priv_q';

SELECT ok(NOT has_table_privilege('public', 'public.priv_qt', 'SELECT')
          AND NOT has_table_privilege('public', 'public.priv_qt', 'INSERT')
          AND NOT has_any_column_privilege('public', 'public.priv_qt', 'SELECT'),
          'PUBLIC has no privilege on a new queue table');
SELECT function_privs_are('aq', 'create_queue_table', ARRAY['text', 'regtype', 'text', 'text', 'text'],
                          'aq_tap_none', ARRAY[]::text[],
                          'a role without grants has no EXECUTE on aq.create_queue_table');
SELECT function_privs_are('aq', 'grant_queue_privilege', ARRAY['text', 'text', 'text', 'boolean'],
                          'aq_tap_none', ARRAY[]::text[],
                          'a role without grants has no EXECUTE on aq.grant_queue_privilege');
SELECT function_privs_are('aq', 'enqueue', ARRAY['text', 'anyelement', 'aq.message_properties', 'aq.enqueue_options'],
                          'aq_tap_none', ARRAY['EXECUTE'], 'a role without grants has EXECUTE on aq.enqueue');
SELECT function_privs_are('aq', 'dequeue', ARRAY['text', 'anyelement', 'aq.dequeue_options'],
                          'aq_tap_none', ARRAY['EXECUTE'], 'a role without grants has EXECUTE on aq.dequeue');

------------------------------------------------------------------------------ a role without grants

SET LOCAL ROLE aq_tap_none;
SELECT is(current_user::text, 'aq_tap_none', 'running as aq_tap_none');
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'no grant: enqueue gives 42501');
SELECT throws_ok($$SELECT aq.enqueue_array('priv_q', ARRAY[ROW('x')::priv_ot])$$, '42501', NULL,
                 'no grant: enqueue_array gives 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'no grant: dequeue gives 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue_array('priv_q', NULL::priv_ot, 5, aq.dequeue_options(wait => '0'))$$,
                 '42501', NULL, 'no grant: dequeue_array gives 42501');
SELECT throws_ok($$SELECT * FROM public.priv_qt$$, '42501', NULL, 'no grant: reading the queue table gives 42501');
-- the admin API is for superusers
SELECT throws_ok($$SELECT aq.create_queue_table('none_qt', 'priv_ot')$$, '42501', NULL,
                 'non-superuser: create_queue_table gives 42501');
SELECT throws_ok($$SELECT aq.drop_queue_table('priv_qt', force => true)$$, '42501', NULL,
                 'non-superuser: drop_queue_table gives 42501');
SELECT throws_ok($$SELECT aq.purge_queue_table('priv_qt')$$, '42501', NULL,
                 'non-superuser: purge_queue_table gives 42501');
SELECT throws_ok($$SELECT aq.create_queue('none_q', 'priv_qt')$$, '42501', NULL,
                 'non-superuser: create_queue gives 42501');
SELECT throws_ok($$SELECT aq.alter_queue('priv_q', max_retries => 0)$$, '42501', NULL,
                 'non-superuser: alter_queue gives 42501');
SELECT throws_ok($$SELECT aq.stop_queue('priv_q')$$, '42501', NULL, 'non-superuser: stop_queue gives 42501');
SELECT throws_ok($$SELECT aq.start_queue('priv_q')$$, '42501', NULL, 'non-superuser: start_queue gives 42501');
SELECT throws_ok($$SELECT aq.drop_queue('priv_q')$$, '42501', NULL, 'non-superuser: drop_queue gives 42501');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq_tap_none')$$, '42501', NULL,
                 'non-superuser: granting itself a queue privilege gives 42501');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('ALL', 'priv_q', 'aq_tap_none')$$, '42501', NULL,
                 'non-superuser: revoke_queue_privilege gives 42501');
SELECT throws_ok($$SELECT aq._queue('priv_q')$$, '42501', NULL, 'non-superuser: internal aq._queue gives 42501');
-- the catalog is readable but not writable
SELECT results_eq($$SELECT queue_name FROM aq.queues ORDER BY queue_name$$, $$VALUES ('priv_q'), ('priv_q2')$$,
                  'a role without grants can read aq.queues');
SELECT throws_ok($$UPDATE aq.queues SET enqueue_enabled = true$$, '42501', NULL,
                 'a role cannot update aq.queues directly');
SELECT throws_ok($$DELETE FROM aq.queues$$, '42501', NULL, 'a role cannot delete from aq.queues');
SELECT throws_ok($$INSERT INTO aq.queue_tables (queue_table, table_schema, payload_type)
                   VALUES ('fake', 'public', 'priv_ot')$$, '42501', NULL,
                 'a role cannot insert into aq.queue_tables');
SELECT throws_ok($$CREATE TABLE aq.intruder (i int)$$, '42501', NULL, 'a role cannot create objects in schema aq');
RESET ROLE;
SELECT is(current_user::text, session_user::text, 'RESET ROLE: back to the session (super)user');
SELECT results_eq($$SELECT count(*)::int FROM v_priv_q$$, $$VALUES (20)$$,
                  'the refused calls changed nothing: priv_q still has its 20 messages');

------------------------------------------------------------------------------ ENQUEUE

SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_enq')$$,
                'grant_queue_privilege(ENQUEUE, priv_q, aq_tap_enq)');
SET LOCAL ROLE aq_tap_enq;
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from enq')::priv_ot)$$, 'ENQUEUE: enqueue works');
SELECT lives_ok($$SELECT aq.enqueue_array('priv_q', ARRAY[ROW('from enq 2')::priv_ot, ROW('from enq 3')::priv_ot])$$,
                'ENQUEUE: enqueue_array works');
SELECT lives_ok($$SELECT aq.enqueue('priv_q2', ROW('from enq to q2')::priv_ot)$$,
                'ENQUEUE covers every queue of the queue table (grants are on the table): enqueue into priv_q2');
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'ENQUEUE only: dequeue gives 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue_array('priv_q', NULL::priv_ot, 5, aq.dequeue_options(wait => '0'))$$,
                 '42501', NULL, 'ENQUEUE only: dequeue_array gives 42501');
SELECT throws_ok($$SELECT user_data FROM public.priv_qt$$, '42501', NULL,
                 'ENQUEUE only: the messages cannot be read from the queue table');
RESET ROLE;
SELECT results_eq($$SELECT message, enq_uid FROM v_priv_q WHERE message LIKE 'from enq%' ORDER BY msgid$$,
                  $$VALUES ('from enq', 'aq_tap_enq'), ('from enq 2', 'aq_tap_enq'), ('from enq 3', 'aq_tap_enq')$$,
                  'the messages enqueued by aq_tap_enq are stored with enq_uid aq_tap_enq');
SELECT results_eq($$SELECT count(*)::int FROM v_priv_q$$, $$VALUES (23)$$,
                  'the refused dequeues removed nothing (20 + 3 messages)');
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_enq')$$,
                'revoke_queue_privilege(ENQUEUE, priv_q, aq_tap_enq)');
SET LOCAL ROLE aq_tap_enq;
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'after revoking ENQUEUE: enqueue gives 42501');
SELECT throws_ok($$SELECT aq.enqueue_array('priv_q', ARRAY[ROW('x')::priv_ot])$$, '42501', NULL,
                 'after revoking ENQUEUE: enqueue_array gives 42501');
RESET ROLE;

------------------------------------------------------------------------------ DEQUEUE

SELECT lives_ok($$SELECT aq.grant_queue_privilege('DEQUEUE', 'priv_q', 'aq_tap_deq')$$,
                'grant_queue_privilege(DEQUEUE, priv_q, aq_tap_deq)');
SET LOCAL ROLE aq_tap_deq;
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'DEQUEUE only: enqueue gives 42501');
SELECT throws_ok($$SELECT aq.enqueue_array('priv_q', ARRAY[ROW('x')::priv_ot])$$, '42501', NULL,
                 'DEQUEUE only: enqueue_array gives 42501');
SELECT matches(pg_temp.dq('priv_q'), '^[0-9]+:m[0-9]+$', 'DEQUEUE: dequeue returns a message');
SELECT is(pg_temp.dqa('priv_q', 3), '3', 'DEQUEUE: dequeue_array returns 3 messages');
RESET ROLE;
SELECT results_eq($$SELECT count(*)::int FROM v_priv_q$$, $$VALUES (19)$$,
                  'aq_tap_deq removed 4 messages (23 - 4)');
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'priv_q', 'aq_tap_deq')$$,
                'revoke_queue_privilege(DEQUEUE, priv_q, aq_tap_deq)');
SET LOCAL ROLE aq_tap_deq;
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'after revoking DEQUEUE: dequeue gives 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue_array('priv_q', NULL::priv_ot, 5, aq.dequeue_options(wait => '0'))$$,
                 '42501', NULL, 'after revoking DEQUEUE: dequeue_array gives 42501');
RESET ROLE;

------------------------------------------------------------------------------ ALL

SELECT lives_ok($$SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq_tap_all')$$,
                'grant_queue_privilege(ALL, priv_q, aq_tap_all)');
SET LOCAL ROLE aq_tap_all;
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from all')::priv_ot)$$, 'ALL: enqueue works');
SELECT matches(pg_temp.dq('priv_q'), '^[0-9]+:m[0-9]+$', 'ALL: dequeue returns a message');
SELECT is(pg_temp.dqa('priv_q', 2), '2', 'ALL: dequeue_array returns 2 messages');
RESET ROLE;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ALL', 'priv_q', 'aq_tap_all')$$,
                'revoke_queue_privilege(ALL, priv_q, aq_tap_all)');
SET LOCAL ROLE aq_tap_all;
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'after revoking ALL: enqueue gives 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'after revoking ALL: dequeue gives 42501');
RESET ROLE;

------------------------------------------------------------------------------ revoking one privilege keeps the other

-- revoke_queue_privilege('DEQUEUE') must take away dequeue only (as DBMS_AQADM.REVOKE_QUEUE_PRIVILEGE does).
-- aq 0.1.0 fails the two "enqueue still works" tests below: REVOKE SELECT on the table also revokes the
-- column grant SELECT (msgid) that ENQUEUE relies on (enqueue's INSERT ... RETURNING msgid).

-- ENQUEUE + DEQUEUE, then revoke DEQUEUE: enqueue must still work
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_mix1');
                  SELECT aq.grant_queue_privilege('DEQUEUE', 'priv_q', 'aq_tap_mix1')$$,
                'grant ENQUEUE and DEQUEUE to aq_tap_mix1');
SET LOCAL ROLE aq_tap_mix1;
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from mix1')::priv_ot)$$, 'ENQUEUE + DEQUEUE: enqueue works');
SELECT lives_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$,
                'ENQUEUE + DEQUEUE: dequeue works');
RESET ROLE;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'priv_q', 'aq_tap_mix1')$$,
                'revoke DEQUEUE from aq_tap_mix1');
SET LOCAL ROLE aq_tap_mix1;
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'ENQUEUE + DEQUEUE - DEQUEUE: dequeue gives 42501');
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from mix1 again')::priv_ot)$$,
                'ENQUEUE + DEQUEUE - DEQUEUE: enqueue still works');
RESET ROLE;

-- ALL, then revoke DEQUEUE: enqueue must still work
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq_tap_mix2');
                  SELECT aq.revoke_queue_privilege('DEQUEUE', 'priv_q', 'aq_tap_mix2')$$,
                'grant ALL to aq_tap_mix2, then revoke DEQUEUE');
SET LOCAL ROLE aq_tap_mix2;
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'ALL - DEQUEUE: dequeue gives 42501');
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from mix2')::priv_ot)$$, 'ALL - DEQUEUE: enqueue still works');
RESET ROLE;

-- ALL, then revoke ENQUEUE: dequeue must still work
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq_tap_mix3');
                  SELECT aq.revoke_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_mix3')$$,
                'grant ALL to aq_tap_mix3, then revoke ENQUEUE');
SET LOCAL ROLE aq_tap_mix3;
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'ALL - ENQUEUE: enqueue gives 42501');
SELECT lives_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$,
                'ALL - ENQUEUE: dequeue still works');
RESET ROLE;

------------------------------------------------------------------------------ grantees: PUBLIC, quoted names, errors

SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'PUBLIC')$$,
                'grant_queue_privilege(ENQUEUE, priv_q, PUBLIC)');
SET LOCAL ROLE aq_tap_none;
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from public')::priv_ot)$$,
                'ENQUEUE granted to PUBLIC: a role without its own grant can enqueue');
SELECT throws_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'ENQUEUE granted to PUBLIC: dequeue still gives 42501');
RESET ROLE;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'priv_q', 'public')$$,
                'revoke_queue_privilege(ENQUEUE, priv_q, public)');
SET LOCAL ROLE aq_tap_none;
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'after revoking from PUBLIC: enqueue gives 42501 again');
RESET ROLE;

SELECT lives_ok($$SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq tap "Quoted" Role')$$,
                'grant_queue_privilege(ALL) to a role named aq tap "Quoted" Role');
SET LOCAL ROLE "aq tap ""Quoted"" Role";
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('from quoted')::priv_ot)$$,
                'the quoted role can enqueue');
SELECT lives_ok($$SELECT * FROM aq.dequeue('priv_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$,
                'the quoted role can dequeue');
RESET ROLE;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ALL', 'priv_q', 'aq tap "Quoted" Role')$$,
                'revoke_queue_privilege(ALL) from the quoted role');
SELECT ok(NOT has_table_privilege('aq tap "Quoted" Role', 'public.priv_qt', 'INSERT')
          AND NOT has_table_privilege('aq tap "Quoted" Role', 'public.priv_qt', 'SELECT'),
          'the quoted role has no privilege left on the queue table');

SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_no_such_role')$$, '42704', NULL,
                 'grant_queue_privilege to an unknown role: 42704');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'AQ_TAP_NONE')$$, '42704', NULL,
                 'grantee names are case-sensitive: AQ_TAP_NONE is unknown (42704)');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_no_such_role')$$, '42704', NULL,
                 'revoke_queue_privilege from an unknown role: 42704');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', NULL)$$, '22004', NULL,
                 'grant_queue_privilege to a NULL grantee: 22004');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('SELECT', 'priv_q', 'aq_tap_none')$$, '22023', NULL,
                 'grant_queue_privilege with an invalid privilege: 22023');
SELECT throws_ok($$SELECT aq.grant_queue_privilege(NULL, 'priv_q', 'aq_tap_none')$$, '22023', NULL,
                 'grant_queue_privilege with a NULL privilege: 22023');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('BROWSE', 'priv_q', 'aq_tap_none')$$, '22023', NULL,
                 'revoke_queue_privilege with an invalid privilege: 22023');
SELECT ok(NOT has_table_privilege('aq_tap_none', 'public.priv_qt', 'INSERT')
          AND NOT has_table_privilege('aq_tap_none', 'public.priv_qt', 'SELECT')
          AND NOT has_any_column_privilege('aq_tap_none', 'public.priv_qt', 'SELECT'),
          'the failed grants gave aq_tap_none nothing');

------------------------------------------------------------------------------ grant_option

SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_go', grant_option => true)$$,
                'grant_queue_privilege(ENQUEUE, priv_q, aq_tap_go, grant_option => true)');
SELECT ok(has_column_privilege('aq_tap_go', 'public.priv_qt', 'user_data', 'INSERT WITH GRANT OPTION'),
          'grant_option => true: aq_tap_go may grant INSERT on the queue table''s columns');
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_enq')$$,
                'grant_queue_privilege(ENQUEUE, priv_q, aq_tap_enq) without grant option');
SELECT ok(has_column_privilege('aq_tap_enq', 'public.priv_qt', 'user_data', 'INSERT')
          AND NOT has_column_privilege('aq_tap_enq', 'public.priv_qt', 'user_data', 'INSERT WITH GRANT OPTION'),
          'grant_option defaults to false');
-- ENQUEUE is column-level: a producer cannot forge the columns aq sets itself.
SELECT ok(NOT has_column_privilege('aq_tap_enq', 'public.priv_qt', 'enq_uid', 'INSERT')
          AND NOT has_column_privilege('aq_tap_enq', 'public.priv_qt', 'retry_count', 'INSERT')
          AND NOT has_column_privilege('aq_tap_enq', 'public.priv_qt', 'msgid', 'INSERT'),
          'ENQUEUE grants no INSERT on msgid, retry_count or enq_uid');
SET LOCAL ROLE aq_tap_go;
SELECT lives_ok($$GRANT INSERT (q_id, enq_time, priority, delay, expiration, corrid, exception_queue, user_data),
                            SELECT (msgid) ON public.priv_qt TO aq_tap_none$$,
                'aq_tap_go passes its enqueue privilege on to aq_tap_none');
RESET ROLE;
SET LOCAL ROLE aq_tap_none;
SELECT lives_ok($$SELECT aq.enqueue('priv_q', ROW('via grant option')::priv_ot)$$,
                'aq_tap_none can enqueue with the privilege passed on by aq_tap_go');
RESET ROLE;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'priv_q', 'aq_tap_go')$$,
                'revoke_queue_privilege(ENQUEUE, priv_q, aq_tap_go) cascades');
SET LOCAL ROLE aq_tap_none;
SELECT throws_ok($$SELECT aq.enqueue('priv_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'after the cascading revoke aq_tap_none gets 42501 again');
RESET ROLE;

------------------------------------------------------------------------------ the queue table's schema needs USAGE

CREATE SCHEMA priv_sch;
SELECT lives_ok($$SELECT aq.create_queue_table('sch_qt', 'priv_ot', queue_table_schema => 'priv_sch');
                  SELECT aq.create_queue('sch_q', 'sch_qt'); SELECT aq.start_queue('sch_q');
                  SELECT aq.enqueue('sch_q', ROW('in priv_sch')::priv_ot);
                  SELECT aq.grant_queue_privilege('ALL', 'sch_q', 'aq_tap_sch')$$,
                'queue sch_q in schema priv_sch with one message; ALL granted to aq_tap_sch');
SET LOCAL ROLE aq_tap_sch;
SELECT throws_ok($$SELECT aq.enqueue('sch_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'ALL without USAGE on the schema: enqueue gives 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue('sch_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'ALL without USAGE on the schema: dequeue gives 42501');
RESET ROLE;
GRANT USAGE ON SCHEMA priv_sch TO aq_tap_sch;
SET LOCAL ROLE aq_tap_sch;
SELECT lives_ok($$SELECT aq.enqueue('sch_q', ROW('from aq_tap_sch')::priv_ot)$$,
                'ALL with USAGE on the schema: enqueue works');
SELECT matches(pg_temp.dq('sch_q'), '^[0-9]+:in priv_sch$',
               'ALL with USAGE on the schema: dequeue returns the first message');
RESET ROLE;

------------------------------------------------------------------------------ a queue table of another queue is not covered

SELECT lives_ok($$SELECT aq.create_queue_table('other_qt', 'priv_ot'); SELECT aq.create_queue('other_q', 'other_qt');
                  SELECT aq.start_queue('other_q'); SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq_tap_all')$$,
                'queue other_q in another queue table; ALL on priv_q granted to aq_tap_all');
SET LOCAL ROLE aq_tap_all;
SELECT throws_ok($$SELECT aq.enqueue('other_q', ROW('x')::priv_ot)$$, '42501', NULL,
                 'a grant on priv_q does not cover a queue of another queue table: enqueue 42501');
SELECT throws_ok($$SELECT * FROM aq.dequeue('other_q', NULL::priv_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 NULL, 'a grant on priv_q does not cover a queue of another queue table: dequeue 42501');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
