// fmgr entry points of commit modes: the procedure aq.commit (Oracle's COMMIT WRITE ...),
// and the functions that show the mode: aq.commit_mode, aq.commit_settings, aq.last_commit,
// aq.commit_stats.  The modes themselves live in src/commit/.
extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "funcapi.h"
#include "nodes/parsenodes.h"
#include "utils/builtins.h"
#include "utils/pg_lsn.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"
}

#include <string>
#include <vector>

#include "commit/committer.hpp"
#include "commit/log_writer.hpp"
#include "commit/settings.hpp"
#include "base/guard.hpp"

namespace aq {

namespace {

using namespace aq::commit;

void require_preloaded() {
    if (!settings::preloaded())
        throw Error(sqlstate::object_not_in_prerequisite_state,
                    "aq's commit modes need aq in shared_preload_libraries", {},
                    "Add 'aq' to shared_preload_libraries and restart the server.");
}

Datum text_datum(const char* s) {
    return PointerGetDatum(cstring_to_text(s));
}


// CALL aq.commit(mode text DEFAULT NULL): COMMIT WRITE [IMMEDIATE|BATCH] [WAIT|NOWAIT].
Datum commit_procedure(FunctionCallInfo fcinfo) {
    require_preloaded();
    const char* mode = PG_ARGISNULL(0) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(0));
    WriteClause clause = parse_write_clause(mode);
    bool can_commit = fcinfo->context && IsA(fcinfo->context, CallContext) &&
                      !castNode(CallContext, fcinfo->context)->atomic && !IsSubTransaction();
    if (!can_commit) {
        std::string set_local = clause.empty()
                                    ? std::string("COMMIT")
                                    : "SET LOCAL aq.commit_write = '" + format_write_clause(clause) + "' and then COMMIT";
        throw Error(sqlstate::invalid_transaction_termination, "aq.commit() cannot commit the transaction here",
                    "PostgreSQL allows a procedure to commit only when it is called with CALL outside a "
                    "transaction block, from another such procedure, and outside an exception block; not inside "
                    "BEGIN ... COMMIT or a function.",
                    "In this transaction, use " + set_local + ".");
    }
    if (!clause.empty()) settings::set_transaction_clause(clause);
    base::call([] {
        if (SPI_connect_ext(SPI_OPT_NONATOMIC) != SPI_OK_CONNECT) elog(ERROR, "SPI_connect_ext failed");
        SPI_commit();
        SPI_finish();
    });
    PG_RETURN_VOID();
}

// aq.commit_mode(): the mode this transaction would commit with, and why.
Datum commit_mode(FunctionCallInfo fcinfo) {
    require_preloaded();
    bool involved = settings::any_set();
    Decision d = settings::decide();
    std::string wait_from = involved ? describe_wait(d.wait_from) : "synchronous_commit (no aq setting)";
    std::string logging_from = describe_logging(d.logging_from);
    Datum values[6];
    bool nulls[6] = {};
    base::call([&] {
        values[0] = text_datum(name(d.forced ? Wait::force_wait : d.wait));
        values[1] = text_datum(name(d.logging));
        values[2] = text_datum(name(d.sync));
        values[3] = text_datum(wait_from.c_str());
        values[4] = text_datum(logging_from.c_str());
        values[5] = BoolGetDatum(d.forced);
    });
    return base::composite_result(fcinfo, values, nulls);
}

// aq.commit_settings(): every level at which a commit parameter is set.
Datum commit_settings(FunctionCallInfo fcinfo) {
    require_preloaded();
    std::vector<settings::LevelValue> rows = settings::levels();
    base::call([&] {
        InitMaterializedSRF(fcinfo, 0);
        auto* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
        for (const auto& r : rows) {
            Datum values[3] = {text_datum(name(r.level)), text_datum(r.parameter.c_str()),
                               text_datum(r.value.c_str())};
            bool nulls[3] = {};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
    return 0;
}

// aq.last_commit(): this session's last commit, and whether it is durable now.
Datum last_commit(FunctionCallInfo fcinfo) {
    require_preloaded();
    const committer::LastCommit& c = committer::last_commit();
    Datum values[8];
    bool nulls[8] = {};
    if (!c.valid) {
        for (bool& n : nulls) n = true;
        return base::composite_result(fcinfo, values, nulls);
    }
    XLogRecPtr flushed = GetFlushRecPtr(nullptr);
    base::call([&] {
        values[0] = LSNGetDatum(c.lsn);
        values[1] = LSNGetDatum(flushed);
        values[2] = BoolGetDatum(c.lsn <= flushed);
        values[3] = BoolGetDatum(c.durable_on_return);
        values[4] = text_datum(name(c.decision.forced ? Wait::force_wait : c.decision.wait));
        values[5] = text_datum(name(c.decision.logging));
        values[6] = text_datum(name(c.decision.sync));
        values[7] = TimestampTzGetDatum(c.at);
    });
    return base::composite_result(fcinfo, values, nulls);
}

// aq.commit_stats(all_sessions boolean DEFAULT false)
Datum commit_stats(FunctionCallInfo fcinfo) {
    require_preloaded();
    bool all = !PG_ARGISNULL(0) && PG_GETARG_BOOL(0);
    committer::Stats s = all ? committer::cluster_stats() : committer::session_stats();
    Datum values[7] = {Int64GetDatum(s.commits),         Int64GetDatum(s.waited),
                       Int64GetDatum(s.not_waited),      Int64GetDatum(s.batch_gathers),
                       Int64GetDatum(s.batch_followers), Int64GetDatum(s.log_writer_requests),
                       Int64GetDatum(log_writer::flushes())};
    bool nulls[7] = {};
    nulls[6] = !all;  // the log writer's flushes are the cluster's, not a session's
    return base::composite_result(fcinfo, values, nulls);
}

}  // namespace

}  // namespace aq

AQ_SQL_FUNCTION(aq_commit, aq::commit_procedure)
AQ_SQL_FUNCTION(aq_commit_mode, aq::commit_mode)
AQ_SQL_FUNCTION(aq_commit_settings, aq::commit_settings)
AQ_SQL_FUNCTION(aq_last_commit, aq::last_commit)
AQ_SQL_FUNCTION(aq_commit_stats, aq::commit_stats)
