// See time_manager.hpp for the protocol.  The worker loop that calls round() is the settler's
// (settler.cpp); its shared state is the settler's database slot (settler_shared.hpp).
extern "C" {
#include "postgres.h"
#include "access/xact.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "storage/lwlock.h"
#include "utils/guc.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
}

#include "base/guard.hpp"
#include "base/spi.hpp"
#include "compat/proc.hpp"
#include "base/xact_end.hpp"
#include "queue/catalog.hpp"
#include "queue/maintenance.hpp"
#include "queue/audience.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"
#include "queue/settler_shared.hpp"
#include "queue/statements.hpp"
#include "queue/waiting.hpp"
#include "queue/time_manager.hpp"
#include "queue/retention.hpp"
#include "queue/ring.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::time_manager {

namespace {

int tm_processes = 3;

// This transaction's earliest due time (2); 0: none.  Plain data, forgotten at every end.
TimestampTz pending_due = 0;

constexpr long unit_budget_ms = 1000;  // one queue table's share of a round, doubled per failure in a row
constexpr long retry_ms = 1000;        // 4: the first retry, doubled per round in a row that needs one
constexpr long rotation_ms = 1000;     // 9: a ring holding rows is rotated again after this

// Lowers the database's due time to `when` (2).  Never raises.
void lower(TimestampTz when) {
    using namespace settler;
    // Kept with aq.tm_processes = 0 too: turned on again, the time manager starts from it.
    if (!settler::available() || !OidIsValid(MyDatabaseId)) return;
    LWLockAcquire(shared->lock, LW_SHARED);
    DatabaseSlot* slot = slot_for(MyDatabaseId, false);
    bool known = slot && slot->times.next_due != 0 && slot->times.next_due <= when &&
                 (!slot->times.round_running || (slot->times.lowered_in_round != 0 && slot->times.lowered_in_round <= when));
    LWLockRelease(shared->lock);
    if (known) return;
    uint32 to_wake = no_proc;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    slot = slot_for(MyDatabaseId, true);
    if (slot) {
        TimeState& t = slot->times;
        bool changed = false;
        if (t.round_running && (t.lowered_in_round == 0 || when < t.lowered_in_round)) {
            t.lowered_in_round = when;  // the round's snapshots may not have seen it (3)
            changed = true;
        }
        if (t.next_due == 0 || when < t.next_due) {
            t.next_due = when;
            changed = true;
        }
        if (changed) to_wake = slot->worker_procno != no_proc ? slot->worker_procno : shared->launcher_procno;
    }
    LWLockRelease(shared->lock);
    wake(to_wake);
}

// What this backend knows of its database's time manager, read at most every 100 ms (6, 8).
struct Served {
    TimestampTz read_at = 0;
    bool slot = false;              // the database has a slot (at most 64 have one)
    TimestampTz served_upto = 0;    // of its last complete round
    TimestampTz next_due = 0;
};
Served served_state;

const Served& served() {
    TimestampTz now = GetCurrentTimestamp();
    if (served_state.read_at != 0 && now - served_state.read_at < 100 * 1000 && now >= served_state.read_at)
        return served_state;
    Served s;
    s.read_at = now;
    LWLockAcquire(settler::shared->lock, LW_SHARED);
    const settler::DatabaseSlot* slot = settler::slot_for(MyDatabaseId, false);
    if (slot) {
        s.slot = true;
        s.served_upto = slot->times.served_upto;
        s.next_due = slot->times.next_due;
    }
    LWLockRelease(settler::shared->lock);
    served_state = s;
    return served_state;
}

// The earliest expiration of the queue's messages (0: none).  Requires SPI.
TimestampTz earliest_expiration(const QueueInfo& q) {
    return statement_time(q, next_expiry, Int32GetDatum(q.queue_id), "next expiration lookup");
}

// Lowers the queue's scan floor to its messages whose delay passed in (since, now] (8): per
// priority, their first position; of a multi-consumer ring (each message stored once), every
// subscriber's floor.  Not a multi-consumer queue with deliveries (its walks pass no delayed row).
// Returns whether there were any.  Requires SPI.
struct PassedLook {
    const QueueInfo* q;
    TimestampTz since, now;
    bool any;
};
void lower_passed(void* arg) {
    auto* l = static_cast<PassedLook*>(arg);
    const QueueInfo& q = *l->q;
    SPIPlanPtr plan = statement_plan(q, delays_passed, InvalidOid);
    Datum args[3] = {Int32GetDatum(q.queue_id), TimestampTzGetDatum(l->since), TimestampTzGetDatum(l->now)};
    uint64 n = base::spi::execute(plan, args, nullptr, 0, SPI_OK_SELECT, "passed delays lookup");
    struct Passed {
        int32 priority;
        TimestampTz first;
    };
    auto* passed = static_cast<Passed*>(palloc(sizeof(Passed) * Max(n, 1)));
    for (uint64 i = 0; i < n; i++) {
        CHECK_FOR_INTERRUPTS();
        HeapTuple row = SPI_tuptable->vals[i];
        bool isnull;
        passed[i].priority = q.priority_order ? DatumGetInt32(SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull)) : 0;
        passed[i].first = DatumGetTimestampTz(SPI_getbinval(row, SPI_tuptable->tupdesc, 2, &isnull));
    }
    base::spi::free_result();
    l->any = n > 0;
    if (n == 0) return;
    if (!q.stored_once()) {
        for (uint64 i = 0; i < n; i++) {
            CHECK_FOR_INTERRUPTS();
            scan_floor::lower(q.queue_id, passed[i].first, nullptr, passed[i].priority);
        }
        return;
    }
    // Each message stored once: a walk passed such a message for its consumer only if it is for
    // every subscriber (once_walk.hpp, 4), so every subscriber's floor (read after the lookup: a
    // subscriber added since is not due those messages).
    audience::Subscribers s = audience::read_subscribers(q.queue_id);
    for (int j = 0; j < s.count; j++) {
        CHECK_FOR_INTERRUPTS();
        for (uint64 i = 0; i < n; i++) scan_floor::lower(q.queue_id, passed[i].first, s.names[j], passed[i].priority);
    }
}

bool lower_floors_of_passed(const QueueInfo& q, TimestampTz since, TimestampTz now) {
    if ((q.multiple_consumers && !q.stored_once()) || q.exception_queue) return false;
    PassedLook look{&q, since, now, false};
    // A ring's look holds no lock on its segments past itself (ring.hpp, L1).  The floors it lowers
    // are shared memory, not undone by the rollback of the look.
    if (q.segments.count > 0)
        base::xact_end::look(lower_passed, &look);
    else
        lower_passed(&look);
    return look.any;
}

void keep_earliest(TimestampTz* due, TimestampTz candidate) {
    if (candidate != 0 && (*due == 0 || candidate < *due)) *due = candidate;
}

struct Table {
    int32 queue_table_id;
    int first;  // its normal queues: queue_ids[first .. first + count)
    int count;
    // A ring queue table (ring.hpp), as its unit found it: rotated in a unit of its own (9).
    ring::RingTable ring;
    int rows = 0;  // all its queues, the normal ones first: queue_ids[first .. first + rows)
};

// The queues of the database, by queue table, the normal ones first (in the current memory
// context).  A table with exception queues only is listed too: its retained messages still go
// (retention.hpp, 3).
void list_queues(Table** tables, int* ntables, int32** queue_ids) {
    int rc = SPI_execute(
        "SELECT queue_table_id, queue_id, queue_type OPERATOR(pg_catalog.=) 'normal_queue' FROM aq.queues"
        " ORDER BY 1, 3 DESC, 2",
        true, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: time manager queue list failed: %s", SPI_result_code_string(rc));
    uint64 n = SPI_processed;
    *tables = static_cast<Table*>(palloc(sizeof(Table) * Max(n, 1)));
    *queue_ids = static_cast<int32*>(palloc(sizeof(int32) * Max(n, 1)));
    *ntables = 0;
    for (uint64 i = 0; i < n; i++) {
        bool isnull;
        int32 table = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
        (*queue_ids)[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
        bool normal = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 3, &isnull));
        if (*ntables == 0 || (*tables)[*ntables - 1].queue_table_id != table)
            (*tables)[(*ntables)++] = Table{table, int(i), 0, ring::RingTable{table, InvalidOid, InvalidOid, false, false, {}}};
        if (normal) (*tables)[*ntables - 1].count++;
        (*tables)[*ntables - 1].rows++;
    }
    SPI_freetuptable(SPI_tuptable);
}

// One queue table's part of a round (3), inside a transaction with SPI.
void table_unit(Table& t, const int32* queue_ids, TimestampTz since, TimestampTz now, RoundResult* result) {
    bool must_expire = false;
    QueueInfo expiring{};
    TimestampTz due = 0;
    for (int i = 0; i < t.count; i++) {
        QueueInfo q;
        if (!lookup_by_id(queue_ids[t.first + i], q) || !OidIsValid(q.relid) || !OidIsValid(claim_relid(q))) continue;
        if (q.segments.count > 0 && OidIsValid(ring::foreign_inheritor(q.relid, q.segments))) continue;  // ring.hpp, E1
        t.ring = ring::RingTable{t.queue_table_id, q.relid, q.owner, q.priority_order, q.grouped, q.segments};
        TimestampTz passed = next_visible_time(q, since);
        if (passed != 0 && passed <= now) {
            // The first round since the server started lowers nothing: no walk passed a message
            // before it (passes_delays).
            if (since != 0) lower_floors_of_passed(q, since, now);
            wakeup::note_enqueue(q.queue_id);  // woken at this unit's commit
            result->woken++;
        }
        keep_earliest(&due, next_visible_time(q, now));
        TimestampTz expires = q.default_exception_id != 0 ? earliest_expiration(q) : 0;
        if (expires != 0 && expires <= now) {
            must_expire = true;
            expiring = q;
        } else {
            keep_earliest(&due, expires);
        }
    }
    // The retained copies whose time passed go (retention.hpp, 3); a full batch: the rest at once,
    // and copies a transaction holds a second later (4).  Any queue of the table serves (the
    // statements are the table's).
    {
        QueueInfo q;
        if (lookup_by_id(queue_ids[t.first], q) && OidIsValid(q.relid) && !q.multiple_consumers &&
            !(q.segments.count > 0 && OidIsValid(ring::foreign_inheritor(q.relid, q.segments)))) {
            TimestampTz ends = retention::earliest_end(q);
            if (ends != 0 && ends <= now) {
                int64 purged = retention::purge(q, now);
                if (purged >= retention::purge_batch_size) {
                    keep_earliest(&due, now);
                } else if (purged >= 0) {
                    ends = retention::earliest_end(q);
                    keep_earliest(&due, ends != 0 && ends <= now ? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), retry_ms) : ends);
                }
            } else {
                keep_earliest(&due, ends);
            }
        }
    }
    if (must_expire) {
        // One move for every normal queue of the table.  A full batch: the rest at once.  Rows it
        // could not move (held by a dequeue) are looked at again a second after this unit (4).  A
        // table it may not move (no exception queue left) is not looked at for expirations.
        int64 moved = expire_messages_of(expiring);
        if (moved > 0) result->expired += uint64(moved);
        if (moved >= expiry_batch_size) {
            keep_earliest(&due, now);
        } else if (moved >= 0) {
            TimestampTz retry = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), retry_ms);
            for (int i = 0; i < t.count; i++) {
                QueueInfo q;
                if (!lookup_by_id(queue_ids[t.first + i], q) || !OidIsValid(q.relid) || q.default_exception_id == 0) continue;
                TimestampTz expires = earliest_expiration(q);
                keep_earliest(&due, expires != 0 && expires <= now ? retry : expires);
            }
        }
    }
    keep_earliest(&result->next_due, due);
}

// Runs f in a transaction of its own with SPI and a fresh snapshot, on `budget_ms` (0: none).
// Returns false after logging the error (kept in result->error).
template <class F>
bool in_transaction(const char* activity, long budget_ms, RoundResult* result, F&& f) {
    MemoryContext outer = CurrentMemoryContext;
    volatile bool ok = true;
    PG_TRY();
    {
        // Inside the try: a cancel left by a budget that ran out just after the last unit is that
        // unit's error, not the worker's end.
        CHECK_FOR_INTERRUPTS();
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, activity);
        if (budget_ms > 0) enable_timeout_after(STATEMENT_TIMEOUT, int(budget_ms));
        base::entry_void([&] { base::call([&] { f(); }); });
        if (budget_ms > 0) {
            // The budget ran out just after the work: its cancel is moot, not the next unit's.
            disable_timeout(STATEMENT_TIMEOUT, true);
            if (get_timeout_indicator(STATEMENT_TIMEOUT, true) && !ProcDiePending) QueryCancelPending = false;
        }
        SPI_finish();
        PopActiveSnapshot();
        CommitTransactionCommand();
    }
    PG_CATCH();
    {
        HOLD_INTERRUPTS();
        disable_timeout(STATEMENT_TIMEOUT, false);
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        strlcpy(result->error, error->message ? error->message : "unknown error", sizeof result->error);
        FreeErrorData(error);
        EmitErrorReport();
        AbortCurrentTransaction();
        FlushErrorState();
        RESUME_INTERRUPTS();
        ok = false;
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return ok;
}

}  // namespace

void define_settings() {
    DefineCustomIntVariable("aq.tm_processes",
                            "How many databases the time manager serves at once (0: no time manager).",
                            "The time manager makes delayed messages ready (it wakes their waiters and "
                            "listeners) and moves expired messages to their exception queues without a "
                            "reader.  It runs in aq's settler workers, as Oracle's AQ_TM_PROCESSES.",
                            &tm_processes, 3, 0, settler::max_urgent_workers, PGC_SIGHUP, 0, nullptr, nullptr, nullptr);
}

int processes() {
    return tm_processes;
}

bool serves() {
    if (tm_processes == 0 || !settler::available() || settler::starved() || !OidIsValid(MyDatabaseId)) return false;
    const Served& s = served();
    return s.slot && s.served_upto != 0;
}

bool passes_delays() {
    if (!serves()) return false;
    // Not while a due time passed a second ago without a round (the time manager stopped, or
    // lags): what a walk passes now would wait for it (8).
    const Served& s = served();
    return s.next_due == 0 || s.next_due >= s.read_at - USECS_PER_SEC;
}

bool catch_up(const QueueInfo& q) {
    // Not at SERIALIZABLE: the statement's reads of the queue would be serializable reads, which a
    // walk never makes (index_walk.hpp, 6); there the look from the head finds the message.
    if (IsolationIsSerializable() || !serves()) return false;
    return lower_floors_of_passed(q, served().served_upto, GetCurrentTimestamp());
}

void note_due(TimestampTz when) {
    if (pending_due == 0 || when < pending_due) pending_due = when;
}

void after_commit_unlocked() {
    TimestampTz due = pending_due;
    pending_due = 0;
    if (due != 0) lower(due);
}

void at_abort() {
    pending_due = 0;
}

void note_prepared_transaction_end() {
    // Whatever the prepared transaction wrote: a round finds it (lowered at this end's commit).
    // Only where aq is installed: elsewhere it wrote no message.
    if (!OidIsValid(get_extension_oid("aq", true))) return;
    pending_due = GetCurrentTimestamp();
}

RoundResult round(TimestampTz since, TimestampTz now, int* failures_in_row) {
    RoundResult result{};
    Table* tables = nullptr;
    int ntables = 0;
    int32* queue_ids = nullptr;
    MemoryContext outer = CurrentMemoryContext;
    bool listed = in_transaction("aq: time manager", unit_budget_ms, &result, [&] {
        result.extension_missing = !OidIsValid(get_extension_oid("aq", true));
        if (result.extension_missing) return;
        list_queues(&tables, &ntables, &queue_ids);
        // The lists outlive the transaction: copy them out of SPI's memory.
        Table* t = static_cast<Table*>(MemoryContextAlloc(outer, sizeof(Table) * Max(ntables, 1)));
        memcpy(t, tables, sizeof(Table) * ntables);
        int nqueues = ntables ? tables[ntables - 1].first + tables[ntables - 1].rows : 0;
        int32* ids = static_cast<int32*>(MemoryContextAlloc(outer, sizeof(int32) * Max(nqueues, 1)));
        memcpy(ids, queue_ids, sizeof(int32) * nqueues);
        tables = t;
        queue_ids = ids;
    });
    if (!listed) {
        result.failed = true;
        ntables = 0;
    }
    for (int i = 0; i < ntables; i++) {
        long budget = unit_budget_ms << Min(*failures_in_row, 6);
        if (!in_transaction("aq: time manager", budget, &result,
                            [&] { table_unit(tables[i], queue_ids, since, now, &result); }))
            result.failed = true;
        // 9: a ring's rotation, in a transaction of its own (its ACCESS EXCLUSIVE locks go at once).
        const Table& t = tables[i];
        if (t.ring.segments.count > 0 && OidIsValid(t.ring.owner)) {
            ring::Rotation rotation;
            if (!in_transaction("aq: time manager rotation", budget, &result, [&] { rotation = ring::rotate(t.ring); })) {
                result.failed = true;
                rotation = ring::Rotation{};  // rolled back: nothing of it to count (the failure's backoff retries)
            }
            result.truncated += uint64(rotation.truncated);
            result.carried += uint64(rotation.carried);
            result.rotation_skips += uint64(rotation.skipped);
            if (rotation.holds_rows || rotation.skipped > 0)
                keep_earliest(&result.next_due, TimestampTzPlusMilliseconds(GetCurrentTimestamp(), rotation_ms));
        }
    }
    if (result.failed) {  // from the round's end: a slow round does not follow itself at once
        keep_earliest(&result.next_due,
                      TimestampTzPlusMilliseconds(GetCurrentTimestamp(), retry_ms << Min(*failures_in_row, 6)));
        (*failures_in_row)++;
    } else {
        *failures_in_row = 0;
    }
    return result;
}

bool monitor(MonitorRow* rows, int max_rows, int* count) {
    using namespace settler;
    *count = 0;
    if (!settler::available()) return false;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (const auto& slot : shared->slots) {
        if (slot.database == InvalidOid || *count >= max_rows) continue;
        MonitorRow& r = rows[(*count)++];
        const TimeState& t = slot.times;
        r.database = slot.database;
        r.pid = slot.worker_procno != no_proc ? compat::proc_pid(slot.worker_procno) : 0;
        r.next_due = t.next_due;
        r.tally = t.tally;
    }
    LWLockRelease(shared->lock);
    return true;
}

}  // namespace aq::queue::time_manager
