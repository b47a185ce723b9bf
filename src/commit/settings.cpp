// See settings.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/shmem.h"
#include "utils/guc.h"
#include "utils/guc_tables.h"
}

#include <cstdlib>
#include <cstring>

#include "compat/guc.hpp"
#include "commit/settings.hpp"
#include "base/guard.hpp"

namespace aq::commit::settings {

namespace {

// ------------------------------------------------------------------ the parameters

int commit_wait_value = static_cast<int>(Wait::wait);
int commit_logging_value = static_cast<int>(Logging::immediate);
char* commit_write_value = nullptr;
int wait_level_value = static_cast<int>(SyncCommit::on);
int batch_window_value = 100;

const config_enum_entry wait_options[] = {
    {"wait", static_cast<int>(Wait::wait), false},
    {"nowait", static_cast<int>(Wait::nowait), false},
    {"force_wait", static_cast<int>(Wait::force_wait), false},
    {nullptr, 0, false},
};
const config_enum_entry logging_options[] = {
    {"immediate", static_cast<int>(Logging::immediate), false},
    {"batch", static_cast<int>(Logging::batch), false},
    {nullptr, 0, false},
};
const config_enum_entry wait_level_options[] = {
    {"local", static_cast<int>(SyncCommit::local), false},
    {"remote_write", static_cast<int>(SyncCommit::remote_write), false},
    {"on", static_cast<int>(SyncCommit::on), false},
    {"remote_apply", static_cast<int>(SyncCommit::remote_apply), false},
    {nullptr, 0, false},
};

bool library_preloaded = false;

// The three aq parameters, in this order everywhere below.
enum Param { p_wait, p_logging, p_write, param_count };
const char* const param_names[param_count] = {"aq.commit_wait", "aq.commit_logging", "aq.commit_write"};

// The "extra" of every value of the three parameters.  wait/logging: -1 = not given.
struct Extra {
    uint64_t stamp;
    int source;  // GucSource
    int wait;
    int logging;
};

uint64_t next_stamp = 1;

// Values seen at connection start, by source: GLOBAL, DATABASE, USER, DATABASE_USER, CLIENT.
constexpr int first_captured = PGC_S_GLOBAL;
constexpr int captured_count = PGC_S_CLIENT - PGC_S_GLOBAL + 1;
struct Captured {
    bool set;
    Extra extra;
};
Captured captured[param_count][captured_count];

Level level_of(int source) {
    switch (source) {
        case PGC_S_DEFAULT:
        case PGC_S_DYNAMIC_DEFAULT: return Level::default_level;
        case PGC_S_ENV_VAR:
        case PGC_S_FILE:
        case PGC_S_ARGV:
        case PGC_S_OVERRIDE: return Level::system;
        case PGC_S_DATABASE: return Level::database;
        case PGC_S_GLOBAL:  // ALTER ROLE ALL SET
        case PGC_S_USER:
        case PGC_S_DATABASE_USER: return Level::role;
        default: return Level::session;  // CLIENT, SESSION
    }
}

// A check hook's common tail: refuse non-defaults without preloading, stamp, capture.
bool finish_check(Param param, bool is_default, int wait, int logging, void** extra, GucSource source) {
    if (!library_preloaded && !is_default) {
        GUC_check_errmsg("aq's commit modes need aq in shared_preload_libraries");
        GUC_check_errhint("Add 'aq' to shared_preload_libraries and restart the server.");
        return false;
    }
    auto* e = static_cast<Extra*>(compat::guc_alloc(sizeof(Extra)));  // guc.c frees extras itself
    if (!e) return false;
    *e = Extra{next_stamp++, source, wait, logging};
    *extra = e;
    if (source >= first_captured && source < first_captured + captured_count)
        captured[param][source - first_captured] = Captured{true, *e};
    return true;
}

bool check_wait(int* newval, void** extra, GucSource source) {
    return finish_check(p_wait, *newval == static_cast<int>(Wait::wait), *newval, -1, extra, source);
}

bool check_logging(int* newval, void** extra, GucSource source) {
    return finish_check(p_logging, *newval == static_cast<int>(Logging::immediate), -1, *newval, extra, source);
}

// Parses and canonicalizes ('BATCH , NoWait' -> 'batch,nowait').
bool check_write(char** newval, void** extra, GucSource source) {
    char detail[512] = "";
    char hint[512] = "";
    WriteClause clause;
    bool ok = true;
    try {
        clause = parse_write_clause(*newval ? *newval : "");
        std::string canonical = format_write_clause(clause);
        if (!*newval || canonical != *newval) {
            char* copy = compat::guc_string_copy(canonical.c_str());
            if (!copy) return false;
            compat::guc_release(*newval);
            *newval = copy;
        }
    } catch (const Error& e) {
        ok = false;
        snprintf(detail, sizeof detail, "%s", e.detail().c_str());
        snprintf(hint, sizeof hint, "%s", e.hint().c_str());
    } catch (...) {
        ok = false;
        snprintf(detail, sizeof detail, "out of memory");
    }
    if (!ok) {  // outside the catch: no C++ object is alive while guc.c formats
        GUC_check_errdetail("%s", detail);
        if (hint[0]) GUC_check_errhint("%s", hint);
        return false;
    }
    return finish_check(p_write, clause.empty(), clause.wait ? static_cast<int>(*clause.wait) : -1,
                        clause.logging ? static_cast<int>(*clause.logging) : -1, extra, source);
}

// ------------------------------------------------------------------ the system level
//
// One word, written only by the postmaster:
//   bits 0-1  aq.commit_wait + 1      (0 = not set at system level)
//   bits 2-3  aq.commit_logging + 1
//   bit  4    aq.commit_write set
//   bits 5-6  its wait half + 1       (0 = omitted)
//   bits 7-8  its logging half + 1
//   bit  9    aq.commit_write was set after aq.commit_wait
//   bit  10   aq.commit_write was set after aq.commit_logging

struct SystemShared {
    pg_atomic_uint64 word;
};
SystemShared* system_shared = nullptr;

// The postmaster's current values (what it publishes).
Extra postmaster_values[param_count] = {{0, PGC_S_DEFAULT, -1, -1}, {0, PGC_S_DEFAULT, -1, -1},
                                        {0, PGC_S_DEFAULT, -1, -1}};

uint64_t pack_system_word() {
    const Extra& w = postmaster_values[p_wait];
    const Extra& l = postmaster_values[p_logging];
    const Extra& c = postmaster_values[p_write];
    uint64_t word = 0;
    if (w.source > PGC_S_DEFAULT) word |= uint64_t(w.wait + 1);
    if (l.source > PGC_S_DEFAULT) word |= uint64_t(l.logging + 1) << 2;
    if (c.source > PGC_S_DEFAULT && (c.wait >= 0 || c.logging >= 0)) {
        word |= uint64_t(1) << 4;
        word |= uint64_t(c.wait + 1) << 5;
        word |= uint64_t(c.logging + 1) << 7;
        if (c.stamp > w.stamp) word |= uint64_t(1) << 9;
        if (c.stamp > l.stamp) word |= uint64_t(1) << 10;
    }
    return word;
}

void publish_if_postmaster(Param param, void* extra) {
    if (IsUnderPostmaster || !extra) return;  // backends read the word; they never write it
    postmaster_values[param] = *static_cast<Extra*>(extra);
    if (system_shared) pg_atomic_write_u64(&system_shared->word, pack_system_word());
}

void assign_wait(int, void* extra) { publish_if_postmaster(p_wait, extra); }
void assign_logging(int, void* extra) { publish_if_postmaster(p_logging, extra); }
void assign_write(const char*, void* extra) { publish_if_postmaster(p_write, extra); }

// ------------------------------------------------------------------ reading GUC records

config_generic* records[param_count] = {};
config_generic* synchronous_commit_record = nullptr;

config_generic* find_record(const char* name) { return compat::find_guc_record(name); }

// A value with its source, as found in a record or its stack.
struct Found {
    const config_var_value* value;
    int source;
};

// The session-level value (what remains when the transaction ends) and, if the current
// value is local to the transaction (SET LOCAL, a function's SET clause), the current one.
struct RecordLevels {
    Found session;
    bool has_transaction;
    Found transaction;
};

RecordLevels read_record(config_generic* rec, const config_var_value* current) {
    RecordLevels out{{current, rec->source}, false, {current, PGC_S_SESSION}};
    // The outermost stack entry that is not a plain SET: the first local change.
    GucStack* local = nullptr;
    for (GucStack* s = rec->stack; s; s = s->prev)
        if (s->state != GUC_SET) local = s;
    if (!local) return out;  // no stack, or only SETs: the current value is the session's
    out.has_transaction = true;
    // Below it, the session's value: the masked SET of a SET-then-SET-LOCAL entry, else the
    // value before the change.
    if (local->state == GUC_SET_LOCAL)
        out.session = Found{&local->masked, PGC_S_SESSION};
    else
        out.session = Found{&local->prior, local->source};
    return out;
}

void add_candidates(Param param, const Extra& x, Level level, std::vector<Candidate>& waits,
                    std::vector<Candidate>& loggings) {
    if (level == Level::default_level) return;
    switch (param) {
        case p_wait: waits.push_back({Origin::commit_wait, level, x.stamp, x.wait}); break;
        case p_logging: loggings.push_back({Origin::commit_logging, level, x.stamp, x.logging}); break;
        case p_write:
            if (x.wait < 0 && x.logging < 0) return;  // '' = not set
            // An omitted half takes its default (Oracle's COMMIT_WRITE).
            waits.push_back({Origin::commit_write, level, x.stamp, x.wait >= 0 ? x.wait : int(Wait::wait)});
            loggings.push_back(
                {Origin::commit_write, level, x.stamp, x.logging >= 0 ? x.logging : int(Logging::immediate)});
            break;
        default: break;
    }
}

void add_system_candidates(std::vector<Candidate>& waits, std::vector<Candidate>& loggings) {
    if (!system_shared) return;
    uint64_t word = pg_atomic_read_u64(&system_shared->word);
    if (!word) return;
    int wait = int(word & 3) - 1;
    int logging = int((word >> 2) & 3) - 1;
    bool write_set = (word >> 4) & 1;
    int write_wait = int((word >> 5) & 3) - 1;
    int write_logging = int((word >> 7) & 3) - 1;
    uint64_t write_after_wait = (word >> 9) & 1, write_after_logging = (word >> 10) & 1;
    // Stamps only order values within the system level: aq.commit_write's halves are 2, a
    // separate parameter is 1 if set before it, 3 if after (so the halves share a stamp).
    uint64_t wait_stamp = write_after_wait ? 1 : 3, logging_stamp = write_after_logging ? 1 : 3;
    if (wait >= 0) waits.push_back({Origin::commit_wait, Level::system, wait_stamp, wait});
    if (logging >= 0) loggings.push_back({Origin::commit_logging, Level::system, logging_stamp, logging});
    if (write_set) {
        waits.push_back({Origin::commit_write, Level::system, 2, write_wait >= 0 ? write_wait : int(Wait::wait)});
        loggings.push_back(
            {Origin::commit_write, Level::system, 2, write_logging >= 0 ? write_logging : int(Logging::immediate)});
    }
}

config_var_value current_value(Param param) {
    config_var_value v{};
    config_generic* rec = records[param];
    v.extra = rec->extra;
    if (param == p_write)
        v.val.stringval = commit_write_value;
    else
        v.val.enumval = param == p_wait ? commit_wait_value : commit_logging_value;
    return v;
}

void collect(std::vector<Candidate>& waits, std::vector<Candidate>& loggings) {
    add_system_candidates(waits, loggings);
    for (int p = 0; p < param_count; p++) {
        for (int i = 0; i < captured_count; i++)
            if (captured[p][i].set)
                add_candidates(Param(p), captured[p][i].extra, level_of(first_captured + i), waits, loggings);
        if (!records[p]) continue;
        config_var_value current = current_value(Param(p));
        RecordLevels r = read_record(records[p], &current);
        // The system level comes from the postmaster's word, never from this backend's copy.
        // Database, role and connection options were captured at start; SET is read here.
        if (r.session.source == PGC_S_SESSION && r.session.value->extra)
            add_candidates(Param(p), *static_cast<Extra*>(r.session.value->extra), Level::session, waits, loggings);
        if (r.has_transaction && r.transaction.value->extra)
            add_candidates(Param(p), *static_cast<Extra*>(r.transaction.value->extra), Level::transaction, waits,
                           loggings);
    }
    // synchronous_commit: one candidate, its current value at its level.
    Level level = Level::default_level;
    if (synchronous_commit_record) {
        config_var_value current{};
        current.val.enumval = synchronous_commit;
        RecordLevels r = read_record(synchronous_commit_record, &current);
        level = r.has_transaction ? Level::transaction : level_of(r.session.source);
    }
    waits.push_back({Origin::synchronous_commit, level, 0, synchronous_commit});
}

void ensure_records() {
    if (records[p_wait]) return;
    for (int p = 0; p < param_count; p++) records[p] = find_record(param_names[p]);
    synchronous_commit_record = find_record("synchronous_commit");
}

}  // namespace

bool preloaded() {
    return library_preloaded;
}

void define(bool is_preloaded) {
    library_preloaded = is_preloaded;
    DefineCustomEnumVariable(
        "aq.commit_wait", "Oracle's COMMIT_WAIT: whether a commit waits for its WAL to be flushed.",
        "wait (default), nowait (a crash may lose the latest commits), force_wait (like wait, and "
        "overrides every more specific level, including synchronous_commit).",
        &commit_wait_value, static_cast<int>(Wait::wait), wait_options, PGC_USERSET, 0, check_wait, assign_wait,
        nullptr);
    DefineCustomEnumVariable("aq.commit_logging",
                             "Oracle's COMMIT_LOGGING: whether commits' WAL is written at once or in batches.",
                             "immediate (default) or batch.", &commit_logging_value,
                             static_cast<int>(Logging::immediate), logging_options, PGC_USERSET, 0, check_logging,
                             assign_logging, nullptr);
    DefineCustomStringVariable("aq.commit_write", "Oracle 10.2's COMMIT_WRITE: both halves in one, e.g. 'batch,nowait'.",
                               "Empty: not set.  An omitted half takes its default (immediate, wait).",
                               &commit_write_value, "", PGC_USERSET, 0, check_write, assign_write, nullptr);
    DefineCustomEnumVariable("aq.commit_wait_level", "What a WAIT commit waits for, as synchronous_commit's values.",
                             "local, remote_write, on (default: local flush, and a synchronous standby if one is "
                             "configured) or remote_apply.  A WAIT never weakens synchronous_commit.",
                             &wait_level_value, static_cast<int>(SyncCommit::on), wait_level_options, PGC_USERSET, 0,
                             nullptr, nullptr, nullptr);
    DefineCustomIntVariable("aq.batch_commit_window",
                            "Longest time a WAIT/BATCH commit waits for other commits in flight to join its flush.",
                            "In microseconds.  Only the committing session waits, holding no lock; 0 turns "
                            "gathering off.",
                            &batch_window_value, 100, 0, 1000, PGC_USERSET, 0, nullptr,
                            nullptr, nullptr);
}

std::size_t shmem_size() {
    return MAXALIGN(sizeof(SystemShared));
}

void shmem_startup() {
    bool found = false;
    system_shared = static_cast<SystemShared*>(ShmemInitStruct("aq commit system settings", sizeof(SystemShared), &found));
    if (!found) pg_atomic_init_u64(&system_shared->word, pack_system_word());
}

bool any_set() {
    ensure_records();
    if (system_shared && pg_atomic_read_u64(&system_shared->word) != 0) return true;
    for (int p = 0; p < param_count; p++) {
        for (int i = 0; i < captured_count; i++)
            if (captured[p][i].set) return true;
        // The system level is the postmaster's word (above), never this backend's copy, which
        // lags behind it until the backend has read the configuration again (collect() agrees).
        if (records[p] && ((records[p]->source > PGC_S_DEFAULT && level_of(records[p]->source) != Level::system) ||
                           records[p]->stack))
            return true;
    }
    return false;
}

Decision decide() {
    ensure_records();
    if (!any_set()) {  // the common case, without the collection: synchronous_commit decides
        Decision d;
        d.sync = current_synchronous_commit();
        d.wait = d.sync == SyncCommit::off ? Wait::nowait : Wait::wait;
        return d;
    }
    std::vector<Candidate> waits, loggings;
    collect(waits, loggings);
    return resolve(waits, loggings, wait_level());
}

SyncCommit wait_level() {
    return static_cast<SyncCommit>(wait_level_value);
}

int batch_window_us() {
    return batch_window_value;
}

std::vector<LevelValue> levels() {
    ensure_records();
    std::vector<Candidate> waits, loggings;
    collect(waits, loggings);
    std::vector<LevelValue> out;
    for (const auto& c : waits) {
        if (c.origin == Origin::commit_write) continue;  // listed with the logging half below
        const char* value = c.origin == Origin::synchronous_commit ? name(static_cast<SyncCommit>(c.value))
                                                                    : name(static_cast<Wait>(c.value));
        out.push_back({c.level, name(c.origin), value});
    }
    for (const auto& c : loggings) {
        if (c.origin == Origin::commit_write) {
            // Re-join the two halves of one aq.commit_write value.
            for (const auto& w : waits)
                if (w.origin == Origin::commit_write && w.level == c.level && w.stamp == c.stamp) {
                    WriteClause clause{static_cast<Wait>(w.value), static_cast<Logging>(c.value)};
                    out.push_back({c.level, name(c.origin), format_write_clause(clause)});
                    break;
                }
            continue;
        }
        out.push_back({c.level, name(c.origin), name(static_cast<Logging>(c.value))});
    }
    return out;
}

void set_transaction_clause(const WriteClause& clause) {
    std::string text = format_write_clause(clause);
    base::call([&] {
        (void)set_config_option("aq.commit_write", text.c_str(), PGC_USERSET, PGC_S_SESSION, GUC_ACTION_LOCAL, true,
                                0, false);
    });
}

SyncCommit current_synchronous_commit() {
    return static_cast<SyncCommit>(synchronous_commit);
}

}  // namespace aq::commit::settings
