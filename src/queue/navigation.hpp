// Navigation: where NEXT_MESSAGE continues in a queue.
//
// Invariants:
//  1. A consuming position (remove, locked) is the last message this backend took from the queue
//     (per consumer of a multi-consumer queue) in the current transaction, and only in it: a
//     rollback returns its messages, and a new transaction starts from the head.  It is kept in
//     the transaction-local map (base/txn_local.hpp), which never evicts a live entry: a
//     transaction that consumes from any number of queues keeps every position, and a grouped
//     queue's position keeps the transaction's group (groups.hpp).
//  2. A subtransaction rolled back (forget_positions) forgets every consuming position: its
//     messages are back in the queue, possibly before the position.
//  3. A browse position lasts for the session, like Oracle's browse cursor, until FIRST_MESSAGE
//     starts it again from the head.  Browse positions are a small session table; when it is full
//     the oldest browse restarts from the head (it re-reads messages, it never skips one).
//  4. A scan after a position that finds nothing is followed, for a removing dequeue, by one
//     scan from the head before it waits (dequeue.cpp): no message is ever missed.
// Proved by: isolation navigation_positions (1), navigation_concurrent, rollback_returns (2, 4),
// browse_remove (3); regress groups and group_cache; unit txn_local_test (the map).
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

namespace aq::queue {

struct Position {
    int32 queue_id;
    bool browse;
    char consumer[NAMEDATALEN];  // "" for a single-consumer queue
    int32 priority;
    TimestampTz enq_time;
    int64 msgid;
    bool in_group;  // a grouped queue table: the position is in transaction group `group`
    int64 group;
};

// The live position, or nullptr (consumer "" for a single-consumer queue).
const Position* find_position(int32 queue_id, const char* consumer, bool browse);

// Sets it after a dequeue took (priority, enq_time, msgid), in transaction group *group if given.
void remember_position(int32 queue_id, const char* consumer, bool browse, int32 priority, TimestampTz enq_time,
                       int64 msgid, const int64* group = nullptr);

}  // namespace aq::queue
