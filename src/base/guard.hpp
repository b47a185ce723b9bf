// The C++/PostgreSQL boundary: the only two ways control may cross it.
//
//  1. PostgreSQL -> C++:  every SQL-callable function, hook and callback runs its C++
//     body through aq::base::entry().  C++ exceptions are caught there, copied into
//     palloc'd plain data, and only after the catch block has ended (so every C++
//     destructor has run) re-raised as ereport(ERROR) with the exception's SQLSTATE.
//
//  2. C++ -> PostgreSQL:  every call into PostgreSQL that may ereport(ERROR) from a frame
//     that owns C++ objects goes through aq::base::call().  It runs the callee under
//     PG_TRY, so a longjmp never unwinds a C++ frame: the error is copied out of
//     ErrorContext and rethrown as aq::base::PgError, which entry() re-raises intact
//     (SQLSTATE, detail, hint, context — e.g. 57014 for a cancel).
//
// Rule for callers: the lambda handed to call() holds plain data only; guard a batch
// of work (one SPI statement), never a tuple.
#pragma once

extern "C" {
#include "postgres.h"
#include "fmgr.h"
}

#include <exception>
#include <utility>

#include "common/error.hpp"

namespace aq::base {

// A PostgreSQL error caught by call(); owns a copy of the ErrorData.
class PgError : public std::exception {
public:
    explicit PgError(ErrorData* edata) : edata_(edata) {}
    ErrorData* edata() const noexcept { return edata_; }
    const char* what() const noexcept override;

private:
    ErrorData* edata_;
};

// Implementation detail of call(): runs fn(arg) under PG_TRY; returns the copied
// ErrorData if PostgreSQL raised an error, nullptr otherwise.
ErrorData* run_guarded(void (*fn)(void*), void* arg) noexcept;

// Runs f() so that a PostgreSQL error becomes a PgError and a C++ exception thrown
// inside f() still propagates (after PostgreSQL's exception stack is restored).
template <class F>
void call(F&& f) {
    struct Box {
        F* f;
        std::exception_ptr cxx;
    } box{&f, nullptr};
    ErrorData* edata = run_guarded(
        [](void* p) {
            auto* b = static_cast<Box*>(p);
            try {
                (*b->f)();
            } catch (...) {
                b->cxx = std::current_exception();
            }
        },
        &box);
    if (edata) throw PgError(edata);
    if (box.cxx) std::rethrow_exception(box.cxx);
}

// Records the exception being handled as plain data; called inside entry()'s catch.
void capture_current_exception() noexcept;

// Raises the pending error captured by entry(); never returns.
[[noreturn]] void raise_captured();

// Runs body() for an fmgr entry point; on any C++ exception, ereports instead.
template <class Body>
Datum entry(Body&& body) {
    Datum result = 0;
    bool failed = false;
    try {
        result = body();
    } catch (...) {
        failed = true;
        capture_current_exception();
    }
    if (failed) raise_captured();  // outside the catch: no C++ object is alive here
    return result;
}

// Same for hooks and callbacks that return nothing.
template <class Body>
void entry_void(Body&& body) {
    entry([&]() -> Datum {
        body();
        return 0;
    });
}

// A composite result (the function's declared row type) from already-converted Datums.
Datum composite_result(FunctionCallInfo fcinfo, Datum* values, bool* nulls);

}  // namespace aq::base

// Declares an fmgr-callable function whose C++ body is `impl(fcinfo)` in namespace aq.
#define AQ_SQL_FUNCTION(sqlname, impl)                                        \
    extern "C" {                                                              \
    PGDLLEXPORT Datum sqlname(PG_FUNCTION_ARGS);                              \
    PG_FUNCTION_INFO_V1(sqlname);                                             \
    }                                                                         \
    Datum sqlname(PG_FUNCTION_ARGS) {                                         \
        return aq::base::entry([&]() -> Datum { return impl(fcinfo); });        \
    }
