/* safetensors writer: tensors laid out in insertion order, written atomically so that a crash
 * mid-export never leaves a half-written file under the final name. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "io/safetensors_internal.h"
#include "twinrun/err.h"

typedef struct st_item {
    char *name;
    st_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    uint8_t *data;
    uint64_t bytes;
} st_item;

struct st_writer {
    int n, cap;
    st_item *items;
    uint64_t total;
};

typedef struct st_text {
    char *p;
    size_t len, cap;
    bool oom;
} st_text;

static void text_put(st_text *t, const char *s, size_t n) {
    if (t->oom) return;
    if (t->len + n + 1 > t->cap) {
        size_t cap = t->cap ? t->cap : 4096;
        while (cap < t->len + n + 1) cap *= 2;
        char *np = realloc(t->p, cap);
        if (!np) {
            t->oom = true;
            return;
        }
        t->p = np;
        t->cap = cap;
    }
    memcpy(t->p + t->len, s, n);
    t->len += n;
    t->p[t->len] = '\0';
}

static void text_str(st_text *t, const char *s) { text_put(t, s, strlen(s)); }

static void text_u64(st_text *t, uint64_t v) {
    char buf[24];
    snprintf(buf, sizeof buf, "%" PRIu64, v);
    text_str(t, buf);
}

/* A JSON string literal; names are already known to be UTF-8, so only quotes, backslashes and
 * control characters need escaping. */
static void text_json_string(st_text *t, const char *s) {
    text_put(t, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            text_put(t, esc, 2);
        } else if (c < 0x20) {
            char esc[8];
            snprintf(esc, sizeof esc, "\\u%04x", c);
            text_str(t, esc);
        } else {
            text_put(t, (const char *)&c, 1);
        }
    }
    text_put(t, "\"", 1);
}

st_writer *st_writer_new(void) { return calloc(1, sizeof(st_writer)); }

void st_writer_free(st_writer *w) {
    if (!w) return;
    for (int i = 0; i < w->n; i++) {
        free(w->items[i].name);
        free(w->items[i].data);
    }
    free(w->items);
    free(w);
}

uint64_t st_writer_data_bytes(const st_writer *w) { return w->total; }

int st_writer_add(st_writer *w, const char *name, st_dtype dtype, const int64_t *shape, int ndim, const void *data,
                  char *err, size_t errlen) {
    if (!name || !name[0] || !st_utf8_valid((const uint8_t *)name, strlen(name), NULL))
        return tr_errf(err, errlen,
                       "safetensors writer: tensor name '%s' is empty or not UTF-8; give it a "
                       "Hugging Face name such as model.norm.weight",
                       name ? name : "(null)");
    if (strcmp(name, "__metadata__") == 0)
        return tr_errf(err, errlen,
                       "safetensors writer: '__metadata__' is reserved for the header's metadata map "
                       "and cannot name a tensor");
    size_t item_size = st_dtype_size(dtype);
    if (item_size == 0)
        return tr_errf(err, errlen, "safetensors writer: tensor '%s': dtype value %d is not an st_dtype", name,
                       (int)dtype);
    if (ndim < 0 || ndim > ST_MAX_DIMS)
        return tr_errf(err, errlen, "safetensors writer: tensor '%s': %d dimensions; 0 to %d are allowed", name, ndim,
                       ST_MAX_DIMS);
    uint64_t bytes = item_size;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return tr_errf(err, errlen, "safetensors writer: tensor '%s': dimension %d is %" PRId64 ", negative", name,
                           i, shape[i]);
        if (shape[i] != 0 && bytes > (uint64_t)SIZE_MAX / (uint64_t)shape[i])
            return tr_errf(err, errlen, "safetensors writer: tensor '%s': its size overflows", name);
        bytes *= (uint64_t)shape[i];
    }
    if (bytes && !data) return tr_errf(err, errlen, "safetensors writer: tensor '%s': data is NULL", name);
    for (int i = 0; i < w->n; i++)
        if (strcmp(w->items[i].name, name) == 0)
            return tr_errf(err, errlen, "safetensors writer: tensor '%s' was already added; names must be unique",
                           name);
    if (w->n == w->cap) {
        int cap = w->cap ? w->cap * 2 : 64;
        st_item *ni = realloc(w->items, (size_t)cap * sizeof *ni);
        if (!ni) return tr_errf(err, errlen, "safetensors writer: out of memory adding '%s'", name);
        w->items = ni;
        w->cap = cap;
    }
    st_item *it = &w->items[w->n];
    memset(it, 0, sizeof *it);
    it->name = strdup(name);
    it->data = malloc(bytes ? (size_t)bytes : 1);
    if (!it->name || !it->data) {
        free(it->name);
        free(it->data);
        return tr_errf(err, errlen, "safetensors writer: out of memory copying '%s' (%" PRIu64 " bytes)", name, bytes);
    }
    if (bytes) memcpy(it->data, data, (size_t)bytes);
    it->dtype = dtype;
    it->ndim = ndim;
    for (int i = 0; i < ndim; i++) it->shape[i] = shape[i];
    it->bytes = bytes;
    w->total += bytes;
    w->n++;
    return 0;
}

/* The JSON header, space-padded so that 8 + its length is a multiple of 8. */
static int build_header(const st_writer *w, st_text *t, const char *path, char *err, size_t errlen) {
    text_str(t, "{\"__metadata__\":{\"format\":\"pt\"}");
    uint64_t off = 0;
    for (int i = 0; i < w->n; i++) {
        const st_item *it = &w->items[i];
        text_str(t, ",");
        text_json_string(t, it->name);
        text_str(t, ":{\"dtype\":\"");
        text_str(t, st_dtype_name(it->dtype));
        text_str(t, "\",\"shape\":[");
        for (int d = 0; d < it->ndim; d++) {
            if (d) text_str(t, ",");
            text_u64(t, (uint64_t)it->shape[d]);
        }
        text_str(t, "],\"data_offsets\":[");
        text_u64(t, off);
        text_str(t, ",");
        text_u64(t, off + it->bytes);
        text_str(t, "]}");
        off += it->bytes;
    }
    text_str(t, "}");
    while (!t->oom && t->len % 8 != 0) text_str(t, " ");
    if (t->oom) return tr_errf(err, errlen, "%s: out of memory building the header", path);
    if (t->len > ST_MAX_HEADER_LEN)
        return tr_errf(err, errlen,
                       "%s: header would be %zu bytes, over the 100,000,000-byte limit readers accept; "
                       "split the tensors across shards",
                       path, t->len);
    return 0;
}

static int write_all(int fd, const void *buf, size_t n, const char *path, char *err, size_t errlen) {
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return tr_errf(err, errlen, "%s: write failed: %s (disk full?)", path, strerror(errno));
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

/* After a rename the directory entry must reach the disk too, or a crash can lose the file. */
static int sync_parent_dir(const char *path, char *err, size_t errlen) {
    char dir[1024];
    const char *slash = strrchr(path, '/');
    if (!slash) snprintf(dir, sizeof dir, ".");
    else if (slash == path) snprintf(dir, sizeof dir, "/");
    else snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return tr_errf(err, errlen, "%s: cannot open its directory to sync it: %s", path, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0) return tr_errf(err, errlen, "%s: fsync of its directory failed: %s", path, strerror(e));
    return 0;
}

int st_writer_write(st_writer *w, const char *path, char *err, size_t errlen) {
    char tmp[1100];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp)
        return tr_errf(err, errlen, "%.200s...: path too long; use a shorter one", path);
    st_text hdr = {0};
    if (build_header(w, &hdr, path, err, errlen) != 0) {
        free(hdr.p);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        free(hdr.p);
        return tr_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
    }
    uint8_t len8[8];
    st_store_le64(len8, (uint64_t)hdr.len);
    int rc = write_all(fd, len8, 8, tmp, err, errlen);
    if (rc == 0) rc = write_all(fd, hdr.p, hdr.len, tmp, err, errlen);
    for (int i = 0; rc == 0 && i < w->n; i++) rc = write_all(fd, w->items[i].data, w->items[i].bytes, tmp, err, errlen);
    if (rc == 0 && fsync(fd) != 0) rc = tr_errf(err, errlen, "%s: fsync failed: %s", tmp, strerror(errno));
    if (close(fd) != 0 && rc == 0) rc = tr_errf(err, errlen, "%s: close failed: %s", tmp, strerror(errno));
    free(hdr.p);
    if (rc == 0 && rename(tmp, path) != 0)
        rc = tr_errf(err, errlen, "%s: cannot rename %s over it: %s", path, tmp, strerror(errno));
    if (rc != 0) {
        unlink(tmp);
        return -1;
    }
    return sync_parent_dir(path, err, errlen);
}
