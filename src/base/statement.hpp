// Where a call stands in its statement: whether its statement's commit follows it with nothing
// of this backend acting on its result first.  Used for the claims' flush (retries.hpp, 1): a
// dequeue whose commit follows leaves its claims to the commit's own flush; any other asks the
// WAL writer to flush them meanwhile.
//
// Invariants:
//  1. The executor and utility hooks (module.cpp) count the ExecutorRun calls and the utility
//     statements this backend is inside and remember the outermost run's QueryDesc; PG_FINALLY
//     restores the counts when a run or a utility statement raises.
//  2. commit_follows(flinfo) is true only when all of these hold:
//     a. no transaction block: the statement is its own transaction (simple query protocol, or an
//        extended-protocol statement before its Sync);
//     b. the function is evaluated by the executor of the client's statement itself: the only run
//        (no utility statement around it: DO, CALL, EXPLAIN, COPY, CREATE TABLE AS), the active
//        portal's (not a background worker's SPI), and its FmgrInfo lives in that run's query
//        context (not a function's statement, a PL/pgSQL loop's cursor or a simple PL/pgSQL
//        expression);
//     c. that run's plan is a SELECT of Result, ProjectSet and FunctionScan nodes only, with no
//        init plans, subplans or row locks, whose expressions call nothing but the calling
//        function itself, non-volatile functions of its schema (the option constructors) and
//        PostgreSQL's built-in functions (OIDs below FirstNormalObjectId) whose arguments carry
//        no column and no call of the function (generate_series feeding it, not jsonb
//        functions reading its payload).
//     Then, once the call returns, its result only goes to the client (through the types' output
//     functions) and the commit follows; a later statement of the same transaction
//     (extended protocol before its Sync) starts with the executor hook, which flushes first.
//  3. false is always safe: the caller then acts as if something followed.
// Test: regress `claims_flush` (which statements leave their claims to the commit).
#pragma once

extern "C" {
#include "postgres.h"
#include "executor/execdesc.h"
#include "fmgr.h"
}

namespace aq::base::statement {

// The executor hook's bookkeeping (invariant 1).
void run_started(QueryDesc* query);
void run_ended();
void utility_started();
void utility_ended();

bool commit_follows(const FmgrInfo* flinfo);

}  // namespace aq::base::statement
