// See audience.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/table.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/params.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
}

#include <cstring>

#include "base/guard.hpp"
#include "base/run_as.hpp"
#include "queue/audience.hpp"
#include "queue/condition.hpp"
#include "queue/deliveries.hpp"
#include "queue/deliveries_statements.hpp"
#include "queue/scan_floor.hpp"

namespace aq::queue::audience {

Subscribers read_subscribers(int32 queue_id) {
    Oid types[1] = {INT4OID};
    Datum args[1] = {Int32GetDatum(queue_id)};
    PushActiveSnapshot(GetLatestSnapshot());
    int rc = SPI_execute_with_args("SELECT consumer_name, rule FROM aq.subscribers WHERE queue_id OPERATOR(pg_catalog.=) $1"
                                   " ORDER BY consumer_name COLLATE \"C\"",
                                   1, types, args, nullptr, true, 0);
    PopActiveSnapshot();
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: reading the subscribers failed: %s", SPI_result_code_string(rc));
    Subscribers s;
    s.count = int(SPI_processed);
    s.names = static_cast<char**>(palloc(sizeof(char*) * Max(s.count, 1)));
    s.rules = static_cast<char**>(palloc(sizeof(char*) * Max(s.count, 1)));
    for (int i = 0; i < s.count; i++) {
        s.names[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1);
        s.rules[i] = SPI_getvalue(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2);
        s.any_rule = s.any_rule || s.rules[i];
    }
    SPI_freetuptable(SPI_tuptable);
    return s;
}

namespace {

[[noreturn]] void no_recipients(const char* queue_name, Datum msgid, bool rules) {
    ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                    errmsg("no recipients for message " INT64_FORMAT " in queue \"%s\"", DatumGetInt64(msgid), queue_name),
                    rules ? errdetail("The queue has no subscriber whose rule the message matches, and the message has no"
                                      " recipient_list (ORA-24033 analogue).")
                          : errdetail("The queue has no subscriber, and the message has no recipient_list (ORA-24033 analogue)."),
                    errhint("Add a subscriber with aq.add_subscriber(), or give the message a recipient_list.")));
}

// A rule's statement: the positions (1-based) of the messages it holds for, over their columns as
// $1 .. $11 (arrays, one element per message, in column order); the rule stands at $12.
constexpr int rule_params = column_count;

char* rule_sql(const void*) {
    return psprintf(
        // The arrays in lockstep, in the select list (a composite payload stays one column there).
        "SELECT tab.ordinality FROM (SELECT pg_catalog.unnest($1) AS msgid, pg_catalog.unnest($2) AS q_id,"
        " pg_catalog.unnest($3) AS enq_time, pg_catalog.unnest($4) AS priority, pg_catalog.unnest($5) AS delay,"
        " pg_catalog.unnest($6) AS expiration, pg_catalog.unnest($7) AS corrid, pg_catalog.unnest($8) AS retry_count,"
        " pg_catalog.unnest($9) AS exception_queue, pg_catalog.unnest($10) AS enq_uid, pg_catalog.unnest($11) AS user_data,"
        " pg_catalog.generate_series(1::pg_catalog.int8, pg_catalog.cardinality($1)) AS ordinality) tab"
        " WHERE $%d",
        rule_params + 1);
}

struct RuleRun {
    const QueueInfo* q;
    const char* rule;
    const Oid* types;
    const Datum* args;
    int rc;
};

// As the owner, search_path pinned (audience.hpp, 1): the plan is analyzed and run there.
void run_rule(void* arg) {
    auto* r = static_cast<RuleRun*>(arg);
    condition::PlanRequest request{r->q->relid,     r->q->payload_type, deliveries::once_rule, r->q->qualified_table,
                                   r->rule,         "rule",             r->types,              rule_params,
                                   CURSOR_OPT_GENERIC_PLAN, rule_sql,   nullptr};
    // prepared_plan throws C++ exceptions; run_as's PG_TRY must see a PostgreSQL error instead.
    SPIPlanPtr plan = nullptr;
    base::entry_void([&] { plan = condition::prepared_plan(request); });
    ParamListInfo params = makeParamList(rule_params);
    for (int i = 0; i < rule_params; i++) {
        params->params[i].ptype = r->types[i];
        params->params[i].pflags = PARAM_FLAG_CONST;
        params->params[i].isnull = false;
        params->params[i].value = r->args[i];
    }
    r->rc = SPI_execute_plan_with_paramlist(plan, params, false, 0);
}

// The column arrays ($1 .. $11 of a rule's statement) of the messages which[0 .. n) (those without a
// recipient_list: a rule is never evaluated on another).
void message_columns(const QueueInfo& q, const BulkEnqueue& r, ArrayType* payloads, const Datum* msgids,
                     const int* which, int n, Oid* types, Datum* args) {
    static const Oid element_types[column_count - 1] = {INT8OID, INT4OID, TIMESTAMPTZOID, INT4OID, TIMESTAMPTZOID,
                                                        TIMESTAMPTZOID, TEXTOID, INT4OID, TEXTOID, TEXTOID};
    Datum enq_uid = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));
    auto* values = static_cast<Datum*>(palloc(sizeof(Datum) * column_count * n));
    auto* nulls = static_cast<bool*>(palloc(sizeof(bool) * column_count * n));
    for (int k = 0; k < n; k++)
        message_row(r, which[k], msgids[which[k]], enq_uid, values + k * column_count, nulls + k * column_count);
    auto* column = static_cast<Datum*>(palloc(sizeof(Datum) * n));
    auto* column_nulls = static_cast<bool*>(palloc(sizeof(bool) * n));
    int dims[1] = {n}, lbs[1] = {1};
    for (int c = 0; c < column_count - 1; c++) {
        for (int i = 0; i < n; i++) {
            column[i] = values[i * column_count + c];
            column_nulls[i] = nulls[i * column_count + c];
        }
        int16 len;
        bool byval;
        char align;
        get_typlenbyvalalign(element_types[c], &len, &byval, &align);
        args[c] = PointerGetDatum(construct_md_array(column, column_nulls, 1, dims, lbs, element_types[c], len, byval, align));
        types[c] = get_array_type(element_types[c]);
    }
    static_assert(col_user_data == column_count - 1);
    types[col_user_data] = get_array_type(q.payload_type);
    if (!OidIsValid(types[col_user_data]))
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("subscriber rules need an array type of the payload type %s", format_type_be(q.payload_type))));
    if (n == r.count) {
        args[col_user_data] = PointerGetDatum(payloads);
    } else {
        int16 len;
        bool byval;
        char align;
        get_typlenbyvalalign(q.payload_type, &len, &byval, &align);
        for (int k = 0; k < n; k++) column[k] = r.payloads[which[k]];
        args[col_user_data] = PointerGetDatum(construct_array(column, n, q.payload_type, len, byval, align));
    }
}

Datum text_array(char* const* names, int n) {
    auto* items = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
    for (int i = 0; i < n; i++) items[i] = CStringGetTextDatum(names[i]);
    return PointerGetDatum(construct_array(items, n, TEXTOID, -1, false, TYPALIGN_INT));
}

}  // namespace

void resolve(const QueueInfo& q, const char* queue_name, const BulkEnqueue& r, ArrayType* payloads, Resolved* out) {
    int n = r.count;
    *out = Resolved{};
    out->lists = static_cast<Datum*>(palloc0(sizeof(Datum) * n));
    out->nulls = static_cast<bool*>(palloc(sizeof(bool) * n));
    for (int i = 0; i < n; i++) {
        Datum* names = nullptr;
        int count = 0;
        bool listed = r.properties && !r.properties_null[i] &&
                      deliveries::recipients_of(DatumGetHeapTupleHeader(r.properties[i]), &names, &count);
        out->nulls[i] = !listed;
        if (listed) out->lists[i] = PointerGetDatum(construct_array(names, count, TEXTOID, -1, false, TYPALIGN_INT));
        out->listed = out->listed || listed;
        out->unlisted = out->unlisted || !listed;
    }
    if (!out->unlisted) return;
    // The insert's lock, before the subscribers are read: add_subscriber's SHARE lock waits for it.
    Relation rel = table_open(q.relid, RowExclusiveLock);
    Oid sequence = msgid_sequence(rel);
    table_close(rel, NoLock);  // kept to the end of the transaction, as the insert's
    Subscribers s = read_subscribers(q.queue_id);
    out->subscriber_count = s.count;
    out->subscribers = s.names;
    if (!s.any_rule) return;  // every subscriber's (NULL), or nobody's: reach() says so

    // The rules see the messages' msgids: drawn now, in order, for the insert to use.
    out->msgids = static_cast<Datum*>(palloc(sizeof(Datum) * n));
    for (int i = 0; i < n; i++) out->msgids[i] = Int64GetDatum(nextval_internal(sequence, false));
    auto* which = static_cast<int*>(palloc(sizeof(int) * n));  // the messages without a list
    int unlisted = 0;
    for (int i = 0; i < n; i++)
        if (out->nulls[i]) which[unlisted++] = i;
    Oid types[rule_params];
    Datum args[rule_params];
    message_columns(q, r, payloads, out->msgids, which, unlisted, types, args);

    // Per message without a list, the subscribers it is for: those without a rule, and those whose
    // rule holds on it (s.names is sorted: so is each list).
    auto* chosen = static_cast<char**>(palloc(sizeof(char*) * n * s.count));
    auto* counts = static_cast<int*>(palloc0(sizeof(int) * n));
    auto* holds = static_cast<bool*>(palloc(sizeof(bool) * n));
    for (int j = 0; j < s.count; j++) {
        for (int i = 0; i < n; i++) holds[i] = s.rules[j] == nullptr;
        if (s.rules[j]) {
            RuleRun run{&q, s.rules[j], types, args, 0};
            base::RunAs as;
            as.role = q.owner;
            base::run_as(as, run_rule, &run);
            if (run.rc != SPI_OK_SELECT)
                elog(ERROR, "aq: a subscriber's rule failed: %s", SPI_result_code_string(run.rc));
            for (uint64 k = 0; k < SPI_processed; k++) {
                bool isnull;
                int64 at = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[k], SPI_tuptable->tupdesc, 1, &isnull));
                if (!isnull && at >= 1 && at <= unlisted) holds[which[at - 1]] = true;
            }
            SPI_freetuptable(SPI_tuptable);
        }
        for (int i = 0; i < n; i++)
            if (holds[i] && out->nulls[i]) chosen[i * s.count + counts[i]++] = s.names[j];
    }
    for (int i = 0; i < n; i++) {
        if (!out->nulls[i]) continue;
        if (counts[i] == 0) no_recipients(queue_name, out->msgids[i], true);
        out->lists[i] = text_array(chosen + i * s.count, counts[i]);
        out->nulls[i] = false;
    }
    out->listed = true;
    out->unlisted = false;
}

void reach(const QueueInfo& q, const char* queue_name, const Resolved& resolved, const Datum* msgids, int count,
           TimestampTz enq_time, int32 lowest_priority) {
    // The consumers the lists name, each once (plain palloc'd data: PostgreSQL errors longjmp here).
    if (resolved.listed) {
        int total = 0;
        for (int i = 0; i < count; i++)
            if (!resolved.nulls[i]) total += ArrayGetNItems(1, ARR_DIMS(DatumGetArrayTypeP(resolved.lists[i])));
        auto* names = static_cast<char**>(palloc(sizeof(char*) * Max(total, 1)));
        int n = 0;
        for (int i = 0; i < count; i++) {
            if (resolved.nulls[i]) continue;
            Datum* items;
            int k;
            deconstruct_array(DatumGetArrayTypeP(resolved.lists[i]), TEXTOID, -1, false, TYPALIGN_INT, &items, nullptr, &k);
            for (int j = 0; j < k; j++) names[n++] = TextDatumGetCString(items[j]);
        }
        qsort(names, n, sizeof(char*), [](const void* a, const void* b) {
            return strcmp(*static_cast<char* const*>(a), *static_cast<char* const*>(b));
        });
        for (int j = 0; j < n; j++)
            if (j == 0 || strcmp(names[j - 1], names[j]) != 0) scan_floor::lower(q.queue_id, enq_time, names[j], lowest_priority);
    }
    if (!resolved.unlisted) return;
    if (resolved.subscriber_count == 0) {
        int first = 0;
        while (first < count - 1 && !resolved.nulls[first]) first++;  // the first for every subscriber
        no_recipients(queue_name, msgids[first], false);
    }
    for (int j = 0; j < resolved.subscriber_count; j++)
        scan_floor::lower(q.queue_id, enq_time, resolved.subscribers[j], lowest_priority);
}

void reach_by_statement(const QueueInfo& q, const char* queue_name, ArrayType* properties, TimestampTz enq_time,
                        Datum first_msgid) {
    if (properties) {
        int n;
        Datum* elements;
        bool* nulls;
        deconstruct_array(properties, ARR_ELEMTYPE(properties), -1, false, TYPALIGN_DOUBLE, &elements, &nulls, &n);
        for (int i = 0; i < n; i++) {
            Datum* names;
            int count;
            if (!nulls[i] && deliveries::recipients_of(DatumGetHeapTupleHeader(elements[i]), &names, &count))
                ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                                errmsg("recipient_list is not supported yet for queue \"%s\"", queue_name),
                                errdetail("Its queue table stores each message once and has triggers, rules, row-level"
                                          " security or columns of its own.")));
        }
    }
    Subscribers s = read_subscribers(q.queue_id);
    if (s.count == 0) no_recipients(queue_name, first_msgid, false);
    if (s.any_rule)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("subscriber rules are not supported yet for queue \"%s\"", queue_name),
                        errdetail("Its queue table stores each message once and has triggers, rules, row-level"
                                  " security or columns of its own.")));
    int32 lowest = q.priority_order ? lowest_priority(properties) : 0;
    for (int j = 0; j < s.count; j++) scan_floor::lower(q.queue_id, enq_time, s.names[j], lowest);
}

}  // namespace aq::queue::audience
