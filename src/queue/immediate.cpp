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
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
}

#include <cstring>
#include <string>

#include "compat/relation.hpp"
#include "base/guard.hpp"
#include "base/spi.hpp"
#include "base/worker_spec.hpp"
#include "commit/settings.hpp"
#include "compat/proc.hpp"
#include "compat/wait_event.hpp"
#include "queue/catalog.hpp"
#include "queue/waiting.hpp"
#include "queue/wakeup.hpp"

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
                            "Longest time an immediate enqueue or dequeue may wait for a lock, or for the worker.",
                            "Its lock_timeout; the whole call may take twice as long (its statement_timeout).  A "
                            "request the worker has not taken by then is withdrawn.  The caller gets the error.",
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

// "enqueue" or "dequeue": the operation of the current call, for the messages.
const char* operation = "enqueue";

// ---- the request segment (protocol 2)

// Lays out a request of `request_bytes` (past the header) in the slot when it fits (a dequeue's
// messages may use the rest), else in a new segment (*segment) with `room` bytes more.  Returns the header,
// zeroed but for total, capacity and results_at.
RequestHeader* place_request(Size request_bytes, Size room, Slot& slot, dsm_segment** segment) {
    Size total = MAXALIGN(sizeof(RequestHeader)) + request_bytes;
    Size capacity = total <= inline_bytes ? inline_bytes : total + room;
    *segment = capacity > inline_bytes ? dsm_create(capacity, 0) : nullptr;
    auto* h = static_cast<RequestHeader*>(*segment ? dsm_segment_address(*segment) : static_cast<void*>(slot.data));
    memset(h, 0, sizeof(RequestHeader));
    h->total = total;
    h->capacity = capacity;
    h->results_at = MAXALIGN(total);
    return h;
}

// Copies a string part to *at (advanced, MAXALIGNed); returns its offset, 0 for NULL.
Size put_string(RequestHeader* h, Size* at, const char* value) {
    if (!value) return 0;
    Size offset = *at;
    Size len = strlen(value) + 1;
    memcpy(reinterpret_cast<char*>(h) + offset, value, len);
    *at += MAXALIGN(len);
    return offset;
}

Size string_bytes(const char* value) { return value ? MAXALIGN(strlen(value) + 1) : 0; }

const char* current_search_path() {
    const char* path = GetConfigOption("search_path", false, false);
    return path ? path : "";
}

void fill_common(RequestHeader* h, RequestKind kind, Oid payload_type, int count, int synchronous_commit) {
    h->kind = kind;
    h->role = GetUserId();
    h->payload_type = payload_type;
    h->count = count;
    h->synchronous_commit = synchronous_commit;
    h->timeout_ms = timeout_ms;
}

RequestHeader* build_enqueue(const EnqueueRequest& r, int synchronous_commit, Slot& slot, dsm_segment** segment) {
    int count = ArrayGetNItems(ARR_NDIM(r.payloads), ARR_DIMS(r.payloads));
    const char* path = current_search_path();
    Size payload_len = VARSIZE(r.payloads);
    Size props_len = r.properties ? VARSIZE(r.properties) : 0;
    Size bytes = string_bytes(r.queue_name) + string_bytes(path) + MAXALIGN(payload_len) + MAXALIGN(props_len) +
                 MAXALIGN(sizeof(int64) * Max(count, 1));
    RequestHeader* h = place_request(bytes, 0, slot, segment);
    fill_common(h, request_enqueue, r.payload_type, count, synchronous_commit);
    char* base = reinterpret_cast<char*>(h);
    Size at = MAXALIGN(sizeof(RequestHeader));
    h->queue_name_at = put_string(h, &at, r.queue_name);
    h->search_path_at = put_string(h, &at, path);
    h->payloads_at = at;
    memcpy(base + at, r.payloads, payload_len);
    at += MAXALIGN(payload_len);
    if (r.properties) {
        h->properties_at = at;
        memcpy(base + at, r.properties, props_len);
        at += MAXALIGN(props_len);
    }
    h->ids_at = at;
    return h;
}

// Room for a dequeue's messages past a request that needs a segment anyway (a long condition);
// messages that do not fit where the request is go in a segment of the worker's (protocol 9).
constexpr Size dequeue_room = 8192;

RequestHeader* build_dequeue(const DequeueRequest& r, int synchronous_commit, Slot& slot, dsm_segment** segment) {
    const DequeueOptions& o = *r.options;
    const char* path = current_search_path();
    Size bytes = string_bytes(r.queue_name) + string_bytes(path) + string_bytes(o.consumer) +
                 string_bytes(o.correlation) + string_bytes(o.condition);
    RequestHeader* h = place_request(bytes, dequeue_room, slot, segment);
    fill_common(h, request_dequeue, r.payload_type, r.array_size, synchronous_commit);
    Size at = MAXALIGN(sizeof(RequestHeader));
    h->queue_name_at = put_string(h, &at, r.queue_name);
    h->search_path_at = put_string(h, &at, path);
    h->consumer_at = put_string(h, &at, o.consumer);
    h->correlation_at = put_string(h, &at, o.correlation);
    h->condition_at = put_string(h, &at, o.condition);
    h->mode = static_cast<int>(o.mode);
    h->navigation = static_cast<int>(o.navigation);
    h->has_msgid = o.msgid.has_value();
    h->msgid = o.msgid.value_or(0);
    return h;
}

// ---- refusals (protocol 3)

// `what`: "enqueue into" or "dequeue from".
void refuse_conflicts(const char* queue_name, const char* what) {
    // The queue table: from this backend's lookup cache when it has the queue (a table that
    // another transaction has since replaced is missed here; the worker's lock wait is then
    // bounded by aq.immediate_timeout), else looked up.
    // A cached table that is gone (the queue table was dropped and created again since) is looked
    // up again: missed, the refusal would become a wait of aq.immediate_timeout and a 55P03.
    Oid relid = InvalidOid;
    if (!cached_table(queue_name, &relid) || !SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid))) {
        relid = InvalidOid;
        QueueInfo q;
        base::spi::connect();
        if (lookup(queue_name, q)) relid = q.relid;
        SPI_finish();
    }
    if (!OidIsValid(relid)) return;  // the worker reports it as an ON_COMMIT call would
    // A lock of this transaction that the worker's ROW EXCLUSIVE would wait for.
    Relation rel = RelationIdGetRelation(relid);
    if (!RelationIsValid(rel)) return;
    bool conflicting = CheckRelationLockedByMe(rel, ShareLock, true);
    bool created_here = rel->rd_createSubid != InvalidSubTransactionId;
    const char* table = compat::qualified_name(rel);
    RelationClose(rel);
    if (created_here)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("an immediate %s queue \"%s\" cannot see this transaction's changes", what, queue_name),
                        errdetail("This transaction created the queue table."),
                        errhint("The immediate operation runs in a transaction of its own: commit first, or use "
                                "visibility => 'on_commit'.")));
    if (conflicting)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_IN_USE),
                        errmsg("an immediate %s queue \"%s\" would wait for this transaction", what, queue_name),
                        errdetail("This transaction holds a lock on the queue table %s that the immediate "
                                  "operation's own transaction needs.",
                                  table),
                        errhint("Use visibility => 'on_commit', or commit first.")));
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
                        errmsg("an immediate %s queue \"%s\" cannot see this transaction's changes", what, queue_name),
                        errdetail("This transaction changed aq's queues, queue tables or subscribers."),
                        errhint("The immediate operation runs in a transaction of its own: commit first, or use "
                                "visibility => 'on_commit'.")));
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
                        errmsg("too many databases use immediate enqueues and dequeues at once"),
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
                        errmsg("no background worker slot is free for an immediate %s", operation),
                        errdetail("An immediate %s runs in aq's worker of its database, which could not start.", operation),
                        errhint("Raise max_worker_processes (aq needs one more worker per database using immediate "
                                "operations), or use visibility => 'on_commit'.")));
    }
}

// ---- the wait (protocol 6, 7)

enum class Outcome { committed, failed, lost };

// Waits for the request in this backend's slot; frees the slot.  Raises on a cancel while queued.
// A dequeue (abandonable) that is cancelled or terminated while the worker runs it gives it up
// unless the worker is already committing it (protocol 9).
// A request that the worker has not taken within aq.immediate_timeout is withdrawn: 53000 (the
// worker is busy with others' requests; protocol 7).
Outcome wait_for(bool* cancel_seen, bool* xid_written, bool abandonable) {
    Slot& mine = shared->slots[compat::my_backend_slot()];
    TimestampTz queued_at = GetCurrentTimestamp();
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
            if (TimestampDifferenceExceeds(queued_at, GetCurrentTimestamp(), timeout_ms)) {
                mine.state = slot_free;  // withdrawn: never run
                LWLockRelease(shared->lock);
                ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
                                errmsg("aq's immediate worker of this database did not take the immediate %s within "
                                       "aq.immediate_timeout (%d ms)",
                                       operation, timeout_ms),
                                errdetail("It was withdrawn, never run: the worker is busy with other requests."),
                                errhint("Raise aq.immediate_timeout, or use visibility => 'on_commit'.")));
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
        if (abandonable && (QueryCancelPending || ProcDiePending)) {
            // Given up, and the worker told, which cancels the dequeue if it still runs it (a
            // lock wait would otherwise hold the caller until aq.immediate_timeout).
            int worker = 0;
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            if (mine.state == slot_running && !mine.committing && !mine.abandoned) {
                mine.abandoned = true;
                worker = mine.worker_pid;
            }
            LWLockRelease(shared->lock);
            if (worker != 0) (void)kill(worker, SIGUSR2);
        }
        // Terminated while the worker runs the request: leave at once (the worker frees the slot
        // of a caller that is gone, 8); an enqueue commits or not without us, a dequeue not
        // yet committing is rolled back (9).
        if (ProcDiePending) CHECK_FOR_INTERRUPTS();
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 100,
                        AQ_WAIT_EVENT("AqImmediateWait"));
        ResetLatch(MyLatch);
    }
}

// ---- a call (protocol 6, 7, 9)

// Lets a dequeue's messages go from the segment the worker pinned for them (protocol 9).
void unpin_results(dsm_handle results) {
    if (dsm_segment* segment = dsm_attach(results)) {
        dsm_unpin_segment(results);
        dsm_detach(segment);
    }
}

// Before a request: the slot may still hold a request of a backend that had this slot before
// and is gone.  A worker still running it frees it after its round (protocol 8); one queued or
// done is ours, and so are the messages a done dequeue left in a segment (9).
Slot& take_slot() {
    Slot& mine = shared->slots[compat::my_backend_slot()];
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        bool usable = mine.state != slot_running;
        dsm_handle left = usable ? mine.results : 0;
        if (usable) {
            mine.state = slot_free;
            mine.results = 0;
        }
        LWLockRelease(shared->lock);
        if (left) unpin_results(left);
        if (usable) return mine;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 10, AQ_WAIT_EVENT("AqImmediateWait"));
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
    }
}

// The checks every call makes first (protocol 3; `what` for the messages).
void check_caller(const char* queue_name, const char* what) {
    if (!shared)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("immediate visibility needs aq in shared_preload_libraries"),
                        errhint("Add aq to shared_preload_libraries and restart the server.")));
    if (compat::my_backend_slot() < 0) elog(ERROR, "aq: an immediate %s needs a backend slot", operation);
    if (RecoveryInProgress())
        ereport(ERROR, (errcode(ERRCODE_READ_ONLY_SQL_TRANSACTION), errmsg("cannot %s during recovery", operation)));
    PreventCommandIfReadOnly(operation[0] == 'e' ? "an immediate enqueue" : "an immediate dequeue");
    refuse_conflicts(queue_name, what);
}

struct Call {
    RequestHeader* h;
    dsm_segment* segment;  // the request's, or nullptr (in the slot)
    Outcome outcome;
    bool cancel_seen;
    bool xid_written;      // the worker's transaction wrote (and committed) something
    dsm_handle results;    // a dequeue's messages in a segment of the worker's
};

// Queues the request built in the slot (or call.segment), waits for its outcome and flushes the
// WAL up to the worker's commit when the caller's commit mode waits (protocol 6).
void submit(Call& call) {
    Slot& mine = shared->slots[compat::my_backend_slot()];
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    mine.sequence = ++shared->sequence;
    mine.state = slot_queued;
    mine.database = MyDatabaseId;
    mine.caller_pid = MyProcPid;
    mine.caller_procno = compat::my_proc_number();
    mine.in_segment = call.segment != nullptr;
    mine.segment = call.segment ? dsm_segment_handle(call.segment) : 0;
    mine.worker_pid = 0;
    mine.xid = InvalidTransactionId;
    mine.results = 0;
    mine.abandoned = false;
    mine.committing = false;
    ensure_worker();
    Pool* p = pool_of(MyDatabaseId);
    int worker_procno = p && p->pid ? static_cast<int>(p->procno) : -1;
    LWLockRelease(shared->lock);
    if (worker_procno >= 0) SetLatch(compat::proc_latch(static_cast<uint32>(worker_procno)));

    call.outcome = wait_for(&call.cancel_seen, &call.xid_written, call.h->kind == request_dequeue);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    call.results = mine.results;  // ours now (the slot is free): unpinned by whoever reads it
    mine.results = 0;
    LWLockRelease(shared->lock);
    if (call.outcome == Outcome::committed && call.h->failed) call.outcome = Outcome::failed;
    if (call.outcome == Outcome::committed && call.xid_written &&
        call.h->synchronous_commit > static_cast<int>(commit::SyncCommit::off))
        XLogFlush(XLogRecPtrIsInvalid(call.h->flush_to) ? GetXLogInsertRecPtr() : call.h->flush_to);  // invalid: the
                                                                                           // worker ended after its commit
}

// A request's own error, copied out of the area before it goes.
struct Failure {
    int code;
    char message[sizeof RequestHeader::message];
    char detail[sizeof RequestHeader::detail];
    char hint[sizeof RequestHeader::hint];
};

Failure failure_of(const RequestHeader* h) {
    Failure f;
    f.code = h->sqlerrcode;
    memcpy(f.message, h->message, sizeof f.message);
    memcpy(f.detail, h->detail, sizeof f.detail);
    memcpy(f.hint, h->hint, sizeof f.hint);
    return f;
}

[[noreturn]] void raise(const Failure& f, const char* what, const char* queue_name) {
    // The worker's lock timeout is aq.immediate_timeout, which its message does not name.
    bool lock_timeout = f.code == ERRCODE_LOCK_NOT_AVAILABLE && !f.detail[0] && !f.hint[0];
    ereport(ERROR, (errcode(f.code), errmsg_internal("%s", f.message),
                    lock_timeout ? errdetail("The immediate %s's own transaction waited aq.immediate_timeout (%d ms) for "
                                             "a lock another session holds; nothing was done.",
                                             operation, timeout_ms)
                    : f.detail[0] ? errdetail_internal("%s", f.detail)
                                  : 0,
                    lock_timeout ? errhint("Raise aq.immediate_timeout, or use visibility => 'on_commit'.")
                    : f.hint[0]  ? errhint("%s", f.hint)
                                 : 0,
                    errcontext("immediate %s queue \"%s\"", what, queue_name)));
    pg_unreachable();
}

void release(Call& call) {
    if (call.results) unpin_results(call.results);
    call.results = 0;
    if (call.segment) dsm_detach(call.segment);
    call.segment = nullptr;
}

// ---- enqueue

struct EnqueueCall {
    const EnqueueRequest* request;
    int synchronous_commit;
    ArrayType* ids;
    MemoryContext result_context;
};

void run_enqueue(EnqueueCall* e) {
    const EnqueueRequest& r = *e->request;
    operation = "enqueue";
    check_caller(r.queue_name, "enqueue into");
    Call call{};
    call.h = build_enqueue(r, e->synchronous_commit, take_slot(), &call.segment);
    submit(call);
    RequestHeader* h = call.h;
    const char* base = reinterpret_cast<const char*>(h);
    if (call.outcome == Outcome::committed) {
        MemoryContext old = MemoryContextSwitchTo(e->result_context);
        Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * Max(h->count, 1)));
        const auto* raw = reinterpret_cast<const int64*>(base + h->ids_at);
        for (int i = 0; i < h->count; i++) ids[i] = Int64GetDatum(raw[i]);
        e->ids = h->count > 0 ? construct_array(ids, h->count, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)
                              : construct_empty_array(INT8OID);
        MemoryContextSwitchTo(old);
    }
    if (call.cancel_seen || QueryCancelPending) {
        // The work ran while a cancel was pending: say what happened to it (protocol 7).
        QueryCancelPending = false;
        char first[32] = "";
        if (call.outcome == Outcome::committed && h->count > 0)
            snprintf(first, sizeof first, INT64_FORMAT, reinterpret_cast<const int64*>(base + h->ids_at)[0]);
        int count = h->count;
        bool committed = call.outcome == Outcome::committed;
        release(call);
        if (committed)
            ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("canceling statement due to user request"),
                            errdetail("The immediate enqueue had committed before the cancel: %d message(s), the "
                                      "first with msgid %s.",
                                      count, first)));
        ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("canceling statement due to user request"),
                        errdetail("The immediate enqueue did not commit.")));
    }
    if (call.outcome == Outcome::failed) {
        Failure f = failure_of(h);
        release(call);
        raise(f, "enqueue into", r.queue_name);
    }
    release(call);
    if (call.outcome == Outcome::lost)
        ereport(ERROR, (errcode(ERRCODE_ADMIN_SHUTDOWN),
                        errmsg("the immediate enqueue into queue \"%s\" did not commit", r.queue_name),
                        errdetail("aq's immediate worker of this database ended before committing it.")));
}

// ---- dequeue

// Hands the messages of a committed dequeue to the request's sink (protocol 9).
int deliver(const Call& call, const DequeueRequest& r) {
    const RequestHeader* h = call.h;
    dsm_segment* segment = nullptr;
    const char* area = reinterpret_cast<const char*>(h) + h->results_at;
    if (call.results) {
        segment = dsm_attach(call.results);
        if (!segment) elog(ERROR, "aq: the messages of an immediate dequeue are gone");
        area = static_cast<const char*>(dsm_segment_address(segment));
    }
    char* p = const_cast<char*>(area);
    for (int i = 0; i < h->results_count; i++) {
        int64 msgid;
        memcpy(&msgid, p, sizeof msgid);
        p += sizeof msgid;
        bool no_payload = *p++ != 0;
        bool isnull;
        Datum payload = datumRestore(&p, &isnull);
        Datum properties = datumRestore(&p, &isnull);
        r.sink(r.sink_context, DequeuedRow{Int64GetDatum(msgid), payload, properties, no_payload});
    }
    if (segment) dsm_detach(segment);
    return h->results_count;
}

struct DequeueCall {
    const DequeueRequest* request;
    int synchronous_commit;
    int delivered;
};

void run_dequeue(DequeueCall* d) {
    const DequeueRequest& r = *d->request;
    operation = "dequeue";
    check_caller(r.queue_name, "dequeue from");
    // The queue, for the wait: its wake-up channel and delayed messages.  Unknown: the worker
    // reports it as an ON_COMMIT dequeue would, and nothing waits.
    // The SPI connection lasts the wait: next_visible_in runs a statement, which must not run in
    // a caller's connection (a PL/pgSQL function's: its results would be clobbered).
    QueueInfo q;
    base::spi::connect();
    bool known = lookup(r.queue_name, q);
    Wait wait = known ? r.options->wait : Wait{false, 0};
    uint64 seen = 0;
    bool have_failure = false, lost = false, cancelled = false;
    Failure failure{};
    TimestampTz retry_ready = 0;  // the worker's: a multi-consumer ring's message waiting for its time
    (void)wait_loop(
        wait,
        [&](bool) {
            if (known) seen = wakeup::generation(q.queue_id);  // before the worker's scan (wakeup.hpp)
            Call call{};
            call.h = build_dequeue(r, d->synchronous_commit, take_slot(), &call.segment);
            submit(call);
            PassResult result = PassResult::stop;
            if (call.outcome == Outcome::committed) {
                d->delivered = deliver(call, r);
                result = PassResult::found;
                // A cancel that came while the worker ran is too late: the messages are gone
                // from the queue, so they are returned (protocol 9).
                if (call.cancel_seen || QueryCancelPending) QueryCancelPending = false;
            } else if (call.outcome == Outcome::failed) {
                failure = failure_of(call.h);
                have_failure = !(failure.code == MAKE_SQLSTATE('Q', 'A', '2', '2', '8'));  // nothing: wait on
                result = have_failure ? PassResult::stop : PassResult::nothing;
                retry_ready = have_failure ? 0 : call.h->retry_ready;
            } else {
                lost = true;
            }
            // A cancel that came while the worker ran gave the dequeue up, unless it was already
            // committing: then its messages are delivered (nothing committed is lost, 9).
            cancelled = call.cancel_seen && call.outcome != Outcome::committed;
            release(call);
            return cancelled ? PassResult::stop : result;
        },
        [&](TimestampTz now) {
            long in = known ? next_visible_in(q, now) : -1;
            if (retry_ready == 0) return in;  // as the dequeue's own wait (dequeue.cpp)
            long retry_in = Max(1L, TimestampDifferenceMilliseconds(now, retry_ready) + 1);
            return in < 0 ? retry_in : Min(in, retry_in);
        },
        [&](long timeout_ms) { wakeup::sleep(q.queue_id, seen, timeout_ms); },
        /* own_snapshots: each pass is the worker's transaction */ true);
    SPI_finish();
    if (cancelled) {
        QueryCancelPending = false;
        ereport(ERROR, (errcode(ERRCODE_QUERY_CANCELED), errmsg("canceling statement due to user request"),
                        errdetail("The immediate dequeue did not commit.")));
    }
    if (have_failure) raise(failure, "dequeue from", r.queue_name);
    if (lost)
        ereport(ERROR, (errcode(ERRCODE_ADMIN_SHUTDOWN),
                        errmsg("the immediate dequeue from queue \"%s\" did not commit", r.queue_name),
                        errdetail("aq's immediate worker of this database ended before committing it.")));
}

}  // namespace

ArrayType* enqueue_array(const EnqueueRequest& request) {
    EnqueueCall call{&request, static_cast<int>(commit::settings::decide().sync), nullptr, CurrentMemoryContext};
    base::call([&] { run_enqueue(&call); });
    return call.ids;
}

int dequeue(const DequeueRequest& request) {
    DequeueCall call{&request, static_cast<int>(commit::settings::decide().sync), 0};
    base::call([&] { run_dequeue(&call); });
    if (call.delivered == 0) throw_dequeue_timeout(request.queue_name, request.options->wait);
    return call.delivered;
}

}  // namespace aq::queue::immediate
