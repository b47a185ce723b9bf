#include "cli.hpp"

#include <boost/program_options.hpp>

#include <sstream>

#include <unistd.h>

namespace po = boost::program_options;

namespace aqbench {

std::vector<int> parse_int_list(const std::string& text, const char* option) {
    std::vector<int> values;
    std::stringstream in(text);
    for (std::string item; std::getline(in, item, ',');) {
        size_t used = 0;
        int v = 0;
        try {
            v = std::stoi(item, &used);
        } catch (const std::exception&) {
            used = 0;
        }
        if (used == 0 || used != item.size() || v < 1)
            throw po::error(std::string("--") + option + ": \"" + item + "\" is not a positive integer");
        values.push_back(v);
    }
    if (values.empty()) throw po::error(std::string("--") + option + " is empty");
    return values;
}

namespace {

// --rate: a non-negative integer, messages per second (0: flat out).
long parse_rate(const std::string& text) {
    bool digits = !text.empty() && text.size() <= 12;
    for (char ch : text) digits = digits && ch >= '0' && ch <= '9';
    if (!digits) throw po::error("--rate: \"" + text + "\" is not a non-negative integer (messages per second, 0 = flat out)");
    return std::stol(text);
}

}  // namespace

// Parses args against options (the first positional argument is the connection string);
// with --help, returns its text in *help instead and true.
bool parse_or_help(const std::vector<std::string>& args, const po::options_description& options, std::string* help) {
    po::positional_options_description positional;
    positional.add("conninfo", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(args).options(options).positional(positional).run(), vm);
    if (vm.count("help")) {
        std::ostringstream text;
        text << options;
        *help = text.str();
        return true;
    }
    po::notify(vm);
    return false;
}

// pgq_baseline.sql beside the aq-bench binary.
std::string default_pgq_sql() {
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    std::string path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
    size_t slash = path.rfind('/');
    return (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/pgq_baseline.sql";
}

QueueCommand parse_queue_command(const std::vector<std::string>& args) {
    QueueCommand command;
    QueueConfig base;
    std::string conninfo, systems, producers, consumers, batches, rate;
    FaultOptions& f = command.fault_options;
    po::options_description options("aq-bench queue \"<conninfo>\" [options]");
    options.add_options()("help,h", "this help")
        ("conninfo", po::value(&conninfo)->default_value(""), "libpq connection string, as for psql")
        ("system,s", po::value(&systems)->default_value("aq"), "aq, plain, pgq, pgmq (comma list: each is run)")
        ("pgq-sql", po::value(&base.pgq_setup_sql)->default_value(default_pgq_sql()), "pgq: the set-up script")
        ("producers,P", po::value(&producers)->default_value("1"), "producer sessions (comma list: each is run)")
        ("consumers,C", po::value(&consumers)->default_value("1"), "consumer sessions (comma list)")
        ("batch,b", po::value(&batches)->default_value("100"), "messages per enqueue and per dequeue (comma list)")
        ("messages,n", po::value(&base.messages)->default_value(10000), "messages per run (0: use --seconds)")
        ("seconds", po::value(&base.seconds)->default_value(0), "run for this long instead of --messages (with -n 0): producers and consumers stop then; the backlog is drained afterwards, checked but not counted in the rates")
        ("rate", po::value(&rate)->default_value("0"),
         "offered load: messages per second from all producers together, each pacing itself to rate / producers "
         "in batches (behind schedule: at most one batch at once, the rest counted as shortfall); 0 = flat out")
        ("payload", po::value(&base.payload_bytes)->default_value(64), "payload bytes per message (32 .. 1000000)")
        ("priorities", po::value(&base.priorities)->default_value(1), "aq: priorities 1..N (priority-sorted queue)")
        ("delay", po::value(&base.delay_seconds)->default_value(0), "aq: delay every message by this many seconds")
        ("conditions", po::value(&base.conditions)->default_value(0),
         "aq: N consumer groups by deq_condition (consumer k takes ids = k mod N), 0 = none")
        ("subscribers", po::value(&base.subscribers)->default_value(0),
         "aq: a multi-consumer queue with N subscribers (consumer k dequeues as subscriber k mod N), each checked "
         "exactly-once on its own, 0 = a single-consumer queue")
        ("segments", po::value(&base.segments)->default_value(0),
         "aq: a ring queue table of N segments (2 .. 16), reclaimed by truncation instead of VACUUM; 0 = classic")
        ("retry-delay", po::value(&base.retry_delay_seconds)->default_value(0),
         "aq: the queue's retry_delay in seconds: what a consumer's aborted dequeue (a fault's) took is its again "
         "after it (max_retries then 1,000,000, so that none goes to the exception queue); 0 = none")
        ("immediate", po::bool_switch(&base.immediate),
         "aq: enqueue and dequeue with visibility => 'immediate' (each call commits on its own, in aq's worker; "
         "still inside BEGIN ... COMMIT, whose outcome the checker then ignores)")
        ("csv", po::value(&command.csv), "append one CSV row per run to FILE")
        ("report-size", po::bool_switch(&base.report_size),
         "print the total size (pg_total_relation_size) of the queue's table(s) at the end of the load, before "
         "the final drain and the teardown: aq's queue table and delivery table, plain's and pgmq's table, "
         "pgq's event tables")
        ("faults", po::bool_switch(&command.faults),
         "inject faults while the load runs: kill -9 and pg_terminate_backend of consumers' backends, in turn")
        ("fault-interval", po::value(&f.interval_seconds)->default_value(2), "seconds between kills/terminations")
        ("datadir", po::value(&f.data_directory), "with --faults: the server's data directory, to crash the postmaster")
        ("crashes", po::value(&f.crashes)->default_value(0),
         "with --datadir: N postmaster crashes (kill -9, then pg_ctl start) per run, on top of the kills, spread "
         "over the run: the i-th once i/(N+1) of the messages are dequeued (of --seconds for a timed run)")
        ("pg-ctl", po::value(&f.pg_ctl)->default_value("pg_ctl"),
         "the pg_ctl that restarts the server (if pg_ctl is not on PATH: the one beside the running postmaster)");
    if ((command.help = parse_or_help(args, options, &command.help_text))) return command;
    if (base.messages < 0 || base.seconds < 0 || (base.messages == 0 && base.seconds <= 0))
        throw po::error("give --messages > 0, or --messages 0 and --seconds > 0");
    base.rate = parse_rate(rate);
    if (base.payload_bytes < 32 || base.payload_bytes > 1000000) throw po::error("--payload must be 32 .. 1000000");
    if (base.priorities < 1) throw po::error("--priorities must be 1 or more");
    if (base.delay_seconds < 0) throw po::error("--delay must not be negative");
    if (base.conditions < 0) throw po::error("--conditions must not be negative");
    if (base.retry_delay_seconds < 0) throw po::error("--retry-delay must not be negative");
    if (base.subscribers < 0) throw po::error("--subscribers must not be negative");
    if (base.segments != 0 && (base.segments < 2 || base.segments > 16)) throw po::error("--segments must be 0 or 2 .. 16");
    if (base.subscribers > 0 && base.conditions > 0) throw po::error("--subscribers and --conditions do not go together");
    if (f.interval_seconds <= 0) throw po::error("--fault-interval must be positive");
    if (f.crashes < 0 || (f.crashes > 0 && f.data_directory.empty())) throw po::error("--crashes needs --datadir");
    f.conninfo = conninfo;

    std::vector<std::string> system_list;
    std::stringstream in(systems);
    for (std::string s; std::getline(in, s, ',');) {
        // (The message's list predates pgmq; test/unit/aq_bench_cli_test.cpp checks it word for word.)
        if (s != "aq" && s != "plain" && s != "pgq" && s != "pgmq")
            throw po::error("--system: unknown \"" + s + "\" (aq, plain, pgq, pgmq)");
        system_list.push_back(s);
    }
    if (system_list.empty()) throw po::error("--system is empty");
    for (auto& s : system_list)
        if (base.immediate && s != "aq")
            throw po::error("--immediate is for aq only (visibility => 'immediate'), not for --system " + s);
    for (auto& system : system_list)
        for (int p : parse_int_list(producers, "producers"))
            for (int c : parse_int_list(consumers, "consumers"))
                for (int b : parse_int_list(batches, "batch")) {
                    QueueConfig config = base;
                    config.conninfo = conninfo;
                    config.system = system;
                    config.producers = p;
                    config.consumers = c;
                    config.enqueue_batch = config.dequeue_batch = b;
                    command.runs.push_back(config);
                }
    return command;
}

namespace {

std::vector<std::string> parse_word_list(const std::string& text, const std::vector<std::string>& valid, const char* option) {
    std::vector<std::string> words;
    std::stringstream in(text);
    for (std::string w; std::getline(in, w, ',');) {
        bool known = false;
        std::string list;
        for (auto& v : valid) {
            known = known || v == w;
            list += (list.empty() ? "" : ", ") + v;
        }
        if (!known) throw po::error(std::string("--") + option + ": unknown \"" + w + "\" (" + list + ")");
        words.push_back(w);
    }
    if (words.empty()) throw po::error(std::string("--") + option + " is empty");
    return words;
}

}  // namespace

CommitCommand parse_commit_command(const std::vector<std::string>& args) {
    CommitCommand command;
    std::string conninfo, sessions, modes;
    double seconds;
    po::options_description options("aq-bench commit \"<conninfo>\" [options]");
    options.add_options()("help,h", "this help")
        ("conninfo", po::value(&conninfo)->default_value(""), "libpq connection string, as for psql")
        ("sessions,N", po::value(&sessions)->default_value("1,8"), "sessions committing at once (comma list)")
        ("modes", po::value(&modes)->default_value("immediate,wait;immediate,nowait;batch,nowait;batch,wait"),
         "commit modes (aq.commit_write values), separated by ';'")
        ("seconds", po::value(&seconds)->default_value(5), "seconds per mode")
        ("csv", po::value(&command.csv), "append one CSV row per run to FILE");
    if ((command.help = parse_or_help(args, options, &command.help_text))) return command;
    if (seconds <= 0) throw po::error("--seconds must be positive");
    std::vector<std::string> mode_list;
    std::stringstream in(modes);
    for (std::string m; std::getline(in, m, ';');)
        if (!m.empty()) mode_list.push_back(m);
    if (mode_list.empty()) throw po::error("--modes is empty");
    for (int n : parse_int_list(sessions, "sessions"))
        for (auto& m : mode_list) command.runs.push_back(CommitConfig{conninfo, m, n, seconds});
    return command;
}

IngestCommand parse_ingest_command(const std::vector<std::string>& args) {
    IngestCommand command;
    std::string conninfo, systems, writers, rows_per_insert;
    long rows;
    po::options_description options("aq-bench ingest \"<conninfo>\" [options]");
    options.add_options()("help,h", "this help")
        ("conninfo", po::value(&conninfo)->default_value(""), "libpq connection string, as for psql")
        ("system,s", po::value(&systems)->default_value("fast,standard"), "fast (MEMOPTIMIZE_WRITE), standard")
        ("writers,W", po::value(&writers)->default_value("1"), "writer sessions (comma list)")
        ("rows-per-insert,r", po::value(&rows_per_insert)->default_value("1,100"), "rows per INSERT (comma list)")
        ("rows,n", po::value(&rows)->default_value(100000), "rows per run")
        ("csv", po::value(&command.csv), "append one CSV row per run to FILE");
    if ((command.help = parse_or_help(args, options, &command.help_text))) return command;
    if (rows < 1) throw po::error("--rows must be positive");
    for (auto& system : parse_word_list(systems, {"fast", "standard"}, "system"))
        for (int w : parse_int_list(writers, "writers"))
            for (int r : parse_int_list(rows_per_insert, "rows-per-insert"))
                command.runs.push_back(IngestConfig{conninfo, system == "fast", w, r, rows});
    return command;
}

}  // namespace aqbench
