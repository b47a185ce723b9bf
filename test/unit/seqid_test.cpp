// Unit tests of the fast-ingest id and epoch arithmetic (src/ingest/seqid.hpp): Boost.Test.
// hardening 16b: ids never overflow their epoch, epochs carry the timeline.
#define BOOST_TEST_MODULE seqid
#include <boost/test/included/unit_test.hpp>

#include <cstdint>

#include "ingest/seqid.hpp"

using namespace aq::ingest::seqid;

BOOST_AUTO_TEST_CASE(ids_are_positive_bigints) {
    std::uint32_t last_epoch = make_epoch(timeline_mask, counter_mask);
    BOOST_TEST(last_epoch < (1u << 23));
    BOOST_TEST(base(last_epoch) + per_epoch <= std::uint64_t(INT64_MAX));
    BOOST_TEST(epoch_of(base(last_epoch) + per_epoch) == last_epoch);
    BOOST_TEST(epoch_of(base(7) + 1) == 7u);
}

BOOST_AUTO_TEST_CASE(epochs_of_two_timelines_differ) {
    for (std::uint32_t counter = 1; counter < 2000; counter++) {
        BOOST_TEST(make_epoch(1, counter) != make_epoch(2, counter));
        BOOST_TEST(make_epoch(2, counter) != make_epoch(3, counter));
    }
    BOOST_TEST(make_epoch(1, 5) < make_epoch(1, 6));  // a restart on one timeline: a later epoch
}

BOOST_AUTO_TEST_CASE(the_counter_never_takes_zero) {
    BOOST_TEST(next_counter(0) == 1u);
    BOOST_TEST(next_counter(1) == 2u);
    BOOST_TEST(next_counter(counter_mask - 1) == counter_mask);
    BOOST_TEST(next_counter(counter_mask) == 1u);
}

BOOST_AUTO_TEST_CASE(ids_never_overflow_their_epoch) {
    std::uint32_t e = make_epoch(1, 42);
    BOOST_TEST(!ids_fit(0, 1, 1));                            // no epoch yet
    BOOST_TEST(ids_fit(e, base(e) + 1, 1));
    BOOST_TEST(ids_fit(e, base(e) + 1, per_epoch));            // the whole epoch
    BOOST_TEST(!ids_fit(e, base(e) + 1, per_epoch + 1));
    BOOST_TEST(ids_fit(e, base(e) + per_epoch, 1));           // the last id
    BOOST_TEST(!ids_fit(e, base(e) + per_epoch, 2));
    BOOST_TEST(!ids_fit(e, base(e) + per_epoch + 1, 1));      // the next epoch's base
    BOOST_TEST(!ids_fit(e, base(e + 1) + 1, 1));              // ids of another epoch
    BOOST_TEST(!ids_fit(e, base(e) + 10, UINT64_MAX));        // no wrap-around in the check
}
