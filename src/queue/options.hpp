// Validation of enqueue/dequeue options and names — pure C++, no PostgreSQL header,
// so every rule here is unit-tested by test/unit/options_test.cpp.
//
// Enumerated options take Oracle's constant names (REMOVE, FIRST_MESSAGE ...), bare or as
// DBMS_AQ.<name>, case-insensitively; a wrong value is an aq::Error (22023) that lists the valid ones.
// A NULL option (nullptr / std::nullopt) means "Oracle's default".
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "common/error.hpp"

namespace aq::queue {

inline constexpr int max_name_bytes = 63;         // NAMEDATALEN - 1
inline constexpr int64_t max_dequeue_array_size = 100000;
inline constexpr double max_wait_seconds = 1e9;  // ~31 years; longer waits are FOREVER

enum class DequeueMode { remove, browse, locked, remove_nodata };
// Whether the mode removes what it dequeues (remove_nodata: without returning the payload).
inline bool removes(DequeueMode mode) {
    return mode == DequeueMode::remove || mode == DequeueMode::remove_nodata;
}
enum class Navigation { next_message, first_message, next_transaction };

// How long a dequeue may wait for a message.
struct Wait {
    bool forever = true;     // Oracle's default, DBMS_AQ.FOREVER
    double seconds = 0;      // when !forever; 0 = DBMS_AQ.NO_WAIT
};

struct DequeueOptions {
    DequeueMode mode = DequeueMode::remove;
    Navigation navigation = Navigation::next_message;
    Wait wait;
    std::optional<int64_t> msgid;
    const char* correlation = nullptr;  // LIKE pattern (% and _ as in Oracle); caller-owned
    const char* condition = nullptr;    // deq_condition (queue/condition.hpp); caller-owned
    const char* consumer = nullptr;     // consumer_name of a multi-consumer queue; caller-owned
    bool immediate = false;             // visibility immediate (queue/immediate.hpp)
};
// Plain data: it lives in frames that call PostgreSQL, which may longjmp over them.
static_assert(std::is_trivially_destructible_v<DequeueOptions>);

DequeueMode parse_dequeue_mode(const char* value);
Navigation parse_navigation(const char* value);
// An enqueue's visibility: ON_COMMIT (false) or IMMEDIATE (true: immediate.hpp).
bool parse_enqueue_visibility(const char* value);
// A dequeue's: ON_COMMIT (false) or IMMEDIATE (true).  Ignored for BROWSE, as in Oracle (a
// browse takes nothing: false); refused for LOCKED (22023), whose lock would end with the
// dequeue's own transaction, before the call returns.
bool parse_dequeue_visibility(const char* value, DequeueMode mode);
// delivery_mode: only PERSISTENT (buffered messages are not part of aq).
void check_delivery_mode(const char* value);
// From the wait interval in seconds; nullopt (or more than max_wait_seconds) = forever.
Wait parse_wait(std::optional<double> seconds);

// The text forms of aq.wait_time that are Oracle's: FOREVER and NO_WAIT (case-insensitive, bare
// or as DBMS_AQ.FOREVER / DBMS_AQ.NO_WAIT), and a number of seconds (-1 is DBMS_AQ.FOREVER, as in
// Oracle; another negative number is 22023).  Returns the seconds (infinity for FOREVER), or
// nullopt for any other text (an interval such as '5 s', which the caller parses).
std::optional<double> parse_oracle_wait(const char* text);
// A wait given as a number of seconds, Oracle's way: -1 (DBMS_AQ.FOREVER) is infinity, another
// negative number is 22023.
double oracle_wait_number(double seconds);
// 1 .. max_dequeue_array_size.
int32_t check_array_size(std::optional<int64_t> array_size);
// Queue and queue-table names are identifiers: 1 to 63 bytes, taken exactly as given.
void check_name(const char* what, const char* name);

}  // namespace aq::queue
