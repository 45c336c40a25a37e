/* Reassembly: any region of a global tensor from whichever shards hold it, so a run with another
 * layout (TP, PP, DP, distributed optimizer) can load. Regions are walked as runs of consecutive
 * global elements; the runs of the wanted region are intersected with each stored blob's. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

#define FD_CACHE 32 /* shards open at once (the read fallback): a 1024-rank checkpoint stays below the fd limit */

typedef struct ref {
    const ckpt_blob_desc *d;
    int shard;
} ref;

/* Each shard mapped read-only on its first piece: a rank's slice of a tensor-parallel matrix is one
 * run per row, so a load is millions of pieces of tens of bytes, and a pread each made the flagship's
 * resumes 18% of its scheduler thread (perf). Shards are written to a temporary name
 * and renamed, so a mapped file is never rewritten in place; its size was checked against the
 * manifest at open. Where mmap fails, pieces are pread. */
typedef struct shard_map {
    const uint8_t *p; /* NULL: not mapped (yet, or mmap failed: tried) */
    size_t len;
    bool tried;
} shard_map;

struct ckpt_reader {
    char idir[TR_CKPT_PATH_MAX];
    ckpt_manifest m;
    ckpt_shard_header *hs;
    ref *refs; /* sorted by name */
    size_t nrefs;
    const char **names; /* distinct, sorted */
    int nnames;
    int fd[FD_CACHE], fd_shard[FD_CACHE], fd_next;
    shard_map *maps; /* one per shard (n_files) */
};

typedef struct run {
    uint64_t g, local, len;
} run;

typedef struct piece {
    uint64_t dst, src, len; /* element offsets in the wanted region and in the blob */
    const ckpt_blob_desc *d;
    int shard;
} piece;

static int by_name(const void *a, const void *b) {
    return strcmp(((const ref *)a)->d->name, ((const ref *)b)->d->name);
}
static int by_dst(const void *a, const void *b) {
    uint64_t x = ((const piece *)a)->dst, y = ((const piece *)b)->dst;
    return x < y ? -1 : x > y;
}

void ckpt_reader_close(ckpt_reader *r) {
    if (!r) return;
    for (int i = 0; i < FD_CACHE; i++)
        if (r->fd[i] >= 0) close(r->fd[i]);
    for (int i = 0; r->maps && i < r->m.n_files; i++)
        if (r->maps[i].p) munmap((void *)r->maps[i].p, r->maps[i].len);
    for (int i = 0; r->hs && i < r->m.n_files; i++) ckpt_shard_header_free(&r->hs[i]);
    free(r->maps), free(r->hs), free(r->refs), free(r->names);
    ckpt_manifest_free(&r->m);
    free(r);
}

ckpt_reader *ckpt_reader_open(const char *dir, int64_t iteration, char *err, size_t errlen) {
    ckpt_reader *r = calloc(1, sizeof *r);
    if (!r) {
        tr_errf(err, errlen, "out of host memory");
        return NULL;
    }
    for (int i = 0; i < FD_CACHE; i++) r->fd[i] = -1, r->fd_shard[i] = -1;
    if (ckpt_manifest_load(dir, iteration, &r->m, err, errlen)) goto fail;
    ckpt_iter_dir(r->idir, sizeof r->idir, dir, iteration);
    r->hs = calloc((size_t)r->m.n_files, sizeof *r->hs);
    r->maps = calloc((size_t)r->m.n_files, sizeof *r->maps);
    if (!r->hs || !r->maps) goto oom;
    for (int i = 0; i < r->m.n_files; i++) {
        char path[TR_CKPT_PATH_MAX];
        ckpt_file_info info;
        ckpt_pathf(path, sizeof path, "%s/%s", r->idir, r->m.files[i].name);
        if (ckpt_shard_check(path, iteration, &r->m.layout, i, 0, &info, &r->hs[i], err, errlen)) goto fail;
        if (info.size != r->m.files[i].size) {
            tr_errf(err, errlen, "%s: %llu bytes, the manifest says %llu", path, (unsigned long long)info.size,
                    (unsigned long long)r->m.files[i].size);
            goto fail;
        }
        r->nrefs += (size_t)r->hs[i].n;
    }
    r->refs = r->nrefs ? malloc(r->nrefs * sizeof *r->refs) : NULL;
    r->names = r->nrefs ? malloc(r->nrefs * sizeof *r->names) : NULL;
    if (r->nrefs && (!r->refs || !r->names)) goto oom;
    size_t k = 0;
    for (int i = 0; i < r->m.n_files; i++)
        for (int j = 0; j < r->hs[i].n; j++) r->refs[k++] = (ref){&r->hs[i].blobs[j], i};
    qsort(r->refs, r->nrefs, sizeof *r->refs, by_name);
    for (size_t i = 0; i < r->nrefs; i++)
        if (i == 0 || strcmp(r->refs[i].d->name, r->names[r->nnames - 1]) != 0)
            r->names[r->nnames++] = r->refs[i].d->name;
    return r;
oom:
    tr_errf(err, errlen, "out of host memory opening %s", dir);
fail:
    ckpt_reader_close(r);
    return NULL;
}

const ckpt_manifest *ckpt_reader_manifest(const ckpt_reader *r) { return &r->m; }

/* refs[*first, *first + return) have this name. */
static size_t find(const ckpt_reader *r, const char *name, size_t *first) {
    size_t lo = 0, hi = r->nrefs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (strcmp(r->refs[mid].d->name, name) < 0) lo = mid + 1;
        else hi = mid;
    }
    size_t end = lo;
    while (end < r->nrefs && strcmp(r->refs[end].d->name, name) == 0) end++;
    *first = lo;
    return end - lo;
}

int ckpt_reader_tensor(const ckpt_reader *r, const char *name, ckpt_dtype *dtype, int *ndim, int64_t *shape) {
    size_t first;
    if (!find(r, name, &first)) return -1;
    const ckpt_blob_desc *d = r->refs[first].d;
    if (dtype) *dtype = d->dtype;
    if (ndim) *ndim = d->ndim;
    if (shape) memcpy(shape, d->shape, (size_t)d->ndim * sizeof *shape);
    return 0;
}

static run *runs_of(const ckpt_place *p, const int64_t *shape, int ndim, uint64_t *n) {
    ckpt_runs it;
    ckpt_runs_init(&it, p, shape, ndim);
    *n = ckpt_runs_count(&it);
    run *out = malloc((*n ? *n : 1) * sizeof *out);
    for (uint64_t k = 0; out && k < *n; k++) ckpt_runs_get(&it, k, &out[k].g, &out[k].local, &out[k].len);
    return out;
}

static int shard_fd(ckpt_reader *r, int shard, char *err, size_t errlen) {
    for (int i = 0; i < FD_CACHE; i++)
        if (r->fd_shard[i] == shard) return r->fd[i];
    int slot = r->fd_next++ % FD_CACHE;
    if (r->fd[slot] >= 0) close(r->fd[slot]);
    char path[TR_CKPT_PATH_MAX];
    ckpt_pathf(path, sizeof path, "%s/%s", r->idir, r->m.files[shard].name);
    r->fd[slot] = ckpt_open_read(path, err, errlen);
    r->fd_shard[slot] = r->fd[slot] >= 0 ? shard : -1;
    if (r->fd[slot] < 0) return -1;
    return r->fd[slot];
}

/* Maps shard on its first use (once: a failed mmap is not retried, the pieces are pread instead). */
static const shard_map *shard_map_of(ckpt_reader *r, int shard) {
    shard_map *m = &r->maps[shard];
    if (m->tried) return m;
    m->tried = true;
    const size_t len = (size_t)r->m.files[shard].size;
    char path[TR_CKPT_PATH_MAX];
    ckpt_pathf(path, sizeof path, "%s/%s", r->idir, r->m.files[shard].name);
    const int fd = len ? ckpt_open_read(path, NULL, 0) : -1;
    if (fd < 0) return m; /* the pread path opens it again and reports the error */
    /* Only a file still of the manifest's size: one cut short since the open (another process, a full
     * disk's repair) would fault with SIGBUS where the mapping passes its end; pread reports it instead. */
    struct stat st;
    if (fstat(fd, &st) == 0 && (uint64_t)st.st_size == (uint64_t)len) {
        void *p = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) m->p = p, m->len = len;
    }
    close(fd);
    return m;
}

static int copy_piece(ckpt_reader *r, const piece *p, size_t esz, uint8_t *dst, char *err, size_t errlen) {
    uint8_t *out = dst + p->dst * esz;
    size_t n = (size_t)(p->len * esz);
    uint64_t off = p->d->offset + p->src * esz;
    const shard_map *m = shard_map_of(r, p->shard);
    if (m->p) {
        if (off > m->len || n > m->len - off)
            return tr_errf(err, errlen, "%s/%s: tensor '%s' lies past the end of the file (%zu bytes)", r->idir,
                           r->m.files[p->shard].name, p->d->name, m->len);
        memcpy(out, m->p + off, n);
        return 0;
    }
    int fd = shard_fd(r, p->shard, err, errlen);
    if (fd < 0) return -1;
    while (n > 0) {
        ssize_t k = pread(fd, out, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0)
            return tr_errf(err, errlen, "%s/%s: read of tensor '%s' failed", r->idir, r->m.files[p->shard].name,
                           p->d->name);
        out += k, n -= (size_t)k, off += (uint64_t)k;
    }
    return 0;
}

/* Appends to *ps the intersections of the wanted runs w with the blob's runs s (both by global start). */
static int intersect(const run *w, uint64_t nw, const run *s, uint64_t ns, const ref *rf, piece **ps, size_t *np,
                     size_t *cap) {
    for (uint64_t i = 0, j = 0; i < nw && j < ns;) {
        uint64_t lo = w[i].g > s[j].g ? w[i].g : s[j].g;
        uint64_t hi = w[i].g + w[i].len < s[j].g + s[j].len ? w[i].g + w[i].len : s[j].g + s[j].len;
        if (lo < hi) {
            if (*np == *cap) {
                size_t nc = *cap ? *cap * 2 : 64;
                piece *g = realloc(*ps, nc * sizeof *g);
                if (!g) return -1;
                *ps = g, *cap = nc;
            }
            (*ps)[(*np)++] = (piece){w[i].local + (lo - w[i].g), s[j].local + (lo - s[j].g), hi - lo, rf->d, rf->shard};
        }
        if (w[i].g + w[i].len < s[j].g + s[j].len) i++;
        else j++;
    }
    return 0;
}

int ckpt_read(ckpt_reader *r, const char *name, ckpt_dtype dtype, ckpt_place want, void *dst, char *err,
              size_t errlen) {
    size_t first, n = find(r, name, &first);
    if (!n) return tr_errf(err, errlen, "%s: no shard holds tensor '%s'", r->idir, name);
    const ckpt_blob_desc *d0 = r->refs[first].d;
    if (dtype != d0->dtype)
        return tr_errf(err, errlen, "%s: tensor '%s' is stored as %s, asked for %s", r->idir, name,
                       ckpt_dtype_name(d0->dtype), ckpt_dtype_name(dtype));
    for (size_t i = 1; i < n; i++) {
        const ckpt_blob_desc *d = r->refs[first + i].d;
        if (d->dtype != d0->dtype || d->ndim != d0->ndim || memcmp(d->shape, d0->shape, sizeof d->shape) != 0)
            return tr_errf(err, errlen, "%s: tensor '%s' has a different dtype or shape in %s than in %s", r->idir,
                           name, r->m.files[r->refs[first + i].shard].name, r->m.files[r->refs[first].shard].name);
    }
    if (ckpt_place_resolve(&want, d0->shape, d0->ndim, name, err, errlen)) return -1;
    uint64_t nw;
    run *w = runs_of(&want, d0->shape, d0->ndim, &nw);
    piece *ps = NULL;
    size_t np = 0, cap = 0;
    int rc = w ? 0 : -1;
    for (size_t i = 0; !rc && i < n; i++) {
        const ref *rf = &r->refs[first + i];
        uint64_t ns;
        run *s = runs_of(&rf->d->place, rf->d->shape, rf->d->ndim, &ns);
        rc = s ? intersect(w, nw, s, ns, rf, &ps, &np, &cap) : -1;
        free(s);
    }
    free(w);
    if (rc) {
        free(ps);
        return tr_errf(err, errlen, "out of host memory reading tensor '%s'", name);
    }
    qsort(ps, np, sizeof *ps, by_dst);
    size_t esz = ckpt_dtype_size(dtype);
    uint64_t cursor = 0; /* elements of the wanted region filled so far; replicas are skipped */
    for (size_t i = 0; !rc && i < np; i++) {
        piece p = ps[i];
        if (p.dst + p.len <= cursor) continue;
        if (p.dst > cursor) break;
        uint64_t skip = cursor - p.dst;
        p.dst += skip, p.src += skip, p.len -= skip;
        rc = copy_piece(r, &p, esz, dst, err, errlen);
        cursor = p.dst + p.len;
    }
    free(ps);
    if (!rc && cursor < (uint64_t)want.n)
        rc = tr_errf(err, errlen, "%s: tensor '%s': element %llu of the wanted region is in no shard", r->idir, name,
                     (unsigned long long)cursor);
    return rc;
}
