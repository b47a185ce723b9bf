// See groups.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/table.h"
#include "commands/sequence.h"
#include "common/hashfn.h"
#include "storage/lock.h"
#include "utils/rel.h"
}

#include "compat/proc.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/groups.hpp"

namespace aq::queue::groups {

namespace {

struct Current {
    LocalTransactionId lxid;
    Oid relid;
    int64 group;
};
Current current[8];
uint32 next_slot = 0;

constexpr uint16 group_lock_kind = 3;  // the advisory tag's fourth field (see the protocol)

}  // namespace

int64 transaction_group(Oid relid) {
    LocalTransactionId now = compat::my_local_xid();
    for (const auto& c : current)
        if (c.lxid == now && c.relid == relid && now != InvalidLocalTransactionId) return c.group;
    Relation rel = table_open(relid, AccessShareLock);
    Oid sequence = msgid_sequence(rel);
    table_close(rel, NoLock);
    int64 group = nextval_internal(sequence, false);
    current[next_slot++ % lengthof(current)] = Current{now, relid, group};
    return group;
}

bool try_lock(Oid relid, int64 group) {
    uint64 key[2] = {static_cast<uint64>(relid), static_cast<uint64>(group)};
    uint64 hash = hash_bytes_extended(reinterpret_cast<const unsigned char*>(key), sizeof key, 0);
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, static_cast<uint32>(hash >> 32), static_cast<uint32>(hash),
                         group_lock_kind);
    return LockAcquire(&tag, ExclusiveLock, false, true) != LOCKACQUIRE_NOT_AVAIL;
}

}  // namespace aq::queue::groups
