// See drain.hpp for the protocol.  PostgreSQL-side code (background workers): plain data only,
// errors are PostgreSQL's own and are caught with PG_TRY around subtransactions.
extern "C" {
#include "postgres.h"
#include "catalog/pg_database.h"
#include "storage/lock.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/pg_crc32c.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timeout.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "compat/relation.hpp"
#include "compat/wait_event.hpp"
#include "base/multi_insert.hpp"
#include "base/run_as.hpp"
#include "compat/executor.hpp"
#include "compat/proc.hpp"
#include "commit/committer.hpp"
#include "ingest/drain.hpp"
#include "ingest/ring.hpp"
#include "ingest/settings.hpp"
#include "base/worker_spec.hpp"

namespace aq::ingest::drain {

namespace {

using namespace aq::ingest::ring;
namespace multi_insert = aq::base::multi_insert;

constexpr uint64 batch_rows = 100000;
constexpr uint64 batch_bytes = 64 * 1024 * 1024;
constexpr int batch_records = 16384;
// Attempts of a record.  An error that is not the row's fault (out of disk or memory, an I/O
// error, a deadlock, a serialization failure, a lock timeout, an administrator's shutdown)
// retries the batch later, for as long as it lasts, and never counts as an attempt: such rows
// stay in the ring.  An internal error (XX000) or a cancel (57014) retries the batch up to
// retry_attempts times, then counts as the row's own.  After give_up_attempts (the worker died on it each time) its rows are rejected
// without being tried again.  "Rejected" holds only once the reject is stored: a reject that
// cannot be stored fails the batch, whose rows then stay in the ring.
constexpr int retry_attempts = 3;
constexpr int give_up_attempts = 5;
constexpr long retry_backoff_ms = 1000;
// The time one run of rows (one table, one role) may take in a batch: its statement is
// cancelled then, its records are deferred (not an attempt) and the batch goes on with the
// other tables.  Each deferral doubles the next budget (5 s .. 320 s) and waits a little longer
// before the next try (1 s .. 30 s), so a slow table still gets its rows in, without holding
// the others up for more than its budget at a time.
constexpr long run_budget_ms = 5000;
constexpr int run_budget_doublings = 6;
constexpr long defer_backoff_ms = 1000;
constexpr long defer_backoff_max_ms = 30000;
constexpr int idle_exit_ms = 3000;
constexpr int shutdown_wait_ms = 10000;
constexpr int start_interval_ms = 1000;
constexpr uint32 max_failed_starts = 3;
// A batch smaller than this waits linger_us for more rows first: commits of single rows then
// share a drain transaction instead of each waking the worker (2 cores: that matters).
constexpr uint64 linger_below_rows = 5000;
constexpr long linger_us = 2000;

// ---------------------------------------------------------------- a batch
struct Taken {
    RecordHeader* header;
};

struct Row {
    MinimalTuple tuple;
    uint64 seq;
    RecordHeader* header;
};

struct BatchCounts {
    uint64 applied;
    uint64 rejected;
    uint64 hwm;
};

DatabaseSlot* my_slot = nullptr;
uint64 batch_number = 0;        // the batch being applied (RecordHeader::batch): pid and counter
uint64 batch_counter = 0;
TimestampTz run_deadline = 0;   // the running run's time budget ends then (0: no run)
volatile sig_atomic_t in_run = 0;  // a run is applying rows (owner triggers may be running)
TimestampTz stop_deadline = 0;  // terminated: the drain stops trying by then (0: not terminated)

// SIGTERM (a shutdown, pg_terminate_backend, DROP DATABASE ... WITH (FORCE)): the drain stops.
// A run in progress, which may sit in a table owner's slow trigger, is cancelled at once: its
// rows are deferred (not an attempt) and stay in the ring.
void drain_sigterm(SIGNAL_ARGS) {
    int save_errno = errno;
    ShutdownRequestPending = true;
    if (in_run) {
        QueryCancelPending = true;
        InterruptPending = true;
    }
    SetLatch(MyLatch);
    errno = save_errno;
}
SPIPlanPtr progress_plan = nullptr;
SPIPlanPtr reject_plan = nullptr;

// Collects the next records of this database (see the protocol).  Sets *in_flight if it
// stopped at a record whose transaction has not finished, *wait_ms if the drain delay (or a
// deferral) holds one.  Returns 0 with *linger set when the records found are fewer than
// linger_below_rows and `may_linger`.  Otherwise each taken record has its attempt counted and
// its batch set in the ring, and is copied (header and rows) into `copies`: the batch works on
// the copies, so that no process holds a pointer into the ring while the batch runs and the
// ring's records may be slid (see ring.hpp); write_back() finds them again by id.
int collect(Taken* taken, bool all_now, bool may_linger, bool* linger, MemoryContext copies, bool* in_flight,
            long* wait_ms, uint64* rows_taken) {
    int n = 0;
    uint64 rows = 0, bytes = 0;
    TimestampTz now = GetCurrentTimestamp();
    *in_flight = false;
    *linger = false;
    *wait_ms = 1000;
    LWLockAcquire(shared->lock, LW_SHARED);
    uint64 head = shared->head;
    pg_read_barrier();
    for (uint64 pos = shared->tail; pos < head && n < batch_records && rows < batch_rows && bytes < batch_bytes;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (h->database != MyDatabaseId) continue;
        uint32 state = pg_atomic_read_u32(&h->state);
        pg_read_barrier();
        if (state == state_reserved) {
            *in_flight = true;
            break;
        }
        if (state != state_committed) continue;
        // Deferred (its table ran over its time budget): the rows behind it go on.
        if (!all_now && h->not_before > now) {
            *wait_ms = Max(1L, Min(*wait_ms, TimestampDifferenceMilliseconds(now, h->not_before) + 1));
            continue;
        }
        if (!all_now && settings::drain_delay_ms > 0) {
            TimestampTz due = TimestampTzPlusMilliseconds(h->committed_at, settings::drain_delay_ms);
            if (due > now) {
                *wait_ms = Max(1L, Min(1000L, TimestampDifferenceMilliseconds(now, due) + 1));
                break;
            }
        }
        // A record attempted before (its worker died mid-batch) goes alone, so a poison record
        // only ever takes itself down.
        if (h->attempts > 0 && n > 0) break;
        taken[n++].header = h;
        if (h->attempts > 0) break;
        rows += h->row_count;
        bytes += h->payload_bytes;
    }
    if (n > 0 && may_linger && rows < linger_below_rows) {
        LWLockRelease(shared->lock);
        *linger = true;
        return 0;
    }
    for (int k = 0; k < n; k++) {
        RecordHeader* h = taken[k].header;
        h->attempts++;  // in the ring: a worker that dies in this batch has it counted
        h->batch = batch_number;
        auto* copy = static_cast<RecordHeader*>(MemoryContextAlloc(copies, h->total_bytes));
        memcpy(copy, h, h->total_bytes);
        copy->deferred = false;
        taken[k].header = copy;
    }
    LWLockRelease(shared->lock);
    *rows_taken = rows;
    return n;
}

// Writes the batch's outcome back to its records in the ring (found by id: they may have been
// slid): attempts and deferrals; if the batch committed, every record not deferred is DONE.
void write_back(Taken* taken, int n, bool committed) {
    int k = 0;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (uint64 pos = shared->tail; pos < shared->head && k < n;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (h->database != MyDatabaseId || h->batch != batch_number ||
            pg_atomic_read_u32(&h->state) != state_committed)
            continue;
        while (k < n && taken[k].header->first_seq != h->first_seq) k++;
        if (k == n) break;
        RecordHeader* copy = taken[k++].header;
        h->attempts = copy->attempts;
        h->deferrals = copy->deferrals;
        h->not_before = copy->not_before;
        h->batch = 0;
        if (committed && !copy->deferred) {
            pg_atomic_fetch_sub_u64(&shared->rows_buffered, h->row_count);
            pg_atomic_fetch_sub_u64(&my_slot->live_bytes, h->total_bytes);
            pg_atomic_write_u32(&h->state, state_done);
        }
    }
    LWLockRelease(shared->lock);
}

bool has_work(bool* in_flight) {
    bool work = false;
    *in_flight = false;
    LWLockAcquire(shared->lock, LW_SHARED);
    for (uint64 pos = shared->tail; pos < shared->head;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (h->database != MyDatabaseId) continue;
        uint32 state = pg_atomic_read_u32(&h->state);
        if (state == state_reserved) *in_flight = true;
        if (state == state_committed) work = true;
    }
    LWLockRelease(shared->lock);
    return work;
}

// ---------------------------------------------------------------- rejects
// An error that says nothing about the row (see retry_attempts): the batch is retried later.
bool not_the_rows_fault(int sqlerrcode) {
    int category = ERRCODE_TO_CATEGORY(sqlerrcode);
    return category == ERRCODE_TRANSACTION_ROLLBACK || category == ERRCODE_INSUFFICIENT_RESOURCES ||
           category == ERRCODE_SYSTEM_ERROR ||
           (category == ERRCODE_OPERATOR_INTERVENTION && sqlerrcode != ERRCODE_QUERY_CANCELED) ||
           sqlerrcode == ERRCODE_LOCK_NOT_AVAILABLE || sqlerrcode == ERRCODE_OBJECT_IN_USE ||
           sqlerrcode == ERRCODE_DATA_CORRUPTED || sqlerrcode == ERRCODE_INDEX_CORRUPTED;
}

// Retried a few times before it counts as the row's own (see retry_attempts): an internal
// error, and a cancel (an administrator's, or the row's own trigger cancelling its statement).
bool retry_for_a_while(int sqlerrcode) {
    return sqlerrcode == ERRCODE_INTERNAL_ERROR || sqlerrcode == ERRCODE_QUERY_CANCELED;
}

// A row as text, "(v1,v2,...)" like a record, from the types the writer recorded.
char* row_text(const Column* layout, int natts, MinimalTuple tuple) {
    for (int i = 0; i < natts; i++)
        if (OidIsValid(layout[i].type) && !SearchSysCacheExists1(TYPEOID, ObjectIdGetDatum(layout[i].type)))
            return nullptr;
    Oid* types = static_cast<Oid*>(palloc(sizeof(Oid) * Max(natts, 1)));
    for (int i = 0; i < natts; i++) types[i] = layout[i].type;
    TupleDesc desc = CreateTemplateTupleDesc(natts);
    for (int i = 0; i < natts; i++)
        TupleDescInitEntry(desc, AttrNumber(i + 1), nullptr, OidIsValid(types[i]) ? types[i] : INT4OID, -1, 0);
    HeapTupleData ht;
    ht.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
    ht.t_data = reinterpret_cast<HeapTupleHeader>(reinterpret_cast<char*>(tuple) - MINIMAL_TUPLE_OFFSET);
    ItemPointerSetInvalid(&ht.t_self);
    ht.t_tableOid = InvalidOid;
    Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * natts));
    bool* isnull = static_cast<bool*>(palloc(sizeof(bool) * natts));
    heap_deform_tuple(&ht, desc, values, isnull);
    StringInfoData s;
    initStringInfo(&s);
    appendStringInfoChar(&s, '(');
    for (int i = 0; i < natts; i++) {
        if (i > 0) appendStringInfoChar(&s, ',');
        if (isnull[i] || !OidIsValid(types[i])) continue;
        Oid output;
        bool varlena;
        getTypeOutputInfo(types[i], &output, &varlena);
        char* v = OidOutputFunctionCall(output, values[i]);
        bool quote = *v == '\0' || strpbrk(v, ",()\"\\ \t\n") != nullptr;
        if (!quote) {
            appendStringInfoString(&s, v);
            continue;
        }
        appendStringInfoChar(&s, '"');
        for (const char* p = v; *p; p++) {
            if (*p == '"' || *p == '\\') appendStringInfoChar(&s, *p);
            appendStringInfoChar(&s, *p);
        }
        appendStringInfoChar(&s, '"');
    }
    appendStringInfoChar(&s, ')');
    return s.data;
}

// The drain's own statements run as a superuser: the database's search_path (which its owner
// may set) must not pick their operators.  Returns the GUC nest level to pop.
int pin_search_path() {
    int nest_level = NewGUCNestLevel();
    (void)set_config_option("search_path", "pg_catalog, pg_temp", PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0,
                            false);
    return nest_level;
}

SPIPlanPtr prepare_bookkeeping(const char* sql, int nargs, Oid* types) {
    int nest_level = pin_search_path();
    SPIPlanPtr plan = SPI_prepare(sql, nargs, types);
    if (!plan) elog(ERROR, "aq: could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
    SPI_keepplan(plan);
    AtEOXact_GUC(true, nest_level);
    return plan;
}

// Runs a bookkeeping statement (rejects, progress) in a subtransaction.  A reject that cannot
// be stored, or any bookkeeping error that is not the statement's fault (a full disk), fails the
// batch: its rows stay in the ring.  Otherwise (aq.fast_ingest_progress altered or broken) the
// drain logs it and goes on instead of failing every batch forever.
void run_bookkeeping(SPIPlanPtr plan, Datum* values, const char* nulls, const char* what, bool must_succeed) {
    int nest_level = pin_search_path();
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer);
    PG_TRY();
    {
        int rc = SPI_execute_plan(plan, values, nulls, false, 0);
        if (rc != SPI_OK_INSERT) elog(ERROR, "unexpected SPI result %s", SPI_result_code_string(rc));
        ReleaseCurrentSubTransaction();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(outer);
        ErrorData* e = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        CurrentResourceOwner = owner;
        if (must_succeed || not_the_rows_fault(e->sqlerrcode)) {
            if (!e->context) e->context = psprintf("recording fast-ingest %s", what);
            ReThrowError(e);
        }
        ereport(WARNING, (errmsg("aq: could not record fast-ingest %s: %s", what, e->message)));
        FreeErrorData(e);
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    CurrentResourceOwner = owner;
    AtEOXact_GUC(true, nest_level);
}

Oid aq_table(const char* name) {
    Oid schema = get_namespace_oid("aq", true);
    return OidIsValid(schema) ? get_relname_relid(name, schema) : InvalidOid;
}

// Keeps one rejected row (or, with tuple == nullptr, a whole record) in aq.fast_ingest_rejects.
// Runs as the drain's own user, in the batch transaction.
void keep_reject(RecordHeader* h, uint64 seq, MinimalTuple tuple, const char* sqlstate, const char* message,
                 const char* detail) {
    if (!OidIsValid(aq_table("fast_ingest_rejects"))) {
        ereport(LOG, (errmsg("aq: fast-ingest row %llu rejected: %s", (unsigned long long)seq, message)));
        return;
    }
    if (!reject_plan) {
        Oid types[8] = {INT8OID, TEXTOID, OIDOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID};
        reject_plan = prepare_bookkeeping(
            "INSERT INTO aq.fast_ingest_rejects (seqid, table_name, relid, role_name, row_text, sqlstate, message, "
            "detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            8, types);
    }
    const char* table = get_rel_name(h->relation);
    char* schema = nullptr;
    if (table) schema = get_namespace_name(get_rel_namespace(h->relation));
    const char* role = GetUserNameFromId(h->role, true);
    const char* text = tuple ? row_text(layout_of(h), h->natts, tuple) : nullptr;
    Datum values[8];
    char nulls[8];
    memset(nulls, ' ', sizeof nulls);
    values[0] = Int64GetDatum(int64(seq));
    if (table)
        values[1] = CStringGetTextDatum(quote_qualified_identifier(schema, table));
    else
        nulls[1] = 'n';
    values[2] = ObjectIdGetDatum(h->relation);
    if (role) values[3] = CStringGetTextDatum(role); else nulls[3] = 'n';
    if (text) values[4] = CStringGetTextDatum(text); else nulls[4] = 'n';
    values[5] = CStringGetTextDatum(sqlstate);
    values[6] = CStringGetTextDatum(message);
    if (detail) values[7] = CStringGetTextDatum(detail); else nulls[7] = 'n';
    run_bookkeeping(reject_plan, values, nulls, "a rejected row", true);
}

void reject_rows(Row* rows, int count, const char* sqlstate, const char* message, const char* detail, BatchCounts* counts) {
    for (int i = 0; i < count; i++) keep_reject(rows[i].header, rows[i].seq, rows[i].tuple, sqlstate, message, detail);
    counts->rejected += count;
}

// ---------------------------------------------------------------- inserting rows
bool deform_row(TupleDesc desc, MinimalTuple tuple, Datum* values, bool* isnull) {
    HeapTupleData ht;
    ht.t_len = tuple->t_len + MINIMAL_TUPLE_OFFSET;
    ht.t_data = reinterpret_cast<HeapTupleHeader>(reinterpret_cast<char*>(tuple) - MINIMAL_TUPLE_OFFSET);
    ItemPointerSetInvalid(&ht.t_self);
    ht.t_tableOid = InvalidOid;
    // Columns added since the row was buffered get their "missing" value, as old rows do.
    heap_deform_tuple(&ht, desc, values, isnull);
    for (int i = 0; i < desc->natts; i++)
        if (TupleDescAttr(desc, i)->attisdropped) isnull[i] = true;
    return true;
}

// The multi-insert path (base/multi_insert.hpp), for tables it does not refuse.
void insert_multi(Relation rel, Row* rows, int count) {
    // The writer's statement was checked column by column when it ran; here the role must still
    // hold INSERT on the table or on some column (42501 if it lost it meanwhile).
    Oid role = GetUserId(), relid = RelationGetRelid(rel);
    if (pg_class_aclcheck(relid, role, ACL_INSERT) != ACLCHECK_OK &&
        pg_attribute_aclcheck_all(relid, role, ACL_INSERT, ACLMASK_ANY) != ACLCHECK_OK)
        aclcheck_error(ACLCHECK_NO_PRIV, get_relkind_objtype(rel->rd_rel->relkind), RelationGetRelationName(rel));
    TupleDesc desc = RelationGetDescr(rel);
    multi_insert::MultiInsert* m =
        multi_insert::begin(rel, compat::relation_range_table(rel, RowExclusiveLock, 0, nullptr, nullptr), count);
    for (int r = 0; r < count; r++) {
        TupleTableSlot* slot = multi_insert::next_slot(m);
        deform_row(desc, rows[r].tuple, slot->tts_values, slot->tts_isnull);
        multi_insert::add(m, slot, rows[r].tuple->t_len);
    }
    multi_insert::finish(m);
}

// A prepared INSERT per row: triggers (foreign keys among them), rules and RLS apply exactly as
// for the writer's own statement.
void insert_statement(Relation rel, Row* rows, int count) {
    TupleDesc desc = RelationGetDescr(rel);
    StringInfoData sql;
    initStringInfo(&sql);
    appendStringInfo(&sql, "INSERT INTO %s (", compat::qualified_name(rel));
    Oid* types = static_cast<Oid*>(palloc(sizeof(Oid) * desc->natts));
    int* columns = static_cast<int*>(palloc(sizeof(int) * desc->natts));
    int nargs = 0;
    // A role with INSERT on some columns only: its statement could set only those, the others
    // took their defaults; name only those, so the insert needs no more than the writer had.
    bool whole_table = pg_class_aclcheck(RelationGetRelid(rel), GetUserId(), ACL_INSERT) == ACLCHECK_OK;
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped || att->attgenerated) continue;
        if (!whole_table &&
            pg_attribute_aclcheck(RelationGetRelid(rel), att->attnum, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
            continue;
        appendStringInfo(&sql, "%s%s", nargs ? ", " : "", quote_identifier(NameStr(att->attname)));
        // The base type: the INSERT then coerces to the column's type as it is now — its
        // length or precision, its domain's constraints — as it would any client's value.
        types[nargs] = getBaseType(att->atttypid);
        columns[nargs++] = i;
    }
    // The writer's statement already took identity values (GENERATED ALWAYS included).
    appendStringInfoString(&sql, ") OVERRIDING SYSTEM VALUE VALUES (");
    for (int k = 0; k < nargs; k++) appendStringInfo(&sql, "%s$%d", k ? ", " : "", k + 1);
    appendStringInfoChar(&sql, ')');
    SPIPlanPtr plan = SPI_prepare(sql.data, nargs, types);
    if (!plan) elog(ERROR, "aq: could not prepare \"%s\": %s", sql.data, SPI_result_code_string(SPI_result));
    Datum* values = static_cast<Datum*>(palloc(sizeof(Datum) * desc->natts));
    bool* isnull = static_cast<bool*>(palloc(sizeof(bool) * desc->natts));
    Datum* args = static_cast<Datum*>(palloc(sizeof(Datum) * Max(nargs, 1)));
    char* nulls = static_cast<char*>(palloc(Max(nargs, 1)));
    for (int r = 0; r < count; r++) {
        CHECK_FOR_INTERRUPTS();
        deform_row(desc, rows[r].tuple, values, isnull);
        for (int k = 0; k < nargs; k++) {
            args[k] = values[columns[k]];
            nulls[k] = isnull[columns[k]] ? 'n' : ' ';
        }
        int rc = SPI_execute_plan(plan, args, nulls, false, 0);
        if (rc != SPI_OK_INSERT) elog(ERROR, "aq: fast-ingest insert failed: %s", SPI_result_code_string(rc));
    }
    SPI_freeplan(plan);
}

void insert_rows(Relation rel, Row* rows, int count, bool multi) {
    if (multi)
        insert_multi(rel, rows, count);
    else
        insert_statement(rel, rows, count);
}

// The run's time budget is over (its statement was cancelled by the budget's timer).
bool over_budget(int sqlerrcode) {
    return sqlerrcode == ERRCODE_QUERY_CANCELED && run_deadline != 0 && GetCurrentTimestamp() >= run_deadline;
}

// Runs insert_rows in a subtransaction; on failure returns the error (copied into `keep`).
// An error that is not the row's fault is raised again (the whole batch is retried later); an
// internal error too while `retry` allows.
ErrorData* try_insert(Relation rel, Row* rows, int count, bool multi, MemoryContext keep, bool retry) {
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    ErrorData* volatile failure = nullptr;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer);
    PG_TRY();
    {
        insert_rows(rel, rows, count, multi);
        ReleaseCurrentSubTransaction();
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(keep);
        failure = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
        if (not_the_rows_fault(failure->sqlerrcode) || (retry && retry_for_a_while(failure->sqlerrcode)) ||
            over_budget(failure->sqlerrcode))
            ReThrowError(failure);
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    CurrentResourceOwner = owner;
    return failure;
}

// How rows written with `layout` fit the table as it is now.
enum class Fit { same, coerce, no };
Fit layout_fit(Relation rel, const Column* layout, int natts, const char** why) {
    TupleDesc desc = RelationGetDescr(rel);
    if (natts > desc->natts) {
        *why = "it has fewer columns than when the rows were written";
        return Fit::no;
    }
    Fit fit = Fit::same;
    for (int i = 0; i < natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (att->attisdropped) continue;
        if (att->atttypid != layout[i].type) {
            *why = psprintf("column \"%s\" changed type since the rows were written", NameStr(att->attname));
            return Fit::no;
        }
        if (att->atttypmod != layout[i].typmod) fit = Fit::coerce;  // e.g. varchar(10) -> varchar(5)
    }
    return fit;
}

// try_insert as the writing role (base/run_as.hpp): with that role's own settings (ALTER ROLE
// ... SET, in this database too) and the search_path its session had when it inserted the rows,
// in a restricted security context.  Every setting returns to the drain's own afterwards, so a
// writer's trigger that SETs search_path or default_transaction_read_only affects neither the
// drain's bookkeeping nor any later run, batch or role.
struct WriterInsert {
    Relation rel;
    Row* rows;
    int count;
    bool multi;
    MemoryContext keep;
    bool retry;
    ErrorData* failure;
};

void run_writer_insert(void* arg) {
    auto* w = static_cast<WriterInsert*>(arg);
    w->failure = try_insert(w->rel, w->rows, w->count, w->multi, w->keep, w->retry);
}

ErrorData* insert_as_writer(RecordHeader* first, Relation rel, Row* rows, int count, bool multi, MemoryContext keep,
                            bool retry) {
    WriterInsert w{rel, rows, count, multi, keep, retry, nullptr};
    base::RunAs as;
    as.role = first->role;
    as.role_settings = true;
    as.search_path = search_path_of(first);
    base::run_as(as, run_writer_insert, &w);
    return w.failure;
}

// One run: rows of one table, one role and one layout.
void apply_run_rows(Row* rows, int count, BatchCounts* counts) {
    RecordHeader* first = rows[0].header;
    Relation rel = try_relation_open(first->relation, RowExclusiveLock);
    if (!rel) {
        reject_rows(rows, count, "42P01", "the table was dropped before its fast-ingest rows were applied", nullptr, counts);
        return;
    }
    if (rel->rd_rel->relkind != RELKIND_RELATION) {
        relation_close(rel, RowExclusiveLock);
        reject_rows(rows, count, "42809", "the table is no longer an ordinary table", nullptr, counts);
        return;
    }
    const char* why = nullptr;
    Fit fit = layout_fit(rel, layout_of(first), first->natts, &why);
    if (fit == Fit::no) {
        char* message = psprintf("table \"%s\" was altered: %s", RelationGetRelationName(rel), why);
        relation_close(rel, RowExclusiveLock);
        reject_rows(rows, count, "42804", message, nullptr, counts);
        return;
    }

    // A column whose length or precision changed since: through the INSERT, which coerces.
    // Row-level security as it applies to the writer (the drain itself bypasses it).
    bool multi = fit == Fit::same && multi_insert::refusal(rel) == nullptr &&
                 check_enable_rls(RelationGetRelid(rel), first->role, true) != RLS_ENABLED;
    MemoryContext keep = CurrentMemoryContext;
    bool retry = first->attempts <= retry_attempts;
    ErrorData* failure = insert_as_writer(first, rel, rows, count, multi, keep, retry);
    if (!failure) {
        counts->applied += count;
    } else {
        // Redo row by row: the good rows go in, each bad one is kept with its own error (written
        // as the drain, after the writer's settings are undone).
        FreeErrorData(failure);
        for (int i = 0; i < count; i++) {
            ErrorData* e = insert_as_writer(first, rel, &rows[i], 1, multi, keep, retry);
            if (!e) {
                counts->applied++;
                continue;
            }
            reject_rows(&rows[i], 1, unpack_sql_state(e->sqlerrcode), e->message ? e->message : "error",
                        e->detail, counts);
            FreeErrorData(e);
        }
    }
    relation_close(rel, RowExclusiveLock);
}

// Whether a DROP DATABASE of this database is waiting for this drain to go: it holds the
// database object's AccessExclusiveLock meanwhile (asked for without waiting, as a session lock:
// the drain's loop runs outside a transaction).
bool database_being_dropped() {
    LOCKTAG tag;
    SET_LOCKTAG_OBJECT(tag, InvalidOid, DatabaseRelationId, MyDatabaseId, 0);
    if (LockAcquire(&tag, AccessShareLock, true, true) == LOCKACQUIRE_NOT_AVAIL) return true;
    LockRelease(&tag, AccessShareLock, true);
    return false;
}

// A run's time budget (see run_budget_ms); once terminated, no more than the drain has left.
__attribute__((noinline)) long run_budget(const RecordHeader* first, TimestampTz start) {
    const long budget = run_budget_ms << Min(int(first->deferrals), run_budget_doublings);
    if (!stop_deadline) return budget;
    return Min(budget, Max(100L, long(TimestampDifferenceMilliseconds(start, stop_deadline))));
}

// One run within its time budget (see run_budget_ms): in a subtransaction of its own, so that
// a run over its budget leaves nothing behind (not even rows it applied or rejected one by one)
// and its records are deferred whole.
void apply_run(Row* rows, int count, BatchCounts* counts) {
    RecordHeader* first = rows[0].header;
    TimestampTz start = GetCurrentTimestamp();
    const long budget = run_budget(first, start);
    run_deadline = TimestampTzPlusMilliseconds(start, budget);
    BatchCounts before = *counts;
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer);
    enable_timeout_at(STATEMENT_TIMEOUT, run_deadline);
    in_run = 1;
    PG_TRY();
    {
        apply_run_rows(rows, count, counts);
        in_run = 0;
        // A budget that ran out just as the run ended: its cancel must not hit what follows.
        disable_timeout(STATEMENT_TIMEOUT, true);
        if (get_timeout_indicator(STATEMENT_TIMEOUT, true)) QueryCancelPending = false;
        ReleaseCurrentSubTransaction();
    }
    PG_CATCH();
    {
        in_run = 0;
        disable_timeout(STATEMENT_TIMEOUT, false);
        MemoryContextSwitchTo(outer);
        ErrorData* e = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
        // Cancelled by SIGTERM, or by a budget the stop cut short: the drain's own stop, not the
        // table's slowness: the rows stay in the ring as they were (no deferral counted, no
        // backoff), for the next drain.
        bool stopped = e->sqlerrcode == ERRCODE_QUERY_CANCELED && ShutdownRequestPending;
        if (!over_budget(e->sqlerrcode) && !stopped) {
            run_deadline = 0;
            ReThrowError(e);
        }
        *counts = before;
        TimestampTz now = GetCurrentTimestamp();
        for (int i = 0; i < count; i++) {
            RecordHeader* h = rows[i].header;
            if (h->deferred) continue;
            h->deferred = true;  // the batch's copy: write_back() carries it to the ring
            h->attempts--;       // not the rows' fault
            if (stopped) continue;
            if (h->deferrals < INT16_MAX) h->deferrals++;
            long backoff = Min(defer_backoff_max_ms, defer_backoff_ms << Min(int(h->deferrals) - 1, 5));
            h->not_before = TimestampTzPlusMilliseconds(now, backoff);
        }
        if (stopped)
            ereport(LOG, (errmsg("aq: fast-ingest rows %llu.. (%d rows) of table %u stay in the ring: the drain was"
                                 " terminated while it applied them",
                                 (unsigned long long)first->first_seq, count, first->relation)));
        else
            ereport(LOG, (errmsg("aq: fast-ingest rows %llu.. (%d rows) deferred: table %u took more than %ld ms",
                                 (unsigned long long)first->first_seq, count, first->relation, budget)));
        FreeErrorData(e);
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    CurrentResourceOwner = owner;
    run_deadline = 0;
}

bool same_run(RecordHeader* a, RecordHeader* b) {
    return a->relation == b->relation && a->role == b->role && a->natts == b->natts &&
           memcmp(layout_of(a), layout_of(b), sizeof(Column) * a->natts) == 0 &&
           strncmp(search_path_of(a), search_path_of(b), Min(search_path_room(a), search_path_room(b))) == 0;
}

// One epoch's progress row.
void record_epoch_progress(uint32 epoch, uint64 hwm, uint64 applied, uint64 rejected) {
    if (!progress_plan) {
        Oid types[4] = {INT4OID, INT8OID, INT8OID, INT8OID};
        progress_plan = prepare_bookkeeping(
            "INSERT INTO aq.fast_ingest_progress AS p (epoch, applied_hwm, applied_rows, rejected_rows, batches, "
            "updated_at) VALUES ($1, $2, $3, $4, 1, pg_catalog.now()) ON CONFLICT (epoch) DO UPDATE SET applied_hwm = "
            "greatest(p.applied_hwm, excluded.applied_hwm), applied_rows = p.applied_rows OPERATOR(pg_catalog.+) "
            "excluded.applied_rows, rejected_rows = p.rejected_rows OPERATOR(pg_catalog.+) excluded.rejected_rows, "
            "batches = p.batches OPERATOR(pg_catalog.+) 1, updated_at = excluded.updated_at",
            4, types);
    }
    Datum values[4] = {Int32GetDatum(int32(epoch)), Int64GetDatum(int64(hwm)), Int64GetDatum(int64(applied)),
                       Int64GetDatum(int64(rejected))};
    run_bookkeeping(progress_plan, values, nullptr, "progress", false);
}

// Progress of this batch, recorded in its transaction: the watermark it establishes once it
// commits (its records DONE, the deferred ones still pending), under the epoch of that id; an
// earlier epoch whose ids ran out inside the batch gets its final watermark.
uint64 record_progress(Taken* taken, int n, const BatchCounts& counts) {
    uint64 deferred_lowest = 0;
    for (int k = 0; k < n; k++) {
        RecordHeader* h = taken[k].header;
        if (h->deferred && h->row_count > 0 && (deferred_lowest == 0 || h->first_seq < deferred_lowest))
            deferred_lowest = h->first_seq;
    }
    LWLockAcquire(shared->lock, LW_SHARED);
    uint64 hwm = watermark_locked(MyDatabaseId, batch_number, deferred_lowest);
    LWLockRelease(shared->lock);
    if (!OidIsValid(aq_table("fast_ingest_progress")) || hwm == 0) return hwm;
    uint32 epoch = epoch_of(hwm);
    uint64 older_hwm = 0;
    for (int k = 0; k < n; k++) {
        RecordHeader* h = taken[k].header;
        uint64 last = h->first_seq + h->row_count - 1;
        if (h->row_count > 0 && !h->deferred && epoch_of(last) < epoch) older_hwm = Max(older_hwm, last);
    }
    if (older_hwm != 0) record_epoch_progress(epoch_of(older_hwm), older_hwm, 0, 0);
    record_epoch_progress(epoch, hwm, counts.applied, counts.rejected);
    return hwm;
}

// Applies the taken records in one transaction, then publishes them; returns how many records
// it deferred.
int apply_batch(Taken* taken, int n) {
    BatchCounts counts = {0, 0, 0};
    SetCurrentStatementStartTimestamp();
    StartTransactionCommand();
    pgstat_report_activity(STATE_RUNNING, "aq fast ingest: applying a batch");
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
    PushActiveSnapshot(GetTransactionSnapshot());
    AfterTriggerSetState(makeNode(ConstraintsSetStmt));  // SET CONSTRAINTS ALL IMMEDIATE: a deferred
                                                          // violation must hit its row, not the batch
    uint64 total_rows = 0;
    for (int i = 0; i < n; i++) total_rows += taken[i].header->row_count;
    Row* rows = static_cast<Row*>(palloc(sizeof(Row) * Max(total_rows, uint64(1))));
    int row_count = 0;
    int i = 0;
    while (i < n) {
        int run_start = row_count;
        int j = i;
        for (; j < n && same_run(taken[i].header, taken[j].header); j++) {
            RecordHeader* h = taken[j].header;
            counts.hwm = Max(counts.hwm, h->first_seq + h->row_count - 1);
            pg_crc32c crc;
            INIT_CRC32C(crc);
            COMP_CRC32C(crc, payload_of(h), h->payload_bytes);
            FIN_CRC32C(crc);
            if (h->magic != record_magic || crc != h->crc) {
                const char* why = "the rows' checksum does not match: ring memory corrupted";
                keep_reject(h, h->first_seq, nullptr, "XX001", psprintf("%s; %u rows lost", why, h->row_count), nullptr);
                counts.rejected += h->row_count;
                ereport(WARNING, (errmsg("aq: fast-ingest rows %llu..%llu rejected: %s",
                                         (unsigned long long)h->first_seq,
                                         (unsigned long long)(h->first_seq + h->row_count - 1), why)));
                continue;
            }
            if (h->attempts > give_up_attempts) {  // kept row by row, with their text
                char* p = rows_of(h);
                for (uint32 k = 0; k < h->row_count; k++) {
                    auto tuple = reinterpret_cast<MinimalTuple>(p);
                    keep_reject(h, h->first_seq + k, tuple, "XX000",
                                "the drain failed on these rows repeatedly (see the server log)", nullptr);
                    p += MAXALIGN(tuple->t_len);
                }
                counts.rejected += h->row_count;
                ereport(WARNING, (errmsg("aq: fast-ingest rows %llu..%llu rejected after %d attempts",
                                         (unsigned long long)h->first_seq,
                                         (unsigned long long)(h->first_seq + h->row_count - 1), h->attempts - 1)));
                continue;
            }
            char* p = rows_of(h);
            for (uint32 k = 0; k < h->row_count; k++) {
                auto tuple = reinterpret_cast<MinimalTuple>(p);
                rows[row_count++] = Row{tuple, h->first_seq + k, h};
                p += MAXALIGN(tuple->t_len);
            }
        }
        if (row_count > run_start) apply_run(&rows[run_start], row_count - run_start, &counts);
        i = j;
    }
    uint64 hwm = record_progress(taken, n, counts);
    SPI_finish();
    PopActiveSnapshot();
    CommitTransactionCommand();  // synchronous: the watermark never runs ahead of durability
    // Nothing that can fail between the commit and DONE: a batch is never applied twice.
    int deferred = 0;
    for (int k = 0; k < n; k++) deferred += taken[k].header->deferred ? 1 : 0;
    write_back(taken, n, true);
    pg_atomic_write_u64(&my_slot->apply_hwm, Max(pg_atomic_read_u64(&my_slot->apply_hwm), hwm));
    pg_atomic_fetch_add_u64(&my_slot->applied_rows, counts.applied);
    pg_atomic_fetch_add_u64(&my_slot->rejected_rows, counts.rejected);
    pg_atomic_fetch_add_u64(&my_slot->batches, 1);
    advance_tail();
    ConditionVariableBroadcast(&shared->applied);
    pgstat_report_stat(false);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return deferred;
}

// An idle worker leaves only if no record of its database is in the ring (checked under the
// lock writers reserve with, so a record reserved later finds the slot stopped).
bool try_stop() {
    bool busy = false;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (uint64 pos = shared->tail; pos < shared->head && !busy;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        uint32 state = pg_atomic_read_u32(&h->state);
        busy = h->database == MyDatabaseId && (state == state_reserved || state == state_committed);
    }
    if (!busy) {
        pg_atomic_write_u32(&my_slot->worker_procno, no_proc);
        pg_atomic_write_u32(&my_slot->state, slot_stopped);
    }
    LWLockRelease(shared->lock);
    return !busy;
}

void drain_exit(int, Datum) {
    if (!my_slot) return;
    if (pg_atomic_read_u32(&my_slot->state) == slot_starting) pg_atomic_fetch_add_u32(&my_slot->failed_starts, 1);
    pg_atomic_write_u32(&my_slot->worker_procno, no_proc);
    pg_atomic_write_u32(&my_slot->state, slot_stopped);
    wake_launcher();  // rows may be left: it starts another worker
}

// ---------------------------------------------------------------- the launcher
uint64 now_ms() {
    return uint64(GetCurrentTimestamp() / 1000);
}

// A database that was dropped with rows in the ring: they are released and counted as rejected,
// so the ring does not fill up behind them.
void discard_database(DatabaseSlot* slot) {
    uint64 rows = 0;
    LWLockAcquire(shared->lock, LW_EXCLUSIVE);
    for (uint64 pos = shared->tail; pos < shared->head;) {
        RecordHeader* h = header_at(pos);
        pos += h->total_bytes;
        if (h->database != slot->database || pg_atomic_read_u32(&h->state) != state_committed) continue;
        rows += h->row_count;
        pg_atomic_fetch_sub_u64(&slot->live_bytes, h->total_bytes);
        pg_atomic_write_u32(&h->state, state_done);
    }
    LWLockRelease(shared->lock);
    pg_atomic_fetch_sub_u64(&shared->rows_buffered, rows);
    pg_atomic_fetch_add_u64(&slot->rejected_rows, rows);
    pg_atomic_write_u64(&slot->apply_hwm, pg_atomic_read_u64(&slot->committed_hwm));
    pg_atomic_write_u32(&slot->failed_starts, 0);
    ereport(LOG, (errmsg("aq: %llu fast-ingest rows of database %u discarded: the database was dropped",
                         (unsigned long long)rows, slot->database)));
    advance_tail();
    ConditionVariableBroadcast(&shared->applied);
}

BackgroundWorkerHandle* handles[max_databases];  // the launcher's: drain workers it started

bool start_drain(DatabaseSlot* slot, BackgroundWorkerHandle** handle) {
    uint32 expected = slot_stopped;
    if (!pg_atomic_compare_exchange_u32(&slot->state, &expected, slot_starting)) return false;
    // Never restarted by the postmaster: the launcher restarts it, and can give up.
    BackgroundWorker worker = base::worker_spec("aq_fast_ingest_drain_main", "aq fast ingest drain",
                                              BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION,
                                              BGW_NEVER_RESTART);
    snprintf(worker.bgw_name, BGW_MAXLEN, "aq fast ingest drain for database %u", slot->database);
    worker.bgw_main_arg = ObjectIdGetDatum(slot->database);
    worker.bgw_notify_pid = MyProcPid;
    pg_atomic_write_u64(&slot->last_start_ms, now_ms());
    if (!RegisterDynamicBackgroundWorker(&worker, handle)) {
        pg_atomic_write_u32(&slot->state, slot_stopped);
        ereport(LOG, (errmsg("aq: could not start a fast-ingest drain worker for database %u", slot->database),
                      errhint("Raise max_worker_processes.")));
        return false;
    }
    return true;
}

bool database_exists(Oid database) {
    StartTransactionCommand();
    bool exists = SearchSysCacheExists1(DATABASEOID, ObjectIdGetDatum(database));
    CommitTransactionCommand();
    return exists;
}

void launcher_exit(int, Datum) {
    if (shared) pg_atomic_write_u32(&shared->launcher_procno, no_proc);
}

}  // namespace

bool is_drain_process() {
    return my_slot != nullptr;
}

void register_launcher() {
    // A connection to no database: enough to read pg_database (is a database gone?).
    BackgroundWorker worker = base::worker_spec("aq_fast_ingest_launcher_main", "aq fast ingest launcher",
                                              BGWORKER_SHMEM_ACCESS | BGWORKER_BACKEND_DATABASE_CONNECTION, 1);
    RegisterBackgroundWorker(&worker);
}

}  // namespace aq::ingest::drain

void aq_fast_ingest_launcher_main(Datum) {
    using namespace aq::ingest::drain;
    using namespace aq::ingest::ring;
    pqsignal(SIGTERM, SignalHandlerForShutdownRequest);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    BackgroundWorkerUnblockSignals();
    if (!shared) proc_exit(1);
    before_shmem_exit(launcher_exit, 0);
    BackgroundWorkerInitializeConnection(nullptr, nullptr, 0);
    pg_atomic_write_u32(&shared->launcher_procno, aq::compat::my_proc_number());
    (void)ensure_epoch();  // recovery has ended: this run's first epoch (writers retry if it failed)
    while (!ShutdownRequestPending) {
        ResetLatch(MyLatch);
        // With a connection it takes part in ProcSignal barriers (DROP DATABASE waits for them).
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        for (int i = 0; i < max_databases; i++) {
            DatabaseSlot& slot = shared->slots[i];
            // A worker that never ran (fork failed, died before its first step): the slot
            // would stay "starting" for ever.
            if (handles[i]) {
                pid_t pid;
                if (GetBackgroundWorkerPid(handles[i], &pid) == BGWH_STOPPED) {
                    uint32 starting = slot_starting;
                    if (pg_atomic_compare_exchange_u32(&slot.state, &starting, slot_stopped))
                        pg_atomic_fetch_add_u32(&slot.failed_starts, 1);
                    pfree(handles[i]);
                    handles[i] = nullptr;
                }
            }
            // A launcher that restarted lost its handles: a start that never ran times out.
            if (!handles[i] && pg_atomic_read_u32(&slot.state) == slot_starting &&
                now_ms() - pg_atomic_read_u64(&slot.last_start_ms) > 60000) {
                uint32 starting = slot_starting;
                (void)pg_atomic_compare_exchange_u32(&slot.state, &starting, slot_stopped);
            }
            if (slot.database == InvalidOid || pg_atomic_read_u32(&slot.state) != slot_stopped) continue;
            if (pg_atomic_read_u64(&slot.committed_hwm) <= pg_atomic_read_u64(&slot.apply_hwm)) continue;
            uint32 failures = pg_atomic_read_u32(&slot.failed_starts);
            if (failures >= max_failed_starts && !database_exists(slot.database)) {
                discard_database(&slot);  // dropped: its rows can go nowhere
                continue;
            }
            // Back off while starts fail (1 s, 2 s, 4 s ... up to a minute).
            uint64 interval = uint64(start_interval_ms) << Min(failures, 6u);
            if (now_ms() - pg_atomic_read_u64(&slot.last_start_ms) < interval) continue;
            if (handles[i]) {
                pfree(handles[i]);
                handles[i] = nullptr;
            }
            start_drain(&slot, &handles[i]);
        }
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, start_interval_ms,
            AQ_WAIT_EVENT("AqIngestLauncherMain"));
    }
    // Terminated (pg_terminate_backend, or a shutdown): exit code 1, so that the postmaster starts
    // it again (it does not at a shutdown); code 0 would unregister it for good.
    proc_exit(1);
}

void aq_fast_ingest_drain_main(Datum database_arg) {
    using namespace aq::ingest::drain;
    using namespace aq::ingest::ring;
    Oid database = DatumGetObjectId(database_arg);
    pqsignal(SIGTERM, drain_sigterm);
    pqsignal(SIGHUP, SignalHandlerForConfigReload);
    BackgroundWorkerUnblockSignals();
    if (!shared) proc_exit(1);
    DatabaseSlot* slot = find_slot(database);
    if (!slot || pg_atomic_read_u32(&slot->state) != slot_starting) proc_exit(0);  // not ours to run
    my_slot = slot;
    before_shmem_exit(drain_exit, 0);
    pg_atomic_write_u32(&slot->worker_procno, aq::compat::my_proc_number());
    // ALLOW_CONNECTIONS false must not strand committed rows.
    BackgroundWorkerInitializeConnectionByOid(database, InvalidOid, BGWORKER_BYPASS_ALLOWCONN);
    pg_atomic_write_u32(&slot->state, slot_running);
    pg_atomic_write_u32(&slot->failed_starts, 0);
    // The apply watermark promises that rows at or below it survive a crash.
    // aq's own commit modes set at the database or role level (NOWAIT) must not apply here:
    // the drain commits as synchronous_commit = on says, and nothing else.
    SetConfigOption("synchronous_commit", "on", PGC_SUSET, PGC_S_OVERRIDE);
    // Nor may a database-level default_transaction_read_only (its owner may set it) make the
    // drain's transactions read-only: its rows could then be neither applied nor kept as rejects.
    SetConfigOption("default_transaction_read_only", "off", PGC_SUSET, PGC_S_OVERRIDE);
    aq::commit::committer::exempt_this_process();
    pgstat_report_appname("aq fast ingest drain");

    MemoryContext batch_context = AllocSetContextCreate(TopMemoryContext, "aq fast ingest batch", ALLOCSET_DEFAULT_SIZES);
    auto* taken = static_cast<Taken*>(MemoryContextAlloc(TopMemoryContext, sizeof(Taken) * batch_records));
    TimestampTz idle_since = GetCurrentTimestamp();
    bool lingered = false;
    for (;;) {
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        if (ConfigReloadPending) {
            ConfigReloadPending = false;
            ProcessConfigFile(PGC_SIGHUP);
        }
        bool stopping = ShutdownRequestPending;
        if (stopping && !stop_deadline) stop_deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), shutdown_wait_ms);
        // A DROP DATABASE waits for this drain (with FORCE, for at most five seconds): nothing
        // more is tried; the launcher discards the rows once the database is gone.
        if (stopping && database_being_dropped()) break;
        bool in_flight = false;
        long wait_ms = 1000;
        uint64 rows = 0;
        bool linger = false;
        batch_number = (uint64(uint32(MyProcPid)) << 32) | (++batch_counter & 0xFFFFFFFF);
        int n = collect(taken, stopping, !stopping && !lingered, &linger, batch_context, &in_flight, &wait_ms, &rows);
        if (linger) {
            pg_usleep(linger_us);
            lingered = true;
            continue;
        }
        lingered = false;
        if (n > 0) {
            MemoryContext outer = MemoryContextSwitchTo(batch_context);
            // An error outside a row's subtransaction (a transient one raised again, a lock
            // timeout opening the table, the commit itself): abort, wait, retry the batch;
            // the attempts counted on its records bound the retries.
            // Counted before the attempt: a worker that dies in it has it counted.
            volatile bool failed = false;
            volatile int deferred = 0;
            PG_TRY();
            {
                deferred = apply_batch(taken, n);
            }
            PG_CATCH();
            {
                HOLD_INTERRUPTS();
                int code = geterrcode();
                EmitErrorReport();
                AbortCurrentTransaction();
                FlushErrorState();
                RESUME_INTERRUPTS();
                // Not the rows' fault (a full disk, say): not an attempt, however long it lasts.
                for (int k = 0; k < n; k++)
                    if (not_the_rows_fault(code) && !taken[k].header->deferred) taken[k].header->attempts--;
                write_back(taken, n, false);
                run_deadline = 0;
                failed = true;
            }
            PG_END_TRY();
            MemoryContextSwitchTo(outer);
            MemoryContextReset(batch_context);
            if (failed || deferred > 0) {
                pgstat_report_activity(STATE_IDLE, nullptr);
                // At shutdown a drain that keeps failing does not hold the server up for ever:
                // its rows are lost with the ring, and no watermark claims them.
                // A database being dropped (DROP DATABASE waits for this drain): at once.
                if (stopping && (GetCurrentTimestamp() >= stop_deadline || database_being_dropped())) {
                    ereport(LOG, (errmsg("aq: fast-ingest drain of database %u stops with rows it could not apply",
                                         MyDatabaseId),
                                  errdetail("Rows above sequence id %llu stay in the ring for the next drain of the"
                                            " database; a server shutdown loses them.",
                                            (unsigned long long)pg_atomic_read_u64(&my_slot->apply_hwm))));
                    break;
                }
                if (failed)
                    (void)WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, retry_backoff_ms,
                        AQ_WAIT_EVENT("AqIngestRetry"));
                idle_since = GetCurrentTimestamp();
                continue;
            }
            idle_since = GetCurrentTimestamp();
            continue;
        }
        TimestampTz now = GetCurrentTimestamp();
        if (stopping) {
            // Drain everything first; wait (boundedly) for commits still in flight, and for the
            // clients that may still commit (see drain.hpp).
            bool work = has_work(&in_flight);
            bool writers = CountDBConnections(MyDatabaseId) > 0;
            if (!work && (!(in_flight || writers) || now >= stop_deadline)) break;
            if (database_being_dropped()) break;
            wait_ms = 10;
        } else if (!in_flight && TimestampDifferenceExceeds(idle_since, now, idle_exit_ms) && try_stop()) {
            my_slot = nullptr;  // try_stop already marked the slot
            proc_exit(0);
        }
        if (in_flight) wait_ms = 1;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, wait_ms,
            AQ_WAIT_EVENT("AqIngestDrainMain"));
    }
    proc_exit(0);
}
