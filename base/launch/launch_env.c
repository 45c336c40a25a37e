/* The launcher's world size, read the same way by both builds (base/launch/launch_vars.h says
 * which variables win), and the twin's blocks of ranks per process. */
#include <errno.h>
#include <stdlib.h>

#include "launch/launch_vars.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

int launch_process_layout(int *nprocs, int *proc, int *ranks_per_process, char *err, size_t errlen) {
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    const char *rank = getenv("RANK");
    /* WORLD_SIZE alone (no RANK, no launcher) keeps its meaning: every rank in this process */
    if (v.launcher == TR_LAUNCHER_NONE || (v.launcher == TR_LAUNCHER_PLAIN && !(rank && *rank))) return 0;
    int per = 1;
    const char *s = getenv("TWINRUN_RANKS_PER_PROCESS");
    if (s && *s) {
        char *end;
        errno = 0;
        const long n = strtol(s, &end, 10);
        if (errno || *end || n < 1 || n > 1 << 20)
            return tr_errf(err, errlen,
                           "TWINRUN_RANKS_PER_PROCESS=\"%.32s\": expected the number of ranks each "
                           "process hosts, 1 to %d",
                           s, 1 << 20);
        per = (int)n;
    }
    if ((long long)v.world * per > 1 << 20)
        return tr_errf(err, errlen, "%d processes x TWINRUN_RANKS_PER_PROCESS=%d is more than %d ranks", v.world, per,
                       1 << 20);
    *nprocs = v.world;
    *proc = v.rank;
    *ranks_per_process = per;
    return 1;
}

int launch_world_size(char *err, size_t errlen) {
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    int nprocs = 1, proc = 0, per = 1; /* set when multi; initialised for -O3's -Wmaybe-uninitialized */
    const int multi = launch_process_layout(&nprocs, &proc, &per, err, errlen);
    if (multi < 0) return -1;
    return multi ? nprocs * per : v.world;
}
