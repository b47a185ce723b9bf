// The group walks (groups.hpp): bulk_dequeue_group() takes a transaction group's messages,
// next_group() finds the next group with a message ready, both on the group index.  Declared in
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
#include "queue/ring_scan.hpp"

namespace aq::queue {

using namespace index_walk;

int bulk_dequeue_group(const BulkDequeue& r, int64 group) {
    // A ring's segments are merged in the group's order (ring_scan.hpp): a group's messages may span
    // a switch, or be carried forward (ring.hpp, C1).
    RingScan ring;
    bool eligible = ring.open(r.relid, *r.segments, r.payload_type, Order::group) && !XactReadOnly &&
                    !IsInParallelMode() && caller_may_remove(ring.parent());
    if (!eligible) {
        ring.close();  // the parent's lock is kept to the end of the transaction, as usual
        return -1;
    }
    for (int i = 0; i < ring.count; i++) CheckCmdReplicaIdentity(ring.cursors[i].heap, CMD_DELETE);
    TupleDesc properties_desc = open_properties(true);

    WalkSnapshot walk = WalkSnapshot::begin();
    const auto [snapshot, now, command] = walk;

    // Index columns: 1 q_id, 2 transaction_group, 3 enq_time, 4 msgid.
    ScanKeyData keys[3], row[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    ScanKeyInit(&keys[1], 2, BTEqualStrategyNumber, F_INT8EQ, Int64GetDatum(group));
    int nkeys = 2 + start_key(&keys[2], row, 3, false, r.after, nullptr);
    ring.begin(snapshot, keys, nkeys);
    FloorWatch no_floor = FloorWatch::of_order(false, 3, false, now);  // a group's walk has no floor
    MemoryContext held_context = AllocSetContextCreate(CurrentMemoryContext, "aq group dequeue", ALLOCSET_SMALL_SIZES);

    // A taken message is handed on once the next row of the group is seen (its end_of_group is
    // then false) or the group has no row left after it (true); its values are copied meanwhile.
    struct Held {
        bool present;
        Datum values[column_count];
        bool isnull[column_count];
        ItemPointerData tid;
        Oid relid;  // its segment's, in a ring
    } held{};
    TupleDesc desc = RelationGetDescr(ring.parent());  // every segment's columns are the parent's (ring.hpp, E1)
    auto hand_on = [&](bool end_of_group) {
        GroupMark mark{group, end_of_group};
        MemoryContext outer = MemoryContextSwitchTo(held_context);
        BulkDequeuedMessage message{held.values[col_msgid], held.values[col_user_data],
                                    properties_of(properties_desc, held.values, held.isnull, &mark),
                                    DatumGetInt32(held.values[col_priority]),
                                    DatumGetTimestampTz(held.values[col_enq_time]), held.tid, held.relid};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(held_context);
        held.present = false;
    };

    RowView row_view{nullptr, col_delay, col_expiration, retries::counting(), r.relid};
    bool registered = false;
    int removed = 0;
    bool later = false;  // a row of the group after the held message
    for (;;) {
        if (!ring.next_visible(no_floor)) break;
        if (held.present) later = true;
        if (removed >= r.max_messages) break;  // the array is full: this row only says the group goes on
        TupleTableSlot* slot = ring.slot();
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        row_view.slot = slot;
        row_view.relid = RelationGetRelid(ring.heap());
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
        if (!claim_by_delete(ring.heap(), slot, command, snapshot)) {
            // Removed or held by another transaction since this walk's snapshot (a carry-forward's
            // move seen by a REPEATABLE READ snapshot taken before it, the settler counting an
            // attempt): nothing after it is taken before it, as the head rule says of a message
            // not takeable yet.
            later = true;
            break;
        }
        ring.claimed_last();
        if (held.present) hand_on(false);
        MemoryContext outer = MemoryContextSwitchTo(held_context);
        for (int c = 0; c < column_count; c++) {
            Form_pg_attribute att = TupleDescAttr(desc, c);
            held.isnull[c] = isnull[c];
            held.values[c] = isnull[c] ? (Datum)0 : datumCopy(v[c], att->attbyval, att->attlen);
        }
        MemoryContextSwitchTo(outer);
        held.tid = tid;
        held.relid = RelationGetRelid(ring.heap());
        held.present = true;
        later = false;
        removed++;
    }
    if (held.present) hand_on(!later);
    row_view.send_hints();

    MemoryContextDelete(held_context);
    ring.close();
    walk.end();
    ReleaseTupleDesc(properties_desc);
    if (removed > 0) CommandCounterIncrement();  // later commands of this transaction see the removals
    return removed;
}

int next_group(const GroupSearch& s, int64* group) {
    RingScan ring;  // it only reads: AccessShareLock
    if (!ring.open(s.relid, *s.segments, s.payload_type, Order::group, AccessShareLock) ||
        pg_class_aclcheck(s.relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK) {
        ring.close();
        return -1;
    }
    // From the head: from the groups' floor (groups.hpp), read before the snapshot.
    scan_floor::Reading floor;
    bool floor_applies = s.after == PG_INT64_MIN;
    if (floor_applies) floor = scan_floor::read(s.queue_id, groups::floor_key);
    bool use_floor = floor_applies && !s.from_head;
    CommandCounterIncrement();
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    TimestampTz now = GetCurrentTimestamp();
    ScanKeyData keys[2];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(s.queue_id));
    int64 from = s.after;
    bool inclusive = false;
    if (use_floor && floor.floor.enq_time != DT_NOBEGIN) from = floor.floor.enq_time, inclusive = true;
    ScanKeyInit(&keys[1], 2, inclusive ? BTGreaterEqualStrategyNumber : BTGreaterStrategyNumber,
                inclusive ? F_INT8GE : F_INT8GT, Int64GetDatum(from));
    ring.begin(snapshot, keys, 2);
    // The groups' floor is a position whose "enq_time" is a group id (a group's messages all
    // have it): it may pass the groups whose every entry is surely dead.
    FloorWatch watch{floor_applies, 2, 2, scan_floor::Position{PG_INT64_MAX, PG_INT64_MIN}};
    bool found = false;
    bool blocked = false;  // blocked_group's first message cannot be taken now
    int64 blocked_group = 0;
    RowView row_view{nullptr, col_delay, col_expiration, retries::counting(), s.relid};
    while (ring.next_visible(watch)) {
        TupleTableSlot* slot = ring.slot();
        row_view.slot = slot;
        row_view.relid = RelationGetRelid(ring.heap());
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
    row_view.send_hints();
    if (floor_applies) {
        scan_floor::Position candidate = watch.candidate;
        candidate.msgid = PG_INT64_MIN;  // the whole group (the "msgid" column read is the group too)
        scan_floor::raise(s.queue_id, floor, candidate, groups::floor_key);
    }
    ring.close();
    UnregisterSnapshot(snapshot);
    return found ? 1 : 0;
}

}  // namespace aq::queue
