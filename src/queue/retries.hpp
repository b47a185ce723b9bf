// Dequeue attempts (Oracle's RETRY_COUNT / max_retries / retry_delay).
//
// Protocol.  Oracle counts an attempt when a transaction that dequeued a message (remove or
// locked mode) ends without committing.  aq keeps the record of that attempt in the heap
// itself, so that it depends neither on the aborted transaction nor on its session:
//
//  1. The claim.  A remove dequeue deletes the message's row, a locked dequeue locks it FOR
//     UPDATE: either way the row version's xmax is the claiming (sub)transaction, and the
//     heap WAL-logs it.  The claim is on disk before anything the message can cause
//     (make_claims_durable): in a transaction block (BEGIN, or several statements in one
//     query) before the dequeue returns, since the client holds the message from then on; in a
//     statement of its own (autocommit) with the commit that follows it, whose flush covers the
//     claim (one WAL sync per committed dequeue, as a plain DELETE's), and before anything else:
//     a later statement of the same transaction (a function processing the message, the
//     executor and utility hooks of module.cpp) or its abort flushes it first.  When the
//     statement itself goes on with the messages (anything but a bare `SELECT aq.dequeue(...)`
//     or `SELECT * FROM aq.dequeue_array(...)`, base/statement.hpp), the WAL writer is asked to
//     flush them meanwhile.  So the claim survives a crash of the backend or of the server,
//     whatever the message made the transaction do.
//  2. The unsettled attempt.  A live row version whose xmax is a claim — a delete (not
//     lock-only, t_ctid pointing at itself) or a FOR UPDATE lock, or a MultiXact with such
//     a member — made by a transaction that is not running, did not commit, and was a
//     dequeuer: registered in shared memory before its first claim, or older than the
//     server's last start or crash restart (settler.hpp).  A rolled-back hand DELETE or
//     aq.purge_queue_table is no attempt; after a restart, one made before it counts.  This is
//     exactly the set of attempts not yet counted: a committed claim removed the message
//     (or, locked mode, was followed by a commit: no attempt), a running one is still a
//     delivery.  unsettled_claim() decides it from the tuple header, under a buffer lock.
//
//  3. Settling.  The settler (settler.hpp), in its own transaction and as the queue table's
//     owner, first locks the rows FOR UPDATE in a subtransaction, then, in the parent,
//     UPDATEs them: retry_count + 1, delay = now + retry_delay, and past max_retries q_id =
//     the exception queue.  The old version gets a MultiXact {subtransaction: FOR UPDATE,
//     parent: update}; the new one inherits the (committed) lock.  The lock subtransaction
//     is registered as a dequeuer.  If the settler commits, the old version is dead and
//     the attempt was counted once.  If it aborts (error, crash), the old version is live
//     again and its MultiXact holds an aborted FOR UPDATE member of a dequeuer: still an
//     unsettled attempt, settled again later.  So every attempt is counted exactly once,
//     whatever happens to the settler.  The lock step uses SKIP LOCKED and matches by ctid,
//     so two settlers never count one attempt twice (the second finds the row updated and
//     the ctid no longer matching, or locked).  Messages of exception queues are rewritten
//     unchanged (their attempts are not counted) so they can be dequeued again.
//
//  4. No dequeue claims a row version that holds an unsettled attempt (that would overwrite
//     the record): the bulk dequeue checks the header before its delete, the statement path
//     filters on (xmax = 0 OR aq._claimable(tableoid, ctid)); both then hint the settler.
//     Bound: a transaction that claims a message and aborts entirely between another
//     dequeue's check of that row and that dequeue's own delete or lock of it (a few
//     instructions apart, no I/O, at most a wait for the buffer lock) loses that one
//     attempt; the other dequeue then holds the message.
//
//  5. Who settles when.  This backend remembers its claims (relation, TID, subtransaction
//     level).  When a transaction or subtransaction aborts — ROLLBACK, an error, ROLLBACK
//     TO SAVEPOINT, and the FATAL exit path (client gone, pg_terminate_backend,
//     idle_in_transaction_session_timeout), which all run the abort — its claims are handed
//     to the settler of the database through shared memory and the backend waits (at most
//     one second, WaitLatch) until they are settled: when ROLLBACK returns, every session
//     sees the attempt and the retry_delay holds.  After a crash restart (kill -9 of a
//     backend, a postmaster crash, an immediate shutdown) the settler scans every queue
//     table of every database once; a dequeue that skips an unsettled attempt hints it.
//     So a message that kills its backend at every delivery reaches its exception queue
//     after exactly max_retries + 1 deliveries.
//
// Bounds: a transaction records up to 256 claiming (sub)transactions, the server 4096 at once
// (in flight, or aborted and not yet settled); a claim beyond them is not counted.  A
// transaction's claims beyond 65536 are handed over as a scan of the database.
// Without shared_preload_libraries = 'aq' there is no settler: attempts are not counted and
// rows holding an unsettled attempt stay claimable.  Claims of a prepared transaction that is
// rolled back later are not counted.
// Plain data in TopMemoryContext; the transaction callbacks never allocate.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "datatype/timestamp.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
}

namespace aq::queue::retries {

// A remove or locked dequeue is about to claim rows: registers the current (sub)transaction
// as a dequeuer (settler.hpp), assigning its xid.  Then, for each row claimed, note_claimed.
void before_claim();
void note_claimed(Oid relid, ItemPointer tid);

// A receipt the once walk wrote (once_walk.hpp, 5): its runs of msgids (lo, hi pairs) and its last
// message, remembered with the (sub)transaction's level and handed over if that aborts.
void note_receipt(Oid receipts, int32 queue_id, const char* consumer, int32 hi_priority, TimestampTz hi_enq_time,
                  int64 hi_msgid, const int64* pairs, int npairs);

// The claims just made, as the dequeue returns their messages (see the protocol, 1): flushed now
// in a transaction block; otherwise pending, flushed by flush_pending_claims (the next statement,
// an abort) or the commit, and, unless the commit follows with nothing acting on the messages
// first (base/statement.hpp), by the WAL writer meanwhile.
void make_claims_durable(bool commit_follows);
void flush_pending_claims();

// Whether a row version holds an unsettled attempt (see the protocol).  The caller holds
// at least a share lock on the tuple's buffer.
bool unsettled_claim(HeapTupleHeader header, ItemPointer self);

// The same for the row version at tid of rel (a heap table the caller has opened):
// reads the buffer.  False if there is no such row version.
bool row_holds_unsettled_claim(Relation rel, ItemPointer tid);

// Whether unsettled attempts are kept from dequeues (the settler exists).
bool counting();

// aq._claimable(tableoid, ctid), the statement path's filter: false if the row version
// holds an unsettled attempt (the settler is then hinted).  The caller needs SELECT on the
// table (42501 otherwise).
bool claimable(Oid relid, ItemPointer tid);

// Transaction callbacks (module.cpp).
void at_commit();
void at_abort();
void at_prepare();
void at_subtransaction_commit();
void at_subtransaction_abort();

}  // namespace aq::queue::retries
