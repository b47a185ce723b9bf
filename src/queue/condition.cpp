// See condition.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/table.h"
#include "executor/executor.h"
#include "optimizer/optimizer.h"
#include "mb/pg_wchar.h"
#include "nodes/makefuncs.h"
#include "nodes/parsenodes.h"
#include "parser/parse_coerce.h"
#include "parser/parse_collate.h"
#include "parser/parse_expr.h"
#include "parser/parse_relation.h"
#include "parser/parser.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

#include <cstring>

#include "base/guard.hpp"
#include "compat/node_walker.hpp"
#include "queue/condition.hpp"

namespace aq::queue::condition {

namespace {

constexpr const char* table_alias = "tab";  // Oracle's name for the queue table in a condition

// While a condition is parsed or analyzed: a position in an error is a position in the
// condition's text, shown under that text (as an internal query), not under the caller's query.
struct Source {
    const char* text;
    const char* option;
};

void source_context(void* arg) {
    const auto* source = static_cast<const Source*>(arg);
    int position = geterrposition();
    if (position > 0) {
        errposition(0);
        internalerrposition(position);
        internalerrquery(source->text);
        errcontext("in %s", source->option);
    } else if (*source->text) {
        errcontext("%s: %s", source->option, source->text);
    }
}

struct SourceContext {
    Source source;
    ErrorContextCallback callback;
};

// The callback is popped when the work ends normally; on an error, PostgreSQL's error
// handling (the caller's PG_TRY in base::call, or the transaction abort) resets the stack.
template <class Work>
void with_source(const char* text, const char* option, Work&& work) {
    SourceContext context{{text, option}, {}};
    context.callback.callback = source_context;
    context.callback.arg = &context.source;
    context.callback.previous = error_context_stack;
    error_context_stack = &context.callback;
    work();
    error_context_stack = context.callback.previous;
}

int char_position(const char* text, int location) {
    return location < 0 ? 0 : pg_mbstrlen_with_len(text, location) + 1;
}

bool is_message_column(const char* name) {
    for (const char* column : message_columns)
        if (strcmp(column, name) == 0) return true;
    return false;
}

const char* const columns_detail =
    "A condition names the message columns msgid, corrid, priority, enq_time, delay, expiration, retry_count,"
    " exception_queue, enq_uid and user_data, bare or as tab.<column>, and fields of the payload as"
    " tab.user_data.<field>.";

void check_column_ref(const ColumnRef* ref, const Source& source) {
    int n = list_length(ref->fields);
    StringInfoData name;
    initStringInfo(&name);
    bool star = false;
    for (int i = 0; i < n; i++) {
        Node* field = static_cast<Node*>(list_nth(ref->fields, i));
        if (i > 0) appendStringInfoChar(&name, '.');
        if (IsA(field, A_Star)) {
            star = true;
            appendStringInfoChar(&name, '*');
        } else {
            appendStringInfoString(&name, strVal(field));
        }
    }
    const char* column = nullptr;
    if (!star) {
        const char* first = strVal(linitial(ref->fields));
        if (strcmp(first, table_alias) != 0)
            column = first;
        else if (n >= 2)
            column = strVal(lsecond(ref->fields));
    }
    if (!column || !is_message_column(column))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s cannot reference \"%s\"", source.option, name.data), errdetail("%s", columns_detail),
                        errposition(char_position(source.text, ref->location))));
}

bool check_node(Node* node, void* context) {
    if (!node) return false;
    const auto& source = *static_cast<const Source*>(context);
    if (IsA(node, SubLink))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must not contain a subquery", source.option),
                        errdetail("A condition is one expression over the message being dequeued."),
                        errposition(char_position(source.text, reinterpret_cast<SubLink*>(node)->location))));
    if (IsA(node, ParamRef))
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("%s must not contain parameters ($%d)", source.option,
                               reinterpret_cast<ParamRef*>(node)->number),
                        errhint("Write the value into the condition as a constant."),
                        errposition(char_position(source.text, reinterpret_cast<ParamRef*>(node)->location))));
    if (IsA(node, ColumnRef)) check_column_ref(reinterpret_cast<ColumnRef*>(node), source);
    return compat::raw_tree_walk_children(node, check_node, context);
}

// The clause of a SELECT that the text turned out to have besides its one expression.
const char* extra_clause(const SelectStmt* s) {
    if (s->distinctClause) return "DISTINCT";
    if (s->fromClause) return "FROM";
    if (s->whereClause) return "WHERE";
    if (s->groupClause) return "GROUP BY";
    if (s->havingClause) return "HAVING";
    if (s->windowClause) return "WINDOW";
    if (s->sortClause) return "ORDER BY";
    if (s->limitCount) return "LIMIT";
    if (s->limitOffset) return "OFFSET";
    if (s->lockingClause) return "FOR UPDATE";
    return nullptr;
}

// Oracle names a payload's field as a column followed by more names (tab.user_data.amount);
// PostgreSQL reads that as schema.table.column, and wants (tab.user_data).amount.  So while a
// condition is analyzed, such a reference becomes that field selection.  A bare column becomes
// tab.<column>: the statement may read other tables with columns of the same names (a
// multi-consumer dequeue reads the delivery rows too).  Anything else (the statement's own
// columns) is left to PostgreSQL.
Node* oracle_field_reference(ParseState* pstate, ColumnRef* ref) {
    Node* result = nullptr;
    base::entry_void([&] {
        base::call([&] {
            auto* s = static_cast<Statement*>(pstate->p_ref_hook_state);
            if (!s->in_condition || !IsA(linitial(ref->fields), String)) return;
            int column_at = strcmp(strVal(linitial(ref->fields)), table_alias) == 0 ? 1 : 0;
            int n = list_length(ref->fields);
            if (n <= column_at || (column_at == 1 && n == 2)) return;  // tab alone, or tab.<column>
            for (int i = column_at; i < n; i++)
                if (!IsA(list_nth(ref->fields, i), String)) return;
            ColumnRef* column = makeNode(ColumnRef);
            column->fields = list_make2(makeString(pstrdup(table_alias)), list_nth(ref->fields, column_at));
            column->location = ref->location;
            Node* node = reinterpret_cast<Node*>(column);
            if (n > column_at + 1) {
                A_Indirection* selection = makeNode(A_Indirection);
                selection->arg = node;
                selection->indirection = list_copy_tail(ref->fields, column_at + 1);
                node = reinterpret_cast<Node*>(selection);
            }
            result = transformExpr(pstate, node, pstate->p_expr_kind);
        });
    });
    return result;
}

// Analyzes the condition in pstate (whose namespace has the queue table as tab).  in_condition
// is true exactly while the condition's own references are transformed: the analysis runs
// guarded, so an error in it (an unknown function after a DROP, a cancel) clears the flag before
// it propagates.  A flag left set would make the plan cache's next analysis of the statement read
// the statement's own names (d.msgid) as fields of tab.
Node* analyze(ParseState* pstate, Statement* s, ParseExprKind kind) {
    Node* expr = nullptr;
    s->in_condition = true;
    try {
        base::call([&] {
            with_source(s->text, s->option, [&] {
                expr = transformExpr(pstate, static_cast<Node*>(copyObjectImpl(s->raw)), kind);
                expr = coerce_to_boolean(pstate, expr, s->option);
            });
        });
    } catch (...) {
        s->in_condition = false;
        throw;
    }
    s->in_condition = false;
    return expr;
}

// The statement's own parameters and the condition's placeholder (see condition.hpp).
Node* statement_param(ParseState* pstate, ParamRef* ref) {
    Node* result = nullptr;
    base::entry_void([&] {
        base::call([&] {
            auto* s = static_cast<Statement*>(pstate->p_ref_hook_state);
            if (ref->number >= 1 && ref->number <= s->nparams) {
                Param* param = makeNode(Param);
                param->paramkind = PARAM_EXTERN;
                param->paramid = ref->number;
                param->paramtype = s->param_types[ref->number - 1];
                param->paramtypmod = -1;
                param->paramcollid = get_typcollation(param->paramtype);
                param->location = ref->location;
                result = reinterpret_cast<Node*>(param);
            } else if (ref->number == s->nparams + 1) {
                result = analyze(pstate, s, pstate->p_expr_kind);
            }
        });
    });
    return result;
}

}  // namespace

Node* parse(const char* text, const char* option) {
    Node* expr = nullptr;
    with_source(text, option, [&] {
        List* parsed = raw_parser(text, RAW_PARSE_PLPGSQL_EXPR);
        auto* select = reinterpret_cast<SelectStmt*>(linitial_node(RawStmt, parsed)->stmt);
        if (!IsA(select, SelectStmt) || select->op != SETOP_NONE)
            ereport(ERROR, (errcode(ERRCODE_SYNTAX_ERROR), errmsg("%s must be one boolean expression", option)));
        int expressions = list_length(select->targetList);
        if (expressions == 0)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must not be empty", option),
                            errhint("Pass NULL for no condition.")));
        if (const char* clause = extra_clause(select))
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be one boolean expression", option),
                            errdetail("It has a %s clause.", clause)));
        if (expressions > 1)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be one boolean expression", option),
                            errdetail("It has %d expressions separated by commas.", expressions),
                            errhint("Combine them with AND or OR.")));
        auto* target = linitial_node(ResTarget, select->targetList);
        if (target->name)
            ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE), errmsg("%s must be one boolean expression", option),
                            errdetail("It has a label (AS %s).", target->name),
                            errposition(char_position(text, target->location))));
        Source source{text, option};
        check_node(target->val, &source);
        expr = target->val;
    });
    return expr;
}

void check(Node* raw, const char* text, const char* option, Oid relid) {
    Statement s{nullptr, 0, raw, text, option, false};
    ParseState* pstate = make_parsestate(nullptr);
    pstate->p_sourcetext = text;
    pstate->p_pre_columnref_hook = oracle_field_reference;
    pstate->p_ref_hook_state = &s;
    Relation rel = table_open(relid, AccessShareLock);
    ParseNamespaceItem* item =
        addRangeTableEntryForRelation(pstate, rel, AccessShareLock, makeAlias(table_alias, NIL), false, true);
    addNSItemToQuery(pstate, item, false, true, true);
    Node* expr = analyze(pstate, &s, EXPR_KIND_WHERE);
    with_source(text, option, [&] { assign_expr_collations(pstate, expr); });
    table_close(rel, NoLock);  // kept to the end of the transaction, as the statement's lock
    free_parsestate(pstate);
}

// ---------------------------------------------------------------- row filters

struct RowFilter {
    EState* estate;  // its query context holds the expression state
    ExprContext* econtext;
    ExprState* qual;
};

RowFilter* begin_filter(Node* raw, const char* text, const char* option, Relation rel) {
    Statement s{nullptr, 0, raw, text, option, false};
    ParseState* pstate = make_parsestate(nullptr);
    pstate->p_sourcetext = text;
    pstate->p_pre_columnref_hook = oracle_field_reference;
    pstate->p_ref_hook_state = &s;
    ParseNamespaceItem* item =
        addRangeTableEntryForRelation(pstate, rel, AccessShareLock, makeAlias(table_alias, NIL), false, true);
    addNSItemToQuery(pstate, item, false, true, true);
    Node* expr = analyze(pstate, &s, EXPR_KIND_WHERE);
    with_source(text, option, [&] { assign_expr_collations(pstate, expr); });
    free_parsestate(pstate);
    auto* filter = static_cast<RowFilter*>(palloc0(sizeof(RowFilter)));
    filter->estate = CreateExecutorState();
    MemoryContext previous = MemoryContextSwitchTo(filter->estate->es_query_cxt);
    Expr* planned = expression_planner(reinterpret_cast<Expr*>(expr));
    filter->qual = ExecInitQual(list_make1(planned), nullptr);
    MemoryContextSwitchTo(previous);
    filter->econtext = GetPerTupleExprContext(filter->estate);
    return filter;
}

bool filter_passes(RowFilter* filter, TupleTableSlot* slot) {
    ResetExprContext(filter->econtext);
    filter->econtext->ecxt_scantuple = slot;
    return ExecQual(filter->qual, filter->econtext);
}

void end_filter(RowFilter* filter) {
    FreeExecutorState(filter->estate);
    pfree(filter);
}

void setup_statement(ParseState* pstate, void* arg) {
    pstate->p_paramref_hook = statement_param;
    pstate->p_pre_columnref_hook = oracle_field_reference;
    pstate->p_ref_hook_state = arg;
}

// ---------------------------------------------------------------- plans

namespace {

struct CachedPlan {
    Oid relid;
    Oid payload_type;
    int32 statement;
    char qualified_table[4 * (2 * NAMEDATALEN + 2) + 8];  // up to two qualified names
    const char* text;  // in context
    MemoryContext context;
    SPIPlanPtr plan;
    uint64 last_used;
};

constexpr int cached_plan_count = 32;
CachedPlan cached_plans[cached_plan_count];
uint64 plan_clock = 0;

void forget(CachedPlan& entry) {
    if (entry.plan) SPI_freeplan(entry.plan);
    if (entry.context) MemoryContextDelete(entry.context);
    entry = CachedPlan{};
}

}  // namespace

SPIPlanPtr prepared_plan(const PlanRequest& r) {
    CachedPlan* victim = nullptr;
    for (auto& entry : cached_plans) {
        if (entry.plan && entry.relid == r.relid && entry.payload_type == r.payload_type &&
            entry.statement == r.statement && strcmp(entry.text, r.text) == 0) {
            if (strcmp(entry.qualified_table, r.qualified_table) == 0) {
                entry.last_used = ++plan_clock;
                return entry.plan;
            }
            victim = &entry;  // the table was renamed (or its OID reused): prepare it again
            break;
        }
    }
    if (!victim) {  // an empty entry, or the least recently used
        victim = &cached_plans[0];
        for (auto& entry : cached_plans)
            if (victim->plan && (!entry.plan || entry.last_used < victim->last_used)) victim = &entry;
    }
    // Parsed and checked in the caller's context first: an error leaves nothing behind.
    Node* raw = parse(r.text, r.option);
    check(raw, r.text, r.option, r.relid);
    forget(*victim);
    MemoryContext context = AllocSetContextCreate(TopMemoryContext, "aq condition", ALLOCSET_SMALL_SIZES);
    MemoryContext previous = MemoryContextSwitchTo(context);
    auto* setup = static_cast<Statement*>(palloc0(sizeof(Statement)));
    // The plan cache analyzes the statement again with these: they must live as long as the plan.
    auto* param_types = static_cast<Oid*>(palloc(sizeof(Oid) * Max(r.nparams, 1)));
    if (r.nparams > 0) memcpy(param_types, r.param_types, sizeof(Oid) * r.nparams);
    setup->param_types = param_types;
    setup->nparams = r.nparams;
    setup->raw = static_cast<Node*>(copyObjectImpl(raw));
    setup->text = pstrdup(r.text);
    setup->option = r.option;
    MemoryContextSwitchTo(previous);
    victim->context = context;
    victim->text = setup->text;
    SPIPlanPtr plan = SPI_prepare_params(r.build_sql(r.context), setup_statement, setup, r.cursor_options);
    if (!plan) {
        forget(*victim);
        elog(ERROR, "aq: SPI_prepare of a statement with %s failed: %s", r.option, SPI_result_code_string(SPI_result));
    }
    SPI_keepplan(plan);
    victim->plan = plan;
    victim->relid = r.relid;
    victim->payload_type = r.payload_type;
    victim->statement = r.statement;
    strlcpy(victim->qualified_table, r.qualified_table, sizeof victim->qualified_table);
    victim->last_used = ++plan_clock;
    return plan;
}

}  // namespace aq::queue::condition
