/* The three index arrays of Megatron's GPTDataset (gpt_dataset.py + helpers.cpp), built from the
 * document lengths alone. With S = sequence length and X = 1 (add_extra_token_to_sequence):
 *   epochs E: smallest >= 1 with E * tokens_per_epoch >= num_samples * S + X (1 if num_samples < 0)
 *   document_index int32 [E * ndocs]: the split's document ids tiled E times, shuffled
 *     (or E-1 epochs shuffled together + the last epoch shuffled alone: "separate final epoch")
 *   sample_index [N + 1, 2] (doc_index position, token offset), N = (E * tpe - X) / S;
 *     int32 unless the document index has more than 2^31-1 entries
 *   shuffle_index [N]: permutation of [0, N) (or of [0, n_sans) then [n_sans, N)); uint32, int64
 *     from 2^32 - 2 samples on.
 * One RandomState(seed) shuffles, in this order, the document index part(s), then the shuffle
 * index part(s). */
#ifndef TWINRUN_ENGINE_DATA_GPT_INDEX_H
#define TWINRUN_ENGINE_DATA_GPT_INDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tr_gpt_index_params {
    const int32_t *lengths; /* [n_lengths] every document's length in the low-level dataset */
    int64_t n_lengths;
    int64_t beg, end;    /* the split's documents [beg, end) */
    int64_t num_samples; /* requested; -1 = None (one epoch) */
    int32_t seq_length;
    uint32_t seed;
    int add_extra_token; /* 1 (Megatron's default) or 0 */
} tr_gpt_index_params;

typedef struct tr_gpt_index {
    int64_t tokens_per_epoch;
    int32_t epochs;
    bool separate_final_epoch;
    int64_t num_samples_sans_final; /* when separate */
    int64_t n_doc;                  /* entries of doc_index */
    int32_t *doc_index;             /* [n_doc] */
    int64_t n_samples;              /* N */
    bool sample64;
    void *sample_index; /* [N + 1, 2] int32 or int64 (sample64) */
    bool shuffle64;
    void *shuffle_index; /* [N] uint32 or int64 (shuffle64) */
} tr_gpt_index;

/* Epoch count, separate-final-epoch decision and sample count, without building anything. */
int tr_gpt_index_plan(const tr_gpt_index_params *p, tr_gpt_index *ix, char *err, size_t errlen);
int tr_gpt_index_build(const tr_gpt_index_params *p, tr_gpt_index *ix, char *err, size_t errlen);
void tr_gpt_index_free(tr_gpt_index *ix);

/* Entry k of the sample index / shuffle index, whatever their width. */
static inline int64_t tr_gpt_sample_doc(const tr_gpt_index *ix, int64_t k) {
    return ix->sample64 ? ((const int64_t *)ix->sample_index)[2 * k] : ((const int32_t *)ix->sample_index)[2 * k];
}
static inline int64_t tr_gpt_sample_off(const tr_gpt_index *ix, int64_t k) {
    return ix->sample64 ? ((const int64_t *)ix->sample_index)[2 * k + 1]
                        : ((const int32_t *)ix->sample_index)[2 * k + 1];
}
static inline int64_t tr_gpt_shuffle(const tr_gpt_index *ix, int64_t i) {
    return ix->shuffle64 ? ((const int64_t *)ix->shuffle_index)[i] : ((const uint32_t *)ix->shuffle_index)[i];
}

/* Checks arrays loaded from a cache against the plan in ix (epochs, counts already set by
 * tr_gpt_index_plan): dtypes/shapes were checked by the caller; this checks values: document ids
 * inside the split, each epoch a full copy of the split, sample boundaries that span exactly
 * S + X tokens, and a shuffle that is a permutation of the right ranges. */
int tr_gpt_index_check(const tr_gpt_index_params *p, const tr_gpt_index *ix, char *err, size_t errlen);

#endif
