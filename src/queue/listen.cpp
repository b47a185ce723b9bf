// LISTEN (Oracle's DBMS_AQ.LISTEN): waits until one of the agents' queues has a message a remove
// dequeue could take now (queue_store.hpp).
//
// Invariants:
//  1. "Could take now" is rules.hpp's takeable, read by the statement ready_candidates in the
//     queue's order, and a row no other transaction holds (row_free: SKIP LOCKED's test, with the
//     own-lock rule).  Nothing is taken or locked.
//  2. The candidates are read through a cursor a few at a time; the cost is the messages being
//     dequeued ahead of the first free one.
//  3. After a wake-up by commits only the queues whose generation moved are checked, in list
//     order; the first pass and every pass after a timeout check them all.  The wait is the one
//     wait loop (waiting.hpp).
//  4. A normal queue of a queue table that stores each message once is read by its walk instead
//     (once_walk.hpp), browsing one message for the consumer: what it would hand on is what that
//     consumer could take now (not taken, not held, its retry_delay passed), and a message waiting
//     for its retry_delay ends the sleep when it is ready.
extern "C" {
#include "postgres.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "executor/spi.h"
#include "storage/bufmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"
}

#include <cstdio>
#include <string>

#include "base/guard.hpp"
#include "base/spi.hpp"
#include "queue/once_walk.hpp"
#include "base/xact_end.hpp"
#include "queue/catalog.hpp"
#include "queue/maintenance.hpp"
#include "queue/queue_store.hpp"
#include "queue/statements.hpp"
#include "queue/waiting.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

namespace {

// Whether no transaction is deleting or locking the row version at tid (a dequeue holds it):
// what FOR UPDATE SKIP LOCKED would not skip.  Its header is read under a share lock.
bool row_free(Relation rel, ItemPointer tid) {
    HeapTupleData tuple;
    tuple.t_self = *tid;
    Buffer buffer = InvalidBuffer;
    bool found = heap_fetch(rel, SnapshotAny, &tuple, &buffer, false);
    bool free = false;
    if (found) {
        LockBuffer(buffer, BUFFER_LOCK_SHARE);
        TM_Result result = HeapTupleSatisfiesUpdate(&tuple, GetCurrentCommandId(false), buffer);
        // A row this transaction holds (locked mode, or the lock an expiry move keeps) is one its
        // own remove dequeue takes, as in bulk_dequeue.hpp; only a plain xid can be ours.
        free = result == TM_Ok ||
               (result == TM_BeingModified && !(tuple.t_data->t_infomask & HEAP_XMAX_IS_MULTI) &&
                TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetRawXmax(tuple.t_data)));
        LockBuffer(buffer, BUFFER_LOCK_UNLOCK);
    }
    if (BufferIsValid(buffer)) ReleaseBuffer(buffer);
    return free;
}

// Whether the queue has a message a remove dequeue could take now.  Reads the candidates in the
// queue's order through a cursor, a few at a time, and stops at the first that no transaction
// holds: the cost is the messages being dequeued ahead of it.  Requires SPI.
// A normal queue of a queue table that stores each message once: a browse walk of one message for
// the consumer (once_walk.hpp); retry_ready is lowered to when a message waiting for its
// retry_delay is ready.
void count_one(void* context, const BulkDequeuedMessage&) {
    ++*static_cast<int*>(context);
}
bool once_ready(const QueueInfo& q, const char* consumer, TimestampTz* retry_ready) {
    int64 since = subscribed_since(q.queue_id, consumer);
    if (since < 0) since = PG_INT64_MAX;  // no subscriber: only the messages whose recipient list names it
    int count = 0;
    OnceDequeue request{q.relid, &q.segments, q.payload_type, q.queue_id, consumer, since, q.priority_order,
                        true, 1, true, nullptr, count_one, &count, retry_ready};
    if (bulk_dequeue_once(request) < 0)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied for table %s", get_rel_name(q.relid))));
    return count > 0;
}

bool has_ready_message(const QueueInfo& q, const char* consumer, TimestampTz* retry_ready) {
    if (q.stored_once() && !q.exception_queue) return once_ready(q, consumer, retry_ready);
    SPIPlanPtr plan = statement_plan(q, ready_candidates, InvalidOid);
    Datum args[4] = {Int32GetDatum(q.queue_id), TimestampTzGetDatum(GetCurrentTimestamp()), BoolGetDatum(q.exception_queue),
                     consumer ? CStringGetTextDatum(consumer) : (Datum)0};
    const char nulls[4] = {' ', ' ', ' ', consumer ? ' ' : 'n'};
    // Not read-only: a fresh snapshot at each pass, which sees what committed while LISTEN slept.
    Portal portal = SPI_cursor_open(nullptr, plan, args, nulls, false);
    Relation rel = table_open(claim_relid(q), AccessShareLock);
    bool ready = false;
    constexpr int chunk = 16;
    for (bool more = true; more && !ready;) {
        CHECK_FOR_INTERRUPTS();
        SPI_cursor_fetch(portal, true, chunk);
        for (uint64 i = 0; i < SPI_processed && !ready; i++) {
            bool isnull, oid_null;
            Datum tid = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
            // The row's own table: a ring's rows are in its segments (ring.hpp, W3).
            Oid table = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &oid_null));
            if (!oid_null && table != RelationGetRelid(rel)) {
                table_close(rel, NoLock);
                rel = table_open(table, AccessShareLock);
            }
            ready = !isnull && row_free(rel, reinterpret_cast<ItemPointer>(DatumGetPointer(tid)));
        }
        more = SPI_processed == static_cast<uint64>(chunk);
        SPI_freetuptable(SPI_tuptable);
    }
    table_close(rel, NoLock);  // kept to the end of the transaction, as the statement's lock
    SPI_cursor_close(portal);
    return ready;
}

// A ring's look holds no lock on its segments past itself (ring.hpp, L1).
struct ReadyLook {
    const QueueInfo* q;
    const char* consumer;
    TimestampTz* retry_ready;
    bool ready;
};
bool has_ready_message_released(const QueueInfo& q, const char* consumer, TimestampTz* retry_ready) {
    ReadyLook look{&q, consumer, retry_ready, false};
    auto read = [](void* arg) {
        auto* l = static_cast<ReadyLook*>(arg);
        l->ready = has_ready_message(*l->q, l->consumer, l->retry_ready);
    };
    if (q.segments.count > 0)
        base::xact_end::look(read, &look);
    else
        read(&look);
    return look.ready;
}

}  // namespace

int listen(const ListenAgent* agents, int count, const Wait& wait) {
    int found = -1;
    bool cannot_wait = false;
    int problem_at = -1;
    bool consumer_named = false;  // of a single-consumer queue
    Problem problem;
    base::call([&] {
        base::spi::connect();
        auto* queues = static_cast<QueueInfo*>(palloc(sizeof(QueueInfo) * count));
        auto* ids = static_cast<int32*>(palloc(sizeof(int32) * count));
        auto* seen = static_cast<uint64*>(palloc(sizeof(uint64) * count));
        auto* changed = static_cast<bool*>(palloc(sizeof(bool) * count));
        auto look_up_all = [&]() {
            for (int i = 0; i < count; i++) {
                bool known = lookup(agents[i].address, queues[i]);
                problem = check_queue(known, queues[i], known ? queues[i].payload_type : InvalidOid, false);
                if (problem.kind != QueueProblem::none) {
                    problem_at = i;
                    return false;
                }
                problem = check_consumer(queues[i], agents[i].name);
                if (problem.kind != QueueProblem::none) {
                    problem_at = i;
                    consumer_named = problem.kind == QueueProblem::consumer_not_allowed;
                    if (consumer_named) problem = {};
                    return false;
                }
                ids[i] = queues[i].queue_id;
            }
            return true;
        };
        wakeup::begin_listen();
        // After a wake-up by commits only the queues whose generation moved are checked (in list
        // order); the first pass and every pass after a timeout (a delay passed, an expiry, rows
        // written by hand) check them all.
        bool check_all = true;
        TimestampTz retry_ready = 0;  // a stored-once message waiting for its retry_delay (once_walk.hpp, 5)
        WaitEnd end = wait_loop(
            wait,
            [&](bool) {
                // Every pass looks the queues up again: one may have been stopped or dropped meanwhile.
                if (!look_up_all()) return PassResult::stop;
                for (int i = 0; i < count; i++) {
                    uint64 now_seen = wakeup::generation(ids[i]);  // before the checks: wakeup.hpp
                    changed[i] = check_all || now_seen != seen[i];
                    seen[i] = now_seen;
                }
                retry_ready = 0;
                for (int i = 0; i < count && found < 0; i++) {
                    if (!changed[i]) continue;
                    // An exception queue has what expired in its queue table once it is moved there,
                    // which a dequeue from it does first (and so does LISTEN, but never read-only).
                    if (queues[i].exception_queue && !XactReadOnly) expire_messages_of(queues[i]);
                    if (has_ready_message_released(queues[i], agents[i].name, &retry_ready)) found = i;
                }
                return found >= 0 ? PassResult::found : PassResult::nothing;
            },
            [&](TimestampTz now) {
                long wake = -1;
                for (int i = 0; i < count; i++) {
                    long in = next_visible_in(queues[i], now);
                    if (in >= 0 && (wake < 0 || in < wake)) wake = in;
                }
                if (retry_ready != 0) {
                    long in = Max(1L, TimestampDifferenceMilliseconds(now, retry_ready) + 1);
                    if (wake < 0 || in < wake) wake = in;
                }
                return wake;
            },
            [&](long timeout_ms) { check_all = !wakeup::sleep_any(ids, seen, count, timeout_ms); });
        cannot_wait = end == WaitEnd::cannot_wait;
        wakeup::end_listen();
        SPI_finish();
    });
    if (problem.kind != QueueProblem::none) throw_problem(problem, agents[problem_at].address, "payload_type");
    if (consumer_named)
        throw Error(sqlstate::invalid_parameter_value,
                    std::string("agent ") + std::to_string(problem_at + 1) + " names consumer \"" + agents[problem_at].name +
                        "\" of queue \"" + agents[problem_at].address + "\", a single-consumer queue",
                    "Only a multi-consumer queue has consumers (Oracle's ORA-25231).", "Pass the agent with name => NULL.");
    if (cannot_wait)
        throw Error(sqlstate::feature_not_supported,
                    "no message available in the queues listened to, and LISTEN cannot wait in a REPEATABLE READ"
                    " or SERIALIZABLE transaction",
                    "Its snapshot would never show messages committed while it waits.",
                    "Listen in a READ COMMITTED transaction, or pass wait => '0'.");
    if (found < 0) {
        char waited[96];
        snprintf(waited, sizeof waited, "LISTEN waited %g s on %d queue%s (ORA-25254 analogue).", wait.forever ? 0.0 : wait.seconds,
                 count, count == 1 ? "" : "s");
        throw Error(sqlstate::listen_timeout, "no message available in the queues listened to",
                    wait.seconds == 0 ? "LISTEN did not wait (wait => 0)." : waited,
                    "Catch SQLSTATE 'QA254' to treat it as a timeout.");
    }
    return found;
}

}  // namespace aq::queue
