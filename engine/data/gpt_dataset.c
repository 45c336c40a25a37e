/* GPTDataset: description, cache, samples (see gpt_dataset.h). */
#include "data/gpt_dataset.h"
#include "core/safe_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/md5.h"
#include "data/npy.h"
#include "data/pyjson.h"
#include "twinrun/err.h"

int tr_gpt_identifiers(tr_pyjson *j, const tr_doc_source *src, const tr_gpt_config *cfg, int split,
                       int64_t num_samples) {
    /* key order is MegatronDataset's: class, dataset_path, num_samples, index_split, then the
     * key config attributes random_seed, sequence_length, split, split_matrix, tokenizer */
    tr_pyjson_obj_begin(j);
    tr_pyjson_key(j, "class");
    tr_pyjson_str(j, src->path ? "GPTDataset" : "MockGPTDataset");
    tr_pyjson_key(j, "dataset_path");
    tr_pyjson_str(j, src->path);
    tr_pyjson_key(j, "num_samples");
    if (num_samples < 0) tr_pyjson_null(j);
    else tr_pyjson_int(j, num_samples);
    tr_pyjson_key(j, "index_split");
    tr_pyjson_str(j, tr_split_name(split));
    tr_pyjson_key(j, "random_seed");
    tr_pyjson_int(j, cfg->seed);
    tr_pyjson_key(j, "sequence_length");
    tr_pyjson_int(j, cfg->seq_length);
    tr_pyjson_key(j, "split");
    tr_pyjson_str(j, cfg->split_text);
    tr_pyjson_key(j, "split_matrix");
    tr_pyjson_arr_begin(j);
    for (int s = 0; s < TR_NSPLITS; s++) {
        if (!cfg->split->present[s]) {
            tr_pyjson_null(j);
            continue;
        }
        tr_pyjson_arr_begin(j);
        /* the cumulative sum starts from Python's integer 0, so the first bound prints as 0 */
        if (s == 0) tr_pyjson_int(j, 0);
        else tr_pyjson_float(j, cfg->split->lo[s]);
        tr_pyjson_float(j, cfg->split->hi[s]);
        tr_pyjson_arr_end(j);
    }
    tr_pyjson_arr_end(j);
    tr_pyjson_key(j, "tokenizer");
    if (tr_pyjson_raw(j, cfg->tokenizer_json)) return -1;
    tr_pyjson_obj_end(j);
    return j->failed ? -1 : 0;
}

char *tr_gpt_description(const tr_doc_source *src, const tr_gpt_config *cfg, int split, int64_t num_samples) {
    tr_pyjson j;
    tr_pyjson_init(&j);
    if (tr_gpt_identifiers(&j, src, cfg, split, num_samples)) {
        tr_pyjson_free(&j);
        return NULL;
    }
    return j.buf;
}

int tr_data_mkdirs(const char *path, char *err, size_t errlen) {
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf)
        return tr_errf(err, errlen, "%s: path too long", path);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return tr_errf(err, errlen,
                               "cannot create the data cache directory %s: %s (set --data-cache-path "
                               "to a writable directory)",
                               buf, strerror(errno));
            *p = c;
            if (!c) break;
        }
    }
    return 0;
}

/* <dir>/<md5>-<class>-<split>-<what>, the class being GPTDataset or MockGPTDataset */
static int cache_path(char *out, size_t cap, const tr_gpt_config *cfg, const tr_gpt_dataset *ds, const char *what) {
    return snprintf(out, cap, "%s/%s-%s-%s-%s", cfg->cache_dir, ds->hash,
                    ds->src.path ? "GPTDataset" : "MockGPTDataset", tr_split_name(ds->split), what) >= (int)cap;
}

static char *slurp(const char *path, size_t *len) {
    FILE *f = tr_safe_fopen_regular(path, NULL, 0);
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
        if (n + 1 == cap) {
            char *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                b = NULL;
                break;
            }
            b = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (b) b[n] = '\0';
    *len = n;
    return b;
}

/* Loads the cached arrays into ds->ix (planned already). 1 = usable, 0 = absent, -1 = corrupt or
 * stale with the reason in note. */
static int load_cache(tr_gpt_dataset *ds, const tr_gpt_index_params *p, const tr_gpt_config *cfg, char *note,
                      size_t notelen) {
    static const char *const names[3] = {"document_index.npy", "sample_index.npy", "shuffle_index.npy"};
    char path[4200];
    int present = 0;
    const char *all[4] = {"description.txt", names[0], names[1], names[2]};
    for (int k = 0; k < 4; k++) {
        cache_path(path, sizeof path, cfg, ds, all[k]);
        present += access(path, R_OK) == 0;
    }
    if (present < 4) return 0; /* Megatron builds unless all four files exist */
    cache_path(path, sizeof path, cfg, ds, "description.txt");
    size_t dl = 0;
    char *desc = slurp(path, &dl);
    if (!desc || dl != strlen(ds->description) || memcmp(desc, ds->description, dl) != 0) {
        free(desc);
        tr_errf(note, notelen, "%s does not hold this dataset's description", path);
        return -1;
    }
    free(desc);
    tr_npy a[3];
    memset(a, 0, sizeof a);
    int rc = 1;
    for (int k = 0; k < 3 && rc == 1; k++) {
        cache_path(path, sizeof path, cfg, ds, names[k]);
        if (tr_npy_load(path, &a[k], note, notelen)) rc = -1;
    }
    if (rc == 1) {
        tr_gpt_index *ix = &ds->ix;
        tr_npy_dtype want[3] = {TR_NPY_INT32, ix->sample64 ? TR_NPY_INT64 : TR_NPY_INT32,
                                ix->shuffle64 ? TR_NPY_INT64 : TR_NPY_UINT32};
        int64_t rows[3] = {ix->n_doc, ix->n_samples + 1, ix->n_samples};
        int nd[3] = {1, 2, 1};
        for (int k = 0; k < 3 && rc == 1; k++)
            if (a[k].dtype != want[k] || a[k].ndim != nd[k] || a[k].shape[0] != rows[k] ||
                (nd[k] == 2 && a[k].shape[1] != 2)) {
                tr_errf(note, notelen, "cached %s is %s [%lld, %lld]; this config needs %s [%lld%s]", names[k],
                        tr_npy_descr(a[k].dtype), (long long)a[k].shape[0], (long long)a[k].shape[1],
                        tr_npy_descr(want[k]), (long long)rows[k], nd[k] == 2 ? ", 2" : "");
                rc = -1;
            }
        if (rc == 1) {
            ix->doc_index = a[0].data, ix->sample_index = a[1].data, ix->shuffle_index = a[2].data;
            a[0].data = a[1].data = a[2].data = NULL;
            if (tr_gpt_index_check(p, ix, note, notelen)) {
                rc = -1;
                free(ix->doc_index), free(ix->sample_index), free(ix->shuffle_index);
                ix->doc_index = NULL, ix->sample_index = NULL, ix->shuffle_index = NULL;
            }
        }
    }
    for (int k = 0; k < 3; k++) tr_npy_free(&a[k]);
    return rc;
}

static int save_cache(const tr_gpt_dataset *ds, const tr_gpt_config *cfg, char *err, size_t errlen) {
    if (tr_data_mkdirs(cfg->cache_dir, err, errlen)) return -1;
    char path[4200], tmp[4300];
    cache_path(path, sizeof path, cfg, ds, "description.txt");
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f)
        return tr_errf(err, errlen,
                       "%s: cannot write the data cache: %s (set --data-cache-path to a writable "
                       "directory)",
                       tmp, strerror(errno));
    size_t n = strlen(ds->description);
    int ok = fwrite(ds->description, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return tr_errf(err, errlen, "%s: write failed", path);
    }
    const tr_gpt_index *ix = &ds->ix;
    int64_t s0[1] = {ix->n_doc}, s1[2] = {ix->n_samples + 1, 2}, s2[1] = {ix->n_samples};
    cache_path(path, sizeof path, cfg, ds, "document_index.npy");
    if (tr_npy_save(path, TR_NPY_INT32, 1, s0, ix->doc_index, err, errlen)) return -1;
    cache_path(path, sizeof path, cfg, ds, "sample_index.npy");
    if (tr_npy_save(path, ix->sample64 ? TR_NPY_INT64 : TR_NPY_INT32, 2, s1, ix->sample_index, err, errlen)) return -1;
    cache_path(path, sizeof path, cfg, ds, "shuffle_index.npy");
    return tr_npy_save(path, ix->shuffle64 ? TR_NPY_INT64 : TR_NPY_UINT32, 1, s2, ix->shuffle_index, err, errlen);
}

int tr_gpt_dataset_open(tr_gpt_dataset *ds, const tr_doc_source *src, const tr_gpt_config *cfg, int split, int64_t beg,
                        int64_t end, int64_t num_samples, char *err, size_t errlen) {
    memset(ds, 0, sizeof *ds);
    ds->src = *src;
    ds->split = split;
    ds->num_samples = num_samples;
    ds->seq_length = cfg->seq_length;
    tr_gpt_index_params p = {src->lengths, src->n, beg, end, num_samples, cfg->seq_length, cfg->seed, 1};
    if (beg >= end) {
        return tr_errf(err, errlen,
                       "%s: the %s split is empty (documents [%lld, %lld) of %lld under --split '%s'); give it "
                       "a larger share or more documents",
                       src->path ? src->path : "mock data", tr_split_name(split), (long long)beg, (long long)end,
                       (long long)src->n, cfg->split_text);
    }
    ds->description = tr_gpt_description(src, cfg, split, num_samples);
    if (!ds->description) return tr_errf(err, errlen, "tokenizer identity is not valid JSON: %s", cfg->tokenizer_json);
    tr_md5_hex(ds->description, strlen(ds->description), ds->hash);
    char where[600];
    snprintf(where, sizeof where, "%s (%s split)", src->path ? src->path : "mock data", tr_split_name(split));
    if (tr_gpt_index_plan(&p, &ds->ix, err, errlen)) {
        char inner[512];
        snprintf(inner, sizeof inner, "%s", err);
        tr_gpt_dataset_close(ds);
        return tr_errf(err, errlen, "%s: %s", where, inner);
    }
    if (cfg->cache_dir) {
        int rc = load_cache(ds, &p, cfg, ds->cache_note, sizeof ds->cache_note);
        if (rc == 1) {
            ds->cache = TR_CACHE_HIT;
            return 0;
        }
        ds->cache = rc == 0 ? TR_CACHE_BUILT : TR_CACHE_REBUILT;
    }
    if (tr_gpt_index_build(&p, &ds->ix, err, errlen)) {
        tr_gpt_dataset_close(ds);
        return -1;
    }
    if (cfg->cache_dir && save_cache(ds, cfg, err, errlen)) {
        tr_gpt_dataset_close(ds);
        return -1;
    }
    return 0;
}

void tr_gpt_dataset_close(tr_gpt_dataset *ds) {
    if (!ds) return;
    tr_gpt_index_free(&ds->ix);
    free(ds->description);
    ds->description = NULL;
}

int tr_gpt_dataset_locate(const tr_gpt_dataset *ds, int64_t idx, int64_t pos, int64_t *doc, int64_t *offset) {
    const tr_gpt_index *ix = &ds->ix;
    if (idx < 0 || idx >= ix->n_samples || pos < 0 || pos > ds->seq_length) return -1;
    /* the walk of tr_gpt_dataset_get, stopping at the document that holds token pos */
    int64_t j = tr_gpt_shuffle(ix, idx);
    int64_t d0 = tr_gpt_sample_doc(ix, j), o0 = tr_gpt_sample_off(ix, j);
    int64_t d1 = tr_gpt_sample_doc(ix, j + 1), o1 = tr_gpt_sample_off(ix, j + 1);
    int64_t n = 0;
    for (int64_t d = d0; d <= d1; d++) {
        int64_t off = d == d0 ? o0 : 0;
        int64_t len = d < d1 ? ds->src.lengths[ix->doc_index[d]] - off : o1 + 1 - off;
        if (pos < n + len) {
            *doc = ix->doc_index[d], *offset = off + (pos - n);
            return 0;
        }
        n += len;
    }
    return -1;
}

int tr_gpt_dataset_get(const tr_gpt_dataset *ds, int64_t idx, int64_t *out, char *err, size_t errlen) {
    const tr_gpt_index *ix = &ds->ix;
    if (idx < 0 || idx >= ix->n_samples)
        return tr_errf(err, errlen, "sample %lld is outside the %s dataset's %lld samples", (long long)idx,
                       tr_split_name(ds->split), (long long)ix->n_samples);
    int64_t j = tr_gpt_shuffle(ix, idx);
    int64_t d0 = tr_gpt_sample_doc(ix, j), o0 = tr_gpt_sample_off(ix, j);
    int64_t d1 = tr_gpt_sample_doc(ix, j + 1), o1 = tr_gpt_sample_off(ix, j + 1);
    const int64_t X = 1, want = ds->seq_length + X;
    int64_t n = 0;
    for (int64_t d = d0; d <= d1; d++) {
        int64_t doc = ix->doc_index[d];
        int64_t off = d == d0 ? o0 : 0;
        int64_t len = d < d1 ? ds->src.lengths[doc] - off : o1 + X - off;
        if (len < 0 || n + len > want)
            return tr_errf(err, errlen, "sample %lld: index arrays are inconsistent (document %lld)", (long long)idx,
                           (long long)doc);
        if (len && ds->src.read(ds->src.ctx, doc, off, len, out + n, err, errlen)) return -1;
        n += len;
    }
    if (n != want)
        return tr_errf(err, errlen, "sample %lld has %lld tokens, expected %lld", (long long)idx, (long long)n,
                       (long long)want);
    return 0;
}
