// See queue_workload.hpp for the protocol.
#include "queue_workload.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <memory>
#include <mutex>
#include <thread>

#include "faults.hpp"
#include "pg.hpp"

namespace aqbench {

namespace {

using Clock = std::chrono::steady_clock;

int64_t now_us() {
    return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::system_clock::now().time_since_epoch())
        .count();
}

// A text[] literal of the payloads: "<id>:<sent µs>:xxxx", no characters that need quoting.
std::string payload(uint64_t id, int bytes) {
    std::string p = std::to_string(id) + ":" + std::to_string(now_us()) + ":";
    if (static_cast<int>(p.size()) < bytes) p.append(bytes - p.size(), 'x');
    return p;
}

std::string array_literal(const std::vector<std::string>& items) {
    std::string a = "{";
    for (size_t i = 0; i < items.size(); i++) {
        if (i) a += ',';
        a += items[i];
    }
    return a + "}";
}

bool parse_payload(const char* p, uint64_t* id, int64_t* sent_us) {
    char* end;
    *id = std::strtoull(p, &end, 10);
    if (*end != ':') return false;
    *sent_us = std::strtoll(end + 1, &end, 10);
    return *end == ':';
}

// One system's statements.  Everything runs as the connecting role in schema aq_bench.
// The statements of the producers' and consumers' loops are prepared on every connection
// (prepare(), again after each reconnect: pg.hpp): "aqb_produce" and "aqb_consume".
struct System {
    virtual ~System() = default;
    virtual void setup(Session& s, const QueueConfig& c) = 0;
    // Registers the loop's statements on a producer's, consumer's or the drain's session.
    virtual void prepare(Session& s) = 0;
    // A consumer's session (number: 0 .. consumers - 1); the same as any other unless a system says.
    virtual void prepare_consumer(Session& s, int number) {
        (void)number;
        prepare(s);
    }
    // One autocommit statement enqueuing the batch (aq --immediate: BEGIN; enqueue; COMMIT).  *returned: the
    // enqueue call's result arrived with success, whatever became of a COMMIT after it.
    virtual Outcome produce(Session& s, const std::vector<std::string>& payloads, bool* returned) = 0;
    // BEGIN; dequeue up to n; COMMIT (Session::transaction: two round trips, pg.hpp).  The payload texts
    // go into `out` when the dequeue's result arrived: on ok, and on unknown (uncertain); with aq's
    // --immediate also when the COMMIT after it failed.  *returned: the dequeue's result arrived.
    // ok with none = empty.
    virtual Outcome consume(Session& s, int n, std::vector<std::string>& out, bool* returned) = 0;
    virtual void teardown(Session& s) = 0;
    // Before the final drain (PgQ: a forced tick, so that every committed event is in a batch).
    virtual void before_drain(Session&) {}
    // The final drain's session, once connected (number: the subscriber's, else 0); the same as a
    // consumer's unless a system says.
    virtual void prepare_drain(Session& s, int number) { prepare_consumer(s, number); }
    // The final drain's dequeue: as consume(), waiting up to wait_s seconds for a message when the
    // system can (an event-driven wait); a system that cannot wait ignores it.
    virtual Outcome drain(Session& s, int n, double wait_s, std::vector<std::string>& out) {
        (void)wait_s;
        bool returned;
        return consume(s, n, out, &returned);
    }
    // How many messages the queue still owes the drain of this number: its rows that a dequeue
    // takes now or later (ready, delayed, or held by a dead consumer's claim until the attempt is
    // counted), fresh from the table, in *count; -1: unknown (the drain stops at its first empty
    // dequeue).  Outcomes as for exec().
    virtual Outcome owed(Session&, int number, long* count) {
        (void)number;
        *count = -1;
        return Outcome::ok;
    }
    // One row, one column: the total bytes (pg_total_relation_size: heap, indexes, TOAST) of the
    // queue's table(s), for --report-size.
    virtual std::string size_sql() const = 0;
};

void read_payloads(const Result& r, std::vector<std::string>& out) {
    if (!r || PQresultStatus(r.get()) != PGRES_TUPLES_OK) return;
    for (int i = 0; i < PQntuples(r.get()); i++) out.emplace_back(PQgetvalue(r.get(), i, 0));
}

// The dequeue transaction; the payloads when its result arrived, even if the COMMIT's did not.  *returned: the
// dequeue's result arrived (with rows or none); then, with even_if_failed, the payloads go into `out` even when
// the COMMIT after it failed on a live connection (an immediate dequeue: committed by the call).
Outcome consume_transaction(Session& s, const std::vector<std::string>& params, std::vector<std::string>& out,
                            const char* statement = "aqb_consume", bool* returned = nullptr,
                            bool even_if_failed = false) {
    Result r;
    Outcome o = s.transaction(statement, params, &r);
    const bool arrived = r && PQresultStatus(r.get()) == PGRES_TUPLES_OK;
    if (returned) *returned = arrived;
    if (o != Outcome::failed || (even_if_failed && arrived)) read_payloads(r, out);
    return o;
}

struct AqSystem : System {
    QueueConfig c;
    bool plain_enqueue() const { return c.priorities <= 1 && c.delay_seconds <= 0; }
    // --immediate: the options' visibility argument, for aq.dequeue_options(...) of the consumers.
    std::string visibility() const { return c.immediate ? ", visibility => 'immediate'" : ""; }
    void setup(Session& s, const QueueConfig& config) override {
        c = config;
        s.must("CREATE EXTENSION IF NOT EXISTS aq");
        s.must("CREATE SCHEMA IF NOT EXISTS aq_bench");
        teardown(s);
        if (c.segments > 0)
            s.must("SELECT aq.create_queue_table('aqb_qt', 'text', sort_list => $1, queue_table_schema => 'aq_bench',"
                   " multiple_consumers => $2::boolean, segments => $3::int)",
                   {c.priorities > 1 ? "priority,enq_time" : "enq_time", c.subscribers > 0 ? "true" : "false",
                    std::to_string(c.segments)});
        else
            s.must("SELECT aq.create_queue_table('aqb_qt', 'text', sort_list => $1, queue_table_schema => 'aq_bench',"
                   " multiple_consumers => $2::boolean)",
                   {c.priorities > 1 ? "priority,enq_time" : "enq_time", c.subscribers > 0 ? "true" : "false"});
        if (c.retry_delay_seconds > 0)
            s.must("SELECT aq.create_queue('aqb_q', 'aqb_qt', max_retries => 1000000,"
                   " retry_delay => make_interval(secs => $1::float8))",
                   {std::to_string(c.retry_delay_seconds)});
        else
            s.must("SELECT aq.create_queue('aqb_q', 'aqb_qt')");
        s.must("SELECT aq.start_queue('aqb_q')");
        for (int i = 1; i <= c.subscribers; i++) s.must("SELECT aq.add_subscriber('aqb_q', aq.agent($1))", {subscriber(i - 1)});
    }
    static std::string subscriber(int index) { return "sub" + std::to_string(index + 1); }
    void prepare(Session& s) override {
        const std::string options =
            c.immediate ? ", enqueue_options => aq.enqueue_options(visibility => 'immediate'))" : ")";
        s.prepare("aqb_produce",
                  plain_enqueue()
                      ? "SELECT aq.enqueue_array('aqb_q', $1::text[]" + options
                      : "SELECT aq.enqueue_array('aqb_q', $1::text[],"
                        " (SELECT array_agg(aq.message_properties(priority => 1 + (i % $2::int),"
                        "                                         delay => $3::double precision * interval '1 s'))"
                        "    FROM generate_series(1, cardinality($1::text[])) i)" + options);
        s.prepare("aqb_consume", "SELECT payload FROM aq.dequeue_array('aqb_q', NULL::text, $1::int,"
                                 " aq.dequeue_options(wait => '0.2 s'" + visibility() + "))");
    }
    // With --conditions N, consumer k takes only the messages whose id (the payload's first field) is
    // k modulo N, through deq_condition: N disjoint consumer groups, each checked exactly-once with
    // the rest (the final drain takes, without a condition, whatever no group did).
    void prepare_consumer(Session& s, int number) override {
        prepare(s);
        if (c.subscribers > 0) {
            s.prepare("aqb_consume", "SELECT payload FROM aq.dequeue_array('aqb_q', NULL::text, $1::int,"
                                     " aq.dequeue_options(wait => '0.2 s', consumer_name => '" +
                                         subscriber(number % c.subscribers) + "'" + visibility() + "))");
            return;
        }
        if (c.conditions <= 0) return;
        std::string condition = "pg_catalog.split_part(tab.user_data, '':'', 1)::bigint % " + std::to_string(c.conditions) +
                                " = " + std::to_string(number % c.conditions);
        s.prepare("aqb_consume", "SELECT payload FROM aq.dequeue_array('aqb_q', NULL::text, $1::int,"
                                 " aq.dequeue_options(wait => '0.2 s', deq_condition => '" + condition + "'" +
                                     visibility() + "))");
    }
    Outcome produce(Session& s, const std::vector<std::string>& payloads, bool* returned) override {
        std::vector<std::string> params = {array_literal(payloads)};
        if (!plain_enqueue())
            params.insert(params.end(), {std::to_string(c.priorities), std::to_string(c.delay_seconds)});
        if (!c.immediate) {
            Outcome o = s.exec_prepared("aqb_produce", params);
            *returned = o == Outcome::ok;
            return o;
        }
        // Immediate: the call commits on its own; the caller's transaction around it only shows that its
        // COMMIT does not matter.
        Result r;
        Outcome o = s.transaction("aqb_produce", params, &r);
        *returned = r && PQresultStatus(r.get()) == PGRES_TUPLES_OK;
        return o;
    }
    Outcome consume(Session& s, int n, std::vector<std::string>& out, bool* returned) override {
        Outcome o = consume_transaction(s, {std::to_string(n)}, out, "aqb_consume", returned, c.immediate);
        if (o == Outcome::failed && s.last_sqlstate() == "QA228") return Outcome::ok;  // empty (rolled back)
        return o;
    }
    // The final drain dequeues without a condition (it takes whatever no condition group did), as
    // its subscriber with subscribers; "aqb_drain"'s wait ($2, seconds) is the drain's to choose.
    // "aqb_owed" counts the rows of this queue (of this subscriber's deliveries) in the table,
    // whatever their state: a row whose claim by a killed consumer is not yet counted as an attempt
    // (retries.hpp: settled by the server's settler, seconds after a crash) is still there, live to
    // this count, though no dequeue can take it yet; a delayed one too.  A row moved to an exception
    // queue has that queue's q_id: not owed to this drain (the checker counts its id as lost).
    void prepare_drain(Session& s, int number) override {
        prepare(s);
        std::string consumer = c.subscribers > 0 ? ", consumer_name => '" + subscriber(number % c.subscribers) + "'" : "";
        s.prepare("aqb_drain", "SELECT payload FROM aq.dequeue_array('aqb_q', NULL::text, $1::int,"
                               " aq.dequeue_options(wait => $2::double precision" + consumer + "))");
        std::string queue_id = "(SELECT q.queue_id FROM aq.queues q WHERE q.queue_name = 'aqb_q')";
        if (c.subscribers > 0 && c.segments > 0) {
            // Each message stored once: the messages for this subscriber that no committed receipt
            // of it took (one an aborted dequeue took is owed too), as its view shows them.
            s.prepare("aqb_owed", "SELECT count(*) FROM aq_bench.\"aq$aqb_qt\" WHERE queue = 'aqb_q' AND consumer_name = '" +
                                      subscriber(number % c.subscribers) + "' AND msg_state <> 'PROCESSED'");
        } else if (c.subscribers > 0) {
            Result r = s.must("SELECT delivery_relid::text FROM aq.queue_tables WHERE queue_table = 'aqb_qt'");
            s.prepare("aqb_owed", "SELECT count(*) FROM ONLY " + std::string(PQgetvalue(r.get(), 0, 0)) +
                                      " WHERE q_id = " + queue_id + " AND consumer_name = '" +
                                      subscriber(number % c.subscribers) + "'");
        } else {
            // (A ring's messages are in its segments, the table's inheritance children.)
            s.prepare("aqb_owed", "SELECT count(*) FROM aq_bench.aqb_qt WHERE q_id = " + queue_id);
        }
    }
    Outcome drain(Session& s, int n, double wait_s, std::vector<std::string>& out) override {
        char wait[32];
        std::snprintf(wait, sizeof wait, "%.3f", wait_s);
        Outcome o = consume_transaction(s, {std::to_string(n), wait}, out, "aqb_drain");
        if (o == Outcome::failed && s.last_sqlstate() == "QA228") return Outcome::ok;  // empty (rolled back)
        return o;
    }
    Outcome owed(Session& s, int, long* count) override {
        Result r;
        Outcome o = s.exec_prepared("aqb_owed", {}, &r);
        if (o == Outcome::ok) *count = std::atol(PQgetvalue(r.get(), 0, 0));
        return o;
    }
    std::string size_sql() const override {
        // A ring's segments are its inheritance children (pg_total_relation_size counts one table),
        // and a multi-consumer ring's receipts tables are beside them.
        return "SELECT pg_total_relation_size(t.relid) + coalesce(pg_total_relation_size(t.delivery_relid), 0)"
               "       + coalesce((SELECT sum(pg_total_relation_size(i.inhrelid)) FROM pg_inherits i"
               "                    WHERE i.inhparent = t.relid), 0)"
               "       + coalesce((SELECT sum(pg_total_relation_size(s.receipts)) FROM aq.queue_segments s"
               "                    WHERE s.queue_table_id = t.queue_table_id AND s.receipts IS NOT NULL), 0)"
               " FROM aq.queue_tables t WHERE t.queue_table = 'aqb_qt'";
    }
    void teardown(Session& s) override {
        // force: the queues go too, started or not.
        s.must("SELECT aq.drop_queue_table(queue_table, force => true) FROM aq.queue_tables WHERE queue_table = 'aqb_qt'");
    }
};

// Plain SQL on a table with the queue table's columns and order index: a multi-row INSERT,
// and DELETE ... RETURNING of the rows claimed with FOR UPDATE SKIP LOCKED (polling when empty).
struct PlainSystem : System {
    void setup(Session& s, const QueueConfig&) override {
        s.must("CREATE SCHEMA IF NOT EXISTS aq_bench");
        teardown(s);
        s.must("CREATE TABLE aq_bench.plain_q (msgid bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
               " q_id integer NOT NULL, enq_time timestamptz NOT NULL, priority integer NOT NULL DEFAULT 1,"
               " payload text NOT NULL)");
        s.must("CREATE INDEX ON aq_bench.plain_q (q_id, enq_time, msgid)");
    }
    void prepare(Session& s) override {
        s.prepare("aqb_produce",
                  "INSERT INTO aq_bench.plain_q (q_id, enq_time, payload) SELECT 1, now(), u FROM unnest($1::text[]) u");
        s.prepare("aqb_consume",
                  "WITH c AS MATERIALIZED (SELECT ctid FROM aq_bench.plain_q WHERE q_id = 1 ORDER BY q_id, enq_time, msgid"
                  "                        LIMIT $1::int FOR UPDATE SKIP LOCKED)"
                  " DELETE FROM aq_bench.plain_q WHERE ctid = ANY (ARRAY(SELECT ctid FROM c)) RETURNING payload");
    }
    Outcome produce(Session& s, const std::vector<std::string>& payloads, bool* returned) override {
        Outcome o = s.exec_prepared("aqb_produce", {array_literal(payloads)});
        *returned = o == Outcome::ok;
        return o;
    }
    Outcome consume(Session& s, int n, std::vector<std::string>& out, bool* returned) override {
        Outcome o = consume_transaction(s, {std::to_string(n)}, out, "aqb_consume", returned);
        if (o == Outcome::ok && out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // cannot wait
        return o;
    }
    std::string size_sql() const override { return "SELECT pg_total_relation_size('aq_bench.plain_q')"; }
    void teardown(Session& s) override { s.must("DROP TABLE IF EXISTS aq_bench.plain_q"); }
};

// pgmq's SQL shape, re-written here from its documented design (no pgmq code is copied, and pgmq
// need not be installed): a queue table with msg_id (identity, primary key), read_ct, enqueued_at,
// vt (the visibility timeout) and a jsonb message, indexed on vt, as pgmq's queue tables are.
// send = one multi-row INSERT (pgmq's send_batch); read = pgmq's read: the oldest visible rows
// (vt <= now) claimed with FOR UPDATE SKIP LOCKED, made invisible for 30 s (vt moved on, read_ct
// counted), returned; then pgmq's delete of those msg_ids.  A message read and not deleted would
// come back after its visibility timeout; here the read and the delete run in one transaction
// (BEGIN and the read pipelined, the DELETE, then COMMIT: Session::transaction's before_commit),
// so that a committed dequeue is one whose messages are gone, as for plain, and the exactly-once
// checker holds it to the same rules.  Polls every 1 ms when empty, as plain (pgmq's
// read_with_poll would sleep in the server).
struct PgmqSystem : System {
    void setup(Session& s, const QueueConfig&) override {
        s.must("CREATE SCHEMA IF NOT EXISTS aq_bench");
        teardown(s);
        s.must("CREATE TABLE aq_bench.pgmq_q (msg_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,"
               " read_ct integer NOT NULL DEFAULT 0, enqueued_at timestamptz NOT NULL DEFAULT now(),"
               " vt timestamptz NOT NULL DEFAULT now(), message jsonb)");
        s.must("CREATE INDEX ON aq_bench.pgmq_q (vt)");
    }
    void prepare(Session& s) override {
        s.prepare("aqb_produce",
                  "INSERT INTO aq_bench.pgmq_q (vt, message) SELECT clock_timestamp(), to_jsonb(u)"
                  " FROM unnest($1::text[]) u RETURNING msg_id");
        // The payload first (read_payloads takes column 0), the msg_id for the delete.
        s.prepare("aqb_consume",
                  "UPDATE aq_bench.pgmq_q SET vt = clock_timestamp() + interval '30 s', read_ct = read_ct + 1"
                  " WHERE msg_id IN (SELECT msg_id FROM aq_bench.pgmq_q WHERE vt <= clock_timestamp()"
                  "                  ORDER BY msg_id LIMIT $1::int FOR UPDATE SKIP LOCKED)"
                  " RETURNING message #>> '{}', msg_id");
        s.prepare("aqb_pgmq_delete", "DELETE FROM aq_bench.pgmq_q WHERE msg_id = ANY ($1::bigint[]) RETURNING msg_id");
    }
    Outcome produce(Session& s, const std::vector<std::string>& payloads, bool* returned) override {
        Outcome o = s.exec_prepared("aqb_produce", {array_literal(payloads)});
        *returned = o == Outcome::ok;
        return o;
    }
    Outcome consume(Session& s, int n, std::vector<std::string>& out, bool* returned) override {
        // The delete of what the read returned, before the COMMIT.
        auto remove = [](Session& session, const PGresult* read) {
            const int rows = PQntuples(read);
            if (rows == 0) return Outcome::ok;
            std::vector<std::string> ids;
            for (int i = 0; i < rows; i++) ids.emplace_back(PQgetvalue(read, i, 1));
            Result deleted;
            Outcome o = session.exec_prepared("aqb_pgmq_delete", {array_literal(ids)}, &deleted);
            if (o == Outcome::ok && PQntuples(deleted.get()) != rows) {  // cannot happen: the rows are locked
                std::fprintf(stderr, "aq-bench: pgmq: the delete removed %d of the %d messages read (rolled back)\n",
                             PQntuples(deleted.get()), rows);
                return Outcome::failed;
            }
            return o;
        };
        Result r;
        Outcome o = s.transaction("aqb_consume", {std::to_string(n)}, &r, remove);
        const bool arrived = r && PQresultStatus(r.get()) == PGRES_TUPLES_OK;
        *returned = arrived;
        if (o != Outcome::failed) read_payloads(r, out);
        if (o == Outcome::ok && out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // cannot wait
        return o;
    }
    std::string size_sql() const override { return "SELECT pg_total_relation_size('aq_bench.pgmq_q')"; }
    void teardown(Session& s) override { s.must("DROP TABLE IF EXISTS aq_bench.pgmq_q"); }
};

// PgQ 3.5 (Debian's postgresql-15-pgq3): one registered consumer shared by the C consumer
// sessions under an advisory lock, set up by pgq_baseline.sql (beside the binary; pgq.md
// explains it).  PgQ hands out whole batches (what accumulated since the last tick), so the
// dequeue batch size does not apply to it.
struct PgqSystem : System {
    std::string setup_sql_path;
    explicit PgqSystem(std::string path) : setup_sql_path(std::move(path)) {}
    void setup(Session& s, const QueueConfig&) override {
        std::ifstream in(setup_sql_path);
        if (!in) throw std::runtime_error("cannot read " + setup_sql_path + " (the PgQ baseline's set-up)");
        std::stringstream sql;
        sql << in.rdbuf();
        Result r(PQexec(s.raw(), sql.str().c_str()));
        if (PQresultStatus(r.get()) != PGRES_TUPLES_OK && PQresultStatus(r.get()) != PGRES_COMMAND_OK)
            throw std::runtime_error("PgQ set-up failed (is postgresql-15-pgq3 installed?): " +
                                     std::string(PQresultErrorMessage(r.get())));
    }
    void prepare(Session& s) override {
        s.prepare("aqb_produce", "SELECT aq_bench.pgq_enqueue_array('aq_bench_pgq', $1::text[])");
        s.prepare("aqb_consume", "SELECT ev_data FROM aq_bench.pgq_consume('aq_bench_pgq', 'aq_bench')");
    }
    Outcome produce(Session& s, const std::vector<std::string>& payloads, bool* returned) override {
        Outcome o = s.exec_prepared("aqb_produce", {array_literal(payloads)});
        *returned = o == Outcome::ok;
        return o;
    }
    Outcome consume(Session& s, int, std::vector<std::string>& out, bool* returned) override {
        Outcome o = consume_transaction(s, {}, out, "aqb_consume", returned);
        if (o == Outcome::ok && out.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        return o;
    }
    void before_drain(Session& s) override { s.must("SELECT aq_bench.pgq_tick('aq_bench_pgq', 'aq_bench', true)"); }
    // The queue's event tables: the parent pgq.event_<id> and its children _0.._2.
    std::string size_sql() const override {
        return "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pgq.queue q"
               " JOIN pg_class c ON c.oid = q.queue_data_pfx::regclass"
               "   OR c.oid IN (SELECT inhrelid FROM pg_inherits WHERE inhparent = q.queue_data_pfx::regclass)"
               " WHERE q.queue_name = 'aq_bench_pgq'";
    }
    void teardown(Session& s) override { s.must("SELECT pgq.drop_queue('aq_bench_pgq', true)"); }
};

std::unique_ptr<System> make_system(const QueueConfig& c) {
    if (c.system == "aq") return std::make_unique<AqSystem>();
    if (c.system == "plain") return std::make_unique<PlainSystem>();
    if (c.system == "pgq") return std::make_unique<PgqSystem>(c.pgq_setup_sql);
    if (c.system == "pgmq") return std::make_unique<PgmqSystem>();
    throw std::runtime_error("unknown queue system \"" + c.system + "\" (aq, plain, pgq, pgmq)");
}

struct Shared {
    const QueueConfig& c;
    System& system;
    History history;
    std::vector<std::unique_ptr<History>> subscriber_histories;  // with subscribers: one each
    FaultInjector* faults;
    std::atomic<long> next_message{0};
    std::atomic<int> producers_running{0};
    std::atomic<uint64_t> acknowledged{0}, dequeued{0}, reconnects{0}, shortfall{0};
    std::atomic<int64_t> last_dequeue_us{0}, producers_done_us{0};
    Clock::time_point start, deadline;
    std::mutex latency_mutex;
    std::vector<double> latencies_ms;
    explicit Shared(const QueueConfig& config, System& sys, FaultInjector* f) : c(config), system(sys), faults(f) {
        for (int i = 0; i < c.subscribers; i++) subscriber_histories.push_back(std::make_unique<History>());
    }
    // The history a consumer (or drain) of this number records in.
    History& history_of(int number) {
        return subscriber_histories.empty() ? history : *subscriber_histories[number % subscriber_histories.size()];
    }
    // What a producer records, in every history.
    template <typename F>
    void for_each_history(F f) {
        if (subscriber_histories.empty()) f(history);
        for (auto& h : subscriber_histories) f(*h);
    }
};

void reconnect(Shared& sh, Session& s) {
    sh.reconnects++;
    s.connect(std::chrono::seconds(120));
}

void producer(Shared& sh, int number) {
    Session s(sh.c.conninfo);
    sh.system.prepare(s);  // registered before connecting: prepared by every (re)connect
    s.connect();
    uint64_t sequence = 0;
    // --rate: this producer's share, rate / producers messages a second, one batch every `interval`;
    // `due` is when the next batch is, on the steady clock from when this producer connected.
    const bool paced = sh.c.rate > 0;
    const Clock::duration interval =
        paced ? std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(
                    static_cast<double>(sh.c.enqueue_batch) * sh.c.producers / static_cast<double>(sh.c.rate)))
              : Clock::duration::zero();
    Clock::time_point due = Clock::now();  // connected: the schedule starts (connecting is not counted as behind)
    const bool timed = sh.c.messages <= 0;
    for (;;) {
        if (paced) {
            // Behind by more than one batch: the batch due now goes at once, those due before it are
            // skipped (no burst to catch up) and counted as the shortfall.
            const Clock::time_point now = Clock::now();
            if (now - due > interval) {
                const auto missed = (now - due) / interval;  // whole batches, >= 1
                due += missed * interval;
                sh.shortfall += static_cast<uint64_t>(missed) * static_cast<uint64_t>(sh.c.enqueue_batch);
            }
            if (timed && due >= sh.deadline) {  // no batch left before the deadline
                std::this_thread::sleep_until(sh.deadline);
                break;
            }
            std::this_thread::sleep_until(due);
            due += interval;
        }
        long n = sh.c.enqueue_batch;
        if (sh.c.messages > 0) {
            long first = sh.next_message.fetch_add(sh.c.enqueue_batch);
            if (first >= sh.c.messages) break;
            n = std::min<long>(n, sh.c.messages - first);
        } else if (Clock::now() >= sh.deadline) {
            break;
        }
        std::vector<uint64_t> ids;
        std::vector<std::string> payloads;
        for (long i = 0; i < n; i++) {
            uint64_t id = (static_cast<uint64_t>(number + 1) << 40) | ++sequence;
            sh.for_each_history([id](History& h) { h.enqueue_attempted(id); });
            ids.push_back(id);
            payloads.push_back(payload(id, sh.c.payload_bytes));
        }
        bool returned = false;
        Outcome o = sh.system.produce(s, payloads, &returned);
        // Immediate: the call's result decides (it committed on its own), not the COMMIT after it.  A cancel
        // (57014) of an immediate enqueue may come after its commit (aq says which in the message): unknown.
        const bool immediate_ok = sh.c.immediate && returned;
        const bool unknown = o == Outcome::unknown || (sh.c.immediate && s.last_sqlstate() == "57014");
        sh.for_each_history([&](History& h) {
            for (uint64_t id : ids) {
                if (immediate_ok)
                    h.enqueue_immediate(id, o == Outcome::ok);
                else if (o == Outcome::ok)
                    h.enqueue_finished(id, EnqueueOutcome::acknowledged);
                else if (unknown)
                    h.enqueue_finished(id, EnqueueOutcome::unknown);
                else
                    h.enqueue_failed(id);
            }
        });
        if (o == Outcome::ok || immediate_ok) sh.acknowledged += ids.size();
        if (o == Outcome::failed) std::fprintf(stderr, "aq-bench: producer %d: %s", number, s.last_error().c_str());
        if (o == Outcome::unknown) reconnect(sh, s);
    }
    int64_t done = now_us();
    if (--sh.producers_running == 0) sh.producers_done_us = done;
}

void consumer(Shared& sh, int number) {
    Session s(sh.c.conninfo);
    sh.system.prepare_consumer(s, number);
    s.connect();
    if (sh.faults) sh.faults->register_consumer(number, s.backend_pid());
    std::vector<std::string> got;
    std::vector<double> latencies;
    int empty_after_producers = 0;
    for (;;) {
        got.clear();
        bool returned = false;
        Outcome o = sh.system.consume(s, sh.c.dequeue_batch, got, &returned);  // BEGIN; dequeue; COMMIT
        // Immediate: the rows that arrived are committed (by the call), whatever the COMMIT after it did.
        const bool immediate_rows = sh.c.immediate && returned;
        if (o == Outcome::ok || immediate_rows) {
            int64_t now = now_us();
            for (auto& p : got) {
                uint64_t id;
                int64_t sent;
                if (!parse_payload(p.c_str(), &id, &sent)) continue;
                if (sh.c.immediate)
                    sh.history_of(number).dequeued_immediate(id, o == Outcome::ok);
                else
                    sh.history_of(number).dequeued_committed(id);
                latencies.push_back((now - sent) / 1000.0);
            }
            if (!got.empty()) {
                sh.dequeued += got.size();
                sh.last_dequeue_us = now;
            }
        }
        if (o == Outcome::unknown) {
            if (sh.c.immediate && !returned)  // the call may have committed a batch no one will see
                sh.history_of(number).immediate_dequeue_unknown(sh.c.dequeue_batch);
            for (auto& p : got) {  // the COMMIT's answer was lost: the final drain decides
                uint64_t id;
                int64_t sent;
                if (!sh.c.immediate && parse_payload(p.c_str(), &id, &sent))
                    sh.history_of(number).dequeued_uncertain(id);
            }
            reconnect(sh, s);
            if (sh.faults) sh.faults->register_consumer(number, s.backend_pid());
            continue;
        }
        if (o == Outcome::failed) std::fprintf(stderr, "aq-bench: consumer %d: %s", number, s.last_error().c_str());
        // A timed run measures what the consumers keep up with: they stop at the deadline too,
        // and the final drain takes the backlog (checked, not counted in the rates).
        if (sh.c.messages <= 0 && Clock::now() >= sh.deadline) break;
        if (got.empty() && sh.producers_running.load() == 0) {
            if (++empty_after_producers >= 3) break;
        } else {
            empty_after_producers = 0;
        }
    }
    if (sh.faults) sh.faults->register_consumer(number, 0);
    std::lock_guard<std::mutex> lock(sh.latency_mutex);
    sh.latencies_ms.insert(sh.latencies_ms.end(), latencies.begin(), latencies.end());
}

// After the load: whatever is left (messages whose producers' outcome was unknown, that were
// enqueued after the consumers stopped, or that a killed consumer had claimed).  With
// subscribers, one drain each, as that subscriber.
//
// The drain takes what a dequeue gives without waiting until a dequeue comes back empty, then
// asks the table what it still owes (System::owed): 0 proves the queue empty for it and it ends.
// Rows still owed that no dequeue can take yet — a killed consumer's claims, until the server's
// settler has counted their attempt (seconds after the crash), delayed messages — it waits for
// with the dequeue's own wait (the settler's commit wakes it), at most final_drain_wait_cap
// before it counts again.  The whole final drain gives up at final_drain_patience: what is
// still owed then is reported lost by the checker.  A system that cannot count (owed() = -1)
// stops at its first empty dequeue.
constexpr double final_drain_patience = 120;  // seconds, for all the drains together
constexpr double final_drain_wait_cap = 5;    // seconds, one dequeue's wait before counting again

void final_drain(Shared& sh) {
    const Clock::time_point start = Clock::now();
    const Clock::time_point deadline =
        start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(final_drain_patience));
    auto seconds_since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
    for (int number = 0; number < std::max(1, sh.c.subscribers); number++) {
        const std::string who = sh.c.subscribers > 0 ? " of sub" + std::to_string(number + 1) : "";
        Session s(sh.c.conninfo);
        s.connect(std::chrono::seconds(120));
        sh.system.prepare_drain(s, number);  // after connecting: aq's looks up the delivery table
        sh.system.before_drain(s);
        const Clock::time_point drain_start = Clock::now();
        std::vector<std::string> got;
        long taken = 0, owed_at_first_wait = 0;
        double wait = 0, waited = 0;  // the next dequeue's wait; the time spent in waiting dequeues
        for (;;) {
            got.clear();
            const Clock::time_point asked = Clock::now();
            Outcome o = sh.system.drain(s, 10000, wait, got);
            if (wait > 0) waited += seconds_since(asked);
            if (o == Outcome::failed) throw std::runtime_error("final drain failed: " + s.last_error());
            for (auto& p : got) {
                uint64_t id;
                int64_t sent;
                if (!parse_payload(p.c_str(), &id, &sent)) continue;
                if (o == Outcome::ok)
                    sh.history_of(number).drained(id);
                else  // the COMMIT's answer was lost (the server restarted): as a consumer's
                    sh.history_of(number).dequeued_uncertain(id);
            }
            long owed = 0;
            if (o == Outcome::ok) {
                taken += static_cast<long>(got.size());
                if (!got.empty()) {
                    wait = 0;
                    continue;
                }
                o = sh.system.owed(s, number, &owed);
                if (o == Outcome::failed)
                    throw std::runtime_error("final drain: counting the queue's rows failed: " + s.last_error());
            }
            if (o == Outcome::unknown) {  // the connection broke: again, on a new one
                if (Clock::now() >= deadline) throw std::runtime_error("final drain failed: " + s.last_error());
                reconnect(sh, s);
                wait = 0;
                continue;
            }
            if (owed <= 0) break;
            if (owed_at_first_wait == 0) owed_at_first_wait = owed;
            const double remaining = std::chrono::duration<double>(deadline - Clock::now()).count();
            if (remaining <= 0) {
                std::fprintf(stderr,
                             "aq-bench: final drain%s: gave up after %.0f s with %ld message(s) still in the queue"
                             " that no dequeue could take (the checker reports them lost)\n",
                             who.c_str(), final_drain_patience, owed);
                break;
            }
            wait = std::min(final_drain_wait_cap, remaining);
        }
        std::fprintf(stderr, "aq-bench: final drain%s: %ld message(s) in %.2f s, %.2f s of it waiting for %ld not yet claimable\n",
                     who.c_str(), taken, seconds_since(drain_start), waited, owed_at_first_wait);
    }
}

// With subscribers: the messages left in the queue table once every subscriber has drained.  A
// message goes with its last delivery, or, when the session that took it could not know it was
// the last, at a later dequeue of the queue (deliveries.hpp): one more message, a marker outside
// the histories, goes through every subscriber in a session of its own first.
long messages_left(Shared& sh) {
    Session s(sh.c.conninfo);
    s.connect(std::chrono::seconds(120));
    s.must("SELECT aq.enqueue('aqb_q', 'marker'::text)");
    for (int i = 0; i < sh.c.subscribers; i++) {
        Session one(sh.c.conninfo);
        one.connect(std::chrono::seconds(120));
        one.must("SELECT count(*) FROM aq.dequeue_array('aqb_q', NULL::text, 10, aq.dequeue_options(wait => '10 s',"
                 " consumer_name => $1))",
                 {"sub" + std::to_string(i + 1)});
    }
    // Each message stored once (a ring): it stays until its segment is truncated; left is a message
    // of the queue that some subscriber has not taken.
    Result r = s.must(sh.c.segments > 0 ? "SELECT count(DISTINCT msg_id) FROM aq_bench.\"aq$aqb_qt\""
                                          " WHERE queue = 'aqb_q' AND msg_state <> 'PROCESSED'"
                                        : "SELECT count(*) FROM ONLY aq_bench.aqb_qt");
    return std::atol(PQgetvalue(r.get(), 0, 0));
}

History::Verdict add_up(const std::vector<History::Verdict>& verdicts) {
    History::Verdict sum;
    for (auto& v : verdicts) {
        sum.acknowledged += v.acknowledged;
        sum.delivered += v.delivered;
        sum.lost += v.lost;
        sum.duplicated += v.duplicated;
        sum.unexpected += v.unexpected;
        sum.recovered += v.recovered;
        sum.uncertain_resolved += v.uncertain_resolved;
        sum.immediate_enqueued += v.immediate_enqueued;
        sum.immediate_enqueued_unconfirmed += v.immediate_enqueued_unconfirmed;
        sum.immediate_dequeued += v.immediate_dequeued;
        sum.immediate_dequeued_unconfirmed += v.immediate_dequeued_unconfirmed;
        sum.immediate_dequeues_unknown += v.immediate_dequeues_unknown;
        sum.in_flight_allowance += v.in_flight_allowance;
        sum.lost_in_flight += v.lost_in_flight;
        auto take = [](std::vector<uint64_t>& to, const std::vector<uint64_t>& from) {
            for (uint64_t id : from)
                if (to.size() < verdict_sample_size) to.push_back(id);
        };
        take(sum.sample_lost, v.sample_lost);
        take(sum.sample_duplicated, v.sample_duplicated);
        take(sum.sample_unexpected, v.sample_unexpected);
    }
    return sum;
}

double percentile(std::vector<double>& v, double q) {
    if (v.empty()) return 0;
    size_t k = static_cast<size_t>(q * (v.size() - 1));
    std::nth_element(v.begin(), v.begin() + k, v.end());
    return v[k];
}

}  // namespace

std::string describe_systems() {
    return "  aq     aq.enqueue_array / aq.dequeue_array(..., wait => '0.2 s'); with --immediate both with\n"
           "         visibility => 'immediate', the enqueue in BEGIN; enqueue; COMMIT like the dequeue\n"
           "  plain  INSERT ... SELECT FROM unnest($1); DELETE ... RETURNING of rows claimed with\n"
           "         FOR UPDATE SKIP LOCKED (polls every 1 ms when empty)\n"
           "  pgq    PgQ 3.5: a bulk INSERT into the current event table; one registered consumer shared\n"
           "         by the consumer sessions under an advisory lock (tools/aq-bench/pgq.md)\n"
           "  pgmq   pgmq's SQL shape, re-written here (pgmq itself is not used): a multi-row INSERT; its\n"
           "         read (UPDATE ... SET vt = clock_timestamp() + 30 s of the oldest visible rows claimed\n"
           "         with FOR UPDATE SKIP LOCKED, RETURNING), then its delete of those msg_ids, in one\n"
           "         transaction (three round trips; polls every 1 ms when empty)\n"
           "All alike: every statement of the loops is prepared once per connection (again after\n"
           "a reconnect).  A producer runs its enqueue as one autocommit statement (aq with --immediate:\n"
           "in a transaction, as above).  A consumer sends\n"
           "BEGIN and its dequeue in one round trip (libpq pipeline mode), then COMMIT once it has\n"
           "the messages (so that a fault cannot commit a dequeue it never saw), or ROLLBACK when the\n"
           "dequeue failed (aq: SQLSTATE QA228, nothing to dequeue after the wait).\n";
}

QueueResult run_queue(const QueueConfig& c, FaultInjector* faults) {
    auto system = make_system(c);
    {
        Session admin(c.conninfo);
        admin.connect();
        system->setup(admin, c);
    }
    Shared sh(c, *system, faults);
    sh.start = Clock::now();
    sh.deadline = sh.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(c.seconds));
    sh.producers_running = c.producers;
    int64_t start_us = now_us();
    std::vector<std::thread> threads;
    for (int i = 0; i < c.producers; i++) threads.emplace_back(producer, std::ref(sh), i);
    for (int i = 0; i < c.consumers; i++) threads.emplace_back(consumer, std::ref(sh), i);
    if (faults)  // the fraction of the run done, for the crashes' schedule (faults.hpp)
        faults->start([&sh, &c] {
            if (c.messages > 0) return static_cast<double>(sh.dequeued.load()) / c.messages;
            return std::chrono::duration<double>(Clock::now() - sh.start).count() / c.seconds;
        });
    // A progress line on stderr, once a second, until every producer and consumer is done.
    std::atomic<bool> running{true};
    std::thread progress([&] {
        while (running) {
            for (int i = 0; i < 10 && running; i++) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (!running) break;
            double t = std::chrono::duration<double>(Clock::now() - sh.start).count();
            std::fprintf(stderr, "aq-bench: %6.1f s  enqueued %llu  dequeued %llu  reconnects %llu\n", t,
                         static_cast<unsigned long long>(sh.acknowledged.load()),
                         static_cast<unsigned long long>(sh.dequeued.load()),
                         static_cast<unsigned long long>(sh.reconnects.load()));
        }
    });
    for (auto& t : threads) t.join();
    // The load is over: what the consumers left behind (deliveries, with subscribers), before the final drain.
    const long long backlog = static_cast<long long>(sh.acknowledged.load()) * std::max(1, c.subscribers) -
                              static_cast<long long>(sh.dequeued.load());
    running = false;
    progress.join();
    if (faults) faults->stop();
    double producing_s = (sh.producers_done_us.load() - start_us) / 1e6;
    std::fprintf(stderr, "aq-bench: end of the load after %.1f s: offered %s, enqueued %.0f msg/s%s, backlog %lld (enqueued - dequeued)\n",
                 std::chrono::duration<double>(Clock::now() - sh.start).count(),
                 c.rate > 0 ? (std::to_string(c.rate) + " msg/s").c_str() : "flat out",
                 sh.acknowledged.load() / std::max(1e-6, producing_s),
                 c.rate > 0 ? (", shortfall " + std::to_string(sh.shortfall.load()) + " messages").c_str() : "", backlog);
    long long table_bytes = -1;
    if (c.report_size) {  // the load's end state, before the final drain and the teardown
        Session admin(c.conninfo);
        admin.connect(std::chrono::seconds(120));
        Result size = admin.must(system->size_sql());
        if (PQntuples(size.get()) == 1 && !PQgetisnull(size.get(), 0, 0)) table_bytes = std::atoll(PQgetvalue(size.get(), 0, 0));
    }
    final_drain(sh);

    QueueResult r;
    r.config = c;
    r.enqueued = sh.acknowledged;
    r.dequeued = sh.dequeued;
    r.seconds = std::max(1e-6, (sh.last_dequeue_us.load() - start_us) / 1e6);
    r.dequeue_rate = r.dequeued / r.seconds;
    r.enqueue_rate = r.enqueued / std::max(1e-6, producing_s);
    r.shortfall = sh.shortfall;
    r.backlog = backlog;
    r.p50_ms = percentile(sh.latencies_ms, 0.50);
    r.p99_ms = percentile(sh.latencies_ms, 0.99);
    r.max_ms = sh.latencies_ms.empty() ? 0 : *std::max_element(sh.latencies_ms.begin(), sh.latencies_ms.end());
    if (c.subscribers > 0) {
        for (auto& h : sh.subscriber_histories) r.subscriber_verdicts.push_back(h->classify());
        r.verdict = add_up(r.subscriber_verdicts);
        r.messages_left = messages_left(sh);
    } else {
        r.verdict = sh.history.classify();
    }
    r.reconnects = sh.reconnects;
    r.table_bytes = table_bytes;
    Session admin(c.conninfo);
    admin.connect(std::chrono::seconds(120));
    if (c.segments > 0) {  // how far the ring turned during the run (its switches; each came round only past truncations)
        Result g = admin.must("SELECT coalesce(max(l.generation), 0) FROM aq.segment_log l JOIN aq.queue_tables t"
                              " USING (queue_table_id) WHERE t.queue_table = 'aqb_qt'");
        std::fprintf(stderr, "aq-bench: ring: %s switches of %d segments during the run\n", PQgetvalue(g.get(), 0, 0),
                     c.segments);
    }
    system->teardown(admin);
    return r;
}

}  // namespace aqbench
