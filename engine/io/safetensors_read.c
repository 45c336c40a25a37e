/* safetensors reader: header validation (the rules of Hugging Face's own reader, plus duplicate
 * names and a dimension limit), file mapping and name lookup. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safe_file.h"
#include "io/safetensors.h"
#include "io/safetensors_internal.h"
#include "twinrun/err.h"

/* JSON numbers are doubles: above 2^53 an integer is no longer exact, so an offset or dimension
 * there cannot be trusted (and no real file has a 9 PB data section). */
#define ST_MAX_JSON_INT 9007199254740992.0

static const char *msg_path(const char *path) { return path && path[0] ? path : "<safetensors in memory>"; }

/* A non-negative integer held in a cJSON number; -1 when it is not one. */
static int json_uint(const cJSON *item, uint64_t *out) {
    if (!cJSON_IsNumber(item)) return -1;
    double d = item->valuedouble;
    if (!(d >= 0.0) || d > ST_MAX_JSON_INT || d != floor(d)) return -1;
    *out = (uint64_t)d;
    return 0;
}

/* The value of key in obj; -1 with a message when it appears more than once (serde, which Hugging
 * Face's reader uses, rejects duplicate fields; cJSON would silently keep the first). */
static int unique_member(const cJSON *obj, const char *key, const cJSON **out, const char *path, const char *tname,
                         char *err, size_t errlen) {
    const cJSON *found = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (c->string && strcmp(c->string, key) == 0) {
            if (found)
                return tr_errf(err, errlen,
                               "%s: tensor '%s': key \"%s\" appears twice in its header entry; "
                               "the file is corrupt, re-export it",
                               path, tname, key);
            found = c;
        }
    }
    *out = found;
    return 0;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int parse_metadata(st_file *f, const cJSON *meta, const char *path, char *err, size_t errlen) {
    if (!cJSON_IsObject(meta))
        return tr_errf(err, errlen,
                       "%s: \"__metadata__\" must be a JSON object mapping strings to strings "
                       "(e.g. {\"format\": \"pt\"}); the header is malformed",
                       path);
    int n = cJSON_GetArraySize(meta);
    f->metadata_keys = calloc((size_t)n + 1, sizeof(char *));
    f->metadata_values = calloc((size_t)n + 1, sizeof(char *));
    if (!f->metadata_keys || !f->metadata_values) return tr_errf(err, errlen, "%s: out of memory", path);
    for (const cJSON *c = meta->child; c; c = c->next) {
        if (!cJSON_IsString(c))
            return tr_errf(err, errlen,
                           "%s: \"__metadata__\" entry \"%s\" is not a string; safetensors metadata "
                           "is a string->string map (write numbers as strings)",
                           path, c->string ? c->string : "");
        f->metadata_keys[f->n_metadata] = strdup(c->string);
        f->metadata_values[f->n_metadata] = strdup(c->valuestring);
        f->n_metadata++;
        if (!f->metadata_keys[f->n_metadata - 1] || !f->metadata_values[f->n_metadata - 1])
            return tr_errf(err, errlen, "%s: out of memory", path);
    }
    /* duplicates by sorting a copy: a quadratic scan would let a hostile header stall the reader */
    char **keys = malloc(((size_t)f->n_metadata + 1) * sizeof *keys);
    if (!keys) return tr_errf(err, errlen, "%s: out of memory", path);
    memcpy(keys, f->metadata_keys, (size_t)f->n_metadata * sizeof *keys);
    qsort(keys, (size_t)f->n_metadata, sizeof *keys, cmp_str);
    int rc = 0;
    for (int i = 1; i < f->n_metadata && rc == 0; i++)
        if (strcmp(keys[i], keys[i - 1]) == 0)
            rc = tr_errf(err, errlen, "%s: \"__metadata__\" has the key \"%s\" twice; the header is malformed", path,
                         keys[i]);
    free(keys);
    return rc;
}

static int parse_shape(st_tensor *t, const cJSON *shape, const char *path, char *err, size_t errlen) {
    if (!cJSON_IsArray(shape))
        return tr_errf(err, errlen, "%s: tensor '%s': \"shape\" must be a JSON list of dimensions, like [4096, 4096]",
                       path, t->name);
    int ndim = cJSON_GetArraySize(shape);
    if (ndim > ST_MAX_DIMS)
        return tr_errf(err, errlen, "%s: tensor '%s': shape has %d dimensions; twinrun reads at most %d", path, t->name,
                       ndim, ST_MAX_DIMS);
    int i = 0;
    for (const cJSON *d = shape->child; d; d = d->next, i++) {
        uint64_t v;
        if (json_uint(d, &v) != 0)
            return tr_errf(err, errlen,
                           "%s: tensor '%s': shape dimension %d is not a non-negative integer "
                           "(below 2^53); the header is corrupt",
                           path, t->name, i);
        t->shape[i] = (int64_t)v;
    }
    t->ndim = ndim;
    return 0;
}

static int parse_offsets(st_tensor *t, const cJSON *offs, const char *path, char *err, size_t errlen) {
    uint64_t b, e;
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 || json_uint(offs->child, &b) != 0 ||
        json_uint(offs->child->next, &e) != 0)
        return tr_errf(err, errlen,
                       "%s: tensor '%s': \"data_offsets\" must be two non-negative integers "
                       "[begin, end]; the header is corrupt",
                       path, t->name);
    if (b > e)
        return tr_errf(err, errlen,
                       "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] end before they "
                       "begin; the header is corrupt",
                       path, t->name, b, e);
    t->begin = b;
    t->end = e;
    return 0;
}

/* end - begin must be numel * itemsize, computed without overflow. */
static int check_byte_size(const st_tensor *t, const char *path, char *err, size_t errlen) {
    uint64_t bytes = st_dtype_size(t->dtype);
    char shp[160];
    for (int i = 0; i < t->ndim; i++) {
        uint64_t d = (uint64_t)t->shape[i];
        if (d != 0 && bytes > UINT64_MAX / d) {
            st_format_shape(shp, sizeof shp, t->shape, t->ndim);
            return tr_errf(err, errlen,
                           "%s: tensor '%s': shape %s of %s overflows a 64-bit byte count; "
                           "the header is corrupt",
                           path, t->name, shp, st_dtype_name(t->dtype));
        }
        bytes *= d;
    }
    if (t->end - t->begin != bytes) {
        st_format_shape(shp, sizeof shp, t->shape, t->ndim);
        return tr_errf(err, errlen,
                       "%s: tensor '%s': shape %s of %s needs %" PRIu64 " bytes but data_offsets "
                       "[%" PRIu64 ", %" PRIu64 "] span %" PRIu64 "; the header and data disagree, re-export the "
                       "file",
                       path, t->name, shp, st_dtype_name(t->dtype), bytes, t->begin, t->end, t->end - t->begin);
    }
    return 0;
}

static int parse_tensor(st_tensor *t, const cJSON *entry, const char *path, char *err, size_t errlen) {
    t->name = strdup(entry->string ? entry->string : "");
    if (!t->name) return tr_errf(err, errlen, "%s: out of memory", path);
    if (!cJSON_IsObject(entry))
        return tr_errf(err, errlen,
                       "%s: tensor '%s': header entry is not a JSON object "
                       "{\"dtype\", \"shape\", \"data_offsets\"}",
                       path, t->name);
    const cJSON *dtype = NULL, *shape = NULL, *offs = NULL;
    if (unique_member(entry, "dtype", &dtype, path, t->name, err, errlen) ||
        unique_member(entry, "shape", &shape, path, t->name, err, errlen) ||
        unique_member(entry, "data_offsets", &offs, path, t->name, err, errlen))
        return -1;
    const char *missing = !dtype ? "dtype" : !shape ? "shape" : !offs ? "data_offsets" : NULL;
    if (missing)
        return tr_errf(err, errlen,
                       "%s: tensor '%s': header entry has no \"%s\"; every tensor needs dtype, shape "
                       "and data_offsets",
                       path, t->name, missing);
    if (!cJSON_IsString(dtype))
        return tr_errf(err, errlen, "%s: tensor '%s': \"dtype\" must be a string such as \"F32\" or \"BF16\"", path,
                       t->name);
    if (st_dtype_parse(dtype->valuestring, &t->dtype) != 0)
        return tr_errf(err, errlen,
                       "%s: tensor '%s': dtype \"%.32s\" is not one twinrun reads (F32, BF16, F16, "
                       "F64, I32, I64, U8, I8, I16, U16, BOOL); convert the checkpoint, e.g. to BF16 or F32",
                       path, t->name, dtype->valuestring);
    if (parse_shape(t, shape, path, err, errlen) || parse_offsets(t, offs, path, err, errlen)) return -1;
    return check_byte_size(t, path, err, errlen);
}

static int cmp_by_begin(const void *a, const void *b) {
    const st_tensor *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int cmp_by_name(const void *a, const void *b) {
    const st_tensor *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Sorted by begin, the tensors must tile [0, data_len) exactly. */
static int check_layout(const st_file *f, const char *path, char *err, size_t errlen) {
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->end > f->data_len)
            return tr_errf(err, errlen,
                           "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] run past the end "
                           "of the data section (%" PRIu64 " bytes): the file is truncated, copy or download it "
                           "again",
                           path, t->name, t->begin, t->end, f->data_len);
    }
    uint64_t expect = 0;
    for (int i = 0; i < f->n; i++) {
        const st_tensor *t = &f->tensors[i];
        if (t->begin < expect)
            return tr_errf(err, errlen,
                           "%s: tensor '%s': data_offsets [%" PRIu64 ", %" PRIu64 "] overlap tensor "
                           "'%s' (which ends at %" PRIu64 "); the header is corrupt",
                           path, t->name, t->begin, t->end, f->tensors[i - 1].name, expect);
        if (t->begin > expect)
            return tr_errf(err, errlen,
                           "%s: tensor '%s': data_offsets begin at %" PRIu64 " but the previous tensor "
                           "ends at %" PRIu64 ": a gap of %" PRIu64 " unused bytes; safetensors tensors must be "
                           "contiguous, re-export the file",
                           path, t->name, t->begin, expect, t->begin - expect);
        expect = t->end;
    }
    if (expect != f->data_len)
        return tr_errf(err, errlen,
                       "%s: %" PRIu64 " trailing bytes after the last tensor (tensors end at %" PRIu64
                       ", data section is %" PRIu64 " bytes); the file was appended to or the header is wrong",
                       path, f->data_len - expect, expect, f->data_len);
    return 0;
}

static int check_unique_names(st_file *f, const char *path, char *err, size_t errlen) {
    const st_tensor **order = malloc(((size_t)f->n + 1) * sizeof *order);
    f->by_name = malloc(((size_t)f->n + 1) * sizeof(int));
    if (!order || !f->by_name) {
        free(order);
        return tr_errf(err, errlen, "%s: out of memory", path);
    }
    for (int i = 0; i < f->n; i++) order[i] = &f->tensors[i];
    qsort(order, (size_t)f->n, sizeof *order, cmp_by_name);
    int rc = 0;
    for (int i = 0; i < f->n; i++) {
        f->by_name[i] = (int)(order[i] - f->tensors);
        if (i > 0 && strcmp(order[i]->name, order[i - 1]->name) == 0 && rc == 0)
            rc = tr_errf(err, errlen,
                         "%s: tensor '%s' appears twice in the header; the file is corrupt, re-export "
                         "it",
                         path, order[i]->name);
    }
    free(order);
    return rc;
}

/* Byte offset -> "line L, column C" of the header, for JSON syntax errors. */
static void line_col(const char *s, size_t off, size_t *line, size_t *col) {
    *line = 1, *col = 1;
    for (size_t i = 0; i < off; i++) {
        if (s[i] == '\n') (*line)++, *col = 1;
        else (*col)++;
    }
}

static int parse_header(st_file *f, const char *hdr, size_t n, const char *path, char *err, size_t errlen) {
    size_t bad;
    if (!st_utf8_valid((const uint8_t *)hdr, n, &bad))
        return tr_errf(err, errlen,
                       "%s: header byte %zu is not valid UTF-8; this is not a safetensors file or it "
                       "is corrupt",
                       path, bad);
    size_t first = 0;
    while (first < n && strchr(" \t\r\n", hdr[first]) && hdr[first]) first++;
    if (first == n || hdr[first] != '{')
        return tr_errf(err, errlen,
                       "%s: header is not a JSON object (it starts with '%c' at byte %zu, expected '{'); "
                       "this is not a safetensors file",
                       path, first < n && hdr[first] >= 32 ? hdr[first] : '?', first);
    /* cJSON needs no terminator with a length, but a terminated copy keeps every read in bounds
     * whatever the library version. */
    char *copy = malloc(n + 1);
    if (!copy) return tr_errf(err, errlen, "%s: out of memory for a %zu-byte header", path, n);
    memcpy(copy, hdr, n);
    copy[n] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, n + 1, &end, 0);
    int rc = 0;
    if (!root) {
        size_t off = end && end >= copy && end <= copy + n ? (size_t)(end - copy) : n;
        size_t line, col;
        line_col(copy, off, &line, &col);
        rc = tr_errf(err, errlen,
                     "%s: header JSON is malformed at byte %zu (line %zu, column %zu) near \"%.20s\"; "
                     "the file is corrupt or not safetensors",
                     path, off, line, col, copy + off);
        goto out;
    }
    for (size_t i = (size_t)(end - copy); i < n; i++) {
        if (!strchr(" \t\r\n", copy[i]) || copy[i] == '\0') {
            rc = tr_errf(err, errlen,
                         "%s: header has data after its JSON object at byte %zu (only space padding "
                         "may follow); the header length is wrong or the header is corrupt",
                         path, i);
            goto out;
        }
    }
    int count = 0, n_meta = 0;
    const cJSON *meta = NULL;
    for (const cJSON *c = root->child; c; c = c->next) {
        if (c->string && strcmp(c->string, "__metadata__") == 0) {
            n_meta++;
            meta = c;
        } else {
            count++;
        }
    }
    if (n_meta > 1) {
        rc = tr_errf(err, errlen, "%s: \"__metadata__\" appears twice in the header; the file is corrupt", path);
        goto out;
    }
    if (meta && (rc = parse_metadata(f, meta, path, err, errlen)) != 0) goto out;
    f->tensors = calloc((size_t)count + 1, sizeof *f->tensors);
    if (!f->tensors) {
        rc = tr_errf(err, errlen, "%s: out of memory for %d tensors", path, count);
        goto out;
    }
    for (const cJSON *c = root->child; c; c = c->next) {
        if (c == meta) continue;
        /* count first, so st_close frees a half-parsed entry's name */
        st_tensor *t = &f->tensors[f->n++];
        if ((rc = parse_tensor(t, c, path, err, errlen)) != 0) goto out;
    }
    qsort(f->tensors, (size_t)f->n, sizeof *f->tensors, cmp_by_begin);
    if ((rc = check_unique_names(f, path, err, errlen)) != 0) goto out;
    rc = check_layout(f, path, err, errlen);
out:
    cJSON_Delete(root);
    free(copy);
    return rc;
}

/* f->owned/owned_len/mapped are set; parses them. Leaves f for st_close on failure. */
static int parse_owned(st_file *f, const char *path, char *err, size_t errlen) {
    const uint8_t *buf = f->owned;
    size_t len = f->owned_len;
    if (len < 8)
        return tr_errf(err, errlen,
                       "%s: file is %zu bytes, shorter than the 8-byte header length that starts every "
                       "safetensors file; it is truncated or not safetensors",
                       path, len);
    uint64_t n = st_load_le(buf, 8);
    if (n == 0)
        return tr_errf(err, errlen,
                       "%s: header length is 0; a safetensors header is at least \"{}\", so the file is "
                       "corrupt or not safetensors",
                       path);
    if (n > ST_MAX_HEADER_LEN)
        return tr_errf(err, errlen,
                       "%s: header length %" PRIu64 " exceeds the 100,000,000-byte limit of safetensors "
                       "readers; the file is corrupt or not safetensors",
                       path, n);
    if (n > len - 8)
        return tr_errf(err, errlen,
                       "%s: header length %" PRIu64 " runs past the end of the %zu-byte file; it is "
                       "truncated, copy or download it again",
                       path, n, len);
    f->data = buf + 8 + n;
    f->data_len = (uint64_t)(len - 8 - n);
    return parse_header(f, (const char *)buf + 8, (size_t)n, path, err, errlen);
}

static void set_path(st_file *f, const char *path) { snprintf(f->path, sizeof f->path, "%s", msg_path(path)); }

int st_parse_take(st_file *f, uint8_t *buf, size_t len, const char *path_for_messages, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    set_path(f, path_for_messages);
    f->owned = buf;
    f->owned_len = len;
    if (parse_owned(f, f->path, err, errlen) != 0) {
        st_close(f);
        return -1;
    }
    return 0;
}

int st_parse(st_file *f, const uint8_t *buf, size_t len, const char *path_for_messages, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    uint8_t *copy = malloc(len ? len : 1);
    if (!copy) return tr_errf(err, errlen, "%s: out of memory for %zu bytes", msg_path(path_for_messages), len);
    if (len) memcpy(copy, buf, len);
    return st_parse_take(f, copy, len, path_for_messages, err, errlen);
}

/* The whole file into a malloc'd block, for files that cannot be mapped. */
static uint8_t *read_all(int fd, size_t size, const char *path, char *err, size_t errlen) {
    uint8_t *buf = malloc(size ? size : 1);
    if (!buf) {
        tr_errf(err, errlen, "%s: out of memory reading %zu bytes", path, size);
        return NULL;
    }
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            tr_errf(err, errlen, "%s: read failed after %zu of %zu bytes: %s", path, got, size,
                    r < 0 ? strerror(errno) : "file shrank while reading");
            free(buf);
            return NULL;
        }
        got += (size_t)r;
    }
    return buf;
}

int st_open(st_file *f, const char *path, char *err, size_t errlen) {
    memset(f, 0, sizeof *f);
    if (strlen(path) >= sizeof f->path)
        return tr_errf(err, errlen, "%.200s...: path longer than %zu bytes; use a shorter path", path,
                       sizeof f->path - 1);
    set_path(f, path);
    char why[256];
    int fd = tr_safe_open_regular(path, why, sizeof why);
    if (fd < 0) return tr_errf(err, errlen, "%s: cannot open: %s", path, why);
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return tr_errf(err, errlen, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return tr_errf(err, errlen, "%s: %s", path,
                       S_ISDIR(st.st_mode) ? "is a directory, expected a .safetensors file" : "is not a regular file");
    }
    size_t size = (size_t)st.st_size;
    uint8_t *buf = NULL;
    bool mapped = false;
    if (size > 0) {
        void *p = mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0);
        if (p != MAP_FAILED) {
            buf = p;
            mapped = true;
        }
    }
    if (!buf) buf = read_all(fd, size, path, err, errlen);
    close(fd);
    if (!buf) return -1;
    f->owned = buf;
    f->owned_len = size;
    f->mapped = mapped;
    if (parse_owned(f, f->path, err, errlen) != 0) {
        st_close(f);
        return -1;
    }
    return 0;
}

void st_close(st_file *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) free(f->tensors[i].name);
    free(f->tensors);
    free(f->by_name);
    for (int i = 0; i < f->n_metadata; i++) {
        free(f->metadata_keys[i]);
        free(f->metadata_values[i]);
    }
    free(f->metadata_keys);
    free(f->metadata_values);
    if (f->mapped) munmap(f->owned, f->owned_len);
    else free(f->owned);
    memset(f, 0, sizeof *f);
}

const st_tensor *st_find(const st_file *f, const char *name) {
    if (!f->by_name) return NULL;
    int lo = 0, hi = f->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        const st_tensor *t = &f->tensors[f->by_name[mid]];
        int c = strcmp(name, t->name);
        if (c == 0) return t;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return NULL;
}

const char *st_metadata_get(const st_file *f, const char *key) {
    for (int i = 0; i < f->n_metadata; i++)
        if (strcmp(f->metadata_keys[i], key) == 0) return f->metadata_values[i];
    return NULL;
}

uint64_t st_tensor_numel(const st_tensor *t) {
    uint64_t n = 1;
    for (int i = 0; i < t->ndim; i++) n *= (uint64_t)t->shape[i];
    return n;
}
