// Immediate visibility: a database's worker ("aq immediate").  It runs the queued requests of
// its database in rounds, one transaction per round (immediate.hpp, protocol 4-6, 8).
#include "queue/immediate_shared.hpp"

extern "C" {
#include "access/xact.h"
#include "access/xlog.h"
#include "replication/syncrep.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "tcop/tcopprot.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/timeout.h"
}

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <utility>

#include "base/guard.hpp"
#include "base/run_as.hpp"
#include "commit/mode.hpp"
#include "compat/proc.hpp"
#include "compat/wait_event.hpp"
#include "queue/catalog.hpp"
#include "queue/groups.hpp"

namespace aq::queue::immediate {

namespace {

constexpr int max_round = 64;         // requests per round (one transaction)
constexpr long idle_exit_ms = 60000;  // protocol 4

struct Taken {
    int slot;
    uint64 sequence;
    uint32 caller_procno;
    int caller_pid;
    dsm_handle handle;
    dsm_segment* segment;
    RequestHeader* header;
    dsm_handle results;  // a dequeue's messages in a pinned segment of this worker's (protocol 9)
};

void forget_pool(int, Datum) {
    if (!shared) return;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (Pool* p = pool_of(MyDatabaseId); p && p->pid == MyProcPid) p->database = InvalidOid;
    LWLockRelease(shared->lock);
}

// The work of one request, as the caller's role (base::run_as).
struct Work {
    RequestHeader* header;
    ArrayType* ids;        // an enqueue's
    StringInfoData rows;   // a dequeue's messages, serialized (protocol 9)
    int16 payload_len;
    bool payload_byval;
    int count;
};

void set_lock_timeout(const RequestHeader* h) {
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", h->timeout_ms);
    (void)set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

void enqueue_work(void* arg) {
    auto* w = static_cast<Work*>(arg);
    char* base = reinterpret_cast<char*>(w->header);
    set_lock_timeout(w->header);
    // Each caller's enqueue is a transaction group of its own, though the round shares one
    // transaction (protocol 5).
    groups::start_new_groups();
    EnqueueRequest request{base + w->header->queue_name_at, w->header->payload_type,
                           reinterpret_cast<ArrayType*>(base + w->header->payloads_at),
                           w->header->properties_at ? reinterpret_cast<ArrayType*>(base + w->header->properties_at)
                                                    : nullptr};
    aq::base::entry_void([&] { w->ids = queue::enqueue_array(request); });
}

// ---- merged enqueues (protocol 5): one enqueue_array call for several callers' requests

constexpr int max_merged = max_round;

struct Merged {
    Taken* taken;
    const int* members;  // indexes into taken; the first is the leader
    int count;
};

// Whether b's enqueue may share one call with a's: same queue, role, search_path, payload type
// and lock timeout; both without properties or both with.
bool same_call(const RequestHeader* a, const RequestHeader* b) {
    const char* base_a = reinterpret_cast<const char*>(a);
    const char* base_b = reinterpret_cast<const char*>(b);
    return a->kind == request_enqueue && b->kind == request_enqueue && a->role == b->role &&
           a->payload_type == b->payload_type && a->timeout_ms == b->timeout_ms &&
           (a->properties_at == 0) == (b->properties_at == 0) &&
           strcmp(base_a + a->queue_name_at, base_b + b->queue_name_at) == 0 &&
           strcmp(base_a + a->search_path_at, base_b + b->search_path_at) == 0;
}

// The members' payloads (or properties) as one array, in member order.
ArrayType* concatenate(const Merged& m, bool properties) {
    int total = 0;
    for (int i = 0; i < m.count; i++) total += m.taken[m.members[i]].header->count;
    Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * Max(total, 1)));
    bool* nulls = static_cast<bool*>(palloc(sizeof(bool) * Max(total, 1)));
    Oid element = InvalidOid;
    int16 len = 0;
    bool byval = false;
    char align = 'i';
    int at = 0;
    for (int i = 0; i < m.count; i++) {
        RequestHeader* h = m.taken[m.members[i]].header;
        auto* array = reinterpret_cast<ArrayType*>(reinterpret_cast<char*>(h) + (properties ? h->properties_at : h->payloads_at));
        if (element == InvalidOid) {
            element = ARR_ELEMTYPE(array);
            get_typlenbyvalalign(element, &len, &byval, &align);
        }
        Datum* elems;
        bool* elem_nulls;
        int n;
        deconstruct_array(array, element, len, byval, align, &elems, &elem_nulls, &n);
        if (n != h->count) elog(ERROR, "aq: an immediate request has %d elements for %d messages", n, h->count);
        for (int k = 0; k < n; k++, at++) {
            values[at] = elems[k];
            nulls[at] = elem_nulls[k];
        }
    }
    int dims[1] = {total};
    int lbs[1] = {1};
    return construct_md_array(values, nulls, 1, dims, lbs, element, len, byval, align);
}

void merged_enqueue_work(void* arg) {
    auto* m = static_cast<Merged*>(arg);
    RequestHeader* leader = m->taken[m->members[0]].header;
    const char* queue_name = reinterpret_cast<const char*>(leader) + leader->queue_name_at;
    // Each caller's enqueue must be a transaction group of its own: run_round merges only into a
    // queue table this role's lookups found without groups, and the enqueue's own lookup, checked
    // against the catalog, must agree.
    set_lock_timeout(leader);
    EnqueueRequest request{queue_name, leader->payload_type, concatenate(*m, false),
                           leader->properties_at ? concatenate(*m, true) : nullptr};
    ArrayType* ids = nullptr;
    aq::base::entry_void([&] { ids = queue::enqueue_array(request); });
    bool grouped = true;
    if (!cached_grouped(queue_name, leader->role, &grouped) || grouped)
        elog(ERROR, "aq: the queue table of \"%s\" has transaction groups", queue_name);
    int n = ArrayGetNItems(ARR_NDIM(ids), ARR_DIMS(ids));
    const auto* values = reinterpret_cast<const int64*>(ARR_DATA_PTR(ids));
    int at = 0;
    for (int i = 0; i < m->count; i++) {
        RequestHeader* h = m->taken[m->members[i]].header;
        if (at + h->count > n) elog(ERROR, "aq: a merged immediate enqueue returned %d ids", n);
        auto* out = reinterpret_cast<int64*>(reinterpret_cast<char*>(h) + h->ids_at);
        for (int k = 0; k < h->count; k++) out[k] = values[at++];
    }
}

// Runs the members as one enqueue in a subtransaction; false (nothing done) when that failed: the
// caller then runs each on its own, so that each gets its own outcome.
bool run_merged(Merged& m) {
    RequestHeader* leader = m.taken[m.members[0]].header;
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer);
    bool ok = true;
    PG_TRY();
    {
        PushActiveSnapshot(GetTransactionSnapshot());
        enable_timeout_after(STATEMENT_TIMEOUT, leader->timeout_ms >= INT_MAX / 2 ? INT_MAX : 2 * leader->timeout_ms);
        aq::base::run_as(aq::base::RunAs{leader->role, false, reinterpret_cast<char*>(leader) + leader->search_path_at},
                         merged_enqueue_work, &m);
        disable_timeout(STATEMENT_TIMEOUT, false);
        QueryCancelPending = false;
        PopActiveSnapshot();
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
    }
    PG_CATCH();
    {
        disable_timeout(STATEMENT_TIMEOUT, false);
        MemoryContextSwitchTo(outer);
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
        ok = false;
    }
    PG_END_TRY();
    return ok;
}

// A dequeued message into the request's rows: msgid, whether the payload is left out, then the
// payload (detoasted: the row it came from is deleted) and the properties, by datumSerialize.
void serialize_row(void* context, const DequeuedRow& row) {
    auto* w = static_cast<Work*>(context);
    Datum payload = row.payload;
    if (!row.no_payload && w->payload_len == -1)
        payload = PointerGetDatum(pg_detoast_datum_packed(reinterpret_cast<struct varlena*>(DatumGetPointer(payload))));
    Size need = sizeof(int64) + 1 + datumEstimateSpace(payload, row.no_payload, w->payload_byval, w->payload_len) +
                datumEstimateSpace(row.properties, false, false, -1);
    enlargeStringInfo(&w->rows, static_cast<int>(need));
    char* p = w->rows.data + w->rows.len;
    int64 msgid = DatumGetInt64(row.msgid);
    memcpy(p, &msgid, sizeof msgid);
    p += sizeof msgid;
    *p++ = row.no_payload ? 1 : 0;
    datumSerialize(payload, row.no_payload, w->payload_byval, w->payload_len, &p);
    datumSerialize(row.properties, false, false, -1, &p);
    w->rows.len = static_cast<int>(p - w->rows.data);
    w->count++;
}

const char* string_at(RequestHeader* h, Size at) {
    return at ? reinterpret_cast<const char*>(h) + at : nullptr;
}

void dequeue_work(void* arg) {
    auto* w = static_cast<Work*>(arg);
    RequestHeader* h = w->header;
    set_lock_timeout(h);
    DequeueOptions options;
    options.mode = static_cast<DequeueMode>(h->mode);
    options.navigation = static_cast<Navigation>(h->navigation);
    options.wait = Wait{false, 0};  // the caller waits (protocol 9)
    if (h->has_msgid) options.msgid = h->msgid;
    options.consumer = string_at(h, h->consumer_at);
    options.correlation = string_at(h, h->correlation_at);
    options.condition = string_at(h, h->condition_at);
    // Nothing acts on the messages before this transaction commits: the caller reads them after.
    DequeueRequest request{string_at(h, h->queue_name_at), h->payload_type, h->count, &options, serialize_row, w, true};
    h->retry_ready = 0;
    request.retry_ready_out = &h->retry_ready;  // in the request's area: kept through a QA228
    aq::base::entry_void([&] { (void)queue::dequeue(request); });
}

// Puts a dequeue's messages where the caller reads them: after the request when they fit, else in
// a new segment, pinned until the caller has read them (protocol 9).
void place_rows(Taken& t, Work& w) {
    RequestHeader* h = t.header;
    h->results_count = w.count;
    h->results_bytes = static_cast<Size>(w.rows.len);
    if (h->results_at + h->results_bytes <= h->capacity) {
        memcpy(reinterpret_cast<char*>(h) + h->results_at, w.rows.data, h->results_bytes);
        return;
    }
    dsm_segment* segment = dsm_create(h->results_bytes, 0);
    dsm_pin_mapping(segment);
    memcpy(dsm_segment_address(segment), w.rows.data, h->results_bytes);
    dsm_pin_segment(segment);
    t.results = dsm_segment_handle(segment);
    dsm_detach(segment);
}

void copy_text(char* to, Size size, const char* from) {
    if (!from) from = "";
    strlcpy(to, from, size);
}

// The request's outcome: this error.
void set_failure(RequestHeader* h, int code, const char* message, const char* detail, const char* hint) {
    h->failed = true;
    h->sqlerrcode = code;
    copy_text(h->message, sizeof h->message, message);
    copy_text(h->detail, sizeof h->detail, detail);
    copy_text(h->hint, sizeof h->hint, hint);
}

// Runs one request in a subtransaction; writes its ids (messages) or its error into its area.
// True if it succeeded.
// The dequeue running now, for the abandon signal (protocol 9): its slot (-1: none) and number.
volatile sig_atomic_t running_slot = -1;
volatile uint64 running_sequence = 0;

// SIGUSR2, from a caller that gave its dequeue up: cancels the running dequeue if it is that one
// and abandoned.  A late signal finds another request (or none), not abandoned, and does nothing.
void abandon_signal(SIGNAL_ARGS) {
    int save_errno = errno;
    int slot = running_slot;
    if (slot >= 0 && shared) {
        const Slot& s = shared->slots[slot];
        if (s.sequence == running_sequence && s.abandoned && !s.committing) {
            QueryCancelPending = true;
            InterruptPending = true;
        }
    }
    SetLatch(MyLatch);
    errno = save_errno;
}

bool run_request(Taken& t) {
    RequestHeader* h = t.header;
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer);
    bool ok = true;
    PG_TRY();
    {
        Work work{};
        work.header = h;
        bool dequeue = h->kind == request_dequeue;
        if (dequeue) {
            initStringInfo(&work.rows);
            get_typlenbyval(h->payload_type, &work.payload_len, &work.payload_byval);
        }
        PushActiveSnapshot(GetTransactionSnapshot());
        enable_timeout_after(STATEMENT_TIMEOUT, h->timeout_ms >= INT_MAX / 2 ? INT_MAX : 2 * h->timeout_ms);
        char* base = reinterpret_cast<char*>(h);
        if (dequeue) {
            running_sequence = t.sequence;
            running_slot = t.slot;
        }
        aq::base::run_as(aq::base::RunAs{h->role, false, base + h->search_path_at}, dequeue ? dequeue_work : enqueue_work,
                         &work);
        running_slot = -1;  // before the cancel below is cleared: none is set after it
        disable_timeout(STATEMENT_TIMEOUT, false);
        QueryCancelPending = false;  // a timeout (or abandon) that fired after the work: not the next request's
        PopActiveSnapshot();
        if (dequeue) {
            place_rows(t, work);
        } else {
            auto* ids = reinterpret_cast<int64*>(base + h->ids_at);
            int n = work.ids ? ArrayGetNItems(ARR_NDIM(work.ids), ARR_DIMS(work.ids)) : 0;
            if (n != h->count) elog(ERROR, "aq: an immediate enqueue returned %d ids for %d messages", n, h->count);
            const auto* values = reinterpret_cast<const int64*>(ARR_DATA_PTR(work.ids));
            for (int i = 0; i < n; i++) ids[i] = values[i];
        }
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
    }
    PG_CATCH();
    {
        running_slot = -1;
        disable_timeout(STATEMENT_TIMEOUT, false);
        QueryCancelPending = false;
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
        set_failure(h, error->sqlerrcode, error->message, error->detail, error->hint);
        FreeErrorData(error);
        ok = false;
    }
    PG_END_TRY();
    return ok;
}

const char* synchronous_commit_name(int level) {
    switch (static_cast<commit::SyncCommit>(level)) {
        case commit::SyncCommit::off: return "off";
        case commit::SyncCommit::local: return "local";
        case commit::SyncCommit::remote_write: return "remote_write";
        case commit::SyncCommit::on: return "on";
        case commit::SyncCommit::remote_apply: return "remote_apply";
    }
    return "on";
}

// One round: the taken requests in one transaction (protocol 5).
void run_round(Taken* taken, int n) {
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    pgstat_report_activity(STATE_RUNNING, "aq: immediate enqueues and dequeues");
    int strongest = -1;
    bool ran[max_round] = {};
    for (int i = 0; i < n; i++) {
        if (ran[i] || !taken[i].header) continue;
        // The later requests that may share this one's enqueue call (protocol 5).
        int members[max_merged];
        int count = 0;
        members[count++] = i;
        for (int j = i + 1; j < n && count < max_merged; j++)
            if (!ran[j] && taken[j].header && same_call(taken[i].header, taken[j].header)) members[count++] = j;
        const RequestHeader* leader = taken[i].header;
        bool grouped = true;
        if (count > 1 &&
            cached_grouped(reinterpret_cast<const char*>(leader) + leader->queue_name_at, leader->role, &grouped) &&
            !grouped) {
            Merged merged{taken, members, count};
            bool merged_ok = run_merged(merged);
            for (int k = 0; k < count; k++) {
                Taken& t = taken[members[k]];
                ran[members[k]] = true;
                if ((merged_ok || run_request(t)) && t.header->synchronous_commit > strongest)
                    strongest = t.header->synchronous_commit;
            }
            continue;
        }
        ran[i] = true;  // the first of a queue also fills the lookup cache for the next ones
        if (run_request(taken[i]) && taken[i].header->synchronous_commit > strongest)
            strongest = taken[i].header->synchronous_commit;
    }
    // Up to synchronous_commit = on the commit does not wait for its flush (enqueues are flushed
    // below, once for the round; a dequeue's caller flushes: protocol 6).  A remote level is
    // waited for here.
    bool local = strongest <= static_cast<int>(commit::SyncCommit::local) ||
                 (strongest == static_cast<int>(commit::SyncCommit::on) && (!SyncRepStandbyNames || !SyncRepStandbyNames[0]));
    if (strongest >= 0)
        (void)set_config_option("synchronous_commit", local ? "off" : synchronous_commit_name(strongest), PGC_USERSET,
                                PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
    TransactionId xid = GetTopTransactionIdIfAny();
    // A dequeue (a round of its own) whose caller gave up or is gone is rolled back: its messages
    // stay in the queue (protocol 9).  Once committing is set, the caller waits for the outcome.
    bool abandoned = false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < n; i++) {
        Slot& s = shared->slots[taken[i].slot];
        if (s.sequence != taken[i].sequence || s.state != slot_running) continue;
        if (taken[i].header && taken[i].header->kind == request_dequeue &&
            (s.abandoned || !process_is(taken[i].caller_procno, taken[i].caller_pid)))
            abandoned = true;
        else
            s.committing = true;
        s.xid = abandoned ? InvalidTransactionId : xid;
    }
    LWLockRelease(shared->lock);
    MemoryContext outer = CurrentMemoryContext;
    bool committed = true;
    if (abandoned) {
        AbortCurrentTransaction();
        for (int i = 0; i < n; i++) {
            RequestHeader* h = taken[i].header;
            if (!h || h->failed) continue;
            set_failure(h, ERRCODE_QUERY_CANCELED, "the immediate dequeue was given up by its caller",
                        "It did not commit: its messages stay in the queue.", "");
        }
        pgstat_report_activity(STATE_IDLE, nullptr);
        for (int i = 0; i < n; i++)
            if (taken[i].header) taken[i].header->flush_to = InvalidXLogRecPtr;
        return;
    }
    PG_TRY();
    {
        CommitTransactionCommand();
    }
    PG_CATCH();
    {
        // The commit itself failed (a deferred trigger, a serialization failure): every request
        // of the round gets its error; nothing was committed.
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        AbortCurrentTransaction();
        for (int i = 0; i < n; i++) {
            RequestHeader* h = taken[i].header;
            if (!h || h->failed) continue;
            set_failure(h, error->sqlerrcode, error->message, error->detail, error->hint);
        }
        FreeErrorData(error);
        committed = false;
    }
    PG_END_TRY();
    if (!committed) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        for (int i = 0; i < n; i++) {
            Slot& s = shared->slots[taken[i].slot];
            if (s.sequence == taken[i].sequence && s.state == slot_running) s.xid = InvalidTransactionId;
        }
        LWLockRelease(shared->lock);
    }
    XLogRecPtr commit_end = committed && TransactionIdIsValid(xid) ? XactLastCommitEnd : InvalidXLogRecPtr;
    for (int i = 0; i < n; i++)
        if (taken[i].header) taken[i].header->flush_to = commit_end;
    // Enqueues: one flush for the round's callers, here, when one's commit mode waits (their own
    // flushes then find it done); measured faster with many callers than each caller flushing
    // (docs/performance.md).  A dequeue, a round of its own, leaves it to its caller, so that
    // concurrent dequeues share flushes (protocol 6).
    bool enqueues = n > 0 && taken[0].header && taken[0].header->kind == request_enqueue;
    if (enqueues && !XLogRecPtrIsInvalid(commit_end) && strongest > static_cast<int>(commit::SyncCommit::off))
        XLogFlush(commit_end);
    pgstat_report_activity(STATE_IDLE, nullptr);
}

// After a round: done (or freed, its caller gone: protocol 8, 9), the callers' latches set.
void finish(Taken* taken, int n) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < n; i++) {
        Slot& s = shared->slots[taken[i].slot];
        if (s.sequence != taken[i].sequence || s.state != slot_running) continue;
        bool caller_there = process_is(taken[i].caller_procno, taken[i].caller_pid);
        s.state = caller_there ? slot_done : slot_free;
        if (caller_there) {
            s.results = taken[i].results;
            taken[i].results = 0;
        }
    }
    LWLockRelease(shared->lock);
    for (int i = 0; i < n; i++) {
        if (taken[i].results) dsm_unpin_segment(taken[i].results);  // nobody will read them
        taken[i].results = 0;
        if (taken[i].segment) dsm_detach(taken[i].segment);
        taken[i].segment = nullptr;
        SetLatch(aq::compat::proc_latch(taken[i].caller_procno));
    }
}

}  // namespace

}  // namespace aq::queue::immediate

void aq_immediate_main(Datum database_arg) {
    using namespace aq::queue::immediate;
    Oid database = DatumGetObjectId(database_arg);
    pqsignal(SIGTERM, die);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    pqsignal(SIGUSR2, abandon_signal);
    BackgroundWorkerUnblockSignals();
    if (!shared) proc_exit(1);
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, 0);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    Pool* mine = pool_of(database);
    bool ours = mine && mine->starting;
    if (ours) {
        mine->pid = MyProcPid;
        mine->procno = aq::compat::my_proc_number();
        mine->starting = false;
    }
    LWLockRelease(shared->lock);
    if (!ours) proc_exit(0);
    on_shmem_exit(forget_pool, 0);

    MemoryContext round_context =
        AllocSetContextCreate(TopMemoryContext, "aq immediate round", ALLOCSET_DEFAULT_SIZES);
    TimestampTz idle_since = GetCurrentTimestamp();
    Taken taken[max_round];
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        int n = 0;
        bool leave = false;
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        for (int i = 0; i < shared->nslots && n < max_round; i++) {
            Slot& s = shared->slots[i];
            if (s.state != slot_queued || s.database != database) continue;
            if (!process_is(s.caller_procno, s.caller_pid)) {  // the caller is gone (protocol 8)
                s.state = slot_free;
                continue;
            }
            s.state = slot_running;
            s.worker_pid = MyProcPid;
            taken[n++] = Taken{i, s.sequence, s.caller_procno, s.caller_pid, s.in_segment ? s.segment : 0, nullptr,
                               s.in_segment ? nullptr : reinterpret_cast<RequestHeader*>(s.data), 0};
        }
        if (n == 0 && TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(), idle_exit_ms)) {
            // Leave only with nothing queued for this database (checked under the lock).
            mine->database = InvalidOid;
            leave = true;
        }
        LWLockRelease(shared->lock);
        if (leave) proc_exit(0);
        if (n == 0) {
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000,
                            AQ_WAIT_EVENT("AqImmediateMain"));
            ResetLatch(MyLatch);
            continue;
        }
        MemoryContext old = MemoryContextSwitchTo(round_context);
        // A segment that cannot be attached belongs to a caller that is gone.
        for (int i = 0; i < n; i++) {
            if (taken[i].header) continue;  // in its slot
            dsm_segment* segment = dsm_attach(taken[i].handle);
            taken[i].segment = segment;
            taken[i].header = segment ? static_cast<RequestHeader*>(dsm_segment_address(segment)) : nullptr;
            if (segment) dsm_pin_mapping(segment);
        }
        // Enqueues share one transaction; each dequeue has one of its own, as in Oracle: its
        // group, its navigation and its locks are no other caller's (protocol 5).
        int enqueues = 0;
        for (int i = 0; i < n; i++)
            if (!taken[i].header || taken[i].header->kind == request_enqueue) std::swap(taken[i], taken[enqueues++]);
        if (enqueues > 0) {
            run_round(taken, enqueues);
            finish(taken, enqueues);
        }
        for (int i = enqueues; i < n; i++) {
            run_round(&taken[i], 1);
            finish(&taken[i], 1);
        }
        MemoryContextSwitchTo(old);
        MemoryContextReset(round_context);
        idle_since = GetCurrentTimestamp();
    }
}
