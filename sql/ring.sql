-- Ring queue tables (src/queue/ring.hpp): enqueue writes the current segment, every dequeue path
-- reads all of them in the queue's order, and a rotation truncates what is all gone.
\set VERBOSITY terse
SELECT aq.create_queue_table('ring_fifo', 'text', segments => 3);
SELECT aq.create_queue('ring_fifo_q', 'ring_fifo');
SELECT aq.start_queue('ring_fifo_q');
SELECT aq.create_queue_table('ring_prio', 'text', sort_list => 'priority,enq_time', segments => 2);
SELECT aq.create_queue('ring_prio_q', 'ring_prio');
SELECT aq.start_queue('ring_prio_q');

-- R1: the current segment (the ledger's latest generation) gets the messages.
SELECT aq.enqueue_array('ring_fifo_q', ARRAY['a1', 'a2']) AS ids;
SELECT aq._switch_segment('ring_fifo');
SELECT aq.enqueue('ring_fifo_q', 'b1'::text) > 0 AS enqueued;
SELECT tableoid::regclass AS segment, user_data FROM ring_fifo ORDER BY msgid;
SELECT count(*) AS in_parent FROM ONLY ring_fifo;

-- W2: order across segments is by key.  Priority 1 written into the second segment comes before
-- priority 5 in the first.
SELECT aq.enqueue('ring_prio_q', 'low'::text, aq.message_properties(priority => 5)) > 0 AS enqueued;
SELECT aq._switch_segment('ring_prio');
SELECT aq.enqueue('ring_prio_q', 'urgent'::text, aq.message_properties(priority => 1)) > 0 AS enqueued;
SELECT aq.enqueue('ring_prio_q', 'medium'::text, aq.message_properties(priority => 3)) > 0 AS enqueued;
SELECT tableoid::regclass AS segment, priority, user_data FROM ring_prio ORDER BY msgid;
SELECT payload, (message_properties).priority FROM aq.dequeue_array('ring_prio_q', NULL::text, 10, aq.dequeue_options(wait => 0));

-- Browse reads every segment, in order; so do a single dequeue and a batch.
SELECT payload FROM aq.dequeue_array('ring_fifo_q', NULL::text, 10, aq.dequeue_options(wait => 0, dequeue_mode => 'browse'));
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));
SELECT payload FROM aq.dequeue_array('ring_fifo_q', NULL::text, 10, aq.dequeue_options(wait => 0));

-- The statement paths (W3): by msgid, by correlation, a condition, locked then by msgid.  The
-- first segment's rows are all gone: the rotation truncates it (the current one stays), so that
-- the ring can come round to it.
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT aq._switch_segment('ring_fifo');
SELECT aq.enqueue('ring_fifo_q', 'c1'::text, aq.message_properties(correlation => 'order-1')) AS c1 \gset
SELECT aq._switch_segment('ring_fifo');
SELECT aq.enqueue('ring_fifo_q', 'd1'::text, aq.message_properties(correlation => 'order-2')) AS d1 \gset
SELECT aq.enqueue('ring_fifo_q', 'd2'::text) AS d2 \gset
SELECT tableoid::regclass AS segment, user_data FROM ring_fifo ORDER BY msgid;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0, msgid => :c1));
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0, correlation => 'order-%'));
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0, deq_condition => 'tab.user_data = ''d2'''));
SELECT aq.enqueue_array('ring_fifo_q', ARRAY['e1', 'e2']) IS NOT NULL AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue_array('ring_fifo_q', NULL::text, 10, aq.dequeue_options(wait => 0, dequeue_mode => 'locked'));
-- The two segments but the current one are all gone: truncated, one a rotation.
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT aq._switch_segment('ring_fifo');
-- T2: the locked rows are this transaction's, so their segment, no longer current, stays.
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT msgid AS e1 FROM ring_fifo WHERE user_data = 'e1' \gset
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0, msgid => :e1));
COMMIT;
SELECT tableoid::regclass AS segment, user_data FROM ring_fifo ORDER BY msgid;

-- T2: a segment with a message left stays; once it is taken, the segment goes.
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT s.segment, pg_relation_size(s.relid) > 0 AS has_pages
  FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id) WHERE t.queue_table = 'ring_fifo' ORDER BY 1;
SELECT payload FROM aq.dequeue_array('ring_fifo_q', NULL::text, 10, aq.dequeue_options(wait => 0));
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT s.segment, pg_relation_size(s.relid) > 0 AS has_pages
  FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id) WHERE t.queue_table = 'ring_fifo' ORDER BY 1;
-- The current segment is never truncated, even when all gone.
SELECT aq.enqueue('ring_fifo_q', 'e3'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));
SELECT segment AS current_segment FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id)
 WHERE t.queue_table = 'ring_fifo' ORDER BY generation DESC LIMIT 1;
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT s.segment, pg_relation_size(s.relid) > 0 AS has_pages
  FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id) WHERE t.queue_table = 'ring_fifo' ORDER BY 1;
-- A truncated segment is written again when the ring comes round to it.
SELECT aq._switch_segment('ring_fifo');
SELECT aq.enqueue('ring_fifo_q', 'f1'::text) > 0 AS enqueued;
SELECT tableoid::regclass AS segment, user_data FROM ring_fifo ORDER BY msgid;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));

-- A rolled-back dequeue brings the message back in its segment.
SELECT aq.enqueue('ring_fifo_q', 'g1'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));
ROLLBACK;
SELECT tableoid::regclass AS segment, user_data FROM ring_fifo ORDER BY msgid;
SELECT aq._rotate_segments('ring_fifo') AS truncated;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));

-- Expired messages move to the exception queue within their segment (the reader's move: the time
-- manager is off in these suites; a dequeue from the exception queue moves them first).
SELECT aq.enqueue('ring_fifo_q', 'h1'::text, aq.message_properties(expiration => '0')) > 0 AS enqueued;
SELECT msg_state, user_data FROM "aq$ring_fifo";
SELECT aq.start_queue('aq$_ring_fifo_e', enqueue => false, dequeue => true);
SELECT q.queue_name, m.tableoid::regclass AS segment, m.user_data FROM ring_fifo m JOIN aq.queues q ON q.queue_id = m.q_id ORDER BY m.msgid;
SELECT payload FROM aq.dequeue('aq$_ring_fifo_e', NULL::text, aq.dequeue_options(wait => 0));

-- C1: a message nobody came back for does not jam the ring.  Segment 0 keeps one message of
-- twenty; when the ring comes round to it, the switch is blocked, the rotation carries the message
-- forward into the current segment unchanged (msgid, enq_time, retry_count), the next rotation
-- truncates segment 0 and the one after switches to it.
SELECT aq.create_queue_table('ring_carry', 'text', segments => 3);
SELECT aq.create_queue('ring_carry_q', 'ring_carry', max_retries => 9);
SELECT aq.start_queue('ring_carry_q');
SELECT count(*) AS enqueued FROM unnest(aq.enqueue_array('ring_carry_q', (SELECT array_agg('m' || i) FROM generate_series(1, 20) i)));
SELECT count(*) AS taken FROM aq.dequeue_array('ring_carry_q', NULL::text, 19, aq.dequeue_options(wait => 0));
-- An attempt rolled back: the settler rewrites the message in its segment, retry_count 1.
BEGIN;
SELECT payload FROM aq.dequeue('ring_carry_q', NULL::text, aq.dequeue_options(wait => 0));
ROLLBACK;
SELECT msgid AS left_msgid, enq_time AS left_enq_time, retry_count AS left_retries FROM ring_carry \gset
SELECT :left_retries AS retry_count;
SELECT aq._switch_segment('ring_carry');
SELECT aq._switch_segment('ring_carry');
SELECT aq._rotate_segments('ring_carry', switch_due => true) AS truncated;
SELECT tableoid::regclass AS segment, user_data, msgid = :left_msgid AS same_msgid, enq_time = :'left_enq_time' AS same_enq_time,
       retry_count = :left_retries AS same_retries FROM ring_carry;
SELECT aq._rotate_segments('ring_carry', switch_due => true) AS truncated;
SELECT aq._rotate_segments('ring_carry', switch_due => true) AS truncated;
SELECT generation, segment FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id)
 WHERE t.queue_table = 'ring_carry' ORDER BY generation DESC LIMIT 1;
SELECT msgid = :left_msgid AS same_msgid, payload FROM aq.dequeue('ring_carry_q', NULL::text, aq.dequeue_options(wait => 0));
SELECT count(*) AS left_in_table FROM ring_carry;
SELECT aq._rotate_segments('ring_carry') AS truncated;
-- A segment still held by more than a tenth of its rows (a real backlog) is not rewritten: the
-- switch stays blocked and the current segment grows.
SELECT count(*) AS enqueued FROM unnest(aq.enqueue_array('ring_carry_q', ARRAY['n1', 'n2', 'n3', 'n4', 'n5']));
SELECT count(*) AS taken FROM aq.dequeue_array('ring_carry_q', NULL::text, 3, aq.dequeue_options(wait => 0));
SELECT aq._switch_segment('ring_carry');
SELECT aq._switch_segment('ring_carry');
SELECT aq._rotate_segments('ring_carry', switch_due => true) AS truncated;
SELECT tableoid::regclass AS segment, user_data FROM ring_carry ORDER BY msgid;
SELECT payload FROM aq.dequeue_array('ring_carry_q', NULL::text, 10, aq.dequeue_options(wait => 0));
SELECT aq.drop_queue_table('ring_carry', force => true);

-- Transaction groups in a ring: a group whose messages span a switch is handed out whole and in
-- order (the walks merge the segments' group indexes); one carried forward keeps its order too.
SELECT aq.create_queue_table('ring_grp', 'text', message_grouping => 'transactional', segments => 3);
SELECT aq.create_queue('ring_grp_q', 'ring_grp');
SELECT aq.start_queue('ring_grp_q');
CREATE FUNCTION ring_grp_take(navigation text, mode text DEFAULT 'remove') RETURNS text LANGUAGE sql AS $$
  SELECT string_agg(payload || CASE WHEN (message_properties).end_of_group THEN '*' ELSE '' END, ' ' ORDER BY k)
    FROM aq.dequeue_array('ring_grp_q', NULL::text, 30, aq.dequeue_options(navigation => navigation, dequeue_mode => mode, wait => 0))
         WITH ORDINALITY AS d(msgid, payload, message_properties, k) $$;
SELECT count(*) AS enqueued FROM unnest(aq.enqueue_array('ring_grp_q', (SELECT array_agg('c' || i) FROM generate_series(1, 20) i)));
SELECT ring_grp_take('first_message') AS group_c;
BEGIN;
SELECT aq.enqueue_array('ring_grp_q', ARRAY['a1', 'a2']) IS NOT NULL AS enqueued;
SELECT aq._switch_segment('ring_grp');
SELECT aq.enqueue('ring_grp_q', 'a3'::text) > 0 AS enqueued;
COMMIT;
SELECT aq.enqueue_array('ring_grp_q', ARRAY['b1', 'b2']) IS NOT NULL AS enqueued;
SELECT tableoid::regclass AS segment, user_data FROM ring_grp ORDER BY msgid;
SELECT ring_grp_take('first_message', 'browse') AS browsed;
BEGIN;
SELECT ring_grp_take('first_message') AS group_a;
SELECT ring_grp_take('next_transaction') AS group_b;
ROLLBACK;
-- Segment 0 holds a1 and a2 of its twenty-two rows: when the ring comes round to it, the rotation
-- carries them forward (with their group's lock); a3 stays where it is, and the group stays whole.
SELECT aq._switch_segment('ring_grp');
SELECT aq._rotate_segments('ring_grp', switch_due => true) AS truncated;
SELECT tableoid::regclass AS segment, user_data FROM ring_grp ORDER BY msgid;
SELECT aq._rotate_segments('ring_grp', switch_due => true) AS truncated;
SELECT ring_grp_take('first_message') AS group_a;
SELECT ring_grp_take('next_transaction') AS group_b;
SELECT count(*) AS left_in_table FROM ring_grp;
SELECT aq.drop_queue_table('ring_grp', force => true);
DROP FUNCTION ring_grp_take(text, text);

-- aq.alter_queue_table(..., segments => N) makes a classic queue table a ring: its messages stay in
-- the table itself and are taken first, in the queue's order; new ones go into the segments.
SELECT aq.create_queue_table('ring_conv', 'text', sort_list => 'priority,enq_time', comment => 'before');
SELECT aq.create_queue('ring_conv_q', 'ring_conv');
SELECT aq.start_queue('ring_conv_q');
SELECT aq.enqueue_array('ring_conv_q', ARRAY['old1', 'old2', 'old3']) IS NOT NULL AS enqueued;
SELECT msgid AS old1 FROM ring_conv WHERE user_data = 'old1' \gset
-- (A dequeue by msgid before: this session's statement was prepared for the classic table.)
SELECT payload FROM aq.dequeue('ring_conv_q', NULL::text, aq.dequeue_options(wait => 0, msgid => :old1));
SELECT aq.enqueue('ring_conv_q', 'old urgent'::text, aq.message_properties(priority => 0)) > 0 AS enqueued;
SELECT aq.alter_queue_table('ring_conv', comment => 'after', segments => 2);
SELECT segment_count, comment, obj_description('ring_conv'::regclass, 'pg_class') AS table_comment
  FROM aq.queue_tables WHERE queue_table = 'ring_conv';
SELECT s.segment, s.relid FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id)
 WHERE t.queue_table = 'ring_conv' ORDER BY 1;
SELECT aq.enqueue('ring_conv_q', 'new urgent'::text, aq.message_properties(priority => 0)) > 0 AS enqueued;
SELECT aq.enqueue('ring_conv_q', 'new1'::text) > 0 AS enqueued;
SELECT tableoid::regclass AS segment, priority, user_data FROM ring_conv ORDER BY msgid;
SELECT payload FROM aq.dequeue_array('ring_conv_q', NULL::text, 10, aq.dequeue_options(wait => 0, dequeue_mode => 'browse'));
SELECT msgid AS new1 FROM ring_conv WHERE user_data = 'new1' \gset
SELECT payload FROM aq.dequeue('ring_conv_q', NULL::text, aq.dequeue_options(wait => 0, msgid => :new1));
SELECT payload FROM aq.dequeue_array('ring_conv_q', NULL::text, 10, aq.dequeue_options(wait => 0));
SELECT aq._rotate_segments('ring_conv') AS truncated;
-- Its errors: a ring's segments cannot change; bad counts; a multi-consumer table; a table
-- inherited from; another role's table.
SELECT aq.alter_queue_table('ring_conv', segments => 3);
SELECT aq.alter_queue_table('ring_conv', segments => 2);  -- as it is: nothing to do
SELECT aq.create_queue_table('ring_conv2', 'text');
SELECT aq.alter_queue_table('ring_conv2', segments => 1);
SELECT aq.alter_queue_table('ring_conv2', segments => 17);
CREATE TABLE ring_conv2_child () INHERITS (ring_conv2);
SELECT aq.alter_queue_table('ring_conv2', segments => 4);
DROP TABLE ring_conv2_child;
SELECT aq.create_queue_table('ring_conv3', 'text', multiple_consumers => true);
SELECT aq.alter_queue_table('ring_conv3', segments => 4);
CREATE ROLE ring_conv_stranger;
SET ROLE ring_conv_stranger;
SELECT aq.alter_queue_table('ring_conv2', segments => 4);
RESET ROLE;
GRANT EXECUTE ON FUNCTION aq.alter_queue_table(text, text, integer) TO ring_conv_stranger;
SET ROLE ring_conv_stranger;
SELECT aq.alter_queue_table('ring_conv2', segments => 4);
WITH w AS (UPDATE aq.queue_tables SET comment = 'not mine' WHERE queue_table = 'ring_conv2' RETURNING 1) SELECT count(*) AS updated FROM w;
RESET ROLE;
REVOKE EXECUTE ON FUNCTION aq.alter_queue_table(text, text, integer) FROM ring_conv_stranger;
DROP ROLE ring_conv_stranger;
SELECT aq.alter_queue_table('ring_conv2', segments => 0);
SELECT aq.alter_queue_table('ring_nonesuch', segments => 2);
SELECT queue_table, segment_count FROM aq.queue_tables WHERE queue_table LIKE 'ring\_conv%' ORDER BY 1;
SELECT aq.drop_queue_table('ring_conv', force => true);
SELECT aq.drop_queue_table('ring_conv2');
SELECT aq.drop_queue_table('ring_conv3');

-- aq.ring_segments.held_by_prepared: a prepared transaction that dequeued from a segment holds it
-- (its locks have no pid: held_by does not show it).
SELECT aq.enqueue('ring_fifo_q', 'held'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));
PREPARE TRANSACTION 'ring_holds_a_segment';
SELECT segment, held_by, held_by_prepared FROM aq.ring_segments WHERE queue_table = 'ring_fifo' AND held_by_prepared IS NOT NULL;
COMMIT PREPARED 'ring_holds_a_segment';
SELECT count(*) AS still_held FROM aq.ring_segments WHERE queue_table = 'ring_fifo' AND held_by_prepared IS NOT NULL;

-- Errors.
SELECT aq.create_queue_table('ring_plain', 'text');
SELECT aq._rotate_segments('ring_plain');
CREATE ROLE ring_stranger;
GRANT EXECUTE ON FUNCTION aq._rotate_segments(regclass, boolean) TO ring_stranger;
SET ROLE ring_stranger;
SELECT aq._rotate_segments('ring_fifo');
RESET ROLE;
REVOKE EXECUTE ON FUNCTION aq._rotate_segments(regclass, boolean) FROM ring_stranger;
DROP ROLE ring_stranger;

-- E1: a table that inherits from a ring's parent would be read through it as messages: the queue
-- refuses to work until the inheritance is removed.
CREATE TABLE ring_fifo_extra () INHERITS (ring_fifo);
SELECT aq.enqueue('ring_fifo_q', 'x1'::text);
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0, dequeue_mode => 'browse'));
ALTER TABLE ring_fifo_extra NO INHERIT ring_fifo;
-- ... and so would one that inherits from a segment.
ALTER TABLE ring_fifo_extra INHERIT "ring_fifo$1";
SELECT aq.enqueue('ring_fifo_q', 'x1'::text);
ALTER TABLE ring_fifo_extra NO INHERIT "ring_fifo$1";
SELECT aq.enqueue('ring_fifo_q', 'x1'::text) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('ring_fifo_q', NULL::text, aq.dequeue_options(wait => 0));
DROP TABLE ring_fifo_extra;

SELECT aq.drop_queue_table('ring_plain');
SELECT aq.drop_queue_table('ring_fifo', force => true);
SELECT aq.drop_queue_table('ring_prio', force => true);
SELECT count(*) AS left_behind FROM pg_class WHERE relname LIKE 'ring\_fifo%' OR relname LIKE 'ring\_prio%';
