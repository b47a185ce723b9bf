-- Every error: a specific SQLSTATE and a message naming the problem; nothing committed lost.

CREATE TYPE err_ot AS (message text);
SELECT aq.create_queue_table('err_qt', 'err_ot');
SELECT aq.create_queue('err_q', 'err_qt');
SELECT aq.start_queue('err_q');
SELECT cardinality(aq.enqueue_array('err_q', array_agg(ROW('kept ' || i)::err_ot))) FROM generate_series(1, 5) i;

-- Unknown queue and queue table.
SELECT try_sql($$SELECT aq.enqueue('no_such_q', ROW('x')::err_ot)$$);
SELECT try_sql($$SELECT aq.dequeue('no_such_q', NULL::err_ot, aq.dequeue_options(wait => '0'))$$);
SELECT try_sql($$SELECT * FROM aq.dequeue_array('no_such_q', NULL::err_ot, 1)$$);
SELECT try_sql($$SELECT aq.start_queue('no_such_q')$$);
SELECT try_sql($$SELECT aq.create_queue('q2', 'no_such_qt')$$);
SELECT try_sql($$SELECT aq.drop_queue_table('no_such_qt')$$);
SELECT try_sql($$SELECT aq.purge_queue_table('no_such_qt')$$);
SELECT try_sql($$SELECT aq.create_queue_table('bad_type_qt', 'no_such_type')$$);
SELECT try_sql($$SELECT aq.create_queue_table('bad_type_qt', 'anyelement')$$);
SELECT try_sql($$SELECT aq.create_queue_table('bad_sort_qt', 'text', sort_list => 'random')$$);
SELECT try_sql($$SELECT aq.create_queue_table('bad_schema_qt', 'text', queue_table_schema => 'no_such_schema')$$);

-- Duplicates.
SELECT try_sql($$SELECT aq.create_queue_table('err_qt', 'err_ot')$$);
SELECT try_sql($$SELECT aq.create_queue('err_q', 'err_qt')$$);
CREATE TABLE taken (id int);
SELECT try_sql($$SELECT aq.create_queue_table('taken', 'text')$$);
SELECT count(*) AS catalog_rows_for_taken FROM aq.queue_tables WHERE queue_table = 'taken';

-- Queue state.
SELECT try_sql($$SELECT aq.drop_queue('err_q')$$);
SELECT try_sql($$SELECT aq.drop_queue_table('err_qt')$$);
SELECT aq.create_queue('stopped_q', 'err_qt');
SELECT try_sql($$SELECT aq.enqueue('stopped_q', ROW('x')::err_ot)$$);
SELECT try_sql($$SELECT aq.dequeue('stopped_q', NULL::err_ot, aq.dequeue_options(wait => '0'))$$);

-- Payloads of the wrong type (the queue holds err_ot).
SELECT try_sql($$SELECT aq.enqueue('err_q', 'text'::text)$$);
SELECT try_sql($$SELECT aq.enqueue('err_q', ROW('x'))$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[1, 2])$$);
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::text, aq.dequeue_options(wait => '0'))$$);
SELECT try_sql($$SELECT * FROM aq.dequeue_array('err_q', NULL::int, 1)$$);

-- NULL and multi-dimensional arrays, NULL elements, mismatched property arrays.
SELECT try_sql($$SELECT aq.enqueue('err_q', NULL::err_ot)$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', NULL::err_ot[])$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[ROW('a')::err_ot, NULL])$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[[ROW('a')::err_ot], [ROW('b')::err_ot]])$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[ROW('a')::err_ot, ROW('b')::err_ot], ARRAY[aq.message_properties()])$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[ROW('a')::err_ot], ARRAY[[aq.message_properties()]])$$);

-- Bad option and property values.
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(dequeue_mode => 'destroy'))$$);
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(navigation => 'sideways'))$$);
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(navigation => 'next_transaction'))$$);
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(dequeue_mode => 'locked', visibility => 'immediate'))$$);
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(wait => '-1 s'))$$);
SELECT try_sql($$SELECT aq.enqueue('err_q', ROW('x')::err_ot, aq.message_properties(delay => '-5 s'))$$);
SELECT try_sql($$SELECT aq.enqueue('err_q', ROW('x')::err_ot, aq.message_properties(expiration => '-1 day'))$$);
SELECT try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[ROW('x')::err_ot], ARRAY[aq.message_properties(delay => '-1 s')])$$);
SELECT try_sql($$SELECT aq.create_queue('bad_q', 'err_qt', max_retries => -1)$$);
SELECT try_sql($$SELECT aq.create_queue('bad_q', 'err_qt', retry_delay => '-1 s')$$);
SELECT try_sql($$SELECT aq.alter_queue('err_q', retention_time => '-1 s')$$);
SELECT try_sql($$SELECT aq.grant_queue_privilege('SELECT', 'err_q', 'PUBLIC')$$);
SELECT try_sql($$SELECT aq.grant_queue_privilege('ENQUEUE', 'err_q', 'no_such_role')$$);

-- array_size out of range.
SELECT try_sql($$SELECT * FROM aq.dequeue_array('err_q', NULL::err_ot, 0)$$);
SELECT try_sql($$SELECT * FROM aq.dequeue_array('err_q', NULL::err_ot, -3)$$);
SELECT try_sql($$SELECT * FROM aq.dequeue_array('err_q', NULL::err_ot, 100001)$$);
SELECT try_sql($$SELECT * FROM aq.dequeue_array('err_q', NULL::err_ot, NULL)$$);

-- NULL names.
SELECT try_sql($$SELECT aq.enqueue(NULL, ROW('x')::err_ot)$$);
SELECT try_sql($$SELECT aq.create_queue(NULL, 'err_qt')$$);
SELECT try_sql($$SELECT aq.create_queue_table(NULL, 'text')$$);

-- consumer_name on a single-consumer queue is 22023; array payload types are refused
-- (arrays of arrays cannot be passed); a queue table altered behind aq's back is reported,
-- never read with the wrong type.
SELECT try_sql($$SELECT aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(consumer_name => 'app1'))$$);
SELECT try_sql($$SELECT aq.create_queue_table('int_array_qt', 'integer[]')$$);
SELECT aq.create_queue_table('altered_qt', 'text');
SELECT aq.create_queue('altered_q', 'altered_qt');
SELECT aq.start_queue('altered_q');
SELECT aq.enqueue('altered_q', 'typed as text'::text);
-- (its AQ$ view would refuse both the ALTER and the DROP: it goes first)
DROP VIEW "aq$altered_qt";
ALTER TABLE altered_qt ALTER COLUMN user_data TYPE bigint USING 12345;
SELECT try_sql($$SELECT aq.dequeue('altered_q', NULL::text, aq.dequeue_options(wait => '0'))$$);
SELECT try_sql($$SELECT aq.dequeue('altered_q', NULL::bigint, aq.dequeue_options(wait => '0'))$$);
-- A queue table dropped by hand, and a look-alike created under its name: never used.
DROP TABLE altered_qt;
CREATE TABLE altered_qt (LIKE err_qt INCLUDING ALL);
SELECT try_sql($$SELECT aq.enqueue('altered_q', 'x'::text)$$);
SELECT try_sql($$SELECT aq.purge_queue_table('altered_qt')$$);
SELECT count(*) AS impostor_rows FROM altered_qt;
SELECT aq.drop_queue_table('altered_qt', force => true);
SELECT count(*) AS impostor_kept FROM altered_qt;
DROP TABLE altered_qt;

-- A read-only transaction can neither enqueue nor dequeue (25006), on the bulk paths too.  (Which
-- statement reports it depends on whether the once-a-second expiry sweep runs first: the SQLSTATE only.)
SELECT cardinality(aq.enqueue_array('err_q', ARRAY[ROW('read-only 7')::err_ot]));
BEGIN READ ONLY;
SELECT left(try_sql($$SELECT aq.enqueue_array('err_q', ARRAY[ROW('read-only 8')::err_ot])$$), 5) AS read_only_enqueue;
SELECT left(try_sql($$SELECT count(*) FROM aq.dequeue_array('err_q', NULL::err_ot, 10, aq.dequeue_options(wait => '0'))$$), 5) AS read_only_dequeue;
SELECT left(try_sql($$SELECT count(*) FROM aq.dequeue_array('err_q', NULL::err_ot, 10, aq.dequeue_options(wait => '0'))$$), 5) AS read_only_again;
COMMIT;

-- Nothing committed was lost by any of the failures above.
SELECT count(*) AS still_queued FROM err_qt;
SELECT count(*) AS delivered FROM aq.dequeue_array('err_q', NULL::err_ot, 100, aq.dequeue_options(wait => '0'));

-- The timeout is catchable by SQLSTATE in PL/pgSQL.
DO $$
BEGIN
  PERFORM aq.dequeue('err_q', NULL::err_ot, aq.dequeue_options(wait => '0'));
EXCEPTION WHEN SQLSTATE 'QA228' THEN
  RAISE NOTICE 'caught QA228: %', SQLERRM;
END $$;

SELECT aq.drop_queue_table('err_qt', force => true);
DROP TABLE taken;
DROP TYPE err_ot;
