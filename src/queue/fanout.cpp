// The fan-out of a multi-consumer queue (deliveries.hpp, 1. Fan-out): deliver() writes the delivery
// rows of the messages an enqueue inserted, to their recipient lists or the queue's subscribers
// (by multi-insert or by statements as the owner, rules by their condition); what the enqueue and
// the subscriber functions use besides (has_delivery_shape, keep_message_sql, available,
// check_rule).  See deliveries.hpp for the protocol.
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

#include "base/multi_insert.hpp"
#include "base/guard.hpp"
#include "base/run_as.hpp"
#include "compat/acl.hpp"
#include "compat/executor.hpp"
#include "compat/proc.hpp"
#include "queue/condition.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/deliveries.hpp"
#include "queue/deliveries_statements.hpp"
#include "queue/recipients.hpp"
#include "queue/plan_cache.hpp"
#include "queue/scan_floor.hpp"

namespace aq::queue::deliveries {

namespace {

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
    // prepared_plan throws C++ exceptions; run_as's PG_TRY must see a PostgreSQL error instead.
    SPIPlanPtr plan = nullptr;
    base::entry_void([&] { plan = condition::prepared_plan(request); });
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
    int32 lowest = t.priority_order ? lowest_priority(properties) : 0;
    auto lower = [&](const Datum* names, int n) {
        for (int i = 0; i < n; i++) scan_floor::lower(t.queue_id, enq_time, TextDatumGetCString(names[i]), lowest);
    };
    if (t.priority_order) {  // the sweep's floor of each priority enqueued (scan_floor.hpp)
        int count;
        int32* priorities = distinct_priorities(properties, &count);
        for (int i = 0; i < count; i++) scan_floor::lower(t.queue_id, enq_time, scan_floor::PriorityKey(priorities[i]).text);
        pfree(priorities);
    }
    lower(plain_names, plain_count);
    lower(rule_subscribers, rule_count);
    lower(listed_names, nlisted);
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
