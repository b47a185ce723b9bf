// Exactly-once checker of aq-bench: records what the driver did with each message id and, after the run,
// classifies every id. Pure C++17 (no PostgreSQL); recording is thread-safe and O(1) amortized.
//
// Queue protocol (History), per message id (unique 64-bit, `producer_no << 40 | seq`):
//   producer: enqueue_attempted(id) BEFORE sending it (so no consumer can ever see an id not yet recorded), then
//             enqueue_finished(id, acknowledged)  COMMIT returned OK,
//             enqueue_finished(id, unknown)       the COMMIT's result was never seen (connection lost, server crash),
//             enqueue_failed(id)                  definitely not enqueued (error with the connection alive: rolled back).
//             An attempt never finished counts as unknown.
//   consumer: dequeued_committed(id)  once per dequeue transaction whose COMMIT returned OK with id in it,
//             dequeued_uncertain(id)  the consumer got id but its COMMIT's result is unknown.
//   drain:    drained(id)             once per copy found by the final drain, after the load and all faults.
// Classification (each count is of distinct ids):
//   seen(id)           = #dequeued_committed(id) + #drained(id)
//   uncertain_resolved = ids dequeued uncertainly, with seen == 0: the message is no longer in the queue and
//                        nobody else committed it, so the uncertain consumer's commit must have succeeded.
//                        (Dequeued uncertainly and drained: that consumer rolled back; delivered once, by the drain.)
//   delivered(id)      = seen >= 1 or uncertain_resolved
//   duplicated         = ids with seen > 1
//   lost               = acknowledged ids not delivered
//   unexpected         = ids observed (committed, uncertain or drained) but never attempted, or whose enqueue failed
//                        (the driver's belief that it was not enqueued was wrong)
//   recovered          = unknown-outcome ids that were delivered (an unknown-outcome id never delivered is fine)
//   delivered (count)  = delivered ids that are not unexpected, so
//                        delivered == acknowledged - lost - lost_in_flight + recovered.
//   ok()  iff  lost == 0 && duplicated == 0 && unexpected == 0.
// Immediate visibility (aq's visibility => 'immediate', Oracle's DBMS_AQ.IMMEDIATE): the call commits in aq's worker
// before it returns, so the caller's COMMIT or ROLLBACK after it changes nothing, and the call's result is what counts:
//   producer: enqueue_immediate(id, commit_confirmed)   the enqueue CALL returned OK: acknowledged, even if the
//             caller's COMMIT after it failed or its result was lost (commit_confirmed false).  A call whose result
//             never arrived is enqueue_finished(id, unknown), one that failed on a live connection enqueue_failed(id)
//             (nothing enqueued), as above.
//   consumer: dequeued_immediate(id, commit_confirmed)  the dequeue CALL's rows arrived with id: as dequeued_committed,
//             even if the COMMIT after it failed or its result was lost (commit_confirmed false).
//             immediate_dequeue_unknown(batch)          a dequeue call whose result never arrived (the connection
//             broke during the call): the worker may have committed up to `batch` messages that no client saw,
//             which is the documented semantics of an immediate dequeue, not a fault of the queue.
//   immediate_enqueued, immediate_dequeued = distinct ids acknowledged / dequeued by an immediate call;
//   immediate_enqueued_unconfirmed, immediate_dequeued_unconfirmed = those of them whose COMMIT after the call
//                        failed or was lost (counted all the same);
//   immediate_dequeues_unknown = the number of immediate_dequeue_unknown calls;
//   in_flight_allowance  = the sum of their batches: at most this many messages can have vanished with them;
//   lost_in_flight       = the acknowledged ids not delivered, when they are at most in_flight_allowance (then
//                        lost = 0); when they are more, the calls in flight cannot explain them: they are all
//                        lost (and lost_in_flight = 0).  Not a failure: ok() stays as above.
//
// Fast-ingest protocol (IngestLedger): attempted(id) before sending, acknowledged(id) once the commit returned
// (fast ingest acknowledges before the row is durably applied), then after the run present(id) once per row found
// in the table. The apply watermark is in seqid order, which the driver cannot derive from ids, so classify asks
// the driver per acknowledged-but-absent id whether the durable apply watermark covers it.
//   missing    = acknowledged, absent, covered by the watermark       (a real loss)
//   unapplied  = acknowledged, absent, not covered                     (allowed: acknowledged but not yet durable)
//   duplicated = present more than once
//   unexpected = present, never attempted
//   recovered  = present, attempted but never acknowledged (connection lost before the commit's result)
//   present    = distinct ids found in the table
//   ok()  iff  missing == 0 && duplicated == 0 && unexpected == 0.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace aqbench {

enum class EnqueueOutcome { acknowledged, unknown };

// How many ids of each bad kind a verdict lists (the smallest ones, ascending).
constexpr std::size_t verdict_sample_size = 10;

class History {
public:
    explicit History(std::size_t expected_ids = 0);

    void enqueue_attempted(uint64_t id);
    void enqueue_finished(uint64_t id, EnqueueOutcome outcome);
    void enqueue_failed(uint64_t id);
    void dequeued_committed(uint64_t id);
    void dequeued_uncertain(uint64_t id);
    void drained(uint64_t id);
    // Immediate visibility (see above).
    void enqueue_immediate(uint64_t id, bool commit_confirmed);
    void dequeued_immediate(uint64_t id, bool commit_confirmed);
    void immediate_dequeue_unknown(uint64_t batch);

    struct Verdict {
        uint64_t acknowledged = 0, delivered = 0, lost = 0, duplicated = 0, unexpected = 0, recovered = 0,
                 uncertain_resolved = 0;
        uint64_t immediate_enqueued = 0, immediate_enqueued_unconfirmed = 0, immediate_dequeued = 0,
                 immediate_dequeued_unconfirmed = 0, immediate_dequeues_unknown = 0, in_flight_allowance = 0,
                 lost_in_flight = 0;
        std::vector<uint64_t> sample_lost, sample_duplicated, sample_unexpected;
        bool ok() const { return lost == 0 && duplicated == 0 && unexpected == 0; }
    };
    Verdict classify() const;

private:
    enum class Enqueue : uint8_t { never, pending, acknowledged, unknown, failed };
    // Immediate: bits of the id's immediate calls.
    enum : uint8_t {
        enqueued_immediately = 1,
        enqueue_unconfirmed = 2,
        dequeued_immediately = 4,
        dequeue_unconfirmed = 8
    };
    struct Entry {
        Enqueue enqueue = Enqueue::never;
        uint8_t immediate = 0;
        uint32_t committed = 0, uncertain = 0, drained = 0;
    };
    mutable std::mutex mutex_;
    std::unordered_map<uint64_t, Entry> entries_;
    uint64_t immediate_dequeues_unknown_ = 0, in_flight_allowance_ = 0;
};

class IngestLedger {
public:
    explicit IngestLedger(std::size_t expected_ids = 0);

    void attempted(uint64_t id);
    void acknowledged(uint64_t id);
    void present(uint64_t id);

    struct Verdict {
        uint64_t acknowledged = 0, present = 0, missing = 0, unapplied = 0, duplicated = 0, unexpected = 0,
                 recovered = 0;
        std::vector<uint64_t> sample_missing, sample_duplicated, sample_unexpected;
        bool ok() const { return missing == 0 && duplicated == 0 && unexpected == 0; }
    };
    // watermark_covers(id): is the acknowledged row id at or below the durable apply watermark?
    Verdict classify(const std::function<bool(uint64_t)>& watermark_covers) const;

private:
    struct Entry {
        bool attempted = false, acknowledged = false;
        uint32_t present = 0;
    };
    mutable std::mutex mutex_;
    std::unordered_map<uint64_t, Entry> entries_;
};

// One line for logs, e.g. "ok: acknowledged=10 delivered=10 lost=0 ... " or "FAILED: ... lost ids: 3 7"; with
// immediate calls, their counts after the others ("... immediate: enqueued=10 (unconfirmed=0) ...").
std::string to_string(const History::Verdict& v);
std::string to_string(const IngestLedger::Verdict& v);

}  // namespace aqbench
