// Ring storage (ring.hpp) and the walks' merged scan over it (ring_scan.hpp).
// Called inside base::call: plain data only.
extern "C" {
#include "postgres.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/skey.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "utils/resowner.h"
#include "access/heapam.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "storage/bufmgr.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/timestamp.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/syscache.h"
#include "catalog/namespace.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/snapmgr.h"
}

#include <cstring>

#include "compat/executor.hpp"
#include "compat/relation.hpp"
#include "base/multi_insert.hpp"
#include "base/run_as.hpp"
#include "base/xact_end.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/groups.hpp"
#include "queue/ring.hpp"
#include "queue/ring_scan.hpp"
#include "queue/scan_floor.hpp"
#include "queue/statements.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

namespace ring {

namespace {

// The ledger's latest generation for the queue table, under the latest snapshot (not the
// transaction's: R1); segment -1 if the ledger has none.
struct LedgerHead {
    int64 generation = -1;
    int segment = -1;
    TimestampTz opened = 0;
};
LedgerHead ledger_head(int32 queue_table_id) {
    Oid ledger_oid = get_relname_relid("segment_log", get_namespace_oid("aq", false));
    if (!OidIsValid(ledger_oid)) return LedgerHead{};
    Relation ledger = table_open(ledger_oid, AccessShareLock);
    list_free(RelationGetIndexList(ledger));  // fills rd_pkindex
    Oid pk = ledger->rd_pkindex;
    LedgerHead head;
    if (OidIsValid(pk)) {
        Relation index = index_open(pk, AccessShareLock);
        Snapshot snapshot = RegisterSnapshot(GetLatestSnapshot());
        ScanKeyData key;
        ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_INT4EQ, Int32GetDatum(queue_table_id));
        SysScanDesc scan = systable_beginscan_ordered(ledger, index, snapshot, 1, &key);
        if (HeapTuple tuple = systable_getnext_ordered(scan, BackwardScanDirection)) {
            // (queue_table_id, generation, segment, opened), all NOT NULL
            bool isnull;
            TupleDesc desc = RelationGetDescr(ledger);
            head.generation = DatumGetInt64(heap_getattr(tuple, 2, desc, &isnull));
            head.segment = DatumGetInt16(heap_getattr(tuple, 3, desc, &isnull));
            head.opened = DatumGetTimestampTz(heap_getattr(tuple, 4, desc, &isnull));
        }
        systable_endscan_ordered(scan);
        UnregisterSnapshot(snapshot);
        index_close(index, AccessShareLock);
    }
    table_close(ledger, AccessShareLock);
    return head;
}
int latest_segment(int32 queue_table_id) {
    return ledger_head(queue_table_id).segment;
}

Relation open_segment(const Segments& segments, int segment, LOCKMODE lock) {
    Relation rel = segment >= 0 && segment < segments.count ? try_table_open(segments.relids[segment], lock) : nullptr;
    if (!rel)
        ereport(ERROR, (errcode(ERRCODE_UNDEFINED_TABLE),
                        errmsg("segment %d of the queue table does not exist", segment),
                        errdetail("A segment was dropped outside aq.drop_queue_table, or the ledger aq.segment_log names none."),
                        errhint("Drop the queue table with aq.drop_queue_table and create it again.")));
    return rel;
}

}  // namespace

bool available() {
    return OidIsValid(get_relname_relid("queue_segments", get_namespace_oid("aq", false)));
}

Relation open_current(int32 queue_table_id, const Segments& segments) {
    int segment = latest_segment(queue_table_id);
    for (int attempt = 0;; attempt++) {
        Relation rel = open_segment(segments, segment, RowExclusiveLock);
        int again = latest_segment(queue_table_id);
        if (again == segment || again < 0 || attempt == 2) return rel;
        table_close(rel, NoLock);  // the lock is kept to the end of the transaction (R2)
        segment = again;
    }
}

Oid foreign_inheritor(Oid parent, const Segments& segments) {
    List* children = find_inheritance_children(parent, NoLock);
    Oid foreign = InvalidOid;
    ListCell* cell;
    foreach (cell, children) {
        Oid child = lfirst_oid(cell);
        bool segment = false;
        for (int i = 0; i < segments.count && !segment; i++) segment = segments.relids[i] == child;
        if (!segment) foreign = child;
    }
    list_free(children);
    // A table inheriting from a segment is read through the parent too (a statement expands the
    // inheritance recursively).  relhassubclass is cleared only lazily: confirmed by a look.
    for (int i = 0; i < segments.count && !OidIsValid(foreign); i++) {
        if (!has_subclass(segments.relids[i])) continue;
        List* grandchildren = find_inheritance_children(segments.relids[i], NoLock);
        if (grandchildren != NIL) foreign = linitial_oid(grandchildren);
        list_free(grandchildren);
    }
    return foreign;
}

bool plain_segment(Relation parent, Relation segment) {
    TupleDesc p = RelationGetDescr(parent), s = RelationGetDescr(segment);
    if (segment->rd_rel->relkind != RELKIND_RELATION || p->natts != s->natts) return false;
    for (int i = 0; i < p->natts; i++) {
        Form_pg_attribute a = TupleDescAttr(p, i), b = TupleDescAttr(s, i);
        if (a->attisdropped || b->attisdropped || a->atttypid != b->atttypid || a->atttypmod != b->atttypmod ||
            strcmp(NameStr(a->attname), NameStr(b->attname)) != 0)
            return false;
    }
    return base::multi_insert::refusal(segment) == nullptr;
}

namespace {

int segment_size_kb = 32 * 1024;
int segment_max_age_s = 60;

constexpr uint32 ring_lock_key = 24945;  // "aq" (0x6171); the second key is the queue table id
constexpr uint16 ring_lock_kind = 2;     // the two-key form of pg_advisory_xact_lock

// A page's row versions: how many, and how many not gone for good (index_walk.hpp, 6).  first:
// stop at the first one not gone (a proof's question).
struct PageCount {
    uint32 versions = 0;
    uint32 not_gone = 0;
};
PageCount count_page(Relation rel, BlockNumber block, BufferAccessStrategy strategy, bool first) {
    Buffer buffer = ReadBufferExtended(rel, MAIN_FORKNUM, block, RBM_NORMAL, strategy);
    LockBuffer(buffer, BUFFER_LOCK_SHARE);
    Page page = BufferGetPage(buffer);
    OffsetNumber last = PageIsNew(page) ? InvalidOffsetNumber : PageGetMaxOffsetNumber(page);
    PageCount count;
    for (OffsetNumber offset = FirstOffsetNumber; offset <= last && !(first && count.not_gone > 0); offset++) {
        ItemId item = PageGetItemId(page, offset);
        if (!ItemIdIsNormal(item)) continue;
        HeapTupleData tuple;
        tuple.t_data = reinterpret_cast<HeapTupleHeader>(PageGetItem(page, item));
        tuple.t_len = ItemIdGetLength(item);
        tuple.t_tableOid = RelationGetRelid(rel);
        ItemPointerSet(&tuple.t_self, block, offset);
        TransactionId dead_after;
        HTSV_Result state = HeapTupleSatisfiesVacuumHorizon(&tuple, buffer, &dead_after);
        count.versions++;
        if (state != HEAPTUPLE_DEAD && state != HEAPTUPLE_RECENTLY_DEAD) count.not_gone++;
    }
    UnlockReleaseBuffer(buffer);
    return count;
}
bool page_gone(Relation rel, BlockNumber block, BufferAccessStrategy strategy) {
    return count_page(rel, block, strategy, true).not_gone == 0;
}

// Where the last proof of a segment (by its file) met a row not gone: the next proof without the
// lock looks at that page first, so a segment held by one long-delayed message costs one page a
// rotation, not a read of the whole segment.  A hint only: a proof that decides (T2, under the lock)
// reads every page.  This process's (the time manager's), a few entries.
struct ProofMark {
    Oid relid;
    Oid file;
    BlockNumber block;
};
ProofMark proof_marks[64];

// T2: whether every row version in the segment is gone for good.  The caller holds a lock on it.
// hinted: start with the page where the last proof failed (the proof without the lock).
bool settled(Relation rel, bool hinted) {
    BlockNumber blocks = RelationGetNumberOfBlocks(rel);
    BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
    ProofMark& mark = proof_marks[RelationGetRelid(rel) % lengthof(proof_marks)];
    Oid file = compat::relation_file_number(rel);
    bool known = mark.relid == RelationGetRelid(rel) && mark.file == file && mark.block < blocks;
    bool all_gone = !(hinted && known && !page_gone(rel, mark.block, strategy));
    BlockNumber failed = InvalidBlockNumber;
    for (BlockNumber block = 0; block < blocks && all_gone; block++) {
        CHECK_FOR_INTERRUPTS();
        all_gone = page_gone(rel, block, strategy);
        if (!all_gone) failed = block;
    }
    FreeAccessStrategy(strategy);
    if (failed != InvalidBlockNumber) mark = ProofMark{RelationGetRelid(rel), file, failed};
    return all_gone;
}

// T2 of segment k by its pages (settled), the segment opened for it.  hinted: as settled's.
bool settled_segment(const Segments& segments, int k, bool hinted = true) {
    Relation rel = try_table_open(segments.relids[k], AccessShareLock);
    if (!rel) return false;
    bool all = settled(rel, hinted);
    table_close(rel, AccessShareLock);
    return all;
}

struct TruncateWork {
    const char* statement;
};

// T2 of a ring that stores each message once (once_walk.hpp): every message of segment k is taken by
// every subscriber of its queue it is for (since_msgid) under a committed receipt of segment k's
// receipts table that took it ('t', or 'x': moved to an exception queue; each consumer's runs as one
// multirange), and no consumer's copy in an exception queue is
// left in it; what another transaction is enqueuing or taking holds a lock on the segment (R2,
// once_walk.hpp 3), which a proof under the lock excludes.  Requires SPI; reads as the caller.
// The time manager's proof without the lock reads the whole segment and its receipts: one that
// failed is not tried again for once_retry_s seconds (this process's marks, by the segment's file).
constexpr long once_retry_s = 5;
struct OnceMark {
    Oid relid;
    Oid file;
    TimestampTz at;
};
OnceMark once_marks[64];

bool once_settled(const Segments& segments, int k, bool hinted = true) {
    Relation seg = try_table_open(segments.relids[k], AccessShareLock);
    Relation receipts = seg ? try_table_open(segments.receipts[k], AccessShareLock) : nullptr;
    if (!seg || !receipts) {
        if (seg) table_close(seg, AccessShareLock);
        return false;
    }
    OnceMark& mark = once_marks[RelationGetRelid(seg) % lengthof(once_marks)];
    Oid file = compat::relation_file_number(seg);
    TimestampTz now = GetCurrentTimestamp();
    if (hinted && MyBackendType == B_BG_WORKER && mark.relid == RelationGetRelid(seg) && mark.file == file &&
        now - mark.at < once_retry_s * USECS_PER_SEC) {
        table_close(receipts, AccessShareLock);
        table_close(seg, AccessShareLock);
        return false;
    }
    char* sql = psprintf(
        // What each consumer took, or had moved to an exception queue (aq._taken_ranges: the
        // message rules in SQL, sql/aq--0.7.0.sql), its runs joined into one multirange, looked up
        // per message (a join of every run to the messages by range was quadratic: 67 s for 20,000
        // messages taken by 3 subscribers in 5,700 receipts).
        "WITH done AS (SELECT r.consumer, pg_catalog.range_agg(t.r) AS taken"
        "                FROM ONLY %2$s r CROSS JOIN LATERAL aq._taken_ranges(r.kind, r.runs) t(r)"
        "               GROUP BY r.consumer),"
        // Who each message is for (once_walk.hpp, 3): its recipient list, or every subscriber
        // aq._subscriber_receives says receives it, joined to the segment's messages as a whole (a
        // hash join; aq._message_recipients, a lookup per message, took 3 times as long, 157 ms
        // rather than 47 for 20,000 messages, and this runs again under the lock); a (message,
        // consumer) that consumer has not taken holds the segment.  (A consumer's copy in an
        // exception queue is the consumer's own, and holds it anyway: below.)
        "     owed AS (SELECT FROM ONLY %1$s m JOIN aq.subscribers s ON s.queue_id OPERATOR(pg_catalog.=) m.q_id"
        "                      AND aq._subscriber_receives(s.since_msgid, m.msgid, m.recipients)"
        "                LEFT JOIN done d ON d.consumer OPERATOR(pg_catalog.=) s.consumer_name COLLATE pg_catalog.\"C\""
        "               WHERE NOT COALESCE(d.taken OPERATOR(pg_catalog.@>) m.msgid, false)"
        "              UNION ALL"
        "              SELECT FROM ONLY %1$s m CROSS JOIN pg_catalog.unnest(m.recipients) l(consumer)"
        "                LEFT JOIN done d ON d.consumer OPERATOR(pg_catalog.=) l.consumer"
        "               WHERE m.consumer_name IS NULL AND NOT COALESCE(d.taken OPERATOR(pg_catalog.@>) m.msgid, false))"
        " SELECT NOT EXISTS (SELECT FROM owed)"
        // ... and no consumer's copy is left in an exception queue (once_walk.hpp, 5).
        "    AND NOT EXISTS (SELECT FROM ONLY %1$s m JOIN aq.queues q ON q.queue_id OPERATOR(pg_catalog.=) m.q_id"
        "                     WHERE q.queue_type OPERATOR(pg_catalog.=) 'exception_queue')",
        compat::qualified_name(seg), compat::qualified_name(receipts));
    table_close(receipts, AccessShareLock);
    table_close(seg, AccessShareLock);
    // Under the latest snapshot, not the transaction's: under the locks every writer of the segment
    // and its receipts has ended, and all of them must be seen (an enqueue that committed after the
    // transaction's snapshot, at REPEATABLE READ or in the time manager's long round, is a message).
    PushActiveSnapshot(GetLatestSnapshot());
    int rc = SPI_execute(sql, true, 1);
    PopActiveSnapshot();
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: proof of a segment failed: %s", SPI_result_code_string(rc));
    bool isnull;
    bool all = SPI_processed == 1 && DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    SPI_freetuptable(SPI_tuptable);
    if (!all && hinted) mark = OnceMark{segments.relids[k], file, now};
    return all;
}

// C1: a segment is carried forward when at most 1/carry_fraction of its row versions are not gone.
constexpr uint64 carry_fraction = 10;
constexpr int carry_batch = 5000;   // messages a rotation
constexpr int carry_groups = 64;    // groups a rotation (C6: a lock each, in the shared lock table)
constexpr int carry_group_candidates = 1024;  // ... tried in order until that many are locked
constexpr long carry_recount_s = 10;  // C4

// C4: when a segment (by its file) was last found over the fraction.  This process's, a few entries.
struct CensusMark {
    Oid relid;
    Oid file;
    TimestampTz at;
};
CensusMark census_marks[64];

// C1: whether the segment's rows not gone are few enough to carry forward (and some are).
bool worth_carrying(Relation rel) {
    CensusMark& mark = census_marks[RelationGetRelid(rel) % lengthof(census_marks)];
    Oid file = compat::relation_file_number(rel);
    TimestampTz now = GetCurrentTimestamp();
    if (mark.relid == RelationGetRelid(rel) && mark.file == file && now - mark.at < carry_recount_s * USECS_PER_SEC)
        return false;
    BlockNumber blocks = RelationGetNumberOfBlocks(rel);
    BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
    uint64 versions = 0, not_gone = 0;
    for (BlockNumber block = 0; block < blocks; block++) {
        CHECK_FOR_INTERRUPTS();
        PageCount count = count_page(rel, block, strategy, false);
        versions += count.versions;
        not_gone += count.not_gone;
    }
    FreeAccessStrategy(strategy);
    bool worth = not_gone > 0 && not_gone * carry_fraction <= versions;
    if (!worth) mark = CensusMark{RelationGetRelid(rel), file, now};
    return worth;
}

// What a carry moved, per queue (C3), copied out of SPI's result as plain data.
struct CarryWork {
    const char* statement;
    const char* groups_statement;  // grouped (C6): the groups that could move, else nullptr
    Oid parent;
    uint64 queues = 0;
    int32* queue_ids = nullptr;
    int32* priorities = nullptr;
    TimestampTz* first_enq_times = nullptr;
    int64* first_groups = nullptr;
    int64 moved = 0;
};
void run_carry(void* arg) {
    auto* w = static_cast<CarryWork*>(arg);
    Datum groups_arg = (Datum)0;
    if (w->groups_statement) {
        // C6: the groups whose lock this transaction gets at once.
        int rc = SPI_execute(w->groups_statement, true, 0);
        if (rc != SPI_OK_SELECT) elog(ERROR, "aq: carry-forward of a segment failed: %s", SPI_result_code_string(rc));
        uint64 n = SPI_processed;
        Datum* locked = static_cast<Datum*>(palloc(sizeof(Datum) * Max(n, 1)));
        int count = 0;
        for (uint64 i = 0; i < n; i++) {
            bool isnull;
            int64 group = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull));
            if (count < carry_groups && !isnull && groups::try_lock(w->parent, group)) locked[count++] = Int64GetDatum(group);
        }
        SPI_freetuptable(SPI_tuptable);
        if (count == 0) return;
        groups_arg = PointerGetDatum(construct_array(locked, count, INT8OID, sizeof(int64), true, TYPALIGN_DOUBLE));
    }
    Oid types[1] = {INT8ARRAYOID};
    int rc = SPI_execute_with_args(w->statement, w->groups_statement ? 1 : 0, types, &groups_arg, nullptr, false, 0);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: carry-forward of a segment failed: %s", SPI_result_code_string(rc));
    w->queues = SPI_processed;
    w->queue_ids = static_cast<int32*>(palloc(sizeof(int32) * Max(w->queues, 1)));
    w->priorities = static_cast<int32*>(palloc(sizeof(int32) * Max(w->queues, 1)));
    w->first_enq_times = static_cast<TimestampTz*>(palloc(sizeof(TimestampTz) * Max(w->queues, 1)));
    w->first_groups = static_cast<int64*>(palloc(sizeof(int64) * Max(w->queues, 1)));
    for (uint64 i = 0; i < w->queues; i++) {
        HeapTuple row = SPI_tuptable->vals[i];
        TupleDesc desc = SPI_tuptable->tupdesc;
        bool isnull;
        w->queue_ids[i] = DatumGetInt32(SPI_getbinval(row, desc, 1, &isnull));
        w->priorities[i] = DatumGetInt32(SPI_getbinval(row, desc, 2, &isnull));
        w->first_enq_times[i] = DatumGetTimestampTz(SPI_getbinval(row, desc, 3, &isnull));
        w->moved += DatumGetInt64(SPI_getbinval(row, desc, 4, &isnull));
        w->first_groups[i] = w->groups_statement ? DatumGetInt64(SPI_getbinval(row, desc, 5, &isnull)) : 0;
    }
    SPI_freetuptable(SPI_tuptable);
}


// C1-C3: carries segment `from`'s rows not gone into segment `to` (the current one) when they are
// few; returns how many messages it moved.
int64 carry_forward(const RingTable& t, int from, int to) {
    Relation source = try_table_open(t.segments.relids[from], RowExclusiveLock);
    if (!source) return 0;
    Relation target = try_table_open(t.segments.relids[to], RowExclusiveLock);
    bool carry = target && ring::plain_segment(source, target) && ring::plain_segment(target, source) &&
                 !settled(source, true) && worth_carrying(source);
    CarryWork work{carry ? carry_forward_sql(compat::qualified_name(source), compat::qualified_name(target), carry_batch, t.grouped) : nullptr,
                   carry && t.grouped ? carry_groups_sql(compat::qualified_name(source), carry_group_candidates) : nullptr, t.relid};
    table_close(source, NoLock);  // the locks are kept to the end of the rotation's transaction
    if (target) table_close(target, NoLock);
    if (!carry) return 0;
    base::run_as(base::RunAs{t.owner}, run_carry, &work);
    for (uint64 i = 0; i < work.queues; i++) {  // C3, before the commit
        if (work.queue_ids[i] < 0) continue;  // retained copies (retention.hpp): no walk reads them
        scan_floor::lower(work.queue_ids[i], work.first_enq_times[i], nullptr, t.priority_order ? work.priorities[i] : 0);
        if (t.grouped) scan_floor::lower(work.queue_ids[i], work.first_groups[i], groups::floor_key);
        wakeup::note_enqueue(work.queue_ids[i]);
    }
    return work.moved;
}

}  // namespace

void define_settings() {
    DefineCustomIntVariable("aq.segment_size",
                            "Size at which a ring queue table switches to its next segment.",
                            "The time manager truncates a segment once every message in it is gone, so a ring's "
                            "size is bounded by its backlog, not by the xmin horizon.",
                            &segment_size_kb, 32 * 1024, 8, INT_MAX / 2, PGC_SIGHUP, GUC_UNIT_KB, nullptr, nullptr,
                            nullptr);
    DefineCustomIntVariable("aq.segment_max_age",
                            "Age after which a ring queue table's current segment, if it has rows, gives way to the next.",
                            nullptr, &segment_max_age_s, 60, 1, 86400, PGC_SIGHUP, GUC_UNIT_S, nullptr, nullptr, nullptr);
}

Rotation rotate(const RingTable& t, bool switch_due) {
    const Segments& segments = t.segments;
    int32 queue_table_id = t.queue_table_id;
    Rotation r;
    if (segments.count < 2) return r;
    LOCKTAG tag;
    SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, ring_lock_key, uint32(queue_table_id), ring_lock_kind);
    if (LockAcquire(&tag, ExclusiveLock, false, true) == LOCKACQUIRE_NOT_AVAIL) {  // T5
        r.holds_rows = true;
        return r;
    }
    LedgerHead head = ledger_head(queue_table_id);
    if (head.segment < 0 || head.segment >= segments.count) return r;

    // T4: the switch, first, while this transaction holds no segment lock but for moments (no lock
    // order to keep against a concurrent ALTER TABLE of the queue table).
    if (Relation current = try_table_open(segments.relids[head.segment], AccessShareLock)) {
        uint64 bytes = uint64(RelationGetNumberOfBlocks(current)) * BLCKSZ;
        table_close(current, AccessShareLock);
        bool due = switch_due || bytes >= uint64(segment_size_kb) * 1024 ||
                   (bytes > 0 && GetCurrentTimestamp() - head.opened >= int64(segment_max_age_s) * USECS_PER_SEC);
        int next = int((head.generation + 1) % segments.count);
        Relation following = due ? try_table_open(segments.relids[next], AccessShareLock) : nullptr;
        bool empty = following && RelationGetNumberOfBlocks(following) == 0;
        if (following) table_close(following, AccessShareLock);
        if (empty) {
            Oid types[3] = {INT4OID, INT8OID, INT2OID};
            Datum args[3] = {Int32GetDatum(queue_table_id), Int64GetDatum(head.generation + 1), Int16GetDatum(int16(next))};
            int rc = SPI_execute_with_args("INSERT INTO aq.segment_log (queue_table_id, generation, segment) VALUES ($1, $2, $3)"
                                           " ON CONFLICT DO NOTHING",
                                           3, types, args, nullptr, false, 0);
            if (rc != SPI_OK_INSERT) elog(ERROR, "aq: segment switch failed: %s", SPI_result_code_string(rc));
            r.switched = SPI_processed == 1;
        } else if (following && !OidIsValid(segments.receipts[0])) {
            // T4 blocked: the next segment still has rows.  C1: a few are carried forward, so that
            // the next rotations truncate it and switch.  (Not a ring that stores each message once:
            // its receipts are of their messages' segment.)
            r.carried = carry_forward(t, next, head.segment);
            r.more = r.carried >= carry_batch;
        }
    }
    // The segment left by a switch just now may still be written by enqueues that locked it
    // before: it is not a candidate until the next rotation.
    int left = r.switched ? head.segment : -1;
    if (r.switched) head.segment = int((head.generation + 1) % segments.count);

    // T1, T2: the proofs without the lock, then at most one truncation, last: the ACCESS EXCLUSIVE
    // lock, once granted, is held for that segment's proof and truncation only, to this
    // transaction's end, a moment later (a dequeue that opens the segment meanwhile waits that long).
    int chosen = -1;
    bool once = OidIsValid(segments.receipts[0]);
    for (int k = 0; k < segments.count; k++) {
        Relation rel = try_table_open(segments.relids[k], AccessShareLock);
        if (!rel) continue;
        bool has_pages = RelationGetNumberOfBlocks(rel) > 0;
        if (has_pages) r.holds_rows = true;
        bool triggers = rel->trigdesc != nullptr;
        table_close(rel, AccessShareLock);
        bool candidate = k != head.segment && k != left && has_pages && !triggers &&
                         (once ? once_settled(segments, k) : settled_segment(segments, k));
        if (!candidate) continue;
        if (chosen >= 0) {  // another one, for the next rotation
            r.more = true;
            continue;
        }
        if (!ConditionalLockRelationOid(segments.relids[k], AccessExclusiveLock)) {  // T1
            r.skipped++;
            continue;
        }
        if (once && !ConditionalLockRelationOid(segments.receipts[k], AccessExclusiveLock)) {
            UnlockRelationOid(segments.relids[k], AccessExclusiveLock);  // not held through the other proofs
            r.skipped++;
            continue;
        }
        chosen = k;
    }
    if (chosen < 0) return r;
    Relation rel = table_open(segments.relids[chosen], NoLock);
    bool triggers = rel->trigdesc != nullptr;
    char* name = compat::qualified_name(rel);
    table_close(rel, NoLock);
    // T2, under the lock: every page (a ring that stores each message once: every message taken).
    bool proved = !triggers && (once ? once_settled(segments, chosen, false) : settled_segment(segments, chosen, false));
    if (!proved) return r;  // the lock goes at this transaction's end, a moment away
    char* receipts = nullptr;
    if (once) {
        Relation r_rel = table_open(segments.receipts[chosen], NoLock);
        receipts = compat::qualified_name(r_rel);
        table_close(r_rel, NoLock);
    }
    TruncateWork work{receipts ? psprintf("TRUNCATE ONLY %s, %s", name, receipts) : psprintf("TRUNCATE ONLY %s", name)};
    base::run_as(base::RunAs{t.owner}, [](void* arg) {  // T6
        int rc = SPI_execute(static_cast<TruncateWork*>(arg)->statement, false, 0);
        if (rc != SPI_OK_UTILITY) elog(ERROR, "aq: truncation of a segment failed: %s", SPI_result_code_string(rc));
    }, &work);
    r.truncated++;
    return r;
}

Rotation rotate_now(Oid relid, bool switch_due) {
    Oid types[1] = {OIDOID};
    Datum args[1] = {ObjectIdGetDatum(relid)};
    int rc = SPI_execute_with_args(
        "SELECT t.queue_table_id, pg_catalog.array_agg(s.relid::pg_catalog.oid ORDER BY s.segment),"
        "       t.sort_list OPERATOR(pg_catalog.=) 'priority,enq_time',"
        "       t.message_grouping OPERATOR(pg_catalog.=) 'transactional',"
        "       pg_catalog.array_agg(COALESCE(s.receipts::pg_catalog.oid, 0::pg_catalog.oid) ORDER BY s.segment)"
        "  FROM aq.queue_tables t JOIN aq.queue_segments s ON s.queue_table_id OPERATOR(pg_catalog.=) t.queue_table_id"
        " WHERE t.relid::pg_catalog.oid OPERATOR(pg_catalog.=) $1 GROUP BY 1, 3, 4",
        1, types, args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: ring lookup failed: %s", SPI_result_code_string(rc));
    if (SPI_processed == 0)
        ereport(ERROR, (errcode(ERRCODE_INVALID_PARAMETER_VALUE),
                        errmsg("table \"%s\" is not a ring queue table", get_rel_name(relid) ? get_rel_name(relid) : "?"),
                        errhint("Rings are queue tables created with aq.create_queue_table(..., segments => N).")));
    bool isnull;
    int32 queue_table_id = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
    Datum* relids;
    int n;
    deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull)), OIDOID,
                      sizeof(Oid), true, TYPALIGN_INT, &relids, nullptr, &n);
    RingTable t{queue_table_id, relid, InvalidOid,
                DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 3, &isnull)),
                DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 4, &isnull)), {}};
    t.segments.count = Min(n, max_segments);
    for (int i = 0; i < t.segments.count; i++) t.segments.relids[i] = DatumGetObjectId(relids[i]);
    Datum* receipts;
    deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 5, &isnull)), OIDOID,
                      sizeof(Oid), true, TYPALIGN_INT, &receipts, nullptr, &n);
    for (int i = 0; i < max_segments; i++) t.segments.receipts[i] = i < n ? DatumGetObjectId(receipts[i]) : InvalidOid;
    HeapTuple tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
    if (HeapTupleIsValid(tuple)) {
        t.owner = reinterpret_cast<Form_pg_class>(GETSTRUCT(tuple))->relowner;
        ReleaseSysCache(tuple);
    }
    if (!has_privs_of_role(GetUserId(), t.owner))
        ereport(ERROR, (errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
                        errmsg("must be the owner of queue table %s to rotate it", get_rel_name(relid))));
    return rotate(t, switch_due);
}

}  // namespace ring

namespace index_walk {

bool RingScan::open(Oid relid, const ring::Segments& segments, Oid payload_type, Order order, LOCKMODE lockmode) {
    count = 0;
    last = -1;
    lock = lockmode;
    bool grouped = order == Order::group;
    bool ring = segments.count > 0;
    bool ok = true;
    for (int i = 0; i <= segments.count; i++) {
        Cursor& c = cursors[count];
        c = Cursor{nullptr, nullptr, nullptr, nullptr, false, false, false};
        if (i == 0) {
            c.heap = table_open(relid, lock);
            ok = plain_queue_table(c.heap, payload_type, ring) && has_group_column(c.heap) == grouped;
        } else {
            c.heap = try_table_open(segments.relids[i - 1], lock);
            if (!c.heap) return false;  // dropped: the statement says so
            ok = ring::plain_segment(cursors[0].heap, c.heap);
        }
        count++;
        Oid index_oid = ok ? find_order_index(c.heap, order) : InvalidOid;
        if (OidIsValid(index_oid)) c.index = index_open(index_oid, AccessShareLock);
        if (!c.index || !in_sort_order(c.index)) return false;
    }
    return true;
}

void RingScan::begin(Snapshot snapshot, ScanKey keys, int nkeys) {
    for (int i = 0; i < count; i++) {
        Cursor& c = cursors[i];
        c.scan = compat::index_begin_scan(c.heap, c.index, snapshot, nkeys);
        c.scan->xs_want_itup = true;  // the merge's keys, and the floor watch's
        index_rescan(c.scan, keys, nkeys, nullptr, 0);
        c.slot = table_slot_create(c.heap, nullptr);
    }
}

namespace {

// The order of two scans' current entries by the index's key columns after q_id.
int compare_entries(const RingScan::Cursor& a, const RingScan::Cursor& b) {
    Relation index = a.index;
    int keys = IndexRelationGetNumberOfKeyAttributes(index);
    for (AttrNumber column = 2; column <= keys; column++) {
        bool a_null, b_null;
        Datum x = index_getattr(a.scan->xs_itup, column, a.scan->xs_itupdesc, &a_null);
        Datum y = index_getattr(b.scan->xs_itup, column, b.scan->xs_itupdesc, &b_null);
        if (a_null || b_null) {  // aq's key columns are NOT NULL; a NULL sorts last, as in the index
            if (a_null != b_null) return a_null ? 1 : -1;
            continue;
        }
        FmgrInfo* order = index_getprocinfo(index, column, BTORDER_PROC);
        int result = DatumGetInt32(FunctionCall2Coll(order, index->rd_indcollation[column - 1], x, y));
        if (result != 0) return result;
    }
    return 0;
}

}  // namespace

bool RingScan::next_visible(FloorWatch& watch) {
    for (;;) {
        CHECK_FOR_INTERRUPTS();
        int first = -1;
        for (int i = 0; i < count; i++) {
            Cursor& c = cursors[i];
            if (c.done) continue;
            if (!c.pending) {
                if (!index_getnext_tid(c.scan, ForwardScanDirection)) {
                    c.done = true;
                    continue;
                }
                c.pending = true;
            }
            if (first < 0 || (count > 1 && compare_entries(c, cursors[first]) < 0)) first = i;
        }
        if (first < 0) return false;
        Cursor& c = cursors[first];
        c.pending = false;
        watch.before_fetch(c.scan);
        bool visible = index_fetch_heap(c.scan, c.slot);
        watch.after_fetch(c.scan, visible);
        if (!visible) continue;
        slot_getallattrs(c.slot);
        last = first;
        return true;
    }
}

void RingScan::close() {
    for (int i = 0; i < count; i++) {
        Cursor& c = cursors[i];
        if (c.slot) ExecDropSingleTupleTableSlot(c.slot);
        if (c.scan) index_endscan(c.scan);
        bool keep = i == 0 || c.claimed;  // 5
        if (c.index) index_close(c.index, keep ? NoLock : AccessShareLock);
        table_close(c.heap, keep ? NoLock : lock);
    }
    count = 0;
    last = -1;
}

}  // namespace index_walk

}  // namespace aq::queue
