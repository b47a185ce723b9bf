// Faults while a workload runs (--faults).
//
// Every `interval` the injector makes one fault, in turn:
//   - kill -9 of a random consumer's backend (only when the server runs on this machine and
//     this process may signal it: run as the server's OS user or root).  PostgreSQL then
//     restarts every backend, so every client reconnects;
//   - pg_terminate_backend of another random consumer's backend, from its own session.
// Postmaster crashes (with a data directory and crashes = N > 0) come on top, spread over the
// run by its progress (start()'s function: the fraction of the run done, 0..1; the queue
// workload gives messages dequeued / messages, or time / --seconds): crash i (1..N) comes at
// the first check (every 50 ms) at which progress >= i / (N + 1), at most one a check, so that
// all N come while the consumers still have messages to take, however long the run takes.  A crash is kill -9 of the postmaster (PID
// from <datadir>/postmaster.pid), then `pg_ctl start -w -l LOG` (LOG: the file the killed
// postmaster wrote to, else <datadir>/aq-bench-restart.log), retried up to 60 times 0.5 s apart,
// so that the server is left running.  Kills and terminations keep their own cadence (one
// `interval` after the previous one).  check_crash_setup() checks beforehand that crashes can be
// made and undone.
// Consumers register their backend PID after each (re)connect.  Each fault is counted and
// printed.  A kill or terminate that cannot be made (no consumer connected, e.g. while they
// reconnect after a crash) is tried again every 0.1 s for up to one interval, then counted as
// skipped; so is a postmaster that cannot be killed.
#pragma once

#include <atomic>
#include <condition_variable>
#include <functional>
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
    int crashes = 0;             // postmaster crashes per run, spread over it (see above)
    std::string pg_ctl = "pg_ctl";
};

// With crashes: throws std::runtime_error unless they can be made (not root, postmaster.pid
// readable, the postmaster signalable, pg_ctl runnable).  pg_ctl "pg_ctl" not on PATH becomes the pg_ctl beside
// the running postmaster's executable.
void check_crash_setup(FaultOptions& options);

class Session;

struct FaultCounts {
    int kills = 0, terminations = 0, crashes = 0, skipped = 0;
};

class FaultInjector {
public:
    FaultInjector(FaultOptions options, int consumers);
    ~FaultInjector();
    void register_consumer(int number, int backend_pid);
    // progress(): the fraction of the run done (0..1), for the crashes' schedule.
    void start(std::function<double()> progress);
    void stop();
    FaultCounts counts() const;

private:
    void run();
    int random_consumer_pid();
    bool crash_postmaster();
    bool kill_consumer();
    bool terminate_consumer(Session& admin);

    FaultOptions options_;
    std::vector<std::atomic<int>> pids_;
    std::function<double()> progress_;
    std::thread thread_;
    mutable std::mutex mutex_;
    std::condition_variable wake_;
    bool stopping_ = false;
    FaultCounts counts_;
};

}  // namespace aqbench
