// Multi-consumer queue tables: who receives a message, and when it is gone.
//
// Protocol.  A multi-consumer queue table keeps each message once, in the queue table, and one
// delivery row per recipient in its delivery table (aq$_<queue_table>_i): the message's id, the
// consumer's name, and the columns a dequeue orders, filters and retries by (q_id, priority,
// enq_time, delay, expiration, retry_count, exception_queue), copied from the message.
//  1. Fan-out.  After an enqueue has inserted its messages, deliver() writes their delivery rows
//     in the same transaction, as the queue table's owner would: the enqueuer needs no privilege
//     on the delivery table.  A message with a recipient_list goes to exactly those consumers
//     (each once); any other message to every subscriber of the queue (aq.subscribers) whose
//     rule it matches.  The rows for subscribers without a rule and for recipient lists go in by
//     multi-insert (base/multi_insert.hpp; consumer by consumer, so each consumer's index entries
//     go in together) when the enqueue itself went in that way and the delivery table is as aq
//     made it; otherwise by statements run as the owner (base/run_as.hpp).  A rule is a
//     condition over the message (condition.hpp), prepared once per rule text and evaluated by a
//     statement as the owner with search_path pinned, as it was checked when the subscriber was
//     added.  A message that would reach nobody is an error (Oracle's ORA-24033), so the enqueue
//     fails as a whole.  Subscribers added later do not receive messages enqueued before.  The
//     delivery table is locked (ROW EXCLUSIVE) before the subscribers are read, so that
//     remove_subscriber (SHARE) waits for the enqueues that may have read the subscriber and then
//     removes what they wrote for it: no delivery is left for a consumer nobody is.  Last,
//     before the commit, the scan floor of every consumer the rows may be for is lowered
//     (scan_floor.hpp).
//  2. Consumption.  A dequeue with consumer_name claims that consumer's delivery rows exactly as a
//     single-consumer dequeue claims messages (queue_store.hpp): FOR UPDATE SKIP LOCKED, the row's
//     xmax is the claim, so concurrent sessions of one consumer never take the same message and
//     each consumer has its own attempts, retry delay and move to an exception queue
//     (retries.hpp, settler.hpp: the delivery table has the columns those statements update).
//     The bulk path (bulk_dequeue.hpp) starts at the consumer's scan floor.
//  3. Removal.  The delivery table's one index is each consumer's order, (q_id, consumer_name,
//     [priority,] enq_time, msgid).  After a remove dequeue, sweep() finds the first delivery row
//     of the queue its snapshot sees (the first of each consumer's, the consumers found by one
//     index descent each; per priority in a priority-ordered table) and
//     deletes, as the caller, the queue's messages before it in that order (at most 10,000 a
//     call, skipping rows another sweep is deleting).  Every delivery of such a message is
//     invisible, so deleted by a committed transaction (or by this one): an enqueue writes a
//     message and its deliveries together, so a message that this snapshot sees has all of its
//     deliveries seen unless they are gone, and a claim not yet committed still shows the row.
//     It runs on the indexes (bulk_sweep): the consumers are the keys of the index entries after
//     each name (live or dead), each one's first delivery is looked up from its scan floor, and
//     the messages from the queue's floor, which the sweep raises (in priority order: each
//     priority's messages from a floor of their own, scan_floor::PriorityKey, which the fan-out
//     lowers for each priority it enqueues); a row another transaction deleted is passed in every isolation
//     level.  A table the bulk path refuses (triggers, privileges) is swept by a statement.  In
//     priority order a sweep covers the priorities the dequeue took, and every priority at a
//     session's first sweep of the queue and then at most once a second.
//     A transaction's later sweeps of the queue start where its last one stopped (the rows it
//     removed stay in its snapshot's way until it ends, and would be walked again); the messages
//     from there to the next delivery row are gone for the same reason, and what committed
//     meanwhile before that point is left to the next transaction's sweep.  A sweep is skipped
//     while this backend knows that no message can have lost its last delivery: since its last
//     sweep of the queue (under a second ago) every removal committed was its own, and some
//     consumer's first delivery is still at the point that sweep found (see Knowledge in
//     sweep.cpp).  So a message goes with the last of its deliveries (or at a later sweep),
//     and storage is bounded by the slowest consumer's backlog.  A sweep that finds the first
//     delivery contended, and every sweep of a SERIALIZABLE transaction (whose reads of other
//     consumers' deliveries would make SERIALIZABLE consumers fail each other with 40001), is
//     left to the settler: at commit the queue is owed a sweep, which the settler runs as the
//     owner in a READ COMMITTED transaction of its own (settler.hpp).
//  4. Exception queues.  When a delivery moves to an exception queue (it expired, or its
//     attempts ran out: maintenance.cpp, settler.cpp), it takes its message with it: the row
//     gets the message's correlation, enqueuing user and payload, and is dequeued from the
//     exception queue on its own.  So an exception queue that nobody reads never holds back the
//     removal of its queue's messages, and a message keeps its id there.
//
// The room's files: fanout.cpp (1: deliver, and what the enqueue and the subscriber functions use),
// sweep.cpp (3: sweep, at_commit), deliveries_statements.{hpp,cpp} (the statements both use), and
// the C walks of 2 and 3 (delivery_walk.cpp, sweep_walk.cpp: bulk_dequeue.hpp, index_walk.hpp).
//
// PostgreSQL-side code: call inside base::call, with an SPI connection.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
#include "utils/array.h"
#include "utils/relcache.h"
}

namespace aq::queue::deliveries {

// The tables of one multi-consumer queue table, as a lookup found them.
struct Tables {
    Oid relid;  // the queue table (the messages)
    Oid payload_type;
    Oid owner;
    int32 queue_id;
    bool priority_order;
    const char* queue_name;
    const char* messages;    // qualified names
    const char* deliveries;
    Oid delivery_relid;
};

// The columns of a delivery table, in the order aq.create_queue_table creates them.
enum DeliveryColumn {
    dcol_msgid,
    dcol_consumer_name,
    dcol_q_id,
    dcol_priority,
    dcol_enq_time,
    dcol_delay,
    dcol_expiration,
    dcol_retry_count,
    dcol_exception_queue,
    dcol_corrid,
    dcol_enq_uid,
    dcol_user_data,
    delivery_column_count
};

// The delivery table still has exactly those columns (user_data of this payload type).
bool has_delivery_shape(Relation rel, Oid payload_type);

// What a delivery row copies from its message, as the enqueue wrote it (delay and expiration
// are the times the message becomes visible and expires; exception_queue 0: NULL).
struct Message {
    int32 priority;
    TimestampTz enq_time;
    bool has_delay;
    TimestampTz delay;
    bool has_expiration;
    TimestampTz expiration;
    Datum exception_queue;
};

// After an enqueue inserted the messages ids[0 .. count): their delivery rows.  properties is
// the enqueue's aq.message_properties[] (nullptr: defaults), read for recipient_list.  With
// messages (what the enqueue wrote, per id), the rows for subscribers without a rule and for
// recipient lists go in by multi-insert (base/multi_insert.hpp) when the delivery table allows
// it; otherwise, and for rules, by statements that read the messages back.
// enq_time: the messages' (the scan floors of their consumers are lowered to it, scan_floor.hpp).
void deliver(const Tables& t, const Datum* ids, int count, ArrayType* properties, const Message* messages,
             TimestampTz enq_time);

// The consumer names (text) of a message's recipient_list (an aq.agent[]), each once, in the order
// of their first appearance, palloc'd; false when the list is NULL or empty.  The list's errors:
// 2202E (dimensions), 54000 (more than recipients::max_names), 0A000 (an address), 22004, 42602.
bool recipients_of(HeapTupleHeader properties, Datum** names, int* count);

// The last delivery a remove dequeue took, in the queue's order.
struct Taken {
    const char* consumer;
    TimestampTz enq_time;
    int64 msgid;
};

// After a remove dequeue deleted delivery rows of the given priorities (of a priority-ordered
// queue table; count -1: of any), up to `taken`: removes the queue's messages that no delivery
// is left for.  taken nullptr: the dequeue found nothing; the sweep then runs only if what this
// backend knows of the queue no longer holds.
// forced: every priority from the head, whatever this backend knows (the settler's sweeps).
// A sweep whose first delivery is being taken by another running transaction (two recipients
// taking a message's last deliveries at once: each one's sweep sees the other's row) leaves the
// message; its transaction's commit asks the settler for a sweep of the queue (at_commit), which
// the settler repeats, once a second, until no sweep is contended: a queue nobody dequeues from
// any more still ends empty.
void sweep(const Tables& t, const int32* priorities, int count, const Taken* taken, bool forced = false);

// Transaction ends (module.cpp): at commit the contended sweeps go to the settler; at an abort or
// a PREPARE they are forgotten.  Never raise.
void at_commit();
void at_abort();

// The SET items of an UPDATE of delivery rows (alias) that move them to an exception queue: the
// row takes its message's correlation, enqueuing user and payload from the queue table
// messages, when moving (an SQL condition; nullptr: always).
char* keep_message_sql(const char* messages, const char* alias, const char* moving = nullptr);

// Whether this database's aq objects have multi-consumer queue tables (those of 0.6.0 or later:
// the library may be newer than them until ALTER EXTENSION aq UPDATE).
bool available();

// A subscriber's rule, checked against the queue table relid (condition.hpp's errors).
void check_rule(Oid relid, const char* rule);

}  // namespace aq::queue::deliveries
