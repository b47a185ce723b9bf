// Unit tests of tools/aq-bench/checker.* — crafted histories, no server needed.
#define BOOST_TEST_MODULE checker
#include <boost/test/included/unit_test.hpp>

#include <algorithm>
#include <thread>
#include <vector>

#include "checker.hpp"

using namespace aqbench;

namespace {
void enqueue_acknowledged(History& h, uint64_t id) {
    h.enqueue_attempted(id);
    h.enqueue_finished(id, EnqueueOutcome::acknowledged);
}

// Records ids 1..n enqueued and acknowledged, and dequeued and committed except those in skip.
void clean_run(History& h, uint64_t n, std::vector<uint64_t> skip = {}) {
    for (uint64_t id = 1; id <= n; id++) {
        enqueue_acknowledged(h, id);
        if (std::find(skip.begin(), skip.end(), id) == skip.end()) h.dequeued_committed(id);
    }
}
}  // namespace

BOOST_AUTO_TEST_CASE(clean_run_is_ok) {
    History h;
    clean_run(h, 5, {5});
    h.drained(5);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.acknowledged == 5u);
    BOOST_TEST(v.delivered == 5u);
    BOOST_TEST(v.lost + v.duplicated + v.unexpected + v.recovered + v.uncertain_resolved == 0u);
    BOOST_TEST(to_string(v).rfind("ok: acknowledged=5 delivered=5 lost=0", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(id_committed_twice_is_a_duplicate) {
    History h;
    clean_run(h, 5);
    h.dequeued_committed(3);
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.duplicated == 1u);
    BOOST_TEST(v.delivered == 5u);
    BOOST_TEST(v.sample_duplicated == std::vector<uint64_t>{3});
}

BOOST_AUTO_TEST_CASE(id_committed_and_drained_is_a_duplicate) {
    History h;
    clean_run(h, 5);
    h.drained(4);
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.duplicated == 1u);
}

BOOST_AUTO_TEST_CASE(acknowledged_id_never_delivered_is_lost) {
    History h;
    clean_run(h, 5, {2});
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.lost == 1u);
    BOOST_TEST(v.delivered == 4u);
    BOOST_TEST(v.sample_lost == std::vector<uint64_t>{2});
    BOOST_TEST(to_string(v).find("FAILED") == 0u);
    BOOST_TEST(to_string(v).find("lost ids: 2") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(id_never_attempted_is_unexpected) {
    History h;
    clean_run(h, 3);
    h.dequeued_committed(99);
    h.drained(98);
    h.dequeued_uncertain(97);
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.unexpected == 3u);
    BOOST_TEST(v.delivered == 3u);
    BOOST_TEST((v.sample_unexpected == std::vector<uint64_t>{97, 98, 99}));
}

BOOST_AUTO_TEST_CASE(unknown_enqueue_delivered_is_recovered_and_ok) {
    History h;
    clean_run(h, 3);
    h.enqueue_attempted(4);
    h.enqueue_finished(4, EnqueueOutcome::unknown);
    h.dequeued_committed(4);
    h.enqueue_attempted(5);  // never finished: as unknown
    h.drained(5);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.recovered == 2u);
    BOOST_TEST(v.delivered == 5u);
    BOOST_TEST(v.delivered == v.acknowledged - v.lost + v.recovered);
}

BOOST_AUTO_TEST_CASE(unknown_enqueue_never_delivered_is_ok) {
    History h;
    clean_run(h, 3);
    h.enqueue_attempted(4);
    h.enqueue_finished(4, EnqueueOutcome::unknown);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.lost == 0u);
    BOOST_TEST(v.recovered == 0u);
    BOOST_TEST(v.acknowledged == 3u);
}

BOOST_AUTO_TEST_CASE(uncertain_dequeue_absent_from_drain_counts_as_delivered) {
    History h;
    clean_run(h, 3, {2});
    h.dequeued_uncertain(2);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.uncertain_resolved == 1u);
    BOOST_TEST(v.delivered == 3u);
}

BOOST_AUTO_TEST_CASE(uncertain_dequeue_then_drained_is_delivered_once) {
    History h;
    clean_run(h, 3, {2});
    h.dequeued_uncertain(2);
    h.drained(2);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.duplicated == 0u);
    BOOST_TEST(v.uncertain_resolved == 0u);
    BOOST_TEST(v.delivered == 3u);
}

BOOST_AUTO_TEST_CASE(uncertain_dequeue_then_committed_by_another_is_delivered_once) {
    History h;
    clean_run(h, 3);
    h.dequeued_uncertain(2);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.uncertain_resolved == 0u);
}

BOOST_AUTO_TEST_CASE(failed_enqueue_delivered_is_unexpected) {
    History h;
    clean_run(h, 3);
    h.enqueue_attempted(4);
    h.enqueue_failed(4);
    h.dequeued_committed(4);
    h.enqueue_attempted(5);
    h.enqueue_failed(5);  // not delivered: fine
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.unexpected == 1u);
    BOOST_TEST(v.recovered == 0u);
    BOOST_TEST(v.delivered == 3u);
    BOOST_TEST(v.sample_unexpected == std::vector<uint64_t>{4});
}

BOOST_AUTO_TEST_CASE(samples_are_the_smallest_ids_ascending) {
    History h;
    for (uint64_t id = 100; id > 0; id--) enqueue_acknowledged(h, id);
    auto v = h.classify();
    BOOST_TEST(v.lost == 100u);
    BOOST_TEST(v.sample_lost.size() == verdict_sample_size);
    BOOST_TEST(v.sample_lost.front() == 1u);
    BOOST_TEST(v.sample_lost.back() == verdict_sample_size);
}

BOOST_AUTO_TEST_CASE(concurrent_recording_of_100k_ids) {
    constexpr uint64_t producers = 4, consumers = 4, per_producer = 25000;
    History h(producers * per_producer);
    std::vector<std::thread> threads;
    for (uint64_t p = 0; p < producers; p++)
        threads.emplace_back([&h, p] {
            for (uint64_t seq = 0; seq < per_producer; seq++) enqueue_acknowledged(h, p << 40 | seq);
        });
    // Consumers record the same ids concurrently (the history accepts a dequeue before the enqueue's finish).
    for (uint64_t c = 0; c < consumers; c++)
        threads.emplace_back([&h, c] {
            for (uint64_t seq = 0; seq < per_producer; seq++) h.dequeued_committed(c << 40 | seq);
        });
    for (auto& t : threads) t.join();
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.acknowledged == producers * per_producer);
    BOOST_TEST(v.delivered == producers * per_producer);
}

BOOST_AUTO_TEST_CASE(immediate_enqueue_is_acknowledged_by_the_call_whatever_its_commit) {
    History h;
    clean_run(h, 3);
    for (uint64_t id = 4; id <= 6; id++) {
        h.enqueue_attempted(id);
        h.enqueue_immediate(id, id != 4);  // 4: the COMMIT after the call failed or its result was lost
        h.dequeued_committed(id);
    }
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.acknowledged == 6u);
    BOOST_TEST(v.delivered == 6u);
    BOOST_TEST(v.recovered == 0u);
    BOOST_TEST(v.immediate_enqueued == 3u);
    BOOST_TEST(v.immediate_enqueued_unconfirmed == 1u);
    BOOST_TEST(to_string(v).find(" immediate: enqueued=3 (unconfirmed=1)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(immediate_enqueue_with_lost_commit_never_delivered_is_lost) {
    History h;
    clean_run(h, 3);
    h.enqueue_attempted(4);
    h.enqueue_immediate(4, false);  // acknowledged by the call: the lost COMMIT does not make it unknown
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.lost == 1u);
    BOOST_TEST(v.sample_lost == std::vector<uint64_t>{4});
}

BOOST_AUTO_TEST_CASE(immediate_dequeue_is_committed_by_the_call_whatever_its_commit) {
    History h;
    for (uint64_t id = 1; id <= 4; id++) {
        enqueue_acknowledged(h, id);
        h.dequeued_immediate(id, id % 2 == 0);  // 1 and 3: the COMMIT after the call failed or was lost
    }
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.delivered == 4u);
    BOOST_TEST(v.uncertain_resolved == 0u);
    BOOST_TEST(v.immediate_dequeued == 4u);
    BOOST_TEST(v.immediate_dequeued_unconfirmed == 2u);
    // The drain finding one again is a duplicate: the consumer's failed COMMIT did not give it back.
    h.drained(1);
    v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.duplicated == 1u);
    BOOST_TEST(v.sample_duplicated == std::vector<uint64_t>{1});
}

BOOST_AUTO_TEST_CASE(immediate_dequeues_without_result_allow_their_batches_lost_in_flight) {
    History h;
    clean_run(h, 10, {3, 5, 6, 9});
    h.immediate_dequeue_unknown(2);
    h.immediate_dequeue_unknown(2);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.lost == 0u);
    BOOST_TEST(v.sample_lost.empty());
    BOOST_TEST(v.lost_in_flight == 4u);
    BOOST_TEST(v.immediate_dequeues_unknown == 2u);
    BOOST_TEST(v.in_flight_allowance == 4u);
    BOOST_TEST(v.delivered == v.acknowledged - v.lost - v.lost_in_flight + v.recovered);
    BOOST_TEST(to_string(v).find("dequeues_unknown=2 lost_in_flight=4 (of at most 4)") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(losses_beyond_the_in_flight_allowance_are_all_lost) {
    History h;
    clean_run(h, 10, {3, 5, 6});
    h.immediate_dequeue_unknown(2);
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.lost == 3u);
    BOOST_TEST(v.lost_in_flight == 0u);
    BOOST_TEST(v.in_flight_allowance == 2u);
    BOOST_TEST((v.sample_lost == std::vector<uint64_t>{3, 5, 6}));
}

BOOST_AUTO_TEST_CASE(no_dequeue_in_flight_allows_no_loss) {
    History h;
    clean_run(h, 3, {2});
    h.enqueue_attempted(4);
    h.enqueue_immediate(4, true);
    h.dequeued_immediate(4, false);
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.lost == 1u);
    BOOST_TEST(v.lost_in_flight == 0u);
    BOOST_TEST(v.in_flight_allowance == 0u);
}

BOOST_AUTO_TEST_CASE(in_flight_allowance_excuses_no_duplicate_or_unexpected_id) {
    History h;
    clean_run(h, 5);
    h.immediate_dequeue_unknown(100);
    h.dequeued_immediate(2, true);   // twice
    h.dequeued_immediate(42, true);  // never attempted
    h.enqueue_attempted(6);
    h.enqueue_failed(6);  // failed, yet dequeued
    h.dequeued_immediate(6, false);
    auto v = h.classify();
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.duplicated == 1u);
    BOOST_TEST(v.unexpected == 2u);
    BOOST_TEST((v.sample_unexpected == std::vector<uint64_t>{6, 42}));
    BOOST_TEST(v.lost_in_flight == 0u);
}

BOOST_AUTO_TEST_CASE(unknown_immediate_enqueue_never_delivered_is_ok) {
    History h;
    clean_run(h, 3);
    h.enqueue_attempted(4);
    h.enqueue_finished(4, EnqueueOutcome::unknown);  // the enqueue call's result never arrived
    h.immediate_dequeue_unknown(1);
    auto v = h.classify();
    BOOST_TEST(v.ok());
    BOOST_TEST(v.lost_in_flight == 0u);  // unknown enqueues need no allowance
    BOOST_TEST(v.acknowledged == 3u);
}

BOOST_AUTO_TEST_CASE(on_commit_runs_print_no_immediate_counts) {
    History h;
    clean_run(h, 3);
    BOOST_TEST(to_string(h.classify()).find("immediate") == std::string::npos);
}

BOOST_AUTO_TEST_CASE(ingest_clean_run_is_ok) {
    IngestLedger l;
    for (uint64_t id = 1; id <= 5; id++) {
        l.attempted(id);
        l.acknowledged(id);
        l.present(id);
    }
    auto v = l.classify([](uint64_t) { return true; });
    BOOST_TEST(v.ok());
    BOOST_TEST(v.acknowledged == 5u);
    BOOST_TEST(v.present == 5u);
}

BOOST_AUTO_TEST_CASE(ingest_missing_row_below_watermark_is_a_loss) {
    IngestLedger l;
    for (uint64_t id = 1; id <= 5; id++) {
        l.attempted(id);
        l.acknowledged(id);
        if (id != 3 && id != 5) l.present(id);
    }
    auto v = l.classify([](uint64_t id) { return id <= 3; });  // 5 is above the watermark: not yet durable
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.missing == 1u);
    BOOST_TEST(v.unapplied == 1u);
    BOOST_TEST(v.sample_missing == std::vector<uint64_t>{3});
}

BOOST_AUTO_TEST_CASE(ingest_missing_row_above_watermark_is_ok) {
    IngestLedger l;
    for (uint64_t id = 1; id <= 5; id++) {
        l.attempted(id);
        l.acknowledged(id);
        if (id < 4) l.present(id);
    }
    auto v = l.classify([](uint64_t id) { return id <= 3; });
    BOOST_TEST(v.ok());
    BOOST_TEST(v.unapplied == 2u);
}

BOOST_AUTO_TEST_CASE(ingest_duplicate_unexpected_and_recovered_rows) {
    IngestLedger l;
    for (uint64_t id = 1; id <= 3; id++) {
        l.attempted(id);
        l.acknowledged(id);
        l.present(id);
    }
    l.present(2);   // duplicate row
    l.attempted(4); // connection lost before the commit's result, yet the row is there
    l.present(4);
    auto v = l.classify([](uint64_t) { return true; });
    BOOST_TEST(!v.ok());
    BOOST_TEST(v.duplicated == 1u);
    BOOST_TEST(v.recovered == 1u);
    BOOST_TEST(v.unexpected == 0u);
    l.present(42);  // never attempted
    v = l.classify([](uint64_t) { return true; });
    BOOST_TEST(v.unexpected == 1u);
    BOOST_TEST(v.sample_unexpected == std::vector<uint64_t>{42});
}
