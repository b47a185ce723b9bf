// See settler.hpp for the protocol and retries.hpp for what settling means.
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
#include "queue/wakeup.hpp"

namespace aq::queue::settler {

namespace {

constexpr int max_databases = 64;
constexpr int max_requests = 8192;
constexpr int max_dequeuers = 4096;
constexpr uint32 no_proc = PG_UINT32_MAX;
constexpr int idle_exit_ms = 3000;
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

struct Dequeuer {
    Oid database;
    TransactionId xid;
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
};

struct Shared {
    LWLock* lock;
    uint32 launcher_procno;
    TransactionId horizon;  // invalid until the launcher ran: every claim counts
    int request_count;
    int dequeuer_count;
    pg_atomic_uint32 starved_slots;  // slots with starved set: 0 is the common, lock-free case
    DatabaseSlot slots[max_databases];
    Request requests[max_requests];
    Dequeuer dequeuers[max_dequeuers];
};

Shared* shared = nullptr;

DatabaseSlot* slot_for(Oid database, bool create) {
    DatabaseSlot* free_slot = nullptr;
    for (auto& slot : shared->slots) {
        if (slot.database == database) return &slot;
        if (!free_slot && slot.database == InvalidOid) free_slot = &slot;
    }
    if (!create || !free_slot) return nullptr;
    *free_slot = DatabaseSlot{database, slot_stopped, no_proc, 0, 0, 0, false, false, false, 0};
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

// Under the lock (exclusive).
void forget_locked(TransactionId xid) {
    for (int i = 0; i < shared->dequeuer_count; i++)
        if (TransactionIdEquals(shared->dequeuers[i].xid, xid)) {
            shared->dequeuers[i] = shared->dequeuers[--shared->dequeuer_count];
            return;
        }
}

// The lock is released by the caller; wakes whoever must act on the slot.
void wake_for(DatabaseSlot* slot, uint32* to_wake) {
    *to_wake = slot->worker_procno != no_proc ? slot->worker_procno
               : slot->state == slot_stopped  ? shared->launcher_procno
                                              : no_proc;
}

}  // namespace

std::size_t shmem_size() {
    return MAXALIGN(sizeof(Shared));
}

void request_lwlocks() {
    RequestNamedLWLockTranche(tranche_name, 1);
}

void shmem_startup() {
    bool found;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = static_cast<Shared*>(ShmemInitStruct("aq settler", shmem_size(), &found));
    if (!found) {
        memset(shared, 0, sizeof(Shared));
        shared->lock = &(GetNamedLWLockTranche(tranche_name))->lock;
        shared->launcher_procno = no_proc;
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
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    bool done = shared->dequeuer_count < max_dequeuers;
    if (done) shared->dequeuers[shared->dequeuer_count++] = Dequeuer{MyDatabaseId, xid};
    LWLockRelease(shared->lock);
    return done;
}

void forget_dequeuers(const TransactionId* xids, int count) {
    if (!shared || count == 0) return;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < count; i++) forget_locked(xids[i]);
    LWLockRelease(shared->lock);
}

bool is_dequeuer(TransactionId xid) {
    if (!shared) return false;
    LWLockAcquire(shared->lock, LW_SHARED);
    bool known = !TransactionIdIsValid(shared->horizon) || TransactionIdPrecedes(xid, shared->horizon);
    for (int i = 0; i < shared->dequeuer_count && !known; i++) known = TransactionIdEquals(shared->dequeuers[i].xid, xid);
    LWLockRelease(shared->lock);
    return known;
}

uint64 submit(const Claim* claims, int count, int from_level, bool scan) {
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

void hint(Oid relid, ItemPointer tid) {
    if (!shared || !OidIsValid(MyDatabaseId)) return;
    uint32 to_wake = no_proc;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    DatabaseSlot* slot = slot_for(MyDatabaseId, true);
    bool known = false;
    for (int i = 0; slot && i < shared->request_count && !known; i++) {
        const Request& r = shared->requests[i];
        known = r.database == MyDatabaseId && r.relid == relid && ItemPointerEquals(const_cast<ItemPointer>(&r.tid), tid);
    }
    if (slot && !known) {
        if (!append(MyDatabaseId, relid, tid, InvalidTransactionId, no_proc)) slot->scan_wanted = true;
        slot->urgent = true;
        slot->submitted++;
        wake_for(slot, &to_wake);
    }
    LWLockRelease(shared->lock);
    wake(to_wake);
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

// ---------------------------------------------------------------- the worker's settling

namespace {

struct QueueTable {
    int32 queue_table_id;
    Oid owner;
    int32 default_exception_id;  // or 0
    char qualified[2 * (2 * NAMEDATALEN + 2) + 2];
    bool deliveries;  // the delivery table of a multi-consumer queue table (deliveries.hpp)
    char messages[2 * (2 * NAMEDATALEN + 2) + 2];  // then: its queue table
};

Datum tid_array(const ItemPointerData* tids, int n) {
    Datum* items = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
    for (int i = 0; i < n; i++) items[i] = PointerGetDatum(&tids[i]);
    return PointerGetDatum(construct_array(items, n, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
}

// Requires SPI.  False if relid is not a queue table of this database.
bool read_queue_table(Oid relid, QueueTable* t) {
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(relid)};
    int rc = SPI_execute_with_args(psprintf(
        "SELECT t.queue_table_id, c.relowner,"
        "       (SELECT e.queue_id FROM aq.queues e WHERE e.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id"
        "           AND e.queue_name OPERATOR(pg_catalog.=) ('aq$_' OPERATOR(pg_catalog.||) t.queue_table"
        "               OPERATOR(pg_catalog.||) '_e')),"
        "       pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
        "         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
        "       c.oid OPERATOR(pg_catalog.<>) t.relid::pg_catalog.oid,"
        "       (SELECT pg_catalog.quote_ident(mn.nspname) OPERATOR(pg_catalog.||) '.'"
        "                 OPERATOR(pg_catalog.||) pg_catalog.quote_ident(mc.relname)"
        "          FROM pg_catalog.pg_class mc JOIN pg_catalog.pg_namespace mn ON mn.oid OPERATOR(pg_catalog.=) mc.relnamespace"
        "         WHERE mc.oid OPERATOR(pg_catalog.=) t.relid::pg_catalog.oid)"
        "  FROM aq.queue_tables t"
        // The queue table, or the delivery table of a multi-consumer one (deliveries.hpp): its
        // rows carry the columns settling updates.
        "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid::pg_catalog.oid%s"
        "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
        " WHERE c.oid OPERATOR(pg_catalog.=) $1 AND c.relkind OPERATOR(pg_catalog.=) 'r'",
        deliveries::available() ? " OR c.oid OPERATOR(pg_catalog.=) t.delivery_relid::pg_catalog.oid" : ""),
        1, types, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler queue table lookup failed: %s", SPI_result_code_string(rc));
    if (SPI_processed == 0) return false;
    HeapTuple row = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    t->queue_table_id = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
    t->owner = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
    Datum e = SPI_getbinval(row, desc, 3, &isnull);
    t->default_exception_id = isnull ? 0 : DatumGetInt32(e);
    strlcpy(t->qualified, SPI_getvalue(row, desc, 4), sizeof t->qualified);
    t->deliveries = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
    char* messages = SPI_getvalue(row, desc, 6);
    strlcpy(t->messages, messages ? messages : "", sizeof t->messages);
    return true;
}

// Runs one statement with tids as $1 as the queue table's owner (see retries.hpp), through
// base::run_as (search_path pinned, restricted, every setting undone); returns SPI_processed,
// the locked TIDs copied into out (if given, in out_context) and the returned q_ids noted for
// wake-ups.
struct OwnerStatement {
    const char* sql;
    int nargs;
    Oid* types;
    Datum* args;
    ItemPointerData* out;
    MemoryContext out_context;
    uint64 processed;
};

void run_owner_statement(void* arg) {
    auto* st = static_cast<OwnerStatement*>(arg);
    int rc = SPI_execute_with_args(st->sql, st->nargs, st->types, st->args, nullptr, false, 0);
    if (rc < 0) elog(ERROR, "aq: settling dequeue attempts failed: %s", SPI_result_code_string(rc));
    st->processed = SPI_processed;
    bool isnull;
    for (uint64 i = 0; i < SPI_processed; i++) {
        Datum v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (isnull) continue;
        if (st->out) {
            MemoryContext previous = MemoryContextSwitchTo(st->out_context);
            st->out[i] = *reinterpret_cast<ItemPointer>(DatumGetPointer(v));
            MemoryContextSwitchTo(previous);
        } else {
            wakeup::note_enqueue(DatumGetInt32(v));
        }
    }
}

uint64 run_as_owner(const QueueTable& t, const char* sql, int nargs, Oid* types, Datum* args,
                    ItemPointerData* out, MemoryContext out_context) {
    OwnerStatement st{sql, nargs, types, args, out, out_context, 0};
    base::RunAs as;
    as.role = t.owner;
    base::run_as(as, run_owner_statement, &st);
    return st.processed;
}

// The lock xids of the current unit (forgotten once it committed).
TransactionId settling_xids[64];
int settling_count = 0;

// Settles the unsettled attempts among tids (all of the table's rows when tids is null) of
// one queue table, in the current transaction.  Returns true if some were left (locked).
// Requires SPI and an active snapshot.
bool settle_table(Oid relid, const ItemPointerData* tids, int ntids) {
    QueueTable t;
    if (!read_queue_table(relid, &t)) return false;
    // Never waits for the table: a transaction that holds it (maybe the one whose abort is
    // waiting for this settle) would make the waiter sit out its wait.  A scan retries later.
    if (!ConditionalLockRelationOid(relid, RowExclusiveLock)) return true;
    Relation rel = table_open(relid, NoLock);
    ItemPointerData* found = nullptr;
    int nfound = 0;
    if (tids) {
        found = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * ntids));
        BlockNumber blocks = RelationGetNumberOfBlocks(rel);
        for (int i = 0; i < ntids; i++) {
            CHECK_FOR_INTERRUPTS();
            if (ItemPointerGetBlockNumber(&tids[i]) >= blocks) continue;
            HeapTupleData tuple;
            tuple.t_self = tids[i];
            Buffer buffer;
            if (!heap_fetch(rel, GetActiveSnapshot(), &tuple, &buffer, false)) continue;
            LockBuffer(buffer, BUFFER_LOCK_SHARE);
            bool unsettled = retries::unsettled_claim(tuple.t_data, &tuple.t_self);
            LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
            ReleaseBuffer(buffer);
            bool duplicate = false;
            for (int j = 0; j < nfound && !duplicate; j++) duplicate = ItemPointerEquals(&found[j], &tuple.t_self);
            if (unsettled && !duplicate) found[nfound++] = tuple.t_self;
        }
    } else {
        // Only row versions with an xmax can hold one.
        char* sql = psprintf("SELECT ctid FROM ONLY %s WHERE xmax OPERATOR(pg_catalog.<>) '0'::pg_catalog.xid", t.qualified);
        int rc = SPI_execute(sql, true, 0);
        if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler scan failed: %s", SPI_result_code_string(rc));
        uint64 n = SPI_processed;
        found = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * Max(n, 1)));
        for (uint64 i = 0; i < n; i++) {
            CHECK_FOR_INTERRUPTS();
            bool isnull;
            ItemPointer tid = reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)));
            if (!isnull && retries::row_holds_unsettled_claim(rel, tid)) found[nfound++] = *tid;
        }
        SPI_freetuptable(SPI_tuptable);
    }
    table_close(rel, NoLock);  // the lock is kept to the end of the transaction
    if (nfound == 0) return false;

    // The lock step, in a subtransaction of its own (retries.hpp, 3: what makes a settle
    // that aborts recognisable again).
    MemoryContext outer_context = CurrentMemoryContext;
    ResourceOwner outer_owner = CurrentResourceOwner;
    auto* locked = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * nfound));
    char* lock_sql = psprintf("SELECT ctid FROM ONLY %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1) FOR UPDATE SKIP LOCKED",
                              t.qualified);
    Oid lock_types[1] = {TIDARRAYOID};
    Datum lock_args[1] = {tid_array(found, nfound)};
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer_context);
    // The lock's xid must count as a dequeuer's: if this settle aborts, its FOR UPDATE member
    // is what keeps the attempt recognisable.
    TransactionId lock_xid = GetCurrentTransactionId();
    if (!register_dequeuer(lock_xid))
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("aq: the registry of dequeuing transactions is full"),
                        errdetail("The settler counts this attempt on its next pass."),
                        errhint("It holds 4096 transactions; the attempt is counted once fewer dequeuing transactions are running.")));
    if (settling_count < int(lengthof(settling_xids))) settling_xids[settling_count++] = lock_xid;
    int nlocked = int(run_as_owner(t, lock_sql, 1, lock_types, lock_args, locked, outer_context));
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(outer_context);
    CurrentResourceOwner = outer_owner;
    if (nlocked == 0) return true;

    Oid types[4] = {TIDARRAYOID, TIMESTAMPTZOID, INT4OID, INT4OID};
    Datum args[4] = {tid_array(locked, nlocked), TimestampTzGetDatum(GetCurrentTimestamp()),
                     Int32GetDatum(t.default_exception_id), Int32GetDatum(t.queue_table_id)};
    // A message names its exception queue; if that is not an exception queue of the same
    // queue table, it goes to the queue table's default one.
    char* count_sql = psprintf(
        "UPDATE ONLY %s m SET retry_count = m.retry_count OPERATOR(pg_catalog.+) 1,"
        "   delay = CASE WHEN q.retry_delay OPERATOR(pg_catalog.>) '0'::pg_catalog.interval"
        "                THEN $2 OPERATOR(pg_catalog.+) q.retry_delay ELSE m.delay END,"
        "   q_id = CASE WHEN m.retry_count OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.>) q.max_retries"
        "               THEN COALESCE((SELECT e.queue_id FROM aq.queues e"
        "                               WHERE e.queue_name OPERATOR(pg_catalog.=) m.exception_queue"
        "                                 AND e.queue_table_id OPERATOR(pg_catalog.=) $4"
        "                                 AND e.queue_type OPERATOR(pg_catalog.=) 'exception_queue'),"
        "                             CASE WHEN $3 OPERATOR(pg_catalog.=) 0 THEN NULL ELSE $3 END, m.q_id)"
        "               ELSE m.q_id END%s"
        "  FROM aq.queues q"
        " WHERE q.queue_id OPERATOR(pg_catalog.=) m.q_id AND q.queue_type OPERATOR(pg_catalog.=) 'normal_queue'"
        "   AND m.ctid OPERATOR(pg_catalog.=) ANY ($1)"
        " RETURNING m.q_id",
        t.qualified,
        // A delivery that moves to an exception queue takes its message with it (deliveries.hpp).
        t.deliveries ? deliveries::keep_message_sql(t.messages, "m",
                                                    "m.retry_count OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.>) q.max_retries")
                     : "");
    (void)run_as_owner(t, count_sql, 4, types, args, nullptr, nullptr);
    // The rest (exception queues, queues dropped since): rewritten, not counted.
    char* rewrite_sql = psprintf(
        "UPDATE ONLY %s SET retry_count = retry_count WHERE ctid OPERATOR(pg_catalog.=) ANY ($1) RETURNING q_id",
        t.qualified);
    (void)run_as_owner(t, rewrite_sql, 1, types, args, nullptr, nullptr);
    return nlocked < nfound;
}

// The queue tables of this database (for a scan).  Requires SPI.
Oid* queue_tables(int* count) {
    int rc = SPI_execute(deliveries::available()
                             ? "SELECT relid::pg_catalog.oid FROM aq.queue_tables UNION ALL"
                               " SELECT delivery_relid::pg_catalog.oid FROM aq.queue_tables WHERE delivery_relid IS NOT NULL"
                             : "SELECT relid::pg_catalog.oid FROM aq.queue_tables",
                         true, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler queue table list failed: %s", SPI_result_code_string(rc));
    Oid* oids = static_cast<Oid*>(palloc(sizeof(Oid) * Max(SPI_processed, 1)));
    *count = 0;
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull;
        Datum v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (!isnull) oids[(*count)++] = DatumGetObjectId(v);
    }
    return oids;
}

bool extension_missing = false;  // the last unit found no aq in this database

// The queue tables whose settle ran over its time budget, and how many times in a row: a table
// whose owner's trigger is slow gets a longer budget each time (so it is settled in the end),
// after the others' requests (a scan retries it).  A few entries; a forgotten one starts again at
// the first budget.
struct Overrun {
    Oid relid;
    int times;
};
Overrun overruns[16];

Overrun* overrun_of(Oid relid, bool create) {
    for (auto& o : overruns)
        if (o.relid == relid) return &o;
    if (!create) return nullptr;
    Overrun* victim = &overruns[0];
    for (auto& o : overruns)
        if (o.times < victim->times) victim = &o;
    *victim = Overrun{relid, 0};
    return victim;
}

// One unit of work in its own transaction: returns true if something was left.  An
// error is logged and counts as left (a scan retries it).
bool run_unit(Oid relid, const ItemPointerData* tids, int ntids, Oid** tables, int* ntables) {
    MemoryContext outer = CurrentMemoryContext;
    volatile bool left = false;
    settling_count = 0;
    PG_TRY();
    {
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, "aq: settling dequeue attempts");
        extension_missing = !OidIsValid(get_extension_oid("aq", true));
        if (!extension_missing) {
            if (tables) {
                int n = 0;
                Oid* oids = queue_tables(&n);
                MemoryContext previous = MemoryContextSwitchTo(outer);
                *tables = static_cast<Oid*>(palloc(sizeof(Oid) * Max(n, 1)));
                memcpy(*tables, oids, sizeof(Oid) * n);
                *ntables = n;
                MemoryContextSwitchTo(previous);
            } else {
                // A time limit: an owner's slow trigger must not hold this database's other
                // queue tables for long (what is left is settled by a later scan, with a
                // longer budget).
                const Overrun* o = overrun_of(relid, false);
                enable_timeout_after(STATEMENT_TIMEOUT, unit_timeout_ms << Min(o ? o->times : 0, 6));
                left = settle_table(relid, tids, ntids);
                disable_timeout(STATEMENT_TIMEOUT, false);
                if (Overrun* done = overrun_of(relid, false)) done->relid = InvalidOid;
            }
        }
        SPI_finish();
        PopActiveSnapshot();
        CommitTransactionCommand();
        forget_dequeuers(settling_xids, settling_count);  // committed: nothing left to recognise
    }
    PG_CATCH();
    {
        HOLD_INTERRUPTS();
        disable_timeout(STATEMENT_TIMEOUT, false);
        // A cancel here is the budget's timer (the message says so; its indicator is already
        // consumed by then): the next settle of the table gets a longer budget.
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        if (error->sqlerrcode == ERRCODE_QUERY_CANCELED && OidIsValid(relid)) overrun_of(relid, true)->times++;
        FreeErrorData(error);
        EmitErrorReport();
        AbortCurrentTransaction();
        FlushErrorState();
        RESUME_INTERRUPTS();
        left = true;
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return left;
}

// The registered xids of the database that did not commit (in the current memory context).
TransactionId* aborted_dequeuers(Oid database, int* count) {
    LWLockAcquire(shared->lock, LW_SHARED);
    int n = 0;
    auto* xids = static_cast<TransactionId*>(palloc(sizeof(TransactionId) * Max(shared->dequeuer_count, 1)));
    for (int i = 0; i < shared->dequeuer_count; i++)
        if (shared->dequeuers[i].database == database) xids[n++] = shared->dequeuers[i].xid;
    LWLockRelease(shared->lock);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (!TransactionIdIsInProgress(xids[i]) && !TransactionIdDidCommit(xids[i])) xids[k++] = xids[i];
    *count = k;
    return xids;
}

DatabaseSlot* my_slot = nullptr;

// The sweeps this settler owes (request_sweeps), each at most once a second per queue: a sweep
// still contended asks again at its commit and runs a second after the last.
struct PendingSweep {
    int32 queue_id;        // 0: free
    TimestampTz not_before;
    TimestampTz last;      // the last sweep of the queue by this settler
};
PendingSweep pending_sweeps[64];

void owe_sweep(int32 queue_id, TimestampTz now) {
    PendingSweep* free_entry = nullptr;
    PendingSweep* oldest = &pending_sweeps[0];
    for (auto& p : pending_sweeps) {
        if (p.queue_id == queue_id) {
            p.not_before = Max(p.not_before, p.last + USECS_PER_SEC);
            if (p.not_before == 0) p.not_before = now;
            return;
        }
        if (!free_entry && p.queue_id == 0) free_entry = &p;
        if (p.queue_id == 0 || p.last < oldest->last) oldest = &p;
    }
    // Full: the entry swept longest ago makes room (its queue only loses that memory).
    PendingSweep* e = free_entry ? free_entry : oldest;
    *e = PendingSweep{queue_id, now, 0};
}

bool sweeps_owed(TimestampTz* next) {
    bool any = false;
    for (const auto& p : pending_sweeps)
        if (p.queue_id != 0 && p.not_before != 0) {
            if (!any || p.not_before < *next) *next = p.not_before;
            any = true;
        }
    return any;
}

// One owed sweep in its own transaction; an error is logged (the next contended sweep asks again).
void run_sweep_unit(int32 queue_id) {
    MemoryContext outer = CurrentMemoryContext;
    PG_TRY();
    {
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, "aq: removing delivered messages");
        if (OidIsValid(get_extension_oid("aq", true))) queue::settler_sweep(queue_id);
        SPI_finish();
        PopActiveSnapshot();
        CommitTransactionCommand();
    }
    PG_CATCH();
    {
        HOLD_INTERRUPTS();
        MemoryContextSwitchTo(outer);
        EmitErrorReport();
        AbortCurrentTransaction();
        FlushErrorState();
        RESUME_INTERRUPTS();
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    pgstat_report_activity(STATE_IDLE, nullptr);
}

void worker_exit(int, Datum) {
    if (!my_slot) return;
    uint32 to_wake = no_proc;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (my_slot->state == slot_starting) my_slot->failed_starts++;
    my_slot->state = slot_stopped;
    my_slot->worker_procno = no_proc;
    if (my_slot->submitted > my_slot->settled) to_wake = shared->launcher_procno;
    LWLockRelease(shared->lock);
    wake(to_wake);
}

void launcher_exit(int, Datum) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->launcher_procno = no_proc;
    LWLockRelease(shared->lock);
}

// Every database may hold attempts left by a crash: scan each once.
void request_startup_scans() {
    TransactionId next = ReadNextTransactionId();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    // Once per shared memory: a launcher restarted by the postmaster (no crash) keeps it.
    if (!TransactionIdIsValid(shared->horizon)) shared->horizon = next;
    LWLockRelease(shared->lock);
    StartTransactionCommand();
    Relation rel = table_open(DatabaseRelationId, AccessShareLock);
    TableScanDesc scan = table_beginscan_catalog(rel, 0, nullptr);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (HeapTuple tuple; (tuple = heap_getnext(scan, ForwardScanDirection)) != nullptr;) {
        auto* db = reinterpret_cast<Form_pg_database>(GETSTRUCT(tuple));
        if (strcmp(NameStr(db->datname), "template0") == 0) continue;
        DatabaseSlot* slot = slot_for(db->oid, true);
        if (!slot) break;
        slot->scan_wanted = true;
        slot->submitted++;
    }
    LWLockRelease(shared->lock);
    table_endscan(scan);
    table_close(rel, AccessShareLock);
    CommitTransactionCommand();
}

BackgroundWorkerHandle* handles[max_databases];

void start_worker(int i) {
    DatabaseSlot& slot = shared->slots[i];
    BackgroundWorker worker = base::worker_spec("aq_settler_main", "aq settler",
                                              BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
                                              BGW_NEVER_RESTART);
    snprintf(worker.bgw_name, BGW_MAXLEN, "aq settler for database %u", slot.database);
    worker.bgw_main_arg = ObjectIdGetDatum(slot.database);
    worker.bgw_notify_pid = MyProcPid;
    slot.state = slot_starting;
    slot.last_start = GetCurrentTimestamp();
    if (handles[i]) pfree(handles[i]);
    handles[i] = nullptr;
    if (!RegisterDynamicBackgroundWorker(&worker, &handles[i])) {
        slot.state = slot_stopped;
        handles[i] = nullptr;
        // No worker slot (max_worker_processes): rollbacks stop waiting for this settler and
        // dequeues take the rows it would have settled (their attempts go uncounted) until one
        // starts.  Said once per stretch.
        if (!slot.starved) {
            slot.starved = true;
            pg_atomic_fetch_add_u32(&shared->starved_slots, 1);
            ereport(LOG, (errmsg("aq: no background worker slot is free for the settler of database %u", slot.database),
                          errdetail("Until one is, the attempts of rolled-back dequeues in that database are not counted."),
                          errhint("Raise max_worker_processes: aq needs three workers of its own and one per busy"
                                  " database while it settles or drains.")));
        }
    }
}

}  // namespace

}  // namespace aq::queue::settler

void aq_settler_launcher_main(Datum) {
    using namespace aq::queue::settler;
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    BackgroundWorkerUnblockSignals();
    if (!shared) proc_exit(1);
    before_shmem_exit(launcher_exit, 0);
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->launcher_procno = aq::compat::my_proc_number();
    LWLockRelease(shared->lock);
    request_startup_scans();
    while (!ShutdownRequestPending) {
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        TimestampTz now = GetCurrentTimestamp();
        // Few workers at a time: the scan after a start visits every database, and the
        // background worker slots are shared with everything else.
        int active = 0;
        LWLockAcquire(shared->lock, LW_SHARED);
        for (const auto& slot : shared->slots) active += slot.database != InvalidOid && slot.state != slot_stopped;
        LWLockRelease(shared->lock);
        // Two passes: databases with requests first (a rollback waits, a dequeue skipped a row),
        // then those with only a scan to do (the scans after a crash restart visit every one).
        for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < max_databases; i++) {
            // A worker that never ran (fork failed, the database is gone) leaves its slot
            // "starting": count the failure.
            bool stopped = false;
            if (handles[i]) {
                pid_t pid;
                stopped = GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED;
            }
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            DatabaseSlot& slot = shared->slots[i];
            if (stopped && slot.state == slot_starting) {
                slot.state = slot_stopped;
                slot.failed_starts++;
            }
            if (slot.state == slot_starting && !handles[i] &&
                TimestampDifferenceExceeds(slot.last_start, now, 60000))
                slot.state = slot_stopped;  // a launcher that restarted lost its handles
            bool start = false;
            if (slot.database != InvalidOid && slot.state == slot_stopped && slot.submitted > slot.settled) {
                if (slot.failed_starts >= max_failed_starts) {
                    ereport(LOG, (errmsg("aq: the settler of database %u could not start; its requests are dropped",
                                         slot.database)));
                    int kept = 0;
                    for (int r = 0; r < shared->request_count; r++)
                        if (shared->requests[r].database != slot.database) shared->requests[kept++] = shared->requests[r];
                    shared->request_count = kept;
                    if (slot.starved) pg_atomic_fetch_sub_u32(&shared->starved_slots, 1);
                    slot = DatabaseSlot{InvalidOid, slot_stopped, no_proc, 0, 0, 0, false, false, false, 0};
                } else {
                    long interval = long(start_interval_ms) << Min(slot.failed_starts, 6u);
                    start = slot.failed_starts == 0 || TimestampDifferenceExceeds(slot.last_start, now, int(interval));
                }
            }
            if (start && (pass == 0 ? slot.urgent && active < max_urgent_workers : active < max_workers)) {
                start_worker(i);
                active++;
            }
            LWLockRelease(shared->lock);
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, start_interval_ms,
            AQ_WAIT_EVENT("AqSettlerLauncherMain"));
    }
    // Terminated (pg_terminate_backend, or a shutdown): exit code 1, so that the postmaster starts
    // it again (it does not at a shutdown); code 0 would unregister it for good.
    proc_exit(1);
}

void aq_settler_main(Datum database_arg) {
    using namespace aq::queue::settler;
    Oid database = DatumGetObjectId(database_arg);
    // Terminated at once, even inside an owner's trigger (its transaction aborts; an attempt it
    // was settling stays recognisable and is settled again: retries.hpp, 3).
    pqsignal(SIGTERM, die);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    BackgroundWorkerUnblockSignals();
    if (!shared) proc_exit(1);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    DatabaseSlot* slot = slot_for(database, false);
    bool ours = slot && slot->state == slot_starting;
    if (ours) slot->worker_procno = aq::compat::my_proc_number();
    LWLockRelease(shared->lock);
    if (!ours) proc_exit(0);
    my_slot = slot;
    before_shmem_exit(worker_exit, 0);
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, BGWORKER_BYPASS_ALLOWCONN);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    slot->state = slot_running;
    slot->failed_starts = 0;
    if (slot->starved) {
        slot->starved = false;
        pg_atomic_fetch_sub_u32(&shared->starved_slots, 1);
    }
    LWLockRelease(shared->lock);
    aq::commit::committer::exempt_this_process();  // aq's commit modes are the users'
    pgstat_report_appname("aq settler");

    MemoryContext round_context = AllocSetContextCreate(TopMemoryContext, "aq settler round", ALLOCSET_DEFAULT_SIZES);
    TimestampTz idle_since = GetCurrentTimestamp();
    TimestampTz rescan_at = 0;
    int rounds_left = 0;
    for (;;) {
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ShutdownRequestPending) break;
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        MemoryContextReset(round_context);
        MemoryContext outer = MemoryContextSwitchTo(round_context);
        // Take this database's requests.
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        int n = 0;
        auto* taken = static_cast<Request*>(palloc(sizeof(Request) * Max(shared->request_count, 1)));
        int kept = 0;
        for (int i = 0; i < shared->request_count; i++) {
            if (shared->requests[i].database == database)
                taken[n++] = shared->requests[i];
            else
                shared->requests[kept++] = shared->requests[i];
        }
        shared->request_count = kept;
        // Sweep requests go to this settler's own list; the rest are claims, hints and scans.
        TimestampTz taken_at = GetCurrentTimestamp();
        int kept_requests = 0;
        for (int i = 0; i < n; i++) {
            if (taken[i].sweep_queue != 0)
                owe_sweep(taken[i].sweep_queue, taken_at);
            else
                taken[kept_requests++] = taken[i];
        }
        n = kept_requests;
        for (int i = 0; i < n; i++)
            if (!OidIsValid(taken[i].relid)) slot->scan_wanted = false;  // a scan request: this round scans
        // Requests first: a scan (every queue table) waits for a round without them.
        bool scan = n == 0 && slot->scan_wanted;
        if (scan) slot->scan_wanted = false;
        slot->urgent = false;
        uint64 upto = slot->submitted;
        TimestampTz next_sweep = 0;
        bool owed = sweeps_owed(&next_sweep);
        bool quiet = n == 0 && !scan && !slot->scan_wanted && slot->settled == upto;
        bool idle = quiet && !owed;
        TimestampTz now = GetCurrentTimestamp();
        if (idle && !rescan_at && TimestampDifferenceExceeds(idle_since, now, idle_exit_ms)) {
            slot->state = slot_stopped;
            slot->worker_procno = no_proc;
            my_slot = nullptr;
            LWLockRelease(shared->lock);
            proc_exit(0);
        }
        LWLockRelease(shared->lock);
        if (rescan_at && now >= rescan_at) {
            scan = true;
            rescan_at = 0;
        }
        // The owed sweeps that are due (each in its own transaction).
        if (owed) {
            for (auto& p : pending_sweeps)
                if (p.queue_id != 0 && p.not_before != 0 && p.not_before <= now) {
                    p.not_before = 0;
                    p.last = GetCurrentTimestamp();
                    run_sweep_unit(p.queue_id);
                }
            owed = sweeps_owed(&next_sweep);
            idle_since = GetCurrentTimestamp();
        }
        if (quiet && !scan) {
            MemoryContextSwitchTo(outer);
            long wait_ms = rescan_at ? Max(1L, TimestampDifferenceMilliseconds(now, rescan_at)) : 1000L;
            if (owed) wait_ms = Min(wait_ms, Max(1L, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_sweep)));
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
                AQ_WAIT_EVENT("AqSettlerMain"));
            continue;
        }

        bool left = false;
        for (int i = 0; i < n; i++)
            if (!OidIsValid(taken[i].relid)) scan = true;
        // Registered xids that had aborted before the scan: a clean scan settled all their claims.
        int naborted = 0;
        TransactionId* aborted_before = scan ? aborted_dequeuers(database, &naborted) : nullptr;
        if (scan) {
            Oid* tables = nullptr;
            int ntables = 0;
            left |= run_unit(InvalidOid, nullptr, 0, &tables, &ntables);
            for (int i = 0; i < ntables; i++) left |= run_unit(tables[i], nullptr, 0, nullptr, nullptr);
        } else {
            // Per queue table: its requested TIDs.
            auto* done = static_cast<bool*>(palloc0(sizeof(bool) * Max(n, 1)));
            auto* tids = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * Max(n, 1)));
            for (int i = 0; i < n; i++) {
                if (done[i]) continue;
                int k = 0;
                for (int j = i; j < n; j++)
                    if (!done[j] && taken[j].relid == taken[i].relid) {
                        tids[k++] = taken[j].tid;
                        done[j] = true;
                    }
                left |= run_unit(taken[i].relid, tids, k, nullptr, nullptr);
            }
        }
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        if (slot->settled < upto) slot->settled = upto;
        if (!left) {
            for (int i = 0; i < n; i++)
                if (TransactionIdIsValid(taken[i].xid)) forget_locked(taken[i].xid);
        }
        LWLockRelease(shared->lock);
        if (scan && !left) forget_dequeuers(aborted_before, naborted);
        for (int i = 0; i < n; i++) {
            bool seen = false;
            for (int j = 0; j < i && !seen; j++) seen = taken[j].requester == taken[i].requester;
            if (!seen) wake(taken[i].requester);
        }
        // Rows left (locked, or a settle that keeps failing): scan again, backing off from a
        // second to a minute.
        rounds_left = left ? rounds_left + 1 : 0;
        if (left)
            rescan_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), long(rescan_ms) << Min(rounds_left - 1, 6));
        idle_since = GetCurrentTimestamp();
        // A database without aq (the scan after a start visits every database): leave at
        // once, so that it is not kept busy (CREATE DATABASE from it as a template).
        if (extension_missing && !left) idle_since = 0;
        MemoryContextSwitchTo(outer);
    }
    proc_exit(0);
}
