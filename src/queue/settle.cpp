// One unit of a settler's work: a queue table's claims settled in a transaction of its own, as the
// table's owner, on a time budget (settler.hpp for the protocol, retries.hpp for what settling
// means; the workers that run the units: settler.cpp).
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
#include "compat/relation.hpp"
#include "commit/committer.hpp"
#include "base/worker_spec.hpp"
#include "queue/retries.hpp"
#include "queue/ring.hpp"
#include "queue/deliveries.hpp"
#include "queue/once_walk.hpp"
#include "queue/queue_store.hpp"
#include "queue/settler.hpp"
#include "queue/settler_shared.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::settler {

namespace {

struct QueueTable {
    int32 queue_table_id;
    Oid owner;
    int32 default_exception_id;  // or 0
    char qualified[2 * (2 * NAMEDATALEN + 2) + 2];
    bool deliveries;  // the delivery table of a multi-consumer queue table (deliveries.hpp)
    char messages[2 * (2 * NAMEDATALEN + 2) + 2];  // then: its queue table
};

Datum tid_array(const ItemPointerData* tids, int n) {
    Datum* items = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
    for (int i = 0; i < n; i++) items[i] = PointerGetDatum(&tids[i]);
    return PointerGetDatum(construct_array(items, n, TIDOID, sizeof(ItemPointerData), false, TYPALIGN_SHORT));
}

// Requires SPI.  False if relid is not a queue table of this database.
bool read_queue_table(Oid relid, QueueTable* t) {
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(relid)};
    int rc = SPI_execute_with_args(psprintf(
        "SELECT t.queue_table_id, c.relowner,"
        "       (SELECT e.queue_id FROM aq.queues e WHERE e.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id"
        "           AND e.queue_name OPERATOR(pg_catalog.=) ('aq$_' OPERATOR(pg_catalog.||) t.queue_table"
        "               OPERATOR(pg_catalog.||) '_e')),"
        "       pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
        "         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
        "       %s,"
        "       (SELECT pg_catalog.quote_ident(mn.nspname) OPERATOR(pg_catalog.||) '.'"
        "                 OPERATOR(pg_catalog.||) pg_catalog.quote_ident(mc.relname)"
        "          FROM pg_catalog.pg_class mc JOIN pg_catalog.pg_namespace mn ON mn.oid OPERATOR(pg_catalog.=) mc.relnamespace"
        "         WHERE mc.oid OPERATOR(pg_catalog.=) t.relid::pg_catalog.oid)"
        "  FROM aq.queue_tables t"
        // The queue table, the delivery table of a multi-consumer one (deliveries.hpp), or a
        // segment of a ring (ring.hpp): its rows carry the columns settling updates.
        "  JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid::pg_catalog.oid%s%s"
        "  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace"
        " WHERE c.oid OPERATOR(pg_catalog.=) $1 AND c.relkind OPERATOR(pg_catalog.=) 'r'",
        deliveries::available() ? "(c.oid OPERATOR(pg_catalog.=) t.delivery_relid::pg_catalog.oid) IS TRUE" : "false",
        deliveries::available() ? " OR c.oid OPERATOR(pg_catalog.=) t.delivery_relid::pg_catalog.oid" : "",
        ring::available() ? " OR c.oid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT s.relid::pg_catalog.oid FROM aq.queue_segments s"
                            " WHERE s.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id))"
                          : ""),
        1, types, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler queue table lookup failed: %s", SPI_result_code_string(rc));
    if (SPI_processed == 0) return false;
    HeapTuple row = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    t->queue_table_id = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
    t->owner = DatumGetObjectId(SPI_getbinval(row, desc, 2, &isnull));
    Datum e = SPI_getbinval(row, desc, 3, &isnull);
    t->default_exception_id = isnull ? 0 : DatumGetInt32(e);
    strlcpy(t->qualified, SPI_getvalue(row, desc, 4), sizeof t->qualified);
    t->deliveries = DatumGetBool(SPI_getbinval(row, desc, 5, &isnull));
    char* messages = SPI_getvalue(row, desc, 6);
    strlcpy(t->messages, messages ? messages : "", sizeof t->messages);
    return true;
}

// Runs one statement with tids as $1 as the queue table's owner (see retries.hpp), through
// base::run_as (search_path pinned, restricted, every setting undone); returns SPI_processed,
// the locked TIDs copied into out (if given, in out_context) and the returned q_ids noted for
// wake-ups.
struct OwnerStatement {
    const char* sql;
    int nargs;
    Oid* types;
    Datum* args;
    ItemPointerData* out;
    MemoryContext out_context;
    uint64 processed;
};

void run_owner_statement(void* arg) {
    auto* st = static_cast<OwnerStatement*>(arg);
    int rc = SPI_execute_with_args(st->sql, st->nargs, st->types, st->args, nullptr, false, 0);
    if (rc < 0) elog(ERROR, "aq: settling dequeue attempts failed: %s", SPI_result_code_string(rc));
    st->processed = SPI_processed;
    bool isnull;
    for (uint64 i = 0; i < SPI_processed; i++) {
        Datum v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (isnull) continue;
        if (st->out) {
            MemoryContext previous = MemoryContextSwitchTo(st->out_context);
            st->out[i] = *reinterpret_cast<ItemPointer>(DatumGetPointer(v));
            MemoryContextSwitchTo(previous);
        } else {
            wakeup::note_enqueue(DatumGetInt32(v));
        }
    }
}

uint64 run_as_owner(const QueueTable& t, const char* sql, int nargs, Oid* types, Datum* args,
                    ItemPointerData* out, MemoryContext out_context) {
    OwnerStatement st{sql, nargs, types, args, out, out_context, 0};
    base::RunAs as;
    as.role = t.owner;
    base::run_as(as, run_owner_statement, &st);
    return st.processed;
}

// The lock xids of the current unit (forgotten once it committed).
TransactionId settling_xids[64];
int settling_count = 0;

// Settles the unsettled attempts among tids (all of the table's rows when tids is null) of
// one queue table, in the current transaction.  Returns true if some were left (locked).
// Requires SPI and an active snapshot.
bool settle_table(Oid relid, const ItemPointerData* tids, int ntids) {
    QueueTable t;
    if (!read_queue_table(relid, &t)) return false;
    // Never waits for the table: a transaction that holds it (maybe the one whose abort is
    // waiting for this settle) would make the waiter sit out its wait.  A scan retries later.
    if (!ConditionalLockRelationOid(relid, RowExclusiveLock)) return true;
    Relation rel = table_open(relid, NoLock);
    ItemPointerData* found = nullptr;
    int nfound = 0;
    if (tids) {
        found = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * ntids));
        BlockNumber blocks = RelationGetNumberOfBlocks(rel);
        for (int i = 0; i < ntids; i++) {
            CHECK_FOR_INTERRUPTS();
            if (ItemPointerGetBlockNumber(&tids[i]) >= blocks) continue;
            HeapTupleData tuple;
            tuple.t_self = tids[i];
            Buffer buffer;
            if (!heap_fetch(rel, GetActiveSnapshot(), &tuple, &buffer, false)) continue;
            LockBuffer(buffer, BUFFER_LOCK_SHARE);
            bool unsettled = retries::unsettled_claim(tuple.t_data, &tuple.t_self);
            LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
            ReleaseBuffer(buffer);
            bool duplicate = false;
            for (int j = 0; j < nfound && !duplicate; j++) duplicate = ItemPointerEquals(&found[j], &tuple.t_self);
            if (unsettled && !duplicate) found[nfound++] = tuple.t_self;
        }
    } else {
        // Only row versions with an xmax can hold one.
        char* sql = psprintf("SELECT ctid FROM ONLY %s WHERE xmax OPERATOR(pg_catalog.<>) '0'::pg_catalog.xid", t.qualified);
        int rc = SPI_execute(sql, true, 0);
        if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler scan failed: %s", SPI_result_code_string(rc));
        uint64 n = SPI_processed;
        found = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * Max(n, 1)));
        for (uint64 i = 0; i < n; i++) {
            CHECK_FOR_INTERRUPTS();
            bool isnull;
            ItemPointer tid = reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull)));
            if (!isnull && retries::row_holds_unsettled_claim(rel, tid)) found[nfound++] = *tid;
        }
        SPI_freetuptable(SPI_tuptable);
    }
    table_close(rel, NoLock);  // the lock is kept to the end of the transaction
    if (nfound == 0) return false;

    // The lock step, in a subtransaction of its own (retries.hpp, 3: what makes a settle
    // that aborts recognisable again).
    MemoryContext outer_context = CurrentMemoryContext;
    ResourceOwner outer_owner = CurrentResourceOwner;
    auto* locked = static_cast<ItemPointerData*>(palloc(sizeof(ItemPointerData) * nfound));
    char* lock_sql = psprintf("SELECT ctid FROM ONLY %s WHERE ctid OPERATOR(pg_catalog.=) ANY ($1) FOR UPDATE SKIP LOCKED",
                              t.qualified);
    Oid lock_types[1] = {TIDARRAYOID};
    Datum lock_args[1] = {tid_array(found, nfound)};
    BeginInternalSubTransaction(nullptr);
    MemoryContextSwitchTo(outer_context);
    // The lock's xid must count as a dequeuer's: if this settle aborts, its FOR UPDATE member
    // is what keeps the attempt recognisable.
    TransactionId lock_xid = GetCurrentTransactionId();
    if (!register_dequeuer(lock_xid))
        ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                        errmsg("aq: the registry of dequeuing transactions is full"),
                        errdetail("The settler counts this attempt on its next pass."),
                        errhint("It holds 4096 transactions; the attempt is counted once fewer dequeuing transactions are running.")));
    if (settling_count < int(lengthof(settling_xids))) settling_xids[settling_count++] = lock_xid;
    int nlocked = int(run_as_owner(t, lock_sql, 1, lock_types, lock_args, locked, outer_context));
    ReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(outer_context);
    CurrentResourceOwner = outer_owner;
    if (nlocked == 0) return true;

    Oid types[4] = {TIDARRAYOID, TIMESTAMPTZOID, INT4OID, INT4OID};
    Datum args[4] = {tid_array(locked, nlocked), TimestampTzGetDatum(GetCurrentTimestamp()),
                     Int32GetDatum(t.default_exception_id), Int32GetDatum(t.queue_table_id)};
    // A message names its exception queue; if that is not an exception queue of the same
    // queue table, it goes to the queue table's default one.
    char* count_sql = psprintf(
        "UPDATE ONLY %s m SET retry_count = m.retry_count OPERATOR(pg_catalog.+) 1,"
        "   delay = CASE WHEN q.retry_delay OPERATOR(pg_catalog.>) '0'::pg_catalog.interval"
        "                THEN $2 OPERATOR(pg_catalog.+) q.retry_delay ELSE m.delay END,"
        "   q_id = CASE WHEN m.retry_count OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.>) q.max_retries"
        "               THEN COALESCE((SELECT e.queue_id FROM aq.queues e"
        "                               WHERE e.queue_name OPERATOR(pg_catalog.=) m.exception_queue"
        "                                 AND e.queue_table_id OPERATOR(pg_catalog.=) $4"
        "                                 AND e.queue_type OPERATOR(pg_catalog.=) 'exception_queue'),"
        "                             CASE WHEN $3 OPERATOR(pg_catalog.=) 0 THEN NULL ELSE $3 END, m.q_id)"
        "               ELSE m.q_id END%s"
        "  FROM aq.queues q"
        " WHERE q.queue_id OPERATOR(pg_catalog.=) m.q_id AND q.queue_type OPERATOR(pg_catalog.=) 'normal_queue'"
        "   AND m.ctid OPERATOR(pg_catalog.=) ANY ($1)"
        " RETURNING m.q_id",
        t.qualified,
        // A delivery that moves to an exception queue takes its message with it (deliveries.hpp).
        t.deliveries ? deliveries::keep_message_sql(t.messages, "m",
                                                    "m.retry_count OPERATOR(pg_catalog.+) 1 OPERATOR(pg_catalog.>) q.max_retries")
                     : "");
    (void)run_as_owner(t, count_sql, 4, types, args, nullptr, nullptr);
    // The rest (exception queues, queues dropped since): rewritten, not counted.
    char* rewrite_sql = psprintf(
        "UPDATE ONLY %s SET retry_count = retry_count WHERE ctid OPERATOR(pg_catalog.=) ANY ($1) RETURNING q_id",
        t.qualified);
    (void)run_as_owner(t, rewrite_sql, 1, types, args, nullptr, nullptr);
    return nlocked < nfound;
}

// The queue tables of this database (for a scan).  Requires SPI.
Oid* queue_tables(int* count) {
    int rc = SPI_execute(psprintf("SELECT relid::pg_catalog.oid FROM aq.queue_tables%s%s",
                                  deliveries::available() ? " UNION ALL SELECT delivery_relid::pg_catalog.oid"
                                                            " FROM aq.queue_tables WHERE delivery_relid IS NOT NULL"
                                                          : "",
                                  ring::available() ? " UNION ALL SELECT relid::pg_catalog.oid FROM aq.queue_segments" : ""),
                         true, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler queue table list failed: %s", SPI_result_code_string(rc));
    Oid* oids = static_cast<Oid*>(palloc(sizeof(Oid) * Max(SPI_processed, 1)));
    *count = 0;
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull;
        Datum v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (!isnull) oids[(*count)++] = DatumGetObjectId(v);
    }
    return oids;
}


// The queue tables whose settle ran over its time budget, and how many times in a row: a table
// whose owner's trigger is slow gets a longer budget each time (so it is settled in the end),
// after the others' requests (a scan retries it).  A few entries; a forgotten one starts again at
// the first budget.
struct Overrun {
    Oid relid;
    int times;
};
Overrun overruns[16];

Overrun* overrun_of(Oid relid, bool create) {
    for (auto& o : overruns)
        if (o.relid == relid) return &o;
    if (!create) return nullptr;
    Overrun* victim = &overruns[0];
    for (auto& o : overruns)
        if (o.times < victim->times) victim = &o;
    *victim = Overrun{relid, 0};
    return victim;
}

}  // namespace

namespace {

// One unit in a transaction of its own, with SPI and a snapshot: work(arg) returns whether
// something was left.  Its time budget is budget_relid's (an owner's slow trigger must not hold
// this database's other queue tables for long; what is left is settled later, with a longer
// budget); none without one.
UnitResult in_unit(Oid budget_relid, bool (*work)(void*), void* arg) {
    MemoryContext outer = CurrentMemoryContext;
    volatile bool left = false;
    volatile bool extension_missing = false;
    settling_count = 0;
    PG_TRY();
    {
        SetCurrentStatementStartTimestamp();
        StartTransactionCommand();
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
        PushActiveSnapshot(GetTransactionSnapshot());
        pgstat_report_activity(STATE_RUNNING, "aq: settling dequeue attempts");
        extension_missing = !OidIsValid(get_extension_oid("aq", true));
        if (!extension_missing) {
            if (OidIsValid(budget_relid)) {
                const Overrun* o = overrun_of(budget_relid, false);
                enable_timeout_after(STATEMENT_TIMEOUT, unit_timeout_ms << Min(o ? o->times : 0, 6));
            }
            left = work(arg);
            if (OidIsValid(budget_relid)) {
                disable_timeout(STATEMENT_TIMEOUT, false);
                if (Overrun* done = overrun_of(budget_relid, false)) done->relid = InvalidOid;
            }
        }
        SPI_finish();
        PopActiveSnapshot();
        CommitTransactionCommand();
        forget_dequeuers(settling_xids, settling_count);  // committed: nothing left to recognise
    }
    PG_CATCH();
    {
        HOLD_INTERRUPTS();
        disable_timeout(STATEMENT_TIMEOUT, false);
        // A cancel here is the budget's timer (the message says so; its indicator is already
        // consumed by then): the next settle of the table gets a longer budget.
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        if (error->sqlerrcode == ERRCODE_QUERY_CANCELED && OidIsValid(budget_relid)) overrun_of(budget_relid, true)->times++;
        FreeErrorData(error);
        EmitErrorReport();
        AbortCurrentTransaction();
        FlushErrorState();
        RESUME_INTERRUPTS();
        left = true;
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    pgstat_report_activity(STATE_IDLE, nullptr);
    return UnitResult{left, extension_missing};
}

struct TableUnit {
    Oid relid;
    const ItemPointerData* tids;
    int ntids;
    Oid** tables;
    int* ntables;
    MemoryContext outer;
};

bool table_unit(void* arg) {
    auto* u = static_cast<TableUnit*>(arg);
    if (!u->tables) return settle_table(u->relid, u->tids, u->ntids);
    int n = 0;
    Oid* oids = queue_tables(&n);
    MemoryContext previous = MemoryContextSwitchTo(u->outer);
    *u->tables = static_cast<Oid*>(palloc(sizeof(Oid) * Max(n, 1)));
    memcpy(*u->tables, oids, sizeof(Oid) * n);
    *u->ntables = n;
    MemoryContextSwitchTo(previous);
    return false;
}

struct ReceiptsUnit {
    Oid receipts;
    const ReceiptClaim* claims;
    int n;
    bool* written;
};

// once_walk.hpp, 5: each aborted receipt written as attempts, as the queue table's owner, under the
// consumer's walk lock (split_attempt; when busy, that claim is left for later; an error or a
// timeout writes nothing, and the claims are retried): the messages
// with attempts left in a receipt of kind 'r' (ready again after the queue's retry_delay), those
// past max_retries moved to their exception queues (move_to_exception); those the consumer took
// again since count nothing.  A queue dropped since: nothing to count.  A queue table without a
// default exception queue keeps retrying.
bool receipts_unit(void* arg) {
    auto* u = static_cast<ReceiptsUnit*>(arg);
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(u->receipts)};
    int rc = SPI_execute_with_args(
        "SELECT qc.relowner,"
        "       pg_catalog.quote_ident(rn.nspname) OPERATOR(pg_catalog.||) '.'"
        "         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(rc.relname),"
        "       t.relid::pg_catalog.oid, t.queue_table_id, s.relid::pg_catalog.oid,"
        "       (SELECT e.queue_id FROM aq.queues e WHERE e.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id"
        "           AND e.queue_name OPERATOR(pg_catalog.=) ('aq$_' OPERATOR(pg_catalog.||) t.queue_table"
        "               OPERATOR(pg_catalog.||) '_e')),"
        "       ARRAY(SELECT a.relid::pg_catalog.oid FROM aq.queue_segments a"
        "              WHERE a.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id ORDER BY a.segment)"
        "  FROM aq.queue_segments s JOIN aq.queue_tables t ON t.queue_table_id OPERATOR(pg_catalog.=) s.queue_table_id"
        "  JOIN pg_catalog.pg_class qc ON qc.oid OPERATOR(pg_catalog.=) t.relid::pg_catalog.oid"
        "  JOIN pg_catalog.pg_class rc ON rc.oid OPERATOR(pg_catalog.=) s.receipts::pg_catalog.oid"
        "  JOIN pg_catalog.pg_namespace rn ON rn.oid OPERATOR(pg_catalog.=) rc.relnamespace"
        " WHERE s.receipts::pg_catalog.oid OPERATOR(pg_catalog.=) $1",
        1, types, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler receipts lookup failed: %s", SPI_result_code_string(rc));
    if (SPI_processed == 0) {  // its queue table is gone: nothing to count
        for (int i = 0; i < u->n; i++) u->written[i] = true;
        return false;
    }
    HeapTuple row = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    QueueTable t{};
    bool isnull;
    t.owner = DatumGetObjectId(SPI_getbinval(row, desc, 1, &isnull));
    char* qualified = SPI_getvalue(row, desc, 2);
    Oid queue_table = DatumGetObjectId(SPI_getbinval(row, desc, 3, &isnull));
    int32 queue_table_id = DatumGetInt32(SPI_getbinval(row, desc, 4, &isnull));
    Oid segment_relid = DatumGetObjectId(SPI_getbinval(row, desc, 5, &isnull));
    Datum exception = SPI_getbinval(row, desc, 6, &isnull);
    int32 default_exception = isnull ? 0 : DatumGetInt32(exception);
    ring::Segments segments;
    {
        ArrayType* relids = DatumGetArrayTypeP(SPI_getbinval(row, desc, 7, &isnull));
        int n = ArrayGetNItems(ARR_NDIM(relids), ARR_DIMS(relids));
        const Oid* oids = reinterpret_cast<const Oid*>(ARR_DATA_PTR(relids));
        for (int i = 0; i < n && i < ring::max_segments; i++) segments.relids[segments.count++] = oids[i];
    }
    // Never waits for the table (as settle_table): nothing written, all tried again later, backing
    // off as a settle that left rows does (a LOCK TABLE or a VACUUM FULL may hold it for long).
    if (!ConditionalLockRelationOid(u->receipts, RowExclusiveLock)) return true;
    char* retry_sql = psprintf(
        "INSERT INTO %s (consumer, kind, hi_priority, hi_enq_time, hi_msgid, runs, at)"
        " SELECT $1, 'r', $2, $3, $4, $5, $6 OPERATOR(pg_catalog.+) q.retry_delay"
        "   FROM aq.queues q WHERE q.queue_id OPERATOR(pg_catalog.=) $7"
        " RETURNING $7",
        qualified);
    Oid receipt_types[7] = {TEXTOID, INT4OID, TIMESTAMPTZOID, INT8OID, INT8ARRAYOID, TIMESTAMPTZOID, INT4OID};
    TimestampTz now = GetCurrentTimestamp();
    for (int i = 0; i < u->n; i++) {
        CHECK_FOR_INTERRUPTS();
        const ReceiptClaim& c = u->claims[i];
        Oid q_types[1] = {INT4OID};
        Datum q_args[1] = {Int32GetDatum(c.queue_id)};
        rc = SPI_execute_with_args("SELECT max_retries FROM aq.queues WHERE queue_id OPERATOR(pg_catalog.=) $1"
                                   " AND queue_type OPERATOR(pg_catalog.=) 'normal_queue'",
                                   1, q_types, q_args, nullptr, true, 1);
        if (rc != SPI_OK_SELECT) elog(ERROR, "aq: settler queue lookup failed: %s", SPI_result_code_string(rc));
        if (SPI_processed == 0) {  // dropped since
            u->written[i] = true;
            continue;
        }
        int max_retries = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
        if (default_exception == 0) max_retries = PG_INT32_MAX;  // nowhere to move them
        AttemptSplit split;
        if (!split_attempt(queue_table, u->receipts, c.consumer, c.pairs, c.npairs, max_retries, &split))
            continue;  // the consumer's walk lock is busy: later
        Datum consumer = CStringGetTextDatum(c.consumer);
        if (split.nretry_pairs > 0) {
            Datum values[7] = {consumer, Int32GetDatum(c.hi_priority), TimestampTzGetDatum(c.hi_enq_time),
                               Int64GetDatum(c.hi_msgid), int8_array(split.retry_pairs, split.nretry_pairs),
                               TimestampTzGetDatum(now), Int32GetDatum(c.queue_id)};
            (void)run_as_owner(t, retry_sql, 7, receipt_types, values, nullptr, nullptr);  // the commit wakes the queue
        }
        if (split.nexcept > 0) {
            // In order (a receipt's runs are), with their attempts.
            ExceptionMove move{queue_table_id, &segments, segment_relid, u->receipts, c.queue_id, default_exception,
                               c.consumer, split.except_ids, split.except_attempts, split.nexcept,
                               c.hi_priority, c.hi_enq_time, c.hi_msgid, now};
            base::RunAs as;
            as.role = t.owner;
            base::run_as(as, [](void* arg) { move_to_exception(*static_cast<const ExceptionMove*>(arg)); }, &move);
        }
        if (split.locked) release_walk_lock(queue_table, c.consumer);
        u->written[i] = true;
    }
    return false;
}

}  // namespace

UnitResult run_unit(Oid relid, const ItemPointerData* tids, int ntids, Oid** tables, int* ntables) {
    TableUnit u{relid, tids, ntids, tables, ntables, CurrentMemoryContext};
    return in_unit(tables ? InvalidOid : relid, table_unit, &u);
}

UnitResult run_receipts_unit(Oid receipts, const ReceiptClaim* claims, int n, bool* written) {
    for (int i = 0; i < n; i++) written[i] = false;
    ReceiptsUnit u{receipts, claims, n, written};
    UnitResult result = in_unit(receipts, receipts_unit, &u);
    if (result.left || result.extension_missing)  // rolled back: nothing was written
        for (int i = 0; i < n; i++) written[i] = result.extension_missing;
    return result;
}

}  // namespace aq::queue::settler
