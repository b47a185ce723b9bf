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
#include "utils/timeout.h"
}

#include <cstdio>
#include <cstring>

#include "base/guard.hpp"
#include "base/run_as.hpp"
#include "commit/mode.hpp"
#include "compat/proc.hpp"
#include "compat/wait_event.hpp"

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
    ArrayType* ids;
};

void enqueue_work(void* arg) {
    auto* w = static_cast<Work*>(arg);
    char* base = reinterpret_cast<char*>(w->header);
    char timeout[32];
    snprintf(timeout, sizeof timeout, "%d", w->header->timeout_ms);
    (void)set_config_option("lock_timeout", timeout, PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    EnqueueRequest request{base + w->header->queue_name_at, w->header->payload_type,
                           reinterpret_cast<ArrayType*>(base + w->header->payloads_at),
                           w->header->properties_at ? reinterpret_cast<ArrayType*>(base + w->header->properties_at)
                                                    : nullptr};
    aq::base::entry_void([&] { w->ids = queue::enqueue_array(request); });
}

void copy_text(char* to, Size size, const char* from) {
    if (!from) from = "";
    strlcpy(to, from, size);
}

// Runs one request in a subtransaction; writes its ids or its error into its segment.  True if
// it succeeded.
bool run_request(RequestHeader* h) {
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer);
    bool ok = true;
    PG_TRY();
    {
        Work work{h, nullptr};
        PushActiveSnapshot(GetTransactionSnapshot());
        enable_timeout_after(STATEMENT_TIMEOUT, h->timeout_ms >= INT_MAX / 2 ? INT_MAX : 2 * h->timeout_ms);
        char* base = reinterpret_cast<char*>(h);
        aq::base::run_as(aq::base::RunAs{h->role, false, base + h->search_path_at}, enqueue_work, &work);
        disable_timeout(STATEMENT_TIMEOUT, false);
        QueryCancelPending = false;  // a timeout that fired after the work: not the next request's
        PopActiveSnapshot();
        auto* ids = reinterpret_cast<int64*>(base + h->ids_at);
        int n = work.ids ? ArrayGetNItems(ARR_NDIM(work.ids), ARR_DIMS(work.ids)) : 0;
        if (n != h->count) elog(ERROR, "aq: an immediate enqueue returned %d ids for %d messages", n, h->count);
        const auto* values = reinterpret_cast<const int64*>(ARR_DATA_PTR(work.ids));
        for (int i = 0; i < n; i++) ids[i] = values[i];
        ReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
    }
    PG_CATCH();
    {
        disable_timeout(STATEMENT_TIMEOUT, false);
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
        h->failed = true;
        h->sqlerrcode = error->sqlerrcode;
        copy_text(h->message, sizeof h->message, error->message);
        copy_text(h->detail, sizeof h->detail, error->detail);
        copy_text(h->hint, sizeof h->hint, error->hint);
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
    pgstat_report_activity(STATE_RUNNING, "aq: immediate enqueues");
    int strongest = -1;
    for (int i = 0; i < n; i++) {
        if (!taken[i].header) continue;
        if (run_request(taken[i].header) && taken[i].header->synchronous_commit > strongest)
            strongest = taken[i].header->synchronous_commit;
    }
    // Up to synchronous_commit = on the commit does not wait for its flush: each caller flushes
    // up to the commit record itself (protocol 6), so the next round runs meanwhile.  A remote
    // level is waited for here.
    bool local = strongest <= static_cast<int>(commit::SyncCommit::local) ||
                 (strongest == static_cast<int>(commit::SyncCommit::on) && (!SyncRepStandbyNames || !SyncRepStandbyNames[0]));
    if (strongest >= 0)
        (void)set_config_option("synchronous_commit", local ? "off" : synchronous_commit_name(strongest), PGC_USERSET,
                                PGC_S_SESSION, GUC_ACTION_LOCAL, true, 0, false);
    TransactionId xid = GetTopTransactionIdIfAny();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (int i = 0; i < n; i++) {
        Slot& s = shared->slots[taken[i].slot];
        if (s.sequence == taken[i].sequence && s.state == slot_running) s.xid = xid;
    }
    LWLockRelease(shared->lock);
    MemoryContext outer = CurrentMemoryContext;
    bool committed = true;
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
            h->failed = true;
            h->sqlerrcode = error->sqlerrcode;
            copy_text(h->message, sizeof h->message, error->message);
            copy_text(h->detail, sizeof h->detail, error->detail);
            copy_text(h->hint, sizeof h->hint, error->hint);
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
    pgstat_report_activity(STATE_IDLE, nullptr);
}

}  // namespace

}  // namespace aq::queue::immediate

void aq_immediate_main(Datum database_arg) {
    using namespace aq::queue::immediate;
    Oid database = DatumGetObjectId(database_arg);
    pqsignal(SIGTERM, die);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
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
                               s.in_segment ? nullptr : reinterpret_cast<RequestHeader*>(s.data)};
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
        run_round(taken, n);
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        for (int i = 0; i < n; i++) {
            Slot& s = shared->slots[taken[i].slot];
            if (s.sequence != taken[i].sequence || s.state != slot_running) continue;
            // Done; a slot whose caller is gone is freed here (protocol 8).
            s.state = process_is(taken[i].caller_procno, taken[i].caller_pid) ? slot_done : slot_free;
        }
        LWLockRelease(shared->lock);
        for (int i = 0; i < n; i++) {
            if (taken[i].segment) dsm_detach(taken[i].segment);
            SetLatch(aq::compat::proc_latch(taken[i].caller_procno));
        }
        MemoryContextSwitchTo(old);
        MemoryContextReset(round_context);
        idle_since = GetCurrentTimestamp();
    }
}
