-- pgTAP: the public surface of aq 0.1.0 (functions, signatures, types, catalog tables).
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.
BEGIN;
SELECT plan(133);

------------------------------------------------------------------------------ schema / extension

SELECT has_extension('aq', 'extension aq is installed');
SELECT has_schema('aq', 'schema aq exists');
-- hardening 5: aq.control says schema = aq; the extension lives in schema aq (which holds it, so
-- DROP SCHEMA public CASCADE cannot take it), and the schema is not a member of the extension.
SELECT is((SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'aq'), 'aq',
          'extension aq lives in schema aq');

------------------------------------------------------------------------------ functions: exact signatures

-- DBMS_AQADM
SELECT has_function('aq', 'create_queue_table', ARRAY['text', 'regtype', 'text', 'text', 'text', 'boolean', 'text', 'integer'],
                    'aq.create_queue_table(text, regtype, text, text, text, boolean, text, integer) exists');
SELECT has_function('aq', 'add_subscriber', ARRAY['text', 'aq.agent', 'text', 'text', 'boolean', 'text'],
                    'aq.add_subscriber(text, aq.agent, text, text, boolean, text) exists');
SELECT has_function('aq', 'alter_subscriber', ARRAY['text', 'aq.agent', 'text', 'text'],
                    'aq.alter_subscriber(text, aq.agent, text, text) exists');
SELECT has_function('aq', 'remove_subscriber', ARRAY['text', 'aq.agent'],
                    'aq.remove_subscriber(text, aq.agent) exists');
SELECT has_table('aq', 'subscribers', 'table aq.subscribers exists');
SELECT has_function('aq', 'drop_queue_table', ARRAY['text', 'boolean'],
                    'aq.drop_queue_table(text, boolean) exists');
SELECT has_function('aq', 'purge_queue_table', ARRAY['text', 'aq.purge_condition'],
                    'aq.purge_queue_table(text, aq.purge_condition) exists');
SELECT has_function('aq', 'create_queue', ARRAY['text', 'text', 'integer', 'interval', 'interval', 'text', 'text'],
                    'aq.create_queue(text, text, integer, interval, interval, text, text) exists');
SELECT has_function('aq', 'alter_queue', ARRAY['text', 'integer', 'interval', 'interval', 'text'],
                    'aq.alter_queue(text, integer, interval, interval, text) exists');
SELECT has_function('aq', 'drop_queue', ARRAY['text'], 'aq.drop_queue(text) exists');
SELECT has_function('aq', 'start_queue', ARRAY['text', 'boolean', 'boolean'],
                    'aq.start_queue(text, boolean, boolean) exists');
SELECT has_function('aq', 'stop_queue', ARRAY['text', 'boolean', 'boolean'],
                    'aq.stop_queue(text, boolean, boolean) exists');
SELECT has_function('aq', 'grant_queue_privilege', ARRAY['text', 'text', 'text', 'boolean'],
                    'aq.grant_queue_privilege(text, text, text, boolean) exists');
SELECT has_function('aq', 'revoke_queue_privilege', ARRAY['text', 'text', 'text'],
                    'aq.revoke_queue_privilege(text, text, text) exists');
-- constructors
SELECT has_function('aq', 'message_properties', ARRAY['integer', 'interval', 'interval', 'text', 'text', 'aq.agent[]'],
                    'aq.message_properties(integer, interval, interval, text, text, aq.agent[]) exists');
SELECT has_function('aq', 'enqueue_options', ARRAY['text', 'text'], 'aq.enqueue_options(text, text) exists');
SELECT has_function('aq', 'purge_condition', ARRAY['text', 'text', 'text', 'timestamp with time zone', 'bigint[]'],
                    'aq.purge_condition(text, text, text, timestamptz, bigint[]) exists');
SELECT has_function('aq', 'listen', ARRAY['aq.agent[]', 'aq.wait_time'], 'aq.listen(aq.agent[], aq.wait_time) exists');
SELECT function_returns('aq', 'listen', ARRAY['aq.agent[]', 'aq.wait_time'], 'aq.agent', 'aq.listen returns aq.agent');
SELECT has_composite('aq', 'agent', 'composite type aq.agent exists (SYS.AQ$_AGENT)');
SELECT has_function('aq', 'dequeue_options',
                    ARRAY['text', 'text', 'text', 'text', 'aq.wait_time', 'bigint', 'text', 'text'],
                    'aq.dequeue_options(text, text, text, text, aq.wait_time, bigint, text, text) exists');
-- DBMS_AQ
SELECT has_function('aq', 'enqueue', ARRAY['text', 'anyelement', 'aq.message_properties', 'aq.enqueue_options'],
                    'aq.enqueue(text, anyelement, aq.message_properties, aq.enqueue_options) exists');
SELECT has_function('aq', 'enqueue_array',
                    ARRAY['text', 'anyarray', 'aq.message_properties[]', 'aq.enqueue_options'],
                    'aq.enqueue_array(text, anyarray, aq.message_properties[], aq.enqueue_options) exists');
SELECT has_function('aq', 'dequeue', ARRAY['text', 'anyelement', 'aq.dequeue_options'],
                    'aq.dequeue(text, anyelement, aq.dequeue_options) exists');
SELECT has_function('aq', 'dequeue_array', ARRAY['text', 'anyelement', 'integer', 'aq.dequeue_options'],
                    'aq.dequeue_array(text, anyelement, integer, aq.dequeue_options) exists');
-- fast ingest (DBMS_MEMOPTIMIZE)
SELECT has_function('aq', 'enable_fast_ingest', ARRAY['regclass'], 'aq.enable_fast_ingest(regclass) exists');
SELECT has_function('aq', 'disable_fast_ingest', ARRAY['regclass'], 'aq.disable_fast_ingest(regclass) exists');
SELECT has_function('aq', 'get_write_hwm_seqid', ARRAY[]::text[], 'aq.get_write_hwm_seqid() exists');
SELECT has_function('aq', 'get_apply_hwm_seqid', ARRAY[]::text[], 'aq.get_apply_hwm_seqid() exists');
SELECT has_function('aq', 'write_end', ARRAY['interval'], 'aq.write_end(interval) exists');
SELECT has_function('aq', 'writes_flush', ARRAY['interval'], 'aq.writes_flush(interval) exists');
SELECT has_function('aq', 'seqid_epoch', ARRAY['bigint'], 'aq.seqid_epoch(bigint) exists');
SELECT has_view('aq', 'memoptimize_write_area', 'view aq.memoptimize_write_area exists (V$MEMOPTIMIZE_WRITE_AREA)');
SELECT has_table('aq', 'fast_ingest_rejects', 'table aq.fast_ingest_rejects exists');
SELECT ok(NOT has_function_privilege('public', 'aq.writes_flush(interval)', 'EXECUTE'),
          'aq.writes_flush is for administrators: PUBLIC cannot execute it');

-- one function per public name: an overload would make named-argument calls ambiguous
SELECT results_eq(
    $$SELECT p.proname::text COLLATE "default", count(*)::int FROM pg_proc p
       WHERE p.pronamespace = 'aq'::regnamespace AND p.proname NOT LIKE E'\\_%'
       GROUP BY p.proname ORDER BY p.proname$$,
    $$VALUES ('add_subscriber', 1), ('agent', 1), ('alter_queue', 1), ('alter_queue_table', 1), ('alter_subscriber', 1), ('commit', 1), ('commit_mode', 1), ('commit_settings', 1), ('commit_stats', 1),
             ('consumer_info', 1), ('create_queue', 1), ('create_queue_table', 1), ('dequeue', 1),
             ('dequeue_array', 1), ('dequeue_options', 1), ('disable_fast_ingest', 1), ('drop_queue', 1),
             ('drop_queue_table', 1), ('enable_fast_ingest', 1),
             ('enqueue', 1), ('enqueue_array', 1), ('enqueue_options', 1), ('get_apply_hwm_seqid', 1),
             ('get_write_hwm_seqid', 1), ('grant_queue_privilege', 1),
             ('last_commit', 1), ('listen', 1), ('message_properties', 1), ('purge_condition', 1), ('purge_queue_table', 1), ('remove_subscriber', 1),
             ('revoke_queue_privilege', 1), ('seqid_epoch', 1), ('start_queue', 1), ('stop_queue', 1), ('write_end', 1), ('writes_flush', 1)$$,
    'exactly the documented public functions exist, each without overloads');

------------------------------------------------------------------------------ return types

SELECT function_returns('aq', 'create_queue_table', ARRAY['text', 'regtype', 'text', 'text', 'text', 'boolean', 'text', 'integer'], 'void',
                        'aq.create_queue_table returns void');
SELECT function_returns('aq', 'drop_queue_table', ARRAY['text', 'boolean'], 'void',
                        'aq.drop_queue_table returns void');
SELECT function_returns('aq', 'purge_queue_table', ARRAY['text', 'aq.purge_condition'], 'bigint',
                        'aq.purge_queue_table returns bigint');
SELECT function_returns('aq', 'create_queue', ARRAY['text', 'text', 'integer', 'interval', 'interval', 'text', 'text'],
                        'void', 'aq.create_queue returns void');
SELECT function_returns('aq', 'alter_queue', ARRAY['text', 'integer', 'interval', 'interval', 'text'], 'void',
                        'aq.alter_queue returns void');
SELECT function_returns('aq', 'drop_queue', ARRAY['text'], 'void', 'aq.drop_queue returns void');
SELECT function_returns('aq', 'start_queue', ARRAY['text', 'boolean', 'boolean'], 'void',
                        'aq.start_queue returns void');
SELECT function_returns('aq', 'stop_queue', ARRAY['text', 'boolean', 'boolean'], 'void',
                        'aq.stop_queue returns void');
SELECT function_returns('aq', 'grant_queue_privilege', ARRAY['text', 'text', 'text', 'boolean'], 'void',
                        'aq.grant_queue_privilege returns void');
SELECT function_returns('aq', 'revoke_queue_privilege', ARRAY['text', 'text', 'text'], 'void',
                        'aq.revoke_queue_privilege returns void');
SELECT function_returns('aq', 'message_properties', ARRAY['integer', 'interval', 'interval', 'text', 'text', 'aq.agent[]'],
                        'aq.message_properties', 'aq.message_properties() returns aq.message_properties');
SELECT function_returns('aq', 'enqueue_options', ARRAY['text', 'text'], 'aq.enqueue_options',
                        'aq.enqueue_options() returns aq.enqueue_options');
SELECT function_returns('aq', 'dequeue_options', ARRAY['text', 'text', 'text', 'text', 'aq.wait_time', 'bigint', 'text', 'text'],
                        'aq.dequeue_options', 'aq.dequeue_options() returns aq.dequeue_options');
SELECT function_returns('aq', 'enqueue', ARRAY['text', 'anyelement', 'aq.message_properties', 'aq.enqueue_options'],
                        'bigint', 'aq.enqueue returns bigint');
SELECT function_returns('aq', 'enqueue_array',
                        ARRAY['text', 'anyarray', 'aq.message_properties[]', 'aq.enqueue_options'], 'bigint[]',
                        'aq.enqueue_array returns bigint[]');
SELECT function_returns('aq', 'dequeue', ARRAY['text', 'anyelement', 'aq.dequeue_options'], 'record',
                        'aq.dequeue returns record');
SELECT function_returns('aq', 'dequeue_array', ARRAY['text', 'anyelement', 'integer', 'aq.dequeue_options'],
                        'setof record', 'aq.dequeue_array returns setof record');

-- argument names (named notation is part of the API) and the number of defaulted arguments
SELECT results_eq(
    $$SELECT p.proname::text COLLATE "default", p.proargnames::text[] COLLATE "default", p.pronargdefaults::int FROM pg_proc p
       WHERE p.pronamespace = 'aq'::regnamespace AND p.proname NOT LIKE E'\\_%' ORDER BY p.proname$$,
    $$VALUES
      ('add_subscriber', ARRAY['queue_name','subscriber','rule','transformation','queue_to_queue','delivery_mode'], 4),
      ('agent', ARRAY['name','address','protocol'], 3),
      ('alter_queue', ARRAY['queue_name','max_retries','retry_delay','retention_time','comment'], 4),
      ('alter_queue_table', ARRAY['queue_table','comment','segments'], 2),
      ('alter_subscriber', ARRAY['queue_name','subscriber','rule','transformation'], 1),
      ('commit', ARRAY['mode'], 1),
      ('commit_mode', ARRAY['commit_wait','commit_logging','synchronous_commit','wait_decided_by',
                            'logging_decided_by','forced'], 0),
      ('commit_settings', ARRAY['level','parameter','value'], 0),
      ('commit_stats', ARRAY['all_sessions','commits','waited','not_waited','batch_gathers','batch_followers',
                             'log_writer_requests','log_writer_flushes'], 1),
      ('consumer_info', ARRAY['queue_name','queue','consumer','waiting','ready','oldest_enq_time','lag','unsettled',
                              'holds_removal','removable'], 1),
      ('create_queue', ARRAY['queue_name','queue_table','max_retries','retry_delay','retention_time','comment',
                             'queue_type'], 5),
      ('create_queue_table', ARRAY['queue_table','queue_payload_type','sort_list','comment','queue_table_schema',
                                   'multiple_consumers','message_grouping','segments'], 6),
      ('dequeue', ARRAY['queue_name','payload_type','dequeue_options','msgid','payload','message_properties'], 1),
      ('dequeue_array', ARRAY['queue_name','payload_type','array_size','dequeue_options','msgid','payload',
                              'message_properties'], 1),
      ('dequeue_options', ARRAY['consumer_name','dequeue_mode','navigation','visibility','wait','msgid',
                                'correlation','deq_condition'], 8),
      ('disable_fast_ingest', ARRAY['tbl'], 0),
      ('drop_queue', ARRAY['queue_name'], 0),
      ('drop_queue_table', ARRAY['queue_table','force'], 1),
      ('enable_fast_ingest', ARRAY['tbl'], 0),
      ('enqueue', ARRAY['queue_name','payload','message_properties','enqueue_options'], 2),
      ('enqueue_array', ARRAY['queue_name','payload_array','message_properties_array','enqueue_options'], 2),
      ('enqueue_options', ARRAY['visibility','delivery_mode'], 2),
      ('get_apply_hwm_seqid', NULL::text[], 0),
      ('get_write_hwm_seqid', NULL::text[], 0),
      ('grant_queue_privilege', ARRAY['privilege','queue_name','grantee','grant_option'], 1),
      ('last_commit', ARRAY['commit_lsn','flushed_lsn','durable','durable_on_return','commit_wait',
                            'commit_logging','synchronous_commit','committed_at'], 0),
      ('listen', ARRAY['agent_list','wait'], 1),
      ('message_properties', ARRAY['priority','delay','expiration','correlation','exception_queue','recipient_list'], 6),
      ('purge_condition', ARRAY['queue_name','msg_state','correlation','enqueued_before','msgids'], 5),
      ('purge_queue_table', ARRAY['queue_table','purge_condition'], 1),
      ('remove_subscriber', ARRAY['queue_name','subscriber'], 0),
      ('revoke_queue_privilege', ARRAY['privilege','queue_name','grantee'], 0),
      ('seqid_epoch', ARRAY['seqid'], 0),
      ('start_queue', ARRAY['queue_name','enqueue','dequeue'], 2),
      ('stop_queue', ARRAY['queue_name','enqueue','dequeue'], 2),
      ('write_end', ARRAY['timeout'], 1),
      ('writes_flush', ARRAY['timeout'], 1)$$,
    'argument names and number of defaults of every public function');

-- the documented defaults of the admin functions, as written in the catalog
SELECT matches(pg_get_function_arguments('aq.create_queue_table(text,regtype,text,text,text,boolean,text,integer)'::regprocedure),
          '^queue_table text, queue_payload_type regtype, sort_list text DEFAULT ''enq_time''::text, '
          'comment text DEFAULT NULL::text, queue_table_schema text DEFAULT '
          '("current_schema"\(\)|CURRENT_SCHEMA), multiple_consumers boolean DEFAULT false, '
          'message_grouping text DEFAULT ''none''::text, segments integer DEFAULT 0$',
          'aq.create_queue_table defaults: sort_list enq_time, comment NULL, schema current_schema(), '
          'single consumer, no grouping, classic storage');
SELECT is(pg_get_function_arguments('aq.create_queue(text,text,integer,interval,interval,text,text)'::regprocedure),
          'queue_name text, queue_table text, max_retries integer DEFAULT 5, '
          'retry_delay interval DEFAULT ''00:00:00''::interval, retention_time interval DEFAULT ''00:00:00''::interval, '
          'comment text DEFAULT NULL::text, queue_type text DEFAULT ''normal_queue''::text',
          'aq.create_queue defaults: max_retries 5, retry_delay 0, retention_time 0, comment NULL, normal_queue');
SELECT is(pg_get_function_arguments('aq.purge_queue_table(text,aq.purge_condition)'::regprocedure),
          'queue_table text, purge_condition aq.purge_condition DEFAULT NULL::aq.purge_condition',
          'aq.purge_queue_table defaults: purge_condition NULL (everything)');
SELECT has_view('aq', v, format('view aq.%s exists', v))
  FROM unnest(ARRAY['all_queues', 'user_queues', 'all_queue_tables', 'user_queue_tables']) v;
SELECT has_type('aq', 'purge_condition', 'type aq.purge_condition exists');
SELECT is(pg_get_function_arguments('aq.start_queue(text,boolean,boolean)'::regprocedure),
          'queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true',
          'aq.start_queue defaults: enqueue true, dequeue true');
SELECT is(pg_get_function_arguments('aq.stop_queue(text,boolean,boolean)'::regprocedure),
          'queue_name text, enqueue boolean DEFAULT true, dequeue boolean DEFAULT true',
          'aq.stop_queue defaults: enqueue true, dequeue true');
SELECT is(pg_get_function_arguments('aq.drop_queue_table(text,boolean)'::regprocedure),
          'queue_table text, force boolean DEFAULT false', 'aq.drop_queue_table defaults: force false');
SELECT is(pg_get_function_arguments('aq.grant_queue_privilege(text,text,text,boolean)'::regprocedure),
          'privilege text, queue_name text, grantee text, grant_option boolean DEFAULT false',
          'aq.grant_queue_privilege defaults: grant_option false');

-- the OUT columns of the dequeue functions
SELECT results_eq(
    $$SELECT a.name::text COLLATE "default", format_type(a.type, NULL) FROM pg_proc p,
             unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a(name, type, mode, n)
       WHERE p.oid = 'aq.dequeue(text,anyelement,aq.dequeue_options)'::regprocedure AND a.mode = 'o'
       ORDER BY a.n$$,
    $$VALUES ('msgid', 'bigint'), ('payload', 'anyelement'), ('message_properties', 'aq.message_properties')$$,
    'aq.dequeue returns (msgid bigint, payload anyelement, message_properties aq.message_properties)');
SELECT results_eq(
    $$SELECT a.name::text COLLATE "default", format_type(a.type, NULL) FROM pg_proc p,
             unnest(p.proargnames, p.proallargtypes, p.proargmodes) WITH ORDINALITY AS a(name, type, mode, n)
       WHERE p.oid = 'aq.dequeue_array(text,anyelement,integer,aq.dequeue_options)'::regprocedure AND a.mode = 'o'
       ORDER BY a.n$$,
    $$VALUES ('msgid', 'bigint'), ('payload', 'anyelement'), ('message_properties', 'aq.message_properties')$$,
    'aq.dequeue_array returns setof (msgid bigint, payload anyelement, message_properties aq.message_properties)');

-- volatility: the queue operations change data; the constructors are pure
SELECT volatility_is('aq', 'enqueue', ARRAY['text', 'anyelement', 'aq.message_properties', 'aq.enqueue_options'],
                     'volatile', 'aq.enqueue is volatile');
SELECT volatility_is('aq', 'enqueue_array',
                     ARRAY['text', 'anyarray', 'aq.message_properties[]', 'aq.enqueue_options'],
                     'volatile', 'aq.enqueue_array is volatile');
SELECT volatility_is('aq', 'dequeue', ARRAY['text', 'anyelement', 'aq.dequeue_options'], 'volatile',
                     'aq.dequeue is volatile');
SELECT volatility_is('aq', 'dequeue_array', ARRAY['text', 'anyelement', 'integer', 'aq.dequeue_options'],
                     'volatile', 'aq.dequeue_array is volatile');
SELECT volatility_is('aq', 'message_properties', ARRAY['integer', 'interval', 'interval', 'text', 'text', 'aq.agent[]'],
                     'immutable', 'aq.message_properties() is immutable');
SELECT volatility_is('aq', 'enqueue_options', ARRAY['text', 'text'], 'immutable',
                     'aq.enqueue_options() is immutable');
SELECT volatility_is('aq', 'dequeue_options', ARRAY['text', 'text', 'text', 'text', 'aq.wait_time', 'bigint', 'text', 'text'],
                     'immutable', 'aq.dequeue_options() is immutable');

-- the queue operations run as the caller (table privileges apply): nothing is SECURITY DEFINER
SELECT is((SELECT count(*)::int FROM pg_proc WHERE pronamespace = 'aq'::regnamespace AND prosecdef), 0,
          'no aq function is SECURITY DEFINER');
-- every SQL/plpgsql function pins search_path = pg_catalog, pg_temp, but the message rules with an
-- SQL-standard body (BEGIN ATOMIC, RETURN): those are parsed when created, every name bound then
-- and none looked up when they run, and a setting would stop the planner inlining them
SELECT is_empty(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
       WHERE p.pronamespace = 'aq'::regnamespace AND l.lanname IN ('sql', 'plpgsql') AND p.prosqlbody IS NULL
         AND NOT coalesce('search_path=pg_catalog, pg_temp' = ANY (p.proconfig), false)$$,
    'every SQL/plpgsql function of aq runs with search_path = pg_catalog, pg_temp');
SELECT set_eq(
    $$SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_language l ON l.oid = p.prolang
       WHERE p.pronamespace = 'aq'::regnamespace AND l.lanname IN ('sql', 'plpgsql')
         AND (p.prosqlbody IS NOT NULL OR p.proconfig IS NULL)$$,
    ARRAY['aq._message_recipients(integer,bigint,text[])', 'aq._subscriber_receives(bigint,bigint,text[])',
          'aq._taken_ranges("char",bigint[])'],
    'the functions of aq without settings are the message rules, with SQL-standard bodies');

------------------------------------------------------------------------------ composite types

SELECT has_composite('aq', 'message_properties', 'composite type aq.message_properties exists');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod) FROM pg_attribute
       WHERE attrelid = 'aq.message_properties'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('priority', 'integer'), ('delay', 'interval'), ('expiration', 'interval'), ('correlation', 'text'),
             ('attempts', 'integer'), ('exception_queue', 'text'), ('enqueue_time', 'timestamp with time zone'),
             ('state', 'text'), ('recipient_list', 'aq.agent[]'), ('transaction_group', 'text'),
             ('end_of_group', 'boolean')$$,
    'aq.message_properties has columns (priority, delay, expiration, correlation, attempts, exception_queue, '
    'enqueue_time, state, recipient_list, transaction_group, end_of_group) with their types, in order');
SELECT col_type_is('aq', 'message_properties', 'priority', 'integer', 'aq.message_properties.priority is integer');
SELECT col_type_is('aq', 'message_properties', 'enqueue_time', 'timestamp with time zone',
                   'aq.message_properties.enqueue_time is timestamptz');

SELECT has_composite('aq', 'enqueue_options', 'composite type aq.enqueue_options exists');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod) FROM pg_attribute
       WHERE attrelid = 'aq.enqueue_options'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('visibility', 'text'), ('delivery_mode', 'text')$$,
    'aq.enqueue_options has columns (visibility text, delivery_mode text), in order');

SELECT has_composite('aq', 'dequeue_options', 'composite type aq.dequeue_options exists');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod) FROM pg_attribute
       WHERE attrelid = 'aq.dequeue_options'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('consumer_name', 'text'), ('dequeue_mode', 'text'), ('navigation', 'text'), ('visibility', 'text'),
             ('wait', 'interval'), ('msgid', 'bigint'), ('correlation', 'text'), ('deq_condition', 'text')$$,
    'aq.dequeue_options has columns (consumer_name, dequeue_mode, navigation, visibility, wait, msgid, '
    'correlation, deq_condition) with their types, in order');
SELECT col_type_is('aq', 'dequeue_options', 'wait', 'interval', 'aq.dequeue_options.wait is interval');
SELECT col_type_is('aq', 'dequeue_options', 'msgid', 'bigint', 'aq.dequeue_options.msgid is bigint');

------------------------------------------------------------------------------ constructors: defaults

-- aq.message_properties(): priority 1, everything else NULL
SELECT is((aq.message_properties()).priority, 1, 'message_properties(): priority defaults to 1');
SELECT ok((aq.message_properties()).delay IS NULL, 'message_properties(): delay defaults to NULL (no delay)');
SELECT ok((aq.message_properties()).expiration IS NULL,
          'message_properties(): expiration defaults to NULL (never expires)');
SELECT ok((aq.message_properties()).correlation IS NULL, 'message_properties(): correlation defaults to NULL');
SELECT ok((aq.message_properties()).exception_queue IS NULL,
          'message_properties(): exception_queue defaults to NULL');
SELECT ok((aq.message_properties()).attempts IS NULL AND (aq.message_properties()).enqueue_time IS NULL
          AND (aq.message_properties()).state IS NULL,
          'message_properties(): attempts, enqueue_time, state are NULL (reported on dequeue only)');
SELECT is(aq.message_properties(),
          ROW(1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)::aq.message_properties,
          'message_properties() = (1,,,,,,,,,,)');
-- named arguments land in the right fields
SELECT is(aq.message_properties(exception_queue => 'eq', correlation => 'corr', expiration => '1 hour',
                                delay => '5 seconds', priority => 7, recipient_list => ARRAY[aq.agent('r')]),
          ROW(7, '5 seconds', '1 hour', 'corr', NULL, 'eq', NULL, NULL, ARRAY[aq.agent('r')], NULL, NULL)::aq.message_properties,
          'message_properties(named args) maps each argument to its field');

-- aq.enqueue_options(): on_commit, persistent
SELECT is((aq.enqueue_options()).visibility, 'on_commit', 'enqueue_options(): visibility defaults to on_commit');
SELECT is((aq.enqueue_options()).delivery_mode, 'persistent',
          'enqueue_options(): delivery_mode defaults to persistent');
SELECT is(aq.enqueue_options(delivery_mode => 'dm', visibility => 'vis'),
          ROW('vis', 'dm')::aq.enqueue_options, 'enqueue_options(named args) maps each argument to its field');

-- aq.dequeue_options(): remove, next_message, on_commit, wait forever (NULL)
SELECT ok((aq.dequeue_options()).consumer_name IS NULL, 'dequeue_options(): consumer_name defaults to NULL');
SELECT is((aq.dequeue_options()).dequeue_mode, 'remove', 'dequeue_options(): dequeue_mode defaults to remove');
SELECT is((aq.dequeue_options()).navigation, 'next_message',
          'dequeue_options(): navigation defaults to next_message');
SELECT is((aq.dequeue_options()).visibility, 'on_commit', 'dequeue_options(): visibility defaults to on_commit');
SELECT ok((aq.dequeue_options()).wait IS NULL, 'dequeue_options(): wait defaults to NULL (wait forever)');
SELECT ok((aq.dequeue_options()).msgid IS NULL, 'dequeue_options(): msgid defaults to NULL');
SELECT ok((aq.dequeue_options()).correlation IS NULL, 'dequeue_options(): correlation defaults to NULL');
SELECT ok((aq.dequeue_options()).deq_condition IS NULL, 'dequeue_options(): deq_condition defaults to NULL');
SELECT is(aq.dequeue_options(deq_condition => 'priority > 1', correlation => 'c%', msgid => 42, wait => '0',
                             visibility => 'vis', navigation => 'first_message', dequeue_mode => 'mode',
                             consumer_name => 'cons'),
          ROW('cons', 'mode', 'first_message', 'vis', '0', 42, 'c%', 'priority > 1')::aq.dequeue_options,
          'dequeue_options(named args) maps each argument to its field');
SELECT is((aq.dequeue_options(wait => '0')).wait, interval '0', 'dequeue_options(wait => ''0''): no wait');
SELECT is((aq.dequeue_options(wait => '5 s')).wait, interval '5 seconds', 'dequeue_options(wait => ''5 s'')');

------------------------------------------------------------------------------ catalog tables

SELECT has_table('aq', 'queue_tables', 'catalog table aq.queue_tables exists');
SELECT columns_are('aq', 'queue_tables',
                   ARRAY['queue_table_id', 'queue_table', 'table_schema', 'relid', 'payload_type', 'sort_list',
                         'comment', 'created', 'multiple_consumers', 'message_grouping', 'delivery_relid',
                         'segment_count'],
                   'aq.queue_tables has exactly the documented columns');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
       WHERE attrelid = 'aq.queue_tables'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('queue_table_id', 'integer', true), ('queue_table', 'text', true), ('table_schema', 'text', true),
             ('relid', 'regclass', true), ('payload_type', 'regtype', true), ('sort_list', 'text', true), ('comment', 'text', false),
             ('created', 'timestamp with time zone', true), ('multiple_consumers', 'boolean', true),
             ('message_grouping', 'text', true), ('delivery_relid', 'regclass', false),
             ('segment_count', 'smallint', true)$$,
    'aq.queue_tables column types and NOT NULL constraints');
SELECT has_pk('aq', 'queue_tables', 'aq.queue_tables has a primary key');
SELECT col_is_pk('aq', 'queue_tables', 'queue_table_id', 'aq.queue_tables primary key is queue_table_id');
SELECT col_is_unique('aq', 'queue_tables', ARRAY['queue_table'], 'aq.queue_tables.queue_table is unique');

SELECT has_table('aq', 'queues', 'catalog table aq.queues exists');
SELECT columns_are('aq', 'queues',
                   ARRAY['queue_id', 'queue_name', 'queue_table_id', 'enqueue_enabled', 'dequeue_enabled',
                         'max_retries', 'retry_delay', 'retention_time', 'comment', 'created', 'queue_type'],
                   'aq.queues has exactly the documented columns');
SELECT results_eq(
    $$SELECT attname::text COLLATE "default", format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
       WHERE attrelid = 'aq.queues'::regclass AND attnum > 0 AND NOT attisdropped ORDER BY attnum$$,
    $$VALUES ('queue_id', 'integer', true), ('queue_name', 'text', true), ('queue_table_id', 'integer', true),
             ('enqueue_enabled', 'boolean', true), ('dequeue_enabled', 'boolean', true),
             ('max_retries', 'integer', true), ('retry_delay', 'interval', true),
             ('retention_time', 'interval', true), ('comment', 'text', false),
             ('created', 'timestamp with time zone', true), ('queue_type', 'text', true)$$,
    'aq.queues column types and NOT NULL constraints');
SELECT has_pk('aq', 'queues', 'aq.queues has a primary key');
SELECT col_is_pk('aq', 'queues', 'queue_id', 'aq.queues primary key is queue_id');
SELECT col_is_unique('aq', 'queues', ARRAY['queue_name'], 'aq.queues.queue_name is unique');
SELECT fk_ok('aq', 'queues', 'queue_table_id', 'aq', 'queue_tables', 'queue_table_id',
             'aq.queues.queue_table_id references aq.queue_tables');
SELECT col_default_is('aq', 'queues', 'max_retries', '5', 'aq.queues.max_retries defaults to 5');
SELECT col_default_is('aq', 'queues', 'enqueue_enabled', 'false', 'aq.queues.enqueue_enabled defaults to false');
SELECT col_default_is('aq', 'queues', 'dequeue_enabled', 'false', 'aq.queues.dequeue_enabled defaults to false');
SELECT col_default_is('aq', 'queue_tables', 'sort_list', 'enq_time',
                      'aq.queue_tables.sort_list defaults to enq_time');
-- pg_dump keeps the catalog rows of the extension
SELECT results_eq(
    $$SELECT c::regclass::text COLLATE "default" FROM pg_extension e, unnest(e.extconfig) AS c WHERE e.extname = 'aq' ORDER BY 1$$,
    $$VALUES ('aq.fast_ingest_progress'), ('aq.fast_ingest_rejects'), ('aq.fast_ingest_tables'),
             ('aq.queue_segments'), ('aq.queue_tables'), ('aq.queue_tables_queue_table_id_seq'), ('aq.queues'),
             ('aq.queues_queue_id_seq'), ('aq.segment_log'), ('aq.subscribers'), ('aq.subscribers_subscriber_id_seq')$$,
    'aq''s catalog tables (queues, subscribers, ring segments and ledger, fast-ingest tables, rejects, progress) and id sequences are dumped by pg_dump');
-- the catalog starts empty
SELECT is_empty('SELECT * FROM aq.queue_tables', 'aq.queue_tables is empty in a fresh database');
SELECT is_empty('SELECT * FROM aq.queues', 'aq.queues is empty in a fresh database');

SELECT * FROM finish();
ROLLBACK;
