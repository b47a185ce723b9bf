// See queue_store.hpp for the statements and the navigation protocol.
//
// Every function here calls PostgreSQL only inside base::call(), from frames that hold
// plain data; C++ errors are aq::Error, thrown after the PostgreSQL work they report.
extern "C" {
#include "postgres.h"
#include "common/hashfn.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "storage/bufmgr.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "tcop/dest.h"
#include "miscadmin.h"
#include "storage/proc.h"
#include "utils/acl.h"
#include "utils/resowner.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

#include <cstdio>
#include <cstring>
#include <string>

#include "base/run_as.hpp"
#include "base/guard.hpp"
#include "compat/proc.hpp"
#include "compat/relation.hpp"
#include "queue/bulk_dequeue.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/condition.hpp"
#include "queue/deliveries.hpp"
#include "queue/groups.hpp"
#include "queue/plan_cache.hpp"
#include "queue/queue_store.hpp"
#include "queue/retries.hpp"
#include "queue/rules.hpp"
#include "queue/scan_floor.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

namespace {

// ---------------------------------------------------------------- catalog lookup

constexpr int qualified_name_size = 2 * (2 * NAMEDATALEN + 2) + 2;  // "sch"."tab", quotes doubled

struct QueueInfo {
    int32 queue_id;
    bool enqueue_enabled;
    bool dequeue_enabled;
    Oid payload_type;
    Oid relid;  // InvalidOid when the storage table is gone
    char qualified_table[qualified_name_size];
    int32 queue_table_id;
    bool priority_order;         // sort_list priority,enq_time
    bool exception_queue;        // queue_type exception_queue
    Oid owner;                   // of the queue table
    int32 default_exception_id;  // the queue table's aq$_<name>_e, or 0
    bool multiple_consumers;     // messages reach consumers through the delivery table
    Oid delivery_relid;          // of a multi-consumer queue table; InvalidOid when gone
    char qualified_deliveries[qualified_name_size];
    bool grouped;                // message_grouping transactional (groups.hpp)
};

// The table a dequeue claims rows of: the delivery table of a multi-consumer queue table.
Oid claim_relid(const QueueInfo& q) {
    return q.multiple_consumers ? q.delivery_relid : q.relid;
}
const char* claim_table(const QueueInfo& q) {
    return q.multiple_consumers ? q.qualified_deliveries : q.qualified_table;
}

deliveries::Tables tables_of(const QueueInfo& q, const char* queue_name) {
    return deliveries::Tables{q.relid,      q.payload_type, q.owner,           q.queue_id,          q.priority_order,
                              queue_name,   q.qualified_table, q.qualified_deliveries, q.delivery_relid};
}

SPIPlanPtr lookup_plan = nullptr;     // by queue name
SPIPlanPtr lookup_id_plan = nullptr;  // by queue id

// The queue table is found by OID (never by name: a look-alike table created later
// under the same name is not the queue table); its current name builds the statements.
const char* const lookup_sql =
    "SELECT q.queue_id, q.enqueue_enabled, q.dequeue_enabled, t.payload_type::pg_catalog.oid, c.oid,"
    "       pg_catalog.quote_ident(n.nspname) OPERATOR(pg_catalog.||) '.'"
    "         OPERATOR(pg_catalog.||) pg_catalog.quote_ident(c.relname),"
    "       t.queue_table_id, t.sort_list OPERATOR(pg_catalog.=) 'priority,enq_time',"
    "       q.queue_type OPERATOR(pg_catalog.=) 'exception_queue', c.relowner,"
    "       (SELECT e.queue_id FROM aq.queues e WHERE e.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id"
    // aq._default_exception_queue's rule, inline: a call of that function costs more than the rest of the lookup.
    "           AND e.queue_name OPERATOR(pg_catalog.=) ('aq$_' OPERATOR(pg_catalog.||) t.queue_table OPERATOR(pg_catalog.||) '_e')),"
    "       q.ctid, q.xmin, t.ctid, t.xmin, %s"
    "  FROM aq.queues q"
    "  JOIN aq.queue_tables t ON t.queue_table_id OPERATOR(pg_catalog.=) q.queue_table_id"
    "  LEFT JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.relid::pg_catalog.oid"
    "  LEFT JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace%s"
    " WHERE %s";

// The lookup's multi-consumer columns, and where they come from (none before 0.6.0).
const char* const consumer_columns =
    "t.multiple_consumers, dc.oid,"
    " pg_catalog.quote_ident(dn.nspname) OPERATOR(pg_catalog.||) '.' OPERATOR(pg_catalog.||) pg_catalog.quote_ident(dc.relname),"
    " t.message_grouping OPERATOR(pg_catalog.=) 'transactional'";
const char* const consumer_joins =
    "  LEFT JOIN pg_catalog.pg_class dc ON dc.oid OPERATOR(pg_catalog.=) t.delivery_relid::pg_catalog.oid"
    "  LEFT JOIN pg_catalog.pg_namespace dn ON dn.oid OPERATOR(pg_catalog.=) dc.relnamespace";

// The library may be newer than the database's aq objects (a package upgraded before
// ALTER EXTENSION aq UPDATE): it works with those of 0.4.0 and later, without what came since
// (multi-consumer queue tables: deliveries.hpp), and says what to do with older ones rather than
// fail on a missing column.
bool catalog_has_consumers = false;  // set by prepare_lookup

void check_catalog_version() {
    Oid queues = get_relname_relid("queues", get_namespace_oid("aq", false));
    if (!OidIsValid(queues) || get_attnum(queues, "queue_type") == InvalidAttrNumber)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the aq objects of this database are older than the aq library"),
                        errdetail("The library is version 0.4.0 or later; aq.queues has no queue_type column."),
                        errhint("Run ALTER EXTENSION aq UPDATE.")));
    catalog_has_consumers = deliveries::available();
}

SPIPlanPtr prepare_lookup(const char* condition, Oid key_type) {
    check_catalog_version();
    Oid argtypes[1] = {key_type};
    const char* sql = catalog_has_consumers ? psprintf(lookup_sql, consumer_columns, consumer_joins, condition)
                                            : psprintf(lookup_sql, "false, NULL::pg_catalog.oid, NULL::pg_catalog.text, false", "",
                                                       condition);
    SPIPlanPtr plan = SPI_prepare(sql, 1, argtypes);
    if (!plan) elog(ERROR, "aq: SPI_prepare of the queue lookup failed: %s", SPI_result_code_string(SPI_result));
    SPI_keepplan(plan);
    return plan;
}

// The row versions of aq.queues and aq.queue_tables a lookup read.
struct CatalogRow {
    ItemPointerData tid;
    TransactionId xmin;
    Oid relid;        // of the catalog table: DROP/CREATE EXTENSION makes new ones
    Oid relfilenode;  // VACUUM FULL and CLUSTER move rows to new TIDs (keeping xmin) in a new file
};

bool read_lookup(SPIPlanPtr plan, Datum key, QueueInfo& info, CatalogRow* rows = nullptr);

// ---------------------------------------------------------------- lookup cache
//
// Every enqueue and dequeue looks its queue up by name, and the lookup statement cost as
// much as a one-message dequeue.  So the backend keeps the last lookups, per (name, role),
// with the aq.queues and aq.queue_tables row versions they were read from.  An entry is
// used only while both versions are still the visible ones under a fresh snapshot (same
// table and file, same TID, same xmin): start_queue, stop_queue, alter_queue and drop_queue
// update or delete the row, which leaves a new version or none, and the statement runs again.  The queue
// table's current name and owner come from the syscache at every use.

struct CachedLookup {
    bool used;
    Oid role;
    char queue_name[2 * NAMEDATALEN];
    QueueInfo info;
    CatalogRow rows[2];  // aq.queues, aq.queue_tables
};

constexpr int lookup_cache_size = 8;
CachedLookup lookup_cache[lookup_cache_size];
uint32 next_lookup_slot = 0;

const char* const catalog_tables[2] = {"queues", "queue_tables"};

bool row_still_current(Oid aq_namespace, const char* table, const CatalogRow& row, Snapshot snapshot) {
    Oid relid = get_relname_relid(table, aq_namespace);
    if (!OidIsValid(relid) || relid != row.relid) return false;
    Relation rel = table_open(relid, AccessShareLock);
    bool current = false;
    // heap_fetch raises an error for a block past the end (VACUUM may have truncated the table).
    if (compat::relation_file_number(rel) == row.relfilenode && ItemPointerGetBlockNumber(&row.tid) < RelationGetNumberOfBlocks(rel)) {
        HeapTupleData tuple;
        tuple.t_self = row.tid;
        Buffer buffer = InvalidBuffer;
        current = heap_fetch(rel, snapshot, &tuple, &buffer, false) &&
                  TransactionIdEquals(HeapTupleHeaderGetRawXmin(tuple.t_data), row.xmin);
        if (BufferIsValid(buffer)) ReleaseBuffer(buffer);
    }
    table_close(rel, NoLock);  // kept to the end of the transaction, as the statement's lock
    return current;
}

// The catalog tables' identity, for rows a lookup just read (it holds their locks).
void note_catalog_tables(CatalogRow* rows) {
    Oid aq_namespace = get_namespace_oid("aq", false);
    for (int i = 0; i < 2; i++) {
        rows[i].relid = get_relname_relid(catalog_tables[i], aq_namespace);
        Relation rel = table_open(rows[i].relid, AccessShareLock);
        rows[i].relfilenode = compat::relation_file_number(rel);
        table_close(rel, NoLock);
    }
}

// A table's current qualified name (and owner); false if it is gone.
bool current_name(Oid relid, char* qualified, Oid* owner) {
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (!HeapTupleIsValid(tuple)) return false;
    auto* form = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple));
    char* schema = get_namespace_name(form->relnamespace);
    bool ok = schema != nullptr;
    if (ok) {
        strlcpy(qualified, quote_qualified_identifier(schema, NameStr(form->relname)), qualified_name_size);
        if (owner) *owner = form->relowner;
    }
    ReleaseSysCache(tuple);
    return ok;
}

// The queue table's (and delivery table's) current name and owner; false if one is gone.
bool refresh_table(QueueInfo& info) {
    if (!current_name(info.relid, info.qualified_table, &info.owner)) return false;
    return !info.multiple_consumers || current_name(info.delivery_relid, info.qualified_deliveries, nullptr);
}

CachedLookup* cached_lookup(const char* queue_name) {
    if (strlen(queue_name) >= sizeof lookup_cache[0].queue_name) return nullptr;
    for (auto& entry : lookup_cache)
        if (entry.used && entry.role == GetUserId() && strcmp(entry.queue_name, queue_name) == 0) return &entry;
    return nullptr;
}

bool lookup_from_cache(const char* queue_name, QueueInfo& info) {
    CachedLookup* entry = cached_lookup(queue_name);
    if (!entry) return false;
    entry->used = false;  // until it is proven current: an error below must not leave it in use
    Oid aq_namespace = get_namespace_oid("aq", false);
    Snapshot snapshot = RegisterSnapshot(GetTransactionSnapshot());
    bool current = row_still_current(aq_namespace, catalog_tables[0], entry->rows[0], snapshot) &&
                   row_still_current(aq_namespace, catalog_tables[1], entry->rows[1], snapshot);
    UnregisterSnapshot(snapshot);
    if (!current) return false;
    info = entry->info;
    if (!refresh_table(info)) return false;
    entry->used = true;
    return true;
}

void remember_lookup(const char* queue_name, const QueueInfo& info, const CatalogRow* rows) {
    if (!OidIsValid(info.relid) || strlen(queue_name) >= sizeof lookup_cache[0].queue_name) return;
    CachedLookup* entry = cached_lookup(queue_name);
    if (!entry) entry = &lookup_cache[next_lookup_slot++ % lookup_cache_size];
    entry->used = true;
    entry->role = GetUserId();
    strlcpy(entry->queue_name, queue_name, sizeof entry->queue_name);
    entry->info = info;
    entry->rows[0] = rows[0];
    entry->rows[1] = rows[1];
}

// Requires an SPI connection.  Returns false when no queue has that name.
bool lookup(const char* queue_name, QueueInfo& info) {
    if (lookup_from_cache(queue_name, info)) return true;
    if (!lookup_plan) lookup_plan = prepare_lookup("q.queue_name OPERATOR(pg_catalog.=) $1", TEXTOID);
    CatalogRow rows[2];
    if (!read_lookup(lookup_plan, CStringGetTextDatum(queue_name), info, rows)) return false;
    note_catalog_tables(rows);
    remember_lookup(queue_name, info, rows);
    return true;
}

bool lookup_by_id(int32 queue_id, QueueInfo& info) {
    if (!lookup_id_plan) lookup_id_plan = prepare_lookup("q.queue_id OPERATOR(pg_catalog.=) $1", INT4OID);
    return read_lookup(lookup_id_plan, Int32GetDatum(queue_id), info);
}

bool read_lookup(SPIPlanPtr plan, Datum key, QueueInfo& info, CatalogRow* rows) {
    Datum args[1] = {key};
    // Not read-only: a fresh snapshot each time, so a waiting dequeue sees a stop_queue or
    // drop_queue that committed while it slept.
    int rc = SPI_execute_plan(plan, args, nullptr, false, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: queue lookup failed: %s", SPI_result_code_string(rc));
    if (SPI_processed == 0) {
        SPI_freetuptable(SPI_tuptable);
        return false;
    }

    HeapTuple row = SPI_tuptable->vals[0];
    TupleDesc desc = SPI_tuptable->tupdesc;
    bool isnull;
    info.queue_id = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
    info.enqueue_enabled = DatumGetBool(SPI_getbinval(row, desc, 2, &isnull));
    info.dequeue_enabled = DatumGetBool(SPI_getbinval(row, desc, 3, &isnull));
    info.payload_type = DatumGetObjectId(SPI_getbinval(row, desc, 4, &isnull));
    Datum relid = SPI_getbinval(row, desc, 5, &isnull);
    info.relid = isnull ? InvalidOid : DatumGetObjectId(relid);
    char* qualified = SPI_getvalue(row, desc, 6);
    strlcpy(info.qualified_table, qualified ? qualified : "", sizeof info.qualified_table);
    info.queue_table_id = DatumGetInt32(SPI_getbinval(row, desc, 7, &isnull));
    info.priority_order = DatumGetBool(SPI_getbinval(row, desc, 8, &isnull));
    info.exception_queue = DatumGetBool(SPI_getbinval(row, desc, 9, &isnull));
    Datum owner = SPI_getbinval(row, desc, 10, &isnull);
    info.owner = isnull ? InvalidOid : DatumGetObjectId(owner);
    Datum default_exception = SPI_getbinval(row, desc, 11, &isnull);
    info.default_exception_id = isnull ? 0 : DatumGetInt32(default_exception);
    info.multiple_consumers = DatumGetBool(SPI_getbinval(row, desc, 16, &isnull));
    Datum delivery_relid = SPI_getbinval(row, desc, 17, &isnull);
    info.delivery_relid = isnull ? InvalidOid : DatumGetObjectId(delivery_relid);
    char* deliveries = SPI_getvalue(row, desc, 18);
    strlcpy(info.qualified_deliveries, deliveries ? deliveries : "", sizeof info.qualified_deliveries);
    info.grouped = DatumGetBool(SPI_getbinval(row, desc, 19, &isnull));
    if (rows) {
        for (int i = 0; i < 2; i++) {
            rows[i].tid = *reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(row, desc, 12 + 2 * i, &isnull)));
            rows[i].xmin = DatumGetTransactionId(SPI_getbinval(row, desc, 13 + 2 * i, &isnull));
        }
    }
    SPI_freetuptable(SPI_tuptable);  // a waiting dequeue looks the queue up on every pass
    return true;
}

// What went wrong with a lookup, found inside base::call and thrown outside it.
enum class QueueProblem {
    none,
    unknown,
    storage_missing,
    wrong_payload,
    exception_enqueue,
    enqueue_disabled,
    dequeue_disabled,
    consumer_required,    // a multi-consumer queue's dequeue names no consumer
    consumer_not_allowed  // a single-consumer queue's dequeue names one
};

struct Problem {
    QueueProblem kind = QueueProblem::none;
    Oid expected_type = InvalidOid;
    Oid given_type = InvalidOid;
};

Problem check_queue(bool found, const QueueInfo& q, Oid payload_type, bool for_enqueue) {
    if (!found) return {QueueProblem::unknown};
    if (!OidIsValid(q.relid) || (q.multiple_consumers && !OidIsValid(q.delivery_relid)))
        return {QueueProblem::storage_missing};
    if (payload_type != q.payload_type) return {QueueProblem::wrong_payload, q.payload_type, payload_type};
    if (for_enqueue && q.exception_queue) return {QueueProblem::exception_enqueue};
    if (for_enqueue && !q.enqueue_enabled) return {QueueProblem::enqueue_disabled};
    if (!for_enqueue && !q.dequeue_enabled) return {QueueProblem::dequeue_disabled};
    return {};
}

// Whether a dequeue (or LISTEN) names a consumer as the queue needs: a multi-consumer queue's
// normal queue always, its exception queue optionally (NULL: any consumer's messages), a
// single-consumer queue never.
Problem check_consumer(const QueueInfo& q, const char* consumer) {
    if (q.multiple_consumers && !q.exception_queue && !consumer) return {QueueProblem::consumer_required};
    if (!q.multiple_consumers && consumer) return {QueueProblem::consumer_not_allowed};
    return {};
}

std::string type_name(Oid type) {
    char* name = nullptr;
    base::call([&] { name = format_type_be(type); });
    return name;
}

// queue_name as an SQL string literal, for hints the user can paste.
std::string sql_literal(const char* text) {
    std::string literal = "'";
    for (const char* c = text; *c; c++) literal += (*c == '\'') ? std::string("''") : std::string(1, *c);
    return literal + "'";
}

[[noreturn]] void throw_problem(const Problem& p, const char* queue_name, const char* argument) {
    std::string q = std::string("\"") + queue_name + "\"";
    switch (p.kind) {
        case QueueProblem::unknown:
            throw Error(sqlstate::undefined_object, "queue " + q + " does not exist", {},
                        "Create it with aq.create_queue(); queue names are case-sensitive.");
        case QueueProblem::storage_missing:
            throw Error("42P01", "the queue table of queue " + q + " does not exist",
                        "The queue is registered in aq.queues but its table was dropped outside aq.drop_queue_table.");
        case QueueProblem::wrong_payload:
            throw Error(sqlstate::datatype_mismatch,
                        std::string(argument) + " is of type " + type_name(p.given_type) + " but queue " + q +
                            " holds " + type_name(p.expected_type),
                        {},
                        std::string(argument) == "payload_type"
                            ? "Pass NULL::" + type_name(p.expected_type) + " as payload_type."
                            : "Cast the payload to " + type_name(p.expected_type) + ".");
        case QueueProblem::exception_enqueue:
            throw Error(sqlstate::object_not_in_prerequisite_state, "cannot enqueue to exception queue " + q,
                        "Messages reach an exception queue only when they expire in a queue of its queue table.",
                        "Enqueue to a normal queue.");
        case QueueProblem::enqueue_disabled:
            throw Error(sqlstate::object_not_in_prerequisite_state, "queue " + q + " is not enabled for enqueue", {},
                        "Start it with aq.start_queue(" + sql_literal(queue_name) + ").");
        case QueueProblem::dequeue_disabled:
            throw Error(sqlstate::object_not_in_prerequisite_state, "queue " + q + " is not enabled for dequeue", {},
                        "Start it with aq.start_queue(" + sql_literal(queue_name) + ").");
        case QueueProblem::consumer_required:
            throw Error(sqlstate::invalid_parameter_value,
                        "queue " + q + " is a multi-consumer queue: consumer_name must be given",
                        "Each subscriber or recipient dequeues its own messages (ORA-25231 analogue).",
                        "Pass aq.dequeue_options(consumer_name => ...), or aq.agent(name => ...) to LISTEN.");
        case QueueProblem::consumer_not_allowed:
            throw Error(sqlstate::invalid_parameter_value,
                        "queue " + q + " is a single-consumer queue: consumer_name must be NULL",
                        "Only a queue of a queue table created with multiple_consumers => true has consumers.",
                        "Leave consumer_name NULL.");
        case QueueProblem::none:
            break;
    }
    throw Error(sqlstate::internal_error, "aq: unexpected queue state");
}

// ---------------------------------------------------------------- statement cache
//
// Prepared statements per (queue table, payload type, statement), kept for the life of
// the backend.  The qualified table name is part of the entry: if a table is dropped
// and its OID reused, the stale plan is replaced rather than run.

enum Statement : int32 {
    enqueue_plain = 0,
    enqueue_with_properties = 1,
    next_delay = 2,       // when the next delayed message becomes visible
    expire_messages = 3,  // moves expired messages to their exception queues
    ready_candidates = 4,  // LISTEN: the messages a dequeue could take now, in the queue's order
    next_group = 5,        // a grouped queue table: the first group after $2 with a message ready at $3
    dequeue_base = 1024,  // + DequeueShape bits
};

// What a dequeue statement does; each combination is its own prepared statement.
enum DequeueShape : int32 {
    after_position = 1,   // navigation NEXT_MESSAGE: after this transaction's (or browse's) last message
    by_msgid = 2,
    by_correlation = 4,   // a LIKE pattern: custom-planned, so the planner sees its prefix
    mode_browse = 8,      // read only
    mode_locked = 16,     // read and lock (FOR UPDATE SKIP LOCKED); removed later by msgid
    priority_order = 32,  // sort_list priority,enq_time
    exception_queue = 64, // its messages are expired by definition: no delay/expiration filter
    correlation_exact = 128,  // a pattern without wildcards: corrid = $7, generic plan
    with_condition = 256,     // deq_condition: the placeholder $10 (condition.hpp), one plan per condition text
    by_consumer = 512,        // multi-consumer: the delivery rows of consumer $9
    multi_consumer = 1024,    // multi-consumer: claims delivery rows (deliveries.hpp), reads the message
    by_group = 2048,          // message_grouping transactional: the messages of group $10 (groups.hpp)
};

// The parameters of every dequeue statement.
// $1 queue, $2 now, $3 array size, $4 $5 $8 the position (enq_time, msgid, priority), $6 msgid,
// $7 correlation, $9 consumer, $10 transaction group.
constexpr int dequeue_param_count = 10;
const Oid dequeue_param_types[dequeue_param_count] = {INT4OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT8OID,
                                                      INT8OID, TEXTOID,        INT4OID, TEXTOID,        INT8OID};

// Oracle's correlation is a LIKE pattern (backslash escapes).  Without a wildcard it is a
// value: a generic plan finds it on the correlation index, with no planning per call.  A
// pattern gets a plan made for it, in which the planner turns a constant prefix into an
// index range (a generic plan cannot, and walks the queue in its sort order instead).
int32 correlation_shape(const char* pattern) {
    return pattern[strcspn(pattern, "%_\\")] == '\0' ? correlation_exact : by_correlation;
}

// aq.message_properties of a dequeued row, from the columns under prefix p ("d." ...) and the
// message's correlation (an expression).
// group: the grouped queue table's name, when the message is of group $10 (groups.hpp): the
// properties then say so, and whether no later message of the group is left.  outer: the
// qualification of the row's columns in that subquery (unqualified, they would be its own).
char* properties_sql(const char* p, const char* corrid, bool expired, const char* group = nullptr,
                     const char* outer = nullptr) {
    const char* tail = !catalog_has_consumers ? ""
                       : !group
                           ? ", NULL, NULL, NULL"
                           : psprintf(", NULL, $10::pg_catalog.text, NOT EXISTS (SELECT FROM ONLY %1$s x"
                                      " WHERE x.q_id OPERATOR(pg_catalog.=) $1"
                                      "   AND x.transaction_group OPERATOR(pg_catalog.=) $10"
                                      "   AND ROW(x.enq_time, x.msgid) OPERATOR(pg_catalog.>) ROW(%2$senq_time, %2$smsgid))",
                                      group, outer ? outer : p);
    return psprintf(
        "ROW(%1$spriority, %1$sdelay OPERATOR(pg_catalog.-) %1$senq_time,"
        "    %1$sexpiration OPERATOR(pg_catalog.-) COALESCE(%1$sdelay, %1$senq_time), %2$s,"
        "    %1$sretry_count, %1$sexception_queue, %1$senq_time, '%3$s'%4$s)::aq.message_properties",
        p, corrid, expired ? "expired" : "ready",
        // recipient_list, transaction_group, end_of_group (0.6.0)
        tail);
}

// The rules' SQL (rules.hpp), written into a StringInfo in the current memory context: plain
// data only, so an ereport on the way skips no C++ destructor.
struct SqlOut {
    StringInfo buffer;
    void append(const char* part) { appendStringInfoString(buffer, part); }
};
template <class Rule>
const char* rule_sql(const char* row, const char* now) {
    SqlOut out{makeStringInfo()};
    rules::write_sql<Rule>(out, row, now);
    return out.buffer->data;
}
const char* order_sql(const char* row, bool priority_order) {
    SqlOut out{makeStringInfo()};
    rules::write_order(out, row, priority_order);
    return out.buffer->data;
}
const char* after_sql(const char* row, bool priority_order) {  // after the position $8, $4, $5
    SqlOut out{makeStringInfo()};
    rules::write_after(out, row, priority_order, "$8", "$4", "$5");
    return out.buffer->data;
}

// The statements run with the caller's search_path, so every operator, function and collation
// in them is schema-qualified (OPERATOR(pg_catalog.x), pg_catalog."C"): nothing the caller's
// schemas define can stand in for them.  Every read, update and delete of the queue table says
// ONLY: a table that inherits from it (CREATE TABLE c () INHERITS (qt)) is not part of the
// queue, and its rows, whose q_id and ctid may equal a queue message's, are never read, moved or
// deleted through it.  Statements that claim, expire or wait read the claim table: the delivery
// table of a multi-consumer queue table (its rows have the same columns for that).
char* build_sql(const QueueInfo& q, int32 statement) {
    const char* t = q.qualified_table;
    const char* c = claim_table(q);
    // A grouped queue table's enqueues carry the transaction's group ($4 or $5: groups.hpp).
    if (statement == enqueue_plain)
        return psprintf(
            "INSERT INTO %s (q_id, enq_time, user_data%s)"
            " SELECT $1, $2, u%s FROM pg_catalog.unnest($3) AS u"
            " RETURNING msgid",
            t, q.grouped ? ", transaction_group" : "", q.grouped ? ", $4" : "");
    if (statement == enqueue_with_properties)
        // unnest() of a composite array expands to columns, so the payloads and their
        // properties are paired by position and inserted in input order.
        return psprintf(
            "INSERT INTO %s (q_id, enq_time, priority, delay, expiration, corrid, exception_queue, user_data%s)"
            " SELECT $1, $2, COALESCE((b.p).priority, 1),"
            "        $2 OPERATOR(pg_catalog.+) (b.p).delay,"
            "        $2 OPERATOR(pg_catalog.+) COALESCE((b.p).delay, '0') OPERATOR(pg_catalog.+) (b.p).expiration,"
            "        (b.p).correlation, (b.p).exception_queue, a.u%s"
            "   FROM (SELECT u, pg_catalog.row_number() OVER () AS n FROM pg_catalog.unnest($3) AS u) a"
            "   JOIN (SELECT p, pg_catalog.row_number() OVER () AS n FROM pg_catalog.unnest($4) AS p) b"
            "     ON a.n OPERATOR(pg_catalog.=) b.n"
            "  ORDER BY a.n"
            " RETURNING msgid",
            t, q.grouped ? ", transaction_group" : "", q.grouped ? ", $5" : "");
    if (statement == next_group)
        // The group's first message that is not passed offers it (rules.hpp, the head rule): h
        // is the first unexpired message of its group, and it can be taken now.
        return psprintf(
            "SELECT h.transaction_group FROM ONLY %1$s h WHERE h.q_id OPERATOR(pg_catalog.=) $1"
            "   AND h.transaction_group OPERATOR(pg_catalog.>) $2"
            "   AND %2$s"
            "   AND NOT EXISTS (SELECT FROM ONLY %1$s e WHERE e.q_id OPERATOR(pg_catalog.=) $1"
            "         AND e.transaction_group OPERATOR(pg_catalog.=) h.transaction_group"
            "         AND ROW(e.enq_time, e.msgid) OPERATOR(pg_catalog.<) ROW(h.enq_time, h.msgid)"
            "         AND NOT %3$s)"
            " ORDER BY h.q_id, h.transaction_group LIMIT 1",
            t, rule_sql<rules::OffersGroup>("h.", "$3"), rule_sql<rules::Passed>("e.", "$3"));
    if (statement == next_delay)
        return psprintf(
            "SELECT pg_catalog.min(delay) FROM ONLY %s"
            " WHERE q_id OPERATOR(pg_catalog.=) $1 AND NOT %s",
            c, rule_sql<rules::Ready>("", "$2"));
    if (statement == ready_candidates)
        // What a remove dequeue would claim (see the dequeue statement below), without claiming
        // it: ready, not expired (an exception queue's messages are expired by definition), not
        // holding an attempt not counted yet, in the queue's order; of consumer $4 (if not NULL)
        // in a multi-consumer queue table.  Whether another transaction is dequeuing one is for
        // the caller to see (row_free).
        return psprintf(
            "SELECT ctid FROM ONLY %s WHERE q_id OPERATOR(pg_catalog.=) $1%s"
            "   AND ($3 OR %s) AND %s"
            " ORDER BY q_id, %s%s",
            c,
            q.multiple_consumers ? " AND ($4::text IS NULL OR consumer_name OPERATOR(pg_catalog.=) $4)" : "",
            rule_sql<rules::Available>("", "$2"), rule_sql<rules::Settled>("", "$2"),
            q.multiple_consumers ? "consumer_name, " : "", order_sql("", q.priority_order));
    if (statement == expire_messages)
        // A message names its exception queue; if that is not an exception queue of the same
        // queue table, it goes to the queue table's default one (as Oracle's QMON does).  A
        // delivery takes its message with it (deliveries.hpp).
        return psprintf(
            "UPDATE ONLY %s m SET q_id = COALESCE((SELECT e.queue_id FROM aq.queues e"
            "   WHERE e.queue_name OPERATOR(pg_catalog.=) m.exception_queue"
            "     AND e.queue_table_id OPERATOR(pg_catalog.=) $1"
            "     AND e.queue_type OPERATOR(pg_catalog.=) 'exception_queue'), $2)%s"
            " WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY("
            "   SELECT x.ctid FROM ONLY %s x"
            "    WHERE x.q_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.queue_id FROM aq.queues n"
            "            WHERE n.queue_table_id OPERATOR(pg_catalog.=) $1"
            "              AND n.queue_type OPERATOR(pg_catalog.=) 'normal_queue'))"
            "      AND %s"
            "    LIMIT 10000 FOR UPDATE SKIP LOCKED))",
            c, q.multiple_consumers ? deliveries::keep_message_sql(t, "m") : "", c, rule_sql<rules::Passed>("x.", "$3"));

    // A dequeue.  Single-consumer: the queue table's rows (alias tab with a condition).
    // Multi-consumer: the delivery rows (d), joined to their messages (tab) where the
    // correlation, the condition or the payload is read.
    int32 shape = statement - dequeue_base;
    // An exception queue's delivery rows hold their messages (deliveries.hpp): they are read as
    // a single-consumer queue's rows are, from the delivery table.
    bool multi = (shape & multi_consumer) && !(shape & exception_queue);
    if ((shape & multi_consumer) && !multi) t = c;
    const char* p = multi ? "d." : "";    // the claimed rows' columns
    const char* m = multi ? "tab." : "";  // the message's own columns
    bool joined = multi && (shape & (by_correlation | correlation_exact | with_condition));
    const char* from = multi ? psprintf("%s d%s", c, joined ? psprintf(" JOIN ONLY %s tab ON tab.msgid OPERATOR(pg_catalog.=) d.msgid", t) : "")
                             : psprintf("%s%s", t, (shape & with_condition) ? " tab" : "");
    bool by_priority = shape & priority_order;
    const char* order = order_sql("", by_priority);
    const char* prefixed_order = order_sql(p, by_priority);
    const char* position = (shape & after_position) ? psprintf(" AND %s", after_sql(p, by_priority)) : "";
    char* where = psprintf(
        "%1$sq_id OPERATOR(pg_catalog.=) $1%2$s%3$s%4$s%5$s%6$s", p,
        (shape & by_consumer) ? psprintf(" AND %sconsumer_name OPERATOR(pg_catalog.=) $9", p) : "", position,
        (shape & by_msgid) ? psprintf(" AND %smsgid OPERATOR(pg_catalog.=) $6", p) : "",
        // In the C collation, as the correlation index is built: a LIKE prefix is then an index range.
        (shape & by_correlation)      ? psprintf(" AND %scorrid COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.~~) $7", m)
        : (shape & correlation_exact) ? psprintf(" AND %scorrid COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.=) $7", m)
                                      : "",
        // rules.hpp, 1 and 2 (an exception queue's messages are expired by definition).
        (shape & exception_queue) ? "" : psprintf(" AND %s", rule_sql<rules::Available>(p, "$2")));
    // The condition is analyzed in place of $10 (condition.hpp), as one expression: it cannot
    // reach beyond its AND.  The message table is tab there, as in Oracle's conditions.
    if (shape & with_condition) where = psprintf("%s AND $11", where);
    if (shape & by_group) {
        where = psprintf("%s AND %stransaction_group OPERATOR(pg_catalog.=) $10", where, p);
        // In order (rules.hpp, the head rule): nothing after a message of the group that blocks it.
        if (!(shape & mode_browse)) {
            const char* o = (shape & with_condition) ? "tab." : psprintf("%s.", t);
            where = psprintf(
                "%1$s AND NOT EXISTS (SELECT FROM ONLY %2$s e WHERE e.q_id OPERATOR(pg_catalog.=) $1"
                "   AND e.transaction_group OPERATOR(pg_catalog.=) $10"
                "   AND ROW(e.enq_time, e.msgid) OPERATOR(pg_catalog.<) ROW(%3$senq_time, %3$smsgid)"
                "   AND %4$s)",
                where, t, o, rule_sql<rules::BlocksGroup>("e.", "$2"));
        }
    }
    // A row version that holds an attempt not counted yet is not claimed (rules.hpp, 3).
    if (!(shape & mode_browse)) where = psprintf("%s AND %s", where, rule_sql<rules::Settled>(p, "$2"));
    // The order of the claim table's index (a delivery table's: per consumer).
    char* index_order = psprintf("%1$sq_id, %2$s%3$s", p,
                                 (shape & by_consumer) ? psprintf("%sconsumer_name, ", p)
                                 : (shape & by_group)  ? psprintf("%stransaction_group, ", p)
                                                       : "",
                                 prefixed_order);
    const char* group = (shape & by_group) ? q.qualified_table : nullptr;
    const char* lock = multi ? " FOR UPDATE OF d SKIP LOCKED" : " FOR UPDATE SKIP LOCKED";
    bool expired = shape & exception_queue;
    if (shape & (mode_browse | mode_locked)) {
        if (multi && !joined) from = psprintf("%s JOIN ONLY %s tab ON tab.msgid OPERATOR(pg_catalog.=) d.msgid", from, t);
        return psprintf("SELECT %1$smsgid, %2$suser_data, %3$s, %1$senq_time, %1$spriority, %1$sctid FROM ONLY %4$s"
                        " WHERE %5$s ORDER BY %6$s LIMIT $3%7$s",
                        p, multi ? "tab." : "",
                        properties_sql(p, psprintf("%scorrid", m), expired, group,
                                       multi ? nullptr : (shape & with_condition) ? "tab." : psprintf("%s.", t)),
                        from, where, index_order,
                        (shape & mode_locked) ? lock : "");
    }
    const char* returned =
        "msgid, priority, delay, expiration, retry_count, exception_queue, enq_time, ctid, corrid, user_data";
    // A delivery that carries its message (one moved to an exception queue, and maybe back by
    // hand: deliveries.hpp) is returned with that, whether or not the message is still there.
    if (multi)
        return psprintf(
            "WITH claimed AS MATERIALIZED ("
            "  SELECT d.ctid FROM ONLY %1$s WHERE %2$s ORDER BY %3$s LIMIT $3%4$s),"
            " removed AS ("
            "  DELETE FROM ONLY %5$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM claimed))"
            "  RETURNING %6$s)"
            " SELECT r.msgid, COALESCE(r.user_data, tab.user_data), %7$s, r.enq_time, r.priority, r.ctid"
            "   FROM removed r LEFT JOIN ONLY %8$s tab ON tab.msgid OPERATOR(pg_catalog.=) r.msgid ORDER BY %9$s",
            from, where, index_order, lock, c, returned, properties_sql("r.", "COALESCE(r.corrid, tab.corrid)", expired),
            q.qualified_table,
            order_sql("r.", shape & priority_order));
    return psprintf(
        "WITH claimed AS MATERIALIZED ("
        "  SELECT ctid FROM ONLY %s WHERE %s ORDER BY %s LIMIT $3 FOR UPDATE SKIP LOCKED),"
        " removed AS ("
        "  DELETE FROM ONLY %s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM claimed))"
        "  RETURNING msgid, user_data, priority, delay, expiration, corrid, retry_count, exception_queue, enq_time, ctid)"
        " SELECT msgid, user_data, %s, enq_time, priority, ctid FROM removed ORDER BY %s",
        from, where, index_order, t, properties_sql("", "corrid", expired, group, "removed."), order);
}

// The names a statement was built with (plan_cache.hpp).
const char* statement_names(const QueueInfo& q) {
    return q.multiple_consumers ? psprintf("%s %s", q.qualified_table, q.qualified_deliveries) : q.qualified_table;
}

struct BuildArgs {
    const QueueInfo* queue;
    int32 statement;
};

char* build_statement(const void* context) {
    const auto* b = static_cast<const BuildArgs*>(context);
    return build_sql(*b->queue, b->statement);
}

// Requires an SPI connection.
SPIPlanPtr statement_plan(const QueueInfo& q, int32 statement, Oid properties_array_type) {
    Oid argtypes[dequeue_param_count];
    int nargs;
    if (statement == enqueue_plain || statement == enqueue_with_properties) {
        Oid payload_array_type = get_array_type(q.payload_type);
        if (!OidIsValid(payload_array_type))
            elog(ERROR, "aq: payload type %s has no array type", format_type_be(q.payload_type));
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        argtypes[2] = payload_array_type;
        argtypes[3] = properties_array_type;
        nargs = statement == enqueue_plain ? 3 : 4;
        if (q.grouped) argtypes[nargs++] = INT8OID;  // the transaction group
    } else if (statement == next_delay) {
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        nargs = 2;
    } else if (statement == next_group) {
        argtypes[0] = INT4OID;
        argtypes[1] = INT8OID;
        argtypes[2] = TIMESTAMPTZOID;
        nargs = 3;
    } else if (statement == expire_messages) {
        argtypes[0] = INT4OID;
        argtypes[1] = INT4OID;
        argtypes[2] = TIMESTAMPTZOID;
        nargs = 3;
    } else if (statement == ready_candidates) {
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        argtypes[2] = BOOLOID;
        argtypes[3] = TEXTOID;
        nargs = 4;
    } else {
        memcpy(argtypes, dequeue_param_types, sizeof argtypes);
        nargs = dequeue_param_count;
    }
    // A generic plan: with LIMIT $3 and a growing queue, custom plans would be re-planned
    // on every call (their estimated cost never beats the generic one); the plan shape
    // (index scan, LockRows, Limit; TID scan) is right for every parameter value.  Except by
    // correlation: only a custom plan sees the pattern's constant prefix and turns it into a
    // range of the correlation index (planning costs well under a millisecond).
    bool custom = statement >= dequeue_base && ((statement - dequeue_base) & by_correlation);
    int options = custom ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN;
    if (statement == ready_candidates) options |= CURSOR_OPT_FAST_PLAN;  // read through a cursor, the first rows first
    BuildArgs build{&q, statement};
    plan_cache::Request request{q.relid, q.payload_type, statement,       statement_names(q), argtypes,
                                nargs,   options,        build_statement, &build};
    return plan_cache::plan(request);
}

// ---------------------------------------------------------------- condition plans

// A dequeue with a deq_condition runs its own statement (shape with_condition), one plan per
// condition text (condition.hpp).  Requires an SPI connection.
SPIPlanPtr condition_plan(const QueueInfo& q, int32 statement, const char* text) {
    BuildArgs sql{&q, statement};
    // Generic, as the other dequeue statements, except with a correlation pattern (see statement_plan).
    int options = ((statement - dequeue_base) & by_correlation) ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN;
    condition::PlanRequest request{q.relid,   q.payload_type,  statement, statement_names(q), text, "deq_condition",
                                   dequeue_param_types, dequeue_param_count, options, build_statement, &sql};
    return condition::prepared_plan(request);
}

// ---------------------------------------------------------------- navigation position
//
// NEXT_MESSAGE continues after the last message this backend got from the queue.  Two
// positions per queue: a consuming one (remove, locked), valid only in the transaction
// that set it (a rollback returns its messages, and a new transaction starts from the
// head), and a browse one that lasts for the session, like Oracle's browse cursor, until
// FIRST_MESSAGE starts it again from the head.  In a multi-consumer queue each consumer has
// its own positions.

struct Position {
    int32 queue_id;
    bool browse;
    char consumer[NAMEDATALEN];  // "" for a single-consumer queue
    LocalTransactionId lxid;  // consuming positions: the transaction that set it
    int32 priority;
    TimestampTz enq_time;
    int64 msgid;
    bool in_group;  // a grouped queue table: the position is in transaction group `group`
    int64 group;
};

constexpr int max_positions = 64;
Position positions[max_positions];
uint32 next_position_slot = 0;

bool live(const Position& p) {
    if (p.queue_id == 0) return false;
    return p.browse || (p.lxid == compat::my_local_xid() && p.lxid != InvalidLocalTransactionId);
}

Position* find_position(int32 queue_id, const char* consumer, bool browse) {
    for (auto& p : positions)
        if (p.queue_id == queue_id && p.browse == browse && live(p) && strcmp(p.consumer, consumer) == 0) return &p;
    return nullptr;
}

void remember_position(int32 queue_id, const char* consumer, bool browse, int32 priority, TimestampTz enq_time,
                       int64 msgid, const int64* group = nullptr) {
    Position* p = find_position(queue_id, consumer, browse);
    if (!p) {
        for (auto& candidate : positions)
            if (!live(candidate)) {
                p = &candidate;
                break;
            }
        if (!p) p = &positions[next_position_slot++ % max_positions];  // the oldest browse restarts
    }
    *p = Position{queue_id, browse, {}, compat::my_local_xid(), priority, enq_time, msgid, group != nullptr,
                  group ? *group : 0};
    strlcpy(p->consumer, consumer, sizeof p->consumer);
}

// ---------------------------------------------------------------- dequeue

struct ClaimArgs {
    const QueueInfo* queue;
    const DequeueRequest* request;
    const Position* after;  // nullptr: from the head of the queue
    const int64* group = nullptr;  // a grouped queue table: only this transaction group's messages
};

// The priorities of removed deliveries, for the sweep (deliveries.hpp): up to 8, more is "any".
struct Priorities {
    int32 values[8];
    int count;
    void note(int32 priority) {
        if (count > int(lengthof(values))) return;
        for (int i = 0; i < count; i++)
            if (values[i] == priority) return;
        if (count < int(lengthof(values))) values[count] = priority;
        count++;
    }
    int known() const { return count > int(lengthof(values)) ? -1 : count; }
};

// The executor hands each dequeued row straight to the request's sink (no SPI result
// set in between) and remembers the last row for the navigation position.  Called by
// PostgreSQL: plain data only, and nothing here throws.
struct SinkReceiver {
    DestReceiver pub;  // first member: PostgreSQL sees a DestReceiver*
    const DequeueRequest* request;
    Oid claiming_relid;  // remove and locked modes: the table whose rows are claimed (retries.hpp)
    bool sweeps;            // multi-consumer remove: the messages left without deliveries go (deliveries.hpp)
    Priorities priorities;  // ... of these priorities
    int rows;
    int32 last_priority;
    TimestampTz last_enq_time;
    int64 last_msgid;
};

bool receive_row(TupleTableSlot* slot, DestReceiver* self) {
    auto* r = reinterpret_cast<SinkReceiver*>(self);
    slot_getallattrs(slot);
    DequeuedRow row{slot->tts_values[0], slot->tts_values[1], slot->tts_values[2],
                    r->request->options->mode == DequeueMode::remove_nodata};
    r->request->sink(r->request->sink_context, row);
    r->rows++;
    r->last_msgid = DatumGetInt64(slot->tts_values[0]);
    if (r->sweeps) r->priorities.note(DatumGetInt32(slot->tts_values[4]));
    if (OidIsValid(r->claiming_relid)) retries::note_claimed(r->claiming_relid, reinterpret_cast<ItemPointer>(DatumGetPointer(slot->tts_values[5])));
    r->last_enq_time = DatumGetTimestampTz(slot->tts_values[3]);
    r->last_priority = DatumGetInt32(slot->tts_values[4]);
    return true;
}
// The statement's rows must have the types the result is declared with: the queue
// table's user_data column may have been altered since the queue table was registered.
void receiver_startup(DestReceiver* self, int, TupleDesc desc) {
    auto* r = reinterpret_cast<SinkReceiver*>(self);
    Oid payload = desc->natts >= 6 ? TupleDescAttr(desc, 1)->atttypid : InvalidOid;  // 7: multi-consumer remove
    if (payload != r->request->payload_type || TupleDescAttr(desc, 0)->atttypid != INT8OID ||
        TupleDescAttr(desc, 5)->atttypid != TIDOID ||
        TupleDescAttr(desc, 3)->atttypid != TIMESTAMPTZOID || TupleDescAttr(desc, 4)->atttypid != INT4OID)
        ereport(ERROR, (errcode(ERRCODE_DATATYPE_MISMATCH),
                        errmsg("the queue table of queue \"%s\" no longer matches its payload type %s",
                               r->request->queue_name, format_type_be(r->request->payload_type)),
                        errdetail("Its user_data column is of type %s.",
                                  OidIsValid(payload) ? format_type_be(payload) : "unknown"),
                        errhint("Queue tables must not be altered; recreate the queue table.")));
}
void receiver_shutdown(DestReceiver*) {}
void receiver_destroy(DestReceiver*) {}

// The bulk path's rows, to the request's sink (as receive_row does for the statement's).
struct BulkSinkState {
    const DequeueRequest* request;
    Oid relid;
    int32 last_priority;
    TimestampTz last_enq_time;
    int64 last_msgid;
    Priorities priorities;
};

void bulk_sink(void* context, const BulkDequeuedMessage& m) {
    auto* s = static_cast<BulkSinkState*>(context);
    s->request->sink(s->request->sink_context,
                     DequeuedRow{m.msgid, m.payload, m.properties, s->request->options->mode == DequeueMode::remove_nodata});
    s->last_msgid = DatumGetInt64(m.msgid);
    s->last_enq_time = m.enq_time;
    s->last_priority = m.priority;
    s->priorities.note(m.priority);
    retries::note_claimed(s->relid, const_cast<ItemPointer>(&m.tid));
}

// Rows written into a queue table without aq.enqueue (by hand, COPY, logical replication,
// an UPDATE that moves messages back from an exception queue) do not lower the scan floor
// (scan_floor.hpp).  So a NEXT_MESSAGE dequeue scans from the head instead, at most once a
// second per queue in this backend: such rows wait about a second at most, busy queue or not.
// At most once a second per key in this backend (a few entries; a forgotten one only
// means an early run).
struct OnceASecond {
    struct Entry {
        int32 key;
        TimestampTz at;
    };
    Entry last[16];
    bool due(int32 key) {
        TimestampTz now = GetCurrentTimestamp();
        Entry& slot = last[static_cast<uint32>(key) % 16];
        if (slot.key == key && now - slot.at < USECS_PER_SEC) return false;
        slot = Entry{key, now};
        return true;
    }
};

OnceASecond head_scans;
bool head_scan_due(int32 queue_id) {
    return head_scans.due(queue_id);
}

// Remove mode without msgid or correlation on a normal queue: bulk_dequeue.hpp, when the
// queue table allows it (-1 otherwise).
int claim_in_bulk(const ClaimArgs& a) {
    const DequeueOptions& o = *a.request->options;
    if (!removes(o.mode) || o.msgid || o.correlation || o.condition || a.queue->exception_queue) return -1;
    BulkDequeuePosition after{};
    if (a.after) after = BulkDequeuePosition{a.after->priority, a.after->enq_time, a.after->msgid};
    if (a.queue->multiple_consumers) {
        BulkSinkState state{a.request, a.queue->delivery_relid, 0, 0, 0, {}};
        // A head scan at most once a second per queue and consumer (the key is a hash: a
        // collision only moves one of them).
        int32 head_key = a.queue->queue_id ^
                         static_cast<int32>(hash_bytes(reinterpret_cast<const unsigned char*>(o.consumer), strlen(o.consumer)));
        BulkDeliveryDequeue request{a.queue->delivery_relid,
                                    a.queue->relid,
                                    a.queue->payload_type,
                                    a.queue->queue_id,
                                    o.consumer,
                                    a.queue->priority_order,
                                    a.request->array_size,
                                    o.navigation == Navigation::first_message || (!a.after && head_scan_due(head_key)),
                                    a.after ? &after : nullptr,
                                    bulk_sink,
                                    &state};
        int rows = bulk_dequeue_deliveries(request);
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
    BulkSinkState state{a.request, a.queue->relid, 0, 0, 0, {}};
    BulkDequeue request{a.queue->relid,
                        a.queue->payload_type,
                        a.queue->queue_id,
                        a.queue->priority_order,
                        a.request->array_size,
                        o.navigation == Navigation::first_message || (!a.after && head_scan_due(a.queue->queue_id)),
                        a.after ? &after : nullptr,
                        bulk_sink,
                        &state};
    int rows = a.group ? bulk_dequeue_group(request, *a.group) : bulk_dequeue(request);
    if (rows > 0) {
        remember_position(a.queue->queue_id, "", false, state.last_priority, state.last_enq_time, state.last_msgid,
                          a.group);
        wakeup::note_dequeue(a.queue->queue_id);  // a rollback brings them back: wake waiters then
        if (a.group) wakeup::note_release(a.queue->queue_id);  // the rest of the group, at commit
    }
    return rows;
}

// One dequeue statement (claim-and-delete, lock, or read); passes the rows to the sink.
// Requires SPI.
int claim(const ClaimArgs& a) {
    int in_bulk = claim_in_bulk(a);
    if (in_bulk >= 0) return in_bulk;
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
    set(2, Int64GetDatum(a.request->array_size));
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
    receiver.claiming_relid = o.mode == DequeueMode::browse ? InvalidOid : claim_relid(*a.queue);
    receiver.sweeps = a.queue->multiple_consumers && !a.queue->exception_queue && removes(o.mode);

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
    if (o.mode != DequeueMode::browse) retries::before_claim();
    int guc_level = plan_cache::index_plans_begin(shape & by_correlation);
    int rc = SPI_execute_plan_extended(plan, &options);
    plan_cache::index_plans_end(guc_level);
    // SPI reports a query whose rows went to another DestReceiver as SPI_OK_UTILITY.
    if (rc != SPI_OK_SELECT && rc != SPI_OK_UTILITY) elog(ERROR, "aq: dequeue statement failed: %s", SPI_result_code_string(rc));

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

// A grouped queue table's claim (groups.hpp): in the transaction's current group (NEXT_MESSAGE;
// *exhausted when nothing of it is left), or in the first group from the head (FIRST_MESSAGE,
// NEXT_MESSAGE without a current group) or after the current one (NEXT_TRANSACTION) that this
// transaction can lock and that has a message to take.  Requires SPI.
int claim_grouped(const QueueInfo& q, const DequeueRequest& r, bool* exhausted) {
    const DequeueOptions& o = *r.options;
    bool browse = o.mode == DequeueMode::browse;
    const Position* current = find_position(q.queue_id, "", browse);
    bool in_group = current && current->in_group;
    // A savepoint rolled back since releases the group's lock with what it took: then the group
    // may be another transaction's, and this one starts over.
    if (in_group && !browse && !groups::try_lock(q.relid, current->group)) in_group = false;
    if (o.navigation == Navigation::next_message && in_group) {
        int64 group = current->group;
        int rows = claim(ClaimArgs{&q, &r, current, &group});
        if (rows == 0) *exhausted = true;
        return rows;
    }
    int64 after = (o.navigation == Navigation::next_transaction && in_group) ? current->group : PG_INT64_MIN;
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        int64 group = 0;
        bool from_head = o.navigation == Navigation::first_message || head_scan_due(q.queue_id ^ 0x67727073);
        int found = queue::next_group(q.relid, q.payload_type, q.queue_id, after, from_head, &group);  // on the index
        if (found < 0) {
            SPIPlanPtr plan = statement_plan(q, next_group, InvalidOid);
            Datum args[3] = {Int32GetDatum(q.queue_id), Int64GetDatum(after), TimestampTzGetDatum(GetCurrentTimestamp())};
            int rc = SPI_execute_plan(plan, args, nullptr, false, 1);
            if (rc != SPI_OK_SELECT)
                elog(ERROR, "aq: finding the next transaction group failed: %s", SPI_result_code_string(rc));
            found = SPI_processed > 0 ? 1 : 0;
            bool isnull;
            if (found) group = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
            SPI_freetuptable(SPI_tuptable);
        }
        if (!found) return 0;
        bool taken = false;
        if (browse || groups::try_lock(q.relid, group, &taken)) {
            int rows = claim(ClaimArgs{&q, &r, nullptr, &group});
            if (rows > 0) return rows;
            if (taken) groups::unlock(q.relid, group);  // nothing of it taken: not held on
        }
        after = group;  // held by another transaction, or nothing of it to take
    }
}

// Runs a prepared statement as the queue table's owner (base/run_as.hpp: search_path pinned,
// restricted security context, every setting restored): for the system's own changes (QMON's,
// in Oracle), which the caller's grants do not cover.
int execute_as_owner(const QueueInfo& q, SPIPlanPtr plan, Datum* args) {
    return base::execute_plan_as(q.owner, plan, args, nullptr, false, 0);
}

// Moves the expired messages of the queue table's normal queues to their exception
// queues (Oracle's QMON does this in the background; aq does it when an exception queue
// is consumed from, never in browse or a READ ONLY transaction).  A system action: it runs
// as the queue table's owner through base::run_as, and only for a caller who may dequeue
// (DELETE) from the table.  Requires SPI.
void expire_messages_of(const QueueInfo& q) {
    if (q.default_exception_id == 0 || !OidIsValid(q.owner)) return;
    if (pg_class_aclcheck(claim_relid(q), GetUserId(), ACL_DELETE) != ACLCHECK_OK) return;
    SPIPlanPtr plan = statement_plan(q, expire_messages, InvalidOid);
    Datum args[3] = {Int32GetDatum(q.queue_table_id), Int32GetDatum(q.default_exception_id),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
    int rc = execute_as_owner(q, plan, args);
    if (rc != SPI_OK_UPDATE) elog(ERROR, "aq: moving expired messages failed: %s", SPI_result_code_string(rc));
    if (SPI_processed > 0) wakeup::note_enqueue(q.queue_id);
}

// Normal queues move their table's expired messages too, so that they do not pile up at the
// head of the queue when nobody reads the exception queue: at most once a second per queue
// table in each backend.
OnceASecond expiry_sweeps;
bool expiry_sweep_due(const QueueInfo& q) {
    return expiry_sweeps.due(q.queue_table_id);
}

// When the next delayed message of the queue becomes visible (0: none is delayed), so
// that a waiting dequeue wakes for it.  For an exception queue: when the next message
// of its queue table expires.  Requires SPI.
TimestampTz next_visible_time(const QueueInfo& q) {
    if (q.exception_queue) return 0;  // see dequeue(): the exception queue polls its table's expirations
    SPIPlanPtr plan = statement_plan(q, next_delay, InvalidOid);
    Datum args[2] = {Int32GetDatum(q.queue_id), TimestampTzGetDatum(GetCurrentTimestamp())};
    int rc = SPI_execute_plan(plan, args, nullptr, false, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: next delay lookup failed: %s", SPI_result_code_string(rc));
    bool isnull = true;
    Datum next = SPI_processed ? SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull) : 0;
    TimestampTz result = isnull ? 0 : DatumGetTimestampTz(next);
    SPI_freetuptable(SPI_tuptable);
    return result;
}

// The message ids as int8[], built in the caller's memory context (SPI's goes away).
ArrayType* msgid_array(Datum* ids, int count, MemoryContext context) {
    MemoryContext previous = MemoryContextSwitchTo(context);
    ArrayType* array = construct_array(ids, count, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE);
    MemoryContextSwitchTo(previous);
    return array;
}

// The multi-insert path (bulk_enqueue.hpp); false if the table is not eligible.
bool enqueue_in_bulk(const EnqueueRequest& r, const QueueInfo& q, TimestampTz enq_time, int count,
                     MemoryContext result_context, ArrayType** result, deliveries::Message* messages) {
    int16 typlen;
    bool typbyval;
    char typalign;
    get_typlenbyvalalign(r.payload_type, &typlen, &typbyval, &typalign);
    Datum* payloads;
    int n;
    deconstruct_array(r.payloads, r.payload_type, typlen, typbyval, typalign, &payloads, nullptr, &n);
    Datum* properties = nullptr;
    bool* properties_null = nullptr;
    if (r.properties)
        deconstruct_array(r.properties, ARR_ELEMTYPE(r.properties), -1, false, TYPALIGN_DOUBLE, &properties,
                          &properties_null, &n);
    Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * count));
    BulkEnqueue request{q.relid,           q.payload_type, q.queue_id, enq_time, count, payloads, properties,
                        properties_null, ids,            messages};
    int64 group = 0;
    if (q.grouped) {
        group = groups::transaction_group(q.relid);
        request.group = &group;
    }
    if (!bulk_enqueue(request)) return false;
    *result = msgid_array(ids, count, result_context);
    return true;
}

}  // namespace

// A multi-consumer queue's messages just inserted reach their recipients (deliveries.hpp).
// messages: what the multi-insert path wrote (nullptr: the statement wrote them).
void deliver_messages(const EnqueueRequest& r, const QueueInfo& q, ArrayType* ids, const deliveries::Message* messages,
                      TimestampTz enq_time) {
    Datum* items;
    int n;
    deconstruct_array(ids, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &items, nullptr, &n);
    deliveries::deliver(tables_of(q, r.queue_name), items, n, r.properties, messages, enq_time);
}

// ---------------------------------------------------------------- public

void forget_positions() {
    for (auto& p : positions)
        if (!p.browse) p.lxid = InvalidLocalTransactionId;
}

ArrayType* enqueue_array(const EnqueueRequest& r) {
    ArrayType* result = nullptr;
    Problem problem;
    MemoryContext caller_context = CurrentMemoryContext;
    base::call([&] {
        int count = ArrayGetNItems(ARR_NDIM(r.payloads), ARR_DIMS(r.payloads));
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
        QueueInfo q;
        problem = check_queue(lookup(r.queue_name, q), q, r.payload_type, true);
        if (problem.kind != QueueProblem::none || count == 0) {
            SPI_finish();
            if (count == 0 && problem.kind == QueueProblem::none)
                result = construct_empty_array(INT8OID);
            return;
        }
        TimestampTz enq_time = GetCurrentTimestamp();
        auto* messages = q.multiple_consumers
                             ? static_cast<deliveries::Message*>(palloc(sizeof(deliveries::Message) * count))
                             : nullptr;
        if (enqueue_in_bulk(r, q, enq_time, count, caller_context, &result, messages)) {
            if (q.multiple_consumers) deliver_messages(r, q, result, messages, enq_time);
            scan_floor::lower(q.queue_id, enq_time);  // after the index entries, before the commit
            if (q.grouped) scan_floor::lower(q.queue_id, groups::transaction_group(q.relid), groups::floor_key);
            wakeup::note_enqueue(q.queue_id);
            SPI_finish();
            return;
        }

        // The queue table has triggers, rules, RLS or columns of its own: one INSERT statement.
        Oid properties_array_type = r.properties ? ARR_ELEMTYPE(r.properties) : InvalidOid;
        if (OidIsValid(properties_array_type)) properties_array_type = get_array_type(properties_array_type);
        SPIPlanPtr plan =
            statement_plan(q, r.properties ? enqueue_with_properties : enqueue_plain, properties_array_type);
        Datum args[5] = {Int32GetDatum(q.queue_id), TimestampTzGetDatum(enq_time),
                         PointerGetDatum(r.payloads), PointerGetDatum(r.properties), (Datum)0};
        if (q.grouped) args[r.properties ? 4 : 3] = Int64GetDatum(groups::transaction_group(q.relid));
        int rc = SPI_execute_plan(plan, args, nullptr, false, 0);
        if (rc != SPI_OK_INSERT_RETURNING) elog(ERROR, "aq: enqueue failed: %s", SPI_result_code_string(rc));
        if (SPI_processed != static_cast<uint64>(count))
            elog(ERROR, "aq: enqueue inserted " UINT64_FORMAT " of %d messages", SPI_processed, count);

        Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * count));
        bool isnull;
        for (int i = 0; i < count; i++) ids[i] = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        result = msgid_array(ids, count, caller_context);
        if (q.multiple_consumers) deliver_messages(r, q, result, nullptr, enq_time);

        scan_floor::lower(q.queue_id, enq_time);  // after the index entries, before the commit
        if (q.grouped) scan_floor::lower(q.queue_id, groups::transaction_group(q.relid), groups::floor_key);
        wakeup::note_enqueue(q.queue_id);
        SPI_finish();
    });
    if (problem.kind != QueueProblem::none) throw_problem(problem, r.queue_name, "payload");
    return result;
}

int dequeue(const DequeueRequest& r) {
    const DequeueOptions& o = *r.options;
    int delivered = 0;
    bool cannot_wait = false;  // REPEATABLE READ / SERIALIZABLE: new commits stay invisible
    bool exhausted = false;    // NEXT_MESSAGE at the end of the transaction group (groups.hpp)
    const char* refused = nullptr;  // an option the queue table does not take
    Problem problem;
    base::call([&] {
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
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
        TimestampTz deadline = 0;
        if (!o.wait.forever)
            deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), static_cast<int64>(o.wait.seconds * 1000.0));
        bool browse = o.mode == DequeueMode::browse;
        bool by_position = o.navigation == Navigation::next_message && !o.msgid;
        // Each pass allocates its parameters here; reset every pass, so a long wait with
        // many wake-ups uses constant memory.
        MemoryContext pass_context = AllocSetContextCreate(CurrentMemoryContext, "aq dequeue pass", ALLOCSET_SMALL_SIZES);
        MemoryContext outer_context = MemoryContextSwitchTo(pass_context);
        for (bool first_pass = true;; first_pass = false) {
            MemoryContextReset(pass_context);
            uint64 seen = wakeup::generation(q.queue_id);  // before the scan: see wakeup.hpp
            if (!first_pass) {
                // The queue may have been stopped or dropped while this dequeue slept.
                problem = check_queue(lookup(r.queue_name, q), q, r.payload_type, false);
                if (problem.kind != QueueProblem::none) break;
            }
            // Browse is read-only, and so is everything a READ ONLY transaction or a hot standby
            // calls: the expiry move is left to the next consuming dequeue (or sweep).
            if (!browse && !XactReadOnly && (q.exception_queue || (first_pass && expiry_sweep_due(q))))
                expire_messages_of(q);
            if (grouped) {
                delivered = claim_grouped(q, r, &exhausted);
                if (exhausted) break;
            } else {
                const Position* after =
                    by_position ? find_position(q.queue_id, o.consumer ? o.consumer : "", browse) : nullptr;
                delivered = claim(ClaimArgs{&q, &r, after});
                // Removing: messages may have come back (or arrived with a higher priority) before
                // the position, so look from the head once more before waiting.  Browse and
                // locked walk forward only: from the head they would return the same messages.
                if (delivered == 0 && after && removes(o.mode)) delivered = claim(ClaimArgs{&q, &r, nullptr});
            }
            if (delivered > 0) break;
            if (IsolationUsesXactSnapshot() && (o.wait.forever || o.wait.seconds > 0)) {
                cannot_wait = true;
                break;
            }
            TimestampTz now = GetCurrentTimestamp();
            long timeout_ms = -1;
            if (!o.wait.forever) {
                if (now >= deadline) break;
                timeout_ms = static_cast<long>((deadline - now + 999) / 1000);
            }
            // Nobody commits anything when a delayed message becomes visible or a message
            // expires: wake up for the next one (exception queues check once a second).
            TimestampTz visible_at = next_visible_time(q);
            long until_visible = -1;
            if (visible_at > now) until_visible = static_cast<long>((visible_at - now + 999) / 1000);
            if (q.exception_queue) until_visible = 1000;
            if (until_visible >= 0 && (timeout_ms < 0 || until_visible < timeout_ms)) timeout_ms = until_visible;
            wakeup::sleep(q.queue_id, seen, timeout_ms);
            CHECK_FOR_INTERRUPTS();
        }
        MemoryContextSwitchTo(outer_context);
        MemoryContextDelete(pass_context);
        SPI_finish();
        // The claims (the rows' xmax) reach the disk before the messages reach the client.
        if (delivered > 0 && !browse) retries::make_claims_durable();
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
    if (delivered == 0) {
        char waited[64];
        snprintf(waited, sizeof waited, "The dequeue waited %g s (ORA-25228 analogue).", o.wait.seconds);
        throw Error(sqlstate::dequeue_timeout, std::string("no message available in queue \"") + r.queue_name + "\"",
                    o.wait.seconds == 0 ? "The dequeue did not wait (wait => 0)." : waited,
                    "Catch SQLSTATE 'QA228' to treat an empty queue as the end of a batch.");
    }
    return delivered;
}

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
bool has_ready_message(const QueueInfo& q, const char* consumer) {
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
            bool isnull;
            Datum tid = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
            ready = !isnull && row_free(rel, reinterpret_cast<ItemPointer>(DatumGetPointer(tid)));
        }
        more = SPI_processed == static_cast<uint64>(chunk);
        SPI_freetuptable(SPI_tuptable);
    }
    table_close(rel, NoLock);  // kept to the end of the transaction, as the statement's lock
    SPI_cursor_close(portal);
    return ready;
}

}  // namespace

int listen(const ListenAgent* agents, int count, const Wait& wait) {
    int found = -1;
    bool cannot_wait = false;
    int problem_at = -1;
    bool consumer_named = false;  // of a single-consumer queue
    Problem problem;
    base::call([&] {
        if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
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
        TimestampTz deadline = 0;
        if (!wait.forever)
            deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), static_cast<int64>(wait.seconds * 1000.0));
        MemoryContext pass_context = AllocSetContextCreate(CurrentMemoryContext, "aq listen pass", ALLOCSET_SMALL_SIZES);
        MemoryContext outer_context = MemoryContextSwitchTo(pass_context);
        wakeup::begin_listen();
        // After a wake-up by commits only the queues whose generation moved are checked (in list
        // order); the first pass and every pass after a timeout (a delay passed, an expiry, rows
        // written by hand) check them all.
        bool check_all = true;
        // Every pass looks the queues up again: one may have been stopped or dropped meanwhile.
        while (look_up_all()) {
            MemoryContextReset(pass_context);
            for (int i = 0; i < count; i++) {
                uint64 now_seen = wakeup::generation(ids[i]);  // before the checks: wakeup.hpp
                changed[i] = check_all || now_seen != seen[i];
                seen[i] = now_seen;
            }
            for (int i = 0; i < count && found < 0; i++) {
                if (!changed[i]) continue;
                // An exception queue has what expired in its queue table once it is moved there,
                // which a dequeue from it does first (and so does LISTEN, but never read-only).
                if (queues[i].exception_queue && !XactReadOnly) expire_messages_of(queues[i]);
                if (has_ready_message(queues[i], agents[i].name)) found = i;
            }
            if (found >= 0) break;
            if (IsolationUsesXactSnapshot() && (wait.forever || wait.seconds > 0)) {
                cannot_wait = true;
                break;
            }
            TimestampTz now = GetCurrentTimestamp();
            long timeout_ms = -1;
            if (!wait.forever) {
                if (now >= deadline) break;
                timeout_ms = static_cast<long>((deadline - now + 999) / 1000);
            }
            // Delayed messages become ready without a commit; exception queues check once a second.
            for (int i = 0; i < count; i++) {
                long until = queues[i].exception_queue ? 1000 : -1;
                TimestampTz visible_at = queues[i].exception_queue ? 0 : next_visible_time(queues[i]);
                if (visible_at > now) until = static_cast<long>((visible_at - now + 999) / 1000);
                if (until >= 0 && (timeout_ms < 0 || until < timeout_ms)) timeout_ms = until;
            }
            check_all = !wakeup::sleep_any(ids, seen, count, timeout_ms);
            CHECK_FOR_INTERRUPTS();
        }
        wakeup::end_listen();
        MemoryContextSwitchTo(outer_context);
        MemoryContextDelete(pass_context);
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

void settler_sweep(int32 queue_id) {
    base::entry_void([&] {
        QueueInfo q;
        bool found = false;
        base::call([&] { found = lookup_by_id(queue_id, q); });
        if (!found || !q.multiple_consumers || q.exception_queue) return;
        deliveries::Tables t = tables_of(q, "");
        base::RunAs as;
        as.role = q.owner;
        base::call([&] {
            base::run_as(as, [](void* arg) {
                base::entry_void([arg] {
                    deliveries::sweep(*static_cast<deliveries::Tables*>(arg), nullptr, -1, nullptr, true);
                });
            }, &t);
        });
    });
}

}  // namespace aq::queue
