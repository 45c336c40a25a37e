/* The twin's launch: every rank of the job runs here, under the deterministic scheduler.
 * TWINRUN_TWIN_DEVICE picks the device spec the cost model and memory capacity use ("H100",
 * "H200", "A100", "MTT-S5000"); TWINRUN_TWIN_SEED seeds the scheduler. A hang ends the run with
 * the blame report on stderr and a non-zero code, never a hung process. */
#include <stdio.h>
#include <stdlib.h>

#include "twin.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

typedef struct launch_call {
    launch_entry entry;
    void *arg;
    int world;
} launch_call;

static int twin_entry(int rank, void *arg) {
    const launch_call *c = arg;
    return c->entry(rank, c->world, c->arg);
}

int launch_ranks(int world, launch_entry entry, void *arg, char *err, size_t errlen) {
    if (world < 1) return tr_errf(err, errlen, "world size %d: need at least one rank", world);
    twin_options opt;
    twin_options_default(&opt);
    opt.end_on_abort = true;
    const char *dev = getenv("TWINRUN_TWIN_DEVICE");
    if (dev && *dev) opt.device = dev;
    const char *seed = getenv("TWINRUN_TWIN_SEED");
    if (seed && *seed) opt.seed = strtoull(seed, NULL, 10);
    launch_call call = {entry, arg, world};
    twin_result res;
    if (twin_run(world, twin_entry, &call, &opt, &res, err, errlen)) return -1;
    int code = 0;
    for (int r = 0; r < res.nranks; r++) {
        int c = res.rank_end[r] == TWIN_RANK_KILLED ? TR_EXIT_FATAL : res.exit_codes[r];
        if (c > code) code = c;
    }
    if (res.hang || code) fputs(res.report, stderr);
    if (res.hang && !code) code = TR_EXIT_FATAL;
    twin_result_free(&res);
    return code;
}
