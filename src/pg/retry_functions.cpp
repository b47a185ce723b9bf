// fmgr entry point of the dequeue-attempt filter aq._claimable (src/queue/retries.*).
// The SQL declaration is in sql/aq--0.4.0--0.5.0.sql; the C symbol is aq_<SQL name>.
extern "C" {
#include "postgres.h"
#include "fmgr.h"
#include "storage/itemptr.h"
#include "utils/builtins.h"
}

#include "base/guard.hpp"
#include "queue/retries.hpp"

namespace aq {

namespace {

Datum claimable(FunctionCallInfo fcinfo) {
    Oid relid = PG_GETARG_OID(0);
    ItemPointerData tid = *reinterpret_cast<ItemPointer>(PG_GETARG_POINTER(1));
    bool result = true;
    base::call([&] { result = queue::retries::claimable(relid, &tid); });
    return BoolGetDatum(result);
}

}  // namespace

}  // namespace aq

AQ_SQL_FUNCTION(aq__claimable, aq::claimable)
