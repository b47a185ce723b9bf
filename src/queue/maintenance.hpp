// The system's own work on a queue table (what Oracle's QMON does in the background): expired
// messages moved to their exception queues, and the settler's sweep of a multi-consumer queue
// (queue_store.hpp, settler_sweep).
//
// Invariants:
//  1. It runs as the queue table's owner through base/run_as.hpp (search_path pinned, restricted
//     security context, every setting restored, a time limit): the caller's grants do not cover
//     the system's changes.  And only for a caller who may dequeue (DELETE) from the claim table.
//  2. A message names its exception queue; if that is not an exception queue of the same queue
//     table, it goes to the queue table's default one.  A delivery takes its message with it
//     (deliveries.hpp).
//  3. The time manager does it when a message expires, whether anybody reads the queue or not
//     (time_manager.hpp).  It is also done when an exception queue is consumed from (first), and,
//     while no time manager serves the database, at most once a second per queue table and
//     backend when a normal queue is (expiry_sweep_due), so expired messages do not pile up at
//     the head of a queue whose exception queue nobody reads.  Never in browse, a
//     READ ONLY transaction or on a hot standby: there it waits for the next consuming dequeue.
//     Nor by a normal queue's dequeue in a SERIALIZABLE transaction: the move reads the whole
//     queue table, which would make every other SERIALIZABLE consumer of it fail with 40001; an
//     expired message is never taken (rules.hpp, 2), it only waits for the move.
// Proved by: regress queue_options and retries (the move, the default exception queue), owner_run
// (as the owner); TAP 035_time_manager (3: without a reader, and without a time manager); isolation locked_remove_levels (3: no 40001 at SERIALIZABLE).
//
// PostgreSQL-side: inside base::call, with an SPI connection.
#pragma once

#include "queue/catalog.hpp"

namespace aq::queue {

// Moves the expired messages of the queue table's normal queues to their exception queues (at
// most a batch of 10,000, skipping rows another transaction holds); how many, or -1 when it may
// not (no exception queue, or the caller may not dequeue).
int64 expire_messages_of(const QueueInfo& q);
inline constexpr int64 expiry_batch_size = 10000;  // the move's LIMIT (statements.cpp)

// Whether a dequeue from a normal queue of this queue table should move its expired messages now.
bool expiry_sweep_due(const QueueInfo& q);

}  // namespace aq::queue
