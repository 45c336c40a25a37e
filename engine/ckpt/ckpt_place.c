/* Where a blob sits in its global tensor: resolving a ckpt_place against the shape, and walking
 * it as runs of consecutive global elements (what reassembly copies). Also dtypes and the rank grid. */
#include <stdio.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

static const char *const dtype_names[] = {"?", "F32", "BF16", "F16", "F64", "I32", "I64", "U8", "U64"};
static const size_t dtype_sizes[] = {0, 4, 2, 2, 8, 4, 8, 1, 8};

const char *ckpt_dtype_name(ckpt_dtype dt) { return (int)dt >= 1 && (int)dt <= (int)CKPT_U64 ? dtype_names[dt] : "?"; }
size_t ckpt_dtype_size(ckpt_dtype dt) { return (int)dt >= 1 && (int)dt <= (int)CKPT_U64 ? dtype_sizes[dt] : 0; }

ckpt_place ckpt_place_full(void) { return (ckpt_place){.axis = 0, .start = 0, .len = -1, .off = 0, .n = -1}; }
ckpt_place ckpt_place_slice(int axis, int64_t start, int64_t len) {
    return (ckpt_place){.axis = axis, .start = start, .len = len, .off = 0, .n = -1};
}
ckpt_place ckpt_place_flat(int64_t off, int64_t n) {
    return (ckpt_place){.axis = 0, .start = 0, .len = -1, .off = off, .n = n};
}

/* Shapes are checked to hold < 2^62 elements before any product here, so nothing overflows. */
uint64_t ckpt_numel(const int64_t *shape, int ndim) {
    uint64_t n = 1;
    for (int i = 0; i < ndim; i++) n *= (uint64_t)shape[i];
    return n;
}

static void split(const int64_t *shape, int ndim, int axis, uint64_t *outer, uint64_t *mid, uint64_t *inner) {
    *outer = ckpt_numel(shape, axis < ndim ? axis : ndim);
    *mid = ndim > 0 ? (uint64_t)shape[axis] : 1;
    *inner = axis + 1 < ndim ? ckpt_numel(shape + axis + 1, ndim - axis - 1) : 1;
}

int ckpt_place_resolve(ckpt_place *p, const int64_t *shape, int ndim, const char *name, char *err, size_t errlen) {
    if (ndim < 0 || ndim > CKPT_MAX_DIMS)
        return tr_errf(err, errlen, "tensor '%s': %d dimensions; at most %d are supported", name, ndim, CKPT_MAX_DIMS);
    uint64_t total = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) return tr_errf(err, errlen, "tensor '%s': dimension %d is negative", name, i);
        if (shape[i] > 0 && total > (UINT64_C(1) << 62) / (uint64_t)shape[i])
            return tr_errf(err, errlen, "tensor '%s': shape holds more than 2^62 elements", name);
        total *= (uint64_t)shape[i];
    }
    int naxes = ndim > 0 ? ndim : 1;
    if (p->axis < 0 || p->axis >= naxes)
        return tr_errf(err, errlen, "tensor '%s': axis %d outside its %d dimensions", name, p->axis, ndim);
    uint64_t outer, mid, inner;
    split(shape, ndim, p->axis, &outer, &mid, &inner);
    if (p->start < 0 || (uint64_t)p->start > mid)
        return tr_errf(err, errlen, "tensor '%s': slice start %lld outside axis %d of extent %llu", name,
                       (long long)p->start, p->axis, (unsigned long long)mid);
    if (p->len == -1) p->len = (int64_t)(mid - (uint64_t)p->start);
    if (p->len < 0 || (uint64_t)p->len > mid - (uint64_t)p->start)
        return tr_errf(err, errlen, "tensor '%s': slice [%lld, +%lld) outside axis %d of extent %llu", name,
                       (long long)p->start, (long long)p->len, p->axis, (unsigned long long)mid);
    uint64_t sub = outer * (uint64_t)p->len * inner;
    if (p->off < 0 || (uint64_t)p->off > sub)
        return tr_errf(err, errlen, "tensor '%s': flat offset %lld outside the %llu elements of its slice", name,
                       (long long)p->off, (unsigned long long)sub);
    if (p->n == -1) p->n = (int64_t)(sub - (uint64_t)p->off);
    if (p->n < 0 || (uint64_t)p->n > sub - (uint64_t)p->off)
        return tr_errf(err, errlen, "tensor '%s': flat range [%lld, +%lld) outside the %llu elements of its slice",
                       name, (long long)p->off, (long long)p->n, (unsigned long long)sub);
    return 0;
}

void ckpt_runs_init(ckpt_runs *it, const ckpt_place *p, const int64_t *shape, int ndim) {
    uint64_t outer;
    it->p = *p;
    split(shape, ndim, p->axis, &outer, &it->mid, &it->inner);
    it->sub_row = (uint64_t)p->len * it->inner;
    if (p->n <= 0 || it->sub_row == 0) {
        it->first_o = 1, it->last_o = 0; /* no runs */
        return;
    }
    it->first_o = (uint64_t)p->off / it->sub_row;
    it->last_o = ((uint64_t)p->off + (uint64_t)p->n - 1) / it->sub_row;
}

uint64_t ckpt_runs_count(const ckpt_runs *it) { return it->last_o >= it->first_o ? it->last_o - it->first_o + 1 : 0; }

int ckpt_runs_get(const ckpt_runs *it, uint64_t k, uint64_t *g, uint64_t *local, uint64_t *len) {
    if (k >= ckpt_runs_count(it)) return 0;
    uint64_t o = it->first_o + k;
    uint64_t lo = o * it->sub_row, hi = lo + it->sub_row;
    uint64_t off = (uint64_t)it->p.off, end = off + (uint64_t)it->p.n;
    uint64_t a = lo > off ? lo : off, b = hi < end ? hi : end;
    *g = o * it->mid * it->inner + (uint64_t)it->p.start * it->inner + (a - lo);
    *local = a - off;
    *len = b - a;
    return 1;
}

int ckpt_layout_world(const ckpt_layout *l) { return l->tp * l->pp * l->dp * l->cp; }

ckpt_coords ckpt_coords_of(const ckpt_layout *l, int rank) {
    ckpt_coords c = {.rank = rank};
    c.tp = rank % l->tp;
    c.cp = rank / l->tp % l->cp;
    c.dp = rank / (l->tp * l->cp) % l->dp;
    c.pp = rank / (l->tp * l->cp * l->dp);
    return c;
}

void ckpt_shard_name(char *out, size_t cap, int rank) { snprintf(out, cap, "shard_%05d.bin", rank); }
