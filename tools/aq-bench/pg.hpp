// A small libpq session for aq-bench's threads: one connection, reconnected after a fault.
//
// Faults (kill -9 of a backend, pg_terminate_backend, a postmaster crash) surface as a
// broken connection.  What the caller must know then is whether the statement it sent may
// have committed: Outcome::unknown.  A statement that failed on a live connection did not
// commit: Outcome::failed.  reconnect() retries until the server is back or the deadline.
#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace aqbench {

enum class Outcome { ok, failed, unknown };

struct ResultDeleter {
    void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ResultDeleter>;

class Session {
public:
    explicit Session(std::string conninfo) : conninfo_(std::move(conninfo)) {}
    ~Session() { close(); }
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Connects (or reconnects), trying until `patience` has passed; throws on giving up.
    void connect(std::chrono::milliseconds patience = std::chrono::seconds(60));
    void close();
    bool connected() const { return conn_ && PQstatus(conn_) == CONNECTION_OK; }
    int backend_pid() const { return conn_ ? PQbackendPID(conn_) : 0; }
    PGconn* raw() const { return conn_; }

    // Runs one statement with text parameters.  ok: result in *out (if given).
    // failed: an error on a live connection (message in last_error()).  unknown: the
    // connection broke, so a COMMIT (explicit or autocommit) may or may not have happened.
    Outcome exec(const std::string& sql, const std::vector<std::string>& params = {}, Result* out = nullptr);
    // For set-up statements: throws on anything but success.
    Result must(const std::string& sql, const std::vector<std::string>& params = {});

    const std::string& last_error() const { return error_; }
    const std::string& last_sqlstate() const { return sqlstate_; }

private:
    std::string conninfo_;
    PGconn* conn_ = nullptr;
    std::string error_, sqlstate_;
};

// The server's data directory and postmaster PID (for crash faults), read from a
// connection as a superuser; empty when not a superuser.
std::string server_setting(Session& s, const std::string& name);

}  // namespace aqbench
