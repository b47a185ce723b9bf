-- Queues III: aq.listen (Oracle's DBMS_AQ.LISTEN) on several queues; wake-ups by commits are in
-- test/specs/listen_wakeup.spec.
SELECT aq.create_queue_table('lis_qt', 'text');
SELECT aq.create_queue_table('lis_prio_qt', 'jsonb', sort_list => 'priority,enq_time');
SELECT aq.create_queue('lis_a', 'lis_qt');
SELECT aq.create_queue('lis_b', 'lis_qt');
SELECT aq.create_queue('lis_p', 'lis_prio_qt');
SELECT aq.start_queue(q) FROM unnest(ARRAY['lis_a', 'lis_b', 'lis_p', 'aq$_lis_qt_e']) q;
CREATE FUNCTION lis(agents aq.agent[], wait interval DEFAULT '0') RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT (a).address FROM aq.listen(agents, wait) AS a);
EXCEPTION WHEN SQLSTATE 'QA254' THEN
    RETURN '-';
END $$;

-- Nothing yet: QA254 at once with wait => '0'.
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a'), aq.agent(address => 'lis_b')], '0')$$) AS empty;
-- The first agent in the list whose queue has a message; it is returned as given, and the
-- message stays for a dequeue.
SELECT aq.enqueue('lis_b', 'b1'::text) > 0 AS enqueued;
SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a'), aq.agent(address => 'lis_b', protocol => 0)], '0') AS agent;
SELECT aq.enqueue('lis_a', 'a1'::text) > 0 AS enqueued;
SELECT lis(ARRAY[aq.agent(address => 'lis_b'), aq.agent(address => 'lis_a')]) AS first_in_list;
SELECT lis(ARRAY[aq.agent(address => 'lis_a'), aq.agent(address => 'lis_b')]) AS first_in_list;
SELECT count(*) AS still_there FROM lis_qt;
-- A message this session is dequeuing (not committed) is not one a dequeue could take.
BEGIN;
SELECT payload FROM aq.dequeue('lis_a', NULL::text, aq.dequeue_options(wait => '0'));
SELECT lis(ARRAY[aq.agent(address => 'lis_a')]) AS held_by_my_dequeue;
ROLLBACK;
SELECT lis(ARRAY[aq.agent(address => 'lis_a')]) AS back_after_rollback;
SELECT string_agg(payload, ' ' ORDER BY payload) AS drained FROM (
  SELECT payload FROM aq.dequeue_array('lis_a', NULL::text, 10, aq.dequeue_options(wait => '0'))
  UNION ALL SELECT payload FROM aq.dequeue_array('lis_b', NULL::text, 10, aq.dequeue_options(wait => '0'))) d;

-- A delayed message is not ready until its delay has passed; LISTEN wakes up for it.
SELECT aq.enqueue('lis_a', 'later'::text, aq.message_properties(delay => '0.3 s')) > 0 AS enqueued;
SELECT lis(ARRAY[aq.agent(address => 'lis_a')]) AS delayed_not_ready;
SELECT lis(ARRAY[aq.agent(address => 'lis_a')], '30 s') AS ready_after_delay,
       clock_timestamp() - statement_timestamp() < interval '10 s' AS in_time;
SELECT payload FROM aq.dequeue('lis_a', NULL::text, aq.dequeue_options(wait => '0'));
-- An expired message is not ready in its queue.  LISTEN on an exception queue moves the expired
-- messages of its queue table there first (as a dequeue from it does), and then has one.
SELECT aq.enqueue('lis_b', 'gone'::text, aq.message_properties(expiration => '0')) > 0 AS enqueued;
SELECT lis(ARRAY[aq.agent(address => 'lis_b')]) AS expired_not_ready;
SELECT lis(ARRAY[aq.agent(address => 'lis_b'), aq.agent(address => 'aq$_lis_qt_e')]) AS exception_queue;
SELECT payload, (message_properties).state FROM aq.dequeue('aq$_lis_qt_e', NULL::text, aq.dequeue_options(wait => '0'));
-- A priority-ordered queue table.
SELECT aq.enqueue('lis_p', '{"n": 1}'::jsonb) > 0 AS enqueued;
SELECT lis(ARRAY[aq.agent(address => 'lis_a'), aq.agent(address => 'lis_p')]) AS priority_queue;

-- Errors.
SELECT try_sql($$SELECT aq.listen(NULL, '0')$$) AS null_list;
SELECT try_sql($$SELECT aq.listen(ARRAY[]::aq.agent[], '0')$$) AS empty_list;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a'), NULL], '0')$$) AS null_agent;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(name => 'x')], '0')$$) AS no_address;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'no_such_queue')], '0')$$) AS unknown_queue;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a'), aq.agent('c1', 'lis_b')], '0')$$) AS consumer_on_single;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a')], '-1 s')$$) AS negative_wait;
SELECT try_sql($$SELECT aq.listen(array_agg(aq.agent(address => 'lis_a')), '0') FROM generate_series(1, 1001)$$) AS too_many;
SELECT aq.stop_queue('lis_b', enqueue => false);
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a'), aq.agent(address => 'lis_b')], '0')$$) AS stopped;
SELECT aq.start_queue('lis_b');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_b')], '1 s')$$) AS repeatable_read;
ROLLBACK;
-- Privileges: LISTEN reads the queue tables as the caller.
CREATE ROLE regress_listener;
SET ROLE regress_listener;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a')], '0')$$) AS no_privilege;
RESET ROLE;
SELECT aq.grant_queue_privilege('DEQUEUE', 'lis_a', 'regress_listener');
SET ROLE regress_listener;
SELECT try_sql($$SELECT aq.listen(ARRAY[aq.agent(address => 'lis_a')], '0')$$) AS with_dequeue_privilege;
RESET ROLE;
SELECT aq.revoke_queue_privilege('DEQUEUE', 'lis_a', 'regress_listener');
DROP ROLE regress_listener;

SELECT aq.drop_queue_table('lis_qt', force => true);
SELECT aq.drop_queue_table('lis_prio_qt', force => true);
DROP FUNCTION lis(aq.agent[], interval);
