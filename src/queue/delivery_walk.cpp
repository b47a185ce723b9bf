// The delivery walk (deliveries.hpp): bulk_dequeue_deliveries(), a remove-dequeue of one consumer's
// delivery rows, each message read by its primary key (MessageReader).  Declared in
// bulk_dequeue.hpp; index_walk.hpp has the protocol every walk keeps.
// Called inside base::call: plain data only.
extern "C" {
#include "postgres.h"
#include "storage/procarray.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/bufmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"
}

#include <initializer_list>

#include "compat/acl.hpp"
#include "compat/executor.hpp"
#include "base/multi_insert.hpp"
#include "queue/bulk_dequeue.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/deliveries.hpp"
#include "queue/groups.hpp"
#include "queue/retries.hpp"
#include "queue/rules.hpp"
#include "queue/settler.hpp"
#include "queue/scan_floor.hpp"
#include "queue/index_walk.hpp"

namespace aq::queue {

using namespace index_walk;

namespace {

// The messages of a consumer's deliveries, each the row version the scan's snapshot sees, by
// the primary key (msgid).  The deliveries come in the queue's order, which is mostly msgid order:
// the scan is positioned once (msgid >= the one wanted) and moved on entry by entry while the
// next one wanted is close ahead, and positioned again otherwise.
struct MessageReader {
    IndexScanDesc scan;
    TupleTableSlot* slot;
    bool positioned;
    int64 at;  // the msgid of the row in the slot

    bool read_next() {
        if (!index_getnext_slot(scan, ForwardScanDirection, slot)) return positioned = false;
        bool isnull;
        at = DatumGetInt64(slot_getattr(slot, col_msgid + 1, &isnull));
        return true;
    }
    bool fetch(int64 msgid) {
        if (positioned && msgid == at) return true;  // the one a miss stopped at
        if (positioned && msgid > at)
            for (int step = 0; step < 8; step++) {
                if (!read_next()) return false;
                if (at >= msgid) return at == msgid;
            }
        ScanKeyData key;
        ScanKeyInit(&key, 1, BTGreaterEqualStrategyNumber, F_INT8GE, Int64GetDatum(msgid));
        index_rescan(scan, &key, 1, nullptr, 0);
        positioned = true;
        return read_next() && at == msgid;
    }
};

}  // namespace

int bulk_dequeue_deliveries(const BulkDeliveryDequeue& r) {
    using namespace deliveries;
    Relation rel = table_open(r.delivery_relid, RowExclusiveLock);
    Relation messages = table_open(r.message_relid, AccessShareLock);
    static const AttrNumber by_time[] = {dcol_q_id + 1, dcol_consumer_name + 1, dcol_enq_time + 1, dcol_msgid + 1};
    static const AttrNumber by_priority[] = {dcol_q_id + 1, dcol_consumer_name + 1, dcol_priority + 1,
                                             dcol_enq_time + 1, dcol_msgid + 1};
    static const AttrNumber by_msgid[] = {col_msgid + 1};
    Oid index_oid = InvalidOid;
    Oid pkey_oid = InvalidOid;
    // As for a queue table (bulk_dequeue.cpp); the statement's privileges are the tables' own: DELETE and
    // SELECT on the delivery table, SELECT on the queue table (column grants: the statement).
    if (!XactReadOnly && !IsInParallelMode() && deliveries::has_delivery_shape(rel, r.payload_type) &&
        base::multi_insert::refusal(rel) == nullptr && plain_queue_table(messages, r.payload_type) &&
        compat::namespace_aclcheck(RelationGetNamespace(rel), GetUserId(), ACL_USAGE) == ACLCHECK_OK &&
        pg_class_aclcheck(r.delivery_relid, GetUserId(), ACL_DELETE | ACL_SELECT) == ACLCHECK_OK &&
        pg_class_aclcheck(r.message_relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK) {
        index_oid = r.priority_order ? find_index(rel, by_priority, 5) : find_index(rel, by_time, 4);
        pkey_oid = find_index(messages, by_msgid, 1);
    }
    Relation index, pkey;
    if (!open_sorted_indexes(index_oid, pkey_oid, &index, &pkey)) {
        table_close(messages, NoLock);
        table_close(rel, NoLock);  // the locks are kept to the end of the transaction, as usual
        return -1;
    }
    CheckCmdReplicaIdentity(rel, CMD_DELETE);
    TupleDesc properties_desc = open_properties(true);

    // The consumer's floor is read before the snapshot is taken (scan_floor.hpp).
    bool floor_applies = !r.after;
    scan_floor::Reading floor;
    if (floor_applies) floor = scan_floor::read(r.queue_id, r.consumer);

    WalkSnapshot walk = WalkSnapshot::begin();
    const auto [snapshot, now, command] = walk;

    // Index columns: 1 q_id, 2 consumer_name, then (3 enq_time, 4 msgid) or (3 priority, 4 enq_time, 5 msgid).
    ScanKeyData keys[3], row[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1], F_TEXTEQ,
                           CStringGetTextDatum(r.consumer));
    bool from_floor = floor_applies && !r.from_head && floor.floor.enq_time != DT_NOBEGIN;
    int nkeys = 2 + start_key(&keys[2], row, 3, r.priority_order, r.after, from_floor ? &floor.floor : nullptr);
    IndexScanDesc scan = compat::index_begin_scan(rel, index, snapshot, nkeys);
    scan->xs_want_itup = floor_applies;  // the (enq_time, msgid) of entries whose rows are gone
    index_rescan(scan, keys, nkeys, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    TupleTableSlot* message_slot = table_slot_create(messages, nullptr);
    MessageReader reader{compat::index_begin_scan(messages, pkey, snapshot, 1), message_slot, false, 0};
    MemoryContext message_context = AllocSetContextCreate(CurrentMemoryContext, "aq bulk dequeue", ALLOCSET_SMALL_SIZES);

    RowView row_view{slot, dcol_delay, dcol_expiration, retries::counting(), r.delivery_relid};
    bool registered = false;
    FloorWatch watch = FloorWatch::of_order(floor_applies, 3, r.priority_order, now);
    int removed = 0;
    while (removed < r.max_messages) {
        if (!next_visible(scan, slot, watch)) break;
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        if (!rules::holds<rules::Takeable>(row_view, now)) continue;
        // Its message, before the delivery is claimed (one that is not there is left alone).
        // A delivery that carries its message (deliveries.hpp) needs none.
        bool carried = !isnull[dcol_user_data];
        if (!reader.fetch(DatumGetInt64(v[dcol_msgid])) && !carried) continue;

        if (!registered) retries::before_claim();
        registered = true;
        ItemPointerData tid = slot->tts_tid;
        if (!claim_by_delete(rel, slot, command, snapshot)) continue;

        // The properties as the statement builds them: the delivery's, the message's correlation.
        Datum fields[column_count];
        bool nulls[column_count];
        for (int c = 0; c < column_count; c++) nulls[c] = true;
        auto take = [&](int to, int from) {
            fields[to] = v[from];
            nulls[to] = isnull[from];
        };
        take(col_priority, dcol_priority);
        take(col_enq_time, dcol_enq_time);
        take(col_delay, dcol_delay);
        take(col_expiration, dcol_expiration);
        take(col_retry_count, dcol_retry_count);
        take(col_exception_queue, dcol_exception_queue);
        Datum payload;
        if (carried) {
            take(col_corrid, dcol_corrid);
            payload = v[dcol_user_data];
        } else {
            slot_getallattrs(message_slot);
            fields[col_corrid] = message_slot->tts_values[col_corrid];
            nulls[col_corrid] = message_slot->tts_isnull[col_corrid];
            payload = message_slot->tts_values[col_user_data];
        }
        MemoryContext outer = MemoryContextSwitchTo(message_context);
        BulkDequeuedMessage message{v[dcol_msgid], payload,
                                    properties_of(properties_desc, fields, nulls), DatumGetInt32(v[dcol_priority]),
                                    DatumGetTimestampTz(v[dcol_enq_time]), tid, r.delivery_relid};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(message_context);
        removed++;
    }

    row_view.send_hints();
    if (floor_applies) scan_floor::raise(r.queue_id, floor, watch.candidate, r.consumer);

    MemoryContextDelete(message_context);
    index_endscan(reader.scan);
    ExecDropSingleTupleTableSlot(message_slot);
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    index_close(pkey, NoLock);
    index_close(index, NoLock);
    table_close(messages, NoLock);
    table_close(rel, NoLock);
    walk.end();
    ReleaseTupleDesc(properties_desc);
    if (removed > 0) CommandCounterIncrement();
    return removed;
}

}  // namespace aq::queue
