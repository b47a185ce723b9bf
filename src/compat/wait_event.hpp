// Wait events, across the supported server versions (15, 17, 18).
//
// 17 lets an extension name its wait events (WaitEventExtensionNew, listed in pg_wait_events):
// there pg_stat_activity shows wait_event_type 'Extension' with aq's own name for each of its
// waits ('AqDequeue', 'AqIngestSpace', ...); on 15 every one of them is plain 'Extension'.
// A name is registered in shared memory the first time a process waits on it, then cached.
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/wait_event.h"
}

namespace aq::compat {

inline uint32 named_wait_event(uint32* cache, const char* name) {
#if PG_VERSION_NUM >= 170000
    if (*cache == 0) *cache = WaitEventExtensionNew(name);
    return *cache;
#else
    (void)cache;
    (void)name;
    return PG_WAIT_EXTENSION;
#endif
}

}  // namespace aq::compat

// The wait event of this name (a string literal), registered once per process and call site.
#define AQ_WAIT_EVENT(name)                                       \
    ([]() -> uint32 {                                             \
        static uint32 aq_wait_event_id = 0;                       \
        return ::aq::compat::named_wait_event(&aq_wait_event_id, name); \
    }())
