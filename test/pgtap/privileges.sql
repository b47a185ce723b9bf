-- pgTAP: privileges of aq (0.1.0, as changed by 0.4.0) — who may call what, and the ENQUEUE / DEQUEUE / ALL
-- queue privileges (PostgreSQL grants on the queue table) checked with roles created inside the test
-- transaction.  The queue tables here belong to the superuser; test/pgtap/queue_privileges.sql has the
-- matrix with a non-superuser owner, another manager, dequeue modes and the catalog's row-level security.
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.  Run as a superuser;
-- everything (roles included) is rolled back.
BEGIN;
SELECT plan(172);

SET LOCAL search_path = public;
SET LOCAL client_min_messages = warning;

------------------------------------------------------------------------------ function privileges of PUBLIC

CREATE TEMP TABLE t_admin (sig text PRIMARY KEY);
INSERT INTO t_admin VALUES
    ('aq.create_queue_table(text,regtype,text,text,text,boolean,text,integer)'),
    ('aq.alter_queue_table(text,text,integer)'),
    ('aq.add_subscriber(text,aq.agent,text,text,boolean,text)'),
    ('aq.alter_subscriber(text,aq.agent,text,text)'),
    ('aq.remove_subscriber(text,aq.agent)'),
    ('aq.drop_queue_table(text,boolean)'),
    ('aq.purge_queue_table(text,aq.purge_condition)'),
    ('aq.create_queue(text,text,integer,interval,interval,text,text)'),
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
    ('aq.message_properties(integer,interval,interval,text,text,aq.agent[])'),
    ('aq.enqueue_options(text,text)'),
    ('aq.dequeue_options(text,text,text,text,aq.wait_time,bigint,text,text)');

SELECT ok(NOT has_function_privilege('public', sig::regprocedure, 'EXECUTE'),
          format('PUBLIC has no EXECUTE on %s', sig))
  FROM t_admin ORDER BY sig;
SELECT is_empty(
    $$SELECT p.oid::regprocedure FROM pg_proc p, aclexplode(p.proacl) a
       WHERE p.oid IN (SELECT sig::regprocedure FROM t_admin) AND a.grantee <> p.proowner$$,
    'the admin functions have no EXECUTE grant to anyone but their owner');
-- 0.4.0: the admin functions run as the caller (a queue table's owner), so the read-only helpers they
-- call are executable by PUBLIC (they read the public catalog or act with the caller's own rights)
SELECT ok(has_function_privilege('public', sig::regprocedure, 'EXECUTE'),
          format('PUBLIC has EXECUTE on the internal %s', sig))
  FROM (VALUES ('aq._queue_table(text)'), ('aq._queue(text)'), ('aq._queue_privileges(text)'),
               ('aq._grantee(text)'), ('aq._enqueue_grant()'), ('aq._dequeue_grant()'),
               ('aq._queue_relation(aq.queue_tables)')) AS v(sig)
 ORDER BY sig;
-- 0.4.0: one purge_queue_table (Oracle's parameter order: queue_table, purge_condition), and the revoke
-- is done by revoke_queue_privilege itself (no internal helper executable by PUBLIC)
SELECT hasnt_function('aq', 'purge_queue_table', ARRAY['text', 'text'],
                      'aq.purge_queue_table(text, text) is gone (purge one queue with aq.purge_condition(queue_name => ...))');
SELECT results_eq($$SELECT p.oid::regprocedure::text FROM pg_proc p
                     WHERE p.pronamespace = 'aq'::regnamespace AND p.proname = 'purge_queue_table'$$,
                  ARRAY['aq.purge_queue_table(text,aq.purge_condition)'],
                  'aq.purge_queue_table has exactly one signature: (text, aq.purge_condition)');
SELECT hasnt_function('aq', '_revoke_queue_privilege', 'aq._revoke_queue_privilege is gone');
SELECT ok(has_function_privilege('public', sig::regprocedure, 'EXECUTE'),
          format('PUBLIC has EXECUTE on %s', sig))
  FROM t_public ORDER BY sig;

SELECT ok(has_schema_privilege('public', 'aq', 'USAGE'), 'PUBLIC has USAGE on schema aq');
SELECT ok(NOT has_schema_privilege('public', 'aq', 'CREATE'), 'PUBLIC has no CREATE on schema aq');
SELECT ok(has_table_privilege('public', 'aq.queues', 'SELECT'), 'PUBLIC may read aq.queues');
SELECT ok(has_table_privilege('public', 'aq.queue_tables', 'SELECT'), 'PUBLIC may read aq.queue_tables');
-- 0.4.0: the catalog is writable by PUBLIC in the columns the admin functions write, and row-level
-- security limits each role to the rows of the queue tables it manages.  The identity columns and
-- "created" are never granted; of aq.queue_tables only the comment and the segment count are
-- updated (aq.alter_queue_table), and the count only to the number of the table's segments.
SELECT ok(has_table_privilege('public', 'aq.queues', 'DELETE') AND has_table_privilege('public', 'aq.queue_tables', 'DELETE'),
          'PUBLIC has DELETE on aq.queues and aq.queue_tables');
SELECT ok(NOT has_table_privilege('public', 'aq.queues', 'INSERT') AND NOT has_table_privilege('public', 'aq.queues', 'UPDATE')
          AND NOT has_table_privilege('public', 'aq.queue_tables', 'INSERT')
          AND NOT has_table_privilege('public', 'aq.queue_tables', 'UPDATE'),
          'PUBLIC has no table-level INSERT or UPDATE on aq.queues or aq.queue_tables (column-level only)');
CREATE FUNCTION pg_temp.public_columns(rel regclass, priv text) RETURNS SETOF text LANGUAGE sql AS $$
    SELECT a.attname::text FROM pg_attribute a
     WHERE a.attrelid = rel AND a.attnum > 0 AND NOT a.attisdropped AND has_column_privilege('public', rel, a.attnum, priv)
$$;
SELECT set_eq($$SELECT pg_temp.public_columns('aq.queue_tables', 'INSERT')$$,
              ARRAY['queue_table', 'table_schema', 'relid', 'payload_type', 'sort_list', 'comment',
                    'multiple_consumers', 'message_grouping', 'delivery_relid', 'segment_count'],
              'PUBLIC may INSERT exactly the non-identity columns of aq.queue_tables (not queue_table_id, not created)');
SELECT set_eq($$SELECT pg_temp.public_columns('aq.queues', 'INSERT')$$,
              ARRAY['queue_name', 'queue_table_id', 'enqueue_enabled', 'dequeue_enabled', 'max_retries', 'retry_delay',
                    'retention_time', 'comment', 'queue_type'],
              'PUBLIC may INSERT exactly the non-identity columns of aq.queues (not queue_id, not created)');
SELECT set_eq($$SELECT pg_temp.public_columns('aq.queues', 'UPDATE')$$,
              ARRAY['enqueue_enabled', 'dequeue_enabled', 'max_retries', 'retry_delay', 'retention_time', 'comment'],
              'PUBLIC may UPDATE exactly the queue settings of aq.queues (not its name, queue table, type or ids)');
SELECT set_eq($$SELECT pg_temp.public_columns('aq.queue_tables', 'UPDATE')$$, ARRAY['comment', 'segment_count'],
              'PUBLIC may UPDATE only the comment and segment count of aq.queue_tables (aq.alter_queue_table)');
SELECT ok(NOT has_table_privilege('public', 'aq.queues', 'TRUNCATE, REFERENCES, TRIGGER'),
          'PUBLIC has no TRUNCATE, REFERENCES or TRIGGER on aq.queues');
SELECT ok(NOT has_table_privilege('public', 'aq.queue_tables', 'TRUNCATE, REFERENCES, TRIGGER'),
          'PUBLIC has no TRUNCATE, REFERENCES or TRIGGER on aq.queue_tables');
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'aq.queues'::regclass), 'aq.queues has row-level security');
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'aq.queue_tables'::regclass),
          'aq.queue_tables has row-level security');
SELECT policies_are('aq', 'queues', ARRAY['everyone_reads', 'owner_creates', 'owner_alters', 'owner_deletes'],
                    'aq.queues has the policies everyone_reads, owner_creates, owner_alters, owner_deletes');
SELECT policies_are('aq', 'queue_tables', ARRAY['everyone_reads', 'owner_registers', 'owner_alters', 'owner_deletes'],
                    'aq.queue_tables has the policies everyone_reads, owner_registers, owner_alters, owner_deletes');
SELECT policy_cmd_is('aq', 'queues', p, c, format('policy %s of aq.queues is for %s', p, c))
  FROM (VALUES ('everyone_reads', 'SELECT'), ('owner_creates', 'INSERT'), ('owner_alters', 'UPDATE'),
               ('owner_deletes', 'DELETE')) AS v(p, c);
SELECT policy_cmd_is('aq', 'queue_tables', p, c, format('policy %s of aq.queue_tables is for %s', p, c))
  FROM (VALUES ('everyone_reads', 'SELECT'), ('owner_registers', 'INSERT'), ('owner_alters', 'UPDATE'),
               ('owner_deletes', 'DELETE')) AS v(p, c);

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
-- a query's first column as text, as the current role, or 'ERROR <sqlstate>: <message>'
CREATE FUNCTION pg_temp.val(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE result text;
BEGIN
    EXECUTE sql INTO result;
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- the number of rows a statement changed, as the current role, or 'ERROR <sqlstate>: <message>'
CREATE FUNCTION pg_temp.changed(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE sql;
    GET DIAGNOSTICS n = ROW_COUNT;
    RETURN n::text;
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
SELECT table_privs_are('public', 'aq$priv_qt', 'public', ARRAY['SELECT'],
                       'PUBLIC has SELECT (only) on the new queue table''s view aq$priv_qt');
SELECT function_privs_are('aq', 'create_queue_table', ARRAY['text', 'regtype', 'text', 'text', 'text', 'boolean', 'text', 'integer'],
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
-- the AQ$ view is readable by PUBLIC, but it is security_invoker: the queue table's privileges decide
SELECT throws_ok($$SELECT count(*) FROM public."aq$priv_qt"$$, '42501', 'permission denied for table priv_qt',
                 'no grant: reading the AQ$ view gives 42501 for the queue table');
-- the admin API needs EXECUTE, which PUBLIC does not have
SELECT throws_ok($$SELECT aq.create_queue_table('none_qt', 'priv_ot')$$, '42501', 'permission denied for function create_queue_table',
                 'non-superuser: create_queue_table gives 42501');
SELECT throws_ok($$SELECT aq.drop_queue_table('priv_qt', force => true)$$, '42501', 'permission denied for function drop_queue_table',
                 'non-superuser: drop_queue_table gives 42501');
SELECT throws_ok($$SELECT aq.purge_queue_table('priv_qt')$$, '42501', 'permission denied for function purge_queue_table',
                 'non-superuser: purge_queue_table gives 42501');
SELECT throws_ok($$SELECT aq.create_queue('none_q', 'priv_qt')$$, '42501', 'permission denied for function create_queue',
                 'non-superuser: create_queue gives 42501');
SELECT throws_ok($$SELECT aq.alter_queue('priv_q', max_retries => 0)$$, '42501', 'permission denied for function alter_queue',
                 'non-superuser: alter_queue gives 42501');
SELECT throws_ok($$SELECT aq.stop_queue('priv_q')$$, '42501', 'permission denied for function stop_queue', 'non-superuser: stop_queue gives 42501');
SELECT throws_ok($$SELECT aq.start_queue('priv_q')$$, '42501', 'permission denied for function start_queue', 'non-superuser: start_queue gives 42501');
SELECT throws_ok($$SELECT aq.drop_queue('priv_q')$$, '42501', 'permission denied for function drop_queue', 'non-superuser: drop_queue gives 42501');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ALL', 'priv_q', 'aq_tap_none')$$, '42501', 'permission denied for function grant_queue_privilege',
                 'non-superuser: granting itself a queue privilege gives 42501');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('ALL', 'priv_q', 'aq_tap_none')$$, '42501', 'permission denied for function revoke_queue_privilege',
                 'non-superuser: revoke_queue_privilege gives 42501');
SELECT is((aq._queue('priv_q')).queue_name, 'priv_q',
          'non-superuser: the internal aq._queue (EXECUTE to PUBLIC since 0.4.0) only reads the public catalog');
-- the catalog is readable; writes to the rows of a queue table the role does not own change nothing (RLS)
SELECT results_eq($$SELECT queue_name FROM aq.queues ORDER BY queue_name COLLATE "C"$$,
                  $$VALUES ('aq$_priv_qt_e'), ('priv_q'), ('priv_q2')$$,
                  'a role without grants can read aq.queues');
SELECT is(pg_temp.changed($$UPDATE aq.queues SET enqueue_enabled = false, dequeue_enabled = false$$), '0',
          'a role''s UPDATE of aq.queues changes no row of a queue table it does not own');
SELECT is(pg_temp.changed($$DELETE FROM aq.queues$$), '0',
          'a role''s DELETE from aq.queues removes no row of a queue table it does not own');
SELECT is(pg_temp.changed($$UPDATE aq.queue_tables SET comment = 'hijacked'$$), '0',
          'a role''s UPDATE of aq.queue_tables changes no row of a queue table it does not own');
SELECT is(pg_temp.changed($$UPDATE aq.queue_tables SET queue_table = 'hijacked'$$),
          'ERROR 42501: permission denied for table queue_tables',
          'a role''s UPDATE of a queue table''s name in aq.queue_tables gives 42501 (not a granted column)');
SELECT is(pg_temp.changed($$UPDATE aq.queues SET queue_name = 'hijacked'$$),
          'ERROR 42501: permission denied for table queues',
          'a role''s UPDATE of a queue''s name in aq.queues gives 42501 (not a granted column)');
SELECT is(pg_temp.changed($$DELETE FROM aq.queue_tables$$), '0',
          'a role''s DELETE from aq.queue_tables removes no row of a queue table it does not own');
SELECT throws_ok($$INSERT INTO aq.queue_tables (queue_table, table_schema, payload_type)
                   VALUES ('fake', 'public', 'priv_ot')$$, '42501',
                 'new row violates row-level security policy for table "queue_tables"',
                 'a role cannot insert into aq.queue_tables a row without a table (RLS)');
SELECT throws_ok($$INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type)
                   VALUES ('fake', 'public', 'public.priv_qt', 'priv_ot')$$, '42501',
                 'new row violates row-level security policy for table "queue_tables"',
                 'a role cannot insert into aq.queue_tables a row for a table it does not own (RLS)');
SELECT throws_ok($$INSERT INTO aq.queues (queue_name, queue_table_id)
                   SELECT 'fake_q', queue_table_id FROM aq.queue_tables WHERE queue_table = 'priv_qt'$$, '42501',
                 'new row violates row-level security policy for table "queues"',
                 'a role cannot insert a queue of a queue table it does not own into aq.queues (RLS)');
SELECT throws_ok($$TRUNCATE aq.queues$$, '42501', 'permission denied for table queues', 'a role cannot truncate aq.queues');
SELECT throws_ok($$TRUNCATE aq.queue_tables$$, '42501', 'permission denied for table queue_tables',
                 'a role cannot truncate aq.queue_tables');
SELECT throws_ok($$CREATE TABLE aq.intruder (i int)$$, '42501', NULL, 'a role cannot create objects in schema aq');
RESET ROLE;
SELECT is(current_user::text, session_user::text, 'RESET ROLE: back to the session (super)user');
SELECT results_eq($$SELECT count(*)::int FROM v_priv_q$$, $$VALUES (20)$$,
                  'the refused calls changed nothing: priv_q still has its 20 messages');
SELECT results_eq($$SELECT q.queue_name, q.enqueue_enabled, q.dequeue_enabled, t.comment
                      FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id) ORDER BY q.queue_name COLLATE "C"$$,
                  $$VALUES ('aq$_priv_qt_e', false, false, NULL::text), ('priv_q', true, true, NULL), ('priv_q2', true, true, NULL)$$,
                  '... but the non-owner''s UPDATE and DELETE of the catalog changed no row');

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
SELECT is(pg_temp.val($$SELECT count(*) FROM public."aq$priv_qt" WHERE queue = 'priv_q'$$), '19',
          'DEQUEUE: reads the 19 messages left in priv_q through the AQ$ view');
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
