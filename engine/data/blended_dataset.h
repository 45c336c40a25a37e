/* Megatron's BlendedDataset: samples drawn from several GPTDatasets in proportion to weights.
 * For each sample i, the dataset with the largest error w_d * max(i, 1) - count_d is chosen
 * (ties: the lowest d); no randomness (helpers.cpp build_blending_indices). Sizes per dataset:
 * ceil(ceil(size * w_d) * 1.005) samples are built ("mid_level_dataset_surplus"), and the blend
 * itself has sum_d ceil(size * w_d) samples. */
#ifndef TWINRUN_ENGINE_DATA_BLENDED_DATASET_H
#define TWINRUN_ENGINE_DATA_BLENDED_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "data/gpt_dataset.h"

#define TR_BLEND_SURPLUS 0.005

typedef struct tr_blended_dataset {
    int n;                     /* datasets */
    tr_gpt_dataset *const *ds; /* [n] not owned */
    double *weights;           /* [n] normalised */
    int64_t size;
    int16_t *dataset_index;        /* [size] */
    int64_t *dataset_sample_index; /* [size] */
    char *description;
    char hash[33];
    tr_cache_status cache;
    char cache_note[512];
} tr_blended_dataset;

/* ceil(ceil(target * w) * (1 + surplus)) in Python's float arithmetic. */
int64_t tr_blend_per_dataset(int64_t target, double weight, double surplus);
/* numpy's normalize: w / sum(w) (the sum accumulated pairwise as numpy does for small n). */
int tr_blend_normalize(const double *w, int n, double *out, char *err, size_t errlen);
/* The blending indices alone (out arrays: [size]). */
void tr_blend_indices(const double *weights, int n, int64_t size, int16_t *dataset_index,
                      int64_t *dataset_sample_index);

/* weights: normalised, [n]; ds[k] already open. cache_dir: NULL or the --data-cache-path. */
int tr_blended_open(tr_blended_dataset *b, tr_gpt_dataset *const *ds, const double *weights, int n, int64_t size,
                    const tr_gpt_config *cfg, int split, char *err, size_t errlen);
void tr_blended_close(tr_blended_dataset *b);
int tr_blended_get(const tr_blended_dataset *b, int64_t idx, int64_t *out, char *err, size_t errlen);

#endif
