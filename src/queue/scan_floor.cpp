// See scan_floor.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "common/hashfn.h"
#include "storage/spin.h"
#include "utils/timestamp.h"
}

#include <cstring>

#include "queue/scan_floor.hpp"

namespace aq::queue::scan_floor {

namespace {

// A slot: one key's floor (protocol in scan_floor.hpp).
struct Slot {
    Oid database;  // InvalidOid: free
    int32 queue_id;
    char consumer[NAMEDATALEN];  // "": the queue's messages
    Position floor;
    uint64 epoch;
    Position epoch_low;  // the lowest position enqueued during this epoch
    uint64 used;         // the bucket's tick at its last read (the least recently read goes first)
    Returns back;        // the floor's returns
};

// A bucket: `ways` slots under one spinlock, so that a key has at most one slot (two readers of a
// key without one cannot both take one).
struct Bucket {
    slock_t mutex;
    uint64 tick;
    uint64 epochs;  // the bucket's epoch counter: a key that loses its slot and takes another never
                    // meets an epoch a reading of its old slot holds
    Slot slots[ways];
};

constexpr Position nowhere = above_all;

void new_epoch(Bucket& b, Slot& s) {
    s.epoch = ++b.epochs;
    s.epoch_low = nowhere;
}

Bucket* buckets = nullptr;

const char* key_of(const char* consumer) {
    return consumer ? consumer : "";
}

Bucket& bucket_of(int32 queue_id, const char* consumer) {
    uint32 h = static_cast<uint32>(queue_id) * 2654435761u ^ static_cast<uint32>(MyDatabaseId);
    if (consumer && consumer[0]) h ^= hash_bytes(reinterpret_cast<const unsigned char*>(consumer), strlen(consumer));
    return buckets[h % bucket_count];
}

bool owns(const Slot& s, int32 queue_id, const char* consumer) {
    return s.queue_id == queue_id && s.database == MyDatabaseId && strcmp(s.consumer, key_of(consumer)) == 0;
}

// The key's slot in its bucket (held: the bucket's spinlock), or nullptr.
Slot* find(Bucket& b, int32 queue_id, const char* consumer) {
    for (Slot& s : b.slots)
        if (owns(s, queue_id, consumer)) return &s;
    return nullptr;
}

}  // namespace

std::size_t shmem_size() {
    return MAXALIGN(sizeof(Bucket) * bucket_count);
}

void shmem_startup() {
    bool found = false;
    LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
    buckets = static_cast<Bucket*>(ShmemInitStruct("aq queue scan floors", shmem_size(), &found));
    if (!found) {
        for (int i = 0; i < bucket_count; i++) {
            SpinLockInit(&buckets[i].mutex);
            buckets[i].tick = 0;
            buckets[i].epochs = 0;
            for (Slot& s : buckets[i].slots) {
                s.database = InvalidOid;
                s.queue_id = 0;
                s.consumer[0] = '\0';
                s.floor = head;
                s.epoch = 0;
                s.epoch_low = nowhere;
                s.used = 0;
                s.back = Returns{};
            }
        }
    }
    LWLockRelease(AddinShmemInitLock);
}

Reading read(int32 queue_id, const char* consumer) {
    Reading r;
    if (!buckets || (consumer && strlen(consumer) >= NAMEDATALEN)) return r;
    TimestampTz now = GetCurrentTimestamp();  // before the walk's time (a return due now is applied)
    Bucket& b = bucket_of(queue_id, consumer);
    SpinLockAcquire(&b.mutex);
    Slot* s = find(b, queue_id, consumer);
    if (!s) {  // a takeover of a free slot, else of the least recently read: from the head, always safe
        s = &b.slots[0];
        for (Slot& o : b.slots) {
            if (o.database == InvalidOid) {
                s = &o;
                break;
            }
            if (o.used < s->used) s = &o;
        }
        s->database = MyDatabaseId;
        s->queue_id = queue_id;
        strlcpy(s->consumer, key_of(consumer), sizeof s->consumer);
        s->floor = head;
        s->back = Returns{};
        new_epoch(b, *s);
    }
    s->used = ++b.tick;
    Position back = s->back.take_due(now);  // returns due: as lower() (the epoch spent below)
    if (back < s->floor) s->floor = back;
    if (back < s->epoch_low) s->epoch_low = back;
    // A spent epoch: an enqueue lowered the floor itself (epoch_low <= floor), so no raise of this
    // epoch could move it again (each is capped at epoch_low), and without a new epoch the floor
    // would stay there for good.  A new one begins with this reading: what was enqueued before it
    // is at or above the floor read, seen by this reader's scan.
    if (!(s->floor < s->epoch_low)) new_epoch(b, *s);
    r.floor = s->floor;
    r.epoch = s->epoch;
    r.returns_at = s->back.earliest();
    SpinLockRelease(&b.mutex);
    r.tracked = true;
    return r;
}

void raise(int32 queue_id, const Reading& seen, Position candidate, const char* consumer, const Returns& back) {
    if (!buckets || !seen.tracked) return;
    Bucket& b = bucket_of(queue_id, consumer);
    SpinLockAcquire(&b.mutex);
    Slot* s = find(b, queue_id, consumer);
    if (s && s->epoch == seen.epoch) {
        s->back.add(back);  // with the raise that may pass their messages
        Position capped = s->epoch_low < candidate ? s->epoch_low : candidate;
        if (s->floor < capped) {
            s->floor = capped;
            new_epoch(b, *s);
        }
    }
    SpinLockRelease(&b.mutex);
}

void lower(int32 queue_id, TimestampTz enq_time, const char* consumer, int32 priority) {
    if (!buckets) return;
    Bucket& b = bucket_of(queue_id, consumer);
    SpinLockAcquire(&b.mutex);
    if (Slot* s = find(b, queue_id, consumer)) {
        Position inserted{enq_time, PG_INT64_MIN, priority};  // every msgid of that enq_time
        if (inserted < s->floor) s->floor = inserted;
        if (inserted < s->epoch_low) s->epoch_low = inserted;
    }
    SpinLockRelease(&b.mutex);
}

}  // namespace aq::queue::scan_floor
