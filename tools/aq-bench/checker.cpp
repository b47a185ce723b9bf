#include "checker.hpp"

#include <algorithm>
#include <sstream>

namespace aqbench {

namespace {

// Keeps the smallest verdict_sample_size ids, ascending (map iteration order is unspecified).
void trim_sample(std::vector<uint64_t>& ids) {
    auto keep = std::min(ids.size(), verdict_sample_size);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end());
    ids.resize(keep);
}

void append_sample(std::ostringstream& out, const char* what, const std::vector<uint64_t>& ids) {
    if (ids.empty()) return;
    out << "; " << what << " ids:";
    for (uint64_t id : ids) out << ' ' << id;
}

}  // namespace

History::History(std::size_t expected_ids) { entries_.reserve(expected_ids); }

void History::enqueue_attempted(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[id];
    if (e.enqueue == Enqueue::never) e.enqueue = Enqueue::pending;
}

void History::enqueue_finished(uint64_t id, EnqueueOutcome outcome) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].enqueue = outcome == EnqueueOutcome::acknowledged ? Enqueue::acknowledged : Enqueue::unknown;
}

void History::enqueue_failed(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].enqueue = Enqueue::failed;
}

void History::dequeued_committed(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].committed++;
}

void History::dequeued_uncertain(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].uncertain++;
}

void History::drained(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].drained++;
}

void History::enqueue_immediate(uint64_t id, bool commit_confirmed) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[id];
    e.enqueue = Enqueue::acknowledged;
    e.immediate |= enqueued_immediately | (commit_confirmed ? 0 : enqueue_unconfirmed);
}

void History::dequeued_immediate(uint64_t id, bool commit_confirmed) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[id];
    e.committed++;
    e.immediate |= dequeued_immediately | (commit_confirmed ? 0 : dequeue_unconfirmed);
}

void History::immediate_dequeue_unknown(uint64_t batch) {
    std::lock_guard<std::mutex> lock(mutex_);
    immediate_dequeues_unknown_++;
    in_flight_allowance_ += batch;
}

History::Verdict History::classify() const {
    std::lock_guard<std::mutex> lock(mutex_);
    Verdict v;
    for (const auto& [id, e] : entries_) {
        const uint64_t seen = uint64_t{e.committed} + e.drained;
        const bool uncertain_resolved = seen == 0 && e.uncertain > 0;
        const bool delivered = seen > 0 || uncertain_resolved;
        // Any observation (committed, uncertain or drained) makes the id delivered, so this covers all of them.
        const bool unexpected = delivered && (e.enqueue == Enqueue::never || e.enqueue == Enqueue::failed);
        // An attempt never finished is as unknown as one whose COMMIT result was lost.
        const bool outcome_unknown = e.enqueue == Enqueue::unknown || e.enqueue == Enqueue::pending;

        if (e.enqueue == Enqueue::acknowledged) {
            v.acknowledged++;
            if (!delivered) {
                v.lost++;
                v.sample_lost.push_back(id);
            }
        }
        if (seen > 1) {
            v.duplicated++;
            v.sample_duplicated.push_back(id);
        }
        if (unexpected) {
            v.unexpected++;
            v.sample_unexpected.push_back(id);
        }
        if (outcome_unknown && delivered) v.recovered++;
        if (uncertain_resolved) v.uncertain_resolved++;
        if (delivered && !unexpected) v.delivered++;
        if (e.immediate & enqueued_immediately) v.immediate_enqueued++;
        if (e.immediate & enqueue_unconfirmed) v.immediate_enqueued_unconfirmed++;
        if (e.immediate & dequeued_immediately) v.immediate_dequeued++;
        if (e.immediate & dequeue_unconfirmed) v.immediate_dequeued_unconfirmed++;
    }
    // Immediate dequeue calls whose result never arrived may have taken up to their batches with them.
    v.immediate_dequeues_unknown = immediate_dequeues_unknown_;
    v.in_flight_allowance = in_flight_allowance_;
    if (v.lost > 0 && v.lost <= v.in_flight_allowance) {
        v.lost_in_flight = v.lost;
        v.lost = 0;
        v.sample_lost.clear();
    }
    trim_sample(v.sample_lost);
    trim_sample(v.sample_duplicated);
    trim_sample(v.sample_unexpected);
    return v;
}

IngestLedger::IngestLedger(std::size_t expected_ids) { entries_.reserve(expected_ids); }

void IngestLedger::attempted(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].attempted = true;
}

void IngestLedger::acknowledged(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    Entry& e = entries_[id];
    e.attempted = true;
    e.acknowledged = true;
}

void IngestLedger::present(uint64_t id) {
    std::lock_guard<std::mutex> lock(mutex_);
    entries_[id].present++;
}

IngestLedger::Verdict IngestLedger::classify(const std::function<bool(uint64_t)>& watermark_covers) const {
    Verdict v;
    std::vector<uint64_t> absent;  // acknowledged but not in the table; judged below, outside the lock
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const auto& [id, e] : entries_) {
            if (e.acknowledged) v.acknowledged++;
            if (e.present > 0) v.present++;
            if (e.present > 1) {
                v.duplicated++;
                v.sample_duplicated.push_back(id);
            }
            if (e.present > 0 && !e.attempted) {
                v.unexpected++;
                v.sample_unexpected.push_back(id);
            }
            if (e.present > 0 && e.attempted && !e.acknowledged) v.recovered++;
            if (e.acknowledged && e.present == 0) absent.push_back(id);
        }
    }
    for (uint64_t id : absent) {
        if (watermark_covers(id)) {
            v.missing++;
            v.sample_missing.push_back(id);
        } else {
            v.unapplied++;
        }
    }
    trim_sample(v.sample_missing);
    trim_sample(v.sample_duplicated);
    trim_sample(v.sample_unexpected);
    return v;
}

std::string to_string(const History::Verdict& v) {
    std::ostringstream out;
    out << (v.ok() ? "ok" : "FAILED") << ": acknowledged=" << v.acknowledged << " delivered=" << v.delivered
        << " lost=" << v.lost << " duplicated=" << v.duplicated << " unexpected=" << v.unexpected
        << " recovered=" << v.recovered << " uncertain_resolved=" << v.uncertain_resolved;
    if (v.immediate_enqueued + v.immediate_dequeued + v.immediate_dequeues_unknown > 0)
        out << " immediate: enqueued=" << v.immediate_enqueued << " (unconfirmed=" << v.immediate_enqueued_unconfirmed
            << ") dequeued=" << v.immediate_dequeued << " (unconfirmed=" << v.immediate_dequeued_unconfirmed
            << ") dequeues_unknown=" << v.immediate_dequeues_unknown << " lost_in_flight=" << v.lost_in_flight
            << " (of at most " << v.in_flight_allowance << ")";
    append_sample(out, "lost", v.sample_lost);
    append_sample(out, "duplicated", v.sample_duplicated);
    append_sample(out, "unexpected", v.sample_unexpected);
    return out.str();
}

std::string to_string(const IngestLedger::Verdict& v) {
    std::ostringstream out;
    out << (v.ok() ? "ok" : "FAILED") << ": acknowledged=" << v.acknowledged << " present=" << v.present
        << " missing=" << v.missing << " unapplied=" << v.unapplied << " duplicated=" << v.duplicated
        << " unexpected=" << v.unexpected << " recovered=" << v.recovered;
    append_sample(out, "missing", v.sample_missing);
    append_sample(out, "duplicated", v.sample_duplicated);
    append_sample(out, "unexpected", v.sample_unexpected);
    return out.str();
}

}  // namespace aqbench
