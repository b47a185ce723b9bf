// See statement.hpp.
#include "base/statement.hpp"

extern "C" {
#include "access/xact.h"
#include "catalog/pg_proc.h"
#include "nodes/nodeFuncs.h"
#include "nodes/plannodes.h"
#include "utils/lsyscache.h"
#include "tcop/pquery.h"
#include "utils/portal.h"
}

#include "compat/node_walker.hpp"

namespace aq::base::statement {

namespace {

int depth = 0;                    // ExecutorRun calls this backend is inside
QueryDesc* outermost = nullptr;   // the outermost of them (valid while depth > 0)
int utility_depth = 0;            // utility statements this backend is inside

struct Allowed {
    Oid self;
    Oid schema;     // the calling function's, looked up when first needed
    bool bad;       // a function that is not allowed at all
    bool built_in;  // a built-in function (allowed when it does not take the result)
};

bool note_function(Oid fn, void* context) {
    auto* allowed = static_cast<Allowed*>(context);
    if (fn == allowed->self) return false;
    if (fn < FirstNormalObjectId) {
        allowed->built_in = true;
        return false;
    }
    if (allowed->schema == InvalidOid) allowed->schema = get_func_namespace(allowed->self);
    allowed->bad = get_func_namespace(fn) != allowed->schema || func_volatile(fn) == PROVOLATILE_VOLATILE;
    return allowed->bad;
}

// Whether an argument below node may carry the call's result: a column of a plan node below or
// of the function scan, or the call itself.
bool takes_result(Node* node, void* context) {
    if (node == nullptr) return false;
    if (IsA(node, Var)) return true;
    if (IsA(node, FuncExpr) && castNode(FuncExpr, node)->funcid == static_cast<Allowed*>(context)->self) return true;
    return compat::expression_walk_children(node, takes_result, context);
}

bool expression_disallowed(Node* node, void* context) {
    if (node == nullptr) return false;
    if (IsA(node, SubPlan) || IsA(node, AlternativeSubPlan)) return true;
    auto* allowed = static_cast<Allowed*>(context);
    allowed->built_in = false;
    if (check_functions_in_node(node, note_function, context)) return true;
    if (allowed->built_in && compat::expression_walk_children(node, takes_result, context)) return true;
    return compat::expression_walk_children(node, expression_disallowed, context);
}

bool plan_disallowed(Plan* plan, Allowed* allowed) {
    if (plan == nullptr) return false;
    if (plan->initPlan != NIL) return true;
    switch (nodeTag(plan)) {
        case T_Result:
            if (expression_disallowed(castNode(Result, plan)->resconstantqual, allowed)) return true;
            break;
        case T_ProjectSet:
            break;
        case T_FunctionScan:
            if (expression_disallowed(reinterpret_cast<Node*>(castNode(FunctionScan, plan)->functions), allowed))
                return true;
            break;
        default:
            return true;
    }
    return expression_disallowed(reinterpret_cast<Node*>(plan->targetlist), allowed) ||
           expression_disallowed(reinterpret_cast<Node*>(plan->qual), allowed) ||
           plan_disallowed(plan->lefttree, allowed) || plan_disallowed(plan->righttree, allowed);
}

}  // namespace

void run_started(QueryDesc* query) {
    if (depth++ == 0) outermost = query;
}

void run_ended() {
    if (--depth == 0) outermost = nullptr;
}

void utility_started() { utility_depth++; }

void utility_ended() { utility_depth--; }

bool commit_follows(const FmgrInfo* flinfo) {
    if (IsTransactionBlock() || utility_depth != 0 || depth != 1 || outermost == nullptr || outermost->estate == nullptr)
        return false;
    if (ActivePortal == nullptr || ActivePortal->queryDesc != outermost) return false;  // the client's portal
    if (flinfo == nullptr || flinfo->fn_mcxt != outermost->estate->es_query_cxt) return false;
    const PlannedStmt* stmt = outermost->plannedstmt;
    if (stmt == nullptr || stmt->commandType != CMD_SELECT || stmt->hasModifyingCTE || stmt->rowMarks != NIL ||
        stmt->subplans != NIL)
        return false;
    Allowed allowed{flinfo->fn_oid, InvalidOid, false, false};
    return !plan_disallowed(stmt->planTree, &allowed);
}

}  // namespace aq::base::statement
