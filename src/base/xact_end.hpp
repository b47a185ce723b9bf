// Transaction ends: the one place where every capability learns how a transaction ended.
//
// Protocol
//  * Registration.  _PG_init adds one Handlers table per capability (add()), in the order the
//    handlers must run, then calls install(), which registers ONE transaction callback, ONE
//    subtransaction callback and ONE resource release callback with PostgreSQL.  Nothing else in
//    aq calls RegisterXactCallback, RegisterSubXactCallback or RegisterResourceReleaseCallback.  add() refuses (ERROR at load) a table that acts at a commit but
//    does not say what happens at an abort and at a PREPARE: a module whose per-transaction
//    state survives one of the three ends is the defect this room exists to prevent.
//  * Events, each delivered to every table that has a handler for it, in registration order:
//      pre_commit      the transaction is still open and may still fail.  MAY RAISE (ereport
//                      ERROR or a C++ exception, which the dispatcher turns into an ERROR): the
//                      transaction then aborts; the tables after the raising one get no
//                      pre_commit, and EVERY table then gets abort.  May wait (interruptibly).
//      commit          the commit record is written and the transaction is visible.  MUST NOT
//                      RAISE (PostgreSQL can no longer roll back): plain stores, atomics,
//                      condition-variable broadcasts, the WAL flush.  The handler forgets the
//                      transaction's state.
//      abort           the transaction rolled back, perhaps before or after its pre_commit, perhaps
//                      without pre_commit ever running (an error, a cancel, a FATAL exit).  MUST
//                      NOT RAISE; forgets the transaction's state.
//      pre_prepare     PREPARE TRANSACTION, the transaction still open.  MAY RAISE (as
//                      pre_commit: refuse what cannot take part in two-phase commit).
//      prepare         the transaction is prepared: it is no longer this session's.  MUST NOT
//                      RAISE; forgets the transaction's state exactly as commit and abort do
//                      (its memory, TopTransactionContext, is gone).  COMMIT PREPARED and
//                      ROLLBACK PREPARED later end it, maybe in another session, as a
//                      transaction of their own (ordinary commit/abort events of that one).
//      parallel_commit / parallel_abort
//                      the same ends, in a parallel worker.  MUST NOT RAISE.
//      sub_start       a subtransaction (SAVEPOINT, an exception block) began.  May raise (out of
//                      memory): the subtransaction then aborts, and sub_abort comes for it.
//      sub_commit / sub_abort
//                      a subtransaction ended: its state now belongs to its parent, or is
//                      dropped.  MUST NOT RAISE.  A sub_abort may come for a subtransaction whose
//                      sub_start raised or came from before aq was loaded: handlers match by id.
//      commit_unlocked / abort_unlocked
//                      after commit / abort (also of a parallel worker), once PostgreSQL has
//                      released the transaction's heavyweight locks (relation, row, advisory):
//                      the place to wake whoever would otherwise find such a lock still held and
//                      go back to sleep (a commit's callbacks run BEFORE the locks go).  MUST NOT
//                      RAISE.  Not after PREPARE (the prepared transaction keeps its locks).
//      sub_abort_unlocked
//                      the same after a subtransaction's abort, once its locks are released.
//      exit            the process exits (normally, FATAL, or a terminated session): after
//                      PostgreSQL aborted any open transaction (so abort has already run), while
//                      shared memory is still attached.  MUST NOT RAISE; releases what the
//                      module keeps across transactions in shared memory.
//  * Handlers of the must-not-raise events that throw a C++ exception are reported as a
//    WARNING and the remaining handlers still run; one that raises a PostgreSQL error breaks the
//    protocol (PostgreSQL then escalates).
//  * A look (look()) is a subtransaction aq begins and rolls back around a read that writes
//    nothing, so that the read's locks go at once (queue/ring.hpp, L1).  No handler sees it begin
//    or end: it changes nothing a capability keeps per (sub)transaction.
//  * Every handler holds plain data only (no C++ object with a destructor across a call into
//    PostgreSQL that may raise).
#pragma once

extern "C" {
#include "postgres.h"
#include "access/xact.h"
}

namespace aq::base::xact_end {

using Hook = void (*)();
using SubHook = void (*)(SubTransactionId mine, SubTransactionId parent);

struct Handlers {
    const char* name;  // the capability, for messages
    Hook pre_commit;
    Hook commit;
    Hook abort;
    Hook pre_prepare;
    Hook prepare;
    Hook parallel_commit;
    Hook parallel_abort;
    SubHook sub_start;
    SubHook sub_commit;
    SubHook sub_abort;
    Hook commit_unlocked;
    Hook abort_unlocked;
    Hook sub_abort_unlocked;
    Hook exit;
};

// From _PG_init, before install(): adds a capability's handlers (copied), in call order.
void add(const Handlers& handlers);

// From _PG_init, once: registers the transaction and subtransaction callbacks, and the resource
// release callback that delivers the unlocked events.
void install();

// Runs read(arg), which must write nothing and copy its results out of SPI, in a subtransaction
// rolled back after it (also on an error, which is then raised again): the locks it took are
// released.  PostgreSQL-side: call it from a plain-data frame.
void look(void (*read)(void*), void* arg);

}  // namespace aq::base::xact_end
