-- The multi-insert path (bulk enqueue, fast-ingest drain) checks rows as INSERT does.
-- hardening 12: a bulk enqueue into a queue table attached as a partition checks the partition
-- bound: rows of another queue are refused (23514), as an INSERT into the partition would be.
\set VERBOSITY terse
SET client_min_messages = warning;
SELECT aq.create_queue_table('mi_qt', 'text');
SELECT aq.create_queue('mi_qa', 'mi_qt');
SELECT aq.create_queue('mi_qb', 'mi_qt');
SELECT aq.start_queue('mi_qa');
SELECT aq.start_queue('mi_qb');
-- PostgreSQL 17 attaches no table with an identity column of its own: there the parent has the
-- identity, and the partition shares it (as GENERATED ALWAYS, so the queue table keeps its shape).
CREATE TABLE mi_parent (LIKE mi_qt) PARTITION BY LIST (q_id);
DO $$ BEGIN
    IF current_setting('server_version_num')::int >= 170000 THEN
        ALTER TABLE mi_qt ALTER msgid DROP IDENTITY;
        ALTER TABLE mi_parent ALTER msgid ADD GENERATED ALWAYS AS IDENTITY;
    END IF;
    EXECUTE format('ALTER TABLE mi_parent ATTACH PARTITION mi_qt FOR VALUES IN (%s)',
        (SELECT queue_id FROM aq.queues WHERE queue_name = 'mi_qa'));
END $$;
RESET client_min_messages;
-- The queue of the partition's bound: accepted, one-by-one and in bulk.
SELECT aq.enqueue('mi_qa', 'a1'::text) > 0 AS enqueued;
SELECT cardinality(aq.enqueue_array('mi_qa', ARRAY['a2', 'a3', 'a4'])) AS enqueued;
-- Another queue of the same queue table: outside the bound, refused like the INSERT.
SELECT aq.enqueue_array('mi_qb', ARRAY['b1', 'b2']);
SELECT aq.enqueue_array('mi_qb', ARRAY(SELECT 'b' || g FROM generate_series(1, 2500) g));
SELECT aq.enqueue('mi_qb', 'b0'::text);
-- Nothing of mi_qb is in the table; everything in it is visible through the parent.
SELECT count(*) AS in_partition, (SELECT count(*) FROM mi_parent) AS through_parent FROM mi_qt;
SELECT count(*) AS of_mi_qb FROM mi_qt t JOIN aq.queues q ON q.queue_id = t.q_id WHERE q.queue_name = 'mi_qb';
-- A CHECK constraint on the queue table holds for bulk enqueues too.
ALTER TABLE mi_qt ADD CONSTRAINT short_payload CHECK (length(user_data) < 10);
SELECT aq.enqueue_array('mi_qa', ARRAY['ok', 'much too long a payload']);
SELECT count(*) FROM mi_qt;
ALTER TABLE mi_qt DROP CONSTRAINT short_payload;
-- A queue table with an inheritance child takes the statement path, with the same result.
ALTER TABLE mi_parent DETACH PARTITION mi_qt;
DROP TABLE mi_parent;
DO $$ BEGIN  -- on 17 the detached partition lost the parent's identity
    IF (SELECT attidentity FROM pg_attribute WHERE attrelid = 'mi_qt'::regclass AND attname = 'msgid') = '' THEN
        EXECUTE format('ALTER TABLE mi_qt ALTER msgid ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)',
            (SELECT max(msgid) + 1 FROM mi_qt));
    END IF;
END $$;
CREATE TABLE mi_child () INHERITS (mi_qt);
SELECT cardinality(aq.enqueue_array('mi_qa', ARRAY['a5', 'a6'])) AS enqueued;
SELECT count(*) FROM ONLY mi_qt;
DROP TABLE mi_child;
SELECT aq.drop_queue_table('mi_qt', force => true);
