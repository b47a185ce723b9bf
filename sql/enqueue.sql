-- Enqueue: payload types, ids in order, properties and options.

CREATE TYPE point_ot AS (x integer, y integer, label text);
SELECT aq.create_queue_table('composite_qt', 'point_ot');
SELECT aq.create_queue_table('text_qt', 'text', comment => 'plain text messages');
SELECT aq.create_queue_table('jsonb_qt', 'jsonb');
SELECT aq.create_queue_table('bytea_qt', 'bytea');
SELECT aq.create_queue('composite_q', 'composite_qt');
SELECT aq.create_queue('text_q', 'text_qt');
SELECT aq.create_queue('text_q2', 'text_qt');
SELECT aq.create_queue('jsonb_q', 'jsonb_qt');
SELECT aq.create_queue('bytea_q', 'bytea_qt');
SELECT aq.start_queue(queue_name) FROM aq.queues WHERE queue_type = 'normal_queue' ORDER BY queue_id;

-- The queue table is an ordinary heap table you can see and query.
SELECT c.relkind, a.amname, obj_description(c.oid) AS comment
  FROM pg_class c JOIN pg_am a ON a.oid = c.relam WHERE c.relname = 'text_qt';
SELECT indexdef FROM pg_indexes WHERE tablename = 'text_qt' ORDER BY indexname;

-- Single enqueue returns the message id; array enqueue returns ids in payload order.
SELECT aq.enqueue('text_q', 'first'::text) AS msgid;
SELECT aq.enqueue_array('text_q', ARRAY['second', 'third', 'fourth']) AS msgids;
SELECT aq.enqueue_array('text_q2', ARRAY['other queue, same table']) AS msgids;
SELECT msgid, q_id, user_data, priority, corrid, retry_count FROM text_qt ORDER BY msgid;
SELECT aq.enqueue_array('text_q', ARRAY[]::text[]) AS empty;

-- Each payload type round-trips typed.
SELECT aq.enqueue('composite_q', ROW(1, 2, 'a')::point_ot);
SELECT aq.enqueue_array('composite_q', ARRAY[ROW(3, 4, 'b'), ROW(5, 6, NULL)]::point_ot[]);
SELECT msgid, payload, (payload).x + (payload).y AS sum
  FROM aq.dequeue_array('composite_q', NULL::point_ot, 10, aq.dequeue_options(wait => '0'));
SELECT aq.enqueue('jsonb_q', '{"device": 7, "readings": [1, 2, 3]}'::jsonb);
SELECT payload->'readings'->>2 AS third_reading, jsonb_typeof(payload)
  FROM aq.dequeue('jsonb_q', NULL::jsonb, aq.dequeue_options(wait => '0'));
SELECT aq.enqueue('bytea_q', '\x00ff00fe'::bytea);
SELECT aq.enqueue_array('bytea_q', ARRAY[''::bytea, decode(repeat('ab', 5000), 'hex')]);
SELECT length(payload) AS bytes, md5(payload)
  FROM aq.dequeue_array('bytea_q', NULL::bytea, 10, aq.dequeue_options(wait => '0')) ORDER BY msgid;

-- Message properties: priority and correlation are stored; delay hides a message until it passes.
SELECT aq.enqueue('text_q2', 'with properties'::text,
                  aq.message_properties(priority => 3, correlation => 'order-42', exception_queue => 'errors'));
SELECT aq.enqueue_array('text_q2', ARRAY['p1', 'p2', 'p3'],
                        ARRAY[aq.message_properties(priority => 7, correlation => 'c1'),
                              NULL,
                              aq.message_properties(delay => '1 hour', expiration => '1 day')]);
SELECT user_data, priority, corrid, exception_queue,
       delay - enq_time AS delay, expiration - enq_time AS expires_after
  FROM text_qt WHERE q_id = (SELECT queue_id FROM aq.queues WHERE queue_name = 'text_q2') ORDER BY msgid;

-- Enqueue options: the defaults and immediate visibility (sql/immediate.sql) are accepted, the
-- rest is an error naming the option.
SELECT aq.enqueue('text_q', 'opts'::text, enqueue_options => aq.enqueue_options()) > 0 AS ok;
SELECT try_sql($$SELECT aq.enqueue('text_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$);
SELECT try_sql($$SELECT aq.enqueue('text_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'later'))$$);
SELECT try_sql($$SELECT aq.enqueue('text_q', 'x'::text, enqueue_options => aq.enqueue_options(delivery_mode => 'buffered'))$$);
SELECT try_sql($$SELECT aq.enqueue('text_q', 'x'::text, enqueue_options => aq.enqueue_options(delivery_mode => 'carrier pigeon'))$$);

-- An enqueue belongs to the caller's transaction.
BEGIN;
SELECT aq.enqueue('text_q', 'rolled back'::text) > 0 AS enqueued;
ROLLBACK;
SELECT count(*) FROM text_qt WHERE user_data = 'rolled back';

-- Array enqueue takes the multi-insert path; constraints a user adds still hold there.
ALTER TABLE text_qt ADD CONSTRAINT priority_below_100 CHECK (priority < 100);
SELECT split_part(try_sql($$SELECT aq.enqueue_array('text_q', ARRAY['ok', 'too high'], ARRAY[aq.message_properties(), aq.message_properties(priority => 100)])$$), ' (Failing row', 1) AS error;
SELECT count(*) AS kept_nothing FROM text_qt WHERE user_data IN ('ok', 'too high');
-- A queue table with a trigger (or RLS, or columns of its own) is written by an INSERT
-- statement instead, so the trigger runs for every message.
CREATE TABLE audit (msgid bigint, body text);
CREATE FUNCTION audit_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO audit VALUES (NEW.msgid, NEW.user_data);
  RETURN NEW;
END $$;
CREATE TRIGGER audit_enqueue AFTER INSERT ON text_qt FOR EACH ROW EXECUTE FUNCTION audit_enqueue();
CREATE TEMP TABLE audited_ids AS SELECT aq.enqueue_array('text_q', ARRAY['audited 1', 'audited 2']) AS ids;
SELECT ids = ARRAY(SELECT msgid FROM audit ORDER BY msgid) AS same_ids FROM audited_ids;
SELECT body FROM audit ORDER BY msgid;
ALTER TABLE text_qt ADD COLUMN note text DEFAULT 'user column';
SELECT cardinality(aq.enqueue_array('text_q', ARRAY['with a user column'])) AS enqueued;
SELECT user_data, note FROM text_qt WHERE user_data = 'with a user column';
SELECT payload FROM aq.dequeue_array('text_q', NULL::text, 100, aq.dequeue_options(wait => '0')) WHERE payload LIKE 'audited%' OR payload LIKE 'with%';
DROP TABLE audit;
-- Row-level security applies to enqueue as to any INSERT by that role.
CREATE ROLE aq_rls_user;
SELECT aq.grant_queue_privilege('ENQUEUE', 'jsonb_q', 'aq_rls_user');
ALTER TABLE jsonb_qt ENABLE ROW LEVEL SECURITY;
CREATE POLICY enqueue_ok_only ON jsonb_qt FOR INSERT TO aq_rls_user WITH CHECK (user_data ? 'ok');
CREATE POLICY see_all ON jsonb_qt FOR SELECT TO aq_rls_user USING (true);
SET ROLE aq_rls_user;
SELECT cardinality(aq.enqueue_array('jsonb_q', ARRAY['{"ok": 1}'::jsonb, '{"ok": 2}'])) AS enqueued;
SELECT try_sql($$SELECT aq.enqueue_array('jsonb_q', ARRAY['{"ok": 3}'::jsonb, '{"bad": 4}'])$$);
RESET ROLE;
SELECT user_data FROM jsonb_qt ORDER BY msgid;
DROP POLICY enqueue_ok_only ON jsonb_qt;
DROP POLICY see_all ON jsonb_qt;

SELECT aq.drop_queue_table(queue_table, force => true) FROM aq.queue_tables ORDER BY queue_table_id;
DROP TYPE point_ot;
DROP FUNCTION audit_enqueue();
DROP ROLE aq_rls_user;
