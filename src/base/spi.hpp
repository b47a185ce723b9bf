// The one SPI bracket: connecting, running a prepared statement, reading its one value.
//
// Rules: a statement runs not read-only (a fresh snapshot each time: a waiting dequeue sees what
// committed while it slept); a result SPI did not promise is an internal error (XX000) naming
// what failed, never a user's error (those the statement itself raises, with their SQLSTATE);
// a result set is freed as soon as it has been read (a waiting dequeue runs statements on every
// pass).  PostgreSQL-side: call inside base::call.
#pragma once

extern "C" {
#include "postgres.h"
#include "executor/spi.h"
}

namespace aq::base::spi {

// SPI_connect, or an internal error.
void connect();

// Runs plan with args (nulls as SPI takes them, or nullptr), at most count rows (0: all), and
// raises an internal error naming `what` unless SPI returns `expected`.  Returns SPI_processed;
// the rows are in SPI_tuptable until free_result().
uint64 execute(SPIPlanPtr plan, Datum* args, const char* nulls, long count, int expected, const char* what);

// The first column of the first row of the last result (*isnull when there is none), then frees
// the result.  By-value types only: the result's memory goes.
Datum first_value(bool* isnull);

// Frees the last result.
void free_result();

}  // namespace aq::base::spi
