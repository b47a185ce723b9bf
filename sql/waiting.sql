-- Waiting: no wait, a bounded wait, cancel by statement_timeout.  (Wake-ups by a concurrent
-- commit are in the isolation specs.)
SELECT aq.create_queue_table('wait_qt', 'text');
SELECT aq.create_queue('wait_q', 'wait_qt');
SELECT aq.start_queue('wait_q');

-- wait => '0': at once.
CREATE TEMP TABLE t AS SELECT clock_timestamp() AS started;
SELECT try_sql($$SELECT aq.dequeue('wait_q', NULL::text, aq.dequeue_options(wait => '0'))$$);
SELECT clock_timestamp() - started < interval '0.5 s' AS returned_at_once FROM t;

-- wait => '0.3 s': waits about that long, then QA228.
UPDATE t SET started = clock_timestamp();
SELECT try_sql($$SELECT * FROM aq.dequeue_array('wait_q', NULL::text, 10, aq.dequeue_options(wait => '0.3 s'))$$);
SELECT clock_timestamp() - started >= interval '0.3 s' AS waited,
       clock_timestamp() - started < interval '3 s' AS not_too_long FROM t;

-- With messages available, a waiting dequeue returns at once with what there is.
SELECT cardinality(aq.enqueue_array('wait_q', ARRAY['a', 'b'])) AS enqueued;
UPDATE t SET started = clock_timestamp();
SELECT payload FROM aq.dequeue_array('wait_q', NULL::text, 500, aq.dequeue_options(wait => '10 s'));
SELECT clock_timestamp() - started < interval '1 s' AS returned_at_once FROM t;

-- wait forever (the default) honours statement_timeout.
UPDATE t SET started = clock_timestamp();
SET statement_timeout = '300ms';
\set VERBOSITY sqlstate
SELECT aq.dequeue('wait_q', NULL::text);
SELECT * FROM aq.dequeue_array('wait_q', NULL::text, 5, aq.dequeue_options(wait => NULL));
\set VERBOSITY default
RESET statement_timeout;
SELECT clock_timestamp() - started >= interval '0.6 s' AS waited_twice,
       clock_timestamp() - started < interval '5 s' AS cancelled_promptly FROM t;

SELECT aq.drop_queue_table('wait_qt', force => true);
