// Every SQL statement of the queue room, built from the rules (rules.hpp) and prepared once per
// backend, queue table and shape (plan_cache.hpp; a deq_condition's: condition.hpp).
//
// Invariants:
//  1. Each rule of a message appears in the SQL only as rules.hpp writes it: ready, unexpired,
//     settled, the head rule, the order key.  The C walks (index_walk.hpp) evaluate the same
//     definitions, so a statement and a walk never disagree on what may be taken.
//  2. The statements run with the caller's search_path, so every operator, function and
//     collation in them is schema-qualified (OPERATOR(pg_catalog.x), pg_catalog."C"): nothing
//     the caller's schemas define can stand in for them.
//  3. Every read, update and delete of a queue table says ONLY: a table that inherits from it is
//     not part of the queue, and its rows (whose q_id and ctid may equal a message's) are never
//     read, moved or deleted through it.
//  4. Statements that claim, expire or wait read the claim table: the delivery table of a
//     multi-consumer queue table (its rows have the same columns for that).
//  5. A dequeue claims with a materialized CTE read once by an InitPlan (LIMIT n FOR UPDATE
//     SKIP LOCKED), so it never locks more than n rows, and deletes the batch by one TID scan.
//  6. Plans are generic (LIMIT $3 and a growing queue would re-plan custom plans every call),
//     except by a correlation pattern, whose constant prefix only a custom plan turns into an
//     index range.  The qualified table names are part of a plan's key: a dropped table whose
//     OID is reused gets a new plan, never the stale one.
// Proved by: unit rules_test (1); regress owner_run (2: a hostile search_path; 3: an inheriting
// table), multi_insert (3), subscribers (4), dequeue_paths and bulk_dequeue (5), deq_condition (6).
//
// PostgreSQL-side: inside base::call, with an SPI connection.
#pragma once

extern "C" {
#include "postgres.h"
#include "catalog/pg_type_d.h"
#include "executor/spi.h"
}

#include "queue/catalog.hpp"

namespace aq::queue {

enum Statement : int32 {
    enqueue_plain = 0,
    enqueue_with_properties = 1,
    next_delay = 2,       // when the next delayed message becomes visible
    expire_messages = 3,  // moves expired messages to their exception queues
    ready_candidates = 4,  // LISTEN: the messages a dequeue could take now, in the queue's order
    find_next_group = 5,        // a grouped queue table: the first group after $2 with a message ready at $3
    next_expiry = 6,            // the queue's earliest expiration (the time manager)
    delays_passed = 7,          // per priority, the first position whose delay passed in ($2, $3]
    expired_exists = 8,         // whether expire_messages would move any (a ring's look first: ring.hpp, L1)
    retained_end = 9,           // the earliest end of retention of the table's retained copies (retention.hpp)
    purge_retained = 10,        // deletes the retained copies whose retention ended by $1 (retention.hpp)
    group_rest = 11,            // whether group $2 of the queue still has a message not passed at $3 (groups.hpp)
    dequeue_base = 1024,  // + DequeueShape bits
};

// What a dequeue statement does; each combination is its own prepared statement.
enum DequeueShape : int32 {
    after_position = 1,   // navigation NEXT_MESSAGE: after this transaction's (or browse's) last message
    by_msgid = 2,
    by_correlation = 4,   // a LIKE pattern: custom-planned, so the planner sees its prefix
    mode_browse = 8,      // read only
    mode_locked = 16,     // read and lock (FOR UPDATE SKIP LOCKED); removed later by msgid
    priority_order = 32,  // sort_list priority,enq_time
    exception_queue = 64, // its messages are expired by definition: no delay/expiration filter
    correlation_exact = 128,  // a pattern without wildcards: corrid = $7, generic plan
    with_condition = 256,     // deq_condition: the placeholder $10 (condition.hpp), one plan per condition text
    by_consumer = 512,        // multi-consumer: the delivery rows of consumer $9
    multi_consumer = 1024,    // multi-consumer: claims delivery rows (deliveries.hpp), reads the message
    by_group = 2048,          // message_grouping transactional: the messages of group $10 (groups.hpp)
};

// The parameters of every dequeue statement.
// $1 queue, $2 now, $3 array size, $4 $5 $8 the position (enq_time, msgid, priority), $6 msgid,
// $7 correlation, $9 consumer, $10 transaction group.
constexpr int dequeue_param_count = 10;
inline constexpr Oid dequeue_param_types[dequeue_param_count] = {INT4OID, TIMESTAMPTZOID, INT8OID, TIMESTAMPTZOID, INT8OID,
                                                      INT8OID, TEXTOID,        INT4OID, TEXTOID,        INT8OID};

// Oracle's correlation is a LIKE pattern (backslash escapes).  Without a wildcard it is a
// value: a generic plan finds it on the correlation index, with no planning per call.  A
// pattern gets a plan made for it, in which the planner turns a constant prefix into an
// index range (a generic plan cannot, and walks the queue in its sort order instead).
int32 correlation_shape(const char* pattern);

// The prepared statement (statement: a Statement, or dequeue_base + DequeueShape bits);
// properties_array_type: an enqueue's aq.message_properties[] type, else InvalidOid.
SPIPlanPtr statement_plan(const QueueInfo& q, int32 statement, Oid properties_array_type);

// Runs a statement that returns one value (a by-value type: a time, a boolean, a count) with its
// arguments; *isnull for NULL or no row.  Requires an SPI connection.
Datum statement_value(const QueueInfo& q, int32 statement, Datum* args, const char* what, bool* isnull);
// ... one that takes one argument and returns one time (next_expiry, retained_end), 0 for NULL.
TimestampTz statement_time(const QueueInfo& q, int32 statement, Datum arg, const char* what);

// A dequeue with a deq_condition runs its own statement (shape with_condition), one plan per
// condition text (condition.hpp).
SPIPlanPtr condition_plan(const QueueInfo& q, int32 statement, const char* text);

// A ring's carry-forward (ring.hpp, C2): moves at most `limit` settled rows (rules.hpp, 3) of the
// segment `from` that no other transaction holds (FOR UPDATE SKIP LOCKED) into the segment `to`,
// unchanged, and returns per queue (q_id) the lowest priority and enq_time moved, how many, and
// (grouped) the lowest transaction group.  from, to: qualified names; both have the queue table's
// columns in its order.  grouped: only the rows of the groups in $1 (int8[]: C6), and a fifth
// column.  Not prepared: it runs when a ring is jammed, a few times a rotation at most.
char* carry_forward_sql(const char* from, const char* to, int limit, bool grouped);
// The groups of a grouped segment's rows that carry_forward_sql could move, the first `limit` of
// them in the groups' order.
char* carry_groups_sql(const char* from, int limit);

}  // namespace aq::queue
