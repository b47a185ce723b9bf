-- Removal you can see: aq.consumer_info (PgQ's get_consumer_info) shows each consumer's waiting
-- messages, its oldest, the attempts not yet counted, which consumer holds the queue's removal
-- back, and the messages waiting for a sweep.
SELECT aq.create_queue_table('ci_qt', 'text', multiple_consumers => true);
SELECT aq.create_queue('ci_q', 'ci_qt');
SELECT aq.start_queue('ci_q');
SELECT aq.add_subscriber('ci_q', aq.agent(s)) FROM unnest(ARRAY['fast', 'slow']) s;
SELECT count(aq.enqueue(q, m)) AS enqueued FROM (VALUES ('ci_q', 'm1'::text), ('ci_q', 'm2'), ('ci_q', 'm3')) v(q, m);
SELECT aq.create_queue_table('ci_single_qt', 'text');
SELECT aq.create_queue('ci_single_q', 'ci_single_qt', max_retries => 3);
SELECT aq.start_queue('ci_single_q');
SELECT aq.enqueue('ci_single_q', 'x'::text) > 0 AS enqueued;
-- fast takes two: slow holds the removal back; nothing is removable yet.
SELECT count(*) AS taken FROM aq.dequeue_array('ci_q', NULL::text, 2, aq.dequeue_options(consumer_name => 'fast', wait => 0));
SELECT queue, consumer, waiting, ready, lag >= '0' AS has_lag, unsettled, holds_removal, removable
  FROM aq.consumer_info() WHERE queue LIKE 'ci\_%' ORDER BY queue, consumer;
-- slow takes all three: fast's last message is the oldest now.
SELECT count(*) AS taken FROM aq.dequeue_array('ci_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'slow', wait => 0));
SELECT queue, consumer, waiting, holds_removal, removable FROM aq.consumer_info('ci_q');
-- A message whose deliveries were all deleted by hand waits for a sweep.
SELECT cardinality(aq.enqueue_array('ci_q', ARRAY['m4']));
DELETE FROM ONLY "aq$_ci_qt_i" WHERE msgid = (SELECT max(msgid) FROM ONLY ci_qt);
SELECT queue, consumer, waiting, removable FROM aq.consumer_info('ci_q');
-- Only the queues the caller may dequeue from.
CREATE ROLE regress_ci_nobody;
SET ROLE regress_ci_nobody;
SELECT count(*) AS visible FROM aq.consumer_info() WHERE queue LIKE 'ci\_%';
RESET ROLE;
DROP ROLE regress_ci_nobody;
SELECT aq.drop_queue_table('ci_qt', force => true);
SELECT aq.drop_queue_table('ci_single_qt', force => true);
