// See claim_stripes.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "common/hashfn.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
}

#include <cstring>

#include "queue/claim_stripes.hpp"

namespace aq::queue::claim_stripes {

namespace {
constexpr const char* tranche_name = "aq claim stripes";
LWLockPadded* stripes = nullptr;  // this process's view of the tranche (3)
}  // namespace

void request_lwlocks() {
    RequestNamedLWLockTranche(tranche_name, stripe_count);
}

void shmem_startup() {
    stripes = GetNamedLWLockTranche(tranche_name);
}

bool available() {
    return stripes != nullptr;
}

LWLock* stripe(Oid queue_table, const char* consumer, int64 msgid) {
    uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(consumer), static_cast<int>(strlen(consumer)));
    h = hash_combine(h, hash_bytes_uint32(queue_table));
    h = hash_combine(h, hash_bytes_uint32(static_cast<uint32>(msgid)) ^ static_cast<uint32>(msgid >> 32));
    return &stripes[h % stripe_count].lock;
}

}  // namespace aq::queue::claim_stripes
