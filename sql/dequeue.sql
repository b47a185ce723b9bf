-- Dequeue: order, batches, options and the message properties reported back.

SELECT aq.create_queue_table('deq_qt', 'text');
SELECT aq.create_queue('deq_q', 'deq_qt');
SELECT aq.start_queue('deq_q');
SELECT cardinality(aq.enqueue_array('deq_q', array_agg('m' || i ORDER BY i))) FROM generate_series(1, 10) i;

-- Returns what is available, in enqueue order, at once (no wait needed when messages exist).
SELECT msgid, payload FROM aq.dequeue_array('deq_q', NULL::text, 3);
SELECT msgid, payload FROM aq.dequeue('deq_q', NULL::text);
-- Fewer available than array_size: returns them all.
SELECT count(*) FROM aq.dequeue_array('deq_q', NULL::text, 500, aq.dequeue_options(wait => '0'));
SELECT count(*) AS left_in_queue FROM deq_qt;

-- Message properties come back: priority, correlation, attempts, enqueue time, state.
SELECT aq.enqueue('deq_q', 'props'::text, aq.message_properties(priority => 2, correlation => 'abc'));
SELECT payload, (message_properties).priority, (message_properties).correlation,
       (message_properties).attempts, (message_properties).state,
       (message_properties).enqueue_time <= now() AS enqueued_before_now
  FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));

-- Dequeue by msgid.
CREATE TEMP TABLE ids AS SELECT aq.enqueue_array('deq_q', ARRAY['a', 'b', 'c']) AS ids;
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0', msgid => (SELECT ids[2] FROM ids)));
SELECT try_sql($$SELECT aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0', msgid => -1))$$);

-- Dequeue by correlation, with Oracle's % and _ patterns.
SELECT aq.enqueue_array('deq_q', ARRAY['x1', 'x2', 'x3'],
                        ARRAY[aq.message_properties(correlation => 'order-1'),
                              aq.message_properties(correlation => 'invoice-1'),
                              aq.message_properties(correlation => 'order-22')]) IS NOT NULL AS enqueued;
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0', correlation => 'order-_'));
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0', correlation => 'order%'));
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0', correlation => '%'));
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0'));

-- A delayed message is not dequeued before its delay; an expired one is never delivered.
SELECT aq.enqueue('deq_q', 'later'::text, aq.message_properties(delay => '1 hour')) > 0 AS enqueued;
SELECT try_sql($$SELECT aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'))$$);
UPDATE deq_qt SET delay = now() - interval '1 s', expiration = now() - interval '1 ms';
SELECT try_sql($$SELECT aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'))$$);
UPDATE deq_qt SET expiration = NULL;
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));

-- Navigation: next_message continues after this transaction's last message; first_message
-- starts from the head; a message skipped by the position is still found when the tail is reached.
SELECT cardinality(aq.enqueue_array('deq_q', ARRAY['n1', 'n2', 'n3', 'n4'])) AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0', navigation => 'next_message'));
SAVEPOINT s;
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK TO SAVEPOINT s;  -- n3 is back in the queue, and the position is forgotten
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0', navigation => 'first_message'));
COMMIT;
SELECT count(*) AS left_in_queue FROM deq_qt;

-- A rolled-back dequeue returns its messages.
SELECT cardinality(aq.enqueue_array('deq_q', ARRAY['r1', 'r2'])) AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0'));
ROLLBACK;
SELECT payload FROM aq.dequeue_array('deq_q', NULL::text, 10, aq.dequeue_options(wait => '0'));

-- Dequeue in PL/pgSQL, typed into variables.
SELECT aq.enqueue('deq_q', 'plpgsql'::text) > 0 AS enqueued;
DO $$
DECLARE
  m record;
  body text;
BEGIN
  SELECT * INTO m FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));
  body := m.payload;
  RAISE NOTICE 'got "%" with priority %', body, (m.message_properties).priority;
  BEGIN
    PERFORM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));
  EXCEPTION WHEN SQLSTATE 'QA228' THEN
    RAISE NOTICE 'queue is empty: %', SQLERRM;
  END;
END $$;

-- Stopping a queue for dequeue only still allows enqueue, and the reverse.
SELECT aq.stop_queue('deq_q', enqueue => false);
SELECT aq.enqueue('deq_q', 'while stopped for dequeue'::text) > 0 AS enqueued;
SELECT try_sql($$SELECT aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'))$$);
SELECT aq.start_queue('deq_q', enqueue => false);
SELECT aq.stop_queue('deq_q', dequeue => false);
SELECT try_sql($$SELECT aq.enqueue('deq_q', 'x'::text)$$);
SELECT payload FROM aq.dequeue('deq_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT queue_name, enqueue_enabled, dequeue_enabled FROM aq.queues WHERE queue_name = 'deq_q';

-- A payload stored out of line (TOAST) stays readable after the dequeue deleted it: later in
-- the transaction, after COMMIT, and after VACUUM removed the deleted rows.
SELECT aq.create_queue_table('big_qt', 'bytea');
SELECT aq.create_queue('big_q', 'big_qt');
SELECT aq.start_queue('big_q');
SELECT aq.enqueue('big_q', (SELECT string_agg(decode(md5(i::text), 'hex'), ''::bytea) FROM generate_series(1, 20000) i)) AS msgid;
SELECT pg_column_size(user_data) AS stored_bytes FROM big_qt;
DO $$
DECLARE m record;
BEGIN
  SELECT * INTO m FROM aq.dequeue('big_q', NULL::bytea, aq.dequeue_options(wait => '0'));
  CREATE TEMP TABLE another_command AS SELECT 1;
  RAISE NOTICE 'after the dequeue: % bytes, md5 %', length(m.payload), md5(m.payload);
END $$;
SELECT aq.enqueue('big_q', (SELECT string_agg(decode(md5(i::text), 'hex'), ''::bytea) FROM generate_series(1, 20000) i)) AS msgid;
BEGIN;
DECLARE big CURSOR WITH HOLD FOR SELECT * FROM aq.dequeue_array('big_q', NULL::bytea, 10, aq.dequeue_options(wait => '0'));
COMMIT;
VACUUM big_qt;
DO $$
DECLARE c refcursor := 'big'; m record;
BEGIN
  FETCH c INTO m;
  RAISE NOTICE 'held cursor after COMMIT and VACUUM: % bytes, md5 %', length(m.payload), md5(m.payload);
END $$;
CLOSE big;

SELECT aq.stop_queue('deq_q');
SELECT aq.drop_queue('deq_q');
SELECT aq.drop_queue_table('deq_qt');
SELECT aq.drop_queue_table('big_qt', force => true);
