// The statements of the multi-consumer room (deliveries.hpp), shared by fanout.cpp (the fan-out
// statements, a rule's statement) and sweep.cpp (the removal sweep's statement): their numbers,
// their SQL and their plans, written in deliveries_statements.cpp.  Internal to the room.
// PostgreSQL-side code: call inside base::call, with an SPI connection.
#pragma once

extern "C" {
#include "postgres.h"
#include "executor/spi.h"
}

#include "queue/deliveries.hpp"

namespace aq::queue::deliveries {

constexpr int sweep_limit = 10000;  // messages a sweep removes at most

// Above every statement number of statements.hpp (dequeue_base + shape bits), whose plans share
// the cache under the same names (plan_cache.hpp).
enum Statement : int32 {
    deliver_to_names = 1 << 20,  // $1 message ids x $2 consumer names
    deliver_by_rule,             // $1 message ids matching the rule, to consumer $2
    deliver_listed,              // the pairs ($1[i], $2[i])
    sweep_queue,                 // removes the messages of queue $1 (priority $2) before its first delivery
    once_rule,                   // stored once: the positions of the messages ($1 .. $11) a rule holds for (audience.hpp)
};

struct Build {
    const Tables* tables;
    int32 statement;
};

// The statement's SQL (context: a Build).
char* build_sql(const void* context);

// The parameter types of a rule's statement (deliver_by_rule): $1 message ids, $2 a consumer name.
extern const Oid ids_and_name[2];

// The plan cache's names of the queue table's statements (plan_cache.hpp).
const char* names_of(const Tables& t);

// The statement's plan, from the plan cache (plan_cache.hpp).
SPIPlanPtr plan_of(const Tables& t, int32 statement);

}  // namespace aq::queue::deliveries
