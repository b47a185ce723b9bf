// The time manager (Oracle's QMON): the settler's per-database worker also keeps the queues'
// clocks.  When a delayed message becomes ready it wakes the queue's waiting dequeues and
// listeners; when a message expires it moves it to its exception queue — whether anybody reads
// the queue or not.  Nothing of this waits for a reader.
//
// Protocol
//  1. Due time.  Each database's settler slot (settler_shared.hpp) holds `next_due`: the earliest
//     time at which a delay or an expiration of a message in the database passes, as far as aq
//     knows (0: none known), and `lowered`, a count of lowerings.  All under the settler's lock.
//  2. Lowering.  A transaction that wrote a message with a delay or an expiration remembers the
//     earliest of those times (note_due).  After its commit is visible and its locks are gone
//     (xact_end's commit_unlocked) it lowers next_due to that time unless next_due is already
//     known and not later, counts the lowering, and wakes the database's worker, or the launcher
//     when none runs.  An abort or a PREPARE forgets the time; a COMMIT PREPARED or ROLLBACK
//     PREPARED, whose messages this session cannot know, lowers to now (a round finds them).
//  3. A round.  Under the lock the worker reads g = lowered and sets next_due to 0 (unknown: so
//     every lowering meanwhile counts, 2).  Then, per queue table, in a transaction of its own
//     with a fresh snapshot and a time budget, for every normal queue it: wakes the queue
//     (wakeup.hpp) when a delay passed in (since, now], `since` being the previous round's now;
//     moves the expired messages when the earliest expiration is <= now (maintenance.hpp: as the
//     table's owner, run_as's limits); and takes the earliest delay after now and the earliest
//     expiration left.  At the end, under the lock: next_due = the earliest of them if lowered is
//     still g, else the earlier of that and next_due.
//     No time is lost: a message's time is lowered (2) only after its commit is visible.  If the
//     lowering came before the round read g, the round's snapshots (taken after) see the message
//     and count its time; if after, lowered differs from g and the lowered time is kept.
//  4. What a round could not do is retried: a message whose expiration passed but which a dequeue
//     holds (the move skips locked rows) keeps it <= now, and a table whose unit failed (an
//     error, the budget) leaves its due time unknown: the round sets next_due a second later,
//     doubling while it keeps happening (to a minute).  The error is logged and kept for
//     aq.queue_monitor.
//  5. Starting.  The launcher starts the worker of a database whose next_due has passed, at most
//     aq.tm_processes workers at once counting settlers (0: no time manager).  A worker stays
//     while its next due time is within a minute, and leaves, as an idle settler does, otherwise.
//     After a server start or a crash restart every database is scanned (settler.hpp) and a scan
//     is followed by a round (since = 0): times are recomputed from the tables, so kill -9 loses
//     none.  A settle that gave messages back (retry_delay writes a delay) is followed by a round.
//  6. Serving: aq preloaded, aq.tm_processes > 0 and the database's settler not starved.  While
//     the time manager serves, a dequeue from a normal queue no longer moves expired messages
//     (maintenance.hpp, 3); a dequeue from or LISTEN on an exception queue still moves them first.
//  7. Lag: how late each round started after its due time, in aq.queue_monitor (aq._queue_monitor).
//  8. Delayed messages out of the walks' way.  Once a round has done all its work since the server
//     started (`served_upto`, the start of the last such round, is set) and while the time manager
//     serves, the scan floors of the database's queues pass committed messages waiting for their
//     delay (index_walk.hpp, 6; passes_delays), and every round lowers the floor of each queue (of
//     each consumer, in a multi-consumer queue) to the first position, per priority, of the
//     messages whose delay passed in (since, now], since = served_upto.  No message is skipped: a
//     walk passes a message with delay T only at a walk time now_W < T, and the round covering T
//     starts after T.  If that round's lowering comes before the walk reads the floor, the walk's
//     now is past T and the message is ready, not passed; if after, it is in the walk's floor
//     epoch and caps its raise (scan_floor.hpp).  A round that fails leaves served_upto, so the
//     next covers its interval again; the first round after a start lowers nothing, as no walk
//     passed anything before it.  A waiting dequeue still sleeps until the next delay itself
//     (waiting.hpp); the round's wake-up brings it to the lowered floor.  So the walk reads the
//     messages waiting for a delay once, not at every dequeue until they are ready.  If the time
//     manager stops serving (aq.tm_processes = 0, no worker slot), walks stop passing them; those
//     already passed are lowered to when it serves again, or found before that by the look from
//     the head of a dequeue that finds nothing (scan_floor.hpp).
// Proved by: TAP 035_time_manager (a queue nobody reads expires on time; a delay ends a LISTEN;
// kill -9 of the worker and a restart lose no time; aq.tm_processes = 0: dequeues move as before;
// 8: messages passed while delayed are all delivered, once, and walks read them once).
//
// PostgreSQL-side: plain data; note_due inside base::call (it may palloc); the handlers never raise.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

namespace aq::queue::time_manager {

void define_settings();  // from _PG_init

// aq.tm_processes: at most this many databases served at once (0: none).
int processes();

// The time manager serves this database (6): expired messages are moved without a reader.
bool serves();

// Walks of this database may pass messages waiting for their delay (8).  Cheap after the first true.
bool passes_delays();
// How much later than a delay a waiting dequeue wakes by its own timer where passes_delays (8).
constexpr long wake_grace_ms = 50;

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
    bool failed;        // a table's unit failed (4)
    bool extension_missing;
    char error[160];    // the last failure's message
};

// One round of the worker (3), each queue table in a transaction of its own.  Never raises.
RoundResult round(TimestampTz since, TimestampTz now);

// aq.queue_monitor (7): one row per database slot the time manager knows.  False without shared
// memory.
struct MonitorRow {
    Oid database;
    int pid;                   // the worker's, 0: none running
    TimestampTz next_due;      // 0: none
    TimestampTz last_round;    // 0: none yet
    int64 last_lag_ms;         // how late the last round started after its due time
    int64 max_lag_ms;
    uint64 rounds;
    uint64 expired;
    uint64 woken;
    uint64 failures;
    char last_error[160];
};
bool monitor(MonitorRow* rows, int max_rows, int* count);
constexpr int monitor_max_rows = 64;

}  // namespace aq::queue::time_manager
