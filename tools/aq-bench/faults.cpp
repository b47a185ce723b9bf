// See faults.hpp for the protocol.
#include "faults.hpp"

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>

#include "pg.hpp"

namespace aqbench {

namespace {

using Clock = std::chrono::steady_clock;

std::string sh_quote(const std::string& s) {
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

int postmaster_pid(const std::string& data_directory) {
    std::ifstream pidfile(data_directory + "/postmaster.pid");
    int pid = 0;
    return pidfile >> pid && pid > 0 ? pid : 0;
}

bool runs(const std::string& pg_ctl) { return std::system((sh_quote(pg_ctl) + " --version >/dev/null 2>&1").c_str()) == 0; }

}  // namespace

void check_crash_setup(FaultOptions& options) {
    if (options.crashes <= 0 || options.data_directory.empty()) return;
    if (geteuid() == 0)
        throw std::runtime_error("postmaster crashes: run aq-bench as the server's OS user (pg_ctl cannot restart "
                                 "the server as root)");
    int pid = postmaster_pid(options.data_directory);
    if (pid == 0)
        throw std::runtime_error("cannot read the postmaster's PID from " + options.data_directory +
                                 "/postmaster.pid (is the server running? run aq-bench as its OS user)");
    if (kill(pid, 0) != 0)
        throw std::runtime_error("cannot signal the postmaster (PID " + std::to_string(pid) +
                                 "): run aq-bench as the server's OS user");
    if (options.pg_ctl == "pg_ctl" && !runs(options.pg_ctl)) {
        char exe[4096];
        ssize_t n = readlink(("/proc/" + std::to_string(pid) + "/exe").c_str(), exe, sizeof exe - 1);
        std::string path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
        if (path.rfind('/') != std::string::npos) options.pg_ctl = path.substr(0, path.rfind('/')) + "/pg_ctl";
    }
    if (!runs(options.pg_ctl))
        throw std::runtime_error("cannot run " + options.pg_ctl + " (--pg-ctl), which restarts the server after a crash");
}

FaultInjector::FaultInjector(FaultOptions options, int consumers) : options_(std::move(options)), pids_(consumers) {
    for (auto& p : pids_) p = 0;
}

FaultInjector::~FaultInjector() { stop(); }

void FaultInjector::register_consumer(int number, int backend_pid) {
    if (number >= 0 && number < static_cast<int>(pids_.size())) pids_[number] = backend_pid;
}

void FaultInjector::start(std::function<double()> progress) {
    progress_ = std::move(progress);
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

bool FaultInjector::kill_consumer() {
    int pid = random_consumer_pid();
    if (pid <= 0 || kill(pid, SIGKILL) != 0) return false;
    std::fprintf(stderr, "aq-bench: fault: backend %d killed (-9)\n", pid);
    return true;
}

bool FaultInjector::terminate_consumer(Session& admin) {
    int pid = random_consumer_pid();
    if (pid <= 0) return false;
    try {
        if (!admin.connected()) admin.connect(std::chrono::seconds(30));
        Result r;
        if (admin.exec("SELECT pg_terminate_backend($1::int)", {std::to_string(pid)}, &r) == Outcome::ok) {
            std::fprintf(stderr, "aq-bench: fault: backend %d terminated\n", pid);
            return true;
        }
        admin.close();
    } catch (const std::exception&) {
    }
    return false;
}

bool FaultInjector::crash_postmaster() {
    int pid = postmaster_pid(options_.data_directory);
    // The restarted server logs where this one did (pg_ctl -l appends), else into the data directory.
    std::string log = options_.data_directory + "/aq-bench-restart.log";
    char target[4096];
    ssize_t n = pid > 0 ? readlink(("/proc/" + std::to_string(pid) + "/fd/2").c_str(), target, sizeof target - 1) : -1;
    if (n > 1 && target[0] == '/' && std::string(target, static_cast<size_t>(n)) != "/dev/null")
        log.assign(target, static_cast<size_t>(n));
    if (pid == 0 || kill(pid, SIGKILL) != 0) {
        std::fprintf(stderr, "aq-bench: cannot kill the postmaster of %s\n", options_.data_directory.c_str());
        return false;
    }
    std::fprintf(stderr, "aq-bench: fault: postmaster %d killed (-9)\n", pid);
    // Its backends leave when they see it gone; until then the new postmaster refuses to start.
    std::string start = sh_quote(options_.pg_ctl) + " start -w -t 60 -D " + sh_quote(options_.data_directory) +
                        " -l " + sh_quote(log) + " >/dev/null 2>&1";
    for (int attempt = 0; attempt < 60; attempt++) {
        std::this_thread::sleep_for(std::chrono::milliseconds(500));
        if (std::system(start.c_str()) == 0) {
            std::fprintf(stderr, "aq-bench: fault: postmaster restarted (crash %d)\n", counts().crashes + 1);
            return true;
        }
    }
    std::fprintf(stderr, "aq-bench: the postmaster did not restart: %s is down\n", options_.data_directory.c_str());
    return true;  // it did crash
}

void FaultInjector::run() {
    Session admin(options_.conninfo);
    const auto interval =
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.interval_seconds));
    const bool crashing = !options_.data_directory.empty() && options_.crashes > 0 && progress_;
    int turn = 0, crash_attempts = 0;
    auto next_fault = Clock::now() + interval;
    bool due = false;  // the current kill/terminate turn came due (at due_since) and is not over
    Clock::time_point due_since;
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        bool crash_pending = crashing && crash_attempts < options_.crashes;
        auto wake_at = crash_pending ? std::min(next_fault, Clock::now() + std::chrono::milliseconds(50)) : next_fault;
        if (wake_.wait_until(lock, wake_at, [this] { return stopping_; })) return;
        lock.unlock();
        if (crash_pending && progress_() >= double(crash_attempts + 1) / (options_.crashes + 1)) {
            crash_attempts++;
            bool crashed = crash_postmaster();
            admin.close();
            lock.lock();
            (crashed ? counts_.crashes : counts_.skipped)++;
            continue;
        }
        auto now = Clock::now();
        if (now < next_fault) {
            lock.lock();
            continue;
        }
        if (!due) due = true, due_since = next_fault;
        bool killing = turn % 2 == 0, enabled = killing ? options_.kill : options_.terminate;
        bool done = enabled && (killing ? kill_consumer() : terminate_consumer(admin));
        now = Clock::now();
        lock.lock();
        if (done || !enabled || now - due_since >= interval) {  // this turn is over
            if (done)
                (killing ? counts_.kills : counts_.terminations)++;
            else
                counts_.skipped++;
            turn++;
            due = false;
            next_fault = now + interval;
        } else {
            next_fault = now + std::chrono::milliseconds(100);  // e.g. consumers reconnecting: again soon
        }
    }
}

}  // namespace aqbench
