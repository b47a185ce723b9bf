// The settler: background workers that count the attempts of dequeues whose transactions
// ended without committing (the record and the counting rule: retries.hpp).
//
// Protocol
//  * Shared memory (only when aq is preloaded): one LWLock, a table of database slots
//    {database, state, worker, submitted, settled, scan_wanted} and an array of requests
//    {database, relation, TID, requester}.  Everything is read and written under the lock.
//  * A backend whose (sub)transaction aborts appends its claims as requests, takes the
//    ticket ++submitted of its database, wakes the database's settler (or the launcher when
//    there is none) and waits until settled >= ticket, at most a second (WaitLatch with a
//    timeout, polling every 10 ms: interrupts are held during an abort).  When the array is
//    full it sets scan_wanted instead.  A dequeue that skipped an unsettled attempt appends
//    a request (a hint) without waiting.
//  * "aq settler launcher" (one, static, restarted by the postmaster) starts an "aq settler"
//    worker for every database slot with work (submitted > settled) that has none.  At its
//    start — a server start, and after every crash restart, which reinitialises shared
//    memory — it marks every database for a scan, so a crash's unsettled attempts are
//    found without anybody asking.
//  * A settler worker takes its database's requests (and scan_wanted) under the lock,
//    notes upto = submitted, settles them (retries.hpp: per queue table, its own
//    transaction, as the table's owner with search_path = pg_catalog, pg_temp in a
//    restricted security context), then sets settled = upto and sets the requesters'
//    latches.  Its commit wakes the dequeues waiting on the queues whose messages came back
//    (wakeup.hpp).  Rows it could not settle (locked, an error) are found by a scan a
//    second later.  An idle worker exits after a few seconds (DROP DATABASE is not blocked),
//    checking under the lock that nothing was submitted meanwhile.
//  * A slot whose worker fails to start three times in a row (the database was dropped)
//    has its work dropped and is freed.
#pragma once

extern "C" {
#include "postgres.h"
#include "storage/itemptr.h"
}

#include <cstddef>

namespace aq::queue::settler {

struct Claim {
    Oid relid;
    ItemPointerData tid;
};

std::size_t shmem_size();
void request_lwlocks();  // from shmem_request_hook
void shmem_startup();
void register_launcher();  // from _PG_init, when preloaded

// Shared memory exists (aq is preloaded).
bool available();

// Hands claims of the current database to its settler (scan: settle every queue table of
// the database as well).  Returns the ticket to wait for, 0 if none.  Never raises.
uint64 submit(const Claim* claims, int count, bool scan);

// A dequeue skipped an unsettled attempt at (relid, tid): have it settled, no wait.
void hint(Oid relid, ItemPointer tid);

// Waits at most timeout_ms until the ticket is settled.  Never raises; works with
// interrupts held (abort).
bool wait_settled(uint64 ticket, long timeout_ms);

}  // namespace aq::queue::settler

extern "C" {
PGDLLEXPORT void aq_settler_launcher_main(Datum);
PGDLLEXPORT void aq_settler_main(Datum);
}
