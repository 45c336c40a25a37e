/* The planner (`scenario plan FILE`, docs/prediction.md#the-planner): the 70B guide's "size the batch
 * from memory, validate small, then scale" as a search. For a scenario's job it tries micro-batch sizes
 * and activation recomputation settings (and, asked, the TP x PP x CP x DP factorisations of the world),
 * each a shape-only predict run of the engine on the twin in this one process, and picks the fastest
 * that fits the device.
 *
 * Fast because the 1F1B schedule is linear in the micro-batches: from the pipeline's depth on, each
 * micro-batch more adds the same period (the twin is deterministic: exactly the same), and the peak no
 * longer grows (1F1B keeps at most PP - stage micro-batches in flight). So a candidate whose job has M
 * micro-batches per DP rank runs at PP and PP + 1 of them, and its step at M is extrapolated; a job of at
 * most PP + 1 runs as it is. A candidate that does not fit needs only the first run. And the search is
 * pruned by monotony: recomputation only adds time (at a micro-batch where a lighter setting fits, the
 * heavier ones are not run) and a larger micro-batch only adds memory (once a setting does not fit, it is
 * not tried at larger ones). */
#ifndef TWINRUN_RUNNER_RUNNER_PLAN_H
#define TWINRUN_RUNNER_RUNNER_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "runner/scenario.h"

#define SC_PLAN_MAX_MICRO 16

typedef enum sc_plan_recompute { SC_RC_NONE, SC_RC_SELECTIVE, SC_RC_FULL, SC_RC_COUNT } sc_plan_recompute;

typedef struct sc_plan_options {
    const char *work_dir;         /* the candidates' job log (plan.log) goes here */
    const char *device;           /* a device spec instead of the scenario's cluster.device; NULL: its own */
    bool layouts;                 /* also try the factorisations of the world (tp within a node) */
    bool all;                     /* run every candidate: no pruning */
    int micro[SC_PLAN_MAX_MICRO]; /* micro-batch sizes to try; nmicro 0: 1, 2, 4, ... up to max_micro */
    int nmicro;
    int max_micro;      /* default 8 */
    unsigned recompute; /* bit (1 << sc_plan_recompute) per setting tried; 0: all three */
    double headroom;    /* fits = peak <= (1 - headroom) x capacity; default 0.05 */
    FILE *progress;     /* one line per run; NULL: none */
} sc_plan_options;

typedef enum sc_plan_status {
    SC_PLAN_FITS,
    SC_PLAN_NO_FIT,
    SC_PLAN_SKIPPED, /* pruned: note says why */
    SC_PLAN_INVALID, /* the engine refused the flags for this layout: note says why */
    SC_PLAN_FAILED,  /* the run itself failed: note says how */
} sc_plan_status;

typedef struct sc_plan_cand {
    int tp, pp, cp, dp, micro;
    sc_plan_recompute recompute;
    sc_plan_status status;
    char note[256];
    int64_t micro_batches; /* per DP rank in the job: global batch / (micro x dp) */
    int64_t run_micro[2];  /* micro-batches per DP rank the runs simulated (0: no run) */
    size_t peak;           /* bytes, the largest stage's */
    int peak_stage;
    double step_time; /* seconds, at the job's micro-batches; 0 when not known */
    double tokens_per_s, mfu;
} sc_plan_cand;

typedef struct sc_plan_result {
    char scenario[SC_PATH_LEN];
    char device[32];
    size_t capacity;
    double headroom;
    int world;
    int64_t global_batch;
    int seq_length;
    int ncand;
    sc_plan_cand *cand; /* in the order tried */
    int best;           /* index of the fastest that fits; -1: none fits */
    int runs;           /* shape-only runs made */
    double wall_seconds;
} sc_plan_result;

void plan_options_default(sc_plan_options *o);
/* Plans s. 0 with r filled (free with plan_free), or -1 with err when the job cannot be planned (its
 * flags do not parse, no candidate left, no work folder). */
int plan_search(const scenario *s, const sc_plan_options *o, sc_plan_result *r, char *err, size_t errlen);
void plan_free(sc_plan_result *r);

/* "none", "selective", "full". */
const char *plan_recompute_name(sc_plan_recompute rc);
/* The table of candidates, the choice and what recomputation buys. */
void plan_print(FILE *f, const sc_plan_result *r);
/* {"scenario", "device", "capacity_bytes", "headroom", "world", "global_batch", "seq_length", "runs",
 *  "best", "candidates": [{"tp", "pp", "cp", "dp", "micro_batch", "recompute", "status", "peak_bytes",
 *  "step_time_s", "tokens_per_s", "mfu", "note"}]}: 0, or -1 when the file cannot be written. */
int plan_write_json(const char *path, const sc_plan_result *r);

/* `scenario plan FILE [options]` (argv after "plan"): the exit status (0: one fits, 1: none fits, 2: bad
 * input or the job cannot be planned). */
int plan_main(int argc, char **argv);

#endif
