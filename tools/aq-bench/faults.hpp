// Faults while a workload runs (--faults).
//
// Every `interval` the injector picks one fault, in turn:
//   - kill -9 of a random consumer's backend (only when the server runs on this machine and
//     this process may signal it: run as the server's OS user or root).  PostgreSQL then
//     restarts every backend, so every client reconnects;
//   - pg_terminate_backend of another random consumer's backend, from its own session;
//   - with a data directory: kill -9 of the postmaster, then `pg_ctl start`, up to `crashes`
//     times.
// Consumers register their backend PID after each (re)connect.  Each fault is counted and
// printed; a fault that cannot be made (no consumer connected) is skipped.
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace aqbench {

struct FaultOptions {
    std::string conninfo;
    double interval_seconds = 2;
    bool kill = true;            // kill -9 of consumer backends
    bool terminate = true;       // pg_terminate_backend
    std::string data_directory;  // for postmaster crashes
    int crashes = 0;
    std::string pg_ctl = "pg_ctl";
};

struct FaultCounts {
    int kills = 0, terminations = 0, crashes = 0, skipped = 0;
};

class FaultInjector {
public:
    FaultInjector(FaultOptions options, int consumers);
    ~FaultInjector();
    void register_consumer(int number, int backend_pid);
    void start();
    void stop();
    FaultCounts counts() const;

private:
    void run();
    int random_consumer_pid();
    void crash_postmaster();

    FaultOptions options_;
    std::vector<std::atomic<int>> pids_;
    std::thread thread_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    FaultCounts counts_;
};

}  // namespace aqbench
