// The writing side of fast ingest: which INSERTs go to the ring, and how their rows get there.
//
// Protocol
//  * Planning.  The planner hook looks at every INSERT.  A statement with the
//    /*+ MEMOPTIMIZE_WRITE */ hint must target a table enabled with aq.enable_fast_ingest and
//    have a shape the ring can take (no ON CONFLICT, no RETURNING, not partitioned) and that
//    the drain can apply as the statement meant it (not produced by a rule, not through a view,
//    no INSERT rule on the table), else it fails at once (0A000): what the drain would reject
//    for a reason known at planning is never accepted.  A supported INSERT into an enabled
//    table — hinted or not — gets a Custom Scan "AQ Fast Ingest" on top of its ModifyTable;
//    whether it goes to the ring is decided at execution (the hint, or aq.memoptimize_write),
//    so a cached plan follows the setting.  The per-backend cache of enabled tables is only
//    marked stale by relcache invalidations, never freed from them (see writer.cpp).
//  * Execution.  In fast mode the Custom Scan runs only the ModifyTable's source plan and
//    appends each row, as a MinimalTuple in the table's layout, to a buffer of this
//    transaction (chunks per table, role and subtransaction).  Privileges are checked when the
//    executor starts (42501 at insert time, as for any insert); constraints, triggers and RLS
//    apply when the drain inserts the row.  The statement reports the rows it accepted.  A
//    row the drain rejects is kept in aq.fast_ingest_rejects, where its writer can read it.
//  * Transaction end (the handlers base/xact_end.hpp calls).  Pre-commit reserves ring space
//    for every chunk at once and copies them (see ring.hpp), waiting for space at most
//    aq.fast_ingest_wait_timeout (at most 60 s); a wait while the drain waits for one of this
//    transaction's locks is a deadlock: it fails with 40P01 (looked for every deadlock_timeout).
//    Commit marks the chunks COMMITTED and wakes the drain; abort marks them ABORTED.  A
//    subtransaction's rollback drops its chunks.  PREPARE TRANSACTION refuses buffered rows
//    (0A000), and a prepared transaction (which then has none) leaves nothing behind in this
//    session.  Commit, abort and prepare each forget the transaction's state, whose memory is
//    TopTransactionContext's; process exit checks that nothing stays counted.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/xact.h"
}

#include "ingest/ring.hpp"

namespace aq::ingest::writer {

void install_hooks();  // from _PG_init

void pre_commit();
void at_commit();
void at_abort();
void pre_prepare();
void at_prepare();
void at_exit();
void at_subxact(SubXactEvent event, SubTransactionId mine, SubTransactionId parent);

// The last sequence id of this session's committed fast-ingest rows (0: none yet).
uint64 session_write_hwm();

// While this session waits for the drain of its database (whose slot is given): is that drain
// waiting, directly or through other waiting processes, for a lock this session holds?  Then
// the wait would never end (a deadlock PostgreSQL cannot see).  Returns the drain's process
// id, or 0.  Takes the lock manager's partition locks briefly: call it about once per
// deadlock_timeout of waiting, not in a tight loop.
int drain_blocked_by_me(ring::DatabaseSlot* slot);

// Called when a table is enabled or disabled, so every backend replans.
void forget_enabled(Oid relid);

}  // namespace aq::ingest::writer
