/* The multi-process twin: the ranks of one job spread over several processes (and hosts), each
 * process a twin_run over its block of ranks [proc * ranks_per_proc, (proc + 1) * ranks_per_proc);
 * collectives whose members live in several processes meet over libfabric (mp_transport.h) with the same
 * results, bit for bit, as in one process (sim/coll/coll_remote.c). docs/multiprocess.md.
 *
 * This is process state of the twin (one job per process), like the scheduler's: the launch starts
 * it before twin_run and stops it after; the scheduler and the collectives ask it what they need.
 *
 * Hangs across processes: simulated time cannot advance for a peer that is stopped, so a wait on
 * another process has a wall-clock watchdog (timeout_s). When it fires, or a rank fails, or a peer
 * leaves while someone still waits for it, the process aborts the job: every process sends the
 * others its flight dumps, and each reports the same blame over all of them; a process that does
 * not answer (killed, stopped, unreachable) is named. */
#ifndef TWINRUN_SIM_FABRIC_XPROC_H
#define TWINRUN_SIM_FABRIC_XPROC_H

#include <stdbool.h>
#include <stddef.h>

#include "sched/sched_internal.h"
#include "mp_wire.h"

typedef struct mp_config {
    int nprocs, proc, local_proc;
    int ranks_per_proc, world;
    int chunk;            /* ranks go to processes round-robin in chunks of this many (= ranks_per_proc: blocks) */
    const char *launcher; /* who numbered the processes, for messages ("mpirun", ...) */
    bool mpi;             /* exchange endpoint addresses through MPI (started by mpirun) */
    char master_addr[256]; /* otherwise through the rendezvous store there (engine/launch/tcp_store.h) */
    int master_port;
    double timeout_s;           /* wall-clock watchdog on waits for other processes */
    bool timeout_explicit;      /* timeout_s came from TWINRUN_REMOTE_TIMEOUT; otherwise each waiting rank's
                                   own collective timeout (coll_set_timeout) applies, timeout_s when it has none */
    double bootstrap_timeout_s; /* start-up: every process present and reachable */
} mp_config;

/* Bootstrap, endpoint, address exchange, and a hello to every peer over libfabric. -1 with err. */
int mp_start(const mp_config *c, char *err, size_t errlen);
/* After twin_run: releases the endpoint; finalizes MPI when the job ended well. */
void mp_stop(bool ok);
bool mp_active(void);
int mp_self(void);
int mp_nprocs(void);
int mp_proc_of(int rank);

/* ---- for the scheduler ----------------------------------------------------------------------- */
/* Handles what the network brought. With may_block, waits (wall clock) for the network while an
 * operation waits on another process. Returns false when nothing waits on another process. */
bool mp_progress(bool may_block);
/* A rank of this process failed: the job is torn down. */
void mp_rank_failed(const twin_rank *r);
/* The twin found a hang among this process's ranks (why: "deadlock", ...): abort the job with
 * the blame over every process's dumps. */
void mp_hang(twin_sched *s, const char *why);
/* Every rank of this process has ended: say goodbye and wait for the others, answering aborts. */
void mp_run_end(twin_sched *s);

/* ---- for the collectives ------------------------------------------------------------------- */
void mp_send(int proc, mp_msg_type type, void *payload, size_t len);
/* Aborts the job because of what the network brought (a mismatch, a malformed message). */
void mp_abort(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
