// See statements.hpp for what each statement does and the rules it is written from.
extern "C" {
#include "postgres.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"
}

#include <cstring>

#include "base/spi.hpp"
#include "queue/catalog.hpp"
#include "queue/condition.hpp"
#include "queue/deliveries.hpp"
#include "queue/plan_cache.hpp"
#include "queue/rules.hpp"
#include "queue/maintenance.hpp"
#include "queue/retention.hpp"
#include "queue/statements.hpp"

namespace aq::queue {

int32 correlation_shape(const char* pattern) {
    return pattern[strcspn(pattern, "%_\\")] == '\0' ? correlation_exact : by_correlation;
}

namespace {

// aq.message_properties of a dequeued row, from the columns under prefix p ("d." ...) and the
// message's correlation (an expression).
// group: the grouped queue table's name as read (ONLY ...), when the message is of group $10 (groups.hpp): the
// properties then say so, and whether no later message of the group is left.  outer: the
// qualification of the row's columns in that subquery (unqualified, they would be its own).
char* properties_sql(const char* p, const char* corrid, bool expired, const char* group = nullptr,
                     const char* outer = nullptr) {
    const char* tail = !catalog_has_consumers() ? ""
                       : !group
                           ? ", NULL, NULL, NULL"
                           : psprintf(", NULL, $10::pg_catalog.text, NOT EXISTS (SELECT FROM %1$s x"
                                      " WHERE x.q_id OPERATOR(pg_catalog.=) $1"
                                      "   AND x.transaction_group OPERATOR(pg_catalog.=) $10"
                                      "   AND ROW(x.enq_time, x.msgid) OPERATOR(pg_catalog.>) ROW(%2$senq_time, %2$smsgid))",
                                      group, outer ? outer : p);
    return psprintf(
        "ROW(%1$spriority, %1$sdelay OPERATOR(pg_catalog.-) %1$senq_time,"
        "    %1$sexpiration OPERATOR(pg_catalog.-) COALESCE(%1$sdelay, %1$senq_time), %2$s,"
        "    %1$sretry_count, %1$sexception_queue, %1$senq_time, '%3$s'%4$s)::aq.message_properties",
        p, corrid, expired ? "expired" : "ready",
        // recipient_list, transaction_group, end_of_group (0.6.0)
        tail);
}

// The rules' SQL (rules.hpp), written into a StringInfo in the current memory context: plain
// data only, so an ereport on the way skips no C++ destructor.
struct SqlOut {
    StringInfo buffer;
    void append(const char* part) { appendStringInfoString(buffer, part); }
};
template <class Rule>
const char* rule_sql(const char* row, const char* now) {
    SqlOut out{makeStringInfo()};
    rules::write_sql<Rule>(out, row, now);
    return out.buffer->data;
}
const char* order_sql(const char* row, bool priority_order) {
    SqlOut out{makeStringInfo()};
    rules::write_order(out, row, priority_order);
    return out.buffer->data;
}
const char* after_sql(const char* row, bool priority_order) {  // after the position $8, $4, $5
    SqlOut out{makeStringInfo()};
    rules::write_after(out, row, priority_order, "$8", "$4", "$5");
    return out.buffer->data;
}

// The statements run with the caller's search_path, so every operator, function and collation
// in them is schema-qualified (OPERATOR(pg_catalog.x), pg_catalog."C"): nothing the caller's
// schemas define can stand in for them.  Every read, update and delete of the queue table says
// ONLY: a table that inherits from it (CREATE TABLE c () INHERITS (qt)) is not part of the
// queue, and its rows, whose q_id and ctid may equal a queue message's, are never read, moved or
// deleted through it.  Statements that claim, expire or wait read the claim table: the delivery
// table of a multi-consumer queue table (its rows have the same columns for that).
char* build_sql(const QueueInfo& q, int32 statement) {
    const char* t = q.qualified_table;
    const char* c = claim_table(q);
    // A ring queue table is read through its parent, which reads its segments too (ring.hpp, W3): a
    // row is then known by (tableoid, ctid), a ctid alone being ambiguous.  Rings are
    // single-consumer (the multi-consumer statements keep ONLY).
    bool ring = q.segments.count > 0;
    const char* only = ring ? "" : "ONLY ";
    // A grouped queue table's enqueues carry the transaction's group ($4 or $5: groups.hpp).
    if (statement == enqueue_plain)
        return psprintf(
            "INSERT INTO %s (q_id, enq_time, user_data%s)"
            " SELECT $1, $2, u%s FROM pg_catalog.unnest($3) AS u"
            " RETURNING msgid",
            t, q.grouped ? ", transaction_group" : "", q.grouped ? ", $4" : "");
    if (statement == enqueue_with_properties)
        // unnest() of a composite array expands to columns, so the payloads and their
        // properties are paired by position and inserted in input order.
        return psprintf(
            "INSERT INTO %s (q_id, enq_time, priority, delay, expiration, corrid, exception_queue, user_data%s)"
            " SELECT $1, $2, COALESCE((b.p).priority, 1),"
            "        $2 OPERATOR(pg_catalog.+) (b.p).delay,"
            "        $2 OPERATOR(pg_catalog.+) COALESCE((b.p).delay, '0') OPERATOR(pg_catalog.+) (b.p).expiration,"
            "        (b.p).correlation, (b.p).exception_queue, a.u%s"
            "   FROM (SELECT u, pg_catalog.row_number() OVER () AS n FROM pg_catalog.unnest($3) AS u) a"
            "   JOIN (SELECT p, pg_catalog.row_number() OVER () AS n FROM pg_catalog.unnest($4) AS p) b"
            "     ON a.n OPERATOR(pg_catalog.=) b.n"
            "  ORDER BY a.n"
            " RETURNING msgid",
            t, q.grouped ? ", transaction_group" : "", q.grouped ? ", $5" : "");
    if (statement == find_next_group)
        // The group's first message that is not passed offers it (rules.hpp, the head rule): h
        // is the first unexpired message of its group, and it can be taken now.
        return psprintf(
            "SELECT h.transaction_group FROM %4$s%1$s h WHERE h.q_id OPERATOR(pg_catalog.=) $1"
            "   AND h.transaction_group OPERATOR(pg_catalog.>) $2"
            "   AND %2$s"
            "   AND NOT EXISTS (SELECT FROM %4$s%1$s e WHERE e.q_id OPERATOR(pg_catalog.=) $1"
            "         AND e.transaction_group OPERATOR(pg_catalog.=) h.transaction_group"
            "         AND ROW(e.enq_time, e.msgid) OPERATOR(pg_catalog.<) ROW(h.enq_time, h.msgid)"
            "         AND NOT %3$s)"
            " ORDER BY h.q_id, h.transaction_group LIMIT 1",
            t, rule_sql<rules::OffersGroup>("h.", "$3"), rule_sql<rules::Passed>("e.", "$3"), only);
    if (statement == group_rest)
        // A message of the group that is not passed (rules.hpp, the head rule: not expired), taken
        // now or not: the group goes on (groups.hpp, 6).
        return psprintf(
            "SELECT EXISTS (SELECT FROM %3$s%1$s e WHERE e.q_id OPERATOR(pg_catalog.=) $1"
            "   AND e.transaction_group OPERATOR(pg_catalog.=) $2 AND NOT %2$s)",
            t, rule_sql<rules::Passed>("e.", "$3"), only);
    if (statement == delays_passed)
        // By the (q_id, delay) index: the messages (deliveries) that became ready in ($2, $3].
        return psprintf(
            "SELECT priority, pg_catalog.min(enq_time) FROM %s%s"
            " WHERE q_id OPERATOR(pg_catalog.=) $1 AND delay OPERATOR(pg_catalog.>) $2"
            "   AND delay OPERATOR(pg_catalog.<=) $3"
            " GROUP BY 1",
            only, c);
    if (statement == retained_end)
        // retention.hpp, 3: a copy of queue n has q_id -n; one probe of (q_id, expiration) per queue.
        return psprintf(
            "SELECT pg_catalog.min(x.e) FROM aq.queues n, LATERAL ("
            "   SELECT m.expiration AS e FROM %s%s m"
            "    WHERE m.q_id OPERATOR(pg_catalog.=) OPERATOR(pg_catalog.-) n.queue_id AND m.expiration IS NOT NULL"
            "    ORDER BY m.expiration LIMIT 1) x"
            " WHERE n.queue_table_id OPERATOR(pg_catalog.=) $1",
            only, t);
    if (statement == purge_retained)
        return psprintf(
            "WITH x AS MATERIALIZED ("
            "   SELECT x.tableoid, x.ctid FROM %1$s%2$s x"
            "    WHERE x.q_id OPERATOR(pg_catalog.<) 0 AND x.expiration OPERATOR(pg_catalog.<=) $1"
            "    LIMIT %3$s FOR UPDATE SKIP LOCKED)"
            " DELETE FROM %1$s%2$s m WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.ctid FROM x))%4$s",
            only, t, psprintf(INT64_FORMAT, retention::purge_batch_size),
            ring ? " AND (m.tableoid, m.ctid) IN (SELECT x.tableoid, x.ctid FROM x)" : "");
    if (statement == next_expiry)
        return psprintf(
            "SELECT pg_catalog.min(expiration) FROM %s%s"
            " WHERE q_id OPERATOR(pg_catalog.=) $1 AND expiration IS NOT NULL",
            only, c);
    if (statement == next_delay)
        return psprintf(
            "SELECT pg_catalog.min(delay) FROM %s%s"
            " WHERE q_id OPERATOR(pg_catalog.=) $1 AND NOT %s",
            only, c, rule_sql<rules::Ready>("", "$2"));
    if (statement == ready_candidates)
        // What a remove dequeue would claim (see the dequeue statement below), without claiming
        // it: ready, not expired (an exception queue's messages are expired by definition), not
        // holding an attempt not counted yet, in the queue's order; of consumer $4 (if not NULL)
        // in a multi-consumer queue table.  Whether another transaction is dequeuing one is for
        // the caller to see (row_free).
        return psprintf(
            "SELECT ctid, tableoid FROM %s%s WHERE q_id OPERATOR(pg_catalog.=) $1%s"
            "   AND ($3 OR %s) AND %s"
            " ORDER BY q_id, %s%s",
            only, c,
            q.multiple_consumers ? " AND ($4::text IS NULL OR consumer_name OPERATOR(pg_catalog.=) $4)" : "",
            rule_sql<rules::Available>("", "$2"), rule_sql<rules::Settled>("", "$2"),
            q.multiple_consumers ? "consumer_name, " : "", order_sql("", q.priority_order));
    if (statement == expired_exists)
        return psprintf(
            "SELECT EXISTS (SELECT FROM %s%s x"
            "    WHERE x.q_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.queue_id FROM aq.queues n"
            "            WHERE n.queue_table_id OPERATOR(pg_catalog.=) $1"
            "              AND n.queue_type OPERATOR(pg_catalog.=) 'normal_queue'))"
            "      AND %s)",
            only, c, rule_sql<rules::Passed>("x.", "$3"));
    if (statement == expire_messages)
        // A message names its exception queue; if that is not an exception queue of the same
        // queue table, it goes to the queue table's default one (as Oracle's QMON does).  A
        // delivery takes its message with it (deliveries.hpp).
        return psprintf(
            "WITH x AS MATERIALIZED ("
            "   SELECT x.tableoid, x.ctid FROM %1$s%2$s x"
            "    WHERE x.q_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT n.queue_id FROM aq.queues n"
            "            WHERE n.queue_table_id OPERATOR(pg_catalog.=) $1"
            "              AND n.queue_type OPERATOR(pg_catalog.=) 'normal_queue'))"
            "      AND %3$s"
            "    LIMIT %4$s FOR UPDATE SKIP LOCKED)"
            " UPDATE %1$s%2$s m SET q_id = COALESCE((SELECT e.queue_id FROM aq.queues e"
            "   WHERE e.queue_name OPERATOR(pg_catalog.=) m.exception_queue"
            "     AND e.queue_table_id OPERATOR(pg_catalog.=) $1"
            "     AND e.queue_type OPERATOR(pg_catalog.=) 'exception_queue'), $2)%5$s"
            " WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT x.ctid FROM x))%6$s",
            only, c, rule_sql<rules::Passed>("x.", "$3"), psprintf(INT64_FORMAT, expiry_batch_size),
            q.multiple_consumers ? deliveries::keep_message_sql(t, "m") : "",
            ring ? " AND (m.tableoid, m.ctid) IN (SELECT x.tableoid, x.ctid FROM x)" : "");

    // A dequeue.  Single-consumer: the queue table's rows (alias tab with a condition).
    // Multi-consumer: the delivery rows (d), joined to their messages (tab) where the
    // correlation, the condition or the payload is read.
    int32 shape = statement - dequeue_base;
    // An exception queue's delivery rows hold their messages (deliveries.hpp): they are read as
    // a single-consumer queue's rows are, from the delivery table.
    bool multi = (shape & multi_consumer) && !(shape & exception_queue);
    if ((shape & multi_consumer) && !multi) t = c;
    const char* p = multi ? "d." : "";    // the claimed rows' columns
    const char* m = multi ? "tab." : "";  // the message's own columns
    bool joined = multi && (shape & (by_correlation | correlation_exact | with_condition));
    const char* from = multi ? psprintf("%s d%s", c, joined ? psprintf(" JOIN ONLY %s tab ON tab.msgid OPERATOR(pg_catalog.=) d.msgid", t) : "")
                             : psprintf("%s%s", t, (shape & with_condition) ? " tab" : "");
    bool by_priority = shape & priority_order;
    const char* order = order_sql("", by_priority);
    const char* prefixed_order = order_sql(p, by_priority);
    const char* position = (shape & after_position) ? psprintf(" AND %s", after_sql(p, by_priority)) : "";
    char* where = psprintf(
        "%1$sq_id OPERATOR(pg_catalog.=) $1%2$s%3$s%4$s%5$s%6$s", p,
        (shape & by_consumer) ? psprintf(" AND %sconsumer_name OPERATOR(pg_catalog.=) $9", p) : "", position,
        (shape & by_msgid) ? psprintf(" AND %smsgid OPERATOR(pg_catalog.=) $6", p) : "",
        // In the C collation, as the correlation index is built: a LIKE prefix is then an index range.
        (shape & by_correlation)      ? psprintf(" AND %scorrid COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.~~) $7", m)
        : (shape & correlation_exact) ? psprintf(" AND %scorrid COLLATE pg_catalog.\"C\" OPERATOR(pg_catalog.=) $7", m)
                                      : "",
        // rules.hpp, 1 and 2 (an exception queue's messages are expired by definition).
        (shape & exception_queue) ? "" : psprintf(" AND %s", rule_sql<rules::Available>(p, "$2")));
    // The condition is analyzed in place of $10 (condition.hpp), as one expression: it cannot
    // reach beyond its AND.  The message table is tab there, as in Oracle's conditions.
    if (shape & with_condition) where = psprintf("%s AND $11", where);
    if (shape & by_group) {
        where = psprintf("%s AND %stransaction_group OPERATOR(pg_catalog.=) $10", where, p);
        // In order (rules.hpp, the head rule): nothing after a message of the group that blocks it.
        if (!(shape & mode_browse)) {
            const char* o = (shape & with_condition) ? "tab." : psprintf("%s.", t);
            where = psprintf(
                "%1$s AND NOT EXISTS (SELECT FROM %5$s%2$s e WHERE e.q_id OPERATOR(pg_catalog.=) $1"
                "   AND e.transaction_group OPERATOR(pg_catalog.=) $10"
                "   AND ROW(e.enq_time, e.msgid) OPERATOR(pg_catalog.<) ROW(%3$senq_time, %3$smsgid)"
                "   AND %4$s)",
                where, t, o, rule_sql<rules::BlocksGroup>("e.", "$2"), only);
        }
    }
    // A row version that holds an attempt not counted yet is not claimed (rules.hpp, 3).
    if (!(shape & mode_browse)) where = psprintf("%s AND %s", where, rule_sql<rules::Settled>(p, "$2"));
    // The order of the claim table's index (a delivery table's: per consumer).
    char* index_order = psprintf("%1$sq_id, %2$s%3$s", p,
                                 (shape & by_consumer) ? psprintf("%sconsumer_name, ", p)
                                 : (shape & by_group)  ? psprintf("%stransaction_group, ", p)
                                                       : "",
                                 prefixed_order);
    const char* group = (shape & by_group) ? psprintf("%s%s", only, q.qualified_table) : nullptr;
    const char* lock = multi ? " FOR UPDATE OF d SKIP LOCKED" : " FOR UPDATE SKIP LOCKED";
    bool expired = shape & exception_queue;
    if (shape & (mode_browse | mode_locked)) {
        if (multi && !joined) from = psprintf("%s JOIN ONLY %s tab ON tab.msgid OPERATOR(pg_catalog.=) d.msgid", from, t);
        return psprintf("SELECT %1$smsgid, %2$suser_data, %3$s, %1$senq_time, %1$spriority, %1$sctid, %1$stableoid"
                        " FROM %8$s%4$s WHERE %5$s ORDER BY %6$s LIMIT $3%7$s",
                        p, multi ? "tab." : "",
                        properties_sql(p, psprintf("%scorrid", m), expired, group,
                                       multi ? nullptr : (shape & with_condition) ? "tab." : psprintf("%s.", t)),
                        from, where, index_order,
                        (shape & mode_locked) ? lock : "", only);
    }
    const char* returned =
        "msgid, priority, delay, expiration, retry_count, exception_queue, enq_time, ctid, corrid, user_data";
    // A delivery that carries its message (one moved to an exception queue, and maybe back by
    // hand: deliveries.hpp) is returned with that, whether or not the message is still there.
    if (multi)
        return psprintf(
            "WITH claimed AS MATERIALIZED ("
            "  SELECT d.ctid FROM ONLY %1$s WHERE %2$s ORDER BY %3$s LIMIT $3%4$s),"
            " removed AS ("
            "  DELETE FROM ONLY %5$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM claimed))"
            "  RETURNING %6$s, tableoid)"
            " SELECT r.msgid, COALESCE(r.user_data, tab.user_data), %7$s, r.enq_time, r.priority, r.ctid, r.tableoid"
            "   FROM removed r LEFT JOIN ONLY %8$s tab ON tab.msgid OPERATOR(pg_catalog.=) r.msgid ORDER BY %9$s",
            from, where, index_order, lock, c, returned, properties_sql("r.", "COALESCE(r.corrid, tab.corrid)", expired),
            q.qualified_table,
            order_sql("r.", shape & priority_order));
    return psprintf(
        "WITH claimed AS MATERIALIZED ("
        "  SELECT tableoid, ctid FROM %1$s%2$s WHERE %3$s ORDER BY %4$s LIMIT $3 FOR UPDATE SKIP LOCKED),"
        " removed AS ("
        "  DELETE FROM %1$s%5$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM claimed))%6$s"
        "  RETURNING msgid, user_data, priority, delay, expiration, corrid, retry_count, exception_queue, enq_time, ctid,"
        "            tableoid)"
        " SELECT msgid, user_data, %7$s, enq_time, priority, ctid, tableoid FROM removed ORDER BY %8$s",
        only, from, where, index_order, t,
        ring ? " AND (tableoid, ctid) IN (SELECT tableoid, ctid FROM claimed)" : "",
        properties_sql("", "corrid", expired, group, "removed."), order);
}

// The names a statement was built with (plan_cache.hpp).
// What a statement is built with: the tables' names, and whether it reads a ring's segments through
// the table (a classic table made a ring by aq.alter_queue_table gets new statements).
const char* statement_names(const QueueInfo& q) {
    const char* names =
        q.multiple_consumers ? psprintf("%s %s", q.qualified_table, q.qualified_deliveries) : q.qualified_table;
    return q.segments.count > 0 ? psprintf("%s (ring)", names) : names;
}

struct BuildArgs {
    const QueueInfo* queue;
    int32 statement;
};

char* build_statement(const void* context) {
    const auto* b = static_cast<const BuildArgs*>(context);
    return build_sql(*b->queue, b->statement);
}

}  // namespace

Datum statement_value(const QueueInfo& q, int32 statement, Datum* args, const char* what, bool* isnull) {
    SPIPlanPtr plan = statement_plan(q, statement, InvalidOid);
    base::spi::execute(plan, args, nullptr, 1, SPI_OK_SELECT, what);
    return base::spi::first_value(isnull);
}

TimestampTz statement_time(const QueueInfo& q, int32 statement, Datum arg, const char* what) {
    Datum args[1] = {arg};
    bool isnull;
    Datum v = statement_value(q, statement, args, what, &isnull);
    return isnull ? 0 : DatumGetTimestampTz(v);
}

// Requires an SPI connection.
SPIPlanPtr statement_plan(const QueueInfo& q, int32 statement, Oid properties_array_type) {
    Oid argtypes[dequeue_param_count];
    int nargs;
    if (statement == enqueue_plain || statement == enqueue_with_properties) {
        Oid payload_array_type = get_array_type(q.payload_type);
        if (!OidIsValid(payload_array_type))
            elog(ERROR, "aq: payload type %s has no array type", format_type_be(q.payload_type));
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        argtypes[2] = payload_array_type;
        argtypes[3] = properties_array_type;
        nargs = statement == enqueue_plain ? 3 : 4;
        if (q.grouped) argtypes[nargs++] = INT8OID;  // the transaction group
    } else if (statement == next_delay) {
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        nargs = 2;
    } else if (statement == delays_passed) {
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        argtypes[2] = TIMESTAMPTZOID;
        nargs = 3;
    } else if (statement == next_expiry) {
        argtypes[0] = INT4OID;
        nargs = 1;
    } else if (statement == retained_end) {
        argtypes[0] = INT4OID;
        nargs = 1;
    } else if (statement == purge_retained) {
        argtypes[0] = TIMESTAMPTZOID;
        nargs = 1;
    } else if (statement == group_rest) {
        argtypes[0] = INT4OID;
        argtypes[1] = INT8OID;
        argtypes[2] = TIMESTAMPTZOID;
        nargs = 3;
    } else if (statement == find_next_group) {
        argtypes[0] = INT4OID;
        argtypes[1] = INT8OID;
        argtypes[2] = TIMESTAMPTZOID;
        nargs = 3;
    } else if (statement == expire_messages || statement == expired_exists) {
        argtypes[0] = INT4OID;
        argtypes[1] = INT4OID;
        argtypes[2] = TIMESTAMPTZOID;
        nargs = 3;
    } else if (statement == ready_candidates) {
        argtypes[0] = INT4OID;
        argtypes[1] = TIMESTAMPTZOID;
        argtypes[2] = BOOLOID;
        argtypes[3] = TEXTOID;
        nargs = 4;
    } else {
        memcpy(argtypes, dequeue_param_types, sizeof argtypes);
        nargs = dequeue_param_count;
    }
    // A generic plan: with LIMIT $3 and a growing queue, custom plans would be re-planned
    // on every call (their estimated cost never beats the generic one); the plan shape
    // (index scan, LockRows, Limit; TID scan) is right for every parameter value.  Except by
    // correlation: only a custom plan sees the pattern's constant prefix and turns it into a
    // range of the correlation index (planning costs well under a millisecond).
    bool custom = statement >= dequeue_base && ((statement - dequeue_base) & by_correlation);
    int options = custom ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN;
    if (statement == ready_candidates) options |= CURSOR_OPT_FAST_PLAN;  // read through a cursor, the first rows first
    BuildArgs build{&q, statement};
    plan_cache::Request request{q.relid, q.payload_type, statement,       statement_names(q), argtypes,
                                nargs,   options,        build_statement, &build};
    return plan_cache::plan(request);
}

// A dequeue with a deq_condition runs its own statement (shape with_condition), one plan per
// condition text (condition.hpp).  Requires an SPI connection.
SPIPlanPtr condition_plan(const QueueInfo& q, int32 statement, const char* text) {
    BuildArgs sql{&q, statement};
    // Generic, as the other dequeue statements, except with a correlation pattern (see statement_plan).
    int options = ((statement - dequeue_base) & by_correlation) ? CURSOR_OPT_CUSTOM_PLAN : CURSOR_OPT_GENERIC_PLAN;
    condition::PlanRequest request{q.relid,   q.payload_type,  statement, statement_names(q), text, "deq_condition",
                                   dequeue_param_types, dequeue_param_count, options, build_statement, &sql};
    return condition::prepared_plan(request);
}

char* carry_forward_sql(const char* from, const char* to, int limit, bool grouped) {
    return psprintf(
        "WITH picked AS MATERIALIZED (SELECT ctid FROM ONLY %1$s WHERE %3$s%5$s%8$s LIMIT %4$d FOR UPDATE SKIP LOCKED),"
        " moved AS (DELETE FROM ONLY %1$s m WHERE m.ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM picked))"
        "           RETURNING m.*),"
        " copied AS (INSERT INTO %2$s SELECT * FROM moved RETURNING q_id, priority, enq_time%6$s)"
        " SELECT q_id, pg_catalog.min(priority), pg_catalog.min(enq_time), pg_catalog.count(*)%7$s FROM copied GROUP BY q_id",
        from, to, rule_sql<rules::Settled>("", "NULL"), limit,
        grouped ? " AND transaction_group OPERATOR(pg_catalog.=) ANY ($1)" : "", grouped ? ", transaction_group" : "",
        grouped ? ", pg_catalog.min(transaction_group)" : "",
        // A batch cut short leaves a group's last messages, never its first ones (C6).
        grouped ? " ORDER BY transaction_group, enq_time, msgid" : "");
}

char* carry_groups_sql(const char* from, int limit) {
    return psprintf("SELECT DISTINCT transaction_group FROM ONLY %s WHERE %s ORDER BY 1 LIMIT %d", from,
                    rule_sql<rules::Settled>("", "NULL"), limit);
}

}  // namespace aq::queue
