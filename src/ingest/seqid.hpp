// Fast-ingest sequence ids and epochs: the arithmetic (pure C++, unit-tested; ring.hpp states
// the protocol).  Id = (epoch << 40) + n with 1 <= n <= 2^40 - 1; epoch = (timeline's low 6
// bits) << 17 | counter (1 .. 2^17 - 1), so epoch < 2^23 and every id is a positive bigint.
#pragma once

#include <cstdint>

namespace aq::ingest::seqid {

constexpr int shift = 40;
constexpr std::uint64_t per_epoch = (std::uint64_t(1) << shift) - 1;
constexpr int counter_bits = 17;
constexpr std::uint32_t counter_mask = (1u << counter_bits) - 1;
constexpr std::uint32_t timeline_mask = (1u << (23 - counter_bits)) - 1;

constexpr std::uint64_t base(std::uint32_t epoch) { return std::uint64_t(epoch) << shift; }
constexpr std::uint32_t epoch_of(std::uint64_t id) { return std::uint32_t(id >> shift); }

constexpr std::uint32_t make_epoch(std::uint32_t timeline, std::uint32_t counter) {
    return ((timeline & timeline_mask) << counter_bits) | (counter & counter_mask);
}

// The counter after `counter` (never 0: an epoch's counter part is never 0).
constexpr std::uint32_t next_counter(std::uint32_t counter) {
    return ((counter + 1) & counter_mask) == 0 ? 1 : ((counter + 1) & counter_mask);
}

// Can `rows` more ids be handed out from next_id without leaving `epoch`?  (epoch 0: none.)
constexpr bool ids_fit(std::uint32_t epoch, std::uint64_t next_id, std::uint64_t rows) {
    if (epoch == 0 || next_id <= base(epoch)) return false;
    std::uint64_t last = base(epoch) + per_epoch;
    return next_id <= last && rows <= last - next_id + 1;
}

}  // namespace aq::ingest::seqid
