// fmgr entry points of fast ingest (Oracle's MEMOPTIMIZE FOR WRITE and DBMS_MEMOPTIMIZE):
// aq.enable_fast_ingest, aq.disable_fast_ingest, aq.get_write_hwm_seqid, aq.get_apply_hwm_seqid,
// aq.write_end, aq.writes_flush, the figures behind aq.memoptimize_write_area and the trigger
// aq._progress_restored.  The ring,
// the writer and the drain live in src/ingest/.
extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "fmgr.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include "ingest/drain.hpp"
#include "pg/trigger.hpp"
#include "ingest/ring.hpp"
#include "ingest/watermarks.hpp"
#include "ingest/writer.hpp"
#include "base/guard.hpp"

namespace aq {

namespace {

// An interval argument as milliseconds; NULL: no limit of the call's own (-1).
long timeout_argument(FunctionCallInfo fcinfo, int n) {
    if (PG_NARGS() <= n || PG_ARGISNULL(n)) return -1;
    Interval* span = PG_GETARG_INTERVAL_P(n);
    double ms = (double(span->month) * DAYS_PER_MONTH + span->day) * SECS_PER_DAY * 1000.0 + double(span->time) / 1000.0;
    if (ms < 0) throw Error(sqlstate::invalid_parameter_value, "timeout must not be negative");
    return ms > double(LONG_MAX) ? LONG_MAX : long(ms);
}

Datum enable_fast_ingest(FunctionCallInfo fcinfo) {
    Oid relid = PG_GETARG_OID(0);
    base::call([&] { ingest::enable_table(relid); });
    PG_RETURN_VOID();
}

Datum disable_fast_ingest(FunctionCallInfo fcinfo) {
    Oid relid = PG_GETARG_OID(0);
    base::call([&] { ingest::disable_table(relid); });
    PG_RETURN_VOID();
}

Datum get_write_hwm_seqid(FunctionCallInfo fcinfo) {
    base::call([] { ingest::ring::require_preloaded(); });
    uint64 hwm = ingest::writer::session_write_hwm();
    if (hwm == 0) PG_RETURN_NULL();
    PG_RETURN_INT64(int64(hwm));
}

Datum get_apply_hwm_seqid(FunctionCallInfo fcinfo) {
    uint64 hwm = 0;
    base::call([&] { hwm = ingest::apply_hwm(); });
    PG_RETURN_INT64(int64(hwm));
}

Datum write_end(FunctionCallInfo fcinfo) {
    long timeout = timeout_argument(fcinfo, 0);
    uint64 target = ingest::writer::session_write_hwm();
    base::call([&] { ingest::wait_applied_here(target, timeout); });
    PG_RETURN_VOID();
}

Datum writes_flush(FunctionCallInfo fcinfo) {
    long timeout = timeout_argument(fcinfo, 0);
    base::call([&] { ingest::wait_applied_everywhere(timeout); });
    PG_RETURN_VOID();
}

// aq._progress_restored(): the AFTER INSERT row trigger of aq.fast_ingest_progress.  Only the
// drain writes that table (PUBLIC may only read it): a row anyone else inserts is a restore of
// another server's progress, whose epochs this server must not take again.
Datum progress_restored(FunctionCallInfo fcinfo) {
    bool isnull;
    int32 epoch =
        trigger_int4_column(fcinfo, "epoch", "aq._progress_restored()", "aq.fast_ingest_progress", &isnull);
    if (ingest::drain::is_drain_process()) return PointerGetDatum(nullptr);
    if (!isnull && !ingest::ring::adopt_foreign_epoch(uint32(epoch)))
        throw Error("58030", "could not record the fast-ingest epoch in \"pg_aq_epoch\"", {},
                    "The server log says why.");
    return PointerGetDatum(nullptr);
}

Datum write_area(FunctionCallInfo fcinfo) {
    ingest::AreaStats s;
    base::call([&] { s = ingest::area_stats(); });
    Datum values[13];
    bool nulls[13] = {};
    values[0] = Int64GetDatum(int64(s.total_bytes));
    values[1] = Int64GetDatum(int64(s.used_bytes));
    values[2] = Int64GetDatum(int64(s.free_bytes));
    values[3] = Int64GetDatum(int64(s.rows_buffered));
    values[4] = Int32GetDatum(int32(s.writers));
    values[5] = Int64GetDatum(int64(s.applied_rows));
    values[6] = Int64GetDatum(int64(s.rejected_rows));
    values[7] = Int64GetDatum(int64(s.batches));
    values[8] = Int32GetDatum(int32(s.epoch));
    values[9] = Int64GetDatum(int64(s.write_hwm));
    values[10] = Int64GetDatum(int64(s.apply_hwm));
    values[11] = Int32GetDatum(s.drain_workers);
    values[12] = TimestampTzGetDatum(s.oldest_undrained);
    nulls[12] = s.oldest_undrained == 0;
    return base::composite_result(fcinfo, values, nulls);
}

}  // namespace

}  // namespace aq

AQ_SQL_FUNCTION(aq_enable_fast_ingest, aq::enable_fast_ingest)
AQ_SQL_FUNCTION(aq_disable_fast_ingest, aq::disable_fast_ingest)
AQ_SQL_FUNCTION(aq_get_write_hwm_seqid, aq::get_write_hwm_seqid)
AQ_SQL_FUNCTION(aq_progress_restored, aq::progress_restored)
AQ_SQL_FUNCTION(aq_get_apply_hwm_seqid, aq::get_apply_hwm_seqid)
AQ_SQL_FUNCTION(aq_write_end, aq::write_end)
AQ_SQL_FUNCTION(aq_writes_flush, aq::writes_flush)
AQ_SQL_FUNCTION(aq_memoptimize_write_area, aq::write_area)
