// See wakeup.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "utils/guc.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "port/atomics.h"
#include "storage/condition_variable.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "tcop/dest.h"
#include "tcop/tcopprot.h"
#include "utils/wait_event.h"

// libpq/libpq.h's, declared here: that header pulls in GSSAPI's headers, which the server's
// development package does not bring.
extern bool pq_check_connection(void);
}

#include "compat/wait_event.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue::wakeup {

namespace {

struct Channel {
    pg_atomic_uint64 generation;
    pg_atomic_uint64 removals;
    ConditionVariable cv;
};

struct SharedState {
    Channel channels[channel_count];
    pg_atomic_uint32 listeners;  // backends in LISTEN
    ConditionVariable listen_cv;
};

SharedState* shared = nullptr;
bool listening = false;  // this backend counts in shared->listeners

// Queues touched by the current transaction (backend-local, plain data).
constexpr int max_pending = 32;
struct Pending {
    int32_t ids[max_pending];
    int count;
    bool overflow;  // more queues than slots: wake every channel

    void add(int32_t id) {
        for (int i = 0; i < count; i++)
            if (ids[i] == id) return;
        if (count < max_pending)
            ids[count++] = id;
        else
            overflow = true;
    }
    void clear() {
        count = 0;
        overflow = false;
    }
};
Pending enqueued;
Pending dequeued;

// The removal counts this backend moved on (channel, count before), the latest few.
struct OwnRemoval {
    uint32_t channel;
    uint64_t before;
};
constexpr int own_removal_count = 32;
OwnRemoval own_removals[own_removal_count];
uint32_t own_removal_next = 0;

uint32_t channel_index(int32_t queue_id) {
    return static_cast<uint32_t>(queue_id) % channel_count;
}

void count_removals(const Pending& p) {
    if (!shared || (!p.overflow && p.count == 0)) return;
    if (p.overflow) {
        for (auto& ch : shared->channels) pg_atomic_fetch_add_u64(&ch.removals, 1);
        return;
    }
    for (int i = 0; i < p.count; i++) {
        uint32_t c = channel_index(p.ids[i]);
        uint64_t before = pg_atomic_fetch_add_u64(&shared->channels[c].removals, 1);
        own_removals[own_removal_next++ % own_removal_count] = OwnRemoval{c + 1, before};
    }
}

Channel& channel_of(int32_t queue_id) {
    return shared->channels[channel_index(queue_id)];
}

void wake(const Pending& p) {
    if (!shared || (!p.overflow && p.count == 0)) return;
    if (p.overflow) {
        for (auto& ch : shared->channels) {
            pg_atomic_fetch_add_u64(&ch.generation, 1);
            ConditionVariableBroadcast(&ch.cv);
        }
    } else {
        for (int i = 0; i < p.count; i++) {
            Channel& ch = channel_of(p.ids[i]);
            pg_atomic_fetch_add_u64(&ch.generation, 1);
            ConditionVariableBroadcast(&ch.cv);
        }
    }
    // After the generations (see the protocol): the listeners that may wait for them.
    if (pg_atomic_read_u32(&shared->listeners) > 0) ConditionVariableBroadcast(&shared->listen_cv);
}

void stop_listening() {
    if (listening && shared) pg_atomic_fetch_sub_u32(&shared->listeners, 1);
    listening = false;
}

}  // namespace

std::size_t shmem_size() {
    return MAXALIGN(sizeof(SharedState));
}

void shmem_startup() {
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    shared = static_cast<SharedState*>(ShmemInitStruct("aq queue wake-up channels", shmem_size(), &found));
    if (!found) {
        for (auto& ch : shared->channels) {
            pg_atomic_init_u64(&ch.generation, 0);
            pg_atomic_init_u64(&ch.removals, 0);
            ConditionVariableInit(&ch.cv);
        }
        pg_atomic_init_u32(&shared->listeners, 0);
        ConditionVariableInit(&shared->listen_cv);
    }
    LWLockRelease(AddinShmemInitLock);
}

uint64_t generation(int32_t queue_id) {
    return shared ? pg_atomic_read_u64(&channel_of(queue_id).generation) : 0;
}

// A waiting dequeue whose client has gone away ends (FATAL "connection to client lost", as
// client_connection_check_interval would make it) instead of holding its snapshot until its
// wait runs out: checked at every wake-up, so at least once a second.
void check_client_connection() {
    if (whereToSendOutput != DestRemote) return;  // a background worker, or the client is gone already
    if (pq_check_connection()) return;
    ClientConnectionLost = true;
    InterruptPending = true;
    CHECK_FOR_INTERRUPTS();
}

void sleep(int32_t queue_id, uint64_t seen, long timeout_ms) {
    if (!shared) {
        long ms = (timeout_ms < 0 || timeout_ms > poll_interval_ms) ? poll_interval_ms : timeout_ms;
        (void)WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, ms, AQ_WAIT_EVENT("AqDequeue"));
        ResetLatch(MyLatch);
        CHECK_FOR_INTERRUPTS();
        check_client_connection();
        return;
    }
    // At most longest_sleep_ms at a time (the caller loops until its deadline and scans the
    // queue again): rows written without aq.enqueue (by hand, COPY, logical replication) commit
    // no wake-up, and the next scan finds them; and the client connection is checked.
    if (timeout_ms < 0 || timeout_ms > longest_sleep_ms()) timeout_ms = longest_sleep_ms();
    Channel& ch = channel_of(queue_id);
    ConditionVariablePrepareToSleep(&ch.cv);
    while (pg_atomic_read_u64(&ch.generation) == seen) {
        if (ConditionVariableTimedSleep(&ch.cv, timeout_ms, AQ_WAIT_EVENT("AqDequeue"))) break;  // timed out
    }
    ConditionVariableCancelSleep();
    check_client_connection();
}

void begin_listen() {
    if (listening || !shared) return;
    pg_atomic_fetch_add_u32(&shared->listeners, 1);
    listening = true;
}

void end_listen() {
    stop_listening();
}

bool sleep_any(const int32_t* queue_ids, const uint64_t* seen, int count, long timeout_ms) {
    auto changed = [&] {
        for (int i = 0; i < count; i++)
            if (generation(queue_ids[i]) != seen[i]) return true;
        return false;
    };
    if (!shared) {
        sleep(count > 0 ? queue_ids[0] : 0, 0, timeout_ms);  // polls
        return false;
    }
    if (timeout_ms < 0 || timeout_ms > longest_sleep_ms()) timeout_ms = longest_sleep_ms();
    ConditionVariablePrepareToSleep(&shared->listen_cv);
    bool moved;
    while (!(moved = changed())) {
        if (ConditionVariableTimedSleep(&shared->listen_cv, timeout_ms, AQ_WAIT_EVENT("AqListen"))) break;  // timed out
    }
    ConditionVariableCancelSleep();
    check_client_connection();
    return moved || changed();
}

bool removals(int32_t queue_id, uint64_t* count) {
    if (!shared) return false;
    *count = pg_atomic_read_u64(&channel_of(queue_id).removals);
    return true;
}

bool only_own_removals(int32_t queue_id, uint64_t* known) {
    if (!shared) return false;
    uint32_t c = channel_index(queue_id) + 1;  // 0: an unused record
    uint64_t now = pg_atomic_read_u64(&channel_of(queue_id).removals);
    while (*known != now) {
        bool mine = false;
        for (const auto& r : own_removals)
            if (r.channel == c && r.before == *known) mine = true;
        if (!mine) return false;
        ++*known;
    }
    return true;
}

void note_enqueue(int32_t queue_id) {
    enqueued.add(queue_id);
}

void note_dequeue(int32_t queue_id) {
    dequeued.add(queue_id);
}

void note_release(int32_t queue_id) {
    enqueued.add(queue_id);  // woken for at commit, as an enqueue
}

namespace {
int rescan_interval_ms = 1000;
}

long longest_sleep_ms() {
    return rescan_interval_ms;
}

void define_settings() {
    DefineCustomIntVariable("aq.wait_rescan_interval",
                            "Longest time a waiting dequeue or LISTEN sleeps before it scans its queues again.",
                            "Commits wake waiters without it; the scan is a safety net, and when it also checks "
                            "that the client is still there.  A developer setting: tests of wake-ups raise it.",
                            &rescan_interval_ms, 1000, 10, 3600 * 1000, PGC_SUSET, GUC_UNIT_MS | GUC_NOT_IN_SAMPLE,
                            nullptr, nullptr, nullptr);
}

void note_prepared_transaction_end() {
    enqueued.overflow = true;  // wake every channel at commit
    dequeued.overflow = true;  // ... or at abort
}

void at_commit() {
    count_removals(dequeued);
    dequeued.clear();
    stop_listening();
}

void after_commit_unlocked() {
    wake(enqueued);
    enqueued.clear();
}

void at_abort() {
    enqueued.clear();
    stop_listening();
}

void after_abort_unlocked() {
    wake(dequeued);
    dequeued.clear();
}

void at_prepare() {
    enqueued.clear();
    dequeued.clear();
}

void after_subtransaction_abort_unlocked() {
    wake(dequeued);
}

}  // namespace aq::queue::wakeup
