// aq's log writer: Oracle's LGWR for NOWAIT/IMMEDIATE commits.
//
// Protocol:
//  * A NOWAIT/IMMEDIATE commit writes its record asynchronously (synchronous_commit = off),
//    raises `requested` to its record's end (an atomic max) and sets the log writer's latch;
//    the session returns at once, as Oracle's does.
//  * The log writer (a background worker, started by the postmaster after recovery, restarted
//    a second after it dies) loops: while `requested` is past the flushed WAL, XLogFlush(it) —
//    which writes and flushes everything inserted so far, so concurrent commits share one
//    flush — then sleeps on its latch.  So each commit is written and flushed promptly, by
//    someone else: a crash loses only the commits of the last flush in progress.
//  * NOWAIT/BATCH commits do not ask: PostgreSQL's WAL writer takes them at its own pace.
//  * When the log writer is not running (not yet started, restarting), requests fall back to
//    waking PostgreSQL's WAL writer.
#pragma once

#include <cstddef>
#include <cstdint>

extern "C" {
#include "postgres.h"
#include "fmgr.h"
PGDLLEXPORT void aq_log_writer_main(Datum);
}

namespace aq::commit::log_writer {

void register_worker();  // from _PG_init, when preloaded
std::size_t shmem_size();
void shmem_startup();

// Asks for the WAL up to `lsn` to be flushed soon; never waits, never fails.
void request_flush(uint64_t lsn);

int64_t flushes();  // flushes done by the log writer since the server started

}  // namespace aq::commit::log_writer
