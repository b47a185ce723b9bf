// See navigation.hpp for the protocol.
extern "C" {
#include "postgres.h"
}

#include <cstring>

#include "base/txn_local.hpp"
#include "queue/navigation.hpp"
#include "queue/queue_store.hpp"

namespace aq::queue {

namespace {

// Consuming positions (invariant 1).  A subtransaction's rollback raises the epoch; an entry of
// an older epoch is forgotten (invariant 2).
struct PositionKey {
    int32 queue_id;
    char consumer[NAMEDATALEN];
};
struct Consuming {
    uint64 epoch;
    Position position;
};
base::TxnLocalMap<PositionKey, Consuming> consuming("aq navigation positions");
uint64 epoch = 1;

PositionKey key_of(int32 queue_id, const char* consumer) {
    PositionKey key{};
    key.queue_id = queue_id;
    strlcpy(key.consumer, consumer, sizeof key.consumer);
    return key;
}

// Browse positions (invariant 3).
constexpr int max_browse = 64;
Position browsing[max_browse];
uint32 next_browse_slot = 0;

Position* find_browse(int32 queue_id, const char* consumer) {
    for (auto& p : browsing)
        if (p.queue_id == queue_id && p.queue_id != 0 && strcmp(p.consumer, consumer) == 0) return &p;
    return nullptr;
}

}  // namespace

const Position* find_position(int32 queue_id, const char* consumer, bool browse) {
    if (browse) return find_browse(queue_id, consumer);
    Consuming* c = consuming.find(key_of(queue_id, consumer));
    return c && c->epoch == epoch ? &c->position : nullptr;
}

void remember_position(int32 queue_id, const char* consumer, bool browse, int32 priority, TimestampTz enq_time,
                       int64 msgid, const int64* group) {
    Position* p;
    if (browse) {
        p = find_browse(queue_id, consumer);
        if (!p) {
            for (auto& candidate : browsing)
                if (candidate.queue_id == 0) {
                    p = &candidate;
                    break;
                }
            if (!p) p = &browsing[next_browse_slot++ % max_browse];  // the oldest browse restarts
        }
    } else {
        bool found;
        Consuming* c = consuming.enter(key_of(queue_id, consumer), &found);
        c->epoch = epoch;
        p = &c->position;
    }
    *p = Position{queue_id, browse, {}, priority, enq_time, msgid, group != nullptr, group ? *group : 0};
    strlcpy(p->consumer, consumer, sizeof p->consumer);
}

void forget_positions() {
    epoch++;
}

}  // namespace aq::queue
