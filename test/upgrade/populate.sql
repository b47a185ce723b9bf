-- populate.sql: builds the database that tools/dump-restore-check moves to a newer server.
--
--   psql -X -v ON_ERROR_STOP=1 -U postgres -d postgres -f test/upgrade/populate.sql
--
-- Run as a superuser on a PostgreSQL 15 cluster with shared_preload_libraries = 'aq' and aq
-- 0.5.0 installed (tools/dump-restore-source does both).  It creates the roles aq_mv_*, the
-- database aq_moved and in it, through aq's public API only:
--   - queue tables of a composite type (sort order priority,enq_time, in schema app, owned
--     by aq_mv_owner), of jsonb and of text (the superuser's, in schema public);
--   - waiting messages with every property: priority, correlation, delays that are still in
--     the future after the move (30 days) and one that falls due soon after it (5 s),
--     expiration, a named exception queue;
--   - messages already moved to exception queues: expired ones, and one whose attempts
--     passed max_retries;
--   - a started, a stopped and a dequeue-disabled queue;
--   - queue privileges (ENQUEUE, DEQUEUE WITH GRANT OPTION, a grant made by that grantee),
--     EXECUTE on the admin functions for the queue tables' owner;
--   - a ring queue table (segments => 3) with messages in two of its segments, a classic queue
--     table made a ring (messages in the table and in a segment), a grouped ring (a group
--     spanning a switch), and a multi-consumer ring (each message stored once, a receipt);
--   - a fast-ingest table with applied rows and rejected ones (kept with their error);
--   - commit modes at database level (ALTER DATABASE ... SET), role level (ALTER ROLE ... SET)
--     and role-in-database level (ALTER ROLE ... IN DATABASE ... SET).
-- test/upgrade/manifest.sql lists all of it; test/upgrade/verify.sql checks the moved copy.
\set ON_ERROR_STOP 1
\set QUIET 1
\o /dev/null

CREATE ROLE aq_mv_owner LOGIN;       -- owns queue tables in schema app
CREATE ROLE aq_mv_producer LOGIN;    -- ENQUEUE
CREATE ROLE aq_mv_consumer LOGIN;    -- DEQUEUE (WITH GRANT OPTION on events_qt)
CREATE ROLE aq_mv_auditor LOGIN;     -- DEQUEUE on events_qt, granted by aq_mv_consumer
CREATE ROLE aq_mv_writer LOGIN;      -- fast-ingest writer
CREATE ROLE aq_mv_team NOLOGIN;      -- a group: the producer is a member
GRANT aq_mv_team TO aq_mv_producer;

-- LOCALE 'C': the newer cluster may have other locales.
CREATE DATABASE aq_moved TEMPLATE template0 ENCODING 'UTF8' LOCALE 'C';
\connect aq_moved
\set ON_ERROR_STOP 1
\set QUIET 1
\o /dev/null
CREATE EXTENSION aq;

------------------------------------------------------------------------------ commit modes
ALTER DATABASE aq_moved SET aq.commit_wait = 'nowait';
ALTER DATABASE aq_moved SET aq.commit_logging = 'batch';
ALTER ROLE aq_mv_producer SET aq.commit_write = 'immediate,nowait';
ALTER ROLE aq_mv_consumer IN DATABASE aq_moved SET aq.commit_wait = 'force_wait';
ALTER ROLE aq_mv_writer IN DATABASE aq_moved SET aq.memoptimize_write = on;

------------------------------------------------------------------------------ the owner's queue table
CREATE SCHEMA app;
CREATE TYPE app.order_t AS (id integer, item text, amount numeric(10,2), tags text[]);
GRANT USAGE, CREATE ON SCHEMA app TO aq_mv_owner;
GRANT USAGE ON SCHEMA app TO aq_mv_producer, aq_mv_consumer, aq_mv_auditor, aq_mv_writer;
GRANT EXECUTE ON FUNCTION aq.create_queue_table, aq.drop_queue_table,
      aq.create_queue(text, text, integer, interval, interval, text, text),
      aq.alter_queue, aq.start_queue, aq.stop_queue, aq.drop_queue, aq.purge_queue_table,
      aq.grant_queue_privilege, aq.revoke_queue_privilege TO aq_mv_owner;

SET ROLE aq_mv_owner;
SELECT aq.create_queue_table('orders_qt', 'app.order_t', sort_list => 'priority,enq_time',
                             comment => 'orders', queue_table_schema => 'app');
SELECT aq.create_queue('orders_q', 'orders_qt', max_retries => 3, retry_delay => '0', comment => 'orders to ship');
SELECT aq.create_queue('orders_xq', 'orders_qt', queue_type => 'exception_queue', comment => 'failed orders');
SELECT aq.create_queue('poison_q', 'orders_qt', max_retries => 0);
SELECT aq.start_queue('orders_q');
SELECT aq.start_queue('poison_q');
SELECT aq.start_queue('orders_xq', enqueue => false);
SELECT aq.start_queue('aq$_orders_qt_e', enqueue => false);
SELECT aq.grant_queue_privilege('ENQUEUE', 'orders_q', 'aq_mv_team');
SELECT aq.grant_queue_privilege('DEQUEUE', 'orders_q', 'aq_mv_consumer');
RESET ROLE;

-- 40 orders: priorities 1..5, a correlation each, every 8th delayed by 30 days, every 5th
-- expiring in 7 days into orders_xq, the last with a delay that falls due 5 s from now.
SET ROLE aq_mv_producer;
SELECT cardinality(aq.enqueue_array('orders_q',
         array_agg(ROW(i, 'item ' || i, i * 1.25, ARRAY['t' || i, NULL])::app.order_t ORDER BY i),
         array_agg(aq.message_properties(
             priority => 1 + i % 5,
             delay => CASE WHEN i = 40 THEN interval '5 s' WHEN i % 8 = 0 THEN interval '30 days' END,
             expiration => CASE WHEN i % 5 = 0 THEN interval '7 days' END,
             correlation => 'order-' || i,
             exception_queue => CASE WHEN i % 5 = 0 THEN 'orders_xq' END) ORDER BY i))) AS orders
  FROM generate_series(1, 40) i;
-- Expired at once: one into the named exception queue, two into the default one.
SELECT aq.enqueue('orders_q', ROW(101, 'expired named', 1, NULL)::app.order_t,
                  aq.message_properties(expiration => '0', correlation => 'expired-101', exception_queue => 'orders_xq'));
SELECT aq.enqueue('orders_q', ROW(102, 'expired default', 2, NULL)::app.order_t,
                  aq.message_properties(expiration => '0', correlation => 'expired-102'));
SELECT aq.enqueue('orders_q', ROW(103, 'expired default', 3, NULL)::app.order_t,
                  aq.message_properties(expiration => '0', correlation => 'expired-103'));
-- A poison message: max_retries 0, so one rolled-back dequeue sends it to orders_xq.
SELECT aq.enqueue('poison_q', ROW(201, 'poison', 0, NULL)::app.order_t,
                  aq.message_properties(correlation => 'poison-201', exception_queue => 'orders_xq'));
RESET ROLE;

SET ROLE aq_mv_consumer;
BEGIN;
SELECT (payload).item FROM aq.dequeue('poison_q', NULL::app.order_t, aq.dequeue_options(wait => '0'));
ROLLBACK;
-- Reading an exception queue moves the expired messages: 101 to orders_xq, 102 and 103 to
-- the default one, where one of them is taken now.
SELECT (payload).id AS taken_from_default_exception_queue
  FROM aq.dequeue('aq$_orders_qt_e', NULL::app.order_t, aq.dequeue_options(wait => '0'));
RESET ROLE;
DO $$
BEGIN
    IF (SELECT count(*) FROM "app"."aq$orders_qt" WHERE queue = 'orders_xq') <> 2
       OR (SELECT count(*) FROM "app"."aq$orders_qt" WHERE queue = 'aq$_orders_qt_e') <> 1 THEN
        RAISE EXCEPTION 'populate: the exception queues do not hold what they should'
            USING DETAIL = (SELECT string_agg(format('%s %s %s', queue, msg_id, corr_id), ', ' ORDER BY msg_id)
                              FROM "app"."aq$orders_qt");
    END IF;
END $$;

------------------------------------------------------------------------------ the superuser's queue tables
CREATE TABLE public.plain_table (n integer);   -- an ordinary table beside them
SELECT aq.create_queue_table('events_qt', 'jsonb', comment => 'events');
SELECT aq.create_queue('events_q', 'events_qt', max_retries => 5, retry_delay => '10 s', retention_time => '1 hour');
SELECT aq.create_queue('events_stopped_q', 'events_qt');   -- created, never started
SELECT aq.start_queue('events_q');
SELECT aq.start_queue('aq$_events_qt_e', enqueue => false);
SELECT aq.grant_queue_privilege('ALL', 'events_q', 'aq_mv_producer');
SELECT aq.grant_queue_privilege('DEQUEUE', 'events_q', 'aq_mv_consumer', grant_option => true);
GRANT EXECUTE ON FUNCTION aq.grant_queue_privilege TO aq_mv_consumer;   -- to grant it on
SET ROLE aq_mv_consumer;
SELECT aq.grant_queue_privilege('DEQUEUE', 'events_q', 'aq_mv_auditor');
RESET ROLE;
SELECT aq.enqueue('events_q', jsonb_build_object('n', i, 'kind', CASE WHEN i % 2 = 0 THEN 'even' ELSE 'odd' END),
                  aq.message_properties(priority => i, correlation => 'ev-' || i,
                                        delay => CASE WHEN i > 8 THEN interval '30 days' END))
  FROM generate_series(1, 10) i;

SELECT aq.create_queue_table('notes_qt', 'text');
SELECT aq.create_queue('notes_q', 'notes_qt');
SELECT aq.start_queue('notes_q');
SELECT aq.enqueue_array('notes_q', ARRAY['first note', 'second note', E'quote '' and \\ backslash', 'ünïcødé'])
       IS NOT NULL AS enqueued;
SELECT aq.stop_queue('notes_q', enqueue => false);   -- enqueue only from now on
SELECT aq.grant_queue_privilege('ENQUEUE', 'notes_q', 'aq_mv_producer');

-- A ring queue table: messages in two segments, the current one (the third) empty, so that the
-- time manager has nothing to switch or truncate before the dump.
SELECT aq.create_queue_table('ring_qt', 'text', segments => 3);
SELECT aq.create_queue('ring_q', 'ring_qt');
SELECT aq.start_queue('ring_q');
SELECT aq.enqueue_array('ring_q', ARRAY['ring 1', 'ring 2']) IS NOT NULL AS enqueued;
SELECT aq._switch_segment('ring_qt');
SELECT aq.enqueue('ring_q', 'ring 3'::text) IS NOT NULL AS enqueued;
SELECT aq._switch_segment('ring_qt');
-- A classic queue table made a ring (aq.alter_queue_table): two messages in the table itself, one
-- in its first segment, the second one current.
SELECT aq.create_queue_table('conv_qt', 'text');
SELECT aq.create_queue('conv_q', 'conv_qt');
SELECT aq.start_queue('conv_q');
SELECT aq.enqueue_array('conv_q', ARRAY['conv 1', 'conv 2']) IS NOT NULL AS enqueued;
SELECT aq.alter_queue_table('conv_qt', segments => 2);
SELECT aq.enqueue('conv_q', 'conv 3'::text) IS NOT NULL AS enqueued;
-- Its current segment left empty, as ring_qt's: the time manager has nothing to switch before the dump.
SELECT aq._switch_segment('conv_qt');
-- A grouped ring: a group whose messages span a switch, and one more group.
SELECT aq.create_queue_table('grp_ring_qt', 'text', message_grouping => 'transactional', segments => 2);
SELECT aq.create_queue('grp_ring_q', 'grp_ring_qt');
SELECT aq.start_queue('grp_ring_q');
BEGIN;
SELECT aq.enqueue_array('grp_ring_q', ARRAY['a 1', 'a 2']) IS NOT NULL AS enqueued;
SELECT aq._switch_segment('grp_ring_qt');
SELECT aq.enqueue('grp_ring_q', 'a 3'::text) IS NOT NULL AS enqueued;
COMMIT;
SELECT aq.enqueue('grp_ring_q', 'b 1'::text) IS NOT NULL AS enqueued;
-- A multi-consumer ring, each message stored once: A has taken the first message (a receipt), B
-- nothing yet.
SELECT aq.create_queue_table('once_ring_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('once_ring_q', 'once_ring_qt');
SELECT aq.start_queue('once_ring_q');
SELECT aq.add_subscriber('once_ring_q', aq.agent('A'));
SELECT aq.add_subscriber('once_ring_q', aq.agent('B'));
SELECT aq.enqueue_array('once_ring_q', ARRAY['once 1', 'once 2']) IS NOT NULL AS enqueued;
SELECT count(*) FROM aq.dequeue_array('once_ring_q', NULL::text, 1, aq.dequeue_options(consumer_name => 'A', wait => 0));

------------------------------------------------------------------------------ fast ingest
CREATE TABLE app.readings (id bigint PRIMARY KEY, v text NOT NULL CHECK (v <> 'bad'),
                           at timestamptz NOT NULL DEFAULT '2025-01-01 00:00+00');
GRANT INSERT, SELECT ON app.readings TO aq_mv_writer;
SELECT aq.enable_fast_ingest('app.readings');
SET ROLE aq_mv_writer;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO app.readings (id, v) SELECT i, 'reading ' || i FROM generate_series(1, 100) i;
INSERT /*+ MEMOPTIMIZE_WRITE */ INTO app.readings (id, v) VALUES (5, 'duplicate of 5'), (101, 'bad'), (102, 'good');
SELECT aq.write_end('60 s');
RESET ROLE;
DO $$
BEGIN
    IF (SELECT count(*) FROM app.readings) <> 101 OR (SELECT count(*) FROM aq.fast_ingest_rejects) <> 2 THEN
        RAISE EXCEPTION 'populate: fast ingest applied % rows and rejected %, not 101 and 2',
            (SELECT count(*) FROM app.readings), (SELECT count(*) FROM aq.fast_ingest_rejects);
    END IF;
END $$;

\echo populate: done
