/* Where micro-batches come from: Megatron's datasets (engine/data), or a raw token file for tests. */
#ifndef TWINRUN_ENGINE_TRAIN_BATCH_SOURCE_H
#define TWINRUN_ENGINE_TRAIN_BATCH_SOURCE_H

#include <stdint.h>

#include "data/batch.h"
#include "train/step.h"
#include "twinrun/config.h"

typedef struct tr_batch_source {
    tr_batch_fn next;       /* fills micro-batch `micro` of the current iteration */
    tr_batch_fn next_valid; /* the validation split's next micro-batch; NULL when there is none */
    void *ctx;
    void (*close)(void *ctx);
    /* Resume: the global train and valid samples consumed so far (a checkpoint's data position). */
    int (*set_position)(void *ctx, int64_t train, int64_t valid, char *err, size_t errlen);
    int64_t (*valid_consumed)(void *ctx);
    tr_data *data; /* the reader behind next (the data-loader watchdog's hook); NULL for --tokens-file */
} tr_batch_source;

/* --tokens-file FILE: raw little-endian int32 [iterations, global batch, seq + 1]; rows are the
 * global batch's samples in order and, as Megatron's sampler does, DP rank r's micro-batch i of an
 * iteration is rows [i*mbs*dp + r*mbs, +mbs); inputs are row[:-1], labels row[1:], every token counts. */
int train_tokens_file_open(tr_batch_source *src, const tr_config *cfg, int dp_rank, int dp_size, char *err,
                           size_t errlen);

/* Builds Megatron's datasets (--data-path / --mock-data) once for every rank of this process;
 * *out stays NULL when the config names a --tokens-file instead. Returns 0 or -1 with err. */
int train_job_data_open(tr_data **out, const tr_config *cfg, char *err, size_t errlen);

/* Opens one DP rank's batch source: a reader over the shared datasets, or the --tokens-file.
 * Returns 0 or -1 with err. */
int train_batch_source_open(tr_batch_source *src, const tr_config *cfg, tr_data *shared, int dp_rank, int dp_size,
                            char *err, size_t errlen);

#endif
