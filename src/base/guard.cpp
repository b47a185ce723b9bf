// See guard.hpp for the protocol.  This file is the only place that turns a C++
// exception into ereport(), and the only place that runs PG_TRY for C++ code.
extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "funcapi.h"
#include "utils/elog.h"
#include "utils/memutils.h"
}

#include <new>

#include "base/guard.hpp"

namespace aq::base {

namespace {
// The exception captured by entry(), as plain palloc'd data (ErrorContext-free).
struct Captured {
    ErrorData* pg_error;  // a PostgreSQL error to re-throw as is, or
    int sqlerrcode;       // an aq::Error / std::exception turned into fields
    char* message;
    char* detail;
    char* hint;
};
Captured captured;

// Runs inside a catch block, so it must not ereport: allocation failure gives nullptr.
char* copy_text(const char* s) {
    if (!s || !*s) return nullptr;
    size_t len = strlen(s) + 1;
    char* copy = static_cast<char*>(MemoryContextAllocExtended(CurrentMemoryContext, len, MCXT_ALLOC_NO_OOM));
    if (copy) memcpy(copy, s, len);
    return copy;
}
}  // namespace

const char* PgError::what() const noexcept {
    return edata_ && edata_->message ? edata_->message : "PostgreSQL error";
}

ErrorData* run_guarded(void (*fn)(void*), void* arg) noexcept {
    MemoryContext caller_context = CurrentMemoryContext;
    ErrorData* volatile edata = nullptr;
    PG_TRY();
    {
        fn(arg);
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(caller_context);
        edata = CopyErrorData();
        FlushErrorState();
    }
    PG_END_TRY();
    return edata;
}

void capture_current_exception() noexcept {
    captured = Captured{};
    try {
        throw;
    } catch (const PgError& e) {
        captured.pg_error = e.edata();
    } catch (const aq::Error& e) {
        const char* s = e.sqlstate();
        captured.sqlerrcode = MAKE_SQLSTATE(s[0], s[1], s[2], s[3], s[4]);
        captured.message = copy_text(e.what());
        captured.detail = copy_text(e.detail().c_str());
        captured.hint = copy_text(e.hint().c_str());
    } catch (const std::bad_alloc&) {
        captured.sqlerrcode = ERRCODE_OUT_OF_MEMORY;
        captured.message = nullptr;  // no allocation while memory is short
    } catch (const std::exception& e) {
        captured.sqlerrcode = ERRCODE_INTERNAL_ERROR;
        captured.message = copy_text(e.what());
    } catch (...) {
        captured.sqlerrcode = ERRCODE_INTERNAL_ERROR;
        captured.message = nullptr;
    }
}

void raise_captured() {
    Captured c = captured;
    captured = Captured{};
    if (c.pg_error) ReThrowError(c.pg_error);
    if (c.sqlerrcode == ERRCODE_OUT_OF_MEMORY && !c.message)
        ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory in aq")));
    ereport(ERROR, (errcode(c.sqlerrcode), errmsg("%s", c.message ? c.message : "unexpected C++ exception in aq"),
                    c.detail ? errdetail("%s", c.detail) : 0, c.hint ? errhint("%s", c.hint) : 0));
    pg_unreachable();
}

Datum composite_result(FunctionCallInfo fcinfo, Datum* values, bool* nulls) {
    Datum result = 0;
    call([&] {
        TupleDesc desc;
        if (get_call_result_type(fcinfo, nullptr, &desc) != TYPEFUNC_COMPOSITE)
            elog(ERROR, "return type must be a row type");
        desc = BlessTupleDesc(desc);
        result = HeapTupleGetDatum(heap_form_tuple(desc, values, nulls));
    });
    return result;
}

}  // namespace aq::base
