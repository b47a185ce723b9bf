// Immediate visibility: the shared table and the caller's side (immediate.hpp has the protocol;
// the worker is immediate_worker.cpp).
#include "queue/immediate_shared.hpp"

extern "C" {
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "storage/ipc.h"
#include "storage/lmgr.h"
#include "storage/shmem.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include <cstring>
#include <string>

#include "base/guard.hpp"
#include "base/spi.hpp"
#include "base/worker_spec.hpp"
#include "commit/settings.hpp"
#include "compat/proc.hpp"
#include "compat/wait_event.hpp"
#include "queue/catalog.hpp"

namespace aq::queue::immediate {

Shared* shared = nullptr;
int timeout_ms = 10000;

namespace {

constexpr const char* tranche_name = "aq_immediate";

int slot_count() { return MaxBackends; }

}  // namespace

std::size_t shmem_size() { return add_size(offsetof(Shared, slots), mul_size(sizeof(Slot), slot_count())); }

void request_lwlocks() { RequestNamedLWLockTranche(tranche_name, 1); }

void shmem_startup() {
    bool found;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = static_cast<Shared*>(ShmemInitStruct("aq immediate", shmem_size(), &found));
    if (!found) {
        memset(shared, 0, shmem_size());
        shared->lock = &GetNamedLWLockTranche(tranche_name)->lock;
        shared->nslots = slot_count();
    }
    LWLockRelease(AddinShmemInitLock);
}

void define_settings() {
    DefineCustomIntVariable("aq.immediate_timeout",
                            "Longest time an immediate enqueue's own transaction may wait for a lock.",
                            "Its lock_timeout; the whole enqueue may take twice as long (its statement_timeout).  The "
                            "caller gets the error.",
                            &timeout_ms, 10000,
                            10, 60 * 1000, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
}

Pool* pool_of(Oid database) {
    for (auto& p : shared->pools)
        if (p.database == database) return &p;
    return nullptr;
}

bool process_is(uint32 procno, int pid) {
    return pid != 0 && ProcGlobal->allProcs[procno].pid == pid;
}

namespace {

// ---- the request segment (protocol 2)

// Into the slot when it fits, else into a new segment (*segment).
RequestHeader* build_request(const EnqueueRequest& r, int synchronous_commit, Slot& slot, dsm_segment** segment) {
    int count = ArrayGetNItems(ARR_NDIM(r.payloads), ARR_DIMS(r.payloads));
    const char* path = GetConfigOption("search_path", false, false);
    Size name_len = strlen(r.queue_name) + 1;
    Size path_len = strlen(path ? path : "") + 1;
    Size payload_len = VARSIZE(r.payloads);
    Size props_len = r.properties ? VARSIZE(r.properties) : 0;
    Size total = MAXALIGN(sizeof(RequestHeader));
    Size name_at = total;
    total += MAXALIGN(name_len);
    Size path_at = total;
    total += MAXALIGN(path_len);
    Size payload_at = total;
    total += MAXALIGN(payload_len);
    Size props_at = total;
    total += MAXALIGN(props_len);
    Size ids_at = total;
    total += MAXALIGN(sizeof(int64) * Max(count, 1));

    *segment = total > inline_bytes ? dsm_create(total, 0) : nullptr;
    auto* h = static_cast<RequestHeader*>(*segment ? dsm_segment_address(*segment) : static_cast<void*>(slot.data));
    memset(h, 0, sizeof(RequestHeader));
    char* base = reinterpret_cast<char*>(h);
    h->total = total;
    h->role = GetUserId();
    h->payload_type = r.payload_type;
    h->count = count;
    h->synchronous_commit = synchronous_commit;
    h->timeout_ms = timeout_ms;
    h->queue_name_at = name_at;
    h->search_path_at = path_at;
    h->payloads_at = payload_at;
    h->properties_at = r.properties ? props_at : 0;
    h->ids_at = ids_at;
    memcpy(base + name_at, r.queue_name, name_len);
    memcpy(base + path_at, path ? path : "", path_len);
    memcpy(base + payload_at, r.payloads, payload_len);
    if (r.properties) memcpy(base + props_at, r.properties, props_len);
    return h;
}

// ---- refusals (protocol 3)

void refuse_conflicts(const char* queue_name) {
    // The queue table: from this backend's lookup cache when it has the queue (a table that
    // another transaction has since replaced is missed here; the worker's lock wait is then
    // bounded by aq.immediate_timeout), else looked up.
    Oid relid = InvalidOid;
    if (!cached_table(queue_name, &relid)) {
        QueueInfo q;
        base::spi::connect();
        if (lookup(queue_name, q)) relid = q.relid;
        SPI_finish();
    }
    if (!OidIsValid(relid)) return;  // the worker reports it as an ON_COMMIT enqueue would
    // A lock of this transaction that the worker's ROW EXCLUSIVE would wait for.
    Relation rel = RelationIdGetRelation(relid);
    if (!RelationIsValid(rel)) return;
    bool conflicting = CheckRelationLockedByMe(rel, ShareLock, true);
    bool created_here = rel->rd_createSubid != InvalidSubTransactionId;
    const char* table = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
                                                   RelationGetRelationName(rel));
    RelationClose(rel);
    if (created_here)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("an immediate enqueue into queue \"%s\" cannot see this transaction's changes", queue_name),
                        errdetail("This transaction created the queue table."),
                        errhint("The immediate enqueue runs in a transaction of its own: commit first, or enqueue "
                                "with visibility => 'on_commit'.")));
    if (conflicting)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                        errmsg("an immediate enqueue into queue \"%s\" would wait for this transaction", queue_name),
                        errdetail("This transaction holds a lock on the queue table %s that the enqueue's own "
                                  "transaction needs.",
                                  table),
                        errhint("Enqueue with visibility => 'on_commit', or commit first.")));
    bool catalog_changed = false;
    Oid aq_namespace = get_namespace_oid("aq", true);
    for (const char* table : {"queues", "queue_tables", "subscribers"}) {
        Oid relid = OidIsValid(aq_namespace) ? get_relname_relid(table, aq_namespace) : InvalidOid;
        Relation catalog = OidIsValid(relid) ? RelationIdGetRelation(relid) : nullptr;
        if (!RelationIsValid(catalog)) continue;
        if (CheckRelationLockedByMe(catalog, RowExclusiveLock, true)) catalog_changed = true;
        RelationClose(catalog);
    }
    if (catalog_changed)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("an immediate enqueue into queue \"%s\" cannot see this transaction's changes", queue_name),
                        errdetail("This transaction changed aq's queues, queue tables or subscribers."),
                        errhint("The immediate enqueue runs in a transaction of its own: commit first, or enqueue "
                                "with visibility => 'on_commit'.")));
}

// ---- the pool (protocol 4)

// Starts this database's worker when none is running or starting.  Call with the lock held;
// returns with it held.
void ensure_worker() {
    if (pool_of(MyDatabaseId)) return;
    Pool* free_pool = pool_of(InvalidOid);
    if (!free_pool) {
        Slot& mine = shared->slots[compat::my_backend_slot()];
        mine.state = slot_free;
        LWLockRelease(shared->lock);
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("too many databases use immediate enqueues at once"),
                        errdetail("At most %d databases have an immediate worker at a time.", max_pools)));
    }
    free_pool->database = MyDatabaseId;
    free_pool->pid = 0;
    free_pool->starting = true;
    LWLockRelease(shared->lock);

    BackgroundWorker worker = base::worker_spec("aq_immediate_main", "aq immediate",
                                              BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
                                              BGW_NEVER_RESTART);
    snprintf(worker.bgw_name, BGW_MAXLEN, "aq immediate for database %u", MyDatabaseId);
    worker.bgw_main_arg = ObjectIdGetDatum(MyDatabaseId);
    worker.bgw_notify_pid = MyProcPid;
    BackgroundWorkerHandle* handle = nullptr;
    bool started = RegisterDynamicBackgroundWorker(&worker, &handle);
    pid_t pid = 0;
    // Interrupts wait until the request can be withdrawn (the wait loop): a cancel acted on here
    // would leave it queued, to be committed after the caller was told it failed.
    HOLD_INTERRUPTS();
    if (started) started = WaitForBackgroundWorkerStartup(handle, &pid) == BGWH_STARTED;
    RESUME_INTERRUPTS();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (started) {
        // A worker that dies before it claims its entry must not leave the entry starting for
        // ever: the wait loop frees an entry whose starting pid is gone (4).
        if (Pool* p = pool_of(MyDatabaseId); p && p->starting) p->pid = pid;
    } else {
        if (Pool* p = pool_of(MyDatabaseId); p && p->starting) p->database = InvalidOid;
        shared->slots[compat::my_backend_slot()].state = slot_free;
        LWLockRelease(shared->lock);
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("no background worker slot is free for an immediate enqueue"),
                        errdetail("An immediate enqueue runs in aq's worker of its database, which could not start."),
                        errhint("Raise max_worker_processes (aq needs one more worker per database using immediate "
                                "enqueues), or enqueue with visibility => 'on_commit'.")));
    }
}

// ---- the wait (protocol 6, 7)

enum class Outcome { committed, failed, lost };

// Waits for the request in this backend's slot; frees the slot.  Raises on a cancel while queued.
Outcome wait_for(bool* cancel_seen, bool* xid_written) {
    Slot& mine = shared->slots[compat::my_backend_slot()];
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        SlotState state = mine.state;
        if (state == slot_queued) {
            if (QueryCancelPending || ProcDiePending) {
                mine.state = slot_free;  // withdrawn: never run
                LWLockRelease(shared->lock);
                CHECK_FOR_INTERRUPTS();
                return Outcome::lost;  // an interrupt that CHECK_FOR_INTERRUPTS did not act on
            }
            if (Pool* p = pool_of(MyDatabaseId); p && p->starting && p->pid != 0 && kill(p->pid, 0) != 0)
                p->database = InvalidOid;  // its worker died before it claimed it
            ensure_worker();
        }
        Outcome outcome = Outcome::committed;
        bool finished = false;

        if (state == slot_done) {
            finished = true;
        } else if (state == slot_running) {
            Pool* p = pool_of(MyDatabaseId);
            if (!p || p->pid != mine.worker_pid || !process_is(p->procno, p->pid)) {
                finished = true;  // the worker is gone: its transaction is over
                outcome = Outcome::lost;
            }
        }
        TransactionId xid = mine.xid;
        if (finished) mine.state = slot_free;
        LWLockRelease(shared->lock);
        if (finished) {
            // Written before the worker's commit: whether it committed is the outcome.
            *xid_written = TransactionIdIsValid(xid);
            if (TransactionIdIsValid(xid)) return TransactionIdDidCommit(xid) ? Outcome::committed : Outcome::lost;
            return outcome;  // nothing was written: done (every request failed, or none had rows) or lost
        }
        if (QueryCancelPending) *cancel_seen = true;
        // Terminated while the worker runs the request: leave at once (the worker frees the slot
        // of a caller that is gone, 8); the request commits or not without us.
        if (ProcDiePending) CHECK_FOR_INTERRUPTS();
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
                        AQ_WAIT_EVENT("AqImmediateWait"));
        ResetLatch(MyLatch);
    }
}

struct CallState {
    const EnqueueRequest* request;
    int synchronous_commit;
    bool xid_written;  // the worker's transaction wrote (and committed) something
    ArrayType* ids;
    MemoryContext result_context;
};

void run_immediate(void* arg) {
    auto* call = static_cast<CallState*>(arg);
    const EnqueueRequest& r = *call->request;
    if (!shared)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("immediate visibility needs aq in shared_preload_libraries"),
                        errhint("Add aq to shared_preload_libraries and restart the server.")));
    int my_slot = compat::my_backend_slot();
    if (my_slot < 0) elog(ERROR, "aq: an immediate enqueue needs a backend slot");
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION),
                        errmsg("cannot enqueue during recovery")));
    PreventCommandIfReadOnly("an immediate enqueue");
    refuse_conflicts(r.queue_name);

    // The slot may still hold a request of a backend that had this slot before and is gone: a
    // worker still running it frees it after its round (protocol 8); one queued or done is ours.
    Slot& mine = shared->slots[my_slot];
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        bool usable = mine.state != slot_running;
        if (usable) mine.state = slot_free;
        LWLockRelease(shared->lock);
        if (usable) break;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, AQ_WAIT_EVENT("AqImmediateWait"));
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
    dsm_segment* segment = nullptr;
    RequestHeader* h = build_request(r, call->synchronous_commit, mine, &segment);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    mine.sequence = ++shared->sequence;
    mine.state = slot_queued;
    mine.database = MyDatabaseId;
    mine.caller_pid = MyProcPid;
    mine.caller_procno = compat::my_proc_number();
    mine.in_segment = segment != nullptr;
    mine.segment = segment ? dsm_segment_handle(segment) : 0;
    mine.worker_pid = 0;
    mine.xid = InvalidTransactionId;
    ensure_worker();
    Pool* p = pool_of(MyDatabaseId);
    int worker_procno = p && p->pid ? static_cast<int>(p->procno) : -1;
    LWLockRelease(shared->lock);
    if (worker_procno >= 0) SetLatch(compat::proc_latch(static_cast<uint32>(worker_procno)));

    bool cancel_seen = false;
    Outcome outcome = wait_for(&cancel_seen, &call->xid_written);
    const char* base = reinterpret_cast<const char*>(h);
    if (outcome == Outcome::committed && h->failed) outcome = Outcome::failed;
    // The worker committed without waiting for the flush: the caller waits for it, as its own
    // commit mode says (protocol 6).
    if (outcome == Outcome::committed && call->xid_written &&
        h->synchronous_commit > static_cast<int>(commit::SyncCommit::off))
        XLogFlush(XLogRecPtrIsInvalid(h->flush_to) ? GetXLogInsertRecPtr() : h->flush_to);  // invalid: the worker
                                                                                           // ended after its commit
    if (outcome == Outcome::committed) {
        MemoryContext old = MemoryContextSwitchTo(call->result_context);
        Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * Max(h->count, 1)));
        const auto* raw = reinterpret_cast<const int64*>(base + h->ids_at);
        for (int i = 0; i < h->count; i++) ids[i] = Int64GetDatum(raw[i]);
        call->ids = h->count > 0 ? construct_array(ids, h->count, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)
                                 : construct_empty_array(INT8OID);
        MemoryContextSwitchTo(old);
    }
    if (cancel_seen || QueryCancelPending) {
        // The work ran while a cancel was pending: say what happened to it (protocol 7).
        QueryCancelPending = false;
        char first[32] = "";
        if (outcome == Outcome::committed && h->count > 0)
            snprintf(first, sizeof first, INT64_FORMAT, reinterpret_cast<const int64*>(base + h->ids_at)[0]);
        int count = h->count;
        if (segment) dsm_detach(segment);
        if (outcome == Outcome::committed)
            ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("canceling statement due to user request"),
                            errdetail("The immediate enqueue had committed before the cancel: %d message(s), the "
                                      "first with msgid %s.",
                                      count, first)));
        ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("canceling statement due to user request"),
                        errdetail("The immediate enqueue did not commit.")));
    }
    if (outcome == Outcome::failed) {
        int code = h->sqlerrcode;
        char message[sizeof h->message], detail[sizeof h->detail], hint[sizeof h->hint];
        memcpy(message, h->message, sizeof message);
        memcpy(detail, h->detail, sizeof detail);
        memcpy(hint, h->hint, sizeof hint);
        if (segment) dsm_detach(segment);
        ereport(ERROR, (errcode(code), errmsg_internal("%s", message), detail[0] ? errdetail_internal("%s", detail) : 0,
                        hint[0] ? errhint("%s", hint) : 0,
                        errcontext("immediate enqueue into queue \"%s\"", r.queue_name)));
    }
    if (segment) dsm_detach(segment);
    if (outcome == Outcome::lost)
        ereport(ERROR, (errcode(ERRCODE_ADMIN_SHUTDOWN),
                        errmsg("the immediate enqueue into queue \"%s\" did not commit", r.queue_name),
                        errdetail("aq's immediate worker of this database ended before committing it.")));
}

}  // namespace

ArrayType* enqueue_array(const EnqueueRequest& request) {
    CallState call{&request, static_cast<int>(commit::settings::decide().sync), false, nullptr, CurrentMemoryContext};
    base::call([&] { run_immediate(&call); });
    return call.ids;
}

}  // namespace aq::queue::immediate
