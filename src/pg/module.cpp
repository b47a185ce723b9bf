// Library entry: PG_MODULE_MAGIC, _PG_init, the parameters, shared-memory hooks and the
// transaction callbacks (queue wake-ups, commit modes, fast ingest).  Shared memory is requested only when aq is in shared_preload_libraries
// (PostgreSQL 15: RequestAddinShmemSpace is allowed only in shmem_request_hook).
extern "C" {
#include "postgres.h"
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

#include "commit/committer.hpp"
#include "commit/log_writer.hpp"
#include "commit/settings.hpp"
#include "ingest/drain.hpp"
#include "ingest/ring.hpp"
#include "ingest/settings.hpp"
#include "ingest/writer.hpp"
#include "pg/guard.hpp"
#include "queue/queue_store.hpp"
#include "queue/retries.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"
#include "queue/wakeup.hpp"

namespace {

shmem_request_hook_type prev_shmem_request_hook = nullptr;
shmem_startup_hook_type prev_shmem_startup_hook = nullptr;
ProcessUtility_hook_type prev_process_utility_hook = nullptr;

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
}

void startup_shmem() {
    if (prev_shmem_startup_hook) prev_shmem_startup_hook();
    aq::pg::entry_void([] {
        aq::queue::wakeup::shmem_startup();
        aq::queue::scan_floor::shmem_startup();
        aq::commit::settings::shmem_startup();
        aq::commit::committer::shmem_startup();
        aq::commit::log_writer::shmem_startup();
        aq::ingest::ring::shmem_startup();
        aq::queue::settler::shmem_startup();
    });
}

void on_xact_event(XactEvent event, void*) {
    // Called by PostgreSQL: nothing may throw past here.  Pre-commit may raise (the
    // transaction then aborts), through entry_void; the other events only touch atomics,
    // condition variables and the WAL flush, which do not raise errors.
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
            aq::ingest::writer::pre_commit();  // may wait for ring space or raise: before the commit mode
            aq::pg::entry_void([] { aq::commit::committer::pre_commit(); });
            break;
        case XACT_EVENT_PRE_PREPARE:
            aq::ingest::writer::pre_prepare();
            break;
        case XACT_EVENT_COMMIT:
            aq::ingest::writer::at_commit();
            aq::commit::committer::at_commit();
            aq::queue::wakeup::at_commit();
            aq::queue::retries::at_commit();
            break;
        case XACT_EVENT_PARALLEL_COMMIT:
            aq::queue::wakeup::at_commit();
            break;
        case XACT_EVENT_PREPARE:
            aq::queue::wakeup::at_prepare();
            aq::queue::retries::at_prepare();
            break;
        case XACT_EVENT_ABORT:
            aq::ingest::writer::at_abort();
            aq::commit::committer::at_abort();
            aq::queue::wakeup::at_abort();
            aq::queue::retries::at_abort();
            break;
        case XACT_EVENT_PARALLEL_ABORT:
            aq::queue::wakeup::at_abort();
            break;
        default:
            break;
    }
}

void on_subxact_event(SubXactEvent event, SubTransactionId mine, SubTransactionId parent, void*) {
    aq::ingest::writer::at_subxact(event, mine, parent);  // savepoint marks of the rows buffered so far
    if (event == SUBXACT_EVENT_COMMIT_SUB) aq::queue::retries::at_subtransaction_commit();
    if (event != SUBXACT_EVENT_ABORT_SUB) return;
    aq::queue::retries::at_subtransaction_abort();
    // Plain stores, atomics and CV broadcasts: nothing here can fail.
    aq::queue::forget_positions();
    aq::queue::wakeup::at_subtransaction_abort();
}

// COMMIT PREPARED / ROLLBACK PREPARED: mark the transaction so its end wakes every channel.
void process_utility(PlannedStmt* pstmt, const char* query_string, bool read_only_tree,
                     ProcessUtilityContext context, ParamListInfo params, QueryEnvironment* query_env,
                     DestReceiver* dest, QueryCompletion* qc) {
    Node* statement = pstmt->utilityStmt;
    if (IsA(statement, TransactionStmt)) {
        auto kind = castNode(TransactionStmt, statement)->kind;
        if (kind == TRANS_STMT_COMMIT_PREPARED || kind == TRANS_STMT_ROLLBACK_PREPARED)
            aq::queue::wakeup::note_prepared_transaction_end();
    }
    if (prev_process_utility_hook)
        prev_process_utility_hook(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
    else
        standard_ProcessUtility(pstmt, query_string, read_only_tree, context, params, query_env, dest, qc);
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
        aq::commit::log_writer::register_worker();
        aq::ingest::drain::register_launcher();
        aq::queue::settler::register_launcher();
    }
    aq::pg::entry_void([] { aq::commit::settings::define(process_shared_preload_libraries_in_progress); });
    aq::ingest::settings::define(process_shared_preload_libraries_in_progress);
    aq::ingest::writer::install_hooks();
    MarkGUCPrefixReserved("aq");
    RegisterXactCallback(on_xact_event, nullptr);
    RegisterSubXactCallback(on_subxact_event, nullptr);
}
