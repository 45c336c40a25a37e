/* Where micro-batches come from: Megatron's datasets (engine/data), or a raw token file for tests. */
#ifndef TR_TRAIN_BATCH_SOURCE_H
#define TR_TRAIN_BATCH_SOURCE_H

#include <stdint.h>

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
} tr_batch_source;

/* --tokens-file FILE: raw little-endian int32 [iterations, global batch, seq + 1]; rows are the
 * global batch's samples in order and, as Megatron's sampler does, DP rank r's micro-batch i of an
 * iteration is rows [i*mbs*dp + r*mbs, +mbs); inputs are row[:-1], labels row[1:], every token counts. */
int tr_tokens_file_open(tr_batch_source *src, const tr_config *cfg, int dp_rank, int dp_size, char *err,
                        size_t errlen);

#endif
