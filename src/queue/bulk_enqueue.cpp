// See bulk_enqueue.hpp for the protocol.  Called inside base::call: plain data only.
extern "C" {
#include "postgres.h"
#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/pg_type.h"
#include "commands/sequence.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/bitmapset.h"
#include "nodes/parsenodes.h"
#include "access/sysattr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/rls.h"
}

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "base/multi_insert.hpp"
#include "compat/acl.hpp"
#include "queue/bulk_enqueue.hpp"
#include "queue/ring.hpp"

namespace aq::queue {

namespace multi_insert = aq::base::multi_insert;

namespace {

struct ColumnShape {
    const char* name;
    Oid type;  // InvalidOid: the payload type
};

const ColumnShape queue_table_shape[column_count] = {
    {"msgid", INT8OID},       {"q_id", INT4OID},           {"enq_time", TIMESTAMPTZOID},
    {"priority", INT4OID},    {"delay", TIMESTAMPTZOID},   {"expiration", TIMESTAMPTZOID},
    {"corrid", TEXTOID},      {"retry_count", INT4OID},    {"exception_queue", TEXTOID},
    {"enq_uid", TEXTOID},     {"user_data", InvalidOid},
};

bool has_queue_table_shape(Relation rel, Oid payload_type) {
    TupleDesc desc = RelationGetDescr(rel);
    if (rel->rd_rel->relkind != RELKIND_RELATION ||
        (desc->natts != column_count && !has_group_column(rel) && !has_once_columns(rel)))
        return false;
    if (TupleDescAttr(desc, col_msgid)->attidentity != ATTRIBUTE_IDENTITY_ALWAYS) return false;
    for (int i = 0; i < column_count; i++) {
        Form_pg_attribute att = TupleDescAttr(desc, i);
        Oid expected = OidIsValid(queue_table_shape[i].type) ? queue_table_shape[i].type : payload_type;
        if (att->attisdropped || att->atttypid != expected || strcmp(NameStr(att->attname), queue_table_shape[i].name) != 0)
            return false;
    }
    return true;
}

// The privileges of the equivalent statement, INSERT INTO t (q_id, enq_time, priority,
// delay, expiration, corrid, exception_queue, user_data) ... RETURNING msgid: USAGE on
// the schema (the statement names the table), INSERT on those columns (msgid,
// retry_count and enq_uid take their identity/defaults), SELECT on msgid.
compat::RangeTable checked_range_table(Relation rel) {
    Oid namespace_oid = RelationGetNamespace(rel);
    AclResult acl = compat::namespace_aclcheck(namespace_oid, GetUserId(), ACL_USAGE);
    if (acl != ACLCHECK_OK) aclcheck_error(acl, OBJECT_SCHEMA, get_namespace_name(namespace_oid));

    compat::RangeTable rt = queue_table_range(rel, ACL_INSERT | ACL_SELECT,
                                              column_set({col_q_id, col_enq_time, col_priority, col_delay,
                                                          col_expiration, col_corrid, col_exception_queue, col_user_data}),
                                              column_set({col_msgid}));
    compat::check_permissions(rt, true);  // 42501, as the statement would raise
    return rt;
}

// Bytes of a payload, for the multi-insert buffer's limit.
size_t payload_bytes(Datum payload, int16 typlen) {
    if (typlen == -1) return VARSIZE_ANY(DatumGetPointer(payload));
    return typlen > 0 ? static_cast<size_t>(typlen) : 64;
}

constexpr int32 default_priority = 1;  // a message's without one, as the enqueue statement's

Datum field(HeapTupleHeader row, int attno, bool* isnull) {
    return GetAttributeByNum(row, static_cast<AttrNumber>(attno), isnull);
}

// A message's delay and expiration as times (the expiration counts from when it is ready), from
// its aq.message_properties (attribute 2 delay, 3 expiration).
struct MessageTimes {
    bool delayed;
    TimestampTz delay;
    bool expires;
    TimestampTz expiration;
};
MessageTimes times_of(HeapTupleHeader props, TimestampTz enq_time) {
    MessageTimes t{false, 0, false, 0};
    bool null;
    Datum ready_at = TimestampTzGetDatum(enq_time);
    Datum delay = field(props, 2, &null);
    if (!null) {
        ready_at = DirectFunctionCall2(timestamptz_pl_interval, ready_at, delay);
        t.delayed = true;
        t.delay = DatumGetTimestampTz(ready_at);
    }
    Datum expiration = field(props, 3, &null);
    if (!null) {
        t.expires = true;
        t.expiration = DatumGetTimestampTz(DirectFunctionCall2(timestamptz_pl_interval, ready_at, expiration));
    }
    return t;
}

// The msgid identity sequence of a queue table.  getIdentitySequence scans pg_depend, which
// cost a tenth of a one-message enqueue: it is remembered per table until a relcache
// invalidation of that table (ALTER TABLE ... IDENTITY sends one, as does DROP TABLE).
struct IdentityEntry {
    Oid relid;
    Oid sequence;
};
constexpr int identity_cache_size = 8;
IdentityEntry identity_cache[identity_cache_size];
uint32 next_identity_slot = 0;
bool identity_callback_registered = false;

void forget_identity(Datum, Oid relid) {
    for (auto& e : identity_cache)
        if (!OidIsValid(relid) || e.relid == relid) e = IdentityEntry{InvalidOid, InvalidOid};
}

Oid msgid_sequence_of(Relation rel) {
    Oid relid = RelationGetRelid(rel);
    if (!identity_callback_registered) {
        CacheRegisterRelcacheCallback(forget_identity, (Datum)0);
        identity_callback_registered = true;
    }
    for (const auto& e : identity_cache)
        if (e.relid == relid && OidIsValid(relid)) return e.sequence;
    Oid sequence = compat::identity_sequence(rel, col_msgid + 1);
    identity_cache[next_identity_slot++ % identity_cache_size] = IdentityEntry{relid, sequence};
    return sequence;
}

}  // namespace

// The message properties as aq.message_properties defines them (attribute 1 priority, 2 delay,
// 3 expiration, 4 correlation, 6 exception_queue).
void message_row(const BulkEnqueue& r, int i, Datum msgid, Datum enq_uid, Datum* v, bool* isnull) {
    for (int c = 0; c < column_count; c++) isnull[c] = true;
    v[col_msgid] = msgid;
    v[col_q_id] = Int32GetDatum(r.queue_id);
    v[col_enq_time] = TimestampTzGetDatum(r.enq_time);
    v[col_priority] = Int32GetDatum(default_priority);
    v[col_retry_count] = Int32GetDatum(0);
    v[col_enq_uid] = enq_uid;
    v[col_user_data] = r.payloads[i];
    for (int c : {col_msgid, col_q_id, col_enq_time, col_priority, col_retry_count, col_enq_uid, col_user_data})
        isnull[c] = false;
    if (!r.properties || r.properties_null[i]) return;

    HeapTupleHeader props = DatumGetHeapTupleHeader(r.properties[i]);
    bool null;
    Datum priority = field(props, 1, &null);
    if (!null) v[col_priority] = priority;
    MessageTimes t = times_of(props, r.enq_time);
    v[col_delay] = TimestampTzGetDatum(t.delay);
    isnull[col_delay] = !t.delayed;
    v[col_expiration] = TimestampTzGetDatum(t.expiration);
    isnull[col_expiration] = !t.expires;
    v[col_corrid] = field(props, 4, &isnull[col_corrid]);
    v[col_exception_queue] = field(props, 6, &isnull[col_exception_queue]);
}


bool has_group_column(Relation rel) {
    TupleDesc desc = RelationGetDescr(rel);
    if (desc->natts != column_count + 1) return false;
    Form_pg_attribute att = TupleDescAttr(desc, column_count);
    return !att->attisdropped && att->atttypid == INT8OID && att->attnotnull &&
           strcmp(NameStr(att->attname), "transaction_group") == 0;
}

bool has_once_columns(Relation rel) {
    TupleDesc desc = RelationGetDescr(rel);
    if (desc->natts != once_column_count) return false;
    Form_pg_attribute consumer = TupleDescAttr(desc, col_consumer_name);
    Form_pg_attribute recipients = TupleDescAttr(desc, col_recipients);
    return !consumer->attisdropped && consumer->atttypid == TEXTOID && !consumer->attnotnull &&
           strcmp(NameStr(consumer->attname), "consumer_name") == 0 && !recipients->attisdropped &&
           recipients->atttypid == TEXTARRAYOID && !recipients->attnotnull &&
           strcmp(NameStr(recipients->attname), "recipients") == 0;
}

Oid msgid_sequence(Relation rel) {
    return msgid_sequence_of(rel);
}

Bitmapset* column_set(std::initializer_list<int> columns) {
    Bitmapset* set = nullptr;
    for (int c : columns) set = bms_add_member(set, c + 1 - FirstLowInvalidHeapAttributeNumber);
    return set;
}

compat::RangeTable queue_table_range(Relation rel, AclMode permissions, Bitmapset* inserted, Bitmapset* selected) {
    return compat::relation_range_table(rel, RowExclusiveLock, permissions, inserted, selected);
}

bool plain_queue_table(Relation rel, Oid payload_type, bool ring_parent) {
    return has_queue_table_shape(rel, payload_type) && multi_insert::refusal(rel, ring_parent) == nullptr;
}

// Each message's priority from an enqueue's aq.message_properties[] (palloc'd, *count of them;
// one default priority for no array).
int32* priorities_of(ArrayType* properties, int* count) {
    int n = properties ? ArrayGetNItems(ARR_NDIM(properties), ARR_DIMS(properties)) : 0;
    int32* priorities = static_cast<int32*>(palloc(sizeof(int32) * (n > 0 ? n : 1)));
    priorities[0] = default_priority;
    *count = 1;
    if (n == 0) return priorities;
    Datum* elements;
    bool* nulls;
    deconstruct_array(properties, ARR_ELEMTYPE(properties), -1, false, TYPALIGN_DOUBLE, &elements, &nulls, &n);
    for (int i = 0; i < n; i++) {
        bool null = nulls[i];
        Datum priority = null ? 0 : field(DatumGetHeapTupleHeader(elements[i]), 1, &null);
        priorities[i] = null ? default_priority : DatumGetInt32(priority);
    }
    pfree(elements);
    pfree(nulls);
    *count = n;
    return priorities;
}

TimestampTz earliest_due(ArrayType* properties, TimestampTz enq_time) {
    int n = properties ? ArrayGetNItems(ARR_NDIM(properties), ARR_DIMS(properties)) : 0;
    if (n == 0) return 0;
    Datum* elements;
    bool* nulls;
    deconstruct_array(properties, ARR_ELEMTYPE(properties), -1, false, TYPALIGN_DOUBLE, &elements, &nulls, &n);
    TimestampTz earliest = 0;
    for (int i = 0; i < n; i++) {
        if (nulls[i]) continue;
        MessageTimes t = times_of(DatumGetHeapTupleHeader(elements[i]), enq_time);
        for (auto [set, when] : {std::pair{t.delayed, t.delay}, std::pair{t.expires, t.expiration}})
            if (set && (earliest == 0 || when < earliest)) earliest = when;
    }
    pfree(elements);
    pfree(nulls);
    return earliest;
}

int32 lowest_priority(ArrayType* properties) {
    int n;
    int32* priorities = priorities_of(properties, &n);
    int32 lowest = *std::min_element(priorities, priorities + n);
    pfree(priorities);
    return lowest;
}

int32* distinct_priorities(ArrayType* properties, int* count) {
    int32* priorities = priorities_of(properties, count);
    std::sort(priorities, priorities + *count);
    *count = static_cast<int>(std::unique(priorities, priorities + *count) - priorities);
    return priorities;
}

bool bulk_enqueue(const BulkEnqueue& r) {
    Relation rel = table_open(r.relid, RowExclusiveLock);
    // Whatever the multi-insert path refuses (a read-only transaction among them: the statement
    // raises 25006) goes through the statement.
    bool grouped = has_group_column(rel);
    bool ring = r.segments->count > 0;
    if (!plain_queue_table(rel, r.payload_type, ring) || grouped != (r.group != nullptr)) {
        table_close(rel, NoLock);  // the lock is kept to the end of the transaction, as usual
        return false;
    }
    // The range table entry also serves constraint failures, which describe the row from it.
    compat::RangeTable rt = checked_range_table(rel);
    Oid msgid_sequence = msgid_sequence_of(rel);
    // A ring's messages go into its current segment (ring.hpp, R1), the privileges being the
    // parent's (E1); msgid is still drawn from the parent's sequence (R4).
    Relation queue_table = rel;
    if (ring) {
        rel = ring::open_current(r.queue_table_id, *r.segments);
        if (!ring::plain_segment(queue_table, rel)) {
            table_close(rel, NoLock);
            table_close(queue_table, NoLock);
            return false;
        }
        rt = queue_table_range(rel, ACL_INSERT | ACL_SELECT, nullptr, nullptr);
    }
    int16 payload_len = get_typlen(r.payload_type);
    Datum enq_uid = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));
    multi_insert::MultiInsert* m = multi_insert::begin(rel, rt, r.count);
    for (int i = 0; i < r.count; i++) {
        TupleTableSlot* slot = multi_insert::next_slot(m);
        MemoryContext outer = MemoryContextSwitchTo(multi_insert::batch_memory(m));
        Datum msgid = r.msgids_in ? r.msgids_in[i] : Int64GetDatum(nextval_internal(msgid_sequence, false));
        r.msgids_out[i] = msgid;
        message_row(r, i, msgid, enq_uid, slot->tts_values, slot->tts_isnull);
        if (grouped) {  // the transaction's group (groups.hpp)
            slot->tts_values[column_count] = Int64GetDatum(*r.group);
            slot->tts_isnull[column_count] = false;
        } else if (RelationGetDescr(rel)->natts > column_count) {  // stored once: a message is nobody's copy,
            slot->tts_values[col_consumer_name] = (Datum)0;        // for its recipient list or every subscriber
            slot->tts_isnull[col_consumer_name] = true;
            bool listed = r.recipients && !r.recipients_null[i];
            slot->tts_values[col_recipients] = listed ? r.recipients[i] : (Datum)0;
            slot->tts_isnull[col_recipients] = !listed;
        }
        MemoryContextSwitchTo(outer);
        if (r.messages_out) {
            const Datum* v = slot->tts_values;
            const bool* isnull = slot->tts_isnull;
            // The exception queue's name is the caller's (a field of its properties), not batch memory.
            r.messages_out[i] = deliveries::Message{DatumGetInt32(v[col_priority]),
                                                    DatumGetTimestampTz(v[col_enq_time]),
                                                    !isnull[col_delay],
                                                    isnull[col_delay] ? 0 : DatumGetTimestampTz(v[col_delay]),
                                                    !isnull[col_expiration],
                                                    isnull[col_expiration] ? 0 : DatumGetTimestampTz(v[col_expiration]),
                                                    isnull[col_exception_queue] ? (Datum)0 : v[col_exception_queue]};
        }
        multi_insert::add(m, slot, payload_bytes(r.payloads[i], payload_len));
    }
    multi_insert::finish(m);
    table_close(rel, NoLock);
    if (queue_table != rel) table_close(queue_table, NoLock);
    CommandCounterIncrement();  // later commands of this transaction see the messages
    return true;
}

}  // namespace aq::queue
