// The walk of a queue table that stores each message once: see once_walk.hpp for the protocol and
// index_walk.hpp for what every walk keeps.
// Called inside base::call: plain data only.
extern "C" {
#include "postgres.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include "compat/executor.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/claim_stripes.hpp"
#include "queue/index_walk.hpp"
#include "queue/once_walk.hpp"
#include "queue/ring_scan.hpp"
#include "queue/rules.hpp"
#include "queue/scan_floor.hpp"

namespace aq::queue {

using namespace index_walk;

namespace {

// A segment's receipts table: (msgid bigint, consumer text, kind "char", at timestamptz), with its
// (consumer, msgid) index.
struct Receipts {
    Relation heap = nullptr;
    Relation index = nullptr;
    IndexInfo* index_info = nullptr;
    TupleTableSlot* slot = nullptr;
    SnapshotData dirty;                // the probe's: the latest state (3)
    IndexScanDesc probe_scan = nullptr;  // begun once, rescanned per probe
};

bool receipts_shape(Relation rel) {
    TupleDesc d = RelationGetDescr(rel);
    static const Oid types[] = {INT8OID, TEXTOID, CHAROID, TIMESTAMPTZOID};
    if (d->natts != 4) return false;
    for (int i = 0; i < 4; i++)
        if (TupleDescAttr(d, i)->attisdropped || TupleDescAttr(d, i)->atttypid != types[i]) return false;
    return true;
}

bool open_receipts(Oid relid, LOCKMODE lock, Receipts* r) {
    r->heap = try_table_open(relid, lock);
    if (!r->heap || !receipts_shape(r->heap)) return false;
    static const AttrNumber by_consumer[] = {2, 1};
    Oid index_oid = find_index(r->heap, by_consumer, 2);
    if (!OidIsValid(index_oid)) return false;
    r->index = index_open(index_oid, lock == AccessShareLock ? AccessShareLock : RowExclusiveLock);
    r->index_info = BuildIndexInfo(r->index);
    r->slot = table_slot_create(r->heap, nullptr);
    InitDirtySnapshot(r->dirty);
    r->probe_scan = compat::index_begin_scan(r->heap, r->index, &r->dirty, 2);
    return true;
}

void close_receipts(Receipts* r, bool keep) {
    if (r->probe_scan) index_endscan(r->probe_scan);
    if (r->slot) ExecDropSingleTupleTableSlot(r->slot);
    if (r->index) index_close(r->index, NoLock);
    if (r->heap) table_close(r->heap, keep ? NoLock : NoLock);
}

enum class Receipt { none, taken, held };

// 3: c's receipt for m under the latest state.
Receipt probe(Receipts& r, Datum consumer, int64 msgid) {
    ScanKeyData keys[2];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, r.index->rd_indcollation[0], F_TEXTEQ,
                           consumer);
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(msgid));
    IndexScanDesc scan = r.probe_scan;
    index_rescan(scan, keys, 2, nullptr, 0);
    Receipt found = Receipt::none;
    while (found != Receipt::held && index_getnext_slot(scan, ForwardScanDirection, r.slot)) {
        bool isnull;
        TransactionId xmin = DatumGetTransactionId(slot_getsysattr(r.slot, MinTransactionIdAttributeNumber, &isnull));
        if (TransactionIdIsValid(r.dirty.xmin) || TransactionIdIsCurrentTransactionId(xmin))
            found = Receipt::held;  // in progress: another session of c, or this transaction
        else
            found = Receipt::taken;
    }
    return found;
}

// 3: c's receipt for m, heap and index.
void insert_receipt(Receipts& r, Datum consumer, int64 msgid, TimestampTz now) {
    Datum values[4] = {Int64GetDatum(msgid), consumer, CharGetDatum('t'), TimestampTzGetDatum(now)};
    bool nulls[4] = {false, false, false, false};
    HeapTuple tuple = heap_form_tuple(RelationGetDescr(r.heap), values, nulls);
    simple_heap_insert(r.heap, tuple);
    Datum keys[2] = {consumer, Int64GetDatum(msgid)};
    bool key_nulls[2] = {false, false};
    index_insert(r.index, keys, key_nulls, &tuple->t_self, r.heap, UNIQUE_CHECK_NO, false, r.index_info);
    heap_freetuple(tuple);
}

}  // namespace

int bulk_dequeue_once(const OnceDequeue& r) {
    if (!claim_stripes::available()) return -1;
    RingScan ring;
    LOCKMODE lock = r.browse ? AccessShareLock : RowExclusiveLock;
    bool eligible = ring.open(r.relid, *r.segments, r.payload_type, order_of(r.priority_order), lock) &&
                    (r.browse ? pg_class_aclcheck(r.relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK
                              : !XactReadOnly && !IsInParallelMode() && caller_may_remove(ring.parent()));
    Receipts receipts[ring::max_segments];
    for (int i = 0; eligible && i < r.segments->count; i++)
        eligible = OidIsValid(r.segments->receipts[i]) && open_receipts(r.segments->receipts[i], lock, &receipts[i]);
    if (!eligible) {
        for (int i = 0; i < r.segments->count; i++) close_receipts(&receipts[i], true);
        ring.close();
        return -1;
    }
    TupleDesc properties_desc = open_properties(false);

    bool floor_applies = !r.browse && !r.after;
    scan_floor::Reading floor;
    if (floor_applies) floor = scan_floor::read(r.queue_id, r.consumer);

    WalkSnapshot walk = WalkSnapshot::begin();
    const auto [snapshot, now, command] = walk;

    ScanKeyData keys[2], row[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    bool from_floor = floor_applies && !r.from_head && floor.floor.enq_time != DT_NOBEGIN;
    int nkeys = 1 + start_key(&keys[1], row, 2, r.priority_order, r.after, from_floor ? &floor.floor : nullptr);
    ring.begin(snapshot, keys, nkeys);
    MemoryContext message_context = AllocSetContextCreate(CurrentMemoryContext, "aq once dequeue", ALLOCSET_SMALL_SIZES);
    Datum consumer = CStringGetTextDatum(r.consumer);
    Oid queue_table = r.relid;

    RowView row_view{nullptr, col_delay, col_expiration, false, InvalidOid};
    FloorWatch watch = FloorWatch::of_order(floor_applies, 2, r.priority_order, now);
    int handed = 0;
    bool inserted = false;
    while (handed < r.max_messages) {
        if (!ring.next_visible(watch)) break;
        TupleTableSlot* slot = ring.slot();
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        if (r.after && !after_position(*r.after, r.priority_order, v)) continue;
        if (ring.last == 0) continue;  // the parent's: no receipts (3)
        Receipts& rc = receipts[ring.last - 1];
        row_view.slot = slot;
        if (!rules::holds<rules::Takeable>(row_view, now)) continue;
        int64 msgid = DatumGetInt64(v[col_msgid]);
        LWLock* stripe = claim_stripes::stripe(queue_table, r.consumer, msgid);
        LWLockAcquire(stripe, r.browse ? LW_SHARED : LW_EXCLUSIVE);
        Receipt found = probe(rc, consumer, msgid);
        if (found == Receipt::none && !r.browse) {
            insert_receipt(rc, consumer, msgid, now);
            inserted = true;
        }
        LWLockRelease(stripe);
        if (found == Receipt::taken) {
            watch.consumed_here();
            continue;
        }
        if (found == Receipt::held) continue;
        if (!r.browse) ring.claimed_last();  // its segment stays locked with the receipt

        MemoryContext outer = MemoryContextSwitchTo(message_context);
        BulkDequeuedMessage message{v[col_msgid], v[col_user_data], properties_of(properties_desc, v, isnull),
                                    DatumGetInt32(v[col_priority]), DatumGetTimestampTz(v[col_enq_time]),
                                    slot->tts_tid, RelationGetRelid(ring.heap())};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(message_context);
        handed++;
    }
    if (floor_applies) scan_floor::raise(r.queue_id, floor, watch.candidate, r.consumer);

    MemoryContextDelete(message_context);
    for (int i = 0; i < r.segments->count; i++) close_receipts(&receipts[i], true);
    ring.close();
    walk.end();
    ReleaseTupleDesc(properties_desc);
    if (inserted) CommandCounterIncrement();  // later commands of this transaction see the receipts
    return handed;
}

}  // namespace aq::queue
