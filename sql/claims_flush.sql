-- The claims' flush (retries.hpp, 1; base/statement.hpp): a bare dequeue statement leaves its
-- claims to its commit's flush; a statement that goes on with the messages asks the WAL writer
-- to flush them meanwhile; a transaction block flushes them before the dequeue returns.
SELECT aq.create_queue_table('cf_qt', 'text');
SELECT aq.create_queue('cf_q', 'cf_qt');
SELECT aq.start_queue('cf_q');
SELECT cardinality(aq.enqueue_array('cf_q', array_agg('m' || i))) FROM generate_series(1, 40) i;
CREATE FUNCTION cf_process(payload text) RETURNS integer LANGUAGE plpgsql AS $$
BEGIN RETURN length(payload); END $$;
CREATE FUNCTION cf_consume() RETURNS text LANGUAGE plpgsql AS $$
DECLARE m record;
BEGIN
  SELECT * INTO m FROM aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
  RETURN m.payload;
END $$;
SET client_min_messages = debug1;
-- Left to the commit: the bare forms, and generate_series feeding the calls.
SELECT payload FROM aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
SELECT payload FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
SELECT (aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0'))).msgid IS NOT NULL AS taken;
SELECT (aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0'))).msgid IS NOT NULL AS taken FROM generate_series(1, 2);
-- The WAL writer asked: a function or a built-in one reads the message in the same statement,
-- or the statement is more than a bare call (an aggregate, a CTE, a loop's cursor, a function
-- that dequeues).
SELECT (aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0'))).msgid > 0 AS taken;
SELECT count(*) FROM (SELECT (aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0'))).msgid) s;
SELECT cf_process(payload) FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
SELECT length(payload) FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
SELECT length((aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0'))).payload::text);
SELECT cf_consume();
WITH d AS (SELECT * FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(wait => '0')) AS d(id, payload, p))
SELECT count(*) FROM d;
DO $$
DECLARE m record;
BEGIN
  FOR m IN SELECT * FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(wait => '0')) AS d(id, payload, p) LOOP
    PERFORM length(m.payload);
  END LOOP;
END $$;
\o /dev/null
EXPLAIN (ANALYZE, COSTS OFF, SUMMARY OFF, TIMING OFF)
SELECT * FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
\o
-- Flushed before it returns: a transaction block.
BEGIN;
SELECT payload FROM aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
COMMIT;
-- Several statements in one query are a transaction block too.
SELECT 1 AS one\; SELECT payload FROM aq.dequeue('cf_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(id, payload, p);
-- Browse claims nothing.
SELECT count(*) FROM aq.dequeue_array('cf_q', NULL::text, 2, aq.dequeue_options(dequeue_mode => 'browse', wait => '0')) AS d(id, payload, p);
RESET client_min_messages;
SELECT aq.drop_queue_table('cf_qt', force => true);
DROP FUNCTION cf_process(text);
DROP FUNCTION cf_consume();
