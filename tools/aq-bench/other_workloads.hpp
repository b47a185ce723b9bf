// The commit and ingest workloads.
//
// commit: N sessions each commit small transactions (one INSERT) for `seconds` under one
//   commit mode (SET aq.commit_write = 'immediate,wait' ...); reported: transactions/s and
//   WAL syncs per commit (pg_stat_wal's wal_sync delta over the commits: cluster-wide).
// ingest: W writers insert rows (one row a statement, or `rows_per_insert` in one multi-row
//   INSERT), each statement its own transaction, into a table with fast ingest (the
//   /*+ MEMOPTIMIZE_WRITE */ hint) or a standard one.  Reported: rows/s until acknowledged
//   (every commit returned) and until applied (aq.writes_flush() returned; the same moment
//   for the standard table), and the ingest ledger's verdict (checker.hpp): every
//   acknowledged row present once after the flush.
#pragma once

#include <string>
#include <vector>

#include "checker.hpp"

namespace aqbench {

struct CommitConfig {
    std::string conninfo;
    std::string mode;  // as for aq.commit_write: immediate,wait | immediate,nowait | batch,nowait | batch,wait
    int sessions = 1;
    double seconds = 5;
};

struct CommitResult {
    CommitConfig config;
    unsigned long long commits = 0;
    double tps = 0;
    double wal_syncs_per_commit = 0;
};

CommitResult run_commit(const CommitConfig& config);

struct IngestConfig {
    std::string conninfo;
    bool fast = true;
    int writers = 1;
    int rows_per_insert = 1;
    long rows = 100000;
};

struct IngestResult {
    IngestConfig config;
    double ack_seconds = 0, applied_seconds = 0;
    double ack_rate = 0, applied_rate = 0;
    IngestLedger::Verdict verdict;
};

IngestResult run_ingest(const IngestConfig& config);

}  // namespace aqbench
