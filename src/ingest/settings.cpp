extern "C" {
#include "postgres.h"
#include "utils/guc.h"
}

#include <climits>

#include "ingest/settings.hpp"

namespace aq::ingest::settings {

int buffer_kb = 128 * 1024;
bool memoptimize_write = false;
int wait_timeout_ms = 10000;
int drain_delay_ms = 0;

namespace {

bool preloaded_library = false;

// Without the ring, routing inserts to it cannot work: refuse rather than fail every insert later.
bool check_memoptimize_write(bool* value, void**, GucSource source) {
    if (*value && !preloaded_library && source >= PGC_S_INTERACTIVE) {
        GUC_check_errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE);
        GUC_check_errmsg("aq.memoptimize_write needs aq in shared_preload_libraries");
        GUC_check_errhint("Add aq to shared_preload_libraries in postgresql.conf and restart the server.");
        return false;
    }
    return true;
}

}  // namespace

void define(bool preloaded) {
    preloaded_library = preloaded;
    // A postmaster parameter can only be defined while the postmaster loads the library.
    if (preloaded)
        DefineCustomIntVariable("aq.fast_ingest_buffer",
                            "Size of the shared-memory ring that buffers fast-ingest rows (Oracle's large pool).",
                            "One transaction's fast-ingest rows must fit in it.", &buffer_kb, 128 * 1024, 1024,
                            MAX_KILOBYTES, PGC_POSTMASTER, GUC_UNIT_KB, nullptr, nullptr, nullptr);
    DefineCustomBoolVariable("aq.memoptimize_write",
                             "Sends every plain INSERT into a fast-ingest table to the ring, as if it had the "
                             "/*+ MEMOPTIMIZE_WRITE */ hint.",
                             "For clients that cannot add the hint.  Statements the ring cannot take (ON CONFLICT, "
                             "RETURNING) stay ordinary inserts.",
                             &memoptimize_write, false, PGC_USERSET, 0, check_memoptimize_write, nullptr, nullptr);
    // A commit that waits for ring space holds every lock and the snapshot horizon of its
    // transaction.  The drain frees a full ring in seconds when it runs; a ring that frees
    // nothing for a minute has a stopped or stalled drain, and a longer wait only holds those
    // locks longer (and lets one session pin the ring's writers for good).
    DefineCustomIntVariable("aq.fast_ingest_wait_timeout",
                            "Longest time a commit waits for space in the fast-ingest ring.",
                            "Then the commit fails and the transaction rolls back.  At most 60 s.", &wait_timeout_ms,
                            10000, 0, max_wait_timeout_ms, PGC_USERSET, GUC_UNIT_MS, nullptr, nullptr, nullptr);
    DefineCustomIntVariable("aq.fast_ingest_drain_delay",
                            "Time committed fast-ingest rows stay in the ring before the drain applies them.",
                            "0 (default) applies them at once.  For tests and demonstrations that need undrained "
                            "rows; a clean shutdown ignores it.",
                            &drain_delay_ms, 0, 0, INT_MAX, PGC_SIGHUP, GUC_UNIT_MS, nullptr, nullptr, nullptr);
}

}  // namespace aq::ingest::settings
