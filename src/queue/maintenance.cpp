// See maintenance.hpp for the protocol.
extern "C" {
#include "postgres.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/timestamp.h"
}

#include "base/guard.hpp"
#include "base/once_a_second.hpp"
#include "base/run_as.hpp"
#include "queue/deliveries.hpp"
#include "queue/maintenance.hpp"
#include "queue/queue_store.hpp"
#include "queue/statements.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

int64 expire_messages_of(const QueueInfo& q) {
    if (q.default_exception_id == 0 || !OidIsValid(q.owner)) return -1;
    if (pg_class_aclcheck(claim_relid(q), GetUserId(), ACL_DELETE) != ACLCHECK_OK) return -1;
    SPIPlanPtr plan = statement_plan(q, expire_messages, InvalidOid);
    Datum args[3] = {Int32GetDatum(q.queue_table_id), Int32GetDatum(q.default_exception_id),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
    int rc = base::execute_plan_as(q.owner, plan, args, nullptr, false, 0);
    if (rc != SPI_OK_UPDATE) elog(ERROR, "aq: moving expired messages failed: %s", SPI_result_code_string(rc));
    uint64 moved = SPI_processed;
    if (moved > 0) wakeup::note_enqueue(q.queue_id);
    return int64(moved);
}

namespace {
base::OnceASecond<16> expiry_sweeps;
}  // namespace

bool expiry_sweep_due(const QueueInfo& q) {
    return expiry_sweeps.due(q.queue_table_id, GetCurrentTimestamp());
}

void settler_sweep(int32 queue_id) {
    base::entry_void([&] {
        QueueInfo q;
        bool found = false;
        base::call([&] { found = lookup_by_id(queue_id, q); });
        if (!found || !q.multiple_consumers || q.exception_queue) return;
        deliveries::Tables t = tables_of(q, "");
        base::RunAs as;
        as.role = q.owner;
        base::call([&] {
            base::run_as(as, [](void* arg) {
                base::entry_void([arg] {
                    deliveries::sweep(*static_cast<deliveries::Tables*>(arg), nullptr, -1, nullptr, true);
                });
            }, &t);
        });
    });
}

}  // namespace aq::queue
