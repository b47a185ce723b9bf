-- aq 0.6.0: the rest of Oracle AQ's messaging model.
-- Each section below is one concern; keep them apart so that each can be read on its own.

\echo Use "ALTER EXTENSION aq UPDATE TO '0.6.0'" to load this file. \quit

-- ---------------------------------------------------------------- waits in Oracle's forms

-- A dequeue's or LISTEN's wait as an Oracle application writes it (src/pg/wait_time.cpp):
-- 'forever' or NULL, 'no_wait' or 0, a number of seconds (-1 = DBMS_AQ.FOREVER), an interval.
CREATE TYPE aq.wait_time;
CREATE FUNCTION aq._wait_time_in(cstring) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_in';
CREATE FUNCTION aq._wait_time_out(aq.wait_time) RETURNS cstring
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_out';
CREATE FUNCTION aq._wait_time_recv(internal) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_recv';
CREATE FUNCTION aq._wait_time_send(aq.wait_time) RETURNS bytea
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_send';
CREATE TYPE aq.wait_time (
    INPUT = aq._wait_time_in, OUTPUT = aq._wait_time_out, RECEIVE = aq._wait_time_recv, SEND = aq._wait_time_send,
    INTERNALLENGTH = 8, PASSEDBYVALUE, ALIGNMENT = double);
COMMENT ON TYPE aq.wait_time IS
    'A wait (Oracle''s WAIT): ''forever'' or NULL, ''no_wait'' or 0, a number of seconds (-1 = forever), or an interval';
CREATE FUNCTION aq._wait_time(smallint) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_int2';
CREATE FUNCTION aq._wait_time(integer) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_int4';
CREATE FUNCTION aq._wait_time(bigint) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_int8';
CREATE FUNCTION aq._wait_time(numeric) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_numeric';
CREATE FUNCTION aq._wait_time(double precision) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_float8';
CREATE FUNCTION aq._wait_time(interval) RETURNS aq.wait_time
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_time_from_interval';
-- Every integer type, as drivers send a number of seconds as whichever fits (one step only: an
-- implicit cast is never chained in a function call).
CREATE CAST (smallint AS aq.wait_time) WITH FUNCTION aq._wait_time(smallint) AS IMPLICIT;
CREATE CAST (integer AS aq.wait_time) WITH FUNCTION aq._wait_time(integer) AS IMPLICIT;
CREATE CAST (bigint AS aq.wait_time) WITH FUNCTION aq._wait_time(bigint) AS IMPLICIT;
CREATE CAST (numeric AS aq.wait_time) WITH FUNCTION aq._wait_time(numeric) AS IMPLICIT;
CREATE CAST (double precision AS aq.wait_time) WITH FUNCTION aq._wait_time(double precision) AS IMPLICIT;
CREATE CAST (interval AS aq.wait_time) WITH FUNCTION aq._wait_time(interval) AS IMPLICIT;
-- The interval that aq.dequeue_options holds (NULL = forever, as before): the constructor below
-- takes an aq.wait_time and stores this.
CREATE FUNCTION aq._wait_interval(aq.wait_time) RETURNS interval
    LANGUAGE c IMMUTABLE STRICT PARALLEL SAFE AS 'MODULE_PATHNAME', 'aq__wait_interval';
-- The type's input and output (a cast to text calls them as the caller), its casts and
-- _wait_interval run in the caller's expressions: PUBLIC keeps EXECUTE on them (they only convert).

-- ---------------------------------------------------------------- dequeue conditions

-- Oracle's DEQ_CONDITION: a boolean expression over the message's properties and payload
-- (tab.user_data.<field>, priority, corrid, ...), parsed by PostgreSQL's parser as one
-- expression and evaluated with the caller's privileges (src/queue/condition.hpp).
ALTER TYPE aq.dequeue_options ADD ATTRIBUTE deq_condition text;

-- The constructor gains the argument and takes an aq.wait_time (a new signature: the old one is
-- replaced, and with it PUBLIC's EXECUTE, which is all it ever had).
DROP FUNCTION aq.dequeue_options(text, text, text, text, interval, bigint, text);
CREATE FUNCTION aq.dequeue_options(
    consumer_name text DEFAULT NULL, dequeue_mode text DEFAULT 'remove', navigation text DEFAULT 'next_message',
    visibility text DEFAULT 'on_commit', wait aq.wait_time DEFAULT NULL, msgid bigint DEFAULT NULL,
    correlation text DEFAULT NULL, deq_condition text DEFAULT NULL)
RETURNS aq.dequeue_options LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = pg_catalog, pg_temp
AS $$ SELECT ROW(consumer_name, dequeue_mode, navigation, visibility, aq._wait_interval(wait), msgid, correlation,
                 deq_condition)::aq.dequeue_options $$;

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
CREATE FUNCTION aq.listen(agent_list aq.agent[], wait aq.wait_time DEFAULT NULL)
RETURNS aq.agent LANGUAGE c VOLATILE AS 'MODULE_PATHNAME', 'aq_listen';
