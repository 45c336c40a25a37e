/* BlendedDataset (see blended_dataset.h). */
#include "data/blended_dataset.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "data/md5.h"
#include "data/npy.h"
#include "data/pyjson.h"
#include "twinrun/err.h"

int64_t tr_blend_per_dataset(int64_t target, double weight, double surplus) {
    double a = ceil((double)target * weight);
    return (int64_t)ceil(a * (1.0 + surplus));
}

/* numpy.sum's pairwise summation: blocks of 8 partial sums below 128 elements per leaf. */
static double np_sum(const double *a, int n) {
    if (n < 8) {
        double r = 0.0; /* numpy starts from -0.0/0.0 and adds in order */
        for (int i = 0; i < n; i++) r += a[i];
        return r;
    }
    if (n <= 128) {
        double r[8];
        for (int k = 0; k < 8; k++) r[k] = a[k];
        int i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (int k = 0; k < 8; k++) r[k] += a[i + k];
        double res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++) res += a[i];
        return res;
    }
    int n2 = n / 2;
    n2 -= n2 % 8;
    return np_sum(a, n2) + np_sum(a + n2, n - n2);
}

int tr_blend_normalize(const double *w, int n, double *out, char *err, size_t errlen) {
    for (int i = 0; i < n; i++)
        if (!(w[i] > 0) || !isfinite(w[i]))
            return tr_errf(err, errlen, "blend weight %d is %g; every --data-path weight must be a positive number", i,
                           w[i]);
    double s = np_sum(w, n);
    for (int i = 0; i < n; i++) out[i] = w[i] / s;
    return 0;
}

void tr_blend_indices(const double *w, int n, int64_t size, int16_t *di, int64_t *dsi) {
    int64_t *count = calloc((size_t)n, sizeof *count);
    if (!count) return;
    for (int64_t i = 0; i < size; i++) {
        double x = i > 1 ? (double)i : 1.0;
        int best = 0;
        double best_err = w[0] * x - (double)count[0];
        for (int d = 1; d < n; d++) {
            double e = w[d] * x - (double)count[d];
            if (e > best_err) best_err = e, best = d;
        }
        di[i] = (int16_t)best;
        dsi[i] = count[best]++;
    }
    free(count);
}

static char *description(tr_gpt_dataset *const *ds, const double *w, int n, int64_t size, const tr_gpt_config *cfg,
                         int split) {
    tr_pyjson j;
    tr_pyjson_init(&j);
    tr_pyjson_obj_begin(&j);
    tr_pyjson_key(&j, "class");
    tr_pyjson_str(&j, "BlendedDataset");
    tr_pyjson_key(&j, "datasets");
    tr_pyjson_arr_begin(&j);
    for (int k = 0; k < n; k++)
        if (tr_gpt_identifiers(&j, &ds[k]->src, cfg, split, ds[k]->num_samples)) j.failed = 1;
    tr_pyjson_arr_end(&j);
    tr_pyjson_key(&j, "split");
    tr_pyjson_str(&j, tr_split_name(split));
    tr_pyjson_key(&j, "weights");
    tr_pyjson_arr_begin(&j);
    for (int k = 0; k < n; k++) tr_pyjson_float(&j, w[k]);
    tr_pyjson_arr_end(&j);
    tr_pyjson_key(&j, "size");
    tr_pyjson_int(&j, size);
    tr_pyjson_obj_end(&j);
    if (j.failed) {
        tr_pyjson_free(&j);
        return NULL;
    }
    return j.buf;
}

static void bpath(char *out, size_t cap, const tr_gpt_config *cfg, const char *hash, int split, const char *what) {
    snprintf(out, cap, "%s/%s-BlendedDataset-%s-%s", cfg->cache_dir, hash, tr_split_name(split), what);
}

/* Compares the cache with the freshly computed indices (cheap: O(size * n)); 1 = equal,
 * 0 = absent, -1 = differs (note says how). */
static int check_cache(const tr_blended_dataset *b, const tr_gpt_config *cfg, int split, char *note, size_t nl) {
    char p[4200];
    const char *names[3] = {"description.txt", "dataset_index.npy", "dataset_sample_index.npy"};
    for (int k = 0; k < 3; k++) {
        bpath(p, sizeof p, cfg, b->hash, split, names[k]);
        if (access(p, R_OK) != 0) return 0;
    }
    tr_npy a, c;
    bpath(p, sizeof p, cfg, b->hash, split, names[1]);
    if (tr_npy_load(p, &a, note, nl)) return -1;
    bpath(p, sizeof p, cfg, b->hash, split, names[2]);
    if (tr_npy_load(p, &c, note, nl)) {
        tr_npy_free(&a);
        return -1;
    }
    int ok = a.dtype == TR_NPY_INT16 && a.ndim == 1 && a.shape[0] == b->size && c.dtype == TR_NPY_INT64 &&
             c.ndim == 1 && c.shape[0] == b->size && !memcmp(a.data, b->dataset_index, (size_t)b->size * 2) &&
             !memcmp(c.data, b->dataset_sample_index, (size_t)b->size * 8);
    tr_npy_free(&a);
    tr_npy_free(&c);
    if (!ok) {
        tr_errf(note, nl, "cached BlendedDataset %s indices differ from the blend of these weights",
                tr_split_name(split));
        return -1;
    }
    return 1;
}

static int save_cache(const tr_blended_dataset *b, const tr_gpt_config *cfg, int split, char *err, size_t errlen) {
    if (tr_data_mkdirs(cfg->cache_dir, err, errlen)) return -1;
    char p[4200];
    bpath(p, sizeof p, cfg, b->hash, split, "description.txt");
    FILE *f = fopen(p, "wb");
    if (!f) return tr_errf(err, errlen, "%s: cannot write the data cache: %s", p, strerror(errno));
    size_t n = strlen(b->description);
    int ok = fwrite(b->description, 1, n, f) == n;
    if (fclose(f) != 0 || !ok) return tr_errf(err, errlen, "%s: write failed", p);
    int64_t shape[1] = {b->size};
    bpath(p, sizeof p, cfg, b->hash, split, "dataset_index.npy");
    if (tr_npy_save(p, TR_NPY_INT16, 1, shape, b->dataset_index, err, errlen)) return -1;
    bpath(p, sizeof p, cfg, b->hash, split, "dataset_sample_index.npy");
    return tr_npy_save(p, TR_NPY_INT64, 1, shape, b->dataset_sample_index, err, errlen);
}

int tr_blended_open(tr_blended_dataset *b, tr_gpt_dataset *const *ds, const double *weights, int n, int64_t size,
                    const tr_gpt_config *cfg, int split, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    if (n < 1 || n >= 32767) return tr_errf(err, errlen, "a blend needs 1 to 32766 datasets, got %d", n);
    b->n = n;
    b->ds = ds;
    b->size = size;
    b->weights = malloc((size_t)n * sizeof *b->weights);
    b->dataset_index = malloc((size_t)size * 2 + 2);
    b->dataset_sample_index = malloc((size_t)size * 8 + 8);
    if (!b->weights || !b->dataset_index || !b->dataset_sample_index) {
        tr_blended_close(b);
        return tr_errf(err, errlen, "out of memory for a blend of %lld samples", (long long)size);
    }
    memcpy(b->weights, weights, (size_t)n * sizeof *weights);
    tr_blend_indices(weights, n, size, b->dataset_index, b->dataset_sample_index);
    /* Megatron refuses a blend that asks a dataset for more samples than it has */
    for (int d = 0; d < n; d++) {
        int64_t used = 0;
        for (int64_t i = 0; i < size; i++) used += b->dataset_index[i] == d;
        if (used > tr_gpt_dataset_len(ds[d])) {
            tr_blended_close(b);
            return tr_errf(err, errlen,
                           "the %s blend takes %lld samples from dataset %d (%s) which has only %lld; Megatron "
                           "raises the same error (raise mid_level_dataset_surplus)",
                           tr_split_name(split), (long long)used, d, ds[d]->src.path ? ds[d]->src.path : "mock",
                           (long long)tr_gpt_dataset_len(ds[d]));
        }
    }
    b->description = description(ds, weights, n, size, cfg, split);
    if (!b->description) {
        tr_blended_close(b);
        return tr_errf(err, errlen, "cannot describe the blend (out of memory or bad tokenizer identity)");
    }
    tr_md5_hex(b->description, strlen(b->description), b->hash);
    if (cfg->cache_dir) {
        int rc = check_cache(b, cfg, split, b->cache_note, sizeof b->cache_note);
        if (rc == 1) b->cache = TR_CACHE_HIT;
        else {
            b->cache = rc == 0 ? TR_CACHE_BUILT : TR_CACHE_REBUILT;
            if (save_cache(b, cfg, split, err, errlen)) {
                tr_blended_close(b);
                return -1;
            }
        }
    }
    return 0;
}

void tr_blended_close(tr_blended_dataset *b) {
    if (!b) return;
    free(b->weights);
    free(b->dataset_index);
    free(b->dataset_sample_index);
    free(b->description);
    memset(b, 0, sizeof *b);
}

int tr_blended_get(const tr_blended_dataset *b, int64_t idx, int64_t *out, char *err, size_t errlen) {
    if (idx < 0 || idx >= b->size)
        return tr_errf(err, errlen, "blended sample %lld is outside its %lld samples", (long long)idx,
                       (long long)b->size);
    return tr_gpt_dataset_get(b->ds[b->dataset_index[idx]], b->dataset_sample_index[idx], out, err, errlen);
}
