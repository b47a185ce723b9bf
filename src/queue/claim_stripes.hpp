// Claim stripes (docs/design-horizon-storage.md, section 3, M1): the LWLocks under which a consumer
// of a queue table that stores each message once takes a message (once_walk.hpp).
//
// Protocol
//  1. A consumer c takes message m only while it holds stripe (queue table, c, m): it looks for a
//     receipt of c for m (under the latest state: SnapshotDirty) and, finding none, inserts its
//     own, heap and index, before it lets the stripe go.  Two sessions of c racing for m serialise
//     there: the second finds the first's receipt (committed or in progress) and passes m, as
//     SKIP LOCKED passes a locked row; neither waits for the other's transaction.
//  2. A stripe is held for that probe and insert only: no transaction wait, no lock wait, no
//     call out (an error releases it with every LWLock at the abort).  Different messages and
//     consumers share a stripe only by their hash, which costs a moment's wait, never a wrong
//     answer.
//  3. stripe_count stripes, a named LWLock tranche registered in _PG_init.  Without
//     shared_preload_libraries = 'aq' there are none (available() is false): such queue tables
//     cannot be consumed (55000).
// Proved by: isolation once_claim (two sessions of one consumer, at every isolation level).
#pragma once

extern "C" {
#include "postgres.h"
#include "storage/lwlock.h"
}

namespace aq::queue::claim_stripes {

inline constexpr int stripe_count = 256;

void request_lwlocks();  // from the shmem request hook
void shmem_startup();
bool available();

// 1: the stripe of (queue table, consumer, message).
LWLock* stripe(Oid queue_table, const char* consumer, int64 msgid);

}  // namespace aq::queue::claim_stripes
