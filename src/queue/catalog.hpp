// The queue catalog: a queue found by name or id (aq.queues, aq.queue_tables), the lookup
// cache, and what a lookup can find wrong, as the error the user gets.  Internal to the queue
// room (queue_store.hpp is its public face).
//
// Invariants:
//  1. The queue table is found by OID, never by name (a look-alike table created later under the
//     same name is not the queue table); its current name and owner come from the syscache at
//     every use, and build the statements (statements.hpp).
//  2. A cached lookup (per queue name and role) is used only while the aq.queues and
//     aq.queue_tables row versions it was read from are still the visible ones under a fresh
//     snapshot: same table and file, same TID, same xmin.  start_queue, stop_queue, alter_queue
//     and drop_queue leave a new version or none, and the lookup statement runs again.
//  3. A problem is found inside base::call (check_queue, check_consumer: plain data) and thrown
//     outside it (throw_problem), as the one C++ error type (common/error.hpp).
//  4. The library works with the aq objects of 0.4.0 and later (a package upgraded before ALTER
//     EXTENSION aq UPDATE): catalog_has_consumers() says whether the catalog knows
//     multi-consumer queue tables; older objects get 55000 with a hint.
// Proved by: regress names (1: quoting), queue_admin (2: stop, start, drop while cached), errors
// (3: every problem's SQLSTATE); TAP 015_upgrade (4).
//
// PostgreSQL-side: lookup and lookup_by_id need an SPI connection, inside base::call.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

#include "queue/deliveries.hpp"
#include "queue/ring.hpp"

namespace aq::queue {

constexpr int qualified_name_size = 2 * (2 * NAMEDATALEN + 2) + 2;  // "sch"."tab", quotes doubled

struct QueueInfo {
    int32 queue_id;
    bool enqueue_enabled;
    bool dequeue_enabled;
    Oid payload_type;
    Oid relid;  // InvalidOid when the storage table is gone
    char qualified_table[qualified_name_size];
    int32 queue_table_id;
    bool priority_order;         // sort_list priority,enq_time
    bool exception_queue;        // queue_type exception_queue
    Oid owner;                   // of the queue table
    int32 default_exception_id;  // the queue table's aq$_<name>_e, or 0
    bool multiple_consumers;     // messages reach consumers through the delivery table
    Oid delivery_relid;          // of a multi-consumer queue table; InvalidOid when gone
    char qualified_deliveries[qualified_name_size];
    bool grouped;                // message_grouping transactional (groups.hpp)
    ring::Segments segments;     // of a ring queue table (ring.hpp); count 0: classic
    Interval retention_time;     // how long a removed message is kept as PROCESSED (retention.hpp)

    // A multi-consumer ring that stores each message once (once_walk.hpp): no delivery table.
    bool stored_once() const { return multiple_consumers && segments.count > 0 && OidIsValid(segments.receipts[0]); }
};

// The table a dequeue claims rows of: the delivery table of a multi-consumer queue table.
Oid claim_relid(const QueueInfo& q);
const char* claim_table(const QueueInfo& q);

// The multi-consumer room's view of the queue (deliveries.hpp).
deliveries::Tables tables_of(const QueueInfo& q, const char* queue_name);

// Whether this database's aq objects have multi-consumer queue tables (0.6.0 and later); known
// after the first lookup.
bool catalog_has_consumers();

// Requires an SPI connection.  False when no queue has that name (or id).  A fresh snapshot each
// time: a waiting dequeue sees a stop_queue or drop_queue that committed while it slept.
bool lookup(const char* queue_name, QueueInfo& info);
bool lookup_by_id(int32 queue_id, QueueInfo& info);

// The queue table of this role's last lookup of the queue, unchecked (no catalog read): for a
// check that may be wrong only in the safe direction (immediate.hpp, 3).  False if none.
bool cached_table(const char* queue_name, Oid* relid);
// Whether role's last lookup of the queue (unchecked) found a queue table with transaction
// groups; false if none is cached.
bool cached_grouped(const char* queue_name, Oid role, bool* grouped);

// What went wrong with a lookup, found inside base::call and thrown outside it.
enum class QueueProblem {
    none,
    unknown,
    storage_missing,
    wrong_payload,
    exception_enqueue,
    enqueue_disabled,
    dequeue_disabled,
    consumer_required,    // a multi-consumer queue's dequeue names no consumer
    consumer_not_allowed,  // a single-consumer queue's dequeue names one
    foreign_inheritor,     // a ring queue table inherited by a table that is not one of its segments
};

struct Problem {
    QueueProblem kind = QueueProblem::none;
    Oid expected_type = InvalidOid;
    Oid given_type = InvalidOid;
    Oid relation = InvalidOid;  // foreign_inheritor: that table
};

// Whether the queue can be used so (payload_type: the caller's; for_enqueue or a dequeue).
Problem check_queue(bool found, const QueueInfo& q, Oid payload_type, bool for_enqueue);

// Whether a dequeue (or LISTEN) names a consumer as the queue needs: a multi-consumer queue's
// normal queue always, its exception queue optionally (NULL: any consumer's messages), a
// single-consumer queue never.
Problem check_consumer(const QueueInfo& q, const char* consumer);

// The problem as the user's error (argument: "payload" or "payload_type", for the type mismatch).
[[noreturn]] void throw_problem(const Problem& p, const char* queue_name, const char* argument);

}  // namespace aq::queue
