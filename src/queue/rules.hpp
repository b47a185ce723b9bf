// The rules of a message, each written once.
//
// Each rule is a small expression (a type): the C index walks evaluate it on the row they are
// looking at (rules::holds), and the statements embed its SQL (rules::write_sql).  Both forms
// come from the one definition below; nothing else in aq spells a rule out.  Pure C++ (no
// PostgreSQL header): test/unit/rules_test.cpp checks every rule's two forms.  The SQL is
// written to an appender (Out: append(const char*)), so a backend writes it straight into a
// StringInfo with no C++ object alive that an ereport could skip (statements.hpp).
//
// Invariants (what a dequeue of every path may take; m is a message or delivery row version):
//  1. ready(m)     m.delay IS NULL OR m.delay <= now: no delay ahead.
//  2. unexpired(m) m.expiration IS NULL OR m.expiration > now.  An exception queue's rows are
//                  expired by definition: its dequeues apply neither 1 nor 2.
//  3. settled(m)   the row version holds no dequeue attempt not counted yet (retries.hpp): its
//                  xmax is 0, or aq._claimable(tableoid, ctid) says so.  The C walks read the
//                  same header through the row view's settled(), which hints the settler; the
//                  statements call aq._claimable, the same C function.  Browse ignores it.
//  4. takeable(m)  = ready AND unexpired AND settled: what a remove or locked dequeue claims,
//                  locks aside (SKIP LOCKED: a row another transaction holds is passed; one
//                  this transaction locked is taken: index_walk.hpp).
//  5. The head rule of a transaction group (groups.hpp), in the group's order (enq_time,
//     msgid): an expired row is passed (in_group() == pass); the first row that is not passed
//     must be ready and settled (take) or the group stops there (stop): nothing after it is
//     taken, and next_group does not offer the group.  In SQL: a row of the group is taken only
//     if no earlier row of it blocks (blocks_group = NOT passed AND NOT group_takeable), and a
//     group is offered by its first row that is not passed, when that row is group_takeable.
//  6. The order key: (enq_time, msgid), or (priority, enq_time, msgid) for a queue table sorted
//     by priority, ascending (the order index's); "after a position" is the row comparison on
//     that key (rules::after, rules::after_sql).
// Proved by: unit rules_test (each rule's C form, its SQL, the head rule's forms agreeing);
// regress dequeue_paths and bulk_dequeue (the walk and the statement give the same messages),
// queue_options and retries (delay, expiration, retry_delay); isolation delay_wakeup,
// attempts_sessions and rollback_returns (3), groups, group_retry_delay and TAP 028 (5),
// priority_consumers and navigation_concurrent (6).
#pragma once

#include <cstdint>
#include <string>

namespace aq::queue::rules {

using Time = std::int64_t;  // TimestampTz

// How a statement names things: the row's qualification ("", "d.", "e.") and the parameter (or
// expression) that holds now.
struct Names {
    const char* row;
    const char* now;
};

// ---------------------------------------------------------------- the expression kit
//
// A row view R (index_walk.hpp's RowView, or a test's) offers delay_null(), delay(),
// expiration_null(), expiration() and settled(); a rule is evaluated in the order written
// (short-circuit), so settled(), which may read the row's header under a buffer lock, is asked last.

struct Delay {
    static constexpr const char* column = "delay";
    template <class R>
    static bool null(R& r) { return r.delay_null(); }
    template <class R>
    static Time value(R& r) { return r.delay(); }
};

struct Expiration {
    static constexpr const char* column = "expiration";
    template <class R>
    static bool null(R& r) { return r.expiration_null(); }
    template <class R>
    static Time value(R& r) { return r.expiration(); }
};

template <class Column>
struct IsNull {
    template <class R>
    static bool holds(R& r, Time) { return Column::null(r); }
    template <class Out>
    static void sql(Out& out, const Names& n) {
        out.append(n.row);
        out.append(Column::column);
        out.append(" IS NULL");
    }
};

template <class Column>
struct NotAfterNow {  // column <= now
    template <class R>
    static bool holds(R& r, Time now) { return Column::value(r) <= now; }
    template <class Out>
    static void sql(Out& out, const Names& n) {
        out.append(n.row);
        out.append(Column::column);
        out.append(" OPERATOR(pg_catalog.<=) ");
        out.append(n.now);
    }
};

template <class Column>
struct AfterNow {  // column > now
    template <class R>
    static bool holds(R& r, Time now) { return Column::value(r) > now; }
    template <class Out>
    static void sql(Out& out, const Names& n) {
        out.append(n.row);
        out.append(Column::column);
        out.append(" OPERATOR(pg_catalog.>) ");
        out.append(n.now);
    }
};

// Invariant 3's primitive: the same C function on both sides (the statement's aq._claimable).
struct SettledRow {
    template <class R>
    static bool holds(R& r, Time) { return r.settled(); }
    template <class Out>
    static void sql(Out& out, const Names& n) {
        const char* parts[] = {"(", n.row, "xmax OPERATOR(pg_catalog.=) '0'::pg_catalog.xid OR aq._claimable(", n.row,
                               "tableoid, ", n.row, "ctid))"};
        for (const char* part : parts) out.append(part);
    }
};

// Every composite is parenthesized, so it embeds anywhere.
template <class Out, class... E>
void join(Out& out, const char* op, const Names& n) {
    out.append("(");
    bool first = true;
    ((out.append(first ? "" : op), first = false, E::sql(out, n)), ...);
    out.append(")");
}

template <class... E>
struct Any {
    template <class R>
    static bool holds(R& r, Time now) { return (E::holds(r, now) || ...); }
    template <class Out>
    static void sql(Out& out, const Names& n) { join<Out, E...>(out, " OR ", n); }
};

template <class... E>
struct All {
    template <class R>
    static bool holds(R& r, Time now) { return (E::holds(r, now) && ...); }
    template <class Out>
    static void sql(Out& out, const Names& n) { join<Out, E...>(out, " AND ", n); }
};

template <class E>
struct Not {
    template <class R>
    static bool holds(R& r, Time now) { return !E::holds(r, now); }
    template <class Out>
    static void sql(Out& out, const Names& n) {
        out.append("NOT ");
        E::sql(out, n);
    }
};

template <class E>
struct Not<Not<E>> : E {};  // NOT NOT e is e

// ---------------------------------------------------------------- the rules

using Ready = Any<IsNull<Delay>, NotAfterNow<Delay>>;             // 1
using Unexpired = Any<IsNull<Expiration>, AfterNow<Expiration>>;  // 2
using Settled = All<SettledRow>;                                  // 3
using Takeable = All<Ready, Unexpired, Settled>;                  // 4
using Available = All<Ready, Unexpired>;                          // 4 without 3 (browse, LISTEN's candidates)

// 5: the head rule.
using Passed = Not<Unexpired>;
using GroupTakeable = All<Ready, Settled>;
using BlocksGroup = All<Not<Passed>, Not<GroupTakeable>>;
using OffersGroup = All<Not<Passed>, GroupTakeable>;

enum class InGroup { pass, take, stop };
template <class R>
InGroup in_group(R& r, Time now) {
    if (Passed::holds(r, now)) return InGroup::pass;
    return GroupTakeable::holds(r, now) ? InGroup::take : InGroup::stop;
}

template <class Rule, class R>
bool holds(R& r, Time now) { return Rule::holds(r, now); }

template <class Rule, class Out>
void write_sql(Out& out, const char* row, const char* now) { Rule::sql(out, Names{row, now}); }

// ---------------------------------------------------------------- 6: the order key

struct Key {
    std::int32_t priority;
    Time enq_time;
    std::int64_t msgid;
};

// Whether row comes after position in the queue's order.
inline bool after(const Key& row, const Key& position, bool priority_order) {
    if (priority_order && row.priority != position.priority) return row.priority > position.priority;
    if (row.enq_time != position.enq_time) return row.enq_time > position.enq_time;
    return row.msgid > position.msgid;
}

// "p.priority, p.enq_time, p.msgid" or "p.enq_time, p.msgid".
template <class Out>
void write_order(Out& out, const char* row, bool priority_order) {
    const char* columns[] = {"priority, ", "enq_time, ", "msgid"};
    for (int i = priority_order ? 0 : 1; i < 3; i++) {
        out.append(row);
        out.append(columns[i]);
    }
}

// ROW(order key) OPERATOR(pg_catalog.>) ROW(the position's parameters); priority unused in enq_time order.
template <class Out>
void write_after(Out& out, const char* row, bool priority_order, const char* priority, const char* enq_time,
                 const char* msgid) {
    out.append("ROW(");
    write_order(out, row, priority_order);
    out.append(") OPERATOR(pg_catalog.>) ROW(");
    if (priority_order) {
        out.append(priority);
        out.append(", ");
    }
    out.append(enq_time);
    out.append(", ");
    out.append(msgid);
    out.append(")");
}

// For tests and tools: the SQL as a std::string (a backend writes into a StringInfo instead).
struct StringOut {
    std::string text;
    void append(const char* part) { text += part; }
};
template <class Rule>
std::string sql(const char* row, const char* now) {
    StringOut out;
    write_sql<Rule>(out, row, now);
    return out.text;
}
inline std::string order_sql(const char* row, bool priority_order) {
    StringOut out;
    write_order(out, row, priority_order);
    return out.text;
}
inline std::string after_sql(const char* row, bool priority_order, const char* priority, const char* enq_time,
                             const char* msgid) {
    StringOut out;
    write_after(out, row, priority_order, priority, enq_time, msgid);
    return out.text;
}

}  // namespace aq::queue::rules
