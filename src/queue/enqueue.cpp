// Enqueue: ENQUEUE and ENQUEUE_ARRAY into a queue table (queue_store.hpp).
//
// Invariants:
//  1. The messages go in by COPY's multi-insert path (bulk_enqueue.hpp) when the queue table is as
//     aq made it; a table with triggers, rules, row-level security or columns of its own gets the
//     equivalent INSERT ... SELECT FROM unnest(payloads[, properties]) RETURNING msgid, one
//     statement for the whole array (statements.hpp).
//  2. A grouped queue table's messages carry the transaction's group (groups.hpp), drawn once per
//     transaction and queue table.
//  3. A multi-consumer queue's messages reach their recipients in the same transaction
//     (deliveries.hpp: the fan-out).
//  4. Last, after the index entries and before the commit, the queue's scan floor is lowered
//     (scan_floor.hpp; a grouped table's groups' floor too) and the commit will wake the queue's
//     waiters (wakeup.hpp).
extern "C" {
#include "postgres.h"
#include "utils/builtins.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include "base/guard.hpp"
#include "base/spi.hpp"
#include "queue/audience.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/catalog.hpp"
#include "queue/deliveries.hpp"
#include "queue/groups.hpp"
#include "queue/queue_store.hpp"
#include "queue/scan_floor.hpp"
#include "queue/statements.hpp"
#include "queue/time_manager.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

namespace {

// The message ids as int8[], built in the caller's memory context (SPI's goes away).
ArrayType* msgid_array(Datum* ids, int count, MemoryContext context) {
    MemoryContext previous = MemoryContextSwitchTo(context);
    ArrayType* array = construct_array(ids, count, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
    MemoryContextSwitchTo(previous);
    return array;
}

// The multi-insert path (bulk_enqueue.hpp); false if the table is not eligible.
bool enqueue_in_bulk(const EnqueueRequest& r, const QueueInfo& q, TimestampTz enq_time, int count,
                     MemoryContext result_context, ArrayType** result, deliveries::Message* messages) {
    int16 typlen;
    bool typbyval;
    char typalign;
    get_typlenbyvalalign(r.payload_type, &typlen, &typbyval, &typalign);
    Datum* payloads;
    int n;
    deconstruct_array(r.payloads, r.payload_type, typlen, typbyval, typalign, &payloads, nullptr, &n);
    Datum* properties = nullptr;
    bool* properties_null = nullptr;
    if (r.properties)
        deconstruct_array(r.properties, ARR_ELEMTYPE(r.properties), -1, false, TYPALIGN_DOUBLE, &properties,
                          &properties_null, &n);
    Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * count));
    BulkEnqueue request{q.relid,          &q.segments, q.queue_table_id,
                        q.payload_type,  q.queue_id, enq_time, count, payloads, properties, properties_null, ids,
                        messages};
    int64 group = 0;
    if (q.grouped) {
        group = groups::transaction_group(q.relid);
        request.group = &group;
    }
    // Stored once: who each message is for, before its row (audience.hpp).
    audience::Resolved resolved;
    if (q.stored_once()) {
        audience::resolve(q, r.queue_name, request, r.payloads, &resolved);
        request.recipients = resolved.lists;
        request.recipients_null = resolved.nulls;
        request.msgids_in = resolved.msgids;
    }
    if (!bulk_enqueue(request)) return false;
    if (q.stored_once())
        audience::reach(q, r.queue_name, resolved, ids, count, enq_time, q.priority_order ? lowest_priority(r.properties) : 0);
    *result = msgid_array(ids, count, result_context);
    return true;
}

// A multi-consumer queue's messages just inserted reach their recipients (deliveries.hpp).
// messages: what the multi-insert path wrote (nullptr: the statement wrote them).
void deliver_messages(const EnqueueRequest& r, const QueueInfo& q, ArrayType* ids, const deliveries::Message* messages,
                      TimestampTz enq_time) {
    Datum* items;
    int n;
    deconstruct_array(ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &items, nullptr, &n);
    deliveries::deliver(tables_of(q, r.queue_name), items, n, r.properties, messages, enq_time);
}

// After the rows and their index entries, before the commit: the scan floors (scan_floor.hpp),
// the wake-up at commit (wakeup.hpp) and the time manager's due time (time_manager.hpp).
void note_enqueued(const EnqueueRequest& r, const QueueInfo& q, TimestampTz enq_time) {
    scan_floor::lower(q.queue_id, enq_time, nullptr, q.priority_order ? lowest_priority(r.properties) : 0);
    if (q.grouped) scan_floor::lower(q.queue_id, groups::transaction_group(q.relid), groups::floor_key);
    wakeup::note_enqueue(q.queue_id);
    if (TimestampTz due = earliest_due(r.properties, enq_time)) time_manager::note_due(due);
    // A ring is rotated by the time manager, which then keeps looking while it holds rows
    // (time_manager.hpp, 9).
    if (q.segments.count > 0) time_manager::note_due(TimestampTzPlusMilliseconds(enq_time, 1000));
}

}  // namespace

ArrayType* enqueue_array(const EnqueueRequest& r) {
    ArrayType* result = nullptr;
    Problem problem;
    MemoryContext caller_context = CurrentMemoryContext;
    base::call([&] {
        int count = ArrayGetNItems(ARR_NDIM(r.payloads), ARR_DIMS(r.payloads));
        base::spi::connect();
        QueueInfo q;
        problem = check_queue(lookup(r.queue_name, q), q, r.payload_type, true);
        if (problem.kind != QueueProblem::none || count == 0) {
            SPI_finish();
            if (count == 0 && problem.kind == QueueProblem::none)
                result = construct_empty_array(INT8OID);
            return;
        }
        TimestampTz enq_time = GetCurrentTimestamp();
        bool fans_out = q.multiple_consumers && !q.stored_once();
        auto* messages = fans_out ? static_cast<deliveries::Message*>(palloc(sizeof(deliveries::Message) * count))
                                  : nullptr;
        if (enqueue_in_bulk(r, q, enq_time, count, caller_context, &result, messages)) {
            if (fans_out) deliver_messages(r, q, result, messages, enq_time);
            note_enqueued(r, q, enq_time);
            SPI_finish();
            return;
        }

        // The queue table has triggers, rules, RLS or columns of its own: one INSERT statement.
        Oid properties_array_type = r.properties ? ARR_ELEMTYPE(r.properties) : InvalidOid;
        if (OidIsValid(properties_array_type)) properties_array_type = get_array_type(properties_array_type);
        SPIPlanPtr plan =
            statement_plan(q, r.properties ? enqueue_with_properties : enqueue_plain, properties_array_type);
        Datum args[5] = {Int32GetDatum(q.queue_id), TimestampTzGetDatum(enq_time),
                         PointerGetDatum(r.payloads), PointerGetDatum(r.properties), (Datum)0};
        if (q.grouped) args[r.properties ? 4 : 3] = Int64GetDatum(groups::transaction_group(q.relid));
        base::spi::execute(plan, args, nullptr, 0, SPI_OK_INSERT_RETURNING, "enqueue");
        if (SPI_processed != static_cast<uint64>(count))
            elog(ERROR, "aq: enqueue inserted " UINT64_FORMAT " of %d messages", SPI_processed, count);

        Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * count));
        bool isnull;
        for (int i = 0; i < count; i++) ids[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        result = msgid_array(ids, count, caller_context);
        if (fans_out) deliver_messages(r, q, result, nullptr, enq_time);
        if (q.stored_once()) audience::reach_by_statement(q, r.queue_name, r.properties, enq_time, ids[0]);
        note_enqueued(r, q, enq_time);
        SPI_finish();
    });
    if (problem.kind != QueueProblem::none) throw_problem(problem, r.queue_name, "payload");
    return result;
}

}  // namespace aq::queue
