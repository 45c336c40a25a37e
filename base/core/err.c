/* Error formatting and the one rank-fail path (see twinrun/err.h). */
#include "twinrun/err.h"

#include <stdio.h>

#include "twinrun/dev.h"

int tr_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

_Noreturn void tr_fatal(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "twinrun: fatal: %s\n", msg);
    fflush(stderr);
    dev_rank_note(msg);
    dev_rank_abort(TR_EXIT_FATAL);
}
