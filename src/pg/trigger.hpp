// aq's row triggers (aq._queues_changed, aq._progress_restored) read one int4 column of the row
// that fired them; this checks how they were called and reads it.
#pragma once

extern "C" {
#include "postgres.h"
#include "access/htup_details.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
}

#include <string>

#include "common/error.hpp"

namespace aq {

// The int4 `column` of the triggering row (*isnull if NULL).  39P01 unless called as a trigger
// on a table with that column: `function` names the trigger function, `table` its table.
inline int32 trigger_int4_column(FunctionCallInfo fcinfo, const char* column, const char* function,
                                 const char* table, bool* isnull) {
    if (!CALLED_AS_TRIGGER(fcinfo)) throw Error("39P01", std::string(function) + " must be called as a trigger");
    auto* trigger = reinterpret_cast<TriggerData*>(fcinfo->context);
    TupleDesc desc = trigger->tg_relation->rd_att;
    int attno = SPI_fnumber(desc, column);
    if (attno <= 0 || TupleDescAttr(desc, attno - 1)->atttypid != INT4OID)
        throw Error("39P01", std::string(function) + " fires on " + table + " only");
    return DatumGetInt32(heap_getattr(trigger->tg_trigtuple, attno, desc, isnull));
}

}  // namespace aq
