// The settler's shared memory (settler.hpp, the protocol's first point): its tables, and the
// helpers that read and write them.  Internal to the settler (settler_shared.cpp, settler.cpp).
// Everything here is under shared->lock, except the registry partitions (each under its own
// lock) and the atomics.
#pragma once

extern "C" {
#include "postgres.h"
#include "port/atomics.h"
#include "storage/itemptr.h"
#include "storage/lwlock.h"
#include "datatype/timestamp.h"
}

#include "queue/time_manager.hpp"

namespace aq::queue::settler {

constexpr int max_databases = 64;
constexpr int max_requests = 8192;
constexpr int max_dequeuers = 4096;
constexpr int max_receipt_claims = 1024;
constexpr int receipt_claim_runs = 16;  // a receipt with more runs takes several entries
constexpr int registry_partitions = 16;  // the registry of dequeuing transactions, by xid: one lock each
constexpr uint32 no_proc = PG_UINT32_MAX;
constexpr int idle_exit_ms = 3000;
constexpr long busy_retry_ms = 50;  // an aborted receipt whose consumer's walk lock was busy (once_walk.hpp, 5)
constexpr int rescan_ms = 1000;
constexpr int start_interval_ms = 1000;
constexpr uint32 max_failed_starts = 3;
constexpr int max_workers = 3;         // settlers at once for scans only
constexpr int max_urgent_workers = 6;  // ... and for databases with requests (a rollback, a hint)
constexpr int unit_timeout_ms = 1000;  // one queue table's settle, owner triggers included: the
                                       // first budget, doubled per timeout in a row (to 64 s)
const char* const tranche_name = "aq settler";

enum : uint32 { slot_stopped = 0, slot_starting = 1, slot_running = 2 };

struct Request {
    Oid database;
    Oid relid;  // InvalidOid: a scan of the database
    ItemPointerData tid;
    TransactionId xid;  // the claiming (sub)transaction, or invalid (a hint)
    uint32 requester;   // procno to wake, or no_proc
    int32 sweep_queue;  // not 0: a sweep of this multi-consumer queue (relid and tid unused)
};

// An aborted receipt (settler.hpp, Receipt), or a part of one, waiting to be written as an attempt.
struct ReceiptClaim {
    uint64 id;
    bool taken;  // a settler is writing it: it stays until that commits (or is given back)
    TimestampTz not_before;  // given back after a failure: taken again from then on
    Oid database;
    Oid receipts;
    int32 queue_id;
    TransactionId xid;
    uint32 requester;
    int32 hi_priority;
    TimestampTz hi_enq_time;
    int64 hi_msgid;
    char consumer[NAMEDATALEN];
    int npairs;
    int64 pairs[2 * receipt_claim_runs];
};

struct Dequeuer {
    Oid database;
    TransactionId xid;
};

// The time manager's state of a database (time_manager.hpp): plain data under the lock.
struct TimeState {
    TimestampTz next_due;    // 0: none known
    bool round_running;      // a round is under way (time_manager.hpp, 3)
    TimestampTz lowered_in_round;  // the earliest time lowered while it runs (0: none)
    TimestampTz served_upto; // the start of the last round that did all its work (0: none yet)
    int failures_in_row;     // rounds in a row with a failed unit (their budgets double)
    time_manager::Tally tally;  // aq.queue_monitor
};

struct DatabaseSlot {
    Oid database;  // InvalidOid: free
    uint32 state;
    uint32 worker_procno;
    uint32 failed_starts;
    uint64 submitted;
    uint64 settled;
    bool scan_wanted;
    bool urgent;     // requests (a rollback's claims, a dequeue's hint) wait: started first
    bool starved;    // no background worker slot was free for its settler (a start failed)
    TimestampTz last_start;
    TimeState times;  // value-initialised with the slot
};

// One partition of the registry of dequeuing transactions (xid % registry_partitions), under its
// own lock: registering a claiming transaction and forgetting it at its commit take only that
// lock, never the settler's, so concurrent consumers do not queue on one cluster-wide lock.  Lock
// order: the settler's lock, then a partition's; never the other way.
struct Registry {
    LWLock* lock;
    int count;
    Dequeuer entries[max_dequeuers / registry_partitions];
};

struct Shared {
    LWLock* lock;
    uint32 launcher_procno;
    pg_atomic_uint32 horizon;  // a TransactionId; invalid until the launcher ran: every claim counts
    int request_count;
    pg_atomic_uint32 starved_slots;  // slots with starved set: 0 is the common, lock-free case
    int time_waiting;  // databases due for the time manager that the launcher found no room for
    DatabaseSlot slots[max_databases];
    Request requests[max_requests];
    int receipt_count;
    uint64 next_receipt_id;
    pg_atomic_uint32 receipts_pending;  // receipt_count, read without the lock (0: nothing to look at)
    ReceiptClaim receipt_claims[max_receipt_claims];
    Registry registry[registry_partitions];
};

extern Shared* shared;

// The database's slot (create: make one if there is room); under the lock.
DatabaseSlot* slot_for(Oid database, bool create);
// Sets the latch of procno (no_proc: nobody).
void wake(uint32 procno);
// Appends a request (under the lock); false when the array is full.
bool append(Oid database, Oid relid, const ItemPointerData* tid, TransactionId xid, uint32 requester);
// Forgets a registered dequeuing xid; takes its partition's lock (the caller may hold the settler's).
void forget_one(TransactionId xid);
// Whom to wake for work on the slot (the lock is released by the caller).
void wake_for(DatabaseSlot* slot, uint32* to_wake);

// A settler's unit of work (settle.cpp): the claims at tids of queue table relid (InvalidOid: none)
// settled in a transaction of its own, as the table's owner, on the table's time budget; with
// tables, the database's queue tables listed too (for a scan).
struct UnitResult {
    bool left;               // something was left (an error is logged and counts as left: a scan retries it)
    bool extension_missing;  // the database has no aq
};
UnitResult run_unit(Oid relid, const ItemPointerData* tids, int ntids, Oid** tables, int* ntables);
// The same for aborted receipts of one receipts table: each written as an attempt (once_walk.hpp, 5);
// written[i] says whether claims[i] was (all false when the unit failed).
UnitResult run_receipts_unit(Oid receipts, const ReceiptClaim* claims, int n, bool* written);
// Under the lock: the aborted receipts claims[i] are written (written[i]: removed) or given back
// (taken again from retry_at).
void finish_receipt_claims(const ReceiptClaim* claims, int n, const bool* written, TimestampTz retry_at);
// Under the lock: receipts_pending follows receipt_count.
void count_receipt_claims();

}  // namespace aq::queue::settler
