/* Batches: Megatron's sampler over a split, and each sample's tokens/labels/masks/positions. */
#include <stdio.h>
#include <string.h>

#include "data/data_internal.h"
#include "twinrun/err.h"

static bool token_invalid(int64_t t, int64_t vocab_size) {
    return t < 0 || (vocab_size > 0 && t >= vocab_size) || t > INT32_MAX;
}

int tr_data_fill_sample(const int64_t *text, int seq, int64_t vocab_size, int64_t eod, int eod_mask_loss,
                        int reset_position_ids, int32_t *tokens, int32_t *labels, float *loss_mask,
                        int32_t *position_ids, char *err, size_t errlen) {
    for (int i = 0; i <= seq; i++)
        if (token_invalid(text[i], vocab_size))
            return tr_errf(err, errlen,
                           "token id %lld at position %d is outside the vocabulary [0, %lld) (--vocab-size); was the "
                           "data tokenized with another tokenizer?",
                           (long long)text[i], i, (long long)vocab_size);
    int32_t pos = 0;
    for (int i = 0; i < seq; i++) {
        tokens[i] = (int32_t)text[i];
        labels[i] = (int32_t)text[i + 1];
        /* the mask and the position reset look at the input token, as Megatron's do */
        loss_mask[i] = eod_mask_loss && text[i] == eod ? 0.0f : 1.0f;
        position_ids[i] = pos++;
        if (reset_position_ids && text[i] == eod) pos = 0;
    }
    return 0;
}

int tr_data_has_split(const tr_data *d, int s) { return s >= 0 && s < TR_NSPLITS && d->sp[s].present; }

int64_t tr_data_split_len(const tr_data *d, int s) {
    if (!tr_data_has_split(d, s)) return 0;
    const tr_data_split *sp = &d->sp[s];
    return sp->blended ? sp->blend.size : tr_gpt_dataset_len(&sp->gpt[0]);
}

int64_t tr_data_split_requested(const tr_data *d, int s) { return tr_data_has_split(d, s) ? d->sp[s].requested : 0; }
int tr_data_seq_length(const tr_data *d) { return d->seq; }
int64_t tr_data_eod(const tr_data *d) { return d->eod; }

const tr_gpt_dataset *tr_data_gpt(const tr_data *d, int s, int k) {
    if (!tr_data_has_split(d, s) || k < 0 || k >= d->sp[s].n) return NULL;
    return &d->sp[s].gpt[k];
}

const tr_gpt_dataset *tr_data_sample_source(const tr_data *d, int s, int64_t idx, int64_t *inner) {
    if (!tr_data_has_split(d, s) || idx < 0 || idx >= tr_data_split_len(d, s)) return NULL;
    const tr_data_split *sp = &d->sp[s];
    if (!sp->blended) return *inner = idx, &sp->gpt[0];
    *inner = sp->blend.dataset_sample_index[idx];
    return sp->blend.ds[sp->blend.dataset_index[idx]];
}

int tr_data_sample(const tr_data *d, int s, int64_t idx, int64_t *text, char *err, size_t errlen) {
    if (!tr_data_has_split(d, s))
        return tr_errf(err, errlen, "there is no %s split (its --split share is 0)", tr_split_name(s));
    const tr_data_split *sp = &d->sp[s];
    if (sp->blended) return tr_blended_get(&sp->blend, idx, text, err, errlen);
    return tr_gpt_dataset_get(&sp->gpt[0], idx, text, err, errlen);
}

static const char *status_name(tr_cache_status c) {
    static const char *const n[] = {"no cache", "cache hit", "built and cached", "cache rebuilt"};
    return n[c];
}

void tr_data_describe(const tr_data *d, int s, char *out, size_t cap) {
    size_t n = 0;
    out[0] = '\0';
    if (!tr_data_has_split(d, s)) {
        snprintf(out, cap, "%s: none\n", tr_split_name(s));
        return;
    }
    const tr_data_split *sp = &d->sp[s];
    for (int k = 0; k < sp->n && n < cap; k++) {
        const tr_gpt_dataset *g = &sp->gpt[k];
        n += (size_t)snprintf(
            out + n, cap - n, "%s: %s %s: %lld samples (asked %lld), %d epoch(s)%s, %lld documents, hash %s, %s%s%s\n",
            tr_split_name(s), g->src.path ? "GPTDataset" : "MockGPTDataset", g->src.path ? g->src.path : "(mock)",
            (long long)g->ix.n_samples, (long long)g->num_samples, g->ix.epochs,
            g->ix.separate_final_epoch ? " (separate final epoch)" : "",
            (long long)(g->ix.n_doc / (g->ix.epochs ? g->ix.epochs : 1)), g->hash, status_name(g->cache),
            g->cache_note[0] ? ": " : "", g->cache_note);
    }
    if (sp->blended && n < cap)
        snprintf(out + n, cap - n, "%s: BlendedDataset of %d: %lld samples, hash %s, %s%s%s\n", tr_split_name(s), sp->n,
                 (long long)sp->blend.size, sp->blend.hash, status_name(sp->blend.cache),
                 sp->blend.cache_note[0] ? ": " : "", sp->blend.cache_note);
}

/* Where a sample's first invalid token comes from ("PREFIX: document 12, token 5"), so a bad token in
 * one of several blended files names its file; "" when it cannot be told (mock data, a valid sample). */
static void invalid_token_origin(const tr_data *d, int s, int64_t idx, const int64_t *text, char *out, size_t outlen) {
    out[0] = 0;
    int64_t pos = 0;
    while (pos <= d->seq && !token_invalid(text[pos], d->vocab_size)) pos++;
    int64_t inner, doc, off;
    const tr_gpt_dataset *g = tr_data_sample_source(d, s, idx, &inner);
    if (pos > d->seq || !g || !g->src.path || tr_gpt_dataset_locate(g, inner, pos, &doc, &off)) return;
    snprintf(out, outlen, " (%s: document %lld, token %lld)", g->src.path, (long long)doc, (long long)off);
}

void tr_data_set_read_hook(tr_data *d, tr_data_read_hook fn, void *arg) { d->read_hook = fn, d->read_hook_arg = arg; }

void tr_data_sample_where(const tr_data *d, int s, int64_t idx, char *out, size_t outlen, char *file, size_t filelen) {
    if (file && filelen) file[0] = 0;
    int64_t inner, doc, off;
    const tr_gpt_dataset *g = tr_data_sample_source(d, s, idx, &inner);
    if (!g || !g->src.path) {
        snprintf(out, outlen, "%s", g ? "mock data (no file)" : "a sample outside the split");
        return;
    }
    const int k = (int)(g - d->sp[s].gpt); /* a split's datasets are the prefixes, in order */
    if (k < 0 || k >= d->n_prefix || !d->idx[k] || tr_gpt_dataset_locate(g, inner, 0, &doc, &off)) {
        snprintf(out, outlen, "%s.bin", g->src.path);
    } else {
        const int code = tr_idx_dtype(d->idx[k]);
        const long long byte = (long long)(tr_idx_pointers(d->idx[k])[doc] + off * tr_idx_itemsize(code));
        snprintf(out, outlen, "%s.bin at byte %lld (document %lld, token %lld)", g->src.path, byte, (long long)doc,
                 (long long)off);
    }
    if (file && filelen) snprintf(file, filelen, "%s.bin", g->src.path);
}

static int next_batch(tr_data *d, int s, tr_sampler *smp, int32_t *tokens, int32_t *labels, float *loss_mask,
                      int32_t *position_ids, char *err, size_t errlen) {
    tr_sampler save = *smp;
    if (tr_sampler_next(smp, d->idxbuf, err, errlen)) return -1;
    const int S = d->seq;
    for (int b = 0; b < d->mbs; b++) {
        int64_t *text = d->text + (size_t)b * (size_t)(S + 1);
        char inner[768], origin[TR_PATH_LEN + 64] = "";
        if (d->read_hook) d->read_hook(d->read_hook_arg, s, d->idxbuf[b], true);
        int rc = tr_data_sample(d, s, d->idxbuf[b], text, inner, sizeof inner);
        if (d->read_hook) d->read_hook(d->read_hook_arg, s, d->idxbuf[b], false);
        if (!rc && (rc = tr_data_fill_sample(text, S, d->vocab_size, d->eod, d->eod_mask_loss, d->reset_position_ids,
                                             tokens + (size_t)b * S, labels + (size_t)b * S, loss_mask + (size_t)b * S,
                                             position_ids + (size_t)b * S, inner, sizeof inner)))
            invalid_token_origin(d, s, d->idxbuf[b], text, origin, sizeof origin);
        if (rc) {
            *smp = save; /* a failed batch does not move the position */
            return tr_errf(err, errlen, "%s sample %lld%s: %s", tr_split_name(s), (long long)d->idxbuf[b], origin,
                           inner);
        }
    }
    return 0;
}

int tr_data_next_train(tr_data *d, int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *position_ids, char *err,
                       size_t errlen) {
    if (!d->has_train_sampler) return tr_errf(err, errlen, "there is no train split (its --split share is 0)");
    return next_batch(d, TR_SPLIT_TRAIN, &d->train, tokens, labels, loss_mask, position_ids, err, errlen);
}

int tr_data_next_valid(tr_data *d, int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *position_ids, char *err,
                       size_t errlen) {
    if (!d->has_valid_sampler) return tr_errf(err, errlen, "there is no valid split (its --split share is 0)");
    return next_batch(d, TR_SPLIT_VALID, &d->valid, tokens, labels, loss_mask, position_ids, err, errlen);
}

int64_t tr_data_consumed_samples(const tr_data *d) { return d->has_train_sampler ? d->train.consumed : 0; }
int64_t tr_data_consumed_valid_samples(const tr_data *d) { return d->has_valid_sampler ? d->valid.consumed : 0; }

int tr_data_set_consumed_samples(tr_data *d, int64_t consumed, char *err, size_t errlen) {
    if (!d->has_train_sampler) return tr_errf(err, errlen, "there is no train split");
    if (consumed < 0 || consumed > d->train.total)
        return tr_errf(err, errlen,
                       "consumed samples %lld is outside the train dataset's %lld samples (checkpoint "
                       "from a different data config?)",
                       (long long)consumed, (long long)d->train.total);
    d->train.consumed = consumed;
    return 0;
}

int tr_data_set_consumed_valid_samples(tr_data *d, int64_t consumed, char *err, size_t errlen) {
    if (!d->has_valid_sampler) return tr_errf(err, errlen, "there is no valid split");
    if (consumed < 0 || consumed > d->valid.total)
        return tr_errf(err, errlen, "consumed valid samples %lld is outside the valid dataset's %lld samples",
                       (long long)consumed, (long long)d->valid.total);
    d->valid.consumed = consumed;
    return 0;
}

int64_t tr_data_valid_samples_at(const tr_data *d, int64_t iteration) {
    if (d->eval_interval < 1) return 0;
    return (iteration / d->eval_interval) * (int64_t)d->eval_iters * d->gbs;
}
