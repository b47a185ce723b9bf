-- The scan floor under a held xmin horizon (src/queue/scan_floor.hpp): an enqueue that lowers the
-- floor itself must not keep every later dequeue starting at its message.  Here: a priority queue
-- that runs dry (the empty dequeue's floor is at the highest priority value), then gets a message
-- (priority 1, below it), round after round, while a prepared transaction holds the horizon, so
-- that no consumed message's index entry is ever killed.  Each empty dequeue must read about one
-- index entry, not every message consumed since the first round.
SELECT aq.create_queue_table('floor_horizon_qt', 'text', sort_list => 'priority,enq_time');
SELECT aq.create_queue('floor_horizon_q', 'floor_horizon_qt');
SELECT aq.start_queue('floor_horizon_q');
BEGIN;
SELECT txid_current() IS NOT NULL AS holds_an_xid;
PREPARE TRANSACTION 'floor_horizon_holder';

CREATE PROCEDURE floor_horizon_rounds(n integer) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM aq.enqueue('floor_horizon_q', 'm'::text);
    COMMIT;
    PERFORM count(*) FROM aq.dequeue_array('floor_horizon_q', NULL::text, 1, aq.dequeue_options(wait => 0));
    COMMIT;
    BEGIN  -- dry: QA228, no message available
      PERFORM count(*) FROM aq.dequeue_array('floor_horizon_q', NULL::text, 1, aq.dequeue_options(wait => 0));
    EXCEPTION WHEN SQLSTATE 'QA228' THEN NULL;
    END;
    COMMIT;
  END LOOP;
END $$;
CREATE FUNCTION floor_horizon_reads() RETURNS bigint LANGUAGE sql AS $$
  SELECT s.idx_tup_read FROM pg_stat_user_indexes s JOIN pg_index i ON i.indexrelid = s.indexrelid
   WHERE i.indrelid = 'floor_horizon_qt'::regclass AND i.indnkeyatts = 4 $$;

CALL floor_horizon_rounds(200);
SELECT pg_stat_force_next_flush();
SELECT floor_horizon_reads() AS reads \gset
CALL floor_horizon_rounds(1);
SELECT pg_stat_force_next_flush();
-- One round: its message, the empty dequeue's look past it (a few entries, not 200).
SELECT floor_horizon_reads() - :reads <= 10 AS bounded, :reads >= 200 AS rounds_read;

ROLLBACK PREPARED 'floor_horizon_holder';
DROP PROCEDURE floor_horizon_rounds(integer);
DROP FUNCTION floor_horizon_reads();
SELECT aq.drop_queue_table('floor_horizon_qt', force => true);

-- Each of a queue's many consumers keeps a floor of its own (scan_floor.hpp: buckets of slots, the
-- least recently read one taken over).  With a slot per hash value, some of 100 subscribers
-- shared one, took it from each other at every dequeue and walked from the head each time.  Here
-- 100 subscribers of a multi-consumer ring take 5 messages each per round, in turn: the last round
-- reads about 5 index entries a dequeue, not the 95 messages each consumer has taken before.
SELECT aq.create_queue_table('floor_many_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('floor_many_q', 'floor_many_qt');
SELECT aq.start_queue('floor_many_q');
SELECT count(*) FROM (SELECT aq.add_subscriber('floor_many_q', aq.agent('C' || k)) FROM generate_series(1, 100) k) s;
SELECT cardinality(aq.enqueue_array('floor_many_q', array_agg('m' || i))) FROM generate_series(1, 100) i;
CREATE PROCEDURE floor_many_rounds(n integer) LANGUAGE plpgsql AS $$
BEGIN
  FOR r IN 1 .. n LOOP
    FOR k IN 1 .. 100 LOOP
      PERFORM count(*) FROM aq.dequeue_array('floor_many_q', NULL::text, 5,
                                             aq.dequeue_options(consumer_name => 'C' || k, wait => 0));
      COMMIT;
    END LOOP;
  END LOOP;
END $$;
CREATE FUNCTION floor_many_reads() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(s.idx_tup_read)::bigint FROM pg_stat_user_indexes s JOIN pg_index i ON i.indexrelid = s.indexrelid
   WHERE i.indrelid = 'floor_many_qt$0'::regclass AND i.indnkeyatts = 3 $$;
CALL floor_many_rounds(19);
SELECT pg_stat_force_next_flush();
SELECT floor_many_reads() AS reads \gset
CALL floor_many_rounds(1);
SELECT pg_stat_force_next_flush();
SELECT floor_many_reads() - :reads <= 1000 AS bounded, :reads >= 9500 AS rounds_read;
DROP PROCEDURE floor_many_rounds(integer);
DROP FUNCTION floor_many_reads();
SELECT aq.drop_queue_table('floor_many_qt', force => true);

-- A message of a multi-consumer ring waiting for its consumer's retry_delay (once_walk.hpp, 4;
-- scan_floor.hpp, Returns): the consumer's floor passes it with a return at its time, so that its
-- later dequeues do not read again every message it took after it; at that time it is the
-- consumer's again, and a dequeue that waits wakes for it.
SELECT aq.create_queue_table('floor_retry_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('floor_retry_q', 'floor_retry_qt', retry_delay => '1 hour');
SELECT aq.start_queue('floor_retry_q');
SELECT aq.add_subscriber('floor_retry_q', aq.agent('A'));
SELECT aq.enqueue('floor_retry_q', 'w'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
ROLLBACK;
SELECT cardinality(aq.enqueue_array('floor_retry_q', array_agg('m' || i))) FROM generate_series(1, 2000) i;
CREATE PROCEDURE floor_retry_rounds(n integer) LANGUAGE plpgsql AS $$
BEGIN
  FOR i IN 1 .. n LOOP
    PERFORM count(*) FROM aq.dequeue_array('floor_retry_q', NULL::text, 100,
                                           aq.dequeue_options(consumer_name => 'A', wait => 0));
    COMMIT;
  END LOOP;
END $$;
CREATE FUNCTION floor_retry_reads() RETURNS bigint LANGUAGE sql AS $$
  SELECT sum(s.idx_tup_read)::bigint FROM pg_stat_user_indexes s JOIN pg_index i ON i.indexrelid = s.indexrelid
   WHERE i.indrelid IN ('floor_retry_qt$0'::regclass, 'floor_retry_qt$1'::regclass) AND i.indnkeyatts = 3 $$;
CALL floor_retry_rounds(19);
SELECT pg_stat_force_next_flush();
SELECT floor_retry_reads() AS reads \gset
CALL floor_retry_rounds(1);
SELECT pg_stat_force_next_flush();
-- The last round: about its 100 entries, not the 1,900 messages taken since w.
SELECT floor_retry_reads() - :reads <= 300 AS bounded, :reads >= 1900 AS rounds_read;
SELECT try_sql($$SELECT aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0))$$) AS w_waits;
SELECT msg_state, count(*) FROM "aq$floor_retry_qt" GROUP BY 1 ORDER BY 1;
-- A short retry_delay (the next two statements come well within it): v is passed while it
-- waits, then taken by a dequeue that waits for it.
SELECT aq.alter_queue('floor_retry_q', retry_delay => '4 seconds');
SELECT aq.enqueue('floor_retry_q', 'v'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
ROLLBACK;
SELECT aq.enqueue('floor_retry_q', 'n'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0));
SET aq.wait_rescan_interval = '1h';  -- no rescan once a second: the floor's return wakes it
SELECT payload, (p).attempts, clock_timestamp() - statement_timestamp() < interval '30 s' AS woken_in_time
  FROM aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 60)) AS d(m, payload, p);
RESET aq.wait_rescan_interval;
-- Returns due at different times are kept apart: while w still waits its hour, u waits 5 seconds
-- (the rounds after it come well within them); the floor passes both, and at u's time it goes back
-- to u, not to w: the dequeue that takes u reads a few entries, not the 1,000 taken since w.
SELECT aq.alter_queue('floor_retry_q', retry_delay => '5 seconds');
SELECT aq.enqueue('floor_retry_q', 'u'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A'));
ROLLBACK;
SELECT cardinality(aq.enqueue_array('floor_retry_q', array_agg('k' || i))) FROM generate_series(1, 1000) i;
CALL floor_retry_rounds(10);
-- (LISTEN waits for u's time: a waiting dequeue would look from the head once, and read w again.)
SET aq.wait_rescan_interval = '1h';
SELECT a.name, clock_timestamp() - statement_timestamp() < interval '30 s' AS woken_in_time
  FROM aq.listen(ARRAY[aq.agent('A', 'floor_retry_q')], wait => 60) AS a;
RESET aq.wait_rescan_interval;
SELECT pg_stat_force_next_flush();
SELECT floor_retry_reads() AS reads \gset
SELECT payload, (p).attempts FROM aq.dequeue('floor_retry_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0)) AS d(m, payload, p);
SELECT pg_stat_force_next_flush();
SELECT floor_retry_reads() - :reads <= 300 AS from_u_not_w;
DROP PROCEDURE floor_retry_rounds(integer);
DROP FUNCTION floor_retry_reads();
SELECT aq.drop_queue_table('floor_retry_qt', force => true);
