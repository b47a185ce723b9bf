// See pg.hpp for the protocol.
#include "pg.hpp"

#include <algorithm>
#include <thread>

namespace aqbench {

namespace {

// The transaction statements, prepared like the others (registered by transaction()).
const char* const begin_name = "aqb_begin";
const char* const commit_name = "aqb_commit";
const char* const rollback_name = "aqb_rollback";

bool success(const PGresult* r) {
    ExecStatusType status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

std::vector<const char*> c_strings(const std::vector<std::string>& params) {
    std::vector<const char*> values;
    values.reserve(params.size());
    for (auto& p : params) values.push_back(p.c_str());
    return values;
}

}  // namespace

void Session::connect(std::chrono::milliseconds patience) {
    auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
        close();
        conn_ = PQconnectdb(conninfo_.c_str());
        if (PQstatus(conn_) == CONNECTION_OK) {
            PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
            Outcome o = Outcome::ok;
            for (size_t i = 0; i < statements_.size() && o == Outcome::ok; i++) {
                o = ensure_prepared(statements_[i].first);
                if (o == Outcome::failed)
                    throw std::runtime_error("cannot prepare " + statements_[i].first + ": " + error_);
            }
            if (o == Outcome::ok) return;  // else the connection broke while preparing: again
        } else {
            error_ = PQerrorMessage(conn_);
        }
        if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("cannot connect (" + conninfo_ + "): " + error_);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

void Session::close() {
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
    prepared_.clear();
}

Outcome Session::classify(const PGresult* r) {
    error_ = r ? PQresultErrorMessage(r) : (conn_ ? PQerrorMessage(conn_) : "no connection\n");
    const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
    sqlstate_ = state ? state : "";
    // Terminated backends report 57P01 before the connection goes; crash-restarts 57P02/57P03.
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK || sqlstate_.rfind("57P", 0) == 0 || sqlstate_.empty())
        return Outcome::unknown;
    return Outcome::failed;
}

Outcome Session::exec(const std::string& sql, const std::vector<std::string>& params, Result* out) {
    error_.clear();
    sqlstate_.clear();
    if (!conn_) return Outcome::unknown;
    auto values = c_strings(params);
    Result r(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                          nullptr, 0));
    if (success(r.get())) {
        if (out) *out = std::move(r);
        return Outcome::ok;
    }
    return classify(r.get());
}

Result Session::must(const std::string& sql, const std::vector<std::string>& params) {
    Result r;
    if (exec(sql, params, &r) != Outcome::ok) throw std::runtime_error(sql.substr(0, 80) + ": " + error_);
    return r;
}

void Session::prepare(const std::string& name, const std::string& sql) {
    auto it = std::find_if(statements_.begin(), statements_.end(), [&](auto& s) { return s.first == name; });
    if (it == statements_.end()) {
        statements_.emplace_back(name, sql);
    } else if (it->second != sql) {
        it->second = sql;
        if (prepared_.erase(name) && conn_) exec("DEALLOCATE " + name);
    }
    if (conn_ && ensure_prepared(name) == Outcome::failed)
        throw std::runtime_error("cannot prepare " + name + ": " + error_);
}

Outcome Session::ensure_prepared(const std::string& name) {
    if (prepared_.count(name)) return Outcome::ok;
    auto it = std::find_if(statements_.begin(), statements_.end(), [&](auto& s) { return s.first == name; });
    if (it == statements_.end()) {
        error_ = "aq-bench: no prepared statement " + name + " registered\n";
        sqlstate_ = "26000";
        return Outcome::failed;
    }
    if (!conn_) return Outcome::unknown;
    Result r(PQprepare(conn_, name.c_str(), it->second.c_str(), 0, nullptr));
    if (success(r.get())) {
        prepared_.insert(name);
        return Outcome::ok;
    }
    return classify(r.get());
}

Outcome Session::exec_prepared(const std::string& name, const std::vector<std::string>& params, Result* out) {
    error_.clear();
    sqlstate_.clear();
    if (!conn_) return Outcome::unknown;
    Outcome o = ensure_prepared(name);
    if (o != Outcome::ok) return o;
    auto values = c_strings(params);
    Result r(PQexecPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr, nullptr, 0));
    if (success(r.get())) {
        if (out) *out = std::move(r);
        return Outcome::ok;
    }
    return classify(r.get());
}

Outcome Session::transaction(const std::string& name, const std::vector<std::string>& params, Result* out,
                             const std::function<Outcome(Session&, const PGresult*)>& before_commit) {
    error_.clear();
    sqlstate_.clear();
    if (!conn_) return Outcome::unknown;
    static const char* const transaction_statements[][2] = {
        {begin_name, "BEGIN"}, {commit_name, "COMMIT"}, {rollback_name, "ROLLBACK"}};
    for (auto& statement : transaction_statements) {
        const char* n = statement[0];
        if (std::none_of(statements_.begin(), statements_.end(), [&](auto& s) { return s.first == n; }))
            statements_.emplace_back(n, statement[1]);
    }
    for (const std::string& n : {std::string(begin_name), name, std::string(commit_name), std::string(rollback_name)}) {
        Outcome o = ensure_prepared(n);
        if (o != Outcome::ok) return o;
    }

    // Round trip 1: BEGIN and the statement, then a Sync (which leaves the explicit transaction open).
    auto values = c_strings(params);
    bool sent = PQenterPipelineMode(conn_) == 1 &&
                PQsendQueryPrepared(conn_, begin_name, 0, nullptr, nullptr, nullptr, 0) == 1 &&
                PQsendQueryPrepared(conn_, name.c_str(), static_cast<int>(values.size()), values.data(), nullptr,
                                    nullptr, 0) == 1 &&
                PQpipelineSync(conn_) == 1;
    if (!sent) {
        error_ = PQerrorMessage(conn_);
        close();
        return Outcome::unknown;
    }
    // The two results (each followed by a NULL), then PGRES_PIPELINE_SYNC.  After an error the rest
    // comes back PGRES_PIPELINE_ABORTED.  Stop early when the connection broke.
    Result results[2];
    int received = 0;
    bool synced = false;
    Outcome first_error = Outcome::ok;
    for (int nulls = 0; nulls < 2;) {
        PGresult* raw = PQgetResult(conn_);
        if (!raw) {
            if (PQstatus(conn_) != CONNECTION_OK) break;
            nulls++;  // two in a row: the pipeline is out of step; give up on this connection
            continue;
        }
        nulls = 0;
        Result r(raw);
        ExecStatusType status = PQresultStatus(raw);
        if (status == PGRES_PIPELINE_SYNC) {
            synced = true;
            break;
        }
        if (!success(raw) && status != PGRES_PIPELINE_ABORTED && first_error == Outcome::ok)
            first_error = classify(raw);  // the first error's message and SQLSTATE
        if (received < 2) results[received++] = std::move(r);
        if (first_error == Outcome::unknown || PQstatus(conn_) != CONNECTION_OK) break;
    }
    bool started = received == 2 && success(results[0].get()) && success(results[1].get());
    if (!synced || first_error == Outcome::unknown || PQexitPipelineMode(conn_) != 1 ||
        (first_error == Outcome::ok && !started)) {
        // No COMMIT was sent, but the connection broke: unknown, as for exec().
        if (error_.empty() && conn_) error_ = PQerrorMessage(conn_);
        if (error_.empty()) error_ = "incomplete pipeline\n";
        close();
        if (out && started) *out = std::move(results[1]);
        return Outcome::unknown;
    }
    if (first_error == Outcome::failed) {  // rolled back, and the session made usable again
        std::string error = error_, sqlstate = sqlstate_;
        if (PQtransactionStatus(conn_) != PQTRANS_IDLE && exec_prepared(rollback_name) != Outcome::ok) close();
        error_ = error;
        sqlstate_ = sqlstate;
        return Outcome::failed;
    }
    if (before_commit) {  // in the same transaction, before the COMMIT is sent
        Outcome o = before_commit(*this, results[1].get());
        if (o == Outcome::unknown) {  // as above: the caller reconnects
            close();
            return Outcome::unknown;
        }
        if (o == Outcome::failed) {
            std::string error = error_, sqlstate = sqlstate_;
            if (PQtransactionStatus(conn_) != PQTRANS_IDLE && exec_prepared(rollback_name) != Outcome::ok) close();
            error_ = error;
            sqlstate_ = sqlstate;
            return Outcome::failed;
        }
    }
    // Round trip 2: COMMIT, only once the statement's result is here.
    if (out) *out = std::move(results[1]);
    return exec_prepared(commit_name);
}

std::string server_setting(Session& s, const std::string& name) {
    Result r;
    if (s.exec("SELECT current_setting($1, true)", {name}, &r) != Outcome::ok || PQgetisnull(r.get(), 0, 0)) return {};
    return PQgetvalue(r.get(), 0, 0);
}

}  // namespace aqbench
