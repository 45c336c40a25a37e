#include "core/background_sms.h"

#include <stdlib.h>

#include "twinrun/err.h"

int tr_background_sms(int nsm, char *err, size_t errlen) {
    const char *env = getenv("TWINRUN_BACKGROUND_SMS");
    if (!env || !*env) return TR_BACKGROUND_SMS_DEFAULT <= nsm / 4 ? TR_BACKGROUND_SMS_DEFAULT : nsm / 4;
    char *end = NULL;
    const long v = strtol(env, &end, 10);
    if (*end != '\0' || v < 0 || v > nsm / 2) {
        tr_errf(err, errlen,
                "TWINRUN_BACKGROUND_SMS=%s: give a whole number of multiprocessors from 0 (the optimizer's step "
                "ahead shares none) to %d (half of this device's %d)",
                env, nsm / 2, nsm);
        return -1;
    }
    return (int)v;
}
