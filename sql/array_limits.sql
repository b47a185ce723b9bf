-- Bad input in every array argument at 100,000 elements, as a role that may only enqueue and
-- dequeue: each is refused at once with its own SQLSTATE and bounded memory, or handled whole.
-- (recipient_list memory: 100,000 names once grew one backend to 24 GB, and the OOM kill
-- restarted the cluster; a 2-D list was accepted.)
CREATE TYPE lim_t AS (id integer);
SELECT aq.create_queue_table('lim_qt', 'lim_t');
SELECT aq.create_queue('lim_q', 'lim_qt');
SELECT aq.start_queue('lim_q');
SELECT aq.create_queue_table('lim_multi_qt', 'lim_t', multiple_consumers => true);
SELECT aq.create_queue('lim_multi_q', 'lim_multi_qt');
SELECT aq.start_queue('lim_multi_q');
SELECT aq.add_subscriber('lim_multi_q', aq.agent('a'));
CREATE ROLE regress_lim_user;
GRANT USAGE ON SCHEMA public TO regress_lim_user;
SELECT aq.grant_queue_privilege(p, q, 'regress_lim_user')
  FROM unnest(ARRAY['ENQUEUE', 'DEQUEUE']) p, unnest(ARRAY['lim_q', 'lim_multi_q']) q;
SET ROLE regress_lim_user;

------------------------------------------------------------------------------ recipient_list
SELECT try_sql($$SELECT aq.enqueue('lim_multi_q', ROW(1)::lim_t, aq.message_properties(recipient_list =>
       (SELECT array_agg(aq.agent('c' || i)) FROM generate_series(1, 100000) i)))$$) AS names_100000;
SELECT try_sql($$SELECT aq.enqueue('lim_multi_q', ROW(1)::lim_t, aq.message_properties(recipient_list =>
       (SELECT array_agg(aq.agent('c' || i)) FROM generate_series(1, 1025) i)))$$) AS names_1025;
SELECT try_sql($$SELECT aq.enqueue('lim_multi_q', ROW(1)::lim_t, aq.message_properties(recipient_list =>
       ARRAY[[aq.agent('a')], [aq.agent('b')]]))$$) AS two_dimensions;
-- At the limit, with duplicates: each name once.
SELECT aq.enqueue('lim_multi_q', ROW(1)::lim_t, aq.message_properties(recipient_list =>
       (SELECT array_agg(aq.agent('c' || (i % 512))) FROM generate_series(1, 1024) i))) > 0 AS names_1024;
RESET ROLE;
SELECT count(*) AS deliveries, count(DISTINCT consumer_name) AS consumers FROM "aq$_lim_multi_qt_i";
SET ROLE regress_lim_user;

------------------------------------------------------------------------------ enqueue_array
SELECT try_sql($$SELECT aq.enqueue_array('lim_q', (SELECT array_agg(ROW(i)::lim_t) FROM generate_series(1, 100000) i),
       (SELECT array_agg(aq.message_properties()) FROM generate_series(1, 99999) i))$$) AS properties_99999;
SELECT try_sql($$SELECT aq.enqueue_array('lim_q', ARRAY[[ROW(1)::lim_t], [ROW(2)::lim_t]])$$) AS payloads_two_dimensions;
SELECT cardinality(aq.enqueue_array('lim_q', (SELECT array_agg(ROW(i)::lim_t) FROM generate_series(1, 100000) i))) AS enqueued;

------------------------------------------------------------------------------ dequeue_array, listen
SELECT try_sql($$SELECT aq.dequeue_array('lim_q', NULL::lim_t, 100001, aq.dequeue_options(wait => 0))$$) AS array_size_100001;
SELECT count(*) AS dequeued FROM aq.dequeue_array('lim_q', NULL::lim_t, 100000, aq.dequeue_options(wait => 0));
SELECT try_sql($$SELECT aq.listen((SELECT array_agg(aq.agent('a', 'lim_multi_q')) FROM generate_series(1, 100000) i), 0)$$)
       AS agents_100000;

RESET ROLE;
SELECT aq.drop_queue_table('lim_qt', force => true);
SELECT aq.drop_queue_table('lim_multi_qt', force => true);
REVOKE USAGE ON SCHEMA public FROM regress_lim_user;
DROP ROLE regress_lim_user;
DROP TYPE lim_t;
