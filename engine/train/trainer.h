/* The training entry: every rank builds its grid position, communicators, model shard, optimizer
 * and data share from the config, runs the iterations, and the last rank logs them like Megatron. */
#ifndef TWINRUN_ENGINE_TRAIN_TRAINER_H
#define TWINRUN_ENGINE_TRAIN_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "twinrun/config.h"
#include "twinrun/launch.h"

/* --log-straggler: a rank whose busy time per iteration exceeds the median by this factor is listed
 * as a straggler (train/straggler.c); the summary's straggler_ratio is measured against it. */
#define TR_STRAGGLER_RATIO 1.5

/* What the engine diagnosed when the job stopped (the first of the ranks to say). */
typedef struct tr_diagnosis {
    char kind[32]; /* "nan", "fp8_spike", "preflight", "ckpt_write", "oom", "data", "fatal"; "" = none */
    char detail
        [32]; /* nan: "activation" "loss" "gradient"; fp8_spike: "fc1.input" ...; preflight: "build version" ... */
    int rank; /* the culprit, -1 unknown */
    int layer, micro; /* nan: where */
    int64_t iteration;
    double time; /* the detecting rank's clock (simulated in the twin) */
} tr_diagnosis;

typedef struct tr_train_summary {
    int64_t iterations, consumed_samples;
    int64_t start_iteration; /* resumed from (0 = from scratch) */
    double first_loss, last_loss, last_grad_norm, last_valid_loss;
    size_t device_peak_bytes; /* the largest of the ranks' peaks */
    size_t device_capacity;   /* a rank's device capacity (0 = unlimited) */
    int world;
    bool reported; /* this process ran the reporting (last) rank: the fields above are its */
    tr_diagnosis diag;
    int straggler_rank;            /* --log-straggler: the slowest rank seen, -1 none */
    double straggler_ratio;        /* its busy time over the median */
    double straggler_time;         /* the reporter's clock when a rank was first listed as a straggler; < 0 never */
    double first_iteration_wall;   /* CLOCK_REALTIME seconds when the reporter began its first iteration (0: none) */
    int64_t signal_exit_iteration; /* --exit-signal-handler: the iteration the job stopped at on SIGTERM; 0 none */
    double signal_exit_time;       /* the reporter's clock then */
    /* Optional, owned by the caller (kept across train_run's reset): losses[it] for each iteration
     * run ([train_iters + 1]); digests[rank] of each rank's final fp32 master weights ([world]). */
    double *iteration_loss;
    uint64_t *weight_digest;
    /* Optional, owned by the caller: with --predict the report (train/predict_report.h) is gathered here
     * instead of in train_run's own, and left for the caller, who frees it with train_predict_free. */
    struct tr_predict *predict;
} tr_train_summary;

/* Runs training over `world` ranks (the twin: all of them in this process; a real build: this
 * process's rank). Iteration lines go to `log` from the last rank (Megatron's habit), JSON lines to
 * cfg->metrics_jsonl. The caller initialises *summary (zeroes, or its two optional arrays): train_run
 * resets every other field. Returns an exit code (0, TR_EXIT_FATAL, TR_EXIT_USAGE or TR_EXIT_NAN) with err
 * filled on failure. */
int train_run(const tr_config *cfg, int world, FILE *log, tr_train_summary *summary, char *err, size_t errlen);
/* train_run with the ranks started by launch(launch_ctx, ...) instead of launch_ranks (NULL: launch_ranks). */
int train_run_with(const tr_config *cfg, int world, FILE *log, tr_train_summary *summary, launch_fn launch,
                   void *launch_ctx, char *err, size_t errlen);

/* Completes the config before training: merges --hf-load DIR/config.json (the model shape) and
 * runs the cross-flag checks for this world size. Returns 0 or -1 with err. */
int train_prepare_config(tr_config *cfg, int world, char *err, size_t errlen);
/* The iteration a run of cfg starts training after: the checkpoint --load would read (0 without
 * --load, or when it holds nothing to load: from scratch). 0 with *it, or -1 when the load would fail
 * before training (a campaign's supervisor asks before a restart: runner_resume.c). */
int train_resume_iteration(const tr_config *cfg, int64_t *it);

#endif
