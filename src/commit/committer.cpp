// See committer.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/parallel.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "replication/syncrep.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "utils/timestamp.h"
}

#include <sys/prctl.h>

#include "compat/guc.hpp"
#include "compat/proc.hpp"
#include "commit/committer.hpp"
#include "commit/log_writer.hpp"
#include "commit/settings.hpp"

namespace aq::commit::committer {

namespace {

enum Counter { c_commits, c_waited, c_not_waited, c_gathers, c_followers, c_log_writer, counter_count };

// A WAIT/BATCH session that committed within this many microseconds is expected to commit
// again soon: a leader waits for its record.
constexpr int64_t active_horizon_us = 1000;
// With more peers than this, PostgreSQL's own flush already serves groups (those queued on
// the WAL write lock share the next flush: measured 0.3 flushes per commit at 8 sessions and
// 0.8 at 3, against 1.0 at 2), and waiting for more only added latency (10-20% fewer
// commits/s at 3 and 4 sessions when it waited for up to 3 peers).
constexpr int max_gather_peers = 1;

struct Shared {
    pg_atomic_uint32 batch_waiting;  // WAIT/BATCH commits whose record is written, not yet flushed
    pg_atomic_uint64 counters[counter_count];
    int slot_count;
    pg_atomic_uint64 last_batch_commit[FLEXIBLE_ARRAY_MEMBER];  // per backend: TimestampTz, 0 = never
};
Shared* shared = nullptr;

int64_t session_counters[counter_count];

// This transaction's commit, between pre-commit and commit/abort.  Plain data.
struct Pending {
    bool active;
    bool async_flush;  // commit record written asynchronously: at_commit flushes it
    int expected_peers;
    bool aq_involved;  // some aq parameter was set: aq acts on this commit
    XLogRecPtr lsn_before;
    Decision decision;
};
Pending pending;

LastCommit last;

// synchronous_commit for this one commit.  PostgreSQL reads the variable (and the wait mode
// its assign hook derives from it) in RecordTransactionCommit; aq swaps it in at pre-commit and
// back at commit or abort, both before the GUC machinery's end-of-transaction work, which
// therefore never sees it.  (SET LOCAL would do the same at the price of a pass over every
// parameter at each commit.)
struct SyncSwap {
    bool active;
    int saved_value;
};
SyncSwap swap;

void swap_in(SyncCommit value) {
    if (!swap.active) swap = SyncSwap{true, synchronous_commit};
    synchronous_commit = static_cast<int>(value);
    assign_synchronous_commit(synchronous_commit, nullptr);
}

void swap_out() {
    if (!swap.active) return;
    synchronous_commit = swap.saved_value;
    assign_synchronous_commit(synchronous_commit, nullptr);
    swap.active = false;
}

void count(Counter c) {
    session_counters[c]++;
    if (shared) pg_atomic_fetch_add_u64(&shared->counters[c], 1);
}

int my_slot() {
    int slot = compat::my_backend_slot();
    return slot < shared->slot_count ? slot : -1;
}

// Other WAIT/BATCH sessions that committed within active_horizon_us.
int active_batch_peers(TimestampTz now) {
    int me = my_slot(), peers = 0;
    for (int i = 0; i < shared->slot_count; i++) {
        if (i == me) continue;
        auto at = static_cast<TimestampTz>(pg_atomic_read_u64(&shared->last_batch_commit[i]));
        if (at != 0 && now - at < active_horizon_us && ++peers > max_gather_peers) break;  // a crowd
    }
    return peers;
}

void note_batch_commit(TimestampTz now) {
    int me = my_slot();
    if (me >= 0) pg_atomic_write_u64(&shared->last_batch_commit[me], static_cast<uint64>(now));
}

// Would this commit wait for a synchronous standby?  Then PostgreSQL's own path serves it:
// the standby's acknowledgement already gathers commits.
bool waits_for_standby(SyncCommit sync) {
    return sync > SyncCommit::local && SyncRepStandbyNames && SyncRepStandbyNames[0] != '\0';
}

// Group flush for WAIT/BATCH; see the protocol.  Touches only atomics, the WAL position and
// XLogFlush (which fails only by PANIC): nothing here can raise an error.
void gather_and_flush(XLogRecPtr lsn, int expected_peers) {
    // Microsecond sleeps need a small timer slack (Linux's default, 50 us, would dominate).
    static bool slack_set = false;
    if (!slack_set) {
        (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
        slack_set = true;
    }
    pg_atomic_fetch_add_u32(&shared->batch_waiting, 1);
    int window = settings::batch_window_us();
    if (window > 0 && GetFlushRecPtr(nullptr) < lsn) {
        // Every expected peer's record is in once they are all waiting, like us.
        count(c_gathers);
        TimestampTz deadline = GetCurrentTimestamp() + window;
        while (int(pg_atomic_read_u32(&shared->batch_waiting)) - 1 < expected_peers &&
               GetFlushRecPtr(nullptr) < lsn && GetCurrentTimestamp() < deadline)
            pg_usleep(5);  // sleep, not spin: the peers need this CPU (2 cores, many committers)
    }
    if (GetFlushRecPtr(nullptr) >= lsn)
        count(c_followers);
    else
        XLogFlush(lsn);  // flushes every record inserted so far: the group's
    pg_atomic_fetch_sub_u32(&shared->batch_waiting, 1);
}

}  // namespace

std::size_t shmem_size() {
    return MAXALIGN(add_size(offsetof(Shared, last_batch_commit), mul_size(MaxBackends, sizeof(pg_atomic_uint64))));
}

void shmem_startup() {
    bool found = false;
    shared = static_cast<Shared*>(ShmemInitStruct("aq commit modes", shmem_size(), &found));
    if (!found) {
        pg_atomic_init_u32(&shared->batch_waiting, 0);
        for (auto& c : shared->counters) pg_atomic_init_u64(&c, 0);
        shared->slot_count = MaxBackends;
        for (int i = 0; i < MaxBackends; i++) pg_atomic_init_u64(&shared->last_batch_commit[i], 0);
    }
}

namespace {
bool exempt = false;
}

void exempt_this_process() {
    exempt = true;
}

void pre_commit() {
    pending.active = false;
    if (IsParallelWorker() || !TransactionIdIsValid(GetTopTransactionIdIfAny())) return;
    if (exempt) {  // synchronous_commit alone decides; the commit is still counted
        pending = Pending{true, false, 0, false, XactLastCommitEnd, Decision{}};
        return;
    }
    bool involved = settings::any_set();
    Decision d = settings::decide();
    SyncCommit run_with = d.sync;
    // WAIT/BATCH with WAIT/BATCH peers committing now: write the record asynchronously and
    // flush it for the group in at_commit.  Alone: PostgreSQL's own path, as IMMEDIATE.
    int peers = 0;
    if (involved && d.wait == Wait::wait && d.logging == Logging::batch && !waits_for_standby(d.sync) && shared)
        peers = active_batch_peers(GetCurrentTimestamp());
    if (peers > max_gather_peers) peers = 0;  // a crowd: PostgreSQL's own path groups it
    if (peers > 0) run_with = SyncCommit::off;
    if (involved && run_with != settings::current_synchronous_commit()) swap_in(run_with);
    pending = Pending{true, peers > 0, peers, involved, XactLastCommitEnd, d};
}

void at_commit() {
    swap_out();
    if (!pending.active) return;
    pending.active = false;
    XLogRecPtr lsn = XactLastCommitEnd;
    bool wrote = lsn != pending.lsn_before;
    if (!wrote) return;
    const Decision& d = pending.decision;
    if (pending.async_flush) gather_and_flush(lsn, pending.expected_peers);
    if (shared && d.wait == Wait::wait && d.logging == Logging::batch) note_batch_commit(GetCurrentTimestamp());
    bool durable = GetFlushRecPtr(nullptr) >= lsn;
    if (!durable && pending.aq_involved && d.wait == Wait::nowait && d.logging == Logging::immediate) {
        log_writer::request_flush(lsn);
        count(c_log_writer);
    }
    count(c_commits);
    count(durable ? c_waited : c_not_waited);
    last = LastCommit{true, lsn, GetCurrentTimestamp(), d, durable};
}

void at_abort() {
    swap_out();
    pending.active = false;
}

const LastCommit& last_commit() {
    return last;
}

Stats session_stats() {
    const int64_t* c = session_counters;
    return Stats{c[c_commits], c[c_waited], c[c_not_waited], c[c_gathers], c[c_followers], c[c_log_writer]};
}

Stats cluster_stats() {
    int64_t c[counter_count] = {};
    if (shared)
        for (int i = 0; i < counter_count; i++) c[i] = int64_t(pg_atomic_read_u64(&shared->counters[i]));
    return Stats{c[c_commits], c[c_waited], c[c_not_waited], c[c_gathers], c[c_followers], c[c_log_writer]};
}

}  // namespace aq::commit::committer
