// fmgr entry points of the type aq.wait_time, the wait of aq.dequeue_options and aq.listen:
// Oracle's WAIT in every form an Oracle application writes it.
//   text     'forever', 'no_wait' (also 'dbms_aq.forever', ...), a number of seconds ('5', '-1' for
//            forever), or an interval ('5 s', '00:01:00');
//   casts    from smallint, integer, bigint, numeric and double precision (seconds; -1 =
//            DBMS_AQ.FOREVER) and from
//            interval, all implicit, so wait => 5, wait => -1 and wait => interval '5 s' all work.
// The value is int8 microseconds, -1 for forever (as is anything beyond queue::max_wait_seconds);
// its text is 'forever', or the seconds as a number.  aq.dequeue_options keeps its wait as an
// interval (NULL = forever), which its constructor makes with aq._wait_interval.  The parsing rules are queue::parse_wait /
// parse_oracle_wait (pure C++, unit-tested).  The SQL declarations are in sql/aq--0.5.0--0.6.0.sql.
extern "C" {
#include "postgres.h"
#include "fmgr.h"
#include "libpq/pqformat.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"
}

#include <cmath>
#include <cstdio>
#include <string>

#include "base/guard.hpp"
#include "pg/wait_time.hpp"
#include "queue/options.hpp"

namespace aq {

namespace {

constexpr int64 forever = -1;

int64 from_seconds(double seconds) {
    queue::Wait wait = queue::parse_wait(seconds);  // 22023 for a negative or NaN one
    return wait.forever ? forever : static_cast<int64>(std::llround(wait.seconds * 1e6));
}

// A number of seconds given as a number: -1 is DBMS_AQ.FOREVER.
int64 from_number(double seconds) {
    return from_seconds(queue::oracle_wait_number(seconds));
}

Datum wait_time_in(FunctionCallInfo fcinfo) {
    const char* text = PG_GETARG_CSTRING(0);
    std::optional<double> oracle = queue::parse_oracle_wait(text);
    if (oracle) return Int64GetDatum(from_seconds(*oracle));
    Interval* iv = nullptr;
    bool valid = true;
    try {
        base::call([&] {
            iv = DatumGetIntervalP(DirectFunctionCall3(interval_in, CStringGetDatum(text), ObjectIdGetDatum(InvalidOid),
                                                       Int32GetDatum(-1)));
        });
    } catch (const base::PgError& e) {
        // Only a text interval_in cannot read is an invalid wait (its errors are data exceptions,
        // class 22); anything else (out of memory, a cancel) goes on as it is.
        if (ERRCODE_TO_CATEGORY(e.edata()->sqlerrcode) != ERRCODE_DATA_EXCEPTION) throw;
        valid = false;
    }
    if (!valid)
        throw Error("22P02", std::string("invalid wait: \"") + text + "\"",
                    "A wait is 'forever' (or NULL), 'no_wait' (or 0), a number of seconds (-1 is forever) or an"
                    " interval such as '5 s'.");
    return Int64GetDatum(interval_wait_micros(iv));
}

Datum wait_time_out(FunctionCallInfo fcinfo) {
    int64 micros = PG_GETARG_INT64(0);
    if (micros < 0) return CStringGetDatum(pstrdup("forever"));
    char text[64];
    snprintf(text, sizeof text, "%lld.%06lld", static_cast<long long>(micros / 1000000), static_cast<long long>(micros % 1000000));
    char* end = text + strlen(text) - 1;  // no trailing zeros, no trailing point
    while (*end == '0') *end-- = '\0';
    if (*end == '.') *end = '\0';
    return CStringGetDatum(pstrdup(text));
}

Datum wait_time_recv(FunctionCallInfo fcinfo) {
    auto* buffer = reinterpret_cast<StringInfo>(PG_GETARG_POINTER(0));
    int64 micros = pq_getmsgint64(buffer);
    if (micros < forever) throw Error("22P03", "invalid aq.wait_time in binary input");
    return Int64GetDatum(micros);
}

Datum wait_time_send(FunctionCallInfo fcinfo) {
    StringInfoData buffer;
    pq_begintypsend(&buffer);
    pq_sendint64(&buffer, PG_GETARG_INT64(0));
    return PointerGetDatum(pq_endtypsend(&buffer));
}

Datum wait_time_from_int2(FunctionCallInfo fcinfo) {
    return Int64GetDatum(from_number(PG_GETARG_INT16(0)));
}

Datum wait_time_from_int4(FunctionCallInfo fcinfo) {
    return Int64GetDatum(from_number(PG_GETARG_INT32(0)));
}

Datum wait_time_from_int8(FunctionCallInfo fcinfo) {
    return Int64GetDatum(from_number(static_cast<double>(PG_GETARG_INT64(0))));
}

Datum wait_time_from_float8(FunctionCallInfo fcinfo) {
    return Int64GetDatum(from_number(PG_GETARG_FLOAT8(0)));
}

Datum wait_time_from_numeric(FunctionCallInfo fcinfo) {
    double seconds = 0;
    Datum number = PG_GETARG_DATUM(0);
    base::call([&] { seconds = DatumGetFloat8(DirectFunctionCall1(numeric_float8, number)); });
    return Int64GetDatum(from_number(seconds));
}

Datum wait_time_from_interval(FunctionCallInfo fcinfo) {
    return Int64GetDatum(interval_wait_micros(PG_GETARG_INTERVAL_P(0)));
}

// The interval aq.dequeue_options holds: NULL for forever.
Datum wait_interval(FunctionCallInfo fcinfo) {
    int64 micros = PG_GETARG_INT64(0);
    if (micros < 0) PG_RETURN_NULL();
    auto* iv = static_cast<Interval*>(palloc0(sizeof(Interval)));
    iv->time = micros;
    return IntervalPGetDatum(iv);
}

}  // namespace

double interval_seconds(const Interval* iv) {
    return iv->time / 1e6 + iv->day * 86400.0 + iv->month * (30.0 * 86400.0);
}

int64 interval_wait_micros(const Interval* iv) {
    return from_seconds(interval_seconds(iv));
}

queue::Wait wait_of_micros(int64 micros) {
    return micros < 0 ? queue::Wait{} : queue::Wait{false, micros / 1e6};
}

}  // namespace aq

AQ_SQL_FUNCTION(aq__wait_time_in, aq::wait_time_in)
AQ_SQL_FUNCTION(aq__wait_time_out, aq::wait_time_out)
AQ_SQL_FUNCTION(aq__wait_time_recv, aq::wait_time_recv)
AQ_SQL_FUNCTION(aq__wait_time_send, aq::wait_time_send)
AQ_SQL_FUNCTION(aq__wait_time_from_int2, aq::wait_time_from_int2)
AQ_SQL_FUNCTION(aq__wait_time_from_int4, aq::wait_time_from_int4)
AQ_SQL_FUNCTION(aq__wait_time_from_int8, aq::wait_time_from_int8)
AQ_SQL_FUNCTION(aq__wait_time_from_float8, aq::wait_time_from_float8)
AQ_SQL_FUNCTION(aq__wait_time_from_numeric, aq::wait_time_from_numeric)
AQ_SQL_FUNCTION(aq__wait_time_from_interval, aq::wait_time_from_interval)
AQ_SQL_FUNCTION(aq__wait_interval, aq::wait_interval)
