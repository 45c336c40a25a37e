/* The twin runtime: N ranks of the same entry point as coroutines in one thread, in simulated time.
 *
 * This header is the twin's own API, beside the fixed seam (dev.h, coll.h): the seam lets engine
 * code run unchanged; this is how a program starts N ranks of it and reads what happened.
 *
 *   static int entry(int rank, void *arg) { ... dev_open, coll_comm_create, train ...; return 0; }
 *   twin_options opt; twin_options_default(&opt);
 *   twin_result res;
 *   if (twin_run(1024, entry, arg, &opt, &res, err, sizeof err)) { usage error in err }
 *   ... res.exit_codes[r], res.hang, res.report ...
 *   twin_result_free(&res);
 *
 * Scheduling is deterministic: the next rank to run is the runnable one with the smallest
 * (simulated time, rank). A rank runs until it reaches a blocking point (a collective, send/recv,
 * barrier, group end, dev_sleep); kernels and copies only advance its own clock. The seed only
 * feeds the optional cost jitter and twin_rand(), so the same seed gives the same event order and
 * the same bits.
 *
 * Programs that never call twin_run (train_llama3, refcheck, the kernel tests) run as an implicit
 * rank 0 of a world of one: dev_open and one-rank communicators work from plain main(). */
#ifndef TWINRUN_SIM_TWIN_H
#define TWINRUN_SIM_TWIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "twinrun/launch.h"

typedef struct twin_options {
    uint64_t seed;             /* feeds cost jitter and twin_rand(); default 1 */
    size_t stack_bytes;        /* per-rank stack (virtual; pages are touched on use); default 1 MiB */
    double watchdog_timeout_s; /* per-rank collective timeout in simulated seconds; default 600 (NCCL's);
                                   0 disables the watchdog (a hang then ends as a reported deadlock) */
    const char *device;        /* device spec name for costs and capacity: "H100", "H200", "A100",
                                   "MTT-S5000"; default "H100" */
    int gpus_per_node;         /* topology: ranks [k*g, (k+1)*g) share a node; default 8 */
    size_t device_capacity;    /* per-rank device memory in bytes; 0 = the spec's memory x capacity_scale */
    double capacity_scale;     /* scales the spec's memory when device_capacity is 0; default 1 */
    double cost_jitter;        /* each cost is multiplied by 1 + jitter*u, u in [0,1) seeded; 0..1; default 0 */
    FILE *event_log;           /* one text line per scheduler event; NULL = none */
    const char *dump_dir;      /* when the watchdog fires, write flight_rank<R>.txt here; NULL = none */
    bool dump_at_exit;         /* also write them when the run ends without a hang (collective traces to
                                   compare with the real backend's: lab/compare_flight.py) */
    size_t flight_capacity;    /* flight-recorder ring entries per rank; default 256 */
    bool quiet;                /* no per-failure line on stderr */
    bool end_on_abort;         /* a rank whose collective times out or is aborted ends there (TWIN_RANK_KILLED),
                                   as a real job's watchdog tears the process down; default false (the call
                                   returns COLL_TIMEOUT / COLL_ABORTED) */
    const char *trace_path;    /* Chrome/Perfetto JSON trace of the simulated timeline, written when the
                                   run ends (docs/twin.md#trace); NULL = none, and recording costs nothing */
    const char *trace_ranks;   /* ranks to trace, "0-7,1016-1023" (flight_ranks_parse); NULL = ranks
                                   0 .. min(world, 64) - 1 */
    int world_size;            /* multi-process twin (docs/multiprocess.md): the job's ranks, of which this
                                   run, process `proc` of `nprocs`, hosts nranks; 0 = nranks (all of them here) */
    int proc, nprocs;
    int rank_chunk;                   /* the job's ranks are dealt to the processes round-robin in chunks of this many
                                   consecutive ranks; 0 = nranks (process p hosts one block from p x nranks) */
    const struct twin_remote *remote; /* with world_size > nranks: the job's other processes (sim/multiproc,
                                   which the twin's launch starts); required then, ignored otherwise */
    int threads;                      /* threads for the ranks' device work (docs/twin.md#threads): 1 = this one
                                   (kernels run at launch); N > 1 = N - 1 workers beside the scheduler's
                                   thread; 0 = TWINRUN_TWIN_THREADS, else the online CPUs (the default);
                                   -1 = "lazy": work is queued and runs only where the host must see it (a
                                   check). Results, clocks, traces and reports never depend on it. */
} twin_options;

void twin_options_default(twin_options *o);

typedef enum twin_rank_end {
    TWIN_RANK_EXITED = 0, /* the entry returned; exit_codes[r] is its value */
    TWIN_RANK_FAILED = 1, /* dev_rank_abort / tr_fatal; exit_codes[r] is the code */
    TWIN_RANK_KILLED = 2, /* still blocked when the run ended (hung, deadlocked); exit_codes[r] = -1 */
} twin_rank_end;

typedef struct twin_result {
    int nranks;
    int *exit_codes;         /* [nranks] */
    unsigned char *rank_end; /* [nranks] twin_rank_end */
    bool hang;               /* a watchdog fired, or ranks were left blocked with no deadline */
    int watchdog_rank;       /* the rank whose watchdog fired first; -1 if none */
    int blamed_rank;         /* blame's "stopped first"; -1 if none */
    double end_time;         /* largest simulated time any rank reached, seconds */
    uint64_t switches;       /* coroutine switches into ranks */
    char *report;            /* blame report and diagnostics (mismatches, failures); never NULL */
    char **messages;         /* [nranks] a failed rank's last fatal message (dev_rank_note), else NULL */
    double *end_times;       /* [nranks] each rank's clock when the run ended */
    double watchdog_time;    /* when the first watchdog fired (simulated seconds); 0 if none */
} twin_result;

/* Runs entry(rank, arg) for rank = 0..nranks-1 to completion. Returns 0 when the run happened
 * (whatever the ranks did: see res), -1 with a message in err for invalid options or when called
 * from inside a running twin. res must be freed with twin_result_free. */
int twin_run(int nranks, int (*entry)(int rank, void *arg), void *arg, const twin_options *opt, twin_result *res,
             char *err, size_t errlen);
void twin_result_free(twin_result *res);

/* The twin's launch_ranks (sim/launch) with a supervisor's settings: runs the job's ranks under opt
 * instead of the defaults and the TWINRUN_TWIN_DEVICE / TWINRUN_TWIN_SEED / TWINRUN_FLIGHT_* settings
 * of the environment (opt NULL: exactly launch_ranks), and leaves the run's result in *result, freeing
 * what it held (result NULL: freed). The scenario runner passes it to the engine (train_run_with). */
int twin_launch(int world, launch_entry entry, void *arg, const twin_options *opt, twin_result *result, char *err,
                size_t errlen);

/* ---- inside a rank (also valid in the implicit rank 0 outside twin_run) ------------------- */
bool twin_active(void);                 /* true inside twin_run */
int twin_rank_id(void);                 /* the calling rank */
int twin_world_size(void);              /* nranks of the run; 1 outside */
double twin_now(void);                  /* the calling rank's simulated clock, seconds */
uint64_t twin_rand(void);               /* the calling rank's seeded generator (splitmix64 of seed and rank) */
void twin_set_watchdog(double seconds); /* this rank's collective timeout from now on; 0 disables */

/* Fault injection: the calling rank stops forever (a stuck kernel, a dead host that keeps its
 * sockets open). Only valid inside twin_run. Never returns; the rank ends as TWIN_RANK_KILLED. */
_Noreturn void twin_hang_forever(void);

#endif
