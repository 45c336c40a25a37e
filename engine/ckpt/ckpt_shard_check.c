/* Reading a shard back: its header (CRC first, then the structure), the whole file against its
 * blob CRCs, and the check that the shards of a checkpoint cover every tensor they name. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

static int read_at(int fd, void *buf, size_t n, uint64_t off) {
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t k = pread(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        p += k, n -= (size_t)k, off += (uint64_t)k;
    }
    return 0;
}

int ckpt_shard_header_load(ckpt_shard_header *h, const char *path, char *err, size_t errlen) {
    memset(h, 0, sizeof *h);
    int fd = ckpt_open_read(path, err, errlen);
    if (fd < 0) return -1;
    uint8_t fixed[16];
    uint8_t *buf = NULL;
    int rc = -1;
    if (read_at(fd, fixed, sizeof fixed, 0)) {
        tr_errf(err, errlen, "%s: shorter than a shard header; the file is truncated", path);
        goto out;
    }
    uint32_t hl = ckpt_get_u32(fixed + 12);
    if (memcmp(fixed, CKPT_MAGIC, 8) != 0) {
        tr_errf(err, errlen, "%s: not a twinrun checkpoint shard (bad magic)", path);
        goto out;
    }
    if (hl < CKPT_FIXED_LEN + 4 || hl > CKPT_MAX_HEADER_LEN) {
        tr_errf(err, errlen, "%s: header length %u is corrupt", path, hl);
        goto out;
    }
    buf = malloc(hl);
    if (!buf || read_at(fd, buf, hl, 0)) {
        tr_errf(err, errlen, buf ? "%s: the header is truncated" : "%s: out of host memory", path);
        goto out;
    }
    uint32_t stored = ckpt_get_u32(buf + hl - 4), computed = ckpt_crc32(0, buf, hl - 4);
    if (stored != computed) {
        tr_errf(err, errlen, "%s: header checksum mismatch (stored %08x, computed %08x); the file is corrupt", path,
                stored, computed);
        goto out;
    }
    rc = ckpt_shard_header_parse(h, buf, hl, path, err, errlen);
out:
    free(buf);
    close(fd);
    return rc;
}

/* Reads the file once: its CRC, and each blob's CRC compared with the header's. */
static int check_data(const char *path, const ckpt_shard_header *h, uint32_t *file_crc, char *err, size_t errlen) {
    int fd = ckpt_open_read(path, err, errlen);
    if (fd < 0) return -1;
    /* no bigger than the file: small shards (tests, valgrind) should not pay for 8 MiB buffers */
    const size_t CHUNK = h->file_size < ((size_t)8 << 20) ? (size_t)h->file_size + 1 : ((size_t)8 << 20);
    uint8_t *buf = malloc(CHUNK);
    int rc = buf ? 0 : tr_errf(err, errlen, "%s: out of host memory", path);
    uint32_t c = 0, bc = 0;
    int b = 0; /* the blob being summed; blobs are in offset order */
    for (uint64_t pos = 0; !rc && pos < h->file_size;) {
        size_t n = h->file_size - pos < CHUNK ? (size_t)(h->file_size - pos) : CHUNK;
        if (read_at(fd, buf, n, pos)) {
            rc = tr_errf(err, errlen, "%s: read failed at byte %llu", path, (unsigned long long)pos);
            break;
        }
        c = ckpt_crc32(c, buf, n);
        for (uint64_t end = pos + n; b < h->n;) {
            const ckpt_blob_desc *d = &h->blobs[b];
            uint64_t lo = d->offset > pos ? d->offset : pos,
                     hi = d->offset + d->nbytes < end ? d->offset + d->nbytes : end;
            if (lo < hi) bc = ckpt_crc32(bc, buf + (lo - pos), (size_t)(hi - lo));
            if (d->offset + d->nbytes > end) break; /* continues in the next chunk */
            if (bc != d->crc32) {
                rc = tr_errf(err, errlen,
                             "%s: blob '%s' checksum mismatch (stored %08x, computed %08x); the file is corrupt", path,
                             d->name, d->crc32, bc);
                break;
            }
            bc = 0, b++;
        }
        pos += n;
    }
    free(buf);
    close(fd);
    if (!rc) *file_crc = c;
    return rc;
}

int ckpt_shard_check(const char *path, int64_t iteration, const ckpt_layout *layout, int rank, int full,
                     ckpt_file_info *info, ckpt_shard_header *h_out, char *err, size_t errlen) {
    struct stat st;
    if (stat(path, &st)) {
        if (errno == ENOENT)
            return tr_errf(err, errlen, "%s: missing; rank %d never finished writing its shard", path, rank);
        return ckpt_io_err("stat", path, errno, err, errlen);
    }
    ckpt_shard_header h;
    if (ckpt_shard_header_load(&h, path, err, errlen)) return -1;
    int rc = 0;
    if (h.iteration != iteration)
        rc = tr_errf(err, errlen, "%s: belongs to iteration %lld, not %lld (a stale shard)", path,
                     (long long)h.iteration, (long long)iteration);
    else if (h.coords.rank != rank)
        rc = tr_errf(err, errlen, "%s: holds rank %d's shard, expected rank %d", path, h.coords.rank, rank);
    else if (h.layout.tp != layout->tp || h.layout.pp != layout->pp || h.layout.dp != layout->dp ||
             h.layout.cp != layout->cp || h.layout.dist_opt != layout->dist_opt)
        rc = tr_errf(err, errlen,
                     "%s: written with layout tp%d pp%d dp%d cp%d%s, the manifest says tp%d pp%d dp%d cp%d%s", path,
                     h.layout.tp, h.layout.pp, h.layout.dp, h.layout.cp, h.layout.dist_opt ? " dist-opt" : "",
                     layout->tp, layout->pp, layout->dp, layout->cp, layout->dist_opt ? " dist-opt" : "");
    else if ((uint64_t)st.st_size != h.file_size)
        rc = tr_errf(err, errlen, "%s: %llu bytes, the header says %llu; the file is %s", path,
                     (unsigned long long)st.st_size, (unsigned long long)h.file_size,
                     (uint64_t)st.st_size < h.file_size ? "truncated" : "followed by stray bytes");
    uint32_t crc = 0;
    if (!rc && full) rc = check_data(path, &h, &crc, err, errlen);
    if (!rc && info) {
        memset(info, 0, sizeof *info);
        const char *base = strrchr(path, '/');
        snprintf(info->name, sizeof info->name, "%s", base ? base + 1 : path);
        info->size = h.file_size, info->crc32 = crc;
    }
    if (!rc && h_out) *h_out = h;
    else ckpt_shard_header_free(&h);
    return rc;
}
