// The settler's workers: the launcher and the per-database settlers (settler.hpp for the protocol,
// retries.hpp for what settling means; the shared memory: settler_shared.cpp).
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
#include "queue/time_manager.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::settler {

// ---------------------------------------------------------------- the workers

namespace {

// The registered xids of the database that did not commit (in the current memory context).
TransactionId* aborted_dequeuers(Oid database, int* count) {
    int n = 0;
    auto* xids = static_cast<TransactionId*>(palloc(sizeof(TransactionId) * max_dequeuers));
    for (auto& r : shared->registry) {
        LWLockAcquire(r.lock, LW_SHARED);
        for (int i = 0; i < r.count; i++)
            if (r.entries[i].database == database) xids[n++] = r.entries[i].xid;
        LWLockRelease(r.lock);
    }
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
PendingSweep pending_sweeps[256];

void owe_sweep(int32 queue_id, TimestampTz now) {
    for (auto& p : pending_sweeps)
        if (p.queue_id == queue_id) {
            p.not_before = Max(p.not_before, p.last + USECS_PER_SEC);
            if (p.not_before == 0) p.not_before = now;
            return;
        }
    // A free entry, else one no longer owed (swept, nothing asked since: its queue only loses the
    // memory of its last sweep), the one swept longest ago; a sweep still owed is never dropped
    // while another entry can go.
    PendingSweep* e = nullptr;
    for (auto& p : pending_sweeps)
        if (p.queue_id == 0) {
            e = &p;
            break;
        }
    for (auto& p : pending_sweeps)
        if (!e && p.not_before == 0) e = &p;
        else if (e && e->queue_id != 0 && p.not_before == 0 && p.last < e->last) e = &p;
    if (!e) {  // all 256 owed at once: the latest owed waits for its queue's next request
        e = &pending_sweeps[0];
        for (auto& p : pending_sweeps)
            if (p.not_before > e->not_before) e = &p;
    }
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

// A round of the time manager for this worker's database (time_manager.hpp, 3, 4 and 8): from
// the start of the last round that did all its work (0: none since the server started).
void run_time_round(DatabaseSlot* slot) {
    TimestampTz start = GetCurrentTimestamp();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    TimeState& t = slot->times;
    TimestampTz due_at = t.next_due;
    TimestampTz since = t.served_upto;
    t.round_running = true;  // every lowering from now on is kept (3)
    t.lowered_in_round = 0;
    int failures_in_row = t.failures_in_row;
    LWLockRelease(shared->lock);
    time_manager::RoundResult r = time_manager::round(since, start, &failures_in_row);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    t.failures_in_row = failures_in_row;
    if (!r.failed) t.served_upto = start;
    t.next_due = r.next_due;
    if (t.lowered_in_round != 0 && (t.next_due == 0 || t.lowered_in_round < t.next_due)) t.next_due = t.lowered_in_round;
    t.round_running = false;
    t.lowered_in_round = 0;
    int64 lag = due_at != 0 && due_at < start ? (start - due_at) / 1000 : 0;
    time_manager::Tally& tally = t.tally;
    tally.last_round = start;
    tally.last_lag_ms = lag;
    tally.max_lag_ms = Max(tally.max_lag_ms, lag);
    tally.rounds++;
    tally.expired += r.expired;
    tally.woken += r.woken;
    tally.truncated += r.truncated;
    tally.carried += r.carried;
    tally.rotation_skips += r.rotation_skips;
    if (r.failed) {
        tally.failures++;
        strlcpy(tally.last_error, r.error, sizeof tally.last_error);
    }
    LWLockRelease(shared->lock);
}

// A settle may have written retry delays: a round within 100 ms (not after every settle, which
// would hold the next settle back under a stream of rollbacks).  Under the lock.
void want_round_soon(DatabaseSlot* slot, TimestampTz now) {
    TimeState& t = slot->times;
    TimestampTz at = Max(now, TimestampTzPlusMilliseconds(t.tally.last_round, 100));
    if (t.next_due == 0 || at < t.next_due) t.next_due = at;
}

// The database's time manager work is due, or will be within a minute (time_manager.hpp, 5).
bool time_due(const DatabaseSlot& slot, TimestampTz now, long within_ms) {
    return time_manager::processes() > 0 && slot.times.next_due != 0 &&
           slot.times.next_due <= TimestampTzPlusMilliseconds(now, within_ms);
}

// The launcher may start the slot's worker now: stopped, and not in a failed start's backoff.
bool may_start(const DatabaseSlot& slot, TimestampTz now) {
    if (slot.database == InvalidOid || slot.state != slot_stopped || slot.failed_starts >= max_failed_starts) return false;
    long interval = long(start_interval_ms) << Min(slot.failed_starts, 6u);
    return slot.failed_starts == 0 || TimestampDifferenceExceeds(slot.last_start, now, int(interval));
}

// No other database due for the time manager that could start now was served longer ago (under
// the lock).
bool served_first(const DatabaseSlot& slot, TimestampTz now) {
    for (const auto& other : shared->slots)
        if (&other != &slot && may_start(other, now) && time_due(other, now, 0) &&
            other.times.tally.last_round < slot.times.tally.last_round)
            return false;
    return true;
}

void worker_exit(int, Datum) {
    if (!my_slot) return;
    uint32 to_wake = no_proc;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    if (my_slot->state == slot_starting) my_slot->failed_starts++;
    my_slot->state = slot_stopped;
    my_slot->worker_procno = no_proc;
    // Aborted receipts it was writing go back to the array, for the next worker (terminated in a unit).
    bool given_back = false;
    for (int i = 0; i < shared->receipt_count; i++) {
        ReceiptClaim& c = shared->receipt_claims[i];
        if (c.database != my_slot->database || !c.taken) continue;
        c.taken = false;
        given_back = true;
    }
    if (given_back) {
        my_slot->urgent = true;
        my_slot->submitted++;
    }
    if (my_slot->submitted > my_slot->settled) to_wake = shared->launcher_procno;
    // Ended in a round (terminated, an error): what it would have found is unknown, so the next
    // worker starts with one (time_manager.hpp, 3).
    if (my_slot->times.round_running) {
        my_slot->times.round_running = false;
        my_slot->times.next_due = GetCurrentTimestamp();
        to_wake = shared->launcher_procno;
    }
    if (shared->time_waiting > 0) to_wake = shared->launcher_procno;
    LWLockRelease(shared->lock);
    wake(to_wake);
}

void launcher_exit(int, Datum) {
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    shared->launcher_procno = no_proc;
    shared->time_waiting = 0;  // nobody would start them: running workers need not leave
    LWLockRelease(shared->lock);
}

// Every database may hold attempts left by a crash: scan each once.
void request_startup_scans() {
    TransactionId next = ReadNextTransactionId();
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    // Once per shared memory: a launcher restarted by the postmaster (no crash) keeps it.
    if (!TransactionIdIsValid(pg_atomic_read_u32(&shared->horizon))) pg_atomic_write_u32(&shared->horizon, next);
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
        // then those with only a scan to do (the scans after a crash restart visit every one) or
        // a time manager's round (the one served longest ago first).
        int time_waiting = 0;
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
            bool due = slot.database != InvalidOid && time_due(slot, now, 0);
            if (slot.database != InvalidOid && slot.state == slot_stopped && (slot.submitted > slot.settled || due)) {
                if (slot.failed_starts >= max_failed_starts) {
                    ereport(LOG, (errmsg("aq: the settler of database %u could not start; its requests are dropped",
                                         slot.database)));
                    int kept = 0;
                    for (int r = 0; r < shared->request_count; r++)
                        if (shared->requests[r].database != slot.database) shared->requests[kept++] = shared->requests[r];
                    shared->request_count = kept;
                    kept = 0;
                    for (int r = 0; r < shared->receipt_count; r++)
                        if (shared->receipt_claims[r].database != slot.database)
                            shared->receipt_claims[kept++] = shared->receipt_claims[r];
                    shared->receipt_count = kept;
                    count_receipt_claims();
                    if (slot.starved) pg_atomic_fetch_sub_u32(&shared->starved_slots, 1);
                    slot = DatabaseSlot{InvalidOid, slot_stopped, no_proc, 0, 0, 0, false, false, false, 0, {}};
                } else {
                    long interval = long(start_interval_ms) << Min(slot.failed_starts, 6u);
                    start = slot.failed_starts == 0 || TimestampDifferenceExceeds(slot.last_start, now, int(interval));
                }
            }
            // The time manager's starts count against aq.tm_processes, the database served longest
            // ago first (time_manager.hpp, 5).
            bool settle = slot.submitted > slot.settled;
            bool time_room = due && active < aq::queue::time_manager::processes() && served_first(slot, now);
            bool room = pass == 0 ? slot.urgent && active < max_urgent_workers
                                  : (settle && active < max_workers) || time_room;
            if (start && room) {
                start_worker(i);
                active++;
            } else if (pass == 1 && due && may_start(slot, now)) {
                time_waiting++;
            }
            LWLockRelease(shared->lock);
        }
        // Until the next start interval, or the earliest due time still to come of a database
        // without a worker (one already due waits for room: a worker's exit wakes the launcher).
        long wait_ms = start_interval_ms;
        TimestampTz after = GetCurrentTimestamp();
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        // Databases now wait for room: the time manager's workers leave after their round.
        bool tell = time_waiting > 0 && shared->time_waiting == 0;
        shared->time_waiting = time_waiting;
        for (const auto& slot : shared->slots)
            if (tell && slot.database != InvalidOid && slot.state == slot_running) wake(slot.worker_procno);
        for (const auto& slot : shared->slots)
            if (slot.database != InvalidOid && slot.state == slot_stopped && slot.times.next_due > after &&
                time_due(slot, after, start_interval_ms))
                wait_ms = Min(wait_ms, Max(1L, TimestampDifferenceMilliseconds(after, slot.times.next_due)));
        LWLockRelease(shared->lock);
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
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
    // Its transactions read committed and may write, whatever the database's or the server's
    // defaults: a sweep or settle at SERIALIZABLE would fail the consumers it works for (40001).
    SetConfigOption("default_transaction_isolation", "read committed", PGC_SUSET, PGC_S_OVERRIDE);
    SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    slot->state = slot_running;
    slot->failed_starts = 0;
    for (int i = 0; i < shared->receipt_count; i++)  // no other worker of the database is writing them
        if (shared->receipt_claims[i].database == database) shared->receipt_claims[i].taken = false;
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
    TimestampTz receipts_next = 0;  // aborted receipts given back wait until then (no scan: a sleep's end)
    int rounds_left = 0;
    bool rounds_done = false;  // this worker ran a time manager's round
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
        // And its aborted receipts (once_walk.hpp, 5), unless the last ones failed a moment ago.
        int nr = 0;
        bool receipts_here = false;  // of this database, due or not: the worker stays for them
        receipts_next = 0;
        ReceiptClaim* receipts = nullptr;
        if (shared->receipt_count > 0) {
            // They stay in the array, marked taken, until written: walks hold their messages (5).
            // One given back after a failure waits for its time (not_before); the others do not.
            TimestampTz taken_receipts_at = GetCurrentTimestamp();
            receipts = static_cast<ReceiptClaim*>(palloc(sizeof(ReceiptClaim) * shared->receipt_count));
            for (int i = 0; i < shared->receipt_count; i++) {
                ReceiptClaim& c = shared->receipt_claims[i];
                if (c.database != database) continue;
                receipts_here = true;
                if (c.taken) continue;
                if (c.not_before > taken_receipts_at) {
                    if (receipts_next == 0 || c.not_before < receipts_next) receipts_next = c.not_before;
                    continue;
                }
                c.taken = true;
                receipts[nr++] = c;
            }
        }
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
        bool quiet = n == 0 && nr == 0 && !scan && !slot->scan_wanted && slot->settled == upto;
        TimestampTz now = GetCurrentTimestamp();
        bool time_on = aq::queue::time_manager::processes() > 0;
        bool time_now = time_due(*slot, now, 0);
        TimestampTz time_next = time_on ? slot->times.next_due : 0;
        bool idle = quiet && !owed && !time_now;
        // A worker stays while its database's next due time is within a minute, unless other
        // databases wait for a time manager: then it leaves after its round (5).
        bool yield = quiet && !owed && rounds_done && shared->time_waiting > 0;
        if ((yield || (idle && !time_due(*slot, now, 60000) && TimestampDifferenceExceeds(idle_since, now, idle_exit_ms))) &&
            !rescan_at && !receipts_here) {
            slot->state = slot_stopped;
            slot->worker_procno = no_proc;
            my_slot = nullptr;
            uint32 launcher = shared->time_waiting > 0 ? shared->launcher_procno : no_proc;
            LWLockRelease(shared->lock);
            wake(launcher);  // its room goes to a database waiting for a round
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
        if (quiet && !scan && !time_now) {
            MemoryContextSwitchTo(outer);
            long wait_ms = rescan_at ? Max(1L, TimestampDifferenceMilliseconds(now, rescan_at)) : 1000L;
            if (receipts_next != 0)
                wait_ms = Min(wait_ms, Max(1L, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), receipts_next)));
            if (owed) wait_ms = Min(wait_ms, Max(1L, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), next_sweep)));
            if (time_next != 0)
                wait_ms = Min(wait_ms, Max(1L, TimestampDifferenceMilliseconds(GetCurrentTimestamp(), time_next)));
            (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
                AQ_WAIT_EVENT("AqSettlerMain"));
            continue;
        }
        if (quiet && !scan) {  // only the time manager's round is due
            run_time_round(slot);
            rounds_done = true;
            idle_since = GetCurrentTimestamp();
            MemoryContextSwitchTo(outer);
            continue;
        }

        bool left = false;
        bool extension_missing = false;
        // The aborted receipts, per receipts table; those a unit could not write (an error, the
        // table or a consumer's walk lock busy) go back to the shared array until their retry time.
        {
            auto* grouped = static_cast<bool*>(palloc0(sizeof(bool) * Max(nr, 1)));
            auto* batch = static_cast<ReceiptClaim*>(palloc(sizeof(ReceiptClaim) * Max(nr, 1)));
            auto* written = static_cast<bool*>(palloc(sizeof(bool) * Max(nr, 1)));
            for (int i = 0; i < nr; i++) {
                if (grouped[i]) continue;
                int k = 0;
                for (int j = i; j < nr; j++)
                    if (!grouped[j] && receipts[j].receipts == receipts[i].receipts) {
                        batch[k++] = receipts[j];
                        grouped[j] = true;
                    }
                UnitResult unit = run_receipts_unit(receipts[i].receipts, batch, k, written);
                extension_missing = unit.extension_missing;
                // A unit that failed backs off as any settle; a consumer's walk lock that was busy (a
                // walk holds it for moments) is tried again soon.
                TimestampTz retry_at = TimestampTzPlusMilliseconds(
                    GetCurrentTimestamp(), unit.left ? long(rescan_ms) << Min(rounds_left, 6) : busy_retry_ms);
                if (unit.left) left = true;
                LWLockAcquire(shared->lock, LW_EXCLUSIVE);
                finish_receipt_claims(batch, k, written, retry_at);
                LWLockRelease(shared->lock);
            }
        }
        for (int i = 0; i < n; i++)
            if (!OidIsValid(taken[i].relid)) scan = true;
        // Registered xids that had aborted before the scan: a clean scan settled all their claims.
        int naborted = 0;
        TransactionId* aborted_before = scan ? aborted_dequeuers(database, &naborted) : nullptr;
        if (scan) {
            Oid* tables = nullptr;
            int ntables = 0;
            UnitResult listing = run_unit(InvalidOid, nullptr, 0, &tables, &ntables);
            left |= listing.left;
            extension_missing = listing.extension_missing;
            for (int i = 0; i < ntables; i++) left |= run_unit(tables[i], nullptr, 0, nullptr, nullptr).left;
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
                UnitResult unit = run_unit(taken[i].relid, tids, k, nullptr, nullptr);
                left |= unit.left;
                extension_missing = unit.extension_missing;
            }
        }
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        if (slot->settled < upto) slot->settled = upto;
        if (!left) {
            for (int i = 0; i < n; i++)
                if (TransactionIdIsValid(taken[i].xid)) forget_one(taken[i].xid);
        }
        LWLockRelease(shared->lock);
        if (scan && !left) forget_dequeuers(aborted_before, naborted);
        for (int i = 0; i < n; i++) {
            bool seen = false;
            for (int j = 0; j < i && !seen; j++) seen = taken[j].requester == taken[i].requester;
            if (!seen) wake(taken[i].requester);
        }
        for (int i = 0; i < nr; i++) wake(receipts[i].requester);
        // Rows left (locked, or a settle that keeps failing): scan again, backing off from a
        // second to a minute.
        rounds_left = left ? rounds_left + 1 : 0;
        if (left)
            rescan_at = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), long(rescan_ms) << Min(rounds_left - 1, 6));

        idle_since = GetCurrentTimestamp();
        // A database without aq (the scan after a start visits every database): leave at
        // once, so that it is not kept busy (CREATE DATABASE from it as a template).
        if (extension_missing && !left) idle_since = 0;
        // A scan follows a start: a round now; settled attempts may carry a retry delay: a round
        // soon (time_manager.hpp, 5).
        if (time_on && !extension_missing) {
            LWLockAcquire(shared->lock, LW_EXCLUSIVE);
            if (!scan) want_round_soon(slot, GetCurrentTimestamp());
            bool round_now = scan || time_due(*slot, GetCurrentTimestamp(), 0);
            LWLockRelease(shared->lock);
            // Here too, not only on a quiet pass: a stream of settles must not hold rounds off.
            if (round_now) {
                run_time_round(slot);
                rounds_done = true;
            }
        }
        MemoryContextSwitchTo(outer);
    }
    proc_exit(0);
}
