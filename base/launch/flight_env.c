#include "launch/flight_env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

int tr_launch_flight_env_read(tr_flight_env *o, char *err, size_t errlen) {
    o->dir = getenv("TWINRUN_FLIGHT_DIR");
    if (o->dir && !*o->dir) o->dir = NULL;
    o->records = 256;
    const char *r = getenv("TWINRUN_FLIGHT_RECORDS");
    if (r && *r) {
        char *end;
        errno = 0;
        const long long n = strtoll(r, &end, 10);
        if (errno || *end || n < 1 || n > (1 << 24))
            return tr_errf(err, errlen, "TWINRUN_FLIGHT_RECORDS=\"%.32s\": expected 1..16777216 records per rank", r);
        o->records = (size_t)n;
    }
    const char *x = getenv("TWINRUN_FLIGHT_AT_EXIT");
    if (x && *x && strcmp(x, "0") != 0 && strcmp(x, "1") != 0)
        return tr_errf(err, errlen, "TWINRUN_FLIGHT_AT_EXIT=\"%.32s\": use 1 (dump at the end of every run) or 0", x);
    o->at_exit = x && strcmp(x, "1") == 0;
    if (o->at_exit && !o->dir)
        return tr_errf(err, errlen, "TWINRUN_FLIGHT_AT_EXIT=1 needs TWINRUN_FLIGHT_DIR: the directory for the dumps");
    return 0;
}
