// aq::Error — the one C++ exception type of aq's core (queues, commit modes, ingest).
//
// Pure C++ (no PostgreSQL header): it carries a five-character SQLSTATE and the
// message, detail and hint that the boundary (src/base/guard.cpp) turns into an
// ereport() once the exception has been caught and destroyed.
//
// The error rule — one for all of aq; each of the three ways has one use:
//  1. Code with C++ objects alive (the core, outside base::call) reports what a user can cause by
//     throwing aq::Error: a SQLSTATE from sqlstate:: below, a message that names the problem, a
//     detail and a hint where the user can act.  The boundary raises it after every destructor ran.
//  2. PostgreSQL-side code (inside base::call, in a hook or a worker: plain data only) reports what
//     a user or the system's configuration can cause with ereport(ERROR, errcode(...), ...), never
//     with elog and never by throwing.
//  3. elog(ERROR, "aq: ...") only for what cannot happen unless aq or PostgreSQL is broken (SPI
//     refusing a statement aq prepared, a row it holds locked gone): SQLSTATE XX000.  The SPI
//     bracket (base/spi.hpp) raises those for every statement.
//  4. A PostgreSQL error raised inside base::call comes back as base::PgError with every field
//     (SQLSTATE, detail, hint, context) and is raised again intact: aq never relabels an error it
//     did not make (aq.wait_time relabels only data exceptions, class 22).
#pragma once

#include <stdexcept>
#include <string>

namespace aq {

// SQLSTATEs used by the core; the standard ones are PostgreSQL's errcodes.
namespace sqlstate {
inline constexpr const char* invalid_parameter_value = "22023";
inline constexpr const char* null_value_not_allowed = "22004";
inline constexpr const char* array_subscript_error = "2202E";
inline constexpr const char* datatype_mismatch = "42804";
inline constexpr const char* undefined_object = "42704";
inline constexpr const char* object_not_in_prerequisite_state = "55000";
inline constexpr const char* feature_not_supported = "0A000";
inline constexpr const char* invalid_transaction_termination = "2D000";
inline constexpr const char* internal_error = "XX000";
// Dequeue found no message within its wait: the analogue of ORA-25228.
// Class Q is implementation-defined, so it can never collide with a standard code.
inline constexpr const char* dequeue_timeout = "QA228";
// NEXT_MESSAGE found no message left in the transaction group: the analogue of ORA-25235.
inline constexpr const char* end_of_group = "QA235";
// LISTEN found no message within its wait: the analogue of ORA-25254.
inline constexpr const char* listen_timeout = "QA254";
}  // namespace sqlstate

class Error : public std::runtime_error {
public:
    Error(const char* sqlstate, std::string message, std::string detail = {}, std::string hint = {})
        : std::runtime_error(message), sqlstate_(sqlstate), detail_(std::move(detail)), hint_(std::move(hint)) {}

    const char* sqlstate() const noexcept { return sqlstate_; }
    const std::string& detail() const noexcept { return detail_; }
    const std::string& hint() const noexcept { return hint_; }

private:
    const char* sqlstate_;
    std::string detail_;
    std::string hint_;
};

}  // namespace aq
