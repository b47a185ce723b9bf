// See ring.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "miscadmin.h"
#include "access/xlog.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
}

#include <cstdio>

#include "compat/proc.hpp"
#include "ingest/ring.hpp"
#include "ingest/settings.hpp"

namespace aq::ingest::ring {

Shared* shared = nullptr;

namespace {

constexpr const char* tranche_name = "aq fast ingest";
constexpr const char* epoch_file = "pg_aq_epoch";

uint64 data_bytes() {
    return (uint64(settings::buffer_kb) * 1024) & ~uint64(63);
}

// The counter recorded in $PGDATA/pg_aq_epoch (0 if none: a new cluster).
uint32 recorded_counter() {
    unsigned long last = 0;
    if (FILE* f = AllocateFile(epoch_file, "r")) {
        if (fscanf(f, "%lu", &last) != 1) last = 0;
        FreeFile(f);
    }
    return uint32(last & epoch_counter_mask);
}

// Writes the counter durably (temporary file, fsync, durable rename); false if it could not.
bool record_counter(uint32 counter) {
    char tmp[64];
    snprintf(tmp, sizeof tmp, "%s.tmp", epoch_file);
    FILE* f = AllocateFile(tmp, "w");
    bool ok = f != nullptr && fprintf(f, "%u\n", counter) > 0 && fflush(f) == 0 && pg_fsync(fileno(f)) == 0;
    if (f) ok = FreeFile(f) == 0 && ok;
    if (ok) ok = durable_rename(tmp, epoch_file, LOG) == 0;
    return ok;
}

}  // namespace

uint32 make_epoch(uint32 timeline, uint32 counter) {
    return seqid::make_epoch(timeline, counter);
}

uint32 next_counter(uint32 counter) {
    return seqid::next_counter(counter);
}

bool ids_fit(uint32 epoch, uint64 next_seq, uint64 rows) {
    return seqid::ids_fit(epoch, next_seq, rows);
}

bool new_epoch_locked() {
    if (RecoveryInProgress()) return false;
    uint32 counter = next_counter(recorded_counter());
    if (!record_counter(counter)) {
        ereport(LOG, (errcode_for_file_access(),
                      errmsg("aq: could not record the fast-ingest epoch in \"%s\": %m", epoch_file)));
        return false;
    }
    shared->epoch = make_epoch(GetWALInsertionTimeLine(), counter);
    shared->next_seq = seq_base(shared->epoch) + 1;
    return true;
}

bool ids_available_locked(uint64 rows) {
    if (ids_fit(shared->epoch, shared->next_seq, rows)) return true;
    return new_epoch_locked() && ids_fit(shared->epoch, shared->next_seq, rows);
}

bool adopt_foreign_epoch(uint32 epoch) {
    uint32 counter = epoch & epoch_counter_mask;
    auto raise_recorded = [counter] {
        if (recorded_counter() >= counter || record_counter(counter)) return true;
        ereport(LOG, (errcode_for_file_access(),
                      errmsg("aq: could not record the fast-ingest epoch in \"%s\": %m", epoch_file)));
        return false;
    };
    if (counter == 0) return true;
    if (!shared) return raise_recorded();  // not preloaded: no ring, no epoch in use
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    bool ok = raise_recorded();
    if (ok && shared->epoch != 0 && (shared->epoch & epoch_counter_mask) <= counter) ok = new_epoch_locked();
    LWLockRelease(shared->lock);
    return ok;
}

bool ensure_epoch() {
    if (!shared) return false;
    if (shared->epoch != 0) return true;
    if (RecoveryInProgress()) return false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    bool ok = shared->epoch != 0 || new_epoch_locked();
    LWLockRelease(shared->lock);
    return ok;
}

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
        shared->epoch = 0;  // chosen once recovery has ended (see the protocol)
        shared->next_seq = 0;
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
            pg_atomic_init_u64(&s.live_bytes, 0);
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
    return seqid::base(epoch);
}

uint32 epoch_of(uint64 seq) {
    return seqid::epoch_of(seq);
}

bool has_records_locked(Oid database) {
    for (uint64 pos = shared->tail; pos < shared->head;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        uint32 state = pg_atomic_read_u32(&h->state);
        if (h->database == database && (state == state_reserved || state == state_committed)) return true;
    }
    return false;
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
                pg_atomic_read_u64(&s.committed_hwm) > pg_atomic_read_u64(&s.apply_hwm) || has_records_locked(s.database))
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
        pg_atomic_write_u64(&free_slot->live_bytes, 0);  // it has no record in the ring
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

bool over_share_locked(DatabaseSlot* slot, uint64 bytes) {
    return pg_atomic_read_u64(&slot->live_bytes) + bytes > database_share();
}

uint64 watermark_locked(Oid database, uint64 finishing_batch, uint64 also_pending) {
    uint64 lowest = 0;
    for (uint64 pos = shared->tail; pos < shared->head;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (h->database != database || h->row_count == 0) continue;
        uint32 state = pg_atomic_read_u32(&h->state);
        if (state != state_reserved && state != state_committed) continue;
        if (state == state_committed && finishing_batch != 0 && h->batch == finishing_batch) continue;
        if (lowest == 0 || h->first_seq < lowest) lowest = h->first_seq;
    }
    if (also_pending != 0 && (lowest == 0 || also_pending < lowest)) lowest = also_pending;
    if (lowest != 0) return lowest - 1;
    return shared->epoch != 0 ? shared->next_seq - 1 : 0;
}

namespace {

bool finished(uint32 state) {
    return state == state_done || state == state_aborted || state == state_pad;
}

// A COMMITTED record: no process holds a pointer to it (see the protocol), it may be slid.
bool slidable(RecordHeader* h) {
    return pg_atomic_read_u32(&h->state) == state_committed;
}

}  // namespace

bool advance_tail() {
    bool moved = false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    uint64 tail = shared->tail;
    uint64 head = shared->head;
    while (tail < head) {
        RecordHeader* h = header_at(tail);
        if (finished(pg_atomic_read_u32(&h->state))) {
            tail += h->total_bytes;
            moved = true;
            continue;
        }
        if (!slidable(h)) break;
        // Committed records at the tail: slide them forward over the finished records behind them
        // (within one lap of the array: records never wrap), freeing that space.
        uint64 block = 0;
        while (tail + block < head && slidable(header_at(tail + block)) &&
               (tail + block) % shared->size + header_at(tail + block)->total_bytes < shared->size)
            block += header_at(tail + block)->total_bytes;
        uint64 gap = 0;
        while (block > 0 && tail + block + gap < head && (tail + block + gap) % shared->size != 0) {
            RecordHeader* r = header_at(tail + block + gap);
            if (!finished(pg_atomic_read_u32(&r->state))) break;
            gap += r->total_bytes;
        }
        if (gap == 0) break;
        char* from = shared->data + tail % shared->size;
        memmove(from + gap, from, block);
        tail += gap;
        moved = true;
    }
    shared->tail = tail;
    LWLockRelease(shared->lock);
    if (moved) ConditionVariableBroadcast(&shared->space_freed);
    return moved;
}

void wake_launcher() {
    uint32 procno = pg_atomic_read_u32(&shared->launcher_procno);
    if (procno != no_proc) SetLatch(compat::proc_latch(procno));
}

void wake_drain(DatabaseSlot* slot) {
    uint32 procno = pg_atomic_read_u32(&slot->worker_procno);
    if (procno != no_proc)
        SetLatch(compat::proc_latch(procno));
    else
        wake_launcher();
}

}  // namespace aq::ingest::ring
