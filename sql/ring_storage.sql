-- Ring storage, step 1 (docs/design-horizon-storage.md, section 1): a queue table made with
-- segments => N is the parent of N inheritance children <queue_table>$0 .. $<N-1>, listed in
-- aq.queue_segments, with a switch ledger aq.segment_log.  Rows are written into the segments
-- directly here (the enqueue does not write rings yet).
CREATE SCHEMA "ring s";
SELECT aq.create_queue_table('ring_qt', 'text', segments => 2);
SELECT aq.create_queue_table('Ring Prio', 'text', sort_list => 'priority,enq_time', comment => 'four segments',
                             queue_table_schema => 'ring s', segments => 4);
-- 0 and NULL: classic storage, as before.
SELECT aq.create_queue_table('ring_classic_qt', 'text', segments => 0);
SELECT aq.create_queue_table('ring_null_qt', 'text', segments => NULL);

SELECT queue_table, table_schema, sort_list, segment_count FROM aq.queue_tables
 WHERE queue_table IN ('ring_qt', 'Ring Prio', 'ring_classic_qt', 'ring_null_qt') ORDER BY queue_table;
SELECT t.queue_table, s.segment, s.relid FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id)
 ORDER BY t.queue_table, s.segment;
-- Generation 0 writes segment 0.
SELECT t.queue_table, l.generation, l.segment, l.opened <= now() AS opened FROM aq.segment_log l
  JOIN aq.queue_tables t USING (queue_table_id) ORDER BY t.queue_table, l.generation;

-- The segments are the table's inheritance children, and its only ones.
SELECT i.inhparent::regclass AS parent, i.inhrelid::regclass AS child, i.inhseqno
  FROM pg_inherits i JOIN aq.queue_tables t ON t.relid = i.inhparent
 WHERE t.queue_table IN ('ring_qt', 'Ring Prio', 'ring_classic_qt', 'ring_null_qt') ORDER BY 1, 2;

-- Each segment has the table's columns at the same attnums, with the same types, collations,
-- NOT NULL and storage, and no dropped column (no row here = same shape).
SELECT s.relid AS segment, d.*
  FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id),
       LATERAL (SELECT p.attnum AS parent_attnum, p.attname AS parent_column, c.attnum, c.attname
                  FROM (SELECT * FROM pg_attribute a WHERE a.attrelid = t.relid AND a.attnum > 0) p
                  FULL JOIN (SELECT * FROM pg_attribute a WHERE a.attrelid = s.relid AND a.attnum > 0) c
                    ON c.attnum = p.attnum
                 WHERE (p.attname, p.atttypid, p.atttypmod, p.attcollation, p.attnotnull, p.attstorage, p.attisdropped)
                       IS DISTINCT FROM
                       (c.attname, c.atttypid, c.atttypmod, c.attcollation, c.attnotnull, c.attstorage, c.attisdropped)) d
 ORDER BY 1, 2;
SELECT s.relid AS segment, count(*) AS columns, count(*) FILTER (WHERE a.attisdropped) AS dropped
  FROM aq.queue_segments s JOIN pg_attribute a ON a.attrelid = s.relid AND a.attnum > 0
 GROUP BY s.relid ORDER BY 1;
-- msgid: NOT NULL without a default or identity (aq draws it from the table's identity sequence).
SELECT a.attrelid::regclass AS rel, a.attnotnull, a.atthasdef, a.attidentity = '' AS no_identity
  FROM pg_attribute a WHERE a.attname = 'msgid'
   AND a.attrelid IN ('ring_qt'::regclass, 'ring_qt$0'::regclass, 'ring_qt$1'::regclass) ORDER BY 1;
-- The defaults of the other columns come along.
SELECT a.attname, pg_get_expr(d.adbin, d.adrelid) AS default_value
  FROM pg_attribute a JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
 WHERE a.attrelid = '"ring s"."Ring Prio$3"'::regclass ORDER BY a.attnum;

-- Owner, grants, options and comments: the table's owner, no grants of their own, the table's
-- autovacuum settings.
SELECT c.oid::regclass AS rel, pg_get_userbyid(c.relowner) = current_user AS same_owner, c.relacl,
       c.relkind, c.relpersistence, c.reloptions, obj_description(c.oid, 'pg_class') AS comment
  FROM pg_class c
 WHERE c.oid IN (SELECT relid FROM aq.queue_tables WHERE segment_count > 0 UNION ALL SELECT relid FROM aq.queue_segments)
 ORDER BY 1;

-- Each segment's indexes: its primary key and the table's indexes, with the same keys,
-- collations and predicates.
SELECT i.indrelid::regclass AS segment, i.indexrelid::regclass AS index, i.indisprimary, i.indisunique,
       regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', '') AS definition
  FROM pg_index i WHERE i.indrelid IN ('ring_qt$0'::regclass, '"ring s"."Ring Prio$0"'::regclass)
 ORDER BY 1, 5;
-- and every segment has exactly its table's (no row here = the same).
WITH defs AS (
    SELECT t.queue_table_id, r.relid, r.is_parent, i.indisprimary, i.indisunique,
           regexp_replace(pg_get_indexdef(i.indexrelid), '^.* USING ', '') AS definition
      FROM aq.queue_tables t
     CROSS JOIN LATERAL (SELECT t.relid, true AS is_parent UNION ALL
                         SELECT s.relid, false FROM aq.queue_segments s WHERE s.queue_table_id = t.queue_table_id) r
      JOIN pg_index i ON i.indrelid = r.relid
     WHERE t.segment_count > 0)
SELECT s.relid AS segment, d.*
  FROM aq.queue_segments s,
       LATERAL (SELECT coalesce(p.definition, c.definition) AS definition, p.definition IS NULL AS only_in_segment
                  FROM (SELECT * FROM defs WHERE is_parent AND queue_table_id = s.queue_table_id) p
                  FULL JOIN (SELECT * FROM defs WHERE relid = s.relid) c
                    ON (c.definition, c.indisprimary, c.indisunique) = (p.definition, p.indisprimary, p.indisunique)
                 WHERE p.definition IS NULL OR c.definition IS NULL) d;
SELECT i.indrelid::regclass AS rel, count(*) AS indexes FROM pg_index i
 WHERE i.indrelid IN (SELECT relid FROM aq.queue_tables WHERE segment_count > 0 UNION ALL SELECT relid FROM aq.queue_segments)
 GROUP BY i.indrelid ORDER BY 1;

-- Arguments: 1, 17 and -1 segments.
SELECT try_sql($$SELECT aq.create_queue_table('ring_bad_qt', 'text', segments => 1)$$);
SELECT try_sql($$SELECT aq.create_queue_table('ring_bad_qt', 'text', segments => 17)$$);
SELECT try_sql($$SELECT aq.create_queue_table('ring_bad_qt', 'text', segments => -1)$$);
-- A grouped ring: every segment has the group order's index too.
SELECT aq.create_queue_table('ring_grouped_qt', 'text', message_grouping => 'transactional', segments => 2);
SELECT s.segment, pg_get_indexdef(i.indexrelid) LIKE '%(q_id, transaction_group, enq_time, msgid)%' AS group_index
  FROM aq.queue_segments s JOIN aq.queue_tables t USING (queue_table_id) JOIN pg_index i ON i.indrelid = s.relid
 WHERE t.queue_table = 'ring_grouped_qt' AND pg_get_indexdef(i.indexrelid) LIKE '%transaction_group%' ORDER BY 1;
SELECT aq.drop_queue_table('ring_grouped_qt');
SELECT count(*) AS left_behind FROM pg_class WHERE relname LIKE 'ring\_bad%';
-- A name taken by another table: nothing is made.
CREATE TABLE "ring_taken_qt$1" (x integer);
SELECT try_sql($$SELECT aq.create_queue_table('ring_taken_qt', 'text', segments => 2)$$);
SELECT count(*) AS left_behind FROM pg_class WHERE relname LIKE 'ring\_taken\_qt%';
SELECT count(*) AS catalog_rows FROM aq.queue_tables WHERE queue_table IN ('ring_bad_qt', 'ring_taken_qt');
DROP TABLE "ring_taken_qt$1";
-- A name a multi-consumer ring's receipts would take: nothing is made either.
CREATE TABLE "ring_taken_qt$1_r" (x integer);
SELECT try_sql($$SELECT aq.create_queue_table('ring_taken_qt', 'text', multiple_consumers => true, segments => 2)$$);
SELECT count(*) AS left_behind FROM pg_class WHERE relname LIKE 'ring\_taken\_qt%' AND relname <> 'ring_taken_qt$1_r';
SELECT count(*) AS catalog_rows FROM aq.queue_tables WHERE queue_table = 'ring_taken_qt';
DROP TABLE "ring_taken_qt$1_r";

-- Messages written into the segments: the AQ$ view, aq.queue_health and aq.consumer_info see them.
SELECT aq.create_queue('ring_q', 'ring_qt');
SELECT aq.create_queue('ring_q2', 'ring_qt');
CREATE FUNCTION ring_msgid() RETURNS bigint LANGUAGE sql AS $$ SELECT nextval(pg_get_serial_sequence('ring_qt', 'msgid')) $$;
INSERT INTO "ring_qt$0" (msgid, q_id, enq_time, user_data)
SELECT ring_msgid(), queue_id, now() - interval '1 minute', 'first' FROM aq.queues WHERE queue_name = 'ring_q';
INSERT INTO "ring_qt$0" (msgid, q_id, enq_time, delay, user_data)
SELECT ring_msgid(), queue_id, now(), now() + interval '1 hour', 'later' FROM aq.queues WHERE queue_name = 'ring_q';
INSERT INTO "ring_qt$1" (msgid, q_id, enq_time, corrid, user_data)
SELECT ring_msgid(), queue_id, now(), 'c1', 'second' FROM aq.queues WHERE queue_name = 'ring_q';
INSERT INTO "ring_qt$1" (msgid, q_id, enq_time, user_data)
SELECT ring_msgid(), queue_id, now(), 'other queue' FROM aq.queues WHERE queue_name = 'ring_q2';
SELECT tableoid::regclass AS stored_in, user_data FROM ring_qt ORDER BY msgid;
SELECT queue, msg_state, corr_id, msg_priority, retry_count, enq_user_id = current_user AS by_me, user_data
  FROM "aq$ring_qt" ORDER BY msg_id;
SELECT pg_stat_force_next_flush();
SELECT queue, consumer_name, ready, waiting, expired, oldest_ready_enq_time < now() AS has_oldest,
       table_bytes = (SELECT sum(pg_table_size(r)) FROM unnest(ARRAY['ring_qt'::regclass, 'ring_qt$0', 'ring_qt$1']) r)
           AS table_bytes_summed,
       index_bytes = (SELECT sum(pg_indexes_size(r)) FROM unnest(ARRAY['ring_qt'::regclass, 'ring_qt$0', 'ring_qt$1']) r)
           AS index_bytes_summed,
       table_bytes > pg_table_size('ring_qt') AS more_than_table, live_rows, dead_rows
  FROM aq.queue_health WHERE queue_table = 'ring_qt' ORDER BY queue;
SELECT queue, consumer, waiting, ready, oldest_enq_time < now() AS has_oldest, unsettled FROM aq.consumer_info()
 WHERE queue IN ('ring_q', 'ring_q2') ORDER BY queue;

-- Switches: a segment is switched to only while it is empty on disk (it is never truncated yet).
-- ring_qt's segment 1 has rows.
SELECT try_sql($$SELECT aq._switch_segment('ring_qt')$$);
SELECT aq._switch_segment('Ring Prio');
SELECT aq._switch_segment('Ring Prio');
-- The switch holds the advisory lock (24945, queue_table_id) until its transaction ends.
BEGIN;
SELECT aq._switch_segment('Ring Prio');
SELECT l.classid, l.objid = t.queue_table_id AS queue_table_id, l.objsubid, l.mode, l.granted
  FROM pg_locks l, aq.queue_tables t
 WHERE l.locktype = 'advisory' AND l.pid = pg_backend_pid() AND t.queue_table = 'Ring Prio';
COMMIT;
SELECT count(*) AS advisory_locks FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid();
-- Segment 0 has a row: the ring is full.
INSERT INTO "ring s"."Ring Prio$0" (msgid, q_id, enq_time, user_data)
SELECT nextval(pg_get_serial_sequence('"ring s"."Ring Prio"', 'msgid')), queue_id, now(), 'x'
  FROM aq.queues WHERE queue_name = 'aq$_Ring Prio_e';
SELECT try_sql($$SELECT aq._switch_segment('Ring Prio')$$);
SELECT t.queue_table, l.generation, l.segment FROM aq.segment_log l JOIN aq.queue_tables t USING (queue_table_id)
 ORDER BY t.queue_table, l.generation;
-- aq.ring_segments, a row per segment: Ring Prio is at generation 3 (segment 3 current), its
-- segments 1 and 2 are empty and segment 0, the next one, has a row, so the ring cannot switch
-- until it is truncated; ring_qt is at generation 0 and its segment 1, next, has rows.
SELECT pg_stat_force_next_flush();
SELECT queue_table, segment, relid, state, generation, opened <= now() AS opened, bytes > 0 AS has_pages,
       total_bytes > bytes AS has_more, live_rows, dead_rows, next_switch_blocked
  FROM aq.ring_segments WHERE queue_table IN ('ring_qt', 'Ring Prio');
-- aq.queue_health: the storage, and of a ring its segments, current segment and generation.
SELECT queue_table, queue, storage, segments, current_segment, generation FROM aq.queue_health
 WHERE queue_table IN ('ring_qt', 'Ring Prio', 'ring_classic_qt', 'ring_null_qt') ORDER BY queue_table, queue;
-- A segment dropped by hand: its row stays, with NULL sizes and no state (unless current).
BEGIN;
DROP TABLE "ring s"."Ring Prio$2", "ring s"."Ring Prio$3";
SELECT segment, state, generation, bytes IS NULL AS no_bytes, total_bytes IS NULL AS no_total_bytes, live_rows,
       next_switch_blocked
  FROM aq.ring_segments WHERE queue_table = 'Ring Prio';
ROLLBACK;
-- A classic queue table, an unknown one, a non-owner.
SELECT try_sql($$SELECT aq._switch_segment('ring_classic_qt')$$);
SELECT try_sql($$SELECT aq._switch_segment('ring_no_such_qt')$$);
CREATE ROLE regress_ring_other;
SELECT has_function_privilege('regress_ring_other', 'aq._switch_segment(text)', 'EXECUTE') AS public_may_switch;
GRANT EXECUTE ON FUNCTION aq._switch_segment(text) TO regress_ring_other;
SET ROLE regress_ring_other;
SELECT split_part(try_sql($$SELECT aq._switch_segment('ring_qt')$$), ' (', 1) AS not_owner;
-- The catalog rows are read by everyone; written by no one else.
SELECT count(*) AS segments_seen FROM aq.queue_segments;
SELECT count(*) AS ring_segments_seen, count(*) FILTER (WHERE bytes > 0) AS with_pages FROM aq.ring_segments
 WHERE queue_table IN ('ring_qt', 'Ring Prio');
SELECT try_sql($$INSERT INTO aq.segment_log (queue_table_id, generation, segment)
                 SELECT queue_table_id, 99, 1 FROM aq.queue_tables WHERE queue_table = 'ring_qt'$$);
SELECT try_sql($$SELECT * FROM "ring_qt$0"$$);
RESET ROLE;
REVOKE EXECUTE ON FUNCTION aq._switch_segment(text) FROM regress_ring_other;
DROP ROLE regress_ring_other;

-- Purge: the messages in the segments go too.
SELECT aq.purge_queue_table('ring_qt', aq.purge_condition(msg_state => 'WAITING')) AS purged_waiting;
SELECT aq.purge_queue_table('ring_qt', aq.purge_condition(queue_name => 'ring_q')) AS purged_ring_q;
SELECT queue, user_data FROM "aq$ring_qt" ORDER BY msg_id;
-- Segment 1 has no message of ring_q left, but its pages stay (no truncation yet): still no switch.
SELECT try_sql($$SELECT aq._switch_segment('ring_qt')$$);
SELECT segment, state, bytes > 0 AS has_pages, next_switch_blocked FROM aq.ring_segments WHERE queue_table = 'ring_qt';
-- drop_queue takes its messages out of the segments.
SELECT aq.drop_queue('ring_q2');
SELECT count(*) AS messages FROM ring_qt;
-- A classic queue table still leaves a table inheriting from it alone.
CREATE TABLE ring_classic_child () INHERITS (ring_classic_qt);
INSERT INTO ring_classic_child (msgid, q_id, enq_time, user_data) VALUES (1, 0, now(), 'not a message');
SELECT aq.purge_queue_table('ring_classic_qt') AS purged_classic;
SELECT count(*) AS child_rows FROM ring_classic_child;
SELECT queue, ready, waiting, live_rows, storage, segments, current_segment, generation
  FROM aq.queue_health WHERE queue_table = 'ring_classic_qt';
DROP TABLE ring_classic_child;

-- Dropping a ring queue table drops its segments and their catalog rows.
SELECT aq.drop_queue_table('ring_qt', force => true);
SELECT aq.drop_queue_table('Ring Prio');
SELECT aq.drop_queue_table('ring_classic_qt');
SELECT aq.drop_queue_table('ring_null_qt');
SELECT c.relname FROM pg_class c
 WHERE (c.relname LIKE 'ring%' OR c.relname LIKE 'Ring%' OR c.relname LIKE 'aq$%ring%') AND c.relnamespace <> 'aq'::regnamespace
 ORDER BY 1;
SELECT (SELECT count(*) FROM aq.queue_segments) AS segments, (SELECT count(*) FROM aq.segment_log) AS ledger,
       (SELECT count(*) FROM aq.queue_tables WHERE queue_table ILIKE 'ring%') AS queue_tables;
DROP FUNCTION ring_msgid();
DROP SCHEMA "ring s";
SELECT count(*) AS ring_segments_left FROM aq.ring_segments;
