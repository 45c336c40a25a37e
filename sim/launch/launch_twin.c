/* The twin's launch: every rank of the job runs here, under the deterministic scheduler.
 * TWINRUN_TWIN_DEVICE picks the device spec the cost model and memory capacity use ("H100",
 * "H200", "A100", "MTT-S5000"); TWINRUN_TWIN_SEED seeds the scheduler. A hang ends the run with
 * the blame report on stderr and a non-zero code, never a hung process. */
#include <stdio.h>
#include <stdlib.h>

#include "launch/flight_env.h"
#include "launch_multi.h"
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
    return twin_launch(world, entry, arg, NULL, NULL, err, errlen);
}

int twin_launch(int world, launch_entry entry, void *arg, const twin_options *given, twin_result *result, char *err,
                size_t errlen) {
    if (world < 1) return tr_errf(err, errlen, "world size %d: need at least one rank", world);
    twin_options opt;
    twin_options_default(&opt);
    if (given) opt = *given;
    opt.end_on_abort = true;
    const char *dev = getenv("TWINRUN_TWIN_DEVICE");
    if (dev && *dev && !given) opt.device = dev;
    const char *seed = getenv("TWINRUN_TWIN_SEED");
    if (seed && *seed && !given) opt.seed = strtoull(seed, NULL, 10);
    tr_flight_env fe; /* TWINRUN_FLIGHT_*: the same dumps as the real backend writes */
    if (tr_launch_flight_env_read(&fe, err, errlen)) return -1;
    if (!given) {
        opt.dump_dir = fe.dir;
        opt.dump_at_exit = fe.at_exit;
        opt.flight_capacity = fe.records;
    }
    launch_call call = {entry, arg, world};
    launch_multi multi; /* mpirun or torchrun started several processes: a block of the ranks runs here */
    const int m = launch_multi_start(world, opt.watchdog_timeout_s, &multi, err, errlen);
    if (m < 0) return -1;
    if (m) {
        opt.world_size = world;
        opt.proc = multi.proc;
        opt.nprocs = multi.nprocs;
        opt.rank_chunk = multi.chunk;
        opt.remote = multi.remote;
    }
    twin_result res;
    if (twin_run(m ? multi.nranks : world, twin_entry, &call, &opt, &res, err, errlen)) {
        launch_multi_stop(&multi, false);
        return -1;
    }
    int code = 0;
    for (int r = 0; r < res.nranks; r++) {
        int c = res.rank_end[r] == TWIN_RANK_KILLED ? TR_EXIT_FATAL : res.exit_codes[r];
        if (c > code) code = c;
    }
    if ((res.hang || code) && !opt.quiet) {
        if (m) fprintf(stderr, "twinrun: process %d of %d (%s):\n", multi.proc, multi.nprocs, multi.ranks);
        fputs(res.report, stderr);
    }
    if (res.hang && !code) code = TR_EXIT_FATAL;
    launch_multi_stop(&multi, !code);
    if (result) {
        twin_result_free(result);
        *result = res; /* handed over */
    } else {
        twin_result_free(&res);
    }
    return code;
}
