// See scan_floor.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "common/hashfn.h"
#include "storage/spin.h"
}

#include <cstring>

#include "queue/scan_floor.hpp"

namespace aq::queue::scan_floor {

namespace {

struct Slot {
    slock_t mutex;
    Oid database;
    int32 queue_id;
    char consumer[NAMEDATALEN];  // "": the queue's messages
    Position floor;
    uint64 epoch;
    Position epoch_low;  // the lowest position enqueued during this epoch
};

constexpr Position nowhere{DT_NOEND, PG_INT64_MAX, PG_INT32_MAX};  // above every position

void new_epoch(Slot& s) {
    s.epoch++;
    s.epoch_low = nowhere;
}

Slot* slots = nullptr;

const char* key_of(const char* consumer) {
    return consumer ? consumer : "";
}

Slot& slot_of(int32 queue_id, const char* consumer) {
    uint32 h = static_cast<uint32>(queue_id) * 2654435761u ^ static_cast<uint32>(MyDatabaseId);
    if (consumer && consumer[0]) h ^= hash_bytes(reinterpret_cast<const unsigned char*>(consumer), strlen(consumer));
    return slots[h % slot_count];
}

bool owns(const Slot& s, int32 queue_id, const char* consumer) {
    return s.queue_id == queue_id && s.database == MyDatabaseId && strcmp(s.consumer, key_of(consumer)) == 0;
}

}  // namespace

std::size_t shmem_size() {
    return MAXALIGN(sizeof(Slot) * slot_count);
}

void shmem_startup() {
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    slots = static_cast<Slot*>(ShmemInitStruct("aq queue scan floors", shmem_size(), &found));
    if (!found) {
        for (int i = 0; i < slot_count; i++) {
            SpinLockInit(&slots[i].mutex);
            slots[i].database = InvalidOid;
            slots[i].queue_id = 0;
            slots[i].consumer[0] = '\0';
            slots[i].floor = head;
            slots[i].epoch = 0;
            slots[i].epoch_low = nowhere;
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

Reading read(int32 queue_id, const char* consumer) {
    Reading r;
    if (!slots || (consumer && strlen(consumer) >= NAMEDATALEN)) return r;
    Slot& s = slot_of(queue_id, consumer);
    SpinLockAcquire(&s.mutex);
    if (!owns(s, queue_id, consumer)) {  // a takeover: from the head, which is always safe
        s.database = MyDatabaseId;
        s.queue_id = queue_id;
        strlcpy(s.consumer, key_of(consumer), sizeof s.consumer);
        s.floor = head;
        new_epoch(s);
    }
    // A spent epoch: an enqueue lowered the floor itself (epoch_low <= floor), so no raise of this
    // epoch could move it again (each is capped at epoch_low), and without a new epoch the floor
    // would stay there for good.  A new one begins with this reading: what was enqueued before it
    // is at or above the floor read, seen by this reader's scan.
    if (!(s.floor < s.epoch_low)) new_epoch(s);
    r.floor = s.floor;
    r.epoch = s.epoch;
    SpinLockRelease(&s.mutex);
    r.tracked = true;
    return r;
}

void raise(int32 queue_id, const Reading& seen, Position candidate, const char* consumer) {
    if (!slots || !seen.tracked) return;
    Slot& s = slot_of(queue_id, consumer);
    SpinLockAcquire(&s.mutex);
    if (owns(s, queue_id, consumer) && s.epoch == seen.epoch) {
        Position capped = s.epoch_low < candidate ? s.epoch_low : candidate;
        if (s.floor < capped) {
            s.floor = capped;
            new_epoch(s);
        }
    }
    SpinLockRelease(&s.mutex);
}

void lower(int32 queue_id, TimestampTz enq_time, const char* consumer, int32 priority) {
    if (!slots) return;
    Slot& s = slot_of(queue_id, consumer);
    SpinLockAcquire(&s.mutex);
    if (owns(s, queue_id, consumer)) {
        Position inserted{enq_time, PG_INT64_MIN, priority};  // every msgid of that enq_time
        if (inserted < s.floor) s.floor = inserted;
        if (inserted < s.epoch_low) s.epoch_low = inserted;
    }
    SpinLockRelease(&s.mutex);
}

}  // namespace aq::queue::scan_floor
