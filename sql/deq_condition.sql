-- Queues III: dequeue conditions (Oracle's deq_condition), a boolean expression over the
-- message's columns and its payload's fields, parsed by PostgreSQL's parser as one expression.
CREATE TYPE cond_order_t AS (id integer, amount numeric, kind text);
SELECT aq.create_queue_table('cond_qt', 'cond_order_t');
SELECT aq.create_queue('cond_q', 'cond_qt');
SELECT aq.create_queue('cond_other_q', 'cond_qt');
SELECT aq.start_queue(q) FROM unnest(ARRAY['cond_q', 'cond_other_q']) q;
-- The ids dequeued, in order; '-' when nothing matched (QA228).
CREATE FUNCTION cond_ids(options aq.dequeue_options, queue text DEFAULT 'cond_q') RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT string_agg((payload).id::text, ' ' ORDER BY n)
              FROM aq.dequeue_array(queue, NULL::cond_order_t, 100, options) WITH ORDINALITY AS d(msgid, payload, props, n));
EXCEPTION WHEN SQLSTATE 'QA228' THEN
    RETURN '-';
END $$;
CREATE FUNCTION cond_fill() RETURNS void LANGUAGE sql AS $$
    SELECT aq.enqueue_array('cond_q',
           ARRAY[ROW(1, 50, 'sale'), ROW(2, 150, 'sale'), ROW(3, 250, 'refund'), ROW(4, 500, 'sale'),
                 ROW(5, 101, 'refund')]::cond_order_t[],
           ARRAY[aq.message_properties(priority => 5), aq.message_properties(priority => 1),
                 aq.message_properties(priority => 2, correlation => 'c-3'), aq.message_properties(priority => 3),
                 aq.message_properties(priority => 0, correlation => 'c-5')]);
    SELECT aq.enqueue('cond_other_q', ROW(99, 1000, 'sale')::cond_order_t);
$$;
SELECT cond_fill();

------------------------------------------------------------------------------ the article's form
-- Only the messages the condition matches, in the queue's order; the others stay.
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.amount > 100 AND priority < 3')) AS matched;
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.amount > 100 AND priority < 3')) AS again;
-- One at a time with aq.dequeue; none left: QA228 as for an empty queue.
SELECT (payload).id FROM aq.dequeue('cond_q', NULL::cond_order_t,
       aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.kind = ''sale'''));
SELECT try_sql($$SELECT aq.dequeue('cond_q', NULL::cond_order_t,
       aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.amount > 10000'))$$) AS none_matches;
-- Other queues of the queue table are out of reach, whatever the condition says.
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'true')) AS rest;
SELECT cond_ids(aq.dequeue_options(wait => '0'), 'cond_other_q') AS other_queue;

------------------------------------------------------------------------------ the forms of names
SELECT cond_fill();
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'user_data.kind = ''refund''')) AS column_field;
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => '(tab.user_data).amount = 500')) AS indirection;
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'tab.priority = 1 OR msgid < 0')) AS qualified;
SELECT cond_ids(aq.dequeue_options(wait => '0',
       deq_condition => 'CASE WHEN retry_count = 0 THEN lower(upper((user_data).kind)) = ''sale'' END AND enq_time <= now()
                         AND delay IS NULL AND expiration IS NULL AND exception_queue IS NULL AND enq_uid = current_user')) AS functions_case;
SELECT cond_ids(aq.dequeue_options(wait => '0')) AS rest;

------------------------------------------------------------------------------ with the other options
SELECT cond_fill();
-- browse reads the matching messages without removing them; locked locks them.
SELECT cond_ids(aq.dequeue_options(wait => '0', dequeue_mode => 'browse', navigation => 'first_message',
       deq_condition => 'corrid IS NOT NULL')) AS browsed;
BEGIN;
SELECT cond_ids(aq.dequeue_options(wait => '0', dequeue_mode => 'locked', deq_condition => 'priority >= 3')) AS locked;
-- A remove dequeue takes the messages this transaction locked, as by msgid.
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'priority >= 3')) AS removed_after_locking;
ROLLBACK;
-- with correlation and msgid
SELECT cond_ids(aq.dequeue_options(wait => '0', correlation => 'c-%', deq_condition => 'tab.user_data.amount > 200')) AS correlation;
SELECT cond_ids(aq.dequeue_options(wait => '0', msgid => (SELECT min(msgid) FROM cond_qt WHERE (user_data).id = 4),
       deq_condition => 'tab.user_data.id = 1')) AS msgid_not_matching;
-- a priority-ordered queue table
SELECT aq.create_queue_table('cond_prio_qt', 'jsonb', sort_list => 'priority,enq_time');
SELECT aq.create_queue('cond_prio_q', 'cond_prio_qt');
SELECT aq.start_queue('cond_prio_q');
SELECT cardinality(aq.enqueue_array('cond_prio_q', ARRAY['{"n": 1, "k": "a"}', '{"n": 2, "k": "b"}', '{"n": 3, "k": "a"}']::jsonb[],
       ARRAY[aq.message_properties(priority => 3), aq.message_properties(priority => 2), aq.message_properties(priority => 1)]));
SELECT string_agg(payload->>'n', ' ') AS jsonb_priority_order
  FROM aq.dequeue_array('cond_prio_q', NULL::jsonb, 10, aq.dequeue_options(wait => '0', deq_condition => 'user_data->>''k'' = ''a'''));
SELECT cond_ids(aq.dequeue_options(wait => '0')) AS rest;

------------------------------------------------------------------------------ an index in the queue's order serves it
SELECT cond_fill();
CREATE INDEX cond_big_idx ON cond_qt (q_id, enq_time, msgid) WHERE (user_data).amount > 200;
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.amount > 200 AND tab.user_data.kind = ''sale''')) AS indexed;
DROP INDEX cond_big_idx;
-- The plan follows the index going away: the same condition again.
SELECT cond_fill();
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.amount > 200 AND tab.user_data.kind = ''sale''')) AS after_drop;
SELECT cond_ids(aq.dequeue_options(wait => '0')) AS rest;

------------------------------------------------------------------------------ rejected conditions
\set VERBOSITY default
-- Not one expression: syntax errors (42601).
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'priority <'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'true; DROP TABLE cond_qt'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'true) OR (true'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'SELECT true'));
-- What the parser accepts but a condition is not (22023).
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => ''));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'priority > 1, priority < 5'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'true FROM cond_qt'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'true WHERE false'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'priority > 1 AS p'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'priority IN (SELECT 1)'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'EXISTS (SELECT FROM pg_class)'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'priority = $1'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'q_id > 0'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'tab.q_id = tab.q_id'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'xmin IS NOT NULL'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'tab IS NOT NULL'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'row(tab.*) IS NOT NULL'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'cond_qt.priority > 0'));
-- PostgreSQL's own errors, at their place in the condition.
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'tab.user_data.amout > 100'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'priority + 1'));
SELECT try_sql($$SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'no_such_function(priority)'))$$)
       AS unknown_function;  -- (its hint differs between PostgreSQL versions)
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'count(*) > 0'));
SELECT aq.dequeue('cond_q', NULL::cond_order_t, aq.dequeue_options(wait => '0', deq_condition => 'generate_series(1, 2) > 0'));
\set VERBOSITY terse
-- Nothing was dequeued by the rejected ones.
SELECT count(*) AS still_queued FROM cond_qt;

------------------------------------------------------------------------------ the caller's privileges
SELECT cond_fill();
CREATE ROLE regress_cond_consumer;
GRANT USAGE ON SCHEMA public TO regress_cond_consumer;
SELECT aq.grant_queue_privilege('DEQUEUE', 'cond_q', 'regress_cond_consumer');
CREATE FUNCTION cond_secret(integer) RETURNS boolean LANGUAGE sql AS $$ SELECT $1 > 2 $$;
REVOKE EXECUTE ON FUNCTION cond_secret(integer) FROM PUBLIC;
SET ROLE regress_cond_consumer;
SELECT try_sql($$SELECT aq.dequeue('cond_q', NULL::cond_order_t,
       aq.dequeue_options(wait => '0', deq_condition => 'cond_secret(tab.user_data.id)'))$$) AS not_executable;
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'current_user = ''regress_cond_consumer'' AND tab.user_data.id = 1')) AS as_the_caller;
RESET ROLE;
SELECT cond_ids(aq.dequeue_options(wait => '0', deq_condition => 'cond_secret(tab.user_data.id)')) AS owner_may;
SELECT cond_ids(aq.dequeue_options(wait => '0')) AS rest;
REVOKE USAGE ON SCHEMA public FROM regress_cond_consumer;
SELECT aq.revoke_queue_privilege('DEQUEUE', 'cond_q', 'regress_cond_consumer');
DROP ROLE regress_cond_consumer;

------------------------------------------------------------------------------ many distinct conditions
-- More than the session keeps (32): each still runs, the oldest are prepared again.
SELECT cond_fill();
SELECT count(*) FILTER (WHERE r = '-') AS unmatched, count(*) AS conditions
  FROM generate_series(1, 40) i,
       LATERAL cond_ids(aq.dequeue_options(wait => '0', dequeue_mode => 'browse', navigation => 'first_message',
                                          deq_condition => format('tab.user_data.id = %s', i))) AS r;
SELECT cond_ids(aq.dequeue_options(wait => '0', dequeue_mode => 'browse', navigation => 'first_message',
       deq_condition => 'tab.user_data.id = 1')) AS first_again;
SELECT cond_ids(aq.dequeue_options(wait => '0')) AS rest;

------------------------------------------------------------------------------ an analysis that fails
-- The condition flag across an error: a condition whose function was dropped fails when its plan
-- is analyzed again; once the function is back, the same plan analyzes again and works (before,
-- the flag stayed set and the statement's own d.msgid was read as a field of tab: 42703).
SELECT aq.create_queue_table('cond_multi_qt', 'cond_order_t', multiple_consumers => true);
SELECT aq.create_queue('cond_multi_q', 'cond_multi_qt');
SELECT aq.start_queue('cond_multi_q');
SELECT aq.add_subscriber('cond_multi_q', aq.agent('a', NULL, NULL));
CREATE FUNCTION cond_big(numeric) RETURNS boolean LANGUAGE sql AS $$ SELECT $1 > 100 $$;
SELECT cardinality(aq.enqueue_array('cond_multi_q',
       ARRAY[ROW(1, 50, 'sale'), ROW(2, 150, 'sale'), ROW(3, 250, 'sale')]::cond_order_t[])) AS enqueued;
CREATE FUNCTION cond_multi_id() RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT (payload).id FROM aq.dequeue('cond_multi_q', NULL::cond_order_t,
                   aq.dequeue_options(consumer_name => 'a', wait => '0', deq_condition => 'cond_big(tab.user_data.amount)')));
EXCEPTION WHEN SQLSTATE 'QA228' THEN
    RETURN '-';
END $$;
SELECT cond_multi_id() AS planned;
DROP FUNCTION cond_big(numeric);
SELECT try_sql('SELECT cond_multi_id()') AS function_gone;
CREATE FUNCTION cond_big(numeric) RETURNS boolean LANGUAGE sql AS $$ SELECT $1 > 100 $$;
SELECT cond_multi_id() AS analyzed_again;
SELECT cond_multi_id() AS none_left;
SELECT aq.drop_queue_table('cond_multi_qt', force => true);
DROP FUNCTION cond_multi_id(), cond_big(numeric);

SELECT aq.drop_queue_table('cond_qt', force => true);
SELECT aq.drop_queue_table('cond_prio_qt', force => true);
DROP FUNCTION cond_ids(aq.dequeue_options, text), cond_fill(), cond_secret(integer);
DROP TYPE cond_order_t;
