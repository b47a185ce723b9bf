// Unit tests of recipient-list de-duplication (src/queue/recipients.hpp): Boost.Test.
#define BOOST_TEST_MODULE recipients
#include <boost/test/included/unit_test.hpp>

#include <string>
#include <vector>

#include "queue/recipients.hpp"

using aq::queue::recipients::first_occurrences;

namespace {
std::vector<int> kept(const std::vector<const char*>& names) {
    std::vector<int> scratch(names.size()), keep(names.size());
    int n = first_occurrences(names.data(), static_cast<int>(names.size()), scratch.data(), keep.data());
    return std::vector<int>(keep.begin(), keep.begin() + n);
}
}  // namespace

BOOST_AUTO_TEST_CASE(each_name_once_at_its_first_position) {
    BOOST_TEST(kept({"b", "a", "b", "c", "a"}) == (std::vector<int>{0, 1, 3}), boost::test_tools::per_element());
    BOOST_TEST(kept({"x"}) == (std::vector<int>{0}), boost::test_tools::per_element());
    BOOST_TEST(kept({}).empty());
    BOOST_TEST(kept({"same", "same", "same"}) == (std::vector<int>{0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(names_are_compared_byte_for_byte) {
    BOOST_TEST(kept({"A", "a", "a "}) == (std::vector<int>{0, 1, 2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(many_names_in_n_log_n) {
    // 100,000 names of which 1,000 distinct: the first 1,000 positions are the firsts.
    std::vector<std::string> storage;
    for (int i = 0; i < 100000; i++) storage.push_back("consumer_" + std::to_string(i % 1000));
    std::vector<const char*> names;
    for (auto& s : storage) names.push_back(s.c_str());
    std::vector<int> k = kept(names);
    BOOST_TEST(k.size() == 1000u);
    for (int i = 0; i < 1000; i++) BOOST_TEST(k[i] == i);
}
