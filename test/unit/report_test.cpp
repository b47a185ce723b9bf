// Unit tests of tools/aq-bench/report.* — CSV parsing, chart series grouping, and (if gnuplot is on PATH)
// an end-to-end run producing PNG files.
#define BOOST_TEST_MODULE aq_bench_report
#include <boost/test/included/unit_test.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

#include "report.hpp"

using namespace aqbench;
namespace fs = std::filesystem;

namespace {

const std::string header =
    "workload,system,producers,consumers,batch,payload_bytes,messages,seconds,enq_rate,deq_rate,p50_ms,p99_ms,"
    "max_ms,lost,duplicated,unexpected,recovered,mode,tps,wal_syncs_per_commit,rows_ack_rate,rows_applied_rate\n";

// A queue row in the design's column order.
std::string queue_row(const std::string& system, int producers, int consumers, int batch, double deq_rate,
                      double p50 = 1.5, double p99 = 9.0) {
    std::ostringstream os;
    os << "queue," << system << "," << producers << "," << consumers << "," << batch << ",100,10000,5.0," << deq_rate
       << "," << deq_rate << "," << p50 << "," << p99 << ",20.0,0,0,0,,,,,,\n";
    return os.str();
}

const std::string ingest_and_commit_rows =
    "ingest,fast,4,,100,200,100000,3.0,,,,,,0,0,0,,single,,,30000.0,25000.0\n"
    "ingest,fast,4,,100,200,100000,3.0,,,,,,0,0,0,,multi,,,90000.0,80000.0\n"
    "ingest,standard,4,,100,200,100000,3.0,,,,,,0,0,0,,single,,,20000.0,20000.0\n"
    "ingest,standard,4,,100,200,100000,3.0,,,,,,0,0,0,,multi,,,50000.0,50000.0\n"
    "commit,aq,8,,,,,5.0,,,,,,,,,,WAIT/BATCH,4000.0,0.1,,\n"
    "commit,aq,8,,,,,5.0,,,,,,,,,,WAIT/IMMEDIATE,900.0,1.0,,\n"
    "commit,aq,8,,,,,5.0,,,,,,,,,,NOWAIT/IMMEDIATE,5000.0,0.02,,\n";

std::vector<Run> parse(const std::string& text) {
    std::istringstream in(text);
    return parse_csv(in, "test.csv");
}

// The message of the std::runtime_error that parsing `text` throws, or "none".
std::string parse_error(const std::string& text) {
    try {
        parse(text);
    } catch (const std::runtime_error& e) {
        return e.what();
    }
    return "none";
}

const Series* find_series(const Chart& c, const std::string& name) {
    for (const auto& s : c.series)
        if (s.name == name) return &s;
    return nullptr;
}

std::string xs(const Series* s) {
    std::string out;
    for (const auto& p : s->points) out += (out.empty() ? "" : " ") + std::to_string(int(p.x));
    return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(parse_full_design_header) {
    const auto runs = parse(header + queue_row("aq", 2, 2, 100, 12345.6));
    BOOST_TEST(runs.size() == 1u);
    BOOST_TEST(runs[0].str("workload") == "queue");
    BOOST_TEST(runs[0].str("system") == "aq");
    BOOST_TEST(*runs[0].num("batch") == 100.0);
    BOOST_TEST(*runs[0].num("deq_rate") == 12345.6);
    BOOST_TEST(!runs[0].num("tps").has_value());                // empty field = not applicable
    BOOST_TEST(!runs[0].num("rows_applied_rate").has_value());  // trailing empty field
    BOOST_TEST(runs[0].str("mode").empty());
}

BOOST_AUTO_TEST_CASE(parse_is_header_driven) {
    const auto runs = parse(" tps , mode,system ,workload\r\n\r\n12.5,NOWAIT/BATCH,aq,commit\r\n,,aq,commit\n");
    BOOST_TEST(runs.size() == 2u);
    BOOST_TEST(*runs[0].num("tps") == 12.5);
    BOOST_TEST(runs[0].str("mode") == "NOWAIT/BATCH");
    BOOST_TEST(runs[0].str("workload") == "commit");
    BOOST_TEST(!runs[1].num("tps").has_value());
    BOOST_TEST(runs[1].str("mode").empty());
}

BOOST_AUTO_TEST_CASE(parse_errors) {
    BOOST_TEST(parse_error("") == "test.csv: empty CSV, no header line");
    BOOST_TEST(parse_error("workload,system,speed\n") == "test.csv line 1: unknown column \"speed\"");
    BOOST_TEST(parse_error("workload,tps\nqueue,1\n") == "test.csv line 1: missing required column \"system\"");
    BOOST_TEST(parse_error("workload,system,tps,tps\n") == "test.csv line 1: duplicate column \"tps\"");
    BOOST_TEST(parse_error("workload,system,tps\ncommit,aq,fast\n") ==
               "test.csv line 2: column tps: \"fast\" is not a number");
    BOOST_TEST(parse_error("workload,system,tps\ncommit,aq,12x\n") ==
               "test.csv line 2: column tps: \"12x\" is not a number");
    BOOST_TEST(parse_error("workload,system,tps\ncommit,aq,nan\n") ==
               "test.csv line 2: column tps: \"nan\" is not a number");
    BOOST_TEST(parse_error("workload,system,tps\n\ncommit,aq\n") == "test.csv line 3: 2 fields, header has 3");
    BOOST_TEST(parse_error("workload,system\n,aq\n") == "test.csv line 2: empty workload");
}

BOOST_AUTO_TEST_CASE(queue_batch_prefers_two_by_two_and_orders_systems) {
    std::string csv = header;
    for (const char* system : {"pgq", "plain", "aq"})
        for (int batch : {500, 1, 100, 10}) csv += queue_row(system, 2, 2, batch, batch * 10.0);
    csv += queue_row("aq", 1, 1, 1, 999999.0);  // other producer/consumer count: not in this chart
    csv += queue_row("aq", 2, 2, 100, 3000.0);  // repeated run: averaged with 1000
    const Chart c = queue_batch_chart(parse(csv));
    BOOST_TEST(c.title == "Queue throughput vs batch size (producers=2, consumers=2)");
    BOOST_TEST(c.series.size() == 3u);
    BOOST_TEST(c.series[0].name == "aq");
    BOOST_TEST(c.series[1].name == "plain");
    BOOST_TEST(c.series[2].name == "pgq");
    BOOST_TEST(xs(&c.series[0]) == "1 10 100 500");
    BOOST_TEST(c.series[0].points[0].y == 10.0);
    BOOST_TEST(c.series[0].points[2].y == 2000.0);
    BOOST_TEST(c.logx);
}

BOOST_AUTO_TEST_CASE(queue_batch_falls_back_to_most_common_pair) {
    std::string csv = header;
    for (int batch : {1, 10, 100}) csv += queue_row("aq", 4, 4, batch, 1.0);
    csv += queue_row("aq", 1, 1, 1, 1.0);
    const Chart c = queue_batch_chart(parse(csv));
    BOOST_TEST(c.title == "Queue throughput vs batch size (producers=4, consumers=4)");
    BOOST_TEST(xs(&c.series.at(0)) == "1 10 100");
}

BOOST_AUTO_TEST_CASE(queue_consumers_at_batch_100) {
    std::string csv = header;
    for (int consumers : {4, 1, 2}) {
        csv += queue_row("aq", 2, consumers, 100, consumers * 1000.0);
        csv += queue_row("plain", 2, consumers, 100, consumers * 100.0);
        csv += queue_row("aq", 2, consumers, 10, 1.0);  // other batch: ignored
    }
    const Chart c = queue_consumers_chart(parse(csv));
    BOOST_TEST(c.title == "Queue throughput vs consumers (batch 100, producers=2)");
    BOOST_TEST(c.series.size() == 2u);
    BOOST_TEST(xs(find_series(c, "aq")) == "1 2 4");
    BOOST_TEST(find_series(c, "aq")->points[2].y == 4000.0);
    BOOST_TEST(find_series(c, "plain")->points[0].y == 100.0);
    BOOST_TEST(!c.logx);
}

BOOST_AUTO_TEST_CASE(queue_consumers_picks_the_producers_slice_covering_most_consumer_counts) {
    std::string csv = header;
    for (int consumers : {1, 2, 4}) csv += queue_row("aq", 1, consumers, 50, 7.0);  // producers=1 sweep
    csv += queue_row("aq", 2, 1, 50, 1.0);   // producers=2 covers 1 consumer count: loses
    csv += queue_row("aq", 4, 4, 50, 40.0);  // producers=consumers covers 2 (with 1,1): loses
    csv += queue_row("aq", 1, 1, 10, 1.0);   // other batch: ignored
    Chart c = queue_consumers_chart(parse(csv));
    BOOST_TEST(c.title == "Queue throughput vs consumers (batch 50, producers=1)");  // most common batch
    BOOST_TEST(xs(find_series(c, "aq")) == "1 2 4");
    BOOST_TEST(find_series(c, "aq")->points.at(2).y == 7.0);

    csv = header;
    for (int consumers : {1, 2, 4}) csv += queue_row("aq", consumers, consumers, 100, consumers * 10.0);
    csv += queue_row("aq", 1, 2, 100, 5.0);
    c = queue_consumers_chart(parse(csv));
    BOOST_TEST(c.title == "Queue throughput vs consumers (batch 100, producers=consumers)");
    BOOST_TEST(xs(find_series(c, "aq")) == "1 2 4");
    BOOST_TEST(find_series(c, "aq")->points.at(1).y == 20.0);
}

BOOST_AUTO_TEST_CASE(queue_latency_p50_p99_per_system) {
    std::string csv = header;
    for (int batch : {1, 10}) {
        csv += queue_row("aq", 2, 2, batch, 1.0, 0.5 * batch, 4.0 * batch);
        csv += queue_row("pgq", 2, 2, batch, 1.0, 0.0, 8.0 * batch);  // p50 0 cannot go on a log axis
    }
    const Chart c = queue_latency_chart(parse(csv));
    BOOST_TEST(c.logy);
    BOOST_TEST(c.series.size() == 3u);  // aq p50, aq p99, pgq p99
    BOOST_TEST(find_series(c, "aq p50")->points[1].y == 5.0);
    BOOST_TEST(find_series(c, "aq p99")->dash == 2);
    BOOST_TEST(find_series(c, "aq p99")->color == find_series(c, "aq p50")->color);
    BOOST_TEST(!find_series(c, "pgq p50"));
    BOOST_TEST(find_series(c, "pgq p99")->points[0].y == 8.0);
}

BOOST_AUTO_TEST_CASE(ingest_and_commit_bars) {
    const auto runs = parse(header + ingest_and_commit_rows);
    const Chart ingest = ingest_chart(runs);
    BOOST_TEST((ingest.kind == Chart::Kind::bars));
    BOOST_TEST((ingest.categories == std::vector<std::string>{"single", "multi"}));
    BOOST_TEST(ingest.series.size() == 4u);
    BOOST_TEST(ingest.series[0].name == "fast: until acknowledged");
    BOOST_TEST(ingest.series[3].name == "standard: until applied");
    BOOST_TEST(ingest.series[1].points[1].x == 1.0);  // multi
    BOOST_TEST(ingest.series[1].points[1].y == 80000.0);

    const Chart commit = commit_chart(runs);
    BOOST_TEST((commit.categories == std::vector<std::string>{"WAIT/IMMEDIATE", "NOWAIT/IMMEDIATE", "WAIT/BATCH"}));
    BOOST_TEST(commit.series.size() == 2u);
    BOOST_TEST(commit.series[0].name == "WAL syncs per commit");
    BOOST_TEST(!commit.series[0].y2);
    BOOST_TEST(commit.series[1].y2);
    BOOST_TEST(commit.series[0].points[2].x == 2.0);  // WAIT/BATCH
    BOOST_TEST(commit.series[0].points[2].y == 0.1);
}

BOOST_AUTO_TEST_CASE(absent_data_gives_empty_charts_with_a_reason) {
    const auto charts = build_charts(parse(header + ingest_and_commit_rows));
    BOOST_TEST(charts.size() == 5u);
    BOOST_TEST(charts[0].empty());
    BOOST_TEST(charts[0].skip_reason == "no workload=queue rows with batch and deq_rate");
    BOOST_TEST(charts[2].empty());
    BOOST_TEST(!charts[3].empty());
    BOOST_TEST(!charts[4].empty());
}

BOOST_AUTO_TEST_CASE(script_draws_non_empty_charts_only) {
    std::string csv = header + ingest_and_commit_rows + queue_row("o'q", 2, 2, 10, 5.0, 0, 0);
    const auto charts = build_charts(parse(csv));
    const std::string gp = gnuplot_script(charts, "/out");
    BOOST_TEST(gp.find("set output '/out/queue_batch.png'") != std::string::npos);
    BOOST_TEST(gp.find("'/out/queue_batch.dat' index 0 using 1:2 with linespoints") != std::string::npos);
    BOOST_TEST(gp.find("title 'o''q'") != std::string::npos);  // gnuplot quoting
    BOOST_TEST(gp.find("set logscale x 10") != std::string::npos);
    BOOST_TEST(gp.find("set xtics (10)") != std::string::npos);
    BOOST_TEST(gp.find("axes x1y2 title 'tps (right axis)'") != std::string::npos);
    BOOST_TEST(gp.find("queue_latency") == std::string::npos);  // no positive latency: chart skipped
    BOOST_TEST(gp.find("pngcairo size 800,500") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(write_report_errors) {
    const fs::path dir = fs::temp_directory_path() / ("aq_report_err_" + std::to_string(getpid()));
    fs::create_directories(dir);
    auto error_of = [](const ReportOptions& o) -> std::string {
        try {
            write_report(o);
        } catch (const std::runtime_error& e) {
            return e.what();
        }
        return "none";
    };
    BOOST_TEST(error_of({(dir / "nope.csv").string(), dir.string()}).find("cannot open CSV file") == 0u);

    std::ofstream((dir / "r.csv").string()) << header << queue_row("aq", 2, 2, 1, 5.0);
    const std::string missing = error_of({(dir / "r.csv").string(), dir.string(), "/nonexistent/gnuplot"});
    BOOST_TEST(missing.find("gnuplot not found") == 0u, missing);
    const std::string failed = error_of({(dir / "r.csv").string(), dir.string(), "/bin/false"});
    BOOST_TEST(failed.find("gnuplot failed (exit status 1)") == 0u, failed);
    std::ofstream((dir / "bad.csv").string()) << "workload,system,colour\n";
    BOOST_TEST(error_of({(dir / "bad.csv").string(), dir.string()}).find("unknown column \"colour\"") !=
               std::string::npos);
    fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(end_to_end_pngs) {
    if (std::system("command -v gnuplot >/dev/null 2>&1") != 0) {
        BOOST_TEST_MESSAGE("gnuplot not on PATH (apt-get install gnuplot-nox): skipping the end-to-end PNG test");
        return;
    }
    const fs::path dir = fs::temp_directory_path() / ("aq_report_" + std::to_string(getpid()));
    fs::remove_all(dir);
    fs::create_directories(dir);
    std::string csv = header + ingest_and_commit_rows;
    for (const char* system : {"aq", "plain", "pgq"}) {
        for (int batch : {1, 10, 100, 500}) csv += queue_row(system, 2, 2, batch, 100.0 * batch, 0.2 * batch, batch);
        for (int consumers : {1, 4}) csv += queue_row(system, 2, consumers, 100, 1000.0 * consumers);
    }
    std::ofstream(dir / "results.csv") << csv;

    const auto pngs = write_report({(dir / "results.csv").string(), (dir / "out").string()});
    BOOST_TEST(pngs.size() == 5u);
    for (const char* name :
         {"queue_batch.png", "queue_consumers.png", "queue_latency.png", "ingest.png", "commit.png"}) {
        const fs::path png = dir / "out" / name;
        std::ifstream in(png, std::ios::binary);
        char signature[8] = {};
        in.read(signature, 8);
        BOOST_TEST(std::string(signature, 8) == std::string("\x89PNG\r\n\x1a\n", 8), png);
    }
    BOOST_TEST(fs::exists(dir / "out" / "report.gp"));
    if (!std::getenv("AQ_REPORT_KEEP"))
        fs::remove_all(dir);
    else
        BOOST_TEST_MESSAGE("kept " << dir);
}
