// Watermarks, flushes and the write area's figures (Oracle's DBMS_MEMOPTIMIZE and
// V$MEMOPTIMIZE_WRITE_AREA), plus the registry of enabled tables.  PostgreSQL-side code:
// these may ereport (cancel, timeout, bad table), so the SQL layer calls them through
// aq::base::call().
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/timestamp.h"
}

namespace aq::ingest {

// In this database: every row with an id at or below it has been applied or rejected.
uint64 apply_hwm();

// Waits until this session's rows up to `target` are applied or rejected (aq.write_end: the
// database's apply watermark reaches it, or no record of this session at or below it is left
// in the ring), or until every
// row committed anywhere when it was called is applied (aq.writes_flush).  timeout_ms < 0:
// no limit of its own (statement_timeout and cancel still apply).
void wait_applied_here(uint64 target, long timeout_ms);
void wait_applied_everywhere(long timeout_ms);

struct AreaStats {
    uint64 total_bytes, used_bytes, free_bytes;
    uint64 rows_buffered;
    uint32 writers;
    uint64 applied_rows, rejected_rows, batches;
    TimestampTz oldest_undrained;  // 0: nothing waits
    uint32 epoch;
    uint64 write_hwm, apply_hwm;
    int drain_workers;
};
AreaStats area_stats();

void enable_table(Oid relid);
void disable_table(Oid relid);

}  // namespace aq::ingest
