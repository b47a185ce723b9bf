// aq-bench: a libpq load driver for aq.  `aq-bench --help` lists the workloads and options.
//
//   aq-bench queue  "<conninfo>" [options]   producers/consumers on aq or plain SQL
//   aq-bench report --csv FILE --out DIR    PNG charts of a CSV (gnuplot)
//
// Every queue run is checked for exactly-once delivery (checker.hpp); the exit status is 1
// if any run lost, duplicated or invented a message, 2 on a usage or connection error.
#include <boost/program_options.hpp>

#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "faults.hpp"
#include "queue_workload.hpp"
#include "report.hpp"

namespace po = boost::program_options;

namespace aqbench {

namespace {

const char* const csv_header =
    "workload,system,producers,consumers,batch,payload_bytes,messages,seconds,enq_rate,deq_rate,p50_ms,p99_ms,max_ms,"
    "lost,duplicated,unexpected,recovered,mode,tps,wal_syncs_per_commit,rows_ack_rate,rows_applied_rate,visibility,"
    "immediate_enq_unconfirmed,immediate_deq_unconfirmed,immediate_dequeues_unknown,lost_in_flight";
// The fields of csv_header's immediate columns for a commit or ingest row.
const char* const no_immediate_fields = ",,,,,";

std::string fixed(double v, int decimals = 1) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
    return buf;
}

// "batch,nowait" -> "NOWAIT/BATCH" (Oracle's COMMIT_WAIT/COMMIT_LOGGING), a CSV field without commas.
std::string mode_label(const std::string& commit_write) {
    std::string wait = "WAIT", logging = "IMMEDIATE";
    std::stringstream in(commit_write);
    for (std::string word; std::getline(in, word, ',');) {
        for (auto& ch : word) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        if (word == "NOWAIT" || word == "WAIT" || word == "FORCE_WAIT") wait = word;
        if (word == "BATCH" || word == "IMMEDIATE") logging = word;
    }
    return wait + "/" + logging;
}

// Before the runs: a CSV to append to must have this aq-bench's header (an older one's has fewer columns).
void check_csv(const std::string& path) {
    std::ifstream in(path);
    std::string header;
    if (!in || !std::getline(in, header)) return;
    if (!header.empty() && header.back() == '\r') header.pop_back();
    if (header != csv_header)
        throw std::runtime_error(path + ": its header is not this aq-bench's (an older one's?): give a new --csv file");
}

void append_csv(const std::string& path, const std::string& row) {
    bool fresh = !std::ifstream(path).good();
    std::ofstream out(path, std::ios::app);
    if (fresh) out << csv_header << '\n';
    out << row << '\n';
}

std::string csv_row(const QueueResult& r) {
    const auto& c = r.config;
    std::ostringstream o;
    o << "queue," << c.system << ',' << c.producers << ',' << c.consumers << ',' << c.dequeue_batch << ','
      << c.payload_bytes << ',' << r.enqueued << ',' << fixed(r.seconds, 3) << ',' << fixed(r.enqueue_rate) << ','
      << fixed(r.dequeue_rate) << ',' << fixed(r.p50_ms, 3) << ',' << fixed(r.p99_ms, 3) << ',' << fixed(r.max_ms, 3)
      << ',' << r.verdict.lost << ',' << r.verdict.duplicated << ',' << r.verdict.unexpected << ','
      << r.verdict.recovered << ",,,,,," << (c.immediate ? "immediate" : "on_commit") << ','
      << r.verdict.immediate_enqueued_unconfirmed << ',' << r.verdict.immediate_dequeued_unconfirmed << ','
      << r.verdict.immediate_dequeues_unknown << ',' << r.verdict.lost_in_flight;
    return o.str();
}

void print_summary(const std::vector<QueueResult>& results, const FaultCounts* faults) {
    std::printf("\n%-6s %3s %3s %6s %10s %11s %11s %9s %9s %9s %6s %6s %6s %6s\n", "system", "P", "C", "batch",
                "messages", "enq msg/s", "deq msg/s", "p50 ms", "p99 ms", "max ms", "lost", "dup", "unexp", "recov");
    for (auto& r : results)
        std::printf("%-6s %3d %3d %6d %10llu %11.0f %11.0f %9.2f %9.2f %9.2f %6llu %6llu %6llu %6llu%s\n",
                    r.config.system.c_str(), r.config.producers, r.config.consumers, r.config.dequeue_batch,
                    static_cast<unsigned long long>(r.enqueued), r.enqueue_rate, r.dequeue_rate, r.p50_ms, r.p99_ms,
                    r.max_ms, static_cast<unsigned long long>(r.verdict.lost),
                    static_cast<unsigned long long>(r.verdict.duplicated),
                    static_cast<unsigned long long>(r.verdict.unexpected),
                    static_cast<unsigned long long>(r.verdict.recovered), r.ok() ? "" : "  FAILED");
    for (auto& r : results) {
        if (r.subscriber_verdicts.empty()) continue;
        std::printf("subscribers (P=%d C=%d batch=%d): each checked on its own; messages left in the queue table "
                    "after them all: %ld\n",
                    r.config.producers, r.config.consumers, r.config.dequeue_batch, r.messages_left);
        for (size_t i = 0; i < r.subscriber_verdicts.size(); i++)
            std::printf("  sub%zu: %s\n", i + 1, to_string(r.subscriber_verdicts[i]).c_str());
    }
    // The offered load and what came of it, one line a run: "load: <system> P=.. C=.. batch=..: offered <R> msg/s
    // (or flat out), enqueued <r> msg/s[, shortfall <n> messages], backlog <n> at the end of the load".
    for (auto& r : results) {
        std::string offered = r.config.rate > 0 ? "offered " + std::to_string(r.config.rate) + " msg/s" : "offered flat out";
        std::string achieved = r.config.rate > 0 ? " (" + fixed(r.enqueue_rate / r.config.rate, 2) + "x offered), shortfall " +
                                                       std::to_string(r.shortfall) + " messages"
                                                 : "";
        std::printf("load: %s P=%d C=%d batch=%d: %s, enqueued %.0f msg/s%s, dequeued %.0f msg/s, "
                    "backlog %lld at the end of the load\n",
                    r.config.system.c_str(), r.config.producers, r.config.consumers, r.config.dequeue_batch,
                    offered.c_str(), r.enqueue_rate, achieved.c_str(), r.dequeue_rate, r.backlog);
    }
    // --report-size: one line a run, "queue table size: <system> P=.. C=.. batch=..: <bytes> bytes".
    for (auto& r : results)
        if (r.table_bytes >= 0)
            std::printf("queue table size: %s P=%d C=%d batch=%d: %lld bytes\n", r.config.system.c_str(),
                        r.config.producers, r.config.consumers, r.config.dequeue_batch, r.table_bytes);
    for (auto& r : results) {
        if (!r.config.immediate) continue;
        const auto& v = r.verdict;
        std::printf("immediate (P=%d C=%d batch=%d): %llu ids acknowledged by the enqueue call (%llu of them with the "
                    "COMMIT after it failed or lost), %llu dequeued by the call (%llu); %llu dequeue calls without a "
                    "result: %llu ids lost in flight (at most %llu allowed)\n",
                    r.config.producers, r.config.consumers, r.config.dequeue_batch,
                    static_cast<unsigned long long>(v.immediate_enqueued),
                    static_cast<unsigned long long>(v.immediate_enqueued_unconfirmed),
                    static_cast<unsigned long long>(v.immediate_dequeued),
                    static_cast<unsigned long long>(v.immediate_dequeued_unconfirmed),
                    static_cast<unsigned long long>(v.immediate_dequeues_unknown),
                    static_cast<unsigned long long>(v.lost_in_flight),
                    static_cast<unsigned long long>(v.in_flight_allowance));
    }
    if (faults)
        std::printf("faults: %d kill -9, %d pg_terminate_backend, %d postmaster crashes (%d skipped)\n", faults->kills,
                    faults->terminations, faults->crashes, faults->skipped);
}

int queue_command(const std::vector<std::string>& args) {
    QueueCommand command = parse_queue_command(args);
    if (command.help) {
        std::cout << command.help_text << "\nSystems:\n" << describe_systems();
        return 0;
    }
    if (!command.csv.empty()) check_csv(command.csv);
    if (command.faults) check_crash_setup(command.fault_options);
    std::vector<QueueResult> results;
    FaultCounts total;
    for (auto& config : command.runs) {
        std::fprintf(stderr, "aq-bench: queue %s P=%d C=%d batch=%d ...\n", config.system.c_str(), config.producers,
                     config.consumers, config.dequeue_batch);
        std::unique_ptr<FaultInjector> injector;
        if (command.faults) injector = std::make_unique<FaultInjector>(command.fault_options, config.consumers);
        results.push_back(run_queue(config, injector.get()));
        if (injector) {
            auto n = injector->counts();
            total.kills += n.kills;
            total.terminations += n.terminations;
            total.crashes += n.crashes;
            total.skipped += n.skipped;
        }
        std::fprintf(stderr, "aq-bench: %s\n", to_string(results.back().verdict).c_str());
        if (!command.csv.empty()) append_csv(command.csv, csv_row(results.back()));
    }
    print_summary(results, command.faults ? &total : nullptr);
    if (command.faults && !command.fault_options.data_directory.empty() &&
        total.crashes < command.fault_options.crashes * static_cast<int>(results.size()))
        std::fprintf(stderr, "aq-bench: %d postmaster crashes of the %d asked for (%d a run)\n", total.crashes,
                     command.fault_options.crashes * static_cast<int>(results.size()), command.fault_options.crashes);
    for (auto& r : results)
        if (!r.ok()) return 1;
    return 0;
}

int commit_command(const std::vector<std::string>& args) {
    CommitCommand command = parse_commit_command(args);
    if (command.help) {
        std::cout << command.help_text;
        return 0;
    }
    if (!command.csv.empty()) check_csv(command.csv);
    std::printf("\n%-18s %8s %10s %12s %14s\n", "mode", "sessions", "commits", "tps", "WAL syncs/commit");
    for (auto& config : command.runs) {
        std::fprintf(stderr, "aq-bench: commit %s, %d sessions, %.0f s ...\n", config.mode.c_str(), config.sessions,
                     config.seconds);
        CommitResult r = run_commit(config);
        std::printf("%-18s %8d %10llu %12.0f %14.3f\n", config.mode.c_str(), config.sessions, r.commits, r.tps,
                    r.wal_syncs_per_commit);
        std::fflush(stdout);
        if (!command.csv.empty()) {
            std::ostringstream row;
            row << "commit,aq," << config.sessions << ",,,," << r.commits << ',' << fixed(config.seconds, 3)
                << ",,,,,,,,,," << mode_label(config.mode) << ',' << fixed(r.tps) << ','
                << fixed(r.wal_syncs_per_commit, 4) << ",," << no_immediate_fields;
            append_csv(command.csv, row.str());
        }
    }
    return 0;
}

int ingest_command(const std::vector<std::string>& args) {
    IngestCommand command = parse_ingest_command(args);
    if (command.help) {
        std::cout << command.help_text;
        return 0;
    }
    if (!command.csv.empty()) check_csv(command.csv);
    bool all_ok = true;
    std::printf("\n%-9s %7s %9s %9s %14s %14s  %s\n", "system", "writers", "rows/ins", "rows", "acked rows/s",
                "applied rows/s", "check");
    for (auto& config : command.runs) {
        const char* system = config.fast ? "fast" : "standard";
        std::fprintf(stderr, "aq-bench: ingest %s, %d writers, %d rows per INSERT ...\n", system, config.writers,
                     config.rows_per_insert);
        IngestResult r = run_ingest(config);
        all_ok = all_ok && r.verdict.ok();
        std::printf("%-9s %7d %9d %9ld %14.0f %14.0f  %s\n", system, config.writers, config.rows_per_insert, config.rows,
                    r.ack_rate, r.applied_rate, to_string(r.verdict).c_str());
        std::fflush(stdout);
        if (!command.csv.empty()) {
            std::ostringstream row;
            row << "ingest," << system << ',' << config.writers << ",," << config.rows_per_insert << ",," << config.rows
                << ',' << fixed(r.applied_seconds, 3) << ",,,,,," << r.verdict.missing << ',' << r.verdict.duplicated
                << ',' << r.verdict.unexpected << ',' << r.verdict.recovered << ','
                << (config.rows_per_insert == 1 ? "single" : "multi") << ",,," << fixed(r.ack_rate) << ','
                << fixed(r.applied_rate) << no_immediate_fields;
            append_csv(command.csv, row.str());
        }
    }
    return all_ok ? 0 : 1;
}

int report_command(const std::vector<std::string>& args) {
    ReportOptions o;
    po::options_description options("aq-bench report --csv FILE --out DIR");
    options.add_options()("help,h", "this help")
        ("csv", po::value(&o.csv_path)->required(), "the CSV written by aq-bench --csv")
        ("out", po::value(&o.out_dir)->required(), "directory for the PNG charts")
        ("gnuplot", po::value(&o.gnuplot)->default_value("gnuplot"), "the gnuplot program");
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(options).run(), vm);
    if (vm.count("help")) {
        std::cout << options;
        return 0;
    }
    po::notify(vm);
    for (auto& png : write_report(o)) std::printf("%s\n", png.c_str());
    return 0;
}

const char* const usage =
    "usage: aq-bench COMMAND [options]   (aq-bench COMMAND --help for its options)\n"
    "  queue   P producers and C consumers on aq, plain SQL, PgQ or pgmq's SQL shape; throughput,\n"
    "          latency and an exactly-once check of every message (with --faults: kill -9,\n"
    "          pg_terminate_backend, postmaster crashes while it runs)\n"
    "  ingest  W writers, with and without fast ingest: rows/s until acknowledged and until\n"
    "          applied, and every acknowledged row present once\n"
    "  commit  N sessions of small transactions under each commit mode: transactions/s and WAL syncs\n"
    "  report  PNG charts (gnuplot) from the CSV of earlier runs\n";

}  // namespace

int main(int argc, char** argv) {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.empty() || args[0] == "--help" || args[0] == "-h") {
        std::fputs(usage, args.empty() ? stderr : stdout);
        return args.empty() ? 2 : 0;
    }
    std::string command = args[0];
    args.erase(args.begin());
    try {
        if (command == "queue") return queue_command(args);
        if (command == "report") return report_command(args);
        if (command == "commit") return commit_command(args);
        if (command == "ingest") return ingest_command(args);
        std::fprintf(stderr, "aq-bench: unknown command \"%s\"\n%s", command.c_str(), usage);
        return 2;
    } catch (const po::error& e) {
        std::fprintf(stderr, "aq-bench %s: %s\n", command.c_str(), e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fprintf(stderr, "aq-bench %s: %s\n", command.c_str(), e.what());
        return 2;
    }
}

}  // namespace aqbench

int main(int argc, char** argv) { return aqbench::main(argc, argv); }
