// aq-bench's command line (tools/aq-bench/cli.cpp): the runs it expands to and the errors it gives.
#define BOOST_TEST_MODULE aq_bench_cli
#include <boost/test/included/unit_test.hpp>

#include "cli.hpp"

using aqbench::parse_queue_command;
namespace po = boost::program_options;

namespace {

std::string error_of(const std::vector<std::string>& args) {
    try {
        parse_queue_command(args);
    } catch (const po::error& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

BOOST_AUTO_TEST_CASE(defaults_are_one_aq_run) {
    auto c = parse_queue_command({"host=/tmp port=5432"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 1u);
    BOOST_CHECK_EQUAL(c.runs[0].conninfo, "host=/tmp port=5432");
    BOOST_CHECK_EQUAL(c.runs[0].system, "aq");
    BOOST_CHECK_EQUAL(c.runs[0].producers, 1);
    BOOST_CHECK_EQUAL(c.runs[0].enqueue_batch, 100);
    BOOST_CHECK_EQUAL(c.runs[0].dequeue_batch, 100);
    BOOST_CHECK_EQUAL(c.runs[0].messages, 10000);
    BOOST_CHECK(!c.faults);
    BOOST_CHECK(!c.help);
}

BOOST_AUTO_TEST_CASE(comma_lists_expand_to_every_combination) {
    auto c = parse_queue_command({"dbname=x", "-s", "aq,plain", "-P", "2", "-C", "1,2,4", "-b", "1,10,100,500"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 2u * 1u * 3u * 4u);
    BOOST_CHECK_EQUAL(c.runs.front().system, "aq");
    BOOST_CHECK_EQUAL(c.runs.front().consumers, 1);
    BOOST_CHECK_EQUAL(c.runs.front().dequeue_batch, 1);
    BOOST_CHECK_EQUAL(c.runs.back().system, "plain");
    BOOST_CHECK_EQUAL(c.runs.back().consumers, 4);
    BOOST_CHECK_EQUAL(c.runs.back().dequeue_batch, 500);
    for (auto& r : c.runs) BOOST_CHECK_EQUAL(r.producers, 2);
}

BOOST_AUTO_TEST_CASE(faults_and_their_options) {
    auto c = parse_queue_command({"dbname=x", "--faults", "--fault-interval", "0.5", "--datadir", "/d", "--crashes", "3"});
    BOOST_CHECK(c.faults);
    BOOST_CHECK_EQUAL(c.fault_options.interval_seconds, 0.5);
    BOOST_CHECK_EQUAL(c.fault_options.data_directory, "/d");
    BOOST_CHECK_EQUAL(c.fault_options.crashes, 3);
    BOOST_CHECK_EQUAL(c.fault_options.conninfo, "dbname=x");
}

BOOST_AUTO_TEST_CASE(help_is_not_a_run) {
    auto c = parse_queue_command({"--help"});
    BOOST_CHECK(c.help);
    BOOST_CHECK(c.runs.empty());
    BOOST_CHECK(c.help_text.find("--consumers") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_values_name_the_option) {
    BOOST_CHECK_EQUAL(error_of({"-b", "1,x"}), "--batch: \"x\" is not a positive integer");
    BOOST_CHECK_EQUAL(error_of({"-C", "0"}), "--consumers: \"0\" is not a positive integer");
    BOOST_CHECK_EQUAL(error_of({"-P", "2,,3"}), "--producers: \"\" is not a positive integer");
    BOOST_CHECK_EQUAL(error_of({"-s", "kafka"}), "--system: unknown \"kafka\" (aq, plain, pgq, pgmq)");
    BOOST_CHECK_EQUAL(error_of({"--payload", "8"}), "--payload must be 32 .. 1000000");
    BOOST_CHECK_EQUAL(error_of({"--crashes", "2"}), "--crashes needs --datadir");
    BOOST_CHECK_EQUAL(error_of({"-n", "0"}), "give --messages > 0, or --messages 0 and --seconds > 0");
    BOOST_CHECK_EQUAL(error_of({"--delay", "-1"}), "--delay must not be negative");
    BOOST_CHECK(error_of({"--no-such-option"}).find("no-such-option") != std::string::npos);
    BOOST_CHECK(error_of({"-b"}).find("batch") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(immediate_applies_to_every_aq_run) {
    BOOST_CHECK(!parse_queue_command({"dbname=x"}).runs[0].immediate);
    auto c = parse_queue_command({"dbname=x", "--immediate", "-C", "1,2", "--subscribers", "2"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 2u);
    for (auto& r : c.runs) {
        BOOST_CHECK(r.immediate);
        BOOST_CHECK_EQUAL(r.system, "aq");
    }
    BOOST_CHECK(parse_queue_command({"--help"}).help_text.find("--immediate") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(immediate_is_refused_for_pgq_and_plain) {
    BOOST_CHECK_EQUAL(error_of({"-s", "pgq", "--immediate"}),
                      "--immediate is for aq only (visibility => 'immediate'), not for --system pgq");
    BOOST_CHECK_EQUAL(error_of({"-s", "aq,plain", "--immediate"}),
                      "--immediate is for aq only (visibility => 'immediate'), not for --system plain");
    BOOST_CHECK_EQUAL(parse_queue_command({"-s", "aq,pgq"}).runs.size(), 2u);  // without --immediate: fine
}

BOOST_AUTO_TEST_CASE(duration_instead_of_count) {
    auto c = parse_queue_command({"-n", "0", "--seconds", "5"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 1u);
    BOOST_CHECK_EQUAL(c.runs[0].messages, 0);
    BOOST_CHECK_EQUAL(c.runs[0].seconds, 5.0);
}

BOOST_AUTO_TEST_CASE(commit_runs_every_mode_for_every_session_count) {
    auto c = aqbench::parse_commit_command({"dbname=x", "-N", "1,8", "--seconds", "2"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 2u * 4u);
    BOOST_CHECK_EQUAL(c.runs[0].mode, "immediate,wait");
    BOOST_CHECK_EQUAL(c.runs[0].sessions, 1);
    BOOST_CHECK_EQUAL(c.runs[7].mode, "batch,wait");
    BOOST_CHECK_EQUAL(c.runs[7].sessions, 8);
    BOOST_CHECK_EQUAL(aqbench::parse_commit_command({"--modes", "batch,nowait"}).runs.size(), 2u);  // default -N 1,8
    try {
        aqbench::parse_commit_command({"--seconds", "0"});
        BOOST_ERROR("--seconds 0 accepted");
    } catch (const po::error& e) {
        BOOST_CHECK_EQUAL(std::string(e.what()), "--seconds must be positive");
    }
}

BOOST_AUTO_TEST_CASE(ingest_runs_and_errors) {
    auto c = aqbench::parse_ingest_command({"dbname=x", "-s", "fast", "-W", "1,2", "-r", "1,100", "-n", "500"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 4u);
    for (auto& r : c.runs) {
        BOOST_CHECK(r.fast);
        BOOST_CHECK_EQUAL(r.rows, 500);
    }
    BOOST_CHECK_EQUAL(c.runs[3].writers, 2);
    BOOST_CHECK_EQUAL(c.runs[3].rows_per_insert, 100);
    try {
        aqbench::parse_ingest_command({"-s", "turbo"});
        BOOST_ERROR("unknown system accepted");
    } catch (const po::error& e) {
        BOOST_CHECK_EQUAL(std::string(e.what()), "--system: unknown \"turbo\" (fast, standard)");
    }
}

BOOST_AUTO_TEST_CASE(rate_is_an_offered_load) {
    BOOST_CHECK_EQUAL(parse_queue_command({"dbname=x"}).runs[0].rate, 0);  // flat out
    auto c = parse_queue_command({"-n", "0", "--seconds", "5", "--rate", "20000", "-s", "aq,plain"});
    BOOST_REQUIRE_EQUAL(c.runs.size(), 2u);
    for (auto& r : c.runs) BOOST_CHECK_EQUAL(r.rate, 20000);
    BOOST_CHECK_EQUAL(parse_queue_command({"-n", "1000", "--rate", "500"}).runs[0].rate, 500);  // with -n too
    BOOST_CHECK_EQUAL(parse_queue_command({"--rate", "0"}).runs[0].rate, 0);
    const std::string what = "\" is not a non-negative integer (messages per second, 0 = flat out)";
    BOOST_CHECK_EQUAL(error_of({"--rate", "1.5"}), "--rate: \"1.5" + what);
    BOOST_CHECK_EQUAL(error_of({"--rate=-5"}), "--rate: \"-5" + what);
    BOOST_CHECK_EQUAL(error_of({"--rate", "x"}), "--rate: \"x" + what);
    BOOST_CHECK_EQUAL(error_of({"--rate", ""}), "--rate: \"" + what);
    BOOST_CHECK(parse_queue_command({"--help"}).help_text.find("--rate") != std::string::npos);
}
