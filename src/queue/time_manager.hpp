// The time manager (Oracle's QMON): the settler's per-database worker also keeps the queues'
// clocks.  When a delayed message becomes ready it wakes the queue's waiting dequeues and
// listeners; when a message expires it moves it to its exception queue — whether anybody reads
// the queue or not.  Nothing of this waits for a reader.
//
// Protocol
//  1. Due time.  Each database's settler slot (settler_shared.hpp) holds `next_due`: the earliest
//     time at which a delay or an expiration of a message in the database passes, as far as aq
//     knows (0: none known); `round_running` and `lowered_in_round` while a round runs; and
//     `served_upto`, the start of the last round that did all its work.  All under the settler's
//     lock.  At most 64 databases have a slot; one without is not served (6).
//  2. Lowering.  A transaction that wrote a message with a delay or an expiration remembers the
//     earliest of those times (note_due).  After its commit is visible and its locks are gone
//     (xact_end's commit_unlocked) it lowers next_due to that time, and, while a round runs, keeps
//     it in lowered_in_round too; it skips both only when no round runs and next_due is known and
//     not later.  It wakes the database's worker, or the launcher when none runs.  An abort or a
//     PREPARE forgets the time; a COMMIT PREPARED or ROLLBACK PREPARED in a database with aq,
//     whose messages this session cannot know, lowers to now (a round finds them).
//  3. A round.  Under the lock the worker sets round_running.  Then, per queue table (a table with
//     exception queues only included, for its retained messages), in a
//     transaction of its own with a fresh snapshot and a time budget, for every normal queue it:
//     wakes the queue (wakeup.hpp) when a delay passed in (since, start], since = served_upto
//     (8 for the floors); moves the expired messages when the earliest expiration has passed
//     (maintenance.hpp: as the table's owner, run_as's limits); deletes the table's retained messages
//     whose retention ended (retention.hpp, 3); and takes the earliest delay after
//     start and the earliest expiration and end of retention left.  At the end, under the lock: next_due = the earliest
//     of them and lowered_in_round; round_running cleared; served_upto = start if no unit failed.
//     No time is lost: a message's time is lowered (2) only after its commit is visible.  A
//     lowering before round_running was set precedes the round's snapshots, which see the message
//     and count its time; one after is kept in lowered_in_round.  A worker that ends during a
//     round (terminated, an error) sets next_due to now on its way out: the next worker to start
//     runs a round first.  A crash restart rebuilds everything (5).
//  4. What a round could not do is retried: a message whose expiration passed but which a dequeue
//     holds (the move skips locked rows) is looked at a second after its unit, and a table whose
//     unit failed (an error, the budget) a second after the round ends; both the retry and the
//     units' budgets double while the database's rounds keep failing (to 64 s; counted in the
//     slot, across workers).  The error is logged and kept for aq.queue_monitor.  A full batch of
//     expired messages (10,000) has the next round start at once.  A table whose messages may
//     not be moved (no exception queue left) is not scheduled for its expirations.
//  5. Starting.  The launcher starts the worker of a database whose next_due has passed, at most
//     aq.tm_processes workers at once counting settlers (0: no time manager), the database served
//     longest ago first among those it could start now.  A worker stays while its next due time
//     is within a minute, and leaves as an idle settler does otherwise, or after a round while
//     other databases that could start wait for room (the launcher wakes the workers when that
//     begins; a leaving worker wakes the launcher).  After a server start or a crash restart every database is scanned (settler.hpp) and
//     a scan is followed by a round: times are recomputed from the tables, so kill -9 loses none.
//     A settle (it may write retry delays) is followed by a round within 100 ms, also while more
//     settles keep coming.
//  6. Serving: aq preloaded, aq.tm_processes > 0, the database has a slot, a round has done all
//     its work since the server started, and its settler is not starved (a backend reads this at
//     most every 100 ms).  While the time manager serves, a dequeue from a normal queue no longer
//     moves expired messages (maintenance.hpp, 3); a dequeue from or LISTEN on an exception queue
//     still moves them first.
//  7. Lag: how late each round started after its due time, in aq.queue_monitor (aq._queue_monitor).
//  8. Delayed messages out of the walks' way (single-consumer queues, and each subscriber's walk
//     of a multi-consumer ring: once_walk.hpp, 4, every subscriber's floor lowered).  While the time manager
//     serves and no due time has gone a second without a round (passes_delays, read before the
//     walk's snapshot and time), a queue walk's floor passes committed messages waiting for their
//     delay (index_walk.hpp, 6), and every round lowers each queue's floor to the first position,
//     per priority, of its messages whose delay passed in (since, start].  No message is skipped:
//     a walk passes a committed message (not its own transaction's insert, which no round has
//     seen) with delay T only when its time now_W < T, and the round covering T
//     starts after T (rounds cover consecutive intervals: since is the start of the last complete
//     one, and served_upto was set before now_W).  If that round's lowering comes before the walk
//     reads the floor, now_W is past T and the message is ready, not passed; if after, it falls in
//     the walk's floor epoch and caps its raise (scan_floor.hpp).  A round that fails leaves
//     served_upto, so the next covers its interval again.  The first round after a start lowers
//     nothing: shared memory, the floors with it, is new, and no walk passed anything before it
//     (only a slot dropped for a database whose worker could not start three times starts over
//     with walks that did; its passed messages are found by the look from the head).  And a
//     dequeue that finds nothing from its floor lowers the floor itself to the messages whose
//     delay passed since served_upto (catch_up; not at SERIALIZABLE, where its read would be a
//     serializable read of the queue) before it looks further, so it does not wait for a round.
//     While rounds lag, a ready message the floor passed may be taken after newer ones.  A multi-consumer queue's walks over
//     deliveries pass no delayed delivery: its removal sweep reads each consumer's first delivery
//     from the consumer's floor, and a passed delivery would let it remove the message.
//     So a walk reads the messages waiting for a delay once, not at every dequeue until they are
//     ready.
//  9. Rings (ring.hpp).  After a ring queue table's unit, a unit of its own rotates it (ring.hpp,
//     T1-T6): truncates what is settled, switches when due.  While any segment of it has pages, the
//     database is due again a second later, so a ring is looked at every second while it holds rows.
// Proved by: TAP 035_time_manager (a queue nobody reads expires on time; a delay ends a LISTEN;
// kill -9 of the worker and a restart lose no time; aq.tm_processes = 0: dequeues move as before;
// 8: messages passed while delayed are all delivered, once, and walks read them once; a
// multi-consumer delivery delayed behind taken ones is delivered, its message kept; a dequeue
// finds a passed message whose delay passed with the time manager stopped).
//
// PostgreSQL-side: plain data; note_due inside base::call (it may palloc); the handlers never raise.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

#include "queue/catalog.hpp"

namespace aq::queue::time_manager {

void define_settings();  // from _PG_init

// aq.tm_processes: at most this many databases served at once (0: none).
int processes();

// The time manager serves this database (6): expired messages are moved without a reader.
bool serves();

// Walks of single-consumer queues of this database may pass messages waiting for their delay
// (8).  Reads shared memory at most every 100 ms.  Call it before the walk's snapshot and time.
bool passes_delays();
// A dequeue of q found nothing from its floor: lowers the floor to the messages whose delay passed
// since the time manager's last complete round (8), so a dequeue never waits for a round to find
// a ready message.  Returns whether it lowered.  Requires SPI.
bool catch_up(const QueueInfo& q);

// A message written by this transaction becomes ready or expires at `when` (2).
void note_due(TimestampTz when);

// Transaction ends (xact_end handlers).
void after_commit_unlocked();
void at_abort();  // also at PREPARE
void note_prepared_transaction_end();

// What one round did (3): the earliest due time found (0: none), and its counts.
struct RoundResult {
    TimestampTz next_due;
    uint64 expired;     // messages moved to exception queues
    uint64 woken;       // queues woken because a delay passed
    uint64 truncated;   // ring segments truncated (9)
    uint64 carried;     // messages carried forward in rings (9)
    uint64 rotation_skips;  // ring segments all gone whose lock was not granted at once (9)
    bool failed;        // a table's unit failed (4)
    bool extension_missing;
    char error[160];    // the last failure's message
};

// What a database's time manager has done since the server started (7): kept in its settler
// slot, shown by aq.queue_monitor.
struct Tally {
    TimestampTz last_round;  // 0: none yet
    int64 last_lag_ms;       // how late the last round started after its due time
    int64 max_lag_ms;
    uint64 rounds;
    uint64 expired;
    uint64 woken;
    uint64 truncated;
    uint64 carried;
    uint64 rotation_skips;
    uint64 failures;
    char last_error[160];
};

// One round of the worker (3), each queue table in a transaction of its own.  Never raises.
// failures_in_row: the database's units that failed in a row (4), kept across workers.
RoundResult round(TimestampTz since, TimestampTz now, int* failures_in_row);

// aq.queue_monitor (7): one row per database slot the time manager knows.  False without shared
// memory.
struct MonitorRow {
    Oid database;
    int pid;               // the worker's, 0: none running
    TimestampTz next_due;  // 0: none
    Tally tally;
};
bool monitor(MonitorRow* rows, int max_rows, int* count);
constexpr int monitor_max_rows = 64;

}  // namespace aq::queue::time_manager
