-- Transaction group split by the per-transaction group cache: a transaction that enqueues into
-- many grouped queue tables (more than the backend remembers groups for at once) must still
-- make exactly one group in each table.  Ten tables, three rounds of one enqueue per table in
-- turn; each table's three messages are then one group, returned whole by one dequeue_array,
-- end_of_group on the last message only.
SET client_min_messages = warning;
-- A dequeue_array's payloads, '*' for end_of_group, and how many groups they came from.
CREATE FUNCTION gc_take(queue text, navigation text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    RETURN (SELECT string_agg(payload || CASE WHEN (message_properties).end_of_group THEN '*' ELSE '' END, ' ' ORDER BY k)
                   || ' (groups: ' || count(DISTINCT (message_properties).transaction_group) || ')'
              FROM aq.dequeue_array(queue, NULL::text, 10, aq.dequeue_options(navigation => navigation, wait => 0))
                   WITH ORDINALITY AS d(msgid, payload, message_properties, k));
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
-- How many groups a queue table holds.
CREATE FUNCTION gc_groups(t integer) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
    EXECUTE format('SELECT count(DISTINCT transaction_group) FROM ONLY %I', 'gc_qt' || t) INTO n;
    RETURN n;
END $$;

SELECT count(*) AS created FROM (
    SELECT aq.create_queue_table('gc_qt' || t, 'text', message_grouping => 'transactional'),
           aq.create_queue('gc_q' || t, 'gc_qt' || t),
           aq.start_queue('gc_q' || t)
      FROM generate_series(1, 10) t) x;

-- One transaction, round robin: t1 r1, t2 r1, ..., t10 r1, t1 r2, ...
BEGIN;
DO $$
BEGIN
    FOR r IN 1 .. 3 LOOP
        FOR t IN 1 .. 10 LOOP
            PERFORM aq.enqueue('gc_q' || t, 't' || t || 'r' || r);
        END LOOP;
    END LOOP;
END $$;
COMMIT;

-- Each table holds one group of three: browsing its first group shows all three.
SELECT t, gc_groups(t) AS groups, (SELECT count(*) FROM aq.dequeue_array('gc_q' || t, NULL::text, 10,
                                                 aq.dequeue_options(dequeue_mode => 'browse', navigation => 'first_message', wait => 0))) AS browsed
  FROM generate_series(1, 10) t ORDER BY t;

-- FIRST_MESSAGE in tables 1-5, NEXT_TRANSACTION in 6-10: the whole group each time.
SELECT t, gc_take('gc_q' || t, CASE WHEN t <= 5 THEN 'first_message' ELSE 'next_transaction' END) AS taken
  FROM generate_series(1, 10) t ORDER BY t;

-- Nothing is left.
SELECT t, gc_take('gc_q' || t, 'first_message') AS left_over FROM generate_series(1, 10) t ORDER BY t;

SELECT count(*) AS dropped FROM (SELECT aq.drop_queue_table('gc_qt' || t, force => true) FROM generate_series(1, 10) t) x;
DROP FUNCTION gc_take(text, text), gc_groups(integer);
