// The commit-time half of commit modes: applies the decided mode to each commit.
//
// Protocol (called from the transaction callback; see settings.hpp for how the mode is decided):
//
//  pre-commit (the transaction still open, before its commit record):
//    * nothing set anywhere, or no transaction id (no commit record): do nothing.
//    * decide; run the commit with the decided synchronous_commit, swapped in for this commit
//      only and swapped back at commit or abort: WAIT -> aq.commit_wait_level (or a stronger
//      synchronous_commit that was set), NOWAIT -> off.
//    * WAIT/BATCH (no synchronous standby to wait for): count the other WAIT/BATCH sessions
//      that committed within the last millisecond — the peers about to commit again.  None:
//      commit exactly as IMMEDIATE does, so a lone session is never slower.  One: write the
//      commit record asynchronously; at_commit flushes it for both.  More: PostgreSQL's own
//      path, where the sessions queued on the WAL flush already share it.
//  commit (record written, client not yet told):
//    * WAIT/BATCH with an asynchronous record — group commit: wait until every expected peer
//      is waiting for its flush too (so its record is in), at most aq.batch_commit_window
//      microseconds, sleeping (not spinning) and holding no lock; then XLogFlush(ours), which
//      flushes every record inserted so far, so one fsync serves the group.  A committer
//      whose record a peer already flushed returns at once.  Each session waits only for
//      itself: nobody holds a lock while waiting, so a long window slows only its own session.
//      As in Oracle, the transaction is visible to others just before it is flushed.
//    * NOWAIT/IMMEDIATE: hand the record to aq's log writer, which flushes it at once while the
//      session returns (Oracle's LGWR; log_writer.hpp); NOWAIT/BATCH leaves it to
//      PostgreSQL's WAL writer and its own pace.
//    * remember the commit (LSN, mode, durable when acknowledged?) and count it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "commit/mode.hpp"

namespace aq::commit::committer {

std::size_t shmem_size();
void shmem_startup();

void pre_commit();
void at_commit();  // must not fail: the transaction is already committed
// For aq's own background workers whose commits must follow synchronous_commit alone (the
// fast-ingest drain: its apply watermark promises durability), whatever aq.commit_* say at the
// database or role level.
void exempt_this_process();
void at_abort();

// The last commit of this session that wrote a commit record.
struct LastCommit {
    bool valid;
    uint64_t lsn;       // end of its commit record
    int64_t at;         // TimestampTz
    Decision decision;
    bool durable_on_return;  // flushed before the client was told
};
const LastCommit& last_commit();

struct Stats {
    int64_t commits;          // commits with a commit record, under aq's watch
    int64_t waited;           // ... acknowledged after their WAL was flushed
    int64_t not_waited;       // ... acknowledged before it was (NOWAIT)
    int64_t batch_gathers;    // WAIT/BATCH commits that waited for peers in flight
    int64_t batch_followers;  // WAIT/BATCH commits whose record a peer flushed
    int64_t log_writer_requests;  // NOWAIT/IMMEDIATE commits handed to aq's log writer
};
Stats session_stats();
Stats cluster_stats();  // all sessions since the server started (needs preloading)

}  // namespace aq::commit::committer
