/* The shard header: encoding, and a parser that trusts nothing (shards come from disk). The
 * layout is described in ckpt_internal.h. The header CRC is checked by the caller
 * (ckpt_shard_header_load), so this file needs no checksum library and fuzzers reach every check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

#define REC_FIXED 58u /* bytes of a blob record besides its name and shape */
#define MAX_GRID (1 << 20)

static uint64_t align_up(uint64_t v) { return (v + CKPT_ALIGN - 1) / CKPT_ALIGN * CKPT_ALIGN; }

uint32_t ckpt_shard_header_size(const ckpt_blob_desc *blobs, int n) {
    uint64_t len = CKPT_FIXED_LEN + 4;
    for (int i = 0; i < n; i++) len += REC_FIXED + strlen(blobs[i].name) + 8u * (unsigned)blobs[i].ndim;
    return len > CKPT_MAX_HEADER_LEN ? 0 : (uint32_t)len;
}

uint8_t *ckpt_shard_header_encode(const ckpt_shard_header *h, uint32_t *len_out) {
    uint32_t len = ckpt_shard_header_size(h->blobs, h->n);
    uint8_t *b = len ? calloc(1, len) : NULL;
    if (!b) return NULL;
    memcpy(b, CKPT_MAGIC, 8);
    ckpt_put_u32(b + 8, CKPT_FORMAT_VERSION);
    ckpt_put_u32(b + 12, len);
    ckpt_put_u64(b + 16, h->file_size);
    ckpt_put_u64(b + 24, (uint64_t)h->iteration);
    const int32_t grid[10] = {h->coords.rank, h->coords.tp, h->coords.pp, h->coords.dp, h->coords.cp,
                              h->layout.tp,   h->layout.pp, h->layout.dp, h->layout.cp, h->layout.dist_opt};
    for (int i = 0; i < 10; i++) ckpt_put_u32(b + 32 + 4 * i, (uint32_t)grid[i]);
    ckpt_put_u32(b + 72, (uint32_t)h->n);
    uint8_t *p = b + CKPT_FIXED_LEN;
    for (int i = 0; i < h->n; i++) {
        const ckpt_blob_desc *d = &h->blobs[i];
        size_t nl = strlen(d->name);
        ckpt_put_u16(p, (uint16_t)nl), memcpy(p + 2, d->name, nl), p += 2 + nl;
        p[0] = (uint8_t)d->dtype, p[1] = (uint8_t)d->ndim, p[2] = (uint8_t)d->place.axis, p[3] = 0, p += 4;
        for (int k = 0; k < d->ndim; k++) ckpt_put_u64(p, (uint64_t)d->shape[k]), p += 8;
        const int64_t pl[4] = {d->place.start, d->place.len, d->place.off, d->place.n};
        for (int k = 0; k < 4; k++) ckpt_put_u64(p, (uint64_t)pl[k]), p += 8;
        ckpt_put_u64(p, d->offset), ckpt_put_u64(p + 8, d->nbytes), ckpt_put_u32(p + 16, d->crc32), p += 20;
    }
    /* the header CRC goes in the last 4 bytes; the caller computes it (this file has no CRC) */
    *len_out = len;
    return b;
}

void ckpt_shard_header_free(ckpt_shard_header *h) {
    free(h->blobs);
    memset(h, 0, sizeof *h);
}

static int parse_blob(ckpt_blob_desc *d, const uint8_t *b, uint32_t end, uint32_t *pos, int i, const char *path,
                      char *err, size_t errlen) {
    uint32_t p = *pos;
    if (end - p < 2) return tr_errf(err, errlen, "%s: blob record %d runs past the header", path, i);
    uint16_t nl = ckpt_get_u16(b + p);
    if (nl == 0 || nl > CKPT_NAME_MAX)
        return tr_errf(err, errlen, "%s: blob record %d has a name of %u bytes (1..%d allowed)", path, i, nl,
                       CKPT_NAME_MAX);
    if (end - p < 2u + nl + 4u) return tr_errf(err, errlen, "%s: blob record %d runs past the header", path, i);
    for (unsigned k = 0; k < nl; k++)
        if (b[p + 2 + k] < 0x20 || b[p + 2 + k] > 0x7e)
            return tr_errf(err, errlen, "%s: blob record %d: name byte %u is not printable ASCII", path, i, k);
    memcpy(d->name, b + p + 2, nl), d->name[nl] = '\0';
    p += 2u + nl;
    d->dtype = (ckpt_dtype)b[p];
    d->ndim = b[p + 1];
    d->place.axis = b[p + 2];
    if (ckpt_dtype_size(d->dtype) == 0)
        return tr_errf(err, errlen, "%s: blob '%s': unknown dtype code %u", path, d->name, b[p]);
    if (d->ndim > CKPT_MAX_DIMS || b[p + 3] != 0)
        return tr_errf(err, errlen, "%s: blob '%s': %d dimensions (at most %d) or a nonzero reserved byte", path,
                       d->name, d->ndim, CKPT_MAX_DIMS);
    p += 4;
    if (end - p < 8u * (unsigned)d->ndim + 52u)
        return tr_errf(err, errlen, "%s: blob '%s': record runs past the header", path, d->name);
    for (int k = 0; k < d->ndim; k++) d->shape[k] = (int64_t)ckpt_get_u64(b + p), p += 8;
    int64_t pl[4];
    for (int k = 0; k < 4; k++) pl[k] = (int64_t)ckpt_get_u64(b + p), p += 8;
    if (pl[1] < 0 || pl[3] < 0)
        return tr_errf(err, errlen, "%s: blob '%s': negative slice or range length", path, d->name);
    d->place.start = pl[0], d->place.len = pl[1], d->place.off = pl[2], d->place.n = pl[3];
    d->offset = ckpt_get_u64(b + p), d->nbytes = ckpt_get_u64(b + p + 8), d->crc32 = ckpt_get_u32(b + p + 16);
    p += 20;
    char what[CKPT_NAME_MAX + 64];
    snprintf(what, sizeof what, "%s: blob '%s'", path, d->name);
    if (ckpt_place_resolve(&d->place, d->shape, d->ndim, what, err, errlen)) return -1;
    if (d->nbytes != (uint64_t)d->place.n * ckpt_dtype_size(d->dtype))
        return tr_errf(err, errlen, "%s: blob '%s': %llu bytes for %lld %s elements", path, d->name,
                       (unsigned long long)d->nbytes, (long long)d->place.n, ckpt_dtype_name(d->dtype));
    *pos = p;
    return 0;
}

int ckpt_shard_header_parse(ckpt_shard_header *h, const uint8_t *b, size_t len, const char *path, char *err,
                            size_t errlen) {
    memset(h, 0, sizeof *h);
    if (len < CKPT_FIXED_LEN + 4)
        return tr_errf(err, errlen, "%s: %zu bytes, shorter than a shard header; the file is truncated", path, len);
    if (memcmp(b, CKPT_MAGIC, 8) != 0)
        return tr_errf(err, errlen, "%s: not a twinrun checkpoint shard (bad magic)", path);
    h->version = ckpt_get_u32(b + 8);
    if (h->version != CKPT_FORMAT_VERSION)
        return tr_errf(err, errlen, "%s: shard format version %u; this build reads version %d", path, h->version,
                       CKPT_FORMAT_VERSION);
    h->header_len = ckpt_get_u32(b + 12);
    if (h->header_len < CKPT_FIXED_LEN + 4 || h->header_len > CKPT_MAX_HEADER_LEN || h->header_len > len)
        return tr_errf(err, errlen, "%s: header length %u outside [%u, %zu]; the file is truncated or corrupt", path,
                       h->header_len, CKPT_FIXED_LEN + 4, len < CKPT_MAX_HEADER_LEN ? len : CKPT_MAX_HEADER_LEN);
    h->file_size = ckpt_get_u64(b + 16);
    h->iteration = (int64_t)ckpt_get_u64(b + 24);
    int32_t g[10];
    for (int i = 0; i < 10; i++) g[i] = (int32_t)ckpt_get_u32(b + 32 + 4 * i);
    h->coords = (ckpt_coords){g[0], g[1], g[2], g[3], g[4]};
    h->layout = (ckpt_layout){.tp = g[5], .pp = g[6], .dp = g[7], .cp = g[8], .dist_opt = g[9] == 1};
    if (h->iteration < 0) return tr_errf(err, errlen, "%s: negative iteration", path);
    for (int i = 5; i < 9; i++)
        if (g[i] < 1 || g[i] > MAX_GRID) return tr_errf(err, errlen, "%s: layout size %d out of range", path, g[i]);
    int64_t ranks = 1; /* each size is <= 2^20, so stepwise products stay far from overflow */
    for (int i = 5; i < 9 && ranks <= MAX_GRID; i++) ranks *= g[i];
    if (ranks > MAX_GRID)
        return tr_errf(err, errlen, "%s: layout tp%d pp%d dp%d cp%d has too many ranks", path, g[5], g[6], g[7], g[8]);
    if (g[9] != 0 && g[9] != 1) return tr_errf(err, errlen, "%s: distributed-optimizer flag %d", path, g[9]);
    int world = ckpt_layout_world(&h->layout);
    if (g[0] < 0 || g[0] >= world) return tr_errf(err, errlen, "%s: rank %d outside a world of %d", path, g[0], world);
    ckpt_coords want = ckpt_coords_of(&h->layout, g[0]);
    if (want.tp != g[1] || want.pp != g[2] || want.dp != g[3] || want.cp != g[4])
        return tr_errf(err, errlen,
                       "%s: rank %d has coordinates tp%d pp%d dp%d cp%d; the layout says tp%d pp%d dp%d cp%d", path,
                       g[0], g[1], g[2], g[3], g[4], want.tp, want.pp, want.dp, want.cp);
    uint32_t nb = ckpt_get_u32(b + 72);
    uint32_t end = h->header_len - 4;
    if (nb > CKPT_MAX_BLOBS || (uint64_t)nb * REC_FIXED > end - CKPT_FIXED_LEN)
        return tr_errf(err, errlen, "%s: %u blobs cannot fit a header of %u bytes", path, nb, h->header_len);
    uint64_t data_start = align_up(h->header_len);
    if (h->file_size < data_start)
        return tr_errf(err, errlen, "%s: file size %llu is inside the header", path, (unsigned long long)h->file_size);
    h->blobs = nb ? calloc(nb, sizeof *h->blobs) : NULL;
    if (nb && !h->blobs) return tr_errf(err, errlen, "%s: out of host memory for %u blob records", path, nb);
    h->n = (int)nb;
    uint32_t pos = CKPT_FIXED_LEN;
    uint64_t next = data_start; /* blobs lie in order, aligned, without overlap */
    for (int i = 0; i < h->n; i++) {
        ckpt_blob_desc *d = &h->blobs[i];
        if (parse_blob(d, b, end, &pos, i, path, err, errlen)) goto fail;
        if (d->offset % CKPT_ALIGN || d->offset < next || d->offset > h->file_size ||
            d->nbytes > h->file_size - d->offset) {
            tr_errf(err, errlen,
                    "%s: blob '%s' data [%llu, +%llu) is misplaced (expected at or after %llu, aligned "
                    "to %u, inside %llu bytes)",
                    path, d->name, (unsigned long long)d->offset, (unsigned long long)d->nbytes,
                    (unsigned long long)next, CKPT_ALIGN, (unsigned long long)h->file_size);
            goto fail;
        }
        next = d->offset + d->nbytes;
    }
    if (pos != end) {
        tr_errf(err, errlen, "%s: %u unexplained bytes after the blob records", path, end - pos);
        goto fail;
    }
    return 0;
fail:
    ckpt_shard_header_free(h);
    return -1;
}
