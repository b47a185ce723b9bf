// See waiting.hpp.
extern "C" {
#include "postgres.h"
#include "executor/spi.h"
}

#include "base/spi.hpp"
#include "queue/statements.hpp"
#include "queue/waiting.hpp"

namespace aq::queue {

namespace {

// When the next delayed message of the queue becomes visible (0: none is delayed).  Requires SPI.
TimestampTz next_visible_time(const QueueInfo& q, TimestampTz now) {
    SPIPlanPtr plan = statement_plan(q, next_delay, InvalidOid);
    Datum args[2] = {Int32GetDatum(q.queue_id), TimestampTzGetDatum(now)};
    base::spi::execute(plan, args, nullptr, 1, SPI_OK_SELECT, "next delay lookup");
    bool isnull;
    Datum next = base::spi::first_value(&isnull);
    return isnull ? 0 : DatumGetTimestampTz(next);
}

}  // namespace

long next_visible_in(const QueueInfo& q, TimestampTz now) {
    if (q.exception_queue) return 1000;
    TimestampTz visible_at = next_visible_time(q, now);
    return visible_at > now ? static_cast<long>((visible_at - now + 999) / 1000) : -1;
}

}  // namespace aq::queue
