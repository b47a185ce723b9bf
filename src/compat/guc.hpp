// Reading GUC records (utils/guc_tables.h), across the supported server versions (15, 17, 18).
//
// 16 keeps the records in a hash table: get_guc_variables() takes a count and builds a new array
// on each call, GetNumConfigOptions() is gone, and find_option() is exported.  16 also moved the
// built-in parameters' hooks (assign_synchronous_commit, ...) to utils/guc_hooks.h.
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

// Memory of parameter values.  16 keeps the values of string parameters and the extras of
// check hooks in a memory context of guc.c (guc_malloc, guc_strdup, guc_free: guc.c pfree()s a
// value or an extra it discards), and ParseLongOption returns palloc'd strings; 15 uses
// malloc() and free() for all of them.  A hook that replaces a value or makes an extra, and a
// caller of ParseLongOption, must use these.
inline void* guc_alloc(std::size_t size) {
#if PG_VERSION_NUM >= 160000
    return guc_malloc(LOG, size);
#else
    return malloc(size);
#endif
}

inline char* guc_copy(const char* value) {
#if PG_VERSION_NUM >= 160000
    return guc_strdup(LOG, value);
#else
    return strdup(value);
#endif
}

inline void guc_release(void* memory) {
#if PG_VERSION_NUM >= 160000
    guc_free(memory);
#else
    free(memory);
#endif
}

// Frees what ParseLongOption returned (a NULL is ignored).
inline void free_long_option(char* part) {
    if (!part) return;
#if PG_VERSION_NUM >= 160000
    pfree(part);
#else
    free(part);
#endif
}

}  // namespace aq::compat
