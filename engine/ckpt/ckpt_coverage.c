/* The shards of one checkpoint must describe every tensor consistently (one dtype, one global
 * shape) and together hold every element of it; replicas are allowed. A commit refuses a
 * checkpoint where a rank forgot a piece, so a load never discovers the hole. */
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

typedef struct ref {
    const ckpt_blob_desc *d;
    int rank;
} ref;
typedef struct span {
    uint64_t g, len;
} span;

static int by_name(const void *a, const void *b) {
    return strcmp(((const ref *)a)->d->name, ((const ref *)b)->d->name);
}
static int by_start(const void *a, const void *b) {
    uint64_t x = ((const span *)a)->g, y = ((const span *)b)->g;
    return x < y ? -1 : x > y;
}

static int same_tensor(const ckpt_blob_desc *a, const ckpt_blob_desc *b) {
    if (a->dtype != b->dtype || a->ndim != b->ndim) return 0;
    for (int k = 0; k < a->ndim; k++)
        if (a->shape[k] != b->shape[k]) return 0;
    return 1;
}

/* Blobs refs[0..n) share a name: union of their runs must be [0, numel). */
static int check_one(const ref *refs, int n, const char *where, char *err, size_t errlen) {
    const ckpt_blob_desc *d0 = refs[0].d;
    uint64_t nspans = 0;
    for (int i = 0; i < n; i++) {
        if (!same_tensor(d0, refs[i].d))
            return tr_errf(err, errlen,
                           "%s: tensor '%s' has dtype %s/%d dims in rank %d's shard but %s/%d dims in rank %d's", where,
                           d0->name, ckpt_dtype_name(d0->dtype), d0->ndim, refs[0].rank,
                           ckpt_dtype_name(refs[i].d->dtype), refs[i].d->ndim, refs[i].rank);
        ckpt_runs it;
        ckpt_runs_init(&it, &refs[i].d->place, refs[i].d->shape, refs[i].d->ndim);
        nspans += ckpt_runs_count(&it);
    }
    span *s = nspans ? malloc(nspans * sizeof *s) : NULL;
    if (nspans && !s) return tr_errf(err, errlen, "%s: out of host memory checking tensor '%s'", where, d0->name);
    uint64_t k = 0;
    for (int i = 0; i < n; i++) {
        ckpt_runs it;
        ckpt_runs_init(&it, &refs[i].d->place, refs[i].d->shape, refs[i].d->ndim);
        uint64_t local;
        for (uint64_t r = 0; ckpt_runs_get(&it, r, &s[k].g, &local, &s[k].len); r++) k++;
    }
    qsort(s, nspans, sizeof *s, by_start);
    uint64_t numel = ckpt_numel(d0->shape, d0->ndim), covered = 0;
    int rc = 0;
    for (uint64_t i = 0; i < nspans && !rc; i++) {
        if (s[i].g > covered)
            rc = tr_errf(err, errlen, "%s: tensor '%s': elements [%llu, %llu) are in no shard", where, d0->name,
                         (unsigned long long)covered, (unsigned long long)s[i].g);
        if (s[i].g + s[i].len > covered) covered = s[i].g + s[i].len;
    }
    if (!rc && covered < numel)
        rc = tr_errf(err, errlen, "%s: tensor '%s': elements [%llu, %llu) are in no shard", where, d0->name,
                     (unsigned long long)covered, (unsigned long long)numel);
    free(s);
    return rc;
}

int ckpt_coverage_check(const ckpt_shard_header *hs, int nh, const char *where, int *n_tensors, char *err,
                        size_t errlen) {
    size_t n = 0;
    for (int i = 0; i < nh; i++) n += (size_t)hs[i].n;
    ref *refs = n ? malloc(n * sizeof *refs) : NULL;
    if (n && !refs) return tr_errf(err, errlen, "%s: out of host memory", where);
    size_t k = 0;
    for (int i = 0; i < nh; i++)
        for (int j = 0; j < hs[i].n; j++) refs[k++] = (ref){&hs[i].blobs[j], hs[i].coords.rank};
    qsort(refs, n, sizeof *refs, by_name);
    int rc = 0, tensors = 0;
    for (size_t i = 0; i < n && !rc;) {
        size_t j = i + 1;
        while (j < n && strcmp(refs[j].d->name, refs[i].d->name) == 0) j++;
        rc = check_one(refs + i, (int)(j - i), where, err, errlen);
        tensors++, i = j;
    }
    free(refs);
    if (n_tensors) *n_tensors = tensors;
    return rc;
}
