-- Health at a glance: aq.queue_health (a queue's backlog, its table's size, rows and vacuum, the
-- oldest xmin holding the database back) and aq.xmin_holders (who holds it).
SELECT aq.create_queue_table('health_qt', 'text');
SELECT aq.create_queue('health_q', 'health_qt');
SELECT aq.start_queue('health_q');
SELECT count(aq.enqueue('health_q', m)) AS enqueued FROM unnest(ARRAY['a', 'b', 'c']) m;
SELECT aq.enqueue('health_q', 'later'::text, aq.message_properties(delay => '1 hour')) > 0 AS delayed;
SELECT aq.enqueue('health_q', 'gone'::text, aq.message_properties(expiration => '0 s')) > 0 AS expires_at_once;
-- Three ready, one waiting, one expired (not moved yet); the exception queue is empty.
SELECT queue, consumer_name, ready, waiting, expired, oldest_ready_enq_time <= now() AS has_oldest,
       oldest_ready_age >= '0' AS has_age, table_bytes > 0 AS table_size, index_bytes > 0 AS index_size,
       delivery_table_bytes IS NULL AS no_deliveries, oldest_xmin_age IS NULL OR oldest_xmin_age >= 0 AS xmin_age
  FROM aq.queue_health WHERE queue_table = 'health_qt';
-- Dead rows show after a dequeue, once the statistics are flushed.
SELECT count(*) AS taken FROM aq.dequeue_array('health_q', NULL::text, 2, aq.dequeue_options(wait => 0));
SELECT pg_stat_force_next_flush();
SELECT queue, ready, waiting, live_rows IS NOT NULL AS has_live_rows, dead_rows >= 2 AS has_dead_rows
  FROM aq.queue_health WHERE queue_table = 'health_qt' AND queue = 'health_q';

-- A prepared transaction holds the horizon until it ends: aq.xmin_holders names it.
BEGIN;
SELECT txid_current() > 0 AS has_xid;
PREPARE TRANSACTION 'aq_health';
SELECT kind, gid, role = current_user AS mine, database = current_database() AS this_database,
       xid IS NOT NULL AS has_xid, xmin_age >= 0 AS has_age, since <= now() AS has_since, holds_database
  FROM aq.xmin_holders WHERE kind = 'prepared transaction';
-- It is the oldest holder of this database (nothing else runs here), and aq.queue_health shows its age.
SELECT (SELECT gid FROM aq.xmin_holders WHERE holds_database LIMIT 1) AS oldest,
       (SELECT DISTINCT oldest_xmin_age FROM aq.queue_health WHERE queue_table = 'health_qt')
     = (SELECT xmin_age FROM aq.xmin_holders WHERE gid = 'aq_health') AS same_age;
ROLLBACK PREPARED 'aq_health';
SELECT count(*) AS prepared FROM aq.xmin_holders WHERE kind = 'prepared transaction';

-- A multi-consumer queue table: a row per queue and subscriber; a recipient named in a message
-- that is no subscriber gets its row too.
SELECT aq.create_queue_table('health_multi_qt', 'text', multiple_consumers => true);
SELECT aq.create_queue('health_multi_q', 'health_multi_qt');
SELECT aq.start_queue('health_multi_q');
SELECT aq.add_subscriber('health_multi_q', aq.agent(s)) FROM unnest(ARRAY['fast', 'slow']) s;
SELECT count(aq.enqueue('health_multi_q', m)) AS enqueued FROM unnest(ARRAY['m1', 'm2']) m;
SELECT aq.enqueue('health_multi_q', 'm3'::text, aq.message_properties(delay => '1 hour')) > 0 AS delayed;
SELECT aq.enqueue('health_multi_q', 'm4'::text,
                  aq.message_properties(recipient_list => ARRAY[aq.agent('other')])) > 0 AS to_other;
SELECT count(*) AS taken FROM aq.dequeue_array('health_multi_q', NULL::text, 10, aq.dequeue_options(consumer_name => 'fast', wait => 0));
SELECT queue, consumer_name, ready, waiting, expired, (oldest_ready_enq_time IS NOT NULL) = (ready > 0) AS oldest_if_ready,
       table_bytes > 0 AS table_size, delivery_table_bytes > 0 AS delivery_size, delivery_index_bytes > 0 AS delivery_index_size
  FROM aq.queue_health WHERE queue_table = 'health_multi_qt';

-- A role without privileges on the queue tables reads the views without an error: the queues
-- are listed, their counts are NULL and the subscribers it may not see are left out.
CREATE ROLE regress_health_nobody;
SET ROLE regress_health_nobody;
SELECT queue_table, queue, consumer_name, ready, waiting, expired, table_bytes > 0 AS table_size
  FROM aq.queue_health WHERE queue_table LIKE 'health%';
SELECT count(*) >= 0 AS readable FROM aq.xmin_holders;
RESET ROLE;
-- Granted DEQUEUE on the single-consumer queue, it counts that one.
SELECT aq.grant_queue_privilege('DEQUEUE', 'health_q', 'regress_health_nobody');
SET ROLE regress_health_nobody;
SELECT queue_table, queue, ready, waiting, expired FROM aq.queue_health WHERE queue_table LIKE 'health%';
RESET ROLE;
SELECT aq.revoke_queue_privilege('DEQUEUE', 'health_q', 'regress_health_nobody');
DROP ROLE regress_health_nobody;
SELECT aq.drop_queue_table('health_qt', force => true);
SELECT aq.drop_queue_table('health_multi_qt', force => true);
SELECT count(*) AS left_behind FROM aq.queue_health WHERE queue_table LIKE 'health%';
