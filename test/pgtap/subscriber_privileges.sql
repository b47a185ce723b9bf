-- pgTAP: the privilege matrix of multi-consumer queues (aq 0.6.0, "Multi-consumer queues and subscribers"
-- and "Privileges").  A multi-consumer queue table created by a non-superuser OWNER; who may add, alter and
-- remove its subscribers (the owner, a MEMBER of the owner role, a superuser ADMIN; not a role with ENQUEUE
-- or DEQUEUE only, nor one without rights, nor another manager: 42501 with or without EXECUTE on the
-- subscriber functions); who may dequeue as a consumer (DEQUEUE, as any consumer, as in Oracle; refused again
-- after revoke_queue_privilege); that an enqueue needs only ENQUEUE (the fan-out into the delivery table
-- aq$_<qt>_i and the subscribers' rules run as the owner); who reads the subscriber view aq$<qt>_s, the
-- AQ$<qt> view and the catalog aq.subscribers; and that a hostile role writes neither aq.subscribers
-- (row-level security, column grants) nor the delivery table.
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.  Run as a superuser;
-- everything (roles included) is rolled back.
BEGIN;
SELECT plan(216);

SET LOCAL search_path = public;
SET LOCAL client_min_messages = warning;

------------------------------------------------------------------------------ roles, schemas, EXECUTE

CREATE ROLE aq_sp_none NOLOGIN;      -- no right at all
CREATE ROLE aq_sp_enq NOLOGIN;       -- ENQUEUE on sp_q
CREATE ROLE aq_sp_deq NOLOGIN;       -- DEQUEUE on sp_q
CREATE ROLE aq_sp_owner NOLOGIN;     -- EXECUTE on the admin functions + CREATE on aq_sp_sch; creates sp_qt
CREATE ROLE aq_sp_member NOLOGIN IN ROLE aq_sp_owner;  -- a member of the owner role (inherits its rights)
CREATE ROLE aq_sp_mgr NOLOGIN;       -- EXECUTE on the admin functions; owns sp_mqt, not sp_qt
CREATE ROLE aq_sp_admin NOLOGIN SUPERUSER;

CREATE TYPE public.aq_sp_ot AS (n integer, message text);
CREATE SCHEMA aq_sp_sch;             -- the owner's queue table lives here
GRANT USAGE ON SCHEMA aq_sp_sch TO PUBLIC;
GRANT CREATE ON SCHEMA aq_sp_sch TO aq_sp_owner;
CREATE SCHEMA aq_sp_msch;            -- the other manager's
GRANT USAGE ON SCHEMA aq_sp_msch TO PUBLIC;
GRANT CREATE ON SCHEMA aq_sp_msch TO aq_sp_mgr;

CREATE TEMP TABLE sp_admin_fns (sig text PRIMARY KEY);
INSERT INTO sp_admin_fns VALUES
    ('aq.create_queue_table(text,regtype,text,text,text,boolean,text,integer)'),
    ('aq.create_queue(text,text,integer,interval,interval,text,text)'),
    ('aq.start_queue(text,boolean,boolean)'),
    ('aq.add_subscriber(text,aq.agent,text,text,boolean,text)'),
    ('aq.alter_subscriber(text,aq.agent,text,text)'),
    ('aq.remove_subscriber(text,aq.agent)'),
    ('aq.grant_queue_privilege(text,text,text,boolean)'),
    ('aq.revoke_queue_privilege(text,text,text)');
DO $$
DECLARE s text;
BEGIN
    FOR s IN SELECT sig FROM sp_admin_fns LOOP
        EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO aq_sp_owner, aq_sp_mgr', s);
    END LOOP;
END $$;
CREATE TEMP VIEW sp_subscriber_fns (sig) AS VALUES
    ('aq.add_subscriber(text,aq.agent,text,text,boolean,text)'),
    ('aq.alter_subscriber(text,aq.agent,text,text)'),
    ('aq.remove_subscriber(text,aq.agent)');

SELECT is((SELECT count(*)::int FROM sp_subscriber_fns WHERE has_function_privilege(r.role, sig::regprocedure, 'EXECUTE')),
          r.n, format('%s has EXECUTE on %s of the 3 subscriber functions', r.role, r.n))
  FROM (VALUES (1, 'aq_sp_none', 0), (2, 'aq_sp_enq', 0), (3, 'aq_sp_deq', 0), (4, 'aq_sp_owner', 3),
               (5, 'aq_sp_member', 3), (6, 'aq_sp_mgr', 3), (7, 'aq_sp_admin', 3)) AS r(o, role, n)
 ORDER BY r.o;

-- a query's first column as text, or 'ERROR <sqlstate>: <message>' (a failing call fails its assertion
-- instead of aborting the script); runs as the current role
CREATE FUNCTION pg_temp.sp_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE result text;
BEGIN
    EXECUTE sql INTO result;
    RETURN coalesce(result, '<NULL>');
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;
-- the refusal of a queue operation: 42501 on the queue table or on its delivery table (which of the two
-- PostgreSQL checks first depends on the statement)
CREATE FUNCTION pg_temp.sp_denied() RETURNS text LANGUAGE sql AS $$
    SELECT '^ERROR 42501: permission denied for table (sp_qt|aq\$_sp_qt_i)$'
$$;

------------------------------------------------------------------------------ the owner creates its queue table

SET LOCAL ROLE aq_sp_owner;
SELECT lives_ok($$SELECT aq.create_queue_table('sp_qt', 'aq_sp_ot', queue_table_schema => 'aq_sp_sch', multiple_consumers => true)$$,
                'owner: create_queue_table(sp_qt, multiple_consumers => true)');
SELECT lives_ok($$SELECT aq.create_queue('sp_q', 'sp_qt'); SELECT aq.start_queue('sp_q');
                  SELECT aq.create_queue('sp_q2', 'sp_qt'); SELECT aq.start_queue('sp_q2')$$,
                'owner: creates and starts sp_q and sp_q2');
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q', aq.agent('alpha'))$$, 'owner: add_subscriber(sp_q, alpha)');
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q', aq.agent('beta'))$$, 'owner: add_subscriber(sp_q, beta)');
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q2', aq.agent('q2sub'))$$, 'owner: add_subscriber(sp_q2, q2sub)');
SELECT lives_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'sp_q', 'aq_sp_enq')$$,
                'owner: grant_queue_privilege(ENQUEUE, sp_q, aq_sp_enq)');
SELECT lives_ok($$SELECT aq.grant_queue_privilege('DEQUEUE', 'sp_q', 'aq_sp_deq')$$,
                'owner: grant_queue_privilege(DEQUEUE, sp_q, aq_sp_deq)');
-- a function only the owner may execute, for a rule (the fan-out evaluates rules as the owner)
CREATE FUNCTION aq_sp_sch.sp_is_big(n integer) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT n > 10';
REVOKE EXECUTE ON FUNCTION aq_sp_sch.sp_is_big(integer) FROM PUBLIC;
RESET ROLE;

SET LOCAL ROLE aq_sp_mgr;
SELECT lives_ok($$SELECT aq.create_queue_table('sp_mqt', 'aq_sp_ot', queue_table_schema => 'aq_sp_msch', multiple_consumers => true);
                  SELECT aq.create_queue('sp_mq', 'sp_mqt'); SELECT aq.start_queue('sp_mq');
                  SELECT aq.add_subscriber('sp_mq', aq.agent('m1'))$$,
                'other manager: creates its own multi-consumer queue table sp_mqt, queue sp_mq and subscriber m1');
RESET ROLE;

SELECT is((SELECT string_agg(relname || ':' || relowner::regrole::text, ',' ORDER BY relname COLLATE "C")
             FROM pg_class WHERE relnamespace = 'aq_sp_sch'::regnamespace AND relkind IN ('r', 'v')),
          'aq$_sp_qt_i:aq_sp_owner,aq$sp_qt:aq_sp_owner,aq$sp_qt_s:aq_sp_owner,sp_qt:aq_sp_owner',
          'the owner owns the queue table, its delivery table aq$_sp_qt_i and the views aq$sp_qt and aq$sp_qt_s');
SELECT is((SELECT delivery_relid FROM aq.queue_tables WHERE queue_table = 'sp_qt'), 'aq_sp_sch."aq$_sp_qt_i"'::regclass,
          'aq.queue_tables registers aq$_sp_qt_i as the delivery table of sp_qt');
SELECT ok(NOT has_table_privilege('public', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
          AND NOT has_any_column_privilege('public', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, INSERT, UPDATE'),
          'PUBLIC has no privilege on the delivery table');
SELECT ok(NOT has_table_privilege('aq_sp_enq', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE')
          AND NOT has_any_column_privilege('aq_sp_enq', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, INSERT, UPDATE'),
          'ENQUEUE gives no privilege on the delivery table');
SELECT ok(has_table_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, DELETE')
          AND has_column_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'retry_count', 'UPDATE')
          AND NOT has_any_column_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'INSERT')
          AND NOT has_column_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'consumer_name', 'UPDATE')
          AND NOT has_table_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'TRUNCATE'),
          'DEQUEUE gives SELECT, DELETE and UPDATE (retry_count) on the delivery table, nothing else');

------------------------------------------------------------------------------ 1. who manages subscribers

CREATE TEMP TABLE sp_sub_ops (n integer PRIMARY KEY, fn text NOT NULL, label text NOT NULL, sql text NOT NULL);
GRANT SELECT ON sp_sub_ops TO PUBLIC;
INSERT INTO sp_sub_ops VALUES
    (1, 'add_subscriber', 'add_subscriber(sp_q, intruder)', $$SELECT aq.add_subscriber('sp_q', aq.agent('intruder'))$$),
    (2, 'alter_subscriber', 'alter_subscriber(sp_q, beta, NULL)', $$SELECT aq.alter_subscriber('sp_q', aq.agent('beta'), NULL)$$),
    (3, 'remove_subscriber', 'remove_subscriber(sp_q, alpha)', $$SELECT aq.remove_subscriber('sp_q', aq.agent('alpha'))$$);

-- the superuser gives beta a rule first (so that a refused alter_subscriber would show)
SET LOCAL ROLE aq_sp_admin;
SELECT lives_ok($$SELECT aq.alter_subscriber('sp_q', aq.agent('beta'), 'tab.user_data.n > 10')$$,
                'admin: alter_subscriber(sp_q, beta, rule) of the owner''s queue');
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q', aq.agent('big'), rule => 'aq_sp_sch.sp_is_big(tab.user_data.n)')$$,
                'admin: add_subscriber(sp_q, big) with a rule calling a function only the owner may execute');
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q', aq.agent('by_admin')); SELECT aq.remove_subscriber('sp_q', aq.agent('by_admin'))$$,
                'admin: add_subscriber and remove_subscriber(sp_q, by_admin)');
RESET ROLE;

CREATE FUNCTION pg_temp.sp_subscribers(queue_name text) RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(s.consumer_name || coalesce('[' || s.rule || ']', ''), ',' ORDER BY s.consumer_name COLLATE "C"), '')
      FROM aq.subscribers s JOIN aq.queues q USING (queue_id) WHERE q.queue_name = sp_subscribers.queue_name
$$;
SELECT is(pg_temp.sp_subscribers('sp_q'), 'alpha,beta[tab.user_data.n > 10],big[aq_sp_sch.sp_is_big(tab.user_data.n)]',
          'sp_q has the subscribers alpha, beta and big, with their rules');

-- without EXECUTE on the subscriber functions (queue privileges do not help)
SET LOCAL ROLE aq_sp_none;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('no privilege: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_enq;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('ENQUEUE: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_deq;
SELECT throws_ok(o.sql, '42501', 'permission denied for function ' || o.fn, format('DEQUEUE: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
-- with EXECUTE, on someone else's queue table
SET LOCAL ROLE aq_sp_mgr;
SELECT throws_ok(o.sql, '42501', 'must be owner of queue table "sp_qt"', format('other manager: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
-- EXECUTE alone does not make a role a manager: the ownership check refuses it
GRANT EXECUTE ON FUNCTION aq.add_subscriber(text, aq.agent, text, text, boolean, text), aq.alter_subscriber(text, aq.agent, text, text),
                          aq.remove_subscriber(text, aq.agent) TO aq_sp_none, aq_sp_enq, aq_sp_deq;
SET LOCAL ROLE aq_sp_none;
SELECT throws_ok(o.sql, '42501', 'must be owner of queue table "sp_qt"', format('no privilege + EXECUTE: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_enq;
SELECT throws_ok(o.sql, '42501', 'must be owner of queue table "sp_qt"', format('ENQUEUE + EXECUTE: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_deq;
SELECT throws_ok(o.sql, '42501', 'must be owner of queue table "sp_qt"', format('DEQUEUE + EXECUTE: %s gives 42501', o.label))
  FROM sp_sub_ops o ORDER BY o.n;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION aq.add_subscriber(text, aq.agent, text, text, boolean, text), aq.alter_subscriber(text, aq.agent, text, text),
                           aq.remove_subscriber(text, aq.agent) FROM aq_sp_none, aq_sp_enq, aq_sp_deq;
SELECT is(pg_temp.sp_subscribers('sp_q'), 'alpha,beta[tab.user_data.n > 10],big[aq_sp_sch.sp_is_big(tab.user_data.n)]',
          'the refused subscriber calls changed no subscriber of sp_q');

-- the owner manages the subscribers of its queues, and only those
SET LOCAL ROLE aq_sp_owner;
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q', aq.agent('by_owner'))$$, 'owner: add_subscriber(sp_q, by_owner)');
SELECT lives_ok($$SELECT aq.alter_subscriber('sp_q', aq.agent('by_owner'), NULL)$$, 'owner: alter_subscriber(sp_q, by_owner, NULL)');
SELECT is(pg_temp.sp_subscribers('sp_q'), 'alpha,beta[tab.user_data.n > 10],big[aq_sp_sch.sp_is_big(tab.user_data.n)],by_owner',
          'owner: by_owner is a subscriber of sp_q');
SELECT lives_ok($$SELECT aq.remove_subscriber('sp_q', aq.agent('by_owner'))$$, 'owner: remove_subscriber(sp_q, by_owner)');
SELECT throws_ok($$SELECT aq.add_subscriber('sp_mq', aq.agent('intruder'))$$, '42501', 'must be owner of queue table "sp_mqt"',
                 'owner: add_subscriber on the other manager''s queue gives 42501');
SELECT throws_ok($$SELECT aq.remove_subscriber('sp_mq', aq.agent('m1'))$$, '42501', 'must be owner of queue table "sp_mqt"',
                 'owner: remove_subscriber on the other manager''s queue gives 42501');
-- A rule is checked as the caller (aq._check_rule): an owner who is not a superuser sets rules too.
-- Each test undoes its own change.
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q2', aq.agent('ruled'), rule => 'tab.user_data.n > 10');
                  SELECT aq.remove_subscriber('sp_q2', aq.agent('ruled'))$$,
                'owner: add_subscriber(sp_q2, ruled, rule => ...) works');
SELECT lives_ok($$SELECT aq.alter_subscriber('sp_q2', aq.agent('q2sub'), 'priority > 0');
                  SELECT aq.alter_subscriber('sp_q2', aq.agent('q2sub'), NULL)$$,
                'owner: alter_subscriber(sp_q2, q2sub, rule) works');
RESET ROLE;

-- a member of the owner role manages them as the owner does
SET LOCAL ROLE aq_sp_member;
SELECT lives_ok($$SELECT aq.add_subscriber('sp_q', aq.agent('by_member'))$$, 'member of the owner: add_subscriber(sp_q, by_member)');
SELECT lives_ok($$SELECT aq.alter_subscriber('sp_q', aq.agent('by_member'), NULL)$$,
                'member of the owner: alter_subscriber(sp_q, by_member, NULL)');
SELECT lives_ok($$SELECT aq.remove_subscriber('sp_q', aq.agent('by_member'))$$, 'member of the owner: remove_subscriber(sp_q, by_member)');
SELECT throws_ok($$SELECT aq.add_subscriber('sp_mq', aq.agent('intruder'))$$, '42501', 'must be owner of queue table "sp_mqt"',
                 'member of the owner: add_subscriber on the other manager''s queue gives 42501');
RESET ROLE;
SELECT is(pg_temp.sp_subscribers('sp_q'), 'alpha,beta[tab.user_data.n > 10],big[aq_sp_sch.sp_is_big(tab.user_data.n)]',
          'the subscribers of sp_q are back to alpha, beta and big');
SELECT is(pg_temp.sp_subscribers('sp_q2'), 'q2sub', 'sp_q2 has its subscriber q2sub, without a rule');
SELECT is(pg_temp.sp_subscribers('sp_mq'), 'm1', 'the other manager''s sp_mq still has m1');

------------------------------------------------------------------------------ 3. enqueue needs only ENQUEUE

CREATE TEMP TABLE sp_ids (k text PRIMARY KEY, id bigint NOT NULL);
GRANT SELECT, INSERT ON sp_ids TO PUBLIC;

SET LOCAL ROLE aq_sp_enq;
SELECT throws_ok($$SELECT aq_sp_sch.sp_is_big(20)$$, '42501', 'permission denied for function sp_is_big',
                 'ENQUEUE: the enqueuer cannot execute the function of big''s rule itself');
SELECT lives_ok($$INSERT INTO sp_ids SELECT 'big', aq.enqueue('sp_q', ROW(20, 'big one')::aq_sp_ot)$$,
                'ENQUEUE: enqueue(sp_q, n => 20)');
SELECT lives_ok($$INSERT INTO sp_ids SELECT 'small', aq.enqueue('sp_q', ROW(5, 'small one')::aq_sp_ot)$$,
                'ENQUEUE: enqueue(sp_q, n => 5)');
SELECT lives_ok($$INSERT INTO sp_ids SELECT 'arr' || o, id FROM unnest(aq.enqueue_array('sp_q',
                      ARRAY[ROW(1, 'arr one')::aq_sp_ot, ROW(2, 'arr two')::aq_sp_ot])) WITH ORDINALITY AS a(id, o)$$,
                'ENQUEUE: enqueue_array(sp_q) of 2 messages');
SELECT lives_ok($$INSERT INTO sp_ids SELECT 'outsider', aq.enqueue('sp_q', ROW(3, 'to outsider')::aq_sp_ot,
                      aq.message_properties(recipient_list => ARRAY[aq.agent('outsider')]))$$,
                'ENQUEUE: enqueue(sp_q) with a recipient_list naming a consumer that is not subscribed');
SELECT is(pg_temp.sp_try($$SELECT count(*) FROM aq_sp_sch."aq$_sp_qt_i"$$), 'ERROR 42501: permission denied for table aq$_sp_qt_i',
          'ENQUEUE: the enqueuer still cannot read the delivery table it wrote through');
SELECT lives_ok($$INSERT INTO sp_ids SELECT 'q2', aq.enqueue('sp_q2', ROW(7, 'in q2')::aq_sp_ot)$$,
                'ENQUEUE: the grant is on the queue table, so enqueue(sp_q2) works too');
RESET ROLE;

-- the fan-out: every subscriber whose rule matches (big's rule ran as the owner), or the recipient_list
SELECT results_eq($$SELECT i.k, string_agg(d.consumer_name::text COLLATE "default", ',' ORDER BY d.consumer_name COLLATE "C")
                      FROM sp_ids i JOIN aq_sp_sch."aq$_sp_qt_i" d ON d.msgid = i.id
                     GROUP BY i.k ORDER BY i.k COLLATE "C"$$,
                  $$VALUES ('arr1', 'alpha'), ('arr2', 'alpha'), ('big', 'alpha,beta,big'), ('outsider', 'outsider'),
                           ('q2', 'q2sub'), ('small', 'alpha')$$,
                  'the enqueues reached the matching subscribers of their queue, and the recipient_list its consumer');
SELECT is((SELECT string_agg(DISTINCT enq_uid, ',') FROM aq_sp_sch.sp_qt WHERE msgid IN (SELECT id FROM sp_ids)), 'aq_sp_enq',
          'the messages are stored with enq_uid aq_sp_enq (the enqueuer, not the owner who wrote the deliveries)');

-- without ENQUEUE: 42501, and nothing is delivered
SET LOCAL ROLE aq_sp_none;
SELECT throws_ok($$SELECT aq.enqueue('sp_q', ROW(50, 'x')::aq_sp_ot)$$, '42501', 'permission denied for table sp_qt',
                 'no privilege: enqueue gives 42501');
SELECT throws_ok($$SELECT aq.enqueue_array('sp_q', ARRAY[ROW(50, 'x')::aq_sp_ot])$$, '42501', 'permission denied for table sp_qt',
                 'no privilege: enqueue_array gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_sp_deq;
SELECT throws_ok($$SELECT aq.enqueue('sp_q', ROW(50, 'x')::aq_sp_ot)$$, '42501', 'permission denied for table sp_qt',
                 'DEQUEUE only: enqueue gives 42501');
SELECT throws_ok($$SELECT aq.enqueue('sp_q', ROW(50, 'x')::aq_sp_ot, aq.message_properties(recipient_list => ARRAY[aq.agent('alpha')]))$$,
                 '42501', 'permission denied for table sp_qt', 'DEQUEUE only: enqueue with a recipient_list gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_sp_mgr;
SELECT throws_ok($$SELECT aq.enqueue('sp_q', ROW(50, 'x')::aq_sp_ot)$$, '42501', 'permission denied for table sp_qt',
                 'other manager: enqueue gives 42501');
RESET ROLE;
SELECT is((SELECT count(*)::int FROM aq_sp_sch.sp_qt), 6, 'the refused enqueues stored nothing: sp_qt holds the 6 messages');
SELECT is((SELECT count(*)::int FROM aq_sp_sch."aq$_sp_qt_i"), 8, 'the delivery table holds their 8 deliveries');

------------------------------------------------------------------------------ 2. who dequeues as a consumer

-- In order: listen, remove, browse, locked, dequeue_array, and remove as a consumer that is not
-- subscribed (the message's recipient).  Every dequeue starts from the head (first_message).
CREATE TEMP TABLE sp_deq_ops (n integer PRIMARY KEY, label text NOT NULL, sql text NOT NULL, expected text NOT NULL);
GRANT SELECT ON sp_deq_ops TO PUBLIC;
INSERT INTO sp_deq_ops VALUES
    (1, 'listen as alpha', $$SELECT aq.listen(ARRAY[aq.agent('alpha', 'sp_q')], 0)::text$$, '(alpha,sp_q,0)'),
    (2, 'dequeue (remove) as alpha',
     $$SELECT (payload).message FROM aq.dequeue('sp_q', NULL::aq_sp_ot,
           aq.dequeue_options(consumer_name => 'alpha', navigation => 'first_message', wait => 0))$$, 'big one'),
    (3, 'dequeue (browse) as beta',
     $$SELECT (payload).message FROM aq.dequeue('sp_q', NULL::aq_sp_ot,
           aq.dequeue_options(consumer_name => 'beta', dequeue_mode => 'browse', navigation => 'first_message', wait => 0))$$, 'big one'),
    (4, 'dequeue (locked) as big',
     $$SELECT (payload).message FROM aq.dequeue('sp_q', NULL::aq_sp_ot,
           aq.dequeue_options(consumer_name => 'big', dequeue_mode => 'locked', navigation => 'first_message', wait => 0))$$, 'big one'),
    (5, 'dequeue_array (remove) as alpha',
     $$SELECT string_agg((payload).message, ',' ORDER BY msgid) FROM aq.dequeue_array('sp_q', NULL::aq_sp_ot, 10,
           aq.dequeue_options(consumer_name => 'alpha', navigation => 'first_message', wait => 0))$$, 'small one,arr one,arr two'),
    (6, 'dequeue (remove) as outsider, a recipient that is not subscribed',
     $$SELECT (payload).message FROM aq.dequeue('sp_q', NULL::aq_sp_ot,
           aq.dequeue_options(consumer_name => 'outsider', navigation => 'first_message', wait => 0))$$, 'to outsider');

-- the deliveries left, as the superuser
CREATE FUNCTION pg_temp.sp_deliveries() RETURNS text LANGUAGE sql AS $$
    SELECT coalesce(string_agg(i.k || ':' || d.consumer_name, ',' ORDER BY i.k COLLATE "C", d.consumer_name COLLATE "C"), '')
      FROM sp_ids i JOIN aq_sp_sch."aq$_sp_qt_i" d ON d.msgid = i.id
$$;
SELECT is(pg_temp.sp_deliveries(),
          'arr1:alpha,arr2:alpha,big:alpha,big:beta,big:big,outsider:outsider,q2:q2sub,small:alpha',
          'before the dequeues: every delivery is there');

SET LOCAL ROLE aq_sp_none;
SELECT matches(pg_temp.sp_try(o.sql), pg_temp.sp_denied(), format('no privilege: %s gives 42501', o.label))
  FROM sp_deq_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_enq;
SELECT matches(pg_temp.sp_try(o.sql), pg_temp.sp_denied(), format('ENQUEUE only: %s gives 42501', o.label))
  FROM sp_deq_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_mgr;
SELECT matches(pg_temp.sp_try(o.sql), pg_temp.sp_denied(), format('other manager: %s gives 42501', o.label))
  FROM sp_deq_ops o ORDER BY o.n;
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(),
          'arr1:alpha,arr2:alpha,big:alpha,big:beta,big:big,outsider:outsider,q2:q2sub,small:alpha',
          'the refused dequeues took no delivery');

-- DEQUEUE: as any consumer (Oracle's behaviour)
SET LOCAL ROLE aq_sp_deq;
SELECT is(pg_temp.sp_try(o.sql), o.expected, format('DEQUEUE: %s returns %s', o.label, o.expected))
  FROM sp_deq_ops o ORDER BY o.n;
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('sp_q', NULL::aq_sp_ot, aq.dequeue_options(consumer_name => 'nobody', wait => 0))$$,
                 'QA228', NULL, 'DEQUEUE: a consumer without messages finds none (QA228), not a privilege error');
SELECT throws_ok($$SELECT msgid FROM aq.dequeue('sp_q', NULL::aq_sp_ot, aq.dequeue_options(wait => 0))$$,
                 '22023', NULL, 'DEQUEUE: a dequeue of a multi-consumer queue still names its consumer (22023)');
SELECT is(pg_temp.sp_try($$SELECT (payload).message FROM aq.dequeue('sp_q2', NULL::aq_sp_ot,
                             aq.dequeue_options(consumer_name => 'q2sub', dequeue_mode => 'browse', navigation => 'first_message', wait => 0))$$),
          'in q2', 'DEQUEUE: the grant is on the queue table, so it browses sp_q2 as q2sub too');
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(), 'big:beta,big:big,q2:q2sub',
          'DEQUEUE: the remove dequeues took their deliveries, browse and locked left theirs');

-- the owner, a member of the owner and a superuser dequeue without a grant
SET LOCAL ROLE aq_sp_owner;
SELECT is(pg_temp.sp_try($$SELECT (payload).message FROM aq.dequeue('sp_q', NULL::aq_sp_ot,
                             aq.dequeue_options(consumer_name => 'beta', navigation => 'first_message', wait => 0))$$),
          'big one', 'owner: dequeue (remove) as beta');
RESET ROLE;
SET LOCAL ROLE aq_sp_member;
SELECT is(pg_temp.sp_try($$SELECT (payload).message FROM aq.dequeue('sp_q', NULL::aq_sp_ot,
                             aq.dequeue_options(consumer_name => 'big', navigation => 'first_message', wait => 0))$$),
          'big one', 'member of the owner: dequeue (remove) as big');
RESET ROLE;
SET LOCAL ROLE aq_sp_admin;
SELECT is(pg_temp.sp_try($$SELECT (payload).message FROM aq.dequeue('sp_q2', NULL::aq_sp_ot,
                             aq.dequeue_options(consumer_name => 'q2sub', dequeue_mode => 'browse', navigation => 'first_message', wait => 0))$$),
          'in q2', 'admin: dequeue (browse) of sp_q2 as q2sub');
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(), 'q2:q2sub', 'only q2''s delivery is left');

-- new messages for the rest (the enqueuer still has ENQUEUE)
SET LOCAL ROLE aq_sp_enq;
SELECT lives_ok($$INSERT INTO sp_ids SELECT 'big2', aq.enqueue('sp_q', ROW(30, 'big two')::aq_sp_ot)$$,
                'ENQUEUE: enqueue(sp_q, n => 30)');
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(), 'big2:alpha,big2:beta,big2:big,q2:q2sub', 'big2 reached alpha, beta and big');

------------------------------------------------------------------------------ 4. who reads the subscribers

SELECT ok((SELECT 'security_invoker=true' = ANY (reloptions) FROM pg_class WHERE oid = 'aq_sp_sch."aq$sp_qt_s"'::regclass),
          'aq_sp_sch."aq$sp_qt_s" has security_invoker = true');
SELECT ok(has_table_privilege('public', 'aq_sp_sch."aq$sp_qt_s"', 'SELECT')
          AND NOT has_table_privilege('public', 'aq_sp_sch."aq$sp_qt_s"', 'INSERT, UPDATE, DELETE, TRUNCATE'),
          'PUBLIC has SELECT, and only SELECT, on aq_sp_sch."aq$sp_qt_s"');
SELECT ok((SELECT relrowsecurity FROM pg_class WHERE oid = 'aq.subscribers'::regclass), 'aq.subscribers has row-level security');
SELECT policies_are('aq', 'subscribers', ARRAY['queue_users_read', 'owner_subscribes', 'owner_alters', 'owner_deletes'],
                    'aq.subscribers has the policies queue_users_read, owner_subscribes, owner_alters, owner_deletes');

-- the subscriber view: the subscribers of sp_qt's queues (not sp_mqt's), for whoever may read the deliveries
-- and the catalog aq.subscribers: the subscribers of the queues the role may use (enqueue into,
-- dequeue from, or manage: policy queue_users_read), nobody else's
CREATE TEMP TABLE sp_view_expected (o integer PRIMARY KEY, role text NOT NULL, label text NOT NULL, view_s text NOT NULL,
                                    view_m text NOT NULL, catalog text NOT NULL);
GRANT SELECT ON sp_view_expected TO PUBLIC;
INSERT INTO sp_view_expected VALUES
    (1, 'aq_sp_none', 'no privilege', 'ERROR 42501: permission denied for table aq$_sp_qt_i', 'ERROR 42501: permission denied for table aq$_sp_qt_i',
     '<NULL>'),
    (2, 'aq_sp_enq', 'ENQUEUE only', 'ERROR 42501: permission denied for table aq$_sp_qt_i', 'ERROR 42501: permission denied for table aq$_sp_qt_i',
     'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub'),
    (3, 'aq_sp_deq', 'DEQUEUE', 'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub', 'alpha,beta,big,q2sub',
     'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub'),
    (4, 'aq_sp_owner', 'owner', 'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub', 'alpha,beta,big,q2sub',
     'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub'),
    (5, 'aq_sp_member', 'member of the owner', 'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub', 'alpha,beta,big,q2sub',
     'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub'),
    (6, 'aq_sp_mgr', 'other manager', 'ERROR 42501: permission denied for table aq$_sp_qt_i', 'ERROR 42501: permission denied for table aq$_sp_qt_i',
     'sp_mq:m1'),
    (7, 'aq_sp_admin', 'admin', 'sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub', 'alpha,beta,big,q2sub',
     'sp_mq:m1,sp_q:alpha,sp_q:beta,sp_q:big,sp_q2:q2sub');
CREATE FUNCTION pg_temp.sp_reads() RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE e sp_view_expected;
BEGIN
    SELECT * INTO e FROM sp_view_expected WHERE role = current_user::text;
    RETURN NEXT is(pg_temp.sp_try($q$SELECT string_agg(queue || ':' || name, ',' ORDER BY queue COLLATE "C", name COLLATE "C")
                                      FROM aq_sp_sch."aq$sp_qt_s"$q$), e.view_s,
                   format('%s: aq$sp_qt_s gives %s', e.label, e.view_s));
    RETURN NEXT is(pg_temp.sp_try($q$SELECT string_agg(DISTINCT consumer_name, ',' ORDER BY consumer_name) FROM aq_sp_sch."aq$sp_qt"$q$),
                   e.view_m, format('%s: the AQ$ view aq$sp_qt gives %s', e.label, e.view_m));
    -- Privileges: the catalog once showed every queue's subscribers, names and rules, to every role.
    RETURN NEXT is(pg_temp.sp_try($q$SELECT string_agg(q.queue_name || ':' || s.consumer_name, ',' ORDER BY q.queue_name COLLATE "C", s.consumer_name COLLATE "C")
                                      FROM aq.subscribers s JOIN aq.queues q USING (queue_id)
                                     WHERE q.queue_name IN ('sp_q', 'sp_q2', 'sp_mq')$q$),
                   e.catalog, format('%s: aq.subscribers shows %s (queue_users_read)', e.label, e.catalog));
END $$;
GRANT EXECUTE ON FUNCTION pg_temp.sp_reads() TO PUBLIC;
SET LOCAL ROLE aq_sp_none;   SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_enq;    SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_deq;    SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_owner;  SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_member; SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_mgr;    SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_admin;  SELECT pg_temp.sp_reads(); RESET ROLE;
SET LOCAL ROLE aq_sp_deq;
SELECT is(pg_temp.sp_try($$SELECT count(*) FROM aq_sp_msch."aq$sp_mqt_s"$$), 'ERROR 42501: permission denied for table aq$_sp_mqt_i',
          'DEQUEUE on sp_qt: the subscriber view of the other manager''s queue table gives 42501');
RESET ROLE;

-- Privileges: aq._check_rule, executable by every role, opened and locked any table by OID for
-- whoever called it.  Now only a role that manages the table may check a rule on it.
SET LOCAL ROLE aq_sp_none;
SELECT is(pg_temp.sp_try($$SELECT aq._check_rule('aq_sp_sch.sp_qt'::regclass, 'true')::text$$),
          'ERROR 42501: permission denied to check a rule on table sp_qt',
          'no privilege: aq._check_rule on sp_qt gives 42501');
SELECT is(pg_temp.sp_try($$SELECT aq._check_rule('pg_catalog.pg_authid'::regclass, 'true')::text$$),
          'ERROR 42501: permission denied to check a rule on table pg_authid',
          'no privilege: aq._check_rule on a catalog it cannot read gives 42501');
RESET ROLE;
SET LOCAL ROLE aq_sp_owner;
SELECT is(pg_temp.sp_try($$SELECT aq._check_rule('aq_sp_sch.sp_qt'::regclass, 'priority > 0')::text$$), '',
          'owner: aq._check_rule on its own queue table works');
RESET ROLE;

------------------------------------------------------------------------------ 5. hostile writes

-- aq.subscribers: a role that does not manage sp_q inserts, alters and deletes none of its rows
CREATE TEMP TABLE sp_cat_ops (n integer PRIMARY KEY, label text NOT NULL, sql text NOT NULL, errmsg text);
GRANT SELECT ON sp_cat_ops TO PUBLIC;
INSERT INTO sp_cat_ops VALUES
    (1, 'UPDATE of the rule of sp_q''s alpha in aq.subscribers',
     $$WITH w AS (UPDATE aq.subscribers SET rule = 'false' WHERE consumer_name = 'alpha' RETURNING 1) SELECT count(*) FROM w$$, NULL),
    (2, 'DELETE of sp_q''s subscribers from aq.subscribers',
     $$WITH w AS (DELETE FROM aq.subscribers WHERE queue_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'sp_q') RETURNING 1)
       SELECT count(*) FROM w$$, NULL),
    (3, 'INSERT of a subscriber of sp_q into aq.subscribers',
     $$INSERT INTO aq.subscribers (queue_id, consumer_name) SELECT queue_id, 'spy' FROM aq.queues WHERE queue_name = 'sp_q'$$,
     'new row violates row-level security policy for table "subscribers"'),
    (4, 'UPDATE of queue_id in aq.subscribers (moving a subscriber)',
     $$UPDATE aq.subscribers SET queue_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'sp_q2') WHERE consumer_name = 'alpha'$$,
     'permission denied for table subscribers'),
    (5, 'UPDATE of consumer_name in aq.subscribers',
     $$UPDATE aq.subscribers SET consumer_name = 'spy' WHERE consumer_name = 'alpha'$$, 'permission denied for table subscribers'),
    (6, 'TRUNCATE of aq.subscribers', $$TRUNCATE aq.subscribers$$, 'permission denied for table subscribers');

SET LOCAL ROLE aq_sp_none;
SELECT is(pg_temp.sp_try(o.sql), '0', format('no privilege: %s changes no row', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('no privilege: %s gives 42501', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_enq;
SELECT is(pg_temp.sp_try(o.sql), '0', format('ENQUEUE: %s changes no row', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('ENQUEUE: %s gives 42501', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_deq;
SELECT is(pg_temp.sp_try(o.sql), '0', format('DEQUEUE: %s changes no row', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('DEQUEUE: %s gives 42501', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_mgr;
SELECT is(pg_temp.sp_try(o.sql), '0', format('other manager: %s changes no row', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NULL ORDER BY o.n;
SELECT throws_ok(o.sql, '42501', o.errmsg, format('other manager: %s gives 42501', o.label)) FROM sp_cat_ops o WHERE o.errmsg IS NOT NULL ORDER BY o.n;
-- it writes the rows of its own queue, and cannot move them into the owner's
SELECT is(pg_temp.sp_try($$WITH w AS (INSERT INTO aq.subscribers (queue_id, consumer_name)
                                       SELECT queue_id, 'm2' FROM aq.queues WHERE queue_name = 'sp_mq' RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'other manager: INSERT of a subscriber of its own queue sp_mq works (it may run add_subscriber)');
SELECT throws_ok($$UPDATE aq.subscribers SET queue_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'sp_q') WHERE consumer_name = 'm2'$$,
                 '42501', 'permission denied for table subscribers',
                 'other manager: moving its own subscriber into the owner''s queue gives 42501 (queue_id is not updatable)');
SELECT is(pg_temp.sp_try($$WITH w AS (DELETE FROM aq.subscribers WHERE consumer_name IN ('m2', 'alpha') RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'other manager: DELETE removes its own m2, not the owner''s alpha');
RESET ROLE;
SELECT is(pg_temp.sp_subscribers('sp_q'), 'alpha,beta[tab.user_data.n > 10],big[aq_sp_sch.sp_is_big(tab.user_data.n)]',
          'the hostile catalog writes changed no subscriber of sp_q');
SELECT is(pg_temp.sp_subscribers('sp_q2'), 'q2sub', 'nor of sp_q2');

-- the owner may write its own rows directly only while it may run add_subscriber
REVOKE EXECUTE ON FUNCTION aq.add_subscriber(text, aq.agent, text, text, boolean, text) FROM aq_sp_owner;
SET LOCAL ROLE aq_sp_owner;
SELECT throws_ok($$INSERT INTO aq.subscribers (queue_id, consumer_name) SELECT queue_id, 'direct' FROM aq.queues WHERE queue_name = 'sp_q'$$,
                 '42501', 'new row violates row-level security policy for table "subscribers"',
                 'owner without EXECUTE on add_subscriber: INSERT of a subscriber of its own queue gives 42501');
RESET ROLE;
GRANT EXECUTE ON FUNCTION aq.add_subscriber(text, aq.agent, text, text, boolean, text) TO aq_sp_owner;
SET LOCAL ROLE aq_sp_owner;
SELECT is(pg_temp.sp_try($$WITH w AS (INSERT INTO aq.subscribers (queue_id, consumer_name)
                                       SELECT queue_id, 'direct' FROM aq.queues WHERE queue_name = 'sp_q' RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'owner with EXECUTE on add_subscriber: INSERT of a subscriber of its own queue works');
SELECT is(pg_temp.sp_try($$WITH w AS (DELETE FROM aq.subscribers WHERE consumer_name IN ('direct', 'm1') RETURNING 1) SELECT count(*) FROM w$$),
          '1', 'owner: DELETE removes its own direct, not the other manager''s m1');
RESET ROLE;

-- the delivery table: only the owner (through the fan-out) writes it; DEQUEUE may only consume
CREATE TEMP TABLE sp_del_ops (n integer PRIMARY KEY, label text NOT NULL, sql text NOT NULL, deq boolean NOT NULL);
GRANT SELECT ON sp_del_ops TO PUBLIC;
INSERT INTO sp_del_ops VALUES
    (1, 'INSERT of a delivery row for spy',
     $$INSERT INTO aq_sp_sch."aq$_sp_qt_i" (msgid, consumer_name, q_id, priority, enq_time)
       SELECT i.id, 'spy', q.queue_id, 1, now() FROM sp_ids i, aq.queues q WHERE i.k = 'big2' AND q.queue_name = 'sp_q'$$, true),
    (2, 'UPDATE of consumer_name (taking another consumer''s delivery)',
     $$UPDATE aq_sp_sch."aq$_sp_qt_i" SET consumer_name = 'spy' WHERE consumer_name = 'alpha'$$, true),
    (3, 'UPDATE of user_data (rewriting a delivered message)',
     $$UPDATE aq_sp_sch."aq$_sp_qt_i" SET user_data = ROW(0, 'forged')::aq_sp_ot WHERE consumer_name = 'alpha'$$, true),
    (4, 'UPDATE of q_id and delay', $$UPDATE aq_sp_sch."aq$_sp_qt_i" SET q_id = 0, delay = now() + interval '1 day'$$, true),
    (5, 'TRUNCATE', $$TRUNCATE aq_sp_sch."aq$_sp_qt_i"$$, true),
    (6, 'DELETE', $$DELETE FROM aq_sp_sch."aq$_sp_qt_i"$$, false),
    (7, 'SELECT', $$SELECT count(*) FROM aq_sp_sch."aq$_sp_qt_i"$$, false);

SET LOCAL ROLE aq_sp_none;
SELECT throws_ok(o.sql, '42501', 'permission denied for table aq$_sp_qt_i', format('no privilege: %s on the delivery table gives 42501', o.label))
  FROM sp_del_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_enq;
SELECT throws_ok(o.sql, '42501', 'permission denied for table aq$_sp_qt_i', format('ENQUEUE: %s on the delivery table gives 42501', o.label))
  FROM sp_del_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_mgr;
SELECT throws_ok(o.sql, '42501', 'permission denied for table aq$_sp_qt_i', format('other manager: %s on the delivery table gives 42501', o.label))
  FROM sp_del_ops o ORDER BY o.n;
RESET ROLE;
SET LOCAL ROLE aq_sp_deq;
SELECT throws_ok(o.sql, '42501', 'permission denied for table aq$_sp_qt_i', format('DEQUEUE: %s on the delivery table gives 42501', o.label))
  FROM sp_del_ops o WHERE o.deq ORDER BY o.n;
RESET ROLE;
SELECT results_eq($$SELECT i.k, d.consumer_name::text COLLATE "default", d.q_id = q.queue_id, d.delay IS NULL, d.user_data IS NULL
                      FROM sp_ids i JOIN aq_sp_sch."aq$_sp_qt_i" d ON d.msgid = i.id JOIN aq.queues q ON q.queue_name = 'sp_q'
                     WHERE i.k = 'big2' ORDER BY d.consumer_name COLLATE "C"$$,
                  $$VALUES ('big2', 'alpha', true, true, true), ('big2', 'beta', true, true, true), ('big2', 'big', true, true, true)$$,
                  'the hostile writes changed no delivery of big2');

------------------------------------------------------------------------------ removing a subscriber, revoking DEQUEUE

SET LOCAL ROLE aq_sp_owner;
SELECT lives_ok($$SELECT aq.remove_subscriber('sp_q', aq.agent('big'))$$, 'owner: remove_subscriber(sp_q, big)');
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(), 'big2:alpha,big2:beta,q2:q2sub',
          'remove_subscriber took big''s waiting delivery; the message stays for alpha and beta');

SET LOCAL ROLE aq_sp_owner;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('DEQUEUE', 'sp_q', 'aq_sp_deq')$$, 'owner: revoke_queue_privilege(DEQUEUE, sp_q, aq_sp_deq)');
RESET ROLE;
SELECT ok(NOT has_table_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, INSERT, UPDATE, DELETE')
          AND NOT has_any_column_privilege('aq_sp_deq', 'aq_sp_sch."aq$_sp_qt_i"', 'SELECT, INSERT, UPDATE')
          AND NOT has_table_privilege('aq_sp_deq', 'aq_sp_sch.sp_qt', 'SELECT, INSERT, UPDATE, DELETE')
          AND NOT has_any_column_privilege('aq_sp_deq', 'aq_sp_sch.sp_qt', 'SELECT, INSERT, UPDATE'),
          'after the revoke aq_sp_deq has no privilege left on the queue table nor on its delivery table');
SET LOCAL ROLE aq_sp_deq;
SELECT matches(pg_temp.sp_try(o.sql), pg_temp.sp_denied(), format('after revoking DEQUEUE: %s gives 42501', o.label))
  FROM sp_deq_ops o ORDER BY o.n;
SELECT is(pg_temp.sp_try($$SELECT count(*) FROM aq_sp_sch."aq$sp_qt_s"$$), 'ERROR 42501: permission denied for table aq$_sp_qt_i',
          'after revoking DEQUEUE: the subscriber view gives 42501');
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(), 'big2:alpha,big2:beta,q2:q2sub', 'the refused dequeues after the revoke took nothing');

SET LOCAL ROLE aq_sp_owner;
SELECT lives_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'sp_q', 'aq_sp_enq')$$, 'owner: revoke_queue_privilege(ENQUEUE, sp_q, aq_sp_enq)');
RESET ROLE;
SET LOCAL ROLE aq_sp_enq;
SELECT throws_ok($$SELECT aq.enqueue('sp_q', ROW(40, 'x')::aq_sp_ot)$$, '42501', 'permission denied for table sp_qt',
                 'after revoking ENQUEUE: enqueue gives 42501');
RESET ROLE;
SELECT is(pg_temp.sp_deliveries(), 'big2:alpha,big2:beta,q2:q2sub', 'the refused enqueue delivered nothing');

SELECT * FROM finish();
ROLLBACK;
