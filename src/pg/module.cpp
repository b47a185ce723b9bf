// Library entry: PG_MODULE_MAGIC, _PG_init, the parameters, shared-memory hooks and the
// handlers each capability runs at the end of a transaction (through base/xact_end.hpp, the
// only transaction callback).  Shared memory is requested only when aq is in
// shared_preload_libraries (PostgreSQL 15: RequestAddinShmemSpace is allowed only in
// shmem_request_hook).
extern "C" {
#include "postgres.h"
#include "executor/executor.h"
#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/shmem.h"
#include "nodes/parsenodes.h"
#include "tcop/utility.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;
PGDLLEXPORT void _PG_init(void);
}

#include "base/xact_end.hpp"
#include "commit/committer.hpp"
#include "commit/log_writer.hpp"
#include "commit/settings.hpp"
#include "ingest/drain.hpp"
#include "ingest/ring.hpp"
#include "ingest/settings.hpp"
#include "ingest/writer.hpp"
#include "base/guard.hpp"
#include "base/statement.hpp"
#include "queue/queue_store.hpp"
#include "queue/retries.hpp"
#include "queue/ring.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"
#include "queue/time_manager.hpp"
#include "queue/wakeup.hpp"
#include "queue/deliveries.hpp"
#include "queue/immediate.hpp"

namespace {

shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;
ProcessUtility_hook_type prev_process_utility_hook = nullptr;
ExecutorStart_hook_type prev_executor_start_hook = nullptr;
ExecutorRun_hook_type prev_executor_run_hook = nullptr;

// A statement after a dequeue in the same transaction (the message's processing) starts with
// the dequeue's claims on disk (retries.hpp, 1).
void executor_start(QueryDesc* query_desc, int eflags) {
    aq::queue::retries::flush_pending_claims();
    if (prev_executor_start_hook)
        prev_executor_start_hook(query_desc, eflags);
    else
        standard_ExecutorStart(query_desc, eflags);
}

// Where a call stands in its statement (base/statement.hpp, 1).
#if PG_VERSION_NUM >= 180000
void executor_run(QueryDesc* query_desc, ScanDirection direction, uint64 count) {
#define AQ_RUN_ARGS query_desc, direction, count
#else
void executor_run(QueryDesc* query_desc, ScanDirection direction, uint64 count, bool execute_once) {
#define AQ_RUN_ARGS query_desc, direction, count, execute_once
#endif
    aq::base::statement::run_started(query_desc);
    PG_TRY();
    {
        if (prev_executor_run_hook)
            prev_executor_run_hook(AQ_RUN_ARGS);
        else
            standard_ExecutorRun(AQ_RUN_ARGS);
    }
    PG_FINALLY();
    {
        aq::base::statement::run_ended();
    }
    PG_END_TRY();
#undef AQ_RUN_ARGS
}

void request_shmem() {
    if (prev_shmem_request_hook) prev_shmem_request_hook();
    RequestAddinShmemSpace(aq::queue::wakeup::shmem_size());
    RequestAddinShmemSpace(aq::queue::scan_floor::shmem_size());
    RequestAddinShmemSpace(aq::commit::settings::shmem_size());
    RequestAddinShmemSpace(aq::commit::committer::shmem_size());
    RequestAddinShmemSpace(aq::commit::log_writer::shmem_size());
    RequestAddinShmemSpace(aq::ingest::ring::shmem_size());
    aq::ingest::ring::request_lwlocks();
    RequestAddinShmemSpace(aq::queue::settler::shmem_size());
    aq::queue::settler::request_lwlocks();
    RequestAddinShmemSpace(aq::queue::immediate::shmem_size());
    aq::queue::immediate::request_lwlocks();
}

void startup_shmem() {
    if (prev_shmem_startup_hook) prev_shmem_startup_hook();
    aq::base::entry_void([] {
        aq::queue::wakeup::shmem_startup();
        aq::queue::scan_floor::shmem_startup();
        aq::commit::settings::shmem_startup();
        aq::commit::committer::shmem_startup();
        aq::commit::log_writer::shmem_startup();
        aq::ingest::ring::shmem_startup();
        aq::queue::settler::shmem_startup();
        aq::queue::immediate::shmem_startup();
    });
}

// Transaction ends (base/xact_end.hpp states what each handler may do).  Registration order
// is call order: the fast-ingest writer's pre-commit may wait for ring space or raise, so it
// comes before the commit mode is decided; the others only touch plain data, atomics,
// condition variables and the WAL flush.
void register_transaction_ends() {
    using aq::base::xact_end::Handlers;
    namespace writer = aq::ingest::writer;
    namespace committer = aq::commit::committer;
    namespace wakeup = aq::queue::wakeup;
    namespace retries = aq::queue::retries;

    Handlers ingest{};
    ingest.name = "fast ingest";
    ingest.pre_commit = writer::pre_commit;
    ingest.commit = writer::at_commit;
    ingest.abort = writer::at_abort;
    ingest.pre_prepare = writer::pre_prepare;  // refuses buffered rows (0A000)
    ingest.prepare = writer::at_prepare;
    ingest.sub_start = [](SubTransactionId mine, SubTransactionId parent) {
        writer::at_subxact(SUBXACT_EVENT_START_SUB, mine, parent);
    };
    ingest.sub_commit = [](SubTransactionId mine, SubTransactionId parent) {
        writer::at_subxact(SUBXACT_EVENT_COMMIT_SUB, mine, parent);
    };
    ingest.sub_abort = [](SubTransactionId mine, SubTransactionId parent) {
        writer::at_subxact(SUBXACT_EVENT_ABORT_SUB, mine, parent);
    };
    ingest.exit = writer::at_exit;
    aq::base::xact_end::add(ingest);

    Handlers commit_modes{};
    commit_modes.name = "commit modes";
    commit_modes.pre_commit = committer::pre_commit;
    commit_modes.commit = committer::at_commit;
    commit_modes.abort = committer::at_abort;
    // PREPARE runs no pre-commit, so no mode was decided; forget anything left, as at abort.
    commit_modes.prepare = committer::at_abort;
    aq::base::xact_end::add(commit_modes);

    // Before the wake-ups: an aborting transaction hands its claims to the settler and waits
    // (boundedly) until they are counted, and only then wakes the dequeues waiting for those
    // messages, which would otherwise pass over the ones not settled yet.
    Handlers attempts{};
    attempts.name = "dequeue attempts";
    attempts.commit = [] { retries::at_commit(); };
    attempts.abort = [] { retries::at_abort(); };
    attempts.prepare = [] { retries::at_prepare(); };
    attempts.sub_commit = [](SubTransactionId, SubTransactionId) { retries::at_subtransaction_commit(); };
    attempts.sub_abort = [](SubTransactionId, SubTransactionId) { retries::at_subtransaction_abort(); };
    aq::base::xact_end::add(attempts);

    Handlers wakeups{};
    wakeups.name = "queue wake-ups";
    wakeups.commit = wakeup::at_commit;
    wakeups.abort = wakeup::at_abort;
    wakeups.prepare = wakeup::at_prepare;
    wakeups.parallel_commit = wakeup::at_commit;
    wakeups.parallel_abort = wakeup::at_abort;
    wakeups.commit_unlocked = wakeup::after_commit_unlocked;
    wakeups.abort_unlocked = wakeup::after_abort_unlocked;
    wakeups.sub_abort_unlocked = wakeup::after_subtransaction_abort_unlocked;
    aq::base::xact_end::add(wakeups);

    // After the wake-ups: a commit that wrote a delayed or expiring message lowers its database's
    // due time for the time manager, once the commit is visible (time_manager.hpp, 2).
    Handlers times{};
    times.name = "time manager";
    times.commit = [] {};
    times.abort = aq::queue::time_manager::at_abort;
    times.prepare = aq::queue::time_manager::at_abort;
    times.parallel_abort = aq::queue::time_manager::at_abort;
    times.commit_unlocked = aq::queue::time_manager::after_commit_unlocked;
    aq::base::xact_end::add(times);

    // A committed dequeue whose sweep was contended asks the settler for one (deliveries.hpp).
    Handlers sweeps{};
    sweeps.name = "removal sweeps";
    sweeps.commit = aq::queue::deliveries::at_commit;
    sweeps.abort = aq::queue::deliveries::at_abort;
    // At PREPARE too: the settler's sweep finds the prepared transaction's deliveries contended
    // until COMMIT PREPARED, and asks again each second (a ROLLBACK PREPARED leaves it nothing).
    sweeps.prepare = aq::queue::deliveries::at_commit;
    aq::base::xact_end::add(sweeps);

    // Dequeue positions belong to their transaction (by local transaction id); a rolled-back
    // subtransaction may have returned the messages they point past.
    Handlers positions{};
    positions.name = "dequeue positions";
    positions.sub_abort = [](SubTransactionId, SubTransactionId) { aq::queue::forget_positions(); };
    aq::base::xact_end::add(positions);

    aq::base::xact_end::install();
}

// COMMIT PREPARED / ROLLBACK PREPARED: mark the transaction so its end wakes every channel and
// has the time manager look at the database.
// Any other utility statement after a dequeue flushes its claims first (retries.hpp, 1).
void process_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* query_env,
                     DestReceiver* dest, QueryCompletion* qc) {
    Node* statement = pstmt->utilityStmt;
    if (IsA(statement, TransactionStmt)) {
        auto kind = castNode(TransactionStmt, statement)->kind;
        if (kind == TRANS_STMT_COMMIT_PREPARED || kind == TRANS_STMT_ROLLBACK_PREPARED) {
            aq::queue::wakeup::note_prepared_transaction_end();
            aq::queue::time_manager::note_prepared_transaction_end();
        }
    } else {
        aq::queue::retries::flush_pending_claims();  // as for a statement (executor_start)
    }
    aq::base::statement::utility_started();
    PG_TRY();
    {
        if (prev_process_utility_hook)
            prev_process_utility_hook(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
        else
            standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
    }
    PG_FINALLY();
    {
        aq::base::statement::utility_ended();
    }
    PG_END_TRY();
}

}  // namespace

void _PG_init(void) {
    if (process_shared_preload_libraries_in_progress) {
        prev_shmem_request_hook = shmem_request_hook;
        shmem_request_hook = request_shmem;
        prev_shmem_startup_hook = shmem_startup_hook;
        shmem_startup_hook = startup_shmem;
        prev_process_utility_hook = ProcessUtility_hook;
        ProcessUtility_hook = process_utility;
        prev_executor_start_hook = ExecutorStart_hook;
        ExecutorStart_hook = executor_start;
        prev_executor_run_hook = ExecutorRun_hook;
        ExecutorRun_hook = executor_run;
        aq::commit::log_writer::register_worker();
        aq::ingest::drain::register_launcher();
        aq::queue::settler::register_launcher();
    }
    aq::base::entry_void([] { aq::commit::settings::define(process_shared_preload_libraries_in_progress); });
    aq::ingest::settings::define(process_shared_preload_libraries_in_progress);
    aq::queue::wakeup::define_settings();
    aq::queue::time_manager::define_settings();
    aq::queue::ring::define_settings();
    aq::queue::immediate::define_settings();
    aq::ingest::writer::install_hooks();
    MarkGUCPrefixReserved("aq");
    register_transaction_ends();
}
