// Multi-insert: COPY FROM's way into a table, for callers that build the rows themselves (the
// bulk enqueue, the fast-ingest drain).
//
// Protocol
//  * refusal(rel) is the one place that decides whether rows may go into `rel` this way for the
//    current user in this transaction; it returns why not, or nullptr.  A caller that gets a
//    reason runs its equivalent INSERT statement instead, which gives every feature its SQL
//    meaning.  Refused: anything but an ordinary table (partitioned tables, foreign tables,
//    views), a table with triggers (foreign keys and deferrable unique constraints are
//    triggers), with rules, with row-level security in force for the current user, with
//    inheritance children (unless the caller says they are its own: a ring queue table's
//    segments, queue/ring.hpp, into which it writes instead), and any insert in a read-only or
//    parallel transaction.  A partition is accepted: its bound is checked row by row.
//  * begin() sets up an executor state with the caller's range table entry (the caller has
//    checked privileges; the entry also decides what a constraint error may show of the row),
//    the table's indexes, a BulkInsertState and a buffer of up to 1,000 slots.
//  * next_slot() hands out an empty slot (flushing first if the buffer is full); the caller
//    fills tts_values / tts_isnull in table column order, allocating anything a value points to
//    in batch_memory(), which lives until the next flush.  add() then checks the row as INSERT
//    does: domain constraints of its columns, stored generated columns computed, NOT NULL and
//    CHECK constraints (ExecConstraints), and for a partition its bound (ExecPartitionCheck:
//    23514, as INSERT).  Every 1,000 rows or 64 kB: table_multi_insert(), then the index entries
//    of those rows (ExecInsertIndexTuples: unique and exclusion checks as usual), then the
//    batch memory is reset.  Interrupts are checked at every flush.
//  * finish() flushes the rest, ends the bulk insert and frees everything.
//  Errors are PostgreSQL's own (ereport).  Everything is palloc'd in the caller's memory
//  context, so after an error the (sub)transaction abort and the caller's context reset leave
//  nothing behind.  PostgreSQL-side code: callers reach it from plain-data frames (inside
//  aq::base::call, or worker code that handles PostgreSQL errors itself).
#pragma once

extern "C" {
#include "postgres.h"
#include "executor/tuptable.h"
#include "nodes/parsenodes.h"
#include "utils/relcache.h"
}

#include <cstddef>

namespace aq::compat {
struct RangeTable;
}

namespace aq::base::multi_insert {

// Why rows may not go into rel by multi-insert (see the protocol), or nullptr.
const char* refusal(Relation rel, bool own_children = false);

struct MultiInsert;

// rel is open and locked (RowExclusiveLock) by the caller, who closes it after finish().
MultiInsert* begin(Relation rel, const compat::RangeTable& range_table, int expected_rows);
TupleTableSlot* next_slot(MultiInsert* m);
MemoryContext batch_memory(MultiInsert* m);
// The slot from next_slot(), filled; `bytes` (the row's size, roughly) counts toward a flush.
void add(MultiInsert* m, TupleTableSlot* slot, std::size_t bytes);
void finish(MultiInsert* m);

}  // namespace aq::base::multi_insert
