// Transaction groups (create_queue_table(..., message_grouping => 'transactional')): the
// messages one transaction enqueues into a queue table form a group, which one consumer takes
// at a time (Oracle's transactional grouping).
//
// Protocol.
//  - Group id.  The first enqueue of a transaction into a grouped queue table draws one value
//    of the table's msgid sequence; every message the transaction enqueues there carries it in
//    the column transaction_group (kept per local transaction and table, so a rolled-back
//    subtransaction does not start a new group).  Ids are unique and increasing, not dense:
//    groups come in the order of their first enqueue.
//  - Order.  A grouped queue table is ordered by (transaction_group, enq_time, msgid), on the
//    index (q_id, transaction_group, enq_time, msgid): a group's messages are contiguous.
//  - Locks.  A consuming dequeue (remove, locked) takes a group only once it holds the group's
//    lock: a heavyweight ExclusiveLock of its transaction, asked for without waiting, on an
//    advisory tag whose fourth field is 3 (PostgreSQL's advisory lock functions use 1 and 2, so
//    no user's lock meets it), keyed by a 64-bit hash of (queue table, group).  A group another
//    transaction holds is skipped, never waited for; the lock lasts until the transaction ends,
//    so two concurrent consumers never share a group.  A collision of two groups' hashes only
//    makes one consumer pass over a group the other holds.  Browse takes no lock.
//  - Navigation (dequeue.cpp, navigation.hpp).  FIRST_MESSAGE takes the first group it can lock, from the
//    head; NEXT_MESSAGE goes on inside the transaction's current group, and when that has no
//    message left (none that is not expired, takeable now or not) the dequeue raises QA235
//    (Oracle's ORA-25235); when its next message cannot be taken now (a retry delay, a moment's
//    hold by the settler, an expiry move or a carry-forward) it waits for it as for any message,
//    or says QA228 with wait => 0; without a current group it is FIRST_MESSAGE.  NEXT_TRANSACTION takes the first group after the current one that it can
//    lock.  A dequeue_array stays inside one group.
//  - The head rule.  A group is delivered whole, in order, to one consumer: a group is found
//    only when its first unexpired message can be taken now (ready, and not a claim whose
//    attempt is still uncounted: a consumer that rolled back with a retry delay, or died), and a
//    take stops at the first message that cannot be taken, so no message is ever taken before an
//    earlier one of its group.  The rule is written once (rules.hpp, 5): next_group and
//    bulk_dequeue_group on the index (group_walk.cpp) evaluate it, the find_next_group statement
//    and the by_group claim (statements.cpp) embed its SQL.
//  - Properties.  A dequeued message says its group (transaction_group, the id as text) and
//    whether it is the group's last (end_of_group: no later message of the group is in the
//    queue).
//  - Paths.  Enqueues go through the multi-insert path with the group filled in, a group is
//    found and taken on the group index (bulk_dequeue.hpp: next_group, bulk_dequeue_group);
//    what they refuse (triggers, privileges, browse and locked modes) goes through statements
//    with the same meaning (statements.cpp).
//
//  - Floor.  A search for the first group from the head starts at the groups' scan floor
//    (scan_floor.hpp, the queue's slot under floor_key), a position whose first field is a group
//    id: every enqueue lowers it to its group after writing its messages, before its commit, and
//    the search raises it past the groups whose entries are all surely dead.
//
// PostgreSQL-side code: call inside base::call.
#pragma once

extern "C" {
#include "postgres.h"
}

namespace aq::queue::groups {

// The scan floor key of a queue's groups (no consumer name: a grouped table has no consumers).
inline constexpr const char* floor_key = "\x01groups";

// The current transaction's group in the queue table (drawn from its msgid sequence the first
// time).
int64 transaction_group(Oid relid);
// Ends the current transaction's groups: the next enqueue into each table starts a new one.  For
// the immediate worker, whose one transaction runs many callers' enqueues, each of which is a
// transaction (and so a group) of its own, as in Oracle.
void start_new_groups();

// Whether this transaction holds the group's lock now (taken if free; see the protocol).
// *taken says whether this call took it (it was not held before).
bool try_lock(Oid relid, int64 group, bool* taken = nullptr);

// Gives back a lock try_lock took for a group that yielded nothing: a long search through groups
// holds no lock for each one it passed.
void unlock(Oid relid, int64 group);

}  // namespace aq::queue::groups
