// Immediate visibility: the shared memory and the request segment, shared by the caller's side
// (immediate.cpp) and the worker (immediate_worker.cpp).  Protocol: immediate.hpp.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/xlogdefs.h"
#include "datatype/timestamp.h"
#include "storage/dsm.h"
#include "storage/lwlock.h"
}

#include "queue/immediate.hpp"

namespace aq::queue::immediate {

enum SlotState : uint32 { slot_free = 0, slot_queued, slot_running, slot_done };

// Room for a request in its slot; a larger one goes in a DSM segment (protocol 2).
constexpr Size inline_bytes = 8192;

// One backend's request (protocol 1), under Shared::lock; data (the request, when it fits) is
// written by the caller while the slot is free and read by the worker while it runs.
struct Slot {
    SlotState state;
    Oid database;
    int caller_pid;
    uint32 caller_procno;
    bool in_segment;     // the request is in the DSM segment below, not in data
    dsm_handle segment;
    uint64 sequence;     // this request's number: a worker touches the slot only while it matches
    int worker_pid;      // the worker that took it (running, done)
    TransactionId xid;   // the worker's transaction, written before its commit (protocol 5)
    dsm_handle results;  // a dequeue's messages in a pinned segment of the worker's (0: none, 9)
    bool abandoned;      // a dequeue's caller gave up (cancel, terminate) before its commit (9)
    bool committing;     // the worker is committing the dequeue: too late to give it up (9)
    alignas(MAXIMUM_ALIGNOF) char data[inline_bytes];
};

// A database's worker (protocol 4).
struct Pool {
    Oid database;  // InvalidOid: a free entry
    int pid;       // 0 while starting
    uint32 procno;
    bool starting;
};

constexpr int max_pools = 32;

struct Shared {
    LWLock* lock;
    int nslots;
    uint64 sequence;
    Pool pools[max_pools];
    Slot slots[FLEXIBLE_ARRAY_MEMBER];  // one per backend slot (compat::my_backend_slot)
};

enum RequestKind : int { request_enqueue = 0, request_dequeue };

// The request segment: a header, then the parts at their offsets (each MAXALIGNed).
struct RequestHeader {
    Size total;               // the request's bytes
    Size capacity;            // the area's (slot data or segment): a dequeue's messages may follow
    RequestKind kind;
    Oid role;
    Oid payload_type;
    int count;                // an enqueue's payloads; a dequeue's array_size
    int synchronous_commit;   // commit::SyncCommit the caller's own commit would use now
    int timeout_ms;           // the caller's aq.immediate_timeout
    Size queue_name_at, search_path_at, payloads_at, properties_at /* 0: none */, ids_at;
    // A dequeue's options but its wait (the caller waits: protocol 9); strings at offsets, 0: NULL.
    int mode, navigation;
    bool has_msgid;
    int64 msgid;
    Size consumer_at, correlation_at, condition_at;
    // The outcome, written by the worker before its commit.
    bool failed;
    XLogRecPtr flush_to;      // after it: the commit record's end, for the caller to flush (or invalid)
    int sqlerrcode;
    char message[512];
    char detail[512];
    char hint[256];
    // A dequeue's messages: results_count of them, serialized (msgid, no payload?, payload and
    // properties by datumSerialize) in results_bytes bytes at results_at of this area, or in the
    // slot's results segment.
    int results_count;
    Size results_at;
    Size results_bytes;
    // A dequeue that found nothing: when a message of a multi-consumer ring waiting for a time of
    // its own is ready (0: none), for the caller's wait (DequeueRequest::retry_ready_out).
    TimestampTz retry_ready;
};

extern Shared* shared;
extern int timeout_ms;  // aq.immediate_timeout (this process's: a request carries its caller's)

// Under the lock.
Pool* pool_of(Oid database);
bool process_is(uint32 procno, int pid);

}  // namespace aq::queue::immediate
