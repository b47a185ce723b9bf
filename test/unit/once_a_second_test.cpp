// Unit tests of the once-a-second table (src/base/once_a_second.hpp): Boost.Test.
#define BOOST_TEST_MODULE once_a_second
#include <boost/test/included/unit_test.hpp>

#include "base/once_a_second.hpp"

using aq::base::OnceASecond;

BOOST_AUTO_TEST_CASE(first_call_then_once_a_second) {
    OnceASecond<4> t;
    BOOST_TEST(t.due(7, 0));  // key 7 at time 0 (a zeroed slot is not a previous call)
    BOOST_TEST(!t.due(7, 1));
    BOOST_TEST(!t.due(7, 999999));
    BOOST_TEST(t.due(7, 1000000));
    BOOST_TEST(!t.due(7, 1500000));
    BOOST_TEST(t.due(7, 2000000));
}

BOOST_AUTO_TEST_CASE(keys_are_independent) {
    OnceASecond<16> t;
    BOOST_TEST(t.due(1, 100));
    BOOST_TEST(t.due(2, 100));
    BOOST_TEST(!t.due(1, 200));
    BOOST_TEST(!t.due(2, 200));
}

BOOST_AUTO_TEST_CASE(a_collision_only_runs_early) {
    OnceASecond<4> t;
    BOOST_TEST(t.due(1, 0));
    BOOST_TEST(t.due(5, 10));  // same slot: takes it
    BOOST_TEST(t.due(1, 20));  // due again, early: allowed (invariant 2)
    BOOST_TEST(!t.due(1, 30));
}

BOOST_AUTO_TEST_CASE(negative_keys) {
    OnceASecond<16> t;
    BOOST_TEST(t.due(-5, 0));
    BOOST_TEST(!t.due(-5, 10));
}

BOOST_AUTO_TEST_CASE(costly_work_runs_less_often) {
    OnceASecond<4> t;
    // Short work: still once a second after it started.
    BOOST_TEST(t.due(3, 0));
    t.ran(3, 0, 1000);  // 1 ms
    BOOST_TEST(!t.due(3, 999999));
    BOOST_TEST(t.due(3, 1000000));
    // Work of 200 ms: next due 19 x 200 ms after it ended (a twentieth of the time).
    t.ran(3, 1000000, 1200000);
    BOOST_TEST(!t.due(3, 1200000 + 19 * 200000 - 1));
    BOOST_TEST(t.due(3, 1200000 + 19 * 200000));
}
