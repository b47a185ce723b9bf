-- aq 0.6.0: the rest of Oracle AQ's messaging model.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.6.0'" to load this file. \quit

-- ---------------------------------------------------------------- dequeue conditions

-- Oracle's DEQ_CONDITION: a boolean expression over the message's properties and payload
-- (tab.user_data.<field>, priority, corrid, ...), parsed by PostgreSQL's parser as one
-- expression and evaluated with the caller's privileges (src/queue/condition.hpp).
ALTER TYPE aq.dequeue_options ADD ATTRIBUTE deq_condition text;

-- The constructor gains the argument (a new signature: the old one is replaced, and with it
-- PUBLIC's EXECUTE, which is all it ever had).
DROP FUNCTION aq.dequeue_options(text, text, text, text, interval, bigint, text);
CREATE FUNCTION aq.dequeue_options(
    consumer_name text DEFAULT NULL, dequeue_mode text DEFAULT 'remove', navigation text DEFAULT 'next_message',
    visibility text DEFAULT 'on_commit', wait interval DEFAULT NULL, msgid bigint DEFAULT NULL,
    correlation text DEFAULT NULL, deq_condition text DEFAULT NULL)
RETURNS aq.dequeue_options LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(consumer_name, dequeue_mode, navigation, visibility, wait, msgid, correlation, deq_condition)::aq.dequeue_options $$;

-- ---------------------------------------------------------------- LISTEN

-- Oracle's SYS.AQ$_AGENT: a consumer (name; NULL for a single-consumer queue), the queue it
-- listens on (address: the queue's name) and a protocol (0, the only one: local queues).
CREATE TYPE aq.agent AS (name text, address text, protocol integer);
CREATE FUNCTION aq.agent(name text DEFAULT NULL, address text DEFAULT NULL, protocol integer DEFAULT 0)
RETURNS aq.agent LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(name, address, protocol)::aq.agent $$;

-- Oracle's DBMS_AQ.LISTEN: waits until one of the agents' queues has a message a dequeue could
-- take now, and returns that agent (the first in the list that has one); it takes nothing.  A
-- commit wakes it, as it wakes a waiting dequeue.  wait: NULL waits forever, '0' not at all; at
-- the end of the wait QA254 (ORA-25254).  The caller needs SELECT on the queue tables (DEQUEUE).
CREATE FUNCTION aq.listen(agent_list aq.agent[], wait interval DEFAULT NULL)
RETURNS aq.agent LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_listen';
