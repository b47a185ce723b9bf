// queue-bench: enqueue/dequeue throughput of the aq extension (Oracle AQ with
// ENQUEUE_ARRAY / DEQUEUE_ARRAY) against one-by-one calls and a plain-SQL baseline;
// single dequeues in one transaction against a commit each; dequeue_array from a
// priority-ordered queue against an enq_time-ordered one; and selective single dequeues
// by correlation from a queue of 1,000,000 messages.
//
// Build:  g++ -std=c++17 -O2 -I$(pg_config --includedir) tools/bench/queue_bench.cpp -lpq
//             -o tools/bench/queue-bench     (one command line)
// Run:    tools/bench/queue-bench "host=/tmp port=5499 dbname=postgres user=postgres" [--quick]
//
// Needs a superuser connection (it creates a schema, a type, queue tables and queues,
// and CREATE EXTENSION aq if it is missing); everything it creates is dropped at the end.
// See tools/bench/README.md.
#include <libpq-fe.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// ------------------------------------------------------------------ connection

PGconn* conn = nullptr;

[[noreturn]] void die(const std::string& what, const PGresult* r = nullptr) {
    std::fprintf(stderr, "queue-bench: %s\n", what.c_str());
    if (r) {
        const char* state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        std::fprintf(stderr, "  %s%s%s", state ? state : "", state ? ": " : "", PQresultErrorMessage(r));
    } else if (conn) {
        std::fprintf(stderr, "  %s", PQerrorMessage(conn));
    }
    std::exit(2);
}

bool result_ok(const PGresult* r) {
    ExecStatusType s = PQresultStatus(r);
    return s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK;
}

// Runs a statement that must succeed; returns its result (caller PQclear()s) when keep.
PGresult* exec(const std::string& sql, bool keep = false) {
    PGresult* r = PQexec(conn, sql.c_str());
    if (!result_ok(r)) die("statement failed: " + sql.substr(0, 300), r);
    if (!keep) {
        PQclear(r);
        return nullptr;
    }
    return r;
}

std::string scalar(const std::string& sql) {
    PGresult* r = exec(sql, true);
    std::string v = (PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)) ? PQgetvalue(r, 0, 0) : "";
    PQclear(r);
    return v;
}

void prepare(const std::string& name, const std::string& sql) {
    PGresult* r = PQprepare(conn, name.c_str(), sql.c_str(), 0, nullptr);
    if (!result_ok(r)) die("PQprepare failed: " + sql, r);
    PQclear(r);
}

// Executes a prepared statement with text parameters; dies on error; returns rows.
int run_prepared(const std::string& name, const std::vector<const char*>& params) {
    PGresult* r = PQexecPrepared(conn, name.c_str(), static_cast<int>(params.size()), params.data(), nullptr,
                                 nullptr, 0);
    if (!result_ok(r)) die("execution of prepared statement " + name + " failed", r);
    int rows = PQntuples(r);
    PQclear(r);
    return rows;
}

// Same, returning the first column of the first row as a number.
long run_prepared_long(const std::string& name, const std::vector<const char*>& params) {
    PGresult* r = PQexecPrepared(conn, name.c_str(), static_cast<int>(params.size()), params.data(), nullptr,
                                 nullptr, 0);
    if (!result_ok(r)) die("execution of prepared statement " + name + " failed", r);
    long v = PQntuples(r) > 0 ? std::atol(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    return v;
}

// ------------------------------------------------------------------ formatting

std::string with_commas(double v) {
    long long n = std::llround(v);
    std::string digits = std::to_string(n < 0 ? -n : n);
    std::string out;
    int count = 0;
    for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
        if (count && count % 3 == 0) out.insert(out.begin(), ',');
        out.insert(out.begin(), *it);
        ++count;
    }
    return n < 0 ? "-" + out : out;
}

std::string fmt(const char* f, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, f, v);
    return buf;
}

// ------------------------------------------------------------------ payloads

// Quotes one element of an array literal: "…" with \ and " escaped.
void append_array_element(std::string& out, const std::string& value) {
    out += '"';
    for (char c : value) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    out += '"';
}

std::string array_literal(const std::vector<std::string>& values, long n) {
    std::string out;
    std::size_t total = 2;
    for (long i = 0; i < n; i++) total += values[i].size() + 8;
    out.reserve(total);
    out += '{';
    for (long i = 0; i < n; i++) {
        if (i) out += ',';
        append_array_element(out, values[i]);
    }
    out += '}';
    return out;
}

// The article's payload: an object with one varchar(4000): 'Message number ' || i.
std::string composite_payload(long i) {
    return "(\"Message number " + std::to_string(i) + "\")";
}

// A 1 KB JSON document (text of exactly 1024 bytes).
std::string json_payload(long i) {
    std::string id = std::to_string(i);
    std::string c = std::to_string(i % 1000);
    std::string doc = "{\"id\": " + id + ", \"message\": \"Message number " + id +
                      "\", \"created_at\": \"2024-05-01T12:00:00Z\", \"customer\": {\"id\": " + c +
                      ", \"name\": \"Customer " + c + "\", \"email\": \"customer" + c +
                      "@example.com\", \"tier\": \"gold\"}, \"items\": [";
    for (int k = 0; k < 5; k++) {
        if (k) doc += ", ";
        doc += "{\"sku\": \"SKU-" + std::to_string((i * 7 + k) % 100000) + "\", \"qty\": " + std::to_string(k + 1) +
               ", \"price\": " + std::to_string(k + 1) + "9.99}";
    }
    doc += "], \"tags\": [\"bench\", \"aq\", \"queue\"], \"note\": \"";
    static const std::string lorem =
        "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et "
        "dolore magna aliqua. ";
    std::string tail = "\"}";
    std::size_t need = 1024 - doc.size() - tail.size();
    std::string pad;
    while (pad.size() < need) pad += lorem;
    pad.resize(need);
    return doc + pad + tail;
}

struct Payload {
    std::string tag;          // short name used in object and statement names
    std::string title;        // printed heading
    std::string type;         // SQL type of the payload
    std::string queue;        // aq queue name
    std::string queue_table;  // aq queue table (in schema aq_bench)
    std::string base_table;   // plain-SQL baseline table (in schema aq_bench)
    std::function<std::string(long)> make;
    std::vector<std::string> values;  // payload literals 1..max N (index 0 = message 1)
};

// ------------------------------------------------------------------ settings

constexpr long sample_cap = 20000;      // one-by-one phases at large N: first 20,000 messages ...
constexpr double sample_seconds = 15.0;  // ... or 15 s, whichever comes first
constexpr int dequeue_batch = 500;
bool quick = false;

// ------------------------------------------------------------------ measurements

// CPU time of the server backend (from /proc/<pid>/sched, when the server runs on this
// machine) and of this client: a noise check for shared machines, printed beside the
// wall-clock rates.
int backend_pid = 0;
bool have_server_cpu = false;

double server_cpu_seconds() {
    if (!have_server_cpu) return 0;
    std::ifstream f("/proc/" + std::to_string(backend_pid) + "/sched");
    std::string line;
    while (std::getline(f, line))
        if (line.rfind("se.sum_exec_runtime", 0) == 0) {
            auto colon = line.find(':');
            if (colon != std::string::npos) return std::atof(line.c_str() + colon + 1) / 1000.0;  // ms
        }
    return 0;
}

double client_cpu_seconds() {
    timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

void detect_server_cpu() {
    backend_pid = PQbackendPID(conn);
    const char* host = PQhost(conn);
    bool local = host && (host[0] == '/' || std::strcmp(host, "localhost") == 0 || std::strcmp(host, "127.0.0.1") == 0 ||
                          std::strcmp(host, "::1") == 0);
    std::ifstream comm("/proc/" + std::to_string(backend_pid) + "/comm");
    std::string name;
    std::getline(comm, name);
    have_server_cpu = local && name.rfind("postgres", 0) == 0;
    if (have_server_cpu) {
        // The backend must be burning CPU between two readings, or this is not our server.
        double a = server_cpu_seconds();
        exec("SELECT count(*) FROM generate_series(1, 300000)");
        have_server_cpu = server_cpu_seconds() > a;
    }
}

struct Phase {
    bool ran = false;
    long done = 0;           // messages processed in the measurement
    long n = 0;              // N of the set
    double seconds = 0;      // wall-clock of the measurement
    double server_cpu = 0;   // CPU seconds of the server backend during it
    double client_cpu = 0;   // CPU seconds of this program during it
    int reps = 1;            // runs taken; the median run is reported
    bool sampled() const { return done < n; }
    double rate() const { return seconds > 0 ? done / seconds : 0; }
    double cpu_rate() const {
        double c = server_cpu + client_cpu;
        return c > 0 ? done / c : 0;
    }
};

// Times body() (which returns how many messages it handled) after an untimed setup(),
// reps times; returns the run with the median wall-clock time.
Phase measure(long n, int reps, const std::function<void()>& setup, const std::function<long()>& body) {
    std::vector<Phase> runs;
    for (int r = 0; r < reps; r++) {
        setup();
        Phase ph;
        ph.ran = true;
        ph.n = n;
        double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
        auto t0 = Clock::now();
        ph.done = body();
        ph.seconds = seconds_since(t0);
        ph.client_cpu = client_cpu_seconds() - c0;
        ph.server_cpu = server_cpu_seconds() - s0;
        runs.push_back(ph);
    }
    std::sort(runs.begin(), runs.end(), [](const Phase& a, const Phase& b) { return a.seconds < b.seconds; });
    Phase med = runs[runs.size() / 2];
    med.reps = reps;
    return med;
}

// Array and plain-SQL phases are short (milliseconds at N=2,500, about a second at
// 100,000): each is run 3 times and the median reported, so that one unlucky run on a
// shared machine does not decide a target.
constexpr int array_reps = 3;
int reps_for(long) { return array_reps; }

struct Set {
    long n = 0;
    Phase enq_commit_each, enq_one_txn, enq_array, enq_baseline;
    Phase deq_commit_each, deq_one_txn, deq_array, deq_baseline;
    double avg_payload_bytes = 0;
};

void progress(const std::string& s) {
    std::fprintf(stderr, "  .. %s\n", s.c_str());
    std::fflush(stderr);
}

std::string qt(const Payload& p) { return "aq_bench." + p.queue_table; }
std::string bt(const Payload& p) { return "aq_bench." + p.base_table; }

void fresh(const std::string& table) {
    exec("TRUNCATE " + table);
}

void settle() {
    exec("CHECKPOINT");
}

// Fills the queue (or the baseline table) with messages 1..n, untimed, then
// VACUUM ANALYZE + CHECKPOINT so that every dequeue method starts from the same state.
void fill(const Payload& p, long n, bool baseline) {
    std::string table = baseline ? bt(p) : qt(p);
    fresh(table);
    std::string arr = array_literal(p.values, n);
    long got = run_prepared(baseline ? "base_ins_" + p.tag : "enq_arr_" + p.tag, {arr.c_str()});
    if (!baseline && got != 1) die("fill: enqueue_array returned no row");
    long count = std::atol(scalar("SELECT count(*) FROM " + table).c_str());
    if (count != n) die("fill: " + table + " holds " + std::to_string(count) + " rows, expected " + std::to_string(n));
    exec("VACUUM ANALYZE " + table);
    settle();
}

long remaining(const std::string& table) {
    return std::atol(scalar("SELECT count(*) FROM " + table).c_str());
}

// One-by-one loop after an untimed setup: runs stmt(i) for i = 0, 1, ...; at N above
// sample_cap it stops after sample_cap messages or sample_seconds, whichever is first.
Phase one_by_one(long n, bool one_txn, const std::function<void()>& setup, const std::function<void(long)>& stmt) {
    bool bounded = n > sample_cap;
    long cap = bounded ? sample_cap : n;
    return measure(n, 1, setup, [&]() -> long {
        auto t0 = Clock::now();
        if (one_txn) exec("BEGIN");
        long i = 0;
        while (i < cap) {
            stmt(i++);
            if (bounded && seconds_since(t0) >= sample_seconds) break;
        }
        if (one_txn) exec("COMMIT");
        return i;
    });
}

void prepare_statements(const Payload& p) {
    const std::string& T = p.type;
    prepare("enq_one_" + p.tag, "SELECT aq.enqueue('" + p.queue + "', $1::" + T + ")");
    prepare("enq_arr_" + p.tag, "SELECT cardinality(aq.enqueue_array('" + p.queue + "', $1::" + T + "[]))");
    prepare("base_ins_" + p.tag, "INSERT INTO " + bt(p) + " (q_id, enq_time, user_data)"
                                 " SELECT 1, now(), u FROM unnest($1::" + T + "[]) AS u");
    prepare("deq_one_" + p.tag, "SELECT msgid, payload FROM aq.dequeue('" + p.queue + "', NULL::" + T +
                                    ", aq.dequeue_options(wait => '0'))");
    prepare("deq_arr_" + p.tag, "SELECT msgid, payload FROM aq.dequeue_array('" + p.queue + "', NULL::" + T +
                                    ", " + std::to_string(dequeue_batch) + ", aq.dequeue_options(wait => '0'))");
    prepare("base_del_" + p.tag,
            "WITH c AS MATERIALIZED (SELECT ctid FROM " + bt(p) +
                " WHERE q_id = $1 ORDER BY q_id, enq_time, msgid LIMIT " + std::to_string(dequeue_batch) +
                " FOR UPDATE SKIP LOCKED)"
                " DELETE FROM " + bt(p) + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM c)) RETURNING msgid, user_data");
    prepare("base_del1_" + p.tag,
            "WITH c AS MATERIALIZED (SELECT ctid FROM " + bt(p) +
                " WHERE q_id = $1 ORDER BY q_id, enq_time, msgid LIMIT 1 FOR UPDATE SKIP LOCKED)"
                " DELETE FROM " + bt(p) + " WHERE ctid = ANY(ARRAY(SELECT ctid FROM c)) RETURNING msgid, user_data");
}

void expect_rows(const std::string& table, long expected, const std::string& what) {
    long got = remaining(table);
    if (got != expected)
        die(what + ": " + table + " holds " + std::to_string(got) + " rows, expected " + std::to_string(expected));
}

Set run_set(const Payload& p, long n) {
    Set s;
    s.n = n;
    const std::string nn = with_commas(n);
    const int reps = reps_for(n);
    const std::string arr = array_literal(p.values, n);  // built before any clock starts
    auto empty_queue = [&] {
        fresh(qt(p));
        settle();
    };
    auto empty_base = [&] {
        fresh(bt(p));
        settle();
    };

    // Untimed warm-up: the first array of this size on the connection costs extra (fresh
    // memory for the parameter and its copies, first custom plans), so neither aq nor the
    // plain-SQL baseline gets to pay it inside its measurement.
    progress(p.tag + " N=" + nn + ": warm-up (untimed)");
    fresh(qt(p));
    run_prepared_long("enq_arr_" + p.tag, {arr.c_str()});
    fresh(bt(p));
    run_prepared("base_ins_" + p.tag, {arr.c_str()});
    fresh(bt(p));

    // ---------------- enqueue
    const std::string enq_one = "enq_one_" + p.tag;
    auto enqueue_one = [&](long i) { run_prepared(enq_one, {p.values[i].c_str()}); };

    progress(p.tag + " N=" + nn + ": enqueue one by one, commit each");
    s.enq_commit_each = one_by_one(n, false, empty_queue, enqueue_one);
    expect_rows(qt(p), s.enq_commit_each.done, "enqueue (commit each)");

    progress(p.tag + " N=" + nn + ": enqueue one by one, one transaction");
    s.enq_one_txn = one_by_one(n, true, empty_queue, enqueue_one);
    expect_rows(qt(p), s.enq_one_txn.done, "enqueue (one transaction)");

    progress(p.tag + " N=" + nn + ": enqueue_array");
    s.enq_array = measure(n, reps, empty_queue, [&]() -> long {
        long got = run_prepared_long("enq_arr_" + p.tag, {arr.c_str()});
        if (got != n) die("enqueue_array returned " + std::to_string(got) + " msgids, expected " + nn);
        return got;
    });
    expect_rows(qt(p), n, "enqueue_array");
    s.avg_payload_bytes = std::atof(scalar("SELECT avg(pg_column_size(user_data)) FROM " + qt(p)).c_str());

    progress(p.tag + " N=" + nn + ": plain-SQL INSERT ... SELECT FROM unnest($1)");
    s.enq_baseline = measure(n, reps, empty_base, [&]() -> long {
        run_prepared("base_ins_" + p.tag, {arr.c_str()});
        return n;
    });
    expect_rows(bt(p), n, "baseline insert");

    // ---------------- dequeue
    const std::string deq_one = "deq_one_" + p.tag;
    auto dequeue_one = [&](long) {
        if (run_prepared(deq_one, {}) != 1) die("aq.dequeue returned no row");
    };
    auto filled_queue = [&] { fill(p, n, false); };
    auto filled_base = [&] { fill(p, n, true); };
    auto drain = [&](const std::string& stmt, std::vector<const char*> params) -> long {
        long total = 0;
        while (total < n) {
            int got = run_prepared(stmt, params);
            if (got <= 0) die(stmt + " returned no rows");
            total += got;
        }
        return total;
    };

    progress(p.tag + " N=" + nn + ": dequeue one by one, commit each");
    s.deq_commit_each = one_by_one(n, false, filled_queue, dequeue_one);
    expect_rows(qt(p), n - s.deq_commit_each.done, "dequeue (commit each)");

    progress(p.tag + " N=" + nn + ": dequeue one by one, one transaction");
    s.deq_one_txn = one_by_one(n, true, filled_queue, dequeue_one);
    expect_rows(qt(p), n - s.deq_one_txn.done, "dequeue (one transaction)");

    progress(p.tag + " N=" + nn + ": dequeue_array, 500 per call");
    s.deq_array = measure(n, reps, filled_queue, [&] { return drain("deq_arr_" + p.tag, {}); });
    expect_rows(qt(p), 0, "dequeue_array");

    progress(p.tag + " N=" + nn + ": plain-SQL DELETE ... LIMIT 500 per transaction");
    s.deq_baseline = measure(n, reps, filled_base, [&] { return drain("base_del_" + p.tag, {"1"}); });
    expect_rows(bt(p), 0, "baseline delete");
    fresh(qt(p));
    fresh(bt(p));
    return s;
}

// ------------------------------------------------------------------ the long-transaction test

struct Chunked {
    long n = 0;
    double seconds = 0;
    double cpu = 0;                               // server + client CPU seconds
    std::vector<std::pair<long, double>> chunks;  // (messages, seconds)
    bool bounded_out = false;                     // stopped by the time bound
    double per_msg_us() const { return n ? seconds * 1e6 / n : 0; }
    double cpu_per_msg_us() const { return n ? cpu * 1e6 / n : 0; }
};

Chunked chunked_dequeue(long n, long chunk, bool one_txn, const std::function<void()>& stmt, double bound_s) {
    Chunked c;
    double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
    auto t0 = Clock::now();
    auto tc = t0;
    if (one_txn) exec("BEGIN");
    long in_chunk = 0;
    for (long i = 0; i < n; i++) {
        stmt();
        c.n++;
        if (++in_chunk == chunk || i == n - 1) {
            c.chunks.push_back({in_chunk, seconds_since(tc)});
            tc = Clock::now();
            in_chunk = 0;
        }
        if (bound_s > 0 && i < n - 1 && seconds_since(t0) >= bound_s) {
            if (in_chunk) c.chunks.push_back({in_chunk, seconds_since(tc)});
            c.bounded_out = true;
            break;
        }
    }
    if (one_txn) exec("COMMIT");
    c.seconds = seconds_since(t0);
    c.cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    return c;
}

std::string chunk_line(const Chunked& c) {
    std::string out;
    long start = 1;
    for (auto& [m, sec] : c.chunks) {
        char buf[96];
        std::snprintf(buf, sizeof buf, " %6ld-%-6ld %7.1f", start, start + m - 1, m ? sec * 1e6 / m : 0.0);
        out += buf;
        start += m;
    }
    return out;
}

// ------------------------------------------------------------------ report

std::string rate_cell(const Phase& ph) {
    if (!ph.ran) return "-";
    std::string s = with_commas(ph.rate());
    if (ph.sampled()) s += " [" + with_commas(ph.done) + "]";
    return s;
}

std::string cpu_cell(const Phase& ph) {
    if (!ph.ran || !have_server_cpu || ph.done == 0) return "n/a";
    return fmt("%.1f", (ph.server_cpu + ph.client_cpu) * 1e6 / ph.done) + " (" +
           fmt("%.1f", ph.server_cpu * 1e6 / ph.done) + ")";
}

std::string ratio(double r) { return r >= 10 ? fmt("%.1fx", r) : fmt("%.2fx", r); }

std::vector<std::string> failures;
constexpr int label_width = 56;
constexpr int cell_width = 27;

void print_row(const std::string& label, const std::vector<std::string>& cells) {
    std::printf("  %-*s", label_width, label.c_str());
    for (auto& c : cells) std::printf(" %*s", cell_width, c.c_str());
    std::printf("\n");
}

void print_rule(std::size_t columns) {
    std::printf("  %s\n", std::string(label_width + (cell_width + 1) * columns, '-').c_str());
}

void print_table(const Payload& p, const std::vector<Set>& sets) {
    std::printf("\n== Payload: %s\n", p.title.c_str());
    std::printf("   average stored payload: %s bytes (pg_column_size(user_data))\n",
                fmt("%.0f", sets.empty() ? 0 : sets.back().avg_payload_bytes).c_str());
    std::vector<std::string> head;
    for (auto& s : sets) head.push_back("N=" + with_commas(s.n));

    struct Method {
        const char* label;
        Phase Set::*phase;
    };
    const Method methods[] = {
        {"ENQUEUE (a) aq.enqueue one by one, commit each", &Set::enq_commit_each},
        {"ENQUEUE (b) aq.enqueue one by one, one transaction", &Set::enq_one_txn},
        {"ENQUEUE (c) aq.enqueue_array, one array of N", &Set::enq_array},
        {"ENQUEUE plain SQL: INSERT ... SELECT FROM unnest($1)", &Set::enq_baseline},
        {"DEQUEUE (a) aq.dequeue one by one, commit each", &Set::deq_commit_each},
        {"DEQUEUE (b) aq.dequeue one by one, one transaction", &Set::deq_one_txn},
        {"DEQUEUE (c) aq.dequeue_array 500/call, txn each", &Set::deq_array},
        {"DEQUEUE plain SQL: DELETE..LIMIT 500 RETURNING, txn each", &Set::deq_baseline},
    };

    std::printf("\n");
    print_row("messages/s (wall clock)", head);
    print_rule(sets.size());
    for (auto& m : methods) {
        std::vector<std::string> cells;
        for (auto& s : sets) cells.push_back(rate_cell(s.*m.phase));
        print_row(m.label, cells);
    }

    if (have_server_cpu) {
        std::printf("\n");
        print_row("CPU us/message: server+client (server)", head);
        print_rule(sets.size());
        for (auto& m : methods) {
            std::vector<std::string> cells;
            for (auto& s : sets) cells.push_back(cpu_cell(s.*m.phase));
            print_row(m.label, cells);
        }
    }

    std::printf("\n");
    print_row("targets: ratio of messages/s  [ratio of CPU/msg]", head);
    print_rule(sets.size());
    auto target = [&](const std::string& label, double goal, Phase Set::*num, Phase Set::*den, bool big_n_only) {
        std::vector<std::string> cells;
        for (auto& s : sets) {
            const Phase& a = s.*num;
            const Phase& b = s.*den;
            double r = b.rate() > 0 ? a.rate() / b.rate() : 0;
            bool pass = r >= goal;
            bool counts = !big_n_only || s.n >= 100000 || quick;
            std::string cell = ratio(r) + (pass ? " PASS" : " FAIL");
            if (!counts) cell += "(info)";
            if (have_server_cpu && b.cpu_rate() > 0) cell += " [" + ratio(a.cpu_rate() / b.cpu_rate()) + "]";
            cells.push_back(cell);
            if (!pass && counts)
                failures.push_back(p.tag + " N=" + with_commas(s.n) + ": " + label + " : " + ratio(r));
        }
        print_row(label, cells);
    };
    target("array enqueue / (a) commit each       >= 30x", 30, &Set::enq_array, &Set::enq_commit_each, true);
    target("array enqueue / (b) one transaction   >= 5x", 5, &Set::enq_array, &Set::enq_one_txn, true);
    target("array dequeue / (a) commit each       >= 30x", 30, &Set::deq_array, &Set::deq_commit_each, false);
    target("array enqueue / plain-SQL INSERT      >= 0.67x", 2.0 / 3.0, &Set::enq_array, &Set::enq_baseline, false);
    target("array dequeue / plain-SQL DELETE      >= 0.67x", 2.0 / 3.0, &Set::deq_array, &Set::deq_baseline, false);

    std::printf("\n");
    if (!quick)
        std::printf("  (info): the 30x / 5x enqueue targets are stated for N=100,000; N=2,500 is shown for comparison.\n");
    bool any_sampled = false;
    for (auto& s : sets)
        for (auto* ph : {&s.enq_commit_each, &s.enq_one_txn, &s.deq_commit_each, &s.deq_one_txn})
            any_sampled |= ph->sampled();
    if (any_sampled)
        std::printf("  [k] after a rate: time-bounded sample, measured over the first k messages of N (one-by-one\n"
                    "      phases stop after %s messages or %.0f s, whichever comes first).\n",
                    with_commas(sample_cap).c_str(), sample_seconds);
    std::printf("  Array and plain-SQL phases: median of %d runs each; one-by-one phases: one run.\n", array_reps);
    std::fflush(stdout);
}

std::string loadavg() {
    std::ifstream f("/proc/loadavg");
    std::string a, b, c;
    f >> a >> b >> c;
    return a.empty() ? "n/a" : a + " " + b + " " + c;
}

// ------------------------------------------------------------------ priority order and correlation

// Two more kinds of queue (composite payload): a priority-ordered one and correlation
// lookups. Their queue tables are created here and dropped by drop_extra_queues() (after an
// interrupted run, by drop_leftovers()).
std::vector<std::string> extra_queue_tables;

// A message out of order or the wrong message dequeued is not a slow benchmark but a bug:
// it is reported loudly, counted here, and the program exits with 2 after the report.
long correctness_errors = 0;

void correctness_error(const std::string& what) {
    correctness_errors++;
    failures.push_back("CORRECTNESS: " + what);
    std::fprintf(stderr, "queue-bench: *** CORRECTNESS ERROR: %s ***\n", what.c_str());
    std::fflush(stderr);
}

// options: more named arguments of create_queue_table (", multiple_consumers => true", ...).
void create_extra_queue(const std::string& table, const std::string& queue, const std::string& sort_list,
                        const std::string& options = "") {
    exec("SELECT aq.create_queue_table('" + table + "', 'aq_bench.bench_ot', sort_list => '" + sort_list +
         "', queue_table_schema => 'aq_bench'" + options + ")");
    exec("SELECT aq.create_queue('" + queue + "', '" + table + "')");
    exec("SELECT aq.start_queue('" + queue + "')");
    exec("ALTER TABLE aq_bench." + table + " SET (autovacuum_enabled = off)");
    extra_queue_tables.push_back(table);
}

void drop_extra_queues() {
    for (auto& t : extra_queue_tables) exec("SELECT aq.drop_queue_table('" + t + "', force => true)");
    extra_queue_tables.clear();
}

// A multi-consumer queue table that stores each message once (create_queue_table with
// multiple_consumers and segments): the table is the parent of a ring of `segments` inheritance
// children <table>$0.. that hold the messages, each with a receipts table <table>$k_r (a row per
// dequeue: the runs of msgids it took).  Made like create_extra_queue's (enq_time order, autovacuum off on
// every table of it, dropped by drop_extra_queues()); returns the segments' and the receipts'
// tables (regclass text, quoted: the names hold a '$'), in segment order.
struct StoredOnceTables {
    std::vector<std::string> segments, receipts;
};

StoredOnceTables create_stored_once_queue(const std::string& table, const std::string& queue, int segments) {
    exec("SELECT aq.create_queue_table('" + table + "', 'aq_bench.bench_ot', queue_table_schema => 'aq_bench',"
         " multiple_consumers => true, segments => " + std::to_string(segments) + ")");
    extra_queue_tables.push_back(table);
    exec("SELECT aq.create_queue('" + queue + "', '" + table + "')");
    exec("SELECT aq.start_queue('" + queue + "')");
    exec("ALTER TABLE aq_bench." + table + " SET (autovacuum_enabled = off)");
    StoredOnceTables t;
    PGresult* r = exec("SELECT s.relid::regclass, s.receipts::regclass FROM aq.queue_segments s"
                       " JOIN aq.queue_tables q USING (queue_table_id)"
                       " WHERE q.table_schema = 'aq_bench' AND q.queue_table = '" + table + "' ORDER BY s.segment",
                       true);
    for (int i = 0; i < PQntuples(r); i++) {
        t.segments.push_back(PQgetvalue(r, i, 0));
        if (!PQgetisnull(r, i, 1)) t.receipts.push_back(PQgetvalue(r, i, 1));
    }
    PQclear(r);
    if (t.segments.size() != static_cast<std::size_t>(segments) || t.receipts.size() != t.segments.size())
        die(table + ": aq.queue_segments lists " + std::to_string(t.segments.size()) + " segments and " +
            std::to_string(t.receipts.size()) + " receipts tables, expected " + std::to_string(segments) + " of each");
    for (auto& s : t.segments) exec("ALTER TABLE " + s + " SET (autovacuum_enabled = off)");
    for (auto& s : t.receipts) exec("ALTER TABLE " + s + " SET (autovacuum_enabled = off)");
    return t;
}

// Prepares "SELECT cardinality(aq.enqueue_array(queue, $1::bench_ot[], $2::aq.message_properties[]))".
void prepare_enqueue_with_properties(const std::string& name, const std::string& queue) {
    prepare(name, "SELECT cardinality(aq.enqueue_array('" + queue +
                      "', $1::aq_bench.bench_ot[], $2::aq.message_properties[]))");
}

// A row literal of aq.message_properties with only a priority and a correlation set; every other
// field empty.  The fields, in order: priority, delay, expiration, correlation, attempts,
// exception_queue, enqueue_time, state, recipient_list, transaction_group, end_of_group.  The
// demo checks the count against the server's type (properties_fields_checked) before it sends one.
constexpr int message_properties_fields = 11;
std::string properties_literal(long priority, const std::string& correlation = "") {
    std::string s = "(" + std::to_string(priority) + ",,," + correlation;
    for (int f = 4; f < message_properties_fields; f++) s += ',';
    return s + ")";
}

// One batch: the array literal of the payloads i = from..to ('Message number ' || i) and the
// array literal of their message properties (props(i): a row literal of aq.message_properties,
// properties_literal).
struct Batch {
    long count = 0;
    std::string payloads, properties;
};

Batch make_batch(long from, long to, const std::function<std::string(long)>& props) {
    Batch b;
    b.count = to - from + 1;
    b.payloads.reserve(b.count * 28 + 2);
    b.properties.reserve(b.count * 28 + 2);
    b.payloads += '{';
    b.properties += '{';
    for (long i = from; i <= to; i++) {
        if (i > from) {
            b.payloads += ',';
            b.properties += ',';
        }
        append_array_element(b.payloads, composite_payload(i));
        append_array_element(b.properties, props(i));
    }
    b.payloads += '}';
    b.properties += '}';
    return b;
}

// Enqueues one batch (its own transaction); returns the wall-clock seconds of the call.
double enqueue_batch(const std::string& stmt, const Batch& b) {
    auto t0 = Clock::now();
    long got = run_prepared_long(stmt, {b.payloads.c_str(), b.properties.c_str()});
    double s = seconds_since(t0);
    if (got != b.count)
        die(stmt + ": enqueue_array returned " + std::to_string(got) + " msgids, expected " + std::to_string(b.count));
    return s;
}

double median_of(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// ---- 1. priority order against enq_time order

struct OrderRun {
    long n = 0;
    double seconds = 0;
    double cpu = 0;                 // server + client CPU seconds
    long priority_violations = 0;   // a lower priority after a higher one
    long fifo_violations = 0;       // within one priority, a later message before an earlier one
    double rate() const { return seconds > 0 ? n / seconds : 0; }
    double cpu_us() const { return n ? cpu * 1e6 / n : 0; }
};

// dequeue_array of 500 until n messages came out, each call its own transaction; checks the
// order of every message (priority then msgid for a priority queue, msgid for the enq_time
// queue: the batches were enqueued one after another, so enq_time order is msgid order).
OrderRun drain_in_order(const std::string& stmt, long n, bool by_priority) {
    OrderRun r;
    long prev_priority = -1, prev_msgid = -1;
    double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
    auto t0 = Clock::now();
    while (r.n < n) {
        PGresult* res = PQexecPrepared(conn, stmt.c_str(), 0, nullptr, nullptr, nullptr, 0);
        if (!result_ok(res)) die("execution of prepared statement " + stmt + " failed", res);
        int rows = PQntuples(res);
        if (rows <= 0) die(stmt + " returned no rows after " + std::to_string(r.n) + " of " + std::to_string(n));
        for (int k = 0; k < rows; k++) {
            long msgid = std::atol(PQgetvalue(res, k, 0));
            long priority = std::atol(PQgetvalue(res, k, 2));
            if (by_priority && priority < prev_priority)
                r.priority_violations++;
            else if ((!by_priority || priority == prev_priority) && msgid < prev_msgid)
                r.fifo_violations++;
            prev_priority = priority;
            prev_msgid = msgid;
        }
        PQclear(res);
        r.n += rows;
    }
    r.seconds = seconds_since(t0);
    r.cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    return r;
}

void priority_order_test() {
    const long n = quick ? 20000 : 100000;
    const long batch = 10000;
    const int reps = quick ? 5 : 3;  // short runs at 20,000: more of them
    const std::string nn = with_commas(n);
    struct Side {
        const char* label;
        std::string table, queue, sort_list;
        bool by_priority;
        std::vector<OrderRun> runs;
    };
    Side sides[2] = {
        {"sort_list 'priority,enq_time'", "aq_bench_prio_qt", "aq_bench_prio_q", "priority,enq_time", true, {}},
        {"sort_list 'enq_time'", "aq_bench_fifo_qt", "aq_bench_fifo_q", "enq_time", false, {}},
    };
    auto priority_of = [](long i) { return 1 + (i * 7919) % 10; };
    std::vector<Batch> batches;  // the same messages and properties for both queues
    for (long from = 1; from <= n; from += batch)
        batches.push_back(make_batch(from, std::min(n, from + batch - 1),
                                     [&](long i) { return properties_literal(priority_of(i)); }));
    for (auto& s : sides) {
        create_extra_queue(s.table, s.queue, s.sort_list);
        prepare_enqueue_with_properties("enq_props_" + s.table, s.queue);
        prepare("deq_arr_" + s.table, "SELECT msgid, payload, (message_properties).priority FROM aq.dequeue_array('" +
                                          s.queue + "', NULL::aq_bench.bench_ot, " + std::to_string(dequeue_batch) +
                                          ", aq.dequeue_options(wait => '0'))");
    }
    auto fill_side = [&](const Side& s) {
        fresh("aq_bench." + s.table);
        for (auto& b : batches) enqueue_batch("enq_props_" + s.table, b);
        expect_rows("aq_bench." + s.table, n, "priority test fill");
        exec("VACUUM ANALYZE aq_bench." + s.table);
        settle();
    };
    // Untimed warm-up: one fill and drain of each.
    for (auto& s : sides) {
        progress("priority order: warm-up " + s.sort_list + " (untimed)");
        fill_side(s);
        drain_in_order("deq_arr_" + s.table, n, s.by_priority);
    }
    // Interleaved: priority, enq_time, enq_time, priority, priority, enq_time ...
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            Side& s = sides[(r % 2 == 0) ? k : 1 - k];
            progress("priority order: run " + std::to_string(r + 1) + "/" + std::to_string(reps) + ", " +
                     s.sort_list + ", dequeue_array of " + std::to_string(dequeue_batch) + " until empty");
            fill_side(s);
            s.runs.push_back(drain_in_order("deq_arr_" + s.table, n, s.by_priority));
            expect_rows("aq_bench." + s.table, 0, "priority test drain");
        }

    std::printf("\n== Priority order: %s messages (composite payload), priority = 1 + (i*7919) %% 10 (1..10, mixed)%s\n",
                nn.c_str(), quick ? "  (--quick: 20,000 messages; the target is stated for 100,000)" : "");
    std::printf("   enqueued with enqueue_array in batches of %s with a message_properties array, then\n"
                "   VACUUM ANALYZE; dequeued with dequeue_array of %d until empty, a commit each; the same\n"
                "   messages and properties in both queue tables; %d interleaved runs, median reported.\n",
                with_commas(batch).c_str(), dequeue_batch, reps);
    std::printf("  %-36s %10s %8s  %-30s %10s %10s\n", "", "msg/s", "cpu us", "all runs (msg/s)", "prio viol.",
                "fifo viol.");
    double med_rate[2], med_cpu[2];
    for (int k = 0; k < 2; k++) {
        Side& s = sides[k];
        std::vector<double> rates, cpus;
        std::string all;
        long pv = 0, fv = 0;
        for (auto& r : s.runs) {
            rates.push_back(r.rate());
            cpus.push_back(r.cpu_us());
            all += (all.empty() ? "" : " ") + with_commas(r.rate());
            pv += r.priority_violations;
            fv += r.fifo_violations;
        }
        med_rate[k] = median_of(rates);
        med_cpu[k] = median_of(cpus);
        std::printf("  %-36s %10s %8s  %-30s %10s %10s\n", s.label, with_commas(med_rate[k]).c_str(),
                    have_server_cpu ? fmt("%.1f", med_cpu[k]).c_str() : "n/a", all.c_str(),
                    s.by_priority ? std::to_string(pv).c_str() : "-", std::to_string(fv).c_str());
        if (pv)
            correctness_error(s.sort_list + " queue: " + std::to_string(pv) +
                              " messages came out before a message of higher priority (lower number)");
        if (fv)
            correctness_error(s.sort_list + " queue: " + std::to_string(fv) +
                              " messages came out before an earlier message of the same priority");
    }
    double r = med_rate[1] > 0 ? med_rate[0] / med_rate[1] : 0;
    bool pass = r >= 2.0 / 3.0;
    std::string cpu = have_server_cpu && med_cpu[0] > 0 ? "  [CPU/msg ratio " + ratio(med_cpu[1] / med_cpu[0]) + "]" : "";
    std::printf("  target: priority order msg/s >= 2/3 of enq_time order: %s / %s = %s >= 0.67x   %s%s\n",
                with_commas(med_rate[0]).c_str(), with_commas(med_rate[1]).c_str(), ratio(r).c_str(),
                pass ? "PASS" : "FAIL", cpu.c_str());
    if (!pass) failures.push_back("priority order dequeue / enq_time order dequeue >= 0.67x : " + ratio(r));
    std::fflush(stdout);
}

// ---- 3. selective dequeue by correlation

struct CallTimes {
    std::vector<double> ms;
    double cpu = 0;  // server + client CPU seconds over all calls
    double mean() const {
        double t = 0;
        for (double v : ms) t += v;
        return ms.empty() ? 0 : t / ms.size();
    }
    double percentile(double p) const {  // nearest rank
        if (ms.empty()) return 0;
        std::vector<double> v = ms;
        std::sort(v.begin(), v.end());
        long rank = static_cast<long>(std::ceil(p / 100.0 * v.size()));
        return v[std::max(0L, std::min<long>(rank - 1, v.size() - 1))];
    }
    double cpu_us() const { return ms.empty() ? 0 : cpu * 1e6 / ms.size(); }
};

std::string correlation_of(long i) { return "order-" + std::to_string(i); }

// One aq.dequeue per pattern, autocommit; each must return exactly one message whose
// correlation check(pattern, correlation) accepts.
CallTimes dequeue_each(const std::string& stmt, const std::vector<std::string>& patterns,
                       const std::function<bool(const std::string&, const std::string&)>& check) {
    CallTimes t;
    t.ms.reserve(patterns.size());
    double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
    for (auto& pat : patterns) {
        const char* param = pat.c_str();
        auto t0 = Clock::now();
        PGresult* res = PQexecPrepared(conn, stmt.c_str(), 1, &param, nullptr, nullptr, 0);
        double ms = seconds_since(t0) * 1e3;
        if (!result_ok(res)) die("aq.dequeue with correlation => '" + pat + "' failed", res);
        if (PQntuples(res) != 1)
            correctness_error("aq.dequeue with correlation => '" + pat + "' returned " +
                              std::to_string(PQntuples(res)) + " rows");
        else if (!check(pat, PQgetvalue(res, 0, 1)))
            correctness_error("aq.dequeue with correlation => '" + pat + "' returned correlation '" +
                              PQgetvalue(res, 0, 1) + "'");
        PQclear(res);
        t.ms.push_back(ms);
    }
    t.cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    return t;
}

void correlation_test() {
    const long n = quick ? 200000 : 1000000;
    const long batch = 10000;
    const long calls = 1000;
    const std::string table = "aq_bench_corr_qt", queue = "aq_bench_corr_q";
    create_extra_queue(table, queue, "enq_time");
    prepare_enqueue_with_properties("enq_props_corr", queue);
    prepare("deq_corr", "SELECT msgid, (message_properties).correlation FROM aq.dequeue('" + queue +
                            "', NULL::aq_bench.bench_ot, aq.dequeue_options(wait => '0', correlation => $1))");

    // Fill: 'order-<i>' for message i, so every correlation is unique.
    progress("correlation: enqueue " + with_commas(n) + " messages with enqueue_array in batches of " +
             with_commas(batch));
    double enqueue_s = 0;
    auto fill_t0 = Clock::now();
    for (long from = 1; from <= n; from += batch) {
        Batch b = make_batch(from, std::min(n, from + batch - 1),
                             [](long i) { return properties_literal(1, correlation_of(i)); });
        enqueue_s += enqueue_batch("enq_props_corr", b);
    }
    double fill_s = seconds_since(fill_t0);
    expect_rows("aq_bench." + table, n, "correlation fill");
    progress("correlation: VACUUM ANALYZE");
    auto va_t0 = Clock::now();
    exec("VACUUM ANALYZE aq_bench." + table);
    double analyze_s = seconds_since(va_t0);
    settle();

    // Exact values: distinct random messages across the whole queue, with the 10 newest
    // (the tail) among them, in random order. Prefix patterns 'order-<m>%' with m a random
    // 5-digit number such that order-m0..order-m9 exist too (m <= (n - 9) / 10): each pattern
    // matches 11 messages (order-m, order-m0 .. order-m9), and the call must return the oldest,
    // order-m (m is never one of the exact values, so it is still there).
    std::mt19937_64 rng(20240501);
    std::vector<char> taken(n + 1, 0);
    std::vector<long> ids;
    for (long i = n - 9; i <= n; i++) {
        ids.push_back(i);
        taken[i] = 1;
    }
    std::uniform_int_distribution<long> pick(1, n);
    while (static_cast<long>(ids.size()) < calls + 5) {  // 5 for the warm-up
        long i = pick(rng);
        if (taken[i]) continue;
        taken[i] = 1;
        ids.push_back(i);
    }
    std::shuffle(ids.begin(), ids.end(), rng);
    std::vector<std::string> warm, exact, prefixes;
    for (std::size_t k = 0; k < ids.size(); k++) (k < 5 ? warm : exact).push_back(correlation_of(ids[k]));
    const long m_lo = 10000, m_hi = std::min(99999L, (n - 9) / 10);
    std::vector<long> ms;
    for (long m = m_lo; m <= m_hi; m++)
        if (!taken[m]) ms.push_back(m);
    std::shuffle(ms.begin(), ms.end(), rng);
    if (static_cast<long>(ms.size()) < calls) die("correlation test: queue too small for the prefix patterns");
    for (long k = 0; k < calls; k++) prefixes.push_back(correlation_of(ms[k]) + "%");
    auto same = [](const std::string& pat, const std::string& c) { return pat == c; };
    auto oldest_match = [](const std::string& pat, const std::string& c) { return c == pat.substr(0, pat.size() - 1); };
    progress("correlation: " + std::to_string(warm.size()) + " warm-up dequeues (untimed)");
    dequeue_each("deq_corr", warm, same);
    progress("correlation: " + with_commas(calls) + " dequeues with an exact correlation, autocommit");
    CallTimes t_exact = dequeue_each("deq_corr", exact, same);
    progress("correlation: " + with_commas(calls) + " dequeues with a prefix pattern, autocommit");
    CallTimes t_prefix = dequeue_each("deq_corr", prefixes, oldest_match);
    expect_rows("aq_bench." + table, n - static_cast<long>(warm.size() + exact.size() + prefixes.size()),
                "correlation dequeues");

    std::printf("\n== Selective dequeue by correlation: a queue of %s messages%s\n", with_commas(n).c_str(),
                quick ? "  (--quick: 200,000 messages; the target is stated for 1,000,000)" : "");
    std::printf("   correlation 'order-<i>' for message i (each unique); enqueued with enqueue_array in batches of\n"
                "   %s with a message_properties array: %.1f s in enqueue_array (%s msg/s), %.1f s with\n"
                "   building the literals in the client; VACUUM ANALYZE %.1f s.\n"
                "   Then single aq.dequeue(..., aq.dequeue_options(wait => '0', correlation => $1)) calls, remove\n"
                "   mode, autocommit (a transaction each), on messages at random positions including the 10 newest;\n"
                "   %zu untimed warm-up calls first. Wall clock per call, client side.\n",
                with_commas(batch).c_str(), enqueue_s, with_commas(n / enqueue_s).c_str(), fill_s, analyze_s,
                warm.size());
    std::printf("  %-46s %6s %8s %8s %8s %8s %8s\n", "", "calls", "mean ms", "p50 ms", "p99 ms", "max ms", "cpu us");
    auto line = [&](const char* label, const CallTimes& t) {
        std::printf("  %-46s %6zu %8.3f %8.3f %8.3f %8.3f %8s\n", label, t.ms.size(), t.mean(), t.percentile(50),
                    t.percentile(99), t.percentile(100), have_server_cpu ? fmt("%.0f", t.cpu_us()).c_str() : "n/a");
    };
    line("exact value      correlation => 'order-<i>'", t_exact);
    line("prefix pattern   correlation => 'order-<m>%'", t_prefix);
    std::printf("  (prefix: m a random 5-digit number <= %s; each pattern matches 11 messages, order-m and\n"
                "   order-m0..order-m9, and the call returns the oldest, order-m.)\n",
                with_commas(m_hi).c_str());
    auto target = [&](const char* label, const CallTimes& t) {
        bool pass = t.mean() < 1.0;
        std::printf("  target: %-36s mean %.3f ms < 1 ms per call (%s of the target)   %s\n", label, t.mean(),
                    ratio(t.mean() / 1.0).c_str(), pass ? "PASS" : "FAIL");
        if (!pass)
            failures.push_back(std::string("correlation dequeue, ") + label + ": mean " + fmt("%.3f", t.mean()) +
                               " ms >= 1 ms");
    };
    target("exact correlation, autocommit:", t_exact);
    target("prefix pattern, autocommit:", t_prefix);
    std::fflush(stdout);
}

// ---- 4. dequeue with a condition (deq_condition)

// A queue of n messages (aq_bench.order_ot: id, amount) of which 1 % match the condition
// tab.user_data.amount > 999, spread evenly (every 100th); single aq.dequeue calls with that
// condition, autocommit, first without an index for it, then with a partial index in the queue's
// order whose predicate the condition implies.  Each call must return a matching message, the
// matching messages in their order (msgid ascending).
void condition_test() {
    const long n = quick ? 200000 : 1000000;
    const long batch = 10000;
    const long calls_without = quick ? 50 : 200, calls_with = 1000;
    const std::string table = "aq_bench_cond_qt", queue = "aq_bench_cond_q";
    exec("CREATE TYPE aq_bench.order_ot AS (id bigint, amount integer)");
    exec("SELECT aq.create_queue_table('" + table + "', 'aq_bench.order_ot', queue_table_schema => 'aq_bench')");
    exec("SELECT aq.create_queue('" + queue + "', '" + table + "')");
    exec("SELECT aq.start_queue('" + queue + "')");
    exec("ALTER TABLE aq_bench." + table + " SET (autovacuum_enabled = off)");
    extra_queue_tables.push_back(table);
    prepare("enq_cond", "SELECT cardinality(aq.enqueue_array('" + queue + "', $1::aq_bench.order_ot[]))");
    prepare("deq_cond", "SELECT msgid, (payload).amount FROM aq.dequeue('" + queue +
                            "', NULL::aq_bench.order_ot, aq.dequeue_options(wait => '0',"
                            " deq_condition => 'tab.user_data.amount > 999'))");

    progress("condition: enqueue " + with_commas(n) + " messages (1 % matching) in batches of " + with_commas(batch));
    auto fill_t0 = Clock::now();
    for (long from = 1; from <= n; from += batch) {
        std::string arr = "{";
        for (long i = from; i <= std::min(n, from + batch - 1); i++) {
            if (i > from) arr += ',';
            arr += "\"(" + std::to_string(i) + "," + std::to_string(i % 100 == 0 ? 1000 + i % 7 : i % 1000 % 990) + ")\"";
        }
        arr += '}';
        long got = run_prepared_long("enq_cond", {arr.c_str()});
        if (got != std::min(batch, n - from + 1)) die("condition fill: enqueue_array returned " + std::to_string(got));
    }
    double fill_s = seconds_since(fill_t0);
    expect_rows("aq_bench." + table, n, "condition fill");
    exec("VACUUM ANALYZE aq_bench." + table);
    settle();

    long prev_msgid = 0;
    auto run = [&](long calls) {
        CallTimes t;
        double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
        for (long k = 0; k < calls; k++) {
            auto t0 = Clock::now();
            PGresult* res = PQexecPrepared(conn, "deq_cond", 0, nullptr, nullptr, nullptr, 0);
            t.ms.push_back(seconds_since(t0) * 1e3);
            if (!result_ok(res)) die("aq.dequeue with deq_condition failed", res);
            if (PQntuples(res) != 1) {
                correctness_error("aq.dequeue with deq_condition returned " + std::to_string(PQntuples(res)) + " rows");
            } else {
                long msgid = std::atol(PQgetvalue(res, 0, 0));
                if (std::atol(PQgetvalue(res, 0, 1)) <= 999)
                    correctness_error(std::string("aq.dequeue with deq_condition returned amount ") + PQgetvalue(res, 0, 1));
                if (msgid <= prev_msgid) correctness_error("aq.dequeue with deq_condition: messages out of order");
                prev_msgid = msgid;
            }
            PQclear(res);
        }
        t.cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
        return t;
    };
    progress("condition: " + with_commas(calls_without) + " dequeues without an index for the condition");
    CallTimes t_without = run(calls_without);
    exec("CREATE INDEX ON aq_bench." + table + " (q_id, enq_time, msgid) WHERE (user_data).amount > 999");
    exec("ANALYZE aq_bench." + table);
    run(5);  // warm-up: the statement is planned again for the new index
    progress("condition: " + with_commas(calls_with) + " dequeues with a partial index in the queue's order");
    CallTimes t_with = run(calls_with);
    expect_rows("aq_bench." + table, n - calls_without - 5 - calls_with, "condition dequeues");

    std::printf("\n== Dequeue with a condition: a queue of %s messages, 1 %% of them matching%s\n", with_commas(n).c_str(),
                quick ? "  (--quick: 200,000 messages; the target is stated for 1,000,000)" : "");
    std::printf("   payload aq_bench.order_ot (id, amount); every 100th message has amount > 999 (filled in %.1f s).\n"
                "   Single aq.dequeue(..., aq.dequeue_options(wait => '0', deq_condition =>\n"
                "   'tab.user_data.amount > 999')) calls, remove mode, autocommit; first without an index for the\n"
                "   condition (the dequeue walks the queue's order index and skips what does not match: each call\n"
                "   walks the non-matching messages before the next match, more as the matched ones go), then with\n"
                "   CREATE INDEX ON <queue table> (q_id, enq_time, msgid) WHERE (user_data).amount > 999.\n",
                fill_s);
    std::printf("  %-46s %6s %8s %8s %8s %8s %8s\n", "", "calls", "mean ms", "p50 ms", "p99 ms", "max ms", "cpu us");
    auto line = [&](const char* label, const CallTimes& t) {
        std::printf("  %-46s %6zu %8.3f %8.3f %8.3f %8.3f %8s\n", label, t.ms.size(), t.mean(), t.percentile(50),
                    t.percentile(99), t.percentile(100), have_server_cpu ? fmt("%.0f", t.cpu_us()).c_str() : "n/a");
    };
    line("without an index for the condition", t_without);
    line("with a partial index in the queue's order", t_with);
    std::printf("  without / with the index, mean per call: %s\n", ratio(t_without.mean() / t_with.mean()).c_str());
    bool pass = t_with.mean() < 2.0;
    std::printf("  target: condition matching 1 %%, with its index:   mean %.3f ms < 2 ms per call (%s of the target)   %s\n",
                t_with.mean(), ratio(t_with.mean() / 2.0).c_str(), pass ? "PASS" : "FAIL");
    if (!pass) failures.push_back("dequeue with a condition, with its index: mean " + fmt("%.3f", t_with.mean()) + " ms >= 2 ms");
    std::fflush(stdout);
}

// ---- 5. LISTEN on 10 queues: the wake-up latency

// A second connection (a thread of its own) runs aq.listen on 10 queues, wait 30 s, and then
// dequeues the message it was woken for.  This connection waits until the listener's backend is
// asleep (pg_stat_activity: wait_event_type 'Extension'), enqueues one message into one of the 10
// (in turn) in autocommit, and notes when that call returned, i.e. the commit was done.  The
// latency is from there to the return of aq.listen in the other thread (steady_clock, one
// process; a listener woken before the producer's client saw its commit counts as 0).
void listen_test(const std::string& conninfo) {
    const int queues = 10;
    const long rounds = quick ? 100 : 1000;
    exec("SELECT aq.create_queue_table('aq_bench_listen_qt', 'text', queue_table_schema => 'aq_bench')");
    extra_queue_tables.push_back("aq_bench_listen_qt");
    for (int i = 1; i <= queues; i++) {
        exec("SELECT aq.create_queue('aq_bench_listen_q" + std::to_string(i) + "', 'aq_bench_listen_qt')");
        exec("SELECT aq.start_queue('aq_bench_listen_q" + std::to_string(i) + "')");
    }
    PGconn* lc = PQconnectdb(conninfo.c_str());
    if (PQstatus(lc) != CONNECTION_OK) die("listen test: second connection failed");
    PGresult* pr = PQexec(lc, "SELECT pg_backend_pid()");
    if (!result_ok(pr)) die("listen test: pg_backend_pid failed", pr);
    std::string listener_pid = PQgetvalue(pr, 0, 0);
    PQclear(pr);
    prepare("listen_asleep", "SELECT count(*) FROM pg_stat_activity WHERE pid = " + listener_pid +
                                 " AND state = 'active' AND wait_event_type = 'Extension' AND query LIKE '%aq.listen(%'");
    prepare("listen_enq", "SELECT aq.enqueue('aq_bench_listen_q' || $1, 'm'::text)");

    std::atomic<long> woken{0};         // rounds the listener has completed
    std::atomic<bool> failed{false};
    std::vector<Clock::time_point> wake_at(rounds), commit_at(rounds);
    std::vector<std::string> woken_for(rounds);
    std::thread listener([&] {
        std::string agents = "ARRAY[";
        for (int i = 1; i <= queues; i++)
            agents += std::string(i > 1 ? ", " : "") + "aq.agent(address => 'aq_bench_listen_q" + std::to_string(i) + "')";
        agents += "]";
        std::string listen_sql = "SELECT (aq.listen(" + agents + ", '30 s')).address";
        for (long k = 0; k < rounds && !failed; k++) {
            PGresult* r = PQexec(lc, listen_sql.c_str());
            wake_at[k] = Clock::now();
            if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
                std::fprintf(stderr, "queue-bench: aq.listen failed: %s\n", PQerrorMessage(lc));
                failed = true;
                PQclear(r);
                break;
            }
            woken_for[k] = PQgetvalue(r, 0, 0);
            PQclear(r);
            std::string deq = "SELECT payload FROM aq.dequeue('" + woken_for[k] + "', NULL::text, aq.dequeue_options(wait => '0'))";
            r = PQexec(lc, deq.c_str());
            if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) failed = true;
            PQclear(r);
            woken = k + 1;
        }
    });
    progress("listen: " + with_commas(rounds) + " wake-ups of aq.listen on " + std::to_string(queues) + " queues");
    for (long k = 0; k < rounds && !failed; k++) {
        auto t0 = Clock::now();
        while (run_prepared_long("listen_asleep", {}) != 1) {
            if (failed || seconds_since(t0) > 30) die("listen test: the listener does not sleep");
            usleep(200);
        }
        std::string queue = std::to_string(k % queues + 1);
        if (run_prepared_long("listen_enq", {queue.c_str()}) <= 0) die("listen test: enqueue failed");
        commit_at[k] = Clock::now();
        while (woken.load() <= k && !failed) {
            if (seconds_since(commit_at[k]) > 30) die("listen test: the listener was not woken");
            usleep(50);
        }
        if (woken_for[k] != "aq_bench_listen_q" + queue)
            correctness_error("aq.listen returned " + woken_for[k] + " for an enqueue into aq_bench_listen_q" + queue);
    }
    listener.join();
    PQfinish(lc);
    if (failed) die("listen test: the listener failed");
    CallTimes t;
    for (long k = 0; k < rounds; k++)
        t.ms.push_back(std::max(0.0, std::chrono::duration<double>(wake_at[k] - commit_at[k]).count() * 1e3));
    std::printf("\n== LISTEN on %d queues: wake-up latency after the enqueue's commit\n", queues);
    std::printf("   aq.listen(<10 agents>, '30 s') in a second connection, asleep before each enqueue; one enqueue\n"
                "   (autocommit) into each queue in turn; from the return of the enqueue call to the return of\n"
                "   aq.listen, steady_clock in one process. %s rounds.\n", with_commas(rounds).c_str());
    std::printf("  %-46s %6s %8s %8s %8s %8s\n", "", "rounds", "mean ms", "p50 ms", "p99 ms", "max ms");
    std::printf("  %-46s %6zu %8.3f %8.3f %8.3f %8.3f\n", "wake-up latency", t.ms.size(), t.mean(), t.percentile(50),
                t.percentile(99), t.percentile(100));
    bool pass = t.percentile(99) < 5.0;
    std::printf("  target: p99 %.3f ms < 5 ms (%s of the target)   %s\n", t.percentile(99),
                ratio(t.percentile(99) / 5.0).c_str(), pass ? "PASS" : "FAIL");
    if (!pass) failures.push_back("LISTEN wake-up latency: p99 " + fmt("%.3f", t.percentile(99)) + " ms >= 5 ms");
    std::fflush(stdout);
}

// ---- 6. fan-out: one queue, 1 to 50 subscribers, aq (classic and stored once) and PgQ

// n messages (composite payload) enqueued in transactions of 100 (one aq.enqueue_array of 100
// per call, autocommit) into a single-consumer queue and into multi-consumer queues of 1, 2, 5,
// 10 and 50 subscribers (no rules); then dequeued with aq.dequeue_array of 500 per call, a commit
// each: the single-consumer queue by one consumer, a multi-consumer queue by each of its
// subscribers in turn, one array each per round, until every subscriber has all n.  Each
// subscriber must receive every message once, in msgid order, and the queue table and its
// delivery table must be empty at the end.
//
// aq stored once beside it, when the server's aq makes multi-consumer rings (aq.queue_segments has
// receipts): for each subscriber count k, the same enqueues and dequeues on a queue table made
// with multiple_consumers and 4 segments, which stores each message once (not once per subscriber) and
// writes a receipt per dequeue (the runs of msgids it took).  A dequeue deletes nothing there, so
// instead of empty tables the end state must be n messages (read through the parent) and n * k
// messages taken in the receipts.
// Its ratios are marked against the same targets as aq's.
//
// PgQ beside it, when the server has the pgq extension: for each subscriber count k, a PgQ queue
// with k registered consumers gets the same n events (the payload's text form) in transactions of
// 100 (SELECT count(pgq.insert_event(q, 'msg', p)) FROM unnest($1::text[]) p), with a
// pgq.ticker(q) call after every 5 of them (ticker_max_count 500, ticker_max_lag 0: batches of
// 500 events) and one forced tick at the end (pgq.force_tick + pgq.ticker); then each consumer
// in turn runs BEGIN; pgq.next_batch; pgq.get_batch_events; pgq.finish_batch; COMMIT until each
// has all n events, each exactly once, in ev_id order.  See tools/aq-bench/pgq.md.
constexpr long fanout_enqueue_batch = 100;  // messages per enqueue transaction
constexpr int fanout_pgq_ticks_every = 5;   // PgQ: a pgq.ticker() call after every 5 enqueue transactions
constexpr int fanout_counts[] = {1, 2, 5, 10, 50};
constexpr int fanout_once_segments = 4;     // aq stored once: segments of the ring

struct FanOut {
    bool pgq = false;
    bool once = false;    // aq's stored-once queue table
    int subscribers = 0;  // 0: aq's single-consumer queue
    double enq_s = 0, enq_cpu = 0, deq_s = 0, deq_cpu = 0;
    long batches = 0;  // PgQ: batches with events, all consumers together
};

// The payloads 1..n as array literals of fanout_enqueue_batch elements each (built untimed).
std::vector<std::string> fanout_arrays(const Payload& p, long n) {
    std::vector<std::string> arrays;
    for (long from = 1; from <= n; from += fanout_enqueue_batch) {
        std::vector<std::string> slice;
        for (long i = from; i <= std::min<long>(n, from + fanout_enqueue_batch - 1); i++) slice.push_back(p.make(i));
        arrays.push_back(array_literal(slice, static_cast<long>(slice.size())));
    }
    return arrays;
}

// once: the stored-once queue table (create_stored_once_queue) instead of create_queue_table's;
// its subscribers are 1 or more.
FanOut fanout_run(const Payload& p, long n, int subscribers, bool once = false) {
    const std::string tag = (once ? "once" : "") + std::to_string(subscribers);
    const std::string table = "aq_bench_fan" + tag + "_qt";
    const std::string queue = "aq_bench_fan" + tag + "_q";
    StoredOnceTables ring;
    if (once)
        ring = create_stored_once_queue(table, queue, fanout_once_segments);
    else
        create_extra_queue(table, queue, "enq_time", subscribers ? ", multiple_consumers => true" : "");
    // Stored once: every receipts table counted in one statement.
    std::string count_receipts = "SELECT 0";
    // A receipt holds the runs [lo, hi] of msgids one dequeue took: the messages taken are the runs' lengths.
    for (auto& r : ring.receipts)
        count_receipts += " + (SELECT coalesce(sum(x.runs[2 * i] - x.runs[2 * i - 1] + 1), 0) FROM " + r +
                          " x, generate_series(1, cardinality(x.runs) / 2) i)";
    // Stored once: a wrong count is reported as a correctness error (not die()), so that the run
    // goes on and the table still shows what the in-development table did.
    auto expect_once = [&](const std::string& what, const std::string& sql, long want) {
        long got = std::atol(scalar(sql).c_str());
        if (got != want)
            correctness_error("fan-out, aq stored once, " + std::to_string(subscribers) + " subscriber(s): " + what + " " +
                              std::to_string(got) + ", expected " + std::to_string(want));
    };
    std::string deliveries;
    if (subscribers && !once) {
        deliveries = scalar("SELECT delivery_relid::regclass FROM aq.queue_tables WHERE table_schema = 'aq_bench'"
                            " AND queue_table = '" + table + "'");
        exec("ALTER TABLE " + deliveries + " SET (autovacuum_enabled = off)");
    }
    for (int k = 1; k <= subscribers; k++)
        exec("SELECT aq.add_subscriber('" + queue + "', aq.agent('S" + std::to_string(k) + "'))");
    const std::string enq = "fan_enq" + tag;
    prepare(enq, "SELECT cardinality(aq.enqueue_array('" + queue + "', $1::aq_bench.bench_ot[]))");
    std::vector<std::string> arrays = fanout_arrays(p, n);
    settle();
    FanOut f;
    f.once = once;
    f.subscribers = subscribers;
    double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
    auto t0 = Clock::now();
    for (auto& a : arrays)
        if (run_prepared_long(enq, {a.c_str()}) <= 0) die("fan-out: enqueue_array returned no msgids");
    f.enq_s = seconds_since(t0);
    f.enq_cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    if (once) {
        expect_once("messages after the enqueue", "SELECT count(*) FROM aq_bench." + table, n);
        expect_once("receipts after the enqueue", count_receipts, 0);
        // VACUUM and ANALYZE of an inheritance parent do not reach its children: each by name.
        std::string all = "aq_bench." + table;
        for (auto& t : ring.segments) all += ", " + t;
        for (auto& t : ring.receipts) all += ", " + t;
        exec("VACUUM ANALYZE " + all);
    } else {
        expect_rows("aq_bench." + table, n, "fan-out enqueue");
        if (subscribers) expect_rows(deliveries, n * subscribers, "fan-out enqueue (deliveries)");
        exec("VACUUM ANALYZE aq_bench." + table);
        if (subscribers) exec("VACUUM ANALYZE " + deliveries);
    }
    settle();

    int consumers = std::max(subscribers, 1);
    std::vector<std::string> stmts;
    for (int k = 1; k <= consumers; k++) {
        stmts.push_back("fan_deq" + tag + "_" + std::to_string(k));
        prepare(stmts.back(), "SELECT msgid FROM aq.dequeue_array('" + queue + "', NULL::aq_bench.bench_ot, " +
                                  std::to_string(dequeue_batch) + ", aq.dequeue_options(wait => '0'" +
                                  (subscribers ? ", consumer_name => 'S" + std::to_string(k) + "'" : std::string()) +
                                  "))");
    }
    std::vector<long> got(consumers, 0), last(consumers, 0);
    s0 = server_cpu_seconds();
    c0 = client_cpu_seconds();
    t0 = Clock::now();
    for (bool more = true; more;) {
        more = false;
        for (int k = 0; k < consumers; k++) {
            if (got[k] == n) continue;
            PGresult* r = PQexecPrepared(conn, stmts[k].c_str(), 0, nullptr, nullptr, nullptr, 0);
            if (!result_ok(r)) die("fan-out: dequeue_array failed", r);
            int rows = PQntuples(r);
            if (rows == 0) correctness_error("fan-out: consumer " + std::to_string(k + 1) + " got nothing after " +
                                             std::to_string(got[k]) + " of " + std::to_string(n));
            for (int i = 0; i < rows; i++) {
                long id = std::atol(PQgetvalue(r, i, 0));
                if (id <= last[k]) correctness_error("fan-out: a consumer received msgids out of order or twice");
                last[k] = id;
            }
            PQclear(r);
            got[k] += rows;
            if (rows == 0) got[k] = n;  // reported above; stop asking
            more = more || got[k] < n;
        }
    }
    f.deq_s = seconds_since(t0);
    f.deq_cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    if (once) {
        // Nothing deleted: every message is still there, taken once by each subscriber.
        expect_once("messages after the drain", "SELECT count(*) FROM aq_bench." + table, n);
        expect_once("receipts after the drain", count_receipts, n * subscribers);
    } else {
        expect_rows("aq_bench." + table, 0, "fan-out dequeue");
        if (subscribers) expect_rows(deliveries, 0, "fan-out dequeue (deliveries)");
    }
    return f;
}

const std::string pgq_fanout_prefix = "aq_bench_pgq_fan";

void pgq_drop_fanout_queues() {
    exec("SELECT pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE left(queue_name, " +
         std::to_string(pgq_fanout_prefix.size()) + ") = '" + pgq_fanout_prefix + "'");
}

// The PgQ run for `subscribers` registered consumers (see above); drops its queue at the end.
FanOut pgq_fanout_run(const Payload& p, long n, int subscribers) {
    const std::string queue = pgq_fanout_prefix + std::to_string(subscribers);
    const std::string ql = "'" + queue + "'";
    exec("SELECT pgq.drop_queue(queue_name, true) FROM pgq.queue WHERE queue_name = " + ql);
    exec("SELECT pgq.create_queue(" + ql + ")");
    exec("SELECT pgq.set_queue_config(" + ql + ", 'ticker_max_count', '" +
         std::to_string(fanout_enqueue_batch * fanout_pgq_ticks_every) + "')");
    exec("SELECT pgq.set_queue_config(" + ql + ", 'ticker_max_lag', '0')");
    exec("SELECT pgq.set_queue_config(" + ql + ", 'ticker_idle_period', '100 ms')");
    for (int k = 1; k <= subscribers; k++) exec("SELECT pgq.register_consumer(" + ql + ", 'C" + std::to_string(k) + "')");
    const std::string events = scalar("SELECT queue_data_pfx FROM pgq.queue WHERE queue_name = " + ql);
    const std::string tag = std::to_string(subscribers);
    const std::string enq = "pgq_fan_enq" + tag, tick = "pgq_fan_tick" + tag;
    prepare(enq, "SELECT count(pgq.insert_event(" + ql + ", 'msg', p)) FROM unnest($1::text[]) p");
    prepare(tick, "SELECT pgq.ticker(" + ql + ")");
    std::vector<std::string> arrays = fanout_arrays(p, n);
    settle();
    FanOut f;
    f.pgq = true;
    f.subscribers = subscribers;
    double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
    auto t0 = Clock::now();
    long sent = 0;
    for (std::size_t i = 0; i < arrays.size(); i++) {
        long got = run_prepared_long(enq, {arrays[i].c_str()});
        long want = std::min<long>(fanout_enqueue_batch, n - sent);
        if (got != want) die("fan-out: pgq.insert_event inserted " + std::to_string(got) + " events, expected " +
                             std::to_string(want));
        sent += got;
        if ((i + 1) % fanout_pgq_ticks_every == 0) run_prepared(tick, {});
    }
    // The final tick: pgq.force_tick moves the event sequence so that pgq.ticker ticks whatever
    // the settings (an empty last batch when the loop has just ticked).
    exec("SELECT pgq.force_tick(" + ql + ")");
    run_prepared(tick, {});
    f.enq_s = seconds_since(t0);
    f.enq_cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    expect_rows(events, n, "fan-out PgQ enqueue");
    // Untimed, like aq's VACUUM ANALYZE: PgQ's batch queries join pgq.tick, and statistics from
    // an (almost) empty tick table make them slow (pgq.md, section 5).
    exec("ANALYZE pgq.tick");
    exec("VACUUM ANALYZE " + scalar("SELECT pgq.current_event_table(" + ql + ")"));
    settle();

    std::vector<std::string> next;
    for (int k = 1; k <= subscribers; k++) {
        next.push_back("pgq_fan_next" + tag + "_" + std::to_string(k));
        prepare(next.back(), "SELECT pgq.next_batch(" + ql + ", 'C" + std::to_string(k) + "')");
    }
    const std::string get = "pgq_fan_get" + tag, finish = "pgq_fan_finish" + tag;
    prepare(get, "SELECT ev_id FROM pgq.get_batch_events($1::bigint)");
    prepare(finish, "SELECT pgq.finish_batch($1::bigint)");
    std::vector<long> got(subscribers, 0), last(subscribers, 0);
    s0 = server_cpu_seconds();
    c0 = client_cpu_seconds();
    t0 = Clock::now();
    for (bool more = true; more;) {
        more = false;
        for (int k = 0; k < subscribers; k++) {
            if (got[k] >= n) continue;
            exec("BEGIN");
            PGresult* r = PQexecPrepared(conn, next[k].c_str(), 0, nullptr, nullptr, nullptr, 0);
            if (!result_ok(r)) die("fan-out: pgq.next_batch failed", r);
            std::string batch = PQntuples(r) > 0 && !PQgetisnull(r, 0, 0) ? PQgetvalue(r, 0, 0) : "";
            PQclear(r);
            if (batch.empty()) {
                exec("COMMIT");
                correctness_error("fan-out: PgQ consumer " + std::to_string(k + 1) + " got no batch after " +
                                  std::to_string(got[k]) + " of " + std::to_string(n) + " events");
                got[k] = n;  // stop asking
                continue;
            }
            const char* bp[] = {batch.c_str()};
            r = PQexecPrepared(conn, get.c_str(), 1, bp, nullptr, nullptr, 0);
            if (!result_ok(r)) die("fan-out: pgq.get_batch_events failed", r);
            int rows = PQntuples(r);
            for (int i = 0; i < rows; i++) {
                long id = std::atol(PQgetvalue(r, i, 0));
                if (id <= last[k]) correctness_error("fan-out: a PgQ consumer received ev_ids out of order or twice");
                last[k] = id;
            }
            PQclear(r);
            run_prepared(finish, {batch.c_str()});
            exec("COMMIT");
            got[k] += rows;
            if (rows > 0) f.batches++;
            if (got[k] > n)
                correctness_error("fan-out: PgQ consumer " + std::to_string(k + 1) + " received " +
                                  std::to_string(got[k]) + " events of " + std::to_string(n));
            more = more || got[k] < n;
        }
    }
    f.deq_s = seconds_since(t0);
    f.deq_cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    exec("SELECT pgq.drop_queue(" + ql + ", true)");
    return f;
}

void fanout_test(const Payload& p) {
    const long n = quick ? 20000 : 100000;

    // PgQ beside aq, when the server has it.
    std::string pgq_skipped;
    bool pgq_created = false;
    if (scalar("SELECT count(*) FROM pg_available_extensions WHERE name = 'pgq'") == "0")
        pgq_skipped = "the pgq extension is not available on this server (no row in pg_available_extensions)";
    else if (scalar("SELECT count(*) FROM pg_extension WHERE extname = 'pgq'") == "0") {
        PGresult* r = PQexec(conn, "CREATE EXTENSION pgq");
        if (result_ok(r))
            pgq_created = true;
        else {
            std::string msg = PQresultErrorMessage(r);
            while (!msg.empty() && (msg.back() == '\n' || msg.back() == ' ')) msg.pop_back();
            pgq_skipped = "CREATE EXTENSION pgq failed: " + msg;
        }
        PQclear(r);
    }
    const bool with_pgq = pgq_skipped.empty();
    std::string pgq_version;
    if (with_pgq) {
        pgq_version = scalar("SELECT extversion FROM pg_extension WHERE extname = 'pgq'");
        pgq_drop_fanout_queues();  // from an interrupted earlier run
    }
    // aq stored once beside it, when this aq has it (an older aq.so or extension version has not).
    std::string once_skipped;
    if (scalar("SELECT EXISTS (SELECT FROM pg_catalog.pg_attribute WHERE attrelid = pg_catalog.to_regclass('aq.queue_segments')"
               " AND attname = 'receipts')") != "t")
        once_skipped = "aq " + scalar("SELECT extversion FROM pg_extension WHERE extname = 'aq'") +
                       " makes no multi-consumer ring (multiple_consumers with segments)";
    const bool with_once = once_skipped.empty();

    std::vector<FanOut> runs, once_runs, pgq_runs;
    progress("fan-out: " + with_commas(n) + " messages, aq single-consumer queue");
    runs.push_back(fanout_run(p, n, 0));
    drop_extra_queues();
    for (int subscribers : fanout_counts) {
        progress("fan-out: " + with_commas(n) + " messages, aq, " + std::to_string(subscribers) + " subscriber(s)");
        runs.push_back(fanout_run(p, n, subscribers));
        drop_extra_queues();
        if (with_once) {
            progress("fan-out: " + with_commas(n) + " messages, aq stored once, " + std::to_string(subscribers) +
                     " subscriber(s)");
            once_runs.push_back(fanout_run(p, n, subscribers, true));
            drop_extra_queues();
        }
        if (with_pgq) {
            progress("fan-out: " + with_commas(n) + " events, PgQ, " + std::to_string(subscribers) + " consumer(s)");
            pgq_runs.push_back(pgq_fanout_run(p, n, subscribers));
        }
    }
    if (pgq_created) exec("DROP EXTENSION pgq");

    std::printf("\n== Fan-out: %s messages to 1, 2, 5, 10 and 50 subscribers, aq and PgQ%s\n", with_commas(n).c_str(),
                quick ? "  (--quick: 20,000 messages; the targets are stated for 100,000)" : "");
    std::printf("   payload composite aq_bench.bench_ot; enqueue in transactions of %ld (aq.enqueue_array of %ld per\n"
                "   call, autocommit); aq.dequeue_array of %d per call, a commit each; the subscribers (no rules)\n"
                "   dequeue in turn, one array each per round, until each has every message.  'enqueue us/msg' is\n"
                "   per message enqueued (all its deliveries included), 'dequeue us/msg' per message delivered to\n"
                "   one subscriber.\n",
                fanout_enqueue_batch, fanout_enqueue_batch, dequeue_batch);
    if (with_pgq) {
        double events = 0, batches = 0;
        for (auto& f : pgq_runs) events += static_cast<double>(n) * f.subscribers, batches += f.batches;
        std::printf("   PgQ %s: the same payloads as text, SELECT count(pgq.insert_event(q, 'msg', p)) FROM\n"
                    "   unnest($1::text[]) p per transaction of %ld, pgq.ticker(q) after every %d of them\n"
                    "   (ticker_max_count %ld, ticker_max_lag 0) and a final pgq.force_tick + pgq.ticker, all in the\n"
                    "   enqueue time; k registered consumers, each in turn: BEGIN; pgq.next_batch; pgq.get_batch_events;\n"
                    "   pgq.finish_batch; COMMIT, until each has every event (%s events per batch on average).\n",
                    pgq_version.c_str(), fanout_enqueue_batch, fanout_pgq_ticks_every,
                    fanout_enqueue_batch * fanout_pgq_ticks_every, batches > 0 ? fmt("%.0f", events / batches).c_str() : "n/a");
    } else
        std::printf("   PgQ skipped: %s.\n", pgq_skipped.c_str());
    if (with_once)
        std::printf("   aq once: the same aq calls on a queue table made by aq.create_queue_table(...,\n"
                    "   multiple_consumers => true, segments => %d): each message stored once in a ring of\n"
                    "   %d segments, a receipt per dequeue (the runs of msgids it took); a dequeue deletes nothing, so the\n"
                    "   end state checked is n messages and n x k taken in receipts instead of empty tables.\n",
                    fanout_once_segments, fanout_once_segments);
    else
        std::printf("   aq stored once skipped: %s.\n", once_skipped.c_str());
    std::printf("  %-28s %12s %10s %10s %14s %10s %10s\n", "", "enqueue/s", "us/msg", "cpu us", "per sub deq/s",
                "us/msg", "cpu us");
    auto per = [&](double s, double msgs) { return msgs > 0 ? s * 1e6 / msgs : 0; };
    auto label_of = [](const FanOut& f) {
        if (!f.pgq && f.subscribers == 0) return std::string("aq single-consumer queue");
        const char* what = f.pgq ? " consumer" : " subscriber";
        return std::string(f.pgq ? "PgQ " : f.once ? "aq once " : "aq ") + std::to_string(f.subscribers) + what +
               (f.subscribers > 1 ? "s" : "");
    };
    auto row = [&](const FanOut& f) {
        double deliveries = static_cast<double>(n) * std::max(f.subscribers, 1);
        std::printf("  %-28s %12s %10.2f %10s %14s %10.2f %10s\n", label_of(f).c_str(), with_commas(n / f.enq_s).c_str(),
                    per(f.enq_s, n), have_server_cpu ? fmt("%.2f", per(f.enq_cpu, n)).c_str() : "n/a",
                    with_commas(deliveries / f.deq_s).c_str(), per(f.deq_s, deliveries),
                    have_server_cpu ? fmt("%.2f", per(f.deq_cpu, deliveries)).c_str() : "n/a");
    };
    for (auto& f : runs) row(f);
    for (auto& f : once_runs) row(f);
    for (auto& f : pgq_runs) row(f);

    const FanOut& single = runs[0];
    auto find = [](const std::vector<FanOut>& v, int k) -> const FanOut* {
        for (auto& f : v)
            if (f.subscribers == k) return &f;
        return nullptr;
    };
    // Per-subscriber dequeue rate relative to aq's single-consumer queue.
    auto deq_rel = [&](const FanOut& f) { return per(single.deq_s, n) / per(f.deq_s, static_cast<double>(n) * f.subscribers); };
    auto ratio_lines = [&](const std::vector<FanOut>& v, const char* sys, const char* subs, const char* single_label) {
        const FanOut* one = find(v, 1);
        std::printf("  %-4s enqueue cost relative to 1 %s:", sys, subs);
        for (auto& f : v)
            if (f.subscribers > 1) std::printf("  %d: %s", f.subscribers, ratio(f.enq_s / one->enq_s).c_str());
        std::printf("\n  %-4s dequeue rate per %s relative to %s:", sys, subs, single_label);
        for (auto& f : v)
            if (f.subscribers) std::printf("  %d: %s", f.subscribers, ratio(deq_rel(f)).c_str());
        std::printf("\n");
    };
    ratio_lines(runs, "aq", "subscriber", "the single-consumer queue");
    if (with_once) ratio_lines(once_runs, "aq once", "subscriber", "aq's single-consumer queue");
    if (with_pgq) ratio_lines(pgq_runs, "PgQ", "consumer", "aq's single-consumer queue");

    // Targets: 10 subscribers' enqueue <= 1.5x 1 subscriber's; each subscriber's drain >= 0.8x the
    // single-consumer rate.  They are aq's multi-consumer rings' (aq once), the storage aq has for
    // fan-out, when this aq has them; a multi-consumer table with a row per recipient is then shown
    // against them for reference, not held to them.  PgQ's same ratios are printed beside them, for
    // comparison only.
    const FanOut& one = *find(runs, 1);
    const FanOut& ten = *find(runs, 10);
    const FanOut* pone = with_pgq ? find(pgq_runs, 1) : nullptr;
    const FanOut* pten = with_pgq ? find(pgq_runs, 10) : nullptr;
    double enq_ratio = ten.enq_s / one.enq_s;
    bool enq_pass = enq_ratio <= 1.5;
    auto cpu_ratio = [&](const FanOut& a, const FanOut& b) {
        return have_server_cpu && b.enq_cpu > 0 ? "  [CPU ratio " + ratio(a.enq_cpu / b.enq_cpu) + "]" : std::string();
    };
    std::string pgq_enq = pten ? "   (PgQ: " + ratio(pten->enq_s / pone->enq_s) + cpu_ratio(*pten, *pone) + ")" : "";
    const char* held = with_once ? "reference" : "target";  // (with_once: aq once is held to them)
    std::printf("  %s: 10 subscribers' enqueue at most 1.5x 1 subscriber's:  aq %s <= 1.50x   %s%s%s\n", held,
                ratio(enq_ratio).c_str(), enq_pass ? "PASS" : with_once ? "above" : "FAIL", cpu_ratio(ten, one).c_str(),
                pgq_enq.c_str());
    if (!enq_pass && !with_once)
        failures.push_back("fan-out: 10 subscribers' enqueue / 1 subscriber's = " + ratio(enq_ratio) + " > 1.50x");
    auto lowest = [&](const std::vector<FanOut>& v, int* at) {
        double worst = 1e9;
        for (auto& f : v)
            if (f.subscribers) {
                double r = deq_rel(f);
                if (r < worst) worst = r, *at = f.subscribers;
            }
        return worst;
    };
    int worst_k = 0, pworst_k = 0;
    double worst = lowest(runs, &worst_k);
    bool deq_pass = worst >= 0.8;
    std::string pgq_deq;
    if (with_pgq) {
        double pw = lowest(pgq_runs, &pworst_k);
        pgq_deq = "   (PgQ: lowest " + ratio(pw) + ", " + std::to_string(pworst_k) + " consumer" + (pworst_k > 1 ? "s" : "") +
                  ", of aq's single-consumer rate)";
    }
    std::printf("  %s: each subscriber dequeues at >= 0.8x the single-consumer rate: aq lowest %s (%d subscriber%s)"
                "   %s%s\n",
                held, ratio(worst).c_str(), worst_k, worst_k > 1 ? "s" : "", deq_pass ? "PASS" : with_once ? "below" : "FAIL",
                pgq_deq.c_str());
    if (!deq_pass && !with_once)
        failures.push_back("fan-out: per-subscriber dequeue rate " + ratio(worst) + " of the single-consumer rate < 0.80x");
    // The same two targets for aq stored once: its own 10 against 1 subscriber, and its drain
    // against aq's (classic) single-consumer queue, the rate a subscriber should not fall below.
    if (with_once) {
        const FanOut& oone = *find(once_runs, 1);
        const FanOut& oten = *find(once_runs, 10);
        double oenq = oten.enq_s / oone.enq_s;
        bool oenq_pass = oenq <= 1.5;
        std::printf("  target: 10 subscribers' enqueue at most 1.5x 1 subscriber's:  aq once %s <= 1.50x   %s%s\n",
                    ratio(oenq).c_str(), oenq_pass ? "PASS" : "FAIL", cpu_ratio(oten, oone).c_str());
        if (!oenq_pass)
            failures.push_back("fan-out, aq stored once: 10 subscribers' enqueue / 1 subscriber's = " + ratio(oenq) +
                               " > 1.50x");
        int oworst_k = 0;
        double oworst = lowest(once_runs, &oworst_k);
        bool odeq_pass = oworst >= 0.8;
        std::printf("  target: each subscriber dequeues at >= 0.8x the single-consumer rate: aq once lowest %s (%d subscriber%s)"
                    "   %s\n",
                    ratio(oworst).c_str(), oworst_k, oworst_k > 1 ? "s" : "", odeq_pass ? "PASS" : "FAIL");
        if (!odeq_pass)
            failures.push_back("fan-out, aq stored once: per-subscriber dequeue rate " + ratio(oworst) +
                               " of aq's single-consumer rate < 0.80x");
    }
    if (pten) {
        double a = ten.enq_s + ten.deq_s, b = pten->enq_s + pten->deq_s;
        std::printf("  aq vs PgQ end to end at 10 subscribers: enqueue+drain seconds aq %.2f s / PgQ %.2f s = %s\n", a, b,
                    ratio(a / b).c_str());
    } else {
        std::printf("  aq vs PgQ end to end at 10 subscribers: n/a (PgQ skipped)\n");
    }
    if (with_once) {
        const FanOut& oten = *find(once_runs, 10);
        double a = oten.enq_s + oten.deq_s, b = ten.enq_s + ten.deq_s;
        std::printf("  aq once vs aq end to end at 10 subscribers: enqueue+drain seconds aq once %.2f s / aq %.2f s = %s\n",
                    a, b, ratio(a / b).c_str());
        if (pten) {
            double c = pten->enq_s + pten->deq_s;
            std::printf("  aq once vs PgQ end to end at 10 subscribers: enqueue+drain seconds aq once %.2f s / PgQ %.2f s = %s\n",
                        a, c, ratio(a / c).c_str());
        }
    }
    std::fflush(stdout);
}

// ---- 7. transaction groups

// n messages enqueued in groups of g (one enqueue_array of g per transaction) into a queue table
// with message_grouping => 'transactional' and into an ungrouped one; each drained by
// aq.dequeue_array of g per call, a commit each (navigation next_transaction for the grouped one:
// one whole group per call).  Every call must return one whole group, in order.
double groups_drain(const Payload& p, long n, long g, bool grouped, double* cpu) {
    const std::string table = std::string("aq_bench_grp") + (grouped ? "g" : "u") + std::to_string(g) + "_qt";
    const std::string queue = std::string("aq_bench_grp") + (grouped ? "g" : "u") + std::to_string(g) + "_q";
    create_extra_queue(table, queue, "enq_time", grouped ? ", message_grouping => 'transactional'" : "");
    const std::string enq = "grp_enq_" + table, deq = "grp_deq_" + table;
    prepare(enq, "SELECT cardinality(aq.enqueue_array('" + queue + "', $1::aq_bench.bench_ot[]))");
    prepare(deq, "SELECT msgid, (message_properties).end_of_group FROM aq.dequeue_array('" + queue +
                     "', NULL::aq_bench.bench_ot, " + std::to_string(g) + ", aq.dequeue_options(wait => '0'" +
                     (grouped ? ", navigation => 'next_transaction'" : "") + "))");
    for (long from = 1; from <= n; from += g) {
        std::vector<std::string> slice;
        for (long i = from; i < from + g && i <= n; i++) slice.push_back(p.make(i));
        std::string a = array_literal(slice, static_cast<long>(slice.size()));
        if (run_prepared_long(enq, {a.c_str()}) <= 0) die("groups: enqueue_array returned no msgids");
    }
    exec("VACUUM ANALYZE aq_bench." + table);
    settle();
    double s0 = server_cpu_seconds(), c0 = client_cpu_seconds();
    auto t0 = Clock::now();
    long got = 0, last = 0;
    while (got < n) {
        PGresult* r = PQexecPrepared(conn, deq.c_str(), 0, nullptr, nullptr, nullptr, 0);
        if (!result_ok(r)) die("groups: dequeue_array failed", r);
        int rows = PQntuples(r);
        if (rows != std::min(g, n - got)) correctness_error("groups: a call returned " + std::to_string(rows) + " messages");
        for (int i = 0; i < rows; i++) {
            long id = std::atol(PQgetvalue(r, i, 0));
            if (id <= last) correctness_error("groups: messages out of order");
            last = id;
            if (grouped && (std::strcmp(PQgetvalue(r, i, 1), "t") == 0) != (i == rows - 1))
                correctness_error("groups: end_of_group not on the last message of the group");
        }
        PQclear(r);
        if (rows == 0) break;
        got += rows;
    }
    double seconds = seconds_since(t0);
    *cpu = server_cpu_seconds() - s0 + client_cpu_seconds() - c0;
    expect_rows("aq_bench." + table, 0, "groups drain");
    return seconds;
}

void groups_test(const Payload& p) {
    const long n = quick ? 10000 : 50000;
    std::printf("\n== Transaction groups: %s messages in groups of 10 and of 100%s\n", with_commas(n).c_str(),
                quick ? "  (--quick: 10,000 messages)" : "");
    std::printf("   payload composite aq_bench.bench_ot; one enqueue_array of a group per transaction, into a\n"
                "   queue table with message_grouping => 'transactional' and into an ungrouped one; drained by\n"
                "   aq.dequeue_array of one group's size per call, a commit each (the grouped one with navigation\n"
                "   next_transaction: one whole group per call, end_of_group on its last message).\n");
    std::printf("  %-30s %14s %10s %10s\n", "", "dequeue msg/s", "us/msg", "cpu us");
    double worst = 1e9;
    for (long g : {10L, 100L}) {
        progress("groups: " + with_commas(n) + " messages in groups of " + std::to_string(g));
        double ucpu = 0, gcpu = 0;
        double u = groups_drain(p, n, g, false, &ucpu);
        double gr = groups_drain(p, n, g, true, &gcpu);
        drop_extra_queues();
        auto line = [&](const std::string& label, double s, double cpu) {
            std::printf("  %-30s %14s %10.2f %10s\n", label.c_str(), with_commas(n / s).c_str(), s * 1e6 / n,
                        have_server_cpu ? fmt("%.2f", cpu * 1e6 / n).c_str() : "n/a");
        };
        line("ungrouped, arrays of " + std::to_string(g), u, ucpu);
        line("groups of " + std::to_string(g), gr, gcpu);
        double ratio_g = u / gr;
        std::printf("  groups of %ld / ungrouped: %s\n", g, ratio(ratio_g).c_str());
        worst = std::min(worst, ratio_g);
    }
    bool pass = worst >= 0.8;
    std::printf("  target: grouped dequeue >= 0.8x ungrouped (lowest of groups of 10 and 100): %s   %s\n",
                ratio(worst).c_str(), pass ? "PASS" : "FAIL");
    if (!pass) failures.push_back("transaction groups: dequeue rate " + ratio(worst) + " of ungrouped < 0.80x");
    std::fflush(stdout);
}

// ------------------------------------------------------------------ setup / teardown

bool created_extension = false;
bool created_schema = false;

void drop_leftovers() {
    // From an interrupted earlier run.
    exec("DO $$ DECLARE r record; BEGIN"
         "  IF to_regnamespace('aq') IS NULL OR to_regclass('aq.queue_tables') IS NULL THEN RETURN; END IF;"
         "  FOR r IN SELECT queue_table FROM aq.queue_tables WHERE table_schema = 'aq_bench' LOOP"
         "    PERFORM aq.drop_queue_table(r.queue_table, force => true);"
         "  END LOOP; END $$");
    exec("DROP SCHEMA IF EXISTS aq_bench CASCADE");
}

void setup(std::vector<Payload>& payloads) {
    exec("SET client_min_messages = warning");
    if (scalar("SELECT count(*) FROM pg_extension WHERE extname = 'aq'") == "0") {
        created_schema = scalar("SELECT count(*) FROM pg_namespace WHERE nspname = 'aq'") == "0";
        exec("CREATE EXTENSION aq");
        created_extension = true;
    }
    drop_leftovers();
    exec("CREATE SCHEMA aq_bench");
    exec("CREATE TYPE aq_bench.bench_ot AS (message varchar(4000))");
    for (auto& p : payloads) {
        exec("SELECT aq.create_queue_table('" + p.queue_table + "', '" + p.type +
             "', queue_table_schema => 'aq_bench')");
        exec("SELECT aq.create_queue('" + p.queue + "', '" + p.queue_table + "')");
        exec("SELECT aq.start_queue('" + p.queue + "')");
        // Every phase starts from an explicit TRUNCATE or fill + VACUUM ANALYZE; autovacuum
        // waking up in one phase and not in another would only add noise.
        exec("ALTER TABLE " + qt(p) + " SET (autovacuum_enabled = off)");
        // The baseline: same columns, defaults, indexes and storage options as an aq queue table.
        exec("CREATE TABLE " + bt(p) +
             " (msgid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, q_id integer NOT NULL,"
             "  enq_time timestamptz NOT NULL, priority integer NOT NULL DEFAULT 1, delay timestamptz,"
             "  expiration timestamptz, corrid text, retry_count integer NOT NULL DEFAULT 0,"
             "  exception_queue text, enq_uid text NOT NULL DEFAULT current_user, user_data " + p.type +
             " NOT NULL) WITH (autovacuum_vacuum_scale_factor = 0.02, autovacuum_vacuum_insert_scale_factor = 0.05,"
             " autovacuum_enabled = off)");
        exec("CREATE INDEX ON " + bt(p) + " (q_id, enq_time, msgid)");
        prepare_statements(p);
    }
}

void teardown(const std::vector<Payload>& payloads) {
    for (auto& p : payloads) {
        exec("SELECT aq.stop_queue('" + p.queue + "')");
        exec("SELECT aq.drop_queue('" + p.queue + "')");
        exec("SELECT aq.drop_queue_table('" + p.queue_table + "')");
    }
    exec("DROP SCHEMA aq_bench CASCADE");
    if (created_extension) exec("DROP EXTENSION aq");
    // CREATE EXTENSION creates schema aq from the control file but does not make it a member
    // of the extension, so DROP EXTENSION leaves it behind (empty).
    if (created_schema) exec("DROP SCHEMA IF EXISTS aq");
}


// ---- 8. immediate enqueues (Oracle's visibility => IMMEDIATE)

// One session's calls: an enqueue of msgs messages per call, each call its own transaction
// (autocommit): ON_COMMIT (the enqueue and its commit) or IMMEDIATE (aq's worker commits it).
struct ImmediateRun {
    double seconds = 0;        // wall clock of the timed calls, all sessions together
    long calls = 0;
    std::vector<double> ms;    // per call, all sessions
};

// dequeue: one dequeue per call (msgs 1) instead of an enqueue, from a queue filled beforehand.
ImmediateRun immediate_run(const std::string& conninfo, int sessions, int msgs, bool immediate, long calls,
                           bool dequeue = false) {
    std::string sql = msgs == 1 ? "SELECT aq.enqueue('aq_bench_imm_q', 'message'::text" : 
                                  "SELECT cardinality(aq.enqueue_array('aq_bench_imm_q', array_fill('message'::text, ARRAY[" +
                                      std::to_string(msgs) + "])";
    sql += immediate ? ", enqueue_options => aq.enqueue_options(visibility => 'immediate'))" : ")";
    if (msgs != 1) sql += ")";
    if (dequeue)
        sql = std::string("SELECT payload FROM aq.dequeue('aq_bench_imm_q', NULL::text, aq.dequeue_options(wait => '0'") +
              (immediate ? ", visibility => 'immediate'))" : "))");
    std::vector<std::vector<double>> ms(sessions);
    std::atomic<int> ready{0};
    std::atomic<bool> go{false}, failed{false};
    std::vector<std::thread> threads;
    for (int t = 0; t < sessions; t++)
        threads.emplace_back([&, t] {
            PGconn* c = PQconnectdb(conninfo.c_str());
            PGresult* r = PQstatus(c) == CONNECTION_OK ? PQprepare(c, "imm", sql.c_str(), 0, nullptr) : nullptr;
            if (!r || !result_ok(r)) failed = true;
            if (r) PQclear(r);
            for (int i = 0; i < 20 && !failed; i++) {  // warm-up: the worker started, plans cached
                r = PQexecPrepared(c, "imm", 0, nullptr, nullptr, nullptr, 0);
                if (!result_ok(r)) {
                    std::fprintf(stderr, "queue-bench: immediate phase: %s", PQerrorMessage(c));
                    failed = true;
                }
                PQclear(r);
            }
            ready++;
            while (!go && !failed) std::this_thread::yield();
            for (long i = 0; i < calls && !failed; i++) {
                auto t0 = Clock::now();
                r = PQexecPrepared(c, "imm", 0, nullptr, nullptr, nullptr, 0);
                ms[t].push_back(seconds_since(t0) * 1000);
                if (!result_ok(r)) failed = true;
                PQclear(r);
            }
            PQfinish(c);
        });
    while (ready < sessions && !failed) std::this_thread::yield();
    auto t0 = Clock::now();
    go = true;
    for (auto& th : threads) th.join();
    if (failed) die("immediate phase: a call failed");
    ImmediateRun run;
    run.seconds = seconds_since(t0);
    for (auto& v : ms) run.ms.insert(run.ms.end(), v.begin(), v.end());
    run.calls = static_cast<long>(run.ms.size());
    return run;
}

void immediate_test(const std::string& conninfo) {
    exec("SELECT aq.create_queue_table('aq_bench_imm_qt', 'text', queue_table_schema => 'aq_bench')");
    extra_queue_tables.push_back("aq_bench_imm_qt");
    exec("SELECT aq.create_queue('aq_bench_imm_q', 'aq_bench_imm_qt')");
    exec("SELECT aq.start_queue('aq_bench_imm_q')");
    const long calls = quick ? 300 : 2000;
    std::printf("\n== Immediate enqueues: visibility => 'immediate' against an on_commit enqueue with its own commit\n");
    std::printf("   each call its own transaction (autocommit), %s calls per session after 20 warm-up calls;\n"
                "   the immediate enqueue is committed by aq's worker of the database, which groups the\n"
                "   requests of sessions that arrive together into one commit.\n",
                with_commas(calls).c_str());
    std::printf("  %-26s %9s %11s %11s %13s %13s\n", "", "sessions", "p50 ms", "mean ms", "calls/s", "messages/s");
    for (int msgs : {1, 100}) {
        for (int sessions : {1, 8}) {
            ImmediateRun r[2];
            for (int k = 0; k < 2; k++) {
                progress("immediate: " + std::to_string(msgs) + " message(s) per call, " + std::to_string(sessions) +
                         " session(s), " + (k ? "immediate" : "on_commit"));
                r[k] = immediate_run(conninfo, sessions, msgs, k == 1, calls);
                exec("TRUNCATE aq_bench.aq_bench_imm_qt");
                std::vector<double> v = r[k].ms;
                double mean = 0;
                for (double x : v) mean += x;
                mean = v.empty() ? 0 : mean / v.size();
                std::string label = std::string(k ? "immediate" : "on_commit + commit") + (msgs == 1 ? ", 1 msg" : ", 100 msgs");
                std::printf("  %-26s %9d %11.3f %11.3f %13s %13s\n", label.c_str(), sessions, median_of(v), mean,
                            with_commas(r[k].calls / r[k].seconds).c_str(),
                            with_commas(r[k].calls * msgs / r[k].seconds).c_str());
            }
            std::string what = std::to_string(msgs) + (msgs == 1 ? " message" : " messages");
            if (sessions == 1) {
                double lat = median_of(r[1].ms) / median_of(r[0].ms);
                bool pass = lat <= 1.5;
                std::printf("  target: %s, 1 session: immediate latency <= 1.5x on_commit + commit:  %s   %s\n",
                            what.c_str(), ratio(lat).c_str(), pass ? "PASS" : "FAIL");
                if (!pass) failures.push_back("immediate enqueue of " + what + ", 1 session: latency " + ratio(lat) + " > 1.5x");
            } else {
                double thr = (r[1].calls / r[1].seconds) / (r[0].calls / r[0].seconds);
                bool pass = thr > 1.0;
                std::printf("  target: %s, 8 sessions: more immediate enqueues per second than on_commit + commit:  %s   %s\n",
                            what.c_str(), ratio(thr).c_str(), pass ? "PASS" : "FAIL");
                if (!pass) failures.push_back("immediate enqueue of " + what + ", 8 sessions: throughput " + ratio(thr) + " <= 1x");
            }
        }
    }
    // Dequeues, for information (no target): one message per call from a queue filled beforehand.
    std::printf("  dequeues of 1 message, the same way (no target):\n");
    for (int sessions : {1, 8}) {
        ImmediateRun r[2];
        for (int k = 0; k < 2; k++) {
            progress("immediate: dequeues, " + std::to_string(sessions) + " session(s), " + (k ? "immediate" : "on_commit"));
            exec("SELECT aq.enqueue_array('aq_bench_imm_q', array_fill('message'::text, ARRAY[" +
                 std::to_string(sessions * (calls + 20)) + "]))");
            r[k] = immediate_run(conninfo, sessions, 1, k == 1, calls, true);
            exec("TRUNCATE aq_bench.aq_bench_imm_qt");
            std::vector<double> v = r[k].ms;
            double mean = 0;
            for (double x : v) mean += x;
            mean = v.empty() ? 0 : mean / v.size();
            std::printf("  %-26s %9d %11.3f %11.3f %13s %13s\n", k ? "immediate dequeue" : "on_commit dequeue + commit",
                        sessions, median_of(v), mean, with_commas(r[k].calls / r[k].seconds).c_str(),
                        with_commas(r[k].calls / r[k].seconds).c_str());
        }
        std::printf("  dequeue, %d session(s): immediate / on_commit latency %s, throughput %s\n", sessions,
                    ratio(median_of(r[1].ms) / median_of(r[0].ms)).c_str(),
                    ratio((r[1].calls / r[1].seconds) / (r[0].calls / r[0].seconds)).c_str());
    }
    std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
    std::string conninfo, only;
    const char* usage = "usage: %s \"<libpq connection string>\" [--quick] [--only priority|correlation|condition|listen|fanout|groups|immediate]\n";
    for (int i = 1; i < argc; i++) {
        std::string a = argv[i];
        if (a == "--quick")
            quick = true;
        else if (a == "--only" && i + 1 < argc)
            only = argv[++i];
        else if (a == "-h" || a == "--help") {
            std::printf(usage, argv[0]);
            return 0;
        } else if (conninfo.empty())
            conninfo = a;
        else {
            std::fprintf(stderr, usage, argv[0]);
            return 2;
        }
    }
    if (conninfo.empty() ||
        !(only.empty() || only == "priority" || only == "correlation" || only == "condition" || only == "listen" ||
          only == "fanout" || only == "groups" || only == "immediate")) {
        std::fprintf(stderr, usage, argv[0]);
        return 2;
    }
    conn = PQconnectdb(conninfo.c_str());
    if (PQstatus(conn) != CONNECTION_OK) die("connection failed");

    auto total_t0 = Clock::now();
    std::vector<long> sizes = quick ? std::vector<long>{2500} : std::vector<long>{2500, 100000};
    long max_n = *std::max_element(sizes.begin(), sizes.end());
    long long_n = quick ? 2500 : 20000;  // the long-transaction dequeue test

    std::vector<Payload> payloads(2);
    payloads[0] = Payload{"comp", "composite aq_bench.bench_ot (message varchar(4000)), 'Message number ' || i",
                          "aq_bench.bench_ot", "aq_bench_comp_q", "aq_bench_comp_qt", "base_comp", composite_payload,
                          {}};
    payloads[1] = Payload{"json", "jsonb, a 1 KB document (1,024 bytes of JSON text) per message", "jsonb",
                          "aq_bench_json_q", "aq_bench_json_qt", "base_json", json_payload, {}};
    for (auto& p : payloads) {
        p.values.reserve(std::max(max_n, long_n));
        for (long i = 1; i <= std::max(max_n, long_n); i++) p.values.push_back(p.make(i));
    }

    setup(payloads);
    detect_server_cpu();
    if (std::to_string(message_properties_fields) !=
        scalar("SELECT count(*) FROM pg_attribute WHERE attrelid = 'aq.message_properties'::regclass "
               "AND attnum > 0 AND NOT attisdropped"))
        die("aq.message_properties has another number of fields than properties_literal writes (" +
            std::to_string(message_properties_fields) + "): queue-bench does not match this aq");

    std::printf("aq queue benchmark%s\n",
                quick ? " (--quick: N = 2,500 only; priority order on 20,000 messages, correlation on a queue"
                        " of 200,000)"
                      : "");
    std::printf("server: %s\n", scalar("SELECT version()").c_str());
    std::printf("settings: shared_preload_libraries='%s' shared_buffers=%s synchronous_commit=%s fsync=%s "
                "wal_level=%s; aq %s\n",
                scalar("SHOW shared_preload_libraries").c_str(), scalar("SHOW shared_buffers").c_str(),
                scalar("SHOW synchronous_commit").c_str(), scalar("SHOW fsync").c_str(),
                scalar("SHOW wal_level").c_str(),
                scalar("SELECT extversion FROM pg_extension WHERE extname = 'aq'").c_str());
    std::printf("method: one client connection over libpq, prepared statements, text results fetched;\n"
                "  payloads are built by the client before the clock starts and sent as parameters (one value\n"
                "  per one-by-one call, one array literal for the array/plain-SQL methods); every enqueue method\n"
                "  starts on an empty table, every dequeue method on a table freshly filled with the same N\n"
                "  messages + VACUUM ANALYZE (autovacuum off on the benchmark tables); CHECKPOINT before each\n"
                "  timed phase; an untimed warm-up array enqueue + plain INSERT of N messages precedes each set.\n"
                "  Wall clock: std::chrono::steady_clock.\n");
    if (have_server_cpu)
        std::printf("  CPU: server backend (/proc/%d/sched) + this client, per message; on a busy machine the\n"
                    "  wall-clock rates are noisy, the CPU figures much less so.\n",
                    backend_pid);
    std::printf("load average at start: %s (%ld CPUs)\n", loadavg().c_str(), sysconf(_SC_NPROCESSORS_ONLN));
    std::fflush(stdout);

    if (only.empty()) {
        for (auto& p : payloads) {
            std::vector<Set> sets;
            for (long n : sizes) sets.push_back(run_set(p, n));
            print_table(p, sets);
        }

        // ---------------- single dequeues: one transaction vs a commit each
        Payload& p = payloads[0];
        const long chunk = long_n >= 20000 ? 5000 : 500;
        // The default navigation, spelled out: NEXT_MESSAGE continues after the previous message of
        // the same transaction (a commit each starts every dequeue from the head of the queue).
        const std::string deq_next = "deq_next_" + p.tag;
        prepare(deq_next, "SELECT msgid, payload FROM aq.dequeue('" + p.queue + "', NULL::" + p.type +
                              ", aq.dequeue_options(navigation => 'next_message', wait => '0'))");
        auto single = [&] {
            if (run_prepared(deq_next, {}) != 1) die("aq.dequeue returned no row");
        };
        progress("long test: " + with_commas(long_n) + " single dequeues in one transaction");
        fill(p, long_n, false);
        Chunked one_txn = chunked_dequeue(long_n, chunk, true, single, 0);
        progress("long test: " + with_commas(long_n) + " single dequeues, commit each");
        fill(p, long_n, false);
        Chunked each = chunked_dequeue(long_n, chunk, false, single, 0);
        progress("long test: naive plain-SQL single dequeues in one transaction (time-bounded)");
        fill(p, long_n, true);
        const std::string naive = "base_del1_" + p.tag;
        const double naive_bound = 15.0;
        Chunked naive_txn = chunked_dequeue(
            long_n, chunk, true, [&] {
                if (run_prepared(naive, {"1"}) != 1) die("naive delete returned no row");
            },
            naive_bound);
        fresh(qt(p));
        fresh(bt(p));

        std::printf("\n== %s single dequeues: one transaction vs a commit each (payload: composite)\n",
                    with_commas(long_n).c_str());
        std::printf("   aq.dequeue(..., aq.dequeue_options(navigation => 'next_message', wait => '0')) one by one on a\n"
                    "   queue of %s messages, in one transaction and with a commit each.\n",
                    with_commas(long_n).c_str());
        std::printf("  %-42s %9s %9s %9s   wall us/msg by chunk of %s\n", "", "msg/s", "us/msg", "cpu us",
                    with_commas(chunk).c_str());
        auto line = [&](const char* label, const Chunked& c) {
            std::printf("  %-42s %9s %9s %9s  %s\n", label, with_commas(c.n / c.seconds).c_str(),
                        fmt("%.1f", c.per_msg_us()).c_str(), have_server_cpu ? fmt("%.1f", c.cpu_per_msg_us()).c_str() : "n/a",
                        chunk_line(c).c_str());
        };
        line("aq.dequeue, one transaction", one_txn);
        line("aq.dequeue, commit each", each);
        line("naive plain SQL (LIMIT 1), one transaction", naive_txn);
        if (naive_txn.bounded_out)
            std::printf("  (naive: stopped after %.0f s at %s of %s messages.)\n", naive_bound,
                        with_commas(naive_txn.n).c_str(), with_commas(long_n).c_str());
        std::printf("  The naive plain-SQL single dequeue re-walks the index entries of the rows it deleted earlier in\n"
                    "  the same transaction, so each dequeue costs more than the last; aq keeps its position.\n");
        double long_ratio = each.per_msg_us() > 0 ? one_txn.per_msg_us() / each.per_msg_us() : 0;
        bool long_pass = long_ratio <= 1.0;
        std::string long_cpu = have_server_cpu && each.cpu_per_msg_us() > 0
                                   ? "  [CPU/msg ratio " + ratio(one_txn.cpu_per_msg_us() / each.cpu_per_msg_us()) + "]"
                                   : "";
        std::printf("  target: one transaction no slower per message than a commit each: %s us / %s us = %s <= 1.00x"
                    "   %s%s\n",
                    fmt("%.1f", one_txn.per_msg_us()).c_str(), fmt("%.1f", each.per_msg_us()).c_str(),
                    ratio(long_ratio).c_str(), long_pass ? "PASS" : "FAIL", long_cpu.c_str());
        if (!long_pass)
            failures.push_back("single dequeues: one transaction / commit each per-message time <= 1.00x : " +
                               ratio(long_ratio));
        double first = one_txn.chunks.empty() ? 0 : one_txn.chunks.front().second / one_txn.chunks.front().first;
        double last = one_txn.chunks.empty() ? 0 : one_txn.chunks.back().second / one_txn.chunks.back().first;
        if (first > 0)
            std::printf("  aq one transaction: last chunk / first chunk per-message time = %.2f (flat ~1 = no re-walk)\n",
                        last / first);

        std::fflush(stdout);

    }

    if (only.empty() || only == "priority") priority_order_test();
    if (only.empty() || only == "correlation") correlation_test();
    if (only.empty() || only == "condition") condition_test();
    if (only.empty() || only == "listen") listen_test(conninfo);
    if (only.empty() || only == "fanout") fanout_test(payloads[0]);
    if (only.empty() || only == "groups") groups_test(payloads[0]);
    if (only.empty() || only == "immediate") immediate_test(conninfo);
    drop_extra_queues();

    teardown(payloads);

    std::printf("\n== Summary: %s\n", failures.empty() ? "all targets PASS" : "some targets FAIL");
    for (auto& f : failures) std::printf("  FAIL  %s\n", f.c_str());
    std::printf("load average at end: %s; total benchmark time: %.0f s\n", loadavg().c_str(), seconds_since(total_t0));
    if (correctness_errors)
        std::printf("*** %ld CORRECTNESS ERROR(S): messages dequeued out of order or the wrong message; exit code 2 ***\n",
                    correctness_errors);
    PQfinish(conn);
    return correctness_errors ? 2 : 0;
}
