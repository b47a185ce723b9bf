-- Queue and queue-table names are identifiers taken exactly as given, quoted everywhere.
CREATE TABLE victim (id int);
INSERT INTO victim VALUES (1);

CREATE TEMP TABLE odd_names (name text);
INSERT INTO odd_names VALUES
  ('Mixed Case'), ('mixed case'), ('with "quotes"'), ('it''s'), ('semi;colon -- comment'),
  ('x; DROP TABLE victim; --'), ('x"; DROP TABLE victim; --'), ('$1 $$ dollar'), ('back\slash'),
  ('ünïcödé キュー'), ('schema.qualified'), (repeat('n', 57)), (repeat('é', 28) || 'e');

-- Each name works as a queue table and as a queue: create, start, enqueue, dequeue.
SELECT name,
       try_sql(format('SELECT aq.create_queue_table(%L, %L)', name, 'text')) AS create_table,
       try_sql(format('SELECT aq.create_queue(%L, %L)', name, name)) AS create_queue,
       try_sql(format('SELECT aq.start_queue(%L)', name)) AS start,
       try_sql(format('SELECT aq.enqueue(%L, %L::text)', name, 'hello ' || name)) AS enqueue
  FROM odd_names ORDER BY name COLLATE "C";
SELECT queue_name, (SELECT payload FROM aq.dequeue(queue_name, NULL::text, aq.dequeue_options(wait => '0'))) = 'hello ' || queue_name AS round_trip
  FROM aq.queues WHERE queue_type = 'normal_queue' ORDER BY queue_name COLLATE "C";
-- The queue tables exist under exactly those names, and nothing else was created or run.
SELECT count(*) AS queue_tables, count(*) FILTER (WHERE to_regclass(quote_ident(queue_table)) IS NOT NULL) AS tables_found
  FROM aq.queue_tables;
SELECT count(*) AS victim_rows FROM victim;
SELECT count(*) AS unexpected_tables FROM pg_class
 WHERE relkind = 'r' AND relnamespace = 'public'::regnamespace
   AND relname NOT IN (SELECT queue_table FROM aq.queue_tables) AND relname <> 'victim';

-- Names are limited to 63 bytes (not characters), never silently truncated; empty and NULL fail.
-- Queue table names to 57 bytes, so that their exception queue aq$_<name>_e fits.
SELECT try_sql(format('SELECT aq.create_queue_table(%L, %L)', repeat('n', 64), 'text'));
SELECT try_sql(format('SELECT aq.create_queue_table(%L, %L)', repeat('é', 29), 'text'));
SELECT queue_name, queue_type, octet_length(queue_name) AS bytes FROM aq.queues
 WHERE queue_table_id = (SELECT queue_table_id FROM aq.queue_tables WHERE queue_table = repeat('n', 57));
SELECT try_sql(format('SELECT aq.create_queue(%L, %L)', repeat('é', 32), 'Mixed Case'));
SELECT try_sql($$SELECT aq.create_queue('', 'Mixed Case')$$);
SELECT try_sql($$SELECT aq.create_queue_table('', 'text')$$);
SELECT try_sql(format('SELECT aq.enqueue(%L, %L::text)', repeat('n', 64), 'x'));
SELECT try_sql($$SELECT aq.enqueue('', 'x'::text)$$);
SELECT try_sql($$SELECT aq.create_queue(NULL, 'Mixed Case')$$);

-- Case matters, as for quoted identifiers: 'Mixed Case' and 'mixed case' are two queues.
SELECT queue_name FROM aq.queues WHERE lower(queue_name) = 'mixed case' ORDER BY 1 COLLATE "C";

-- A queue table in another schema.
CREATE SCHEMA "Other Schema";
SELECT aq.create_queue_table('elsewhere', 'text', queue_table_schema => 'Other Schema');
SELECT aq.create_queue('elsewhere_q', 'elsewhere');
SELECT aq.start_queue('elsewhere_q');
SELECT aq.enqueue('elsewhere_q', 'in another schema'::text) > 0 AS enqueued;
SELECT count(*) FROM "Other Schema".elsewhere;
SELECT payload FROM aq.dequeue('elsewhere_q', NULL::text, aq.dequeue_options(wait => '0'));

SELECT aq.drop_queue_table(queue_table, force => true) FROM aq.queue_tables ORDER BY queue_table_id;
SELECT count(*) AS catalog_left FROM aq.queue_tables;
DROP SCHEMA "Other Schema";
DROP TABLE victim;
