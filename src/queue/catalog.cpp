// See catalog.hpp for the protocol.
//
// Every function here calls PostgreSQL only inside base::call(), from frames that hold plain data;
// C++ errors are aq::Error, thrown after the PostgreSQL work they report.
extern "C" {
#include "postgres.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/bufmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
}

#include <cstring>
#include <string>

#include "base/guard.hpp"
#include "compat/relation.hpp"
#include "queue/catalog.hpp"

namespace aq::queue {


// The table a dequeue claims rows of: the delivery table of a multi-consumer queue table.
Oid claim_relid(const QueueInfo& q) {
    return q.multiple_consumers && !q.stored_once() ? q.delivery_relid : q.relid;
}
const char* claim_table(const QueueInfo& q) {
    return q.multiple_consumers && !q.stored_once() ? q.qualified_deliveries : q.qualified_table;
}

deliveries::Tables tables_of(const QueueInfo& q, const char* queue_name) {
    return deliveries::Tables{q.relid,      q.payload_type, q.owner,           q.queue_id,          q.priority_order,
                              queue_name,   q.qualified_table, q.qualified_deliveries, q.delivery_relid};
}

namespace {

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
    "       q.ctid, q.xmin, t.ctid, t.xmin, %s, %s, q.retention_time, %s"
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
// The lookup's ring column (ring.hpp; none before 0.7.0): the segments' OIDs, in segment order.
const char* const ring_column =
    "(SELECT pg_catalog.array_agg(s.relid::pg_catalog.oid ORDER BY s.segment) FROM aq.queue_segments s"
    "  WHERE s.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id)";
// A multi-consumer ring's receipts tables (once_walk.hpp), in segment order (0: none).
const char* const receipts_column =
    "(SELECT pg_catalog.array_agg(COALESCE(s.receipts::pg_catalog.oid, 0::pg_catalog.oid) ORDER BY s.segment)"
    "  FROM aq.queue_segments s WHERE s.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id)";
const char* const consumer_joins =
    "  LEFT JOIN pg_catalog.pg_class dc ON dc.oid OPERATOR(pg_catalog.=) t.delivery_relid::pg_catalog.oid"
    "  LEFT JOIN pg_catalog.pg_namespace dn ON dn.oid OPERATOR(pg_catalog.=) dc.relnamespace";

// The library may be newer than the database's aq objects (a package upgraded before
// ALTER EXTENSION aq UPDATE): it works with those of 0.4.0 and later, without what came since
// (multi-consumer queue tables: deliveries.hpp), and says what to do with older ones rather than
// fail on a missing column.
bool consumers_in_catalog = false;  // set by prepare_lookup

void check_catalog_version() {
    Oid queues = get_relname_relid("queues", get_namespace_oid("aq", false));
    if (!OidIsValid(queues) || get_attnum(queues, "queue_type") == InvalidAttrNumber)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("the aq objects of this database are older than the aq library"),
                        errdetail("The library is version 0.4.0 or later; aq.queues has no queue_type column."),
                        errhint("Run ALTER EXTENSION aq UPDATE.")));
    consumers_in_catalog = deliveries::available();
}

SPIPlanPtr prepare_lookup(const char* condition, Oid key_type) {
    check_catalog_version();
    Oid argtypes[1] = {key_type};
    const char* ring = ring::available() ? ring_column : "NULL::pg_catalog.oid[]";
    const char* receipts = ring::available() ? receipts_column : "NULL::pg_catalog.oid[]";
    const char* sql = consumers_in_catalog ? psprintf(lookup_sql, consumer_columns, ring, receipts, consumer_joins, condition)
                                            : psprintf(lookup_sql, "false, NULL::pg_catalog.oid, NULL::pg_catalog.text, false", ring,
                                                       receipts, "", condition);
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

}  // namespace

bool cached_table(const char* queue_name, Oid* relid) {
    CachedLookup* entry = cached_lookup(queue_name);
    if (!entry) return false;
    *relid = entry->info.relid;
    return true;
}

bool cached_grouped(const char* queue_name, Oid role, bool* grouped) {
    for (auto& entry : lookup_cache)
        if (entry.used && entry.role == role && strcmp(entry.queue_name, queue_name) == 0) {
            *grouped = entry.info.grouped;
            return true;
        }
    return false;
}

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

namespace {

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
    info.segments.count = 0;
    Datum segments = SPI_getbinval(row, desc, 20, &isnull);
    if (!isnull) {
        Datum* relids;
        bool* nulls;
        int n;
        deconstruct_array(DatumGetArrayTypeP(segments), OIDOID, sizeof(Oid), true, TYPALIGN_INT, &relids, &nulls, &n);
        for (int i = 0; i < n && i < ring::max_segments; i++) info.segments.relids[i] = DatumGetObjectId(relids[i]);
        info.segments.count = Min(n, ring::max_segments);
    }
    for (int i = 0; i < ring::max_segments; i++) info.segments.receipts[i] = InvalidOid;
    Datum receipts = SPI_getbinval(row, desc, 22, &isnull);
    if (!isnull) {
        Datum* relids;
        bool* nulls;
        int n;
        deconstruct_array(DatumGetArrayTypeP(receipts), OIDOID, sizeof(Oid), true, TYPALIGN_INT, &relids, &nulls, &n);
        for (int i = 0; i < n && i < ring::max_segments; i++) info.segments.receipts[i] = DatumGetObjectId(relids[i]);
    }
    Datum retention = SPI_getbinval(row, desc, 21, &isnull);
    if (isnull)
        memset(&info.retention_time, 0, sizeof info.retention_time);
    else
        info.retention_time = *DatumGetIntervalP(retention);
    if (rows) {
        for (int i = 0; i < 2; i++) {
            rows[i].tid = *reinterpret_cast<ItemPointer>(DatumGetPointer(SPI_getbinval(row, desc, 12 + 2 * i, &isnull)));
            rows[i].xmin = DatumGetTransactionId(SPI_getbinval(row, desc, 13 + 2 * i, &isnull));
        }
    }
    SPI_freetuptable(SPI_tuptable);  // a waiting dequeue looks the queue up on every pass
    return true;
}

}  // namespace

bool catalog_has_consumers() {
    return consumers_in_catalog;
}


Problem check_queue(bool found, const QueueInfo& q, Oid payload_type, bool for_enqueue) {
    if (!found) return {QueueProblem::unknown};
    if (!OidIsValid(q.relid) || (q.multiple_consumers && !q.stored_once() && !OidIsValid(q.delivery_relid)))
        return {QueueProblem::storage_missing};
    if (q.segments.count > 0) {
        // ring.hpp, E1: the statements read a ring through its parent, so a table inheriting from it
        // would be read (and written) as if it were a segment.
        Oid foreign = ring::foreign_inheritor(q.relid, q.segments);
        if (OidIsValid(foreign)) return {QueueProblem::foreign_inheritor, InvalidOid, InvalidOid, foreign};
    }
    if (payload_type != q.payload_type) return {QueueProblem::wrong_payload, q.payload_type, payload_type};
    if (for_enqueue && q.exception_queue) return {QueueProblem::exception_enqueue};
    if (for_enqueue && !q.enqueue_enabled) return {QueueProblem::enqueue_disabled};
    if (!for_enqueue && !q.dequeue_enabled) return {QueueProblem::dequeue_disabled};
    return {};
}

Problem check_consumer(const QueueInfo& q, const char* consumer) {
    if (q.multiple_consumers && !q.exception_queue && !consumer) return {QueueProblem::consumer_required};
    if (!q.multiple_consumers && consumer) return {QueueProblem::consumer_not_allowed};
    return {};
}

namespace {

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

}  // namespace

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
        case QueueProblem::foreign_inheritor: {
            char* child = nullptr;
            base::call([&] {
                const char* name = get_rel_name(p.relation);
                child = pstrdup(name ? quote_identifier(name) : "?");
            });
            throw Error(sqlstate::object_not_in_prerequisite_state,
                        std::string("table ") + child + " inherits from the ring queue table of queue " + q,
                        "A ring queue table's inheritance children are its segments, which every dequeue reads through it.",
                        std::string("Remove the inheritance: ALTER TABLE ") + child + " NO INHERIT ...;");
        }
        case QueueProblem::none:
            break;
    }
    throw Error(sqlstate::internal_error, "aq: unexpected queue state");
}

}  // namespace aq::queue
