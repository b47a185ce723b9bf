// Dequeue: DEQUEUE and DEQUEUE_ARRAY from a queue (queue_store.hpp has the statements' shapes).
//
// Invariants:
//  1. A remove dequeue without msgid, correlation or condition from a normal queue walks the order
//     index (bulk_dequeue.hpp, the delivery and group walks) when the table allows it; every other
//     dequeue runs its prepared statement (statements.hpp), whose rows go straight to the
//     request's sink through a DestReceiver (no SPI result set in between).  Both take exactly
//     what the rules allow (rules.hpp).
//  2. A claim is recorded as a dequeue attempt before it is made (retries::before_claim), so a
//     statement that fails after it (a cancel, statement_timeout) still counts it; the claims are
//     made durable before the messages reach the client (retries::make_claims_durable).
//  3. A dequeue that removed or locked messages wakes the queue's waiters if its transaction rolls
//     back (wakeup::note_dequeue); one that locked messages or took part of a group wakes them
//     when it commits (wakeup::note_release): those messages, or the rest of the group, are
//     takeable then.
//  4. A multi-consumer dequeue sweeps after it (deliveries.hpp, removal): the messages whose last
//     delivery it took go; an empty dequeue sweeps too, at most once a second.
//  5. A grouped queue table hands out whole groups (groups.hpp): a group is locked before any of
//     its messages is taken, and released at once when nothing of it could be taken.
//  6. The wait is the one wait loop (waiting.hpp).
extern "C" {
#include "postgres.h"
#include "access/table.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "access/detoast.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include <cstdio>
#include <cstring>
#include <string>

#include "base/guard.hpp"
#include "base/once_a_second.hpp"
#include "base/spi.hpp"
#include "base/xact_end.hpp"
#include "queue/bulk_dequeue.hpp"
#include "queue/catalog.hpp"
#include "queue/condition.hpp"
#include "queue/index_walk.hpp"
#include "queue/deliveries.hpp"
#include "queue/groups.hpp"
#include "queue/maintenance.hpp"
#include "queue/navigation.hpp"
#include "queue/once_walk.hpp"
#include "queue/plan_cache.hpp"
#include "queue/queue_store.hpp"
#include "queue/retention.hpp"
#include "queue/retries.hpp"
#include "queue/statements.hpp"
#include "queue/time_manager.hpp"
#include "queue/sweep_rules.hpp"
#include "queue/waiting.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

namespace {

struct ClaimArgs {
    const QueueInfo* queue;
    const DequeueRequest* request;
    const Position* after;  // nullptr: from the head of the queue
    const int64* group = nullptr;  // a grouped queue table: only this transaction group's messages
    bool may_wait = false;  // the dequeue waits if this finds nothing (a ring's statement probes first)
    retention::Removed* kept = nullptr;  // a queue that retains: the rows removed (retention.hpp, 1)
    TimestampTz* next_ready = nullptr;  // lowered to when a message waiting for its retry_delay is ready
};

// The priorities of removed deliveries, for the sweep (deliveries.hpp): up to 8, more is "any".
using Priorities = sweep_rules::Priorities;

// The executor hands each dequeued row straight to the request's sink (no SPI result
// set in between) and remembers the last row for the navigation position.  Called by
// PostgreSQL: plain data only, and nothing here throws.
struct SinkReceiver {
    DestReceiver pub;  // first member: PostgreSQL sees a DestReceiver*
    const DequeueRequest* request;
    bool probe;   // only whether the statement finds a row: counts the first and stops
    bool in_look;  // the statement runs in a look (ring.hpp, L1): its rows must outlive it
    bool varlena_payload;
    bool claims;  // remove and locked modes: the rows are claimed (retries.hpp)
    bool sweeps;            // multi-consumer remove: the messages left without deliveries go (deliveries.hpp)
    Priorities priorities;  // ... of these priorities
    retention::Removed* kept;  // remove modes of a queue that retains: the rows removed (retention.hpp)
    int rows;
    int32 last_priority;
    TimestampTz last_enq_time;
    int64 last_msgid;
};

bool receive_row(TupleTableSlot* slot, DestReceiver* self) {
    auto* r = reinterpret_cast<SinkReceiver*>(self);
    if (r->probe) {
        r->rows++;
        return false;  // the executor stops
    }
    slot_getallattrs(slot);
    DequeuedRow row{slot->tts_values[0], slot->tts_values[1], slot->tts_values[2],
                    r->request->options->mode == DequeueMode::remove_nodata};
    if (!r->in_look) {
        r->request->sink(r->request->sink_context, row);
    } else {
        // ring.hpp, L1: the look's locks go before the caller reads the rows, and with them what
        // kept the segment (and its TOAST table) from truncation: a payload stored out of line is
        // fetched now.  (A tuplestore sink's temporary file belongs to the owner it was made under,
        // before the look: tuplestore.c.)
        bool fetched = r->varlena_payload && !slot->tts_isnull[1] && VARATT_IS_EXTERNAL(DatumGetPointer(row.payload));
        if (fetched)
            row.payload = PointerGetDatum(detoast_external_attr(reinterpret_cast<struct varlena*>(DatumGetPointer(row.payload))));
        r->request->sink(r->request->sink_context, row);  // which copies it
        if (fetched) pfree(DatumGetPointer(row.payload));
    }
    r->rows++;
    r->last_msgid = DatumGetInt64(slot->tts_values[0]);
    if (r->sweeps) r->priorities.note(DatumGetInt32(slot->tts_values[4]));
    // The row's own table: a ring's rows are in its segments (ring.hpp, W3).
    if (r->claims) retries::note_claimed(DatumGetObjectId(slot->tts_values[6]), reinterpret_cast<ItemPointer>(DatumGetPointer(slot->tts_values[5])));
    if (r->kept) retention::note(r->kept, DatumGetObjectId(slot->tts_values[6]), reinterpret_cast<ItemPointer>(DatumGetPointer(slot->tts_values[5])));
    r->last_enq_time = DatumGetTimestampTz(slot->tts_values[3]);
    r->last_priority = DatumGetInt32(slot->tts_values[4]);
    return true;
}
// The statement's rows must have the types the result is declared with: the queue
// table's user_data column may have been altered since the queue table was registered.
void receiver_startup(DestReceiver* self, int, TupleDesc desc) {
    auto* r = reinterpret_cast<SinkReceiver*>(self);
    Oid payload = desc->natts == 7 ? TupleDescAttr(desc, 1)->atttypid : InvalidOid;
    if (payload != r->request->payload_type || TupleDescAttr(desc, 0)->atttypid != INT8OID ||
        TupleDescAttr(desc, 5)->atttypid != TIDOID || TupleDescAttr(desc, 6)->atttypid != OIDOID ||
        TupleDescAttr(desc, 3)->atttypid != TIMESTAMPTZOID || TupleDescAttr(desc, 4)->atttypid != INT4OID)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("the queue table of queue \"%s\" no longer matches its payload type %s",
                               r->request->queue_name, format_type_be(r->request->payload_type)),
                        errdetail("Its user_data column is of type %s.",
                                  OidIsValid(payload) ? format_type_be(payload) : "unknown"),
                        errhint("Queue tables must not be altered; recreate the queue table.")));
    r->varlena_payload = TupleDescAttr(desc, 1)->attlen == -1;
}
void receiver_shutdown(DestReceiver*) {}
void receiver_destroy(DestReceiver*) {}

// The bulk path's rows, to the request's sink (as receive_row does for the statement's).
struct BulkSinkState {
    const DequeueRequest* request;
    int32 last_priority;
    TimestampTz last_enq_time;
    int64 last_msgid;
    Priorities priorities;
    retention::Removed* kept = nullptr;  // as SinkReceiver's
};

// A walk's message to the request's sink, its position remembered.
void hand_on(BulkSinkState* s, const BulkDequeuedMessage& m) {
    s->request->sink(s->request->sink_context,
                     DequeuedRow{m.msgid, m.payload, m.properties, s->request->options->mode == DequeueMode::remove_nodata});
    s->last_msgid = DatumGetInt64(m.msgid);
    s->last_enq_time = m.enq_time;
    s->last_priority = m.priority;
}

void bulk_sink(void* context, const BulkDequeuedMessage& m) {
    auto* s = static_cast<BulkSinkState*>(context);
    hand_on(s, m);
    s->priorities.note(m.priority);
    retries::note_claimed(m.relid, const_cast<ItemPointer>(&m.tid));
    if (s->kept) retention::note(s->kept, m.relid, const_cast<ItemPointer>(&m.tid));
}

// A queue table that stores each message once (once_walk.hpp): nothing is deleted, so no claim
// is noted for the settler.
void once_sink(void* context, const BulkDequeuedMessage& m) {
    hand_on(static_cast<BulkSinkState*>(context), m);
}

// Rows written into a queue table without aq.enqueue (by hand, COPY, logical replication,
// an UPDATE that moves messages back from an exception queue) do not lower the scan floor
// (scan_floor.hpp).  So a NEXT_MESSAGE dequeue scans from the head instead, at most once a
// second per queue in this backend: such rows wait about a second at most, busy queue or not.
base::OnceASecond<16> head_scans;
bool head_scan_due(int32 queue_id) {
    return head_scans.due(queue_id, GetCurrentTimestamp());
}

// A NEXT_MESSAGE walk from the scan floor, and when it finds nothing, one from the head if due: the
// rows written without aq.enqueue below the floor are found once the messages after them are
// taken.  A head scan reads every entry a held horizon keeps below the floor, so its cost bounds
// how often it runs (once_a_second.hpp, 3): at most once a second, and about a twentieth of the
// time.  walk(from_head) returns what the walk returns.
template <class Walk>
int from_floor_then_head(bool first_message, bool after_position, int32 key, Walk&& walk) {
    if (first_message) return walk(true);
    int rows = walk(false);
    if (rows != 0 || after_position || !head_scan_due(key)) return rows;
    TimestampTz started = GetCurrentTimestamp();
    rows = walk(true);
    head_scans.ran(key, started, GetCurrentTimestamp());
    return rows;
}

// The privileges the walk checks (once_walk.hpp, 1), refused as the statement of another queue would
// be (42501).  Not on every walk: once before a look as the owner, and when the walk refused.
void refuse_without_privilege(const QueueInfo& q, bool browse) {
    Relation rel = try_table_open(q.relid, AccessShareLock);
    bool allowed = !rel || (browse ? pg_class_aclcheck(q.relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK
                                   : index_walk::caller_may_remove(rel));
    if (rel) table_close(rel, AccessShareLock);
    if (!allowed) aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_TABLE, get_rel_name(q.relid));
}

// A queue table that stores each message once: its walk, remove or browse (the options it does not
// take yet were refused before).

int claim_once(const ClaimArgs& a) {
    const DequeueOptions& o = *a.request->options;
    bool browse = o.mode == DequeueMode::browse;
    int64 since = subscribed_since(a.queue->queue_id, o.consumer);
    if (since < 0) since = PG_INT64_MAX;  // no subscriber: only the messages whose recipient list names it
    BulkDequeuePosition after{};
    if (a.after) after = BulkDequeuePosition{a.after->priority, a.after->enq_time, a.after->msgid};
    // By msgid: the walk starts at that message (its position, read as the owner, after the
    // caller's privileges: what the caller may take is the walk's to say).
    BulkDequeuePosition at{};
    if (o.msgid) {
        refuse_without_privilege(*a.queue, browse);
        if (!once_position(*a.queue, *o.msgid, &at)) return 0;
    }
    BulkSinkState state{a.request, 0, 0, 0, {}};
    // The deq_condition is parsed once; each walk analyzes it against the segments it reads.
    Node* condition = o.condition ? condition::parse(o.condition, "deq_condition") : nullptr;
    auto walk = [&](bool from_head) {
        OnceDequeue request{a.queue->relid, &a.queue->segments, a.queue->payload_type, a.queue->queue_id, o.consumer,
                            since, a.queue->priority_order, browse, a.request->array_size, from_head,
                            a.after && !o.msgid ? &after : nullptr, once_sink, &state, a.next_ready,
                            o.msgid ? &at : nullptr, o.correlation, o.mode == DequeueMode::locked,
                            condition, o.condition};
        return bulk_dequeue_once(request);
    };
    int32 head_key = a.queue->queue_id ^
                     static_cast<int32>(hash_bytes(reinterpret_cast<const unsigned char*>(o.consumer), strlen(o.consumer)));
    // Nothing from the floor: messages the floor passed while they waited for a delay that has
    // passed since the time manager's last round are brought back first (time_manager.hpp, 8).
    auto walk_caught_up = [&](bool from_head) {
        int rows = walk(from_head);
        if (rows == 0 && !from_head && !a.after && time_manager::catch_up(*a.queue))
            rows = walk(false);
        return rows;
    };
    int rows = browse || o.msgid ? walk(true)
                                 : from_floor_then_head(o.navigation == Navigation::first_message, a.after, head_key,
                                                        walk_caught_up);
    if (rows < 0) refuse_without_privilege(*a.queue, browse);  // the walk refused: say why, if it is that
    if (rows < 0)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("queue \"%s\" cannot be read", a.request->queue_name),
                        errdetail("Its queue table stores each message once; it is read only directly, which its "
                                  "tables, their triggers, rules, row-level security or indexes of their own, the "
                                  "caller's privileges, a read-only transaction or a server without aq preloaded do "
                                  "not allow.")));
    if (rows > 0) {
        remember_position(a.queue->queue_id, o.consumer, browse, state.last_priority, state.last_enq_time,
                          state.last_msgid);
        if (!browse) wakeup::note_dequeue(a.queue->queue_id);
        // Locked messages are the consumer's again when the transaction commits: wake waiters then.
        if (o.mode == DequeueMode::locked) wakeup::note_release(a.queue->queue_id);
    }
    return rows;
}

// Remove mode without msgid or correlation on a normal queue: bulk_dequeue.hpp, when the
// queue table allows it (-1 otherwise).
int claim_in_bulk(const ClaimArgs& a) {
    const DequeueOptions& o = *a.request->options;
    if (!removes(o.mode) || o.msgid || o.correlation || o.condition || a.queue->exception_queue) return -1;
    BulkDequeuePosition after{};
    if (a.after) after = BulkDequeuePosition{a.after->priority, a.after->enq_time, a.after->msgid};
    if (a.queue->multiple_consumers) {
        BulkSinkState state{a.request, 0, 0, 0, {}};
        // A head scan at most once a second per queue and consumer (the key is a hash: a
        // collision only moves one of them).
        int32 head_key = a.queue->queue_id ^
                         static_cast<int32>(hash_bytes(reinterpret_cast<const unsigned char*>(o.consumer), strlen(o.consumer)));
        int rows = from_floor_then_head(o.navigation == Navigation::first_message, a.after, head_key, [&](bool from_head) {
            BulkDeliveryDequeue request{a.queue->delivery_relid,
                                        a.queue->relid,
                                        a.queue->payload_type,
                                        a.queue->queue_id,
                                        o.consumer,
                                        a.queue->priority_order,
                                        a.request->array_size,
                                        from_head,
                                        a.after ? &after : nullptr,
                                        bulk_sink,
                                        &state};
            return bulk_dequeue_deliveries(request);
        });
        if (rows > 0) {
            remember_position(a.queue->queue_id, o.consumer, false, state.last_priority, state.last_enq_time,
                              state.last_msgid);
            wakeup::note_dequeue(a.queue->queue_id);
        }
        if (rows >= 0) {
            deliveries::Taken taken{o.consumer, state.last_enq_time, state.last_msgid};
            deliveries::sweep(tables_of(*a.queue, a.request->queue_name), state.priorities.values,
                              state.priorities.known(), rows > 0 ? &taken : nullptr);
        }
        return rows;
    }
    BulkSinkState state{a.request, 0, 0, 0, {}, a.kept};
    auto walk = [&](bool from_head) {
        BulkDequeue request{a.queue->relid,
                            &a.queue->segments,
                            a.queue->payload_type,
                            a.queue->queue_id,
                            a.queue->priority_order,
                            a.request->array_size,
                            from_head,
                            a.after ? &after : nullptr,
                            bulk_sink,
                            &state};
        return a.group ? bulk_dequeue_group(request, *a.group) : bulk_dequeue(request);
    };
    // Nothing from the floor: messages the floor passed while they waited for a delay that has
    // passed since the time manager's last round are brought back first (time_manager.hpp, 8).
    auto walk_caught_up = [&](bool from_head) {
        int rows = walk(from_head);
        if (rows == 0 && !from_head && !a.after && time_manager::catch_up(*a.queue)) rows = walk(false);
        return rows;
    };
    // (A group's walk uses no floor: once.)
    int rows = a.group ? walk(false)
                       : from_floor_then_head(o.navigation == Navigation::first_message, a.after, a.queue->queue_id,
                                              walk_caught_up);
    if (rows > 0) {
        remember_position(a.queue->queue_id, "", false, state.last_priority, state.last_enq_time, state.last_msgid,
                          a.group);
        wakeup::note_dequeue(a.queue->queue_id);  // a rollback brings them back: wake waiters then
        if (a.group) wakeup::note_release(a.queue->queue_id);  // the rest of the group, at commit
    }
    return rows;
}

int32 statement_shape(const ClaimArgs& a) {
    const DequeueOptions& o = *a.request->options;
    int32 shape = 0;
    if (a.after) shape |= after_position;
    if (o.msgid) shape |= by_msgid;
    if (o.correlation) shape |= correlation_shape(o.correlation);
    if (o.mode == DequeueMode::browse) shape |= mode_browse;
    if (o.mode == DequeueMode::locked) shape |= mode_locked;
    if (a.queue->priority_order) shape |= priority_order;
    if (a.queue->exception_queue) shape |= exception_queue;
    if (o.condition) shape |= with_condition;
    if (a.queue->multiple_consumers) shape |= multi_consumer;
    if (o.consumer) shape |= by_consumer;
    if (a.group) shape |= by_group;
    return shape;
}

// One dequeue statement of this shape (claim-and-delete, lock, or read); passes the rows to the
// sink.  probe: only whether it finds a row (a read-only shape; nothing reaches the sink).
// Requires SPI.
int run_statement(const ClaimArgs& a, int32 shape, bool probe, bool in_look = false) {
    const DequeueOptions& o = *a.request->options;
    SPIPlanPtr plan = o.condition ? condition_plan(*a.queue, dequeue_base + shape, o.condition)
                                  : statement_plan(*a.queue, dequeue_base + shape, InvalidOid);

    ParamListInfo params = makeParamList(dequeue_param_count);
    for (int i = 0; i < dequeue_param_count; i++) {
        params->params[i].ptype = dequeue_param_types[i];
        params->params[i].pflags = PARAM_FLAG_CONST;
        params->params[i].isnull = true;
        params->params[i].value = (Datum)0;
    }
    auto set = [params](int i, Datum value) {
        params->params[i].value = value;
        params->params[i].isnull = false;
    };
    set(0, Int32GetDatum(a.queue->queue_id));
    set(1, TimestampTzGetDatum(GetCurrentTimestamp()));
    set(2, Int64GetDatum(probe ? 1 : a.request->array_size));
    if (a.after) {
        set(3, TimestampTzGetDatum(a.after->enq_time));
        set(4, Int64GetDatum(a.after->msgid));
        set(7, Int32GetDatum(a.after->priority));
    }
    if (o.msgid) set(5, Int64GetDatum(*o.msgid));
    if (o.correlation) set(6, CStringGetTextDatum(o.correlation));
    if (o.consumer) set(8, CStringGetTextDatum(o.consumer));
    if (a.group) set(9, Int64GetDatum(*a.group));

    SinkReceiver receiver;
    memset(&receiver, 0, sizeof receiver);
    receiver.pub.receiveSlot = receive_row;
    receiver.pub.rStartup = receiver_startup;
    receiver.pub.rShutdown = receiver_shutdown;
    receiver.pub.rDestroy = receiver_destroy;
    receiver.pub.mydest = DestNone;
    receiver.request = a.request;
    receiver.probe = probe;
    receiver.in_look = in_look;
    receiver.claims = !probe && o.mode != DequeueMode::browse;
    receiver.sweeps = !probe && a.queue->multiple_consumers && !a.queue->exception_queue && removes(o.mode);
    receiver.kept = !probe && removes(o.mode) ? a.kept : nullptr;

    SPIExecuteOptions options;
    memset(&options, 0, sizeof options);
    options.params = params;
    options.read_only = false;
    options.dest = &receiver.pub;
    // Planned for index scans (plan_cache.hpp): the claim walks the sort order's index and the
    // DELETE is a TID scan, at every size.  (By correlation the sort stays allowed: the
    // correlation index is not in that order.)
    // A claim of this statement is recorded as a dequeue attempt even if the statement
    // fails after it (a cancel, statement_timeout): registered before it runs.
    if (receiver.claims) retries::before_claim();
    int guc_level = plan_cache::index_plans_begin(shape & by_correlation);
    int rc = SPI_execute_plan_extended(plan, &options);
    plan_cache::index_plans_end(guc_level);
    // SPI reports a query whose rows went to another DestReceiver as SPI_OK_UTILITY.
    if (rc != SPI_OK_SELECT && rc != SPI_OK_UTILITY) elog(ERROR, "aq: dequeue statement failed: %s", SPI_result_code_string(rc));

    if (probe) return receiver.rows;
    if (receiver.rows > 0) {
        remember_position(a.queue->queue_id, o.consumer ? o.consumer : "", o.mode == DequeueMode::browse,
                          receiver.last_priority, receiver.last_enq_time, receiver.last_msgid, a.group);
        // The messages whose last delivery this was go (deliveries.hpp).
        if (receiver.sweeps) {
            deliveries::Taken taken{o.consumer, receiver.last_enq_time, receiver.last_msgid};
            deliveries::sweep(tables_of(*a.queue, a.request->queue_name), receiver.priorities.values,
                              receiver.priorities.known(), &taken);
        }
        // Removed or locked messages come back if the transaction rolls back: wake waiters then.
        if (o.mode != DequeueMode::browse) wakeup::note_dequeue(a.queue->queue_id);
        // ... and locked ones, or the rest of a group, if it commits.
        if (o.mode == DequeueMode::locked || (a.group && o.mode != DequeueMode::browse))
            wakeup::note_release(a.queue->queue_id);
    } else if (receiver.sweeps) {
        deliveries::sweep(tables_of(*a.queue, a.request->queue_name), nullptr, 0, nullptr);
    }
    return receiver.rows;
}

// ring.hpp, L1: a ring's statement run in a look, whose locks on the segments go with it.
struct StatementLook {
    const ClaimArgs* args;
    int32 shape;
    bool probe;
    int rows;
};
void statement_look(void* arg) {
    auto* l = static_cast<StatementLook*>(arg);
    l->rows = run_statement(*l->args, l->shape, l->probe, true);
}
int run_in_look(const ClaimArgs& a, int32 shape, bool probe) {
    StatementLook look{&a, shape, probe, 0};
    base::xact_end::look(statement_look, &look);
    return look.rows;
}

// One dequeue: the walk when it applies, else the statement.  Requires SPI.
int claim(const ClaimArgs& a) {
    // A stored-once table's exception queues hold plain rows, one consumer's copy each: the
    // statements read them as a single-consumer queue's (once_walk.hpp, 5).
    if (a.queue->stored_once() && !a.queue->exception_queue) return claim_once(a);
    int in_bulk = claim_in_bulk(a);
    if (in_bulk >= 0) return in_bulk;
    int32 shape = statement_shape(a);
    if (a.queue->segments.count > 0) {
        // ring.hpp, L1: a statement reads every segment of a ring through its parent, and its locks
        // would keep them all from truncation to the end of the transaction.  A browse only reads:
        // it runs in a look (its rows reach the sink all the same).  A remove or locked dequeue
        // that would wait when it finds nothing first looks whether the read-only form of its
        // statement finds a message: when not, it waits holding nothing.
        if (shape & mode_browse) return run_in_look(a, shape, false);
        if (a.may_wait && run_in_look(a, (shape & ~mode_locked) | mode_browse, true) == 0) return 0;
    }
    return run_statement(a, shape, false);
}

// Whether the group still has a message that is not passed (groups.hpp, Navigation), whether or not
// it can be taken now.  A ring's look holds no segment (ring.hpp, L1).  Requires SPI.
struct GroupRestLook {
    const QueueInfo* q;
    int64 group;
    bool goes_on;
};
void group_rest_look(void* arg) {
    auto* l = static_cast<GroupRestLook*>(arg);
    Datum args[3] = {Int32GetDatum(l->q->queue_id), Int64GetDatum(l->group), TimestampTzGetDatum(GetCurrentTimestamp())};
    bool isnull;
    Datum v = statement_value(*l->q, group_rest, args, "looking for the rest of a transaction group", &isnull);
    l->goes_on = !isnull && DatumGetBool(v);
}
bool group_goes_on(const QueueInfo& q, int64 group) {
    GroupRestLook look{&q, group, false};
    if (q.segments.count > 0)
        base::xact_end::look(group_rest_look, &look);
    else
        group_rest_look(&look);
    return look.goes_on;
}

// A grouped queue table's claim (groups.hpp): in the transaction's current group (NEXT_MESSAGE;
// *exhausted when nothing of it is left), or in the first group from the head (FIRST_MESSAGE,
// NEXT_MESSAGE without a current group) or after the current one (NEXT_TRANSACTION) that this
// transaction can lock and that has a message to take.  Requires SPI.
int claim_grouped(const QueueInfo& q, const DequeueRequest& r, bool* exhausted, retention::Removed* kept) {
    const DequeueOptions& o = *r.options;
    bool browse = o.mode == DequeueMode::browse;
    const Position* current = find_position(q.queue_id, "", browse);
    bool in_group = current && current->in_group;
    // A savepoint rolled back since releases the group's lock with what it took: then the group
    // may be another transaction's, and this one starts over.
    if (in_group && !browse && !groups::try_lock(q.relid, current->group)) in_group = false;
    if (o.navigation == Navigation::next_message && in_group) {
        int64 group = current->group;
        int rows = claim(ClaimArgs{&q, &r, current, &group, false, kept});
        // Nothing taken: the group has ended, or its next message cannot be taken now (groups.hpp).
        if (rows == 0) *exhausted = !group_goes_on(q, group);
        return rows;
    }
    int64 after = (o.navigation == Navigation::next_transaction && in_group) ? current->group : PG_INT64_MIN;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        int64 group = 0;
        int found = from_floor_then_head(o.navigation == Navigation::first_message, after != PG_INT64_MIN,
                                         q.queue_id ^ 0x67727073, [&](bool from_head) {
                                             GroupSearch search{q.relid, &q.segments, q.payload_type, q.queue_id,
                                                                after, from_head};
                                             return queue::next_group(search, &group);  // on the index
                                         });
        if (found < 0) {
            SPIPlanPtr plan = statement_plan(q, find_next_group, InvalidOid);
            Datum args[3] = {Int32GetDatum(q.queue_id), Int64GetDatum(after), TimestampTzGetDatum(GetCurrentTimestamp())};
            base::spi::execute(plan, args, nullptr, 1, SPI_OK_SELECT, "finding the next transaction group");
            bool isnull;
            Datum first = base::spi::first_value(&isnull);
            found = isnull ? 0 : 1;
            if (found) group = DatumGetInt64(first);
        }
        if (!found) return 0;
        bool taken = false;
        if (browse || groups::try_lock(q.relid, group, &taken)) {
            int rows = claim(ClaimArgs{&q, &r, nullptr, &group, false, kept});
            if (rows > 0) return rows;
            if (taken) groups::unlock(q.relid, group);  // nothing of it taken: not held on
        }
        after = group;  // held by another transaction, or nothing of it to take
    }
}

}  // namespace

int dequeue(const DequeueRequest& r) {
    const DequeueOptions& o = *r.options;
    int delivered = 0;
    bool cannot_wait = false;  // REPEATABLE READ / SERIALIZABLE: new commits stay invisible
    bool exhausted = false;    // NEXT_MESSAGE at the end of the transaction group (groups.hpp)
    const char* refused = nullptr;  // an option the queue table does not take
    Problem problem;
    base::call([&] {
        base::spi::connect();
        QueueInfo q;
        problem = check_queue(lookup(r.queue_name, q), q, r.payload_type, false);
        if (problem.kind == QueueProblem::none) problem = check_consumer(q, o.consumer);
        if (problem.kind != QueueProblem::none) {
            SPI_finish();
            return;
        }
        bool grouped = q.grouped && !q.exception_queue;
        if (o.navigation == Navigation::next_transaction && !grouped)
            refused = "navigation next_transaction";
        else if (grouped && (o.msgid || o.correlation || o.condition))
            refused = o.msgid ? "msgid" : o.correlation ? "correlation" : "deq_condition";
        if (refused) {
            SPI_finish();
            return;
        }
        bool browse = o.mode == DequeueMode::browse;
        bool by_position = o.navigation == Navigation::next_message && !o.msgid;
        // What a queue that retains removes is kept (retention.hpp).
        retention::Removed* kept = removes(o.mode) && retention::applies(q) ? retention::begin_removed() : nullptr;
        if (kept) retention::check_writable(q);  // before any claim (retention.hpp, 4)
        uint64 seen = 0;
        TimestampTz retry_ready = 0;  // a stored-once message waiting for its retry_delay (once_walk.hpp, 5)
        WaitEnd end = wait_loop(
            o.wait,
            [&](bool first_pass) {
                seen = wakeup::generation(q.queue_id);  // before the scan: see wakeup.hpp
                retry_ready = 0;
                if (!first_pass) {
                    // The queue may have been stopped or dropped while this dequeue slept.
                    problem = check_queue(lookup(r.queue_name, q), q, r.payload_type, false);
                    if (problem.kind != QueueProblem::none) return PassResult::stop;
                }
                // Browse is read-only, and so is everything a READ ONLY transaction or a hot standby
                // calls: the expiry move is left to the time manager or the next consuming dequeue.
                // A normal queue's dequeue leaves it to the time manager when one serves, and a
                // SERIALIZABLE one to others in any case (maintenance.hpp, 3).
                if (!browse && !XactReadOnly &&
                    (q.exception_queue || (first_pass && !IsolationIsSerializable() && !time_manager::serves() &&
                                           expiry_sweep_due(q)))) {
                    expire_messages_of(q);
                    // ... and so are the retained copies whose time passed (retention.hpp, 3).
                    if (!q.exception_queue && retention::applies(q) && !IsolationUsesXactSnapshot())
                        retention::purge(q, GetCurrentTimestamp());  // retention.hpp, 5
                }
                if (grouped) {
                    delivered = claim_grouped(q, r, &exhausted, kept);
                    if (exhausted) return PassResult::stop;
                } else {
                    const Position* after =
                        by_position ? find_position(q.queue_id, o.consumer ? o.consumer : "", browse) : nullptr;
                    bool may_wait = o.wait.forever || o.wait.seconds > 0;
                    delivered = claim(ClaimArgs{&q, &r, after, nullptr, may_wait, kept, &retry_ready});
                    // Removing: messages may have come back (or arrived with a higher priority) before
                    // the position, so look from the head once more before waiting (navigation.hpp, 4).
                    // Browse and locked walk forward only: from the head they would return the same
                    // messages.
                    if (delivered == 0 && after && removes(o.mode))
                        delivered = claim(ClaimArgs{&q, &r, nullptr, nullptr, may_wait, kept, &retry_ready});
                }
                return delivered > 0 ? PassResult::found : PassResult::nothing;
            },
            [&](TimestampTz now) {
                long in = next_visible_in(q, now);
                if (retry_ready == 0) return in;
                long retry_in = Max(1L, TimestampDifferenceMilliseconds(now, retry_ready) + 1);
                return in < 0 ? retry_in : Min(in, retry_in);
            },
            [&](long timeout_ms) { wakeup::sleep(q.queue_id, seen, timeout_ms); });
        cannot_wait = end == WaitEnd::cannot_wait;
        if (r.retry_ready_out) *r.retry_ready_out = retry_ready;
        if (kept) retention::keep(q, *kept, GetCurrentTimestamp());
        SPI_finish();
        // The claims (the rows' xmax) reach the disk before the messages reach the client.
        if (delivered > 0 && !browse) retries::make_claims_durable(r.commit_follows);
    });
    if (problem.kind != QueueProblem::none) throw_problem(problem, r.queue_name, "payload_type");
    if (refused && strcmp(refused, "navigation next_transaction") == 0)
        throw Error(sqlstate::invalid_parameter_value,
                    std::string("navigation next_transaction is invalid for queue \"") + r.queue_name + "\"",
                    "Its queue table was not created with message_grouping => 'transactional' (ORA-25234 analogue).",
                    "Use first_message or next_message.");
    if (refused)
        throw Error(sqlstate::feature_not_supported,
                    std::string(refused) + " is not supported yet for a queue table with transactional grouping",
                    std::string("Queue \"") + r.queue_name + "\" hands out whole transaction groups.");
    if (exhausted)
        throw Error(sqlstate::end_of_group,
                    std::string("no message left in the current transaction group of queue \"") + r.queue_name + "\"",
                    "NEXT_MESSAGE stays inside the group this transaction took (ORA-25235 analogue).",
                    "Dequeue with navigation => 'next_transaction' for the next group.");
    if (cannot_wait)
        throw Error(sqlstate::feature_not_supported,
                    std::string("no message available in queue \"") + r.queue_name +
                        "\", and a dequeue cannot wait in a REPEATABLE READ or SERIALIZABLE transaction",
                    "Its snapshot would never show messages committed while it waits.",
                    "Dequeue in a READ COMMITTED transaction, or pass wait => '0'.");
    if (delivered == 0) throw_dequeue_timeout(r.queue_name, o.wait);
    return delivered;
}

void throw_dequeue_timeout(const char* queue_name, const Wait& wait) {
    char waited[64];
    snprintf(waited, sizeof waited, "The dequeue waited %g s (ORA-25228 analogue).", wait.seconds);
    throw Error(sqlstate::dequeue_timeout, std::string("no message available in queue \"") + queue_name + "\"",
                wait.seconds == 0 ? "The dequeue did not wait (wait => 0)." : waited,
                "Catch SQLSTATE 'QA228' to treat an empty queue as the end of a batch.");
}

}  // namespace aq::queue
