// Ring storage: a queue table whose messages live in a fixed ring of segments, so that what is
// consumed is reclaimed by TRUNCATE of a whole segment rather than by VACUUM, which a held xmin
// horizon stops (docs/design-horizon-storage.md).
//
// A ring queue table (aq.create_queue_table(..., segments => N), N in 2..16) is the parent of N
// inheritance children, its segments "qt$0" ... "qt$<N-1>" (aq.queue_segments), made LIKE the
// parent, owned by its owner, with no grants of their own, each with aq's indexes.  The parent keeps
// its name, OID, grants, views and identity sequence; its own heap (the legacy region) normally
// stays empty, but rows written into it by hand or by the INSERT statement are found as any other.
// aq.segment_log is the append-only switch ledger: the segment of generation g is g % N, and the
// latest generation's is the current segment.
//
// Invariants:
//  R1 (enqueue) An enqueue writes only into a segment that was the current one after it locked it:
//     it reads the ledger's latest generation (the latest snapshot, not the transaction's), takes
//     RowExclusiveLock on that segment, reads the ledger again, and if a switch came between, does
//     it again with the new segment (at most 3 times, then it keeps the one it holds: any segment is
//     a correct place for a message, invariant W1; the current one is only where it is best).
//  R2 A segment is truncated only under ACCESS EXCLUSIVE while it is not current, so the lock of R1,
//     held to the end of the enqueuing transaction, keeps it from truncation however late that
//     transaction commits; a switch meanwhile only seals it.
//  R3 Scan floors (scan_floor.hpp) stay positions in the queue's order, valid across segments: an
//     enqueue lowers them as for a classic table, whichever segment it wrote.
//  R4 msgid comes from the parent's identity sequence, drawn by aq per message (bulk_enqueue.hpp);
//     a segment's msgid has no identity of its own, and each segment's primary key checks its rows.
//  W1 (walks) A walk visits the parent and every segment: no message is ever in a place it does not
//     look.  (Skipping segments known to be empty comes with truncation.)
//  W2 Order across segments is by key, never by segment: a walk merges the order indexes of the
//     parent and every segment (RingScan, ring_scan.hpp), so a late-committing enqueue's older
//     position and a priority queue's new urgent message come first wherever they were written; a
//     grouped table's group walks merge the group indexes, so a group spanning a switch is whole.
//  W3 The claim, the rules and the floor watch are per entry, as in a classic walk (index_walk.hpp):
//     the floor watch sees the merged stream.  The statements (statements.hpp) read a ring table
//     through its parent without ONLY and identify a row by (tableoid, ctid).
//  E1 (eligibility) A ring table's parent is checked as a classic table is (aq's columns, no
//     triggers, rules or row-level security; its inheritance children are its segments), and each
//     segment has the parent's columns in the same places, no triggers, rules, row-level security
//     or children of its own.  The caller's privileges are checked on the parent: PostgreSQL checks
//     only the parent's when a statement reads the segments through it.  Otherwise the walk or the
//     bulk enqueue leaves it to the statement (index_walk.hpp, 1).  A table that inherits from the
//     parent and is not a segment would be read through it as messages: every enqueue, dequeue and
//     LISTEN of the table's queues fails (55000, naming it), and the time manager leaves the table
//     alone, until the inheritance is removed.
//
// Rotation and truncation (the time manager's, a unit per ring in its round: time_manager.hpp):
//  T1 A segment is truncated only while it is not the current one, under ACCESS EXCLUSIVE taken
//     without waiting (ConditionalLockRelationOid): never queued, so no dequeue, enqueue or reader
//     waits behind it.  Not granted: skipped, tried again at the next rotation.
//  T2 ... and only when every row version in it is gone for good (index_walk.hpp, 6: removed by a
//     committed transaction, or inserted by an aborted one), proved by reading its heap under that
//     lock (after a proof without it, which spares the lock when the segment is still in use): a
//     message that is ready, delayed, held, locked, being enqueued or holding an attempt not
//     counted yet (retries.hpp) keeps its segment.  Under the lock no transaction can add one.
//  T3 No dequeue's outcome changes: every version a snapshot older than the truncation could see
//     in it was removed by a committed transaction, which a claim passes at every level
//     (claim_by_delete).  A REPEATABLE READ or SERIALIZABLE reader (browse, SELECT, the AQ$ view)
//     whose snapshot predates the truncation stops seeing those consumed messages: not MVCC-stable,
//     as PostgreSQL documents for TRUNCATE.
//  T4 The switch to the next segment (a new generation in the ledger) happens when the current one
//     has grown past aq.segment_size or has rows and was opened aq.segment_max_age ago, and only
//     when the next segment is empty on disk; otherwise the current one grows (the backlog is real).
//     A rotation switches first (holding no segment's lock but for moments), then truncates at most
//     one segment, neither the current one nor the one it just left: the ACCESS EXCLUSIVE lock,
//     once granted, is held for that one segment's proof and truncation, to the end of the
//     rotation's transaction, a moment later.  A proof without the lock starts with the page where
//     the last one failed, so a segment kept by one message costs a page a rotation.
//  T5 A rotation is one transaction: kill -9 replays its commit or not.  Rotations and
//     aq._switch_segment of a queue table are serialised by the transaction-level advisory lock
//     (24945, queue table id) (a rotation that does not get it at once does nothing this time).
//  T6 The truncation runs as the queue table's owner (base/run_as.hpp) on a segment without
//     triggers: it runs no role's code.
//
// Carry-forward (what keeps a ring from jamming):
//  C1 When a rotation finds the switch due but the next segment not empty (T4), and that segment is
//     not all gone (T2) while its row versions not gone are at most a tenth of all of them — a
//     message nobody came back for, an exception queue nobody reads, a long delay, a retried message
//     (the settler rewrites a row within its segment) — the rotation moves them into the current
//     segment, at most carry_batch a rotation, each unchanged (msgid, enq_time, priority, delay,
//     expiration, retry_count, ...), deleting the original in the same transaction.  The next
//     rotation truncates the segment (T2), the one after switches.  A segment held by more (a real
//     backlog) is not rewritten: the current segment grows instead (T4), and aq.ring_segments says
//     the next switch is blocked.
//  C2 Only settled rows (rules.hpp, 3) that no other transaction holds are moved (FOR UPDATE SKIP
//     LOCKED: statements.hpp, carry_forward_sql): a claimed, locked or still-enqueuing message
//     stays, and so does a row holding an attempt not counted yet, which the settler counts first.
//  C3 Not lost, not twice: the move is one transaction, so a snapshot sees the original or the copy,
//     never both.  A dequeue whose snapshot predates the move meets the original removed by a
//     committed transaction, which a claim passes at every level (T3); later ones take the copy (to
//     the first, the message was taken by another consumer: it may take messages after it first).  A
//     copy keeps its position in the queue's order (its key), so before the commit the move lowers
//     each queue's scan floor to its first copy, as an enqueue does (R3), and its waiters are woken
//     at the commit (wakeup.hpp).
//  C4 The census behind C1 reads the whole segment (the time manager's process only); a segment
//     found over the tenth is not counted again for carry_recount_s seconds.
//  C6 A grouped table's messages are moved only with their group's lock (groups.hpp), taken without
//     waiting and held to the end of the move's transaction, at most 64 groups a rotation (a lock
//     each; the first 1,024 groups tried in order), each group's messages in its order, so that a
//     batch cut short leaves a group's last messages, never its first: a group a consumer holds
//     stays where it is this time, so its holder never meets one of its messages held by the move
//     and takes a later one first.  A consumer whose REPEATABLE READ
//     snapshot predates a move meets the moved originals removed: its group walk stops there, as at
//     any message of the group it cannot take (the head rule), and takes nothing after it.  The move
//     lowers the groups' floor to the first group it moved (C3).
//  C5 kill -9 mid-move: the move did not commit, so every original is live again; its xmax is the
//     aborted mover's, older than the crash restart, which retries.hpp (2) counts as a dequeue
//     attempt, as it does a hand DELETE's: a crash mid-move may count one attempt too many for the
//     messages it was moving, never one too few, and loses or doubles none.
//
//  L1 (the looks) The statements that only look at a ring while a dequeue or LISTEN waits or
//     catches up (the next delay, the ready candidates, the delays passed) run in a subtransaction
//     that is rolled back once their results are copied out (base/xact_end.hpp, look): their locks on
//     the segments go with it, so a session waiting for minutes, inside its transaction, does not
//     hold every segment from truncation.  A dequeue's move of expired messages (an UPDATE, whose
//     locks stay) runs only after such a look found one to move.  A browse only reads: its
//     statement runs in a look (its rows reach the caller all the same, a payload stored out of
//     line fetched in the look: once the look's locks are gone its segment and TOAST table may be
//     truncated).  A remove or locked dequeue that runs a statement (by msgid, correlation or
//     condition, locked mode) and may wait first runs the read-only form of it in a look, and runs
//     the statement only when that finds a message: a pass that finds none, and the sleep after it,
//     hold no segment.  (The read-only form also finds a message another transaction holds; such a
//     pass runs the statement, which takes nothing and keeps its locks like any statement.)  What a dequeue
//     takes or locks keeps its segments' locks to the end of the transaction, as any statement's.
// Proved by: regress ring_storage (catalog, shape), ring (order across segments, statements, C1,
// C2, groups across segments); isolation ring_order (W2, T1, T2, L1), ring_carry (C2, C3 at every
// isolation level), ring_groups (C6); TAP 036_rotation (T1-T5 and C1 through the time manager;
// kill -9 of it mid-rotation), 037_ring_holders (every kind of horizon holder; a standby).
//
// PostgreSQL-side: called inside base::call.
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/relcache.h"
}

namespace aq::queue::ring {

constexpr int max_segments = 16;

// A queue table's segments (aq.queue_segments), by segment number; count 0: a classic table.
struct Segments {
    int count = 0;
    Oid relids[max_segments];
    Oid receipts[max_segments];  // a multi-consumer ring's receipts tables (once_walk.hpp), else InvalidOid
};

// Whether this database's aq objects know rings (aq.queue_segments exists: 0.7.0 and later).
bool available();

// R1: the current segment, opened and locked RowExclusiveLock (kept to the end of the transaction).
Relation open_current(int32 queue_table_id, const Segments& segments);

// E1: a table that inherits from the ring's parent and is not one of its segments, or from a segment
// (InvalidOid: none).  Its rows would be read through the parent as messages: the queue refuses to work (55000).
Oid foreign_inheritor(Oid parent, const Segments& segments);

// E1: whether the segment may be read and written directly like its parent (which the caller has
// checked: plain_queue_table(parent, payload_type, true)).
bool plain_segment(Relation parent, Relation segment);

// aq.segment_size, aq.segment_max_age (T4), from _PG_init.
void define_settings();

// A ring queue table, as a rotation needs it.
struct RingTable {
    int32 queue_table_id;
    Oid relid;  // the parent
    Oid owner;
    bool priority_order;  // sort_list priority,enq_time: the scan floors' positions (C3)
    bool grouped;         // message_grouping transactional (C6)
    Segments segments;
};

// One rotation of a ring (T1-T6, C1-C5), in the caller's transaction (SPI connected).
// switch_due: switch (or, the next segment not empty, carry forward) whatever the current
// segment's size and age.
struct Rotation {
    int truncated = 0;      // segments truncated
    int skipped = 0;        // settled segments whose lock was not granted at once
    int64 carried = 0;      // messages carried forward (C1)
    bool switched = false;  // a new generation
    bool holds_rows = false;  // some segment still has pages: rotate again later
    bool more = false;        // another segment could be truncated (one a rotation), or carried
};
Rotation rotate(const RingTable& t, bool switch_due = false);

// aq._rotate_segments(queue_table, switch_due): one rotation now, in the caller's transaction, by
// its owner (or a superuser); for tests and for operators who do not wait for the time manager.
// 22023 for a table that is not a ring queue table, 42501 for another role's.  Requires SPI.
Rotation rotate_now(Oid relid, bool switch_due);

}  // namespace aq::queue::ring
