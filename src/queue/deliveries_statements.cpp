// The statements of the multi-consumer room: the fan-out's and the removal sweep's SQL and plans.
// See deliveries.hpp for the protocol and deliveries_statements.hpp for what is shared.
extern "C" {
#include "postgres.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
}

#include "queue/deliveries.hpp"
#include "queue/deliveries_statements.hpp"
#include "queue/plan_cache.hpp"

namespace aq::queue::deliveries {

constexpr const char* delivered_columns =
    "(msgid, consumer_name, q_id, priority, enq_time, delay, expiration, exception_queue)";

// Every name is qualified and every table read with ONLY (statements.hpp, invariants 2 and 3).
char* build_sql(const void* context) {
    const auto* b = static_cast<const Build*>(context);
    const char* m = b->tables->messages;
    const char* d = b->tables->deliveries;
    switch (b->statement) {
        case deliver_to_names:
            return psprintf(
                "INSERT INTO %s %s"
                " SELECT tab.msgid, s.name, tab.q_id, tab.priority, tab.enq_time, tab.delay, tab.expiration,"
                "        tab.exception_queue"
                "   FROM ONLY %s tab CROSS JOIN pg_catalog.unnest($2) AS s(name)"
                "  WHERE tab.msgid OPERATOR(pg_catalog.=) ANY ($1)",
                d, delivered_columns, m);
        case deliver_by_rule:
            // The rule is analyzed in place of $3 (condition.hpp).
            return psprintf(
                "INSERT INTO %s %s"
                " SELECT tab.msgid, $2, tab.q_id, tab.priority, tab.enq_time, tab.delay, tab.expiration,"
                "        tab.exception_queue"
                "   FROM ONLY %s tab WHERE tab.msgid OPERATOR(pg_catalog.=) ANY ($1) AND $3"
                " RETURNING msgid",
                d, delivered_columns, m);
        case deliver_listed:
            return psprintf(
                "INSERT INTO %s %s"
                " SELECT tab.msgid, r.name, tab.q_id, tab.priority, tab.enq_time, tab.delay, tab.expiration,"
                "        tab.exception_queue"
                "   FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2)) AS r(msgid, name)"
                "   JOIN ONLY %s tab ON tab.msgid OPERATOR(pg_catalog.=) r.msgid",
                d, delivered_columns, m);
        default: {
            // From ($3, $4) on, in the queue's order: the first delivery row of the queue ($1; of
            // priority $2), and the messages before it, removed.  Returns where the next sweep of
            // this transaction starts (see sweep()).
            bool by_priority = b->tables->priority_order;
            return psprintf(
                // The consumers with deliveries in the queue, one index descent each.
                "WITH RECURSIVE consumers(name) AS ("
                "  (SELECT d.consumer_name FROM ONLY %1$s d WHERE d.q_id OPERATOR(pg_catalog.=) $1"
                "    ORDER BY d.q_id, d.consumer_name LIMIT 1)"
                "  UNION ALL"
                "  SELECT (SELECT d.consumer_name FROM ONLY %1$s d WHERE d.q_id OPERATOR(pg_catalog.=) $1"
                "             AND d.consumer_name OPERATOR(pg_catalog.>) c.name ORDER BY d.q_id, d.consumer_name LIMIT 1)"
                "    FROM consumers c WHERE c.name IS NOT NULL),"
                // Each one's first delivery from ($3, $4) on, and the first of those.
                " each AS MATERIALIZED ("
                "  SELECT c.name, f.enq_time, f.msgid FROM consumers c, LATERAL ("
                "    SELECT d.enq_time, d.msgid FROM ONLY %1$s d"
                "     WHERE d.q_id OPERATOR(pg_catalog.=) $1 AND d.consumer_name OPERATOR(pg_catalog.=) c.name%3$s"
                "       AND ROW(d.enq_time, d.msgid) OPERATOR(pg_catalog.>=) ROW($3, $4)"
                "     ORDER BY d.q_id, d.consumer_name, %4$sd.enq_time, d.msgid LIMIT 1) f"
                "   WHERE c.name IS NOT NULL),"
                " first AS MATERIALIZED (SELECT e.enq_time, e.msgid FROM each e ORDER BY e.enq_time, e.msgid LIMIT 1),"
                " gone AS MATERIALIZED ("
                "  SELECT m.ctid, m.enq_time, m.msgid FROM ONLY %2$s m WHERE m.q_id OPERATOR(pg_catalog.=) $1%5$s"
                "     AND ROW(m.enq_time, m.msgid) OPERATOR(pg_catalog.>=) ROW($3, $4)"
                "     AND ROW(m.enq_time, m.msgid) OPERATOR(pg_catalog.<)"
                "         ROW(COALESCE((SELECT enq_time FROM first), 'infinity'::pg_catalog.timestamptz),"
                "             COALESCE((SELECT msgid FROM first), 9223372036854775807::pg_catalog.int8))"
                "   ORDER BY m.q_id, %6$sm.enq_time, m.msgid LIMIT %7$d FOR UPDATE SKIP LOCKED),"
                " removed AS ("
                "  DELETE FROM ONLY %2$s WHERE ctid OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ctid FROM gone)) RETURNING 1)"
                " SELECT (SELECT pg_catalog.count(*) FROM removed),"
                "        (SELECT enq_time FROM first), (SELECT msgid FROM first),"
                "        (SELECT g.enq_time FROM gone g ORDER BY g.enq_time DESC, g.msgid DESC LIMIT 1),"
                "        (SELECT g.msgid FROM gone g ORDER BY g.enq_time DESC, g.msgid DESC LIMIT 1),"
                // Where each consumer's first delivery is, in one order (names are distinct).
                "        (SELECT pg_catalog.array_agg(e.name ORDER BY e.name) FROM each e),"
                "        (SELECT pg_catalog.array_agg(e.enq_time ORDER BY e.name) FROM each e),"
                "        (SELECT pg_catalog.array_agg(e.msgid ORDER BY e.name) FROM each e)",
                d, m, by_priority ? " AND d.priority OPERATOR(pg_catalog.=) $2" : "", by_priority ? "d.priority, " : "",
                by_priority ? " AND m.priority OPERATOR(pg_catalog.=) $2" : "", by_priority ? "m.priority, " : "",
                sweep_limit);
        }
    }
}

const Oid ids_and_names[2] = {INT8ARRAYOID, TEXTARRAYOID};
const Oid ids_and_name[2] = {INT8ARRAYOID, TEXTOID};
const Oid sweep_params[4] = {INT4OID, INT4OID, TIMESTAMPTZOID, INT8OID};

const char* names_of(const Tables& t) {
    return psprintf("%s %s", t.messages, t.deliveries);
}

SPIPlanPtr plan_of(const Tables& t, int32 statement) {
    Build build{&t, statement};
    plan_cache::Request request{t.relid,
                                t.payload_type,
                                statement,
                                names_of(t),
                                statement == sweep_queue ? sweep_params : ids_and_names,
                                statement == sweep_queue ? 4 : 2,
                                CURSOR_OPT_GENERIC_PLAN,
                                build_sql,
                                &build};
    return plan_cache::plan(request);
}

}  // namespace aq::queue::deliveries
