-- Queues III: multi-consumer queue tables.  Subscribers (with rules) and recipient lists
-- decide who receives a message; each consumer dequeues its own deliveries, with its own
-- order, attempts and exception queue; a message goes once every recipient has it.
CREATE TYPE sub_order_t AS (id integer, amount numeric, kind text);
SELECT aq.create_queue_table('sub_qt', 'sub_order_t', multiple_consumers => true);
SELECT aq.create_queue('sub_q', 'sub_qt', max_retries => 1);
SELECT aq.start_queue('sub_q');
SELECT multiple_consumers, delivery_relid::text, message_grouping FROM aq.queue_tables WHERE queue_table = 'sub_qt';
-- The ids a consumer dequeues, in order; '-' when it has none (QA228).
CREATE FUNCTION sub_ids(consumer text, mode text DEFAULT 'remove', navigation text DEFAULT 'next_message',
                        queue text DEFAULT 'sub_q', n integer DEFAULT 100, condition text DEFAULT NULL,
                        correlation text DEFAULT NULL)
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT string_agg((payload).id::text, ' ' ORDER BY k)
              FROM aq.dequeue_array(queue, NULL::sub_order_t, n,
                                    aq.dequeue_options(consumer_name => consumer, dequeue_mode => mode,
                                                       navigation => navigation, wait => 0,
                                                       deq_condition => condition, correlation => correlation))
                   WITH ORDINALITY AS d(msgid, payload, props, k));
EXCEPTION WHEN SQLSTATE 'QA228' THEN
    RETURN '-';
END $$;
-- What is waiting, per consumer.
CREATE VIEW sub_waiting AS
    SELECT consumer_name, string_agg((user_data).id::text, ' ' ORDER BY enq_time, msg_id) AS ids
      FROM "aq$sub_qt" WHERE queue = 'sub_q' GROUP BY consumer_name ORDER BY consumer_name;

------------------------------------------------------------------------------ subscribers
SELECT aq.add_subscriber('sub_q', aq.agent('billing'));
SELECT aq.add_subscriber('sub_q', aq.agent('audit'), rule => 'tab.user_data.amount > 100');
SELECT aq.add_subscriber('sub_q', aq.agent('refunds'), rule => 'tab.user_data.kind = ''refund'' OR corrid LIKE ''r-%''');
SELECT queue, name, address, protocol, rule FROM "aq$sub_qt_s" ORDER BY name;
-- Errors: the rule is checked when it is set, as a deq_condition is.
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('billing'))$$) AS duplicate;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('x'), rule => 'tab.user_data.nope > 1')$$) AS unknown_field;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('x'), rule => 'amount >')$$) AS syntax;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('x'), rule => '(SELECT true)')$$) AS subquery;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('x'), rule => 'priority')$$) AS not_boolean;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', NULL)$$) AS null_agent;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent(NULL))$$) AS null_name;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('x', 'other_q@db'))$$) AS address;
SELECT try_sql($$SELECT aq.add_subscriber('sub_q', aq.agent('x'), transformation => 'f')$$) AS transformation;
SELECT try_sql($$SELECT aq.add_subscriber('aq$_sub_qt_e', aq.agent('x'))$$) AS exception_queue;
SELECT try_sql($$SELECT aq.add_subscriber('no_such_q', aq.agent('x'))$$) AS unknown_queue;
SELECT try_sql($$SELECT aq.alter_subscriber('sub_q', aq.agent('nobody'), NULL)$$) AS alter_unknown;
SELECT try_sql($$SELECT aq.alter_subscriber('sub_q', aq.agent('audit'), 'tab.user_data.amount >')$$) AS alter_bad_rule;
SELECT try_sql($$SELECT aq.remove_subscriber('sub_q', aq.agent('nobody'))$$) AS remove_unknown;
-- A single-consumer queue has no subscribers, and its dequeues name no consumer.
SELECT aq.create_queue_table('sub_single_qt', 'sub_order_t');
SELECT aq.create_queue('sub_single_q', 'sub_single_qt');
SELECT aq.start_queue('sub_single_q');
SELECT try_sql($$SELECT aq.add_subscriber('sub_single_q', aq.agent('x'))$$) AS single_consumer;
SELECT try_sql($$SELECT aq.dequeue('sub_single_q', NULL::sub_order_t, aq.dequeue_options(consumer_name => 'x', wait => 0))$$)
       AS single_with_consumer;
-- A multi-consumer queue's dequeue must name one.
SELECT try_sql($$SELECT aq.dequeue('sub_q', NULL::sub_order_t, aq.dequeue_options(wait => 0))$$) AS no_consumer;
-- Oracle's message_grouping values; transactional groups are not there yet.
SELECT try_sql($$SELECT aq.create_queue_table('sub_bad_qt', 'sub_order_t', message_grouping => 'sometimes')$$) AS bad_grouping;

------------------------------------------------------------------------------ fan-out
-- Each message reaches every subscriber whose rule it matches, element by element.
SELECT array_length(aq.enqueue_array('sub_q',
       ARRAY[ROW(1, 50, 'sale'), ROW(2, 150, 'sale'), ROW(3, 20, 'refund'), ROW(4, 500, 'refund')]::sub_order_t[],
       ARRAY[aq.message_properties(), aq.message_properties(), aq.message_properties(), aq.message_properties(correlation => 'r-4')]), 1);
SELECT * FROM sub_waiting;
-- A recipient_list replaces the subscribers: those consumers, each once, subscribed or not.
SELECT aq.enqueue('sub_q', ROW(5, 1000, 'sale')::sub_order_t,
                  aq.message_properties(recipient_list => ARRAY[aq.agent('shipping'), aq.agent('audit'), aq.agent('shipping')])) > 0 AS listed;
SELECT * FROM sub_waiting;
-- Recipient list errors.
SELECT try_sql($$SELECT aq.enqueue('sub_q', ROW(9, 1, 'x')::sub_order_t,
                  aq.message_properties(recipient_list => ARRAY[aq.agent(NULL)]))$$) AS unnamed_recipient;
SELECT try_sql($$SELECT aq.enqueue('sub_q', ROW(9, 1, 'x')::sub_order_t,
                  aq.message_properties(recipient_list => ARRAY[aq.agent('a', 'q@elsewhere')]))$$) AS remote_recipient;
-- The messages are stored once.
SELECT count(*) AS messages FROM ONLY sub_qt;

------------------------------------------------------------------------------ consumption
-- Browse and locked per consumer; removing takes what the consumer was sent, nothing else.
SELECT sub_ids('audit', 'browse') AS audit_browse, sub_ids('audit', 'browse') AS audit_browse_next,
       sub_ids('audit', 'browse', 'first_message') AS audit_browse_first;
BEGIN;
SELECT sub_ids('billing', 'locked', n => 1) AS billing_locked;
-- Another session of the same consumer would skip it; this one removes it by msgid.
SELECT (payload).id FROM aq.dequeue('sub_q', NULL::sub_order_t,
       aq.dequeue_options(consumer_name => 'billing', wait => 0,
                          msgid => (SELECT msg_id FROM "aq$sub_qt" WHERE consumer_name = 'billing' AND (user_data).id = 1)));
COMMIT;
SELECT sub_ids('billing') AS billing, sub_ids('billing') AS billing_again;
SELECT sub_ids('audit', condition => 'tab.user_data.kind = ''sale''') AS audit_sales;
SELECT sub_ids('refunds', correlation => 'r-%') AS refunds_by_correlation;
SELECT * FROM sub_waiting;
-- Only what some recipient still has is kept.
SELECT string_agg((user_data).id::text, ' ' ORDER BY msgid) AS kept FROM ONLY sub_qt;
SELECT sub_ids('audit') AS audit, sub_ids('refunds') AS refunds, sub_ids('shipping') AS shipping;
SELECT count(*) AS kept FROM ONLY sub_qt;

------------------------------------------------------------------------------ attempts per consumer
-- A rolled-back dequeue is an attempt for that consumer only; past max_retries (1) the
-- consumer's delivery moves to the exception queue, the other consumers keep theirs.
SELECT aq.enqueue('sub_q', ROW(10, 200, 'sale')::sub_order_t) > 0 AS enqueued;
BEGIN; SELECT sub_ids('audit') AS audit_try_1; ROLLBACK;
SELECT consumer_name, queue, retry_count FROM "aq$sub_qt" ORDER BY consumer_name;
BEGIN; SELECT sub_ids('audit') AS audit_try_2; ROLLBACK;
SELECT consumer_name, queue, retry_count, msg_state FROM "aq$sub_qt" ORDER BY consumer_name;
SELECT sub_ids('audit') AS audit_after, sub_ids('billing') AS billing;
-- The exception queue: by consumer, or any consumer's with consumer_name NULL.
SELECT aq.start_queue('aq$_sub_qt_e', enqueue => false);
SELECT sub_ids('billing', queue => 'aq$_sub_qt_e') AS billing_expired;
SELECT sub_ids(NULL, queue => 'aq$_sub_qt_e') AS any_expired;
SELECT count(*) AS kept FROM ONLY sub_qt;

------------------------------------------------------------------------------ moved back by hand
-- A delivery that moved to the exception queue carries its message; moved back into its queue
-- by hand after the message itself went, it is dequeued with what it carries, by the bulk path
-- (an array) and by the statement (by msgid) alike.
SELECT array_length(aq.enqueue_array('sub_q', ARRAY[ROW(13, 300, 'sale'), ROW(14, 300, 'sale')]::sub_order_t[],
       ARRAY[aq.message_properties(correlation => 'back-13'), aq.message_properties(correlation => 'back-14')]), 1) AS enqueued;
BEGIN; SELECT sub_ids('audit') AS audit_try_1; ROLLBACK;
BEGIN; SELECT sub_ids('audit') AS audit_try_2; ROLLBACK;
SELECT sub_ids('audit') AS audit_none, sub_ids('billing') AS billing;
SELECT count(*) AS messages_left FROM ONLY sub_qt WHERE (user_data).id IN (13, 14);
UPDATE ONLY "aq$_sub_qt_i" SET q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'sub_q'), retry_count = 0
 WHERE consumer_name = 'audit' AND q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'aq$_sub_qt_e');
SELECT (payload).id, (message_properties).correlation AS corr
  FROM aq.dequeue('sub_q', NULL::sub_order_t,
                  aq.dequeue_options(consumer_name => 'audit', wait => 0,
                                     msgid => (SELECT msgid FROM ONLY "aq$_sub_qt_i" WHERE consumer_name = 'audit'
                                                AND (user_data).id = 14)));
-- (first_message: a row written by hand does not lower the consumer's scan floor, which may be past
-- it; next_message finds it within a second.)
SELECT (payload).id, (message_properties).correlation AS corr
  FROM aq.dequeue_array('sub_q', NULL::sub_order_t, 10, aq.dequeue_options(consumer_name => 'audit', wait => 0,
                                                                           navigation => 'first_message'));
SELECT count(*) AS deliveries_left FROM ONLY "aq$_sub_qt_i" WHERE (user_data).id IN (13, 14);

------------------------------------------------------------------------------ LISTEN
SELECT aq.enqueue('sub_q', ROW(11, 1, 'sale')::sub_order_t) > 0 AS enqueued;
SELECT (aq.listen(ARRAY[aq.agent('audit', 'sub_q'), aq.agent('billing', 'sub_q')], wait => 0)).name AS ready_consumer;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent('audit', 'sub_q')], wait => 0)$$) AS audit_has_none;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(NULL, 'sub_q')], wait => 0)$$) AS no_consumer;
SELECT sub_ids('billing') AS billing;

------------------------------------------------------------------------------ subscribers change
-- A new subscriber receives what is enqueued from then on; a new rule applies from then on;
-- a removed subscriber's waiting deliveries go, and with them messages nobody else waits for.
SELECT aq.enqueue('sub_q', ROW(12, 5, 'sale')::sub_order_t) > 0 AS enqueued;
SELECT aq.add_subscriber('sub_q', aq.agent('late'));
SELECT aq.alter_subscriber('sub_q', aq.agent('audit'), NULL);
SELECT aq.enqueue('sub_q', ROW(13, 5, 'sale')::sub_order_t) > 0 AS enqueued;
SELECT * FROM sub_waiting;
SELECT aq.remove_subscriber('sub_q', aq.agent('billing'));
SELECT * FROM sub_waiting;
SELECT string_agg((user_data).id::text, ' ' ORDER BY msgid) AS kept FROM ONLY sub_qt;
-- With no subscriber a message has no recipient (Oracle's ORA-24033): the enqueue fails whole.
SELECT aq.remove_subscriber('sub_q', aq.agent(s)) FROM unnest(ARRAY['audit', 'late']) s;
SELECT try_sql($$SELECT aq.enqueue('sub_q', ROW(14, 5, 'sale')::sub_order_t)$$) AS no_recipients;
-- Nor when no rule matches.
SELECT try_sql($$SELECT aq.enqueue_array('sub_q', ARRAY[ROW(15, 1, 'refund'), ROW(16, 1, 'sale')]::sub_order_t[])$$)
       AS partly_unmatched;
SELECT string_agg((user_data).id::text, ' ' ORDER BY msgid) AS kept FROM ONLY sub_qt;

------------------------------------------------------------------------------ priority order
SELECT aq.create_queue_table('sub_prio_qt', 'sub_order_t', sort_list => 'priority,enq_time', multiple_consumers => true);
SELECT aq.create_queue('sub_prio_q', 'sub_prio_qt');
SELECT aq.start_queue('sub_prio_q');
SELECT aq.add_subscriber('sub_prio_q', aq.agent(s)) FROM unnest(ARRAY['a', 'b']) s;
SELECT array_length(aq.enqueue_array('sub_prio_q', ARRAY[ROW(1, 1, 'x'), ROW(2, 1, 'x'), ROW(3, 1, 'x')]::sub_order_t[],
       ARRAY[aq.message_properties(priority => 3), aq.message_properties(priority => 1), aq.message_properties(priority => 2)]), 1);
SELECT sub_ids('a', queue => 'sub_prio_q', n => 2) AS a_first_two, sub_ids('b', queue => 'sub_prio_q') AS b_all,
       sub_ids('a', queue => 'sub_prio_q') AS a_rest;

------------------------------------------------------------------------------ delivery rows: multi-insert and statement alike
-- The enqueue writes delivery rows by multi-insert; a trigger on the delivery table sends them
-- through the statements instead.  The rows are the same either way.
CREATE TABLE sub_fired (n int);
SELECT aq.add_subscriber('sub_q', aq.agent(s)) FROM unnest(ARRAY['f2', 'f1']) s;
CREATE FUNCTION sub_rows(ids bigint[]) RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(format('%s q=%s p=%s delay=%s expires=%s exc=%s retries=%s', consumer_name, q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'sub_q'),
                           priority, delay - enq_time, expiration - delay, exception_queue, retry_count),
                    '; ' ORDER BY array_position(ids, msgid), consumer_name)
    FROM ONLY "aq$_sub_qt_i" WHERE msgid = ANY (ids) $$;
CREATE FUNCTION sub_fan() RETURNS text LANGUAGE sql AS $$
  SELECT sub_rows(aq.enqueue_array('sub_q', ARRAY[ROW(30, 1, 'x'), ROW(31, 1, 'x')]::sub_order_t[],
         ARRAY[aq.message_properties(priority => 4, delay => '1 hour', expiration => '2 hours', correlation => 'fan-test',
                                     exception_queue => 'public.sub_fan_exc'),
               aq.message_properties(correlation => 'fan-test', recipient_list => ARRAY[aq.agent('r2'), aq.agent('r1')])])) $$;
SELECT sub_fan() AS by_multi_insert \gset
SELECT :'by_multi_insert' AS delivery_rows;
CREATE FUNCTION sub_count() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN INSERT INTO public.sub_fired VALUES (1); RETURN NEW; END $$;
CREATE TRIGGER sub_count BEFORE INSERT ON "aq$_sub_qt_i" FOR EACH ROW EXECUTE FUNCTION sub_count();
SELECT sub_fan() = :'by_multi_insert' AS same_rows;
SELECT count(*) > 0 AS by_statement FROM sub_fired;
DROP TRIGGER sub_count ON "aq$_sub_qt_i";
SELECT aq.purge_queue_table('sub_qt', aq.purge_condition(correlation => 'fan-test')) AS purged;
DROP FUNCTION sub_fan(), sub_rows(bigint[]), sub_count();
DROP TABLE sub_fired;
SELECT aq.remove_subscriber('sub_q', aq.agent(s)) FROM unnest(ARRAY['f2', 'f1']) s;

------------------------------------------------------------------------------ purge and drop
SELECT aq.add_subscriber('sub_q', aq.agent(s)) FROM unnest(ARRAY['p1', 'p2']) s;
SELECT array_length(aq.enqueue_array('sub_q', ARRAY[ROW(20, 1, 'x'), ROW(21, 1, 'x')]::sub_order_t[],
       ARRAY[aq.message_properties(correlation => 'purge-me'), aq.message_properties()]), 1);
SELECT aq.purge_queue_table('sub_qt', aq.purge_condition(correlation => 'purge-me')) AS purged;
SELECT * FROM sub_waiting;
SELECT aq.stop_queue('sub_q');
SELECT aq.drop_queue('sub_q');
SELECT count(*) AS deliveries FROM ONLY "aq$_sub_qt_i";
SELECT count(*) AS subscribers FROM aq.subscribers;
DROP VIEW sub_waiting;
SELECT aq.drop_queue_table('sub_qt', force => true);
SELECT aq.drop_queue_table('sub_prio_qt', force => true);
SELECT count(*) AS left_behind FROM pg_class WHERE relname LIKE '%sub_qt%' OR relname LIKE '%sub_prio_qt%';
