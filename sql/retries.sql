-- Dequeue attempts: a dequeue whose transaction (or subtransaction) ends without committing is
-- an attempt, counted exactly once and visible to every session as soon as ROLLBACK returns,
-- held back by retry_delay, moved to the exception queue past max_retries.
-- hardening D17/D18.  (aq 0.4.0 wrote the attempt in the session's next aq call, inside that
-- call's transaction: every "at once" check below showed 0, the worker loop never got its
-- message back, and a cancel inside the counting became a WARNING.)
CREATE FUNCTION wait_for(condition text) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE done boolean;
BEGIN
  FOR i IN 1..600 LOOP  -- 30 s at most
    EXECUTE condition INTO done;
    IF done THEN RETURN true; END IF;
    PERFORM pg_sleep(0.05);
  END LOOP;
  RETURN false;
END $$;
SELECT aq.create_queue_table('rt_qt', 'text');
SELECT aq.create_queue('rt_q', 'rt_qt', max_retries => 2);
SELECT aq.start_queue('rt_q');
CREATE FUNCTION attempts(payload text) RETURNS integer LANGUAGE sql AS $$
  SELECT retry_count FROM rt_qt WHERE user_data = payload $$;
CREATE FUNCTION queue_of(payload text) RETURNS text LANGUAGE sql AS $$
  SELECT q.queue_name FROM rt_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE m.user_data = payload $$;

------------------------------------------------------------------------------ ROLLBACK, an error, ROLLBACK TO SAVEPOINT
-- hardening D17: ROLLBACK.
SELECT aq.enqueue('rt_q', 'm1'::text) > 0 AS enqueued;
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
ROLLBACK;
SELECT attempts('m1') AS after_rollback;
-- hardening D17: an error ends the transaction.
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
SELECT 1 / 0;
ROLLBACK;
SELECT attempts('m1') AS after_error;
-- hardening D17: past max_retries (2) the third attempt moves it to the exception queue.
BEGIN;
SELECT payload, (p).attempts FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
ROLLBACK;
SELECT attempts('m1') AS attempts, queue_of('m1') AS now_in;
SELECT try_sql($$SELECT aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'))$$) AS normal_queue_empty;

-- hardening D17: ROLLBACK TO SAVEPOINT, seen at once inside the same transaction; the
-- transaction goes on and commits; an attempt is counted once however many levels it crosses.
SELECT aq.enqueue('rt_q', 'm2'::text) > 0 AS enqueued;
BEGIN;
SAVEPOINT a;
SAVEPOINT b;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));
RELEASE SAVEPOINT b;
ROLLBACK TO SAVEPOINT a;
SELECT attempts('m2') AS after_rollback_to_savepoint;
SELECT payload, (p).attempts FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
COMMIT;
SELECT count(*) AS m2_left FROM rt_qt WHERE user_data = 'm2';

-- hardening D17: the locked mode; a message locked, then removed by msgid in a later
-- subtransaction, then all rolled back: one attempt.
SELECT aq.enqueue('rt_q', 'm3'::text) > 0 AS enqueued;
BEGIN;
SELECT msgid AS m3_id FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(dequeue_mode => 'locked', wait => '0')) \gset
SAVEPOINT s;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(msgid => :m3_id, wait => '0'));
RELEASE SAVEPOINT s;
ROLLBACK;
SELECT attempts('m3') AS locked_then_removed;
-- A locked dequeue that commits leaves the message, with no attempt.
BEGIN;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(dequeue_mode => 'locked', wait => '0'));
COMMIT;
SELECT attempts('m3') AS locked_and_committed;
SELECT payload, (p).attempts FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);

-- An error inside an exception block (a subtransaction) after the dequeue.
SELECT aq.enqueue('rt_q', 'm4'::text) > 0 AS enqueued;
DO $$
BEGIN
  PERFORM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));
  PERFORM 1 / 0;
EXCEPTION WHEN division_by_zero THEN NULL;
END $$;
SELECT attempts('m4') AS after_exception_block;

------------------------------------------------------------------------------ what is not an attempt
-- A rolled-back purge or DELETE of messages: the messages are back at once, no attempt.
BEGIN;
SELECT aq.purge_queue_table('rt_qt');
ROLLBACK;
BEGIN;
DELETE FROM rt_qt;
ROLLBACK;
SELECT user_data, retry_count FROM rt_qt ORDER BY msgid;
SELECT payload, (p).attempts FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);
-- Browse claims nothing.
SELECT aq.enqueue('rt_q', 'm5'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(dequeue_mode => 'browse', wait => '0'));
ROLLBACK;
SELECT attempts('m5') AS after_browse;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));

------------------------------------------------------------------------------ max_retries across connections
-- hardening D17: a worker that connects anew for every attempt.
SELECT aq.enqueue('rt_q', 'm6'::text) > 0 AS enqueued;
\c -
BEGIN;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
\c -
BEGIN;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
\c -
BEGIN;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
\c -
SELECT attempts('m6') AS attempts, queue_of('m6') AS now_in;

------------------------------------------------------------------------------ retry_delay and a worker loop
-- hardening D17: a worker loop that rolls back after every empty wait (QA228 aborts its
-- transaction): with retry_delay 3 s and waits of 1 s, the message comes back after the delay.
SELECT aq.create_queue('rt_delay_q', 'rt_qt', max_retries => 5, retry_delay => '3 s');
SELECT aq.start_queue('rt_delay_q');
SELECT aq.enqueue('rt_delay_q', 'd1'::text) > 0 AS enqueued;
CREATE TABLE loop_log (attempt integer, got text, at timestamptz);
CREATE PROCEDURE worker_loop() LANGUAGE plpgsql AS $$
DECLARE got text;
BEGIN
  FOR i IN 1..10 LOOP
    BEGIN
      SELECT payload INTO got FROM aq.dequeue('rt_delay_q', NULL::text, aq.dequeue_options(wait => '1 s'));
    EXCEPTION WHEN SQLSTATE 'QA228' THEN got := NULL;
    END;
    IF i = 1 OR got IS NULL THEN
      ROLLBACK;  -- the first delivery fails; the empty waits roll back too
    ELSE
      COMMIT;
    END IF;
    INSERT INTO loop_log VALUES (i, got, clock_timestamp());
    COMMIT;
    EXIT WHEN i > 1 AND got IS NOT NULL;
  END LOOP;
END $$;
CALL worker_loop();
SELECT count(*) FILTER (WHERE got IS NULL) BETWEEN 1 AND 4 AS some_empty_waits,
       max(attempt) FILTER (WHERE got IS NOT NULL) <= 6 AS came_back,
       max(at) FILTER (WHERE got IS NOT NULL) - min(at) >= interval '1.9 s' AS held_back_about_3_s
  FROM loop_log;
SELECT count(*) AS d1_left FROM rt_qt WHERE user_data = 'd1';
-- hardening D17: other sessions see the attempt and the delay at once: a second connection
-- right after the ROLLBACK.
SELECT aq.enqueue('rt_delay_q', 'd2'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('rt_delay_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
\c -
SELECT attempts('d2') AS seen_by_another_session, (SELECT delay > now() + interval '1 s' FROM rt_qt WHERE user_data = 'd2') AS delayed;
SELECT try_sql($$SELECT aq.dequeue('rt_delay_q', NULL::text, aq.dequeue_options(wait => '0'))$$) AS held_back;

------------------------------------------------------------------------------ a cancel is an error
-- hardening D18: counting never turns an error into a WARNING, a cancel included: the
-- counting runs in the settler, so a statement_timeout of the session never meets it.  Here
-- the queue table's owner has a trigger that makes the count take 2 s.
SELECT aq.create_queue_table('slow_qt', 'text');
SELECT aq.create_queue('slow_q', 'slow_qt');
SELECT aq.start_queue('slow_q');
CREATE FUNCTION slow_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_catalog.pg_sleep(2); RETURN NEW; END $$;
CREATE TRIGGER slow BEFORE UPDATE ON slow_qt FOR EACH ROW EXECUTE FUNCTION slow_update();
SELECT cardinality(aq.enqueue_array('slow_q', ARRAY['s1', 's2'])) AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('slow_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
SET statement_timeout = '1s';
SELECT payload FROM aq.dequeue('slow_q', NULL::text, aq.dequeue_options(wait => '0'));
RESET statement_timeout;
SELECT wait_for($$SELECT retry_count = 1 FROM slow_qt WHERE user_data = 's1'$$) AS s1_counted;
-- A statement_timeout that cancels the dequeue statement itself: the claim was made, the
-- attempt is counted (and the error is the cancel's).
SELECT aq.enqueue('rt_q', 'm7'::text) > 0 AS enqueued;
SET statement_timeout = '300ms';
SELECT payload, pg_sleep(5) FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(wait => '0'));
RESET statement_timeout;
SELECT attempts('m7') AS after_statement_timeout;

------------------------------------------------------------------------------ the filter's privileges
-- aq._claimable is called by the dequeue statements as the dequeuing role; it reads a row
-- version's header only for a role that may read the table.
CREATE ROLE rt_nobody;
SET ROLE rt_nobody;
SELECT try_sql($$SELECT aq._claimable('rt_qt'::regclass, '(0,1)')$$) AS without_select;
RESET ROLE;
SELECT aq._claimable('rt_qt'::regclass, '(0,1)') AS with_select, aq._claimable('rt_qt'::regclass, '(4294967295,1)') AS no_such_row;
-- A relation that does not exist is 42P01 (not an internal error), for anyone.
SELECT try_sql($$SELECT aq._claimable(0, '(0,1)')$$) AS no_such_relation;
DROP ROLE rt_nobody;

------------------------------------------------------------------------------ a settle that fails
-- hardening D17: the settle's own transaction fails once (the queue table owner's trigger):
-- the attempt is still recognised, counted on the settler's next round, and only once.
SELECT aq.create_queue_table('fail_qt', 'text');
SELECT aq.create_queue('fail_q', 'fail_qt');
SELECT aq.start_queue('fail_q');
CREATE SEQUENCE fail_once;
CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF pg_catalog.nextval('public.fail_once') = 1 THEN RAISE EXCEPTION 'the first settle fails'; END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fail_once BEFORE UPDATE ON fail_qt FOR EACH ROW EXECUTE FUNCTION fail_once();
SELECT aq.enqueue('fail_q', 'f1'::text) > 0 AS enqueued;
BEGIN;
SELECT payload FROM aq.dequeue('fail_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
SELECT wait_for($$SELECT retry_count = 1 FROM fail_qt WHERE user_data = 'f1'$$) AS counted_after_a_failed_settle;
SELECT last_value AS settle_runs FROM fail_once;
SELECT payload, (p).attempts FROM aq.dequeue('fail_q', NULL::text, aq.dequeue_options(wait => '0')) AS d(m, payload, p);

------------------------------------------------------------------------------ a rollback that holds the table
-- The rolled-back transaction locked the queue table itself: the settler does not wait for it
-- (the ROLLBACK would sit out its bounded wait); the attempt is counted right after.
SELECT aq.enqueue('rt_q', 'm8'::text) AS m8_id \gset
BEGIN;
SELECT payload FROM aq.dequeue('rt_q', NULL::text, aq.dequeue_options(msgid => :m8_id, wait => '0'));
LOCK TABLE rt_qt IN ACCESS EXCLUSIVE MODE;
SELECT clock_timestamp() AS before_rollback \gset
ROLLBACK;
SELECT clock_timestamp() - :'before_rollback'::timestamptz < interval '0.9 s' AS rollback_did_not_wait;
SELECT wait_for($$SELECT retry_count = 1 FROM rt_qt WHERE user_data = 'm8'$$) AS m8_counted;
