/* The twin's launch when a launcher started several processes (mpirun, torchrun-style variables):
 * this process hosts ranks [proc * B, (proc + 1) * B) of the job, B = TWINRUN_RANKS_PER_PROCESS,
 * and the collectives between processes go over libfabric (sim/multiproc/multiproc.h).
 *
 *   TWINRUN_REMOTE_TIMEOUT     wall seconds a collective may wait for another process (default: the
 *                              waiting rank's collective timeout, --distributed-timeout-minutes, 600 s
 *                              unless set: NCCL's)
 *   TWINRUN_BOOTSTRAP_TIMEOUT  wall seconds for every process to arrive at start-up (default 120)
 *   TWINRUN_RANK_CHUNK         deal the ranks to the processes round-robin in chunks of this many (default:
 *                              one block per process, as launchers number GPUs); chunks of the TP size keep
 *                              whole pipelines in one process, so the processes compute in parallel
 *   FI_PROVIDER                libfabric provider: "tcp;ofi_rxm" (any network) or shm (one host) */
#include "launch_multi.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/launch_vars.h"
#include "multiproc/multiproc.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

static int env_int(const char *name, int dflt, int *out, char *err, size_t errlen) {
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    const long n = strtol(v, &end, 10);
    if (errno || *end || n < 1 || n > 1 << 20)
        return tr_errf(err, errlen, "%s=\"%.32s\": expected a positive number of ranks", name, v);
    *out = (int)n;
    return 0;
}

/* "ranks 256-511", or "ranks 8-15,40-47,... (256 in chunks of 8)" */
static void describe(char *buf, size_t n, int proc, int nprocs, int per, int chunk) {
    const int first = proc * chunk;
    if (chunk == per) snprintf(buf, n, "ranks %d-%d", proc * per, proc * per + per - 1);
    else if (per / chunk == 2)
        snprintf(buf, n, "ranks %d-%d,%d-%d", first, first + chunk - 1, first + nprocs * chunk,
                 first + nprocs * chunk + chunk - 1);
    else
        snprintf(buf, n, "ranks %d-%d,%d-%d,... (%d in chunks of %d)", first, first + chunk - 1, first + nprocs * chunk,
                 first + nprocs * chunk + chunk - 1, per, chunk);
}

static int env_seconds(const char *name, double dflt, double *out, char *err, size_t errlen) {
    const char *v = getenv(name);
    *out = dflt;
    if (!v || !*v) return 0;
    char *end;
    errno = 0;
    const double d = strtod(v, &end);
    if (errno || *end || !(d > 0) || !isfinite(d))
        return tr_errf(err, errlen, "%s=\"%.32s\": expected a positive number of seconds", name, v);
    *out = d;
    return 0;
}

int launch_multi_start(int world, double watchdog_s, launch_multi *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    int nprocs, proc, per;
    const int multi = launch_process_layout(&nprocs, &proc, &per, err, errlen);
    if (multi <= 0 || nprocs == 1) return multi < 0 ? -1 : 0;
    if ((long long)nprocs * per != world)
        return tr_errf(err, errlen,
                       "the job has %d ranks but the launcher started %d processes x "
                       "TWINRUN_RANKS_PER_PROCESS=%d",
                       world, nprocs, per);
    tr_launch_vars v;
    if (tr_launch_vars_from_env(&v, err, errlen)) return -1;
    int chunk;
    if (env_int("TWINRUN_RANK_CHUNK", per, &chunk, err, errlen)) return -1;
    if (per % chunk)
        return tr_errf(err, errlen,
                       "TWINRUN_RANK_CHUNK=%d does not divide the %d ranks of each process "
                       "(TWINRUN_RANKS_PER_PROCESS): every process must get whole chunks",
                       chunk, per);
    mp_config c = {.nprocs = nprocs,
                   .proc = proc,
                   .local_proc = v.local_rank,
                   .ranks_per_proc = per,
                   .chunk = chunk,
                   .world = world,
                   .launcher = tr_launcher_name(v.launcher),
                   .mpi = v.launcher == TR_LAUNCHER_OMPI};
    if (!c.mpi) {
        if (!v.has_master)
            return tr_errf(err, errlen,
                           "RANK=%d WORLD_SIZE=%d: the processes meet at MASTER_ADDR:MASTER_PORT (process "
                           "0's host and a free port, as torchrun sets them); set both, or start the job with mpirun",
                           proc, nprocs);
        snprintf(c.master_addr, sizeof c.master_addr, "%s", v.master_addr);
        c.master_port = v.master_port;
        memcpy(c.store_token, v.store_token, sizeof c.store_token);
        memcpy(c.store_bind, v.store_bind, sizeof c.store_bind);
    }
    const char *t = getenv("TWINRUN_REMOTE_TIMEOUT");
    c.timeout_explicit = t && *t;
    if (env_seconds("TWINRUN_REMOTE_TIMEOUT", watchdog_s > 0 ? watchdog_s : 600.0, &c.timeout_s, err, errlen) ||
        env_seconds("TWINRUN_BOOTSTRAP_TIMEOUT", 120.0, &c.bootstrap_timeout_s, err, errlen))
        return -1;
    if (!(m->job = mp_start(&c, err, errlen))) return -1;
    m->remote = mp_remote(m->job);
    m->active = true;
    m->nprocs = nprocs;
    m->proc = proc;
    m->nranks = per;
    m->chunk = chunk;
    describe(m->ranks, sizeof m->ranks, proc, nprocs, per, chunk);
    return 1;
}

void launch_multi_stop(launch_multi *m, bool ok) {
    if (m->active) mp_stop(m->job, ok);
    m->active = false;
    m->job = NULL;
    m->remote = NULL;
}
