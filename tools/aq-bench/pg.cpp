#include "pg.hpp"

#include <thread>

namespace aqbench {

void Session::connect(std::chrono::milliseconds patience) {
    auto deadline = std::chrono::steady_clock::now() + patience;
    for (;;) {
        close();
        conn_ = PQconnectdb(conninfo_.c_str());
        if (PQstatus(conn_) == CONNECTION_OK) {
            PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
            return;
        }
        error_ = PQerrorMessage(conn_);
        if (std::chrono::steady_clock::now() >= deadline)
            throw std::runtime_error("cannot connect (" + conninfo_ + "): " + error_);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
}

void Session::close() {
    if (conn_) PQfinish(conn_);
    conn_ = nullptr;
}

Outcome Session::exec(const std::string& sql, const std::vector<std::string>& params, Result* out) {
    error_.clear();
    sqlstate_.clear();
    if (!conn_) return Outcome::unknown;
    std::vector<const char*> values;
    values.reserve(params.size());
    for (auto& p : params) values.push_back(p.c_str());
    Result r(PQexecParams(conn_, sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(), nullptr,
                          nullptr, 0));
    ExecStatusType status = r ? PQresultStatus(r.get()) : PGRES_FATAL_ERROR;
    if (status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK) {
        if (out) *out = std::move(r);
        return Outcome::ok;
    }
    error_ = r ? PQresultErrorMessage(r.get()) : PQerrorMessage(conn_);
    const char* state = r ? PQresultErrorField(r.get(), PG_DIAG_SQLSTATE) : nullptr;
    sqlstate_ = state ? state : "";
    // Terminated backends report 57P01 before the connection goes; crash-restarts 57P02/57P03.
    if (PQstatus(conn_) != CONNECTION_OK || sqlstate_.rfind("57P", 0) == 0 || sqlstate_.empty())
        return Outcome::unknown;
    return Outcome::failed;
}

Result Session::must(const std::string& sql, const std::vector<std::string>& params) {
    Result r;
    if (exec(sql, params, &r) != Outcome::ok) throw std::runtime_error(sql.substr(0, 80) + ": " + error_);
    return r;
}

std::string server_setting(Session& s, const std::string& name) {
    Result r;
    if (s.exec("SELECT current_setting($1, true)", {name}, &r) != Outcome::ok || PQgetisnull(r.get(), 0, 0)) return {};
    return PQgetvalue(r.get(), 0, 0);
}

}  // namespace aqbench
