// The settler's shared memory and what backends do with it: registering claiming transactions,
// submitting the claims of an abort and waiting for them, hints, owed sweeps (settler.hpp for the
// protocol, settler_shared.hpp for the tables).  The workers: settler.cpp.
// PostgreSQL-side code (background workers and the abort path): plain data only; the
// workers' errors are PostgreSQL's own, caught with PG_TRY around each unit of work.
extern "C" {
#include "postgres.h"
#include "access/heapam.h"
#include "access/transam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/pg_database.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/procarray.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/timeout.h"
#include "utils/wait_event.h"
}

#include <cstdio>

#include "compat/wait_event.hpp"
#include "base/run_as.hpp"
#include "compat/proc.hpp"
#include "commit/committer.hpp"
#include "base/worker_spec.hpp"
#include "queue/retries.hpp"
#include "queue/deliveries.hpp"
#include "queue/queue_store.hpp"
#include "queue/settler.hpp"
#include "queue/settler_shared.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::settler {

Shared* shared = nullptr;

DatabaseSlot* slot_for(Oid database, bool create) {
    DatabaseSlot* free_slot = nullptr;
    for (auto& slot : shared->slots) {
        if (slot.database == database) return &slot;
        if (!free_slot && slot.database == InvalidOid) free_slot = &slot;
    }
    if (!create || !free_slot) return nullptr;
    *free_slot = DatabaseSlot{database, slot_stopped, no_proc, 0, 0, 0, false, false, false, 0, {}};
    return free_slot;
}

void wake(uint32 procno) {
    if (procno != no_proc) SetLatch(compat::proc_latch(procno));
}

// Appends a request (under the lock); false when the array is full.
bool append(Oid database, Oid relid, const ItemPointerData* tid, TransactionId xid, uint32 requester) {
    if (shared->request_count >= max_requests) return false;
    Request& r = shared->requests[shared->request_count++];
    r.database = database;
    r.relid = relid;
    if (tid)
        r.tid = *tid;
    else
        ItemPointerSetInvalid(&r.tid);
    r.xid = xid;
    r.requester = requester;
    r.sweep_queue = 0;
    return true;
}

namespace {

Registry& registry_of(TransactionId xid) {
    return shared->registry[xid % registry_partitions];
}

}  // namespace

// Takes the partition's lock (the caller may hold the settler's).
void forget_one(TransactionId xid) {
    Registry& r = registry_of(xid);
    LWLockAcquire(r.lock, LW_EXCLUSIVE);
    for (int i = 0; i < r.count; i++)
        if (TransactionIdEquals(r.entries[i].xid, xid)) {
            r.entries[i] = r.entries[--r.count];
            break;
        }
    LWLockRelease(r.lock);
}

// The lock is released by the caller; wakes whoever must act on the slot.
void wake_for(DatabaseSlot* slot, uint32* to_wake) {
    *to_wake = slot->worker_procno != no_proc ? slot->worker_procno
               : slot->state == slot_stopped  ? shared->launcher_procno
                                              : no_proc;
}

std::size_t shmem_size() {
    return MAXALIGN(sizeof(Shared));
}

void request_lwlocks() {
    RequestNamedLWLockTranche(tranche_name, 1 + registry_partitions);
}

void shmem_startup() {
    bool found;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = static_cast<Shared*>(ShmemInitStruct("aq settler", shmem_size(), &found));
    if (!found) {
        memset(shared, 0, sizeof(Shared));
        LWLockPadded* locks = GetNamedLWLockTranche(tranche_name);
        shared->lock = &locks[0].lock;
        for (int i = 0; i < registry_partitions; i++) shared->registry[i].lock = &locks[1 + i].lock;
        shared->launcher_procno = no_proc;
        pg_atomic_init_u32(&shared->horizon, InvalidTransactionId);
        pg_atomic_init_u32(&shared->starved_slots, 0);
    }
    LWLockRelease(AddinShmemInitLock);
}

bool available() {
    return shared != nullptr;
}

bool starved() {
    if (!shared || pg_atomic_read_u32(&shared->starved_slots) == 0) return false;
    LWLockAcquire(shared->lock, LW_SHARED);
    DatabaseSlot* slot = slot_for(MyDatabaseId, false);
    bool result = slot && slot->starved;
    LWLockRelease(shared->lock);
    return result;
}

bool register_dequeuer(TransactionId xid) {
    if (!shared) return false;
    Registry& r = registry_of(xid);
    LWLockAcquire(r.lock, LW_EXCLUSIVE);
    bool done = r.count < int(lengthof(r.entries));
    if (done) r.entries[r.count++] = Dequeuer{MyDatabaseId, xid};
    LWLockRelease(r.lock);
    return done;
}

void forget_dequeuers(const TransactionId* xids, int count) {
    if (!shared || count == 0) return;
    for (int i = 0; i < count; i++) forget_one(xids[i]);
}

bool is_dequeuer(TransactionId xid) {
    if (!shared) return false;
    TransactionId horizon = pg_atomic_read_u32(&shared->horizon);
    if (!TransactionIdIsValid(horizon) || TransactionIdPrecedes(xid, horizon)) return true;
    Registry& r = registry_of(xid);
    LWLockAcquire(r.lock, LW_SHARED);
    bool known = false;
    for (int i = 0; i < r.count && !known; i++) known = TransactionIdEquals(r.entries[i].xid, xid);
    LWLockRelease(r.lock);
    return known;
}

void count_receipt_claims() {
    pg_atomic_write_u32(&shared->receipts_pending, uint32(shared->receipt_count));
}

void finish_receipt_claims(const ReceiptClaim* claims, int n, const bool* written, TimestampTz retry_at) {
    int kept = 0;
    for (int i = 0; i < shared->receipt_count; i++) {
        ReceiptClaim& c = shared->receipt_claims[i];
        int mine = -1;
        for (int j = 0; j < n && mine < 0; j++)
            if (claims[j].id == c.id) mine = j;
        if (mine >= 0 && written[mine]) continue;
        if (mine >= 0) {
            c.taken = false;
            c.not_before = retry_at;
        }
        if (kept != i) shared->receipt_claims[kept] = c;
        kept++;
    }
    shared->receipt_count = kept;
    count_receipt_claims();
}

int64* pending_receipt_runs(Oid receipts, const char* consumer, int* npairs) {
    *npairs = 0;
    if (!shared) return nullptr;
    pg_read_barrier();
    if (pg_atomic_read_u32(&shared->receipts_pending) == 0) return nullptr;
    int64* pairs = nullptr;
    for (int pass = 0; pass < 2; pass++) {  // count, then copy (no allocation under the lock)
        int n = 0;
        LWLockAcquire(shared->lock, LW_SHARED);
        for (int i = 0; i < shared->receipt_count; i++) {
            const ReceiptClaim& c = shared->receipt_claims[i];
            if (c.database != MyDatabaseId || c.receipts != receipts || strcmp(c.consumer, consumer) != 0) continue;
            if (pairs && n + c.npairs <= *npairs) memcpy(pairs + n, c.pairs, sizeof(int64) * c.npairs);
            n += c.npairs;
        }
        LWLockRelease(shared->lock);
        if (pass == 0) {
            if (n == 0) return nullptr;
            pairs = static_cast<int64*>(palloc(sizeof(int64) * n));
            *npairs = n;
        } else {
            *npairs = Min(n, *npairs);  // what fitted (more came meanwhile: the rest at the next walk)
        }
    }
    return pairs;
}

namespace {

// One receipt as entries of at most receipt_claim_runs runs each, all with the receipt's last
// message (each entry's own runs end at or before it).  Under the lock; never allocates.
void append_receipt(const Receipt& r, uint32 requester) {
    for (int at = 0; at < r.npairs; at += 2 * receipt_claim_runs) {
        if (shared->receipt_count >= max_receipt_claims) return;  // not counted (settler.hpp)
        ReceiptClaim& c = shared->receipt_claims[shared->receipt_count++];
        c.id = ++shared->next_receipt_id;
        c.taken = false;
        c.not_before = 0;
        c.database = MyDatabaseId;
        c.receipts = r.receipts;
        c.queue_id = r.queue_id;
        c.xid = r.xid;
        c.requester = requester;
        c.hi_priority = r.hi_priority;
        c.hi_enq_time = r.hi_enq_time;
        c.hi_msgid = r.hi_msgid;
        memcpy(c.consumer, r.consumer, NAMEDATALEN);
        c.npairs = Min(r.npairs - at, 2 * receipt_claim_runs);
        memcpy(c.pairs, r.pairs + at, sizeof(int64) * c.npairs);
    }
}

}  // namespace

uint64 submit(const Claim* claims, int count, const Receipt* receipts, int nreceipts, int from_level, bool scan) {
    if (!shared || !OidIsValid(MyDatabaseId) || !MyProc) return 0;
    uint32 me = compat::my_proc_number();
    uint32 to_wake = no_proc;
    uint64 ticket = 0;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    DatabaseSlot* slot = slot_for(MyDatabaseId, true);
    if (slot) {
        for (int i = 0; i < count && !scan; i++)
            if (claims[i].level >= from_level &&
                !append(MyDatabaseId, claims[i].relid, &claims[i].tid, claims[i].xid, me))
                scan = true;
        if (scan) {
            slot->scan_wanted = true;
            (void)append(MyDatabaseId, InvalidOid, nullptr, InvalidTransactionId, me);
        }
        for (int i = 0; i < nreceipts; i++)
            if (receipts[i].level >= from_level) append_receipt(receipts[i], me);
        count_receipt_claims();
        slot->urgent = true;
        ticket = ++slot->submitted;
        // No settler can start (no worker slot): nobody would settle this soon; do not wait.
        if (slot->starved) ticket = 0;
        wake_for(slot, &to_wake);
    }
    LWLockRelease(shared->lock);
    wake(to_wake);
    return ticket;
}

void hint(Hints& hints) {
    int count = hints.count;
    hints.count = 0;
    if (!shared || !OidIsValid(MyDatabaseId) || count == 0) return;
    uint32 to_wake = no_proc;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    DatabaseSlot* slot = slot_for(MyDatabaseId, true);
    bool added = false;
    for (int h = 0; slot && h < count; h++) {
        bool known = false;
        for (int i = 0; i < shared->request_count && !known; i++) {
            const Request& r = shared->requests[i];
            known = r.database == MyDatabaseId && r.relid == hints.relids[h] &&
                    ItemPointerEquals(const_cast<ItemPointer>(&r.tid), &hints.tids[h]);
        }
        if (known) continue;
        if (!append(MyDatabaseId, hints.relids[h], &hints.tids[h], InvalidTransactionId, no_proc)) slot->scan_wanted = true;
        added = true;
    }
    if (added) {
        slot->urgent = true;
        slot->submitted++;
        wake_for(slot, &to_wake);
    }
    LWLockRelease(shared->lock);
    wake(to_wake);
}

void hint(Oid relid, ItemPointer tid) {
    Hints hints;
    hints.add(relid, *tid);
    hint(hints);
}

void request_sweeps(const int32* queue_ids, int count) {
    if (!shared || !OidIsValid(MyDatabaseId) || count == 0) return;
    uint32 to_wake = no_proc;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    DatabaseSlot* slot = slot_for(MyDatabaseId, true);
    for (int i = 0; slot && i < count; i++) {
        bool known = false;
        for (int j = 0; j < shared->request_count && !known; j++)
            known = shared->requests[j].database == MyDatabaseId && shared->requests[j].sweep_queue == queue_ids[i];
        if (known || !append(MyDatabaseId, InvalidOid, nullptr, InvalidTransactionId, no_proc)) continue;
        shared->requests[shared->request_count - 1].sweep_queue = queue_ids[i];
        slot->submitted++;
    }
    if (slot) wake_for(slot, &to_wake);
    LWLockRelease(shared->lock);
    wake(to_wake);
}

bool wait_settled(uint64 ticket, long timeout_ms) {
    if (!shared || ticket == 0) return true;
    TimestampTz deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), timeout_ms);
    bool done = false;
    for (;;) {
        LWLockAcquire(shared->lock, LW_SHARED);
        DatabaseSlot* slot = slot_for(MyDatabaseId, false);
        // Starved meanwhile (no worker slot for its settler): nobody will settle it soon.
        done = !slot || slot->settled >= ticket || slot->starved;
        LWLockRelease(shared->lock);
        if (done) break;
        long left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), deadline);
        if (left <= 0) break;
        int rc = WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_POSTMASTER_DEATH, Min(left, 10L),
            AQ_WAIT_EVENT("AqSettleAttempts"));
        ResetLatch(MyLatch);
        if (rc & WL_POSTMASTER_DEATH) break;
    }
    SetLatch(MyLatch);  // a wake-up meant for a later wait is not lost
    return done;
}

void register_launcher() {
    // Restarted a second after any exit but a server shutdown (it exits with 1 when terminated).
    BackgroundWorker worker = base::worker_spec("aq_settler_launcher_main", "aq settler launcher",
                                              BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION, 1);
    RegisterBackgroundWorker(&worker);
}

}  // namespace aq::queue::settler
