-- verify.sql: the database of test/upgrade/populate.sql, moved to a newer server, works at once.
--
--   psql -X -v ON_ERROR_STOP=1 -U postgres -d aq_moved -f test/upgrade/verify.sql
--
-- Run by tools/dump-restore-check on the restored database, after manifest.sql showed that
-- every message, property, grant and setting arrived.  It connects (\connect, so the restored
-- database-, role- and role-in-database settings apply as at any login) as each of populate's
-- roles and uses the queues as those roles: enqueue, dequeue, dequeue_array, exception
-- queues, privileges refused, delayed messages still held, new msgids above the old ones, a
-- rolled-back dequeue counted, the admin functions granted, fast ingest with its rejects and a
-- new epoch.  Each check prints "ok - ..." or "not ok - ..."; an unexpected error stops the
-- script at once (ON_ERROR_STOP), and any "not ok" makes it fail at the end: psql exits
-- non-zero either way.  It changes the database (it is run on a throwaway copy).
\set ON_ERROR_STOP 1
\set QUIET 1
\pset tuples_only on
\pset format unaligned

------------------------------------------------------------------------------ helpers (as the superuser)
CREATE SCHEMA aq_verify;
GRANT USAGE ON SCHEMA aq_verify TO PUBLIC;
CREATE TABLE aq_verify.results (passed boolean NOT NULL, what text NOT NULL, as_role text NOT NULL);
CREATE TABLE aq_verify.got (queue text, msgid bigint, id integer, priority integer, corrid text,
                            attempts integer, state text, exception_queue text, expiration interval, as_role text,
                            n bigint);   -- the position in a dequeue_array's result
GRANT INSERT, SELECT ON aq_verify.results, aq_verify.got TO PUBLIC;
-- Records one check and says how it went.
CREATE FUNCTION aq_verify.ok(passed boolean, what text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO aq_verify.results VALUES (coalesce(passed, false), what, current_user);
    RETURN CASE WHEN coalesce(passed, false) THEN 'ok - ' ELSE 'not ok - ' END || what || ' (as ' || current_user || ')';
END $$;
-- A fixed statement of this script must fail with this SQLSTATE.
CREATE FUNCTION aq_verify.fails(statement text, expected text, what text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE got text := 'no error';
BEGIN
    BEGIN
        EXECUTE statement;
    EXCEPTION WHEN OTHERS THEN
        got := SQLSTATE;
    END;
    RETURN aq_verify.ok(got = expected, format('%s: %s (expected %s)', what, got, expected));
END $$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA aq_verify TO PUBLIC;

-- What was restored, before anything changes it.
CREATE TABLE aq_verify.before AS
SELECT (SELECT max(msgid) FROM ONLY app.orders_qt) AS orders_max,
       (SELECT max(msgid) FROM ONLY public.events_qt) AS events_max,
       (SELECT array_agg(epoch) FROM aq.fast_ingest_progress) AS epochs,
       (SELECT max(seqid) FROM aq.fast_ingest_rejects) AS reject_max;
GRANT SELECT ON aq_verify.before TO PUBLIC;

SELECT aq_verify.ok(extversion = (SELECT default_version FROM pg_available_extensions WHERE name = 'aq'),
                    'the extension is the installed aq''s default version') FROM pg_extension WHERE extname = 'aq';
SELECT aq_verify.ok(current_setting('shared_preload_libraries') ~ '(^|[ ,])aq([ ,]|$)', 'aq is preloaded');
SELECT aq_verify.ok(commit_wait = 'nowait' AND commit_logging = 'batch'
                    AND wait_decided_by LIKE '%(database)' AND logging_decided_by LIKE '%(database)',
                    format('commit mode from the database level: %s/%s by %s, %s', commit_wait, commit_logging,
                           wait_decided_by, logging_decided_by))
  FROM aq.commit_mode();
SELECT aq_verify.ok(count(*) = 4, format('messages delayed by 30 days still waiting in the aq$ view: %s of 4', count(*)))
  FROM app."aq$orders_qt" WHERE msg_state = 'WAITING' AND delay > now() + interval '29 days';
SELECT aq_verify.ok(count(*) = 1, 'the expired message in orders_xq is EXPIRED in the aq$ view')
  FROM app."aq$orders_qt" WHERE queue = 'orders_xq' AND corr_id = 'expired-101' AND msg_state = 'EXPIRED';
-- A queue whose dequeue is disabled, and one never started, keep that state.
SELECT aq_verify.fails($$SELECT aq.dequeue('notes_q', NULL::text, aq.dequeue_options(wait => '0'))$$, '55000',
                       'dequeue from notes_q (dequeue disabled)');
SELECT aq_verify.fails($$SELECT aq.enqueue('events_stopped_q', '{}'::jsonb)$$, '55000',
                       'enqueue into events_stopped_q (never started)');

------------------------------------------------------------------------------ the producer
\connect - aq_mv_producer
\set ON_ERROR_STOP 1
SELECT aq_verify.ok(commit_wait = 'nowait' AND commit_logging = 'immediate' AND wait_decided_by LIKE '%(role)',
                    format('commit mode from the role level: %s/%s by %s', commit_wait, commit_logging, wait_decided_by))
  FROM aq.commit_mode();
SELECT aq_verify.ok(aq.enqueue('orders_q', ROW(1001, 'after the move', 9.99, ARRAY['new'])::app.order_t,
                               aq.message_properties(priority => 1, correlation => 'order-1001')) > orders_max,
                    'enqueue into orders_q (ENQUEUE through role aq_mv_team): a msgid above the old ones')
  FROM aq_verify.before;
SELECT aq_verify.ok(min(id) > orders_max AND count(*) = 3,
                    'enqueue_array into orders_q: 3 msgids above the old ones')
  FROM aq.enqueue_array('orders_q', ARRAY[ROW(1002, 'a', 1, NULL), ROW(1003, 'b', 2, NULL), ROW(1004, 'c', 3, NULL)]::app.order_t[],
                        ARRAY[aq.message_properties(priority => 5), aq.message_properties(priority => 5, delay => '30 days'),
                              aq.message_properties(priority => 5)]) AS e(ids),
       unnest(e.ids) AS id, aq_verify.before
 GROUP BY orders_max;
SELECT aq_verify.ok(aq.enqueue('events_q', '{"n": 11, "kind": "after"}'::jsonb,
                               aq.message_properties(correlation => 'ev-11')) > events_max,
                    'enqueue into events_q (ALL): a msgid above the old ones')
  FROM aq_verify.before;
SELECT aq_verify.ok(aq.enqueue('notes_q', 'note after the move'::text) IS NOT NULL, 'enqueue into notes_q (enqueue only)');
SELECT aq_verify.fails($$SELECT aq.dequeue('orders_q', NULL::app.order_t, aq.dequeue_options(wait => '0'))$$, '42501',
                       'dequeue from orders_q without DEQUEUE');
SELECT aq_verify.fails($$SELECT aq.enqueue('orders_xq', ROW(1, 'x', 1, NULL)::app.order_t)$$, '55000',
                       'enqueue into the exception queue orders_xq');

------------------------------------------------------------------------------ the auditor (DEQUEUE granted by the consumer)
\connect - aq_mv_auditor
\set ON_ERROR_STOP 1
INSERT INTO aq_verify.got
SELECT 'events_q', msgid, (payload->>'n')::integer, (message_properties).priority, (message_properties).correlation,
       (message_properties).attempts, (message_properties).state, (message_properties).exception_queue,
       (message_properties).expiration, current_user
  FROM aq.dequeue('events_q', NULL::jsonb, aq.dequeue_options(correlation => 'ev-3', wait => '0'));
SELECT aq_verify.ok(count(*) = 1, 'dequeue by correlation from events_q (DEQUEUE granted by a grantee)')
  FROM aq_verify.got WHERE as_role = current_user AND corrid = 'ev-3' AND id = 3 AND priority = 3;
SELECT aq_verify.fails($$SELECT aq.enqueue('events_q', '{}'::jsonb)$$, '42501', 'enqueue into events_q without ENQUEUE');

------------------------------------------------------------------------------ the consumer
\connect - aq_mv_consumer
\set ON_ERROR_STOP 1
SELECT aq_verify.ok(commit_wait = 'force_wait' AND forced,
                    format('commit mode from the role-in-database level: %s, forced %s', commit_wait, forced))
  FROM aq.commit_mode();
-- Still delayed (30 days): not dequeuable, by correlation or otherwise.
SELECT aq_verify.fails($$SELECT aq.dequeue('orders_q', NULL::app.order_t, aq.dequeue_options(correlation => 'order-8', wait => '0'))$$,
                       'QA228', 'dequeue of order-8, delayed by 30 days');
-- Due 5 s after it was enqueued: the dequeue waits for it if it is not due yet.
INSERT INTO aq_verify.got
SELECT 'orders_q', msgid, (payload).id, (message_properties).priority, (message_properties).correlation,
       (message_properties).attempts, (message_properties).state, (message_properties).exception_queue,
       (message_properties).expiration, current_user
  FROM aq.dequeue('orders_q', NULL::app.order_t, aq.dequeue_options(correlation => 'order-40', wait => '60 s'));
-- A rolled-back dequeue is an attempt on the new server too.
BEGIN;
SELECT aq_verify.ok((payload).id = 1001, 'locked dequeue by correlation: order-1001')
  FROM aq.dequeue('orders_q', NULL::app.order_t, aq.dequeue_options(correlation => 'order-1001', dequeue_mode => 'locked', wait => '0'));
ROLLBACK;
SELECT aq_verify.ok(retry_count = 1, format('the rolled-back dequeue counted: retry_count %s', retry_count))
  FROM app.orders_qt WHERE corrid = 'order-1001';
-- Everything ready, in the queue table's order (priority, then enqueue time).
INSERT INTO aq_verify.got
SELECT 'orders_q', msgid, (payload).id, (message_properties).priority, (message_properties).correlation,
       (message_properties).attempts, (message_properties).state, (message_properties).exception_queue,
       (message_properties).expiration, current_user, n
  FROM aq.dequeue_array('orders_q', NULL::app.order_t, 100, aq.dequeue_options(wait => '0'))
       WITH ORDINALITY AS d(msgid, payload, message_properties, n);
SELECT aq_verify.ok(count(*) = 39 AND sum(id) = (SELECT sum(i) FROM generate_series(1, 40) i WHERE i % 8 <> 0) + 40 + 1001 + 1002 + 1004,
                    format('orders_q: %s messages dequeued, the ready ones of before and after the move', count(*)))
  FROM aq_verify.got WHERE queue = 'orders_q';
SELECT aq_verify.ok(bool_and(g.priority = 1 + g.id % 5 AND g.corrid = 'order-' || g.id
                             AND (g.exception_queue IS NOT DISTINCT FROM CASE WHEN g.id % 5 = 0 THEN 'orders_xq' END)
                             AND ((g.expiration IS NOT NULL) = (g.id % 5 = 0)) AND g.attempts = 0 AND g.state = 'ready'),
                    'orders_q: every restored message has its priority, correlation, expiration and exception queue')
  FROM aq_verify.got g WHERE queue = 'orders_q' AND id <= 40;
SELECT aq_verify.ok(bool_and(ordered), 'dequeue_array delivered in priority order')
  FROM (SELECT priority >= lag(priority, 1, priority) OVER (ORDER BY n) AS ordered
          FROM aq_verify.got WHERE queue = 'orders_q' AND n IS NOT NULL) o;
SELECT aq_verify.fails($$SELECT aq.dequeue('orders_q', NULL::app.order_t, aq.dequeue_options(wait => '0'))$$, 'QA228',
                       'orders_q holds only delayed messages now');
-- The exception queues: an expired message and one past max_retries in orders_xq, one
-- expired message in the default exception queue.
INSERT INTO aq_verify.got
SELECT 'orders_xq', msgid, (payload).id, (message_properties).priority, (message_properties).correlation,
       (message_properties).attempts, (message_properties).state, (message_properties).exception_queue,
       (message_properties).expiration, current_user
  FROM aq.dequeue_array('orders_xq', NULL::app.order_t, 10, aq.dequeue_options(wait => '0'));
SELECT aq_verify.ok(string_agg(format('%s:%s:%s', id, state, attempts), ',' ORDER BY id) = '101:expired:0,201:expired:1',
                    format('orders_xq: %s', string_agg(format('%s:%s:%s', id, state, attempts), ',' ORDER BY id)))
  FROM aq_verify.got WHERE queue = 'orders_xq';
SELECT aq_verify.ok((payload).id IN (102, 103) AND (message_properties).state = 'expired',
                    'the default exception queue aq$_orders_qt_e holds an expired message')
  FROM aq.dequeue('aq$_orders_qt_e', NULL::app.order_t, aq.dequeue_options(wait => '0'));
-- events_q: the 8 ready messages of before (less the auditor's) and the producer's new one.
SELECT aq_verify.ok(count(*) = 8 AND sum((payload->>'n')::integer) = 1 + 2 + 4 + 5 + 6 + 7 + 8 + 11,
                    format('events_q: %s messages by dequeue_array', count(*)))
  FROM aq.dequeue_array('events_q', NULL::jsonb, 100, aq.dequeue_options(wait => '0'));
SELECT aq_verify.fails($$SELECT aq.enqueue('orders_q', ROW(1, 'x', 1, NULL)::app.order_t)$$, '42501',
                       'enqueue into orders_q without ENQUEUE');

------------------------------------------------------------------------------ the queue tables' owner
\connect - aq_mv_owner
\set ON_ERROR_STOP 1
SELECT aq.create_queue('after_q', 'orders_qt');
SELECT aq.start_queue('after_q');
SELECT aq_verify.ok(aq.enqueue('after_q', ROW(2001, 'new queue', 1, NULL)::app.order_t) > orders_max,
                    'the admin functions granted to the owner: a new queue in orders_qt')
  FROM aq_verify.before;
SELECT aq_verify.ok((payload).id = 2001, 'dequeue from the new queue')
  FROM aq.dequeue('after_q', NULL::app.order_t, aq.dequeue_options(wait => '5 s'));
SELECT aq.stop_queue('after_q');
SELECT aq.drop_queue('after_q');
SELECT aq_verify.fails($$SELECT aq.create_queue('stolen_q', 'events_qt')$$, '42501',
                       'create_queue in another role''s queue table');

------------------------------------------------------------------------------ the fast-ingest writer
\connect - aq_mv_writer
\set ON_ERROR_STOP 1
SELECT aq_verify.ok(current_setting('aq.memoptimize_write') = 'on', 'aq.memoptimize_write from the role-in-database level');
SELECT aq_verify.ok(count(*) = 2 AND bool_and(role_name = current_user),
                    format('the restored rejects are the writer''s own: %s', string_agg(sqlstate, ',' ORDER BY sqlstate)))
  FROM aq.fast_ingest_rejects;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO app.readings (id, v) SELECT i, 'after ' || i FROM generate_series(1001, 1010) i;
INSERT INTO app.readings (id, v) VALUES (1011, 'plain insert, memoptimize_write = on'), (1012, 'bad'), (1, 'duplicate of 1');
SELECT aq.write_end('60 s');
SELECT aq_verify.ok(count(*) = 101 + 11, format('fast ingest applies rows on the new server: %s rows', count(*)))
  FROM app.readings;
SELECT aq_verify.ok(count(*) = 4, format('fast ingest rejects rows on the new server: %s rejects', count(*)))
  FROM aq.fast_ingest_rejects;
SELECT aq_verify.ok(NOT (aq.seqid_epoch(aq.get_write_hwm_seqid()) = ANY (coalesce(epochs, '{}'))),
                    format('the new server''s fast-ingest epoch %s is none of the restored ones %s',
                           aq.seqid_epoch(aq.get_write_hwm_seqid()), epochs))
  FROM aq_verify.before;
SELECT aq_verify.ok(count(*) = 2, format('the new rejects have ids of their own (%s of 2 above the restored ones)', count(*)))
  FROM aq.fast_ingest_rejects, aq_verify.before
 WHERE seqid > reject_max AND aq.seqid_epoch(seqid) <> ALL (coalesce(epochs, '{}'));

------------------------------------------------------------------------------ a ring queue table
\connect - postgres
\set ON_ERROR_STOP 1
-- The ring: its segments and ledger arrived by name; the messages come in order from two segments,
-- and a new one goes into the current segment (the third).
SELECT aq_verify.ok(aq.enqueue('ring_q', 'ring 4'::text) IS NOT NULL, 'enqueue into the ring');
SELECT aq_verify.ok(tableoid = 'ring_qt$2'::regclass, format('the new message is in the current segment: %s', tableoid::regclass))
  FROM ring_qt WHERE user_data = 'ring 4';
SELECT aq_verify.ok(string_agg(payload, ',' ORDER BY ord) = 'ring 1,ring 2,ring 3,ring 4',
                    format('the ring dequeues in order across its segments: %s', string_agg(payload, ',' ORDER BY ord)))
  FROM aq.dequeue_array('ring_q', NULL::text, 10, aq.dequeue_options(wait => '0')) WITH ORDINALITY d(msgid, payload, props, ord);
-- The converted ring: the table's own messages first, then its segment's; a new one goes into the
-- current segment.
SELECT aq_verify.ok(aq.enqueue('conv_q', 'conv 4'::text) IS NOT NULL, 'enqueue into the converted ring');
SELECT aq_verify.ok(tableoid = 'conv_qt$1'::regclass, format('the new message is in the current segment: %s', tableoid::regclass))
  FROM conv_qt WHERE user_data = 'conv 4';
SELECT aq_verify.ok(string_agg(payload, ',' ORDER BY ord) = 'conv 1,conv 2,conv 3,conv 4',
                    format('the converted ring dequeues in order: %s', string_agg(payload, ',' ORDER BY ord)))
  FROM aq.dequeue_array('conv_q', NULL::text, 10, aq.dequeue_options(wait => '0')) WITH ORDINALITY d(msgid, payload, props, ord);
-- The grouped ring: group a whole and in order from both segments, then group b.
SELECT aq_verify.ok(string_agg(payload || CASE WHEN (props).end_of_group THEN '*' ELSE '' END, ',' ORDER BY ord) = 'a 1,a 2,a 3*',
                    format('the grouped ring hands out a group spanning a switch whole: %s',
                           string_agg(payload || CASE WHEN (props).end_of_group THEN '*' ELSE '' END, ',' ORDER BY ord)))
  FROM aq.dequeue_array('grp_ring_q', NULL::text, 10, aq.dequeue_options(wait => '0', navigation => 'first_message'))
       WITH ORDINALITY d(msgid, payload, props, ord);
SELECT aq_verify.ok(string_agg(payload, ',' ORDER BY ord) = 'b 1', format('then the next group: %s', string_agg(payload, ',' ORDER BY ord)))
  FROM aq.dequeue_array('grp_ring_q', NULL::text, 10, aq.dequeue_options(wait => '0', navigation => 'next_transaction'))
       WITH ORDINALITY d(msgid, payload, props, ord);
-- The multi-consumer ring: A's receipt arrived (it gets the second message only), B gets both; the
-- view shows what each took.
SELECT aq_verify.ok(string_agg(payload, ',' ORDER BY ord) = 'once 2',
                    format('the multi-consumer ring keeps what A took: %s', string_agg(payload, ',' ORDER BY ord)))
  FROM aq.dequeue_array('once_ring_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'A', wait => '0'))
       WITH ORDINALITY d(msgid, payload, props, ord);
SELECT aq_verify.ok(string_agg(payload, ',' ORDER BY ord) = 'once 1,once 2',
                    format('and B gets every message: %s', string_agg(payload, ',' ORDER BY ord)))
  FROM aq.dequeue_array('once_ring_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'B', wait => '0'))
       WITH ORDINALITY d(msgid, payload, props, ord);
SELECT aq_verify.ok(count(*) = 4 AND bool_and(msg_state = 'PROCESSED'),
                    format('its view: %s', string_agg(consumer_name || ' ' || msg_state, ', ' ORDER BY msg_id, consumer_name)))
  FROM "aq$once_ring_qt";

------------------------------------------------------------------------------ the result
\connect - postgres
\set ON_ERROR_STOP 1
SELECT format('verify: %s checks, %s failed%s', count(*), count(*) FILTER (WHERE NOT passed),
              coalesce(': ' || string_agg(what || ' (as ' || as_role || ')', '; ') FILTER (WHERE NOT passed), ''))
  FROM aq_verify.results;
SELECT count(*) FILTER (WHERE NOT passed) = 0 AND count(*) > 0 AS all_passed FROM aq_verify.results \gset
\if :all_passed
\else
DO $$ BEGIN RAISE EXCEPTION 'verify: some checks failed (see "not ok" above)'; END $$;
\endif
