// See log_writer.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/wait_event.h"
}

#include <cstring>

#include "compat/wait_event.hpp"
#include "compat/proc.hpp"
#include "commit/log_writer.hpp"
#include "base/worker_spec.hpp"

namespace aq::commit::log_writer {

namespace {

struct Shared {
    pg_atomic_uint64 requested;  // flush the WAL up to here
    pg_atomic_uint64 flushes;
    pg_atomic_uint32 writer_pgprocno;  // the running log writer's PGPROC, or UINT32_MAX
};
Shared* shared = nullptr;

constexpr uint32 no_writer = UINT32_MAX;

void raise_to(pg_atomic_uint64* target, uint64 value) {
    uint64 current = pg_atomic_read_u64(target);
    while (current < value && !pg_atomic_compare_exchange_u64(target, &current, value)) {
    }
}

void forget_writer(int, Datum) {
    if (shared) pg_atomic_write_u32(&shared->writer_pgprocno, no_writer);
}

}  // namespace

void register_worker() {
    BackgroundWorker worker = base::worker_spec("aq_log_writer_main", "aq log writer", BGWORKER_SHMEM_ACCESS, 1);
    RegisterBackgroundWorker(&worker);
}

std::size_t shmem_size() {
    return MAXALIGN(sizeof(Shared));
}

void shmem_startup() {
    bool found = false;
    shared = static_cast<Shared*>(ShmemInitStruct("aq log writer", sizeof(Shared), &found));
    if (!found) {
        pg_atomic_init_u64(&shared->requested, 0);
        pg_atomic_init_u64(&shared->flushes, 0);
        pg_atomic_init_u32(&shared->writer_pgprocno, no_writer);
    }
}

void request_flush(uint64_t lsn) {
    if (!shared) return;
    raise_to(&shared->requested, lsn);
    uint32 procno = pg_atomic_read_u32(&shared->writer_pgprocno);
    if (procno != no_writer)
        SetLatch(compat::proc_latch(procno));
    else if (Latch* wal_writer = compat::wal_writer_latch())
        SetLatch(wal_writer);
}

int64_t flushes() {
    return shared ? int64_t(pg_atomic_read_u64(&shared->flushes)) : 0;
}

}  // namespace aq::commit::log_writer

// The worker's body: PostgreSQL calls only, no C++ object is alive in this frame.
void aq_log_writer_main(Datum) {
    using namespace aq::commit::log_writer;
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    BackgroundWorkerUnblockSignals();
    if (!shared) proc_exit(1);
    before_shmem_exit(forget_writer, 0);
    pg_atomic_write_u32(&shared->writer_pgprocno, aq::compat::my_proc_number());
    while (!ShutdownRequestPending) {
        ResetLatch(MyLatch);
        XLogRecPtr want = pg_atomic_read_u64(&shared->requested);
        if (!RecoveryInProgress() && want > GetFlushRecPtr(nullptr)) {
            XLogFlush(want);
            pg_atomic_fetch_add_u64(&shared->flushes, 1);
            continue;  // commits that came in meanwhile: flush them at once
        }
        pgstat_report_wal(false);  // its writes and syncs count in pg_stat_wal (when idle: cheap)
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L, AQ_WAIT_EVENT("AqLogWriterMain"));
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
    }
    // A smart or fast shutdown: flush what was asked for before leaving.
    XLogRecPtr want = pg_atomic_read_u64(&shared->requested);
    if (!RecoveryInProgress() && want > GetFlushRecPtr(nullptr)) XLogFlush(want);
    pgstat_report_wal(true);
    proc_exit(0);
}
