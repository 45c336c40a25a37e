/* The data path of a training run, as Megatron's pretrain_gpt builds it from the flags:
 * --data-path (prefixes, or weight/prefix pairs: a BlendedDataset) or --mock-data, --split,
 * --seq-length, --seed, --train-samples|--train-iters, --global-batch-size, --micro-batch-size,
 * --eval-interval, --eval-iters, --data-cache-path, --vocab-size, --tokenizer-type,
 * --eod-mask-loss, --reset-position-ids, --no-mmap-bin-files. Then batches per data-parallel rank
 * with Megatron's pretraining sampler. */
#ifndef TWINRUN_ENGINE_DATA_BATCH_H
#define TWINRUN_ENGINE_DATA_BATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/gpt_dataset.h"

struct tr_config;
typedef struct tr_data tr_data; /* opaque: train/valid/test datasets + sampler positions */

/* Settings that Megatron takes from its tokenizer object, which twinrun does not load. */
typedef struct tr_data_options {
    /* The tokenizer's unique identifiers (a JSON object); part of the cache-file hash. NULL:
     * {"class": "twinrun.<tokenizer-type>", "tokenizer_model": ..., "vocab_size": ...}. Pass
     * Megatron's own to reuse a cache Megatron wrote. */
    const char *tokenizer_json;
    /* End-of-document id; -1: the tokenizer's eos when train/setup.c read one (cfg->tokenizer_eod),
     * vocab_size - 1 for NullTokenizer and mock data (Megatron's NullTokenizer), else unknown. */
    int64_t eod;
} tr_data_options;

/* Builds (or loads from cache) the datasets from cfg. dp_rank/dp_size select this rank's share.
 * Returns NULL with err. */
tr_data *tr_data_open(const struct tr_config *cfg, int dp_rank, int dp_size, char *err, size_t errlen);
tr_data *tr_data_open_ex(const struct tr_config *cfg, int dp_rank, int dp_size, const tr_data_options *opt, char *err,
                         size_t errlen);
/* Another data-parallel rank's reader over the same datasets: shares base's indices (read-only;
 * base must outlive the view) with its own sampler, so the twin's thousand ranks build and hold the
 * indices once. Closing a view leaves base intact. */
tr_data *tr_data_view(const tr_data *base, int dp_rank, int dp_size, char *err, size_t errlen);
void tr_data_close(tr_data *d);

/* Next micro-batch of the train split for this DP rank: tokens/labels [mbs, seq] int32,
 * loss_mask [mbs, seq] float, position_ids [mbs, seq] int32. Advances the position. */
int tr_data_next_train(tr_data *d, int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *position_ids, char *err,
                       size_t errlen);
int64_t tr_data_consumed_samples(const tr_data *d); /* global train samples consumed: resumable state */
int tr_data_set_consumed_samples(tr_data *d, int64_t consumed, char *err, size_t errlen);

/* Valid split: the next eval micro-batch. As in Megatron, one iterator runs through the valid
 * dataset across all evaluations (it is not restarted; each evaluation continues where the last
 * stopped); its position is consumed_valid_samples, which a checkpoint restores. */
int tr_data_next_valid(tr_data *d, int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *position_ids, char *err,
                       size_t errlen);
int64_t tr_data_consumed_valid_samples(const tr_data *d);
int tr_data_set_consumed_valid_samples(tr_data *d, int64_t consumed, char *err, size_t errlen);
/* Megatron's value when resuming a checkpoint that lacks it: (iteration // eval_interval) *
 * eval_iters * GBS. */
int64_t tr_data_valid_samples_at(const tr_data *d, int64_t iteration);

/* Called around the read of each sample of a batch (begin true before it, false after) with the split
 * and the sample's index: where the data-loader watchdog (engine/train/data_watch.c) arms and checks its
 * deadline. One hook per reader; a view starts with none. */
typedef void (*tr_data_read_hook)(void *arg, int split, int64_t idx, bool begin);
void tr_data_set_read_hook(tr_data *d, tr_data_read_hook fn, void *arg);
/* Where sample idx of a split is read from, for messages: "PREFIX.bin at byte B (document D, token T)",
 * or "mock data (no file)". The file alone (PREFIX.bin, "" for mock data) into file when not NULL. */
void tr_data_sample_where(const tr_data *d, int split, int64_t idx, char *out, size_t outlen, char *file,
                          size_t filelen);

/* Inspection (the `dataset samples` program, tests). split: TR_SPLIT_TRAIN/VALID/TEST. */
int tr_data_has_split(const tr_data *d, int split);
int64_t tr_data_split_len(const tr_data *d, int split);       /* samples available */
int64_t tr_data_split_requested(const tr_data *d, int split); /* samples asked for by the flags */
/* Sample idx of a split in Megatron's order: seq + 1 tokens (text: [seq + 1]). */
int tr_data_sample(const tr_data *d, int split, int64_t idx, int64_t *text, char *err, size_t errlen);
int tr_data_seq_length(const tr_data *d);
int64_t tr_data_eod(const tr_data *d);
/* One line per dataset of the split: what was built, cache file hash and status. */
void tr_data_describe(const tr_data *d, int split, char *out, size_t cap);
/* The GPTDataset of prefix k in a split (NULL if none). */
const tr_gpt_dataset *tr_data_gpt(const tr_data *d, int split, int k);

/* Megatron's _get_ltor_masks_and_position_ids for one sample: from text [seq + 1], tokens =
 * text[:-1], labels = text[1:], loss_mask 1 (0 where the input token is eod with eod_mask_loss),
 * positions 0.. (restarting after each eod with reset_position_ids). Token ids must lie in
 * [0, vocab_size) when vocab_size > 0. All outputs [seq]. */
int tr_data_fill_sample(const int64_t *text, int seq, int64_t vocab_size, int64_t eod, int eod_mask_loss,
                        int reset_position_ids, int32_t *tokens, int32_t *labels, float *loss_mask,
                        int32_t *position_ids, char *err, size_t errlen);

#endif
