/* tr_data_open: from the flags to Megatron's datasets, as BlendedMegatronDatasetBuilder does
 * (megatron/core/datasets/blended_megatron_dataset_builder.py, pretrain_gpt.py, training.py). */
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/data_internal.h"
#include "twinrun/err.h"

/* Python's float(): optional spaces, a strtod-parsable number, optional spaces. */
static int py_float(const char *s, double *v) {
    char *end;
    while (isspace((unsigned char)*s)) s++;
    if (!*s) return -1;
    *v = strtod(s, &end);
    if (end == s) return -1;
    while (isspace((unsigned char)*end)) end++;
    return *end ? -1 : 0;
}

/* Train/valid/test sample counts (training.py get_train_valid_test_num_samples). */
static int sample_counts(const tr_config *c, int64_t out[TR_NSPLITS], char *err, size_t errlen) {
    if (c->global_batch_size < 1) return tr_errf(err, errlen, "--global-batch-size must be set (>= 1)");
    int64_t gbs = c->global_batch_size, iters;
    if (c->train_samples > 0) {
        out[0] = c->train_samples;
        iters = c->train_samples / gbs; /* Megatron derives train_iters this way */
    } else if (c->train_iters > 0) {
        out[0] = c->train_iters * gbs;
        iters = c->train_iters;
    } else {
        return tr_errf(err, errlen, "set --train-samples or --train-iters: the train dataset is sized from them");
    }
    if (c->eval_iters < 0) return tr_errf(err, errlen, "--eval-iters %d must be >= 0", c->eval_iters);
    if (c->eval_interval < 1) return tr_errf(err, errlen, "--eval-interval %d must be >= 1", c->eval_interval);
    out[1] = (iters / c->eval_interval + 1) * (int64_t)c->eval_iters * gbs;
    out[2] = (int64_t)c->eval_iters * gbs;
    return 0;
}

/* --data-path words: an odd count, or any word that is not a number in a weight position, means
 * plain prefixes (utils.py get_blend_from_list). */
static int parse_blend(const tr_config *c, char (**prefix)[TR_PATH_LEN], double **weights, int *n, char *err,
                       size_t errlen) {
    int cap = 0, nw = 0;
    char **words = NULL;
    for (int i = 0; i < c->n_data_path; i++) {
        char tmp[TR_PATH_LEN];
        snprintf(tmp, sizeof tmp, "%s", c->data_path[i]);
        for (char *tok = strtok(tmp, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
            if (nw == cap) {
                cap = cap ? 2 * cap : 16;
                char **nwds = realloc(words, (size_t)cap * sizeof *words);
                if (!nwds) goto oom;
                words = nwds;
            }
            if (!(words[nw++] = strdup(tok))) goto oom;
        }
    }
    if (nw == 0) {
        free(words);
        return tr_errf(err, errlen, "--data-path is empty: give one or more dataset prefixes (or --mock-data)");
    }
    int paired = nw % 2 == 0;
    double *w = malloc(sizeof *w * (size_t)(nw / 2 + 1));
    if (!w) goto oom;
    for (int i = 0; paired && i < nw; i += 2)
        if (py_float(words[i], &w[i / 2])) paired = 0;
    int np = paired ? nw / 2 : nw;
    *prefix = calloc((size_t)np, sizeof **prefix);
    if (!*prefix) {
        free(w);
        goto oom;
    }
    for (int k = 0; k < np; k++) {
        const char *pfx = paired ? words[2 * k + 1] : words[k];
        double dummy;
        if (py_float(pfx, &dummy) == 0) {
            tr_errf(err, errlen,
                    "--data-path: '%s' is a number where a dataset prefix belongs; weights and prefixes come in "
                    "pairs (--data-path 0.3 /data/a_text_document 0.7 /data/b_text_document)",
                    pfx);
            free(w);
            free(*prefix);
            *prefix = NULL;
            for (int i = 0; i < nw; i++) free(words[i]);
            free(words);
            return -1;
        }
        snprintf((*prefix)[k], TR_PATH_LEN, "%s", pfx);
    }
    for (int i = 0; i < nw; i++) free(words[i]);
    free(words);
    *n = np;
    if (paired) *weights = w;
    else {
        free(w);
        *weights = NULL;
    }
    return 0;
oom:
    for (int i = 0; i < nw; i++) free(words[i]);
    free(words);
    return tr_errf(err, errlen, "out of memory parsing --data-path");
}

/* The tokenizer's eos when one was read (train/setup.c); NullTokenizer's and mock data's vocab - 1. */
static int64_t default_eod(const tr_config *c) {
    const char *t = c->tokenizer_type;
    if (c->tokenizer_eod >= 0) return c->tokenizer_eod;
    if (c->mock_data || !t[0] || !strcmp(t, "NullTokenizer")) return c->vocab_size > 0 ? c->vocab_size - 1 : -1;
    return -1;
}

static char *default_tokenizer_json(const tr_config *c) {
    char *s = malloc(3 * TR_PATH_LEN);
    if (!s) return NULL;
    const char *type = c->tokenizer_type[0] ? c->tokenizer_type : "NullTokenizer";
    /* JSON-escape the path minimally (quotes and backslashes) */
    char model[2 * TR_PATH_LEN + 1];
    size_t m = 0;
    for (const char *p = c->tokenizer_model; *p && m + 2 < sizeof model; p++) {
        if (*p == '"' || *p == '\\') model[m++] = '\\';
        model[m++] = *p;
    }
    model[m] = '\0';
    snprintf(s, 3 * TR_PATH_LEN, "{\"class\": \"twinrun.%s\", \"tokenizer_model\": \"%s\", \"vocab_size\": %d}", type,
             model, c->vocab_size);
    return s;
}

/* One low-level dataset source over an IndexedDataset. */
static int idx_read(const void *ctx, int64_t doc, int64_t off, int64_t count, int64_t *out, char *err, size_t errlen) {
    return tr_idx_read(ctx, doc, off, count, out, err, errlen);
}

static int build_split(tr_data *d, const tr_config *c, int s, const double *w1, int64_t size, char *err,
                       size_t errlen) {
    tr_data_split *sp = &d->sp[s];
    sp->present = true;
    sp->requested = size;
    sp->n = d->n_prefix;
    sp->gpt = calloc((size_t)sp->n, sizeof *sp->gpt);
    sp->gptp = calloc((size_t)sp->n, sizeof *sp->gptp);
    if (!sp->gpt || !sp->gptp) return tr_errf(err, errlen, "out of memory");
    int single = d->n_prefix == 1 && !w1;
    for (int k = 0; k < sp->n; k++) {
        int64_t want;
        if (single) want = size;
        else if (w1) want = tr_blend_per_dataset(size, w1[k], TR_BLEND_SURPLUS);
        else want = -1; /* no weights: each dataset one epoch, blended by its length */
        tr_gpt_config g = {(uint32_t)c->seed, c->seq_length,     d->split_text,
                           &d->split,         d->tokenizer_json, d->cache_dir[k][0] ? d->cache_dir[k] : NULL};
        int64_t beg, end;
        tr_split_range(&d->split, s, d->src[k].n, &beg, &end);
        if (tr_gpt_dataset_open(&sp->gpt[k], &d->src[k], &g, s, beg, end, want, err, errlen)) {
            sp->n = k; /* only the opened ones get closed */
            return -1;
        }
        sp->gptp[k] = &sp->gpt[k];
    }
    if (single) return 0;
    sp->blended = true;
    double *w2 = malloc(sizeof *w2 * (size_t)sp->n), *raw = malloc(sizeof *raw * (size_t)sp->n);
    if (!w2 || !raw) {
        free(w2), free(raw);
        return tr_errf(err, errlen, "out of memory");
    }
    int64_t bsize = 0;
    if (w1) {
        /* the blend's size is the sum of the per-dataset targets; its weights are normalised again */
        for (int k = 0; k < sp->n; k++) bsize += tr_blend_per_dataset(size, w1[k], 0.0), raw[k] = w1[k];
    } else {
        int64_t total = 0;
        for (int k = 0; k < sp->n; k++)
            raw[k] = (double)tr_gpt_dataset_len(&sp->gpt[k]), total += tr_gpt_dataset_len(&sp->gpt[k]);
        bsize = size < total ? size : total;
    }
    int rc = tr_blend_normalize(raw, sp->n, w2, err, errlen);
    tr_gpt_config g = {(uint32_t)c->seed, c->seq_length,     d->split_text,
                       &d->split,         d->tokenizer_json, c->data_cache_path[0] ? c->data_cache_path : NULL};
    if (!rc) rc = tr_blended_open(&sp->blend, sp->gptp, w2, sp->n, bsize, &g, s, err, errlen);
    if (rc) sp->blended = false;
    free(w2), free(raw);
    return rc;
}

/* One DP rank's reading state over built datasets: scratch and Megatron's samplers. */
static int init_reader(tr_data *d, int dp_rank, int dp_size, char *err, size_t errlen) {
    d->text = malloc(sizeof *d->text * (size_t)d->mbs * (size_t)(d->seq + 1));
    d->idxbuf = malloc(sizeof *d->idxbuf * (size_t)d->mbs);
    if (!d->text || !d->idxbuf) return tr_errf(err, errlen, "out of memory");
    if (d->sp[0].present) {
        if (tr_sampler_init(&d->train, tr_data_split_len(d, 0), 0, d->mbs, dp_rank, dp_size, err, errlen)) return -1;
        d->has_train_sampler = true;
    }
    if (d->sp[1].present) {
        if (tr_sampler_init(&d->valid, tr_data_split_len(d, 1), 0, d->mbs, dp_rank, dp_size, err, errlen)) return -1;
        d->has_valid_sampler = true;
    }
    return 0;
}

tr_data *tr_data_open_ex(const tr_config *c, int dp_rank, int dp_size, const tr_data_options *opt, char *err,
                         size_t errlen) {
    tr_data *d = calloc(1, sizeof *d);
    double *w1 = NULL;
    if (!d) {
        tr_errf(err, errlen, "out of memory");
        return NULL;
    }
    d->seq = c->seq_length;
    d->mbs = c->micro_batch_size;
    d->gbs = c->global_batch_size;
    d->eval_iters = c->eval_iters;
    d->eval_interval = c->eval_interval;
    /* ids must lie in the tokenizer's vocabulary where one was read (data from another tokenizer fails
     * at its first sample), else in --vocab-size */
    d->vocab_size = c->tokenizer_vocab > 0 ? c->tokenizer_vocab : c->vocab_size;
    d->eod_mask_loss = c->eod_mask_loss;
    d->reset_position_ids = c->reset_position_ids;
    d->eod = opt && opt->eod >= 0 ? opt->eod : default_eod(c);
    int64_t counts[TR_NSPLITS];
    if (c->seq_length < 2) {
        tr_errf(err, errlen, "--seq-length %d: must be at least 2", c->seq_length);
        goto fail;
    }
    if (c->micro_batch_size < 1) {
        tr_errf(err, errlen, "--micro-batch-size %d: must be at least 1", c->micro_batch_size);
        goto fail;
    }
    if (c->seed > UINT32_MAX) {
        tr_errf(err, errlen, "--seed %llu: numpy's RandomState takes seeds below 2^32", (unsigned long long)c->seed);
        goto fail;
    }
    if (c->reset_attention_mask) {
        tr_errf(err, errlen, "--reset-attention-mask is not supported by twinrun's data path (it feeds a causal mask)");
        goto fail;
    }
    if ((c->eod_mask_loss || c->reset_position_ids) && d->eod < 0) {
        tr_errf(err, errlen,
                "--eod-mask-loss/--reset-position-ids need the end-of-document id, unknown for "
                "--tokenizer-type %s without --tokenizer-model (give the tokenizer's directory)",
                c->tokenizer_type);
        goto fail;
    }
    if (sample_counts(c, counts, err, errlen)) goto fail;
    d->tokenizer_json = opt && opt->tokenizer_json ? strdup(opt->tokenizer_json) : default_tokenizer_json(c);
    if (!d->tokenizer_json) {
        tr_errf(err, errlen, "out of memory");
        goto fail;
    }
    if (c->mock_data) {
        /* Megatron: no blend means mock, with the split forced to 1,1,1 */
        snprintf(d->split_text, sizeof d->split_text, "1,1,1");
        d->n_prefix = 1;
    } else {
        if (c->n_data_path <= 0) {
            tr_errf(err, errlen,
                    "no data: give --data-path <prefix> (the .bin/.idx pair without extension) or --mock-data");
            goto fail;
        }
        snprintf(d->split_text, sizeof d->split_text, "%s", c->split[0] ? c->split : "969, 30, 1");
        if (parse_blend(c, &d->prefix, &w1, &d->n_prefix, err, errlen)) goto fail;
    }
    if (tr_split_parse(d->split_text, &d->split, err, errlen)) goto fail;
    d->idx = calloc((size_t)d->n_prefix, sizeof *d->idx);
    d->src = calloc((size_t)d->n_prefix, sizeof *d->src);
    d->cache_dir = calloc((size_t)d->n_prefix, sizeof *d->cache_dir);
    if (!d->idx || !d->src || !d->cache_dir) {
        tr_errf(err, errlen, "out of memory");
        goto fail;
    }
    if (c->mock_data) {
        d->mock = malloc(sizeof *d->mock);
        if (!d->mock) {
            tr_errf(err, errlen, "out of memory");
            goto fail;
        }
        if (d->eod < 0) d->eod = c->vocab_size - 1;
        if (tr_mock_init(d->mock, c->vocab_size, d->eod, err, errlen)) goto fail;
        d->src[0] = tr_mock_source(d->mock);
        /* MockGPTDataset caches only under an explicit --data-cache-path */
        if (c->data_cache_path[0]) snprintf(d->cache_dir[0], sizeof d->cache_dir[0], "%s", c->data_cache_path);
    } else {
        for (int k = 0; k < d->n_prefix; k++) {
            d->idx[k] = tr_idx_open(d->prefix[k], c->mmap_bin_files, err, errlen);
            if (!d->idx[k]) goto fail;
            tr_doc_source s = {d->prefix[k], tr_idx_num_sequences(d->idx[k]), tr_idx_lengths(d->idx[k]), idx_read,
                               d->idx[k]};
            d->src[k] = s;
            if (c->data_cache_path[0]) snprintf(d->cache_dir[k], sizeof d->cache_dir[k], "%s", c->data_cache_path);
            else snprintf(d->cache_dir[k], sizeof d->cache_dir[k], "%s/cache/GPTDataset_indices", d->prefix[k]);
        }
    }
    double w1n[TR_MAX_PATHS];
    if (w1 && tr_blend_normalize(w1, d->n_prefix, w1n, err, errlen)) goto fail;
    for (int s = 0; s < TR_NSPLITS; s++)
        if (d->split.present[s] && build_split(d, c, s, w1 ? w1n : NULL, counts[s], err, errlen)) goto fail;
    free(w1);
    w1 = NULL;
    if (init_reader(d, dp_rank, dp_size, err, errlen)) goto fail;
    return d;
fail:
    free(w1);
    tr_data_close(d);
    return NULL;
}

tr_data *tr_data_open(const tr_config *c, int dp_rank, int dp_size, char *err, size_t errlen) {
    return tr_data_open_ex(c, dp_rank, dp_size, NULL, err, errlen);
}

tr_data *tr_data_view(const tr_data *base, int dp_rank, int dp_size, char *err, size_t errlen) {
    tr_data *d = malloc(sizeof *d);
    if (!d) {
        tr_errf(err, errlen, "out of memory");
        return NULL;
    }
    *d = *base; /* the datasets and indices are shared and only read from here on */
    d->is_view = true;
    d->has_train_sampler = d->has_valid_sampler = false;
    d->text = NULL, d->idxbuf = NULL;
    d->read_hook = NULL, d->read_hook_arg = NULL;
    if (init_reader(d, dp_rank, dp_size, err, errlen)) goto fail;
    return d;
fail:
    tr_data_close(d);
    return NULL;
}

void tr_data_close(tr_data *d) {
    if (!d) return;
    if (d->is_view) {
        free(d->text);
        free(d->idxbuf);
        free(d);
        return;
    }
    for (int s = 0; s < TR_NSPLITS; s++) {
        tr_data_split *sp = &d->sp[s];
        if (sp->blended) tr_blended_close(&sp->blend);
        for (int k = 0; sp->gpt && k < sp->n; k++) tr_gpt_dataset_close(&sp->gpt[k]);
        free(sp->gpt);
        free(sp->gptp);
    }
    for (int k = 0; d->idx && k < d->n_prefix; k++) tr_idx_close(d->idx[k]);
    free(d->idx);
    free(d->src);
    free(d->cache_dir);
    free(d->prefix);
    free(d->mock);
    free(d->tokenizer_json);
    free(d->text);
    free(d->idxbuf);
    free(d);
}
