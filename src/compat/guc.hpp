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

}  // namespace aq::compat
