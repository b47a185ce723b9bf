// See retries.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/xact.h"
#include "utils/memutils.h"
}

#include "queue/retries.hpp"

namespace aq::queue::retries {

namespace {

enum class State : int16 { claimed, pending };

struct Entry {
    int32 queue_id;
    State state;
    int16 level;  // subtransaction nesting level of a claim
    int64 msgid;
};

// More claims than this in one backend are not tracked (16 MB).
constexpr int max_entries = 1 << 20;

Entry* entries = nullptr;
int used = 0;
int capacity = 0;
int pending = 0;

// Drops the entries for which drop() holds, keeping the others in order.
template <typename Drop>
void compact(Drop drop) {
    int kept = 0;
    for (int i = 0; i < used; i++)
        if (!drop(entries[i])) entries[kept++] = entries[i];
    used = kept;
}

void to_pending(int from_level) {
    for (int i = 0; i < used; i++)
        if (entries[i].state == State::claimed && entries[i].level >= from_level) {
            entries[i].state = State::pending;
            pending++;
        }
}

}  // namespace

void note_claimed(int32 queue_id, int64 msgid, bool by_msgid) {
    if (by_msgid)
        for (int i = 0; i < used; i++)
            if (entries[i].state == State::claimed && entries[i].msgid == msgid && entries[i].queue_id == queue_id) return;
    if (used == capacity) {
        if (capacity >= max_entries) return;
        int grown = capacity ? capacity * 2 : 256;
        entries = static_cast<Entry*>(entries ? repalloc(entries, sizeof(Entry) * grown)
                                              : MemoryContextAlloc(TopMemoryContext, sizeof(Entry) * grown));
        capacity = grown;
    }
    entries[used++] = Entry{queue_id, State::claimed, static_cast<int16>(GetCurrentTransactionNestLevel()), msgid};
}

bool any_pending() {
    return pending > 0;
}

int32 take_pending(Datum** msgids, int* count) {
    int32 queue_id = 0;
    int n = 0;
    for (int i = 0; i < used; i++)
        if (entries[i].state == State::pending && (queue_id == 0 || entries[i].queue_id == queue_id)) {
            queue_id = entries[i].queue_id;
            n++;
        }
    if (queue_id == 0) return 0;
    Datum* ids = static_cast<Datum*>(palloc(sizeof(Datum) * n));
    int16 level = static_cast<int16>(GetCurrentTransactionNestLevel());
    int k = 0;
    for (int i = 0; i < used; i++)
        if (entries[i].state == State::pending && entries[i].queue_id == queue_id) {
            ids[k++] = Int64GetDatum(entries[i].msgid);
            entries[i].state = State::claimed;
            entries[i].level = level;
            pending--;
        }
    *msgids = ids;
    *count = n;
    return queue_id;
}

void discard_pending() {
    compact([](const Entry& e) { return e.state == State::pending; });
    pending = 0;
}

void at_commit() {
    compact([](const Entry& e) { return e.state == State::claimed; });
}

void at_abort() {
    to_pending(0);
}

// A prepared transaction's claims are decided by COMMIT/ROLLBACK PREPARED, maybe in another
// session: not counted.
void at_prepare() {
    at_commit();
}

void at_subtransaction_commit() {
    int level = GetCurrentTransactionNestLevel();
    for (int i = 0; i < used; i++)
        if (entries[i].state == State::claimed && entries[i].level >= level)
            entries[i].level = static_cast<int16>(level - 1);
}

void at_subtransaction_abort() {
    to_pending(GetCurrentTransactionNestLevel());
}

}  // namespace aq::queue::retries
