// Running work as another role: the one way aq does it.
//
// Protocol (every step, on success and on error):
//  1. Save the current user and security context.
//  2. Open a GUC nest level (NewGUCNestLevel).
//  3. With RunAs::role_settings: apply the role's own settings for this database, as a login of
//     that role would get them from pg_db_role_setting (ALTER ROLE ... SET, then ALTER ROLE ...
//     IN DATABASE ... SET, the latter winning).  role and session_authorization are never applied
//     (the role is set in step 5), nor the transaction_* settings (this transaction has begun).
//  4. Set search_path: RunAs::search_path when given (a writer's captured one), otherwise
//     pg_catalog, pg_temp, so that nothing the caller's schemas define can stand in for a name
//     that the work (or owner code it fires: triggers, index expressions, policies) resolves.
//  5. Become the role with SECURITY_LOCAL_USERID_CHANGE | SECURITY_RESTRICTED_OPERATION added to
//     the security context (no SET ROLE, no temporary objects, no cursors left behind).
//  6. Run the work.
//  7. Restore the user and the security context, then pop the nest level with
//     AtEOXact_GUC(false, level): every setting changed in it (steps 3 and 4, and any SET or
//     set_config() the work itself made, a trigger's included) returns to its prior value, so
//     nothing leaks into the caller's session or into the next piece of work.
//  On a PostgreSQL error in steps 3-6, step 7 runs in PG_CATCH and the error is re-raised.
//
// PostgreSQL-side code: the work is a plain function pointer and the frames here hold plain data
// only, so callers reach run_as from inside aq::base::call() (or from worker code that handles
// PostgreSQL errors itself).
#pragma once

extern "C" {
#include "postgres.h"
#include "executor/spi.h"
}

namespace aq::base {

struct RunAs {
    Oid role;
    bool role_settings = false;       // step 3 (the fast-ingest drain applying a writer's rows)
    const char* search_path = nullptr;  // step 4: nullptr pins pg_catalog, pg_temp
};

// Runs work(arg) as described above.
void run_as(const RunAs& as, void (*work)(void*), void* arg);

// Runs an already prepared SPI plan as `role` (search_path pinned, no role settings); returns
// SPI_execute_plan's result.  Requires an SPI connection.
int execute_plan_as(Oid role, SPIPlanPtr plan, Datum* args, const char* nulls, bool read_only, long count);

}  // namespace aq::base
