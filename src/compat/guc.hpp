// Reading GUC records (utils/guc_tables.h), across the supported server versions (15, 17, 18).
//
// 16 keeps the records in a hash table: get_guc_variables() takes a count and builds a new array
// on each call, GetNumConfigOptions() is gone, and find_option() is exported.  16 also moved the
// built-in parameters' hooks (assign_synchronous_commit, ...) to utils/guc_hooks.h, and made the
// memory of a check hook's new string value and "extra" guc.c's own (guc_malloc, guc_strdup,
// guc_free: a memory context) where it had been malloc's; ParseLongOption's strings are palloc'd
// there (malloc'd before).
#pragma once

extern "C" {
#include "postgres.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
#if PG_VERSION_NUM >= 160000
#include "utils/guc_hooks.h"
#else
#include "replication/syncrep.h"
#endif
}

#include <cstdlib>
#include <cstring>

namespace aq::compat {

// The record of a parameter by its exact name, or nullptr (no placeholder is created).
inline config_generic* find_guc_record(const char* name) {
#if PG_VERSION_NUM >= 160000
    return find_option(name, false, true, ERROR);
#else
    config_generic** all = get_guc_variables();
    int n = GetNumConfigOptions();
    for (int i = 0; i < n; i++)
        if (strcmp(all[i]->name, name) == 0) return all[i];
    return nullptr;
#endif
}

// Memory that guc.c takes over from a check hook (an extra, a replaced string value): nullptr if
// there is none left (the check hook then fails).
inline void* guc_alloc(size_t size) {
#if PG_VERSION_NUM >= 160000
    return guc_malloc(LOG, size);
#else
    return malloc(size);
#endif
}

inline char* guc_string_copy(const char* s) {
#if PG_VERSION_NUM >= 160000
    return guc_strdup(LOG, s);
#else
    return strdup(s);
#endif
}

inline void guc_release(void* p) {
#if PG_VERSION_NUM >= 160000
    guc_free(p);
#else
    free(p);
#endif
}

// Frees a name or value that ParseLongOption returned (nullptr is fine).
inline void free_long_option(char* p) {
    if (!p) return;
#if PG_VERSION_NUM >= 160000
    pfree(p);
#else
    free(p);
#endif
}

}  // namespace aq::compat
