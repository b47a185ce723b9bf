// The type aq.wait_time (wait_time.cpp): what the queue functions need to read it.
#pragma once

extern "C" {
#include "postgres.h"
#include "datatype/timestamp.h"
}

#include "queue/options.hpp"

namespace aq {

// An interval in seconds, months as 30 days (as EXTRACT(epoch) counts them).
double interval_seconds(const Interval* iv);

// An interval as an aq.wait_time's microseconds (-1: forever); 22023 if it is negative.
int64 interval_wait_micros(const Interval* iv);

// An aq.wait_time's microseconds as the queue's Wait.
queue::Wait wait_of_micros(int64 micros);

}  // namespace aq
