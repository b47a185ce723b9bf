// Enqueue and dequeue over a queue table (an ordinary heap table, see the install
// script's aq.create_queue_table).
//
// Enqueue goes through COPY's multi-insert path (bulk_enqueue.hpp); a queue table that
// has triggers, row-level security or columns of its own gets the equivalent statement
//   INSERT ... SELECT FROM unnest(payloads[, properties]) RETURNING msgid.
// Dequeue is one SPI statement, prepared once per backend and queue table (generic plan):
//   dequeue        WITH claimed AS MATERIALIZED (SELECT ctid ... ORDER BY q_id, enq_time,
//                  msgid LIMIT n FOR UPDATE SKIP LOCKED)
//                  DELETE ... WHERE ctid = ANY(ARRAY(SELECT ctid FROM claimed)) RETURNING ...
// The claim is a materialized CTE read once by an InitPlan, so it can never lock more
// than n rows (the IN (subquery) over-claim of SKIP LOCKED ... LIMIT cannot happen), and
// the whole batch is deleted by one statement through a TID scan: bulk, not row by row.
//
// The other dequeue modes are the claim alone: LOCKED keeps FOR UPDATE SKIP LOCKED and
// deletes nothing (a later dequeue by msgid removes the message), BROWSE is a plain
// SELECT.  The order is the queue table's sort order, (enq_time, msgid) or (priority,
// enq_time, msgid), each with its index; dequeue by correlation uses the partial index
// (q_id, corrid COLLATE pg_catalog."C", <order>).  Every statement reads the queue table
// with ONLY: a table inheriting from it is not part of the queue.
//
// Navigation NEXT_MESSAGE (Oracle's default) keeps this backend's position per queue
// for the current transaction: the next scan starts after the last message it
// dequeued, so a run of single dequeues in one transaction does not re-walk the index
// entries of the rows it has already deleted (which stay in the index until the
// transaction ends).  When the scan after the position finds nothing, a removing dequeue
// rescans from the head once before waiting, so no message is ever missed.  Browse keeps
// its own position for the session (Oracle's browse cursor).
//
// Messages whose expiration has passed are never claimed; the system moves them to
// their exception queue (an UPDATE of q_id, as the queue table's owner through
// base/run_as.hpp) when an exception queue of the table is consumed, and at most once a
// second per backend when a normal queue is.  Browse never writes, nor does any dequeue in a
// READ ONLY transaction or on a hot standby: there the move waits for the next consuming
// dequeue.  Attempts of rolled-back dequeues: retries.hpp.
//
// The queue room, one file per concern, each header opening with its protocol:
//   rules.hpp        the message rules, each written once (ready, unexpired, settled, the head
//                    rule, the order key), evaluated by the C walks and written into the SQL
//   catalog          the queue lookup, its cache, and the user's errors about a queue
//   statements       every SQL shape, built from rules.hpp, prepared once (plan_cache.hpp)
//   navigation       NEXT_MESSAGE positions (transaction-local, never evicted; browse's)
//   waiting.hpp      the one wait loop of dequeue and LISTEN
//   enqueue, dequeue, listen, maintenance (expiry and the settler's sweep, as the owner)
//   bulk_dequeue, bulk_enqueue (the index walks and multi-insert), deliveries (multi-consumer),
//   groups, retries, settler, scan_floor, wakeup, condition, options
// Shared mechanisms outside it: base/guard.hpp (the boundary), base/spi.hpp (the SPI bracket),
// base/txn_local.hpp (the transaction-local map), base/once_a_second.hpp, base/run_as.hpp.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
#include "utils/array.h"
#include "utils/tuplestore.h"
#include "access/tupdesc.h"
}

#include "queue/options.hpp"

namespace aq::queue {

// Properties of one enqueue (NULL fields of aq.message_properties take defaults).
struct EnqueueRequest {
    const char* queue_name;
    Oid payload_type;          // element type of payloads
    ArrayType* payloads;       // one-dimensional, no NULLs (checked by the caller)
    ArrayType* properties;     // aq.message_properties[] of the same length, or nullptr
};

// Inserts every payload in one statement; returns their message ids (int8[]) in
// order, allocated in the caller's memory context.
ArrayType* enqueue_array(const EnqueueRequest& request);

// One dequeued message, handed to the sink while the batch is being read.
struct DequeuedRow {
    Datum msgid;
    Datum payload;     // not to be returned when no_payload
    Datum properties;  // aq.message_properties
    bool no_payload;   // dequeue_mode remove_nodata: the payload is returned as NULL
};

using RowSink = void (*)(void* context, const DequeuedRow& row);

struct DequeueRequest {
    const char* queue_name;
    Oid payload_type;  // the type the caller asked for (must be the queue's)
    int32 array_size;
    const DequeueOptions* options;
    RowSink sink;
    void* sink_context;
    bool commit_follows;  // base/statement.hpp: nothing acts on the messages before the commit
    // Set (0: none) when a message of a multi-consumer ring, or the floor's return to one, waits for a
    // time of its own: when that comes (an immediate dequeue's worker tells its waiting caller).
    TimestampTz* retry_ready_out = nullptr;
};

// Dequeues up to array_size messages, waiting as the options say while none is
// available; returns how many were passed to the sink (never 0: a dequeue that finds
// nothing within its wait throws the QA228 timeout).
int dequeue(const DequeueRequest& request);
// The QA228 of a dequeue that found nothing within its wait (Oracle's ORA-25228).
[[noreturn]] void throw_dequeue_timeout(const char* queue_name, const Wait& wait);

// LISTEN (Oracle's DBMS_AQ.LISTEN): an agent names a queue (address) and, for a multi-consumer
// queue, a consumer (name; NULL for a single-consumer queue).
struct ListenAgent {
    const char* name;
    const char* address;
};

// Waits until the queue of one of the agents has a message that a remove dequeue could take now
// (ready, not expired, not being dequeued, no attempt pending), without taking or locking it; woken
// by commits as a waiting dequeue is (wakeup.hpp).  Returns the index of the first such agent in
// the list.  Raises QA254 when the wait runs out (Oracle's ORA-25254).
int listen(const ListenAgent* agents, int count, const Wait& wait);

// Forgets every navigation position (a subtransaction rolled back: its dequeued
// messages are back in the queue, possibly before the position).
void forget_positions();

// The settler's sweep of a multi-consumer queue (deliveries.hpp, sweep() forced), as its queue
// table's owner (base/run_as.hpp).  Nothing for another kind of queue or one that is gone.
// Requires SPI; PostgreSQL errors only (C++ ones are turned into them).
void settler_sweep(int32 queue_id);

}  // namespace aq::queue
