// Unit tests of src/queue/options.* — pure C++, no server needed.
#define BOOST_TEST_MODULE aq_options
#include <boost/test/included/unit_test.hpp>

#include <cmath>
#include <cstring>
#include <string>

#include "queue/options.hpp"

using namespace aq;
using namespace aq::queue;

namespace {
// The SQLSTATE of the aq::Error that f throws, or "none".
template <class F>
std::string sqlstate_of(F&& f) {
    try {
        f();
    } catch (const Error& e) {
        return e.sqlstate();
    }
    return "none";
}
}  // namespace

BOOST_AUTO_TEST_CASE(dequeue_mode_accepts_oracle_names_case_insensitively) {
    BOOST_TEST((parse_dequeue_mode(nullptr) == DequeueMode::remove));
    BOOST_TEST((parse_dequeue_mode("REMOVE") == DequeueMode::remove));
    BOOST_TEST((parse_dequeue_mode("Browse") == DequeueMode::browse));
    BOOST_TEST((parse_dequeue_mode("locked") == DequeueMode::locked));
    BOOST_TEST((parse_dequeue_mode("Remove_NoData") == DequeueMode::remove_nodata));
    BOOST_TEST((parse_dequeue_mode("DBMS_AQ.BROWSE") == DequeueMode::browse));
    BOOST_TEST((parse_dequeue_mode("dbms_aq.remove_nodata") == DequeueMode::remove_nodata));
    BOOST_TEST(sqlstate_of([] { parse_dequeue_mode("dbms_aq."); }) == "22023");
    BOOST_TEST(sqlstate_of([] { parse_dequeue_mode("other_pkg.browse"); }) == "22023");
    BOOST_TEST(removes(DequeueMode::remove_nodata));
    BOOST_TEST(removes(DequeueMode::remove));
    BOOST_TEST(!removes(DequeueMode::locked));
    BOOST_TEST(!removes(DequeueMode::browse));
    BOOST_TEST(sqlstate_of([] { parse_dequeue_mode("destroy"); }) == "22023");
    BOOST_TEST(sqlstate_of([] { parse_dequeue_mode(""); }) == "22023");
}

BOOST_AUTO_TEST_CASE(invalid_value_lists_the_valid_ones) {
    try {
        parse_navigation("sideways");
        BOOST_FAIL("no error");
    } catch (const Error& e) {
        BOOST_TEST(std::string(e.what()) == "invalid value for navigation: \"sideways\"");
        BOOST_TEST(e.detail() == "Valid values are next_message, first_message, next_transaction.");
    }
}

BOOST_AUTO_TEST_CASE(navigation) {
    BOOST_TEST((parse_navigation(nullptr) == Navigation::next_message));
    BOOST_TEST((parse_navigation("FIRST_MESSAGE") == Navigation::first_message));
    BOOST_TEST((parse_navigation("DBMS_AQ.NEXT_MESSAGE") == Navigation::next_message));
    BOOST_TEST((parse_navigation("dbms_aq.next_transaction") == Navigation::next_transaction));
    BOOST_TEST((parse_navigation("NEXT_TRANSACTION") == Navigation::next_transaction));
    BOOST_TEST(sqlstate_of([] { parse_navigation("next_message_multi_group"); }) == "0A000");
    BOOST_TEST(sqlstate_of([] { parse_navigation("first_message_multi_group"); }) == "0A000");
}

BOOST_AUTO_TEST_CASE(visibility_and_delivery_mode) {
    BOOST_TEST(!parse_dequeue_visibility(nullptr, DequeueMode::remove));
    BOOST_TEST(!parse_dequeue_visibility("On_Commit", DequeueMode::remove));
    BOOST_TEST(!parse_dequeue_visibility("DBMS_AQ.ON_COMMIT", DequeueMode::locked));
    BOOST_TEST(sqlstate_of([] { check_delivery_mode("dbms_aq.persistent"); }) == "none");
    BOOST_TEST(parse_dequeue_visibility("immediate", DequeueMode::remove));
    BOOST_TEST(parse_dequeue_visibility("DBMS_AQ.IMMEDIATE", DequeueMode::remove_nodata));
    BOOST_TEST(!parse_dequeue_visibility("immediate", DequeueMode::browse));  // ignored, as in Oracle
    BOOST_TEST(sqlstate_of([] { parse_dequeue_visibility("immediate", DequeueMode::locked); }) == "22023");
    BOOST_TEST(sqlstate_of([] { parse_dequeue_visibility("soon", DequeueMode::remove); }) == "22023");
    BOOST_TEST(!parse_enqueue_visibility(nullptr));
    BOOST_TEST(!parse_enqueue_visibility("DBMS_AQ.ON_COMMIT"));
    BOOST_TEST(parse_enqueue_visibility("Immediate"));
    BOOST_TEST(parse_enqueue_visibility("dbms_aq.immediate"));
    BOOST_TEST(sqlstate_of([] { parse_enqueue_visibility("soon"); }) == "22023");
    BOOST_TEST(sqlstate_of([] { check_delivery_mode("persistent"); }) == "none");
    BOOST_TEST(sqlstate_of([] { check_delivery_mode("buffered"); }) == "0A000");
    BOOST_TEST(sqlstate_of([] { check_delivery_mode("x"); }) == "22023");
}

BOOST_AUTO_TEST_CASE(wait_seconds) {
    BOOST_TEST(parse_wait(std::nullopt).forever);
    Wait none = parse_wait(0.0);
    BOOST_TEST(!none.forever);
    BOOST_TEST(none.seconds == 0.0);
    BOOST_TEST(parse_wait(2.5).seconds == 2.5);
    BOOST_TEST(parse_wait(1.0 / 0.0).forever);
    BOOST_TEST(sqlstate_of([] { parse_wait(-0.001); }) == "22023");
    BOOST_TEST(sqlstate_of([] { parse_wait(std::nan("")); }) == "22023");
}

BOOST_AUTO_TEST_CASE(oracle_wait_constants_and_numbers) {
    BOOST_TEST(std::isinf(*parse_oracle_wait("FOREVER")));
    BOOST_TEST(std::isinf(*parse_oracle_wait(" dbms_aq.Forever ")));
    BOOST_TEST(*parse_oracle_wait("no_wait") == 0.0);
    BOOST_TEST(*parse_oracle_wait("DBMS_AQ.NO_WAIT") == 0.0);
    BOOST_TEST(std::isinf(*parse_oracle_wait("-1")));
    BOOST_TEST(*parse_oracle_wait("0") == 0.0);
    BOOST_TEST(*parse_oracle_wait("5") == 5.0);
    BOOST_TEST(*parse_oracle_wait("+2.5") == 2.5);
    BOOST_TEST(*parse_oracle_wait(".5") == 0.5);
    BOOST_TEST(!parse_oracle_wait("5 s").has_value());
    BOOST_TEST(!parse_oracle_wait("00:00:05").has_value());
    BOOST_TEST(!parse_oracle_wait("").has_value());
    BOOST_TEST(!parse_oracle_wait("-").has_value());
    BOOST_TEST(!parse_oracle_wait("forever and ever").has_value());
    BOOST_TEST(sqlstate_of([] { parse_oracle_wait("-2"); }) == "22023");
    BOOST_TEST(sqlstate_of([] { parse_oracle_wait("-0.5"); }) == "22023");
    BOOST_TEST(std::isinf(oracle_wait_number(-1)));
    BOOST_TEST(oracle_wait_number(3) == 3.0);
    BOOST_TEST(sqlstate_of([] { oracle_wait_number(-3); }) == "22023");
    BOOST_TEST(sqlstate_of([] { oracle_wait_number(std::nan("")); }) == "22023");
}

BOOST_AUTO_TEST_CASE(array_size_limits) {
    BOOST_TEST(check_array_size(1) == 1);
    BOOST_TEST(check_array_size(max_dequeue_array_size) == max_dequeue_array_size);
    BOOST_TEST(sqlstate_of([] { check_array_size(0); }) == "22023");
    BOOST_TEST(sqlstate_of([] { check_array_size(max_dequeue_array_size + 1); }) == "22023");
    BOOST_TEST(sqlstate_of([] { check_array_size(std::nullopt); }) == "22004");
}

BOOST_AUTO_TEST_CASE(names_are_limited_by_bytes) {
    BOOST_TEST(sqlstate_of([] { check_name("queue_name", "q"); }) == "none");
    BOOST_TEST(sqlstate_of([] { check_name("queue_name", std::string(63, 'n').c_str()); }) == "none");
    BOOST_TEST(sqlstate_of([] { check_name("queue_name", std::string(64, 'n').c_str()); }) == "42602");
    std::string two_byte_chars;
    for (int i = 0; i < 32; i++) two_byte_chars += "\xc3\xa9";  // 32 x 'é' = 64 bytes
    BOOST_TEST(sqlstate_of([&] { check_name("queue_name", two_byte_chars.c_str()); }) == "42602");
    BOOST_TEST(sqlstate_of([] { check_name("queue_name", ""); }) == "42602");
    BOOST_TEST(sqlstate_of([] { check_name("queue_name", nullptr); }) == "22004");
}
