/* Megatron's GPTDataset (and MockGPTDataset) for one split of one low-level dataset: the index
 * arrays (gpt_index.h), their cache under Megatron's names, and sample lookup. */
#ifndef TWINRUN_ENGINE_DATA_GPT_DATASET_H
#define TWINRUN_ENGINE_DATA_GPT_DATASET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "data/gpt_index.h"
#include "data/source.h"
#include "data/split.h"

/* What identifies the datasets of a run (GPTDatasetConfig's key attributes) and where to cache. */
typedef struct tr_gpt_config {
    uint32_t seed;
    int32_t seq_length;
    const char *split_text; /* "99,1,0" as given (written into the description) */
    const tr_split *split;
    const char *tokenizer_json; /* the tokenizer's unique identifiers, a JSON object */
    const char *cache_dir;      /* NULL: no cache */
} tr_gpt_config;

typedef enum tr_cache_status {
    TR_CACHE_OFF = 0, /* no cache directory: built in memory */
    TR_CACHE_HIT,     /* loaded and validated */
    TR_CACHE_BUILT,   /* built and written */
    TR_CACHE_REBUILT, /* a cached file was corrupt or stale: rebuilt and rewritten (note says why) */
} tr_cache_status;

typedef struct tr_gpt_dataset {
    tr_doc_source src;
    int split;
    int64_t num_samples; /* requested, -1 = None */
    int32_t seq_length;
    tr_gpt_index ix;
    char *description; /* the JSON text whose MD5 names the cache files */
    char hash[33];
    tr_cache_status cache;
    char cache_note[512];
} tr_gpt_dataset;

/* Writes the description (json.dumps(unique_identifiers, indent=4)) of a GPTDataset; returns a
 * malloc'd string or NULL. Also used inside BlendedDataset descriptions. */
char *tr_gpt_description(const tr_doc_source *src, const tr_gpt_config *cfg, int split, int64_t num_samples);
struct tr_pyjson;
int tr_gpt_identifiers(struct tr_pyjson *j, const tr_doc_source *src, const tr_gpt_config *cfg, int split,
                       int64_t num_samples);

/* Builds or loads the indices for the split's documents [beg, end). */
int tr_gpt_dataset_open(tr_gpt_dataset *ds, const tr_doc_source *src, const tr_gpt_config *cfg, int split, int64_t beg,
                        int64_t end, int64_t num_samples, char *err, size_t errlen);
void tr_gpt_dataset_close(tr_gpt_dataset *ds);
static inline int64_t tr_gpt_dataset_len(const tr_gpt_dataset *ds) { return ds->ix.n_samples; }
/* Sample idx: seq_length + 1 tokens (out: [seq_length + 1]). */
int tr_gpt_dataset_get(const tr_gpt_dataset *ds, int64_t idx, int64_t *out, char *err, size_t errlen);

/* Where token `pos` (0..seq_length) of sample idx comes from: its document and the token's offset in
 * it. 0, or -1 when idx or pos is outside the dataset. For messages that must name the bad data. */
int tr_gpt_dataset_locate(const tr_gpt_dataset *ds, int64_t idx, int64_t pos, int64_t *doc, int64_t *offset);

/* mkdir -p. */
int tr_data_mkdirs(const char *path, char *err, size_t errlen);

#endif
