// Prepared statements over a queue table, kept for the life of the backend.
//
// An entry is keyed by (table, payload type, statement kind) and remembers the name it was
// built with (the qualified names of the tables the statement reads): if a table is renamed, or
// dropped and its OID reused, the stale plan is freed and the statement prepared again rather
// than run.  Statements with a condition have their own cache (condition.hpp).
//
// PostgreSQL-side code: call it inside base::call, with an SPI connection.
#pragma once

extern "C" {
#include "postgres.h"
#include "executor/spi.h"
}

namespace aq::queue::plan_cache {

struct Request {
    Oid relid;
    Oid payload_type;
    int32 statement;
    const char* name;  // what the statement was built with (the qualified table names)
    const Oid* argtypes;
    int nargs;
    int cursor_options;
    char* (*build_sql)(const void* context);  // called only to prepare the statement
    const void* context;
};

SPIPlanPtr plan(const Request& request);

// The statements over queue tables are planned (their generic plan is made at the first
// execution in a backend, and again after an invalidation) without sequential or bitmap scans,
// without sorts (unless allow_sort) and without JIT: on a new or drained queue table those look
// cheapest, and the plan would then read the whole table at every call once it has grown.  A
// disabled step that remains costs 1e10 to the planner, which would otherwise JIT-compile it at
// every execution.  Returns the GUC nest level to pass to index_plans_end (an error in between
// is undone by the transaction's abort).
int index_plans_begin(bool allow_sort);
void index_plans_end(int level);

}  // namespace aq::queue::plan_cache
