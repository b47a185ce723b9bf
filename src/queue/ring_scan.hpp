// RingScan: a walk's forward scan of an order index over a queue table's storage, one relation for a
// classic table, the parent and every segment of a ring table (ring.hpp, W1-W3), merged by key.
//
// Protocol:
//  1. open() opens every relation of the queue table (RowExclusiveLock: a walk may delete from any of
//     them; AccessShareLock for one that only reads) and its order index (the queue's order, by
//     priority, or a grouped table's group order), and checks them as the walk's protocol requires (index_walk.hpp, 1;
//     ring.hpp, E1); false: nothing may be read directly, the caller runs the statement (close()
//     then keeps the parent's lock and releases the segments', which the statement takes again).
//  2. begin() starts one index scan per relation with the same keys (the queue, and the start
//     position: start_key) and the walk's snapshot; every scan returns its index tuples
//     (xs_want_itup), whose key columns order the merge.
//  3. next_visible() takes, among the scans' next entries, the first in the index's order (its
//     columns after q_id compared with the index's own comparison functions), fetches its row, and
//     keeps the floor watch on that entry (index_walk.hpp, 6), so that the watch sees one stream in
//     the queue's order, whichever relation an entry came from.  Equal keys cannot happen but across
//     a carried-forward copy (the same message), and then the first relation's comes first.
//  4. heap() and slot() are the relation and the slot of the row last returned: the claim deletes it
//     there (claim_by_delete), the settler is hinted with that relation.
//  5. close() keeps the locks of the parent and of every segment the walk removed a row of to the
//     end of the transaction, as a statement would; it releases those of the segments where it
//     removed nothing, which the transaction may hold already for other reasons (a lock taken
//     twice is released once).  So a segment whose messages are all gone is locked by walks for the
//     moment they look at it, not to the end of their transactions, and its truncation
//     (ACCESS EXCLUSIVE, NOWAIT: ring.hpp, R2) is not held off by every running consumer.
//  With one relation, next_visible() is index_walk::next_visible().
//
// Called inside base::call: plain data only; may raise PostgreSQL errors.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/genam.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
}

#include "queue/index_walk.hpp"
#include "queue/ring.hpp"

namespace aq::queue::index_walk {

struct RingScan {
    struct Cursor {
        Relation heap;
        Relation index;
        IndexScanDesc scan;
        TupleTableSlot* slot;
        bool pending;  // an entry read and not yet fetched
        bool done;
        bool claimed;  // the walk removed a row of it
    };
    Cursor cursors[ring::max_segments + 1];
    int count = 0;
    int last = -1;
    LOCKMODE lock = RowExclusiveLock;

    // 1.  relid: the queue table; segments: its ring (count 0: classic).  False: the caller runs the
    // statement.  Either way close() ends it.
    bool open(Oid relid, const ring::Segments& segments, Oid payload_type, Order order,
              LOCKMODE lockmode = RowExclusiveLock);
    // 2.
    void begin(Snapshot snapshot, ScanKey keys, int nkeys);
    // 3.
    bool next_visible(FloorWatch& watch);
    // 4.
    Relation heap() const { return cursors[last].heap; }
    TupleTableSlot* slot() const { return cursors[last].slot; }
    Relation parent() const { return cursors[0].heap; }
    // 5. The walk removed the row last returned.
    void claimed_last() { cursors[last].claimed = true; }
    // Every relation, for what the walk checks or notes per relation (the replica identity).
    void close();
};

}  // namespace aq::queue::index_walk
