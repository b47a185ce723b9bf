// See plan_cache.hpp.
extern "C" {
#include "postgres.h"
#include "utils/guc.h"
#include "utils/hsearch.h"
}

#include <cstring>
#include <initializer_list>

#include "queue/plan_cache.hpp"

namespace aq::queue::plan_cache {

namespace {

struct Key {
    Oid relid;
    Oid payload_type;
    int32 statement;
};

struct Entry {
    Key key;
    SPIPlanPtr plan;
    char name[4 * (2 * NAMEDATALEN + 2) + 8];  // up to two qualified names
};

HTAB* cache = nullptr;

}  // namespace

SPIPlanPtr plan(const Request& r) {
    if (!cache) {
        HASHCTL ctl;
        memset(&ctl, 0, sizeof ctl);
        ctl.keysize = sizeof(Key);
        ctl.entrysize = sizeof(Entry);
        cache = hash_create("aq statement cache", 64, &ctl, HASH_ELEM | HASH_BLOBS);
    }
    Key key;
    memset(&key, 0, sizeof key);
    key.relid = r.relid;
    key.payload_type = r.payload_type;
    key.statement = r.statement;
    bool found;
    auto* entry = static_cast<Entry*>(hash_search(cache, &key, HASH_ENTER, &found));
    if (found && entry->plan && strcmp(entry->name, r.name) == 0) return entry->plan;
    if (found && entry->plan) SPI_freeplan(entry->plan);
    entry->plan = nullptr;
    SPIPlanPtr plan = SPI_prepare_cursor(r.build_sql(r.context), r.nargs, const_cast<Oid*>(r.argtypes), r.cursor_options);
    if (!plan) elog(ERROR, "aq: SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
    SPI_keepplan(plan);
    entry->plan = plan;
    strlcpy(entry->name, r.name, sizeof entry->name);
    return plan;
}

int index_plans_begin(bool allow_sort) {
    int level = NewGUCNestLevel();
    for (const char* method : {"enable_seqscan", "enable_bitmapscan", "enable_sort", "jit"}) {
        if (allow_sort && strcmp(method, "enable_sort") == 0) continue;
        (void)set_config_option(method, "off", PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
    }
    return level;
}

void index_plans_end(int level) {
    AtEOXact_GUC(true, level);
}

}  // namespace aq::queue::plan_cache
