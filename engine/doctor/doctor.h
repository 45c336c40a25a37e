/* The doctor: the 70B guide's pre-job checks (§1.3, FAQ Q1-Q3) as one program over the job's ranks, in
 * both builds and under every launcher. Every rank reports what it sees (build and commit, driver and
 * library versions, launcher settings, devices, directories, its clock); rank 0 compares them node by
 * node; then the collectives are tested in the guide's stages (one node, two nodes, a model-parallel
 * group, all ranks) with nccl-tests' bus bandwidth, and the slowest link is named. docs/doctor.md. */
#ifndef TWINRUN_ENGINE_DOCTOR_DOCTOR_H
#define TWINRUN_ENGINE_DOCTOR_DOCTOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "fault/fault.h"
#include "twinrun/launch.h"

#define DOCTOR_MAX_DIRS 16
#define DOCTOR_PATH_LEN 1024
#define DOCTOR_MAX_SIZES 8

/* A directory every node must see, the same files, writable where the job writes. */
typedef struct doctor_dir {
    char what[24]; /* "data", "tokenizer", "checkpoint", "log", "dir" */
    char path[DOCTOR_PATH_LEN];
    bool writable; /* the job writes there (checkpoints, logs) */
} doctor_dir;

typedef struct doctor_options {
    int gpus_per_node; /* ranks per node: node of rank r = r / gpus_per_node */
    int tp, pp, cp;    /* the model-parallel group of the third stage (Megatron's order: tp fastest) */
    int ndirs;
    doctor_dir dirs[DOCTOR_MAX_DIRS];
    char hostfile[DOCTOR_PATH_LEN]; /* "" = none */
    int nsizes;
    size_t sizes[DOCTOR_MAX_SIZES]; /* nccl-tests' size S of each test, bytes */
    int iters;                      /* timed iterations per size after one warm-up; 0 = 5 (1 on the twin) */
    double slow_ratio;              /* a group below this fraction of its stage's median bus bandwidth fails */
    double max_clock_skew_s;        /* a rank's clock this far from rank 0's fails */
    double timeout_s;               /* the collectives' watchdog */
    fault_plan *faults;             /* a rehearsal's faults (TWINRUN_FAULTS, a scenario); NULL = none */
    FILE *progress;                 /* a line per phase; NULL = quiet */
} doctor_options;

void doctor_options_default(doctor_options *o);

typedef enum doctor_status { DOCTOR_PASS = 0, DOCTOR_WARN, DOCTOR_FAIL, DOCTOR_SKIP } doctor_status;
const char *doctor_status_name(doctor_status s); /* "pass", "warn", "fail", "skip" */

/* One finding: a line of the text report, a JSON check and a JUnit test case. */
typedef struct doctor_check {
    char id[48];    /* "build", "versions", "env", "gpus", "health", "clock", "hostfile", "dir:data", "coll:two_nodes",
                       "links" */
    char title[96]; /* "build and commit" */
    doctor_status status;
    int node;                  /* the node it names; -1 none */
    int first_rank, last_rank; /* that node's ranks (or the group's); -1 none */
    char detail[1024];         /* what was found and, when it failed, the fix */
} doctor_check;

/* One collective at one size in one stage: its slowest group, against the stage's median group. */
typedef struct doctor_measure {
    char stage[24]; /* "one_node", "two_nodes", "mp_group", "all_ranks" */
    char op[16];    /* "all_reduce", "all_gather", "reduce_scatter", "sendrecv" */
    size_t bytes;   /* nccl-tests' S */
    int groups, group_size;
    double time_s;             /* the slowest group's time per operation (its slowest rank's) */
    double algbw, busbw;       /* of the slowest group, bytes/s */
    double median_busbw;       /* of the stage's groups */
    int slow_first, slow_last; /* the slowest group's ranks (a pair's: both nodes) */
    char slow_name[64];        /* "nodes 36-37", "node 3", "dp 5", "world" */
} doctor_measure;

typedef struct doctor_report {
    int world, nodes, gpus_per_node;
    char build[160]; /* rank 0's: "twinrun 0.3.0 commit 1a2b3c4d5e6f" */
    char backend[16];
    char device[64];
    char versions[128];
    char simulated[16]; /* "" on real devices; else the twin's spec */
    int nchecks;
    doctor_check *checks;
    int nmeasures;
    doctor_measure *measures;
    char slowest_link[256]; /* "nodes 36-37 (ranks 288-303): all_reduce busbw 12.3 GB/s, median 49.2 GB/s" */
    int slow_node;          /* the node every slow pair shares; -1 none */
    double clock_skew_s;    /* the largest |clock - rank 0's| after a barrier */
    int clock_skew_rank;
    bool passed;   /* no check failed */
    bool reported; /* this process ran rank 0: the report is whole */
    int exit_code; /* this process's status: 0 every check passed, 1 one failed (every rank hears the verdict) */
} doctor_report;

/* Runs the doctor over `world` ranks (the twin: all of them here; a real build: this process's rank) and
 * fills rep on the process of rank 0. Returns 0 when the checks ran (rep->passed says how they went), or
 * -1 with err when they could not (no device, a launcher problem). */
int doctor_run(const doctor_options *o, int world, doctor_report *rep, char *err, size_t errlen);
/* doctor_run with the ranks started by launch(launch_ctx, ...) (the scenario runner's twin). */
int doctor_run_with(const doctor_options *o, int world, doctor_report *rep, launch_fn launch, void *launch_ctx,
                    char *err, size_t errlen);
void doctor_report_free(doctor_report *r);

/* The first failed check of id (or of an id starting with it, "dir" for every "dir:..."), or NULL. */
const doctor_check *doctor_report_failed(const doctor_report *r, const char *id);

void doctor_report_text(FILE *f, const doctor_report *r);
int doctor_report_json(FILE *f, const doctor_report *r);
int doctor_report_junit(FILE *f, const doctor_report *r);

#endif
