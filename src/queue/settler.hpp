// The settler: background workers that count the attempts of dequeues whose transactions
// ended without committing (the record and the counting rule: retries.hpp).
//
// Protocol
//  * Shared memory (only when aq is preloaded): one LWLock, a table of database slots
//    {database, state, worker, submitted, settled, scan_wanted}, an array of requests
//    {database, relation, TID, claiming xid, requester}, all read and written under that lock;
//    the registry of dequeuing transactions {database, xid} in 16 partitions by xid, each under
//    a lock of its own (a claiming transaction's registration and its forgetting at commit take
//    only its partition's lock, never the settler's; order: the settler's lock, then a
//    partition's), and the horizon (below, an atomic).
//  * A backend whose (sub)transaction aborts appends its claims as requests, takes the
//    ticket ++submitted of its database, wakes the database's settler (or the launcher when
//    there is none) and waits until settled >= ticket, at most a second (WaitLatch with a
//    timeout, polling every 10 ms: interrupts are held during an abort).  When the array is
//    full it sets scan_wanted instead.  A dequeue that skipped an unsettled attempt appends
//    a request (a hint) without waiting.  Receipts of a queue table that stores each message once
//    (once_walk.hpp, 5) are handed over the same way, in an array of their own: each is written
//    as an attempt, a receipt of kind 'r', in a unit of its own per receipts table; one that could
//    not be written goes back to the array, retried at the next rescan.
//  * "aq settler launcher" (one, static, restarted by the postmaster a second after it exits,
//    terminated or crashed) starts an "aq settler" worker for every database slot with work
//    (submitted > settled) that has none: first the slots with requests (urgent: a rollback or a
//    hint), at most six settlers running, then those with only a scan, at most three.  When no
//    background worker slot is free, the slot is starved (starved() above) until a settler of it
//    runs; logged once per stretch.  At its start — a server start, and after every crash restart, which
//    reinitialises shared memory — it sets the horizon to the next xid and marks every
//    database for a scan, so a crash's unsettled attempts are found without anybody asking.
//  * A settler worker takes its database's requests under the lock (a scan, scan_wanted,
//    waits for a round without requests: a scan visits every queue table),
//    notes upto = submitted, settles them (retries.hpp: per queue table, its own
//    transaction, as the table's owner with search_path = pg_catalog, pg_temp in a
//    restricted security context; never waiting for the table's lock: a table another
//    transaction holds — maybe the aborting one — is retried by a scan; one table's settle has a
//    time budget, an owner's trigger included, of a second, doubled per overrun in a row up to
//    64 s, and SIGTERM ends it at once), then sets
//    settled = upto and sets the requesters' latches.  Its commit wakes the dequeues waiting
//    on the queues whose messages came back (wakeup.hpp).  Rows it could not settle (locked,
//    an error) are found by a scan a second later (backing off to a minute while that keeps
//    happening).  Once a round settled everything, the registry forgets the claiming xids of
//    its requests; once a scan of the database settled everything, every registered xid of
//    the database that did not commit.  An idle worker exits after a few seconds (DROP
//    DATABASE is not blocked), checking under the lock that nothing was submitted meanwhile.
//  * The same worker is the database's time manager (time_manager.hpp): a slot whose due time
//    passed has work too (started at most aq.tm_processes at once, the database served longest
//    ago first), a worker stays while one is due within a minute unless another database waits
//    for room, a round follows every scan and, within 100 ms, every settle.
//  * Sweep requests (request_sweeps) go to the settler's own list of owed sweeps: each runs in a
//    transaction of its own (queue_store.hpp, settler_sweep), at most once a second per queue.
//  * A slot whose worker fails to start three times in a row (the database was dropped)
//    has its work dropped and is freed.
#pragma once

extern "C" {
#include "postgres.h"
#include "storage/itemptr.h"
}

#include <cstddef>

namespace aq::queue::settler {

// A claim this backend made: the row version and the (sub)transaction that claimed it.
struct Claim {
    Oid relid;
    ItemPointerData tid;
    TransactionId xid;
    int level;  // subtransaction nesting level
};

// A receipt this backend wrote (once_walk.hpp): what one dequeue of consumer took of a segment's
// messages, as runs [lo, hi] of msgids (pairs), and the last of them in the queue's order.  It has
// no row the settler could read after an abort (an aborted insert is pruned at any time), so its
// abort hands the receipt itself over, and the settler writes the attempt as a receipt of kind
// 'r' (once_walk.hpp, 5).
struct Receipt {
    Oid receipts;  // the receipts table
    int32 queue_id;
    TransactionId xid;
    int level;
    int32 hi_priority;
    TimestampTz hi_enq_time;
    int64 hi_msgid;
    char consumer[NAMEDATALEN];
    const int64* pairs;  // lo, hi, lo, hi ... (the backend's memory)
    int npairs;
};

std::size_t shmem_size();
void request_lwlocks();  // from shmem_request_hook
void shmem_startup();
void register_launcher();  // from _PG_init, when preloaded

// Shared memory exists (aq is preloaded).
bool available();

// No background worker slot was free for this database's settler at its last start: nobody
// settles its attempts now.  Rollbacks then do not wait, and dequeues take rows that hold an
// unsettled attempt (that attempt is not counted): a message is never stranded.  Lock-free
// while no database is starved.
bool starved();

// Dequeuing transactions.  A claim counts as an attempt only if the claiming xid is a
// registered dequeuer, or precedes the horizon (assigned before the server's last start or
// crash restart, when the registry was lost): a rolled-back DELETE of a message by hand or by
// aq.purge_queue_table is no attempt.  register_dequeuer() is called by the claiming
// (sub)transaction before its first claim (false: the registry is full, the claim will not
// be counted); forget_dequeuers() when they committed.  The settler forgets the others once
// their claims are settled.
bool register_dequeuer(TransactionId xid);
void forget_dequeuers(const TransactionId* xids, int count);
bool is_dequeuer(TransactionId xid);

// Hands the claims and receipts of levels >= from_level to the settler of the current database,
// in one step (scan: settle every queue table of the database as well).  Returns the ticket to
// wait for, 0 if none.  Never raises, never allocates.  A receipt that finds no room (1,024
// entries of 16 runs in flight) is not counted.
uint64 submit(const Claim* claims, int count, const Receipt* receipts, int nreceipts, int from_level, bool scan);

// The runs (lo, hi pairs, palloc'd; *npairs of them) of consumer's aborted receipts of a receipts
// table that are not written as attempts yet (once_walk.hpp, 5): a walk holds their messages
// meanwhile.  nullptr when none (lock-free then).
int64* pending_receipt_runs(Oid receipts, const char* consumer, int* npairs);

// Unsettled attempts a dequeue skipped (at most 16; later ones are left to the next walk).  A walk
// gathers them and hands them over together once it is done, so that one settle counts them all
// and one commit brings them back (a hint per row let a waiting dequeue wake at the first).
struct Hints {
    static constexpr int capacity = 16;
    Oid relids[capacity];
    ItemPointerData tids[capacity];
    int count = 0;
    void add(Oid relid, ItemPointerData tid) {
        if (count < capacity) {
            relids[count] = relid;
            tids[count++] = tid;
        }
    }
};

// Have them settled, no wait; empties hints.
void hint(Hints& hints);
void hint(Oid relid, ItemPointer tid);

// Transactions that committed with a contended sweep of these multi-consumer queues
// (deliveries.hpp): the settler of the database sweeps each, as its owner, a second apart until a
// sweep is no longer contended.  From a commit handler: never raises, never waits.
void request_sweeps(const int32* queue_ids, int count);

// Waits at most timeout_ms until the ticket is settled.  Never raises; works with
// interrupts held (abort).
bool wait_settled(uint64 ticket, long timeout_ms);

}  // namespace aq::queue::settler

extern "C" {
PGDLLEXPORT void aq_settler_launcher_main(Datum);
PGDLLEXPORT void aq_settler_main(Datum);
}
