/* Megatron's MegatronPretrainingSampler (megatron/training/datasets/data_samplers.py): walking
 * the dataset from consumed_samples, every mbs * dp consecutive indices form one chunk and data-
 * parallel rank r takes [r * mbs, (r + 1) * mbs) of it; an incomplete last chunk is dropped.
 * consumed_samples counts whole chunks of all ranks, so after an iteration of
 * GBS / (mbs * dp) micro-batches it has advanced by exactly GBS. */
#ifndef TWINRUN_ENGINE_DATA_SAMPLER_H
#define TWINRUN_ENGINE_DATA_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

typedef struct tr_sampler {
    int64_t total;    /* samples in the dataset */
    int64_t consumed; /* global samples handed out (all DP ranks) */
    int mbs, dp_rank, dp_size;
} tr_sampler;

int tr_sampler_init(tr_sampler *s, int64_t total, int64_t consumed, int mbs, int dp_rank, int dp_size, char *err,
                    size_t errlen);
/* Dataset indices of this rank's next micro-batch (idx: [mbs]); advances consumed by mbs * dp. */
int tr_sampler_next(tr_sampler *s, int64_t *idx, char *err, size_t errlen);

#endif
