// The drain: background workers that move committed rows from the ring into their tables.
//
// Protocol
//  * "aq fast ingest launcher" (one, static, restarted by the postmaster if it dies) keeps one
//    "aq fast ingest drain" worker running for every database that has committed rows in the
//    ring.  Writers wake it when their database has no drain.  A database whose drain keeps
//    failing to start (it was dropped) has its rows counted as rejected and released.
//  * A drain worker walks the ring from the tail (lock shared), takes its database's COMMITTED
//    records in order up to a batch limit (skipping deferred ones until they are due), stops at
//    the first RESERVED one, copies them out of the ring (see ring.hpp), and applies them
//    in ONE transaction.  Each run of rows of one table and role has a time budget (5 s,
//    doubled at each deferral up to 320 s; the statement-timeout timer cancels it): a run over
//    its budget is rolled back whole and its records are deferred (1 s .. 30 s, not counted
//    as attempts), and the batch goes on with the other tables, so a slow table or role (a
//    trigger that sleeps, a lock another session holds) cannot hold the others up for longer
//    than its budget.  Per run of rows of one table and role, as that role (never as a
//    superuser): in a subtransaction, through the multi-insert path (table_multi_insert plus
//    index insertion, constraints checked, generated columns computed) or, for tables with
//    triggers, rules or row-level security, through a prepared INSERT per row.  If the run
//    fails, it is redone row by row, each row in its own subtransaction; a row that fails is
//    kept in aq.fast_ingest_rejects with its error.  The batch transaction also advances
//    aq.fast_ingest_progress (the durable apply watermark of the epoch: one less than the
//    lowest id of the database's records still pending once the batch commits).  After it
//    commits, the records (found again in the ring by id) become DONE, the database's apply
//    watermark moves, the tail advances and waiters on `applied` are woken.  An error that is
//    not the rows' fault (a full disk) fails the batch and is retried for as long as it
//    lasts; a reject that cannot be stored fails it too, so a row is never lost for want of
//    space to record it.  A record whose checksum does not match is rejected whole; one
//    that was attempted three times without success (the worker died) is rejected too, so a
//    poison record can never crash-loop the drain.
//  * SIGTERM (smart or fast shutdown): the worker keeps draining until its database has no
//    committed or in-flight record left and no client connection either, then exits; the
//    postmaster waits for it.  (At a fast shutdown the backends get their SIGTERM with the
//    worker's, and one may still commit rows after the worker saw the ring empty: they would
//    be lost with the ring.  Its connection ends only after its last commit, so the worker
//    waits for that, at most a few seconds.)
//  * An idle worker exits after a few seconds (so DROP DATABASE is not blocked), after
//    checking, under the ring lock, that no record of its database is left.
#pragma once

#include "postgres.h"

namespace aq::ingest::drain {

void register_launcher();  // from _PG_init, when preloaded
bool is_drain_process();   // this process is a drain worker

}  // namespace aq::ingest::drain

extern "C" {
PGDLLEXPORT void aq_fast_ingest_launcher_main(Datum);
PGDLLEXPORT void aq_fast_ingest_drain_main(Datum);
}
