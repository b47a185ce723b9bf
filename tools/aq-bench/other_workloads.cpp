// See other_workloads.hpp.
#include "other_workloads.hpp"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <stdexcept>
#include <thread>

#include "pg.hpp"

namespace aqbench {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

unsigned long long wal_syncs(Session& s) {
    // pg_stat_wal's wal_sync up to PostgreSQL 17; 18 counts WAL syncs in pg_stat_io.
    const char* sql = PQserverVersion(s.raw()) >= 180000
                          ? "SELECT sum(fsyncs)::bigint FROM pg_stat_io WHERE object = 'wal' AND context = 'normal'"
                          : "SELECT wal_sync FROM pg_stat_wal";
    return std::strtoull(PQgetvalue(s.must(sql).get(), 0, 0), nullptr, 10);
}

// A new, empty workload table in schema aq_bench (with aq installed).
void fresh_table(Session& admin, const std::string& table, const std::string& columns) {
    admin.must("CREATE EXTENSION IF NOT EXISTS aq");
    admin.must("CREATE SCHEMA IF NOT EXISTS aq_bench");
    admin.must("DROP TABLE IF EXISTS aq_bench." + table);
    admin.must("CREATE TABLE aq_bench." + table + " (" + columns + ")");
}

}  // namespace

CommitResult run_commit(const CommitConfig& c) {
    Session admin(c.conninfo);
    admin.connect();
    fresh_table(admin, "commit_t", "id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, v integer");
    std::atomic<unsigned long long> commits{0};
    std::atomic<bool> failed{false};
    auto start = Clock::now();
    auto deadline = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.seconds));
    unsigned long long syncs_before = wal_syncs(admin);
    std::vector<std::thread> threads;
    for (int i = 0; i < c.sessions; i++)
        threads.emplace_back([&] {
            Session s(c.conninfo);
            s.connect();
            s.must("SELECT set_config('aq.commit_write', $1, false)", {c.mode});
            unsigned long long n = 0;
            while (Clock::now() < deadline) {
                if (s.exec("INSERT INTO aq_bench.commit_t (v) VALUES (1)") != Outcome::ok) {
                    failed = true;
                    break;
                }
                n++;
            }
            commits += n;
        });
    for (auto& t : threads) t.join();
    double elapsed = seconds_since(start);
    unsigned long long syncs = wal_syncs(admin) - syncs_before;
    admin.must("DROP TABLE aq_bench.commit_t");
    if (failed) throw std::runtime_error("commit workload: an INSERT failed (" + c.mode + ")");
    CommitResult r;
    r.config = c;
    r.commits = commits;
    r.tps = commits / elapsed;
    r.wal_syncs_per_commit = commits ? static_cast<double>(syncs) / commits : 0;
    return r;
}

IngestResult run_ingest(const IngestConfig& c) {
    Session admin(c.conninfo);
    admin.connect();
    fresh_table(admin, "ingest_t", "id bigint NOT NULL, reading double precision, at timestamptz");
    if (c.fast) admin.must("SELECT aq.enable_fast_ingest('aq_bench.ingest_t')");
    const std::string insert = std::string(c.fast ? "INSERT /*+ MEMOPTIMIZE_WRITE */" : "INSERT") +
                               " INTO aq_bench.ingest_t SELECT i, i * 0.5, now() FROM unnest($1::bigint[]) i";
    IngestLedger ledger(static_cast<size_t>(c.rows));
    std::atomic<long> next{0};
    std::atomic<bool> failed{false};
    auto start = Clock::now();
    std::vector<std::thread> threads;
    for (int w = 0; w < c.writers; w++)
        threads.emplace_back([&] {
            Session s(c.conninfo);
            s.connect();
            for (;;) {
                long first = next.fetch_add(c.rows_per_insert);
                if (first >= c.rows) break;
                long last = std::min<long>(c.rows, first + c.rows_per_insert);
                std::string ids = "{";
                for (long id = first + 1; id <= last; id++) {
                    ledger.attempted(static_cast<uint64_t>(id));
                    if (id > first + 1) ids += ',';
                    ids += std::to_string(id);
                }
                ids += '}';
                if (s.exec(insert, {ids}) != Outcome::ok) {
                    failed = true;
                    break;
                }
                for (long id = first + 1; id <= last; id++) ledger.acknowledged(static_cast<uint64_t>(id));
            }
        });
    for (auto& t : threads) t.join();
    IngestResult r;
    r.config = c;
    r.ack_seconds = seconds_since(start);
    if (c.fast) admin.must("SELECT aq.writes_flush(interval '10 minutes')");
    r.applied_seconds = seconds_since(start);
    if (failed) throw std::runtime_error("ingest workload: an INSERT failed: check the server log");
    r.ack_rate = c.rows / r.ack_seconds;
    r.applied_rate = c.rows / r.applied_seconds;
    Result rows = admin.must("SELECT id FROM aq_bench.ingest_t");
    for (int i = 0; i < PQntuples(rows.get()); i++) ledger.present(std::strtoull(PQgetvalue(rows.get(), i, 0), nullptr, 10));
    // After writes_flush every acknowledged row is at or below the apply watermark.
    r.verdict = ledger.classify([](uint64_t) { return true; });
    if (c.fast) admin.must("SELECT aq.disable_fast_ingest('aq_bench.ingest_t')");
    admin.must("DROP TABLE aq_bench.ingest_t");
    return r;
}

}  // namespace aqbench
