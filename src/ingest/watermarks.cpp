// See watermarks.hpp.
extern "C" {
#include "postgres.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/wait_event.h"
}

#include "compat/wait_event.hpp"
#include "base/run_as.hpp"
#include "compat/acl.hpp"
#include "ingest/ring.hpp"
#include "ingest/watermarks.hpp"
#include "ingest/writer.hpp"

namespace aq::ingest {

using namespace aq::ingest::ring;

namespace {

constexpr long stalled_error_ms = 10000;

// True when `slot`'s rows up to target are applied.
bool reached(DatabaseSlot* slot, uint64 target) {
    return pg_atomic_read_u64(&slot->apply_hwm) >= target;
}

// Waits on shared->applied until done(); wakes the launcher for a database without a drain and
// fails if none has run for a while with rows waiting.
template <class Done, class Stalled>
void wait_until(Done done, Stalled stalled, long timeout_ms, uint64 target) {
    TimestampTz start = GetCurrentTimestamp();
    TimestampTz stalled_since = 0;
    // Waiting in a transaction that holds a lock this database's drain waits for would never end.
    DatabaseSlot* own = find_slot(MyDatabaseId);
    TimestampTz next_check = TimestampTzPlusMilliseconds(start, Max(DeadlockTimeout, 1));
    ConditionVariablePrepareToSleep(&shared->applied);
    while (!done()) {
        TimestampTz now = GetCurrentTimestamp();
        if (now >= next_check) {
            if (int drain_pid = writer::drain_blocked_by_me(own)) {
                ConditionVariableCancelSleep();
                ereport(ERROR, (errcode(ERRCODE_T_R_DEADLOCK_DETECTED), errmsg("deadlock detected"),
                                errdetail("This session waits for the drain of this database (process %d), which "
                                          "waits for a lock this transaction holds.",
                                          drain_pid),
                                errhint("Wait for the rows after the transaction that took the lock has ended.")));
            }
            next_check = TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1));
        }
        if (stalled()) {
            wake_launcher();
            if (!stalled_since) stalled_since = now;
            if (TimestampDifferenceExceeds(stalled_since, now, stalled_error_ms)) {
                ConditionVariableCancelSleep();
                ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                                errmsg("no fast-ingest drain worker is running"),
                                errdetail("Rows up to sequence id %llu are waiting in the ring.", (unsigned long long)target),
                                errhint("See the server log; the drain needs a free max_worker_processes slot.")));
            }
        } else {
            stalled_since = 0;
        }
        long wait = Min(1000L, Max(1L, TimestampDifferenceMilliseconds(now, next_check)));
        if (timeout_ms >= 0) {
            long left = timeout_ms - TimestampDifferenceMilliseconds(start, now);
            if (left <= 0) {
                ConditionVariableCancelSleep();
                // Class Q is implementation-defined; unlike 57014 a PL/pgSQL handler can catch it.
                ereport(ERROR, (errcode(MAKE_SQLSTATE('Q', 'I', '0', '0', '1')),
                                errmsg("timed out waiting for fast-ingest rows to be applied"),
                                errdetail("Waiting for sequence id %llu.", (unsigned long long)target)));
            }
            wait = Min(wait, left);
        }
        (void)ConditionVariableTimedSleep(&shared->applied, wait, AQ_WAIT_EVENT("AqWriteEnd"));
    }
    ConditionVariableCancelSleep();
}

// This session's rows up to `target` are all applied or rejected: none of its records (its
// backend's, in this database) with ids at or below it is still reserved or committed in the
// ring.  The database's watermark may stay lower meanwhile, held by another table's deferred
// rows; this session's own rows are what write_end waits for.
bool session_rows_done(uint64 target) {
    bool pending = false;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (uint64 pos = shared->tail; pos < shared->head && !pending;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (h->database != MyDatabaseId || h->writer_pid != MyProcPid || h->row_count == 0 || h->first_seq > target)
            continue;
        uint32 state = pg_atomic_read_u32(&h->state);
        pending = state == state_reserved || state == state_committed;
    }
    LWLockRelease(shared->lock);
    return !pending;
}

bool drain_missing(DatabaseSlot* slot) {
    return pg_atomic_read_u32(&slot->state) != slot_running &&
           pg_atomic_read_u64(&slot->committed_hwm) > pg_atomic_read_u64(&slot->apply_hwm);
}

// The owner of aq's own tables: changes to the registry are made as that role.
Oid registry_owner(Oid registry) {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(registry));
    if (!HeapTupleIsValid(tuple)) elog(ERROR, "aq: cache lookup failed for relation %u", registry);
    Oid owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
    ReleaseSysCache(tuple);
    return owner;
}

struct RegistryChange {
    const char* sql;
    Datum values[2];  // the table, the role that asked
};

void run_registry_change(void* arg) {
    auto* c = static_cast<RegistryChange*>(arg);
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
    Oid types[2] = {OIDOID, OIDOID};
    int rc = SPI_execute_with_args(c->sql, 2, types, c->values, nullptr, false, 0);
    if (rc < 0) elog(ERROR, "aq: could not change aq.fast_ingest_tables: %s", SPI_result_code_string(rc));
    SPI_finish();
}

// Runs as the owner of aq's tables (a superuser, usually) through base::run_as: the caller's
// search_path must not choose the operators of this statement, nor can the caller's settings
// reach it.
void change_registry(Oid relid, const char* sql) {
    Oid registry = get_relname_relid("fast_ingest_tables", get_namespace_oid("aq", false));
    if (!OidIsValid(registry)) elog(ERROR, "aq: table aq.fast_ingest_tables is missing");
    RegistryChange change{sql, {ObjectIdGetDatum(relid), ObjectIdGetDatum(GetUserId())}};
    base::run_as(base::RunAs{registry_owner(registry)}, run_registry_change, &change);
    writer::forget_enabled(relid);
}

void check_owner(Oid relid) {
    char relkind = get_rel_relkind(relid);
    if (relkind == '\0')
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
    if (!compat::owns_relation(relid, GetUserId()))
        aclcheck_error(ACLCHECK_NOT_OWNER, get_relkind_objtype(relkind), get_rel_name(relid));
}

}  // namespace

uint64 apply_hwm() {
    require_preloaded();
    (void)ensure_epoch();
    DatabaseSlot* slot = find_slot(MyDatabaseId);
    return slot ? pg_atomic_read_u64(&slot->apply_hwm) : seq_base(shared->epoch);
}

void wait_applied_here(uint64 target, long timeout_ms) {
    require_preloaded();
    DatabaseSlot* slot = find_slot(MyDatabaseId);
    if (!slot || target == 0) return;
    wait_until([&] { return reached(slot, target) || session_rows_done(target); }, [&] { return drain_missing(slot); },
               timeout_ms, target);
}

void wait_applied_everywhere(long timeout_ms) {
    require_preloaded();
    uint64 targets[max_databases];
    for (int i = 0; i < max_databases; i++) targets[i] = pg_atomic_read_u64(&shared->slots[i].committed_hwm);
    uint64 last = 0;
    for (uint64 t : targets) last = Max(last, t);
    wait_until(
        [&] {
            for (int i = 0; i < max_databases; i++)
                if (shared->slots[i].database != InvalidOid && !reached(&shared->slots[i], targets[i])) return false;
            return true;
        },
        [&] {
            for (auto& s : shared->slots)
                if (s.database != InvalidOid && drain_missing(&s)) return true;
            return false;
        },
        timeout_ms, last);
}

AreaStats area_stats() {
    require_preloaded();
    AreaStats s;
    memset(&s, 0, sizeof s);
    (void)ensure_epoch();
    LWLockAcquire(shared->lock, LW_SHARED);
    s.total_bytes = shared->size;
    s.used_bytes = shared->head - shared->tail;
    s.write_hwm = shared->epoch != 0 ? shared->next_seq - 1 : 0;
    // The first committed record from the tail is (nearly) the oldest: stop there, so that
    // polling the view never holds the lock for a walk of the whole ring.
    for (uint64 pos = shared->tail; pos < shared->head;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (pg_atomic_read_u32(&h->state) == state_committed && h->committed_at) {
            s.oldest_undrained = h->committed_at;
            break;
        }
    }
    LWLockRelease(shared->lock);
    s.free_bytes = s.total_bytes - s.used_bytes;
    s.rows_buffered = pg_atomic_read_u64(&shared->rows_buffered);
    s.writers = pg_atomic_read_u32(&shared->writers);
    s.epoch = shared->epoch;
    s.applied_rows = pg_atomic_read_u64(&shared->retired_applied_rows);
    s.rejected_rows = pg_atomic_read_u64(&shared->retired_rejected_rows);
    s.batches = pg_atomic_read_u64(&shared->retired_batches);
    for (auto& slot : shared->slots) {
        if (slot.database == InvalidOid) continue;
        s.applied_rows += pg_atomic_read_u64(&slot.applied_rows);
        s.rejected_rows += pg_atomic_read_u64(&slot.rejected_rows);
        s.batches += pg_atomic_read_u64(&slot.batches);
        if (pg_atomic_read_u32(&slot.state) == slot_running) s.drain_workers++;
    }
    s.apply_hwm = apply_hwm();
    return s;
}

void enable_table(Oid relid) {
    require_preloaded();
    check_owner(relid);
    char relkind = get_rel_relkind(relid);
    if (relkind == RELKIND_PARTITIONED_TABLE)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("fast ingest does not support partitioned table \"%s\"", get_rel_name(relid)),
                        errhint("Enable fast ingest on its partitions and insert into them.")));
    if (relkind != RELKIND_RELATION)
        ereport(ERROR, (errcode(ERRCODE_WRONG_OBJECT_TYPE),
                        errmsg("\"%s\" is not a table", get_rel_name(relid)),
                        errdetail("Fast ingest works on ordinary tables.")));
    if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("fast ingest does not support temporary table \"%s\"", get_rel_name(relid)),
                        errdetail("The drain runs in another session, which cannot see it.")));
    change_registry(relid,
                    "INSERT INTO aq.fast_ingest_tables (relid, enabled_by) VALUES ($1, $2) ON CONFLICT (relid) DO NOTHING");
}

void disable_table(Oid relid) {
    require_preloaded();
    check_owner(relid);
    change_registry(relid, "DELETE FROM aq.fast_ingest_tables WHERE relid OPERATOR(pg_catalog.=) $1 AND $2 IS NOT NULL");
}

}  // namespace aq::ingest
