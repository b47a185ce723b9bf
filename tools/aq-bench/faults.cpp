// See faults.hpp for the protocol.
#include "faults.hpp"

#include <signal.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>

#include "pg.hpp"

namespace aqbench {

FaultInjector::FaultInjector(FaultOptions options, int consumers) : options_(std::move(options)), pids_(consumers) {
    for (auto& p : pids_) p = 0;
}

FaultInjector::~FaultInjector() { stop(); }

void FaultInjector::register_consumer(int number, int backend_pid) {
    if (number >= 0 && number < static_cast<int>(pids_.size())) pids_[number] = backend_pid;
}

void FaultInjector::start() {
    stopping_ = false;
    thread_ = std::thread([this] { run(); });
}

void FaultInjector::stop() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stopping_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable()) thread_.join();
}

FaultCounts FaultInjector::counts() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return counts_;
}

int FaultInjector::random_consumer_pid() {
    static thread_local std::mt19937 random(12345);
    std::vector<int> live;
    for (auto& p : pids_)
        if (p.load() > 0) live.push_back(p.load());
    if (live.empty()) return 0;
    return live[std::uniform_int_distribution<size_t>(0, live.size() - 1)(random)];
}

void FaultInjector::crash_postmaster() {
    std::ifstream pidfile(options_.data_directory + "/postmaster.pid");
    int pid = 0;
    if (!(pidfile >> pid) || pid <= 0 || kill(pid, SIGKILL) != 0) {
        std::fprintf(stderr, "aq-bench: cannot kill the postmaster of %s\n", options_.data_directory.c_str());
        return;
    }
    // Its backends leave when they see it gone; until then the new postmaster refuses to start.
    std::string start = options_.pg_ctl + " start -w -t 60 -D '" + options_.data_directory + "' -l '" +
                        options_.data_directory + "/aq-bench-restart.log' >/dev/null 2>&1";
    for (int attempt = 0; attempt < 60; attempt++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (std::system(start.c_str()) == 0) {
            std::fprintf(stderr, "aq-bench: fault: postmaster %d killed (-9) and restarted\n", pid);
            return;
        }
    }
    std::fprintf(stderr, "aq-bench: the postmaster did not restart\n");
}

void FaultInjector::run() {
    Session admin(options_.conninfo);
    int turn = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        auto interval = std::chrono::duration<double>(options_.interval_seconds);
        if (wake_.wait_for(lock, interval, [this] { return stopping_; })) return;
        lock.unlock();
        int kind = turn++ % 3;
        if (kind == 2 && (options_.data_directory.empty() || counts_.crashes >= options_.crashes)) kind = turn % 2;
        bool done = false;
        if (kind == 0 && options_.kill) {
            int pid = random_consumer_pid();
            if (pid > 0 && kill(pid, SIGKILL) == 0) {
                std::fprintf(stderr, "aq-bench: fault: backend %d killed (-9)\n", pid);
                std::lock_guard<std::mutex> g(mutex_);
                counts_.kills++;
                done = true;
            }
        } else if (kind == 1 && options_.terminate) {
            int pid = random_consumer_pid();
            if (pid > 0) {
                try {
                    if (!admin.connected()) admin.connect(std::chrono::seconds(30));
                    Result r;
                    if (admin.exec("SELECT pg_terminate_backend($1::int)", {std::to_string(pid)}, &r) == Outcome::ok) {
                        std::fprintf(stderr, "aq-bench: fault: backend %d terminated\n", pid);
                        std::lock_guard<std::mutex> g(mutex_);
                        counts_.terminations++;
                        done = true;
                    } else {
                        admin.close();
                    }
                } catch (const std::exception&) {
                }
            }
        } else if (kind == 2) {
            crash_postmaster();
            admin.close();
            std::lock_guard<std::mutex> g(mutex_);
            counts_.crashes++;
            done = true;
        }
        lock.lock();
        if (!done) counts_.skipped++;
    }
}

}  // namespace aqbench
