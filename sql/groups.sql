-- Transaction groups (create_queue_table(..., message_grouping => 'transactional')): every
-- message a transaction enqueues into the queue table is in its group; a consumer takes one
-- group at a time, NEXT_MESSAGE stays in it (QA235 at its end), NEXT_TRANSACTION moves on, and
-- the properties say the group and its last message.
SET client_min_messages = warning;
CREATE FUNCTION grp_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE sql;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
-- The payloads a dequeue_array returns, with the end-of-group flag (*), or the SQLSTATE.
CREATE FUNCTION grp_take(navigation text DEFAULT 'next_message', n integer DEFAULT 10, mode text DEFAULT 'remove')
RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT string_agg(payload || CASE WHEN (message_properties).end_of_group THEN '*' ELSE '' END, ' ' ORDER BY k)
              FROM aq.dequeue_array('grp_q', NULL::text, n,
                                    aq.dequeue_options(navigation => navigation, dequeue_mode => mode, wait => 0))
                   WITH ORDINALITY AS d(msgid, payload, message_properties, k));
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;

------------------------------------------------------------------------------ creation
SELECT aq.create_queue_table('grp_qt', 'text', message_grouping => 'transactional');
SELECT aq.create_queue('grp_q', 'grp_qt');
SELECT aq.start_queue('grp_q');
SELECT message_grouping FROM aq.queue_tables WHERE queue_table = 'grp_qt';
SELECT grp_try($$SELECT aq.create_queue_table('grp_bad', 'text', message_grouping => 'transactional', multiple_consumers => true)$$) AS multi;
SELECT grp_try($$SELECT aq.create_queue_table('grp_bad', 'text', sort_list => 'priority,enq_time', message_grouping => 'transactional')$$) AS by_priority;
SELECT grp_try($$SELECT aq.create_queue_table('grp_bad', 'text', message_grouping => 'sometimes')$$) AS bad_value;
SELECT aq.create_queue_table('grp_plain_qt', 'text');
SELECT aq.create_queue('grp_plain_q', 'grp_plain_qt');
SELECT aq.start_queue('grp_plain_q');
SELECT grp_try($$SELECT aq.dequeue('grp_plain_q', NULL::text, aq.dequeue_options(navigation => 'next_transaction', wait => 0))$$) AS ungrouped;

------------------------------------------------------------------------------ groups
-- One transaction, several calls: one group.  Autocommit calls: a group each.
BEGIN;
SELECT aq.enqueue('grp_q', 'a1'::text) > 0 AS enqueued;
SELECT cardinality(aq.enqueue_array('grp_q', ARRAY['a2', 'a3'])) AS enqueued;
SAVEPOINT s; SELECT aq.enqueue('grp_q', 'gone'::text) > 0 AS enqueued; ROLLBACK TO s;
SELECT aq.enqueue('grp_q', 'a4'::text, aq.message_properties(correlation => 'in-a')) > 0 AS enqueued;
COMMIT;
SELECT cardinality(aq.enqueue_array('grp_q', ARRAY['b1', 'b2'])) AS enqueued;
SELECT aq.enqueue('grp_q', 'c1'::text) > 0 AS enqueued;
SELECT string_agg(user_data, ' ' ORDER BY msgid) AS members, count(DISTINCT transaction_group) = 1 AS one_group
  FROM ONLY grp_qt GROUP BY transaction_group ORDER BY min(msgid);

------------------------------------------------------------------------------ navigation
-- Browse walks the groups as a dequeue would, taking nothing.
SELECT grp_take('first_message', mode => 'browse') AS browsed, grp_take('next_transaction', mode => 'browse') AS browsed_next,
       grp_take('next_transaction', mode => 'browse') AS browsed_last;
-- NEXT_MESSAGE stays in the group and ends with QA235; NEXT_TRANSACTION moves to the next.
BEGIN;
SELECT grp_take(n => 2) AS first, grp_take(n => 1) AS more, grp_take() AS rest, grp_take() AS at_end;
SELECT grp_take('next_transaction') AS next_group, grp_take() AS at_end;
SELECT grp_take('next_transaction') AS last_group, grp_take('next_transaction') AS none_left;
ROLLBACK;
-- FIRST_MESSAGE: the first group (from the head again); the properties name the group.
BEGIN;
SELECT grp_take('first_message', 1) AS first, grp_take('first_message', 1) AS first_again;
SELECT count(DISTINCT (message_properties).transaction_group) AS groups, bool_and((message_properties).transaction_group IS NOT NULL) AS named
  FROM aq.dequeue_array('grp_q', NULL::text, 10, aq.dequeue_options(wait => 0));
ROLLBACK;
-- NEXT_TRANSACTION skips what is left of the current group: it stays for another transaction.
BEGIN;
SELECT grp_take(n => 1) AS one_of_a, grp_take('next_transaction') AS b;
COMMIT;
SELECT grp_take() AS a_rest_later;
-- A group taken in a savepoint that rolls back is free again: another transaction may take it,
-- and this one starts over from the first group it can lock.
BEGIN;
SAVEPOINT s;
SELECT grp_take(n => 1) AS in_savepoint;
ROLLBACK TO s;
SELECT grp_take(n => 1) AS after_rollback, grp_take() AS rest;
ROLLBACK;
-- Locked mode locks a group as remove does.
BEGIN;
SELECT grp_take(mode => 'locked') AS locked;
ROLLBACK;

------------------------------------------------------------------------------ what a group refuses
SELECT grp_try($$SELECT aq.dequeue('grp_q', NULL::text, aq.dequeue_options(correlation => 'in-a', wait => 0))$$) AS by_correlation;
SELECT grp_try($$SELECT aq.dequeue('grp_q', NULL::text, aq.dequeue_options(msgid => 1, wait => 0))$$) AS by_msgid;
SELECT grp_try($$SELECT aq.dequeue('grp_q', NULL::text, aq.dequeue_options(deq_condition => 'true', wait => 0))$$) AS by_condition;
SELECT grp_try($$SELECT aq.dequeue_array('grp_q', NULL::text, 10, aq.dequeue_options(navigation => 'next_message_multi_group', wait => 0))$$) AS multi_group;

------------------------------------------------------------------------------ the end
SELECT grp_take() AS last;
SELECT count(*) AS left_behind FROM ONLY grp_qt;

------------------------------------------------------------------------------ both paths alike
-- A trigger on a grouped queue table sends its enqueues and dequeues through the statements;
-- they give what the bulk paths give.
CREATE FUNCTION grp_noop() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RETURN COALESCE(NEW, OLD); END $$;
CREATE FUNCTION grp_round(queue text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE r text := '';
BEGIN
    PERFORM aq.enqueue_array(queue, ARRAY['x1', 'x2', 'x3']);
    r := r || (SELECT string_agg(payload || CASE WHEN (message_properties).end_of_group THEN '*' ELSE '' END
                                 || CASE WHEN (message_properties).transaction_group IS NULL THEN '?' ELSE '' END, ' ' ORDER BY k)
                 FROM aq.dequeue_array(queue, NULL::text, 2, aq.dequeue_options(wait => 0))
                      WITH ORDINALITY AS d(msgid, payload, message_properties, k));
    r := r || ' | ' || (SELECT string_agg(payload || CASE WHEN (message_properties).end_of_group THEN '*' ELSE '' END, ' ' ORDER BY k)
                          FROM aq.dequeue_array(queue, NULL::text, 2, aq.dequeue_options(wait => 0))
                               WITH ORDINALITY AS d(msgid, payload, message_properties, k));
    RETURN r;
END $$;
SELECT aq.create_queue_table('grp_twin_qt', 'text', message_grouping => 'transactional');
SELECT aq.create_queue('grp_twin_q', 'grp_twin_qt');
SELECT aq.start_queue('grp_twin_q');
CREATE TRIGGER grp_noop BEFORE INSERT OR UPDATE OR DELETE ON grp_twin_qt FOR EACH ROW EXECUTE FUNCTION grp_noop();
SELECT grp_round('grp_q') AS bulk, grp_round('grp_twin_q') AS statements;
SELECT aq.drop_queue_table('grp_twin_qt', force => true);
DROP FUNCTION grp_round(text), grp_noop();

-- A message moved out of the queue and back by hand lowers no floor: FIRST_MESSAGE still finds
-- its group from the head, after a later group was taken (a new queue table, so that the groups'
-- floor is this test's alone).
SELECT aq.create_queue_table('grp_back_qt', 'text', message_grouping => 'transactional');
SELECT aq.create_queue('grp_back_q', 'grp_back_qt');
SELECT aq.start_queue('grp_back_q');
SELECT aq.enqueue('grp_back_q', 'h1'::text) > 0 AS enqueued;
UPDATE ONLY grp_back_qt SET q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'aq$_grp_back_qt_e');
SELECT aq.enqueue('grp_back_q', 'n1'::text) > 0 AS enqueued;
SELECT payload AS later_group FROM aq.dequeue('grp_back_q', NULL::text, aq.dequeue_options(wait => 0));
UPDATE ONLY grp_back_qt SET q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'grp_back_q');
SELECT payload AS moved_back
  FROM aq.dequeue('grp_back_q', NULL::text, aq.dequeue_options(wait => 0, navigation => 'first_message'));
SELECT aq.drop_queue_table('grp_back_qt', force => true);
SELECT aq.drop_queue_table('grp_qt', force => true);
SELECT aq.drop_queue_table('grp_plain_qt', force => true);
DROP FUNCTION grp_try(text), grp_take(text, integer, text);
