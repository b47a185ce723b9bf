// See deliveries.hpp for the protocol.
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
#include "utils/timestamp.h"
}

#include <algorithm>
#include <cstring>

#include "base/txn_local.hpp"
#include "base/multi_insert.hpp"
#include "base/run_as.hpp"
#include "compat/acl.hpp"
#include "compat/executor.hpp"
#include "compat/proc.hpp"
#include "queue/bulk_dequeue.hpp"
#include "queue/condition.hpp"
#include "queue/deliveries.hpp"
#include "queue/recipients.hpp"
#include "queue/plan_cache.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::deliveries {

namespace {

constexpr int sweep_limit = 10000;  // messages a sweep removes at most

// Above every statement number of queue_store.cpp (dequeue_base + shape bits), whose plans share
// the cache under the same names (plan_cache.hpp).
enum Statement : int32 {
    deliver_to_names = 1 << 20,  // $1 message ids x $2 consumer names
    deliver_by_rule,             // $1 message ids matching the rule, to consumer $2
    deliver_listed,              // the pairs ($1[i], $2[i])
    sweep_queue,                 // removes the messages of queue $1 (priority $2) before its first delivery
};

constexpr const char* delivered_columns =
    "(msgid, consumer_name, q_id, priority, enq_time, delay, expiration, exception_queue)";

struct Build {
    const Tables* tables;
    int32 statement;
};

// Every name is qualified and every table read with ONLY (see queue_store.cpp's build_sql).
char* build_sql(const void* context) {
    const auto* b = static_cast<const Build*>(context);
    const char* m = b->tables->messages;
    const char* d = b->tables->deliveries;
    switch (b->statement) {
        case deliver_to_names:
            return psprintf(
                "INSERT INTO %s %s"
                " SELECT tab.msgid, s.name, tab.q_id, tab.priority, tab.enq_time, tab.delay, tab.expiration,"
                "        tab.exception_queue"
                "   FROM ONLY %s tab CROSS JOIN pg_catalog.unnest($2) AS s(name)"
                "  WHERE tab.msgid OPERATOR(pg_catalog.=) ANY ($1)",
                d, delivered_columns, m);
        case deliver_by_rule:
            // The rule is analyzed in place of $3 (condition.hpp).
            return psprintf(
                "INSERT INTO %s %s"
                " SELECT tab.msgid, $2, tab.q_id, tab.priority, tab.enq_time, tab.delay, tab.expiration,"
                "        tab.exception_queue"
                "   FROM ONLY %s tab WHERE tab.msgid OPERATOR(pg_catalog.=) ANY ($1) AND $3"
                " RETURNING msgid",
                d, delivered_columns, m);
        case deliver_listed:
            return psprintf(
                "INSERT INTO %s %s"
                " SELECT tab.msgid, r.name, tab.q_id, tab.priority, tab.enq_time, tab.delay, tab.expiration,"
                "        tab.exception_queue"
                "   FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS r(msgid, name)"
                "   JOIN ONLY %s tab ON tab.msgid OPERATOR(pg_catalog.=) r.msgid",
                d, delivered_columns, m);
        default: {
            // From ($3, $4) on, in the queue's order: the first delivery row of the queue ($1; of
            // priority $2), and the messages before it, removed.  Returns where the next sweep of
            // this transaction starts (see sweep()).
            bool by_priority = b->tables->priority_order;
            return psprintf(
                // The consumers with deliveries in the queue, one index descent each.
                "WITH RECURSIVE consumers(name) AS ("
                "  (SELECT d.consumer_name FROM ONLY %1$s d WHERE d.q_id OPERATOR(pg_catalog.=) $1"
                "    ORDER BY d.q_id, d.consumer_name LIMIT 1)"
                "  UNION ALL"
                "  SELECT (SELECT d.consumer_name FROM ONLY %1$s d WHERE d.q_id OPERATOR(pg_catalog.=) $1"
                "             AND d.consumer_name OPERATOR(pg_catalog.>) c.name ORDER BY d.q_id, d.consumer_name LIMIT 1)"
                "    FROM consumers c WHERE c.name IS NOT NULL),"
                // Each one's first delivery from ($3, $4) on, and the first of those.
                " each AS MATERIALIZED ("
                "  SELECT c.name, f.enq_time, f.msgid FROM consumers c, LATERAL ("
                "    SELECT d.enq_time, d.msgid FROM ONLY %1$s d"
                "     WHERE d.q_id OPERATOR(pg_catalog.=) $1 AND d.consumer_name OPERATOR(pg_catalog.=) c.name%3$s"
                "       AND ROW(d.enq_time, d.msgid) OPERATOR(pg_catalog.>=) ROW($3, $4)"
                "     ORDER BY d.q_id, d.consumer_name, %4$sd.enq_time, d.msgid LIMIT 1) f"
                "   WHERE c.name IS NOT NULL),"
                " first AS MATERIALIZED (SELECT e.enq_time, e.msgid FROM each e ORDER BY e.enq_time, e.msgid LIMIT 1),"
                " gone AS MATERIALIZED ("
                "  SELECT m.ctid, m.enq_time, m.msgid FROM ONLY %2$s m WHERE m.q_id OPERATOR(pg_catalog.=) $1%5$s"
                "     AND ROW(m.enq_time, m.msgid) OPERATOR(pg_catalog.>=) ROW($3, $4)"
                "     AND ROW(m.enq_time, m.msgid) OPERATOR(pg_catalog.<)"
                "         ROW(COALESCE((SELECT enq_time FROM first), 'infinity'::pg_catalog.timestamptz),"
                "             COALESCE((SELECT msgid FROM first), 9223372036854775807::pg_catalog.int8))"
                "   ORDER BY m.q_id, %6$sm.enq_time, m.msgid LIMIT %7$d FOR UPDATE SKIP LOCKED),"
                " removed AS ("
                "  DELETE FROM ONLY %2$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM gone)) RETURNING 1)"
                " SELECT (SELECT pg_catalog.count(*) FROM removed),"
                "        (SELECT enq_time FROM first), (SELECT msgid FROM first),"
                "        (SELECT g.enq_time FROM gone g ORDER BY g.enq_time DESC, g.msgid DESC LIMIT 1),"
                "        (SELECT g.msgid FROM gone g ORDER BY g.enq_time DESC, g.msgid DESC LIMIT 1),"
                // Where each consumer's first delivery is, in one order (names are distinct).
                "        (SELECT pg_catalog.array_agg(e.name ORDER BY e.name) FROM each e),"
                "        (SELECT pg_catalog.array_agg(e.enq_time ORDER BY e.name) FROM each e),"
                "        (SELECT pg_catalog.array_agg(e.msgid ORDER BY e.name) FROM each e)",
                d, m, by_priority ? " AND d.priority OPERATOR(pg_catalog.=) $2" : "", by_priority ? "d.priority, " : "",
                by_priority ? " AND m.priority OPERATOR(pg_catalog.=) $2" : "", by_priority ? "m.priority, " : "",
                sweep_limit);
        }
    }
}

const Oid ids_and_names[2] = {INT8ARRAYOID, TEXTARRAYOID};
const Oid ids_and_name[2] = {INT8ARRAYOID, TEXTOID};
const Oid sweep_params[4] = {INT4OID, INT4OID, TIMESTAMPTZOID, INT8OID};

const char* names_of(const Tables& t) {
    return psprintf("%s %s", t.messages, t.deliveries);
}

SPIPlanPtr plan_of(const Tables& t, int32 statement) {
    Build build{&t, statement};
    plan_cache::Request request{t.relid,
                                t.payload_type,
                                statement,
                                names_of(t),
                                statement == sweep_queue ? sweep_params : ids_and_names,
                                statement == sweep_queue ? 4 : 2,
                                CURSOR_OPT_GENERIC_PLAN,
                                build_sql,
                                &build};
    return plan_cache::plan(request);
}

// A rule's statement is prepared (analyzed) and run as the owner with search_path pinned, so that
// its names mean what they meant when the rule was checked.  Its parameters are a ParamListInfo
// (a statement prepared with a parser setup has no argument types of its own).
struct RuleRun {
    const Tables* tables;
    const char* rule;
    Datum args[2];
    int rc;
};

void run_rule(void* arg) {
    auto* r = static_cast<RuleRun*>(arg);
    Build build{r->tables, deliver_by_rule};
    condition::PlanRequest request{r->tables->relid, r->tables->payload_type, deliver_by_rule, names_of(*r->tables),
                                   r->rule,          "rule",                  ids_and_name,    2,
                                   CURSOR_OPT_GENERIC_PLAN, build_sql, &build};
    SPIPlanPtr plan = condition::prepared_plan(request);
    ParamListInfo params = makeParamList(2);
    for (int i = 0; i < 2; i++) {
        params->params[i].ptype = ids_and_name[i];
        params->params[i].pflags = PARAM_FLAG_CONST;
        params->params[i].isnull = false;
        params->params[i].value = r->args[i];
    }
    r->rc = SPI_execute_plan_with_paramlist(plan, params, false, 0);
}

Datum int8_array(const Datum* values, int n) {
    return PointerGetDatum(construct_array(const_cast<Datum*>(values), n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL,
                                           TYPALIGN_DOUBLE));
}

Datum text_array(const Datum* values, int n) {
    return PointerGetDatum(construct_array(const_cast<Datum*>(values), n, TEXTOID, -1, false, TYPALIGN_INT));
}

// Every statement here is planned for index scans (plan_cache.hpp).
void run(const Tables& t, SPIPlanPtr plan, Datum* args, int expected) {
    int level = plan_cache::index_plans_begin(false);
    int rc = base::execute_plan_as(t.owner, plan, args, nullptr, false, 0);
    plan_cache::index_plans_end(level);
    if (rc != expected) elog(ERROR, "aq: delivering messages failed: %s", SPI_result_code_string(rc));
}

[[noreturn]] void no_recipients(const Tables& t, Datum msgid) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("no recipients for message " INT64_FORMAT " in queue \"%s\"", DatumGetInt64(msgid), t.queue_name),
                    errdetail("The queue has no subscriber whose rule the message matches, and the message has no"
                              " recipient_list (ORA-24033 analogue)."),
                    errhint("Add a subscriber with aq.add_subscriber(), or give the message a recipient_list.")));
}

// The consumer names of a message's recipient_list (an aq.agent[]), each once, in the order of
// their first appearance (recipients.hpp); false when the list is NULL or empty.  A list of more
// than one dimension or of more than recipients::max_names elements is refused before it is
// taken apart.
bool recipients_of(HeapTupleHeader properties, Datum** names, int* count) {
    bool isnull;
    Datum list = GetAttributeByName(properties, "recipient_list", &isnull);
    if (isnull) return false;
    ArrayType* agents = DatumGetArrayTypeP(list);
    if (ARR_NDIM(agents) > 1)
        ereport(ERROR, (errcode(ERRCODE_ARRAY_SUBSCRIPT_ERROR),
                        errmsg("recipient_list must be a one-dimensional array, not of %d dimensions", ARR_NDIM(agents))));
    int listed = ArrayGetNItems(ARR_NDIM(agents), ARR_DIMS(agents));
    if (listed > recipients::max_names)
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("recipient_list has %d elements; a message may name at most %d recipients", listed,
                               recipients::max_names),
                        errhint("Make the consumers subscribers (aq.add_subscriber) with a rule instead.")));
    Datum* elements;
    bool* nulls;
    int n;
    deconstruct_array(agents, ARR_ELEMTYPE(agents), -1, false, TYPALIGN_DOUBLE, &elements, &nulls, &n);
    if (n == 0) return false;
    auto* given = static_cast<Datum*>(palloc(sizeof(Datum) * n));
    auto* spelled = static_cast<const char**>(palloc(sizeof(char*) * n));
    for (int i = 0; i < n; i++) {
        bool name_null = true;
        if (!nulls[i]) {
            HeapTupleHeader agent = DatumGetHeapTupleHeader(elements[i]);
            given[i] = GetAttributeByName(agent, "name", &name_null);
            bool address_null;
            (void)GetAttributeByName(agent, "address", &address_null);
            if (!address_null)
                ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                                errmsg("recipient_list element %d has an address", i + 1),
                                errdetail("Recipients are consumers of this queue; forwarding to another queue"
                                          " (propagation) is not supported."),
                                errhint("Pass aq.agent(name => ...) without address.")));
        }
        if (name_null)
            ereport(ERROR, (errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
                            errmsg("recipient_list element %d has no consumer name", i + 1)));
        char* consumer = TextDatumGetCString(given[i]);
        if (consumer[0] == '\0' || strlen(consumer) >= NAMEDATALEN)
            ereport(ERROR, (errcode(ERRCODE_INVALID_NAME),
                            errmsg("recipient_list element %d: consumer name \"%s\" must have 1 to 63 bytes", i + 1, consumer)));
        spelled[i] = consumer;
    }
    auto* scratch = static_cast<int*>(palloc(sizeof(int) * n));
    auto* keep = static_cast<int*>(palloc(sizeof(int) * n));
    *count = recipients::first_occurrences(spelled, n, scratch, keep);
    *names = given;
    for (int k = 0; k < *count; k++) given[k] = given[keep[k]];  // keep[k] >= k: in place
    return true;
}

// Where this transaction's next sweep of a queue (and priority) starts (see sweep()).
struct SweepKey {
    int32 queue_id;
    int32 priority;
};
struct Resume {
    TimestampTz enq_time;  // DT_NOEND: nothing is left to sweep in this transaction
    int64 msgid;
};
base::TxnLocalMap<SweepKey, Resume> resumes("aq sweep resumes");

// What this backend knows of a queue (enq_time order) since its last sweep of it: the first
// delivery that sweep found (the messages before it were gone), and where each consumer's first
// delivery was, moved on by this backend's own dequeues.  It holds while every removal committed
// since then was this backend's own (wakeup.hpp's removal counts) and for at most a second.
// While it holds and some consumer's first delivery is still at that point, no message can have
// lost its last delivery, and the sweep is skipped.  The knowledge can be wrong only toward an
// extra sweep: a consumer's first delivery may be earlier than remembered (a rollback gave
// deliveries back, another session of it skips a locked one), or a consumer missing from it may
// have new deliveries; both make the remembered point look passed.
constexpr int known_consumers = 32;
struct ConsumerFirst {
    char name[NAMEDATALEN];
    TimestampTz enq_time;
    int64 msgid;
    bool after;  // just after (enq_time, msgid): this backend took that delivery
};
struct Knowledge {
    bool valid;
    int32 queue_id;
    uint64 removals;
    TimestampTz swept_at;
    TimestampTz enq_time;  // the first delivery the sweep found
    int64 msgid;
    int count;
    ConsumerFirst consumers[known_consumers];
};
Knowledge knowledge[4];

// The last sweep of a queue after a dequeue that found nothing.
struct IdleSweep {
    int32 queue_id;
    TimestampTz at;
};
IdleSweep idle_sweeps[4];
IdleSweep priority_sweeps[4];  // the last sweep of every priority of a priority-ordered queue

Knowledge& knowledge_of(int32 queue_id) {
    return knowledge[static_cast<uint32>(queue_id) % lengthof(knowledge)];
}

// Whether the knowledge of the queue holds now (see Knowledge).
bool holds(Knowledge& k, int32 queue_id, TimestampTz now) {
    return k.valid && k.queue_id == queue_id && now - k.swept_at < USECS_PER_SEC &&
           wakeup::only_own_removals(queue_id, &k.removals);
}

int compare_position(TimestampTz a_time, int64 a_id, TimestampTz b_time, int64 b_id) {
    if (a_time != b_time) return a_time < b_time ? -1 : 1;
    return a_id == b_id ? 0 : (a_id < b_id ? -1 : 1);
}

// After `taken` by its consumer: whether a message may have lost its last delivery.
bool may_remove(Knowledge& k, const Taken& taken) {
    ConsumerFirst* mine = nullptr;
    for (int i = 0; i < k.count && !mine; i++)
        if (strcmp(k.consumers[i].name, taken.consumer) == 0) mine = &k.consumers[i];
    if (!mine) return true;  // a consumer with deliveries the sweep did not see
    if (compare_position(taken.enq_time, taken.msgid, mine->enq_time, mine->msgid) >= 0) {
        mine->enq_time = taken.enq_time;
        mine->msgid = taken.msgid;
        mine->after = true;
    }
    for (int i = 0; i < k.count; i++) {
        const ConsumerFirst& c = k.consumers[i];
        int cmp = compare_position(c.enq_time, c.msgid, k.enq_time, k.msgid);
        if (cmp < 0 || (cmp == 0 && !c.after)) return false;  // still holds the point
    }
    return true;
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


// Delivery rows by multi-insert: row j is message messages[which[j]] (id ids[which[j]]) to
// consumer names[j].  false (nothing written) when the delivery table is not as aq made it or
// the multi-insert path refuses it: the statements then write the rows.  The enqueuer needs no
// privilege on the delivery table (the statements run as its owner): none is checked here.
bool insert_rows(const Tables& t, const Datum* ids, const Message* messages, const int* which, const Datum* names,
                 int n) {
    Relation rel = table_open(t.delivery_relid, RowExclusiveLock);
    if (!has_delivery_shape(rel, t.payload_type) || base::multi_insert::refusal(rel) != nullptr) {
        table_close(rel, NoLock);  // the lock is kept to the end of the transaction, as usual
        return false;
    }
    compat::RangeTable rt = compat::relation_range_table(rel, RowExclusiveLock, ACL_INSERT, nullptr, nullptr);
    base::multi_insert::MultiInsert* m = base::multi_insert::begin(rel, rt, n);
    for (int j = 0; j < n; j++) {
        const Message& message = messages[which[j]];
        TupleTableSlot* slot = base::multi_insert::next_slot(m);
        Datum* v = slot->tts_values;
        bool* isnull = slot->tts_isnull;
        for (int c = 0; c < delivery_column_count; c++) isnull[c] = true;
        auto set = [&](int c, Datum value) {
            v[c] = value;
            isnull[c] = false;
        };
        set(dcol_msgid, ids[which[j]]);
        set(dcol_consumer_name, names[j]);
        set(dcol_q_id, Int32GetDatum(t.queue_id));
        set(dcol_priority, Int32GetDatum(message.priority));
        set(dcol_enq_time, TimestampTzGetDatum(message.enq_time));
        if (message.has_delay) set(dcol_delay, TimestampTzGetDatum(message.delay));
        if (message.has_expiration) set(dcol_expiration, TimestampTzGetDatum(message.expiration));
        set(dcol_retry_count, Int32GetDatum(0));
        if (message.exception_queue) set(dcol_exception_queue, message.exception_queue);
        base::multi_insert::add(m, slot, 64 + VARSIZE_ANY(DatumGetPointer(names[j])));
    }
    base::multi_insert::finish(m);
    table_close(rel, NoLock);
    CommandCounterIncrement();  // later commands of this transaction see the deliveries
    return true;
}

}  // namespace

bool has_delivery_shape(Relation rel, Oid payload_type) {
    static const struct {
        const char* name;
        Oid type;  // InvalidOid: the payload type
    } shape[delivery_column_count] = {
        {"msgid", INT8OID},           {"consumer_name", TEXTOID},    {"q_id", INT4OID},
        {"priority", INT4OID},        {"enq_time", TIMESTAMPTZOID}, {"delay", TIMESTAMPTZOID},
        {"expiration", TIMESTAMPTZOID}, {"retry_count", INT4OID},   {"exception_queue", TEXTOID},
        {"corrid", TEXTOID},          {"enq_uid", TEXTOID},          {"user_data", InvalidOid},
    };
    TupleDesc desc = RelationGetDescr(rel);
    if (rel->rd_rel->relkind != RELKIND_RELATION || desc->natts != delivery_column_count) return false;
    for (int i = 0; i < delivery_column_count; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        Oid expected = OidIsValid(shape[i].type) ? shape[i].type : payload_type;
        if (att->attisdropped || att->atttypid != expected || strcmp(NameStr(att->attname), shape[i].name) != 0)
            return false;
    }
    return true;
}

void deliver(const Tables& t, const Datum* ids, int count, ArrayType* properties, const Message* messages,
             TimestampTz enq_time) {
    Datum* properties_items = nullptr;
    bool* properties_nulls = nullptr;
    if (properties) {
        int n;
        deconstruct_array(properties, ARR_ELEMTYPE(properties), -1, false, TYPALIGN_DOUBLE, &properties_items,
                          &properties_nulls, &n);
    }
    // Messages for the subscribers, and (message, consumer) pairs of recipient lists.
    auto* subscribed = static_cast<Datum*>(palloc(sizeof(Datum) * count));
    auto* subscribed_at = static_cast<int*>(palloc(sizeof(int) * count));  // index into ids
    int nsubscribed = 0;
    Datum* listed_ids = nullptr;
    Datum* listed_names = nullptr;
    int* listed_at = nullptr;
    int nlisted = 0;
    int listed_capacity = 0;
    for (int i = 0; i < count; i++) {
        Datum* names;
        int n;
        if (!properties || properties_nulls[i] ||
            !recipients_of(DatumGetHeapTupleHeader(properties_items[i]), &names, &n)) {
            subscribed_at[nsubscribed] = i;
            subscribed[nsubscribed++] = ids[i];
            continue;
        }
        if (nlisted + n > listed_capacity) {
            listed_capacity = Max(2 * listed_capacity, nlisted + n + 16);
            listed_ids = static_cast<Datum*>(listed_ids ? repalloc(listed_ids, sizeof(Datum) * listed_capacity)
                                                        : palloc(sizeof(Datum) * listed_capacity));
            listed_names = static_cast<Datum*>(listed_names ? repalloc(listed_names, sizeof(Datum) * listed_capacity)
                                                            : palloc(sizeof(Datum) * listed_capacity));
            listed_at = static_cast<int*>(listed_at ? repalloc(listed_at, sizeof(int) * listed_capacity)
                                                    : palloc(sizeof(int) * listed_capacity));
        }
        for (int j = 0; j < n; j++) {
            listed_at[nlisted] = i;
            listed_ids[nlisted] = ids[i];
            listed_names[nlisted++] = names[j];
        }
    }
    // The rows for subscribers without a rule (consumer by consumer, in message order: each
    // consumer's index entries go in together) and for recipient lists, by multi-insert if
    // the enqueue said what it wrote.
    int* bulk_which = nullptr;
    Datum* bulk_names = nullptr;
    int nbulk = 0;
    auto bulk_add = [&](int which, Datum name) {
        bulk_which[nbulk] = which;
        bulk_names[nbulk++] = name;
    };
    auto bulk_reserve = [&](int more) {
        int capacity = nbulk + more;
        bulk_which = static_cast<int*>(bulk_which ? repalloc(bulk_which, sizeof(int) * capacity)
                                                  : palloc(sizeof(int) * capacity));
        bulk_names = static_cast<Datum*>(bulk_names ? repalloc(bulk_names, sizeof(Datum) * capacity)
                                                    : palloc(sizeof(Datum) * capacity));
    };
    bool plain_in_bulk = false;
    Datum* plain_names = nullptr;  // the subscribers without a rule
    int plain_count = 0;
    Datum* rule_subscribers = nullptr;  // ... and with one
    int rule_count = 0;

    if (nsubscribed > 0) {
        // The delivery table is locked before the subscribers are read: remove_subscriber's
        // SHARE lock then waits for this enqueue, or this enqueue for it (see its comment).
        LockRelationOid(t.delivery_relid, RowExclusiveLock);
        // Prepared once per backend (a single enqueue spent most of its fan-out planning it).
        static SPIPlanPtr subscribers_plan = nullptr;
        if (!subscribers_plan) {
            Oid types[1] = {INT4OID};
            SPIPlanPtr plan = SPI_prepare(
                "SELECT consumer_name, rule FROM aq.subscribers WHERE queue_id OPERATOR(pg_catalog.=) $1"
                " ORDER BY subscriber_id",
                1, types);
            if (!plan) elog(ERROR, "aq: preparing the subscriber lookup failed: %s", SPI_result_code_string(SPI_result));
            if (SPI_keepplan(plan) != 0) elog(ERROR, "aq: keeping the subscriber lookup failed");
            subscribers_plan = plan;
        }
        // Read with the latest snapshot, taken after the lock: a REPEATABLE READ or SERIALIZABLE
        // enqueue whose snapshot predates a remove_subscriber that committed meanwhile would
        // otherwise write deliveries for the removed consumer, which then held back the removal
        // of every later message of the queue for good.
        Datum args[1] = {Int32GetDatum(t.queue_id)};
        int rc = SPI_execute_snapshot(subscribers_plan, args, nullptr, GetLatestSnapshot(), InvalidSnapshot, true,
                                      false, 0);
        if (rc != SPI_OK_SELECT) elog(ERROR, "aq: reading the subscribers failed: %s", SPI_result_code_string(rc));
        int nsubscribers = static_cast<int>(SPI_processed);
        if (nsubscribers == 0) no_recipients(t, subscribed[0]);
        auto* plain = static_cast<Datum*>(palloc(sizeof(Datum) * nsubscribers));
        auto* rule_names = static_cast<Datum*>(palloc(sizeof(Datum) * nsubscribers));
        auto* rules = static_cast<char**>(palloc(sizeof(char*) * nsubscribers));
        int nplain = 0;
        int nrules = 0;
        for (int i = 0; i < nsubscribers; i++) {
            HeapTuple row = SPI_tuptable->vals[i];
            bool isnull;
            Datum name = datumCopy(SPI_getbinval(row, SPI_tuptable->tupdesc, 1, &isnull), false, -1);
            char* rule = SPI_getvalue(row, SPI_tuptable->tupdesc, 2);
            if (!rule) {
                plain[nplain++] = name;
            } else {
                rule_names[nrules] = name;
                rules[nrules++] = rule;
            }
        }
        SPI_freetuptable(SPI_tuptable);
        rule_subscribers = rule_names;
        rule_count = nrules;
        Datum subscribed_ids = int8_array(subscribed, nsubscribed);
        // (A fan-out too large for one allocation goes through the statement.)
        bool fits = static_cast<int64>(nplain) * nsubscribed + count <= static_cast<int64>(MaxAllocSize / sizeof(Datum));
        if (nplain > 0 && messages && fits) {
            bulk_reserve(nplain * nsubscribed);
            for (int p = 0; p < nplain; p++)
                for (int i = 0; i < nsubscribed; i++) bulk_add(subscribed_at[i], plain[p]);
            plain_in_bulk = true;
            plain_names = plain;
            plain_count = nplain;
        } else if (nplain > 0) {
            Datum args2[2] = {subscribed_ids, text_array(plain, nplain)};
            run(t, plan_of(t, deliver_to_names), args2, SPI_OK_INSERT);
            plain_names = plain;
            plain_count = nplain;
        }
        // Without a subscriber that takes everything, every message must match some rule: the
        // ids each rule matched are marked in a sorted copy.
        auto* sorted = static_cast<int64*>(palloc(sizeof(int64) * nsubscribed));
        for (int i = 0; i < nsubscribed; i++) sorted[i] = DatumGetInt64(subscribed[i]);
        std::sort(sorted, sorted + nsubscribed);
        auto* matched = static_cast<bool*>(palloc0(sizeof(bool) * nsubscribed));
        for (int r = 0; r < nrules; r++) {
            RuleRun rule{&t, rules[r], {subscribed_ids, rule_names[r]}, 0};
            int level = plan_cache::index_plans_begin(false);
            base::run_as(base::RunAs{t.owner}, run_rule, &rule);
            plan_cache::index_plans_end(level);
            if (rule.rc != SPI_OK_INSERT_RETURNING)
                elog(ERROR, "aq: delivering messages by rule failed: %s", SPI_result_code_string(rule.rc));
            if (nplain > 0) {  // every message has a recipient already: the rows matched do not matter
                SPI_freetuptable(SPI_tuptable);
                continue;
            }
            for (uint64 k = 0; k < SPI_processed; k++) {
                bool isnull;
                int64 id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &isnull));
                int64* at = std::lower_bound(sorted, sorted + nsubscribed, id);
                if (at != sorted + nsubscribed && *at == id) matched[at - sorted] = true;
            }
            SPI_freetuptable(SPI_tuptable);
        }
        if (nplain == 0)
            for (int i = 0; i < nsubscribed; i++)
                if (!matched[i]) no_recipients(t, Int64GetDatum(sorted[i]));
    }
    bool listed_in_bulk = nlisted > 0 && messages;
    if (listed_in_bulk) {
        bulk_reserve(nlisted);
        for (int j = 0; j < nlisted; j++) bulk_add(listed_at[j], listed_names[j]);
    }
    if (nbulk > 0 && !insert_rows(t, ids, messages, bulk_which, bulk_names, nbulk)) {
        listed_in_bulk = false;  // by statement, then
        if (plain_in_bulk) {
            Datum args2[2] = {int8_array(subscribed, nsubscribed), text_array(plain_names, plain_count)};
            run(t, plan_of(t, deliver_to_names), args2, SPI_OK_INSERT);
        }
    }
    if (nlisted > 0 && !listed_in_bulk) {
        Datum args[2] = {int8_array(listed_ids, nlisted), text_array(listed_names, nlisted)};
        run(t, plan_of(t, deliver_listed), args, SPI_OK_INSERT);
    }
    // After the rows, before the commit: the scan floor of every consumer that may have got one.
    auto lower = [&](const Datum* names, int n) {
        for (int i = 0; i < n; i++) scan_floor::lower(t.queue_id, enq_time, TextDatumGetCString(names[i]));
    };
    lower(plain_names, plain_count);
    lower(rule_subscribers, rule_count);
    lower(listed_names, nlisted);
}

// The queues whose sweep this transaction found contended (see sweep() in deliveries.hpp).
struct Contended {
    int32 ids[16];
    int count;
    void add(int32 id) {
        for (int i = 0; i < count; i++)
            if (ids[i] == id) return;
        if (count < int(lengthof(ids))) ids[count++] = id;  // more: the next contended sweep asks again
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
    auto due = [&](IdleSweep* sweeps) {
        IdleSweep& last = sweeps[static_cast<uint32>(t.queue_id) % lengthof(idle_sweeps)];
        if (last.queue_id == t.queue_id && clock - last.at < USECS_PER_SEC) return false;
        last = IdleSweep{t.queue_id, clock};
        return true;
    };
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
                Resume next{DT_NOEND, PG_INT64_MAX};
                if (removed >= sweep_limit)
                    next = Resume{request.last_enq_time, request.last_msgid};
                else if (request.found_first)
                    next = Resume{request.first_enq_time, request.first_msgid};
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
        int rc = SPI_execute_plan(plan, args, nullptr, false, 1);
        plan_cache::index_plans_end(level);
        if (rc != SPI_OK_SELECT) elog(ERROR, "aq: removing delivered messages failed: %s", SPI_result_code_string(rc));
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
        Resume next{DT_NOEND, PG_INT64_MAX};
        if (removed >= sweep_limit && !last_null)
            next = Resume{DatumGetTimestampTz(last_time), DatumGetInt64(last_id)};
        else if (!first_null)
            next = Resume{DatumGetTimestampTz(first_time), DatumGetInt64(first_id)};
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

char* keep_message_sql(const char* messages, const char* alias, const char* moving) {
    auto item = [&](const char* column) {
        char* kept = psprintf("COALESCE(%1$s.%2$s, (SELECT x.%2$s FROM ONLY %3$s x WHERE x.msgid OPERATOR(pg_catalog.=) %1$s.msgid))",
                              alias, column, messages);
        return moving ? psprintf(", %1$s = CASE WHEN %2$s THEN %3$s ELSE %4$s.%1$s END", column, moving, kept, alias)
                      : psprintf(", %s = %s", column, kept);
    };
    return psprintf("%s%s%s", item("corrid"), item("enq_uid"), item("user_data"));
}

bool available() {
    Oid queue_tables = get_relname_relid("queue_tables", get_namespace_oid("aq", false));
    return OidIsValid(queue_tables) && get_attnum(queue_tables, "delivery_relid") != InvalidAttrNumber;
}

void check_rule(Oid relid, const char* rule) {
    // Executable by every role (add_subscriber and alter_subscriber run as their caller): only a
    // role that manages the table may have it opened and locked.  Checked before any lock.
    if (!compat::owns_relation(relid, GetUserId()))
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied to check a rule on table %s", get_rel_name(relid)),
                        errdetail("Only a role that manages the queue table may give its subscribers rules.")));
    Node* raw = condition::parse(rule, "rule");
    condition::check(raw, rule, "rule", relid);
}

}  // namespace aq::queue::deliveries
