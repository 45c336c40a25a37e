/* The launch seam: which of the job's ranks run in this process.
 *
 * The twin (sim/launch) runs every rank of the job in this process as coroutines of its
 * deterministic scheduler; the real build (cuda/launch_cuda.c) runs the one rank this process
 * is, as the launcher (torchrun, mpirun) numbered it. The entry is the same engine code either way. */
#ifndef TWINRUN_BASE_LAUNCH_H
#define TWINRUN_BASE_LAUNCH_H

#include <stddef.h>

typedef int (*launch_entry)(int rank, int world, void *arg);

/* A launcher an application passes to the engine's entry points in place of launch_ranks (the
 * scenario runner runs the twin with its own options and keeps each run's result): the same contract
 * as launch_ranks, with the application's own context first. */
typedef int (*launch_fn)(void *ctx, int world, launch_entry entry, void *arg, char *err, size_t errlen);

/* Runs this process's ranks of a job of `world` ranks and returns the process's exit code (the
 * largest of its ranks' codes). -1 with err when the launch itself is impossible (e.g. the
 * launcher's world size disagrees with `world`). */
int launch_ranks(int world, launch_entry entry, void *arg, char *err, size_t errlen);

/* World size the launcher gives this job: WORLD_SIZE (torchrun style) or OMPI_COMM_WORLD_SIZE
 * (mpirun), chosen as base/launch/launch_vars.h says, times TWINRUN_RANKS_PER_PROCESS when a
 * launcher numbered the processes (launch_process_layout), else 1. -1 with err when a value is
 * malformed or inconsistent (a rank outside the world, ...). */
int launch_world_size(char *err, size_t errlen);

/* Processes a launcher numbered (mpirun, torchrun-style RANK/LOCAL_RANK, or RANK with WORLD_SIZE):
 * 1 with their count, this process's index and the ranks each hosts (TWINRUN_RANKS_PER_PROCESS,
 * default 1; the twin hosts a block of in-process ranks per process, docs/multiprocess.md; the world
 * is nprocs x ranks_per_process). 0 when this process runs the whole job (WORLD_SIZE alone, or no
 * launcher). -1 with err when a value is malformed. */
int launch_process_layout(int *nprocs, int *proc, int *ranks_per_process, char *err, size_t errlen);

#endif
