// Wake-ups for waiting dequeues, without polling.
//
// Protocol.  Shared memory holds `channel_count` wake channels, each a generation
// counter (pg_atomic_uint64) and a ConditionVariable; a queue uses channel
// queue_id % channel_count (a collision only costs a spurious wake-up).
//   - A waiting dequeue reads the generation BEFORE it scans the queue table.  If the
//     scan finds nothing, it sleeps on the channel's CV until the generation differs
//     from what it read, its wait runs out, or it is interrupted (cancel,
//     statement_timeout: ConditionVariableTimedSleep checks for interrupts).
//   - An enqueue (or a dequeue that leaves messages takeable at its commit: note_release) only
//     remembers its queue in this backend; when the transaction has committed and its locks
//     are released (xact_end's commit_unlocked: after the commit is visible to new snapshots
//     AND its group locks, advisory locks, are gone) the generation is incremented and the CV
//     broadcast.  Woken at the commit event itself, a waiter could find the rest of a group
//     still locked and sleep again, with nothing left to wake it (isolation release_wakeup,
//     TAP 032).  A dequeue that claimed messages does the same when its transaction aborts
//     (abort_unlocked), because the rollback makes those messages available again; so does a
//     rollback to a savepoint (sub_abort_unlocked: the dequeues of the transaction so far are
//     woken for, which may include some still held: a spurious wake-up is harmless).  Two-phase commit: PREPARE wakes nobody (nothing is visible
//     yet), and a COMMIT PREPARED / ROLLBACK PREPARED, whose queues this backend cannot
//     know, wakes every channel when its transaction ends.
// Because the generation is read before the scan's snapshot is taken, a commit that the
// scan did not see always changes the generation before the sleeper checks it: no
// wake-up is lost.  No lock is held anywhere in this protocol.
//
// LISTEN (several queues at once) cannot sleep on several condition variables, so it sleeps
// on one more, the listen CV, and checks its own queues' channel generations at each wake-up.
// A listener counts itself in `listeners` (an atomic fetch-add, a full barrier) before it reads
// the generations; a commit, after it has incremented a generation (also a full barrier), reads
// `listeners` and broadcasts the listen CV when it is not 0.  So either the commit sees the
// listener and wakes it, or the listener sees the new generation: no wake-up is lost there
// either.  A listener that ended without saying so (an error in its wait) is uncounted at the
// end of its transaction; until then commits broadcast for nobody, which costs only that.
//
// Removals.  Each channel also counts the committed transactions that dequeued from its queues
// (`removals`, incremented at commit after the generation), for backend-local knowledge of a
// queue that only this backend's own dequeues may change (the sweep of sweep.cpp): a
// backend remembers the counts it moved from, so it can tell whether every removal since it
// looked was its own.  A COMMIT PREPARED counts on every channel; a collision only makes the
// knowledge look stale.
//
// Without shared_preload_libraries = 'aq' there is no shared memory: waits then poll
// the queue table every `poll_interval_ms` (documented in the README).
#pragma once

#include <cstdint>

namespace aq::queue::wakeup {

inline constexpr int channel_count = 128;
inline constexpr long poll_interval_ms = 100;
// The longest a waiting dequeue sleeps before it scans its queue again and checks its client
// (see sleep()): aq.wait_rescan_interval, 1 s by default.  Wake-ups never rely on it; the
// tests of wake-ups set it high, so that a lost one shows.
long longest_sleep_ms();
void define_settings();  // from _PG_init

// Shared memory size, and attach/initialise (from shmem hooks).
std::size_t shmem_size();
void shmem_startup();

// A token to compare against after a failed scan.
uint64_t generation(int32_t queue_id);

// Sleeps until the queue's generation differs from `seen`, timeout_ms (-1: no limit) or
// longest_sleep_ms passes, whichever is first; then checks that the client is still there.  May raise PostgreSQL errors (interrupts): call it through base::call.
void sleep(int32_t queue_id, uint64_t seen, long timeout_ms);

// LISTEN: sleeps until the generation of any of the `count` queues differs from seen[i] (read
// after begin_listen), timeout_ms (-1: no limit) or longest_sleep_ms passes; then checks the client
// as sleep() does.  Returns whether a generation moved (false: the time ran out, or no shared memory).  Between begin_listen and end_listen (or the end of the transaction) this
// backend counts as a listener.  May raise PostgreSQL errors: call it through base::call.
void begin_listen();
bool sleep_any(const int32_t* queue_ids, const uint64_t* seen, int count, long timeout_ms);
void end_listen();

// The queue's removal count (see the protocol); false without shared memory.
bool removals(int32_t queue_id, uint64_t* count);
// Whether every removal counted since *known was this backend's own; if so, *known becomes the
// current count.
bool only_own_removals(int32_t queue_id, uint64_t* known);

// Remember queues for the end of the current transaction.
void note_enqueue(int32_t queue_id);
void note_dequeue(int32_t queue_id);
// The transaction holds messages of the queue that its commit leaves takeable: rows a locked
// dequeue locked, the rest of a transaction group it took part of (its group lock goes).  Its
// commit wakes the waiters, as an enqueue's does.
void note_release(int32_t queue_id);

// The current statement is COMMIT PREPARED or ROLLBACK PREPARED.
void note_prepared_transaction_end();

// Transaction end (xact_end handlers, added by the module).  The wake-ups come in the unlocked
// events, after the transaction's locks are released.
void at_commit();
void after_commit_unlocked();
void at_abort();
void after_abort_unlocked();
void at_prepare();
void after_subtransaction_abort_unlocked();

}  // namespace aq::queue::wakeup
