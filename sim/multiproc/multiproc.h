/* The multi-process twin: the ranks of one job spread over several processes (and hosts), each
 * process a twin_run over its block of ranks [proc * ranks_per_proc, (proc + 1) * ranks_per_proc);
 * collectives whose members live in several processes meet over libfabric (mp_transport.h) with the same
 * results, bit for bit, as in one process (mp_coll.c). docs/multiprocess.md.
 *
 * The twin's launch (sim/launch) starts the job before twin_run and stops it after; twin_run reaches
 * it through the hooks mp_remote returns (twin_options.remote): the scheduler and the collectives
 * never include this folder, which sits above them.
 *
 * Hangs across processes: simulated time cannot advance for a peer that is stopped, so a wait on
 * another process has a wall-clock watchdog (timeout_s). When it fires, or a rank fails, or a peer
 * leaves while someone still waits for it, the process aborts the job: every process sends the
 * others its flight dumps, and each reports the same blame over all of them; a process that does
 * not answer (killed, stopped, unreachable) is named. */
#ifndef TWINRUN_SIM_MULTIPROC_MULTIPROC_H
#define TWINRUN_SIM_MULTIPROC_MULTIPROC_H

#include <stdbool.h>
#include <stddef.h>

struct twin_remote;

typedef struct mp_config {
    int nprocs, proc, local_proc;
    int ranks_per_proc, world;
    int chunk;             /* ranks go to processes round-robin in chunks of this many (= ranks_per_proc: blocks) */
    const char *launcher;  /* who numbered the processes, for messages ("mpirun", ...) */
    bool mpi;              /* exchange endpoint addresses through MPI (started by mpirun) */
    char master_addr[256]; /* otherwise through the rendezvous store there (base/launch/tcp_store.h) */
    int master_port;
    char store_token[257]; /* TWINRUN_STORE_TOKEN ("" none), TWINRUN_STORE_BIND: base/launch/launch_vars.h */
    char store_bind[256];
    double timeout_s;           /* wall-clock watchdog on waits for other processes */
    bool timeout_explicit;      /* timeout_s came from TWINRUN_REMOTE_TIMEOUT; otherwise each waiting rank's
                                   own collective timeout (coll_set_timeout) applies, timeout_s when it has none */
    double bootstrap_timeout_s; /* start-up: every process present and reachable */
} mp_config;

typedef struct mp_job mp_job;

/* Bootstrap, endpoint, address exchange, and a hello to every peer over libfabric: the job, or NULL
 * with err. One job per process at a time (it takes SIGTERM, and MPI is per process). */
mp_job *mp_start(const mp_config *c, char *err, size_t errlen);
/* The hooks twin_run takes for this job (twin_options.remote); valid until mp_stop. */
const struct twin_remote *mp_remote(mp_job *j);
/* After twin_run: releases the endpoint, finalizes MPI when the job ended well, frees j. */
void mp_stop(mp_job *j, bool ok);

#endif
