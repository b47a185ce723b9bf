// The index walk: how aq's C paths read and claim rows on an index and the heap directly,
// instead of running the equivalent statement, and the shared mechanism they do it with.
//
// The walks (their requests are declared in bulk_dequeue.hpp):
//   bulk_dequeue.cpp   bulk_dequeue: a queue's messages, on its order index;
//   group_walk.cpp     bulk_dequeue_group, next_group: a transaction group's (groups.hpp);
//   delivery_walk.cpp  bulk_dequeue_deliveries: one consumer's delivery rows (deliveries.hpp);
//   sweep_walk.cpp     bulk_sweep: the removal sweep of a multi-consumer queue (deliveries.hpp).
//
// Protocol.  Every walk:
//  1. Eligibility, one privilege model.  It opens its tables (RowExclusiveLock on the one it
//     deletes from) and checks them as for a bulk enqueue (bulk_enqueue.hpp: aq's columns, no
//     triggers, no rules, no row-level security; a delivery table: has_delivery_shape), and a
//     walk that deletes runs neither in a read-only transaction nor in parallel mode (those get
//     the statement's error from the statement).  Its index is aq's, found by its exact key
//     columns (find_index, find_order_index: no predicate — the correlation index's own,
//     corrid IS NOT NULL, aside — no expressions, usable by this transaction's snapshots) and in the queue's sort order (in_sort_order: btree, ascending,
//     default operator classes).  The caller needs the privileges of the equivalent statement
//     (caller_may_remove: USAGE on the schema, DELETE and SELECT on the columns it reads; table
//     grants where that is what the statement checks).  Otherwise nothing is done and -1 is
//     returned: the caller runs the statement, which does the same or raises the error the
//     user would get from it.
//  2. The snapshot.  A scan floor the walk may raise is read before the snapshot (scan_floor.hpp;
//     one it only reads, as the sweep its consumers', after it); then CommandCounterIncrement and
//     a fresh snapshot, as a new statement: this transaction's earlier changes are seen.
//     Everything is in the caller's transaction: a rollback brings the rows back.  A walk that
//     removed rows ends with CommandCounterIncrement: the transaction's later commands see it.
//  3. The order.  The index is scanned forward, which is the queue's sort order (rules.hpp, 6),
//     from the scan floor, the head, or the transaction's navigation position, each start one
//     btree row comparison (row_comparison: the scan starts right there), and a row not after
//     the position is passed (after_position).
//  4. The rules.  Which rows may be taken is decided by the message rules of rules.hpp alone,
//     evaluated on the row in the walk's slot through RowView: delay and expiration from the
//     deformed slot, settled() from the row version's header (an unsettled dequeue attempt,
//     retries.hpp: taking it would overwrite that record; the settler is hinted).
//  5. The claims.  A row is claimed by deleting it with claim_by_delete, SKIP LOCKED's way: a row
//     another transaction deletes or holds locked is passed, never waited for; one this
//     transaction locked (locked mode) is deleted, the own-lock rule (only a plain xid can be
//     ours: a MultiXactId is passed).  A row updated since the snapshot (a rolled-back dequeue's
//     attempt counted by the settler, an expiry move) is passed in READ COMMITTED: its new version
//     is for the next dequeue, which takes a new snapshot.  In REPEATABLE READ and SERIALIZABLE a
//     dequeue raises 40001 there instead, as the statement's FOR UPDATE does: the transaction's
//     snapshot can never see that version, and passing it silently would say the queue is empty
//     (QA228) or take later messages first.  The sweep passes it at every level (a_dequeue false).
//     retries::before_claim() comes before the first claim.  Each claim
//     is one heap delete (one WAL record), not the row lock and delete of SELECT ... FOR UPDATE
//     SKIP LOCKED and DELETE, and no executor.
//  6. The floor watch.  Where a floor applies, FloorWatch finds how far it may rise: to the first
//     index entry whose row is visible or not gone for good, or the candidate the walk gives it if
//     it meets none (where the scan began); the walk then raises the floor to that
//     (scan_floor::raise, which also knows what enqueues did meanwhile).  "Gone for good" is
//     aq's own commit knowledge, never the xmin horizon: every version the entry leads to was
//     removed by a transaction that committed (or inserted by one that aborted), so no snapshot
//     taken from now on sees it and nothing can bring it back (entry_gone: index_fetch_heap's
//     kill_prior_tuple, dead to all, or else gone_for_good's look at the versions).  A held
//     horizon (an idle transaction, a prepared one, a replication slot, a long query) keeps
//     those rows from VACUUM but no longer holds the floor back: each dequeue starts past what is
//     known consumed, so its cost does not grow with what the horizon keeps.  A row this
//     transaction (or any running one) removed, locked or inserted is not gone: a rollback brings
//     it back.  A snapshot older than the raise (REPEATABLE READ, SERIALIZABLE) may still see a
//     passed row, but could never take it: its claim would find it removed by a committed
//     transaction and pass it (claim_by_delete), so starting past it changes no outcome; at
//     SERIALIZABLE the walk then notes no read of it, as SKIP LOCKED notes none of a row it
//     skips (a queue's dequeue is not a serializable read of the queue).
//     One more kind of entry is passed in a single-consumer queue's walk: a committed message
//     waiting for its delay, when the time manager lowers the floor back to it once the delay
//     passes (waiting_passed; time_manager.hpp, 8).  So a walk reads the messages waiting for a
//     delay once, not at every dequeue until they are ready.
//
// Called inside base::call: plain data only; may raise PostgreSQL errors.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/genam.h"
#include "access/xact.h"
#include "access/sysattr.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/snapshot.h"
#include "utils/timestamp.h"
}

#include "queue/bulk_dequeue.hpp"
#include "queue/rules.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"

namespace aq::queue::index_walk {

// 1. Eligibility (index_walk.cpp).
Oid find_index(Relation rel, const AttrNumber* keys, int nkeys, bool (*accepts)(Relation index) = nullptr);
// aq's order indexes: (q_id, enq_time, msgid), (q_id, priority, enq_time, msgid) of a table sorted
// by priority, (q_id, transaction_group, enq_time, msgid) of a grouped one (groups.hpp); and the
// correlation index (q_id, corrid COLLATE "C", enq_time, msgid) WHERE corrid IS NOT NULL, in the
// queue's order among the messages of one correlation: a walk by an exact correlation (no
// wildcard) of a table in enq_time order, its keys q_id and corrid equal (correlation_keys).
enum class Order { queue, priority, group, correlation };
Oid find_order_index(Relation rel, Order order);
inline Order order_of(bool priority_order) { return priority_order ? Order::priority : Order::queue; }
// The correlation index's equality keys (q_id, corrid; keys[0], keys[1]) for a walk by `correlation`,
// and the index column where its (enq_time, msgid) start (start_key's, the floor watch's `first`).
constexpr AttrNumber correlation_first = 3;
void correlation_keys(ScanKeyData* keys, int32 queue_id, Datum correlation);
Oid default_btree_family(Oid type);
bool in_sort_order(Relation index);
bool caller_may_remove(Relation rel);
bool open_sorted_indexes(Oid first_oid, Oid second_oid, Relation* first, Relation* second);

// What a walk hands its sink: aq.message_properties (index_walk.cpp).
Oid message_properties_type();
// aq.message_properties of a removed message, as the dequeue statement's ROW(...) builds it.
// A message of a transaction group (groups.hpp) also says its group and whether it is the last.
struct GroupMark {
    int64 group;
    bool end_of_group;
};
Datum properties_of(TupleDesc properties_desc, const Datum* v, const bool* isnull, const GroupMark* mark = nullptr);

// aq.message_properties' row type, pinned (ReleaseTupleDesc it), with the fields of aq 0.6.0 (11)
// or, unless groups are needed, of 0.4.0 (8): properties_of fills only those the type has.
TupleDesc open_properties(bool need_groups);

// 2. The snapshot: a walk starts as a new statement (CommandCounterIncrement: this transaction's
// earlier changes are seen) with a registered, active snapshot; end() pops and unregisters it.
struct WalkSnapshot {
    Snapshot snapshot;
    TimestampTz now;
    CommandId command;
    static WalkSnapshot begin();
    void end();
};

// 3. The order (index_walk.cpp).
// The start key of a walk of an order index whose key columns from `first` are (enq_time, msgid)
// or (priority, enq_time, msgid): after the navigation position (after; >), or else from the
// scan floor (floor, when it applies and is known; >=), or none.  Fills keys[0] (and the row
// members, room for 3); returns how many keys it filled (0 or 1).
int start_key(ScanKeyData* key, ScanKeyData* members, AttrNumber first, bool priority_order,
              const BulkDequeuePosition* after, const scan_floor::Position* floor);
bool after_position(const BulkDequeuePosition& p, bool priority_order, const Datum* v);
void row_comparison(ScanKeyData* header, ScanKeyData* members, StrategyNumber strategy, int n,
                    const AttrNumber* columns, const RegProcedure* comparisons, const Datum* values);

// 4, 5. The row's header and the claim (index_walk.cpp).
bool held_by_several(TupleTableSlot* slot);
bool deleted_by_running_other(TupleTableSlot* slot);
bool holds_unsettled_claim(TupleTableSlot* slot);
bool claim_by_delete(Relation rel, TupleTableSlot* slot, CommandId command, Snapshot snapshot, bool a_dequeue = true);

// 4.
// The rules' view of the row a walk holds in its slot (rules.hpp): its delay and expiration
// columns (0-based, of the deformed slot), and settled() read from its header (rules.hpp, 3),
// which notes an unsettled claim for the settler (at most 16 per walk), told by send_hints() once
// the walk is done (settler::Hints; a walk ended by an error tells nothing: the next one does).
struct RowView {
    TupleTableSlot* slot;
    int delay_col, expiration_col;
    bool counting;  // retries::counting(): without it no claim is unsettled
    Oid relid;      // for the hint
    settler::Hints hints;

    bool delay_null() const { return slot->tts_isnull[delay_col]; }
    rules::Time delay() const { return DatumGetTimestampTz(slot->tts_values[delay_col]); }
    bool expiration_null() const { return slot->tts_isnull[expiration_col]; }
    rules::Time expiration() const { return DatumGetTimestampTz(slot->tts_values[expiration_col]); }
    bool settled() {
        if (!counting || !holds_unsettled_claim(slot)) return true;
        hints.add(relid, slot->tts_tid);
        return false;
    }
    void send_hints() { settler::hint(hints); }
};

// 6.
// Whether every version the index entry the scan just fetched (invisible to its snapshot) leads to
// is gone for good (protocol 6).
bool gone_for_good(Relation heap, ItemPointer tid);
inline bool entry_gone(IndexScanDesc scan) {
    return scan->kill_prior_tuple || gone_for_good(scan->heapRelation, &scan->xs_heaptid);
}

// Where a remove scan's floor may rise to (scan_floor.hpp): the position of the first index entry
// whose row is visible or not gone for good, or `candidate` as given if the scan meets none.
struct FloorWatch {
    bool applies;
    AttrNumber time_column, id_column;  // of the index: enq_time, msgid
    scan_floor::Position candidate;
    AttrNumber priority_column = 0;  // of the index, in priority order (0: enq_time order)
    bool met = false;
    scan_floor::Position entry{0, 0};
    bool met_here = false;  // the entry just read is the one that met the watch
    scan_floor::Returns back;  // the returns of the entries passed while they waited (passed_until)

    // The watch of a walk of an order index whose key columns from `first` are (enq_time, msgid)
    // or (priority, enq_time, msgid), as start_key's; if it meets nothing, the floor may rise to
    // the scan's start `now` (at the highest priority value in priority order).
    static FloorWatch of_order(bool applies, AttrNumber first, bool priority_order, TimestampTz now) {
        if (priority_order)
            return FloorWatch{applies, AttrNumber(first + 1), AttrNumber(first + 2),
                              scan_floor::Position{now, PG_INT64_MIN, PG_INT32_MAX}, first};
        return FloorWatch{applies, first, AttrNumber(first + 1), scan_floor::Position{now, PG_INT64_MIN}};
    }

    // Reads the entry's position (the scan has xs_want_itup when the floor applies).
    void before_fetch(IndexScanDesc scan) {
        met_here = false;
        if (!applies || met) return;
        bool isnull;
        entry.enq_time = DatumGetTimestampTz(index_getattr(scan->xs_itup, time_column, scan->xs_itupdesc, &isnull));
        entry.msgid = DatumGetInt64(index_getattr(scan->xs_itup, id_column, scan->xs_itupdesc, &isnull));
        if (priority_column)
            entry.priority = DatumGetInt32(index_getattr(scan->xs_itup, priority_column, scan->xs_itupdesc, &isnull));
    }
    void after_fetch(IndexScanDesc scan, bool visible) {
        if (!applies || met) return;
        if (!visible && entry_gone(scan)) return;
        met = true;
        met_here = true;
        candidate = entry;
    }
    // The row just read is a message its walk's consumer took for good (once_walk.hpp, 4): the
    // floor may pass it when it is the entry that met the watch.
    void consumed_here() {
        if (!met_here) return;
        met = false;
        met_here = false;
    }
    // The row just read (in slot) is a message waiting for its delay, and the time manager will
    // lower the floor to it when the delay passes (time_manager::passes_delays): the floor may
    // pass it if it is committed — not this transaction's own insert, which no round has seen —
    // and only when it is the entry that met the watch (an earlier one still holds it).
    void waiting_passed(TupleTableSlot* slot) {
        if (!met_here) return;
        bool isnull;
        Datum xmin = slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull);
        if (isnull || TransactionIdIsCurrentTransactionId(DatumGetTransactionId(xmin))) return;
        met = false;
        met_here = false;
    }
    // The row just read is a message waiting for a time of its own, ready at `at` (a multi-consumer
    // ring's message for its consumer's retry_delay, or its delay: once_walk.hpp, 4): the floor may
    // pass it when it is the entry that met the watch, with a return to its position at that time
    // (scan_floor.hpp, Returns), which the raise registers.
    void passed_until(TimestampTz at) {
        if (!met_here) return;
        back.add(entry, at);
        met = false;
        met_here = false;
    }
};

// The walk's next visible row, deformed in slot, the floor watch kept (6); false at the end of the
// scan.  Interrupts are checked at every index entry.
inline bool next_visible(IndexScanDesc scan, TupleTableSlot* slot, FloorWatch& watch) {
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        if (!index_getnext_tid(scan, ForwardScanDirection)) return false;
        watch.before_fetch(scan);
        bool visible = index_fetch_heap(scan, slot);
        watch.after_fetch(scan, visible);
        if (!visible) continue;
        slot_getallattrs(slot);
        return true;
    }
}

}  // namespace aq::queue::index_walk
