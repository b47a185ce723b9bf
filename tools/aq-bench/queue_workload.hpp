// The queue workload: P producers and C consumers on one queue of aq, of plain SQL, of PgQ or of
// pgmq's SQL shape (re-written here: queue_workload.cpp's PgmqSystem).
//
// Protocol, per message: the producer builds a payload "<id>:<sent µs>:<padding>" with a
// unique id (producer << 40 | sequence), records the attempt, sends the batch in one
// autocommit statement and records the outcome (acknowledged, failed, or unknown when the
// connection broke).  A consumer runs BEGIN; dequeue; COMMIT (BEGIN and the dequeue pipelined in
// one round trip, COMMIT in a second; every statement prepared once per connection: pg.hpp) and
// records the ids it got as
// committed, or as uncertain when the COMMIT's answer was lost.  After the load a final
// drain takes what is left, until the table holds nothing more for it: it waits (with the
// dequeue's wait) for rows no dequeue can take yet, such as a killed consumer's claims until the
// server has counted their attempt, for at most 120 s (queue_workload.cpp: final_drain).  The checker (checker.hpp) then classifies every id.
// With --immediate (aq's visibility => 'immediate'), the producers run BEGIN; enqueue; COMMIT too (as the
// consumers do), and both record what the CALL returned, whatever became of the COMMIT after it (the worker
// committed the call on its own): a producer records its ids acknowledged once the enqueue's result arrived, a
// consumer its ids committed once the dequeue's rows did; a dequeue whose result never arrived is counted as a
// call in flight, which may have taken up to a batch with it (checker.hpp).  The transaction around the call is
// kept on purpose, so that the run shows the caller's COMMIT to be irrelevant (its failures are counted as
// "unconfirmed"); the final drain dequeues on commit, as without --immediate.
// With --rate R (an offered load), each producer paces itself to R / P messages a second: a batch is
// due every batch x P / R seconds on a steady clock from the start; a producer sleeps until its next
// batch is due; one that has fallen behind sends the batch due at once but never more than one batch
// ahead of the clock: batches due longer ago are skipped and counted as the shortfall.  Pacing
// changes when messages are sent, not what is recorded: the checker sees the same protocol.
// With subscribers (aq's multi-consumer queues), every subscriber is to receive every message
// once: each has a history of its own, in which the producers record every attempt and its
// consumers and its own final drain what they got; a run is ok when each one is, and when no
// message is left in the queue table after them all (a message goes with its last delivery).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "checker.hpp"

namespace aqbench {

class FaultInjector;

struct QueueConfig {
    std::string conninfo;
    std::string system = "aq";  // aq | plain | pgq | pgmq
    std::string pgq_setup_sql;  // pgq: the set-up script (pgq_baseline.sql)
    int producers = 1;
    int consumers = 1;
    int enqueue_batch = 1;
    int dequeue_batch = 1;
    long messages = 10000;      // total; 0: run for `seconds` (consumers stop then too; the final drain takes the backlog)
    double seconds = 0;
    long rate = 0;              // offered load: messages per second by all producers together (each paces itself
                                // to rate / producers in batches on a steady clock), 0 = flat out
    int payload_bytes = 64;
    int priorities = 1;         // aq: priorities 1..n (queue table sorted by priority,enq_time when > 1)
    double delay_seconds = 0;   // aq: every message delayed by this much
    int conditions = 0;         // aq: consumer k dequeues with deq_condition "id % conditions = k % conditions"
    int subscribers = 0;        // aq: a multi-consumer queue with subscribers sub1..subN; consumer k dequeues as
                                // sub(k % N + 1); each subscriber is checked exactly-once on its own
    int segments = 0;           // aq: a ring queue table of this many segments (0: classic)
    double retry_delay_seconds = 0;  // aq: the queue's retry_delay (0: none), with max_retries high enough
                                     // that no message of a fault goes to the exception queue
    bool immediate = false;     // aq: visibility => 'immediate' for the producers' enqueues and the consumers'
                                // dequeues (not the final drain's), each still in BEGIN; call; COMMIT
    bool report_size = false;   // measure the queue's table(s) once the load is over, before the final drain
};

struct QueueResult {
    QueueConfig config;
    double seconds = 0;          // from the start to the last committed dequeue
    uint64_t enqueued = 0;       // acknowledged
    uint64_t dequeued = 0;       // committed dequeues (before the final drain)
    double enqueue_rate = 0, dequeue_rate = 0;
    // With rate > 0: the messages the producers' schedule had due but that they never sent, having fallen more
    // than one batch behind it (they do not burst to catch up); 0 when flat out.
    uint64_t shortfall = 0;
    // At the end of the load (every producer and consumer stopped, before the final drain): enqueued minus
    // dequeued, deliveries with subscribers (each acknowledged message is owed to every one).
    long long backlog = 0;
    double p50_ms = 0, p99_ms = 0, max_ms = 0;
    History::Verdict verdict;                       // with subscribers: all of theirs added up
    std::vector<History::Verdict> subscriber_verdicts;  // with subscribers: each one's
    long messages_left = 0;  // with subscribers: messages still in the queue table once every subscriber drained
    uint64_t reconnects = 0;
    // With report_size: pg_total_relation_size of the queue's table(s) (aq: the queue table and its
    // delivery table if any; plain, pgmq: their table; pgq: its event tables) at the end of the load,
    // before the final drain and the teardown; -1 when not measured.
    long long table_bytes = -1;
    bool ok() const { return verdict.ok() && messages_left == 0; }
};

QueueResult run_queue(const QueueConfig& config, FaultInjector* faults);

// The systems' statements (for --help and the README).
std::string describe_systems();

}  // namespace aqbench
