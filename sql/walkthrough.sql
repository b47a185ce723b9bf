-- The Oracle article's walk-through (array-based advanced queuing in 10g), in PostgreSQL.
CREATE TYPE demo_aq_array_ot AS (message varchar(4000));
SELECT aq.create_queue_table(queue_table => 'demo_aq_array_qt', queue_payload_type => 'demo_aq_array_ot');
SELECT aq.create_queue(queue_name => 'demo_aq_array_q', queue_table => 'demo_aq_array_qt');
SELECT aq.start_queue(queue_name => 'demo_aq_array_q');

-- ENQUEUE_ARRAY: 2,500 messages in one call and one transaction; 2,500 ids, in order.
CREATE TEMP TABLE ids AS
SELECT aq.enqueue_array(
         queue_name    => 'demo_aq_array_q',
         payload_array => array_agg(ROW('Message number ' || i)::demo_aq_array_ot ORDER BY i)) AS msgids
  FROM generate_series(1, 2500) i;
SELECT cardinality(msgids) AS "Received message IDs",
       msgids = ARRAY(SELECT unnest(msgids) ORDER BY 1) AS ids_in_order,
       (SELECT count(DISTINCT m) FROM unnest(msgids) m) AS distinct_ids
  FROM ids;
SELECT count(*) FROM demo_aq_array_qt;

-- 2,500 single enqueues, one commit.
DO $$
BEGIN
  FOR i IN 1 .. 2500 LOOP
    PERFORM aq.enqueue('demo_aq_array_q', ROW('Message number ' || i)::demo_aq_array_ot);
  END LOOP;
END $$;

-- 2,500 single enqueues, a commit each (a procedure: COMMIT needs a non-atomic context).
CREATE PROCEDURE enqueue_each(n integer) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM aq.enqueue('demo_aq_array_q', ROW('Message number ' || i)::demo_aq_array_ot);
    COMMIT;
  END LOOP;
END $$;
CALL enqueue_each(2500);
SELECT count(*) AS "COUNT(*)" FROM demo_aq_array_qt;

-- DEQUEUE_ARRAY in batches of 500 into a message table, until the timeout (ORA-25228 analogue).
CREATE TABLE demo_aq_array_mt (message varchar(4000), ts timestamp(3));
CREATE PROCEDURE dequeue_all(batch integer) LANGUAGE plpgsql AS $$
DECLARE
  dequeued integer;
  inserted integer;
  continue_loop boolean := true;
BEGIN
  WHILE continue_loop LOOP
    BEGIN
      INSERT INTO demo_aq_array_mt
      SELECT (d.payload).message, localtimestamp
        FROM aq.dequeue_array(queue_name      => 'demo_aq_array_q',
                              payload_type    => NULL::demo_aq_array_ot,
                              array_size      => batch,
                              dequeue_options => aq.dequeue_options(wait => '1 s')) d;
      GET DIAGNOSTICS inserted = ROW_COUNT;
      RAISE NOTICE 'Dequeued and inserted [%] messages.', inserted;
      continue_loop := (inserted = batch);   -- exit scenario one
    EXCEPTION WHEN SQLSTATE 'QA228' THEN     -- exit scenario two
      RAISE NOTICE 'No more messages to dequeue.';
      continue_loop := false;
    END;
    COMMIT;
  END LOOP;
END $$;
CALL dequeue_all(500);
SELECT count(*) AS "COUNT(*)", count(DISTINCT message) AS distinct_messages FROM demo_aq_array_mt;
SELECT count(*) AS left_in_queue FROM demo_aq_array_qt;

-- Clean up.
SELECT aq.stop_queue('demo_aq_array_q');
SELECT aq.drop_queue('demo_aq_array_q');
SELECT aq.drop_queue_table('demo_aq_array_qt');
DROP TABLE demo_aq_array_mt;
DROP PROCEDURE enqueue_each(integer);
DROP PROCEDURE dequeue_all(integer);
DROP TYPE demo_aq_array_ot;
