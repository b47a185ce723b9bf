// See writer.hpp for the protocol.  PostgreSQL-side code: it runs inside the planner, the
// executor and transaction callbacks, holds plain data only (palloc'd, no C++ object with a
// destructor), and reports errors with ereport like the executor around it.
extern "C" {
#include "postgres.h"
#include "access/detoast.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"
#include "parser/parsetree.h"
#include "port/pg_crc32c.h"
#include "rewrite/prs2lock.h"
#include "storage/condition_variable.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "utils/array.h"
#include "utils/fmgrprotos.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"
}

#include "compat/wait_event.hpp"
#include "compat/executor.hpp"
#include "ingest/hint.hpp"
#include "ingest/ring.hpp"
#include "ingest/settings.hpp"
#include "ingest/writer.hpp"

namespace aq::ingest::writer {

namespace {

using namespace aq::ingest::ring;

// ---------------------------------------------------------------- enabled tables
// aq.fast_ingest_tables, cached per backend; aq.enable_fast_ingest / disable invalidate the
// table's relcache entry, which makes the cache entry here stale and replans every cached plan.
// The invalidation callback runs inside any catalog access — in the middle of is_enabled()'s
// own lookup among them — so it only marks: an entry stale, or the whole cache.  The cache is
// emptied, and an entry dropped, only by is_enabled() itself, before its lookup; a lookup
// during which an invalidation arrived is used once and not kept (it may predate the change).
struct EnabledEntry {
    Oid relid;
    bool enabled;
    bool valid;
};
HTAB* enabled_cache = nullptr;
bool enabled_cache_stale = false;   // every entry is stale: empty the cache before the next use
Oid registry_seen = InvalidOid;     // the registry table last read: its invalidation clears all
Oid looking_up = InvalidOid;        // the table is_enabled() is reading the registry for
uint64 invalidations = 0;           // of that table, of the registry, or of every relation

void on_relcache_invalidation(Datum, Oid relid) {
    if (relid == InvalidOid || relid == registry_seen || relid == looking_up) invalidations++;
    if (!enabled_cache) return;
    if (relid == InvalidOid || relid == registry_seen) {
        enabled_cache_stale = true;
        return;
    }
    auto* e = static_cast<EnabledEntry*>(hash_search(enabled_cache, &relid, HASH_FIND, nullptr));
    if (e) e->valid = false;
}

// Only the registry that belongs to the installed extension counts: a table that someone
// else called aq.fast_ingest_tables must not be read with aq's assumptions.
bool lookup_enabled(Oid relid) {
    Oid extension = get_extension_oid("aq", true);
    if (!OidIsValid(extension)) return false;
    Oid schema = get_namespace_oid("aq", true);  // aq is not relocatable: its schema is aq
    if (!OidIsValid(schema)) return false;
    Oid registry = get_relname_relid("fast_ingest_tables", schema);
    Oid index = get_relname_relid("fast_ingest_tables_pkey", schema);
    if (!OidIsValid(registry) || !OidIsValid(index)) return false;
    if (getExtensionOfObject(RelationRelationId, registry) != extension || IndexGetRelation(index, true) != registry)
        return false;
    registry_seen = registry;
    Relation rel = table_open(registry, AccessShareLock);
    Oid key_type = RelationGetDescr(rel)->natts < 1 ? InvalidOid : TupleDescAttr(RelationGetDescr(rel), 0)->atttypid;
    if (key_type != REGCLASSOID && key_type != OIDOID) {  // regclass since 0.5.0: oid underneath
        table_close(rel, AccessShareLock);
        return false;
    }
    ScanKeyData key;
    ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
    SysScanDesc scan = systable_beginscan(rel, index, true, nullptr, 1, &key);
    bool found = HeapTupleIsValid(systable_getnext(scan));
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
    return found;
}

bool is_enabled(Oid relid) {
    if (enabled_cache && enabled_cache_stale) {
        hash_destroy(enabled_cache);  // not inside a lookup: nothing points into it
        enabled_cache = nullptr;
    }
    if (!enabled_cache) {
        HASHCTL ctl;
        memset(&ctl, 0, sizeof ctl);
        ctl.keysize = sizeof(Oid);
        ctl.entrysize = sizeof(EnabledEntry);
        enabled_cache = hash_create("aq fast ingest tables", 64, &ctl, HASH_ELEM | HASH_BLOBS);
        enabled_cache_stale = false;
    }
    auto* e = static_cast<EnabledEntry*>(hash_search(enabled_cache, &relid, HASH_FIND, nullptr));
    if (e && e->valid) return e->enabled;
    uint64 seen = invalidations;
    looking_up = relid;
    bool enabled = lookup_enabled(relid);  // reads catalogs: invalidations may run here
    looking_up = InvalidOid;
    if (invalidations != seen) return enabled;
    bool found = false;
    e = static_cast<EnabledEntry*>(hash_search(enabled_cache, &relid, HASH_ENTER, &found));
    e->enabled = enabled;
    e->valid = true;
    return enabled;
}

// ---------------------------------------------------------------- the transaction's rows
// Chunk payload: the layout (ring::Column per attribute, MAXALIGNed), then MinimalTuples,
// each MAXALIGNed.  A chunk holds rows of one table, role and layout (an ALTER TABLE within
// the transaction starts a new one).  Rows that alternate between tables go to each table's
// chunk among the latest few; the order of rows across tables does not matter, within one
// table it is kept.
struct Chunk {
    Oid relid;
    Oid role;
    int16 natts;
    char* data;
    uint32 used;
    uint32 capacity;
    uint32 rows;
    uint64 ring_position;
    uint64 first_seq;
};

constexpr int recent_chunks = 16;

// Savepoints: at the start of a subtransaction, where the chunks ended — their number, and
// the fill of the chunks rows could still be appended to (the recent ones).  Its rollback
// truncates back to that; its commit just forgets it.  O(1) per subtransaction, so a PL/pgSQL
// loop with an exception block per row costs no more than one without.
struct Fill {
    uint32 used;
    uint32 rows;
};
struct Mark {
    SubTransactionId subid;
    uint32 chunk_count;
    uint64 ring_bytes;
    uint64 rows;
    Fill recent[recent_chunks];  // fill of chunks[chunk_count - 1 - k]
};

struct TransactionRows {
    MemoryContext context;
    Chunk** chunks;
    uint32 chunk_count;
    uint32 chunk_capacity;
    uint64 ring_bytes;  // exactly what the chunks take in the ring, headers included
    uint64 rows;
    bool counted_as_writer;
    bool reserved;
    DatabaseSlot* slot;
};
TransactionRows txn;
uint64 write_hwm = 0;

// The savepoint stack lives in TopMemoryContext and is emptied at transaction end.
Mark* marks = nullptr;
int mark_count = 0;
int mark_capacity = 0;

constexpr uint32 initial_chunk_bytes = 1024;

uint32 chunk_limit() {
    uint64 limit = Min(uint64(4) * 1024 * 1024, shared->size / 8);
    return uint32(limit & ~uint64(63));
}

void forget_transaction() {
    if (txn.counted_as_writer && shared) pg_atomic_fetch_sub_u32(&shared->writers, 1);
    memset(&txn, 0, sizeof txn);
    mark_count = 0;
}

Chunk* new_chunk(Relation rel, Oid role, uint32 first_row_bytes) {
    if (!txn.context) {
        txn.context = AllocSetContextCreate(TopTransactionContext, "aq fast ingest rows", ALLOCSET_DEFAULT_SIZES);
        pg_atomic_fetch_add_u32(&shared->writers, 1);
        txn.counted_as_writer = true;
    }
    if (txn.chunk_count == txn.chunk_capacity) {
        uint32 capacity = Max(16u, txn.chunk_capacity * 2);
        txn.chunks = static_cast<Chunk**>(txn.chunks ? repalloc(txn.chunks, sizeof(Chunk*) * capacity)
                                                     : MemoryContextAlloc(txn.context, sizeof(Chunk*) * capacity));
        txn.chunk_capacity = capacity;
    }
    TupleDesc desc = RelationGetDescr(rel);
    uint32 types_bytes = uint32(layout_bytes(desc->natts));
    uint32 prefix_bytes = types_bytes + uint32(search_path_bytes(namespace_search_path));
    uint32 capacity = initial_chunk_bytes;
    while (capacity < prefix_bytes + first_row_bytes) capacity *= 2;
    auto* c = static_cast<Chunk*>(MemoryContextAllocZero(txn.context, sizeof(Chunk)));
    c->relid = RelationGetRelid(rel);
    c->role = role;
    c->natts = int16(desc->natts);
    c->capacity = capacity;
    c->data = static_cast<char*>(MemoryContextAllocZero(txn.context, capacity));
    auto* layout = reinterpret_cast<Column*>(c->data);
    for (int i = 0; i < desc->natts; i++)
        layout[i] = Column{TupleDescAttr(desc, i)->atttypid, TupleDescAttr(desc, i)->atttypmod};
    // The session's search_path at insert time: the drain applies the rows with it (ring.hpp).
    strcpy(c->data + types_bytes, namespace_search_path);
    c->used = prefix_bytes;
    txn.chunks[txn.chunk_count++] = c;
    txn.ring_bytes += record_bytes(prefix_bytes);
    return c;
}

// Does the chunk hold rows of the table's present layout?
bool same_layout(const Chunk* c, TupleDesc desc) {
    if (c->natts != desc->natts) return false;
    auto* layout = reinterpret_cast<const Column*>(c->data);
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        if (layout[i].type != att->atttypid || layout[i].typmod != att->atttypmod) return false;
    }
    return true;
}

// The chunk the next row of `rel` goes to, with room for `bytes` more.
Chunk* chunk_for(Relation rel, Oid role, uint32 bytes) {
    Oid relid = RelationGetRelid(rel);
    TupleDesc desc = RelationGetDescr(rel);
    for (uint32 k = 0; k < Min(txn.chunk_count, uint32(recent_chunks)); k++) {
        Chunk* c = txn.chunks[txn.chunk_count - 1 - k];
        if (c->relid != relid || c->role != role) continue;
        if (!same_layout(c, desc)) break;  // altered within the transaction: a new chunk
        if (strcmp(c->data + layout_bytes(c->natts), namespace_search_path) != 0) break;  // SET search_path since
        if (c->used + bytes <= c->capacity) return c;
        if (c->used + bytes <= chunk_limit()) {
            uint32 capacity = c->capacity;
            while (capacity < c->used + bytes) capacity *= 2;
            capacity = Min(capacity, chunk_limit());
            c->data = static_cast<char*>(repalloc(c->data, capacity));
            c->capacity = capacity;
            return c;
        }
        break;  // that table's latest chunk is full: start its next one
    }
    return new_chunk(rel, role, bytes);
}

// Appends one row (values in the table's column order) to the transaction's chunks.
void append_row(Relation rel, Datum* given_values, bool* isnull) {
    // A statement run from another module's pre-commit, after this transaction's rows took
    // their ring space: they could never be applied.
    if (txn.reserved)
        ereport(ERROR, (errcode(ERRCODE_INVALID_TRANSACTION_STATE),
                        errmsg("cannot add fast-ingest rows to a transaction that is committing")));
    TupleDesc desc = RelationGetDescr(rel);
    int natts = desc->natts;
    Datum* values = given_values;
    bool hasnull = false;
    Datum* own = nullptr;  // a copy of the values, once one of them must be detoasted
    for (int i = 0; i < natts; i++) {
        if (isnull[i]) {
            hasnull = true;
            continue;
        }
        Form_pg_attribute att = TupleDescAttr(desc, i);
        // A value stored out of line elsewhere (INSERT ... SELECT from a table) must travel
        // by value: the drain runs later, in another transaction.
        if (att->attlen == -1 && VARATT_IS_EXTERNAL(DatumGetPointer(values[i]))) {
            if (!own) {
                own = static_cast<Datum*>(palloc(sizeof(Datum) * natts));
                memcpy(own, values, sizeof(Datum) * natts);
                values = own;
            }
            values[i] = PointerGetDatum(detoast_external_attr(reinterpret_cast<struct varlena*>(DatumGetPointer(values[i]))));
        }
    }
    Size header = SizeofMinimalTupleHeader + (hasnull ? BITMAPLEN(natts) : 0);
    header = MAXALIGN(header);
    Size data_len = heap_compute_data_size(desc, values, isnull);
    Size len = header + data_len;
    Size space = MAXALIGN(len);
    uint32 types_bytes = uint32(layout_bytes(natts) + search_path_bytes(namespace_search_path));
    if (space + types_bytes > chunk_limit())
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("row of %zu bytes is too large for fast ingest into \"%s\"", len, RelationGetRelationName(rel)),
                        errdetail("The limit is %u bytes, an eighth of aq.fast_ingest_buffer (at most 4 MB).",
                                  unsigned(chunk_limit() - types_bytes)),
                        errhint("Insert this row without the MEMOPTIMIZE_WRITE hint, or raise aq.fast_ingest_buffer.")));
    // Room for this row in a new chunk, plus a PAD of at most one chunk: then the transaction
    // always fits in an empty ring, and in its database's share of it (see ring.hpp).
    if (txn.ring_bytes + record_bytes(types_bytes + space) + chunk_limit() + header_bytes > database_share())
        ereport(ERROR, (errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
                        errmsg("this transaction's fast-ingest rows do not fit in the ring"),
                        errdetail("%llu rows take %llu bytes; one database may use %llu bytes (three quarters of "
                                  "aq.fast_ingest_buffer).",
                                  (unsigned long long)txn.rows + 1, (unsigned long long)(txn.ring_bytes + space),
                                  (unsigned long long)database_share()),
                        errhint("Commit more often, or raise aq.fast_ingest_buffer (needs a restart).")));
    Chunk* c = chunk_for(rel, GetUserId(), uint32(space));
    auto tuple = reinterpret_cast<MinimalTuple>(c->data + c->used);
    memset(tuple, 0, space);
    tuple->t_len = uint32(len);
    HeapTupleHeaderSetNatts(tuple, natts);
    tuple->t_hoff = uint8(header + MINIMAL_TUPLE_OFFSET);
    heap_fill_tuple(desc, values, isnull, reinterpret_cast<char*>(tuple) + header, data_len, &tuple->t_infomask,
                    hasnull ? tuple->t_bits : nullptr);
    txn.ring_bytes += record_bytes(c->used + space) - record_bytes(c->used);
    c->used += uint32(space);
    c->rows++;
    txn.rows++;
    if (own) {
        for (int i = 0; i < natts; i++)
            if (values[i] != given_values[i]) pfree(DatumGetPointer(values[i]));
        pfree(own);
    }
}

// ---------------------------------------------------------------- the Custom Scan
struct IngestScanState {
    CustomScanState css;
    Relation rel;
    bool fast;
    bool done;
    // INSERT ... VALUES of one row (the PL/pgSQL loop's statement): its expressions, evaluated
    // directly instead of through a Result node, whose set-up costs more than the row itself.
    ExprState** row_exprs;
    Datum* row_values;
    bool* row_nulls;
};

// A Result node that only computes one row from constants and parameters.
bool is_single_row(Plan* source) {
    return IsA(source, Result) && !outerPlan(source) && !source->qual && !source->initPlan &&
           !reinterpret_cast<Result*>(source)->resconstantqual;
}

Node* create_scan_state(CustomScan* plan);

const CustomScanMethods scan_methods = {"AQ Fast Ingest", create_scan_state};

ModifyTable* modify_table_of(CustomScanState* node) {
    auto* plan = reinterpret_cast<CustomScan*>(node->ss.ps.plan);
    return static_cast<ModifyTable*>(linitial(plan->custom_plans));
}

bool hinted_plan(CustomScanState* node) {
    auto* plan = reinterpret_cast<CustomScan*>(node->ss.ps.plan);
    return linitial_oid(plan->custom_private) != 0;
}

void begin_scan(CustomScanState* node, EState* estate, int eflags) {
    auto* state = reinterpret_cast<IngestScanState*>(node);
    ModifyTable* mt = modify_table_of(node);
    state->fast = hinted_plan(node) || settings::memoptimize_write;
    PlanState* child;
    if (state->fast) {
        require_preloaded();
        state->rel = compat::result_relation(estate, linitial_int(mt->resultRelations));
        Plan* source = outerPlan(mt);
        if (is_single_row(source) && !(eflags & EXEC_FLAG_EXPLAIN_ONLY) && !estate->es_instrument) {
            int n = list_length(source->targetlist);
            state->row_exprs = static_cast<ExprState**>(palloc(sizeof(ExprState*) * n));
            state->row_values = static_cast<Datum*>(palloc(sizeof(Datum) * n));
            state->row_nulls = static_cast<bool*>(palloc(sizeof(bool) * n));
            int i = 0;
            ListCell* lc;
            foreach (lc, source->targetlist) {
                Expr* expr = static_cast<TargetEntry*>(lfirst(lc))->expr;
                if (IsA(expr, Const)) {  // no expression program for a constant
                    state->row_exprs[i] = nullptr;
                    state->row_values[i] = reinterpret_cast<Const*>(expr)->constvalue;
                    state->row_nulls[i] = reinterpret_cast<Const*>(expr)->constisnull;
                } else {
                    state->row_exprs[i] = ExecInitExpr(expr, &node->ss.ps);
                }
                i++;
            }
            node->custom_ps = NIL;
            return;
        }
        child = ExecInitNode(source, estate, eflags);
    } else {
        child = ExecInitNode(&mt->plan, estate, eflags);
    }
    node->custom_ps = list_make1(child);
}

void append_single_row(IngestScanState* state) {
    ExprContext* econtext = GetPerTupleExprContext(state->css.ss.ps.state);
    int natts = RelationGetDescr(state->rel)->natts;
    MemoryContext outer = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
    for (int i = 0; i < natts; i++)
        if (state->row_exprs[i]) state->row_values[i] = ExecEvalExpr(state->row_exprs[i], econtext, &state->row_nulls[i]);
    append_row(state->rel, state->row_values, state->row_nulls);
    MemoryContextSwitchTo(outer);
    ResetExprContext(econtext);
}

TupleTableSlot* exec_scan(CustomScanState* node) {
    auto* state = reinterpret_cast<IngestScanState*>(node);
    if (!state->fast) return ExecProcNode(static_cast<PlanState*>(linitial(node->custom_ps)));  // the ModifyTable
    if (state->done) return nullptr;
    EState* estate = node->ss.ps.state;
    uint64 rows = 0;
    if (state->row_exprs) {
        append_single_row(state);
        rows = 1;
    } else {
        auto* child = static_cast<PlanState*>(linitial(node->custom_ps));
        ExprContext* per_row = GetPerTupleExprContext(estate);
        for (;;) {
            TupleTableSlot* slot = ExecProcNode(child);
            if (TupIsNull(slot)) break;
            MemoryContext outer = MemoryContextSwitchTo(per_row->ecxt_per_tuple_memory);
            slot_getallattrs(slot);
            append_row(state->rel, slot->tts_values, slot->tts_isnull);
            MemoryContextSwitchTo(outer);
            ResetExprContext(per_row);
            rows++;
        }
    }
    if (modify_table_of(node)->canSetTag) estate->es_processed += rows;  // "INSERT 0 n", ROW_COUNT
    state->done = true;
    return nullptr;
}

void end_scan(CustomScanState* node) {
    if (node->custom_ps != NIL) ExecEndNode(static_cast<PlanState*>(linitial(node->custom_ps)));
}

void rescan(CustomScanState* node) {
    if (node->custom_ps != NIL) ExecReScan(static_cast<PlanState*>(linitial(node->custom_ps)));
    reinterpret_cast<IngestScanState*>(node)->done = false;
}

void explain_scan(CustomScanState* node, List*, ExplainState* es) {
    auto* state = reinterpret_cast<IngestScanState*>(node);
    ExplainPropertyText("Rows Go To", state->fast ? "fast-ingest ring" : "table (ordinary insert)", es);
}

const CustomExecMethods exec_methods = {
    "AQ Fast Ingest", begin_scan, exec_scan, end_scan, rescan, nullptr, nullptr,
    nullptr,          nullptr,    nullptr,   nullptr,  nullptr, explain_scan,
};

Node* create_scan_state(CustomScan*) {
    auto* state = static_cast<IngestScanState*>(palloc0(sizeof(IngestScanState)));
    NodeSetTag(state, T_CustomScanState);
    state->css.methods = &exec_methods;
    return reinterpret_cast<Node*>(state);
}

// ---------------------------------------------------------------- planning
planner_hook_type prev_planner_hook = nullptr;

// Does the table have a rule that fires on INSERT?
bool has_insert_rule(Relation rel) {
    if (!rel->rd_rules) return false;
    for (int i = 0; i < rel->rd_rules->numLocks; i++)
        if (rel->rd_rules->rules[i]->event == CMD_INSERT) return true;
    return false;
}

// Why the ring cannot take this INSERT, or nullptr if it can.  Besides the shapes the ring
// cannot hold, an INSERT the drain could not apply as the statement meant it is refused here,
// at statement time, rather than accepted and rejected later:
//  * produced by a rule (a view's INSTEAD rule, another table's ALSO rule) or through a view:
//    its privileges are checked as the rule's or view's owner, while the drain applies rows
//    as the role that wrote them, and a view's CHECK OPTION would never be evaluated;
//  * into a table with an INSERT rule: the rewriter already ran the rule for this statement,
//    and the drain's insert would run it again.
const char* unsupported_shape(Query* parse, PlannedStmt* stmt, Relation rel) {
    if (parse->querySource != QSRC_ORIGINAL) return "an INSERT produced by a rule";
    if (OidIsValid(compat::check_as_user(parse, rt_fetch(parse->resultRelation, parse->rtable)))) return "INSERT through a view";
    if (has_insert_rule(rel)) return "INSERT into a table with rules";
    if (!IsA(stmt->planTree, ModifyTable)) return "this form of INSERT";
    auto* mt = reinterpret_cast<ModifyTable*>(stmt->planTree);
    if (mt->operation != CMD_INSERT || list_length(mt->resultRelations) != 1) return "this form of INSERT";
    ListCell* wl;
    foreach (wl, mt->withCheckOptionLists) {
        ListCell* wc;
        foreach (wc, static_cast<List*>(lfirst(wl)))
            if (static_cast<WithCheckOption*>(lfirst(wc))->kind == WCO_VIEW_CHECK)
                return "INSERT through a view WITH CHECK OPTION";
    }
    if (mt->onConflictAction != ONCONFLICT_NONE) return "INSERT ... ON CONFLICT";
    if (mt->returningLists != NIL) return "INSERT ... RETURNING";
    if (stmt->hasModifyingCTE) return "INSERT with a data-modifying WITH";
    if (mt->rootRelation != 0 || rel->rd_rel->relkind != RELKIND_RELATION) return "INSERT into a partitioned table";
    Plan* source = outerPlan(mt);
    if (!source || list_length(source->targetlist) != RelationGetDescr(rel)->natts) return "this form of INSERT";
    ListCell* lc;
    foreach (lc, source->targetlist)
        if (static_cast<TargetEntry*>(lfirst(lc))->resjunk) return "this form of INSERT";
    return nullptr;
}

PlannedStmt* plan(Query* parse, const char* query_string, int cursor_options, ParamListInfo params) {
    PlannedStmt* stmt = prev_planner_hook ? prev_planner_hook(parse, query_string, cursor_options, params)
                                          : standard_planner(parse, query_string, cursor_options, params);
    if (parse->commandType != CMD_INSERT || parse->resultRelation == 0 || !query_string) return stmt;

    const char* text = query_string + Max(parse->stmt_location, 0);
    size_t length = parse->stmt_len > 0 ? size_t(parse->stmt_len) : strlen(text);
    bool hinted = has_memoptimize_write_hint(text, length);
    Oid relid = rt_fetch(parse->resultRelation, parse->rtable)->relid;
    if (!hinted && !available()) return stmt;
    if (hinted) require_preloaded();
    bool enabled = is_enabled(relid);
    if (!enabled && !hinted) return stmt;
    if (!enabled)
        ereport(ERROR, (errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
                        errmsg("table \"%s\" is not enabled for fast ingest", get_rel_name(relid)),
                        errhint("Run SELECT aq.enable_fast_ingest('%s'), or remove the MEMOPTIMIZE_WRITE hint.",
                                get_rel_name(relid))));

    Relation rel = table_open(relid, NoLock);  // the parser holds the lock
    const char* why_not = unsupported_shape(parse, stmt, rel);
    table_close(rel, NoLock);
    if (why_not) {
        if (!hinted) return stmt;  // aq.memoptimize_write: this one stays an ordinary insert
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("MEMOPTIMIZE_WRITE does not support %s", why_not),
                        errhint("Remove the hint: the statement then runs as an ordinary insert.")));
    }

    auto* mt = reinterpret_cast<ModifyTable*>(stmt->planTree);
    CustomScan* scan = makeNode(CustomScan);
    scan->scan.plan.startup_cost = mt->plan.startup_cost;
    scan->scan.plan.total_cost = mt->plan.total_cost;
    scan->scan.plan.plan_rows = mt->plan.plan_rows;
    scan->scan.plan.plan_width = 0;
    scan->scan.plan.targetlist = NIL;
    // Initplans (e.g. VALUES ((SELECT max(id) FROM t) + 1)) must run whichever child runs.
    scan->scan.plan.initPlan = mt->plan.initPlan;
    mt->plan.initPlan = NIL;
    scan->scan.plan.extParam = bms_copy(mt->plan.extParam);
    scan->scan.plan.allParam = bms_copy(mt->plan.allParam);
    scan->scan.scanrelid = 0;
    scan->custom_plans = list_make1(mt);
    scan->custom_private = list_make2_oid(Oid(hinted ? 1 : 0), relid);
    scan->methods = &scan_methods;
    stmt->planTree = &scan->scan.plan;
    return stmt;
}

}  // namespace

// ---------------------------------------------------------------- waiting for the drain
// A session that waits for the drain (a commit for ring space, aq.write_end for its rows) holds
// every lock its transaction took; the drain may need one of them (the table lock of a LOCK
// TABLE or an ALTER, the transaction lock of a row the drain's insert must wait for).
// PostgreSQL's deadlock detector cannot see that cycle (the session waits on a condition
// variable, not on a lock), so the waiting session looks for it itself, following
// pg_blocking_pids from the drain over at most max_blockers processes.
namespace {
constexpr int max_blockers = 64;
}

int drain_blocked_by_me(ring::DatabaseSlot* slot) {
    if (!slot) return 0;
    uint32 procno = pg_atomic_read_u32(&slot->worker_procno);
    if (procno == no_proc || procno >= ProcGlobal->allProcCount) return 0;
    int drain_pid = ProcGlobal->allProcs[procno].pid;
    if (drain_pid == 0) return 0;
    int queue[max_blockers];
    int count = 0;
    queue[count++] = drain_pid;
    for (int i = 0; i < count; i++) {
        ArrayType* blockers = DatumGetArrayTypeP(DirectFunctionCall1(pg_blocking_pids, Int32GetDatum(queue[i])));
        int n = ArrayGetNItems(ARR_NDIM(blockers), ARR_DIMS(blockers));
        const int32* pids = reinterpret_cast<const int32*>(ARR_DATA_PTR(blockers));
        for (int k = 0; k < n; k++) {
            int pid = pids[k];
            if (pid == MyProcPid) return drain_pid;
            bool seen = false;
            for (int j = 0; j < count && !seen; j++) seen = queue[j] == pid;
            if (!seen && count < max_blockers) queue[count++] = pid;
        }
        pfree(blockers);
    }
    return 0;
}

void install_hooks() {
    RegisterCustomScanMethods(&scan_methods);
    prev_planner_hook = planner_hook;
    planner_hook = plan;
    CacheRegisterRelcacheCallback(on_relcache_invalidation, 0);
}

void forget_enabled(Oid relid) {
    CacheInvalidateRelcacheByRelid(relid);
}

uint64 session_write_hwm() {
    return write_hwm;
}

// ---------------------------------------------------------------- transaction end
void pre_commit() {
    if (txn.chunk_count == 0) return;
    // Place every chunk at once (see ring.hpp); wait for space if the drain is behind.
    TimestampTz started = GetCurrentTimestamp();
    TimestampTz deadline = TimestampTzPlusMilliseconds(started, settings::wait_timeout_ms);
    TimestampTz next_check = TimestampTzPlusMilliseconds(started, Max(DeadlockTimeout, 1));
    bool sleeping = false;
    DatabaseSlot* slot = nullptr;
    bool over_share = false;  // this database holds its whole share of the ring (see ring.hpp)
    for (;;) {
        LWLockAcquire(shared->lock, LW_EXCLUSIVE);
        if (!ids_available_locked(txn.rows)) {
            LWLockRelease(shared->lock);
            ereport(ERROR, (errcode(ERRCODE_IO_ERROR), errmsg("could not take a new fast-ingest epoch"),
                            errdetail("Its counter could not be recorded in $PGDATA/pg_aq_epoch (see the server log).")));
        }
        slot = slot_for_locked(MyDatabaseId);
        if (!slot) {
            LWLockRelease(shared->lock);
            ereport(ERROR, (errcode(ERRCODE_CONFIGURATION_LIMIT_EXCEEDED),
                            errmsg("too many databases use fast ingest at once"),
                            errdetail("The ring serves at most %d databases.", max_databases)));
        }
        uint64 position = shared->head;
        for (uint32 i = 0; i < txn.chunk_count; i++) {
            Chunk* c = txn.chunks[i];
            uint32 need = record_bytes(c->used);
            uint64 room = shared->size - position % shared->size;
            if (room < need) position += room;  // a PAD record fills the end
            position += need;
        }
        uint64 txn_bytes = 0;
        for (uint32 i = 0; i < txn.chunk_count; i++) txn_bytes += record_bytes(txn.chunks[i]->used);
        over_share = over_share_locked(slot, txn_bytes);
        if (position - shared->tail <= shared->size && !over_share) {
            uint64 at = shared->head;
            for (uint32 i = 0; i < txn.chunk_count; i++) {
                Chunk* c = txn.chunks[i];
                uint32 need = record_bytes(c->used);
                uint64 room = shared->size - at % shared->size;
                if (room < need) {
                    RecordHeader* pad = header_at(at);
                    pad->magic = record_magic;
                    pad->total_bytes = uint32(room);
                    pad->row_count = 0;
                    pad->database = InvalidOid;
                    pg_atomic_init_u32(&pad->state, state_pad);
                    at += room;
                }
                RecordHeader* h = header_at(at);
                h->magic = record_magic;
                h->total_bytes = need;
                h->payload_bytes = c->used;
                h->row_count = c->rows;
                h->first_seq = shared->next_seq;
                h->database = MyDatabaseId;
                h->relation = c->relid;
                h->role = c->role;
                h->natts = c->natts;
                h->attempts = 0;
                h->writer_pid = MyProcPid;
                h->committed_at = 0;
                h->not_before = 0;
                h->deferrals = 0;
                h->deferred = false;
                h->batch = 0;
                pg_atomic_init_u32(&h->state, state_reserved);
                c->ring_position = at;
                c->first_seq = shared->next_seq;
                shared->next_seq += c->rows;
                at += need;
            }
            pg_write_barrier();  // headers before the head that publishes them
            shared->head = at;
            pg_atomic_fetch_add_u64(&slot->live_bytes, txn_bytes);
            txn.slot = slot;
            txn.reserved = true;
            LWLockRelease(shared->lock);
            break;
        }
        LWLockRelease(shared->lock);
        if (advance_tail()) continue;
        if (!sleeping) {
            ConditionVariablePrepareToSleep(&shared->space_freed);
            sleeping = true;
            continue;
        }
        // The drain waits for us (drain_blocked_by_me): waiting longer cannot help.  Looked at
        // once deadlock_timeout has passed and then every deadlock_timeout, as PostgreSQL's
        // detector looks at a lock wait.
        TimestampTz now = GetCurrentTimestamp();
        if (now >= next_check) {
            if (int drain_pid = drain_blocked_by_me(slot)) {
                ConditionVariableCancelSleep();
                ereport(ERROR,
                        (errcode(ERRCODE_T_R_DEADLOCK_DETECTED), errmsg("deadlock detected"),
                         errdetail("This commit waits for space in the fast-ingest ring, and the drain of this "
                                   "database (process %d) waits for a lock this transaction holds.",
                                   drain_pid),
                         errhint("Do not take locks the drain needs (LOCK TABLE, ALTER TABLE, rows of its tables) "
                                 "in a transaction with fast-ingest rows, or raise aq.fast_ingest_buffer.")));
            }
            next_check = TimestampTzPlusMilliseconds(now, Max(DeadlockTimeout, 1));
        }
        long remaining = TimestampDifferenceMilliseconds(now, deadline);
        if (remaining <= 0) {
            ConditionVariableCancelSleep();
            ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_RESOURCES),
                            errmsg(over_share ? "this database's share of the fast-ingest ring is full"
                                              : "fast-ingest ring is full"),
                            errdetail("Waited %d ms for %llu bytes; the ring has %llu bytes.", settings::wait_timeout_ms,
                                      (unsigned long long)txn.ring_bytes, (unsigned long long)shared->size),
                            errhint("The drain is behind or stopped (see aq.memoptimize_write_area).  Raise "
                                    "aq.fast_ingest_buffer or aq.fast_ingest_wait_timeout.")));
        }
        long until_check = Max(1L, TimestampDifferenceMilliseconds(now, next_check));
        (void)ConditionVariableTimedSleep(&shared->space_freed, Min(remaining, until_check),
            AQ_WAIT_EVENT("AqIngestSpace"));
    }
    if (sleeping) ConditionVariableCancelSleep();

    // Copy outside the lock: the space is ours.
    for (uint32 i = 0; i < txn.chunk_count; i++) {
        Chunk* c = txn.chunks[i];
        RecordHeader* h = header_at(c->ring_position);
        memcpy(payload_of(h), c->data, c->used);
        pg_crc32c crc;
        INIT_CRC32C(crc);
        COMP_CRC32C(crc, c->data, c->used);
        FIN_CRC32C(crc);
        h->crc = crc;
    }
    pg_atomic_fetch_add_u64(&shared->rows_buffered, txn.rows);
}

void at_commit() {
    if (!txn.reserved) {
        forget_transaction();
        return;
    }
    TimestampTz now = GetCurrentTimestamp();
    pg_write_barrier();  // the rows before the state that lets the drain read them
    for (uint32 i = 0; i < txn.chunk_count; i++) {
        Chunk* c = txn.chunks[i];
        RecordHeader* h = header_at(c->ring_position);
        h->committed_at = now;
        pg_write_barrier();
        pg_atomic_write_u32(&h->state, state_committed);
    }
    Chunk* last = txn.chunks[txn.chunk_count - 1];
    write_hwm = last->first_seq + last->rows - 1;
    uint64 current = pg_atomic_read_u64(&txn.slot->committed_hwm);
    while (current < write_hwm && !pg_atomic_compare_exchange_u64(&txn.slot->committed_hwm, &current, write_hwm)) {
    }
    wake_drain(txn.slot);
    forget_transaction();
}

void at_abort() {
    if (txn.reserved) {
        uint64 bytes = 0;
        for (uint32 i = 0; i < txn.chunk_count; i++) {
            pg_atomic_write_u32(&header_at(txn.chunks[i]->ring_position)->state, state_aborted);
            bytes += record_bytes(txn.chunks[i]->used);
        }
        pg_atomic_fetch_sub_u64(&txn.slot->live_bytes, bytes);
        pg_atomic_fetch_sub_u64(&shared->rows_buffered, txn.rows);
    }
    forget_transaction();
}

// Fast-ingest rows do not take part in two-phase commit: the ring lives in shared memory and
// is emptied by a restart, which a prepared transaction survives, and the drain could not tell
// whether COMMIT PREPARED (maybe in another session) will come.  So PREPARE refuses them.
void pre_prepare() {
    if (txn.chunk_count > 0)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("cannot PREPARE a transaction that has fast-ingest rows"),
                        errhint("Commit it instead; fast-ingest rows do not take part in two-phase commit.")));
}

// The transaction is prepared (pre_prepare let it through: it has no rows left, only perhaps
// the memory of rows a rolled-back savepoint dropped): it is no longer this session's, and its
// memory (TopTransactionContext) is gone.
void at_prepare() {
    forget_transaction();
}

// Process exit: PostgreSQL has aborted any open transaction already (at_abort ran); this only
// makes sure nothing of this session stays counted in shared memory.
void at_exit() {
    if (txn.reserved && shared) {
        for (uint32 i = 0; i < txn.chunk_count; i++)
            pg_atomic_write_u32(&header_at(txn.chunks[i]->ring_position)->state, state_aborted);
        pg_atomic_fetch_sub_u64(&shared->rows_buffered, txn.rows);
    }
    forget_transaction();
}

void at_subxact(SubXactEvent event, SubTransactionId mine, SubTransactionId parent) {
    if (event == SUBXACT_EVENT_START_SUB) {
        if (!marks) {
            marks = static_cast<Mark*>(MemoryContextAlloc(TopMemoryContext, sizeof(Mark) * 8));
            mark_capacity = 8;
        }
        if (mark_count == mark_capacity) {
            mark_capacity *= 2;
            marks = static_cast<Mark*>(repalloc(marks, sizeof(Mark) * mark_capacity));
        }
        Mark& m = marks[mark_count++];
        m.subid = mine;
        m.chunk_count = txn.chunk_count;
        m.ring_bytes = txn.ring_bytes;
        m.rows = txn.rows;
        for (uint32 k = 0; k < Min(txn.chunk_count, uint32(recent_chunks)); k++) {
            Chunk* c = txn.chunks[txn.chunk_count - 1 - k];
            m.recent[k] = Fill{c->used, c->rows};
        }
        return;
    }
    if (event != SUBXACT_EVENT_COMMIT_SUB && event != SUBXACT_EVENT_ABORT_SUB) return;
    // Pop this subtransaction's mark (and any a failed start left above it).
    int found = -1;
    for (int i = mark_count - 1; i >= 0; i--)
        if (marks[i].subid == mine) {
            found = i;
            break;
        }
    if (found < 0) return;
    mark_count = found;
    if (event == SUBXACT_EVENT_COMMIT_SUB) return;  // its rows now belong to the parent
    // Rollback: back to where the chunks were when it started.
    const Mark& m = marks[found];
    txn.chunk_count = m.chunk_count;
    txn.ring_bytes = m.ring_bytes;
    txn.rows = m.rows;
    for (uint32 k = 0; k < Min(txn.chunk_count, uint32(recent_chunks)); k++) {
        Chunk* c = txn.chunks[txn.chunk_count - 1 - k];
        c->used = m.recent[k].used;
        c->rows = m.recent[k].rows;
    }
    (void)parent;
}

}  // namespace aq::ingest::writer
