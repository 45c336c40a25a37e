/* The training entry: every rank builds its grid position, communicators, model shard, optimizer
 * and data share from the config, runs the iterations, and the last rank logs them like Megatron. */
#ifndef TR_TRAIN_TRAINER_H
#define TR_TRAIN_TRAINER_H

#include <stdio.h>

#include "data/batch.h"
#include "train/batch_source.h"
#include "twinrun/config.h"

typedef struct tr_train_summary {
    int64_t iterations, consumed_samples;
    double first_loss, last_loss, last_grad_norm, last_valid_loss;
    size_t device_peak_bytes; /* the largest of the ranks' peaks */
    int world;
} tr_train_summary;

/* Runs training over `world` ranks (the twin: all of them in this process; a real build: this
 * process's rank). Iteration lines go to `log` from the last rank (Megatron's habit), JSON lines to
 * cfg->metrics_jsonl. Returns an exit code (0, TR_EXIT_FATAL, TR_EXIT_USAGE or TR_EXIT_NAN) with err
 * filled on failure. */
int tr_train(const tr_config *cfg, int world, FILE *log, tr_train_summary *summary, char *err, size_t errlen);

/* Completes the config before training: merges --hf-load DIR/config.json (the model shape) and
 * runs the cross-flag checks for this world size. Returns 0 or -1 with err. */
int tr_train_prepare_config(tr_config *cfg, int world, char *err, size_t errlen);

/* Builds Megatron's datasets (--data-path / --mock-data) once for every rank of this process;
 * *out stays NULL when the config names a --tokens-file instead. Returns 0 or -1 with err. */
int tr_job_data_open(tr_data **out, const tr_config *cfg, char *err, size_t errlen);

/* Opens one DP rank's batch source: a reader over the shared datasets, or the --tokens-file.
 * Returns 0 or -1 with err. */
int tr_batch_source_open(tr_batch_source *src, const tr_config *cfg, tr_data *shared, int dp_rank, int dp_size,
                         char *err, size_t errlen);

#endif
