-- pgTAP: what PUBLIC may EXECUTE in schema aq, compared with the documented set, so that a new
-- function cannot become callable by every role without this list saying so (hardening 6).
-- Assumes CREATE EXTENSION pgtap; CREATE EXTENSION aq; were run in the database.  Run as a
-- superuser; everything is rolled back.
BEGIN;
SELECT plan(7);
SET LOCAL search_path = public;

-- The documented set.  The API: DBMS_AQ (enqueue, dequeue and their option constructors),
-- commit modes, fast ingest (enable/disable check that the caller owns the table; writes_flush
-- is not here).  The internal helpers here are called by the admin functions, which run as the
-- caller (a queue table's owner), by the catalog's row-level security policies (_manages,
-- _registrable) and by the aq.memoptimize_write_area view (_memoptimize_write_area): PostgreSQL
-- checks EXECUTE against the calling role there, so they must stay executable.  Each acts with
-- the caller's own rights or only reads what PUBLIC may read anyway.
CREATE TEMP TABLE documented (sig text PRIMARY KEY, why text NOT NULL);
INSERT INTO documented VALUES
    ('aq.enqueue(text,anyelement,aq.message_properties,aq.enqueue_options)', 'API'),
    ('aq.enqueue_array(text,anyarray,aq.message_properties[],aq.enqueue_options)', 'API'),
    ('aq.dequeue(text,anyelement,aq.dequeue_options)', 'API'),
    ('aq.dequeue_array(text,anyelement,integer,aq.dequeue_options)', 'API'),
    ('aq.message_properties(integer,interval,interval,text,text,aq.agent[])', 'API'),
    ('aq.enqueue_options(text,text)', 'API'),
    ('aq.dequeue_options(text,text,text,text,aq.wait_time,bigint,text,text)', 'API'),
    ('aq._queue_health()', 'the aq.queue_health view (counts only the queue tables the caller may read)'),
    ('aq._backlog_query(aq.queue_tables)', 'builds aq._queue_health''s statement (text only; runs nothing)'),
    ('aq._receipts_shape(oid)', 'aq.queue_segments'' policy: whether a table has a receipts table''s columns'),
    ('aq._message_recipients(integer,bigint,text[])', 'who a message of a multi-consumer ring is for: the aq$<qt> view and aq.queue_health inline it (reads aq.subscribers as the caller)'),
    ('aq._subscriber_receives(bigint,bigint,text[])', 'whether a subscriber receives a message of a multi-consumer ring (computes only; inlined)'),
    ('aq._taken_ranges("char",bigint[])', 'what a receipt of a multi-consumer ring took: the aq$<qt> view and aq.queue_health inline it (computes only)'),
    ('aq._queue_monitor()', 'the aq.queue_monitor view (the time manager''s state; its last error only to pg_read_all_stats)'),
    ('aq._wait_time(smallint)', 'the casts to aq.wait_time'),
    ('aq._wait_time(integer)', 'the casts to aq.wait_time'),
    ('aq._wait_time(bigint)', 'the casts to aq.wait_time'),
    ('aq._wait_time(numeric)', 'the casts to aq.wait_time'),
    ('aq._wait_time(double precision)', 'the casts to aq.wait_time'),
    ('aq._wait_time(interval)', 'the casts to aq.wait_time'),
    ('aq._wait_interval(aq.wait_time)', 'aq.dequeue_options() (as the caller)'),
    ('aq._wait_time_in(cstring)', 'the type aq.wait_time'),
    ('aq._wait_time_out(aq.wait_time)', 'the type aq.wait_time'),
    ('aq._wait_time_recv(internal)', 'the type aq.wait_time'),
    ('aq._wait_time_send(aq.wait_time)', 'the type aq.wait_time'),
    ('aq.purge_condition(text,text,text,timestamp with time zone,bigint[])', 'API'),
    ('aq.agent(text,text,integer)', 'API'),
    ('aq.listen(aq.agent[],aq.wait_time)', 'API: reads only queues whose tables the caller may read'),
    ('aq.consumer_info(text)', 'API: reports only queues whose tables the caller may read'),
    ('aq.commit(text)', 'commit modes'),
    ('aq.commit_mode()', 'commit modes'),
    ('aq.commit_settings()', 'commit modes'),
    ('aq.last_commit()', 'commit modes'),
    ('aq.commit_stats(boolean)', 'commit modes'),
    ('aq.enable_fast_ingest(regclass)', 'fast ingest, table owners'),
    ('aq.disable_fast_ingest(regclass)', 'fast ingest, table owners'),
    ('aq.get_write_hwm_seqid()', 'fast ingest'),
    ('aq.get_apply_hwm_seqid()', 'fast ingest'),
    ('aq.write_end(interval)', 'fast ingest'),
    ('aq.seqid_epoch(bigint)', 'fast ingest'),
    ('aq._memoptimize_write_area()', 'the aq.memoptimize_write_area view'),
    ('aq._manages(oid)', 'row-level security of aq.queue_tables and aq.queues'),
    ('aq._registrable(oid)', 'row-level security of aq.queue_tables'),
    ('aq._check_name(text,text)', 'admin functions: validation'),
    ('aq._check_interval(text,interval)', 'admin functions: validation'),
    ('aq._default_exception_queue(text)', 'admin functions: a name'),
    ('aq._queue_table_view(text)', 'admin functions: a name'),
    ('aq._check_owner(aq.queue_tables)', 'admin functions: ownership check'),
    ('aq._check_grantor(aq.queue_tables,text)', 'admin functions: grant check'),
    ('aq._once_read_grants(aq.queue_tables,boolean,text,boolean)', 'privilege functions: GRANT and REVOKE as the caller'),
    ('aq._queue_table_objects(aq.queue_tables)', 'admin functions: DDL as the caller'),
    ('aq._drop_dependent_view(regclass,text)', 'admin functions: DDL as the caller'),
    ('aq._segment_indexes(aq.queue_tables,regclass)', 'admin functions: DDL as the caller (checks ownership)'),
    ('aq._create_segments(aq.queue_tables)', 'admin functions: DDL as the caller (checks ownership)'),
    ('aq._message_view(aq.queue_tables,boolean)', 'admin functions: DDL as the caller (checks ownership)'),
    ('aq._delivery_table(text)', 'admin functions: a name'),
    ('aq._subscriber_view(text)', 'admin functions: a name'),
    ('aq._subscribed_queue(text,aq.agent)', 'subscriber functions: ownership and argument checks'),
    ('aq._check_rule(regclass,text)', 'subscriber functions: a rule parsed and analyzed, nothing run'),
    ('aq._manages_queue(integer)', 'row-level security of aq.subscribers'),
    ('aq._owned_queue(text)', 'admin functions: catalog read'),
    ('aq._queue_table(text)', 'admin functions: catalog read'),
    ('aq._queue(text)', 'admin functions: catalog read'),
    ('aq._queue_relation(aq.queue_tables)', 'admin functions: catalog read'),
    ('aq._queue_privileges(text)', 'admin functions: privilege names'),
    ('aq._enqueue_grant()', 'admin functions: privilege names'),
    ('aq._dequeue_grant()', 'admin functions: privilege names'),
    ('aq._grantee(text)', 'admin functions: role name'),
    ('aq._claimable(oid,tid)', 'the dequeue statement''s filter of uncounted attempts (checks SELECT itself)');

CREATE TEMP VIEW public_executes AS
    SELECT p.oid::regprocedure::text AS sig FROM pg_proc p
     WHERE p.pronamespace = 'aq'::regnamespace AND has_function_privilege('public', p.oid, 'EXECUTE');

SELECT set_eq('SELECT sig FROM public_executes', 'SELECT sig FROM documented',
              'PUBLIC may EXECUTE exactly the documented functions of schema aq');
SELECT is_empty($$SELECT sig FROM public_executes p JOIN pg_proc f ON f.oid = p.sig::regprocedure
                   WHERE f.prosecdef$$,
                'none of them is SECURITY DEFINER');
SELECT is_empty($$SELECT sig FROM public_executes p JOIN pg_proc f ON f.oid = p.sig::regprocedure
                   JOIN pg_language l ON l.oid = f.prolang
                   WHERE l.lanname = 'c' AND p.sig LIKE 'aq.\_%' AND p.sig NOT IN ('aq._memoptimize_write_area()', 'aq._queue_monitor()', 'aq._claimable(oid,tid)', 'aq._check_rule(regclass,text)')
                     AND p.sig NOT LIKE 'aq.\_wait\_%'$$,
                'no internal C function but the views'', the dequeue statement''s, the rule check and aq.wait_time''s conversions is executable by PUBLIC');
SELECT hasnt_function('aq', '_wake_waiters', ARRAY['integer'],
                      'aq._wake_waiters is gone: any role could wake (and spin) any queue''s waiters');
SELECT ok(NOT has_function_privilege('public', 'aq._queues_changed()', 'EXECUTE'),
          'the trigger function that wakes waiters is not executable by PUBLIC');
SELECT trigger_is('aq', 'queues', 'queues_changed', 'aq', '_queues_changed',
                  'aq.queues wakes waiting dequeues through its trigger queues_changed');
-- A role with no grants cannot call it (and a trigger function cannot be called anyway).
CREATE ROLE aq_tap_px_none NOLOGIN;
SET LOCAL ROLE aq_tap_px_none;
SELECT throws_ok('SELECT aq._queues_changed()', '42501', NULL, 'a role without grants cannot call aq._queues_changed()');
RESET ROLE;

SELECT * FROM finish();
ROLLBACK;
