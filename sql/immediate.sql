-- Immediate visibility (queue/immediate.hpp): an enqueue with visibility => 'immediate' commits
-- in aq's worker of the database, as the caller's role, before the call returns; the caller's
-- rollback does not undo it.
SELECT aq.create_queue_table('im_qt', 'text');
SELECT aq.create_queue('im_q', 'im_qt');
SELECT aq.start_queue('im_q');
CREATE FUNCTION im_try(sql text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE sql;
  RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
  RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- Kept after the caller's ROLLBACK; the ON_COMMIT one is gone.
BEGIN;
SELECT aq.enqueue('im_q', 'kept'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) AS kept_id \gset
SELECT cardinality(aq.enqueue_array('im_q', ARRAY['a1', 'a2']::text[],
                                    enqueue_options => aq.enqueue_options(visibility => 'DBMS_AQ.IMMEDIATE'))) AS array_ids;
SELECT aq.enqueue('im_q', 'rolled back'::text) > 0 AS on_commit;
ROLLBACK;
SELECT user_data, msgid = :kept_id AS same_id FROM im_qt ORDER BY msgid;

-- Kept after a rollback to a savepoint, and visible to the caller at once (its own transaction
-- began before it: READ COMMITTED sees it in the next statement).
BEGIN;
SAVEPOINT s;
SELECT aq.enqueue('im_q', 'in savepoint'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0 AS id;
ROLLBACK TO SAVEPOINT s;
SELECT count(*) AS seen_now FROM im_qt WHERE user_data = 'in savepoint';
COMMIT;

-- A request larger than its slot's room (8 KB) goes through a DSM segment: the same outcome.
BEGIN;
SELECT cardinality(aq.enqueue_array('im_q', ARRAY(SELECT repeat('x', 100) || i FROM generate_series(1, 500) i),
                                    enqueue_options => aq.enqueue_options(visibility => 'immediate'))) AS large;
ROLLBACK;
SELECT count(*) AS large_kept FROM im_qt WHERE user_data LIKE 'xxx%';
DELETE FROM im_qt WHERE user_data LIKE 'xxx%';

-- Every message the queue has, for a consumer.
SELECT string_agg(payload, ' ' ORDER BY msgid) AS dequeued
  FROM aq.dequeue_array('im_q', NULL::text, 10, aq.dequeue_options(wait => '0')) AS d(msgid, payload, p);

-- The worker of this database is a background worker of its own.
SELECT backend_type, datname = current_database() AS this_database FROM pg_stat_activity WHERE backend_type = 'aq immediate';

-- As the caller's role: a role without ENQUEUE gets 42501; with it, the enqueue is done for it.
CREATE ROLE regress_im_app;
SET ROLE regress_im_app;
SELECT im_try($$SELECT aq.enqueue('im_q', 'denied'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS without_privilege;
RESET ROLE;
SELECT aq.grant_queue_privilege('ENQUEUE', 'im_q', 'regress_im_app');
SET ROLE regress_im_app;
SELECT aq.enqueue('im_q', 'by the role'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0 AS with_privilege;
RESET ROLE;
-- A trigger of the owner's sees the caller's role as current_user (SECURITY_RESTRICTED_OPERATION rules).
CREATE TABLE im_log (who text, what text);
GRANT INSERT ON im_log TO regress_im_app;
CREATE FUNCTION im_log_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN INSERT INTO public.im_log VALUES (current_user, NEW.user_data); RETURN NEW; END $$;
CREATE TRIGGER im_log_row BEFORE INSERT ON im_qt FOR EACH ROW EXECUTE FUNCTION im_log_row();
SET ROLE regress_im_app;
SELECT aq.enqueue('im_q', 'logged'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0 AS id;
RESET ROLE;
SELECT who, what FROM im_log;
DROP TRIGGER im_log_row ON im_qt;

-- Refused before anything runs: what the worker would wait for, or could not see.
BEGIN;
LOCK TABLE im_qt IN SHARE MODE;
SELECT im_try($$SELECT aq.enqueue('im_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS share_locked;
ROLLBACK;
BEGIN;
SELECT aq.create_queue_table('im_new_qt', 'text');
SELECT aq.create_queue('im_new_q', 'im_new_qt');
SELECT aq.start_queue('im_new_q');
SELECT im_try($$SELECT aq.enqueue('im_new_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS created_here;
ROLLBACK;
BEGIN;
SELECT aq.alter_queue('im_q', max_retries => 3);
SELECT im_try($$SELECT aq.enqueue('im_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS altered_here;
ROLLBACK;

-- Not in a read-only transaction: the enqueue would write for it.
BEGIN READ ONLY;
SELECT im_try($$SELECT aq.enqueue('im_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS read_only;
ROLLBACK;

-- A deferred trigger on the queue table cannot fire in the worker's restricted operation (as in
-- any SECURITY_RESTRICTED_OPERATION): the caller gets 42501, and nothing was enqueued.
CREATE FUNCTION im_refuse_at_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.user_data = 'refused at commit' THEN RAISE EXCEPTION 'refused at commit' USING ERRCODE = '23514'; END IF;
  RETURN NULL;
END $$;
CREATE CONSTRAINT TRIGGER im_refuse_at_commit AFTER INSERT ON im_qt DEFERRABLE INITIALLY DEFERRED
  FOR EACH ROW EXECUTE FUNCTION im_refuse_at_commit();
SELECT im_try($$SELECT aq.enqueue('im_q', 'refused at commit'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS commit_error;
SELECT count(*) AS refused_kept FROM im_qt WHERE user_data = 'refused at commit';
DROP TRIGGER im_refuse_at_commit ON im_qt;
DROP FUNCTION im_refuse_at_commit();
SELECT aq.enqueue('im_q', 'after the refusal'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0 AS next_one;
DELETE FROM im_qt WHERE user_data = 'after the refusal';

-- The worker's errors are the caller's, as an ON_COMMIT enqueue would raise them.
SELECT im_try($$SELECT aq.enqueue('im_nosuch', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS unknown_queue;
SELECT aq.stop_queue('im_q');
SELECT im_try($$SELECT aq.enqueue('im_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate'))$$) AS stopped_queue;
SELECT aq.start_queue('im_q');
SELECT im_try($$SELECT aq.enqueue('im_q', 'x'::text, enqueue_options => aq.enqueue_options(visibility => 'soon'))$$) AS bad_value;

-- Immediate dequeues: the dequeue commits in the worker; the caller's rollback does not bring
-- the message back.
SELECT aq.create_queue_table('im_dq_qt', 'text');
SELECT aq.create_queue('im_dq', 'im_dq_qt');
SELECT aq.start_queue('im_dq');
CREATE FUNCTION im_dq_left() RETURNS text LANGUAGE sql AS
  $$SELECT coalesce(string_agg(user_data, ' ' ORDER BY msgid), '(none)') FROM im_dq_qt$$;
SELECT cardinality(aq.enqueue_array('im_dq', ARRAY['d1', 'd2', 'd3', 'd4', 'd5', 'd6'])) AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT payload FROM aq.dequeue_array('im_dq', NULL::text, 2, aq.dequeue_options(visibility => 'DBMS_AQ.IMMEDIATE', wait => '0')) AS d(m, payload, p);
ROLLBACK;
SELECT im_dq_left() AS left_after_rollback;
-- remove_nodata: the message goes, its payload is not returned; its msgid and properties are.
SELECT payload IS NULL AS no_payload, m > 0 AS has_msgid, (p).attempts
  FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(dequeue_mode => 'remove_nodata', visibility => 'immediate', wait => '0')) AS d(m, payload, p);
-- Browse takes nothing: its visibility is ignored, as in Oracle (it sees the caller's own enqueue).
BEGIN;
SELECT aq.enqueue('im_dq', 'mine'::text) > 0 AS on_commit_enqueue;
SELECT string_agg(payload, ' ') AS browsed
  FROM aq.dequeue_array('im_dq', NULL::text, 10, aq.dequeue_options(dequeue_mode => 'browse', visibility => 'immediate', wait => '0')) AS d(m, payload, p);
ROLLBACK;
-- Locked cannot be immediate: its lock would end before the call returns.
SELECT im_try($$SELECT aq.dequeue('im_dq', NULL::text, aq.dequeue_options(dequeue_mode => 'locked', visibility => 'immediate'))$$) AS locked;
-- By msgid and by correlation, as an ON_COMMIT dequeue.
SELECT aq.enqueue('im_dq', 'by id'::text) AS by_id_msgid \gset
SELECT aq.enqueue('im_dq', 'by correlation'::text, aq.message_properties(correlation => 'corr-1')) > 0 AS enqueued;
SELECT payload FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(msgid => :by_id_msgid, visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT payload, (p).correlation FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(correlation => 'corr-%', visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT payload FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(deq_condition => $$tab.user_data = 'd5'$$, visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT im_dq_left() AS left_now;
-- Nothing to take: QA228, as an ON_COMMIT dequeue.  In REPEATABLE READ an immediate dequeue may
-- wait (each try is the worker's own transaction), and it sees what committed after the caller's
-- snapshot.
SELECT count(*) AS taken FROM aq.dequeue_array('im_dq', NULL::text, 10, aq.dequeue_options(visibility => 'immediate', wait => '0'));
SELECT im_try($$SELECT aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0'))$$) AS empty;
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT im_dq_left() AS snapshot_taken;
SELECT im_try($$SELECT aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0.2'))$$) AS waited;
SELECT aq.enqueue('im_dq', 'after the snapshot'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0 AS id;
SELECT payload FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '5')) AS d(m, payload, p);
COMMIT;
-- Large messages come back through a segment of the worker's: a payload stored out of line
-- (TOAST), and many messages at once.
SELECT aq.enqueue('im_dq', (SELECT string_agg(md5(i::text), '') FROM generate_series(1, 5000) i)) > 0 AS large;
SELECT length(payload), md5(payload) = md5((SELECT string_agg(md5(i::text), '') FROM generate_series(1, 5000) i)) AS same
  FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT cardinality(aq.enqueue_array('im_dq', ARRAY(SELECT 'm' || i || repeat('.', 100) FROM generate_series(1, 300) i))) AS many;
SELECT count(*), count(DISTINCT payload), min(length(payload)) >= 102 AS whole
  FROM aq.dequeue_array('im_dq', NULL::text, 1000, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT im_dq_left() AS left_at_end;
-- A composite payload.
CREATE TYPE im_ot AS (n int, label text);
SELECT aq.create_queue_table('im_ot_qt', 'im_ot');
SELECT aq.create_queue('im_ot_q', 'im_ot_qt');
SELECT aq.start_queue('im_ot_q');
SELECT aq.enqueue('im_ot_q', ROW(7, 'seven')::im_ot) > 0 AS enqueued;
SELECT (payload).n, (payload).label FROM aq.dequeue('im_ot_q', NULL::im_ot, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT aq.drop_queue_table('im_ot_qt', force => true);
DROP TYPE im_ot;
-- As the caller's role: without DEQUEUE 42501; refused where the worker would wait for the caller.
SET ROLE regress_im_app;
SELECT im_try($$SELECT aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0'))$$) AS without_privilege;
RESET ROLE;
BEGIN;
LOCK TABLE im_dq_qt IN SHARE MODE;
SELECT im_try($$SELECT aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0'))$$) AS share_locked;
ROLLBACK;
BEGIN READ ONLY;
SELECT im_try($$SELECT aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0'))$$) AS read_only;
ROLLBACK;
-- A message the caller's own transaction holds (its ON_COMMIT dequeue took 'held'): the
-- worker passes over it (SKIP LOCKED), it never waits for the caller.
SELECT aq.enqueue_array('im_dq', ARRAY['held', 'free']) IS NOT NULL AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
SELECT payload FROM aq.dequeue('im_dq', NULL::text, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
ROLLBACK;
SELECT im_dq_left() AS held_is_back;
SELECT aq.drop_queue_table('im_dq_qt', force => true);
DROP FUNCTION im_dq_left();

-- A multi-consumer queue: the deliveries are written in the same autonomous transaction.
SELECT aq.create_queue_table('im_mc_qt', 'text', multiple_consumers => true);
SELECT aq.create_queue('im_mc_q', 'im_mc_qt');
SELECT aq.start_queue('im_mc_q');
SELECT aq.add_subscriber('im_mc_q', aq.agent('s1'));
SELECT aq.add_subscriber('im_mc_q', aq.agent('s2'));
BEGIN;
SELECT aq.enqueue('im_mc_q', 'to both'::text, enqueue_options => aq.enqueue_options(visibility => 'immediate')) > 0 AS id;
ROLLBACK;
SELECT payload FROM aq.dequeue('im_mc_q', NULL::text, aq.dequeue_options(consumer_name => 's1', wait => '0')) AS d(m, payload, p);
SELECT payload FROM aq.dequeue('im_mc_q', NULL::text, aq.dequeue_options(consumer_name => 's2', visibility => 'immediate', wait => '0')) AS d(m, payload, p);
-- A transaction group: an immediate dequeue takes the group as its own transaction would.
SELECT aq.create_queue_table('im_g_qt', 'text', message_grouping => 'transactional');
SELECT aq.create_queue('im_g_q', 'im_g_qt');
SELECT aq.start_queue('im_g_q');
SELECT cardinality(aq.enqueue_array('im_g_q', ARRAY['g1', 'g2'])) AS group_enqueued;
SELECT cardinality(aq.enqueue_array('im_g_q', ARRAY['h1'])) AS next_group;
SELECT payload, (p).end_of_group FROM aq.dequeue_array('im_g_q', NULL::text, 10, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT payload, (p).end_of_group FROM aq.dequeue_array('im_g_q', NULL::text, 10, aq.dequeue_options(visibility => 'immediate', wait => '0')) AS d(m, payload, p);
SELECT aq.drop_queue_table('im_g_qt', force => true);

-- An immediate dequeue of a multi-consumer ring that waits while its consumer's message waits for
-- the retry_delay: the worker says when that is ready, and the caller wakes then (not at the end of
-- its 60 s).
SELECT aq.create_queue_table('im_once_qt', 'text', multiple_consumers => true, segments => 2);
SELECT aq.create_queue('im_once_q', 'im_once_qt', retry_delay => '3 seconds');
SELECT aq.start_queue('im_once_q');
SELECT aq.add_subscriber('im_once_q', aq.agent('A'));
SELECT aq.enqueue('im_once_q', 'r1'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('im_once_q', NULL::text, aq.dequeue_options(consumer_name => 'A', wait => 0));
ROLLBACK;
SET aq.wait_rescan_interval = '1h';  -- no rescan once a second: the worker's time wakes it
SELECT payload, (p).attempts, clock_timestamp() - statement_timestamp() < interval '30 s' AS woken_in_time
  FROM aq.dequeue('im_once_q', NULL::text, aq.dequeue_options(consumer_name => 'A', visibility => 'immediate', wait => 60)) AS d(m, payload, p);
RESET aq.wait_rescan_interval;
SELECT aq.drop_queue_table('im_once_qt', force => true);

SELECT aq.drop_queue_table('im_mc_qt', force => true);
SELECT aq.drop_queue_table('im_qt', force => true);
DROP TABLE im_log;
DROP FUNCTION im_log_row();
DROP FUNCTION im_try(text);
DROP ROLE regress_im_app;
