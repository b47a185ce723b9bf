// Retention (Oracle's RETENTION_TIME): a queue whose retention_time is more than 0 keeps each
// message its dequeues remove, as PROCESSED, for that long after the dequeue; then it goes.
//
// Protocol
//  1. The copy.  A remove dequeue (remove or remove_nodata mode, every path: the walks and the
//     statements) from such a queue of a single-consumer queue table claims the message as any
//     dequeue does (index_walk.hpp 5, retries.hpp 1: the row is deleted).  Once the claims of
//     the dequeue are made, the removed row versions it noted (note) are copied, in the same
//     transaction, into the queue table (a ring's: its current segment, ring.hpp R1) with
//       q_id       = minus the queue's id (a retained message of queue n has q_id -n),
//       delay      = when it was dequeued,
//       expiration = that time plus the queue's retention_time: when it goes,
//     every other column (msgid, enq_time, priority, corrid, retry_count, exception_queue,
//     enq_uid, user_data, transaction_group) unchanged.  So the copy commits with the dequeue
//     or not at all: a rolled-back dequeue leaves its message where it was (an attempt, retries.hpp
//     2) and no copy.  A payload stored out of line is copied into the target's own TOAST table.
//  2. Out of every walk's way.  A queue's walks, statements, floors, groups, browse, LISTEN and
//     expiry read only its own q_id (and its exception queues') in their indexes, never a negative
//     one: a retained copy is never delivered, browsed, expired, settled or counted in the
//     backlog (aq.queue_health), and costs the dequeue path nothing.  The queue table's view
//     aq$<queue_table> shows it with msg_state PROCESSED and deq_timestamp;
//     aq.purge_queue_table takes msg_state => 'PROCESSED'.
//  3. The purge.  The time manager (time_manager.hpp 3) looks at the earliest end of retention of
//     each queue table with retained copies (one probe of the (q_id, expiration) index per queue)
//     and deletes the copies whose time passed, as the table's owner, in batches of 10,000 rows it
//     can lock at once (FOR UPDATE SKIP LOCKED); the dequeue that wrote a copy tells it when (the
//     due time, time_manager.hpp 2).  Without a time manager a consuming dequeue does it, at most
//     once a second per queue table, as it moves expired messages (maintenance.hpp 3).  A ring's
//     deleted copies are gone for good once the purge commits, and a segment holding only them
//     is truncated as any other (ring.hpp T2); a segment holding copies still retained is not:
//     a ring keeps what its retention asks for.
//  4. Where the copy cannot be written by multi-insert (base/multi_insert.hpp: a queue table with
//     triggers, rules or row-level security in force for the dequeuer), the dequeue fails with
//     55000 naming the queue table and why, before it claims anything (check_writable): no message
//     is removed without the copy its queue asks for, and no attempt is counted for it.
//  5. A REPEATABLE READ or SERIALIZABLE dequeue does not purge (3): the purge's read of copies
//     deleted since its snapshot would fail it with 40001.  Nor does the library retain with the aq
//     objects of 0.6.0 and before (not yet updated: ALTER EXTENSION aq UPDATE), whose views and
//     drop_queue know no copies.
//  Multi-consumer queue tables do not apply retention yet (their messages go once every
//  recipient has taken them); retention_time is stored for them.
// Proved by: regress retention (the copy, the view, rollback, browse and by-msgid never see a
// copy, purge_queue_table, a ring, a queue table with a trigger); TAP 035_time_manager (the time
// manager purges on time; a ring's segment of purged copies is truncated).
//
// PostgreSQL-side: inside base::call; may raise PostgreSQL errors.
#pragma once

extern "C" {
#include "postgres.h"
#include "storage/itemptr.h"
#include "utils/timestamp.h"
}

#include "queue/catalog.hpp"

namespace aq::queue::retention {

// Whether the queue keeps what its dequeues remove (1).
bool applies(const QueueInfo& q);

// The row versions one dequeue removed, in the memory context current at begin_removed() (which must
// last until keep()), whatever context note() is called in.
struct Removed {
    int count;
    int size;
    Oid* relids;
    ItemPointerData* tids;
};
Removed* begin_removed();
void note(Removed* removed, Oid relid, ItemPointer tid);

// 4: raises 55000 if the copies cannot be written; before the dequeue claims anything.
void check_writable(const QueueInfo& q);

// 1: the copies of what was noted, at `dequeued`; tells the time manager when they go.
void keep(const QueueInfo& q, const Removed& removed, TimestampTz dequeued);

// 3: the earliest end of retention of the queue table's copies (0: none).  Requires SPI.
TimestampTz earliest_end(const QueueInfo& q);
// 3: deletes the copies whose retention ended by `now` (at most purge_batch_size), as the table's
// owner; how many, or -1 when the caller may not (it may not dequeue from the table).  Requires SPI.
int64 purge(const QueueInfo& q, TimestampTz now);
inline constexpr int64 purge_batch_size = 10000;

}  // namespace aq::queue::retention
