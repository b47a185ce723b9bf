// See spi.hpp.
#include "base/spi.hpp"

namespace aq::base::spi {

void connect() {
    if (SPI_connect() != SPI_OK_CONNECT) elog(ERROR, "aq: SPI_connect failed");
}

uint64 execute(SPIPlanPtr plan, Datum* args, const char* nulls, long count, int expected, const char* what) {
    int rc = SPI_execute_plan(plan, args, nulls, false, count);
    if (rc != expected) elog(ERROR, "aq: %s failed: %s", what, SPI_result_code_string(rc));
    return SPI_processed;
}

Datum first_value(bool* isnull) {
    Datum value = (Datum)0;
    *isnull = true;
    if (SPI_tuptable && SPI_processed > 0) value = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, isnull);
    free_result();
    return value;
}

void free_result() {
    if (SPI_tuptable) SPI_freetuptable(SPI_tuptable);
    SPI_tuptable = nullptr;
}

}  // namespace aq::base::spi
