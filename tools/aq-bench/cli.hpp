// Command-line parsing of aq-bench's workloads (Boost.Program_options), apart from main so
// that the rules are unit-tested (test/unit/aq_bench_cli_test.cpp).
#pragma once

#include <boost/program_options/errors.hpp>

#include <string>
#include <vector>

#include "faults.hpp"
#include "other_workloads.hpp"
#include "queue_workload.hpp"

namespace aqbench {

// `aq-bench queue` with comma lists expanded: one run per system x producers x consumers x batch.
struct QueueCommand {
    bool help = false;
    std::string help_text;
    std::vector<QueueConfig> runs;
    std::string csv;
    bool faults = false;
    FaultOptions fault_options;
};

// Throws boost::program_options::error with a message naming the bad option.
QueueCommand parse_queue_command(const std::vector<std::string>& args);

struct CommitCommand {
    bool help = false;
    std::string help_text;
    std::vector<CommitConfig> runs;  // sessions x modes
    std::string csv;
};
CommitCommand parse_commit_command(const std::vector<std::string>& args);

struct IngestCommand {
    bool help = false;
    std::string help_text;
    std::vector<IngestConfig> runs;  // system x writers x rows per insert
    std::string csv;
};
IngestCommand parse_ingest_command(const std::vector<std::string>& args);

// "1,10,100" -> {1, 10, 100}; each a positive integer.
std::vector<int> parse_int_list(const std::string& text, const char* option);

}  // namespace aqbench
