// Immediate visibility (Oracle's visibility => DBMS_AQ.IMMEDIATE): an enqueue or a dequeue that
// commits on its own before the call returns, whatever the caller's transaction does next.  The
// work runs in a worker of the caller's database, as the caller's role; many callers' enqueues
// share one commit.
//
// Protocol
//  1. Slots.  Shared memory holds one request slot per backend (indexed by its backend slot: a
//     caller has one request in flight at a time) and a pool table of at most max_pools
//     databases with a worker.  Both are changed only under the one LWLock; a slot's state goes
//     free -> queued (the caller) -> running (a worker takes it) -> done (the worker, after its
//     commit) -> free (the caller, or the worker when the caller is gone).
//  2. The request.  Before queueing, the caller copies everything the work needs into a DSM
//     segment of its own (request_header below): the queue name, the payload and property
//     arrays (flat varlenas), its current role, its search_path and the synchronous_commit its
//     own commit would use now (commit modes, FORCE_WAIT included).  The worker never reads the
//     caller's memory or session.
//  3. Refusals, before anything is queued: the caller's transaction holds a lock on the queue
//     table that conflicts with an enqueue's ROW EXCLUSIVE, or created the queue table, or has
//     changed aq's catalog (created, altered, started or stopped a queue, subscribers): the
//     worker would wait for the caller, which waits for the worker — a deadlock PostgreSQL
//     cannot see — or work on a catalog that does not have the caller's changes.  55006, 55000.
//     The queue table comes from the caller's lookup cache when it has the queue and the table
//     still exists (no statement per call), else from a lookup: only a table another
//     transaction has put in its place under the same OID would be missed, and the worker's wait
//     for a lock on it is then bounded by aq.immediate_timeout (55P03).
//  4. Workers.  One worker per database, a dynamic background worker ("aq immediate") started by
//     the first caller that finds none (no worker slot: 53400 at once, the request withdrawn),
//     leaving after a minute without requests, and only when no request of its database is
//     queued (checked under the lock as it removes its pool entry).  A caller that finds its
//     request queued and no worker for its database starts one.
//  5. A round.  The worker takes every queued request of its database, then in ONE transaction
//     runs each enqueue in a subtransaction of its own (each dequeue gets a transaction of its
//     own, as in Oracle: its group, navigation and locks are no other caller's; each enqueue
//     starts transaction groups of its own, groups.hpp), as the caller's role with the caller's
//     search_path pinned (base/run_as: SECURITY_RESTRICTED_OPERATION), with lock_timeout set to
//     the caller's aq.immediate_timeout and statement_timeout to twice that; it writes each request's message ids, or
//     its error, into the request's segment; it commits once with the strongest
//     synchronous_commit any request asked for; before the commit it writes its transaction id
//     into each slot.  Then state done, and the callers' latches set.
//  6. The outcome is known to the caller in every case: done and the worker's transaction
//     committed (TransactionIdDidCommit; no id: nothing was written) -> the message ids, once
//     the WAL is flushed up to the commit record when the caller's own commit mode waits (so a
//     WAIT caller returns with its call durable): for a round of enqueues the worker flushes
//     once before it marks them done, for a dequeue its caller flushes (concurrent dequeues
//     share flushes), and a caller always flushes up to the record itself too (a no-op when done); the
//     request's own error -> that error; done but not committed, or the worker gone (its pool
//     entry removed, or another process in it) while running -> not committed, 57P01.  A worker
//     that exits removes its pool entry only after PostgreSQL aborted its transaction.
//  7. The caller waits on its latch, checking interrupts while its request is queued (a cancel
//     withdraws it: never run; interrupts are held while it waits for a worker to start, so a
//     cancel cannot leave it queued).  Once a worker runs it, the caller waits for the outcome
//     (bounded by the worker's timeout, at most a minute per request) and only then acts on a
//     cancel: it raises 57014 saying whether the enqueue committed, and with which message ids;
//     a termination ends the caller at once.  Not in a read-only transaction (25006).
//  8. A vanished caller: the worker skips a queued request whose caller's process is gone (its
//     segment cannot be attached, or another process has its PGPROC), and frees a done slot
//     whose caller is gone.
//  9. Dequeues.  The caller waits, never the worker: the worker's dequeue does not wait (QA228
//     when it finds nothing), and the caller, which read the queue's wake-up generation before
//     queueing the request (wakeup.hpp), sleeps until a commit moves it or its wait runs out,
//     then asks again (waiting.hpp's loop; any isolation level may wait: each try is the worker's
//     own transaction).  The worker serializes the messages (payload detoasted: its row is
//     deleted) after the request in its area when they fit, else into a segment it creates and
//     pins, named in the slot (Slot::results); whoever takes the slot next unpins it: the caller
//     once it has read them, the worker when the caller is gone, a later owner of the slot for a
//     caller that died after its request was done.  A dequeue's caller that is cancelled or
//     terminated while the worker runs it marks it abandoned, unless the worker has already
//     marked it committing, and signals the worker (SIGUSR2), whose handler cancels the running
//     dequeue only if it is that abandoned one (a late signal does nothing); the worker, under
//     the lock right before its commit, rolls back a
//     dequeue that is abandoned or whose caller is gone (its messages stay), else marks it
//     committing; a cancelled caller then waits for the outcome, and committed messages are
//     always delivered.  BROWSE ignores immediate (Oracle: it takes nothing); LOCKED refuses it
//     (22023).
// Tests: regress `immediate`, isolation `immediate_visibility`, TAP `031_immediate`.
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/array.h"
}

#include <cstddef>

#include "queue/queue_store.hpp"

namespace aq::queue::immediate {

std::size_t shmem_size();
void request_lwlocks();
void shmem_startup();
void define_settings();

// The enqueue of request, committed on its own (see the protocol); returns the message ids
// (int8[]) in the caller's memory context.  aq::Error / PgError as an ON_COMMIT enqueue would
// raise them, and 55006, 55000, 53400, 57P01 (protocol 3, 4, 6).
ArrayType* enqueue_array(const EnqueueRequest& request);

// The dequeue of request, committed on its own (protocol 9): its messages go to the request's
// sink; returns how many.  Errors as an ON_COMMIT dequeue's (QA228 after the wait), and the
// enqueue's 55006, 55000, 53400, 57P01.
int dequeue(const DequeueRequest& request);

}  // namespace aq::queue::immediate

extern "C" PGDLLEXPORT void aq_immediate_main(Datum database);
