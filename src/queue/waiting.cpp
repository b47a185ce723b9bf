// See waiting.hpp.
extern "C" {
#include "postgres.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/execdesc.h"
#include "executor/spi.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "storage/proc.h"
#include "tcop/pquery.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/portal.h"
#include "utils/snapmgr.h"
}

#include "compat/node_walker.hpp"

#include "base/spi.hpp"
#include "base/xact_end.hpp"
#include "queue/statements.hpp"
#include "queue/waiting.hpp"

namespace aq::queue {

namespace {

// A function the statement may call around a wait without a snapshot: PostgreSQL's own (they read
// no table with the statement's snapshot) or aq's (each of its statements takes a fresh one).
bool foreign_function(Oid function, void* aq_namespace) {
    return function >= FirstNormalObjectId && get_func_namespace(function) != *static_cast<Oid*>(aq_namespace);
}

// Whether the expression calls another function or holds a sub-select.
bool reads_elsewhere(Node* node, void* aq_namespace) {
    if (!node) return false;
    if (IsA(node, SubPlan) || IsA(node, AlternativeSubPlan) || IsA(node, SubLink)) return true;
    if (check_functions_in_node(node, foreign_function, aq_namespace)) return true;
    return compat::expression_walk_children(node, reads_elsewhere, aq_namespace);
}

// Whether the plan reads nothing but function results and constants, with aq's and PostgreSQL's
// functions only: the shapes of SELECT aq.dequeue(...), SELECT * FROM aq.dequeue_array(...),
// SELECT (aq.listen(...)).name.
bool plan_reads_no_table(Plan* plan, Oid aq_namespace) {
    if (!plan) return true;
    Node* exprs[4] = {reinterpret_cast<Node*>(plan->targetlist), reinterpret_cast<Node*>(plan->qual), nullptr, nullptr};
    switch (nodeTag(plan)) {
    case T_Result:
        exprs[2] = reinterpret_cast<Result*>(plan)->resconstantqual;
        break;
    case T_ProjectSet:
        break;
    case T_FunctionScan:
        exprs[2] = reinterpret_cast<Node*>(reinterpret_cast<FunctionScan*>(plan)->functions);
        break;
    case T_ValuesScan:
        exprs[2] = reinterpret_cast<Node*>(reinterpret_cast<ValuesScan*>(plan)->values_lists);
        break;
    case T_SubqueryScan:
        if (!plan_reads_no_table(reinterpret_cast<SubqueryScan*>(plan)->subplan, aq_namespace)) return false;
        break;
    case T_Limit:
        exprs[2] = reinterpret_cast<Limit*>(plan)->limitOffset;
        exprs[3] = reinterpret_cast<Limit*>(plan)->limitCount;
        break;
    default:
        return false;
    }
    for (Node* e : exprs)
        if (reads_elsewhere(e, &aq_namespace)) return false;
    return plan_reads_no_table(plan->lefttree, aq_namespace) && plan_reads_no_table(plan->righttree, aq_namespace);
}

// Whether a cursor other than this statement's portal is open (pg_cursors: DECLARE, a protocol-level
// portal): it keeps its snapshot.  (PostgreSQL's ThereAreNoReadyPortals would leak its hash scan.)
bool other_cursor_open(const char* own_portal) {
    Oid types[1] = {TEXTOID};
    Datum args[1] = {CStringGetTextDatum(own_portal)};
    int rc = SPI_execute_with_args("SELECT EXISTS (SELECT FROM pg_catalog.pg_cursors WHERE name <> $1)", 1, types, args,
                                   nullptr, true, 1);
    if (rc != SPI_OK_SELECT || SPI_processed != 1) elog(ERROR, "aq: pg_cursors lookup failed (%d)", rc);
    bool isnull;
    bool open = DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    SPI_freetuptable(SPI_tuptable);
    return open;
}

}  // namespace

bool may_sleep_without_snapshot() {
    if (IsolationUsesXactSnapshot()) return false;  // the transaction's snapshot serves its later statements
    Portal portal = ActivePortal;
    if (!portal || portal->strategy != PORTAL_ONE_SELECT || !portal->queryDesc) return false;
    QueryDesc* query = portal->queryDesc;
    // Called by the statement itself, not by a function (which would have pushed its own).
    if (!ActiveSnapshotSet() || GetActiveSnapshot() != query->snapshot || !query->plannedstmt) return false;
    PlannedStmt* statement = query->plannedstmt;
    if (statement->subplans != NIL) return false;
    ListCell* cell;
    foreach (cell, statement->rtable) {
        RTEKind kind = static_cast<RangeTblEntry*>(lfirst(cell))->rtekind;
        if (kind != RTE_FUNCTION && kind != RTE_RESULT && kind != RTE_VALUES && kind != RTE_SUBQUERY) return false;
    }
    Oid aq_namespace = get_namespace_oid("aq", true);
    return OidIsValid(aq_namespace) && plan_reads_no_table(statement->planTree, aq_namespace) &&
           !other_cursor_open(portal->name);
}

// Lets go of the backend's xmin until the next snapshot (invariant 5).  The catalog snapshot goes
// first; with the statement's snapshot active, nothing recomputes the xmin from the registered
// snapshots meanwhile (SnapshotResetXmin returns while a snapshot is active).
void let_go_of_xmin() {
    InvalidateCatalogSnapshot();
    MyProc->xmin = InvalidTransactionId;
}

namespace {
struct NextDelay {
    const QueueInfo* q;
    TimestampTz after;
    TimestampTz next;
};
void read_next_delay(void* arg) {
    auto* r = static_cast<NextDelay*>(arg);
    SPIPlanPtr plan = statement_plan(*r->q, next_delay, InvalidOid);
    Datum args[2] = {Int32GetDatum(r->q->queue_id), TimestampTzGetDatum(r->after)};
    base::spi::execute(plan, args, nullptr, 1, SPI_OK_SELECT, "next delay lookup");
    bool isnull;
    Datum next = base::spi::first_value(&isnull);
    r->next = isnull ? 0 : DatumGetTimestampTz(next);
}
}  // namespace

TimestampTz next_visible_time(const QueueInfo& q, TimestampTz after) {
    NextDelay r{&q, after, 0};
    // A ring's look holds no lock on its segments past itself (ring.hpp, L1).
    if (q.segments.count > 0)
        base::xact_end::look(read_next_delay, &r);
    else
        read_next_delay(&r);
    return r.next;
}

long next_visible_in(const QueueInfo& q, TimestampTz now) {
    if (q.exception_queue) return 1000;
    TimestampTz visible_at = next_visible_time(q, now);
    return visible_at > now ? static_cast<long>((visible_at - now + 999) / 1000) : -1;
}

}  // namespace aq::queue
