// Bulk dequeue: a remove-dequeue done on the order index and the heap directly.
//
// The requests of the four C index walks: bulk_dequeue (bulk_dequeue.cpp), bulk_dequeue_group and
// next_group (group_walk.cpp), bulk_dequeue_deliveries (delivery_walk.cpp), bulk_sweep
// (sweep_walk.cpp).  The protocol every walk keeps, and the mechanism they share: index_walk.hpp.
//
// Protocol.  For DEQUEUE_ARRAY/DEQUEUE in remove mode, without msgid or correlation, on a
// normal queue.  The queue table is opened with RowExclusiveLock and checked as for a
// bulk enqueue (bulk_enqueue.hpp: aq's columns, no triggers, no rules, no row-level
// security) and its order index must be aq's ((q_id, enq_time, msgid) or
// (q_id, priority, enq_time, msgid), btree, ascending, default operator classes); the
// caller needs USAGE on the schema and SELECT and DELETE on the table.  Otherwise
// nothing is done and -1 is returned: the caller runs the equivalent statement.
// Otherwise, with a fresh snapshot (after CommandCounterIncrement, as a new statement):
//   - the order index is scanned forward for the queue, from its scan floor
//     (scan_floor.hpp; NEXT_MESSAGE, in either order) or from the head (FIRST_MESSAGE), or
//     from the transaction's navigation position;
//   - each visible message that is ready (no delay ahead, not expired) is deleted with
//     table_tuple_delete(wait = false): a message another transaction is deleting or
//     holds locked is skipped, as FOR UPDATE SKIP LOCKED would; one this transaction
//     locked (locked mode) is deleted.  A message updated since the snapshot (its
//     attempts written, or moved to an exception queue) is skipped too: its new version
//     is for the next dequeue (the statement would follow the update, or in REPEATABLE
//     READ fail with 40001);
//   - a message whose row version holds a dequeue attempt not counted yet (its xmax is
//     the claim of a transaction that did not commit: retries.hpp) is skipped and the
//     settler hinted: deleting it would overwrite that record;
//   - each deleted message goes to the sink in index order, so one heap delete (one WAL
//     record) per message instead of the row lock plus delete of SELECT ... FOR UPDATE
//     SKIP LOCKED and DELETE, and no executor;
//   - the scan also computes the queue's new scan floor and raises it.
// All of it is in the caller's transaction: a rollback brings the messages back.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

#include "queue/ring.hpp"

namespace aq::queue {

struct BulkDequeuedMessage {
    Datum msgid;
    Datum payload;     // points into the table's buffer or its TOAST: copy it in the sink
    Datum properties;  // aq.message_properties, valid during the sink call
    int32 priority;
    TimestampTz enq_time;
    ItemPointerData tid;  // the deleted row version (the claim, retries.hpp)
    Oid relid;            // the table it was deleted from (a segment of a ring: ring.hpp)
};

using BulkDequeueSink = void (*)(void* context, const BulkDequeuedMessage& message);

struct BulkDequeuePosition {  // NEXT_MESSAGE: only messages after this one
    int32 priority;
    TimestampTz enq_time;
    int64 msgid;
};

struct BulkDequeue {
    Oid relid;
    const ring::Segments* segments;  // the queue table's ring (ring.hpp; count 0: classic)
    Oid payload_type;
    int32 queue_id;
    bool priority_order;
    int max_messages;
    bool from_head;                    // FIRST_MESSAGE: ignore the scan floor
    const BulkDequeuePosition* after;  // or nullptr
    BulkDequeueSink sink;
    void* sink_context;
};

// Returns the number of messages removed, or -1 when the table is not eligible (nothing
// done).  May raise PostgreSQL errors: call it inside base::call.
int bulk_dequeue(const BulkDequeue& request);

// The messages of one transaction group of a grouped queue table (groups.hpp), the caller
// holding the group's lock: the same claims as bulk_dequeue, on the index (q_id,
// transaction_group, enq_time, msgid), without a scan floor; each message's properties carry the
// group and whether it is the last of it (no later row of the group, taken or not, is visible).
// -1 when the statement must do it.
int bulk_dequeue_group(const BulkDequeue& request, int64 group);

// The first transaction group after `after` that has a message ready now (visible, not delayed,
// not expired), on the same index: 1 and *group, 0 if none, -1 when the statement must do it.
// From the head (after INT64_MIN) the search starts at the groups' scan floor unless from_head
// (as FIRST_MESSAGE and a dequeue once a second do for the ungrouped order: rows written into
// the table without aq.enqueue never lower a floor).
struct GroupSearch {
    Oid relid;
    const ring::Segments* segments;  // the queue table's ring (count 0: classic)
    Oid payload_type;
    int32 queue_id;
    int64 after;
    bool from_head;
};
int next_group(const GroupSearch& search, int64* group);

// The same for one consumer of a multi-consumer queue (deliveries.hpp): its delivery rows on
// the delivery table's index (q_id, consumer_name, [priority,] enq_time, msgid), each message
// read by the queue table's primary key before its delivery row is deleted (a delivery whose
// message is not there is left alone).  No scan floor: the dequeue starts from the head or its
// position.  Eligible as above, the delivery table with the columns create_queue_table gives it,
// and the caller holding DELETE and SELECT on it and SELECT on the queue table (table grants,
// as DEQUEUE gives them).  The sink gets the delivery row's TID (the claim).
struct BulkDeliveryDequeue {
    Oid delivery_relid;
    Oid message_relid;
    Oid payload_type;
    int32 queue_id;
    const char* consumer;
    bool priority_order;
    int max_messages;
    bool from_head;                    // as in BulkDequeue: ignore the consumer's scan floor
    const BulkDequeuePosition* after;  // or nullptr
    BulkDequeueSink sink;
    void* sink_context;
};
int bulk_dequeue_deliveries(const BulkDeliveryDequeue& request);

// The removal sweep of a multi-consumer queue (deliveries.hpp) on the indexes, of the whole queue
// (enq_time order) or of one priority (priority order).  After the snapshot is taken: the
// consumers with delivery rows, one index descent each (an entry's key is enough, dead or not);
// each one's first visible delivery, from its scan floor (or `from`); the first of those; and the
// queue's messages before it, from the queue's scan floor (or `from`) on, deleted SKIP LOCKED's
// way (a row another transaction deleted or holds is passed, in every isolation level), at most
// `limit`.  In enq_time order the queue's floor is read before the snapshot and raised past what
// is surely dead (scan_floor.hpp); the consumers' floors are only read, after the snapshot (a
// delivery this snapshot sees is never surely dead, so it is at or above its consumer's floor).
// With the privileges of the equivalent statement (DELETE and SELECT on the queue table, SELECT
// on the delivery table); -1 when the tables or the caller's privileges need the statement.
struct SweepFirst {  // a consumer's first delivery
    char name[NAMEDATALEN];
    TimestampTz enq_time;
    int64 msgid;
};
struct BulkSweep {
    Oid delivery_relid;
    Oid message_relid;
    Oid payload_type;
    int32 queue_id;
    bool priority_order;  // a priority-ordered queue table: the messages and deliveries of `priority`
    int32 priority;
    bool resumed;  // from (from_enq_time, from_msgid), as the transaction's last sweep stopped
    TimestampTz from_enq_time;
    int64 from_msgid;
    int limit;
    SweepFirst* firsts;  // room for max_firsts; more consumers: firsts_overflow
    int max_firsts;
    // results
    int nfirsts;
    bool firsts_overflow;
    bool found_first;
    TimestampTz first_enq_time;
    int64 first_msgid;
    bool first_contended;  // every delivery row at the first position is being deleted by a transaction
                           // still running: once it commits, a sweep may remove what this one kept
    TimestampTz last_enq_time;  // the last message removed
    int64 last_msgid;
};
int bulk_sweep(BulkSweep& request);

}  // namespace aq::queue
