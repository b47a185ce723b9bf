// Scan floors: where a remove-dequeue may start reading a queue's order index.
//
// Why.  A queue is consumed from the head of its (q_id, enq_time, msgid) index.  Every
// dequeued message leaves a dead index entry there until VACUUM removes the page, so a
// dequeue that starts at the head walks every page of messages dequeued since the last
// VACUUM: at tens of thousands of messages a second, hundreds of pages per call.  A
// floor lets the scan start where the messages still are.
//
// Protocol.  Shared memory holds `bucket_count` buckets of `ways` slots, each bucket under a
// spinlock; a key (database, queue_id, consumer) hashes to a bucket and owns at most one of its
// slots, the one its key is written in (the bucket's lock makes the search and a takeover one
// step, so no key ever has two).  A reader of a key without a slot takes the bucket's free one,
// else the least recently read one, whose owner loses its floor (a takeover).  Epochs are drawn
// from one counter per bucket, so a reading taken from a slot its key has lost since never matches
// the epoch of the slot the key holds now (which a takeover reset to the head).  With one slot per
// hash value (512 of them), two of a queue's 50 subscribers collided about nine times in ten and
// took the slot from each other at every dequeue, each then walking from the head.  A slot holds
// a floor (an index position: enq_time, msgid), an
// epoch counter, and the lowest position enqueued during the epoch.  Invariant: every message of
// the queue that is not gone for good (index_walk.hpp, 6: its index entry leads to no row
// version that a transaction may see from now on or bring back) has position >= floor, the
// position being (enq_time, msgid), or (priority, enq_time, msgid) in a priority-ordered queue.
//   - Enqueue: after inserting its messages and index entries, and before its transaction
//     commits, an enqueue calls lower(q, enq_time, priority): with p = (enq_time, any msgid)
//     (in priority order, at the lowest priority it enqueued), floor = min(floor, p) and
//     epoch_low = min(epoch_low, p).
//   - Dequeue (bulk_dequeue.hpp): read() the floor and epoch BEFORE taking the scan's
//     snapshot; scan from (enq_time, msgid) >= floor; the candidate is the position of the
//     first index entry whose row is visible or not gone for good (a row deleted by a
//     transaction still running, inserted by one, locked, or delayed, all stop it; a delayed one
//     of a single-consumer queue does not while the time manager lowers the floor back to it when
//     it becomes ready: time_manager.hpp, 8), or the
//     scan's start time (at the highest priority value) if the scan ran out without meeting
//     one.  Then raise(q, reading, candidate): only if the epoch is still the one read,
//     floor = max(floor, min(candidate, epoch_low)); when the floor moves, a new epoch
//     begins (epoch++, epoch_low = +infinity).  An epoch is spent when an enqueue lowered the
//     floor itself (epoch_low <= floor: every raise of it is capped at or below the floor); the
//     next read() then begins a new epoch, which is what it returns.  Without that, a spent epoch
//     kept the floor where the enqueue put it for good: an enqueue after the queue ran dry (whose
//     enq_time was taken before the dry scan's start, or in priority order any message below the
//     highest priority value) or a delay's lowering (time_manager.hpp, 8) made every later scan
//     start there, and under a held horizon read every message consumed since.
// Why no message is skipped: an insert whose entries existed when the scan started is
// seen by the scan (not surely dead), so the candidate stays at or below it; an insert
// that ended between read() and raise() is in epoch_low (the epoch did not change, so
// epoch_low covers every insert since the read; a new epoch begun by a read() covers every
// insert since that read, and a reader of the old one raises nothing), which caps the raise; an insert that
// ends after raise() lowers the floor again before it commits.  (A version bumped by
// every insert would be as safe, but under a steady enqueue load it refused nearly every
// raise.)  Rows
// only come back (rollback of a dequeue, a retry) while a transaction holds them, and
// such rows stop the candidate.  A queue that loses its slot to another queue starts
// again from -infinity (a takeover), which is always safe.  Rows written into a queue
// table without aq.enqueue (by hand, COPY, logical replication) do not lower the floor:
// FIRST_MESSAGE navigation ignores the floor and scans from the head, and a NEXT_MESSAGE
// dequeue that finds nothing from the floor scans from the head too, at most once a
// second per queue and backend.
//
// Returns.  A walk that raises the floor past a message waiting for a time of its own (a
// multi-consumer ring's message waiting for its consumer's retry_delay, or for a delay: once_walk.hpp,
// 4) registers with its raise, under the same lock and only when its epoch is still the one read,
// a return: the floor goes back to that message's position at that time.  A walk and a slot keep
// up to return_ways of them (Returns), each due at its own time; beyond that one more is merged
// into the one due nearest it, the lowest position and the earliest time of the two (merging
// lowers earlier and further than each needs: a later walk passes again what still waits, and
// registers it again; kept apart, a message waiting an hour is not read again at every short
// retry's time).  The first read() at or after a return's time applies it as an enqueue's lower()
// does (floor and epoch_low lowered, so that the raise of a reading taken before is capped; the
// epoch then spent, this read begins a new one) and forgets it; a takeover forgets them with the
// floor, from the head.  So the
// invariant holds with "or waiting, under a return at or before its time to at or below its
// position": a reader after the time starts at or below the message, and its walk's time, taken
// after the read, finds it ready.  A reading says when the next return is due (returns_at), so a
// dequeue that waits wakes then, though its walk no longer meets the message.
//
// A multi-consumer queue keeps a floor per consumer over that consumer's delivery rows, with the
// same protocol: the fan-out lowers the floor of every consumer it may have written rows for,
// after writing them and before its commit; that consumer's dequeues read and raise it.  The
// queue's own floor then covers its messages, which the removal sweep scans (deliveries.hpp).
//
// Without shared_preload_libraries = 'aq' there is no shared memory: every scan starts at
// the head (read() returns no floor, raise() and lower() do nothing).
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

#include <cstddef>

namespace aq::queue::scan_floor {

inline constexpr int ways = 8;
inline constexpr int bucket_count = 512;

std::size_t shmem_size();
void shmem_startup();

// A position in the (enq_time, msgid) order of a queue's index, or in the (priority, enq_time,
// msgid) order of a priority-ordered queue's (priority 0 in enq_time order).
struct Position {
    TimestampTz enq_time;
    int64 msgid;
    int32 priority = 0;
    bool operator<(const Position& o) const {
        if (priority != o.priority) return priority < o.priority;
        return enq_time != o.enq_time ? enq_time < o.enq_time : msgid < o.msgid;
    }
};
inline constexpr Position head{DT_NOBEGIN, PG_INT64_MIN, PG_INT32_MIN};
inline constexpr Position above_all{DT_NOEND, PG_INT64_MAX, PG_INT32_MAX};

struct Reading {
    Position floor = head;  // head: scan from the head
    uint64 epoch = 0;
    bool tracked = false;  // false: no shared memory; raise() will do nothing
    TimestampTz returns_at = 0;  // when the floor returns to a message passed while it waited (0: none)
};

// A return (above): the floor back to `to` at `at` (0: none).
struct Return {
    Position to = above_all;
    TimestampTz at = 0;
    void add(const Position& p, TimestampTz when) {
        if (p < to) to = p;
        if (at == 0 || when < at) at = when;
    }
};

// Up to return_ways returns, each due at its own time; one more is merged into the one due nearest.
inline constexpr int return_ways = 4;
struct Returns {
    Return kept[return_ways];  // at 0: free
    void add(const Position& p, TimestampTz when) {
        int k = -1;
        for (int i = 0; i < return_ways && k < 0; i++)  // one due then, else a free one
            if (kept[i].at == when) k = i;
        for (int i = 0; i < return_ways && k < 0; i++)
            if (kept[i].at == 0) k = i;
        if (k < 0) {
            k = 0;
            for (int i = 1; i < return_ways; i++)
                if (distance(kept[i].at, when) < distance(kept[k].at, when)) k = i;
        }
        kept[k].add(p, when);
    }
    void add(const Returns& o) {
        for (const Return& r : o.kept)
            if (r.at != 0) add(r.to, r.at);
    }
    TimestampTz earliest() const {
        TimestampTz e = 0;
        for (const Return& r : kept)
            if (r.at != 0 && (e == 0 || r.at < e)) e = r.at;
        return e;
    }
    // The lowest position of those due at `now`, which are forgotten (above_all: none due).
    Position take_due(TimestampTz now) {
        Position low = above_all;
        for (Return& r : kept)
            if (r.at != 0 && r.at <= now) {
                if (r.to < low) low = r.to;
                r = Return{};
            }
        return low;
    }
    static TimestampTz distance(TimestampTz a, TimestampTz b) { return a > b ? a - b : b - a; }
};

// consumer: a multi-consumer queue's delivery rows of that consumer (deliveries.hpp), a floor
// of their own (nullptr: the queue's messages).
Reading read(int32 queue_id, const char* consumer = nullptr);

// The key of the floor of one priority's messages in a priority-ordered multi-consumer queue (the
// removal sweep's, deliveries.hpp): its enqueues lower the floor of each priority they enqueue.
struct PriorityKey {
    char text[16];
    explicit PriorityKey(int32 priority) { snprintf(text, sizeof text, "\x02%d", priority); }
};
// With returns, registers them when the epoch is still the one read.
void raise(int32 queue_id, const Reading& seen, Position candidate, const char* consumer = nullptr,
           const Returns& back = Returns{});
// priority: in a priority-ordered queue, the lowest priority (the first in order) enqueued; 0 else.
void lower(int32 queue_id, TimestampTz enq_time, const char* consumer = nullptr, int32 priority = 0);

}  // namespace aq::queue::scan_floor
