// The removal sweep's rules that need no PostgreSQL (deliveries.hpp, 3. Removal; sweep.cpp uses them):
// where a transaction's next sweep of a queue resumes, what this backend knows of a queue since its
// last sweep, and when a remove dequeue leaves that knowledge saying that no message can have lost
// its last delivery (the sweep is then skipped).  Pure C++: test/unit/sweep_rules_test.cpp.
#pragma once

#include <cstdint>
#include <cstring>

namespace aq::queue::sweep_rules {

using Time = std::int64_t;  // TimestampTz
constexpr Time no_begin = INT64_MIN;  // DT_NOBEGIN
constexpr Time no_end = INT64_MAX;    // DT_NOEND
constexpr int name_size = 64;         // NAMEDATALEN (sweep.cpp checks both)

// Where this transaction's next sweep of a queue (and priority) starts (see sweep()).
struct Resume {
    Time enq_time;  // no_end: nothing is left to sweep in this transaction
    std::int64_t msgid;
};

// The resume rule.  After a sweep that removed what it could: stopped at the limit, on from the last
// message removed; otherwise at the first delivery row it found (none: nothing is left to sweep
// in this transaction).  The rows the transaction removed stay in its snapshot's way until it ends,
// and the messages from there to the next delivery row are gone for the same reason.
inline Resume next_resume(bool at_limit, bool has_last, const Resume& last, bool has_first, const Resume& first) {
    if (at_limit && has_last) return last;
    if (has_first) return first;
    return Resume{no_end, INT64_MAX};
}

// What this backend knows of a queue (enq_time order) since its last sweep of it: the first
// delivery that sweep found (the messages before it were gone), and where each consumer's first
// delivery was, moved on by this backend's own dequeues.  It holds while every removal committed
// since then was this backend's own (wakeup.hpp's removal counts) and for at most a second.
// While it holds and some consumer's first delivery is still at that point, no message can have
// lost its last delivery, and the sweep is skipped.  The knowledge can be wrong only toward an
// extra sweep: a consumer's first delivery may be earlier than remembered (a rollback gave
// deliveries back, another session of it skips a locked one), or a consumer missing from it may
// have new deliveries; both make the remembered point look passed.
constexpr int known_consumers = 32;
struct ConsumerFirst {
    char name[name_size];
    Time enq_time;
    std::int64_t msgid;
    bool after;  // just after (enq_time, msgid): this backend took that delivery
};
struct Knowledge {
    bool valid;
    std::int32_t queue_id;
    std::uint64_t removals;
    Time swept_at;
    Time enq_time;  // the first delivery the sweep found
    std::int64_t msgid;
    int count;
    ConsumerFirst consumers[known_consumers];
};

inline int compare_position(Time a_time, std::int64_t a_id, Time b_time, std::int64_t b_id) {
    if (a_time != b_time) return a_time < b_time ? -1 : 1;
    return a_id == b_id ? 0 : (a_id < b_id ? -1 : 1);
}

// After `taken` by its consumer: whether a message may have lost its last delivery.
template <class Taken>  // deliveries::Taken: consumer, enq_time, msgid
bool may_remove(Knowledge& k, const Taken& taken) {
    ConsumerFirst* mine = nullptr;
    for (int i = 0; i < k.count && !mine; i++)
        if (std::strcmp(k.consumers[i].name, taken.consumer) == 0) mine = &k.consumers[i];
    if (!mine) return true;  // a consumer with deliveries the sweep did not see
    if (compare_position(taken.enq_time, taken.msgid, mine->enq_time, mine->msgid) >= 0) {
        mine->enq_time = taken.enq_time;
        mine->msgid = taken.msgid;
        mine->after = true;
    }
    for (int i = 0; i < k.count; i++) {
        const ConsumerFirst& c = k.consumers[i];
        int cmp = compare_position(c.enq_time, c.msgid, k.enq_time, k.msgid);
        if (cmp < 0 || (cmp == 0 && !c.after)) return false;  // still holds the point
    }
    return true;
}

// The priorities a dequeue took, for its sweep of a priority-ordered queue (only those priorities
// are swept): up to 8 distinct ones in the order first taken; with more, known() is -1 ("any":
// every priority is swept).
struct Priorities {
    std::int32_t values[8];
    int count;
    void note(std::int32_t priority) {
        if (count > 8) return;
        for (int i = 0; i < count; i++)
            if (values[i] == priority) return;
        if (count < 8) values[count] = priority;
        count++;
    }
    int known() const { return count > 8 ? -1 : count; }
};

}  // namespace aq::queue::sweep_rules
