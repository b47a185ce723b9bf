// The walk of a queue table that stores each message once: see once_walk.hpp for the protocol and
// index_walk.hpp for what every walk keeps.
// Called inside base::call: plain data only.
extern "C" {
#include "postgres.h"
#include "utils/arrayaccess.h"
#include "access/genam.h"
#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/relscan.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "common/hashfn.h"
#include "catalog/pg_collation_d.h"
#include "catalog/pg_type.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "executor/spi.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
}

#include <algorithm>
#include <utility>

#include "base/run_as.hpp"
#include "base/spi.hpp"
#include "base/xact_end.hpp"
#include "compat/executor.hpp"
#include "compat/relation.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/index_walk.hpp"
#include "queue/catalog.hpp"
#include "queue/maintenance.hpp"
#include "queue/condition.hpp"
#include "queue/once_walk.hpp"
#include "queue/retries.hpp"
#include "queue/ring_scan.hpp"
#include "queue/rules.hpp"
#include "queue/scan_floor.hpp"
#include "queue/settler.hpp"
#include "queue/statements.hpp"
#include "queue/time_manager.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

using namespace index_walk;

namespace {

// A segment's receipts table (once_walk.hpp, 3) and its (consumer, hi) index.
enum ReceiptColumn { rcol_consumer, rcol_kind, rcol_hi_priority, rcol_hi_enq_time, rcol_hi_msgid, rcol_runs, rcol_at,
                     receipt_column_count };

struct Receipts {
    Relation heap = nullptr;
    Relation index = nullptr;
    IndexInfo* index_info = nullptr;
    // What this walk took of the segment's messages (remove), in the order taken.
    int64* taken = nullptr;
    int count = 0, size = 0;
    scan_floor::Position hi{0, 0, 0};
};

bool receipts_shape(Relation rel) {
    TupleDesc d = RelationGetDescr(rel);
    static const Oid types[] = {TEXTOID, CHAROID, INT4OID, TIMESTAMPTZOID, INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};
    if (d->natts != receipt_column_count) return false;
    for (int i = 0; i < receipt_column_count; i++)
        if (TupleDescAttr(d, i)->attisdropped || TupleDescAttr(d, i)->atttypid != types[i]) return false;
    return true;
}

bool open_receipts(Oid relid, LOCKMODE lock, Receipts* r) {
    r->heap = try_table_open(relid, lock);
    if (!r->heap || !receipts_shape(r->heap)) return false;
    static const AttrNumber by_consumer[] = {rcol_consumer + 1, rcol_hi_priority + 1, rcol_hi_enq_time + 1, rcol_hi_msgid + 1};
    Oid index_oid = find_index(r->heap, by_consumer, 4);
    if (!OidIsValid(index_oid)) return false;
    // A receipt is inserted into the heap and that index only: any other index would miss it.
    List* indexes = RelationGetIndexList(r->heap);
    int nindexes = list_length(indexes);
    list_free(indexes);
    if (nindexes != 1) return false;
    r->index = index_open(index_oid, lock);
    if (!in_sort_order(r->index)) return false;
    r->index_info = BuildIndexInfo(r->index);
    return true;
}

// The lock is kept to the end of the transaction (NoLock), or released (lock: what opened it).
void close_receipts(Receipts* r, LOCKMODE release = NoLock) {
    if (r->index) index_close(r->index, release);
    if (r->heap) table_close(r->heap, release);
}

// The messages the consumer took, as runs [lo, hi] of msgids: committed by another transaction
// (taken for good) or not (held: in progress, or this transaction's own).  Runs may overlap (a
// locked mode's 'l' receipt and a later remove of one of its messages, the receipt of a
// remove_subscriber covering every msgid so far): sort() merges each kind's runs into disjoint
// ones, and taken for good wins over held.
struct TakenRuns {
    struct Runs {
        int64* lo = nullptr;
        int64* hi = nullptr;
        int count = 0, size = 0;

        void add(int64 l, int64 h) {
            if (count == size) {
                size = size ? size * 2 : 64;
                lo = static_cast<int64*>(lo ? repalloc(lo, sizeof(int64) * size) : palloc(sizeof(int64) * size));
                hi = static_cast<int64*>(hi ? repalloc(hi, sizeof(int64) * size) : palloc(sizeof(int64) * size));
            }
            lo[count] = l;
            hi[count] = h;
            count++;
        }
        void merge() {  // sorted by lo, then overlapping or adjacent runs joined
            auto* order = static_cast<int*>(palloc(sizeof(int) * Max(count, 1)));
            for (int i = 0; i < count; i++) order[i] = i;
            std::sort(order, order + count, [this](int a, int b) { return lo[a] < lo[b]; });
            auto* l = static_cast<int64*>(palloc(sizeof(int64) * Max(count, 1)));
            auto* h = static_cast<int64*>(palloc(sizeof(int64) * Max(count, 1)));
            int n = 0;
            for (int k = 0; k < count; k++) {
                int i = order[k];
                if (n > 0 && lo[i] <= h[n - 1] + 1) {
                    h[n - 1] = Max(h[n - 1], hi[i]);
                } else {
                    l[n] = lo[i];
                    h[n] = hi[i];
                    n++;
                }
            }
            lo = l, hi = h, count = n, size = Max(n, 1);
        }
        bool covers(int64 msgid) const {
            int a = 0, b = count - 1, at = -1;
            while (a <= b) {  // the last run with lo <= msgid
                int m = (a + b) / 2;
                if (lo[m] <= msgid) at = m, a = m + 1; else b = m - 1;
            }
            return at >= 0 && msgid <= hi[at];
        }
    };
    Runs taken, held;

    void add(int64 l, int64 h, bool is_held) { (is_held ? held : taken).add(l, h); }
    void sort() {
        taken.merge();
        held.merge();
    }
    enum class Found { no, taken, held };
    Found find(int64 msgid) const {
        if (taken.covers(msgid)) return Found::taken;
        return held.covers(msgid) ? Found::held : Found::no;
    }
};

// 5: the attempts of the consumer's messages, as the runs of its committed 'r' receipts (which may
// overlap: one per aborted dequeue), each ready again at its time; and the runs of 'r' receipts in
// progress (the settler is writing them: held until it commits).
struct AttemptRuns {
    int64* lo = nullptr;
    int64* hi = nullptr;
    int64* reach = nullptr;  // the highest hi of the runs up to this one, after sort()
    TimestampTz* ready_at = nullptr;
    bool* pending = nullptr;
    int count = 0, size = 0;

    template <class T> static T* grow(T* p, int n) {
        return static_cast<T*>(p ? repalloc(p, sizeof(T) * n) : palloc(sizeof(T) * n));
    }
    void add(int64 l, int64 h, TimestampTz at, bool is_pending) {
        if (count == size) {
            size = size ? size * 2 : 16;
            lo = grow(lo, size), hi = grow(hi, size), reach = grow(reach, size);
            ready_at = grow(ready_at, size), pending = grow(pending, size);
        }
        lo[count] = l, hi[count] = h, ready_at[count] = at, pending[count] = is_pending;
        count++;
    }
    void sort() {  // insertion sort by lo: attempts are few
        for (int i = 1; i < count; i++)
            for (int j = i; j > 0 && lo[j - 1] > lo[j]; j--) {
                std::swap(lo[j - 1], lo[j]);
                std::swap(hi[j - 1], hi[j]);
                std::swap(ready_at[j - 1], ready_at[j]);
                std::swap(pending[j - 1], pending[j]);
            }
        for (int i = 0; i < count; i++) reach[i] = i ? Max(reach[i - 1], hi[i]) : hi[i];
    }
    struct Seen {
        int attempts = 0;
        TimestampTz ready_at = 0;
        bool pending = false;
    };
    Seen find(int64 msgid) const {
        Seen seen;
        int a = 0, b = count - 1, at = -1;
        while (a <= b) {  // the last run with lo <= msgid
            int m = (a + b) / 2;
            if (lo[m] <= msgid) at = m, a = m + 1; else b = m - 1;
        }
        for (int i = at; i >= 0 && reach[i] >= msgid; i--) {
            if (hi[i] < msgid) continue;
            if (pending[i]) {
                seen.pending = true;
            } else {
                seen.attempts++;
                seen.ready_at = Max(seen.ready_at, ready_at[i]);
            }
        }
        return seen;
    }
};

// 3: the consumer's receipts whose last message is at or after the walk's start, under the latest
// state (SnapshotDirty: committed, and in progress by other sessions or this transaction).
void load_taken(Receipts& r, Datum consumer, const scan_floor::Position* from, TakenRuns* runs, AttemptRuns* attempts) {
    SnapshotData dirty;
    InitDirtySnapshot(dirty);
    ScanKeyData keys[2], row[3];
    ScanKeyEntryInitialize(&keys[0], 0, 1, BTEqualStrategyNumber, InvalidOid, r.index->rd_indcollation[0], F_TEXTEQ,
                           consumer);
    int nkeys = 1 + start_key(&keys[1], row, 2, true, nullptr, from);
    IndexScanDesc scan = compat::index_begin_scan(r.heap, r.index, &dirty, nkeys);
    index_rescan(scan, keys, nkeys, nullptr, 0);
    TupleTableSlot* slot = table_slot_create(r.heap, nullptr);
    while (index_getnext_slot(scan, ForwardScanDirection, slot)) {
        CHECK_FOR_INTERRUPTS();
        bool isnull;
        TransactionId xmin = DatumGetTransactionId(slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));
        bool elsewhere = TransactionIdIsValid(dirty.xmin);  // in progress in another transaction
        bool held = elsewhere || TransactionIdIsCurrentTransactionId(xmin);
        Datum value = slot_getattr(slot, rcol_runs + 1, &isnull);
        if (isnull) continue;
        ArrayType* array = DatumGetArrayTypeP(value);
        int n = ArrayGetNItems(ARR_NDIM(array), ARR_DIMS(array));
        if (ARR_HASNULL(array) || n % 2 != 0) continue;  // not aq's: ignored
        const int64* pairs = reinterpret_cast<const int64*>(ARR_DATA_PTR(array));
        char kind = DatumGetChar(slot_getattr(slot, rcol_kind + 1, &isnull));
        if (kind == 'r') {  // an attempt (5)
            TimestampTz at = DatumGetTimestampTz(slot_getattr(slot, rcol_at + 1, &isnull));
            // Pending while the settler writes it; the settler's own earlier ones are counted.
            for (int i = 0; i < n; i += 2) attempts->add(pairs[i], pairs[i + 1], at, elsewhere);
            continue;
        }
        // Locked (3): held while another transaction that locked runs; nothing once it ended, nor
        // for the transaction that locked (its later dequeues take it, as FOR UPDATE lets them).
        if (kind == 'l' && !elsewhere) continue;
        for (int i = 0; i < n; i += 2) runs->add(pairs[i], pairs[i + 1], held);
    }
    ExecDropSingleTupleTableSlot(slot);
    index_endscan(scan);
}

void note_taken(Receipts& r, int64 msgid, const scan_floor::Position& at) {
    if (r.count == r.size) {
        r.size = r.size ? r.size * 2 : 64;
        r.taken = static_cast<int64*>(r.taken ? repalloc(r.taken, sizeof(int64) * r.size) : palloc(sizeof(int64) * r.size));
    }
    r.taken[r.count++] = msgid;
    r.hi = at;  // the walk goes in the queue's order: the last is the highest
}

int cmp_int64(const void* a, const void* b) {
    int64 x = *static_cast<const int64*>(a), y = *static_cast<const int64*>(b);
    return x < y ? -1 : x > y ? 1 : 0;
}

// 3: one receipt for what the walk took of the segment's messages, heap and index; remembered for
// the settler if the (sub)transaction aborts (5).
void insert_receipt(Receipts& r, Datum consumer, const char* consumer_name, int32 queue_id, TimestampTz now, char kind) {
    qsort(r.taken, r.count, sizeof(int64), cmp_int64);
    int64* bounds = static_cast<int64*>(palloc(sizeof(int64) * 2 * r.count));
    int n = 0;
    for (int i = 0; i < r.count; i++) {
        if (n > 0 && bounds[n - 1] + 1 == r.taken[i]) {
            bounds[n - 1] = r.taken[i];
        } else {
            bounds[n++] = r.taken[i];
            bounds[n++] = r.taken[i];
        }
    }
    Datum runs = int8_array(bounds, n);
    Datum values[receipt_column_count] = {consumer, CharGetDatum(kind), Int32GetDatum(r.hi.priority),
                                          TimestampTzGetDatum(r.hi.enq_time), Int64GetDatum(r.hi.msgid),
                                          runs, TimestampTzGetDatum(now)};
    bool nulls[receipt_column_count] = {};
    HeapTuple tuple = heap_form_tuple(RelationGetDescr(r.heap), values, nulls);
    simple_heap_insert(r.heap, tuple);
    Datum keys[4] = {consumer, values[rcol_hi_priority], values[rcol_hi_enq_time], values[rcol_hi_msgid]};
    bool key_nulls[4] = {};
    index_insert(r.index, keys, key_nulls, &tuple->t_self, r.heap, UNIQUE_CHECK_NO, false, r.index_info);
    heap_freetuple(tuple);
    retries::note_receipt(RelationGetRelid(r.heap), queue_id, consumer_name, r.hi.priority, r.hi.enq_time, r.hi.msgid,
                          bounds, n);
    pfree(bounds);
}

// 2: the walks of one consumer of one queue table, one at a time (a heavyweight lock, waited for,
// held for the walk and its receipts, not to the end of the transaction).
LOCKTAG walk_tag(Oid queue_table, const char* consumer) {
    uint32 h = hash_bytes(reinterpret_cast<const unsigned char*>(consumer), static_cast<int>(strlen(consumer)));
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, queue_table, h, 4);  // field 4: 1, 2 PostgreSQL's, 3 groups.hpp
    return tag;
}

}  // namespace

namespace {

// 5: the consumer's receipts of one receipts table under the latest state, read under its walk lock
// (taken to the end of the transaction: no walk of c takes these messages between this reading and
// the receipts written from it, 2; a walk holds it for moments).  False: not aq's receipts table.
struct ConsumerView {
    TakenRuns taken;
    AttemptRuns attempts;
};
}  // namespace

void release_walk_lock(Oid queue_table, const char* consumer) {
    LOCKTAG tag = walk_tag(queue_table, consumer);
    (void)LockRelease(&tag, ExclusiveLock, false);
}

Datum int8_array(const int64* values, int n) {
    Datum* items = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
    for (int i = 0; i < n; i++) items[i] = Int64GetDatum(values[i]);
    return PointerGetDatum(construct_array(items, n, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

namespace {

enum class View { read, busy, not_aqs };
View view_of(Oid queue_table, Oid receipts_relid, const char* consumer, ConsumerView* view) {
    // Never waited for: an aborting session of c may hold it while it waits for the settler.
    LOCKTAG tag = walk_tag(queue_table, consumer);
    if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL) return View::busy;
    Receipts receipts;
    bool ok = open_receipts(receipts_relid, RowExclusiveLock, &receipts);
    if (ok) load_taken(receipts, CStringGetTextDatum(consumer), nullptr, &view->taken, &view->attempts);
    close_receipts(&receipts);
    view->taken.sort();
    view->attempts.sort();
    if (!ok) release_walk_lock(queue_table, consumer);  // nothing will be written: let it go now
    return ok ? View::read : View::not_aqs;
}

// Runs of consecutive msgids (lo, hi pairs) of sorted ids, as an int8[].
Datum runs_of(const int64* ids, int n) {
    Datum* pairs = static_cast<Datum*>(palloc(sizeof(Datum) * 2 * Max(n, 1)));
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (k > 0 && DatumGetInt64(pairs[k - 1]) + 1 == ids[i]) {
            pairs[k - 1] = Int64GetDatum(ids[i]);
        } else {
            pairs[k++] = Int64GetDatum(ids[i]);
            pairs[k++] = Int64GetDatum(ids[i]);
        }
    }
    return PointerGetDatum(construct_array(pairs, k, INT8OID, sizeof(int64), FLOAT8PASSBYVAL, TYPALIGN_DOUBLE));
}

Datum int4_array(const int32* values, int n) {
    Datum* items = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
    for (int i = 0; i < n; i++) items[i] = Int32GetDatum(values[i]);
    return PointerGetDatum(construct_array(items, n, INT4OID, sizeof(int32), true, TYPALIGN_INT));
}

char* qualified_name_of(Oid relid) {
    char* name = get_rel_name(relid);
    if (!name) elog(ERROR, "aq: relation %u is gone", relid);
    return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)), name);
}

}  // namespace

bool split_attempt(Oid queue_table, Oid receipts_relid, const char* consumer, const int64* pairs, int npairs,
                   int max_retries, AttemptSplit* out) {
    *out = AttemptSplit{};
    ConsumerView view;
    View read = view_of(queue_table, receipts_relid, consumer, &view);
    if (read == View::busy) return false;
    if (read == View::not_aqs) return true;  // nothing to count (and the lock already let go)
    out->locked = true;
    int64 total = 0;
    for (int i = 0; i + 1 < npairs; i += 2) total += pairs[i + 1] - pairs[i] + 1;
    // A run splits into as many as one per message (those between go elsewhere): 2 per message.
    out->retry_pairs = static_cast<int64*>(palloc(sizeof(int64) * 2 * Max(total, 1)));
    out->except_ids = static_cast<int64*>(palloc(sizeof(int64) * Max(total, 1)));
    out->except_attempts = static_cast<int32*>(palloc(sizeof(int32) * Max(total, 1)));
    for (int i = 0; i + 1 < npairs; i += 2)
        for (int64 id = pairs[i]; id <= pairs[i + 1]; id++) {
            CHECK_FOR_INTERRUPTS();
            // Taken again since: nothing to count.  Held by another session of c: counted, but it
            // stays that session's (its end decides whether it goes to the exception queue).
            TakenRuns::Found found = view.taken.find(id);
            if (found == TakenRuns::Found::taken) continue;
            int n = view.attempts.find(id).attempts + 1;
            if (n > max_retries && found == TakenRuns::Found::no) {
                out->except_ids[out->nexcept] = id;
                out->except_attempts[out->nexcept++] = n;
            } else if (out->nretry_pairs > 0 && out->retry_pairs[out->nretry_pairs - 1] + 1 == id) {
                out->retry_pairs[out->nretry_pairs - 1] = id;
            } else {
                out->retry_pairs[out->nretry_pairs++] = id;
                out->retry_pairs[out->nretry_pairs++] = id;
            }
        }
    return true;
}

void move_to_exception(const ExceptionMove& m) {
    if (m.n == 0) return;
    // The copies, into the current segment (ring.hpp, R1: locked to the end of the transaction).
    Relation current = ring::open_current(m.queue_table_id, *m.segments);
    char* copy_sql = psprintf(
        "INSERT INTO %s (msgid, q_id, enq_time, priority, delay, expiration, corrid, retry_count,"
        "                exception_queue, enq_uid, user_data, consumer_name)"
        " SELECT m.msgid, COALESCE((SELECT e.queue_id FROM aq.queues e"
        "                            WHERE e.queue_name OPERATOR(pg_catalog.=) m.exception_queue"
        "                              AND e.queue_table_id OPERATOR(pg_catalog.=) $5"
        "                              AND e.queue_type OPERATOR(pg_catalog.=) 'exception_queue'), $4),"
        "        m.enq_time, m.priority, NULL, m.expiration, m.corrid, m.retry_count OPERATOR(pg_catalog.+) a.attempts,"
        "        m.exception_queue,"
        "        m.enq_uid, m.user_data, $6"
        "   FROM ONLY %s m JOIN ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS a(msgid, attempts)"
        "     ON a.msgid OPERATOR(pg_catalog.=) m.msgid"
        "  WHERE m.q_id OPERATOR(pg_catalog.=) $3"
        " RETURNING q_id, msgid",
        compat::qualified_name(current), qualified_name_of(m.segment));
    table_close(current, NoLock);
    Datum consumer = CStringGetTextDatum(m.consumer);
    Oid copy_types[6] = {INT8ARRAYOID, INT4ARRAYOID, INT4OID, INT4OID, INT4OID, TEXTOID};
    Datum copy_args[6] = {int8_array(m.ids, m.n), int4_array(m.attempts, m.n), Int32GetDatum(m.queue_id),
                          Int32GetDatum(m.default_exception), Int32GetDatum(m.queue_table_id), consumer};
    int rc = SPI_execute_with_args(copy_sql, 6, copy_types, copy_args, nullptr, false, 0);
    if (rc != SPI_OK_INSERT_RETURNING) elog(ERROR, "aq: copying messages to an exception queue failed: %s", SPI_result_code_string(rc));
    // What c took for good is what was copied (a message gone from its segment is not taken).
    int64* copied = static_cast<int64*>(palloc(sizeof(int64) * Max(SPI_processed, 1)));
    int ncopied = 0;
    for (uint64 i = 0; i < SPI_processed; i++) {
        bool isnull;
        Datum q = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);
        if (!isnull) wakeup::note_enqueue(DatumGetInt32(q));  // woken at the commit
        copied[ncopied++] = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 2, &isnull));
    }
    if (ncopied == 0) return;
    std::sort(copied, copied + ncopied);
    // ... and what c took for good: a receipt of kind 'x'.
    char* receipt_sql = psprintf("INSERT INTO %s (consumer, kind, hi_priority, hi_enq_time, hi_msgid, runs, at)"
                                 " VALUES ($1, 'x', $2, $3, $4, $5, $6)",
                                 qualified_name_of(m.receipts));
    Oid receipt_types[6] = {TEXTOID, INT4OID, TIMESTAMPTZOID, INT8OID, INT8ARRAYOID, TIMESTAMPTZOID};
    Datum receipt_args[6] = {consumer, Int32GetDatum(m.hi_priority), TimestampTzGetDatum(m.hi_enq_time),
                             Int64GetDatum(m.hi_msgid), runs_of(copied, ncopied), TimestampTzGetDatum(m.now)};
    rc = SPI_execute_with_args(receipt_sql, 6, receipt_types, receipt_args, nullptr, false, 0);
    if (rc != SPI_OK_INSERT) elog(ERROR, "aq: writing a receipt failed: %s", SPI_result_code_string(rc));
}

namespace {
struct ExpiredRow {
    Oid segment;
    int64 msgid;
    int32 queue_id, priority;
    TimestampTz enq_time;
    char* consumer;  // nullptr: a message for nobody (no subscriber left, or the parent's)
    bool open;       // a consumer holds it, or a walk of it was busy: not done
};
int by_message(const void* a, const void* b) {
    const ExpiredRow* x = *static_cast<const ExpiredRow* const*>(a);
    const ExpiredRow* y = *static_cast<const ExpiredRow* const*>(b);
    if (x->segment != y->segment) return x->segment < y->segment ? -1 : 1;
    return x->msgid < y->msgid ? -1 : x->msgid > y->msgid ? 1 : 0;
}
}  // namespace

// A batch's (message, consumer) rows at most (recipient lists of up to 1,024 names).
constexpr int64 expiry_batch_rows = 100000;

int64 expire_once(const QueueInfo& q, TimestampTz now, bool* held) {
    *held = false;
    // A batch of the expired messages of the table's normal queues, then one row per consumer each
    // is for (its recipient list, or the subscribers by since_msgid; none: one row without a
    // consumer), by consumer, segment and queue: every consumer of a message of the batch is in it.
    char* sql = psprintf(
        "SELECT m.tableoid, m.msgid, m.q_id, m.priority, m.enq_time, f.consumer"
        // At most $3 messages, and as many as fit in $4 (message, consumer) rows, the first always
        // (a message's consumers: its list, or at most its queue's subscribers).
        "  FROM (SELECT b.* FROM"
        "         (SELECT w.*, pg_catalog.sum(w.weight) OVER (ORDER BY w.tableoid, w.msgid) AS upto FROM"
        "           (SELECT e.tableoid, e.msgid, e.q_id, e.priority, e.enq_time, e.recipients,"
        "                   COALESCE(pg_catalog.cardinality(e.recipients),"
        "                            (SELECT pg_catalog.count(*) FROM aq.subscribers s"
        "                              WHERE s.queue_id OPERATOR(pg_catalog.=) e.q_id)) AS weight"
        "              FROM %s e"
        "             WHERE e.expiration OPERATOR(pg_catalog.<=) $1 AND e.consumer_name IS NULL"
        "               AND e.q_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.queue_id FROM aq.queues n"
        "                    WHERE n.queue_table_id OPERATOR(pg_catalog.=) $2 AND n.queue_type OPERATOR(pg_catalog.=) 'normal_queue'))"
        "             ORDER BY e.tableoid, e.msgid LIMIT $3) w) b"
        "         WHERE b.upto OPERATOR(pg_catalog.<=) $4 OR b.upto OPERATOR(pg_catalog.=) b.weight) m"
        // Who it is for (3; aq._message_recipients, the rule in SQL).
        "  LEFT JOIN LATERAL aq._message_recipients(m.q_id, m.msgid, m.recipients) f ON true"
        " ORDER BY f.consumer NULLS FIRST, m.tableoid, m.q_id, m.msgid",
        q.qualified_table);
    Oid types[4] = {TIMESTAMPTZOID, INT4OID, INT8OID, INT8OID};
    Datum args[4] = {TimestampTzGetDatum(now), Int32GetDatum(q.queue_table_id), Int64GetDatum(expiry_batch_size),
                     Int64GetDatum(expiry_batch_rows)};
    int rc = SPI_execute_with_args(sql, 4, types, args, nullptr, true, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: looking for expired messages failed: %s", SPI_result_code_string(rc));
    int n = int(SPI_processed);
    ExpiredRow* rows = static_cast<ExpiredRow*>(palloc(sizeof(ExpiredRow) * Max(n, 1)));
    for (int i = 0; i < n; i++) {
        HeapTuple t = SPI_tuptable->vals[i];
        TupleDesc d = SPI_tuptable->tupdesc;
        bool isnull;
        rows[i] = ExpiredRow{DatumGetObjectId(SPI_getbinval(t, d, 1, &isnull)), DatumGetInt64(SPI_getbinval(t, d, 2, &isnull)),
                             DatumGetInt32(SPI_getbinval(t, d, 3, &isnull)), DatumGetInt32(SPI_getbinval(t, d, 4, &isnull)),
                             DatumGetTimestampTz(SPI_getbinval(t, d, 5, &isnull)), SPI_getvalue(t, d, 6), false};
    }
    SPI_freetuptable(SPI_tuptable);
    int64* ids = static_cast<int64*>(palloc(sizeof(int64) * Max(n, 1)));
    int32* attempts = static_cast<int32*>(palloc(sizeof(int32) * Max(n, 1)));
    auto same_group = [&](const ExpiredRow& a, const ExpiredRow& b) {
        return a.segment == b.segment && a.consumer && b.consumer && strcmp(a.consumer, b.consumer) == 0;
    };
    for (int i = 0; i < n;) {
        int end = i + 1;
        while (end < n && same_group(rows[end], rows[i])) end++;
        int k = -1;
        for (int s = 0; s < q.segments.count && k < 0 && rows[i].consumer; s++)
            if (q.segments.relids[s] == rows[i].segment) k = s;
        ConsumerView view;
        View read = k >= 0 ? view_of(q.relid, q.segments.receipts[k], rows[i].consumer, &view) : View::not_aqs;
        // A walk of the consumer (busy), or receipts the walks refuse: looked at again later.
        if (read == View::busy || (read == View::not_aqs && k >= 0))
            for (int j = i; j < end; j++) rows[j].open = true;
        if (read == View::read) {
            // Its aborted receipts not written yet (5): their messages wait for their attempts.
            int npending = 0;
            const int64* pending = retries::counting()
                                       ? settler::pending_receipt_runs(q.segments.receipts[k], rows[i].consumer, &npending)
                                       : nullptr;
            for (int j = 0; j + 1 < npending; j += 2) view.attempts.add(pending[j], pending[j + 1], 0, true);
            view.attempts.sort();
            // Per queue (a segment holds every queue's messages): what the consumer has not taken.
            for (int from = i; from < end;) {
                int upto = from, count = 0;
                while (upto < end && rows[upto].queue_id == rows[from].queue_id) upto++;
                auto later = [&](const ExpiredRow& a, const ExpiredRow& b) {  // a after b in the queue's order
                    if (q.priority_order && a.priority != b.priority) return a.priority > b.priority;
                    if (a.enq_time != b.enq_time) return a.enq_time > b.enq_time;
                    return a.msgid > b.msgid;
                };
                const ExpiredRow* hi = nullptr;
                for (int j = from; j < upto; j++) {
                    CHECK_FOR_INTERRUPTS();
                    TakenRuns::Found found = view.taken.find(rows[j].msgid);
                    AttemptRuns::Seen seen = view.attempts.find(rows[j].msgid);
                    if (found == TakenRuns::Found::held || (found == TakenRuns::Found::no && seen.pending)) {
                        rows[j].open = true;  // its end decides
                        continue;
                    }
                    if (found != TakenRuns::Found::no) continue;
                    ids[count] = rows[j].msgid;
                    attempts[count++] = seen.attempts;
                    if (!hi || later(rows[j], *hi)) hi = &rows[j];
                }
                if (count > 0) {
                    ExceptionMove move{q.queue_table_id, &q.segments, rows[i].segment, q.segments.receipts[k],
                                       rows[from].queue_id, q.default_exception_id, rows[i].consumer, ids, attempts, count,
                                       q.priority_order ? hi->priority : 0, hi->enq_time, hi->msgid, now};
                    move_to_exception(move);
                }
                from = upto;
            }
            // Written (uncommitted receipts are held by the walks: dirty reads): the consumer's walks
            // need not wait for this transaction's end.
            release_walk_lock(q.relid, rows[i].consumer);
        }
        i = end;
    }
    // The messages every subscriber is done with (took, or has a copy of now), and those for
    // nobody: no longer expiring.  By message: one open row keeps it.
    int64 messages = 0;
    const ExpiredRow** order = static_cast<const ExpiredRow**>(palloc(sizeof(ExpiredRow*) * Max(n, 1)));
    for (int i = 0; i < n; i++) order[i] = &rows[i];
    qsort(order, n, sizeof(ExpiredRow*), by_message);
    for (int i = 0; i < n;) {
        Oid segment = order[i]->segment;
        int count = 0;
        for (; i < n && order[i]->segment == segment;) {
            int64 msgid = order[i]->msgid;
            bool open = false;
            for (; i < n && order[i]->segment == segment && order[i]->msgid == msgid; i++) open |= order[i]->open;
            if (open) {
                *held = true;
            } else {
                ids[count++] = msgid;
                messages++;
            }
        }
        if (count == 0) continue;
        Oid done_types[1] = {INT8ARRAYOID};
        Datum done_args[1] = {int8_array(ids, count)};
        rc = SPI_execute_with_args(psprintf("UPDATE ONLY %s SET expiration = NULL WHERE msgid OPERATOR(pg_catalog.=) ANY ($1)"
                                            " AND consumer_name IS NULL",
                                            qualified_name_of(segment)),
                                   1, done_types, done_args, nullptr, false, 0);
        if (rc != SPI_OK_UPDATE) elog(ERROR, "aq: expiring messages failed: %s", SPI_result_code_string(rc));
    }
    return messages;  // cleared: a full batch has the time manager go on at once (time_manager.hpp, 4)
}

namespace {
SPIPlanPtr subscribed_plan = nullptr;
}  // namespace

int64 subscribed_since(int32 queue_id, const char* consumer) {
    if (!subscribed_plan) {
        Oid types[2] = {INT4OID, TEXTOID};
        subscribed_plan = SPI_prepare("SELECT COALESCE(since_msgid, 0) FROM aq.subscribers WHERE queue_id OPERATOR(pg_catalog.=) $1"
                                      " AND consumer_name OPERATOR(pg_catalog.=) $2", 2, types);
        if (!subscribed_plan) elog(ERROR, "aq: SPI_prepare of the subscriber check failed");
        SPI_keepplan(subscribed_plan);
    }
    Datum args[2] = {Int32GetDatum(queue_id), CStringGetTextDatum(consumer)};
    base::spi::execute(subscribed_plan, args, nullptr, 1, SPI_OK_SELECT, "subscriber check");
    if (SPI_processed == 0) {
        base::spi::free_result();
        return -1;
    }
    bool isnull;
    Datum v = base::spi::first_value(&isnull);
    return isnull ? 0 : DatumGetInt64(v);
}

namespace {
struct PositionLook {
    const QueueInfo* q;
    int64 msgid;
    BulkDequeuePosition* at;
    bool found;
};
void read_position(void* arg);
}  // namespace

bool once_position(const QueueInfo& q, int64 msgid, BulkDequeuePosition* at) {
    // In a look (ring.hpp, L1): reading through the table locks every segment, which a dequeue
    // that then waits must not keep.
    PositionLook look{&q, msgid, at, false};
    base::xact_end::look(read_position, &look);
    return look.found;
}

namespace {
void read_position(void* arg) {
    auto* l = static_cast<PositionLook*>(arg);
    const QueueInfo& q = *l->q;
    int64 msgid = l->msgid;
    BulkDequeuePosition* at = l->at;
    char* sql = psprintf("SELECT priority, enq_time FROM %s WHERE msgid OPERATOR(pg_catalog.=) $1"
                         " AND q_id OPERATOR(pg_catalog.=) $2 AND consumer_name IS NULL LIMIT 1",
                         q.qualified_table);
    Oid types[2] = {INT8OID, INT4OID};
    SPIPlanPtr plan = SPI_prepare(sql, 2, types);
    if (!plan) elog(ERROR, "aq: SPI_prepare of the message position failed: %s", SPI_result_code_string(SPI_result));
    Datum args[2] = {Int64GetDatum(msgid), Int32GetDatum(q.queue_id)};
    int rc = base::execute_plan_as(q.owner, plan, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: reading a message's position failed: %s", SPI_result_code_string(rc));
    bool found = SPI_processed == 1;
    if (found) {
        bool isnull;
        *at = BulkDequeuePosition{DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull)),
                                  DatumGetTimestampTz(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)),
                                  msgid};
    }
    SPI_freetuptable(SPI_tuptable);
    SPI_freeplan(plan);
    l->found = found;
}
}  // namespace

// Whether the message in the slot is for r's consumer (3): its recipient list names the consumer,
// or it has none and the consumer subscribed before it (r.since; PG_INT64_MAX for a consumer that
// is no subscriber).  A list is read in scratch, reset here.
bool for_consumer(TupleTableSlot* slot, int64 msgid, const OnceDequeue& r, MemoryContext scratch) {
    bool isnull;
    Datum list = slot_getattr(slot, col_recipients + 1, &isnull);
    if (isnull) return msgid > r.since;
    MemoryContext outer = MemoryContextSwitchTo(scratch);
    ArrayType* names = DatumGetArrayTypeP(list);
    size_t length = strlen(r.consumer);
    bool named = false;
    array_iter it;
    array_iter_setup(&it, reinterpret_cast<AnyArrayType*>(names));
    int n = ArrayGetNItems(ARR_NDIM(names), ARR_DIMS(names));
    for (int i = 0; i < n && !named; i++) {
        bool null;
        Datum name = array_iter_next(&it, &null, i, -1, false, TYPALIGN_INT);
        if (null) continue;
        text* t = DatumGetTextPP(name);
        named = VARSIZE_ANY_EXHDR(t) == length && memcmp(VARDATA_ANY(t), r.consumer, length) == 0;
    }
    MemoryContextSwitchTo(outer);
    MemoryContextReset(scratch);
    return named;
}

int bulk_dequeue_once(const OnceDequeue& r) {
    RingScan ring;
    // The receipts are written (remove); the messages only read, by any dequeue: ACCESS SHARE on the
    // queue table and its segments, so that add_subscriber's SHARE lock waits for the enqueues in
    // progress alone (its since_msgid), not for the dequeues, nor holds them back meanwhile.
    LOCKMODE lock = r.browse ? AccessShareLock : RowExclusiveLock;
    // A walk by an exact correlation in enq_time order reads the correlation index: only that
    // correlation's messages, in the queue's order among them (index_walk.hpp, Order).  Where a
    // relation has none, the order index, filtered.
    bool correlation_walk = r.correlation && !r.priority_order && (correlation_shape(r.correlation) & correlation_exact) != 0;
    if (correlation_walk && !ring.open(r.relid, *r.segments, r.payload_type, Order::correlation, AccessShareLock)) {
        ring.close();
        correlation_walk = false;
    }
    bool eligible = (correlation_walk || ring.open(r.relid, *r.segments, r.payload_type, order_of(r.priority_order), AccessShareLock)) &&
                    (r.browse ? pg_class_aclcheck(r.relid, GetUserId(), ACL_SELECT) == ACLCHECK_OK
                              : !XactReadOnly && !IsInParallelMode() && caller_may_remove(ring.parent()));
    Receipts receipts[ring::max_segments];
    for (int i = 0; eligible && i < r.segments->count; i++)
        eligible = OidIsValid(r.segments->receipts[i]) && open_receipts(r.segments->receipts[i], lock, &receipts[i]);
    if (!eligible) {
        for (int i = 0; i < r.segments->count; i++) close_receipts(&receipts[i]);
        ring.close();
        return -1;
    }
    TupleDesc properties_desc = open_properties(false);

    // A walk by msgid starts at its message; one by correlation starts at the floor but raises it
    // not (the messages it passes are not all taken).
    bool floor_applies = !r.browse && !r.after && !r.only;
    bool floor_rises = floor_applies && !r.correlation && !r.condition;
    // The deq_condition, analyzed against each segment before the walk takes anything (its errors
    // are the statement's).
    condition::RowFilter* filters[ring::max_segments + 1] = {};
    for (int i = 1; r.condition && i < ring.count; i++)
        filters[i] = condition::begin_filter(r.condition, r.condition_text, "deq_condition", ring.cursors[i].heap);
    scan_floor::Reading floor;
    if (floor_applies) floor = scan_floor::read(r.queue_id, r.consumer);
    // A message a walk passed while it waited comes back under the floor at its time: a dequeue
    // that waits wakes then, though this walk does not meet it (4).
    if (r.next_ready && floor.returns_at != 0 && (*r.next_ready == 0 || floor.returns_at < *r.next_ready))
        *r.next_ready = floor.returns_at;
    // Messages for every subscriber that wait for a delay are passed by the floor while the time
    // manager lowers every subscriber's floor back to each when it becomes ready; known before the
    // walk's time (4; time_manager.hpp, 8).
    // (A subscriber this transaction added sees no message of another transaction after its
    // since_msgid: add_subscriber's SHARE lock holds their enqueues back to its commit, and the
    // rounds then see it.)
    bool passes_delays = floor_rises && r.since != PG_INT64_MAX && time_manager::passes_delays();
    LOCKTAG tag = walk_tag(r.relid, r.consumer);
    // Held already by this transaction: a walk of c inside a walk of c (a deq_condition that
    // dequeues), which would take again what the outer walk is taking.
    if (!r.browse && LockAcquire(&tag, ExclusiveLock, false, false) == LOCKACQUIRE_ALREADY_HELD)
        ereport(ERROR, (errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
                        errmsg("a dequeue of consumer \"%s\" may not run inside another dequeue of that consumer",
                               r.consumer),
                        errdetail("A deq_condition of the outer dequeue called it.")));
    // What the walk reads of the receipts and the receipts it writes live in a context of its own,
    // gone at its end: a dequeue that waits walks again at every wake-up.
    MemoryContext walk_context = AllocSetContextCreate(CurrentMemoryContext, "aq once walk", ALLOCSET_DEFAULT_SIZES);
    MemoryContext caller_context = MemoryContextSwitchTo(walk_context);

    WalkSnapshot walk = WalkSnapshot::begin();
    const auto [snapshot, now, command] = walk;

    bool from_floor = floor_applies && !r.from_head && floor.floor.enq_time != DT_NOBEGIN;
    scan_floor::Position start{};
    const scan_floor::Position* from = nullptr;
    if (r.only) {
        start = scan_floor::Position{r.only->enq_time, r.only->msgid, r.priority_order ? r.only->priority : 0};
        from = &start;
    } else if (r.after) {
        start = scan_floor::Position{r.after->enq_time, r.after->msgid, r.priority_order ? r.after->priority : 0};
        from = &start;
    } else if (from_floor) {
        start = floor.floor;
        if (!r.priority_order) start.priority = 0;
        from = &start;
    }
    Datum consumer = CStringGetTextDatum(r.consumer);
    TakenRuns taken;
    AttemptRuns attempts;
    for (int i = 0; i < r.segments->count; i++) {
        load_taken(receipts[i], consumer, from, &taken, &attempts);
        // 5: aborted receipts the settler has not written yet hold their messages (not while no
        // settler can run: then nothing is held, and those attempts are not counted).
        int npending = 0;
        const int64* pending = retries::counting()
                                   ? settler::pending_receipt_runs(r.segments->receipts[i], r.consumer, &npending)
                                   : nullptr;
        for (int j = 0; j + 1 < npending; j += 2) attempts.add(pending[j], pending[j + 1], 0, true);
    }
    taken.sort();
    attempts.sort();
    MemoryContextSwitchTo(caller_context);

    ScanKeyData keys[3], row[3];
    AttrNumber first = 2;  // the index column of enq_time (priority in priority order)
    if (correlation_walk) {
        correlation_keys(keys, r.queue_id, CStringGetTextDatum(r.correlation));
        first = correlation_first;
    } else {
        ScanKeyInit(&keys[0], 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(r.queue_id));
    }
    int equal = first - 1;
    int nkeys = equal + start_key(&keys[equal], row, first, r.priority_order, r.only ? nullptr : r.after,
                                  r.only ? &start : from_floor ? &floor.floor : nullptr);
    ring.begin(snapshot, keys, nkeys);
    MemoryContext message_context = AllocSetContextCreate(CurrentMemoryContext, "aq once dequeue", ALLOCSET_SMALL_SIZES);
    MemoryContext scratch_context = AllocSetContextCreate(CurrentMemoryContext, "aq once recipients", ALLOCSET_SMALL_SIZES);

    RowView row_view{nullptr, col_delay, col_expiration, false, InvalidOid};
    FloorWatch watch = FloorWatch::of_order(floor_rises, first, r.priority_order, now);
    Datum pattern = r.correlation ? CStringGetTextDatum(r.correlation) : (Datum)0;
    int handed = 0;
    while (handed < r.max_messages) {
        if (!ring.next_visible(watch)) break;
        TupleTableSlot* slot = ring.slot();
        const Datum* v = slot->tts_values;
        const bool* isnull = slot->tts_isnull;
        if (r.after && !index_walk::after_position(*r.after, r.priority_order, v)) continue;
        if (ring.last == 0) continue;  // the parent's: no receipts (3)
        int64 id = DatumGetInt64(v[col_msgid]);
        if (r.only && id != r.only->msgid) break;  // past it: the walk started at its position
        if (!for_consumer(slot, id, r, scratch_context)) {  // never c's (3)
            watch.consumed_here();
            continue;
        }
        if (r.correlation &&
            (isnull[col_corrid] ||
             !DatumGetBool(DirectFunctionCall2Coll(textlike, C_COLLATION_OID, v[col_corrid], pattern))))
            continue;
        row_view.slot = slot;
        if (!rules::holds<rules::Takeable>(row_view, now)) {
            // Waiting for its delay (4): for every subscriber (no recipient list) while the time
            // manager lowers their floors back, else with a return at its delay.
            if (!rules::holds<rules::Ready>(row_view, now)) {
                if (passes_delays && slot_attisnull(slot, col_recipients + 1))
                    watch.waiting_passed(slot);
                else
                    watch.passed_until(DatumGetTimestampTz(v[col_delay]));
            }
            continue;
        }
        int64 msgid = DatumGetInt64(v[col_msgid]);
        TakenRuns::Found found = taken.find(msgid);
        if (found == TakenRuns::Found::taken) {
            watch.consumed_here();
            continue;
        }
        if (found == TakenRuns::Found::held) continue;
        AttemptRuns::Seen seen = attempts.find(msgid);
        if (seen.pending) continue;  // its attempt is being written (5)
        if (seen.ready_at > now) {   // waiting for its retry_delay: passed with a return then (4)
            if (r.next_ready && (*r.next_ready == 0 || seen.ready_at < *r.next_ready)) *r.next_ready = seen.ready_at;
            watch.passed_until(seen.ready_at);
            continue;
        }
        if (filters[ring.last]) {  // evaluated on the consumer's retry_count (5)
            slot_getallattrs(slot);
            Datum row_count = slot->tts_values[col_retry_count];
            slot->tts_values[col_retry_count] = Int32GetDatum(DatumGetInt32(row_count) + seen.attempts);
            bool passes = condition::filter_passes(filters[ring.last], slot);
            slot->tts_values[col_retry_count] = row_count;
            if (!passes) continue;
        }
        if (!r.browse) {
            MemoryContext outer = MemoryContextSwitchTo(walk_context);
            note_taken(receipts[ring.last - 1], msgid,
                       scan_floor::Position{DatumGetTimestampTz(v[col_enq_time]), msgid,
                                            r.priority_order ? DatumGetInt32(v[col_priority]) : 0});
            MemoryContextSwitchTo(outer);
            ring.claimed_last();  // its segment stays locked with the receipt
        }
        MemoryContext outer = MemoryContextSwitchTo(message_context);
        Datum counted[column_count];  // the row's retry_count plus the consumer's attempts (5)
        memcpy(counted, v, sizeof counted);
        counted[col_retry_count] = Int32GetDatum(DatumGetInt32(v[col_retry_count]) + seen.attempts);
        BulkDequeuedMessage message{v[col_msgid], v[col_user_data], properties_of(properties_desc, counted, isnull),
                                    DatumGetInt32(v[col_priority]), DatumGetTimestampTz(v[col_enq_time]),
                                    slot->tts_tid, RelationGetRelid(ring.heap())};
        MemoryContextSwitchTo(outer);
        r.sink(r.sink_context, message);
        MemoryContextReset(message_context);
        handed++;
    }
    bool inserted = false;
    MemoryContextSwitchTo(walk_context);
    for (int i = 0; i < r.segments->count; i++)
        if (receipts[i].count > 0) {
            insert_receipt(receipts[i], consumer, r.consumer, r.queue_id, now, r.lock_only ? 'l' : 't');
            inserted = true;
        }
    MemoryContextSwitchTo(caller_context);
    MemoryContextDelete(walk_context);
    if (!r.browse) (void)LockRelease(&tag, ExclusiveLock, false);
    if (floor_rises) scan_floor::raise(r.queue_id, floor, watch.candidate, r.consumer, watch.back);

    MemoryContextDelete(message_context);
    MemoryContextDelete(scratch_context);
    for (auto* filter : filters)
        if (filter) condition::end_filter(filter);
    // A receipts table the walk wrote nothing into is let go, as the ring lets go of a segment it
    // took nothing from (ring_scan.hpp, 5): a waiting consumer holds no lock that would keep a
    // segment and its receipts from truncation (ring.hpp, L1).
    for (int i = 0; i < r.segments->count; i++) close_receipts(&receipts[i], receipts[i].count > 0 ? NoLock : lock);
    ring.close();
    walk.end();
    ReleaseTupleDesc(properties_desc);
    if (inserted) CommandCounterIncrement();  // later commands of this transaction see the receipts
    return handed;
}

}  // namespace aq::queue
