// See groups.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/table.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "storage/lock.h"
#include "utils/rel.h"
}

#include "base/txn_local.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/groups.hpp"

namespace aq::queue::groups {

namespace {

// The group of each grouped queue table this transaction enqueued into (one per table, for
// the whole transaction: txn_local.hpp never evicts it).
base::TxnLocalMap<Oid, int64> transaction_groups("aq transaction groups");

constexpr uint16 group_lock_kind = 3;  // the advisory tag's fourth field (see the protocol)

}  // namespace

int64 transaction_group(Oid relid) {
    if (int64* group = transaction_groups.find(relid)) return *group;
    Relation rel = table_open(relid, AccessShareLock);
    Oid sequence = msgid_sequence(rel);
    table_close(rel, NoLock);
    int64 group = nextval_internal(sequence, false);  // drawn before it is entered: an error leaves no entry
    bool found;
    *transaction_groups.enter(relid, &found) = group;
    return group;
}

void start_new_groups() {
    transaction_groups.forget();
}

namespace {

LOCKTAG group_tag(Oid relid, int64 group) {
    uint64 key[2] = {static_cast<uint64>(relid), static_cast<uint64>(group)};
    uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char*>(key), sizeof key, 0);
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(hash >> 32), static_cast<uint32>(hash),
                         group_lock_kind);
    return tag;
}

}  // namespace

bool try_lock(Oid relid, int64 group, bool* taken) {
    LOCKTAG tag = group_tag(relid, group);
    LockAcquireResult result = LockAcquire(&tag, ExclusiveLock, false, true);
    if (taken) *taken = result == LOCKACQUIRE_OK;
    return result != LOCKACQUIRE_NOT_AVAIL;
}

void unlock(Oid relid, int64 group) {
    LOCKTAG tag = group_tag(relid, group);
    (void)LockRelease(&tag, ExclusiveLock, false);
}

}  // namespace aq::queue::groups
