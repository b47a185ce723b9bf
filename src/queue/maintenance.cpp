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
#include "base/xact_end.hpp"
#include "queue/deliveries.hpp"
#include "queue/maintenance.hpp"
#include "queue/once_walk.hpp"
#include "queue/queue_store.hpp"
#include "queue/statements.hpp"
#include "queue/wakeup.hpp"

namespace aq::queue {

namespace {
struct ExpiredLook {
    const QueueInfo* q;
    Datum* args;
    bool any;
};
void look_for_expired(void* arg) {
    auto* l = static_cast<ExpiredLook*>(arg);
    SPIPlanPtr plan = statement_plan(*l->q, expired_exists, InvalidOid);
    int rc = base::execute_plan_as(l->q->owner, plan, l->args, nullptr, true, 1);
    if (rc != SPI_OK_SELECT) elog(ERROR, "aq: looking for expired messages failed: %s", SPI_result_code_string(rc));
    bool isnull;
    l->any = SPI_processed == 1 && DatumGetBool(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}
}  // namespace

struct OnceExpiry {
    const QueueInfo* q;
    TimestampTz now;
    int64 moved;
};

int64 expire_messages_of(const QueueInfo& q) {
    if (q.default_exception_id == 0 || !OidIsValid(q.owner)) return -1;
    if (pg_class_aclcheck(claim_relid(q), GetUserId(), ACL_DELETE) != ACLCHECK_OK) return -1;
    Datum args[3] = {Int32GetDatum(q.queue_table_id), Int32GetDatum(q.default_exception_id),
                     TimestampTzGetDatum(GetCurrentTimestamp())};
    // A ring: the move (an UPDATE, whose locks stay to the end of the transaction) only when there
    // is something to move, which a look finds without keeping any lock (ring.hpp, L1).
    if (q.segments.count > 0) {
        ExpiredLook look{&q, args, false};
        base::xact_end::look(look_for_expired, &look);
        if (!look.any) return 0;
    }
    // Each message stored once: every subscriber that has not taken it gets its copy in the
    // exception queue (once_walk.hpp, 7), as the owner.
    if (q.stored_once()) {
        OnceExpiry e{&q, DatumGetTimestampTz(args[2]), 0};
        base::RunAs as;
        as.role = q.owner;
        base::run_as(as, [](void* arg) {
            auto* e = static_cast<OnceExpiry*>(arg);
            bool held = false;
            e->moved = expire_once(*e->q, e->now, &held);
        }, &e);
        return e.moved;
    }
    SPIPlanPtr plan = statement_plan(q, expire_messages, InvalidOid);
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
        if (!found || !q.multiple_consumers || q.stored_once() || q.exception_queue) return;
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
