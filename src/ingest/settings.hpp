// Fast-ingest parameters (defined in _PG_init; see README "Fast ingest").
#pragma once

namespace aq::ingest::settings {

extern int buffer_kb;          // aq.fast_ingest_buffer (postmaster): the ring's size
extern bool memoptimize_write; // aq.memoptimize_write: route plain inserts into enabled tables
extern int wait_timeout_ms;    // aq.fast_ingest_wait_timeout: longest wait for ring space
constexpr int max_wait_timeout_ms = 60 * 1000;  // ... and its largest value
extern int drain_delay_ms;     // aq.fast_ingest_drain_delay: keep committed rows this long

void define(bool preloaded);

}  // namespace aq::ingest::settings
