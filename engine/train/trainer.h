/* The training entry of one rank: build the model, optimizer and schedule from the config, run
 * the iterations and log them like Megatron. */
#ifndef TR_TRAIN_TRAINER_H
#define TR_TRAIN_TRAINER_H

#include <stdio.h>

#include "train/batch_source.h"
#include "twinrun/config.h"

typedef struct tr_train_summary {
    int64_t iterations, consumed_samples;
    double first_loss, last_loss, last_grad_norm, last_valid_loss;
    size_t device_peak_bytes;
} tr_train_summary;

/* Runs training; iteration lines go to `log` (Megatron's format), JSON lines to
 * cfg->metrics_jsonl when set. `src` supplies the micro-batches (owned by the caller).
 * Returns an exit code (0, TR_EXIT_FATAL, TR_EXIT_USAGE or TR_EXIT_NAN) with err filled on failure. */
int tr_train(const tr_config *cfg, tr_batch_source *src, FILE *log, tr_train_summary *summary, char *err,
             size_t errlen);


/* Completes the config before training: merges --hf-load DIR/config.json (the model shape) and
 * runs the cross-flag checks for this world size. Returns 0 or -1 with err. */
int tr_train_prepare_config(tr_config *cfg, char *err, size_t errlen);

/* Opens the batch source the config names: --tokens-file, or Megatron's datasets
 * (--data-path / --mock-data). Returns 0 or -1 with err. */
int tr_batch_source_open(tr_batch_source *src, const tr_config *cfg, char *err, size_t errlen);

#endif
