// Bulk enqueue: COPY's multi-insert path applied to a queue table.
//
// Protocol.  The queue table is opened with RowExclusiveLock and checked: it must still
// have exactly the columns aq.create_queue_table made (names, order, types; a grouped one also
// transaction_group, which the request's group fills: groups.hpp), and the
// multi-insert path (base/multi_insert.hpp) must not refuse it (triggers, rules, row-level
// security, inheritance children, a read-only transaction...).  If it does not, nothing is done
// and false is returned: the caller then runs the equivalent INSERT statement, so triggers, RLS
// and user-added columns with defaults keep their SQL meaning.
// Otherwise, with the caller's privileges checked as for the equivalent INSERT ...
// RETURNING msgid (USAGE on the schema, INSERT on the columns it names, SELECT on msgid;
// 42501 otherwise):
//   - message ids come from the msgid identity sequence, one nextval per message, in
//     payload order;
//   - rows go through the multi-insert path, which checks them as INSERT would (NOT NULL,
//     CHECK, and the partition bound of a queue table attached as a partition: 23514) and
//     writes them in batches with one BulkInsertState, index entries after each batch.
// All of it is in the caller's transaction: visible at commit, gone on rollback.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "utils/relcache.h"
#include "utils/timestamp.h"
}

#include <initializer_list>

#include "compat/executor.hpp"
#include "queue/deliveries.hpp"
#include "queue/ring.hpp"

namespace aq::queue {

// The columns of a queue table, in the order aq.create_queue_table creates them.
enum QueueTableColumn {
    col_msgid,
    col_q_id,
    col_enq_time,
    col_priority,
    col_delay,
    col_expiration,
    col_corrid,
    col_retry_count,
    col_exception_queue,
    col_enq_uid,
    col_user_data,
    column_count
};

// A multi-consumer table that stores each message once has two more (once_walk.hpp): consumer_name,
// set on a consumer's copy in an exception queue (5), and recipients, a message's recipient list
// (NULL: every subscriber).
enum OnceColumn { col_consumer_name = column_count, col_recipients, once_column_count };

struct BulkEnqueue {
    Oid relid;
    const ring::Segments* segments;  // the queue table's ring (ring.hpp; count 0: classic): messages go to the current segment
    int32 queue_table_id;
    Oid payload_type;
    int32 queue_id;
    TimestampTz enq_time;
    int count;
    const Datum* payloads;
    const Datum* properties;       // aq.message_properties per payload, or nullptr
    const bool* properties_null;   // with properties
    Datum* msgids_out;             // count entries, filled in payload order
    deliveries::Message* messages_out;  // count entries, or nullptr: what a delivery row copies
    const int64* group = nullptr;       // a grouped queue table: the transaction's group (groups.hpp)
    // Stored once (audience.hpp): each message's recipients (text[]; nullptr or null: every
    // subscriber), and the msgids drawn for its rules (nullptr: drawn here).
    const Datum* recipients = nullptr;
    const bool* recipients_null = nullptr;
    const Datum* msgids_in = nullptr;
};

// One message's column values (column_count of them) as the multi-insert writes them: the
// properties as aq.message_properties defines them.
void message_row(const BulkEnqueue& r, int i, Datum msgid, Datum enq_uid, Datum* v, bool* isnull);

// The attribute-number set of these queue table columns, for a range table entry.
Bitmapset* column_set(std::initializer_list<int> columns);

// The queue table as a range table needing these permissions (compat::check_permissions):
// the bulk paths check what the equivalent statement would.
compat::RangeTable queue_table_range(Relation rel, AclMode permissions, Bitmapset* inserted, Bitmapset* selected);

// The queue table still has exactly aq's columns (names, order, types; user_data of this
// payload type; and transaction_group on a grouped one) and the multi-insert path does not refuse it (no triggers, rules, row-level
// security for the current user, inheritance children; not a read-only or parallel
// transaction): the bulk paths may work on it directly.  The caller holds a lock on it.
// ring_parent: rel is a ring queue table, whose children are its segments (queue/ring.hpp).
bool plain_queue_table(Relation rel, Oid payload_type, bool ring_parent = false);

// May raise PostgreSQL errors: call it inside base::call.
bool bulk_enqueue(const BulkEnqueue& request);

// The lowest priority (the first in a priority order) among the messages of an enqueue's
// aq.message_properties[] (NULL, a NULL element or priority: the default, 1), for the scan floor
// of a priority-ordered queue (scan_floor::lower).
int32 lowest_priority(ArrayType* properties);
// Each priority among them once, ascending (palloc'd; *count of them).
int32* distinct_priorities(ArrayType* properties, int* count);
// The earliest time at which one of them becomes ready or expires (0: none has a delay or an
// expiration), for the time manager (time_manager::note_due).
TimestampTz earliest_due(ArrayType* properties, TimestampTz enq_time);

// The queue table has, after aq's columns, the transaction_group column of message_grouping
// transactional (groups.hpp).
bool has_group_column(Relation rel);
// Whether the table has, after the queue table's columns, consumer_name and recipients: a
// multi-consumer table that stores each message once (OnceColumn).
bool has_once_columns(Relation rel);

// The queue table's msgid identity sequence (cached per table until a relcache invalidation).
Oid msgid_sequence(Relation rel);

}  // namespace aq::queue
