/* The insides of tr_data, shared by builder.c (construction) and batch.c (batches). */
#ifndef TWINRUN_ENGINE_DATA_DATA_INTERNAL_H
#define TWINRUN_ENGINE_DATA_DATA_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "data/batch.h"
#include "data/blended_dataset.h"
#include "data/gpt_dataset.h"
#include "data/indexed_dataset.h"
#include "data/mock_dataset.h"
#include "data/sampler.h"
#include "data/split.h"
#include "twinrun/config.h"

typedef struct tr_data_split {
    bool present;
    int64_t requested;     /* samples the flags ask for */
    int n;                 /* GPTDatasets in this split (one per prefix) */
    tr_gpt_dataset *gpt;   /* [n] */
    tr_gpt_dataset **gptp; /* [n] pointers into gpt, for the blend */
    bool blended;
    tr_blended_dataset blend;
} tr_data_split;

struct tr_data {
    int seq, mbs, gbs, eval_iters, eval_interval;
    int64_t vocab_size, eod;
    bool eod_mask_loss, reset_position_ids;
    char split_text[64];
    tr_split split;
    char *tokenizer_json;
    int n_prefix;
    char (*prefix)[TR_PATH_LEN];         /* [n_prefix] */
    char (*cache_dir)[TR_PATH_LEN + 64]; /* [n_prefix] per-prefix GPTDataset cache ("" = none) */
    tr_idx_dataset **idx;                /* [n_prefix] (NULL for mock) */
    tr_mock_dataset *mock;
    tr_doc_source *src; /* [n_prefix] */
    tr_data_split sp[TR_NSPLITS];
    tr_sampler train, valid;
    bool has_train_sampler, has_valid_sampler;
    int64_t *text;               /* [mbs, seq + 1] scratch */
    int64_t *idxbuf;             /* [mbs] */
    bool is_view;                /* shares the datasets of another tr_data (tr_data_view) */
    tr_data_read_hook read_hook; /* tr_data_set_read_hook; NULL: none */
    void *read_hook_arg;
};

/* The GPTDataset holding sample idx of split s (through the blend, if any) and its index there;
 * NULL when idx is outside the split. For messages and tools that trace a sample to its file. */
const tr_gpt_dataset *tr_data_sample_source(const tr_data *d, int s, int64_t idx, int64_t *inner);

#endif
