// See retention.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
#include "utils/fmgrprotos.h"
}

#include <cstring>

#include "base/multi_insert.hpp"
#include "base/run_as.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/retention.hpp"
#include "queue/statements.hpp"
#include "queue/time_manager.hpp"

namespace aq::queue::retention {

namespace multi_insert = aq::base::multi_insert;

bool applies(const QueueInfo& q) {
    const Interval& r = q.retention_time;
    // Not with the aq objects of 0.6.0 and before (their views and drop_queue know no copies).
    return !q.multiple_consumers && (r.time > 0 || r.day > 0 || r.month > 0) && ring::available();
}

Removed* begin_removed() {
    return static_cast<Removed*>(palloc0(sizeof(Removed)));
}

void note(Removed* removed, Oid relid, ItemPointer tid) {
    if (removed->count == removed->size) {
        // In the list's own context: a sink runs in the executor's or the walk's, which go first.
        MemoryContext context = GetMemoryChunkContext(removed);
        int size = removed->size == 0 ? 16 : removed->size * 2;
        removed->relids = static_cast<Oid*>(removed->size == 0 ? MemoryContextAlloc(context, sizeof(Oid) * size)
                                                                : repalloc(removed->relids, sizeof(Oid) * size));
        removed->tids = static_cast<ItemPointerData*>(
            removed->size == 0 ? MemoryContextAlloc(context, sizeof(ItemPointerData) * size)
                               : repalloc(removed->tids, sizeof(ItemPointerData) * size));
        removed->size = size;
    }
    removed->relids[removed->count] = relid;
    removed->tids[removed->count] = *tid;
    removed->count++;
}

namespace {

[[noreturn]] void refuse(Relation target, const char* why) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("retention_time cannot be applied to queue table %s", RelationGetRelationName(target)),
                    errdetail("A dequeue keeps a copy of each message it removes, and %s.", why),
                    errhint("Set retention_time to 0 with aq.alter_queue, or make it a plain queue table.")));
}

// Where the copies go: the table, or a ring's current segment (ring.hpp, R1), which the copies
// share; open and locked RowExclusiveLock (kept to the end of the transaction), checked (4).
struct Target {
    Relation table;
    Relation target;
    void close() {
        if (target != table) table_close(target, NoLock);
        table_close(table, NoLock);
    }
};
Target open_target(const QueueInfo& q) {
    Relation table = table_open(q.relid, RowExclusiveLock);
    Relation target = q.segments.count > 0 ? ring::open_current(q.queue_table_id, q.segments) : table;
    if (!plain_queue_table(table, q.payload_type, q.segments.count > 0))
        refuse(table, "it has triggers, rules, row-level security in force or columns of its own, which that copy would bypass");
    if (target != table && !ring::plain_segment(table, target))
        refuse(target, "its current segment differs from the queue table");
    return Target{table, target};
}

}  // namespace

void check_writable(const QueueInfo& q) {
    open_target(q).close();
}

void keep(const QueueInfo& q, const Removed& removed, TimestampTz dequeued) {
    if (removed.count == 0) return;
    TimestampTz ends = DatumGetTimestampTz(DirectFunctionCall2(
        timestamptz_pl_interval, TimestampTzGetDatum(dequeued), IntervalPGetDatum(&q.retention_time)));
    Target t = open_target(q);
    Relation target = t.target;
    TupleDesc desc = RelationGetDescr(target);
    compat::RangeTable rt = queue_table_range(target, ACL_SELECT, nullptr, nullptr);
    multi_insert::MultiInsert* m = multi_insert::begin(target, rt, removed.count);
    Relation source = nullptr;
    TupleTableSlot* from = nullptr;
    for (int i = 0; i < removed.count; i++) {
        CHECK_FOR_INTERRUPTS();
        if (!source || RelationGetRelid(source) != removed.relids[i]) {
            if (from) ExecDropSingleTupleTableSlot(from);
            if (source) table_close(source, NoLock);
            source = table_open(removed.relids[i], RowExclusiveLock);  // the dequeue holds it already
            if (RelationGetDescr(source)->natts != desc->natts)
                refuse(source, "its columns differ from those of its current segment");
            from = table_slot_create(source, nullptr);
        }
        // The version this transaction removed: nothing can prune it while the transaction runs.
        if (!table_tuple_fetch_row_version(source, &removed.tids[i], SnapshotAny, from))
            elog(ERROR, "aq: the removed message at (%u,%u) of %s is gone", ItemPointerGetBlockNumber(&removed.tids[i]),
                 ItemPointerGetOffsetNumber(&removed.tids[i]), RelationGetRelationName(source));
        slot_getallattrs(from);
        TupleTableSlot* slot = multi_insert::next_slot(m);
        MemoryContext outer = MemoryContextSwitchTo(multi_insert::batch_memory(m));
        std::size_t bytes = 64;
        for (int a = 0; a < desc->natts; a++) {
            slot->tts_isnull[a] = from->tts_isnull[a];
            slot->tts_values[a] = from->tts_isnull[a] ? (Datum)0
                                                      : datumCopy(from->tts_values[a], TupleDescAttr(desc, a)->attbyval,
                                                                  TupleDescAttr(desc, a)->attlen);
            if (!from->tts_isnull[a] && TupleDescAttr(desc, a)->attlen == -1)
                bytes += VARSIZE_ANY(DatumGetPointer(from->tts_values[a]));
        }
        slot->tts_values[col_q_id] = Int32GetDatum(-DatumGetInt32(from->tts_values[col_q_id]));
        slot->tts_values[col_delay] = TimestampTzGetDatum(dequeued);
        slot->tts_isnull[col_delay] = false;
        slot->tts_values[col_expiration] = TimestampTzGetDatum(ends);
        slot->tts_isnull[col_expiration] = false;
        MemoryContextSwitchTo(outer);
        // A payload stored out of line is fetched back and stored again in the target's TOAST
        // table (heap_toast_insert_or_update): the copy shares nothing with the removed row.
        multi_insert::add(m, slot, bytes);
    }
    multi_insert::finish(m);
    if (from) ExecDropSingleTupleTableSlot(from);
    if (source) table_close(source, NoLock);
    t.close();
    CommandCounterIncrement();  // later commands of this transaction see the copies
    time_manager::note_due(ends);
}

TimestampTz earliest_end(const QueueInfo& q) {
    return statement_time(q, retained_end, Int32GetDatum(q.queue_table_id), "retention end lookup");
}

int64 purge(const QueueInfo& q, TimestampTz now) {
    if (q.multiple_consumers || !OidIsValid(q.owner) || !OidIsValid(q.relid)) return -1;
    if (pg_class_aclcheck(q.relid, GetUserId(), ACL_DELETE) != ACLCHECK_OK) return -1;
    SPIPlanPtr plan = statement_plan(q, purge_retained, InvalidOid);
    Datum args[1] = {TimestampTzGetDatum(now)};
    int rc = base::execute_plan_as(q.owner, plan, args, nullptr, false, 0);
    if (rc != SPI_OK_DELETE) elog(ERROR, "aq: purging retained messages failed: %s", SPI_result_code_string(rc));
    return int64(SPI_processed);
}

}  // namespace aq::queue::retention
