/* One rank's shard: checks the blobs, then writes header and data to a temporary file, fsync,
 * rename to shard_<rank>.bin, fsync of the directory. A crash at any point leaves either no shard
 * or a complete one (and the commit re-checks it anyway). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

#define WRITE_CHUNK ((size_t)64 << 20) /* one write call; a test's io counts each as a step */

static int check_name(const char *name, int i, char *err, size_t errlen) {
    size_t n = name ? strlen(name) : 0;
    if (n == 0 || n > CKPT_NAME_MAX)
        return tr_errf(err, errlen, "blob %d: name must have 1..%d bytes", i, CKPT_NAME_MAX);
    for (size_t k = 0; k < n; k++)
        if (name[k] < 0x20 || name[k] > 0x7e)
            return tr_errf(err, errlen, "blob %d ('%.40s'): names are printable ASCII", i, name);
    return 0;
}

static int describe(ckpt_blob_desc *d, const ckpt_blob *b, int i, char *err, size_t errlen) {
    if (check_name(b->name, i, err, errlen)) return -1;
    if (ckpt_dtype_size(b->dtype) == 0) return tr_errf(err, errlen, "blob '%s': unknown dtype %d", b->name, b->dtype);
    if (b->ndim < 0 || b->ndim > CKPT_MAX_DIMS)
        return tr_errf(err, errlen, "blob '%s': %d dimensions (0..%d)", b->name, b->ndim, CKPT_MAX_DIMS);
    strcpy(d->name, b->name);
    d->dtype = b->dtype, d->ndim = b->ndim;
    memcpy(d->shape, b->shape, sizeof d->shape);
    d->place = b->place;
    if (ckpt_place_resolve(&d->place, d->shape, d->ndim, b->name, err, errlen)) return -1;
    d->nbytes = (uint64_t)d->place.n * ckpt_dtype_size(d->dtype);
    if (d->nbytes && !b->data) return tr_errf(err, errlen, "blob '%s': no data", b->name);
    d->crc32 = d->nbytes ? ckpt_crc32(0, b->data, d->nbytes) : 0;
    return 0;
}

static int write_file(const ckpt_io *io, int fd, const char *tmp, const ckpt_shard_header *h, const uint8_t *hdr,
                      const ckpt_blob *blobs, uint32_t *crc, char *err, size_t errlen) {
    static const uint8_t zeros[CKPT_ALIGN];
    uint64_t done = 0, total = h->file_size;
    uint32_t c = 0;
#define PUT(ptr, len)                                                                                                  \
    do {                                                                                                               \
        if (ckpt_write_all(io, fd, (ptr), (len), tmp, done, total, err, errlen)) return -1;                            \
        c = ckpt_crc32(c, (ptr), (len));                                                                               \
        done += (len);                                                                                                 \
    } while (0)
    PUT(hdr, h->header_len);
    for (int i = 0; i <= h->n; i++) {
        uint64_t at = i < h->n ? h->blobs[i].offset : h->file_size;
        if (at - done > 0) PUT(zeros, (size_t)(at - done));
        if (i == h->n) break;
        const uint8_t *p = blobs[i].data;
        for (uint64_t k = 0; k < h->blobs[i].nbytes; k += WRITE_CHUNK) {
            size_t len = h->blobs[i].nbytes - k < WRITE_CHUNK ? (size_t)(h->blobs[i].nbytes - k) : WRITE_CHUNK;
            PUT(p + k, len);
        }
    }
#undef PUT
    *crc = c;
    return 0;
}

int ckpt_shard_write(const ckpt_io *io, const char *dir, int64_t iteration, const ckpt_layout *layout,
                     const ckpt_coords *rank, const ckpt_blob *blobs, int n, ckpt_file_info *info, char *err,
                     size_t errlen) {
    if (!io) io = ckpt_io_posix();
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    if (iteration < 0) return tr_errf(err, errlen, "iteration %lld is negative", (long long)iteration);
    if (n < 0 || n > CKPT_MAX_BLOBS) return tr_errf(err, errlen, "%d blobs (0..%d)", n, CKPT_MAX_BLOBS);
    int world = ckpt_layout_world(layout);
    ckpt_coords want =
        rank->rank >= 0 && rank->rank < world ? ckpt_coords_of(layout, rank->rank) : (ckpt_coords){.rank = -1};
    if (world <= 0 || want.rank < 0 || memcmp(&want, rank, sizeof want) != 0)
        return tr_errf(err, errlen, "rank %d (tp%d pp%d dp%d cp%d) does not fit layout tp%d pp%d dp%d cp%d", rank->rank,
                       rank->tp, rank->pp, rank->dp, rank->cp, layout->tp, layout->pp, layout->dp, layout->cp);
    ckpt_shard_header h = {.iteration = iteration, .coords = *rank, .layout = *layout, .n = n};
    h.blobs = n ? calloc((size_t)n, sizeof *h.blobs) : NULL;
    if (n && !h.blobs) return tr_errf(err, errlen, "out of host memory for %d blob descriptions", n);
    char idir[TR_CKPT_PATH_MAX], name[CKPT_FILE_NAME_LEN], path[TR_CKPT_PATH_MAX], tmp[TR_CKPT_PATH_MAX];
    uint8_t *hdr = NULL;
    int fd = -1, rc = -1;
    tmp[0] = '\0';
    for (int i = 0; i < n; i++)
        if (describe(&h.blobs[i], &blobs[i], i, err, errlen)) goto out;
    h.header_len = ckpt_shard_header_size(h.blobs, n);
    if (!h.header_len) {
        tr_errf(err, errlen, "rank %d: %d blob descriptions exceed the %u-byte header limit", rank->rank, n,
                CKPT_MAX_HEADER_LEN);
        goto out;
    }
    uint64_t at = (h.header_len + CKPT_ALIGN - 1) / CKPT_ALIGN * CKPT_ALIGN;
    for (int i = 0; i < n; i++) {
        h.blobs[i].offset = at;
        at = (at + h.blobs[i].nbytes + CKPT_ALIGN - 1) / CKPT_ALIGN * CKPT_ALIGN;
    }
    h.file_size = n ? h.blobs[n - 1].offset + h.blobs[n - 1].nbytes : at;
    uint32_t hlen;
    hdr = ckpt_shard_header_encode(&h, &hlen);
    if (!hdr) {
        tr_errf(err, errlen, "out of host memory for the shard header");
        goto out;
    }
    ckpt_put_u32(hdr + hlen - 4, ckpt_crc32(0, hdr, hlen - 4));
    ckpt_iter_dir(idir, sizeof idir, dir, iteration);
    ckpt_shard_name(name, sizeof name, rank->rank);
    ckpt_pathf(path, sizeof path, "%s/%s", idir, name);
    ckpt_pathf(tmp, sizeof tmp, "%s.tmp", path);
    fd = io->open(io->ctx, tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) {
        ckpt_io_err("open", tmp, errno, err, errlen);
        goto out;
    }
    uint32_t crc;
    if (write_file(io, fd, tmp, &h, hdr, blobs, &crc, err, errlen)) goto out;
    if (io->fsync(io->ctx, fd)) {
        ckpt_io_err("fsync", tmp, errno, err, errlen);
        goto out;
    }
    int cfd = fd;
    fd = -1;
    if (io->close(io->ctx, cfd)) {
        ckpt_io_err("close", tmp, errno, err, errlen);
        goto out;
    }
    if (io->rename(io->ctx, tmp, path)) {
        ckpt_io_err("rename to its final name", tmp, errno, err, errlen);
        goto out;
    }
    tmp[0] = '\0'; /* renamed: nothing to clean up */
    if (io->fsync_dir(io->ctx, idir)) {
        ckpt_io_err("fsync", idir, errno, err, errlen);
        goto out;
    }
    if (info) {
        memset(info, 0, sizeof *info);
        strcpy(info->name, name);
        info->size = h.file_size, info->crc32 = crc;
    }
    rc = 0;
out:
    if (fd >= 0) io->close(io->ctx, fd);
    if (rc && tmp[0]) io->unlink(io->ctx, tmp);
    free(hdr);
    ckpt_shard_header_free(&h);
    return rc;
}
