// Unit tests of the message rules (src/queue/rules.hpp): each rule's C form against its truth
// table, and the SQL the statements embed, from the same definitions.  Boost.Test.
#define BOOST_TEST_MODULE rules
#include <boost/test/included/unit_test.hpp>

#include <string>

#include "queue/rules.hpp"

namespace rules = aq::queue::rules;
using rules::Time;

namespace {

// A row as a walk's row view offers it; counts the settled() reads (they may take a buffer lock).
struct Row {
    bool has_delay = false;
    Time delay_at = 0;
    bool has_expiration = false;
    Time expiration_at = 0;
    bool is_settled = true;
    int settled_reads = 0;

    bool delay_null() const { return !has_delay; }
    Time delay() const { return delay_at; }
    bool expiration_null() const { return !has_expiration; }
    Time expiration() const { return expiration_at; }
    bool settled() {
        settled_reads++;
        return is_settled;
    }
};

Row with_delay(Time t) {
    Row r;
    r.has_delay = true;
    r.delay_at = t;
    return r;
}
Row with_expiration(Time t) {
    Row r;
    r.has_expiration = true;
    r.expiration_at = t;
    return r;
}
Row unsettled() {
    Row r;
    r.is_settled = false;
    return r;
}

constexpr Time now = 1000;

}  // namespace

BOOST_AUTO_TEST_CASE(ready_is_no_delay_ahead) {
    Row none;
    BOOST_TEST(rules::holds<rules::Ready>(none, now));
    Row past = with_delay(now - 1), at = with_delay(now), ahead = with_delay(now + 1);
    BOOST_TEST(rules::holds<rules::Ready>(past, now));
    BOOST_TEST(rules::holds<rules::Ready>(at, now));  // visible at its time
    BOOST_TEST(!rules::holds<rules::Ready>(ahead, now));
}

BOOST_AUTO_TEST_CASE(unexpired_until_its_time) {
    Row none;
    BOOST_TEST(rules::holds<rules::Unexpired>(none, now));
    Row before = with_expiration(now + 1), at = with_expiration(now), after = with_expiration(now - 1);
    BOOST_TEST(rules::holds<rules::Unexpired>(before, now));
    BOOST_TEST(!rules::holds<rules::Unexpired>(at, now));  // expired at its time
    BOOST_TEST(!rules::holds<rules::Unexpired>(after, now));
}

BOOST_AUTO_TEST_CASE(takeable_reads_the_header_last) {
    Row plain;
    BOOST_TEST(rules::holds<rules::Takeable>(plain, now));
    BOOST_TEST(plain.settled_reads == 1);
    Row delayed = with_delay(now + 5);
    BOOST_TEST(!rules::holds<rules::Takeable>(delayed, now));
    BOOST_TEST(delayed.settled_reads == 0);  // not asked: the delay decided
    Row expired = with_expiration(now);
    BOOST_TEST(!rules::holds<rules::Takeable>(expired, now));
    BOOST_TEST(expired.settled_reads == 0);
    Row held = unsettled();
    BOOST_TEST(!rules::holds<rules::Takeable>(held, now));
    BOOST_TEST(rules::holds<rules::Available>(held, now));  // browse does not ask
    BOOST_TEST(held.settled_reads == 1);
}

BOOST_AUTO_TEST_CASE(head_rule_passes_expired_takes_ready_stops_otherwise) {
    using rules::InGroup;
    Row plain, expired = with_expiration(now - 1), delayed = with_delay(now + 1), held = unsettled();
    BOOST_TEST((rules::in_group(plain, now) == InGroup::take));
    BOOST_TEST((rules::in_group(expired, now) == InGroup::pass));
    BOOST_TEST((rules::in_group(delayed, now) == InGroup::stop));
    BOOST_TEST((rules::in_group(held, now) == InGroup::stop));
    // An expired row is passed even when it is also delayed or unsettled.
    Row expired_delayed = with_expiration(now - 1);
    expired_delayed.has_delay = true;
    expired_delayed.delay_at = now + 1;
    BOOST_TEST((rules::in_group(expired_delayed, now) == InGroup::pass));
    // The SQL forms agree with in_group: blocks = stop, offers = take.
    for (Row* r : {&plain, &expired, &delayed, &held, &expired_delayed}) {
        InGroup g = rules::in_group(*r, now);
        BOOST_TEST(rules::holds<rules::BlocksGroup>(*r, now) == (g == InGroup::stop));
        BOOST_TEST(rules::holds<rules::OffersGroup>(*r, now) == (g == InGroup::take));
    }
}

BOOST_AUTO_TEST_CASE(sql_forms) {
    BOOST_TEST(rules::sql<rules::Ready>("d.", "$2") ==
               "(d.delay IS NULL OR d.delay OPERATOR(pg_catalog.<=) $2)");
    BOOST_TEST(rules::sql<rules::Unexpired>("", "$3") ==
               "(expiration IS NULL OR expiration OPERATOR(pg_catalog.>) $3)");
    BOOST_TEST(rules::sql<rules::Settled>("e.", "$2") ==
               "((e.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR aq._claimable(e.tableoid, e.ctid)))");
    BOOST_TEST(rules::sql<rules::Takeable>("", "$2") ==
               "((delay IS NULL OR delay OPERATOR(pg_catalog.<=) $2) AND "
               "(expiration IS NULL OR expiration OPERATOR(pg_catalog.>) $2) AND "
               "((xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR aq._claimable(tableoid, ctid))))");
    BOOST_TEST(rules::sql<rules::Passed>("e.", "$2") ==
               "NOT (e.expiration IS NULL OR e.expiration OPERATOR(pg_catalog.>) $2)");
    BOOST_TEST(rules::sql<rules::BlocksGroup>("e.", "$2") ==
               "((e.expiration IS NULL OR e.expiration OPERATOR(pg_catalog.>) $2) AND "
               "NOT ((e.delay IS NULL OR e.delay OPERATOR(pg_catalog.<=) $2) AND "
               "((e.xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR aq._claimable(e.tableoid, e.ctid)))))");
}

BOOST_AUTO_TEST_CASE(order_key) {
    rules::Key position{5, 100, 7};
    BOOST_TEST(rules::after(rules::Key{5, 100, 8}, position, true));
    BOOST_TEST(!rules::after(rules::Key{5, 100, 7}, position, true));  // the position itself
    BOOST_TEST(rules::after(rules::Key{6, 1, 1}, position, true));     // a later priority first
    BOOST_TEST(!rules::after(rules::Key{4, 999, 99}, position, true));
    BOOST_TEST(!rules::after(rules::Key{6, 99, 99}, position, false));  // enq_time order: priority ignored
    BOOST_TEST(rules::after(rules::Key{1, 101, 0}, position, false));
    BOOST_TEST(rules::order_sql("d.", true) == "d.priority, d.enq_time, d.msgid");
    BOOST_TEST(rules::order_sql("", false) == "enq_time, msgid");
    BOOST_TEST(rules::after_sql("d.", true, "$8", "$4", "$5") ==
               "ROW(d.priority, d.enq_time, d.msgid) OPERATOR(pg_catalog.>) ROW($8, $4, $5)");
    BOOST_TEST(rules::after_sql("", false, "$8", "$4", "$5") ==
               "ROW(enq_time, msgid) OPERATOR(pg_catalog.>) ROW($4, $5)");
}
