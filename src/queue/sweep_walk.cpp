// The sweep walk (deliveries.hpp, 3. Removal): bulk_sweep() removes a multi-consumer queue's
// messages before its first delivery row, on the indexes.  Declared in bulk_dequeue.hpp;
// index_walk.hpp has the protocol every walk keeps.  Called inside base::call: plain data only.
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

int bulk_sweep(BulkSweep& r) {
    using namespace deliveries;
    r.nfirsts = 0;
    r.firsts_overflow = false;
    r.found_first = false;
    r.first_contended = false;
    Relation rel = table_open(r.delivery_relid, AccessShareLock);
    Relation messages = table_open(r.message_relid, RowExclusiveLock);
    static const AttrNumber by_time[] = {dcol_q_id + 1, dcol_consumer_name + 1, dcol_enq_time + 1, dcol_msgid + 1};
    static const AttrNumber by_priority[] = {dcol_q_id + 1, dcol_consumer_name + 1, dcol_priority + 1,
                                             dcol_enq_time + 1, dcol_msgid + 1};
    Oid index_oid = InvalidOid;
    Oid order_oid = InvalidOid;
    if (!XactReadOnly && !IsInParallelMode() && has_delivery_shape(rel, r.payload_type) &&
        plain_queue_table(messages, r.payload_type) && caller_may_remove(messages) &&
        compat::namespace_aclcheck(RelationGetNamespace(rel), GetUserId(), ACL_USAGE) == ACLCHECK_OK &&
        pg_class_aclcheck(r.delivery_relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK) {
        index_oid = r.priority_order ? find_index(rel, by_priority, 5) : find_index(rel, by_time, 4);
        order_oid = find_order_index(messages, order_of(r.priority_order));
    }
    Relation index, order;
    if (!open_sorted_indexes(index_oid, order_oid, &index, &order)) {
        table_close(messages, NoLock);
        table_close(rel, NoLock);  // the locks are kept to the end of the transaction, as usual
        return -1;
    }
    CheckCmdReplicaIdentity(messages, CMD_DELETE);

    // Before the snapshot (scan_floor.hpp); the floors are of the enq_time order only.
    scan_floor::Reading floor;
    // In priority order, the floor of the priority's messages (scan_floor::PriorityKey).
    scan_floor::PriorityKey priority_key(r.priority);
    const char* floor_key = r.priority_order ? priority_key.text : nullptr;
    floor = scan_floor::read(r.queue_id, floor_key);
    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    PushActiveSnapshot(snapshot);
    CommandId command = GetCurrentCommandId(true);
    MemoryContext work = AllocSetContextCreate(CurrentMemoryContext, "aq sweep", ALLOCSET_SMALL_SIZES);
    MemoryContext outer = MemoryContextSwitchTo(work);
    // Index columns: (q_id, consumer_name, [priority,] enq_time, msgid) and (q_id, [priority,]
    // enq_time, msgid); in priority order, of one priority.
    int skip = r.priority_order ? 1 : 0;
    const AttrNumber position_columns[] = {static_cast<AttrNumber>(3 + skip), static_cast<AttrNumber>(4 + skip)};
    const AttrNumber message_columns[] = {static_cast<AttrNumber>(2 + skip), static_cast<AttrNumber>(3 + skip)};
    static const RegProcedure comparisons[] = {F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
    auto later = [](TimestampTz a_time, int64 a_id, TimestampTz b_time, int64 b_id) {
        return a_time != b_time ? a_time > b_time : a_id > b_id;
    };

    // The consumers, by their names in the index: each next one is the key of the first entry
    // after the last name, whatever its row (the scan does not skip killed entries either).
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    IndexScanDesc names = compat::index_begin_scan(rel, index, snapshot, 2);
    names->xs_want_itup = true;
    names->ignore_killed_tuples = false;
    IndexScanDesc firsts = compat::index_begin_scan(rel, index, snapshot, 3 + skip);
    text* last_name = cstring_to_text("");  // every consumer name has 1 to 63 bytes
    TimestampTz first_time = DT_NOEND;
    int64 first_id = PG_INT64_MAX;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        ScanKeyData keys[2];
        ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
        // (A scan is begun for a number of keys, and every rescan must give that many.)
        ScanKeyEntryInitialize(&keys[1], 0, 2, BTGreaterStrategyNumber, InvalidOid, index->rd_indcollation[1],
                               F_TEXT_GT, PointerGetDatum(last_name));
        index_rescan(names, keys, 2, nullptr, 0);
        if (!index_getnext_tid(names, ForwardScanDirection)) break;
        bool isnull;
        last_name = DatumGetTextPCopy(index_getattr(names->xs_itup, 2, names->xs_itupdesc, &isnull));
        char* consumer = text_to_cstring(last_name);

        // Its first delivery this snapshot sees, from its floor (or where this transaction's
        // last sweep stopped, if later).  In priority order the floor spans the priorities
        // (scan_floor.hpp): past this priority, none of the consumer's deliveries of it is left;
        // below it, from the head of the priority.
        TimestampTz from_time = DT_NOBEGIN;
        int64 from_id = PG_INT64_MIN;
        scan_floor::Reading consumer_floor = scan_floor::read(r.queue_id, consumer);
        if (consumer_floor.floor.enq_time != DT_NOBEGIN &&
            (!r.priority_order || consumer_floor.floor.priority == r.priority)) {
            from_time = consumer_floor.floor.enq_time;
            from_id = consumer_floor.floor.msgid;
        } else if (consumer_floor.floor.enq_time != DT_NOBEGIN && consumer_floor.floor.priority > r.priority) {
            continue;
        }
        if (r.resumed && later(r.from_enq_time, r.from_msgid, from_time, from_id))
            from_time = r.from_enq_time, from_id = r.from_msgid;
        ScanKeyData first_keys[4], row[2];
        ScanKeyInit(&first_keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
        ScanKeyEntryInitialize(&first_keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1],
                               F_TEXTEQ, PointerGetDatum(last_name));
        if (r.priority_order) ScanKeyInit(&first_keys[2], 3, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.priority));
        Datum values[] = {TimestampTzGetDatum(from_time), Int64GetDatum(from_id)};
        row_comparison(&first_keys[2 + skip], row, BTGreaterEqualStrategyNumber, 2, position_columns, comparisons,
                       values);
        index_rescan(firsts, first_keys, 3 + skip, nullptr, 0);
        if (!index_getnext_slot(firsts, ForwardScanDirection, slot)) continue;
        TimestampTz at_time = DatumGetTimestampTz(slot_getattr(slot, dcol_enq_time + 1, &isnull));
        int64 at_id = DatumGetInt64(slot_getattr(slot, dcol_msgid + 1, &isnull));
        // Contended: every consumer's delivery at the first position is being taken by another
        // running transaction (two recipients taking a message's last deliveries at once).
        bool deleting = deleted_by_running_other(slot);
        if (later(first_time, first_id, at_time, at_id)) {
            first_time = at_time, first_id = at_id;
            r.first_contended = deleting;
        } else if (first_time == at_time && first_id == at_id) {
            r.first_contended = r.first_contended && deleting;
        }
        if (r.nfirsts < r.max_firsts) {
            SweepFirst& f = r.firsts[r.nfirsts++];
            strlcpy(f.name, consumer, sizeof f.name);
            f.enq_time = at_time;
            f.msgid = at_id;
        } else {
            r.firsts_overflow = true;
        }
    }
    index_endscan(firsts);
    index_endscan(names);
    ExecDropSingleTupleTableSlot(slot);
    r.found_first = first_time != DT_NOEND || first_id != PG_INT64_MAX;
    r.first_enq_time = first_time;
    r.first_msgid = first_id;

    // The messages before it, from the queue's floor (or where the last sweep stopped).
    ScanKeyData keys[3], row[2];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    int nkeys = 1;
    if (r.priority_order) ScanKeyInit(&keys[nkeys++], 2, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.priority));
    bool floor_applies = !r.resumed;
    if (r.resumed || floor.floor.enq_time != DT_NOBEGIN) {
        Datum values[] = {TimestampTzGetDatum(r.resumed ? r.from_enq_time : floor.floor.enq_time),
                          Int64GetDatum(r.resumed ? r.from_msgid : floor.floor.msgid)};
        row_comparison(&keys[nkeys++], row, BTGreaterEqualStrategyNumber, 2, message_columns, comparisons, values);
    }
    TupleTableSlot* message_slot = table_slot_create(messages, nullptr);
    IndexScanDesc scan = compat::index_begin_scan(messages, order, snapshot, nkeys);
    scan->xs_want_itup = true;
    index_rescan(scan, keys, nkeys, nullptr, 0);
    bool met_blocker = false;
    // If no entry stops it: the first delivery's message stays (and none is later than now).
    TimestampTz started = GetCurrentTimestamp();
    scan_floor::Position candidate = later(first_time, first_id, started, PG_INT64_MIN)
                                         ? scan_floor::Position{started, PG_INT64_MIN}
                                         : scan_floor::Position{first_time, first_id};
    int removed = 0;
    while (removed < r.limit) {
        CHECK_FOR_INTERRUPTS();
        if (!index_getnext_tid(scan, ForwardScanDirection)) break;
        bool isnull;
        TimestampTz at_time =
            DatumGetTimestampTz(index_getattr(scan->xs_itup, message_columns[0], scan->xs_itupdesc, &isnull));
        int64 at_id = DatumGetInt64(index_getattr(scan->xs_itup, message_columns[1], scan->xs_itupdesc, &isnull));
        if (!later(first_time, first_id, at_time, at_id)) break;  // at the first delivery
        bool visible = index_fetch_heap(scan, message_slot);
        if (!met_blocker && (visible || !entry_gone(scan))) {
            met_blocker = true;
            candidate = scan_floor::Position{at_time, at_id};
        }
        if (!visible || !claim_by_delete(messages, message_slot, command, snapshot, false)) continue;
        r.last_enq_time = at_time;
        r.last_msgid = at_id;
        removed++;
    }
    if (floor_applies) scan_floor::raise(r.queue_id, floor, candidate, floor_key);
    index_endscan(scan);
    ExecDropSingleTupleTableSlot(message_slot);

    MemoryContextSwitchTo(outer);
    MemoryContextDelete(work);
    index_close(order, NoLock);
    index_close(index, NoLock);
    table_close(messages, NoLock);
    table_close(rel, NoLock);
    PopActiveSnapshot();
    UnregisterSnapshot(snapshot);
    if (removed > 0) CommandCounterIncrement();  // later commands of this transaction see the removals
    return removed;
}

}  // namespace aq::queue
