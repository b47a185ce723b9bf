// See run_as.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/pg_db_role_setting.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/rel.h"
}

#include <cstdlib>

#include "base/run_as.hpp"
#include "compat/guc.hpp"

namespace aq::base {

namespace {

// Settings that a role's defaults may hold but that must not be applied here: the role is
// chosen by run_as itself, and this transaction has already begun.
bool never_applied(const char* name) {
    return pg_strcasecmp(name, "role") == 0 || pg_strcasecmp(name, "session_authorization") == 0 ||
           pg_strncasecmp(name, "transaction_", 12) == 0;
}

// One pg_db_role_setting row's settings, as a login gets them (superuser-level context: who may
// store a setting was checked by ALTER ROLE).  Source SESSION and action SAVE: the values live in
// the current nest level only and are undone with it (a lower source would also rewrite the
// values that AtEOXact_GUC restores).  A setting that cannot be applied is a WARNING, as at login.
void apply_setting_row(Oid database, Oid role) {
    Relation rel = table_open(DbRoleSettingRelationId, AccessShareLock);
    ScanKeyData keys[2];
    ScanKeyInit(&keys[0], Anum_pg_db_role_setting_setdatabase, BTEqualStrategyNumber, F_OIDEQ,
                ObjectIdGetDatum(database));
    ScanKeyInit(&keys[1], Anum_pg_db_role_setting_setrole, BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(role));
    SysScanDesc scan = systable_beginscan(rel, DbRoleSettingDatidRolidIndexId, true, nullptr, 2, keys);
    for (HeapTuple tuple; HeapTupleIsValid(tuple = systable_getnext(scan));) {
        bool isnull;
        Datum config = heap_getattr(tuple, Anum_pg_db_role_setting_setconfig, RelationGetDescr(rel), &isnull);
        if (isnull) continue;
        Datum* items;
        bool* nulls;
        int count;
        deconstruct_array(DatumGetArrayTypeP(config), TEXTOID, -1, false, TYPALIGN_INT, &items, &nulls, &count);
        for (int i = 0; i < count; i++) {
            if (nulls[i]) continue;
            char* name = nullptr;
            char* value = nullptr;
            ParseLongOption(TextDatumGetCString(items[i]), &name, &value);
            if (value && !never_applied(name))
                (void)set_config_option(name, value, PGC_SUSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, WARNING, false);
            compat::free_long_option(name);
            compat::free_long_option(value);
        }
    }
    systable_endscan(scan);
    table_close(rel, AccessShareLock);
}

struct PlanWork {
    SPIPlanPtr plan;
    Datum* args;
    const char* nulls;
    bool read_only;
    long count;
    int rc;
};

void run_plan(void* arg) {
    auto* w = static_cast<PlanWork*>(arg);
    w->rc = SPI_execute_plan(w->plan, w->args, w->nulls, w->read_only, w->count);
}

}  // namespace

void run_as(const RunAs& as, void (*work)(void*), void* arg) {
    Oid saved_user;
    int saved_context;
    GetUserIdAndSecContext(&saved_user, &saved_context);
    int level = NewGUCNestLevel();
    PG_TRY();
    {
        if (as.role_settings) {
            apply_setting_row(InvalidOid, as.role);   // ALTER ROLE ... SET
            apply_setting_row(MyDatabaseId, as.role); // ALTER ROLE ... IN DATABASE ... SET wins
        }
        (void)set_config_option("search_path", as.search_path ? as.search_path : "pg_catalog, pg_temp", PGC_USERSET,
                                PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
        SetUserIdAndSecContext(as.role, saved_context | SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION);
        work(arg);
    }
    PG_CATCH();
    {
        SetUserIdAndSecContext(saved_user, saved_context);
        AtEOXact_GUC(false, level);
        PG_RE_THROW();
    }
    PG_END_TRY();
    SetUserIdAndSecContext(saved_user, saved_context);
    AtEOXact_GUC(false, level);
}

int execute_plan_as(Oid role, SPIPlanPtr plan, Datum* args, const char* nulls, bool read_only, long count) {
    PlanWork w{plan, args, nulls, read_only, count, 0};
    run_as(RunAs{role}, run_plan, &w);
    return w.rc;
}

}  // namespace aq::base
