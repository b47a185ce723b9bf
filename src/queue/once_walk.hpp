// The walk of a multi-consumer queue table that stores each message once (in development:
// docs/design-horizon-storage.md, section 3; aq._create_stored_once_queue_table).  Its messages
// live in a ring (ring.hpp) and are never deleted by a dequeue; what consumer c took of message m
// is c's receipt for m, a row (msgid, consumer, kind 't', at) in the receipts table of m's segment
// (aq.queue_segments.receipts), appended and never updated.
//
// Protocol (M1, M5, M7 of the design):
//  1. Eligibility as for the queue walk (index_walk.hpp, 1): the ring opens (RingScan), the caller
//     may remove from the queue table (browse: may read it); else -1 and the caller says why
//     (there is no statement for such a table yet).  Each segment's receipts table is opened with
//     it (RowExclusiveLock; browse AccessShareLock) with its (consumer, msgid) index.
//  2. c's scan floor (scan_floor.hpp, key c) is read before the snapshot; the order index of every
//     segment is walked from it (NEXT_MESSAGE), from the head (FIRST_MESSAGE) or after the
//     transaction's position, merged by key (ring_scan.hpp).
//  3. A visible message of c's queue that is takeable (rules.hpp: ready, unexpired; every
//     subscriber receives every message, there are no rules or recipient lists yet) is looked up
//     in its segment's receipts under the claim stripe (claim_stripes.hpp) with SnapshotDirty:
//       - a receipt of c committed by another transaction: c took it; passed for good;
//       - one in progress, or this transaction's own: passed (held; taken here before);
//       - none: a remove dequeue inserts c's receipt (heap and index) before it lets the stripe
//         go, and hands the message on; a browse hands it on.
//     A message of the parent (written by hand; it has no receipts table) is passed.
//  4. The floor watch (index_walk.hpp, 6) meets the first entry whose row is visible or not gone;
//     it passes on when that row is a message c took for good (3), so c's floor rises past what c
//     consumed and its dequeues do not read it again.  Enqueues lower every subscriber's floor
//     before their commit (scan_floor.hpp), as the fan-out does.
//  5. Everything is in the caller's transaction: a rollback takes its receipts back, and the
//     messages are c's to take again.  Not yet: attempts (a rollback is not counted), retries,
//     exception queues, expiration, rules, recipient lists, the statement paths (msgid,
//     correlation, condition, locked mode), the truncation of such a ring's segments.
//
// Called inside base::call: plain data only; may raise PostgreSQL errors.
#pragma once

#include "queue/bulk_dequeue.hpp"

namespace aq::queue {

struct OnceDequeue {
    Oid relid;
    const ring::Segments* segments;  // with their receipts tables
    Oid payload_type;
    int32 queue_id;
    const char* consumer;
    bool priority_order;
    bool browse;  // hand the messages on without taking them
    int max_messages;
    bool from_head;
    const BulkDequeuePosition* after;  // or nullptr
    BulkDequeueSink sink;
    void* sink_context;
};

// How many messages were handed on, or -1 when the walk may not run (1).
int bulk_dequeue_once(const OnceDequeue& request);

}  // namespace aq::queue
