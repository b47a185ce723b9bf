// The removal sweep of a multi-consumer queue (deliveries.hpp, 3. Removal): sweep() removes the
// messages no delivery is left for, on the indexes (bulk_sweep, sweep_walk.cpp) or by its
// statement; what this backend knows of a queue to skip a sweep (Knowledge, may_remove), where a
// transaction's next sweep resumes, the idle and per-priority rate limits, and the contended
// queues handed to the settler at commit.  See deliveries.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "utils/snapmgr.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "storage/lmgr.h"
#include "utils/rel.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "nodes/params.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "catalog/namespace.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include <algorithm>
#include <cstring>

#include "base/once_a_second.hpp"
#include "base/spi.hpp"
#include "base/txn_local.hpp"
#include "queue/bulk_dequeue.hpp"
#include "queue/deliveries.hpp"
#include "queue/deliveries_statements.hpp"
#include "queue/plan_cache.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"
#include "queue/sweep_rules.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::deliveries {

static_assert(sweep_rules::name_size == NAMEDATALEN && sweep_rules::no_end == DT_NOEND &&
              sweep_rules::no_begin == DT_NOBEGIN);

namespace {

using sweep_rules::ConsumerFirst;
using sweep_rules::Knowledge;
using sweep_rules::known_consumers;
using sweep_rules::may_remove;
using sweep_rules::next_resume;
using sweep_rules::Resume;

// Where this transaction's next sweep of a queue (and priority) starts (see sweep(); the resume
// rule: sweep_rules.hpp).
struct SweepKey {
    int32 queue_id;
    int32 priority;
};
base::TxnLocalMap<SweepKey, Resume> resumes("aq sweep resumes");

// What this backend knows of its queues (Knowledge, may_remove: sweep_rules.hpp).
Knowledge knowledge[4];

// The last sweep of a queue after a dequeue that found nothing, and the last sweep of every
// priority of a priority-ordered queue (base/once_a_second.hpp).
base::OnceASecond<4> idle_sweeps;
base::OnceASecond<4> priority_sweeps;

Knowledge& knowledge_of(int32 queue_id) {
    return knowledge[static_cast<uint32>(queue_id) % lengthof(knowledge)];
}

// Whether the knowledge of the queue holds now (see Knowledge).
bool holds(Knowledge& k, int32 queue_id, TimestampTz now) {
    return k.valid && k.queue_id == queue_id && now - k.swept_at < USECS_PER_SEC &&
           wakeup::only_own_removals(queue_id, &k.removals);
}

// The sweep's per-consumer first deliveries (columns 6 to 8), if there are few enough.
void learn(Knowledge& k, HeapTuple row, TupleDesc desc) {
    bool names_null, times_null, ids_null;
    Datum names = SPI_getbinval(row, desc, 6, &names_null);
    Datum times = SPI_getbinval(row, desc, 7, &times_null);
    Datum ids = SPI_getbinval(row, desc, 8, &ids_null);
    k.count = 0;
    if (names_null || times_null || ids_null) return;  // no deliveries: the knowledge stays empty
    Datum *name_items, *time_items, *id_items;
    int n, n2, n3;
    deconstruct_array(DatumGetArrayTypeP(names), TEXTOID, -1, false, TYPALIGN_INT, &name_items, nullptr, &n);
    deconstruct_array(DatumGetArrayTypeP(times), TIMESTAMPTZOID, sizeof(TimestampTz), FLOAT8PASSBYVAL,
                      TYPALIGN_DOUBLE, &time_items, nullptr, &n2);
    deconstruct_array(DatumGetArrayTypeP(ids), INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &id_items,
                      nullptr, &n3);
    if (n > known_consumers || n != n2 || n != n3) {
        k.valid = false;
        return;
    }
    for (int i = 0; i < n; i++) {
        ConsumerFirst& c = k.consumers[i];
        text_to_cstring_buffer(DatumGetTextPP(name_items[i]), c.name, sizeof c.name);
        c.enq_time = DatumGetTimestampTz(time_items[i]);
        c.msgid = DatumGetInt64(id_items[i]);
        c.after = false;
    }
    k.count = n;
}

}  // namespace

// The queues whose sweep this transaction found contended (see sweep() in deliveries.hpp).
// Grows as needed (TopMemoryContext, kept for the session): a SERIALIZABLE transaction's sweeps
// are all left to the settler, and none may be lost.
struct Contended {
    int32* ids;
    int count;
    int capacity;
    void add(int32 id) {
        for (int i = 0; i < count; i++)
            if (ids[i] == id) return;
        if (count == capacity) {
            int grown = capacity ? capacity * 2 : 64;
            ids = static_cast<int32*>(ids ? repalloc(ids, sizeof(int32) * grown)
                                          : MemoryContextAlloc(TopMemoryContext, sizeof(int32) * grown));
            capacity = grown;
        }
        ids[count++] = id;
    }
} contended;

void sweep(const Tables& t, const int32* priorities, int count, const Taken* taken, bool forced) {
    // A transaction's first sweep of a queue starts at the head.  The delivery rows the
    // transaction removes stay in its snapshot's way until it ends (they cannot be pruned), so
    // its later sweeps start where the last one stopped: the messages between there and the
    // first delivery row after it are gone too, since their delivery rows have the same keys.
    // What committed meanwhile before that point is left to a later transaction's sweep.
    TimestampTz clock = GetCurrentTimestamp();
    Knowledge& k = knowledge_of(t.queue_id);
    // A priority-ordered queue's sweep covers the priorities the dequeue took; every one of them
    // at most once a second (a message the last two recipients took in overlapping transactions
    // is left to a later sweep, which may take another priority).
    auto due = [&](base::OnceASecond<4>& sweeps) { return sweeps.due(t.queue_id, clock); };
    bool every_priority = forced;
    if (forced) {
        // the settler's: no knowledge, no rate limit
    } else if (!taken) {
        // An empty dequeue: a sweep at most once a second per queue, when nothing holds.
        if (!t.priority_order && holds(k, t.queue_id, clock)) return;
        if (!due(idle_sweeps)) return;
        every_priority = true;
    } else if (!t.priority_order && holds(k, t.queue_id, clock) && !may_remove(k, *taken)) {
        return;
    } else if (t.priority_order) {
        every_priority = due(priority_sweeps);
    }
    // A SERIALIZABLE transaction leaves its sweeps to the settler (deliveries.hpp, 3): a sweep
    // reads every consumer's first delivery, and those reads would make SERIALIZABLE consumers of
    // one queue fail each other with 40001 where their dequeues alone do not conflict.  Unless no
    // settler can do it (aq not preloaded, no worker slot free): then it sweeps itself.
    if (!forced && IsolationIsSerializable() && settler::available() && !settler::starved()) {
        contended.add(t.queue_id);
        return;
    }
    SPIPlanPtr plan = plan_of(t, sweep_queue);
    auto run_sweep = [&](int32 priority) {
        SweepKey key{};
        key.queue_id = t.queue_id;
        key.priority = priority;
        const Resume* last = resumes.find(key);
        bool resumes_here = last != nullptr;
        if (resumes_here && last->enq_time == DT_NOEND) return;  // nothing left to sweep this transaction
        Resume r = resumes_here ? *last : Resume{DT_NOBEGIN, PG_INT64_MIN};
        auto remember = [&](const Resume& next) {
            bool found;
            *resumes.enter(key, &found) = next;
        };
        Datum args[4] = {Int32GetDatum(t.queue_id), Int32GetDatum(priority), TimestampTzGetDatum(r.enq_time),
                         Int64GetDatum(r.msgid)};
        // Read before the statement's snapshot is taken: a removal it does not see counts after.
        Knowledge next_k{};
        next_k.queue_id = t.queue_id;
        next_k.swept_at = clock;
        next_k.valid = !t.priority_order && wakeup::removals(t.queue_id, &next_k.removals);
        {
            BulkSweep request{};
            request.delivery_relid = t.delivery_relid;
            request.message_relid = t.relid;
            request.payload_type = t.payload_type;
            request.queue_id = t.queue_id;
            request.priority_order = t.priority_order;
            request.priority = priority;
            request.resumed = resumes_here;
            request.from_enq_time = r.enq_time;
            request.from_msgid = r.msgid;
            request.limit = sweep_limit;
            SweepFirst firsts[known_consumers];
            request.firsts = firsts;
            request.max_firsts = known_consumers;
            int removed = bulk_sweep(request);
            if (removed >= 0 && request.first_contended) contended.add(t.queue_id);
            if (removed >= 0) {
                Resume next = next_resume(removed >= sweep_limit, true, Resume{request.last_enq_time, request.last_msgid},
                                          request.found_first, Resume{request.first_enq_time, request.first_msgid});
                remember(next);
                if (next_k.valid && !resumes_here && removed < sweep_limit && request.found_first &&
                    !request.firsts_overflow) {
                    next_k.enq_time = request.first_enq_time;
                    next_k.msgid = request.first_msgid;
                    next_k.count = request.nfirsts;
                    for (int i = 0; i < request.nfirsts; i++) {
                        ConsumerFirst& c = next_k.consumers[i];
                        strlcpy(c.name, firsts[i].name, sizeof c.name);
                        c.enq_time = firsts[i].enq_time;
                        c.msgid = firsts[i].msgid;
                        c.after = false;
                    }
                } else {
                    next_k.valid = false;
                }
                if (!t.priority_order) k = next_k;
                return;
            }
        }
        int level = plan_cache::index_plans_begin(false);
        base::spi::execute(plan, args, nullptr, 1, SPI_OK_SELECT, "removing delivered messages");
        plan_cache::index_plans_end(level);
        HeapTuple row = SPI_tuptable->vals[0];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool removed_null, first_null, last_null;
        int64 removed = DatumGetInt64(SPI_getbinval(row, desc, 1, &removed_null));
        Datum first_time = SPI_getbinval(row, desc, 2, &first_null);
        Datum first_id = SPI_getbinval(row, desc, 3, &first_null);
        Datum last_time = SPI_getbinval(row, desc, 4, &last_null);
        Datum last_id = SPI_getbinval(row, desc, 5, &last_null);
        // Stopped at the limit: on from the last message removed; otherwise at the first delivery
        // row (none: nothing is left).
        Resume next = next_resume(removed >= sweep_limit, !last_null,
                                  Resume{DatumGetTimestampTz(last_time), DatumGetInt64(last_id)}, !first_null,
                                  Resume{DatumGetTimestampTz(first_time), DatumGetInt64(first_id)});
        remember(next);
        // What the next sweep may skip for: only a sweep from the head that removed all it could
        // and found a first delivery (see Knowledge).
        if (next_k.valid && !resumes_here && removed < sweep_limit && !first_null) {
            next_k.enq_time = DatumGetTimestampTz(first_time);
            next_k.msgid = DatumGetInt64(first_id);
            learn(next_k, row, desc);
        } else {
            next_k.valid = false;
        }
        if (!t.priority_order) k = next_k;
        SPI_freetuptable(SPI_tuptable);
    };
    if (!t.priority_order) {
        run_sweep(0);
        return;
    }
    if (count >= 0 && !every_priority) {
        for (int i = 0; i < count; i++) run_sweep(priorities[i]);
        return;
    }
    // Many priorities: every one the queue's messages have.
    Oid types[1] = {INT4OID};
    Datum args[1] = {Int32GetDatum(t.queue_id)};
    // One descent of the priority order's index per priority (a skip scan), not a read of every message.
    int rc = SPI_execute_with_args(psprintf("WITH RECURSIVE p(priority) AS ("
                                            "  SELECT pg_catalog.min(priority) FROM ONLY %1$s WHERE q_id OPERATOR(pg_catalog.=) $1"
                                            "  UNION ALL"
                                            "  SELECT (SELECT pg_catalog.min(m.priority) FROM ONLY %1$s m"
                                            "           WHERE m.q_id OPERATOR(pg_catalog.=) $1"
                                            "             AND m.priority OPERATOR(pg_catalog.>) p.priority)"
                                            "    FROM p WHERE p.priority IS NOT NULL)"
                                            " SELECT priority FROM p WHERE priority IS NOT NULL",
                                            t.messages),
                                   1, types, args, nullptr, false, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: reading message priorities failed: %s", SPI_result_code_string(rc));
    int n = static_cast<int>(SPI_processed);
    auto* found = static_cast<int32*>(palloc(sizeof(int32) * Max(n, 1)));
    for (int i = 0; i < n; i++) {
        bool isnull;
        found[i] = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
    }
    SPI_freetuptable(SPI_tuptable);
    for (int i = 0; i < n; i++) run_sweep(found[i]);
}

void at_commit() {
    if (contended.count > 0) settler::request_sweeps(contended.ids, contended.count);
    contended.count = 0;
}

void at_abort() {
    contended.count = 0;
}

}  // namespace aq::queue::deliveries
