-- What aq runs as a queue table's owner (the expiry move, dequeue attempts) runs with
-- search_path = pg_catalog, pg_temp, in a restricted security context, and every setting is
-- undone afterwards; queue statements qualify every name and read the queue table ONLY;
-- browse never writes.
SET client_min_messages = warning;

------------------------------------------------------------------------------ look-alikes
-- hardening B3: a DEQUEUE-only role puts look-alike functions before pg_catalog in its
-- search_path.  They record who ran them: as the consumer that is harmless, as the queue
-- table's owner (a superuser here) it is how the consumer became superuser in aq 0.4.0.
CREATE ROLE regress_aq_consumer NOLOGIN;
CREATE TABLE lookalike_log (who text, what text);
GRANT INSERT ON lookalike_log TO PUBLIC;
CREATE SCHEMA lookalike;
GRANT USAGE, CREATE ON SCHEMA lookalike TO regress_aq_consumer;
SET ROLE regress_aq_consumer;
CREATE FUNCTION lookalike.now() RETURNS timestamptz LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.lookalike_log VALUES (current_user, 'now');
  RETURN pg_catalog.now();
END $$;
CREATE FUNCTION lookalike.lower(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.lookalike_log VALUES (current_user, 'lower');
  RETURN pg_catalog.lower($1);
END $$;
CREATE FUNCTION lookalike.upper(text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.lookalike_log VALUES (current_user, 'upper');
  RETURN pg_catalog.upper($1);
END $$;
RESET ROLE;

-- The owner's code on its queue table resolves names when it runs: an audit trigger that
-- calls now() (and changes two settings), an index expression that calls upper() and a forced
-- RLS policy that calls lower().
SELECT aq.create_queue_table('b3_qt', 'text');
SELECT aq.create_queue('b3_q', 'b3_qt');
SELECT aq.start_queue('b3_q');
SELECT aq.grant_queue_privilege('DEQUEUE', 'b3_q', 'regress_aq_consumer');
SELECT aq.enqueue('b3_q', 'expires'::text, aq.message_properties(correlation => 'X')) > 0 AS enqueued;
SELECT aq.enqueue('b3_q', 'delivered'::text, aq.message_properties(correlation => 'Y')) > 0 AS enqueued;
UPDATE b3_qt SET expiration = now() - interval '1 s' WHERE user_data = 'expires';

CREATE TABLE b3_audit (at timestamptz);
CREATE FUNCTION b3_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO public.b3_audit VALUES (now());
  PERFORM set_config('work_mem', '1234kB', false);
  SET search_path = public;
  RETURN NEW;
END $$;
CREATE TRIGGER b3_audit AFTER UPDATE ON b3_qt FOR EACH ROW EXECUTE FUNCTION b3_audit();
CREATE FUNCTION b3_norm(text) RETURNS text LANGUAGE sql IMMUTABLE AS $$ SELECT upper($1) $$;
CREATE INDEX b3_norm_idx ON b3_qt (b3_norm(corrid));
CREATE FUNCTION b3_visible(text) RETURNS boolean LANGUAGE sql STABLE AS $$ SELECT lower($1) IS NOT NULL $$;
ALTER TABLE b3_qt ENABLE ROW LEVEL SECURITY;
ALTER TABLE b3_qt FORCE ROW LEVEL SECURITY;
CREATE POLICY b3_visible ON b3_qt USING (b3_visible(corrid));
-- A superuser bypasses even a forced policy: the policy case has a queue table of its own,
-- owned by a role that is not a superuser.
CREATE ROLE regress_aq_qowner NOLOGIN;
GRANT USAGE ON SCHEMA lookalike TO PUBLIC;
SELECT aq.create_queue_table('b3r_qt', 'text');
SELECT aq.create_queue('b3r_q', 'b3r_qt');
SELECT aq.start_queue('b3r_q');
SELECT aq.grant_queue_privilege('DEQUEUE', 'b3r_q', 'regress_aq_consumer');
SELECT aq.enqueue('b3r_q', 'expires'::text, aq.message_properties(correlation => 'X')) > 0 AS enqueued;
SELECT aq.enqueue('b3r_q', 'delivered'::text, aq.message_properties(correlation => 'Y')) > 0 AS enqueued;
UPDATE b3r_qt SET expiration = now() - interval '1 s' WHERE user_data = 'expires';
ALTER TABLE b3r_qt OWNER TO regress_aq_qowner;
ALTER TABLE b3r_qt ENABLE ROW LEVEL SECURITY;
ALTER TABLE b3r_qt FORCE ROW LEVEL SECURITY;
CREATE POLICY b3r_visible ON b3r_qt USING (b3_visible(corrid));
TRUNCATE lookalike_log;

SET ROLE regress_aq_consumer;
SET search_path = lookalike, pg_catalog, public;
SET work_mem = '4MB';
-- Each dequeue first moves the expired message to the exception queue, as the owner (b3r_q
-- first: b3_qt's trigger sets search_path, which must not leak, but did in aq 0.4.0).
SELECT payload FROM aq.dequeue('b3r_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT payload FROM aq.dequeue('b3_q', NULL::text, aq.dequeue_options(wait => '0'));
-- The owner's trigger changed work_mem and search_path: not in the consumer's session.
SELECT current_setting('work_mem') AS work_mem, current_setting('search_path') AS search_path;
-- A rolled-back dequeue: its attempt is counted as the owner too.
RESET ROLE;
SELECT aq.enqueue('b3_q', 'retried'::text, aq.message_properties(correlation => 'Z')) > 0 AS enqueued;
SET ROLE regress_aq_consumer;
BEGIN;
SELECT payload FROM aq.dequeue('b3_q', NULL::text, aq.dequeue_options(wait => '0'));
ROLLBACK;
SELECT payload FROM aq.dequeue('b3_q', NULL::text, aq.dequeue_options(wait => '0'));
SELECT current_setting('work_mem') AS work_mem, current_setting('search_path') AS search_path;
RESET ROLE;
RESET search_path;
RESET work_mem;
-- The owner's code ran (the move fired the trigger) but never a look-alike as the owner.
SELECT count(*) > 0 AS audit_trigger_ran FROM b3_audit;
SELECT q.queue_name FROM b3_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE m.user_data = 'expires';
SELECT q.queue_name FROM b3r_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE m.user_data = 'expires';
SELECT what, count(*) FROM lookalike_log WHERE who <> 'regress_aq_consumer' GROUP BY what ORDER BY what;

------------------------------------------------------------------------------ collations
-- hardening 7: a look-alike case-insensitive collation "C" before pg_catalog must not make an
-- exact correlation match case-insensitive.
CREATE COLLATION lookalike."C" (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
SELECT aq.create_queue_table('coll_qt', 'text');
SELECT aq.create_queue('coll_q', 'coll_qt');
SELECT aq.start_queue('coll_q');
SELECT aq.enqueue('coll_q', 'upper'::text, aq.message_properties(correlation => 'ABC')) > 0 AS enqueued;
SET search_path = lookalike, pg_catalog, public;
SELECT try_sql($$SELECT aq.dequeue('coll_q', NULL::text, aq.dequeue_options(wait => '0', correlation => 'abc'))$$);
SELECT payload FROM aq.dequeue('coll_q', NULL::text, aq.dequeue_options(wait => '0', correlation => 'ABC'));
RESET search_path;

------------------------------------------------------------------------------ inheritance
-- hardening 11: a table inheriting from a queue table is not part of it.  Its row has queue
-- it_qa's q_id and the same ctid as a message of queue it_qb in the parent; a correlation
-- dequeue (the statement path) of it_qa must neither return nor delete it_qb's message.
SELECT aq.create_queue_table('it_qt', 'text');
SELECT aq.create_queue('it_qa', 'it_qt');
SELECT aq.create_queue('it_qb', 'it_qt');
SELECT aq.start_queue('it_qa');
SELECT aq.start_queue('it_qb');
SELECT aq.start_queue('aq$_it_qt_e', enqueue => false);
SELECT aq.enqueue('it_qb', 'b message'::text, aq.message_properties(correlation => 'k')) > 0 AS enqueued;
SELECT aq.enqueue('it_qa', 'a message'::text, aq.message_properties(correlation => 'k')) > 0 AS enqueued;
CREATE TABLE it_child () INHERITS (it_qt);
INSERT INTO it_child SELECT * FROM ONLY it_qt WHERE user_data = 'a message';
SELECT (SELECT ctid FROM it_child) = (SELECT ctid FROM ONLY it_qt WHERE user_data = 'b message') AS same_ctid;
SELECT payload FROM aq.dequeue_array('it_qa', NULL::text, 10, aq.dequeue_options(wait => '0', correlation => 'k'));
SELECT tableoid::regclass, user_data FROM it_qt ORDER BY 1, 2;
-- browse, the other statement paths and the expiry move do not see the child either
SELECT payload FROM aq.dequeue_array('it_qa', NULL::text, 10, aq.dequeue_options(wait => '0', dequeue_mode => 'browse'));
UPDATE it_child SET expiration = now() - interval '1 s';
SELECT try_sql($$SELECT aq.dequeue('aq$_it_qt_e', NULL::text, aq.dequeue_options(wait => '0'))$$);
SELECT m.tableoid::regclass, q.queue_name, m.user_data FROM it_qt m JOIN aq.queues q ON q.queue_id = m.q_id ORDER BY 1;
-- nor do the admin functions' deletes: purge and drop_queue
SELECT aq.purge_queue_table('it_qt') AS purged;
SELECT aq.stop_queue('it_qa');
SELECT aq.drop_queue('it_qa');
SELECT tableoid::regclass, user_data FROM it_qt;
DROP TABLE it_child;

------------------------------------------------------------------------------ read only
-- hardening 14: browse is read-only; so is any dequeue in a READ ONLY transaction (a hot
-- standby's are): no hidden expiry UPDATE (25006), on a normal or an exception queue.
SELECT aq.create_queue_table('ro_qt', 'text');
SELECT aq.create_queue('ro_q', 'ro_qt');
SELECT aq.start_queue('ro_q');
SELECT aq.start_queue('aq$_ro_qt_e', enqueue => false);
SELECT cardinality(aq.enqueue_array('ro_q', ARRAY['one', 'two', 'gone'])) AS enqueued;
UPDATE ro_qt SET expiration = now() - interval '1 s' WHERE user_data = 'gone';
BEGIN TRANSACTION READ ONLY;
SELECT payload FROM aq.dequeue_array('ro_q', NULL::text, 10, aq.dequeue_options(wait => '0', dequeue_mode => 'browse'));
SELECT try_sql($$SELECT aq.dequeue('aq$_ro_qt_e', NULL::text, aq.dequeue_options(wait => '0', dequeue_mode => 'browse'))$$);
COMMIT;
-- Outside READ ONLY, browse still writes nothing: the expired message stays where it is.
SELECT try_sql($$SELECT aq.dequeue('aq$_ro_qt_e', NULL::text, aq.dequeue_options(wait => '0', dequeue_mode => 'browse'))$$);
SELECT q.queue_name FROM ro_qt m JOIN aq.queues q ON q.queue_id = m.q_id WHERE m.user_data = 'gone';
-- A consuming dequeue of the exception queue moves it, and browse then shows it.
SELECT try_sql($$SELECT aq.dequeue('aq$_ro_qt_e', NULL::text, aq.dequeue_options(wait => '0', dequeue_mode => 'locked'))$$);
BEGIN TRANSACTION READ ONLY;
SELECT payload FROM aq.dequeue('aq$_ro_qt_e', NULL::text, aq.dequeue_options(wait => '0', dequeue_mode => 'browse'));
COMMIT;

------------------------------------------------------------------------------ clean up
SELECT aq.drop_queue_table('b3_qt', force => true);
SELECT aq.drop_queue_table('b3r_qt', force => true);
SELECT aq.drop_queue_table('coll_qt', force => true);
SELECT aq.drop_queue_table('it_qt', force => true);
SELECT aq.drop_queue_table('ro_qt', force => true);
DROP FUNCTION b3_audit(), b3_norm(text), b3_visible(text);
DROP TABLE b3_audit, lookalike_log;
DROP SCHEMA lookalike CASCADE;
DROP ROLE regress_aq_consumer;
DROP ROLE regress_aq_qowner;
