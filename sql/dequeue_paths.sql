-- Which way a remove dequeue goes: the bulk dequeue (the order index and the heap directly,
-- RowExclusiveLock only) or the SQL statement (FOR UPDATE SKIP LOCKED: RowShareLock too).
-- The locks the dequeuing transaction holds on the queue table tell them apart.  (The first
-- dequeue of a queue table in a backend also moves its expired messages, with FOR UPDATE:
-- each observed dequeue comes right after one that did that, at most once a second.)
CREATE FUNCTION dp_path(qt regclass) RETURNS text LANGUAGE sql AS $$
    SELECT CASE WHEN bool_or(mode = 'RowShareLock') THEN 'statement' ELSE 'bulk' END
      FROM pg_locks WHERE locktype = 'relation' AND relation = qt AND pid = pg_backend_pid()
$$;
SELECT aq.create_queue_table('dp_qt', 'text');
SELECT aq.create_queue('dp_q', 'dp_qt');
SELECT aq.start_queue('dp_q');
SELECT cardinality(aq.enqueue_array('dp_q', ARRAY['a', 'b', 'c', 'd', 'e']));

SELECT payload FROM aq.dequeue('dp_q', NULL::text, aq.dequeue_options(wait => '0'));
BEGIN;
SELECT payload FROM aq.dequeue('dp_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT dp_path('dp_qt');
COMMIT;

-- hardening 13: an order index with indcheckxmin (every index built while
-- old_snapshot_threshold >= 0, or over broken HOT chains) serves the bulk dequeue once its
-- pg_index row is older than the transaction's snapshots, as the planner's rule says: it is
-- not sent to the statement forever.  (Set by hand here, as such a build would.)
UPDATE pg_index SET indcheckxmin = true
 WHERE indexrelid = (SELECT indexrelid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                      WHERE i.indrelid = 'dp_qt'::regclass AND c.relname = 'dp_qt_q_id_enq_time_msgid_idx');
SELECT count(*) AS checkxmin_indexes FROM pg_index WHERE indrelid = 'dp_qt'::regclass AND indcheckxmin;
\c
SELECT payload FROM aq.dequeue('dp_q', NULL::text, aq.dequeue_options(wait => '0'));
BEGIN;
SELECT payload FROM aq.dequeue('dp_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT dp_path('dp_qt');
COMMIT;

SELECT aq.drop_queue_table('dp_qt', force => true);
DROP FUNCTION dp_path(regclass);
