// Unit tests of the removal sweep's pure rules (src/queue/sweep_rules.hpp): the resume rule, the
// position order, and when a remove dequeue leaves the backend's knowledge of a queue saying that
// no message can have lost its last delivery.  Boost.Test.
#define BOOST_TEST_MODULE sweep_rules
#include <boost/test/included/unit_test.hpp>

#include <cstring>

#include "queue/sweep_rules.hpp"

namespace sr = aq::queue::sweep_rules;

namespace {

struct Taken {  // as deliveries::Taken
    const char* consumer;
    sr::Time enq_time;
    std::int64_t msgid;
};

// Knowledge from a sweep that found its first delivery at (point_time, point_id), with each
// consumer's first delivery.
sr::Knowledge knowledge(sr::Time point_time, std::int64_t point_id) {
    sr::Knowledge k{};
    k.valid = true;
    k.enq_time = point_time;
    k.msgid = point_id;
    return k;
}
void add(sr::Knowledge& k, const char* name, sr::Time at_time, std::int64_t at_id) {
    sr::ConsumerFirst& c = k.consumers[k.count++];
    std::strncpy(c.name, name, sizeof c.name - 1);
    c.enq_time = at_time;
    c.msgid = at_id;
    c.after = false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(compare_position_orders_by_time_then_id) {
    BOOST_TEST(sr::compare_position(1, 5, 2, 1) == -1);
    BOOST_TEST(sr::compare_position(2, 1, 1, 5) == 1);
    BOOST_TEST(sr::compare_position(2, 1, 2, 5) == -1);
    BOOST_TEST(sr::compare_position(2, 5, 2, 1) == 1);
    BOOST_TEST(sr::compare_position(2, 5, 2, 5) == 0);
    BOOST_TEST(sr::compare_position(sr::no_begin, INT64_MIN, 0, 0) == -1);
    BOOST_TEST(sr::compare_position(sr::no_end, INT64_MAX, 0, 0) == 1);
}

BOOST_AUTO_TEST_CASE(resume_at_limit_goes_on_from_the_last_removed) {
    sr::Resume r = sr::next_resume(true, true, sr::Resume{10, 7}, true, sr::Resume{20, 9});
    BOOST_TEST(r.enq_time == 10);
    BOOST_TEST(r.msgid == 7);
}

BOOST_AUTO_TEST_CASE(resume_below_limit_starts_at_the_first_delivery) {
    sr::Resume r = sr::next_resume(false, true, sr::Resume{10, 7}, true, sr::Resume{20, 9});
    BOOST_TEST(r.enq_time == 20);
    BOOST_TEST(r.msgid == 9);
    // At the limit but no last row known (the statement's NULL): the first delivery.
    r = sr::next_resume(true, false, sr::Resume{0, 0}, true, sr::Resume{20, 9});
    BOOST_TEST(r.enq_time == 20);
}

BOOST_AUTO_TEST_CASE(resume_without_first_delivery_leaves_nothing) {
    sr::Resume r = sr::next_resume(false, true, sr::Resume{10, 7}, false, sr::Resume{0, 0});
    BOOST_TEST(r.enq_time == sr::no_end);
    BOOST_TEST(r.msgid == INT64_MAX);
    r = sr::next_resume(true, false, sr::Resume{0, 0}, false, sr::Resume{0, 0});
    BOOST_TEST(r.enq_time == sr::no_end);
}

BOOST_AUTO_TEST_CASE(unknown_consumer_may_remove) {
    sr::Knowledge k = knowledge(100, 1);
    add(k, "a", 100, 1);
    BOOST_TEST(sr::may_remove(k, Taken{"b", 100, 1}));
}

BOOST_AUTO_TEST_CASE(another_consumer_still_at_the_point_keeps_it) {
    sr::Knowledge k = knowledge(100, 1);
    add(k, "a", 100, 1);
    add(k, "b", 100, 1);
    // a takes the delivery at the point: b still holds it.
    BOOST_TEST(!sr::may_remove(k, Taken{"a", 100, 1}));
    BOOST_TEST(k.consumers[0].after);
    // Then b takes it too: nobody holds the point.
    BOOST_TEST(sr::may_remove(k, Taken{"b", 100, 1}));
}

BOOST_AUTO_TEST_CASE(a_consumer_before_the_point_keeps_it) {
    sr::Knowledge k = knowledge(100, 1);
    add(k, "a", 50, 3);  // cannot happen after a sweep, but a rollback may give deliveries back
    add(k, "b", 100, 1);
    BOOST_TEST(!sr::may_remove(k, Taken{"b", 100, 1}));
}

BOOST_AUTO_TEST_CASE(an_earlier_take_does_not_move_the_consumer_back) {
    sr::Knowledge k = knowledge(100, 1);
    add(k, "a", 100, 1);
    // A delivery before the remembered first (given back by a rollback): the consumer stays.
    BOOST_TEST(!sr::may_remove(k, Taken{"a", 90, 1}));
    BOOST_TEST(k.consumers[0].enq_time == 100);
    BOOST_TEST(!k.consumers[0].after);
}

BOOST_AUTO_TEST_CASE(consumers_past_the_point_may_remove) {
    sr::Knowledge k = knowledge(100, 1);
    add(k, "a", 100, 1);
    add(k, "b", 200, 4);
    BOOST_TEST(sr::may_remove(k, Taken{"a", 150, 2}));
    BOOST_TEST(k.consumers[0].enq_time == 150);
    BOOST_TEST(k.consumers[0].msgid == 2);
}

BOOST_AUTO_TEST_CASE(priorities_distinct_in_order_then_any) {
    sr::Priorities p{};
    BOOST_TEST(p.known() == 0);
    for (int v : {3, 1, 3, 1, 2}) p.note(v);
    BOOST_TEST(p.known() == 3);
    BOOST_TEST(p.values[0] == 3);
    BOOST_TEST(p.values[1] == 1);
    BOOST_TEST(p.values[2] == 2);
    for (int v = 10; v < 15; v++) p.note(v);
    BOOST_TEST(p.known() == 8);  // exactly 8 distinct: still known
    p.note(10);                  // a repeat changes nothing
    BOOST_TEST(p.known() == 8);
    p.note(99);                  // a ninth: any priority
    BOOST_TEST(p.known() == -1);
    p.note(100);
    BOOST_TEST(p.known() == -1);
}
