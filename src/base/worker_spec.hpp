// A background worker of aq's library, described once: the three workers (the log writer, the
// fast-ingest launcher and its drain workers) differ only in these fields.
#pragma once

extern "C" {
#include "postgres.h"
#include "postmaster/bgworker.h"
}

#include <cstdio>
#include <cstring>

namespace aq::base {

// function: the exported entry point in aq.so; type: pg_stat_activity's backend_type;
// restart_seconds: BGW_NEVER_RESTART or a delay.  Starts once recovery has finished.
inline BackgroundWorker worker_spec(const char* function, const char* type, int flags, int restart_seconds) {
    BackgroundWorker worker;
    memset(&worker, 0, sizeof worker);
    worker.bgw_flags = flags;
    worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
    worker.bgw_restart_time = restart_seconds;
    snprintf(worker.bgw_library_name, BGW_MAXLEN, "aq");
    snprintf(worker.bgw_function_name, BGW_MAXLEN, "%s", function);
    snprintf(worker.bgw_name, BGW_MAXLEN, "%s", type);
    snprintf(worker.bgw_type, BGW_MAXLEN, "%s", type);
    return worker;
}

}  // namespace aq::base
