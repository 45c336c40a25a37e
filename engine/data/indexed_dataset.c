/* IndexedDataset reader and writer (see indexed_dataset.h). */
#include "data/indexed_dataset.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safe_file.h"
#include "twinrun/err.h"

#define HEADER_LEN 34
static const unsigned char MAGIC[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};

struct tr_idx_dataset {
    char prefix[1024];
    int code, itemsize;
    int64_t S, D;
    int32_t *lengths;  /* [S] */
    int64_t *pointers; /* [S] */
    int64_t *docs;     /* [D] */
    int8_t *modes;     /* [S] or NULL */
    int64_t bin_size;
    int bin_fd;                   /* -1 when parsed from memory */
    const unsigned char *bin_map; /* [bin_size] when mmapped */
};

int tr_idx_itemsize(int code) {
    static const int sz[9] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
    return code >= 1 && code <= 8 ? sz[code] : 0;
}
const char *tr_idx_dtype_name(int code) {
    static const char *const nm[9] = {"?", "uint8", "int8", "int16", "int32", "int64", "float64", "float32", "uint16"};
    return code >= 1 && code <= 8 ? nm[code] : "unknown";
}
int tr_idx_optimal_code(int64_t vocab_size) { return vocab_size < 65500 ? TR_IDX_UINT16 : TR_IDX_INT32; }

static uint64_t le64(const unsigned char *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

tr_idx_dataset *tr_idx_parse(const void *idx, size_t len, int64_t bin_size, const char *what, char *err,
                             size_t errlen) {
    const unsigned char *b = idx;
    if (len < HEADER_LEN) {
        tr_errf(err, errlen, "%s: .idx is %zu bytes, shorter than the 34-byte header", what, len);
        return NULL;
    }
    if (memcmp(b, MAGIC, 9) != 0) {
        tr_errf(err, errlen, "%s: not a Megatron .idx file (magic is not MMIDIDX)", what);
        return NULL;
    }
    uint64_t version = le64(b + 9);
    if (version != 1) {
        tr_errf(err, errlen, "%s: .idx version %llu is not supported (only 1)", what, (unsigned long long)version);
        return NULL;
    }
    int code = b[17];
    if (!tr_idx_itemsize(code)) {
        tr_errf(err, errlen, "%s: unknown dtype code %d in .idx (expected 1..8)", what, code);
        return NULL;
    }
    uint64_t S = le64(b + 18), D = le64(b + 26);
    uint64_t room = len - HEADER_LEN;
    /* overflow-safe: each sequence needs 12 bytes, each document entry 8 */
    if (S > room / 12 || D > (room - 12 * S) / 8) {
        tr_errf(err, errlen,
                "%s: .idx claims %llu sequences and %llu document entries, which need more than its %zu bytes", what,
                (unsigned long long)S, (unsigned long long)D, len);
        return NULL;
    }
    uint64_t base = HEADER_LEN + 12 * S + 8 * D;
    int has_modes;
    if (len == base) has_modes = 0;
    else if (len == base + S) has_modes = 1;
    else {
        tr_errf(err, errlen,
                "%s: .idx is %zu bytes but %llu sequences and %llu document entries need %llu (or %llu with "
                "sequence modes)",
                what, len, (unsigned long long)S, (unsigned long long)D, (unsigned long long)base,
                (unsigned long long)(base + S));
        return NULL;
    }
    if (D < 1) {
        tr_errf(err, errlen, "%s: .idx has no document index (document count 0; it must hold at least [0])", what);
        return NULL;
    }
    tr_idx_dataset *d = calloc(1, sizeof *d);
    if (!d) {
        tr_errf(err, errlen, "%s: out of memory", what);
        return NULL;
    }
    snprintf(d->prefix, sizeof d->prefix, "%s", what);
    d->code = code;
    d->itemsize = tr_idx_itemsize(code);
    d->S = (int64_t)S;
    d->D = (int64_t)D;
    d->bin_fd = -1;
    d->bin_size = bin_size;
    d->lengths = malloc(S * 4 + 1);
    d->pointers = malloc(S * 8 + 1);
    d->docs = malloc(D * 8);
    d->modes = has_modes ? malloc(S + 1) : NULL;
    if (!d->lengths || !d->pointers || !d->docs || (has_modes && !d->modes)) {
        tr_errf(err, errlen, "%s: out of memory for the index of %llu sequences", what, (unsigned long long)S);
        tr_idx_close(d);
        return NULL;
    }
    /* memcpy: the arrays sit at unaligned offsets (34 + ...) and the host is little-endian x86-64 */
    memcpy(d->lengths, b + HEADER_LEN, S * 4);
    memcpy(d->pointers, b + HEADER_LEN + 4 * S, S * 8);
    memcpy(d->docs, b + HEADER_LEN + 12 * S, D * 8);
    if (has_modes) memcpy(d->modes, b + base, S);
    for (int64_t i = 0; i < d->S; i++) {
        int64_t l = d->lengths[i], p = d->pointers[i];
        if (l < 0) {
            tr_errf(err, errlen, "%s: sequence %lld has negative length %lld", what, (long long)i, (long long)l);
            goto fail;
        }
        if (p < 0 || p % d->itemsize != 0 || p > bin_size || l > (bin_size - p) / d->itemsize) {
            tr_errf(err, errlen,
                    "%s: sequence %lld (pointer %lld, %lld tokens of %d bytes) lies outside the %lld-byte .bin", what,
                    (long long)i, (long long)p, (long long)l, d->itemsize, (long long)bin_size);
            goto fail;
        }
    }
    if (d->docs[0] != 0) {
        tr_errf(err, errlen, "%s: document index starts at %lld, expected 0", what, (long long)d->docs[0]);
        goto fail;
    }
    for (int64_t i = 1; i < d->D; i++)
        if (d->docs[i] < d->docs[i - 1]) {
            tr_errf(err, errlen, "%s: document index decreases at entry %lld (%lld after %lld)", what, (long long)i,
                    (long long)d->docs[i], (long long)d->docs[i - 1]);
            goto fail;
        }
    if (d->docs[d->D - 1] != d->S) {
        tr_errf(err, errlen, "%s: document index ends at %lld but there are %lld sequences", what,
                (long long)d->docs[d->D - 1], (long long)d->S);
        goto fail;
    }
    return d;
fail:
    tr_idx_close(d);
    return NULL;
}

static int read_file(const char *path, unsigned char **buf, size_t *len, char *err, size_t errlen) {
    char why[256];
    int fd = tr_safe_open_regular(path, why, sizeof why); /* a FIFO there would block the open */
    if (fd < 0) return tr_errf(err, errlen, "%s: cannot open: %s", path, why);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return tr_errf(err, errlen, "%s: cannot stat: %s", path, strerror(errno));
    }
    *len = (size_t)st.st_size;
    *buf = malloc(*len + 1);
    if (!*buf) {
        close(fd);
        return tr_errf(err, errlen, "%s: out of memory for %zu bytes", path, *len);
    }
    size_t got = 0;
    while (got < *len) {
        ssize_t r = read(fd, *buf + got, *len - got);
        if (r <= 0) {
            close(fd);
            free(*buf);
            return tr_errf(err, errlen, "%s: read failed: %s", path, r < 0 ? strerror(errno) : "unexpected end");
        }
        got += (size_t)r;
    }
    close(fd);
    return 0;
}

tr_idx_dataset *tr_idx_open(const char *prefix, bool use_mmap, char *err, size_t errlen) {
    char ipath[1100], bpath[1100];
    if (snprintf(ipath, sizeof ipath, "%s.idx", prefix) >= (int)sizeof ipath ||
        snprintf(bpath, sizeof bpath, "%s.bin", prefix) >= (int)sizeof bpath) {
        tr_errf(err, errlen, "%s: path too long", prefix);
        return NULL;
    }
    char why[256];
    int fd = tr_safe_open_regular(bpath, why, sizeof why);
    if (fd < 0) {
        tr_errf(err, errlen,
                "%s: cannot open the token file: %s (a dataset is <prefix>.bin + <prefix>.idx; pass "
                "the prefix to --data-path)",
                bpath, why);
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        tr_errf(err, errlen, "%s: cannot stat: %s", bpath, strerror(errno));
        close(fd);
        return NULL;
    }
    unsigned char *ibuf = NULL;
    size_t ilen = 0;
    if (read_file(ipath, &ibuf, &ilen, err, errlen)) {
        close(fd);
        return NULL;
    }
    tr_idx_dataset *d = tr_idx_parse(ibuf, ilen, (int64_t)st.st_size, prefix, err, errlen);
    free(ibuf);
    if (!d) {
        close(fd);
        return NULL;
    }
    d->bin_fd = fd;
    if (use_mmap && st.st_size > 0) {
        void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED) {
            tr_errf(err, errlen, "%s: mmap failed: %s (try --no-mmap-bin-files)", bpath, strerror(errno));
            tr_idx_close(d);
            return NULL;
        }
        d->bin_map = m;
    }
    return d;
}

void tr_idx_close(tr_idx_dataset *d) {
    if (!d) return;
    if (d->bin_map) munmap((void *)d->bin_map, (size_t)d->bin_size);
    if (d->bin_fd >= 0) close(d->bin_fd);
    free(d->lengths);
    free(d->pointers);
    free(d->docs);
    free(d->modes);
    free(d);
}

int tr_idx_dtype(const tr_idx_dataset *d) { return d->code; }
int64_t tr_idx_num_sequences(const tr_idx_dataset *d) { return d->S; }
int64_t tr_idx_num_documents(const tr_idx_dataset *d) { return d->D - 1; }
const int32_t *tr_idx_lengths(const tr_idx_dataset *d) { return d->lengths; }
const int64_t *tr_idx_pointers(const tr_idx_dataset *d) { return d->pointers; }
const int8_t *tr_idx_modes(const tr_idx_dataset *d) { return d->modes; }

/* Widens n little-endian items of dtype code to int64 (float dtypes truncate, as numpy's
 * astype(int64) after torch.from_numpy(...).long() would). */
static void widen(int code, const unsigned char *src, int64_t n, int64_t *out) {
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *p = src + i * tr_idx_itemsize(code);
        switch (code) {
        case TR_IDX_UINT8: out[i] = p[0]; break;
        case TR_IDX_INT8: out[i] = (int8_t)p[0]; break;
        case TR_IDX_INT16: {
            int16_t v;
            memcpy(&v, p, 2);
            out[i] = v;
        } break;
        case TR_IDX_UINT16: {
            uint16_t v;
            memcpy(&v, p, 2);
            out[i] = v;
        } break;
        case TR_IDX_INT32: {
            int32_t v;
            memcpy(&v, p, 4);
            out[i] = v;
        } break;
        case TR_IDX_INT64: {
            int64_t v;
            memcpy(&v, p, 8);
            out[i] = v;
        } break;
        case TR_IDX_FLOAT32: {
            float v;
            memcpy(&v, p, 4);
            out[i] = isfinite(v) && fabsf(v) < 9e18f ? (int64_t)v : -1;
        } break;
        default: {
            double v;
            memcpy(&v, p, 8);
            out[i] = isfinite(v) && fabs(v) < 9e18 ? (int64_t)v : -1;
        } break;
        }
    }
}

int tr_idx_read(const tr_idx_dataset *d, int64_t seq, int64_t offset, int64_t count, int64_t *out, char *err,
                size_t errlen) {
    if (seq < 0 || seq >= d->S || offset < 0 || count < 0 || offset > d->lengths[seq] ||
        count > d->lengths[seq] - offset)
        return tr_errf(err, errlen, "%s: read of sequence %lld [%lld, +%lld) is out of range", d->prefix,
                       (long long)seq, (long long)offset, (long long)count);
    int64_t pos = d->pointers[seq] + offset * d->itemsize;
    if (d->bin_map) {
        widen(d->code, d->bin_map + pos, count, out);
        return 0;
    }
    if (d->bin_fd < 0) return tr_errf(err, errlen, "%s: no .bin attached", d->prefix);
    /* --no-mmap-bin-files: pread in chunks through a stack buffer */
    unsigned char buf[8192];
    int64_t per = (int64_t)sizeof buf / d->itemsize, done = 0;
    while (done < count) {
        int64_t chunk = count - done < per ? count - done : per;
        size_t want = (size_t)(chunk * d->itemsize), got = 0;
        while (got < want) {
            ssize_t r = pread(d->bin_fd, buf + got, want - got, (off_t)(pos + done * d->itemsize + (int64_t)got));
            if (r <= 0)
                return tr_errf(err, errlen, "%s.bin: read failed at byte %lld: %s", d->prefix, (long long)pos,
                               r < 0 ? strerror(errno) : "file shrank");
            got += (size_t)r;
        }
        widen(d->code, buf, chunk, out + done);
        done += chunk;
    }
    return 0;
}

/* ---- writer -------------------------------------------------------------------------------- */

struct tr_idx_writer {
    char prefix[1024];
    int code, itemsize;
    tr_safe_file bin, idx; /* PREFIX.bin and .idx under temporary names until the finish */
    int32_t *lengths;      /* [n, cap] */
    int64_t n, cap;
    int64_t *doc_end; /* [ndoc, dcap]: sequences written when each document ended */
    int64_t ndoc, dcap;
    int64_t bytes;
};

int tr_idx_writer_check_new(const char *prefix, char *err, size_t errlen) {
    char path[1100];
    struct stat st;
    snprintf(path, sizeof path, "%s.bin", prefix);
    bool bin = lstat(path, &st) == 0;
    snprintf(path, sizeof path, "%s.idx", prefix);
    bool idx = lstat(path, &st) == 0;
    if (bin && idx)
        return tr_errf(err, errlen,
                       "%s.bin and %s.idx already exist (a complete dataset): pass --overwrite to replace it, or give "
                       "another --output-prefix",
                       prefix, prefix);
    if (!bin && !idx) return 0;
    return tr_errf(err, errlen, "%s.%s already exists: pass --overwrite to replace it, or give another --output-prefix",
                   prefix, bin ? "bin" : "idx");
}

tr_idx_writer *tr_idx_writer_open(const char *prefix, int code, bool overwrite, char *err, size_t errlen) {
    if (!tr_idx_itemsize(code) || code == TR_IDX_FLOAT32 || code == TR_IDX_FLOAT64) {
        tr_errf(err, errlen, "dtype code %d is not an integer token dtype", code);
        return NULL;
    }
    if (!overwrite && tr_idx_writer_check_new(prefix, err, errlen)) return NULL;
    tr_idx_writer *w = calloc(1, sizeof *w);
    if (!w) {
        tr_errf(err, errlen, "out of memory");
        return NULL;
    }
    snprintf(w->prefix, sizeof w->prefix, "%s", prefix);
    w->code = code;
    w->itemsize = tr_idx_itemsize(code);
    char path[1100];
    snprintf(path, sizeof path, "%s.bin", prefix);
    int rc = tr_safe_open(&w->bin, path, overwrite, NULL, err, errlen);
    snprintf(path, sizeof path, "%s.idx", prefix);
    if (!rc) rc = tr_safe_open(&w->idx, path, overwrite, NULL, err, errlen);
    if (rc) {
        tr_idx_writer_abort(w);
        return NULL;
    }
    return w;
}

int tr_idx_writer_add_sequence(tr_idx_writer *w, const int64_t *tokens, int64_t n, char *err, size_t errlen) {
    static const int64_t lo[9] = {0, 0, -128, -32768, INT32_MIN, INT64_MIN, 0, 0, 0};
    static const int64_t hi[9] = {0, 255, 127, 32767, INT32_MAX, INT64_MAX, 0, 0, 65535};
    if (n > INT32_MAX) return tr_errf(err, errlen, "document of %lld tokens exceeds int32 lengths", (long long)n);
    for (int64_t i = 0; i < n; i++)
        if (tokens[i] < lo[w->code] || tokens[i] > hi[w->code])
            return tr_errf(err, errlen, "token %lld does not fit the %s .bin dtype (use a larger --vocab-size/dtype)",
                           (long long)tokens[i], tr_idx_dtype_name(w->code));
    if (w->n == w->cap) {
        int64_t nc = w->cap ? 2 * w->cap : 1024;
        int32_t *nl = realloc(w->lengths, (size_t)nc * 4);
        if (!nl) return tr_errf(err, errlen, "out of memory");
        w->lengths = nl;
        w->cap = nc;
    }
    unsigned char buf[8];
    for (int64_t i = 0; i < n; i++) {
        uint64_t v = (uint64_t)tokens[i];
        for (int k = 0; k < w->itemsize; k++) buf[k] = (unsigned char)(v >> (8 * k));
        if (fwrite(buf, 1, (size_t)w->itemsize, w->bin.f) != (size_t)w->itemsize)
            return tr_errf(err, errlen, "%s.bin: write failed: %s", w->prefix, strerror(errno));
    }
    w->lengths[w->n++] = (int32_t)n;
    w->bytes += n * w->itemsize;
    return 0;
}

int tr_idx_writer_end_document(tr_idx_writer *w, char *err, size_t errlen) {
    if (w->ndoc == w->dcap) {
        int64_t nc = w->dcap ? 2 * w->dcap : 1024;
        int64_t *nd = realloc(w->doc_end, (size_t)nc * sizeof *nd);
        if (!nd) return tr_errf(err, errlen, "out of memory");
        w->doc_end = nd;
        w->dcap = nc;
    }
    w->doc_end[w->ndoc++] = w->n;
    return 0;
}

int tr_idx_writer_add(tr_idx_writer *w, const int64_t *tokens, int64_t n, char *err, size_t errlen) {
    if (tr_idx_writer_add_sequence(w, tokens, n, err, errlen)) return -1;
    return tr_idx_writer_end_document(w, err, errlen);
}

void tr_idx_writer_abort(tr_idx_writer *w) {
    if (!w) return;
    tr_safe_abort(&w->bin);
    tr_safe_abort(&w->idx);
    free(w->lengths);
    free(w->doc_end);
    free(w);
}

static int put64(FILE *f, uint64_t v) {
    unsigned char b[8];
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)(v >> (8 * k));
    return fwrite(b, 1, 8, f) == 8;
}

int tr_idx_writer_close(tr_idx_writer *w, char *err, size_t errlen) {
    FILE *f = w->idx.f;
    unsigned char code = (unsigned char)w->code;
    int ok = fwrite(MAGIC, 1, 9, f) == 9 && put64(f, 1) && fwrite(&code, 1, 1, f) == 1 && put64(f, (uint64_t)w->n) &&
             put64(f, (uint64_t)w->ndoc + 1) && fwrite(w->lengths, 4, (size_t)w->n, f) == (size_t)w->n;
    int64_t p = 0;
    for (int64_t i = 0; ok && i < w->n; i++) {
        ok = put64(f, (uint64_t)p);
        p += (int64_t)w->lengths[i] * w->itemsize;
    }
    ok = ok && put64(f, 0);
    for (int64_t i = 0; ok && i < w->ndoc; i++) ok = put64(f, (uint64_t)w->doc_end[i]);
    if (!ok) return tr_errf(err, errlen, "%s.idx: write failed: %s", w->prefix, strerror(errno));
    if (tr_safe_close(&w->bin, err, errlen) || tr_safe_close(&w->idx, err, errlen)) return -1;
    return 0;
}

int tr_idx_writer_commit(tr_idx_writer *w, char *err, size_t errlen) {
    /* the .idx last: a reader that finds it finds the .bin it describes */
    int rc = tr_safe_rename(&w->bin, err, errlen);
    if (!rc) rc = tr_safe_rename(&w->idx, err, errlen);
    tr_idx_writer_abort(w);
    return rc;
}

int tr_idx_writer_finish(tr_idx_writer *w, char *err, size_t errlen) {
    if (tr_idx_writer_close(w, err, errlen)) {
        tr_idx_writer_abort(w);
        return -1;
    }
    return tr_idx_writer_commit(w, err, errlen);
}
