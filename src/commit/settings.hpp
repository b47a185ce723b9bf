// Commit-mode settings: the parameters, and the value each one has at each level.
//
// Protocol — how the levels are known (PostgreSQL keeps only the winning value of a
// parameter, so aq records the others as they are set):
//
//  * system:      the postmaster's own value (postgresql.conf, ALTER SYSTEM, -c).  Only the
//                 postmaster sees nothing but system-level settings, so its assign hooks
//                 publish them in one 64-bit word of shared memory; every backend reads the
//                 live word at each commit, before it has even processed the SIGHUP itself.
//  * database, role, client options: applied once, at connection start; the check hook sees
//                 each with its GucSource and keeps a copy (ALTER ROLE ALL SET counts as role,
//                 connection options as session).
//  * session, transaction: read from PostgreSQL's own GUC stack at commit (SET vs SET LOCAL).
//
// Every value carries an "extra" (in guc.c's memory: compat/guc.hpp) with its source and a stamp
// from a per-process counter, so that between aq.commit_write and aq.commit_wait at one level
// the value set last wins.  The parameters are USERSET; they can only make a session's own
// commits faster or slower — FORCE_WAIT, once set above, cannot be lowered below.
//
// Without shared_preload_libraries the check hooks refuse every non-default value: the
// system level and the per-connection levels cannot be known then.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "commit/mode.hpp"

namespace aq::commit::settings {

void define(bool preloaded);  // from _PG_init, once
bool preloaded();
std::size_t shmem_size();
void shmem_startup();

// False when no aq commit parameter is set at any level: aq then leaves commits to
// PostgreSQL alone.  Cheap: called at every commit.
bool any_set();

// The mode the current transaction would commit with now (with nothing set: what
// synchronous_commit says).  May raise (GUC machinery).
Decision decide();

// aq.commit_wait_level: what WAIT means for synchronous_commit.
SyncCommit wait_level();
// aq.batch_commit_window: microseconds a WAIT/BATCH commit waits for peers in flight.
int batch_window_us();

// One parameter's value at one level, for aq.commit_settings().
struct LevelValue {
    Level level;
    std::string parameter;
    std::string value;
};
std::vector<LevelValue> levels();

// SET LOCAL aq.commit_write = '<clause>' (the transaction level).
void set_transaction_clause(const WriteClause& clause);
SyncCommit current_synchronous_commit();

}  // namespace aq::commit::settings
