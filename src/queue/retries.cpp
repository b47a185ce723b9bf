// See retries.hpp for the protocol.  Called inside base::call (the dequeue paths) or from the
// transaction callbacks: plain data only.
extern "C" {
#include "postgres.h"
#include "access/multixact.h"
#include "access/relation.h"
#include "access/transam.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "storage/bufmgr.h"
#include "storage/procarray.h"
#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
}

#include "queue/retries.hpp"
#include "queue/settler.hpp"

namespace aq::queue::retries {

namespace {

using Entry = settler::Claim;

// Claims beyond this in one transaction are not remembered one by one: their abort asks
// the settler for a scan of the database instead.
constexpr int max_entries = 1 << 16;

Entry* entries = nullptr;
int used = 0;
int capacity = 0;
bool overflowed = false;  // claims were not remembered: hand over a scan

// The xids this backend registered as dequeuers in the current transaction (settler.hpp),
// with their levels; forgotten when they commit, handed over with the claims otherwise.
struct Registered {
    TransactionId xid;
    int level;
};
constexpr int max_registered = 256;
Registered registered[max_registered];
int registered_count = 0;

// The receipts written by this transaction (once_walk.hpp), each with its runs, in receipt_memory
// (reset when the transaction ends).
MemoryContext receipt_memory = nullptr;
settler::Receipt* receipts = nullptr;
int receipt_used = 0;
int receipt_capacity = 0;
constexpr int max_receipts = 1 << 12;  // beyond: not counted (a dequeue writes one per segment)

void forget_receipts(int from_level) {
    int kept = 0;
    for (int i = 0; i < receipt_used; i++)
        if (receipts[i].level < from_level) receipts[kept++] = receipts[i];
    receipt_used = kept;
    if (receipt_used == 0 && receipt_memory) {
        MemoryContextReset(receipt_memory);
        receipts = nullptr;
        receipt_capacity = 0;
    }
}

// The claiming xid, registered before its first claim.
TransactionId claiming_xid() {
    TransactionId xid = GetCurrentTransactionId();
    for (int i = registered_count - 1; i >= 0; i--)
        if (registered[i].xid == xid) return xid;
    if (registered_count < max_registered && settler::register_dequeuer(xid))
        registered[registered_count++] = Registered{xid, GetCurrentTransactionNestLevel()};
    return xid;
}

// Drops the registered xids of levels >= from_level from this backend's list (forget: and
// from the registry).
void drop_registered(int from_level, bool forget) {
    TransactionId xids[max_registered];
    int n = 0, kept = 0;
    for (int i = 0; i < registered_count; i++) {
        if (registered[i].level < from_level)
            registered[kept++] = registered[i];
        else
            xids[n++] = registered[i].xid;
    }
    registered_count = kept;
    if (forget) settler::forget_dequeuers(xids, n);
}

// Neither running nor committed: aborted, or crashed (after recovery, a transaction
// without a commit record is neither).
bool did_not_commit(TransactionId xid) {
    if (!TransactionIdIsNormal(xid)) return false;
    if (TransactionIdIsCurrentTransactionId(xid)) return false;
    if (TransactionIdIsInProgress(xid)) return false;
    return !TransactionIdDidCommit(xid);
}

// Hands the claims of levels >= from_level to the settler and waits (bounded) until they
// are settled.  Called at abort: never raises, never allocates.
void hand_over(int from_level) {
    uint64 ticket = 0;
    bool any = overflowed;
    for (int i = 0; i < used && !any; i++) any = entries[i].level >= from_level;
    for (int i = 0; i < receipt_used && !any; i++) any = receipts[i].level >= from_level;
    if (any && settler::available())
        ticket = settler::submit(entries, used, receipts, receipt_used, from_level, overflowed);
    forget_receipts(from_level);
    int kept = 0;
    for (int i = 0; i < used; i++)
        if (entries[i].level < from_level) entries[kept++] = entries[i];
    used = kept;
    drop_registered(from_level, false);  // the settler forgets them once settled
    if (from_level <= 1) overflowed = false;
    if (ticket) settler::wait_settled(ticket, 1000);
}

}  // namespace

void before_claim() {
    // A read-only transaction or a standby claims nothing: its statement raises 25006.
    if (settler::available() && !XactReadOnly && !RecoveryInProgress()) (void)claiming_xid();
}

void note_claimed(Oid relid, ItemPointer tid) {
    TransactionId xid = claiming_xid();
    if (used == capacity) {
        if (capacity >= max_entries) {
            overflowed = true;
            return;
        }
        int grown = capacity ? capacity * 2 : 256;
        entries = static_cast<Entry*>(entries ? repalloc(entries, sizeof(Entry) * grown)
                                              : MemoryContextAlloc(TopMemoryContext, sizeof(Entry) * grown));
        capacity = grown;
    }
    entries[used++] = Entry{relid, *tid, xid, GetCurrentTransactionNestLevel()};
}

void note_receipt(Oid receipts_relid, int32 queue_id, const char* consumer, int32 hi_priority,
                  TimestampTz hi_enq_time, int64 hi_msgid, const int64* pairs, int npairs) {
    if (!settler::available() || receipt_used >= max_receipts) return;
    if (!receipt_memory)
        receipt_memory = AllocSetContextCreate(TopMemoryContext, "aq receipts to hand over", ALLOCSET_SMALL_SIZES);
    if (receipt_used == receipt_capacity) {
        int grown = receipt_capacity ? receipt_capacity * 2 : 16;
        receipts = static_cast<settler::Receipt*>(
            receipts ? repalloc(receipts, sizeof(settler::Receipt) * grown)
                     : MemoryContextAlloc(receipt_memory, sizeof(settler::Receipt) * grown));
        receipt_capacity = grown;
    }
    // Only the messages no receipt of this transaction's for the consumer covers yet: a message
    // locked and then removed by msgid, or taken again by a later dequeue of the transaction, or in
    // a subtransaction while an outer level holds it, is one attempt if it all rolls back (and none
    // while the outer level stays), as one claim of a row is.  The runs first: an allocation that
    // fails leaves no entry half made for the abort to hand over.
    int capacity = npairs;
    for (int i = 0; i < receipt_used; i++)
        if (receipts[i].receipts == receipts_relid && strcmp(receipts[i].consumer, consumer) == 0)
            capacity += receipts[i].npairs;  // a subtracted run splits a piece in two at most
    auto* copy = static_cast<int64*>(MemoryContextAlloc(receipt_memory, sizeof(int64) * Max(capacity, 1)));
    auto* next = static_cast<int64*>(palloc(sizeof(int64) * Max(capacity, 1)));
    memcpy(copy, pairs, sizeof(int64) * npairs);
    int n = npairs;
    for (int i = 0; i < receipt_used && n > 0; i++) {
        const settler::Receipt& e = receipts[i];
        if (e.receipts != receipts_relid || strcmp(e.consumer, consumer) != 0) continue;
        for (int j = 0; j + 1 < e.npairs && n > 0; j += 2) {
            int64 lo = e.pairs[j], hi = e.pairs[j + 1];
            int m = 0;
            for (int k = 0; k + 1 < n; k += 2) {  // each piece minus [lo, hi]
                int64 a = copy[k], b = copy[k + 1];
                if (b < lo || a > hi) {
                    next[m++] = a, next[m++] = b;
                    continue;
                }
                if (a < lo) next[m++] = a, next[m++] = lo - 1;
                if (b > hi) next[m++] = hi + 1, next[m++] = b;
            }
            memcpy(copy, next, sizeof(int64) * m);
            n = m;
        }
    }
    pfree(next);
    if (n == 0) {
        pfree(copy);
        return;  // nothing new to this transaction
    }
    settler::Receipt& r = receipts[receipt_used];
    r.receipts = receipts_relid;
    r.queue_id = queue_id;
    r.xid = GetCurrentTransactionId();
    r.level = GetCurrentTransactionNestLevel();
    r.hi_priority = hi_priority;
    r.hi_enq_time = hi_enq_time;
    r.hi_msgid = hi_msgid;
    strlcpy(r.consumer, consumer, NAMEDATALEN);
    r.pairs = copy;
    r.npairs = n;
    receipt_used++;
}

namespace {
XLogRecPtr pending_claims = InvalidXLogRecPtr;  // claims written by this transaction, not flushed yet
}

void make_claims_durable(bool commit_follows) {
    if (XLogRecPtrIsInvalid(XactLastRecEnd)) return;
    // In a transaction block the client gets the messages and goes on (to process them, maybe
    // for long) before the transaction ends: the claims are flushed now.
    if (IsTransactionBlock()) {
        XLogFlush(XactLastRecEnd);
        elog(DEBUG1, "aq: the dequeue's claims are flushed (a transaction block)");
        return;
    }
    // A statement of its own: its commit flushes the claims with its own record; until then, the
    // next statement or an abort flushes them.  When the statement goes on with the messages
    // (a function processing them), the WAL writer is asked to flush them meanwhile.
    pending_claims = XactLastRecEnd;
    if (commit_follows) {
        elog(DEBUG1, "aq: the dequeue's claims are left to the commit (nothing acts on the messages before it)");
    } else {
        XLogSetAsyncXactLSN(pending_claims);
        elog(DEBUG1, "aq: the dequeue's claims are pending, the WAL writer asked to flush them (the statement goes on)");
    }
}

void flush_pending_claims() {
    if (XLogRecPtrIsInvalid(pending_claims)) return;
    XLogRecPtr upto = pending_claims;
    pending_claims = InvalidXLogRecPtr;
    XLogFlush(upto);
}

bool unsettled_claim(HeapTupleHeader h, ItemPointer self) {
    uint16 mask = h->t_infomask;
    if (mask & HEAP_XMAX_COMMITTED) return false;  // a committed delete or update: not live
    TransactionId xmax = HeapTupleHeaderGetRawXmax(h);
    if (!TransactionIdIsNormal(xmax)) return false;
    if (!(mask & HEAP_XMAX_IS_MULTI)) {
        bool claim = HEAP_XMAX_IS_LOCKED_ONLY(mask)
                         ? HEAP_XMAX_IS_EXCL_LOCKED(mask) && (h->t_infomask2 & HEAP_KEYS_UPDATED)
                         : ItemPointerEquals(&h->t_ctid, self);
        return claim && did_not_commit(xmax) && settler::is_dequeuer(xmax);
    }
    if (HEAP_LOCKED_UPGRADED(mask)) return false;
    MultiXactMember* members = nullptr;
    int n = GetMultiXactIdMembers(static_cast<MultiXactId>(xmax), &members, false, HEAP_XMAX_IS_LOCKED_ONLY(mask));
    bool found = false;
    for (int i = 0; i < n && !found; i++) {
        bool claim = members[i].status == MultiXactStatusForUpdate ||
                     (members[i].status == MultiXactStatusUpdate && ItemPointerEquals(&h->t_ctid, self));
        found = claim && did_not_commit(members[i].xid) && settler::is_dequeuer(members[i].xid);
    }
    if (members) pfree(members);
    return found;
}

bool row_holds_unsettled_claim(Relation rel, ItemPointer tid) {
    BlockNumber block = ItemPointerGetBlockNumber(tid);
    OffsetNumber offset = ItemPointerGetOffsetNumber(tid);
    if (block >= RelationGetNumberOfBlocks(rel)) return false;
    Buffer buffer = ReadBuffer(rel, block);
    LockBuffer(buffer, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buffer);
    bool found = false;
    if (offset >= FirstOffsetNumber && offset <= PageGetMaxOffsetNumber(page)) {
        ItemId item = PageGetItemId(page, offset);
        if (ItemIdIsNormal(item)) {
            ItemPointerData self = *tid;
            found = unsettled_claim(reinterpret_cast<HeapTupleHeader>(PageGetItem(page, item)), &self);
        }
    }
    UnlockReleaseBuffer(buffer);
    return found;
}

bool counting() {
    return settler::available() && !settler::starved();
}

bool claimable(Oid relid, ItemPointer tid) {
    if (!counting()) return true;
    // Callable by anyone: the privilege is checked before anything is locked or read (and a
    // missing relation is 42P01, from the check).
    if (pg_class_aclcheck(relid, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("permission denied for table %s", get_rel_name(relid))));
    Relation rel = try_relation_open(relid, AccessShareLock);  // held already by the statement
    if (!rel)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE), errmsg("relation with OID %u does not exist", relid)));
    bool unsettled = false;
    if (rel->rd_rel->relkind == RELKIND_RELATION) unsettled = row_holds_unsettled_claim(rel, tid);
    relation_close(rel, AccessShareLock);
    if (unsettled) settler::hint(relid, tid);
    return !unsettled;
}

void at_commit() {
    pending_claims = InvalidXLogRecPtr;  // the commit's own flush covers them (or its mode waives it)
    used = 0;
    overflowed = false;
    drop_registered(0, true);
    forget_receipts(0);
}

void at_abort() {
    flush_pending_claims();  // the attempts are counted from the claims: they must survive a crash
    hand_over(0);
    used = 0;
    registered_count = 0;
}

// A prepared transaction's claims are decided by COMMIT/ROLLBACK PREPARED, maybe in another
// session: they are not counted if it is rolled back.
void at_prepare() {
    at_commit();
}

void at_subtransaction_commit() {
    int level = GetCurrentTransactionNestLevel();
    for (int i = 0; i < used; i++)
        if (entries[i].level >= level) entries[i].level = level - 1;
    for (int i = 0; i < registered_count; i++)
        if (registered[i].level >= level) registered[i].level = level - 1;
    for (int i = 0; i < receipt_used; i++)
        if (receipts[i].level >= level) receipts[i].level = level - 1;
}

void at_subtransaction_abort() {
    flush_pending_claims();
    hand_over(GetCurrentTransactionNestLevel());
}

}  // namespace aq::queue::retries
