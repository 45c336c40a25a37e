/* The twin's launch across processes (launch_multi.c; docs/multiprocess.md). */
#ifndef TWINRUN_SIM_LAUNCH_LAUNCH_MULTI_H
#define TWINRUN_SIM_LAUNCH_LAUNCH_MULTI_H

#include <stdbool.h>
#include <stddef.h>

struct mp_job;
struct twin_remote;

typedef struct launch_multi {
    bool active;
    struct mp_job *job;               /* the job's transport (sim/multiproc) */
    const struct twin_remote *remote; /* for twin_options.remote */
    int nprocs, proc;
    int nranks, chunk; /* this process's ranks: chunks of `chunk` dealt round-robin (launch_multi.c) */
    char ranks[96];    /* "ranks 256-511", for messages */
} launch_multi;

/* 1 when a launcher started several processes: the job's transport is up and m says which ranks run
 * here; 0 when every rank runs in this process; -1 with err. */
int launch_multi_start(int world, double watchdog_s, launch_multi *m, char *err, size_t errlen);
/* After the run; ok: the job ended well everywhere this process knows of. */
void launch_multi_stop(launch_multi *m, bool ok);

#endif
