// The one wait loop of a dequeue and of LISTEN.
//
// Invariants:
//  1. A pass reads the queues' wake-up generations before it looks (wakeup.hpp), and the sleep
//     ends as soon as one has moved: a commit after the look wakes it, none is lost.
//  2. A pass allocates in a memory context reset before every pass: a long wait with many
//     wake-ups uses constant memory.
//  3. In a transaction that uses one snapshot (REPEATABLE READ, SERIALIZABLE) a wait that would
//     sleep ends as cannot_wait: that snapshot would never show what commits while it sleeps.
//     Unless each pass looks in a transaction of its own (an immediate dequeue: own_snapshots).
//  4. A sleep ends at the deadline (wait: FOREVER, or seconds), or earlier when nothing commits
//     but something changes with time: a delayed message becomes visible (next_visible_time), an
//     exception queue's messages expire in its queue table (once a second).  After every sleep,
//     CHECK_FOR_INTERRUPTS: a cancel, a statement_timeout or a terminate ends the wait.
//  5. A sleep holds no snapshot and no xmin where nothing can read with the statement's snapshot
//     after it (may_sleep_without_snapshot): READ COMMITTED, called by the statement itself (its
//     snapshot is the active one, not a function's), no cursor open (pg_cursors: a cursor keeps
//     its snapshot), and the statement reads no table and calls no function but aq's and
//     PostgreSQL's own.  There the backend's xmin is let go before each sleep
//     (pg_stat_activity.backend_xmin is empty while it sleeps) and the next pass's fresh snapshot
//     advertises a new one: a waiting consumer no longer holds the horizon back.
//     Elsewhere the sleep keeps the xmin, as before.
//  6. On a hot standby no commit happens here, so no wake-up comes: a sleep lasts at most
//     standby_poll_ms, and the next pass sees what replay applied meanwhile (a waiting browse gets
//     a message the primary enqueued during its wait).
// Proved by: TAP 034_standby_wait (6), isolation wait_horizon (5), wait_wakeup, listen_wakeup, release_wakeup (1), delay_wakeup (4); TAP
// 032_release_wakeup_race (1: the wake-up after the waker's locks are released);
// regress listen (3: 0A000 at REPEATABLE READ), waiting; TAP 002_cancel_timeout and
// 017_waiting_client_gone (4).
//
// PostgreSQL-side: inside base::call, with an SPI connection.  The callables hold plain data.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "miscadmin.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
}

#include "queue/catalog.hpp"
#include "queue/options.hpp"

namespace aq::queue {

enum class PassResult { nothing, found, stop };
inline constexpr long standby_poll_ms = 100;  // invariant 6
enum class WaitEnd { found, stopped, timed_out, cannot_wait };

// Invariant 5 (waiting.cpp).
bool may_sleep_without_snapshot();
void let_go_of_xmin();

// Runs pass(first) until it finds something or stops; between passes sleeps as the invariants
// say: sleep(timeout_ms, -1 for none) sleeps until woken or the timeout, and wake_in(now) says
// in how many ms something becomes visible without a commit (-1: nothing).
template <class Pass, class WakeIn, class Sleep>
WaitEnd wait_loop(const Wait& wait, Pass&& pass, WakeIn&& wake_in, Sleep&& sleep, bool own_snapshots = false) {
    TimestampTz deadline = 0;
    if (!wait.forever)
        deadline = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), static_cast<int64>(wait.seconds * 1000.0));
    MemoryContext pass_context = AllocSetContextCreate(CurrentMemoryContext, "aq wait pass", ALLOCSET_SMALL_SIZES);
    MemoryContext outer_context = MemoryContextSwitchTo(pass_context);
    WaitEnd end = WaitEnd::timed_out;
    int without_snapshot = -1;  // invariant 5, decided before the first sleep
    for (bool first = true;; first = false) {
        MemoryContextReset(pass_context);
        PassResult result = pass(first);
        if (result == PassResult::found || result == PassResult::stop) {
            end = result == PassResult::found ? WaitEnd::found : WaitEnd::stopped;
            break;
        }
        if (!own_snapshots && IsolationUsesXactSnapshot() && (wait.forever || wait.seconds > 0)) {
            end = WaitEnd::cannot_wait;
            break;
        }
        TimestampTz now = GetCurrentTimestamp();
        long timeout_ms = -1;
        if (!wait.forever) {
            if (now >= deadline) break;
            timeout_ms = static_cast<long>((deadline - now + 999) / 1000);
        }
        long wake = wake_in(now);
        if (wake >= 0 && (timeout_ms < 0 || wake < timeout_ms)) timeout_ms = wake;
        if (RecoveryInProgress() && (timeout_ms < 0 || timeout_ms > standby_poll_ms)) timeout_ms = standby_poll_ms;
        if (without_snapshot < 0) without_snapshot = may_sleep_without_snapshot() ? 1 : 0;
        if (without_snapshot) let_go_of_xmin();
        sleep(timeout_ms);
        CHECK_FOR_INTERRUPTS();
    }
    MemoryContextSwitchTo(outer_context);
    MemoryContextDelete(pass_context);
    return end;
}

// When the queue's next message delayed past `after` becomes visible (0: none).  Requires SPI.
TimestampTz next_visible_time(const QueueInfo& q, TimestampTz after);

// In how many ms (rounded up) the queue's next delayed message becomes visible, -1 if none is
// delayed; an exception queue's: 1000 (it checks its queue table's expirations once a second).
long next_visible_in(const QueueInfo& q, TimestampTz now);

}  // namespace aq::queue
