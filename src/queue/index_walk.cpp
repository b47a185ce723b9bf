// The shared mechanism of the C index walks: finding and checking the index, the caller's
// privileges, the properties of a removed message, the row header reads, the SKIP LOCKED claim
// and the scan keys.  See index_walk.hpp for the protocol.  Called inside base::call: plain data only.
extern "C" {
#include "postgres.h"
#include "storage/procarray.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/transam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_collation.h"
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

namespace aq::queue::index_walk {

// An index of rel on exactly these columns (1-based attnums), no expressions, no predicate; or,
// with `accepts`, any predicate or collation it accepts (it is given the index, opened).
Oid find_index(Relation rel, const AttrNumber* keys, int nkeys, bool (*accepts)(Relation index)) {
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
                      form->indnkeyatts == nkeys && (accepts || heap_attisnull(tuple, Anum_pg_index_indpred, nullptr)) &&
                      heap_attisnull(tuple, Anum_pg_index_indexprs, nullptr);
        for (int i = 0; usable && i < nkeys; i++) usable = form->indkey.values[i] == keys[i];
        ReleaseSysCache(tuple);
        if (usable && accepts) {
            Relation opened = index_open(index, AccessShareLock);
            usable = accepts(opened);
            index_close(opened, AccessShareLock);
        }
        if (usable) {
            found = index;
            break;
        }
    }
    list_free(indexes);
    return found;
}

namespace {

// The correlation index: on (q_id, corrid, enq_time, msgid), corrid in the C collation (its equality
// is the bytes', as the LIKE of the statements), with no predicate but corrid IS NOT NULL, which
// every message of a correlation meets.
bool correlation_index(Relation index) {
    List* predicate = RelationGetIndexPredicate(index);
    bool not_null = predicate == NIL;
    if (list_length(predicate) == 1 && IsA(linitial(predicate), NullTest)) {
        auto* test = static_cast<NullTest*>(linitial(predicate));
        not_null = test->nulltesttype == IS_NOT_NULL && IsA(test->arg, Var) &&
                   reinterpret_cast<Var*>(test->arg)->varattno == col_corrid + 1;
    }
    return not_null && index->rd_indcollation[1] == C_COLLATION_OID;
}

}  // namespace

// aq's order index of the queue table.
Oid find_order_index(Relation rel, Order order) {
    static const AttrNumber by_time[] = {col_q_id + 1, col_enq_time + 1, col_msgid + 1};
    static const AttrNumber by_priority[] = {col_q_id + 1, col_priority + 1, col_enq_time + 1, col_msgid + 1};
    static const AttrNumber by_group[] = {col_q_id + 1, column_count + 1, col_enq_time + 1, col_msgid + 1};
    switch (order) {
        case Order::priority: return find_index(rel, by_priority, 4);
        case Order::group: return find_index(rel, by_group, 4);
        case Order::correlation: {
            static const AttrNumber by_correlation[] = {col_q_id + 1, col_corrid + 1, col_enq_time + 1, col_msgid + 1};
            return find_index(rel, by_correlation, 4, correlation_index);
        }
        case Order::queue: break;
    }
    return find_index(rel, by_time, 3);
}

void correlation_keys(ScanKeyData* keys, int32 queue_id, Datum correlation) {
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(queue_id));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_TEXTEQ, correlation);
    keys[1].sk_collation = C_COLLATION_OID;
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

// aq.message_properties of a removed message, as the dequeue statement's ROW(...) builds it
// (GroupMark: index_walk.hpp).
Datum properties_of(TupleDesc properties_desc, const Datum* v, const bool* isnull, const GroupMark* mark) {
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

// Protocol 6: follows the versions from the entry's line pointer (a redirect, then the HOT chain,
// each the successor of the one before) under a share lock on the page.  A pruned line pointer
// leads to nothing anyone can see; every version must be removed by a committed transaction or
// inserted by an aborted one (HeapTupleSatisfiesVacuumHorizon: DEAD or RECENTLY_DEAD, whatever
// the horizon).  A running transaction's insert, removal or lock (this one's included) is not.
bool gone_for_good(Relation heap, ItemPointer tid) {
    // The block exists: index_fetch_heap just read it, and the scan keeps its leaf page pinned
    // (xs_want_itup), so VACUUM cannot have removed the entry and truncated the heap meanwhile.
    BlockNumber block = ItemPointerGetBlockNumber(tid);
    Buffer buffer = ReadBuffer(heap, block);
    LockBuffer(buffer, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buffer);
    OffsetNumber offset = ItemPointerGetOffsetNumber(tid);
    TransactionId previous_xmax = InvalidTransactionId;
    bool gone = true;
    for (bool at_root = true;; at_root = false) {
        if (offset < FirstOffsetNumber || offset > PageGetMaxOffsetNumber(page)) break;
        ItemId item = PageGetItemId(page, offset);
        if (ItemIdIsRedirected(item) && at_root) {
            offset = ItemIdGetRedirect(item);
            continue;
        }
        if (!ItemIdIsNormal(item)) break;  // pruned: seen by nobody
        HeapTupleData version;
        version.t_data = reinterpret_cast<HeapTupleHeader>(PageGetItem(page, item));
        version.t_len = ItemIdGetLength(item);
        version.t_tableOid = RelationGetRelid(heap);
        ItemPointerSet(&version.t_self, block, offset);
        // Not the successor of the version before (its slot was reused): the chain ended there.
        if (TransactionIdIsValid(previous_xmax) &&
            !TransactionIdEquals(previous_xmax, HeapTupleHeaderGetXmin(version.t_data)))
            break;
        TransactionId dead_after;
        HTSV_Result state = HeapTupleSatisfiesVacuumHorizon(&version, buffer, &dead_after);
        if (state != HEAPTUPLE_DEAD && state != HEAPTUPLE_RECENTLY_DEAD) {
            gone = false;
            break;
        }
        if (!HeapTupleHeaderIsHotUpdated(version.t_data)) break;
        previous_xmax = HeapTupleHeaderGetUpdateXid(version.t_data);
        if (ItemPointerGetBlockNumber(&version.t_data->t_ctid) != block) break;
        offset = ItemPointerGetOffsetNumber(&version.t_data->t_ctid);
    }
    UnlockReleaseBuffer(buffer);
    return gone;
}

// Deletes the visible row version in the slot, SKIP LOCKED's way: one another transaction holds
// is skipped, not waited for; one this transaction locked (mode locked) is deleted.  Only a plain
// xid can be ours: a MultiXactId (several lockers) is skipped, never waited for.
bool claim_by_delete(Relation rel, TupleTableSlot* slot, CommandId command, Snapshot snapshot, bool a_dequeue) {
    TM_FailureData failure;
    ItemPointerData row = slot->tts_tid;
    TM_Result result = table_tuple_delete(rel, &row, command, snapshot, InvalidSnapshot, false, &failure, false);
    if (result == TM_BeingModified && !held_by_several(slot) && TransactionIdIsCurrentTransactionId(failure.xmax))
        result = table_tuple_delete(rel, &row, command, snapshot, InvalidSnapshot, true, &failure, false);
    // Invariant 5: a version this snapshot cannot see replaced the row.
    if (result == TM_Updated && a_dequeue && IsolationUsesXactSnapshot()) {
        bool isnull;
        int64 msgid = DatumGetInt64(slot_getattr(slot, 1, &isnull));  // msgid: the first column of both tables
        ereport(ERROR, (errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
                        errmsg("could not serialize access due to concurrent update"),
                        errdetail("Message " INT64_FORMAT " of table \"%s\" changed after this transaction's snapshot was taken"
                                  " (a rolled-back dequeue's attempt was counted, or it expired).",
                                  msgid, RelationGetRelationName(rel)),
                        errhint("Retry the transaction; a READ COMMITTED dequeue takes the message at once.")));
    }
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

TupleDesc open_properties(bool need_groups) {
    TupleDesc desc = lookup_rowtype_tupdesc(message_properties_type(), -1);  // pinned, not copied
    if (desc->natts != 11 && (need_groups || desc->natts != 8))
        elog(ERROR, "aq: type aq.message_properties has %d fields, not those of aq 0.4.0 or 0.6.0", desc->natts);
    return desc;
}

WalkSnapshot WalkSnapshot::begin() {
    CommandCounterIncrement();  // as a new statement: this transaction's earlier changes are seen
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    PushActiveSnapshot(snapshot);
    return WalkSnapshot{snapshot, GetCurrentTimestamp(), GetCurrentCommandId(true)};
}

void WalkSnapshot::end() {
    PopActiveSnapshot();
    UnregisterSnapshot(snapshot);
}

int start_key(ScanKeyData* key, ScanKeyData* members, AttrNumber first, bool priority_order,
              const BulkDequeuePosition* after, const scan_floor::Position* floor) {
    if (priority_order && (after || floor)) {
        const AttrNumber columns[] = {first, AttrNumber(first + 1), AttrNumber(first + 2)};
        static const RegProcedure comparisons[] = {F_BTINT4CMP, F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        scan_floor::Position from =
            after ? scan_floor::Position{after->enq_time, after->msgid, after->priority} : *floor;
        Datum values[] = {Int32GetDatum(from.priority), TimestampTzGetDatum(from.enq_time), Int64GetDatum(from.msgid)};
        row_comparison(key, members, after ? BTGreaterStrategyNumber : BTGreaterEqualStrategyNumber, 3, columns,
                       comparisons, values);
        return 1;
    }
    if (after || floor) {
        const AttrNumber columns[] = {first, AttrNumber(first + 1)};
        static const RegProcedure comparisons[] = {F_TIMESTAMPTZ_CMP, F_BTINT8CMP};
        scan_floor::Position from = after ? scan_floor::Position{after->enq_time, after->msgid} : *floor;
        Datum values[] = {TimestampTzGetDatum(from.enq_time), Int64GetDatum(from.msgid)};
        row_comparison(key, members, after ? BTGreaterStrategyNumber : BTGreaterEqualStrategyNumber, 2, columns,
                       comparisons, values);
        return 1;
    }
    return 0;
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

}  // namespace aq::queue::index_walk
