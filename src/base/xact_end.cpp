// See xact_end.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "utils/resowner.h"
}

#include <cstring>
#include <exception>

#include "base/xact_end.hpp"
#include "base/guard.hpp"

namespace aq::base::xact_end {

namespace {

constexpr int max_tables = 8;
Handlers tables[max_tables];
int table_count = 0;
bool installed = false;
bool exit_registered = false;

// The unlocked event owed by the latest transaction or subtransaction end: set by the commit,
// abort and subtransaction abort events, delivered (and cleared first) at the next release of
// the resources' AFTER_LOCKS phase, which PostgreSQL runs right after releasing the locks
// (CommitTransaction, AbortTransaction, AbortSubTransaction; the top-level one with isTopLevel).
enum class Owed { none, commit, abort };
Owed owed_top = Owed::none;
bool owed_sub_abort = false;

// A C++ exception from a handler that must not raise: reported after the catch block, and the
// other handlers still run.
char failure[256];

template <class Call>
void run_quietly(const Handlers& h, const char* event, Call&& call) {
    bool failed = false;
    try {
        call();
    } catch (const std::exception& e) {
        failed = true;
        strlcpy(failure, e.what(), sizeof failure);
    } catch (...) {
        failed = true;
        strlcpy(failure, "unknown exception", sizeof failure);
    }
    if (failed) ereport(WARNING, (errmsg("aq: %s handler of %s failed: %s", event, h.name, failure)));
}

void at_process_exit(int, Datum) {
    for (int i = 0; i < table_count; i++)
        if (tables[i].exit) run_quietly(tables[i], "exit", tables[i].exit);
}

// The exit event needs a callback in each backend (the postmaster's are not inherited): it is
// registered at the backend's first transaction event, after InitPostgres registered the
// abort of an open transaction, so it runs after that abort (on_shmem_exit callbacks run after
// every before_shmem_exit one).
void register_exit() {
    if (exit_registered || proc_exit_inprogress) return;
    exit_registered = true;
    on_shmem_exit(at_process_exit, 0);
}

void on_xact_event(XactEvent event, void*) {
    register_exit();
    switch (event) {
        case XACT_EVENT_PRE_COMMIT:
            for (int i = 0; i < table_count; i++)
                if (Hook hook = tables[i].pre_commit) base::entry_void([hook] { hook(); });
            break;
        case XACT_EVENT_PRE_PREPARE:
            for (int i = 0; i < table_count; i++)
                if (Hook hook = tables[i].pre_prepare) base::entry_void([hook] { hook(); });
            break;
        case XACT_EVENT_COMMIT:
            owed_top = Owed::commit;
            for (int i = 0; i < table_count; i++)
                if (tables[i].commit) run_quietly(tables[i], "commit", tables[i].commit);
            break;
        case XACT_EVENT_ABORT:
            owed_top = Owed::abort;
            for (int i = 0; i < table_count; i++)
                if (tables[i].abort) run_quietly(tables[i], "abort", tables[i].abort);
            break;
        case XACT_EVENT_PREPARE:
            owed_top = Owed::none;
            for (int i = 0; i < table_count; i++)
                if (tables[i].prepare) run_quietly(tables[i], "prepare", tables[i].prepare);
            break;
        case XACT_EVENT_PARALLEL_COMMIT:
            owed_top = Owed::commit;
            for (int i = 0; i < table_count; i++)
                if (tables[i].parallel_commit) run_quietly(tables[i], "parallel commit", tables[i].parallel_commit);
            break;
        case XACT_EVENT_PARALLEL_ABORT:
            owed_top = Owed::abort;
            for (int i = 0; i < table_count; i++)
                if (tables[i].parallel_abort) run_quietly(tables[i], "parallel abort", tables[i].parallel_abort);
            break;
        case XACT_EVENT_PARALLEL_PRE_COMMIT:
            break;  // a parallel worker's part of a commit: no aq state lives in a worker
    }
}

// The subtransaction of a look (look()), which no handler sees; entering_look while it begins.
bool entering_look = false;
SubTransactionId look_subxact = InvalidSubTransactionId;

void on_subxact_event(SubXactEvent event, SubTransactionId mine, SubTransactionId parent, void*) {
    register_exit();
    if (event == SUBXACT_EVENT_START_SUB && entering_look) {
        look_subxact = mine;
        return;
    }
    if (mine == look_subxact && look_subxact != InvalidSubTransactionId) {
        if (event == SUBXACT_EVENT_ABORT_SUB || event == SUBXACT_EVENT_COMMIT_SUB) look_subxact = InvalidSubTransactionId;
        return;
    }
    switch (event) {
        case SUBXACT_EVENT_START_SUB:
            for (int i = 0; i < table_count; i++)
                if (SubHook hook = tables[i].sub_start) base::entry_void([=] { hook(mine, parent); });
            break;
        case SUBXACT_EVENT_COMMIT_SUB:
            for (int i = 0; i < table_count; i++)
                if (SubHook hook = tables[i].sub_commit)
                    run_quietly(tables[i], "subtransaction commit", [=] { hook(mine, parent); });
            break;
        case SUBXACT_EVENT_ABORT_SUB:
            owed_sub_abort = true;
            for (int i = 0; i < table_count; i++)
                if (SubHook hook = tables[i].sub_abort)
                    run_quietly(tables[i], "subtransaction abort", [=] { hook(mine, parent); });
            break;
        case SUBXACT_EVENT_PRE_COMMIT_SUB:
            break;
    }
}

void run_owed_sub_abort() {
    if (!owed_sub_abort) return;
    owed_sub_abort = false;
    for (int i = 0; i < table_count; i++)
        if (tables[i].sub_abort_unlocked)
            run_quietly(tables[i], "subtransaction abort (unlocked)", tables[i].sub_abort_unlocked);
}

// Every resource owner's release calls this, for each phase; only the AFTER_LOCKS phase that
// follows an owed end acts.  A subtransaction's owner (and its portals' owners) release with
// isTopLevel false, after its locks went in the LOCKS phase; the transaction's own with true.
void on_resource_release(ResourceReleasePhase phase, bool, bool is_top_level, void*) {
    if (phase != RESOURCE_RELEASE_AFTER_LOCKS) return;
    run_owed_sub_abort();
    if (!is_top_level || owed_top == Owed::none) return;
    Owed owed = owed_top;
    owed_top = Owed::none;
    for (int i = 0; i < table_count; i++) {
        const Handlers& h = tables[i];
        if (owed == Owed::commit && h.commit_unlocked) run_quietly(h, "commit (unlocked)", h.commit_unlocked);
        if (owed == Owed::abort && h.abort_unlocked) run_quietly(h, "abort (unlocked)", h.abort_unlocked);
    }
}

}  // namespace

void add(const Handlers& h) {
    if (installed || table_count == max_tables)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("aq: transaction-end handlers of %s added after installation or beyond %d tables",
                               h.name, max_tables)));
    bool whole_transaction = h.pre_commit || h.commit || h.abort || h.pre_prepare || h.prepare;
    if (whole_transaction && !(h.commit && h.abort && h.prepare))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("aq: %s acts at the end of a transaction but lacks a handler for commit, abort or "
                               "prepare",
                               h.name)));
    if ((h.commit_unlocked || h.abort_unlocked) && !(h.commit && h.abort && h.prepare))
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("aq: %s acts after a transaction's locks are released but lacks a handler for "
                               "commit, abort or prepare",
                               h.name)));
    if ((h.sub_start || h.sub_commit) && !h.sub_abort)
        ereport(ERROR, (errcode(ERRCODE_INTERNAL_ERROR),
                        errmsg("aq: %s tracks subtransactions but lacks a handler for their abort", h.name)));
    tables[table_count++] = h;
}

void install() {
    if (installed) return;
    installed = true;
    RegisterXactCallback(on_xact_event, nullptr);
    RegisterSubXactCallback(on_subxact_event, nullptr);
    RegisterResourceReleaseCallback(on_resource_release, nullptr);
}

void look(void (*read)(void*), void* arg) {
    Assert(look_subxact == InvalidSubTransactionId);  // no look inside a look: the handlers would see its children
    MemoryContext outer = CurrentMemoryContext;
    ResourceOwner owner = CurrentResourceOwner;
    entering_look = true;
    PG_TRY();
    {
        BeginInternalSubTransaction(nullptr);
    }
    PG_FINALLY();
    {
        entering_look = false;
    }
    PG_END_TRY();
    MemoryContextSwitchTo(outer);
    PG_TRY();
    {
        read(arg);
    }
    PG_CATCH();
    {
        MemoryContextSwitchTo(outer);
        ErrorData* error = CopyErrorData();
        FlushErrorState();
        RollbackAndReleaseCurrentSubTransaction();
        MemoryContextSwitchTo(outer);
        CurrentResourceOwner = owner;
        ReThrowError(error);
    }
    PG_END_TRY();
    RollbackAndReleaseCurrentSubTransaction();
    MemoryContextSwitchTo(outer);
    CurrentResourceOwner = owner;
}

}  // namespace aq::base::xact_end
