-- pgTAP: DBMS_AQADM behaviour of aq 0.1.0 — queue tables, queues, start/stop, drop rules, error codes,
-- and names taken exactly as given (quotes, spaces, case, multibyte, injection attempts, length limits).
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.  Everything is rolled back.
BEGIN;
SELECT plan(303);

SET LOCAL search_path = public;
SET LOCAL client_min_messages = warning;
CREATE TYPE public.cat_ot AS (message text);
CREATE TYPE public.other_ot AS (n integer);
-- the canary: injection attempts below must never touch it
CREATE TABLE public.victim (i integer);
INSERT INTO public.victim VALUES (1);

-- dequeue one message without waiting: 'msgid:message', or 'ERROR <sqlstate>: <message>' so that a failing
-- dequeue fails its assertion instead of aborting the script
CREATE FUNCTION pg_temp.dq(queue_name text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r record;
BEGIN
    SELECT d.msgid, (d.payload).message AS message INTO r
      FROM aq.dequeue(queue_name, NULL::public.cat_ot, aq.dequeue_options(wait => '0')) d;
    RETURN r.msgid || ':' || r.message;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE || ': ' || SQLERRM;
END $$;

------------------------------------------------------------------------------ create_queue_table

SELECT lives_ok($$SELECT aq.create_queue_table('cat_qt', 'cat_ot')$$, 'create_queue_table(cat_qt, cat_ot)');
SELECT has_table('public', 'cat_qt', 'the queue table public.cat_qt was created in the current schema');
SELECT is((SELECT c.relkind::text || '/' || coalesce(a.amname::text, '-')
             FROM pg_class c LEFT JOIN pg_am a ON a.oid = c.relam WHERE c.oid = 'public.cat_qt'::regclass),
          'r/heap', 'the queue table is an ordinary heap table (relkind r, access method heap)');
SELECT is((SELECT relpersistence::text FROM pg_class WHERE oid = 'public.cat_qt'::regclass), 'p',
          'the queue table is a permanent (logged) table');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod) FROM pg_attribute
       WHERE attrelid = 'public.cat_qt'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('msgid', 'bigint'), ('q_id', 'integer'), ('enq_time', 'timestamp with time zone'),
             ('priority', 'integer'), ('delay', 'timestamp with time zone'),
             ('expiration', 'timestamp with time zone'), ('corrid', 'text'), ('retry_count', 'integer'),
             ('exception_queue', 'text'), ('enq_uid', 'text'), ('user_data', 'cat_ot')$$,
    'the queue table has the documented columns, types and order');
SELECT col_is_pk('public', 'cat_qt', 'msgid', 'the primary key of the queue table is msgid');
SELECT isnt((SELECT attidentity::text FROM pg_attribute
              WHERE attrelid = 'public.cat_qt'::regclass AND attname = 'msgid'), '',
            'msgid is an identity column');
SELECT col_type_is('public', 'cat_qt', 'user_data', 'public', 'cat_ot',
                   'user_data has the payload type public.cat_ot');
SELECT results_eq(
    $$SELECT array_agg(a.attname::text COLLATE "default" ORDER BY k.n), i.indisunique,
             i.indpred IS NULL AND i.indexprs IS NULL, am.amname::text COLLATE "default"
        FROM pg_index i
        JOIN pg_class ic ON ic.oid = i.indexrelid
        JOIN pg_am am ON am.oid = ic.relam
        CROSS JOIN LATERAL unnest(i.indkey::int2[]) WITH ORDINALITY AS k(attnum, n)
        JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
       WHERE i.indrelid = 'public.cat_qt'::regclass
       GROUP BY i.indexrelid, i.indisunique, i.indpred IS NULL AND i.indexprs IS NULL, am.amname
       ORDER BY 1$$,
    $$VALUES (ARRAY['msgid'], true, true, 'btree'), (ARRAY['q_id', 'corrid', 'enq_time', 'msgid'], false, false, 'btree'),
             (ARRAY['q_id', 'delay'], false, false, 'btree'), (ARRAY['q_id', 'enq_time', 'msgid'], false, true, 'btree'),
             (ARRAY['q_id', 'expiration'], false, false, 'btree')$$,
    'the queue table has a unique index (msgid), the btree index (q_id, enq_time, msgid) of its sort order and '
    'partial indexes for correlation, delay and expiration');
SELECT results_eq(
    $$SELECT queue_table, table_schema, payload_type, sort_list, comment FROM aq.queue_tables$$,
    $$VALUES ('cat_qt', 'public', 'cat_ot'::regtype, 'enq_time', NULL::text)$$,
    'aq.queue_tables has the row (cat_qt, public, cat_ot, enq_time, NULL)');

-- argument checks of create_queue_table
SELECT throws_ok($$SELECT aq.create_queue_table('bad_sort_qt', 'cat_ot', sort_list => 'priority')$$, '22023', NULL,
                 'create_queue_table with an unsupported sort_list: 22023');
SELECT throws_ok($$SELECT aq.create_queue_table('pseudo_qt', 'anyelement')$$, '22023', NULL,
                 'create_queue_table with a pseudo-type payload: 22023');
SELECT throws_ok($$SELECT aq.create_queue_table('null_type_qt', NULL)$$, '22004', NULL,
                 'create_queue_table with a NULL payload type: 22004');
SELECT is_empty($$SELECT FROM aq.queue_tables WHERE queue_table <> 'cat_qt'$$,
                'failed create_queue_table calls leave no catalog rows');

------------------------------------------------------------------------------ create_queue, start/stop

SELECT lives_ok($$SELECT aq.create_queue('cat_q', 'cat_qt')$$, 'create_queue(cat_q, cat_qt)');
SELECT results_eq(
    $$SELECT q.queue_name, t.queue_table, q.enqueue_enabled, q.dequeue_enabled, q.max_retries, q.retry_delay,
             q.retention_time, q.comment
        FROM aq.queues q JOIN aq.queue_tables t USING (queue_table_id) WHERE q.queue_name = 'cat_q'$$,
    $$VALUES ('cat_q', 'cat_qt', false, false, 5, interval '0', interval '0', NULL::text)$$,
    'the new queue is registered stopped with max_retries 5, retry_delay 0, retention_time 0, no comment');
SELECT lives_ok($$SELECT aq.create_queue('cat_q2', 'cat_qt', max_retries => 2, retry_delay => '10 s',
                                         retention_time => '1 hour', comment => 'second queue')$$,
                'create_queue with every argument named');
SELECT results_eq(
    $$SELECT max_retries, retry_delay, retention_time, comment, enqueue_enabled, dequeue_enabled
        FROM aq.queues WHERE queue_name = 'cat_q2'$$,
    $$VALUES (2, interval '10 s', interval '1 hour', 'second queue', false, false)$$,
    'create_queue stores max_retries, retry_delay, retention_time and comment');
SELECT throws_ok($$SELECT aq.create_queue('neg_q', 'cat_qt', max_retries => -1)$$, '22023', NULL,
                 'create_queue with a negative max_retries: 22023');

-- a new queue is stopped
SELECT throws_ok($$SELECT aq.enqueue('cat_q', ROW('m')::cat_ot)$$, '55000', NULL,
                 'enqueue into a queue that was never started: 55000');
SELECT throws_ok($$SELECT * FROM aq.dequeue('cat_q', NULL::cat_ot, aq.dequeue_options(wait => '0'))$$, '55000',
                 NULL, 'dequeue from a queue that was never started: 55000');

SELECT lives_ok($$SELECT aq.start_queue('cat_q')$$, 'start_queue(cat_q)');
SELECT results_eq($$SELECT enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'cat_q'$$,
                  $$VALUES (true, true)$$, 'start_queue enables enqueue and dequeue');

SELECT lives_ok($$SELECT aq.stop_queue('cat_q', enqueue => true, dequeue => false)$$,
                'stop_queue(cat_q, enqueue => true, dequeue => false)');
SELECT results_eq($$SELECT enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'cat_q'$$,
                  $$VALUES (false, true)$$, 'stop_queue(enqueue only) disables enqueue, keeps dequeue');
SELECT throws_ok($$SELECT aq.enqueue('cat_q', ROW('m')::cat_ot)$$, '55000', NULL,
                 'enqueue into a queue stopped for enqueue: 55000');
SELECT throws_ok($$SELECT * FROM aq.dequeue('cat_q', NULL::cat_ot, aq.dequeue_options(wait => '0'))$$, 'QA228',
                 NULL, 'dequeue from an empty queue still enabled for dequeue: QA228 (not 55000)');

SELECT lives_ok($$SELECT aq.start_queue('cat_q', enqueue => true, dequeue => false)$$,
                'start_queue(cat_q, enqueue => true, dequeue => false)');
SELECT results_eq($$SELECT enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'cat_q'$$,
                  $$VALUES (true, true)$$, 'start_queue(dequeue => false) enables enqueue and leaves dequeue on');

SELECT lives_ok($$SELECT aq.stop_queue('cat_q', enqueue => false, dequeue => true)$$,
                'stop_queue(cat_q, enqueue => false, dequeue => true)');
SELECT results_eq($$SELECT enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'cat_q'$$,
                  $$VALUES (true, false)$$, 'stop_queue(dequeue only) disables dequeue, keeps enqueue');
SELECT lives_ok($$SELECT aq.enqueue('cat_q', ROW('while dequeue is stopped')::cat_ot)$$,
                'enqueue into a queue stopped only for dequeue works');
SELECT throws_ok($$SELECT * FROM aq.dequeue('cat_q', NULL::cat_ot, aq.dequeue_options(wait => '0'))$$, '55000',
                 NULL, 'dequeue from a queue stopped for dequeue: 55000 (even with a message ready)');

SELECT lives_ok($$SELECT aq.start_queue('cat_q')$$, 'start_queue(cat_q) again');
SELECT matches(pg_temp.dq('cat_q'), '^[0-9]+:while dequeue is stopped$',
               'after start_queue the waiting message is dequeued');

-- alter_queue: NULL leaves a setting unchanged
SELECT lives_ok($$SELECT aq.alter_queue('cat_q', max_retries => 3)$$, 'alter_queue(cat_q, max_retries => 3)');
SELECT results_eq($$SELECT max_retries, retry_delay, retention_time, comment FROM aq.queues
                     WHERE queue_name = 'cat_q'$$,
                  $$VALUES (3, interval '0', interval '0', NULL::text)$$,
                  'alter_queue changes max_retries only');
SELECT lives_ok($$SELECT aq.alter_queue('cat_q', retry_delay => '1 min', retention_time => '1 day',
                                        comment => 'altered')$$, 'alter_queue(retry_delay, retention_time, comment)');
SELECT results_eq($$SELECT max_retries, retry_delay, retention_time, comment FROM aq.queues
                     WHERE queue_name = 'cat_q'$$,
                  $$VALUES (3, interval '1 min', interval '1 day', 'altered')$$,
                  'alter_queue changes the given settings and keeps max_retries');
SELECT throws_ok($$SELECT aq.alter_queue('cat_q', max_retries => -1)$$, '22023', NULL,
                 'alter_queue with a negative max_retries: 22023');

------------------------------------------------------------------------------ drop_queue

SELECT throws_ok($$SELECT aq.drop_queue('cat_q')$$, '55000', NULL, 'drop_queue of a started queue: 55000');
SELECT lives_ok($$SELECT aq.stop_queue('cat_q', enqueue => true, dequeue => false)$$,
                'stop_queue(cat_q) for enqueue only');
SELECT throws_ok($$SELECT aq.drop_queue('cat_q')$$, '55000', NULL,
                 'drop_queue of a queue still enabled for dequeue: 55000');
SELECT lives_ok($$SELECT aq.start_queue('cat_q')$$, 'start_queue(cat_q)');
SELECT lives_ok($$SELECT aq.stop_queue('cat_q', enqueue => false, dequeue => true)$$,
                'stop_queue(cat_q) for dequeue only');
SELECT throws_ok($$SELECT aq.drop_queue('cat_q')$$, '55000', NULL,
                 'drop_queue of a queue still enabled for enqueue: 55000');
SELECT is((SELECT count(*)::int FROM aq.queues WHERE queue_name = 'cat_q'), 1,
          'the queue is still registered after the refused drops');

-- messages of the dropped queue go with it; the other queue's stay
SELECT lives_ok($$SELECT aq.enqueue('cat_q', ROW('goes with cat_q')::cat_ot)$$, 'enqueue a message into cat_q');
SELECT lives_ok($$SELECT aq.start_queue('cat_q2')$$, 'start_queue(cat_q2)');
SELECT lives_ok($$SELECT aq.enqueue('cat_q2', ROW('stays in cat_q2')::cat_ot)$$,
                'enqueue a message into cat_q2');
SELECT lives_ok($$SELECT aq.stop_queue('cat_q')$$, 'stop_queue(cat_q)');
SELECT results_eq($$SELECT enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'cat_q'$$,
                  $$VALUES (false, false)$$, 'stop_queue disables enqueue and dequeue');
SELECT lives_ok($$SELECT aq.drop_queue('cat_q')$$, 'drop_queue of a stopped queue');
SELECT is_empty($$SELECT FROM aq.queues WHERE queue_name = 'cat_q'$$, 'drop_queue removes the catalog row');
SELECT results_eq($$SELECT (user_data).message FROM public.cat_qt$$, $$VALUES ('stays in cat_q2')$$,
                  'drop_queue removes the messages of the dropped queue only');

------------------------------------------------------------------------------ drop_queue_table

SELECT throws_ok($$SELECT aq.drop_queue_table('cat_qt')$$, '2BP01', NULL,
                 'drop_queue_table of a queue table that still has queues: 2BP01');
SELECT throws_ok($$SELECT aq.drop_queue_table('cat_qt', force => false)$$, '2BP01', NULL,
                 'drop_queue_table(force => false) of a queue table that still has queues: 2BP01');
SELECT has_table('public', 'cat_qt', 'the queue table survives the refused drop');
SELECT is((SELECT count(*)::int FROM aq.queues WHERE queue_name = 'cat_q2'), 1,
          'its queue survives the refused drop');
SELECT lives_ok($$SELECT aq.drop_queue_table('cat_qt', force => true)$$,
                'drop_queue_table(force => true) drops a queue table that has (started) queues');
SELECT hasnt_table('public', 'cat_qt', 'drop_queue_table drops the table');
SELECT is_empty($$SELECT FROM aq.queue_tables WHERE queue_table = 'cat_qt'$$,
                'drop_queue_table removes the aq.queue_tables row');
SELECT is_empty($$SELECT FROM aq.queues WHERE queue_name = 'cat_q2'$$,
                'drop_queue_table(force) removes the queues of the table');

SELECT lives_ok($$SELECT aq.create_queue_table('empty_qt', 'cat_ot')$$, 'create_queue_table(empty_qt)');
SELECT lives_ok($$SELECT aq.drop_queue_table('empty_qt')$$, 'drop_queue_table of a table without queues');
SELECT hasnt_table('public', 'empty_qt', 'drop_queue_table (no force needed) dropped the table');

------------------------------------------------------------------------------ duplicates

SELECT lives_ok($$SELECT aq.create_queue_table('dup_qt', 'cat_ot')$$, 'create_queue_table(dup_qt)');
SELECT throws_ok($$SELECT aq.create_queue_table('dup_qt', 'cat_ot')$$, '42P07', NULL,
                 'create_queue_table with an existing queue table name: 42P07');
SELECT throws_ok($$SELECT aq.create_queue_table('dup_qt', 'other_ot')$$, '42P07', NULL,
                 'create_queue_table with an existing name and another payload type: 42P07');
CREATE TABLE public.plain_table (i integer);
SELECT throws_ok($$SELECT aq.create_queue_table('plain_table', 'cat_ot')$$, '42P07', NULL,
                 'create_queue_table over an existing ordinary table: 42P07');
SELECT is_empty($$SELECT FROM aq.queue_tables WHERE queue_table = 'plain_table'$$,
                'the failed create_queue_table registered nothing');
SELECT lives_ok($$SELECT aq.create_queue('dup_q', 'dup_qt')$$, 'create_queue(dup_q)');
SELECT throws_ok($$SELECT aq.create_queue('dup_q', 'dup_qt')$$, '42710', NULL,
                 'create_queue with an existing queue name: 42710');
SELECT lives_ok($$SELECT aq.create_queue_table('dup_qt2', 'other_ot')$$, 'create_queue_table(dup_qt2)');
SELECT throws_ok($$SELECT aq.create_queue('dup_q', 'dup_qt2')$$, '42710', NULL,
                 'create_queue with a name used in another queue table: 42710');
SELECT is((SELECT count(*)::int FROM aq.queues WHERE queue_name = 'dup_q'), 1, 'dup_q is registered once');

------------------------------------------------------------------------------ unknown names: 42704

SELECT throws_ok($$SELECT aq.drop_queue('no_such_q')$$, '42704', NULL, 'drop_queue of an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.start_queue('no_such_q')$$, '42704', NULL, 'start_queue of an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.stop_queue('no_such_q')$$, '42704', NULL, 'stop_queue of an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.alter_queue('no_such_q', max_retries => 1)$$, '42704', NULL,
                 'alter_queue of an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.create_queue('new_q', 'no_such_qt')$$, '42704', NULL,
                 'create_queue in an unknown queue table: 42704');
SELECT throws_ok($$SELECT aq.drop_queue_table('no_such_qt')$$, '42704', NULL,
                 'drop_queue_table of an unknown queue table: 42704');
SELECT throws_ok($$SELECT aq.purge_queue_table('no_such_qt')$$, '42704', NULL,
                 'purge_queue_table of an unknown queue table: 42704');
SELECT throws_ok($$SELECT aq.purge_queue_table('dup_qt', aq.purge_condition('no_such_q'))$$, '42704', NULL,
                 'purge_queue_table of an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.enqueue('no_such_q', ROW('m')::cat_ot)$$, '42704', NULL,
                 'enqueue into an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.enqueue_array('no_such_q', ARRAY[ROW('m')::cat_ot])$$, '42704', NULL,
                 'enqueue_array into an unknown queue: 42704');
SELECT throws_ok($$SELECT * FROM aq.dequeue('no_such_q', NULL::cat_ot, aq.dequeue_options(wait => '0'))$$,
                 '42704', NULL, 'dequeue from an unknown queue: 42704');
SELECT throws_ok($$SELECT * FROM aq.dequeue_array('no_such_q', NULL::cat_ot, 10, aq.dequeue_options(wait => '0'))$$,
                 '42704', NULL, 'dequeue_array from an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'no_such_q', 'postgres')$$, '42704', NULL,
                 'grant_queue_privilege on an unknown queue: 42704');
SELECT throws_ok($$SELECT aq.revoke_queue_privilege('ENQUEUE', 'no_such_q', 'postgres')$$, '42704', NULL,
                 'revoke_queue_privilege on an unknown queue: 42704');
-- names are case-sensitive (taken as quoted identifiers)
SELECT throws_ok($$SELECT aq.start_queue('DUP_Q')$$, '42704', NULL,
                 'queue names are case-sensitive: DUP_Q is not dup_q (42704)');
SELECT throws_ok($$SELECT aq.enqueue('DUP_Q', ROW('m')::cat_ot)$$, '42704', NULL,
                 'enqueue into DUP_Q when only dup_q exists: 42704');
SELECT throws_ok($$SELECT aq.drop_queue_table('DUP_QT')$$, '42704', NULL,
                 'queue table names are case-sensitive: DUP_QT is not dup_qt (42704)');

------------------------------------------------------------------------------ a storage table dropped behind aq's back

SELECT lives_ok($$SELECT aq.start_queue('dup_q')$$, 'start_queue(dup_q)');
DROP TABLE public.dup_qt CASCADE;  -- with its aq$dup_qt view
SELECT throws_ok($$SELECT aq.enqueue('dup_q', ROW('m')::cat_ot)$$, '42P01', NULL,
                 'enqueue when the queue table was dropped outside aq: 42P01');
SELECT lives_ok($$SELECT aq.stop_queue('dup_q'); SELECT aq.drop_queue('dup_q')$$,
                'drop_queue works when the queue table is gone');
SELECT lives_ok($$SELECT aq.drop_queue_table('dup_qt')$$,
                'drop_queue_table works when the queue table is gone');
SELECT is_empty($$SELECT FROM aq.queue_tables WHERE queue_table = 'dup_qt'$$,
                'the catalog row of the missing table is gone');

------------------------------------------------------------------------------ names are taken literally

-- Each name is used for a queue table and a queue of the same name, then enqueued to, dequeued from and
-- dropped.  The list includes injection attempts and names of exactly 57 bytes (the longest queue
-- table name: its exception queue aq$_<name>_e takes 63).
CREATE TEMP TABLE t_names (ord integer PRIMARY KEY, label text NOT NULL, n text NOT NULL UNIQUE, msgid bigint);
INSERT INTO t_names (ord, label, n) VALUES
    (1, 'mixed case', 'Mixed Case Q'),
    (2, 'upper case', 'UPPERQ'),
    (3, 'double quote', 'with"quote'),
    (4, 'single quote', 'it''s'),
    (5, 'spaces', '  spaces  around  '),
    (6, 'dots and backslash', 'dot.ted\back\slash'),
    (7, 'multibyte', 'ünïcødé 名前 🎉'),
    (8, 'newline and tab', E'new\nline\ttab'),
    (9, 'injection 1', 'x; DROP TABLE victim; --'),
    (10, 'injection 2', 'x"; DROP TABLE victim; --'),
    (11, 'injection 3', 'x''); DROP TABLE victim; --'),
    (12, 'injection 4', 'public"."victim'),
    (13, '57 ASCII bytes', repeat('a', 57)),
    (14, '57 bytes of 3-byte characters', repeat('€', 19)),
    (15, '57 bytes of mixed characters', repeat('é', 28) || 'z');

SELECT is((SELECT count(*)::int FROM t_names WHERE octet_length(n) = 57), 3,
          'three of the names are exactly 57 bytes long');

SELECT lives_ok(format('SELECT aq.create_queue_table(%L, %L)', n, 'cat_ot'),
                format('create_queue_table with a name with %s', label))
  FROM t_names ORDER BY ord;
SELECT results_eq(
    $$SELECT c.relname::text COLLATE "default" FROM t_names t
        LEFT JOIN pg_class c ON c.relname = t.n AND c.relnamespace = 'public'::regnamespace AND c.relkind = 'r'
       ORDER BY t.ord$$,
    $$SELECT n FROM t_names ORDER BY ord$$,
    'each queue table was created with exactly the given name');
SELECT results_eq($$SELECT queue_table FROM aq.queue_tables WHERE queue_table IN (SELECT n FROM t_names)
                     ORDER BY queue_table COLLATE "C"$$,
                  $$SELECT n FROM t_names ORDER BY n COLLATE "C"$$,
                  'aq.queue_tables records each name exactly');
SELECT has_table('public', 'victim', 'the canary table still exists after the create_queue_table calls');

SELECT lives_ok(format('SELECT aq.create_queue(%L, %L)', n, n),
                format('create_queue with a name with %s', label))
  FROM t_names ORDER BY ord;
SELECT results_eq($$SELECT queue_name FROM aq.queues WHERE queue_name IN (SELECT n FROM t_names)
                     ORDER BY queue_name COLLATE "C"$$,
                  $$SELECT n FROM t_names ORDER BY n COLLATE "C"$$,
                  'aq.queues records each name exactly');
SELECT lives_ok(format('SELECT aq.start_queue(%L)', n), format('start_queue with a name with %s', label))
  FROM t_names ORDER BY ord;

SELECT lives_ok(format('UPDATE t_names SET msgid = aq.enqueue(%L, ROW(%L)::cat_ot) WHERE ord = %s',
                       n, 'payload of ' || n, ord),
                format('enqueue with a name with %s', label))
  FROM t_names ORDER BY ord;
SELECT is((SELECT count(*)::int FROM t_names WHERE msgid IS NOT NULL), 15, 'every enqueue returned a msgid');
SELECT results_eq(
    $$SELECT t.ord, (SELECT count(*)::int FROM public.victim) FROM t_names t ORDER BY t.ord$$,
    $$SELECT ord, 1 FROM t_names ORDER BY ord$$,
    'the canary still has its row after the enqueues');
SELECT is(pg_temp.dq(t.n), t.msgid || ':payload of ' || t.n,
          format('dequeue with a name with %s returns the message enqueued there', t.label))
  FROM t_names t ORDER BY t.ord;

SELECT lives_ok(format('SELECT aq.stop_queue(%L)', n), format('stop_queue with a name with %s', label))
  FROM t_names ORDER BY ord;
SELECT lives_ok(format('SELECT aq.drop_queue(%L)', n), format('drop_queue with a name with %s', label))
  FROM t_names ORDER BY ord;
SELECT lives_ok(format('SELECT aq.drop_queue_table(%L)', n),
                format('drop_queue_table with a name with %s', label))
  FROM t_names ORDER BY ord;
SELECT is_empty($$SELECT FROM pg_class c JOIN t_names t ON c.relname = t.n
                   WHERE c.relnamespace = 'public'::regnamespace$$,
                'drop_queue_table dropped every literally-named table');
SELECT is_empty($$SELECT FROM aq.queues WHERE queue_name IN (SELECT n FROM t_names)
                  UNION ALL SELECT FROM aq.queue_tables WHERE queue_table IN (SELECT n FROM t_names)$$,
                'no catalog rows are left for the names');
SELECT has_table('public', 'victim', 'the canary table still exists after all the name tests');
SELECT is((SELECT count(*)::int FROM public.victim), 1, 'the canary table still has its row');

-- a queue table in a schema with an awkward name, and queue_table_schema defaulting to current_schema()
CREATE SCHEMA "Odd ""Schema"" ü";
SELECT lives_ok($$SELECT aq.create_queue_table('odd qt', 'cat_ot', queue_table_schema => 'Odd "Schema" ü')$$,
                'create_queue_table in schema Odd "Schema" ü');
SELECT has_table('Odd "Schema" ü', 'odd qt', 'the queue table was created in that schema');
SELECT lives_ok($$SELECT aq.create_queue('odd q', 'odd qt'); SELECT aq.start_queue('odd q');
                  SELECT aq.enqueue('odd q', ROW('odd payload')::cat_ot)$$,
                'create, start and enqueue into a queue of that table');
SELECT matches(pg_temp.dq('odd q'), '^[0-9]+:odd payload$',
               'dequeue from a queue of a table in an oddly-named schema');
SET LOCAL search_path = "Odd ""Schema"" ü", public;
SELECT lives_ok($$SELECT aq.create_queue_table('default schema qt', 'public.cat_ot')$$,
                'create_queue_table without queue_table_schema');
SET LOCAL search_path = public;
SELECT is((SELECT table_schema FROM aq.queue_tables WHERE queue_table = 'default schema qt'), 'Odd "Schema" ü',
          'queue_table_schema defaults to the caller''s current_schema()');
SELECT has_table('Odd "Schema" ü', 'default schema qt', 'the table is in the caller''s current schema');
SELECT lives_ok($$SELECT aq.stop_queue('odd q'); SELECT aq.drop_queue('odd q');
                  SELECT aq.drop_queue_table('odd qt'); SELECT aq.drop_queue_table('default schema qt')$$,
                'stop, drop queue and drop both queue tables');
SELECT hasnt_table('Odd "Schema" ü', 'odd qt', 'the queue table in the odd schema is dropped');

-- a payload type with an awkward name in that schema
CREATE TYPE "Odd ""Schema"" ü"."Pay ""Load""" AS (message text);
SELECT lives_ok($$SELECT aq.create_queue_table('odd payload qt', '"Odd ""Schema"" ü"."Pay ""Load"""')$$,
                'create_queue_table with payload type "Odd ""Schema"" ü"."Pay ""Load"""');
SELECT is((SELECT atttypid FROM pg_attribute WHERE attrelid = 'public."odd payload qt"'::regclass
             AND attname = 'user_data'),
          '"Odd ""Schema"" ü"."Pay ""Load"""'::regtype::oid, 'user_data has that payload type');
SELECT is((SELECT payload_type FROM aq.queue_tables WHERE queue_table = 'odd payload qt'),
          '"Odd ""Schema"" ü"."Pay ""Load"""'::regtype, 'aq.queue_tables records that payload type');
SELECT lives_ok($$SELECT aq.create_queue('odd payload q', 'odd payload qt'); SELECT aq.start_queue('odd payload q');
                  SELECT aq.enqueue('odd payload q', ROW('typed')::"Odd ""Schema"" ü"."Pay ""Load""")$$,
                'enqueue a payload of that type');
SELECT throws_ok($$SELECT aq.enqueue('odd payload q', ROW('typed')::cat_ot)$$, '42804', NULL,
                 'enqueue of another payload type: 42804');
SELECT throws_ok($$SELECT * FROM aq.dequeue('odd payload q', NULL::cat_ot, aq.dequeue_options(wait => '0'))$$,
                 '42804', NULL, 'dequeue naming another payload type: 42804');
SELECT results_eq($$SELECT (payload).message FROM aq.dequeue('odd payload q', NULL::"Odd ""Schema"" ü"."Pay ""Load""",
                                                              aq.dequeue_options(wait => '0'))$$,
                  $$VALUES ('typed')$$, 'dequeue returns the payload of that type');
SELECT lives_ok($$SELECT aq.drop_queue_table('odd payload qt', force => true)$$, 'drop_queue_table(odd payload qt)');

------------------------------------------------------------------------------ other injection attempts

SELECT lives_ok($$SELECT aq.create_queue_table('comment_qt', 'cat_ot', comment => 'c''); DROP TABLE victim; --')$$,
                'create_queue_table with a comment containing an injection attempt');
SELECT is((SELECT comment FROM aq.queue_tables WHERE queue_table = 'comment_qt'), 'c''); DROP TABLE victim; --',
          'the comment is stored literally');
SELECT is(obj_description('public.comment_qt'::regclass, 'pg_class'), 'c''); DROP TABLE victim; --',
          'the table comment is the literal text');
SELECT throws_ok($$SELECT aq.create_queue_table('schema_qt', 'cat_ot',
                                                queue_table_schema => 'public; DROP TABLE victim; --')$$,
                 '3F000', NULL, 'queue_table_schema with an injection attempt names a (missing) schema: 3F000');
SELECT lives_ok($$SELECT aq.create_queue('comment_q', 'comment_qt', comment => 'q''); DROP TABLE victim; --')$$,
                'create_queue with a comment containing an injection attempt');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE', 'comment_q', 'x; DROP TABLE victim; --')$$,
                 '42704', NULL, 'grant_queue_privilege to a grantee with an injection attempt: unknown role 42704');
SELECT throws_ok($$SELECT aq.grant_queue_privilege('ENQUEUE ON public.victim TO PUBLIC; --', 'comment_q',
                                                   'postgres')$$,
                 '22023', NULL, 'grant_queue_privilege with an injection attempt as privilege: 22023');
SELECT has_table('public', 'victim', 'the canary table still exists after the other injection attempts');
SELECT is((SELECT count(*)::int FROM public.victim), 1, 'the canary table still has its one row');

------------------------------------------------------------------------------ name lengths, empty and NULL names

SELECT lives_ok($$SELECT aq.create_queue_table('len_qt', 'cat_ot')$$, 'create_queue_table(len_qt)');

-- 64 bytes: 42602
SELECT throws_ok(format('SELECT aq.create_queue_table(%L, %L)', repeat('b', 64), 'cat_ot'), '42602', NULL,
                 'create_queue_table with a 64-byte ASCII name: 42602');
SELECT throws_ok(format('SELECT aq.create_queue_table(%L, %L)', repeat('é', 32), 'cat_ot'), '42602', NULL,
                 'create_queue_table with a 64-byte name of 32 two-byte characters: 42602');
SELECT throws_ok(format('SELECT aq.create_queue_table(%L, %L)', repeat('€', 22), 'cat_ot'), '42602', NULL,
                 'create_queue_table with a 66-byte name of 22 three-byte characters: 42602');
SELECT throws_ok(format('SELECT aq.create_queue(%L, %L)', repeat('b', 64), 'len_qt'), '42602', NULL,
                 'create_queue with a 64-byte queue name: 42602');
SELECT throws_ok(format('SELECT aq.create_queue(%L, %L)', repeat('é', 32), 'len_qt'), '42602', NULL,
                 'create_queue with a 64-byte multibyte queue name: 42602');
SELECT throws_ok(format('SELECT aq.create_queue(%L, %L)', 'len_q', repeat('b', 64)), '42602', NULL,
                 'create_queue with a 64-byte queue table name: 42602');
SELECT throws_ok(format('SELECT aq.enqueue(%L, ROW(%L)::cat_ot)', repeat('b', 64), 'm'), '42602', NULL,
                 'enqueue with a 64-byte queue name: 42602');
SELECT throws_ok(format('SELECT aq.enqueue_array(%L, ARRAY[ROW(%L)::cat_ot])', repeat('é', 32), 'm'), '42602',
                 NULL, 'enqueue_array with a 64-byte multibyte queue name: 42602');
SELECT throws_ok(format('SELECT * FROM aq.dequeue(%L, NULL::cat_ot, aq.dequeue_options(wait => %L))',
                        repeat('b', 64), '0'), '42602', NULL, 'dequeue with a 64-byte queue name: 42602');
SELECT throws_ok(format('SELECT * FROM aq.dequeue_array(%L, NULL::cat_ot, 5, aq.dequeue_options(wait => %L))',
                        repeat('b', 64), '0'), '42602', NULL, 'dequeue_array with a 64-byte queue name: 42602');
SELECT throws_ok(format('SELECT aq.start_queue(%L)', repeat('b', 64)), '42602', NULL,
                 'start_queue with a 64-byte queue name: 42602');
SELECT throws_ok(format('SELECT aq.drop_queue(%L)', repeat('b', 64)), '42602', NULL,
                 'drop_queue with a 64-byte queue name: 42602');
SELECT throws_ok(format('SELECT aq.drop_queue_table(%L)', repeat('b', 64)), '42602', NULL,
                 'drop_queue_table with a 64-byte name: 42602');

-- '' : 42602
SELECT throws_ok($$SELECT aq.create_queue_table('', 'cat_ot')$$, '42602', NULL,
                 'create_queue_table with an empty name: 42602');
SELECT throws_ok($$SELECT aq.create_queue('', 'len_qt')$$, '42602', NULL, 'create_queue with an empty name: 42602');
SELECT throws_ok($$SELECT aq.create_queue('len_q', '')$$, '42602', NULL,
                 'create_queue with an empty queue table name: 42602');
SELECT throws_ok($$SELECT aq.alter_queue('', max_retries => 1)$$, '42602', NULL,
                 'alter_queue with an empty name: 42602');
SELECT throws_ok($$SELECT aq.start_queue('')$$, '42602', NULL, 'start_queue with an empty name: 42602');
SELECT throws_ok($$SELECT aq.stop_queue('')$$, '42602', NULL, 'stop_queue with an empty name: 42602');
SELECT throws_ok($$SELECT aq.drop_queue('')$$, '42602', NULL, 'drop_queue with an empty name: 42602');
SELECT throws_ok($$SELECT aq.drop_queue_table('')$$, '42602', NULL, 'drop_queue_table with an empty name: 42602');
SELECT throws_ok($$SELECT aq.purge_queue_table('')$$, '42602', NULL,
                 'purge_queue_table with an empty name: 42602');
SELECT throws_ok($$SELECT aq.enqueue('', ROW('m')::cat_ot)$$, '42602', NULL, 'enqueue with an empty name: 42602');
SELECT throws_ok($$SELECT aq.enqueue_array('', ARRAY[ROW('m')::cat_ot])$$, '42602', NULL,
                 'enqueue_array with an empty name: 42602');
SELECT throws_ok($$SELECT * FROM aq.dequeue('', NULL::cat_ot, aq.dequeue_options(wait => '0'))$$, '42602', NULL,
                 'dequeue with an empty name: 42602');
SELECT throws_ok($$SELECT * FROM aq.dequeue_array('', NULL::cat_ot, 5, aq.dequeue_options(wait => '0'))$$, '42602',
                 NULL, 'dequeue_array with an empty name: 42602');

-- NULL : 22004
SELECT throws_ok($$SELECT aq.create_queue_table(NULL, 'cat_ot')$$, '22004', NULL,
                 'create_queue_table with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.create_queue(NULL, 'len_qt')$$, '22004', NULL, 'create_queue with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.create_queue('len_q', NULL)$$, '22004', NULL,
                 'create_queue with a NULL queue table name: 22004');
SELECT throws_ok($$SELECT aq.alter_queue(NULL, max_retries => 1)$$, '22004', NULL,
                 'alter_queue with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.start_queue(NULL)$$, '22004', NULL, 'start_queue with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.stop_queue(NULL)$$, '22004', NULL, 'stop_queue with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.drop_queue(NULL)$$, '22004', NULL, 'drop_queue with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.drop_queue_table(NULL)$$, '22004', NULL, 'drop_queue_table with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.purge_queue_table(NULL)$$, '22004', NULL,
                 'purge_queue_table with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.enqueue(NULL, ROW('m')::cat_ot)$$, '22004', NULL, 'enqueue with a NULL name: 22004');
SELECT throws_ok($$SELECT aq.enqueue_array(NULL, ARRAY[ROW('m')::cat_ot])$$, '22004', NULL,
                 'enqueue_array with a NULL name: 22004');
SELECT throws_ok($$SELECT * FROM aq.dequeue(NULL, NULL::cat_ot, aq.dequeue_options(wait => '0'))$$, '22004', NULL,
                 'dequeue with a NULL name: 22004');
SELECT throws_ok($$SELECT * FROM aq.dequeue_array(NULL, NULL::cat_ot, 5, aq.dequeue_options(wait => '0'))$$,
                 '22004', NULL, 'dequeue_array with a NULL name: 22004');

SELECT is((SELECT count(*)::int FROM aq.queues WHERE queue_type = 'normal_queue'), 1, 'only comment_q is registered at the end');
SELECT results_eq($$SELECT queue_table FROM aq.queue_tables ORDER BY queue_table COLLATE "C"$$,
                  $$VALUES ('comment_qt'), ('dup_qt2'), ('len_qt')$$,
                  'only the expected queue tables are registered at the end');

------------------------------------------------------------------------------ purge_queue_table

SELECT lives_ok($$SELECT aq.create_queue('purge_a', 'len_qt'); SELECT aq.create_queue('purge_b', 'len_qt');
                  SELECT aq.start_queue('purge_a'); SELECT aq.start_queue('purge_b');
                  SELECT aq.enqueue_array('purge_a', ARRAY[ROW('a1')::cat_ot, ROW('a2')::cat_ot]);
                  SELECT aq.enqueue_array('purge_b', ARRAY[ROW('b1')::cat_ot, ROW('b2')::cat_ot, ROW('b3')::cat_ot])$$,
                'two queues in len_qt with 2 and 3 messages');
SELECT is(aq.purge_queue_table('len_qt', aq.purge_condition('purge_a')), 2::bigint, 'purge_queue_table(len_qt, purge_condition(purge_a)) purges 2');
SELECT results_eq($$SELECT (user_data).message FROM public.len_qt ORDER BY msgid$$,
                  $$VALUES ('b1'), ('b2'), ('b3')$$, 'only purge_b''s messages are left');
SELECT throws_ok($$SELECT aq.purge_queue_table('comment_qt', aq.purge_condition('purge_b'))$$, '22023', NULL,
                 'purge_queue_table with a queue of another queue table: 22023');
SELECT is(aq.purge_queue_table('len_qt'), 3::bigint, 'purge_queue_table(len_qt) purges the remaining 3');
SELECT is_empty('SELECT * FROM public.len_qt', 'the queue table is empty after the purge');

SELECT * FROM finish();
ROLLBACK;
