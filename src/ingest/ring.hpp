// The fast-ingest ring: Oracle's MEMOPTIMIZE FOR WRITE buffer (the large pool) in shared memory.
//
// Protocol
//  * Space.  One byte array of aq.fast_ingest_buffer bytes, addressed by two monotonic 64-bit
//    positions: `head` (next byte to hand out) and `tail` (first byte still in use).  A record
//    is one chunk of rows of one transaction, for one table and one role; it never wraps: when
//    it does not fit before the end of the array, a PAD record fills the rest.  Every size is
//    a multiple of 64 bytes, so a gap is always large enough for a PAD header.
//  * Writers (sessions, at pre-commit) reserve every chunk of their transaction at once while
//    holding `lock` exclusively for a few arithmetic steps: all or nothing, so two large
//    transactions can never each hold half of the ring and wait for the other.  Under the lock
//    they also take the rows' sequence ids, so id order is ring order.  They copy the rows and
//    compute each record's CRC-32C after releasing the lock.  A record is RESERVED until the
//    transaction's commit marks it COMMITTED (or its abort ABORTED): plain atomic stores that
//    cannot fail.  No space: wait on `space_freed` (bounded by aq.fast_ingest_wait_timeout,
//    cancellable), then a clear error that aborts the transaction.
//  * Drain workers (one per database) walk [tail, head) holding `lock` shared, which keeps the
//    tail from moving under them; writers only ever write in [head, tail + size).  A worker
//    applies the COMMITTED records of its own database in ring order, stops at the first
//    RESERVED one of its database, marks applied ones DONE, then advances the tail over every
//    DONE / ABORTED / PAD record, sliding COMMITTED ones out of the way (below; lock
//    exclusive), and broadcasts `space_freed` and `applied`.
//  * Databases are independent.  Each slot counts the ring bytes of its database's RESERVED and
//    COMMITTED records (live_bytes: added by writers when they reserve, removed when a record
//    becomes ABORTED or DONE).  No database may hold more than database_share (three quarters)
//    of the ring, so one transaction can take at most that much: a stalled drain fills its own
//    share, and its writers get the full-ring error, never the other databases'.  A record its
//    drain defers (its table ran over the batch's time budget) waits a little before its next
//    try, while the rows behind it go on.  A drain copies the records it takes (under the lock)
//    and works on the copies, finding the records again by id when it is done; writers touch
//    only their RESERVED records.  So no process holds a pointer to a COMMITTED record, and
//    advance_tail slides COMMITTED records at the tail forward over the finished records
//    behind them (memmove under the lock, within one lap of the array): a slow table's rows
//    never pin the tail that the other databases' space is freed behind.  Rows are then no
//    longer applied in id order (deferred ones come later): a database's apply watermark is
//    one less than the lowest id of its records still RESERVED or COMMITTED (or the last id
//    handed out, if it has none).
//  * Epochs and ids.  Sequence id = (epoch << 40) + n, 1 <= n < 2^40.  An epoch is the
//    timeline (its low 6 bits) and a counter (17 bits, 1..131071) kept in $PGDATA/pg_aq_epoch.
//    No epoch exists until recovery has ended: a server in recovery (a standby, a crash
//    restart replaying WAL) never chooses one.  The first to need one afterwards (the
//    launcher when it starts, or a writer, under `lock` exclusively) takes the next counter,
//    writes it durably (fsync, durable rename) before any id of it is handed out, and
//    combines it with the timeline it writes WAL on.  So ids never repeat on one server
//    (the counter grows at every start and crash restart), nor between a primary and a copy
//    made with pg_basebackup, or a standby, once one of them is promoted or restored through
//    archive recovery: each then writes on a timeline of its own, and the copied counter it
//    continues from is only shared history.  (Two servers started from one copy on the same
//    timeline without recovery are a split brain that PostgreSQL's own timeline history
//    cannot tell apart either.)  An epoch whose ids run out (2^40 - 1) is followed by a new
//    one, taken the same way; if pg_aq_epoch cannot be written, no id is handed out (the
//    commit fails) rather than one that might repeat.  A database moved here from another
//    server (pg_dump and restore) brings that server's epochs in aq.fast_ingest_progress:
//    each row written there by anyone but the drain (the restore) raises the recorded counter
//    to at least that epoch's (adopt_foreign_epoch), so this server's ids are not that
//    server's either.
//  * Watermarks.  Each database's slot keeps its apply watermark: every row of that database
//    committed since the ring was set up (its ids are of this server run's epochs) with an
//    id at or below it has been applied or rejected.  Ids of an earlier run are answered by
//    aq.fast_ingest_progress, which each drain transaction updates per epoch.
#pragma once

extern "C" {
#include "postgres.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "utils/timestamp.h"
}

#include <cstddef>
#include <cstring>

#include "ingest/seqid.hpp"

namespace aq::ingest::ring {

enum RecordState : uint32 {
    state_reserved = 1,   // being filled, or its transaction has not committed yet
    state_committed = 2,  // ready for the drain
    state_aborted = 3,    // its transaction rolled back: never applied
    state_done = 4,       // applied or rejected
    state_pad = 5,        // filler up to the end of the array
};

constexpr uint32 record_magic = 0x41514652;  // "AQFR"
constexpr int seq_shift = seqid::shift;
constexpr uint32 epoch_counter_mask = seqid::counter_mask;

// The header of one record.  After it: the layout the rows were written with (natts Columns,
// padded to MAXALIGN), then the search_path of the writer's session when it inserted them
// (NUL-terminated, padded to MAXALIGN; the drain applies the rows with it), then the rows,
// each a MinimalTuple (t_len first) padded to MAXALIGN.
struct RecordHeader {
    uint32 magic;
    pg_atomic_uint32 state;
    uint32 total_bytes;   // header + payload, a multiple of 64
    uint32 payload_bytes;
    uint32 crc;           // CRC-32C of the payload
    uint32 row_count;
    uint64 first_seq;
    Oid database;
    Oid relation;
    Oid role;
    int16 natts;
    int16 attempts;       // drain attempts; a record that keeps failing is rejected, not retried forever
    int32 writer_pid;
    TimestampTz committed_at;
    // The drain's own (only the database's drain worker reads or writes them once COMMITTED):
    TimestampTz not_before;  // deferred (its table was over the batch's time budget) until then
    int16 deferrals;         // times deferred: each doubles the next attempt's time budget
    bool deferred;           // (in the drain's copy) deferred by the batch being applied
    uint64 batch;            // the drain batch that took it (0: none)
};

// A column as the writer saw it; the drain compares it with the table as it is then.
struct Column {
    Oid type;
    int32 typmod;
};
inline std::size_t layout_bytes(int natts) { return MAXALIGN(sizeof(Column) * natts); }

constexpr std::size_t header_bytes = (sizeof(RecordHeader) + 63) & ~std::size_t(63);
inline uint32 record_bytes(std::size_t payload) {
    return uint32((header_bytes + payload + 63) & ~std::size_t(63));
}
inline char* payload_of(RecordHeader* h) { return reinterpret_cast<char*>(h) + header_bytes; }
inline Column* layout_of(RecordHeader* h) { return reinterpret_cast<Column*>(payload_of(h)); }
inline char* search_path_of(RecordHeader* h) { return payload_of(h) + layout_bytes(h->natts); }
// The bytes a record's search_path may take (bounded by its payload, for a damaged record).
inline std::size_t search_path_room(RecordHeader* h) {
    std::size_t layout = layout_bytes(h->natts);
    return h->payload_bytes > layout ? h->payload_bytes - layout : 0;
}
inline std::size_t search_path_bytes(const char* search_path) { return MAXALIGN(strlen(search_path) + 1); }
inline char* rows_of(RecordHeader* h) {
    return search_path_of(h) + MAXALIGN(strnlen(search_path_of(h), search_path_room(h)) + 1);
}

// A database being drained.
enum SlotState : uint32 { slot_free = 0, slot_stopped = 1, slot_starting = 2, slot_running = 3 };
constexpr int max_databases = 64;
struct DatabaseSlot {
    Oid database;                  // InvalidOid: unused (changed under lock)
    pg_atomic_uint32 state;
    pg_atomic_uint32 worker_procno;  // the drain worker's PGPROC, while running
    pg_atomic_uint64 apply_hwm;      // every row of this database with an id <= it is applied or rejected
    pg_atomic_uint64 committed_hwm;  // the highest id committed in this database
    pg_atomic_uint32 failed_starts;  // drain workers that exited before running (e.g. database dropped)
    pg_atomic_uint64 applied_rows;
    pg_atomic_uint64 rejected_rows;
    pg_atomic_uint64 batches;
    pg_atomic_uint64 last_start_ms;  // when the launcher last started a worker (ms since epoch start)
    pg_atomic_uint64 live_bytes;     // ring bytes of this database's RESERVED and COMMITTED records
};

struct Shared {
    LWLock* lock;
    uint64 size;                 // bytes in `data`
    uint64 head;                 // under lock (exclusive to change); read with barriers
    uint64 tail;
    uint64 next_seq;             // under lock
    uint32 epoch;                // under lock; 0 until chosen (see the protocol)
    pg_atomic_uint64 rows_buffered;  // committed or reserved rows not yet DONE
    pg_atomic_uint32 writers;        // sessions with rows in their transaction or in the ring
    pg_atomic_uint32 launcher_procno;
    // Counters of database slots that were reused for another database (for the view's totals).
    pg_atomic_uint64 retired_applied_rows;
    pg_atomic_uint64 retired_rejected_rows;
    pg_atomic_uint64 retired_batches;
    ConditionVariable space_freed;
    ConditionVariable applied;
    DatabaseSlot slots[max_databases];
    char* data;
};

constexpr uint32 no_proc = UINT32_MAX;

// Set up by shmem_startup when aq is preloaded; nullptr otherwise.
extern Shared* shared;

std::size_t shmem_size();
void request_lwlocks();
void shmem_startup();
bool available();
// Raises 55000, with the remedy, when aq was not preloaded (no ring).
void require_preloaded();

inline RecordHeader* header_at(uint64 position) {
    return reinterpret_cast<RecordHeader*>(shared->data + position % shared->size);
}

// The slot of a database, taking a free one if needed (lock must be held exclusively).  When
// none is free, a slot of a database with no drain and no record in the ring that is reserved
// (its transaction still committing: it will publish through that slot) or committed is reused
// (its apply watermark then restarts from the epoch's base, still a true statement).  Returns
// nullptr when every slot is busy.
DatabaseSlot* slot_for_locked(Oid database);
// A record of the database is reserved or committed (lock held; walks the ring).
bool has_records_locked(Oid database);
DatabaseSlot* find_slot(Oid database);  // no lock; nullptr if the database has none

// The share of the ring one database may hold while others use it (see the protocol).
inline uint64 database_share() { return shared->size / 4 * 3; }
// Would `bytes` more of this slot's database exceed its share?  (Lock held.)
bool over_share_locked(DatabaseSlot* slot, uint64 bytes);
// The apply watermark of `database` as the ring shows it (lock held, shared is enough): one
// less than the lowest id of its RESERVED or COMMITTED records, leaving out the COMMITTED ones
// of batch `finishing_batch` (about to become DONE) and counting `also_pending` (an id, or 0),
// or the last id handed out if it has none.
uint64 watermark_locked(Oid database, uint64 finishing_batch, uint64 also_pending);

// Advances the tail over finished records; returns true if it moved.  Takes the lock.
bool advance_tail();

// Wakes the launcher, to start a drain worker for a database that has none.
void wake_launcher();
// Wakes a database's drain worker, or the launcher if it has none.
void wake_drain(DatabaseSlot* slot);

uint64 seq_base(uint32 epoch);
uint32 epoch_of(uint64 seq);

// Epochs (see the protocol).  Pure arithmetic:
uint32 make_epoch(uint32 timeline, uint32 counter);
uint32 next_counter(uint32 counter);
bool ids_fit(uint32 epoch, uint64 next_seq, uint64 rows);  // `rows` more ids from next_seq stay in the epoch
// With `lock` held exclusively: makes sure `rows` more ids can be handed out from next_seq,
// taking a new epoch if needed; false if none can be taken (in recovery, or pg_aq_epoch could
// not be written: logged).
bool ids_available_locked(uint64 rows);
bool new_epoch_locked();
// Takes the lock if no epoch is chosen yet; false if none can be.
bool ensure_epoch();
// `epoch` is another server's (a restored aq.fast_ingest_progress row): every counter this
// server takes from now on is above its counter, and an epoch of this server whose counter is
// not is ended at once.  Works without the ring too (it then only records the counter in
// pg_aq_epoch).  False if pg_aq_epoch could not be written (logged).
bool adopt_foreign_epoch(uint32 epoch);

}  // namespace aq::ingest::ring
