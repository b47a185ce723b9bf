-- The article "Array-based advanced queuing in 10g" (../shared/articles/), step by step,
-- with each of its wall-clock figures next to aq's.  Run by `bash tools/run demo`.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS aq;
DROP TABLE IF EXISTS demo_timings, demo_aq_array_mt;
SELECT count(aq.drop_queue_table(queue_table, force => true)) AS dropped_old_demo
  FROM aq.queue_tables WHERE queue_table = 'demo_aq_array_qt' \gset
DROP PROCEDURE IF EXISTS demo_enqueue_array(int), demo_enqueue_single(int, boolean), demo_dequeue_batches(int),
               demo_dequeue_array(int), demo_dequeue_single(int, boolean);
DROP TYPE IF EXISTS demo_aq_array_ot;
SET client_min_messages = notice;

-- Each timed step: psql remembers the start time, the step runs as its own CALL (so it can
-- COMMIT like the article's PL/SQL blocks), then the elapsed time is recorded.
CREATE TABLE demo_timings (step int, scenario text, oracle_seconds numeric, aq_seconds numeric);

\echo '--- setup: payload type, queue table, queue (DBMS_AQADM)'
CREATE TYPE demo_aq_array_ot AS (message varchar(4000));
DO $$
BEGIN
  PERFORM aq.create_queue_table(queue_table => 'demo_aq_array_qt', queue_payload_type => 'demo_aq_array_ot');
  PERFORM aq.create_queue(queue_name => 'demo_aq_array_q', queue_table => 'demo_aq_array_qt');
  PERFORM aq.start_queue(queue_name => 'demo_aq_array_q');
  RAISE NOTICE 'Queue table demo_aq_array_qt and queue demo_aq_array_q created and started.';
END $$;

\echo '--- dbms_aq.enqueue_array: 2,500 messages in one call and one transaction'
CREATE PROCEDURE demo_enqueue_array(n int) LANGUAGE plpgsql AS $$
DECLARE ids bigint[];
BEGIN
  ids := aq.enqueue_array(queue_name => 'demo_aq_array_q',
                          payload_array => ARRAY(SELECT ROW('Message number ' || i)::demo_aq_array_ot
                                                   FROM generate_series(1, n) i));
  COMMIT;
  RAISE NOTICE 'Enqueued [%] messages.', cardinality(ids);
  RAISE NOTICE 'Received [%] message IDs.', (SELECT count(DISTINCT id) FROM unnest(ids) id);
END $$;
SELECT clock_timestamp() AS t0 \gset
CALL demo_enqueue_array(2500);
INSERT INTO demo_timings SELECT 1, 'enqueue_array, 2,500 messages', 0.70, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);
SELECT count(*) AS "COUNT(*)" FROM demo_aq_array_qt;

\echo '--- 2,500 single enqueues, one commit'
CREATE PROCEDURE demo_enqueue_single(n int, commit_each boolean) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM aq.enqueue(queue_name => 'demo_aq_array_q', payload => ROW('Message number ' || i)::demo_aq_array_ot);
    IF commit_each THEN COMMIT; END IF;
  END LOOP;
  COMMIT;
END $$;
SELECT clock_timestamp() AS t0 \gset
CALL demo_enqueue_single(2500, false);
INSERT INTO demo_timings SELECT 2, '2,500 single enqueues, one commit', 1.21, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);
\echo '--- 2,500 single enqueues, a commit each'
SELECT clock_timestamp() AS t0 \gset
CALL demo_enqueue_single(2500, true);
INSERT INTO demo_timings SELECT 3, '2,500 single enqueues, a commit each', 1.73, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);

\echo '--- dbms_aq.dequeue_array: all 7,500 messages in batches of 500 into a message table, 5 s wait'
CREATE TABLE demo_aq_array_mt (message varchar(4000), ts timestamp(3));
CREATE PROCEDURE demo_dequeue_batches(batch int) LANGUAGE plpgsql AS $$
DECLARE
  inserted int;
  continue_loop boolean := true;
BEGIN
  WHILE continue_loop LOOP
    BEGIN
      INSERT INTO demo_aq_array_mt
      SELECT (d.payload).message, clock_timestamp()
        FROM aq.dequeue_array(queue_name => 'demo_aq_array_q', payload_type => NULL::demo_aq_array_ot,
                              array_size => batch, dequeue_options => aq.dequeue_options(wait => '5 s')) d;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      RAISE NOTICE 'Dequeued [%] messages.', inserted;
      RAISE NOTICE 'Inserted [%] messages.', inserted;
      continue_loop := (inserted = batch);
    EXCEPTION WHEN SQLSTATE 'QA228' THEN   -- ORA-25228: timeout
      RAISE NOTICE 'No more messages to dequeue.';
      continue_loop := false;
    END;
    COMMIT;   -- outside the block: PL/pgSQL cannot commit inside an exception block
  END LOOP;
END $$;
CALL demo_dequeue_batches(500);
SELECT count(*) AS "COUNT(*)", min(ts) AS first_batch_written, max(ts) AS last_batch_written
  FROM demo_aq_array_mt;
INSERT INTO demo_timings
SELECT 4, '7,500 messages dequeued in batches of 500 (first to last batch written)', 4.64,
       extract(epoch FROM max(ts) - min(ts)) FROM demo_aq_array_mt;

\echo '--- dequeue timings: 7,500 more messages, then three ways to dequeue 2,500'
CALL demo_enqueue_array(7500);
\echo '--- array does not imply bulk: Oracle deletes row by row; aq claims and deletes a batch in one statement'
\echo '--- (the statement aq.dequeue_array runs, with EXPLAIN ANALYZE, rolled back)'
ANALYZE demo_aq_array_qt;
BEGIN;
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
WITH claimed AS MATERIALIZED (
  SELECT ctid FROM demo_aq_array_qt WHERE q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'demo_aq_array_q')
   ORDER BY q_id, enq_time, msgid LIMIT 500 FOR UPDATE SKIP LOCKED)
DELETE FROM demo_aq_array_qt WHERE ctid = ANY (ARRAY(SELECT ctid FROM claimed)) RETURNING msgid;
ROLLBACK;

CREATE PROCEDURE demo_dequeue_array(n int) LANGUAGE plpgsql AS $$
DECLARE got int;
BEGIN
  SELECT count(*) INTO got FROM aq.dequeue_array('demo_aq_array_q', NULL::demo_aq_array_ot, n);
  RAISE NOTICE 'Dequeued [%] messages.', got;
  COMMIT;
END $$;
CREATE PROCEDURE demo_dequeue_single(n int, commit_each boolean) LANGUAGE plpgsql AS $$
DECLARE m record;
BEGIN
  FOR i IN 1 .. n LOOP
    SELECT * INTO m FROM aq.dequeue('demo_aq_array_q', NULL::demo_aq_array_ot);
    IF commit_each THEN COMMIT; END IF;
  END LOOP;
  COMMIT;
END $$;
SELECT clock_timestamp() AS t0 \gset
CALL demo_dequeue_array(2500);
INSERT INTO demo_timings SELECT 5, 'dequeue_array, 2,500 messages', 0.89, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);
SELECT clock_timestamp() AS t0 \gset
CALL demo_dequeue_single(2500, false);
INSERT INTO demo_timings SELECT 6, '2,500 single dequeues, one commit', 1.21, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);
SELECT clock_timestamp() AS t0 \gset
CALL demo_dequeue_single(2500, true);
INSERT INTO demo_timings SELECT 7, '2,500 single dequeues, a commit each', 1.62, extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);
SELECT count(*) AS left_in_queue FROM demo_aq_array_qt;

\echo '--- the article''s figures (Oracle 10g, 2005) and aq''s, on this machine'
SELECT step, scenario, oracle_seconds AS "Oracle 10g s", round(aq_seconds, 3) AS "aq s",
       round(oracle_seconds / nullif(aq_seconds, 0), 1) || 'x' AS "aq faster by",
       CASE WHEN aq_seconds < oracle_seconds THEN 'beats' ELSE 'DOES NOT BEAT' END AS verdict
  FROM demo_timings ORDER BY step;

SET client_min_messages = warning;
SELECT aq.drop_queue_table('demo_aq_array_qt', force => true) \gset
DROP PROCEDURE demo_enqueue_array(int), demo_enqueue_single(int, boolean), demo_dequeue_batches(int),
               demo_dequeue_array(int), demo_dequeue_single(int, boolean);
DROP TABLE demo_timings, demo_aq_array_mt;
DROP TYPE demo_aq_array_ot;
