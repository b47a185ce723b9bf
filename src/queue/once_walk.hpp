// The walk of a multi-consumer queue table that stores each message once (create_queue_table
// with multiple_consumers and segments; docs/design-horizon-storage.md, section 3).  Its messages
// live in a ring (ring.hpp) and are never deleted by a dequeue; what consumer c took is in c's
// receipts, rows in the receipts table of the messages' segment (aq.queue_segments.receipts),
// appended and never updated.
//
// Protocol (M1, M5, M7 of the design, with receipts per dequeue instead of per message):
//  1. Eligibility as for the queue walk (index_walk.hpp, 1): the ring opens (RingScan, with
//     AccessShareLock: a dequeue never writes a message, and add_subscriber's SHARE lock must wait
//     for the enqueues alone), the caller may remove from the queue table (browse: may read it);
//     else -1 and the caller says why (there is no statement for such a table yet).  Each segment's
//     receipts table is opened with it (RowExclusiveLock; browse AccessShareLock) with its
//     (consumer, hi_priority, hi_enq_time, hi_msgid) index.  A receipt says what one dequeue of consumer c took of the segment's
//     messages: the runs [lo, hi] of their msgids, and the last of them in the queue's order (hi).
//  2. A remove walk of c holds c's walk lock (a heavyweight lock on (queue table, c), waited for)
//     from before its snapshot until its receipts are written: two sessions of c never walk at
//     once, but neither waits for the other's transaction; a walk of c inside a walk of c (a
//     deq_condition that dequeues, from any queue of the table) finds the lock held by its own
//     transaction and is refused (0A000).  c's scan floor (scan_floor.hpp, key c)
//     is read before the lock; the walk starts at it (NEXT_MESSAGE), at the head (FIRST_MESSAGE)
//     or after the transaction's position, over every segment merged by key (ring_scan.hpp).
//  3. Under the lock the walk reads c's receipts whose hi is at or after its start, under the
//     latest state (SnapshotDirty): committed by another transaction (taken for good), in progress
//     in another session of c or this transaction's own (held).  A receipt whose hi is before the
//     start holds no message the walk can meet.  Then, for each visible message of c's queue that
//     is for c (its recipient list, the column recipients, names c, subscriber or not; a message
//     without one is for every subscriber that subscribed before it: its msgid after c's
//     since_msgid, which add_subscriber finds after waiting for the enqueues in progress; a
//     message for nobody is refused at its enqueue; remove_subscriber, after the enqueues in
//     progress, writes in every segment a receipt of kind 't' whose runs cover that queue's
//     messages there, so nothing of that queue enqueued before is c's any more, listed or not;
//     rules give a message its list at the enqueue, audience.hpp), of the dequeue's
//     msgid or correlation if it has one
//     (a walk by msgid starts at that message's position and stops after it; a filtered walk
//     raises no floor), and takeable (rules.hpp: ready, unexpired): taken for
//     good is passed for good, held is passed; else, with a deq_condition, the condition is
//     evaluated on the row (condition.hpp, RowFilter: analyzed against each segment before the
//     lock, as the caller, with retry_count the consumer's count, 5) and a message it does not
//     hold for is passed; else a
//     remove walk notes it for its segment's receipt and hands it on; a browse hands it on.  At the
//     end one receipt per segment it took from is inserted (heap and index), then the lock goes:
//     the next walk of c sees them.  A message of the parent (written by hand; it has no receipts
//     table) is passed.  The locked mode writes receipts of kind 'l': held while another
//     transaction that wrote them runs, nothing once it ended (committed: the message is c's again,
//     as Oracle's lock ends with the transaction; aborted: an attempt, 5) nor for the transaction
//     itself, whose later dequeues (by msgid, in remove mode) take the message.
//  4. The floor watch (index_walk.hpp, 6) meets the first entry whose row is visible or not gone;
//     it passes on when that row is a message c took for good (3), so c's floor rises past what c
//     consumed and its dequeues do not read it again.  Enqueues lower every subscriber's floor
//     before their commit (scan_floor.hpp), as the fan-out does.  It passes on too, while the time
//     manager serves, when that row is a committed message for every subscriber (no recipient
//     list) waiting for its delay: each round lowers every subscriber's floor to the messages
//     whose delay passed (time_manager.hpp, 8), with the single-consumer argument, so a message
//     delayed by an hour does not make every dequeue of an hour re-read what was taken after it.
//     A message that waits otherwise — for c's retry_delay (5), or for its delay with a recipient
//     list or while the time manager does not serve — is passed too, with a return registered by
//     the raise: c's floor goes back to it at that time (scan_floor.hpp, Returns), and a dequeue
//     of c that waits wakes then.
//  5. Everything is in the caller's transaction: a rollback takes its receipts back, and the
//     messages are c's to take again, as an attempt.  A receipt is remembered with its
//     (sub)transaction's level (retries::note_receipt); when that aborts — ROLLBACK, an error,
//     ROLLBACK TO SAVEPOINT, the FATAL exit of a terminated session — the receipt itself (its runs
//     and last message, not its row: an aborted insert may be pruned at once) is handed to the
//     settler, and the abort waits for it (a second at most, as for any attempt: retries.hpp, 5).
//     The settler, in its own transaction and as the queue table's owner, takes c's walk lock (2)
//     until the receipts are written, without waiting (busy: tried again 50 ms later), and reads c's receipts
//     under the latest state (split_attempt): a message c took again since counts nothing; one
//     another session of c holds is counted ('r') and stays that session's; one with attempts
//     left goes into a receipt of
//     kind 'r' with `at` = now + the queue's retry_delay; one past max_retries into a receipt of
//     kind 'x' (c took it for good), with c's copy of it — same msgid, retry_count its attempts,
//     consumer_name c — in its exception queue (the one it names if that is an exception queue
//     of the table, else the table's default; none left: it keeps retrying), in the ring's current
//     segment (ring.hpp, R1).  An exception queue's copies are plain rows, dequeued as a
//     single-consumer queue's by the statements: with a consumer_name, that consumer's; without,
//     anyone's.  A walk reads c's 'r' receipts with
//     its others: a message under k committed ones has k attempts (added to the row's
//     retry_count), is not c's until the latest `at` has passed (a waiting dequeue wakes then),
//     and one under an 'r' receipt still being written, or under an aborted receipt handed over and
//     not written yet (settler::pending_receipt_runs: the shared array keeps a receipt until the
//     settler's commit), is held.  An 'r' receipt takes nothing:
//     truncation (6) counts 't' and 'x' only.  Bounds: a receipt whose transaction ended in a
//     crash, or found no room in shared memory (1,024 entries of 16 runs), or beyond a
//     transaction's 4,096th, is not counted; while no settler can start (no worker slot), nothing
//     is held; a walk between an abort's record and its hand-over (instructions apart) may take
//     the message first, and that attempt is not counted; prepared transactions'
//     receipts are not counted (as Oracle, which counts an attempt when the application rolls
//     back).  A transaction remembers of a new receipt only the messages none of its receipts
//     for that consumer covers yet: a message locked then removed by msgid, taken again, or
//     locked again in a subtransaction while an outer level holds it, is one attempt when all of
//     it rolls back, and none while the outer level stays.  Not yet: rules.
//  6. Truncation (ring.hpp, T2): a segment goes once every message in it is taken ('t' or 'x'), under
//     committed receipts of its segment, by every consumer it is for (3), and no consumer's copy is
//     left in an exception queue in it (ring.cpp, once_settled), proved again
//     under the ACCESS EXCLUSIVE locks of the segment and its receipts table; both are truncated
//     together.  No carry-forward: a message stays in its segment with its receipts, and so does a
//     consumer's copy in an exception queue until it is dequeued: an exception queue nobody reads
//     keeps its segment, and in the end the ring's switch waits for it (ring.hpp, T4).
//     A receipts table the settler cannot lock (LOCK TABLE, VACUUM FULL) backs off as a settle
//     that left rows does; a busy walk lock is tried again after 50 ms.
//  7. Expiration: a message whose expiration passed is not taken by any walk (rules.hpp); the
//     time manager (or, without one, a consuming dequeue, maintenance.hpp, 3, in its transaction)
//     moves it, for each subscriber it is for that has not taken it, to its exception queue as
//     that subscriber's copy (5: under the subscriber's walk lock, taken without waiting and let go
//     once the receipts are written; a subscriber holding it, whose aborted receipt is not written
//     yet, or whose walk lock is busy, has it looked at again later); once every subscriber is done
//     with it (or it is for nobody), its expiration is cleared (an update of the message's row), so
//     no round reads it again (expire_once).  A batch is the first 10,000 expired messages with all
//     their consumers, and no more than fit in 100,000 (message, consumer) rows (the first always):
//     a message is never cleared with a consumer left out (known: a batch whose messages all stay
//     held keeps the later ones waiting until one is done).
//  Cost: per message, the merge walk and a search of the runs in memory; per dequeue, one range
//  read of c's receipts and one receipt per segment (tools/bench/queue-bench, fan-out).
//  The statements over a ring's messages and receipts (the view aq$<qt>, aq.queue_health,
//  expire_once, once_settled) take who a message is for (3) from aq._message_recipients (its
//  subscriber part: aq._subscriber_receives) and what a receipt took for good (5, 6) from
//  aq._taken_ranges: the rules once, in SQL (sql/aq--0.7.0.sql), inlined by the planner.
//
// Called inside base::call: plain data only; may raise PostgreSQL errors.
#pragma once

#include "queue/bulk_dequeue.hpp"

namespace aq::queue {

struct OnceDequeue {
    Oid relid;
    const ring::Segments* segments;  // with their receipts tables
    Oid payload_type;
    int32 queue_id;
    const char* consumer;
    int64 since;  // the subscriber receives the messages after this msgid (PG_INT64_MAX: no subscriber)
    bool priority_order;
    bool browse;  // hand the messages on without taking them
    int max_messages;
    bool from_head;
    const BulkDequeuePosition* after;  // or nullptr
    BulkDequeueSink sink;
    void* sink_context;
    TimestampTz* next_ready;  // or nullptr: lowered to when a message passed for its retry_delay is ready
    const BulkDequeuePosition* only = nullptr;  // a dequeue by msgid: that message, at its position
    const char* correlation = nullptr;          // only messages whose corrid is LIKE this (C collation)
    bool lock_only = false;                     // locked mode: a receipt of kind 'l' (3)
    Node* condition = nullptr;                  // deq_condition, parsed (condition.hpp), and its text
    const char* condition_text = nullptr;
};

// How many messages were handed on, or -1 when the walk may not run (1).
int bulk_dequeue_once(const OnceDequeue& request);

// An int8[] of values[0 .. n) (a receipt's runs, msgids), palloc'd.
Datum int8_array(const int64* values, int n);

// A dequeue by msgid: the position of that message of the queue (read as the table's owner), false
// when there is none.  Requires SPI.
struct QueueInfo;
bool once_position(const QueueInfo& q, int64 msgid, BulkDequeuePosition* at);

// The subscriber's since_msgid (3), or -1 when the consumer is no subscriber.  Requires SPI.
int64 subscribed_since(int32 queue_id, const char* consumer);

// 5, for the settler: what an aborted receipt of consumer (its runs of msgids, pairs) comes to.
// Takes the consumer's walk lock without waiting (false: a walk holds it, or an aborting session of
// the consumer that waits for this settle; try again later), to the end of the transaction, and
// reads the consumer's receipts of that receipts table
// under the latest state.  A message the consumer took again since counts nothing; the others have
// one attempt more than their committed 'r' receipts: runs of those within max_retries, and of those
// another session of the consumer holds, for an 'r' receipt, and the rest, with their attempts, for
// an 'x' receipt and their copies in the exception queue.  Palloc'd in the current context.
struct AttemptSplit {
    bool locked;  // the walk lock was taken (release_walk_lock once the receipts are written)
    int64* retry_pairs;
    int nretry_pairs;
    int64* except_ids;
    int32* except_attempts;
    int nexcept;
};
bool split_attempt(Oid queue_table, Oid receipts, const char* consumer, const int64* pairs, int npairs,
                   int max_retries, AttemptSplit* out);

// The walk lock split_attempt took, once the receipts it decided are written (uncommitted, they are
// held for the consumer's walks, which read them dirty): its walks need not wait for the commit.
void release_walk_lock(Oid queue_table, const char* consumer);

// 5: consumer's messages (ids, sorted, with their attempts) of one segment of queue_id moved to their
// exception queues: each one's copy, for that consumer, into the ring's current segment, and a receipt
// of kind 'x' (last message hi) into the segment's receipts table.  The exception queue waiters are
// woken at the commit.  Requires SPI; runs as the caller (the queue table's owner).
struct ExceptionMove {
    int32 queue_table_id;
    const ring::Segments* segments;
    Oid segment;
    Oid receipts;
    int32 queue_id;
    int32 default_exception;  // the queue table's default exception queue
    const char* consumer;
    const int64* ids;
    const int32* attempts;
    int n;
    int32 hi_priority;
    TimestampTz hi_enq_time;
    int64 hi_msgid;
    TimestampTz now;
};
void move_to_exception(const ExceptionMove& move);

// 7: the expired messages of the queue table's normal queues (at most maintenance.hpp's batch of
// message and subscriber pairs) moved, for each subscriber that has not taken them, to their
// exception queues (move_to_exception, under the subscriber's walk lock); a message every subscriber
// is done with then has its expiration cleared, so it is not looked at again.  held: some subscriber
// holds one (its transaction decides; looked at again later).  Returns how many messages it cleared.
// Requires SPI; runs as the caller (the queue table's owner).
struct QueueInfo;
int64 expire_once(const QueueInfo& q, TimestampTz now, bool* held);

}  // namespace aq::queue
