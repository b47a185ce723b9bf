// Conditions over messages: Oracle's dequeue condition (dequeue_options.deq_condition), a
// boolean search condition over a message's properties and its payload, e.g.
//   tab.user_data.amount > 100 AND priority < 3
//
// Protocol.  The text is never spliced into a statement.
//  1. parse(): PostgreSQL's own parser reads it as one expression (raw_parser in
//     RAW_PARSE_PLPGSQL_EXPR mode, a target list without SELECT).  Exactly one unlabeled
//     expression may be there: a FROM, WHERE, GROUP BY, ... clause, a second expression, a label
//     (AS) or a `;` is rejected.  The raw tree is then walked: no subquery, no parameter ($n), and
//     every column reference names one of the message columns (message_columns below), bare or
//     as tab.<column>, optionally followed by fields of a composite payload
//     (tab.user_data.amount).  Operators, functions, casts, CASE and the rest of PostgreSQL's
//     expressions are allowed: they are resolved with the caller's search_path and evaluated
//     with the caller's privileges, inside the caller's dequeue statement.
//  2. check(): the raw tree is analyzed as the WHERE clause of a query on the queue table under
//     the alias tab, and must be boolean.  While it is analyzed, a column reference followed by
//     more names (Oracle's tab.user_data.amount, or user_data.amount) is read as PostgreSQL's
//     field selection (tab.user_data).amount, by the parse state's pre-column-reference hook.  Unknown columns, fields, functions and type mismatches
//     are reported here, with their position in the condition (psql shows it under the
//     condition's text).  Errors: 42601 for syntax, 22023 for what step 1 rejects, and
//     PostgreSQL's own SQLSTATE for the rest (42703, 42883, 42804, ...).
//  3. A statement that uses the condition is prepared with SPI_prepare_params and
//     setup_statement() as its parser setup: $1 .. $nparams are the statement's own parameters
//     (their types fixed, as SPI_prepare would make them) and $(nparams + 1) is the placeholder
//     where the condition's raw tree is analyzed in place, in the statement's own parse state.
//     The plan cache runs the setup again whenever it re-analyzes the statement (an index
//     created, the table altered, another search_path), so a Statement and everything it points
//     to must live as long as the plan.
//
// PostgreSQL-side code: parse() and check() may raise PostgreSQL errors (call them inside
// base::call); setup_statement is called by PostgreSQL.
#pragma once

extern "C" {
#include "postgres.h"
#include "nodes/nodes.h"
#include "parser/parse_node.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "utils/relcache.h"
}

namespace aq::queue::condition {

// The columns of a queue table a condition may name (Oracle's names, as in AQ$<queue_table>).
inline constexpr const char* message_columns[] = {"msgid",       "corrid",          "priority", "enq_time",
                                                  "delay",       "expiration",      "retry_count",
                                                  "exception_queue", "enq_uid",     "user_data"};

// Parses text (the value of the option named option); returns its raw expression tree, in the
// current memory context.
Node* parse(const char* text, const char* option);

// Analyzes raw against the queue table relid (alias tab): it must be a valid boolean expression.
void check(Node* raw, const char* text, const char* option, Oid relid);

struct Statement {
    const Oid* param_types;  // of $1 .. $nparams
    int nparams;
    Node* raw;               // the condition, analyzed where $(nparams + 1) stands
    const char* text;        // its text, for error positions
    const char* option;
    bool in_condition;       // set while the condition is analyzed (Oracle's field names apply)
};

// A ParserSetupHook: arg is a Statement*.
void setup_statement(ParseState* pstate, void* arg);

// The plans of statements with a condition (a dequeue's deq_condition, a subscriber's rule),
// prepared once per (table, payload type, statement, condition text) and kept in a small cache
// that drops the least recently used.  Each entry owns a memory context holding the condition's
// text, its raw tree and the Statement that the plan cache re-analyzes with; it is freed only
// together with the plan.  A condition is parsed and checked against the table (positions in
// errors are positions in the condition) before anything is kept.  An entry whose table was
// renamed (or whose OID was reused) is prepared again.
struct PlanRequest {
    Oid relid;                    // the table the condition is over (alias tab)
    Oid payload_type;
    int32 statement;              // the caller's statement kind
    const char* qualified_table;  // its current name
    const char* text;             // the condition
    const char* option;           // its name, for errors
    const Oid* param_types;       // the statement's parameters; the placeholder is $(nparams + 1)
    int nparams;
    int cursor_options;
    char* (*build_sql)(const void* context);  // the statement, called only to prepare it
    const void* context;
};

// Requires an SPI connection.
SPIPlanPtr prepared_plan(const PlanRequest& request);

// A condition a walk evaluates itself on the rows it reads (once_walk.hpp, 3), where no statement
// reads them: analyzed against rel as check() does (alias tab, rel's own attribute numbers; the same
// errors, at their positions in the condition), planned as an expression, and evaluated with the
// caller's privileges, its search_path as of the analysis, on a row of rel in a slot.  It lives in
// the current memory context until end_filter (an error's abort frees it with that context).  May
// raise PostgreSQL errors and throw base::PgError (inside base::call).
struct RowFilter;
RowFilter* begin_filter(Node* raw, const char* text, const char* option, Relation rel);
bool filter_passes(RowFilter* filter, TupleTableSlot* slot);
void end_filter(RowFilter* filter);

}  // namespace aq::queue::condition
