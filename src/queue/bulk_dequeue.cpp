// The queue walk: bulk_dequeue(), a remove-dequeue of a queue's messages on its order index.
// See bulk_dequeue.hpp for what it does and index_walk.hpp for the protocol every walk keeps.
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
#include "queue/time_manager.hpp"

namespace aq::queue {

using namespace index_walk;

int bulk_dequeue(const BulkDequeue& r) {
    RingScan ring;
    // A read-only transaction (or a standby) gets the statement's error (25006) from the statement.
    bool eligible = ring.open(r.relid, *r.segments, r.payload_type, order_of(r.priority_order)) &&
                    !XactReadOnly && !IsInParallelMode() && caller_may_remove(ring.parent());
    if (!eligible) {
        ring.close();
        return -1;
    }
    for (int i = 0; i < ring.count; i++)  // a publication of deletes needs a replica identity
        CheckCmdReplicaIdentity(ring.cursors[i].heap, CMD_DELETE);
    TupleDesc properties_desc = open_properties(false);

    // The floor is read before the snapshot is taken (scan_floor.hpp).
    bool floor_applies = !r.after;
    scan_floor::Reading floor;
    if (floor_applies) floor = scan_floor::read(r.queue_id);

    // Messages waiting for a delay are passed by the floor while the time manager lowers it back
    // to each when it becomes ready; known before the walk's time (time_manager.hpp, 8).
    bool passes_delays = floor_applies && time_manager::passes_delays();

    WalkSnapshot walk = WalkSnapshot::begin();
    const auto [snapshot, now, command] = walk;

    // Index columns: 1 q_id, then (2 enq_time, 3 msgid) or (2 priority, 3 enq_time, 4 msgid).
    ScanKeyData keys[2], row[3];
    ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    bool from_floor = floor_applies && !r.from_head && floor.floor.enq_time != DT_NOBEGIN;
    int nkeys = 1 + start_key(&keys[1], row, 2, r.priority_order, r.after, from_floor ? &floor.floor : nullptr);
    ring.begin(snapshot, keys, nkeys);
    MemoryContext message_context = AllocSetContextCreate(CurrentMemoryContext, "aq bulk dequeue", ALLOCSET_SMALL_SIZES);

    RowView row_view{nullptr, col_delay, col_expiration, retries::counting(), InvalidOid};
    bool registered = false;
    // If the scan runs out without meeting a message: the floor may rise to the scan's start.
    FloorWatch watch = FloorWatch::of_order(floor_applies, 2, r.priority_order, now);
    int removed = 0;
    while (removed < r.max_messages) {
        if (!ring.next_visible(watch)) break;
        TupleTableSlot* slot = ring.slot();
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        if (r.after && !after_position(*r.after, r.priority_order, v)) continue;
        row_view.slot = slot;
        row_view.relid = RelationGetRelid(ring.heap());
        if (!rules::holds<rules::Takeable>(row_view, now)) {
            if (passes_delays && !rules::holds<rules::Ready>(row_view, now)) watch.waiting_passed(slot);
            continue;
        }

        if (!registered) retries::before_claim();  // before the first claim (retries.hpp)
        registered = true;
        ItemPointerData row_tid = slot->tts_tid;
        if (!claim_by_delete(ring.heap(), slot, command, snapshot)) continue;
        ring.claimed_last();

        MemoryContext outer = MemoryContextSwitchTo(message_context);
        BulkDequeuedMessage message{v[col_msgid], v[col_user_data], properties_of(properties_desc, v, isnull),
                                    DatumGetInt32(v[col_priority]), DatumGetTimestampTz(v[col_enq_time]), row_tid,
                                    RelationGetRelid(ring.heap())};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(message_context);
        removed++;
    }
    row_view.send_hints();
    if (floor_applies) scan_floor::raise(r.queue_id, floor, watch.candidate);

    MemoryContextDelete(message_context);
    ring.close();
    walk.end();
    ReleaseTupleDesc(properties_desc);
    if (removed > 0) CommandCounterIncrement();  // later commands of this transaction see the removals
    return removed;
}

}  // namespace aq::queue
