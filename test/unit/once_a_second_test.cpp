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
