// See bulk_dequeue.hpp for the protocol.  Called inside base::call: plain data only.
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

namespace aq::queue {

namespace {

// An index of rel on exactly these columns (1-based attnums), no predicate, no expressions.
Oid find_index(Relation rel, const AttrNumber* keys, int nkeys) {
    Oid found = InvalidOid;
    List* indexes = RelationGetIndexList(rel);
    ListCell* cell;
    foreach (cell, indexes) {
        Oid index = lfirst_oid(cell);
        HeapTuple tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(index));
        if (!HeapTupleIsValid(tuple)) continue;
        auto* form = reinterpret_cast<Form_pg_index>(GETSTRUCT(tuple));
        // The planner's rule (plancat.c): an index built while HOT chains were broken, or while
        // old_snapshot_threshold was set, serves only snapshots that cannot see the rows it
        // lacks, i.e. once its pg_index row is older than every snapshot of this transaction.
        bool checked_xmin_ok = !form->indcheckxmin ||
                               TransactionIdPrecedes(HeapTupleHeaderGetXmin(tuple->t_data), TransactionXmin);
        bool usable = form->indisvalid && form->indisready && form->indislive && checked_xmin_ok &&
                      form->indnkeyatts == nkeys && heap_attisnull(tuple, Anum_pg_index_indpred, nullptr) &&
                      heap_attisnull(tuple, Anum_pg_index_indexprs, nullptr);
        for (int i = 0; usable && i < nkeys; i++) usable = form->indkey.values[i] == keys[i];
        ReleaseSysCache(tuple);
        if (usable) {
            found = index;
            break;
        }
    }
    list_free(indexes);
    return found;
}

// aq's order index of the queue table.
Oid find_order_index(Relation rel, bool priority_order) {
    static const AttrNumber by_time[] = {col_q_id + 1, col_enq_time + 1, col_msgid + 1};
    static const AttrNumber by_priority[] = {col_q_id + 1, col_priority + 1, col_enq_time + 1, col_msgid + 1};
    return priority_order ? find_index(rel, by_priority, 4) : find_index(rel, by_time, 3);
}

// The default btree operator family of the key columns' types (int4, timestamptz, int8),
// looked up once per backend: GetDefaultOpClass scans pg_opclass, which cost more than a
// one-message dequeue.
Oid default_btree_family(Oid type) {
    static Oid types[4], families[4];
    static int known = 0;
    for (int i = 0; i < known; i++)
        if (types[i] == type) return families[i];
    Oid opclass = GetDefaultOpClass(type, BTREE_AM_OID);
    Oid family = OidIsValid(opclass) ? get_opclass_family(opclass) : InvalidOid;
    if (known < 4) {
        types[known] = type;
        families[known++] = family;
    }
    return family;
}

// Ascending, with each column's default btree operator class: the index order is the
// queue's sort order.
bool in_sort_order(Relation index) {
    if (index->rd_rel->relam != BTREE_AM_OID) return false;
    for (int i = 0; i < IndexRelationGetNumberOfKeyAttributes(index); i++) {
        if (index->rd_indoption[i] != 0) return false;
        Oid family = default_btree_family(index->rd_opcintype[i]);
        if (!OidIsValid(family) || family != index->rd_opfamily[i]) return false;
    }
    return true;
}

// The privileges of the equivalent DELETE ... RETURNING: USAGE on the schema, DELETE on
// the table and SELECT on the columns it reads.  Without them the statement runs instead
// (and raises the error the user would get from it).
bool caller_may_remove(Relation rel) {
    if (compat::namespace_aclcheck(RelationGetNamespace(rel), GetUserId(), ACL_USAGE) != ACLCHECK_OK) return false;
    compat::RangeTable rt = queue_table_range(rel, ACL_DELETE | ACL_SELECT, nullptr,
                                              column_set({col_msgid, col_q_id, col_enq_time, col_priority, col_delay,
                                                          col_expiration, col_corrid, col_retry_count,
                                                          col_exception_queue, col_user_data}));
    return compat::check_permissions(rt, false);
}

Oid message_properties_type() {
    Oid aq_namespace = get_namespace_oid("aq", false);
    Oid type = GetSysCacheOid2(TYPENAMENSP, Anum_pg_type_oid, CStringGetDatum("message_properties"),
                               ObjectIdGetDatum(aq_namespace));
    if (!OidIsValid(type)) elog(ERROR, "aq: type aq.message_properties is missing");
    return type;
}

// aq.message_properties of a removed message, as the dequeue statement's ROW(...) builds it.
// A message of a transaction group (groups.hpp) also says its group and whether it is the last.
struct GroupMark {
    int64 group;
    bool end_of_group;
};

Datum properties_of(TupleDesc properties_desc, const Datum* v, const bool* isnull, const GroupMark* mark = nullptr) {
    Datum fields[11];  // the last three (recipient_list, transaction_group, end_of_group) are NULL
    bool nulls[11] = {false, true, true, true, false, true, false, false, true, true, true};
    if (mark && properties_desc->natts == 11) {
        fields[9] = CStringGetTextDatum(psprintf(INT64_FORMAT, mark->group));
        fields[10] = BoolGetDatum(mark->end_of_group);
        nulls[9] = nulls[10] = false;
    }
    fields[0] = v[col_priority];
    TimestampTz ready_at = DatumGetTimestampTz(v[col_enq_time]);
    if (!isnull[col_delay]) {
        fields[1] = DirectFunctionCall2(timestamp_mi, v[col_delay], v[col_enq_time]);
        nulls[1] = false;
        ready_at = DatumGetTimestampTz(v[col_delay]);
    }
    if (!isnull[col_expiration]) {
        fields[2] = DirectFunctionCall2(timestamp_mi, v[col_expiration], TimestampTzGetDatum(ready_at));
        nulls[2] = false;
    }
    fields[3] = v[col_corrid];
    nulls[3] = isnull[col_corrid];
    fields[4] = v[col_retry_count];
    fields[5] = v[col_exception_queue];
    nulls[5] = isnull[col_exception_queue];
    fields[6] = v[col_enq_time];
    fields[7] = CStringGetTextDatum("ready");
    return HeapTupleGetDatum(heap_form_tuple(properties_desc, fields, nulls));
}

// Whether the row's xmax is a MultiXactId (read from the slot's buffer tuple: a hint only
// for the decision above, which a MultiXactId must never reach).
bool held_by_several(TupleTableSlot* slot) {
    bool should_free;
    HeapTuple tuple = ExecFetchSlotHeapTuple(slot, false, &should_free);
    return (tuple->t_data->t_infomask & HEAP_XMAX_IS_MULTI) != 0;
}

// Whether the visible row version in the slot is being deleted (or updated) by another
// transaction that is still running.  Reads the header under a share lock on its buffer.
bool deleted_by_running_other(TupleTableSlot* slot) {
    auto* buffered = reinterpret_cast<BufferHeapTupleTableSlot*>(slot);
    HeapTupleHeader header = buffered->base.tuple->t_data;
    if (!TransactionIdIsValid(HeapTupleHeaderGetRawXmax(header))) return false;
    LockBuffer(buffered->buffer, BUFFER_LOCK_SHARE);
    bool running = false;
    if (!(header->t_infomask & HEAP_XMAX_INVALID) && !HEAP_XMAX_IS_LOCKED_ONLY(header->t_infomask)) {
        TransactionId xmax = HeapTupleHeaderGetUpdateXid(header);
        running = TransactionIdIsValid(xmax) && !TransactionIdIsCurrentTransactionId(xmax) &&
                  TransactionIdIsInProgress(xmax);
    }
    LockBuffer(buffered->buffer, BUFFER_LOCK_UNLOCK);
    return running;
}

// Whether the visible row version in the slot holds an unsettled dequeue attempt
// (retries.hpp).  Reads the header under a share lock on its buffer; the common case, no
// xmax at all, needs no lock (a claim being written concurrently is by a transaction that
// is still running, which the delete then meets).
bool holds_unsettled_claim(TupleTableSlot* slot) {
    auto* buffered = reinterpret_cast<BufferHeapTupleTableSlot*>(slot);
    HeapTuple tuple = buffered->base.tuple;
    if (!TransactionIdIsValid(HeapTupleHeaderGetRawXmax(tuple->t_data))) return false;
    LockBuffer(buffered->buffer, BUFFER_LOCK_SHARE);
    bool unsettled = retries::unsettled_claim(tuple->t_data, &tuple->t_self);
    LockBuffer(buffered->buffer, BUFFER_LOCK_UNLOCK);
    return unsettled;
}

// The rules' view of the row a walk holds in its slot (rules.hpp): its delay and expiration
// columns (0-based, of the deformed slot), and settled() read from its header (invariant 3),
// which hints the settler of an unsettled claim (at most 16 per walk).
struct RowView {
    TupleTableSlot* slot;
    int delay_col, expiration_col;
    bool counting;  // retries::counting(): without it no claim is unsettled
    Oid relid;      // for the hint
    int hinted = 0;

    bool delay_null() const { return slot->tts_isnull[delay_col]; }
    rules::Time delay() const { return DatumGetTimestampTz(slot->tts_values[delay_col]); }
    bool expiration_null() const { return slot->tts_isnull[expiration_col]; }
    rules::Time expiration() const { return DatumGetTimestampTz(slot->tts_values[expiration_col]); }
    bool settled() {
        if (!counting || !holds_unsettled_claim(slot)) return true;
        if (hinted++ < 16) settler::hint(relid, &slot->tts_tid);
        return false;
    }
};

// Deletes the visible row version in the slot, SKIP LOCKED's way: one another transaction holds
// is skipped, not waited for; one this transaction locked (mode locked) is deleted.  Only a plain
// xid can be ours: a MultiXactId (several lockers) is skipped, never waited for.
bool claim_by_delete(Relation rel, TupleTableSlot* slot, CommandId command, Snapshot snapshot) {
    TM_FailureData failure;
    ItemPointerData row = slot->tts_tid;
    TM_Result result = table_tuple_delete(rel, &row, command, snapshot, InvalidSnapshot, false, &failure, false);
    if (result == TM_BeingModified && !held_by_several(slot) && TransactionIdIsCurrentTransactionId(failure.xmax))
        result = table_tuple_delete(rel, &row, command, snapshot, InvalidSnapshot, true, &failure, false);
    return result == TM_Ok;
}

// Opens the two indexes of a bulk path (InvalidOid: not found) if both are there and in their
// table's sort order; otherwise closes what it opened and returns false.
bool open_sorted_indexes(Oid first_oid, Oid second_oid, Relation* first, Relation* second) {
    *first = OidIsValid(first_oid) ? index_open(first_oid, AccessShareLock) : nullptr;
    *second = OidIsValid(second_oid) ? index_open(second_oid, AccessShareLock) : nullptr;
    if (*first && *second && in_sort_order(*first) && in_sort_order(*second)) return true;
    if (*first) index_close(*first, AccessShareLock);
    if (*second) index_close(*second, AccessShareLock);
    return false;
}

// Is this message after the navigation position, in the queue's sort order (rules.hpp, 6)?
bool after_position(const BulkDequeuePosition& p, bool priority_order, const Datum* v) {
    return rules::after(rules::Key{DatumGetInt32(v[col_priority]), DatumGetTimestampTz(v[col_enq_time]),
                                   DatumGetInt64(v[col_msgid])},
                        rules::Key{p.priority, p.enq_time, p.msgid}, priority_order);
}

// (columns) > or >= (values) as one btree row comparison: the scan starts right there,
// not at the first entry of the leading column's value.
void row_comparison(ScanKeyData* header, ScanKeyData* members, StrategyNumber strategy, int n,
                    const AttrNumber* columns, const RegProcedure* comparisons, const Datum* values) {
    for (int i = 0; i < n; i++)
        ScanKeyEntryInitialize(&members[i], SK_ROW_MEMBER | (i == n - 1 ? SK_ROW_END : 0), columns[i], strategy,
                               InvalidOid, InvalidOid, comparisons[i], values[i]);
    FmgrInfo unused;
    memset(&unused, 0, sizeof unused);
    ScanKeyEntryInitializeWithInfo(header, SK_ROW_HEADER, columns[0], strategy, InvalidOid, InvalidOid, &unused,
                                   PointerGetDatum(members));
}

// Where a remove scan's floor may rise to (scan_floor.hpp): the position of the first index entry
// whose row is visible or not surely dead, or `candidate` as given if the scan meets none.
// index_fetch_heap sets kill_prior_tuple when every version an entry leads to is dead to all
// transactions: only such entries may be passed by the floor.
struct FloorWatch {
    bool applies;
    AttrNumber time_column, id_column;  // of the index: enq_time, msgid
    scan_floor::Position candidate;
    bool met = false;
    scan_floor::Position entry{0, 0};

    // Reads the entry's position (the scan has xs_want_itup when the floor applies).
    void before_fetch(IndexScanDesc scan) {
        if (!applies || met) return;
        bool isnull;
        entry.enq_time = DatumGetTimestampTz(index_getattr(scan->xs_itup, time_column, scan->xs_itupdesc, &isnull));
        entry.msgid = DatumGetInt64(index_getattr(scan->xs_itup, id_column, scan->xs_itupdesc, &isnull));
    }
    void after_fetch(IndexScanDesc scan, bool visible) {
        if (!applies || met || (!visible && scan->kill_prior_tuple)) return;
        met = true;
        candidate = entry;
    }
};

}  // namespace

int bulk_dequeue(const BulkDequeue& r) {
    Relation rel = table_open(r.relid, RowExclusiveLock);
    Oid index_oid = InvalidOid;
    // A read-only transaction (or a standby) gets the statement's error (25006) from the statement.
    if (!XactReadOnly && !IsInParallelMode() && plain_queue_table(rel, r.payload_type) && !has_group_column(rel) &&
        caller_may_remove(rel))
        index_oid = find_order_index(rel, r.priority_order);
    Relation index = OidIsValid(index_oid) ? index_open(index_oid, AccessShareLock) : nullptr;
    if (!index || !in_sort_order(index)) {
        if (index) index_close(index, AccessShareLock);
        table_close(rel, NoLock);  // the lock is kept to the end of the transaction, as usual
        return -1;
    }
    CheckCmdReplicaIdentity(rel, CMD_DELETE);  // a publication of deletes needs a replica identity
    Oid properties_type = message_properties_type();
    TupleDesc properties_desc = lookup_rowtype_tupdesc(properties_type, -1);  // pinned, not copied
    // 8 fields up to 0.5.0, 11 since (properties_of fills only those the type has).
    if (properties_desc->natts != 8 && properties_desc->natts != 11)
        elog(ERROR, "aq: type aq.message_properties has %d fields, not those of aq 0.4.0 or 0.6.0", properties_desc->natts);

    // The floor is read before the snapshot is taken (scan_floor.hpp).
    bool floor_applies = !r.priority_order && !r.after;
    scan_floor::Reading floor;
    if (floor_applies) floor = scan_floor::read(r.queue_id);

    CommandCounterIncrement();  // as a new statement: this transaction's earlier changes are seen
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    PushActiveSnapshot(snapshot);
    TimestampTz now = GetCurrentTimestamp();
    CommandId command = GetCurrentCommandId(true);

    // Index columns: 1 q_id, then (2 enq_time, 3 msgid) or (2 priority, 3 enq_time, 4 msgid).
    ScanKeyData keys[2], row[3];
    int nkeys = 1;
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    if (r.after && r.priority_order) {
        static const AttrNumber columns[] = {2, 3, 4};
        static const RegProcedure comparisons[] = {F_BTINT4CMP, F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        Datum values[] = {Int32GetDatum(r.after->priority), TimestampTzGetDatum(r.after->enq_time),
                          Int64GetDatum(r.after->msgid)};
        row_comparison(&keys[nkeys++], row, BTGreaterStrategyNumber, 3, columns, comparisons, values);
    } else if (r.after || (floor_applies && !r.from_head && floor.floor.enq_time != DT_NOBEGIN)) {
        static const AttrNumber columns[] = {2, 3};
        static const RegProcedure comparisons[] = {F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        scan_floor::Position from = r.after ? scan_floor::Position{r.after->enq_time, r.after->msgid} : floor.floor;
        Datum values[] = {TimestampTzGetDatum(from.enq_time), Int64GetDatum(from.msgid)};
        row_comparison(&keys[nkeys++], row, r.after ? BTGreaterStrategyNumber : BTGreaterEqualStrategyNumber, 2,
                       columns, comparisons, values);
    }
    IndexScanDesc scan = compat::index_begin_scan(rel, index, snapshot, nkeys);
    scan->xs_want_itup = floor_applies;  // the (enq_time, msgid) of entries whose rows are gone
    index_rescan(scan, keys, nkeys, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    MemoryContext message_context = AllocSetContextCreate(CurrentMemoryContext, "aq bulk dequeue", ALLOCSET_SMALL_SIZES);

    RowView row_view{slot, col_delay, col_expiration, retries::counting(), r.relid};
    bool registered = false;
    // If the scan runs out without meeting a message: the floor may rise to the scan's start.
    FloorWatch watch{floor_applies, 2, 3, scan_floor::Position{now, PG_INT64_MIN}};
    int removed = 0;
    while (removed < r.max_messages) {
        CHECK_FOR_INTERRUPTS();
        if (!index_getnext_tid(scan, ForwardScanDirection)) break;
        watch.before_fetch(scan);
        bool visible = index_fetch_heap(scan, slot);
        watch.after_fetch(scan, visible);
        if (!visible) continue;
        slot_getallattrs(slot);
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        if (r.after && !after_position(*r.after, r.priority_order, v)) continue;
        if (!rules::holds<rules::Takeable>(row_view, now)) continue;

        if (!registered) retries::before_claim();  // before the first claim (retries.hpp)
        registered = true;
        ItemPointerData row = slot->tts_tid;
        if (!claim_by_delete(rel, slot, command, snapshot)) continue;

        MemoryContext outer = MemoryContextSwitchTo(message_context);
        BulkDequeuedMessage message{v[col_msgid], v[col_user_data], properties_of(properties_desc, v, isnull),
                                    DatumGetInt32(v[col_priority]), DatumGetTimestampTz(v[col_enq_time]), row};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(message_context);
        removed++;
    }
    if (floor_applies) scan_floor::raise(r.queue_id, floor, watch.candidate);

    MemoryContextDelete(message_context);
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    index_close(index, NoLock);
    table_close(rel, NoLock);
    PopActiveSnapshot();
    UnregisterSnapshot(snapshot);
    ReleaseTupleDesc(properties_desc);
    if (removed > 0) CommandCounterIncrement();  // later commands of this transaction see the removals
    return removed;
}

// ---------------------------------------------------------------- a transaction group

int bulk_dequeue_group(const BulkDequeue& r, int64 group) {
    Relation rel = table_open(r.relid, RowExclusiveLock);
    static const AttrNumber by_group[] = {col_q_id + 1, column_count + 1, col_enq_time + 1, col_msgid + 1};
    Oid index_oid = InvalidOid;
    if (!XactReadOnly && !IsInParallelMode() && plain_queue_table(rel, r.payload_type) && has_group_column(rel) &&
        caller_may_remove(rel))
        index_oid = find_index(rel, by_group, 4);
    Relation index = OidIsValid(index_oid) ? index_open(index_oid, AccessShareLock) : nullptr;
    if (!index || !in_sort_order(index)) {
        if (index) index_close(index, AccessShareLock);
        table_close(rel, NoLock);  // the lock is kept to the end of the transaction, as usual
        return -1;
    }
    CheckCmdReplicaIdentity(rel, CMD_DELETE);
    Oid properties_type = message_properties_type();
    TupleDesc properties_desc = lookup_rowtype_tupdesc(properties_type, -1);
    if (properties_desc->natts != 11)
        elog(ERROR, "aq: type aq.message_properties has %d fields, not those of aq 0.6.0", properties_desc->natts);

    CommandCounterIncrement();  // as a new statement: this transaction's earlier changes are seen
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    PushActiveSnapshot(snapshot);
    TimestampTz now = GetCurrentTimestamp();
    CommandId command = GetCurrentCommandId(true);

    // Index columns: 1 q_id, 2 transaction_group, 3 enq_time, 4 msgid.
    ScanKeyData keys[3], row[2];
    int nkeys = 2;
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(group));
    if (r.after) {
        static const AttrNumber columns[] = {3, 4};
        static const RegProcedure comparisons[] = {F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        Datum values[] = {TimestampTzGetDatum(r.after->enq_time), Int64GetDatum(r.after->msgid)};
        row_comparison(&keys[nkeys++], row, BTGreaterStrategyNumber, 2, columns, comparisons, values);
    }
    IndexScanDesc scan = compat::index_begin_scan(rel, index, snapshot, nkeys);
    index_rescan(scan, keys, nkeys, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    MemoryContext held_context = AllocSetContextCreate(CurrentMemoryContext, "aq group dequeue", ALLOCSET_SMALL_SIZES);

    // A taken message is handed on once the next row of the group is seen (its end_of_group is
    // then false) or the group has no row left after it (true); its values are copied meanwhile.
    struct Held {
        bool present;
        Datum values[column_count];
        bool isnull[column_count];
        ItemPointerData tid;
    } held{};
    TupleDesc desc = RelationGetDescr(rel);
    auto hand_on = [&](bool end_of_group) {
        GroupMark mark{group, end_of_group};
        MemoryContext outer = MemoryContextSwitchTo(held_context);
        BulkDequeuedMessage message{held.values[col_msgid], held.values[col_user_data],
                                    properties_of(properties_desc, held.values, held.isnull, &mark),
                                    DatumGetInt32(held.values[col_priority]),
                                    DatumGetTimestampTz(held.values[col_enq_time]), held.tid};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(held_context);
        held.present = false;
    };

    RowView row_view{slot, col_delay, col_expiration, retries::counting(), r.relid};
    bool registered = false;
    int removed = 0;
    bool later = false;  // a row of the group after the held message
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (!index_getnext_slot(scan, ForwardScanDirection, slot)) break;
        if (held.present) later = true;
        if (removed >= r.max_messages) break;  // the array is full: this row only says the group goes on
        slot_getallattrs(slot);
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        // In order (rules.hpp, the head rule): an expired message is passed; one not takeable yet
        // (a retry delay after a rollback, a dead consumer's claim not counted yet) ends the take,
        // and nothing after it is taken before it.
        rules::InGroup in_group = rules::in_group(row_view, now);
        if (in_group == rules::InGroup::pass) continue;
        if (in_group == rules::InGroup::stop) {
            later = true;
            break;
        }
        if (!registered) retries::before_claim();  // before the first claim (retries.hpp)
        registered = true;
        ItemPointerData tid = slot->tts_tid;
        if (!claim_by_delete(rel, slot, command, snapshot)) continue;
        if (held.present) hand_on(false);
        MemoryContext outer = MemoryContextSwitchTo(held_context);
        for (int c = 0; c < column_count; c++) {
            Form_pg_attribute att = TupleDescAttr(desc, c);
            held.isnull[c] = isnull[c];
            held.values[c] = isnull[c] ? (Datum)0 : datumCopy(v[c], att->attbyval, att->attlen);
        }
        MemoryContextSwitchTo(outer);
        held.tid = tid;
        held.present = true;
        later = false;
        removed++;
    }
    if (held.present) hand_on(!later);

    MemoryContextDelete(held_context);
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    index_close(index, NoLock);
    table_close(rel, NoLock);
    PopActiveSnapshot();
    UnregisterSnapshot(snapshot);
    ReleaseTupleDesc(properties_desc);
    if (removed > 0) CommandCounterIncrement();  // later commands of this transaction see the removals
    return removed;
}

int next_group(Oid relid, Oid payload_type, int32 queue_id, int64 after, bool from_head, int64* group) {
    Relation rel = table_open(relid, AccessShareLock);
    static const AttrNumber by_group[] = {col_q_id + 1, column_count + 1, col_enq_time + 1, col_msgid + 1};
    Oid index_oid = plain_queue_table(rel, payload_type) && has_group_column(rel) ? find_index(rel, by_group, 4)
                                                                                  : InvalidOid;
    Relation index = OidIsValid(index_oid) ? index_open(index_oid, AccessShareLock) : nullptr;
    if (!index || !in_sort_order(index) || pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK) {
        if (index) index_close(index, AccessShareLock);
        table_close(rel, NoLock);
        return -1;
    }
    // From the head: from the groups' floor (groups.hpp), read before the snapshot.
    scan_floor::Reading floor;
    bool floor_applies = after == PG_INT64_MIN;
    if (floor_applies) floor = scan_floor::read(queue_id, groups::floor_key);
    bool use_floor = floor_applies && !from_head;
    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    TimestampTz now = GetCurrentTimestamp();
    ScanKeyData keys[2];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(queue_id));
    int64 from = after;
    bool inclusive = false;
    if (use_floor && floor.floor.enq_time != DT_NOBEGIN) from = floor.floor.enq_time, inclusive = true;
    ScanKeyInit(&keys[1], 2, inclusive ? BTGreaterEqualStrategyNumber : BTGreaterStrategyNumber,
                inclusive ? F_INT8GE : F_INT8GT, Int64GetDatum(from));
    IndexScanDesc scan = compat::index_begin_scan(rel, index, snapshot, 2);
    scan->xs_want_itup = floor_applies;
    index_rescan(scan, keys, 2, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    // The groups' floor is a position whose "enq_time" is a group id (a group's messages all
    // have it): it may pass the groups whose every entry is surely dead.
    FloorWatch watch{floor_applies, 2, 2, scan_floor::Position{PG_INT64_MAX, PG_INT64_MIN}};
    bool found = false;
    bool blocked = false;  // blocked_group's first message cannot be taken now
    int64 blocked_group = 0;
    RowView row_view{slot, col_delay, col_expiration, retries::counting(), relid};
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (!index_getnext_tid(scan, ForwardScanDirection)) break;
        watch.before_fetch(scan);
        bool visible = index_fetch_heap(scan, slot);
        watch.after_fetch(scan, visible);
        if (!visible) continue;
        slot_getallattrs(slot);
        int64 row_group = DatumGetInt64(slot->tts_values[column_count]);
        if (blocked && row_group == blocked_group) continue;
        // The group's first message that is not passed decides (rules.hpp, the head rule).
        rules::InGroup in_group = rules::in_group(row_view, now);
        if (in_group == rules::InGroup::pass) continue;
        if (in_group == rules::InGroup::stop) {
            blocked = true;
            blocked_group = row_group;
            continue;
        }
        *group = row_group;
        found = true;
        break;
    }
    if (floor_applies) {
        scan_floor::Position candidate = watch.candidate;
        candidate.msgid = PG_INT64_MIN;  // the whole group (the "msgid" column read is the group too)
        scan_floor::raise(queue_id, floor, candidate, groups::floor_key);
    }
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
    index_close(index, NoLock);
    table_close(rel, NoLock);
    UnregisterSnapshot(snapshot);
    return found ? 1 : 0;
}

// ---------------------------------------------------------------- delivery rows

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
    // As for a queue table (above); the statement's privileges are the tables' own: DELETE and
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
    Oid properties_type = message_properties_type();
    TupleDesc properties_desc = lookup_rowtype_tupdesc(properties_type, -1);
    if (properties_desc->natts != 11)
        elog(ERROR, "aq: type aq.message_properties has %d fields, not those of aq 0.6.0", properties_desc->natts);

    // The consumer's floor is read before the snapshot is taken (scan_floor.hpp).
    bool floor_applies = !r.priority_order && !r.after;
    scan_floor::Reading floor;
    if (floor_applies) floor = scan_floor::read(r.queue_id, r.consumer);

    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    PushActiveSnapshot(snapshot);
    TimestampTz now = GetCurrentTimestamp();
    CommandId command = GetCurrentCommandId(true);

    // Index columns: 1 q_id, 2 consumer_name, then (3 enq_time, 4 msgid) or (3 priority, 4 enq_time, 5 msgid).
    ScanKeyData keys[3], row[3];
    int nkeys = 2;
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    ScanKeyEntryInitialize(&keys[1], 0, 2, BTEqualStrategyNumber, InvalidOid, index->rd_indcollation[1], F_TEXTEQ,
                           CStringGetTextDatum(r.consumer));
    if (r.after && r.priority_order) {
        static const AttrNumber columns[] = {3, 4, 5};
        static const RegProcedure comparisons[] = {F_BTINT4CMP, F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        Datum values[] = {Int32GetDatum(r.after->priority), TimestampTzGetDatum(r.after->enq_time),
                          Int64GetDatum(r.after->msgid)};
        row_comparison(&keys[nkeys++], row, BTGreaterStrategyNumber, 3, columns, comparisons, values);
    } else if (r.after || (floor_applies && !r.from_head && floor.floor.enq_time != DT_NOBEGIN)) {
        static const AttrNumber columns[] = {3, 4};
        static const RegProcedure comparisons[] = {F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        scan_floor::Position from = r.after ? scan_floor::Position{r.after->enq_time, r.after->msgid} : floor.floor;
        Datum values[] = {TimestampTzGetDatum(from.enq_time), Int64GetDatum(from.msgid)};
        row_comparison(&keys[nkeys++], row, r.after ? BTGreaterStrategyNumber : BTGreaterEqualStrategyNumber, 2,
                       columns, comparisons, values);
    }
    IndexScanDesc scan = compat::index_begin_scan(rel, index, snapshot, nkeys);
    scan->xs_want_itup = floor_applies;  // the (enq_time, msgid) of entries whose rows are gone
    index_rescan(scan, keys, nkeys, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(rel, nullptr);
    TupleTableSlot* message_slot = table_slot_create(messages, nullptr);
    MessageReader reader{compat::index_begin_scan(messages, pkey, snapshot, 1), message_slot, false, 0};
    MemoryContext message_context = AllocSetContextCreate(CurrentMemoryContext, "aq bulk dequeue", ALLOCSET_SMALL_SIZES);

    RowView row_view{slot, dcol_delay, dcol_expiration, retries::counting(), r.delivery_relid};
    bool registered = false;
    FloorWatch watch{floor_applies, 3, 4, scan_floor::Position{now, PG_INT64_MIN}};
    int removed = 0;
    while (removed < r.max_messages) {
        CHECK_FOR_INTERRUPTS();
        if (!index_getnext_tid(scan, ForwardScanDirection)) break;
        watch.before_fetch(scan);
        bool visible = index_fetch_heap(scan, slot);
        watch.after_fetch(scan, visible);
        if (!visible) continue;
        slot_getallattrs(slot);
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
                                    DatumGetTimestampTz(v[dcol_enq_time]), tid};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(message_context);
        removed++;
    }

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
    PopActiveSnapshot();
    UnregisterSnapshot(snapshot);
    ReleaseTupleDesc(properties_desc);
    if (removed > 0) CommandCounterIncrement();
    return removed;
}

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
        order_oid = find_order_index(messages, r.priority_order);
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
    if (!r.priority_order) floor = scan_floor::read(r.queue_id);
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
        // last sweep stopped, if later; in priority order, of the priority, from the head).
        TimestampTz from_time = DT_NOBEGIN;
        int64 from_id = PG_INT64_MIN;
        if (!r.priority_order) {
            scan_floor::Reading consumer_floor = scan_floor::read(r.queue_id, consumer);
            from_time = consumer_floor.floor.enq_time;
            from_id = consumer_floor.floor.msgid;
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
    bool floor_applies = !r.resumed && !r.priority_order;
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
        if (!met_blocker && (visible || !scan->kill_prior_tuple)) {
            met_blocker = true;
            candidate = scan_floor::Position{at_time, at_id};
        }
        if (!visible || !claim_by_delete(messages, message_slot, command, snapshot)) continue;
        r.last_enq_time = at_time;
        r.last_msgid = at_id;
        removed++;
    }
    if (floor_applies) scan_floor::raise(r.queue_id, floor, candidate);
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
