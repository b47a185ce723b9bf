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

}  // namespace aq::queue::plan_cache
