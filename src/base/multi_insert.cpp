// See multi_insert.hpp for the protocol.  PostgreSQL-side code: plain data only.
extern "C" {
#include "postgres.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
}

#include "base/multi_insert.hpp"
#include "compat/executor.hpp"

namespace aq::base::multi_insert {

namespace {

constexpr int buffer_rows = 1000;               // as COPY's MAX_BUFFERED_TUPLES
constexpr std::size_t buffer_bytes = 64 * 1024;  // as COPY's MAX_BUFFERED_BYTES

}  // namespace

struct MultiInsert {
    Relation rel;
    EState* estate;
    ResultRelInfo* result_rel;
    BulkInsertState bulk;
    CommandId command;
    TupleTableSlot** slots;
    int slot_count;
    int buffered;
    std::size_t bytes;
    MemoryContext context;  // where begin() was called: everything else lives there
    MemoryContext batch;
    bool generated;
    bool constraints;
    bool partition;
    int natts;
    bool* domain;         // per column: its type is a domain
    void** domain_cache;  // domain_check's per-column cache
    bool any_domain;
};

const char* refusal(Relation rel, bool own_children) {
    if (XactReadOnly) return "a read-only transaction";  // the statement raises 25006
    if (IsInParallelMode()) return "a parallel operation";
    if (rel->rd_rel->relkind != RELKIND_RELATION) return "not an ordinary table";
    if (rel->trigdesc != nullptr) return "the table has triggers";
    if (rel->rd_rel->relhasrules) return "the table has rules";
    if (rel->rd_rel->relhassubclass && !own_children) return "the table has inheritance children";
    if (check_enable_rls(RelationGetRelid(rel), InvalidOid, true) == RLS_ENABLED)
        return "row-level security applies";
    return nullptr;
}

MultiInsert* begin(Relation rel, const compat::RangeTable& range_table, int expected_rows) {
    auto* m = static_cast<MultiInsert*>(palloc0(sizeof(MultiInsert)));
    TupleDesc desc = RelationGetDescr(rel);
    m->rel = rel;
    m->context = CurrentMemoryContext;
    m->estate = CreateExecutorState();
    compat::init_range_table(m->estate, range_table);
    m->result_rel = makeNode(ResultRelInfo);
    InitResultRelInfo(m->result_rel, rel, 1, nullptr, 0);
    ExecOpenIndices(m->result_rel, false);
    m->generated = desc->constr && desc->constr->has_generated_stored;
    m->constraints = desc->constr && (desc->constr->has_not_null || desc->constr->num_check > 0);
    m->partition = rel->rd_rel->relispartition;
    m->natts = desc->natts;
    m->domain = static_cast<bool*>(palloc0(sizeof(bool) * Max(desc->natts, 1)));
    m->domain_cache = static_cast<void**>(palloc0(sizeof(void*) * Max(desc->natts, 1)));
    for (int i = 0; i < desc->natts; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        m->domain[i] = !att->attisdropped && get_typtype(att->atttypid) == TYPTYPE_DOMAIN;
        m->any_domain |= m->domain[i];
    }
    m->slot_count = Max(1, Min(expected_rows, buffer_rows));
    m->slots = static_cast<TupleTableSlot**>(palloc(sizeof(TupleTableSlot*) * m->slot_count));
    for (int i = 0; i < m->slot_count; i++) m->slots[i] = table_slot_create(rel, nullptr);
    m->bulk = GetBulkInsertState();
    m->command = GetCurrentCommandId(true);
    m->batch = AllocSetContextCreate(CurrentMemoryContext, "aq multi-insert batch", ALLOCSET_DEFAULT_SIZES);
    return m;
}

namespace {

void flush(MultiInsert* m) {
    if (m->buffered == 0) return;
    CHECK_FOR_INTERRUPTS();
    table_multi_insert(m->rel, m->slots, m->buffered, m->command, 0, m->bulk);
    for (int j = 0; j < m->buffered; j++) {
        if (m->result_rel->ri_NumIndices > 0) {
            List* recheck = compat::insert_index_tuples(m->result_rel, m->slots[j], m->estate);
            list_free(recheck);
        }
        ResetPerTupleExprContext(m->estate);
        ExecClearTuple(m->slots[j]);
    }
    m->buffered = 0;
    m->bytes = 0;
    MemoryContextReset(m->batch);
}

}  // namespace

TupleTableSlot* next_slot(MultiInsert* m) {
    if (m->buffered == m->slot_count || m->bytes >= buffer_bytes) flush(m);
    TupleTableSlot* slot = m->slots[m->buffered];
    ExecClearTuple(slot);
    return slot;
}

MemoryContext batch_memory(MultiInsert* m) {
    return m->batch;
}

void add(MultiInsert* m, TupleTableSlot* slot, std::size_t bytes) {
    Assert(slot == m->slots[m->buffered]);
    ExecStoreVirtualTuple(slot);
    MemoryContext outer = MemoryContextSwitchTo(m->batch);
    if (m->any_domain) {
        TupleDesc desc = RelationGetDescr(m->rel);
        for (int i = 0; i < m->natts; i++)
            if (m->domain[i])
                domain_check(slot->tts_values[i], slot->tts_isnull[i], TupleDescAttr(desc, i)->atttypid,
                             &m->domain_cache[i], m->context);
    }
    if (m->generated) ExecComputeStoredGenerated(m->result_rel, m->estate, slot, CMD_INSERT);
    if (m->constraints) ExecConstraints(m->result_rel, slot, m->estate);
    // A partition's bound is a constraint too; ExecConstraints does not check it.
    if (m->partition) ExecPartitionCheck(m->result_rel, slot, m->estate, true);
    MemoryContextSwitchTo(outer);
    m->buffered++;
    m->bytes += bytes;
}

void finish(MultiInsert* m) {
    flush(m);
    FreeBulkInsertState(m->bulk);
    table_finish_bulk_insert(m->rel, 0);
    for (int i = 0; i < m->slot_count; i++) ExecDropSingleTupleTableSlot(m->slots[i]);
    ExecCloseIndices(m->result_rel);
    FreeExecutorState(m->estate);
    MemoryContextDelete(m->batch);
    pfree(m->domain);
    pfree(m->domain_cache);
    pfree(m->slots);
    pfree(m);
}

}  // namespace aq::base::multi_insert
