// The once-a-second table: "at most once a second per key in this backend" (the head scans of a
// dequeue, the expiry move of a normal queue, a sweep after an empty dequeue ...), in one
// mechanism.  Pure C++ (times are microseconds, as TimestampTz): test/unit/once_a_second_test.cpp.
//
// Invariants:
//  1. due(key, now) is true at a key's first call and then again only once a second has passed
//     since the last call that returned true for it.
//  2. The table has a few slots per use, by key; a key whose slot another key took is due at once.
//     So a collision can only make something run early, never later than a second after it was
//     last due: each use must be one that may run more often, never one that must run less.
//  3. ran(key, started, ended) after work that was due bounds what it costs: the key is next due
//     no earlier than a second after it started and `share` times its duration after it ended
//     (20: the work takes at most about a twentieth of the time).  Only a use that may run later
//     than once a second calls it (invariant 2 still makes a collision run it early).
#pragma once

#include <cstdint>

namespace aq::base {

template <int Slots = 16>
class OnceASecond {
public:
    bool due(std::int64_t key, std::int64_t now_us) {
        Entry& slot = slots_[static_cast<std::uint64_t>(key) % Slots];
        if (slot.used && slot.key == key && now_us - slot.at < 1000000) return false;
        slot = Entry{true, key, now_us};
        return true;
    }

    void ran(std::int64_t key, std::int64_t started_us, std::int64_t ended_us, std::int64_t share = 20) {
        Entry& slot = slots_[static_cast<std::uint64_t>(key) % Slots];
        std::int64_t next = ended_us + (share - 1) * (ended_us - started_us);  // next due at or after
        std::int64_t at = next - 1000000;
        slot = Entry{true, key, at > started_us ? at : started_us};
    }

private:
    struct Entry {
        bool used;
        std::int64_t key;
        std::int64_t at;
    };
    Entry slots_[Slots] = {};
};

}  // namespace aq::base
