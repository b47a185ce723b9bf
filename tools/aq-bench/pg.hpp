// A small libpq session for aq-bench's threads: one connection, reconnected after a fault.
//
// Faults (kill -9 of a backend, pg_terminate_backend, a postmaster crash) surface as a
// broken connection.  What the caller must know then is whether the statement it sent may
// have committed: Outcome::unknown.  A statement that failed on a live connection did not
// commit: Outcome::failed.  reconnect() retries until the server is back or the deadline.
//
// Prepared statements: prepare(name, sql) registers a statement; it is prepared (PQprepare)
// on the current connection and again after every (re)connect, and run by exec_prepared()
// (PQexecPrepared) or transaction().  A registered statement not yet prepared on the current
// connection is prepared just before it runs.  Preparing counts like running: a broken
// connection is unknown, an error on a live one failed (connect() throws on the latter).
//
// transaction(name): BEGIN; <name>; COMMIT as prepared statements in two round trips: BEGIN and
// the statement pipelined (libpq pipeline mode: two PQsendQueryPrepared, one PQpipelineSync),
// then, once the statement's result is here, COMMIT (PQexecPrepared).  Why not all three in one:
// the server flushes a pipeline's results at its Sync, so a COMMIT in the same pipeline could take
// effect while the results never reach the client (a kill -9 in between): committed messages the
// client never saw, which the checker rightly counts as lost (it did: 10 of 6,000 under kill -9
// every 0.3 s).  Outcome:
//   ok       committed; *out = the statement's result.
//   failed   the statement failed on a live connection (its error in last_error() and
//            last_sqlstate()): it was rolled back (a prepared ROLLBACK) before returning; or the
//            COMMIT failed on a live connection (the server rolled back).
//   unknown  the connection broke (or an error 57P*, or one without SQLSTATE), as for exec(): it
//            may have committed only if the COMMIT was sent.  *out = the statement's result if it
//            arrived, so that the caller can report what it got as uncertain.  The caller reconnects.
// With before_commit (pgmq's read, then its delete: queue_workload.cpp), that step runs on the
// statement's result between the two round trips, in the same transaction; its failure on a live
// connection rolls back (failed), a broken connection is unknown with *out left empty (no COMMIT
// was sent).  Three round trips then.

#pragma once

#include <libpq-fe.h>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
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

    // Connects (or reconnects) and prepares the registered statements, trying until
    // `patience` has passed; throws on giving up, or if a statement cannot be prepared.
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

    // Registers `sql` as prepared statement `name` (parameter types from the casts in sql) and
    // prepares it now if connected.  Throws if it fails on a live connection.
    void prepare(const std::string& name, const std::string& sql);
    // Runs a registered statement; outcomes as for exec().
    Outcome exec_prepared(const std::string& name, const std::vector<std::string>& params = {},
                          Result* out = nullptr);
    // BEGIN; name | COMMIT in two round trips (see above).
    Outcome transaction(const std::string& name, const std::vector<std::string>& params = {}, Result* out = nullptr,
                        const std::function<Outcome(Session&, const PGresult*)>& before_commit = {});

    const std::string& last_error() const { return error_; }
    const std::string& last_sqlstate() const { return sqlstate_; }

private:
    Outcome classify(const PGresult* r);        // sets error_/sqlstate_ for a result that is not a success
    Outcome ensure_prepared(const std::string& name);

    std::string conninfo_;
    PGconn* conn_ = nullptr;
    std::string error_, sqlstate_;
    std::vector<std::pair<std::string, std::string>> statements_;  // registered: name, sql
    std::set<std::string> prepared_;                               // prepared on this connection
};

// The server's data directory and postmaster PID (for crash faults), read from a
// connection as a superuser; empty when not a superuser.
std::string server_setting(Session& s, const std::string& name);

}  // namespace aqbench
