// fmgr entry points of the queue functions (DBMS_AQ): aq.enqueue, aq.enqueue_array,
// aq.dequeue, aq.dequeue_array.  Each decodes its arguments into plain data, validates
// them (src/queue/options.*), and calls the queue store (src/queue/queue_store.*).
// The SQL declarations are in sql/aq--*.sql; the C symbol is aq_<SQL name>.
extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "fmgr.h"
#include "funcapi.h"
#include "catalog/pg_authid.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
#include "utils/typcache.h"
}

#include "base/guard.hpp"
#include "base/spi.hpp"
#include "base/statement.hpp"
#include "pg/trigger.hpp"
#include "pg/wait_time.hpp"
#include "queue/options.hpp"
#include "queue/deliveries.hpp"
#include "queue/immediate.hpp"
#include "queue/queue_store.hpp"
#include "queue/ring.hpp"
#include "queue/time_manager.hpp"
#include "queue/wakeup.hpp"

namespace aq {

namespace {

using aq::Error;

const char* text_arg(FunctionCallInfo fcinfo, int n) {
    return PG_ARGISNULL(n) ? nullptr : text_to_cstring(PG_GETARG_TEXT_PP(n));
}

const char* text_field(HeapTupleHeader row, const char* field) {
    bool isnull;
    Datum d = GetAttributeByName(row, field, &isnull);
    return isnull ? nullptr : text_to_cstring(DatumGetTextPP(d));
}

// A text field that older aq objects' row type may not have (the library can be newer than
// the database's objects until ALTER EXTENSION aq UPDATE): nullptr then, as for NULL.
const char* optional_text_field(HeapTupleHeader row, const char* field) {
    TupleDesc desc = lookup_rowtype_tupdesc(HeapTupleHeaderGetTypeId(row), HeapTupleHeaderGetTypMod(row));
    bool present = false;
    for (int i = 0; i < desc->natts && !present; i++)
        present = !TupleDescAttr(desc, i)->attisdropped && strcmp(NameStr(TupleDescAttr(desc, i)->attname), field) == 0;
    ReleaseTupleDesc(desc);
    return present ? text_field(row, field) : nullptr;
}

// An interval in seconds (months as 30 days, as EXTRACT(epoch) does); nullopt for NULL.
std::optional<double> seconds_field(HeapTupleHeader row, const char* field) {
    bool isnull;
    Datum d = GetAttributeByName(row, field, &isnull);
    if (isnull) return std::nullopt;
    return interval_seconds(DatumGetIntervalP(d));
}

const char* queue_name_arg(FunctionCallInfo fcinfo) {
    const char* name = text_arg(fcinfo, 0);
    queue::check_name("queue_name", name);
    return name;
}

queue::DequeueOptions dequeue_options_arg(FunctionCallInfo fcinfo, int n) {
    queue::DequeueOptions o;
    if (PG_ARGISNULL(n)) return o;
    HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(n);
    o.consumer = text_field(row, "consumer_name");
    if (o.consumer) queue::check_name("consumer_name", o.consumer);
    o.mode = queue::parse_dequeue_mode(text_field(row, "dequeue_mode"));
    o.navigation = queue::parse_navigation(text_field(row, "navigation"));
    o.immediate = queue::parse_dequeue_visibility(text_field(row, "visibility"), o.mode);
    o.wait = queue::parse_wait(seconds_field(row, "wait"));
    bool isnull;
    Datum msgid = GetAttributeByName(row, "msgid", &isnull);
    if (!isnull) o.msgid = DatumGetInt64(msgid);
    o.correlation = text_field(row, "correlation");
    o.condition = optional_text_field(row, "deq_condition");
    return o;
}

// Checks the enqueue options; true for visibility => 'immediate' (queue/immediate.hpp).
bool check_enqueue_options(FunctionCallInfo fcinfo, int n) {
    if (PG_ARGISNULL(n)) return false;
    HeapTupleHeader row = PG_GETARG_HEAPTUPLEHEADER(n);
    bool immediate = queue::parse_enqueue_visibility(text_field(row, "visibility"));
    queue::check_delivery_mode(text_field(row, "delivery_mode"));
    return immediate;
}

// delay and expiration must not be negative (NULL: no delay / never expires).
void check_message_properties(HeapTupleHeader row, const char* argument) {
    for (const char* field : {"delay", "expiration"}) {
        std::optional<double> s = seconds_field(row, field);
        if (s && *s < 0)
            throw Error(sqlstate::invalid_parameter_value,
                        std::string(argument) + ": " + field + " must not be negative", {},
                        std::string("Use NULL for ") + (field[0] == 'd' ? "no delay." : "no expiration."));
    }
}

// One-dimensional, no NULL elements; returns the element count.
int check_array(ArrayType* array, const char* argument) {
    if (ARR_NDIM(array) > 1)
        throw Error(sqlstate::array_subscript_error, std::string(argument) + " must be one-dimensional",
                    std::to_string(ARR_NDIM(array)) + " dimensions were given.");
    if (array_contains_nulls(array))
        throw Error(sqlstate::null_value_not_allowed, std::string(argument) + " must not contain NULL elements");
    return ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
}

Datum enqueue_array_impl(FunctionCallInfo fcinfo) {
    const char* queue_name = queue_name_arg(fcinfo);
    if (PG_ARGISNULL(1)) throw Error(sqlstate::null_value_not_allowed, "payload_array must not be NULL");
    ArrayType* payloads = PG_GETARG_ARRAYTYPE_P(1);
    int count = check_array(payloads, "payload_array");
    ArrayType* properties = nullptr;
    if (!PG_ARGISNULL(2)) {
        properties = PG_GETARG_ARRAYTYPE_P(2);
        int n = ArrayGetNItems(ARR_NDIM(properties), ARR_DIMS(properties));
        if (ARR_NDIM(properties) > 1)
            throw Error(sqlstate::array_subscript_error, "message_properties_array must be one-dimensional");
        if (n != count)
            throw Error(sqlstate::array_subscript_error,
                        "message_properties_array has " + std::to_string(n) + " elements but payload_array has " +
                            std::to_string(count),
                        {}, "Pass one message_properties per payload, or NULL for defaults.");
        Datum* elems;
        bool* nulls;
        int nelems;
        deconstruct_array(properties, ARR_ELEMTYPE(properties), -1, false, TYPALIGN_DOUBLE, &elems, &nulls, &nelems);
        for (int i = 0; i < nelems; i++)
            if (!nulls[i]) check_message_properties(DatumGetHeapTupleHeader(elems[i]), "message_properties_array");
    }
    bool immediate = check_enqueue_options(fcinfo, 3);
    queue::EnqueueRequest request{queue_name, ARR_ELEMTYPE(payloads), payloads, properties};
    return PointerGetDatum(immediate ? queue::immediate::enqueue_array(request) : queue::enqueue_array(request));
}

Datum enqueue_impl(FunctionCallInfo fcinfo) {
    const char* queue_name = queue_name_arg(fcinfo);
    if (PG_ARGISNULL(1)) throw Error(sqlstate::null_value_not_allowed, "payload must not be NULL");
    Oid payload_type = get_fn_expr_argtype(fcinfo->flinfo, 1);
    int16 typlen;
    bool typbyval;
    char typalign;
    get_typlenbyvalalign(payload_type, &typlen, &typbyval, &typalign);
    Datum payload = PG_GETARG_DATUM(1);
    ArrayType* payloads = construct_array(&payload, 1, payload_type, typlen, typbyval, typalign);
    ArrayType* properties = nullptr;
    if (!PG_ARGISNULL(2)) {
        check_message_properties(PG_GETARG_HEAPTUPLEHEADER(2), "message_properties");
        Datum props = PG_GETARG_DATUM(2);
        properties = construct_array(&props, 1, get_fn_expr_argtype(fcinfo->flinfo, 2), -1, false, TYPALIGN_DOUBLE);
    }
    bool immediate = check_enqueue_options(fcinfo, 3);
    queue::EnqueueRequest request{queue_name, payload_type, payloads, properties};
    ArrayType* ids = immediate ? queue::immediate::enqueue_array(request) : queue::enqueue_array(request);
    Datum* elems;
    int n;
    deconstruct_array(ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &elems, nullptr, &n);
    return elems[0];
}

// ---- dequeue

struct TuplestoreSink {
    Tuplestorestate* store;
    TupleDesc desc;
};

void put_into_tuplestore(void* context, const queue::DequeuedRow& row) {
    auto* sink = static_cast<TuplestoreSink*>(context);
    Datum values[3] = {row.msgid, row.no_payload ? (Datum)0 : row.payload, row.properties};
    bool nulls[3] = {false, row.no_payload, false};
    tuplestore_putvalues(sink->store, sink->desc, values, nulls);
}

Datum dequeue_array_impl(FunctionCallInfo fcinfo) {
    const char* queue_name = queue_name_arg(fcinfo);
    Oid payload_type = get_fn_expr_argtype(fcinfo->flinfo, 1);
    std::optional<int64_t> array_size;
    if (!PG_ARGISNULL(2)) array_size = PG_GETARG_INT32(2);
    int32 size = queue::check_array_size(array_size);
    queue::DequeueOptions options = dequeue_options_arg(fcinfo, 3);

    InitMaterializedSRF(fcinfo, 0);
    auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    TuplestoreSink sink{rsinfo->setResult, rsinfo->setDesc};
    queue::DequeueRequest request{queue_name,           payload_type, size, &options, put_into_tuplestore, &sink,
                                  base::statement::commit_follows(fcinfo->flinfo)};
    if (options.immediate)
        queue::immediate::dequeue(request);
    else
        queue::dequeue(request);
    return (Datum)0;
}

struct SingleRowSink {
    MemoryContext context;
    int16 payload_len;
    bool payload_byval;
    Datum values[3];
    bool nulls[3];
};

void copy_single_row(void* context, const queue::DequeuedRow& row) {
    auto* sink = static_cast<SingleRowSink*>(context);
    MemoryContext old = MemoryContextSwitchTo(sink->context);
    sink->values[0] = row.msgid;  // int8 is by value
    sink->nulls[1] = row.no_payload;
    sink->values[1] = row.no_payload ? (Datum)0 : datumCopy(row.payload, sink->payload_byval, sink->payload_len);
    sink->values[2] = datumCopy(row.properties, false, -1);
    MemoryContextSwitchTo(old);
}

Datum dequeue_impl(FunctionCallInfo fcinfo) {
    const char* queue_name = queue_name_arg(fcinfo);
    Oid payload_type = get_fn_expr_argtype(fcinfo->flinfo, 1);
    queue::DequeueOptions options = dequeue_options_arg(fcinfo, 2);

    TupleDesc desc;
    if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
        throw Error(sqlstate::internal_error, "aq.dequeue must be called in a context that accepts a record");
    desc = BlessTupleDesc(desc);
    SingleRowSink sink;
    sink.context = CurrentMemoryContext;
    get_typlenbyval(payload_type, &sink.payload_len, &sink.payload_byval);
    queue::DequeueRequest request{queue_name, payload_type, 1, &options, copy_single_row, &sink,
                                  base::statement::commit_follows(fcinfo->flinfo)};
    sink.nulls[0] = sink.nulls[1] = sink.nulls[2] = false;
    if (options.immediate)
        queue::immediate::dequeue(request);
    else
        queue::dequeue(request);
    return HeapTupleGetDatum(heap_form_tuple(desc, sink.values, sink.nulls));
}

// aq.listen(agent_list aq.agent[], wait aq.wait_time) → aq.agent: the first agent whose queue has
// a message, returned as given.
constexpr int max_listen_agents = 1000;

Datum listen_impl(FunctionCallInfo fcinfo) {
    if (PG_ARGISNULL(0)) throw Error(sqlstate::null_value_not_allowed, "agent_list must not be NULL");
    ArrayType* list = PG_GETARG_ARRAYTYPE_P(0);
    int count = check_array(list, "agent_list");
    if (count == 0) throw Error(sqlstate::invalid_parameter_value, "agent_list must not be empty");
    if (count > max_listen_agents)
        throw Error(sqlstate::invalid_parameter_value,
                    "agent_list has " + std::to_string(count) + " agents",
                    "LISTEN takes at most " + std::to_string(max_listen_agents) + ".");
    Datum* elements;
    int n;
    deconstruct_array(list, ARR_ELEMTYPE(list), -1, false, TYPALIGN_DOUBLE, &elements, nullptr, &n);
    auto* agents = static_cast<queue::ListenAgent*>(palloc(sizeof(queue::ListenAgent) * n));
    for (int i = 0; i < n; i++) {
        HeapTupleHeader agent = DatumGetHeapTupleHeader(elements[i]);
        agents[i].name = text_field(agent, "name");
        agents[i].address = text_field(agent, "address");
        if (!agents[i].address)
            throw Error(sqlstate::null_value_not_allowed,
                        "agent " + std::to_string(i + 1) + " of agent_list has no address",
                        "An agent's address is the name of the queue to listen on.");
        queue::check_name("an agent's address (queue name)", agents[i].address);
    }
    queue::Wait wait = PG_ARGISNULL(1) ? queue::Wait{} : wait_of_micros(PG_GETARG_INT64(1));
    int found = queue::listen(agents, n, wait);
    return elements[found];
}

}  // namespace

}  // namespace aq

namespace aq {
namespace {
// aq._wake_waiters(queue_id), of the install scripts before 0.5.0 (the 0.5.0 script drops it;
// the symbol stays for the scripts that create it on the way).
Datum wake_waiters_impl(FunctionCallInfo fcinfo) {
    queue::wakeup::note_enqueue(PG_GETARG_INT32(0));
    PG_RETURN_VOID();
}

// aq._queues_changed(): the AFTER UPDATE OR DELETE row trigger of aq.queues.  A queue that is
// stopped, altered or dropped wakes its waiting dequeues at commit, so they notice.  A trigger
// function, so nobody can call it to wake (and spin) another role's waiters.
Datum queues_changed_impl(FunctionCallInfo fcinfo) {
    bool isnull;
    int32 queue_id = trigger_int4_column(fcinfo, "queue_id", "aq._queues_changed()", "aq.queues", &isnull);
    if (!isnull) queue::wakeup::note_enqueue(queue_id);
    return PointerGetDatum(nullptr);
}

// aq._check_rule(queue_table regclass, rule text): a subscriber's rule, as add_subscriber and
// alter_subscriber check it (deliveries.hpp).
Datum check_rule_impl(FunctionCallInfo fcinfo) {
    Oid relid = PG_GETARG_OID(0);
    const char* rule = text_arg(fcinfo, 1);
    base::call([&] { queue::deliveries::check_rule(relid, rule); });
    PG_RETURN_VOID();
}

// aq._rotate_segments(queue_table regclass, switch_due boolean): one rotation of a ring queue
// table now (ring.hpp); how many segments it truncated.
Datum rotate_segments_impl(FunctionCallInfo fcinfo) {
    Oid relid = PG_GETARG_OID(0);
    bool switch_due = PG_NARGS() > 1 && PG_GETARG_BOOL(1);
    int truncated = 0;
    base::call([&] {
        base::spi::connect();
        truncated = queue::ring::rotate_now(relid, switch_due).truncated;
        SPI_finish();
    });
    PG_RETURN_INT32(truncated);
}

// aq._queue_monitor(): the time manager's state per database (the aq.queue_monitor view).
Datum queue_monitor_impl(FunctionCallInfo fcinfo) {
    queue::time_manager::MonitorRow rows[queue::time_manager::monitor_max_rows];
    int count = 0;
    if (!queue::time_manager::monitor(rows, queue::time_manager::monitor_max_rows, &count))
        throw Error(sqlstate::object_not_in_prerequisite_state, "the time manager needs aq in shared_preload_libraries",
                    {}, "Add 'aq' to shared_preload_libraries and restart the server.");
    base::call([&] {
        InitMaterializedSRF(fcinfo, 0);
        auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
        bool read_all_stats = has_privs_of_role(GetUserId(), ROLE_PG_READ_ALL_STATS);
        auto timestamp = [](TimestampTz t, bool* null) {
            *null = t == 0;
            return TimestampTzGetDatum(t);
        };
        auto interval_ms = [](int64 ms) {
            auto* span = static_cast<Interval*>(palloc0(sizeof(Interval)));
            span->time = ms * 1000;
            return IntervalPGetDatum(span);
        };
        for (int i = 0; i < count; i++) {
            const auto& r = rows[i];
            const auto& t = r.tally;
            Datum values[14];
            bool nulls[14] = {};
            values[0] = ObjectIdGetDatum(r.database);
            values[1] = Int32GetDatum(r.pid);
            nulls[1] = r.pid == 0;
            values[2] = timestamp(r.next_due, &nulls[2]);
            values[3] = timestamp(t.last_round, &nulls[3]);
            values[4] = interval_ms(t.last_lag_ms);
            nulls[4] = t.last_round == 0;
            values[5] = interval_ms(t.max_lag_ms);
            nulls[5] = t.last_round == 0;
            values[6] = Int64GetDatum(int64(t.rounds));
            values[7] = Int64GetDatum(int64(t.expired));
            values[8] = Int64GetDatum(int64(t.woken));
            values[9] = Int64GetDatum(int64(t.truncated));
            values[10] = Int64GetDatum(int64(t.carried));
            values[11] = Int64GetDatum(int64(t.rotation_skips));
            values[12] = Int64GetDatum(int64(t.failures));
            // An error may quote a queue table's data: like another session's query, only to
            // members of pg_read_all_stats.
            nulls[13] = t.last_error[0] == 0 || !read_all_stats;
            values[13] = nulls[13] ? (Datum)0 : CStringGetTextDatum(t.last_error);
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
    return (Datum)0;
}

}  // namespace
}  // namespace aq

AQ_SQL_FUNCTION(aq_queue_monitor, aq::queue_monitor_impl)
AQ_SQL_FUNCTION(aq_rotate_segments, aq::rotate_segments_impl)
AQ_SQL_FUNCTION(aq_wake_waiters, aq::wake_waiters_impl)
AQ_SQL_FUNCTION(aq_queues_changed, aq::queues_changed_impl)
AQ_SQL_FUNCTION(aq_enqueue, aq::enqueue_impl)
AQ_SQL_FUNCTION(aq_enqueue_array, aq::enqueue_array_impl)
AQ_SQL_FUNCTION(aq_dequeue, aq::dequeue_impl)
AQ_SQL_FUNCTION(aq_dequeue_array, aq::dequeue_array_impl)
AQ_SQL_FUNCTION(aq_listen, aq::listen_impl)
AQ_SQL_FUNCTION(aq_check_rule, aq::check_rule_impl)
