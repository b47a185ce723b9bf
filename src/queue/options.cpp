#include "queue/options.hpp"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <strings.h>

namespace aq::queue {

namespace {

bool equals_ignoring_case(const char* a, const char* b) {
    return strcasecmp(a, b) == 0;
}

// An option's value as Oracle code names it: the constant, bare or as DBMS_AQ.<constant>.
bool is_constant(const char* value, const char* name) {
    if (strncasecmp(value, "dbms_aq.", 8) == 0) value += 8;
    return equals_ignoring_case(value, name);
}

[[noreturn]] void bad_value(const char* option, const char* value, const char* valid) {
    throw Error(sqlstate::invalid_parameter_value,
                std::string("invalid value for ") + option + ": \"" + value + "\"",
                std::string("Valid values are ") + valid + ".");
}

[[noreturn]] void not_supported(const char* option, const char* value) {
    throw Error(sqlstate::feature_not_supported,
                std::string(option) + " " + value + " is not supported by this version of aq");
}

}  // namespace

DequeueMode parse_dequeue_mode(const char* value) {
    if (!value || is_constant(value, "remove")) return DequeueMode::remove;
    if (is_constant(value, "browse")) return DequeueMode::browse;
    if (is_constant(value, "locked")) return DequeueMode::locked;
    if (is_constant(value, "remove_nodata")) return DequeueMode::remove_nodata;
    bad_value("dequeue_mode", value, "remove, browse, locked, remove_nodata");
}

Navigation parse_navigation(const char* value) {
    if (!value || is_constant(value, "next_message")) return Navigation::next_message;
    if (is_constant(value, "first_message")) return Navigation::first_message;
    if (is_constant(value, "next_transaction")) return Navigation::next_transaction;
    if (is_constant(value, "first_message_multi_group") || is_constant(value, "next_message_multi_group"))
        not_supported("navigation", value);
    bad_value("navigation", value, "next_message, first_message, next_transaction");
}

bool parse_enqueue_visibility(const char* value) {
    if (!value || is_constant(value, "on_commit")) return false;
    if (is_constant(value, "immediate")) return true;
    bad_value("visibility", value, "on_commit, immediate");
}

bool parse_dequeue_visibility(const char* value, DequeueMode mode) {
    bool immediate = parse_enqueue_visibility(value);
    if (immediate && mode == DequeueMode::locked)
        throw Error(sqlstate::invalid_parameter_value, "dequeue_mode locked cannot have visibility immediate",
                    "A locked dequeue's lock lasts until its transaction ends; an immediate dequeue's transaction "
                    "ends before the call returns.",
                    "Dequeue with visibility => 'on_commit' to hold the lock, or remove the message immediately.");
    return immediate && mode != DequeueMode::browse;
}

void check_delivery_mode(const char* value) {
    if (!value || is_constant(value, "persistent")) return;
    if (is_constant(value, "buffered") || is_constant(value, "persistent_or_buffered"))
        not_supported("delivery_mode", value);
    bad_value("delivery_mode", value, "persistent");
}

Wait parse_wait(std::optional<double> seconds) {
    if (!seconds) return Wait{};
    double s = *seconds;
    if (std::isnan(s) || s < 0)
        throw Error(sqlstate::invalid_parameter_value, "wait must not be negative",
                    {}, "Use NULL to wait forever, 0 not to wait, or a positive interval.");
    if (std::isinf(s) || s > max_wait_seconds) return Wait{};  // as good as forever
    return Wait{false, s};
}

std::optional<double> parse_oracle_wait(const char* text) {
    std::string s(text);
    auto blank = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && blank(s.back())) s.pop_back();
    size_t start = 0;
    while (start < s.size() && blank(s[start])) start++;
    s = s.substr(start);
    std::string word = s;
    if (word.size() > 8 && strncasecmp(word.c_str(), "dbms_aq.", 8) == 0) word = word.substr(8);
    if (equals_ignoring_case(word.c_str(), "forever")) return HUGE_VAL;
    if (equals_ignoring_case(word.c_str(), "no_wait")) return 0.0;
    // A number: optional sign, digits, optional fraction; nothing else.
    size_t i = 0;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) i++;
    size_t digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++, digits++;
    if (i < s.size() && s[i] == '.') {
        i++;
        while (i < s.size() && s[i] >= '0' && s[i] <= '9') i++, digits++;
    }
    if (digits == 0 || i != s.size()) return std::nullopt;
    return oracle_wait_number(std::strtod(s.c_str(), nullptr));
}

double oracle_wait_number(double seconds) {
    if (seconds == -1.0) return HUGE_VAL;  // DBMS_AQ.FOREVER
    if (std::isnan(seconds) || seconds < 0)
        throw Error(sqlstate::invalid_parameter_value, "wait must not be negative",
                    "Oracle's DBMS_AQ.FOREVER is -1; no other negative number is a wait.",
                    "Use NULL or 'forever' to wait forever, 0 or 'no_wait' not to wait, or a number of seconds.");
    return seconds;
}

int32_t check_array_size(std::optional<int64_t> array_size) {
    if (!array_size)
        throw Error(sqlstate::null_value_not_allowed, "array_size must not be NULL");
    if (*array_size < 1 || *array_size > max_dequeue_array_size)
        throw Error(sqlstate::invalid_parameter_value,
                    "array_size " + std::to_string(*array_size) + " is out of range",
                    "array_size must be between 1 and " + std::to_string(max_dequeue_array_size) + ".");
    return static_cast<int32_t>(*array_size);
}

void check_name(const char* what, const char* name) {
    if (!name) throw Error(sqlstate::null_value_not_allowed, std::string(what) + " must not be NULL");
    size_t bytes = std::strlen(name);
    if (bytes == 0) throw Error("42602", std::string(what) + " must not be empty");
    if (bytes > static_cast<size_t>(max_name_bytes))
        throw Error("42602", std::string(what) + " \"" + name + "\" is too long",
                    std::to_string(bytes) + " bytes; names are limited to " + std::to_string(max_name_bytes) +
                        " bytes.");
}

}  // namespace aq::queue
