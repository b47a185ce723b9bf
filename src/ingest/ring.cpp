// See ring.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "miscadmin.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
}

#include <cstdio>
#include <ctime>

#include "ingest/ring.hpp"
#include "ingest/settings.hpp"

namespace aq::ingest::ring {

Shared* shared = nullptr;

namespace {

constexpr const char* tranche_name = "aq fast ingest";
constexpr const char* epoch_file = "pg_aq_epoch";
constexpr uint32 max_epoch = (1u << 23) - 1;  // (epoch << 40) stays a positive bigint

uint64 data_bytes() {
    return (uint64(settings::buffer_kb) * 1024) & ~uint64(63);
}

// The next epoch: one more than the last one written to $PGDATA/pg_aq_epoch, made durable
// before any id of it is handed out.  If the file cannot be written, the clock stands in.
uint32 next_epoch() {
    unsigned long last = 0;
    if (FILE* f = AllocateFile(epoch_file, "r")) {
        if (fscanf(f, "%lu", &last) != 1) last = 0;
        FreeFile(f);
    }
    uint32 epoch = uint32(last % max_epoch) + 1;
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", epoch_file);
    FILE* f = AllocateFile(tmp, "w");
    bool ok = f != nullptr && fprintf(f, "%u\n", epoch) > 0 && fflush(f) == 0 && pg_fsync(fileno(f)) == 0;
    if (f) ok = FreeFile(f) == 0 && ok;
    if (ok) ok = durable_rename(tmp, epoch_file, LOG) == 0;
    if (!ok) {
        ereport(LOG, (errmsg("aq: could not record the fast-ingest epoch in \"%s\"; using the clock", epoch_file)));
        epoch = uint32(time(nullptr) % max_epoch) + 1;
    }
    return epoch;
}

}  // namespace

std::size_t shmem_size() {
    return MAXALIGN(sizeof(Shared)) + 64 + data_bytes();
}

void request_lwlocks() {
    RequestNamedLWLockTranche(tranche_name, 1);
}

void shmem_startup() {
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = static_cast<Shared*>(ShmemInitStruct("aq fast ingest ring", shmem_size(), &found));
    if (!found) {
        shared->lock = &(GetNamedLWLockTranche(tranche_name))->lock;
        shared->size = data_bytes();
        shared->head = shared->tail = 0;
        shared->epoch = next_epoch();
        shared->next_seq = seq_base(shared->epoch) + 1;
        pg_atomic_init_u64(&shared->rows_buffered, 0);
        pg_atomic_init_u32(&shared->writers, 0);
        pg_atomic_init_u32(&shared->launcher_procno, no_proc);
        pg_atomic_init_u64(&shared->retired_applied_rows, 0);
        pg_atomic_init_u64(&shared->retired_rejected_rows, 0);
        pg_atomic_init_u64(&shared->retired_batches, 0);
        ConditionVariableInit(&shared->space_freed);
        ConditionVariableInit(&shared->applied);
        for (auto& s : shared->slots) {
            s.database = InvalidOid;
            pg_atomic_init_u32(&s.state, slot_free);
            pg_atomic_init_u32(&s.worker_procno, no_proc);
            pg_atomic_init_u64(&s.apply_hwm, 0);
            pg_atomic_init_u64(&s.committed_hwm, 0);
            pg_atomic_init_u32(&s.failed_starts, 0);
            pg_atomic_init_u64(&s.applied_rows, 0);
            pg_atomic_init_u64(&s.rejected_rows, 0);
            pg_atomic_init_u64(&s.batches, 0);
            pg_atomic_init_u64(&s.last_start_ms, 0);
        }
        char* base = reinterpret_cast<char*>(shared) + MAXALIGN(sizeof(Shared));
        shared->data = reinterpret_cast<char*>(TYPEALIGN(64, base));
    }
    LWLockRelease(AddinShmemInitLock);
}

bool available() {
    return shared != nullptr;
}

void require_preloaded() {
    if (!available())
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("fast ingest needs aq in shared_preload_libraries"),
                        errhint("Add aq to shared_preload_libraries in postgresql.conf and restart the server.")));
}

uint64 seq_base(uint32 epoch) {
    return uint64(epoch) << seq_shift;
}

uint32 epoch_of(uint64 seq) {
    return uint32(seq >> seq_shift);
}

DatabaseSlot* slot_for_locked(Oid database) {
    DatabaseSlot* free_slot = nullptr;
    for (auto& s : shared->slots) {
        if (s.database == database) return &s;
        if (!free_slot && s.database == InvalidOid) free_slot = &s;
    }
    if (!free_slot) {
        for (auto& s : shared->slots) {
            if (pg_atomic_read_u32(&s.state) != slot_stopped ||
                pg_atomic_read_u64(&s.committed_hwm) > pg_atomic_read_u64(&s.apply_hwm))
                continue;
            pg_atomic_fetch_add_u64(&shared->retired_applied_rows, pg_atomic_exchange_u64(&s.applied_rows, 0));
            pg_atomic_fetch_add_u64(&shared->retired_rejected_rows, pg_atomic_exchange_u64(&s.rejected_rows, 0));
            pg_atomic_fetch_add_u64(&shared->retired_batches, pg_atomic_exchange_u64(&s.batches, 0));
            pg_atomic_write_u64(&s.last_start_ms, 0);
            free_slot = &s;
            break;
        }
    }
    if (free_slot) {
        free_slot->database = database;
        pg_atomic_write_u64(&free_slot->apply_hwm, seq_base(shared->epoch));
        pg_atomic_write_u64(&free_slot->committed_hwm, seq_base(shared->epoch));
        pg_atomic_write_u32(&free_slot->failed_starts, 0);
        pg_atomic_write_u32(&free_slot->state, slot_stopped);
    }
    return free_slot;
}

DatabaseSlot* find_slot(Oid database) {
    if (!shared) return nullptr;
    for (auto& s : shared->slots)
        if (s.database == database) return &s;
    return nullptr;
}

bool advance_tail() {
    bool moved = false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    uint64 tail = shared->tail;
    while (tail < shared->head) {
        RecordHeader* h = header_at(tail);
        uint32 state = pg_atomic_read_u32(&h->state);
        if (state != state_done && state != state_aborted && state != state_pad) break;
        tail += h->total_bytes;
        moved = true;
    }
    shared->tail = tail;
    LWLockRelease(shared->lock);
    if (moved) ConditionVariableBroadcast(&shared->space_freed);
    return moved;
}

void wake_launcher() {
    uint32 procno = pg_atomic_read_u32(&shared->launcher_procno);
    if (procno != no_proc) SetLatch(&ProcGlobal->allProcs[procno].procLatch);
}

void wake_drain(DatabaseSlot* slot) {
    uint32 procno = pg_atomic_read_u32(&slot->worker_procno);
    if (procno != no_proc)
        SetLatch(&ProcGlobal->allProcs[procno].procLatch);
    else
        wake_launcher();
}

}  // namespace aq::ingest::ring
