-- pgTAP: the privilege matrix of aq 0.4.0 (Queues II, "Administration model" and "Queue privileges").
-- Who may call what: a role without rights, ENQUEUE only, DEQUEUE only, ALL, the queue table's OWNER (a
-- non-superuser granted EXECUTE on the admin functions and CREATE on a schema, who created the queue
-- table), another manager (EXECUTE on the admin functions, not the owner) and an ADMIN (superuser), over
-- enqueue / enqueue_array / dequeue / dequeue_array in every dequeue mode (remove, browse, locked; with
-- msgid and correlation), every admin function, grant_option, direct writes to the catalog (row-level
-- security), the AQ$<queue_table> view (security_invoker) and the catalog views.
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.  Run as a superuser;
-- everything (roles included) is rolled back.
BEGIN;
SELECT plan(526);

SET LOCAL search_path = public;
SET LOCAL client_min_messages = warning;

------------------------------------------------------------------------------ roles, schemas, EXECUTE

CREATE ROLE aq_qp_none NOLOGIN;      -- no right at all
CREATE ROLE aq_qp_enq NOLOGIN;       -- ENQUEUE on qp_q
CREATE ROLE aq_qp_deq NOLOGIN;       -- DEQUEUE on qp_q
CREATE ROLE aq_qp_all NOLOGIN;       -- ALL on qp_q
CREATE ROLE aq_qp_owner NOLOGIN;     -- EXECUTE on the admin functions + CREATE on aq_qp_sch; creates qp_qt
CREATE ROLE aq_qp_mgr NOLOGIN;       -- EXECUTE on the admin functions; owns mgr_qt, not qp_qt
CREATE ROLE aq_qp_go NOLOGIN;        -- receives queue privileges WITH GRANT OPTION
CREATE ROLE aq_qp_mix NOLOGIN;       -- ALL on qp_q, then DEQUEUE revoked
CREATE ROLE aq_qp_admin NOLOGIN SUPERUSER;

CREATE TYPE public.aq_qp_ot AS (message text);
CREATE SCHEMA aq_qp_sch;             -- the owner's queue table lives here
GRANT USAGE ON SCHEMA aq_qp_sch TO PUBLIC;
GRANT CREATE ON SCHEMA aq_qp_sch TO aq_qp_owner;
CREATE SCHEMA aq_qp_msch;            -- the other manager's
GRANT USAGE ON SCHEMA aq_qp_msch TO PUBLIC;
GRANT CREATE ON SCHEMA aq_qp_msch TO aq_qp_mgr;

CREATE TEMP TABLE qp_admin_fns (sig text PRIMARY KEY);
INSERT INTO qp_admin_fns VALUES
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
DO $$
DECLARE s text;
BEGIN
    FOR s IN SELECT sig FROM qp_admin_fns LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO aq_qp_owner, aq_qp_mgr', s);
    END LOOP;
END $$;

SELECT is((SELECT count(*)::int FROM qp_admin_fns WHERE has_function_privilege(r.role, sig::regprocedure, 'EXECUTE')),
          r.n, format('%s has EXECUTE on %s of the 14 admin functions', r.role, r.n))
  FROM (VALUES (1, 'aq_qp_none', 0), (2, 'aq_qp_enq', 0), (3, 'aq_qp_deq', 0), (4, 'aq_qp_all', 0),
               (5, 'aq_qp_owner', 14), (6, 'aq_qp_mgr', 14), (7, 'aq_qp_admin', 14)) AS r(o, role, n)
 ORDER BY r.o;

-- a query's first column as text, or 'ERROR <sqlstate>: <message>' (a failing call fails its assertion
-- instead of aborting the script); runs as the current role
CREATE FUNCTION pg_temp.qp_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE result text;
BEGIN
    EXECUTE sql INTO result;
    RETURN coalesce(result, '<NULL>');
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;

------------------------------------------------------------------------------ the owner creates its queue table

SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.create_queue_table('qp_qt', 'aq_qp_ot', queue_table_schema => 'aq_qp_sch')$$,
                'owner: create_queue_table(qp_qt) in a schema where it has CREATE');
SELECT lives_ok($$SELECT aq.create_queue('qp_q', 'qp_qt')$$, 'owner: create_queue(qp_q)');
SELECT lives_ok($$SELECT aq.create_queue('qp_q2', 'qp_qt')$$, 'owner: create_queue(qp_q2)');
SELECT lives_ok($$SELECT aq.start_queue('qp_q')$$, 'owner: start_queue(qp_q)');
SELECT lives_ok($$SELECT aq.start_queue('qp_q2')$$, 'owner: start_queue(qp_q2)');
SELECT lives_ok($$SELECT aq.start_queue('aq$_qp_qt_e', enqueue => false)$$,
                'owner: start_queue(aq$_qp_qt_e, enqueue => false), its default exception queue');
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_enq')$$,
                'owner: grant_queue_privilege(ENQUEUE, qp_q, aq_qp_enq)');
SELECT lives_ok($$SELECT aq.grant_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_deq')$$,
                'owner: grant_queue_privilege(DEQUEUE, qp_q, aq_qp_deq)');
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ALL', 'qp_q', 'aq_qp_all')$$,
                'owner: grant_queue_privilege(ALL, qp_q, aq_qp_all)');
RESET ROLE;

SET LOCAL ROLE aq_qp_mgr;
SELECT lives_ok($$SELECT aq.create_queue_table('mgr_qt', 'aq_qp_ot', queue_table_schema => 'aq_qp_msch');
                  SELECT aq.create_queue('mgr_q', 'mgr_qt'); SELECT aq.start_queue('mgr_q')$$,
                'other manager: creates and starts its own queue table mgr_qt and queue mgr_q');
RESET ROLE;

SELECT is((SELECT relowner::regrole::text FROM pg_class WHERE oid = 'aq_qp_sch.qp_qt'::regclass), 'aq_qp_owner',
          'the creator owns the queue table aq_qp_sch.qp_qt');
SELECT is((SELECT relowner::regrole::text FROM pg_class WHERE oid = 'aq_qp_sch."aq$qp_qt"'::regclass), 'aq_qp_owner',
          'the creator owns the view aq_qp_sch."aq$qp_qt"');
SELECT is((SELECT relowner::regrole::text FROM pg_class WHERE oid = 'aq_qp_msch.mgr_qt'::regclass), 'aq_qp_mgr',
          'the other manager owns aq_qp_msch.mgr_qt');
SELECT ok(NOT has_table_privilege('aq_qp_none', 'aq_qp_sch.qp_qt', 'SELECT')
          AND NOT has_any_column_privilege('aq_qp_none', 'aq_qp_sch.qp_qt', 'SELECT, INSERT, UPDATE'),
          'PUBLIC has no privilege on the new queue table');

------------------------------------------------------------------------------ messages

-- Per role: messages <role>-m1..m6 (for the msgid options) and <role>-c1..c6 with correlation <role>-c<i>
-- (for the correlation options), behind 40 fillers that the plain dequeues take from the head.
CREATE TEMP TABLE qp_ids (k text PRIMARY KEY, id bigint NOT NULL);
GRANT SELECT ON qp_ids TO PUBLIC;
DO $$
DECLARE
    r text;
    i integer;
BEGIN
    PERFORM aq.enqueue_array('qp_q', array_agg(ROW('filler ' || g)::aq_qp_ot ORDER BY g)) FROM generate_series(1, 40) g;
    FOREACH r IN ARRAY ARRAY['aq_qp_none', 'aq_qp_enq', 'aq_qp_deq', 'aq_qp_all', 'aq_qp_owner', 'aq_qp_mgr', 'aq_qp_admin'] LOOP
        FOR i IN 1..6 LOOP
            INSERT INTO qp_ids VALUES (r || '-m' || i, aq.enqueue('qp_q', ROW(r || '-m' || i)::aq_qp_ot));
        END LOOP;
        FOR i IN 1..6 LOOP
            INSERT INTO qp_ids VALUES (r || '-c' || i, aq.enqueue('qp_q', ROW(r || '-c' || i)::aq_qp_ot,
                                                                  aq.message_properties(correlation => r || '-c' || i)));
        END LOOP;
    END LOOP;
    PERFORM aq.enqueue('qp_q', ROW('purge')::aq_qp_ot, aq.message_properties(correlation => 'purge-owner')) FROM generate_series(1, 2);
    PERFORM aq.enqueue('qp_q', ROW('purge')::aq_qp_ot, aq.message_properties(correlation => 'purge-admin')) FROM generate_series(1, 2);
    PERFORM aq.enqueue('qp_q2', ROW('in qp_q2')::aq_qp_ot) FROM generate_series(1, 3);
    INSERT INTO qp_ids VALUES ('exp', aq.enqueue('qp_q', ROW('expires')::aq_qp_ot,
                                                 aq.message_properties(correlation => 'qp-exp', expiration => '0.01 s')));
    -- its 0.01 s passed (moved into the past rather than waited for)
    UPDATE aq_qp_sch.qp_qt SET enq_time = enq_time - interval '1 s', expiration = expiration - interval '1 s'
     WHERE corrid = 'qp-exp';
END $$;

-- which of the role's msgid / correlation targets are still there (as the superuser)
CREATE FUNCTION pg_temp.qp_left(role text) RETURNS text LANGUAGE sql AS $$
    SELECT string_agg(split_part(i.k, '-', 2), ',' ORDER BY split_part(i.k, '-', 2) COLLATE "C")
      FROM qp_ids i JOIN aq_qp_sch.qp_qt m ON m.msgid = i.id
     WHERE i.k LIKE role || '-%'
$$;
-- how many messages the role enqueued
CREATE FUNCTION pg_temp.qp_enqueued(role text) RETURNS integer LANGUAGE sql AS $$
    SELECT count(*)::int FROM aq_qp_sch.qp_qt WHERE enq_uid = role
$$;

------------------------------------------------------------------------------ the queue operations

-- 4 enqueues, then dequeue and dequeue_array in each mode, plain / by msgid / by correlation.  Every
-- dequeue starts from the head (first_message): NEXT_MESSAGE positions are shared by the session.
CREATE TEMP TABLE qp_ops (n integer PRIMARY KEY, kind text NOT NULL, label text NOT NULL, sql text NOT NULL);
GRANT SELECT ON qp_ops TO PUBLIC;
INSERT INTO qp_ops VALUES
    (1, 'enqueue', 'enqueue',
     $$SELECT aq.enqueue('qp_q', ROW('enqueued by ' || current_user)::aq_qp_ot)$$),
    (2, 'enqueue', 'enqueue with message properties',
     $$SELECT aq.enqueue('qp_q', ROW('enqueued by ' || current_user)::aq_qp_ot,
                         aq.message_properties(priority => 2, correlation => 'enq-' || current_user))$$),
    (3, 'enqueue', 'enqueue_array',
     $$SELECT aq.enqueue_array('qp_q', ARRAY[ROW('a')::aq_qp_ot, ROW('b')::aq_qp_ot])$$),
    (4, 'enqueue', 'enqueue_array with message properties',
     $$SELECT aq.enqueue_array('qp_q', ARRAY[ROW('c')::aq_qp_ot, ROW('d')::aq_qp_ot],
                               ARRAY[aq.message_properties(correlation => 'enq-' || current_user),
                                     aq.message_properties(priority => 3)])$$);
INSERT INTO qp_ops
SELECT f.base + 3 * (m.i - 1) + v.j, 'dequeue', format('%s (%s%s)', f.fn, m.mode, v.label),
       format($f$SELECT %s FROM aq.%s('qp_q', NULL::aq_qp_ot, %saq.dequeue_options(dequeue_mode => %L, navigation => 'first_message', wait => '0'%s))$f$,
              f.col, f.fn, f.arg, m.mode,
              CASE v.j WHEN 1 THEN ''
                       WHEN 2 THEN format($f$, msgid => (SELECT id FROM qp_ids WHERE k = current_user || '-m%s')$f$, f.k0 + m.i)
                       ELSE format($f$, correlation => current_user || '-c%s%s'$f$, f.k0 + m.i, f.pct) END)
  FROM (VALUES ('dequeue', 'msgid', '', 10, 0, ''), ('dequeue_array', 'count(*)', '2, ', 20, 3, '%')) AS f(fn, col, arg, base, k0, pct),
       (VALUES (1, 'remove'), (2, 'browse'), (3, 'locked')) AS m(i, mode),
       (VALUES (1, ''), (2, ', msgid'), (3, ', correlation')) AS v(j, label);

SELECT is((SELECT count(*)::int FROM qp_ops), 22, 'the matrix has 22 queue operations');

-- no privilege
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('no privilege: %s gives 42501', o.label))
  FROM qp_ops o ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_none'), 'c1,c2,c3,c4,c5,c6,m1,m2,m3,m4,m5,m6', 'no privilege: every target is still queued');
SELECT is(pg_temp.qp_enqueued('aq_qp_none'), 0, 'no privilege: nothing was enqueued');

-- ENQUEUE
SET LOCAL ROLE aq_qp_enq;
SELECT lives_ok(o.sql, format('ENQUEUE: %s works', o.label)) FROM qp_ops o WHERE o.kind = 'enqueue' ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('ENQUEUE only: %s gives 42501', o.label))
  FROM qp_ops o WHERE o.kind = 'dequeue' ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_enq'), 'c1,c2,c3,c4,c5,c6,m1,m2,m3,m4,m5,m6', 'ENQUEUE only: every target is still queued');
SELECT is(pg_temp.qp_enqueued('aq_qp_enq'), 6, 'ENQUEUE: its 6 messages are stored with enq_uid aq_qp_enq');

-- DEQUEUE
SET LOCAL ROLE aq_qp_deq;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('DEQUEUE only: %s gives 42501', o.label))
  FROM qp_ops o WHERE o.kind = 'enqueue' ORDER BY o.n;
SELECT lives_ok(o.sql, format('DEQUEUE: %s works', o.label)) FROM qp_ops o WHERE o.kind = 'dequeue' ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_deq'), 'c2,c3,c5,c6,m2,m3,m5,m6',
          'DEQUEUE: remove took its targets, browse and locked left theirs');
SELECT is(pg_temp.qp_enqueued('aq_qp_deq'), 0, 'DEQUEUE only: nothing was enqueued');

-- ALL
SET LOCAL ROLE aq_qp_all;
SELECT lives_ok(o.sql, format('ALL: %s works', o.label)) FROM qp_ops o ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_all'), 'c2,c3,c5,c6,m2,m3,m5,m6', 'ALL: remove took its targets, browse and locked left theirs');
SELECT is(pg_temp.qp_enqueued('aq_qp_all'), 6, 'ALL: its 6 messages are stored with enq_uid aq_qp_all');

-- the queue table's owner needs no grant
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok(o.sql, format('owner: %s works', o.label)) FROM qp_ops o ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_owner'), 'c2,c3,c5,c6,m2,m3,m5,m6', 'owner: remove took its targets, browse and locked left theirs');
SELECT is(pg_temp.qp_enqueued('aq_qp_owner'), 6, 'owner: its 6 messages are stored with enq_uid aq_qp_owner');

-- EXECUTE on the admin functions gives no queue privilege on someone else's queue table
SET LOCAL ROLE aq_qp_mgr;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('other manager: %s gives 42501', o.label))
  FROM qp_ops o ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_mgr'), 'c1,c2,c3,c4,c5,c6,m1,m2,m3,m4,m5,m6', 'other manager: every target is still queued');
SELECT is(pg_temp.qp_enqueued('aq_qp_mgr'), 0, 'other manager: nothing was enqueued');

-- superuser
SET LOCAL ROLE aq_qp_admin;
SELECT lives_ok(o.sql, format('admin: %s works', o.label)) FROM qp_ops o ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.qp_left('aq_qp_admin'), 'c2,c3,c5,c6,m2,m3,m5,m6', 'admin: remove took its targets, browse and locked left theirs');
SELECT is(pg_temp.qp_enqueued('aq_qp_admin'), 6, 'admin: its 6 messages are stored with enq_uid aq_qp_admin');

------------------------------------------------------------------------------ the exception queue

-- Expired messages move to the exception queue (as the table's owner) only when a role that may
-- dequeue (DELETE) consumes from it; the others get 42501 and move nothing.  Browse moves nothing
-- either (hardening 14: browse is read-only, see pg_regress owner_run).
CREATE FUNCTION pg_temp.qp_exp_queue() RETURNS text LANGUAGE sql AS $$
    SELECT q.queue_name FROM aq_qp_sch.qp_qt m JOIN aq.queues q ON q.queue_id = m.q_id
     WHERE m.msgid = (SELECT id FROM qp_ids WHERE k = 'exp')
$$;
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('aq$_qp_qt_e', NULL::aq_qp_ot,
                     aq.dequeue_options(dequeue_mode => 'browse', correlation => 'qp-exp', wait => '0'))$$,
                 '42501', 'permission denied for table qp_qt', 'no privilege: dequeue from the exception queue gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_enq;
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('aq$_qp_qt_e', NULL::aq_qp_ot,
                     aq.dequeue_options(dequeue_mode => 'remove', correlation => 'qp-exp', wait => '0'))$$,
                 '42501', 'permission denied for table qp_qt', 'ENQUEUE only: dequeue from the exception queue gives 42501');
SELECT throws_ok($$SELECT aq.enqueue('aq$_qp_qt_e', ROW('x')::aq_qp_ot)$$, '55000',
                 'cannot enqueue to exception queue "aq$_qp_qt_e"',
                 'ENQUEUE: enqueue into an exception queue gives 55000 whatever the privileges');
RESET ROLE;
SELECT is(pg_temp.qp_exp_queue(), 'qp_q', 'the refused dequeues did not move the expired message');
SET LOCAL ROLE aq_qp_deq;
SELECT is(pg_temp.qp_try($$SELECT (message_properties).state FROM aq.dequeue('aq$_qp_qt_e', NULL::aq_qp_ot,
                             aq.dequeue_options(dequeue_mode => 'locked', navigation => 'first_message',
                                                correlation => 'qp-exp', wait => '0'))$$),
          'expired', 'DEQUEUE: a locked dequeue of the exception queue returns the expired message');
RESET ROLE;
SELECT is(pg_temp.qp_exp_queue(), 'aq$_qp_qt_e', 'the expired message was moved to aq$_qp_qt_e');

------------------------------------------------------------------------------ the AQ$qp_qt view (security_invoker)

SELECT ok((SELECT 'security_invoker=true' = ANY (reloptions) FROM pg_class WHERE oid = 'aq_qp_sch."aq$qp_qt"'::regclass),
          'aq_qp_sch."aq$qp_qt" has security_invoker = true');
-- create_queue_table grants SELECT on the view to PUBLIC: the table's SELECT (the DEQUEUE privilege) decides
SELECT ok(has_table_privilege('public', 'aq_qp_sch."aq$qp_qt"', 'SELECT')
          AND NOT has_table_privilege('public', 'aq_qp_sch."aq$qp_qt"', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'PUBLIC has SELECT, and only SELECT, on aq_qp_sch."aq$qp_qt" from its creation');
SET LOCAL ROLE aq_qp_owner;
SELECT is(pg_temp.qp_try($$SELECT count(*) > 0 FROM aq_qp_sch."aq$qp_qt" WHERE queue = 'qp_q'$$), 'true',
          'owner: reads the messages through the AQ$ view');
RESET ROLE;
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok($$SELECT count(*) FROM aq_qp_sch."aq$qp_qt"$$, '42501', 'permission denied for table qp_qt',
                 'no privilege: the AQ$ view needs SELECT on the queue table (42501)');
RESET ROLE;
SET LOCAL ROLE aq_qp_enq;
SELECT throws_ok($$SELECT count(*) FROM aq_qp_sch."aq$qp_qt"$$, '42501', 'permission denied for table qp_qt',
                 'ENQUEUE only: the AQ$ view gives 42501 (SELECT on msgid only)');
RESET ROLE;
SET LOCAL ROLE aq_qp_deq;
SELECT is(pg_temp.qp_try($$SELECT count(*) > 0 FROM aq_qp_sch."aq$qp_qt" WHERE queue = 'qp_q' AND msg_state = 'READY'$$),
          'true', 'DEQUEUE: reads the messages through the AQ$ view');
RESET ROLE;
SET LOCAL ROLE aq_qp_all;
SELECT is(pg_temp.qp_try($$SELECT count(*) > 0 FROM aq_qp_sch."aq$qp_qt" WHERE queue = 'qp_q'$$), 'true',
          'ALL: reads the messages through the AQ$ view');
RESET ROLE;
SET LOCAL ROLE aq_qp_mgr;
SELECT throws_ok($$SELECT count(*) FROM aq_qp_sch."aq$qp_qt"$$, '42501', 'permission denied for table qp_qt',
                 'other manager: the AQ$ view gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_admin;
SELECT is(pg_temp.qp_try($$SELECT count(*) > 0 FROM aq_qp_sch."aq$qp_qt" WHERE queue = 'qp_q'$$), 'true',
          'admin: reads the messages through the AQ$ view');
RESET ROLE;

------------------------------------------------------------------------------ aq.all_queues / aq.user_queues

-- ALL_ lists the queues of the queue tables the caller owns or may use; USER_ those it owns.
CREATE TEMP VIEW qp_view_sql (kind, sql) AS VALUES
    ('all_queues', $$SELECT name FROM aq.all_queues WHERE queue_table IN ('qp_qt', 'mgr_qt') ORDER BY name COLLATE "C"$$),
    ('user_queues', $$SELECT name FROM aq.user_queues WHERE queue_table IN ('qp_qt', 'mgr_qt') ORDER BY name COLLATE "C"$$),
    ('all_queue_tables', $$SELECT queue_table FROM aq.all_queue_tables WHERE queue_table IN ('qp_qt', 'mgr_qt') ORDER BY queue_table COLLATE "C"$$),
    ('user_queue_tables', $$SELECT queue_table FROM aq.user_queue_tables WHERE queue_table IN ('qp_qt', 'mgr_qt') ORDER BY queue_table COLLATE "C"$$);
GRANT SELECT ON qp_view_sql TO PUBLIC;
CREATE TEMP TABLE qp_views_expected (role text, kind text, names text);
GRANT SELECT ON qp_views_expected TO PUBLIC;
INSERT INTO qp_views_expected VALUES
    ('aq_qp_none', 'all_queues', ''), ('aq_qp_none', 'user_queues', ''),
    ('aq_qp_none', 'all_queue_tables', ''), ('aq_qp_none', 'user_queue_tables', ''),
    ('aq_qp_enq', 'all_queues', 'aq$_qp_qt_e,qp_q,qp_q2'), ('aq_qp_enq', 'user_queues', ''),
    ('aq_qp_enq', 'all_queue_tables', 'qp_qt'), ('aq_qp_enq', 'user_queue_tables', ''),
    ('aq_qp_deq', 'all_queues', 'aq$_qp_qt_e,qp_q,qp_q2'), ('aq_qp_deq', 'user_queues', ''),
    ('aq_qp_deq', 'all_queue_tables', 'qp_qt'), ('aq_qp_deq', 'user_queue_tables', ''),
    ('aq_qp_all', 'all_queues', 'aq$_qp_qt_e,qp_q,qp_q2'), ('aq_qp_all', 'user_queues', ''),
    ('aq_qp_all', 'all_queue_tables', 'qp_qt'), ('aq_qp_all', 'user_queue_tables', ''),
    ('aq_qp_owner', 'all_queues', 'aq$_qp_qt_e,qp_q,qp_q2'), ('aq_qp_owner', 'user_queues', 'aq$_qp_qt_e,qp_q,qp_q2'),
    ('aq_qp_owner', 'all_queue_tables', 'qp_qt'), ('aq_qp_owner', 'user_queue_tables', 'qp_qt'),
    ('aq_qp_mgr', 'all_queues', 'aq$_mgr_qt_e,mgr_q'), ('aq_qp_mgr', 'user_queues', 'aq$_mgr_qt_e,mgr_q'),
    ('aq_qp_mgr', 'all_queue_tables', 'mgr_qt'), ('aq_qp_mgr', 'user_queue_tables', 'mgr_qt'),
    ('aq_qp_admin', 'all_queues', 'aq$_mgr_qt_e,aq$_qp_qt_e,mgr_q,qp_q,qp_q2'), ('aq_qp_admin', 'user_queues', ''),
    ('aq_qp_admin', 'all_queue_tables', 'mgr_qt,qp_qt'), ('aq_qp_admin', 'user_queue_tables', '');
-- what the current role sees in each view
CREATE FUNCTION pg_temp.qp_sees(kind text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE names text;
BEGIN
    EXECUTE format('SELECT coalesce(string_agg(n, '','' ORDER BY n COLLATE "C"), '''') FROM (%s) AS s(n)',
                   (SELECT v.sql FROM qp_view_sql v WHERE v.kind = qp_sees.kind)) INTO names;
    RETURN names;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;

SET LOCAL ROLE aq_qp_none;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('no privilege: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
RESET ROLE;
SET LOCAL ROLE aq_qp_enq;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('ENQUEUE: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
RESET ROLE;
SET LOCAL ROLE aq_qp_deq;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('DEQUEUE: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
RESET ROLE;
SET LOCAL ROLE aq_qp_all;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('ALL: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
RESET ROLE;
SET LOCAL ROLE aq_qp_owner;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('owner: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
SELECT is(pg_temp.qp_try($$SELECT string_agg(owner || ':' || state, ',' ORDER BY name COLLATE "C") FROM aq.user_queues WHERE queue_table = 'qp_qt'$$),
          'aq_qp_owner:DEQUEUE ONLY,aq_qp_owner:STARTED,aq_qp_owner:STARTED',
          'owner: aq.user_queues shows it as the owner, with each queue''s state');
RESET ROLE;
SET LOCAL ROLE aq_qp_mgr;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('other manager: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
RESET ROLE;
SET LOCAL ROLE aq_qp_admin;
SELECT is(pg_temp.qp_sees(e.kind), e.names, format('admin: aq.%s lists %s', e.kind, coalesce(nullif(e.names, ''), 'nothing')))
  FROM qp_views_expected e WHERE e.role = current_user::text ORDER BY e.kind;
RESET ROLE;

------------------------------------------------------------------------------ direct writes to the catalog (RLS)

SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'aq.queues'::regclass)
          AND (SELECT relrowsecurity FROM pg_class WHERE oid = 'aq.queue_tables'::regclass),
          'aq.queues and aq.queue_tables have row-level security');
-- Each non-owner: UPDATE of qp_qt's queue settings and DELETE of qp_qt's rows change nothing (RLS); UPDATE of
-- aq.queue_tables' comment changes nothing either (RLS); INSERT for qp_qt (RLS) and TRUNCATE are refused.
CREATE TEMP TABLE qp_cat_ops (n integer PRIMARY KEY, label text NOT NULL, sql text NOT NULL, errmsg text);
GRANT SELECT ON qp_cat_ops TO PUBLIC;
INSERT INTO qp_cat_ops VALUES
    (1, 'UPDATE of qp_q in aq.queues',
     $$WITH w AS (UPDATE aq.queues SET max_retries = 0, enqueue_enabled = false WHERE queue_name = 'qp_q' RETURNING 1) SELECT count(*) FROM w$$, NULL),
    (2, 'DELETE of qp_q2 from aq.queues',
     $$WITH w AS (DELETE FROM aq.queues WHERE queue_name = 'qp_q2' RETURNING 1) SELECT count(*) FROM w$$, NULL),
    (3, 'UPDATE of qp_qt in aq.queue_tables',
     $$WITH w AS (UPDATE aq.queue_tables SET comment = 'hijacked' WHERE queue_table = 'qp_qt' RETURNING 1) SELECT count(*) FROM w$$, NULL),
    (4, 'DELETE of qp_qt from aq.queue_tables',
     $$WITH w AS (DELETE FROM aq.queue_tables WHERE queue_table = 'qp_qt' RETURNING 1) SELECT count(*) FROM w$$, NULL),
    (5, 'INSERT of a queue of qp_qt into aq.queues',
     $$INSERT INTO aq.queues (queue_name, queue_table_id, enqueue_enabled, dequeue_enabled)
       SELECT 'qp_intruder', queue_table_id, true, true FROM aq.queue_tables WHERE queue_table = 'qp_qt'$$,
     'new row violates row-level security policy for table "queues"'),
    (6, 'INSERT into aq.queue_tables of a row for the owner''s table',
     $$INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type)
       VALUES ('qp_fake_qt', 'aq_qp_sch', 'aq_qp_sch.qp_qt', 'aq_qp_ot')$$,
     'new row violates row-level security policy for table "queue_tables"'),
    (7, 'TRUNCATE of aq.queues', $$TRUNCATE aq.queues$$, 'permission denied for table queues'),
    (8, 'TRUNCATE of aq.queue_tables', $$TRUNCATE aq.queue_tables$$, 'permission denied for table queue_tables');

SET LOCAL ROLE aq_qp_none;
SELECT is(pg_temp.qp_try(o.sql), '0', format('no privilege: %s changes no row', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('no privilege: %s gives 42501', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_enq;
SELECT is(pg_temp.qp_try(o.sql), '0', format('ENQUEUE: %s changes no row', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('ENQUEUE: %s gives 42501', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_deq;
SELECT is(pg_temp.qp_try(o.sql), '0', format('DEQUEUE: %s changes no row', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('DEQUEUE: %s gives 42501', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_all;
SELECT is(pg_temp.qp_try(o.sql), '0', format('ALL: %s changes no row', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('ALL: %s gives 42501', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_mgr;
SELECT is(pg_temp.qp_try(o.sql), '0', format('other manager: %s changes no row', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('other manager: %s gives 42501', o.label)) FROM qp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
-- nor can it pull the owner's table into its own catalog row
SELECT throws_ok($$UPDATE aq.queue_tables SET relid = 'aq_qp_sch.qp_qt' WHERE queue_table = 'mgr_qt'$$, '42501',
                 'permission denied for table queue_tables',
                 'other manager: pointing its own queue table row at the owner''s table gives 42501');
RESET ROLE;
SELECT results_eq($$SELECT q.queue_name, q.max_retries, q.enqueue_enabled, t.comment
                      FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id)
                     WHERE t.queue_table = 'qp_qt' ORDER BY q.queue_name COLLATE "C"$$,
                  $$VALUES ('aq$_qp_qt_e', 5, false, NULL::text), ('qp_q', 5, true, NULL), ('qp_q2', 5, true, NULL)$$,
                  'the non-owners'' catalog writes changed nothing of qp_qt');
SELECT is_empty($$SELECT FROM aq.queues WHERE queue_name = 'qp_intruder'
                  UNION ALL SELECT FROM aq.queue_tables WHERE queue_table = 'qp_fake_qt'$$,
                'the refused inserts added no row');

-- the owner writes the rows of its queue table, and only those
SET LOCAL ROLE aq_qp_owner;
SELECT is(pg_temp.qp_try($$WITH w AS (UPDATE aq.queues SET comment = 'set by the owner' WHERE queue_name = 'qp_q2' RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'owner: UPDATE of its own queue''s row in aq.queues changes it');
SELECT is(pg_temp.qp_try($$WITH w AS (UPDATE aq.queues SET comment = 'hijacked' WHERE queue_name = 'mgr_q' RETURNING 1) SELECT count(*) FROM w$$),
          '0', 'owner: UPDATE of the other manager''s queue changes no row');
SELECT is(pg_temp.qp_try($$WITH w AS (DELETE FROM aq.queues WHERE queue_name = 'mgr_q' RETURNING 1) SELECT count(*) FROM w$$),
          '0', 'owner: DELETE of the other manager''s queue changes no row');
SELECT is(pg_temp.qp_try($$WITH w AS (DELETE FROM aq.queue_tables WHERE queue_table = 'mgr_qt' RETURNING 1) SELECT count(*) FROM w$$),
          '0', 'owner: DELETE of the other manager''s queue table row changes no row');
SELECT throws_ok($$UPDATE aq.queues SET queue_table_id = (SELECT queue_table_id FROM aq.queue_tables WHERE queue_table = 'mgr_qt')
                   WHERE queue_name = 'qp_q2'$$, '42501', 'permission denied for table queues',
                 'owner: moving its queue into the other manager''s queue table gives 42501 (queue_table_id is not updatable)');
SELECT throws_ok($$INSERT INTO aq.queues (queue_name, queue_table_id)
                   SELECT 'qp_intruder', queue_table_id FROM aq.queue_tables WHERE queue_table = 'mgr_qt'$$, '42501',
                 'new row violates row-level security policy for table "queues"',
                 'owner: inserting a queue into the other manager''s queue table gives 42501');
SELECT throws_ok($$UPDATE aq.queue_tables SET relid = 'aq_qp_msch.mgr_qt' WHERE queue_table = 'qp_qt'$$, '42501',
                 'permission denied for table queue_tables',
                 'owner: pointing its queue table row at the other manager''s table gives 42501');
SELECT throws_ok($$UPDATE aq.queue_tables SET segment_count = 4 WHERE queue_table = 'qp_qt'$$, '42501',
                 'new row violates row-level security policy for table "queue_tables"',
                 'owner: a segment count its table does not have gives 42501 (aq.alter_queue_table makes the segments)');
SELECT throws_ok($$UPDATE aq.queues SET queue_type = 'exception_queue' WHERE queue_name = 'qp_q2'$$, '42501',
                 'permission denied for table queues',
                 'owner: the queue_type of its own queue is not updatable (42501)');
RESET ROLE;
SELECT results_eq($$SELECT q.queue_name, q.comment, t.queue_table, t.relid::text
                      FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id)
                     WHERE q.queue_name IN ('qp_q2', 'mgr_q') ORDER BY 1$$,
                  $$VALUES ('mgr_q', NULL::text, 'mgr_qt', 'aq_qp_msch.mgr_qt'), ('qp_q2', 'set by the owner', 'qp_qt', 'aq_qp_sch.qp_qt')$$,
                  'only the owner''s own row changed');
SET LOCAL ROLE aq_qp_admin;
SELECT is(pg_temp.qp_try($$WITH w AS (UPDATE aq.queues SET comment = NULL WHERE queue_name = 'qp_q2' RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'admin: a superuser writes any row of aq.queues');
RESET ROLE;

-- "Calling the catalog directly gives no more than the functions do" (aq--0.3.0--0.4.0.sql): no one
-- chooses an identity value (OVERRIDING SYSTEM VALUE needs the identity column, which is not granted), so
-- no one blocks another role's next create_queue (23505); a row of aq.queue_tables needs a permanent
-- ordinary table the role manages and EXECUTE on aq.create_queue_table, so no role without it takes
-- queue table names (e.g. for a temporary table, which needs no CREATE on a schema); a row of aq.queues
-- needs a queue table the role manages and EXECUTE on aq.create_queue_table or aq.create_queue.
-- the next identity values (as the superuser: the sequences are not readable by PUBLIC)
INSERT INTO qp_ids SELECT 'next_queue_id', CASE WHEN is_called THEN last_value + 1 ELSE last_value END
  FROM aq.queues_queue_id_seq;
INSERT INTO qp_ids SELECT 'next_queue_table_id', CASE WHEN is_called THEN last_value + 1 ELSE last_value END
  FROM aq.queue_tables_queue_table_id_seq;
SET LOCAL ROLE aq_qp_owner;
SELECT throws_ok($$INSERT INTO aq.queues (queue_id, queue_name, queue_table_id) OVERRIDING SYSTEM VALUE
                   SELECT (SELECT id FROM qp_ids WHERE k = 'next_queue_id'), 'qp_squat_q', queue_table_id
                     FROM aq.queue_tables WHERE queue_table = 'qp_qt'$$, '42501', 'permission denied for table queues',
                 'owner: choosing a queue_id (OVERRIDING SYSTEM VALUE) in aq.queues gives 42501');
SELECT throws_ok($$INSERT INTO aq.queue_tables (queue_table_id, queue_table, table_schema, relid, payload_type)
                   OVERRIDING SYSTEM VALUE
                   VALUES ((SELECT id FROM qp_ids WHERE k = 'next_queue_table_id'), 'qp_squat_qt', 'aq_qp_sch',
                           'aq_qp_sch.qp_qt', 'aq_qp_ot')$$, '42501', 'permission denied for table queue_tables',
                 'owner: choosing a queue_table_id (OVERRIDING SYSTEM VALUE) in aq.queue_tables gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_mgr;
SELECT lives_ok($$SELECT aq.create_queue('mgr_q_next', 'mgr_qt')$$,
                'other manager: create_queue is not blocked by a queue_id someone else took');
RESET ROLE;
SELECT is((SELECT queue_id::bigint FROM aq.queues WHERE queue_name = 'mgr_q_next'), (SELECT id FROM qp_ids WHERE k = 'next_queue_id'),
          'the other manager''s new queue got the queue_id the owner tried to take');

-- tables to register: the owner's temporary, unlogged, partitioned, permanent ones and a view; a permanent
-- table and a temporary table of aq_qp_none (which has no EXECUTE)
SET LOCAL ROLE aq_qp_none;
CREATE TEMP TABLE qp_none_tt (i integer);
RESET ROLE;
CREATE TABLE aq_qp_sch.qp_none_pt (i integer);
ALTER TABLE aq_qp_sch.qp_none_pt OWNER TO aq_qp_none;
SET LOCAL ROLE aq_qp_owner;
CREATE TEMP TABLE qp_owner_tt (i integer);
CREATE UNLOGGED TABLE aq_qp_sch.qp_owner_ut (i integer);
CREATE TABLE aq_qp_sch.qp_owner_parted (i integer) PARTITION BY RANGE (i);
CREATE VIEW aq_qp_sch.qp_owner_v AS SELECT 1 AS i;
CREATE TABLE aq_qp_sch.qp_owner_pt (i integer);
CREATE TABLE aq_qp_sch.qp_owner_pt2 (i integer);
RESET ROLE;
SELECT ok((SELECT relowner = 'aq_qp_none'::regrole AND relpersistence = 't' FROM pg_class WHERE oid = 'pg_temp.qp_none_tt'::regclass)
          AND (SELECT relowner = 'aq_qp_none'::regrole AND relpersistence = 'p' AND relkind = 'r' FROM pg_class WHERE oid = 'aq_qp_sch.qp_none_pt'::regclass)
          AND (SELECT bool_and(relowner = 'aq_qp_owner'::regrole) FROM pg_class
                WHERE oid IN ('pg_temp.qp_owner_tt'::regclass, 'aq_qp_sch.qp_owner_ut'::regclass, 'aq_qp_sch.qp_owner_parted'::regclass,
                              'aq_qp_sch.qp_owner_v'::regclass, 'aq_qp_sch.qp_owner_pt'::regclass, 'aq_qp_sch.qp_owner_pt2'::regclass)),
          'the tables to register belong to the roles that register them');
CREATE TEMP TABLE qp_reg_ops (n integer PRIMARY KEY, role text NOT NULL, label text NOT NULL, relid text NOT NULL);
GRANT SELECT ON qp_reg_ops TO PUBLIC;
INSERT INTO qp_reg_ops VALUES
    (1, 'aq_qp_none', 'no EXECUTE: registering a queue table for a temporary table it owns', 'pg_temp.qp_none_tt'),
    (2, 'aq_qp_none', 'no EXECUTE: registering a queue table for a permanent table it owns', 'aq_qp_sch.qp_none_pt'),
    (3, 'aq_qp_owner', 'owner: registering a queue table for a temporary table it owns', 'pg_temp.qp_owner_tt'),
    (4, 'aq_qp_owner', 'owner: registering a queue table for an unlogged table it owns', 'aq_qp_sch.qp_owner_ut'),
    (5, 'aq_qp_owner', 'owner: registering a queue table for a partitioned table it owns', 'aq_qp_sch.qp_owner_parted'),
    (6, 'aq_qp_owner', 'owner: registering a queue table for a view it owns', 'aq_qp_sch.qp_owner_v');
CREATE FUNCTION pg_temp.qp_register(queue_table text, relid text) RETURNS text LANGUAGE sql AS $$
    SELECT format($f$INSERT INTO aq.queue_tables (queue_table, table_schema, relid, payload_type)
                     VALUES (%L, 'aq_qp_sch', %L, 'aq_qp_ot')$f$, queue_table, relid)
$$;
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok(pg_temp.qp_register('qp_squat_qt' || o.n, o.relid), '42501',
                 'new row violates row-level security policy for table "queue_tables"', format('%s gives 42501', o.label))
  FROM qp_reg_ops o WHERE o.role = current_user::text ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_owner;
SELECT throws_ok(pg_temp.qp_register('qp_squat_qt' || o.n, o.relid), '42501',
                 'new row violates row-level security policy for table "queue_tables"', format('%s gives 42501', o.label))
  FROM qp_reg_ops o WHERE o.role = current_user::text ORDER BY o.n;
-- what create_queue_table itself inserts, the owner with EXECUTE may insert
SELECT lives_ok(pg_temp.qp_register('qp_own_qt', 'aq_qp_sch.qp_owner_pt'),
                'owner: registering a queue table for a permanent ordinary table it owns works');
SELECT is(pg_temp.qp_try($$SELECT string_agg(queue_table, ',' ORDER BY queue_table COLLATE "C") FROM aq.all_queue_tables$$),
          'qp_own_qt,qp_qt', 'owner: aq.all_queue_tables lists qp_own_qt beside qp_qt');
RESET ROLE;
-- "may use" is any INSERT or SELECT on the table: the catalog views do not break on a queue table row
-- whose table has no user_data column
SET LOCAL ROLE aq_qp_enq;
SELECT is(pg_temp.qp_try($$SELECT string_agg(queue_table, ',' ORDER BY queue_table COLLATE "C") FROM aq.all_queue_tables$$),
          'qp_qt', 'ENQUEUE: aq.all_queue_tables lists qp_qt, while qp_own_qt''s table has no user_data column');
RESET ROLE;
-- without EXECUTE on create_queue_table and create_queue, not even the owner inserts a queue
REVOKE EXECUTE ON FUNCTION aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer),
                           aq.create_queue(text, text, integer, interval, interval, text, text) FROM aq_qp_owner;
SET LOCAL ROLE aq_qp_owner;
SELECT throws_ok($$INSERT INTO aq.queues (queue_name, queue_table_id)
                   SELECT 'qp_own_q', queue_table_id FROM aq.queue_tables WHERE queue_table = 'qp_own_qt'$$, '42501',
                 'new row violates row-level security policy for table "queues"',
                 'owner without EXECUTE on create_queue_table and create_queue: inserting a queue of its queue table gives 42501');
RESET ROLE;
GRANT EXECUTE ON FUNCTION aq.create_queue(text, text, integer, interval, interval, text, text) TO aq_qp_owner;
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$INSERT INTO aq.queues (queue_name, queue_table_id)
                  SELECT 'qp_own_q', queue_table_id FROM aq.queue_tables WHERE queue_table = 'qp_own_qt'$$,
                'owner with EXECUTE on create_queue only: inserting a queue of its queue table works');
SELECT throws_ok(pg_temp.qp_register('qp_own_qt2', 'aq_qp_sch.qp_owner_pt2'), '42501',
                 'new row violates row-level security policy for table "queue_tables"',
                 'owner with EXECUTE on create_queue only: registering a queue table for a permanent table it owns gives 42501');
RESET ROLE;
GRANT EXECUTE ON FUNCTION aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer) TO aq_qp_owner;
SELECT is_empty($$SELECT queue_table FROM aq.queue_tables WHERE queue_table LIKE 'qp\_squat%' OR queue_table = 'qp_own_qt2'
                  UNION ALL SELECT queue_name FROM aq.queues WHERE queue_name = 'qp_squat_q'$$,
                'the refused inserts added no row');
-- the owner deletes its rows (and only the managers of mgr_qt delete mgr_q_next)
SET LOCAL ROLE aq_qp_owner;
SELECT is(pg_temp.qp_try($$WITH w AS (DELETE FROM aq.queues WHERE queue_name IN ('qp_own_q', 'mgr_q_next') RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'owner: DELETE from aq.queues removes its own queue qp_own_q, not the other manager''s mgr_q_next');
SELECT is(pg_temp.qp_try($$WITH w AS (DELETE FROM aq.queue_tables WHERE queue_table = 'qp_own_qt' RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'owner: DELETE from aq.queue_tables removes its own row qp_own_qt');
RESET ROLE;
SET LOCAL ROLE aq_qp_mgr;
SELECT lives_ok($$SELECT aq.drop_queue('mgr_q_next')$$, 'other manager: drop_queue(mgr_q_next)');
RESET ROLE;

------------------------------------------------------------------------------ the internal helpers are harmless

-- EXECUTE to PUBLIC: they read the public catalog or act with the caller's own rights
SET LOCAL ROLE aq_qp_none;
SELECT is(pg_temp.qp_try($$SELECT (aq._queue('qp_q')).queue_name$$), 'qp_q', 'no privilege: aq._queue reads the public catalog');
SELECT is(pg_temp.qp_try($$SELECT aq._queue_relation(aq._queue_table('qp_qt'))::text$$), 'aq_qp_sch.qp_qt',
          'no privilege: aq._queue_relation(aq._queue_table(...)) names the table');
SELECT throws_ok($$SELECT aq._queue_table_objects(t) FROM aq.queue_tables t WHERE t.queue_table = 'qp_qt'$$, '42501',
                 'must be owner of table qp_qt', 'no privilege: aq._queue_table_objects on the owner''s queue table gives 42501');
RESET ROLE;

------------------------------------------------------------------------------ the admin functions

CREATE TEMP TABLE qp_admin_ops (n integer PRIMARY KEY, fn text NOT NULL, label text NOT NULL, sql text NOT NULL,
                                mgr_errmsg text NOT NULL);
GRANT SELECT ON qp_admin_ops TO PUBLIC;
INSERT INTO qp_admin_ops VALUES
    (1, 'create_queue_table', 'create_queue_table in the owner''s schema',
     $$SELECT aq.create_queue_table('qp_qt_x', 'aq_qp_ot', queue_table_schema => 'aq_qp_sch')$$,
     'permission denied for schema aq_qp_sch'),
    (2, 'drop_queue_table', 'drop_queue_table(qp_qt, force)', $$SELECT aq.drop_queue_table('qp_qt', force => true)$$,
     'must be owner of queue table "qp_qt"'),
    (3, 'purge_queue_table', 'purge_queue_table(qp_qt)', $$SELECT aq.purge_queue_table('qp_qt')$$,
     'must be owner of queue table "qp_qt"'),
    (4, 'purge_queue_table', 'purge_queue_table(qp_qt, purge_condition(qp_q))',
     $$SELECT aq.purge_queue_table('qp_qt', aq.purge_condition('qp_q'))$$,
     'must be owner of queue table "qp_qt"'),
    (5, 'purge_queue_table', 'purge_queue_table(qp_qt, purge_condition)',
     $$SELECT aq.purge_queue_table('qp_qt', aq.purge_condition(queue_name => 'qp_q', msg_state => 'READY'))$$,
     'must be owner of queue table "qp_qt"'),
    (6, 'create_queue', 'create_queue in qp_qt', $$SELECT aq.create_queue('qp_q_x', 'qp_qt')$$,
     'must be owner of queue table "qp_qt"'),
    (7, 'create_queue', 'create_queue of an exception queue in qp_qt',
     $$SELECT aq.create_queue('qp_eq_x', 'qp_qt', queue_type => 'exception_queue')$$,
     'must be owner of queue table "qp_qt"'),
    (8, 'alter_queue', 'alter_queue(qp_q)', $$SELECT aq.alter_queue('qp_q', max_retries => 0, comment => 'altered')$$,
     'must be owner of queue table "qp_qt"'),
    (9, 'start_queue', 'start_queue(aq$_qp_qt_e)', $$SELECT aq.start_queue('aq$_qp_qt_e')$$,
     'must be owner of queue table "qp_qt"'),
    (10, 'stop_queue', 'stop_queue(qp_q)', $$SELECT aq.stop_queue('qp_q')$$,
     'must be owner of queue table "qp_qt"'),
    (11, 'drop_queue', 'drop_queue(qp_q2)', $$SELECT aq.drop_queue('qp_q2')$$,
     'must be owner of queue table "qp_qt"'),
    (12, 'grant_queue_privilege', 'grant_queue_privilege(ALL, qp_q) to itself',
     $$SELECT aq.grant_queue_privilege('ALL', 'qp_q', current_user::text)$$,
     'permission denied to grant or revoke ALL on queue table "qp_qt"'),
    (13, 'revoke_queue_privilege', 'revoke_queue_privilege(ENQUEUE, qp_q, aq_qp_enq)',
     $$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_enq')$$,
     'permission denied to grant or revoke ENQUEUE on queue table "qp_qt"');

-- without EXECUTE (queue privileges do not help)
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('no privilege: %s gives 42501', o.label))
  FROM qp_admin_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_enq;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('ENQUEUE: %s gives 42501', o.label))
  FROM qp_admin_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_deq;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('DEQUEUE: %s gives 42501', o.label))
  FROM qp_admin_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_qp_all;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('ALL: %s gives 42501', o.label))
  FROM qp_admin_ops o ORDER BY o.n;
RESET ROLE;
-- with EXECUTE, on someone else's queue table
SET LOCAL ROLE aq_qp_mgr;
SELECT throws_ok(o.sql, '42501', o.mgr_errmsg, format('other manager: %s gives 42501', o.label))
  FROM qp_admin_ops o ORDER BY o.n;
RESET ROLE;
-- the owner cannot pass EXECUTE on (it has no grant option: GRANT only warns)
SET LOCAL client_min_messages = error;
SET LOCAL ROLE aq_qp_owner;
GRANT EXECUTE ON FUNCTION aq.create_queue(text, text, integer, interval, interval, text, text) TO aq_qp_none;
RESET ROLE;
SET LOCAL client_min_messages = warning;
SELECT ok(NOT has_function_privilege('aq_qp_none', 'aq.create_queue(text,text,integer,interval,interval,text,text)', 'EXECUTE'),
          'the owner''s GRANT EXECUTE on aq.create_queue gave aq_qp_none nothing');

SELECT results_eq($$SELECT q.queue_name, q.max_retries, q.enqueue_enabled, q.dequeue_enabled, q.comment
                      FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id)
                     WHERE t.queue_table = 'qp_qt' ORDER BY q.queue_name COLLATE "C"$$,
                  $$VALUES ('aq$_qp_qt_e', 5, false, true, 'default exception queue of qp_qt'),
                           ('qp_q', 5, true, true, NULL), ('qp_q2', 5, true, true, NULL)$$,
                  'the refused admin calls changed no queue of qp_qt');
SELECT is((SELECT count(*)::int FROM aq_qp_sch.qp_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE q.queue_name = 'qp_q2'), 3,
          'the refused purges removed nothing (qp_q2 still has its 3 messages)');
SELECT ok(to_regclass('aq_qp_sch.qp_qt_x') IS NULL AND NOT EXISTS (SELECT FROM aq.queue_tables WHERE queue_table = 'qp_qt_x'),
          'the refused create_queue_table created nothing');
SELECT ok(has_column_privilege('aq_qp_enq', 'aq_qp_sch.qp_qt', 'user_data', 'INSERT')
          AND NOT has_table_privilege('aq_qp_mgr', 'aq_qp_sch.qp_qt', 'SELECT')
          AND NOT has_any_column_privilege('aq_qp_mgr', 'aq_qp_sch.qp_qt', 'INSERT'),
          'the refused grant and revoke changed no privilege');

-- the owner manages its queue table and its queues
SET LOCAL ROLE aq_qp_owner;
SELECT throws_ok($$SELECT aq.create_queue_table('qp_qt_pub', 'aq_qp_ot', queue_table_schema => 'public')$$, '42501',
                 'permission denied for schema public', 'owner: create_queue_table needs CREATE on the schema (42501)');
SELECT lives_ok($$SELECT aq.create_queue_table('qp_qt2', 'aq_qp_ot', sort_list => 'priority,enq_time', queue_table_schema => 'aq_qp_sch')$$,
                'owner: create_queue_table(qp_qt2, priority order)');
SELECT lives_ok($$SELECT aq.create_queue('qp_q3', 'qp_qt')$$, 'owner: create_queue(qp_q3)');
SELECT lives_ok($$SELECT aq.create_queue('qp_eq3', 'qp_qt', queue_type => 'exception_queue')$$,
                'owner: create_queue(qp_eq3, exception_queue)');
SELECT lives_ok($$SELECT aq.alter_queue('qp_q3', max_retries => 2, retry_delay => '1 s', comment => 'by the owner')$$,
                'owner: alter_queue(qp_q3)');
SELECT lives_ok($$SELECT aq.start_queue('qp_q3')$$, 'owner: start_queue(qp_q3)');
SELECT is(pg_temp.qp_try($$SELECT max_retries || ' ' || retry_delay || ' ' || user_comment || ' ' || state FROM aq.user_queues WHERE name = 'qp_q3'$$),
          '2 00:00:01 by the owner STARTED', 'owner: qp_q3 is altered and started');
SELECT lives_ok($$SELECT aq.stop_queue('qp_q3')$$, 'owner: stop_queue(qp_q3)');
SELECT lives_ok($$SELECT aq.drop_queue('qp_q3'); SELECT aq.drop_queue('qp_eq3')$$, 'owner: drop_queue(qp_q3), drop_queue(qp_eq3)');
SELECT is(pg_temp.qp_try($$SELECT aq.purge_queue_table('qp_qt', aq.purge_condition(correlation => 'purge-owner'))$$), '2',
          'owner: purge_queue_table(qp_qt, purge_condition(correlation)) removes 2 messages');
SELECT is(pg_temp.qp_try($$SELECT aq.purge_queue_table('qp_qt', aq.purge_condition(queue_name => 'qp_q2'))$$), '3',
          'owner: purge_queue_table(qp_qt, purge_condition(queue_name => qp_q2)) removes the 3 messages of qp_q2');
SELECT lives_ok($$SELECT aq.drop_queue_table('qp_qt2')$$, 'owner: drop_queue_table(qp_qt2)');
RESET ROLE;
SELECT ok(to_regclass('aq_qp_sch.qp_qt2') IS NULL AND to_regclass('aq_qp_sch."aq$qp_qt2"') IS NULL
          AND NOT EXISTS (SELECT FROM aq.queue_tables WHERE queue_table = 'qp_qt2')
          AND NOT EXISTS (SELECT FROM aq.queues WHERE queue_name IN ('qp_q3', 'qp_eq3', 'aq$_qp_qt2_e')),
          'the owner''s drops removed the queues, the table, its view and its catalog rows');

-- a superuser manages everything
SET LOCAL ROLE aq_qp_admin;
SELECT lives_ok($$SELECT aq.create_queue('qp_adm_q', 'qp_qt')$$, 'admin: create_queue(qp_adm_q) in the owner''s queue table');
SELECT lives_ok($$SELECT aq.alter_queue('qp_adm_q', retention_time => '1 hour')$$, 'admin: alter_queue(qp_adm_q)');
SELECT lives_ok($$SELECT aq.start_queue('qp_adm_q')$$, 'admin: start_queue(qp_adm_q)');
SELECT lives_ok($$SELECT aq.stop_queue('qp_adm_q')$$, 'admin: stop_queue(qp_adm_q)');
SELECT lives_ok($$SELECT aq.alter_queue('qp_q', comment => 'altered by the admin')$$, 'admin: alter_queue(qp_q) of the owner');
SELECT is(pg_temp.qp_try($$SELECT aq.purge_queue_table('qp_qt', aq.purge_condition(correlation => 'purge-admin', msg_state => 'READY'))$$),
          '2', 'admin: purge_queue_table(qp_qt, purge_condition) removes 2 messages of the owner''s queue table');
SELECT lives_ok($$SELECT aq.create_queue_table('adm_qt', 'aq_qp_ot', queue_table_schema => 'aq_qp_sch')$$,
                'admin: create_queue_table(adm_qt) in the owner''s schema');
RESET ROLE;
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.drop_queue('qp_adm_q')$$, 'owner: drops qp_adm_q, which the admin created in its queue table');
SELECT throws_ok($$SELECT aq.create_queue('qp_q_x', 'adm_qt')$$, '42501', 'must be owner of queue table "adm_qt"',
                 'owner: the admin''s queue table adm_qt is not its own (42501), though in its schema');
SELECT throws_ok($$SELECT aq.drop_queue_table('adm_qt')$$, '42501', 'must be owner of queue table "adm_qt"',
                 'owner: drop_queue_table(adm_qt) gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_admin;
SELECT lives_ok($$SELECT aq.drop_queue_table('adm_qt')$$, 'admin: drop_queue_table(adm_qt)');
SELECT lives_ok($$SELECT aq.stop_queue('mgr_q'); SELECT aq.drop_queue('mgr_q')$$,
                'admin: stop_queue and drop_queue of the other manager''s mgr_q');
RESET ROLE;

------------------------------------------------------------------------------ grant_option

SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_go', grant_option => true)$$,
                'owner: grant_queue_privilege(ENQUEUE, qp_q, aq_qp_go, grant_option => true)');
RESET ROLE;
SELECT ok(has_column_privilege('aq_qp_go', 'aq_qp_sch.qp_qt', 'user_data', 'INSERT WITH GRANT OPTION')
          AND NOT has_table_privilege('aq_qp_go', 'aq_qp_sch.qp_qt', 'DELETE'),
          'aq_qp_go holds ENQUEUE with grant option, and no DEQUEUE');
SET LOCAL ROLE aq_qp_go;
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$, '42501',
                 'permission denied for function grant_queue_privilege',
                 'grant option without EXECUTE on aq.grant_queue_privilege: 42501');
RESET ROLE;
GRANT EXECUTE ON FUNCTION aq.grant_queue_privilege(text, text, text, boolean), aq.revoke_queue_privilege(text, text, text)
    TO aq_qp_go, aq_qp_enq;
SET LOCAL ROLE aq_qp_go;
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$,
                'grant option + EXECUTE: aq_qp_go grants ENQUEUE to aq_qp_none');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_none')$$, '42501',
                 'permission denied to grant or revoke DEQUEUE on queue table "qp_qt"',
                 'aq_qp_go cannot grant DEQUEUE, which it does not hold (42501)');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ALL', 'qp_q', 'aq_qp_none')$$, '42501',
                 'permission denied to grant or revoke ALL on queue table "qp_qt"',
                 'aq_qp_go cannot grant ALL (42501)');
SELECT throws_ok($$SELECT aq.alter_queue('qp_q', max_retries => 1)$$, '42501', 'permission denied for function alter_queue',
                 'a grant option does not make aq_qp_go a manager (42501)');
RESET ROLE;
SET LOCAL ROLE aq_qp_none;
SELECT lives_ok($$SELECT aq.enqueue('qp_q', ROW('via grant option')::aq_qp_ot)$$,
                'aq_qp_none enqueues with the ENQUEUE aq_qp_go granted');
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('qp_q', NULL::aq_qp_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 'permission denied for table qp_qt', 'aq_qp_none still cannot dequeue');
RESET ROLE;
-- without grant option: 42501, even with EXECUTE
SET LOCAL ROLE aq_qp_enq;
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_mgr')$$, '42501',
                 'permission denied to grant or revoke ENQUEUE on queue table "qp_qt"',
                 'ENQUEUE without grant option: grant_queue_privilege(ENQUEUE) gives 42501');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$, '42501',
                 'permission denied to grant or revoke ENQUEUE on queue table "qp_qt"',
                 'ENQUEUE without grant option: revoke_queue_privilege(ENQUEUE) gives 42501');
RESET ROLE;
SELECT ok(NOT has_any_column_privilege('aq_qp_mgr', 'aq_qp_sch.qp_qt', 'INSERT')
          AND has_column_privilege('aq_qp_none', 'aq_qp_sch.qp_qt', 'user_data', 'INSERT'),
          'the refused grant and revoke changed nothing');
-- the grantor revokes what it granted
SET LOCAL ROLE aq_qp_go;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$,
                'aq_qp_go revokes the ENQUEUE it granted to aq_qp_none');
RESET ROLE;
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok($$SELECT aq.enqueue('qp_q', ROW('x')::aq_qp_ot)$$, '42501', 'permission denied for table qp_qt',
                 'after aq_qp_go''s revoke: enqueue gives 42501 again');
RESET ROLE;
SELECT ok(NOT has_any_column_privilege('aq_qp_none', 'aq_qp_sch.qp_qt', 'SELECT, INSERT, UPDATE')
          AND has_column_privilege('aq_qp_go', 'aq_qp_sch.qp_qt', 'user_data', 'INSERT WITH GRANT OPTION')
          AND has_column_privilege('aq_qp_go', 'aq_qp_sch.qp_qt', 'msgid', 'SELECT WITH GRANT OPTION'),
          'aq_qp_go''s revoke took the column-level INSERT and SELECT (msgid) it granted, and kept its own');
-- a grant option lets a role revoke only what it granted, and only the privileges it holds
SET LOCAL ROLE aq_qp_go;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_enq')$$,
                'aq_qp_go: revoke_queue_privilege(ENQUEUE, qp_q, aq_qp_enq), which the owner granted, runs');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('ALL', 'qp_q', 'aq_qp_all')$$, '42501',
                 'permission denied to grant or revoke ALL on queue table "qp_qt"',
                 'aq_qp_go (ENQUEUE with grant option only) cannot revoke ALL (42501)');
RESET ROLE;
SELECT ok(has_column_privilege('aq_qp_enq', 'aq_qp_sch.qp_qt', 'user_data', 'INSERT')
          AND has_column_privilege('aq_qp_enq', 'aq_qp_sch.qp_qt', 'msgid', 'SELECT')
          AND has_table_privilege('aq_qp_all', 'aq_qp_sch.qp_qt', 'SELECT, DELETE')
          AND has_column_privilege('aq_qp_all', 'aq_qp_sch.qp_qt', 'user_data', 'INSERT'),
          'aq_qp_go''s revokes left the owner''s grants to aq_qp_enq and aq_qp_all in place');
-- revoking the grantor's privilege cascades to its grantees
SET LOCAL ROLE aq_qp_go;
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$, 'aq_qp_go grants ENQUEUE to aq_qp_none again');
RESET ROLE;
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_go')$$, 'owner: revoke_queue_privilege(ENQUEUE, qp_q, aq_qp_go)');
RESET ROLE;
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok($$SELECT aq.enqueue('qp_q', ROW('x')::aq_qp_ot)$$, '42501', 'permission denied for table qp_qt',
                 'the owner''s revoke from aq_qp_go cascades: aq_qp_none gets 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_go;
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$, '42501',
                 'permission denied to grant or revoke ENQUEUE on queue table "qp_qt"',
                 'after the revoke aq_qp_go can grant no more (42501)');
RESET ROLE;
-- DEQUEUE with grant option
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.grant_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_go', grant_option => true)$$,
                'owner: grant_queue_privilege(DEQUEUE, qp_q, aq_qp_go, grant_option => true)');
RESET ROLE;
SET LOCAL ROLE aq_qp_go;
SELECT lives_ok($$SELECT aq.grant_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_none')$$, 'aq_qp_go grants DEQUEUE to aq_qp_none');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_none')$$, '42501',
                 'permission denied to grant or revoke ENQUEUE on queue table "qp_qt"',
                 'aq_qp_go (DEQUEUE with grant option only) cannot grant ENQUEUE (42501)');
RESET ROLE;
SET LOCAL ROLE aq_qp_none;
SELECT matches(pg_temp.qp_try($$SELECT (payload).message FROM aq.dequeue('qp_q', NULL::aq_qp_ot,
                                  aq.dequeue_options(navigation => 'first_message', wait => '0'))$$),
               '^filler [0-9]+$', 'aq_qp_none dequeues with the DEQUEUE aq_qp_go granted');
RESET ROLE;
SET LOCAL ROLE aq_qp_go;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_none')$$, 'aq_qp_go revokes DEQUEUE from aq_qp_none');
RESET ROLE;
SET LOCAL ROLE aq_qp_none;
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('qp_q', NULL::aq_qp_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 'permission denied for table qp_qt', 'after aq_qp_go''s revoke: dequeue gives 42501 again');
RESET ROLE;

------------------------------------------------------------------------------ after revoking, access is denied again

-- the owner revokes DEQUEUE from a role with ALL: it still enqueues (SELECT (msgid) is given back)
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ALL', 'qp_q', 'aq_qp_mix')$$, 'owner: grant_queue_privilege(ALL, qp_q, aq_qp_mix)');
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_mix')$$,
                'owner: revoke_queue_privilege(DEQUEUE, qp_q, aq_qp_mix)');
RESET ROLE;
SET LOCAL ROLE aq_qp_mix;
SELECT lives_ok($$SELECT aq.enqueue('qp_q', ROW('from mix')::aq_qp_ot)$$, 'ALL - DEQUEUE: enqueue still works');
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('qp_q', NULL::aq_qp_ot, aq.dequeue_options(wait => '0'))$$, '42501',
                 'permission denied for table qp_qt', 'ALL - DEQUEUE: dequeue gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_mix')$$,
                'owner: revoke_queue_privilege(ENQUEUE, qp_q, aq_qp_mix)');
RESET ROLE;

SET LOCAL ROLE aq_qp_mgr;
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_deq')$$, '42501',
                 'permission denied to grant or revoke DEQUEUE on queue table "qp_qt"',
                 'other manager: revoke_queue_privilege(DEQUEUE, qp_q, aq_qp_deq) gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_qp_owner;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'qp_q', 'aq_qp_enq')$$,
                'owner: revoke_queue_privilege(ENQUEUE, qp_q, aq_qp_enq)');
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'qp_q', 'aq_qp_deq')$$,
                'owner: revoke_queue_privilege(DEQUEUE, qp_q, aq_qp_deq)');
RESET ROLE;
SET LOCAL ROLE aq_qp_admin;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ALL', 'qp_q', 'aq_qp_all')$$,
                'admin: revoke_queue_privilege(ALL, qp_q, aq_qp_all), granted by the owner');
RESET ROLE;
SELECT ok(NOT has_any_column_privilege(r, 'aq_qp_sch.qp_qt', 'SELECT, INSERT, UPDATE')
          AND NOT has_table_privilege(r, 'aq_qp_sch.qp_qt', 'SELECT, INSERT, UPDATE, DELETE'),
          format('%s has no privilege left on the queue table', r))
  FROM unnest(ARRAY['aq_qp_enq', 'aq_qp_deq', 'aq_qp_all', 'aq_qp_mix']) AS r;

SET LOCAL ROLE aq_qp_enq;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('after revoking ENQUEUE: %s gives 42501', o.label))
  FROM qp_ops o ORDER BY o.n;
SELECT is(pg_temp.qp_sees('all_queues'), '', 'after revoking ENQUEUE: aq.all_queues lists nothing');
RESET ROLE;
SET LOCAL ROLE aq_qp_deq;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('after revoking DEQUEUE: %s gives 42501', o.label))
  FROM qp_ops o ORDER BY o.n;
SELECT throws_ok($$SELECT count(*) FROM aq_qp_sch."aq$qp_qt"$$, '42501', 'permission denied for table qp_qt',
                 'after revoking DEQUEUE: the AQ$ view gives 42501');
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('aq$_qp_qt_e', NULL::aq_qp_ot, aq.dequeue_options(dequeue_mode => 'browse', wait => '0'))$$,
                 '42501', 'permission denied for table qp_qt', 'after revoking DEQUEUE: dequeue from the exception queue gives 42501');
SELECT is(pg_temp.qp_sees('all_queues'), '', 'after revoking DEQUEUE: aq.all_queues lists nothing');
RESET ROLE;
SET LOCAL ROLE aq_qp_all;
SELECT throws_ok(o.sql, '42501', 'permission denied for table qp_qt', format('after revoking ALL: %s gives 42501', o.label))
  FROM qp_ops o ORDER BY o.n;
SELECT is(pg_temp.qp_sees('all_queues'), '', 'after revoking ALL: aq.all_queues lists nothing');
RESET ROLE;

------------------------------------------------------------------------------ the owner purges and drops its queue table

SET LOCAL ROLE aq_qp_owner;
SELECT matches(pg_temp.qp_try($$SELECT aq.purge_queue_table('qp_qt')$$), '^[1-9][0-9]*$',
               'owner: purge_queue_table(qp_qt) removes every message');
SELECT is(pg_temp.qp_try($$SELECT count(*) FROM aq_qp_sch.qp_qt$$), '0', 'owner: qp_qt is empty');
SELECT throws_ok($$SELECT aq.drop_queue_table('qp_qt')$$, '2BP01', NULL,
                 'owner: drop_queue_table(qp_qt) without force refuses while queues remain');
SELECT lives_ok($$SELECT aq.drop_queue_table('qp_qt', force => true)$$, 'owner: drop_queue_table(qp_qt, force => true)');
RESET ROLE;
SELECT ok(to_regclass('aq_qp_sch.qp_qt') IS NULL AND to_regclass('aq_qp_sch."aq$qp_qt"') IS NULL
          AND NOT EXISTS (SELECT FROM aq.queue_tables WHERE queue_table = 'qp_qt')
          AND NOT EXISTS (SELECT FROM aq.queues WHERE queue_name IN ('qp_q', 'qp_q2', 'aq$_qp_qt_e')),
          'qp_qt, its view, its queues and its catalog rows are gone');
SET LOCAL ROLE aq_qp_mgr;
SELECT lives_ok($$SELECT aq.drop_queue_table('mgr_qt')$$, 'other manager: drop_queue_table(mgr_qt), its own');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
