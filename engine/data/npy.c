/* .npy reader/writer (see npy.h). The header is a Python dict literal; we accept the keys in any
 * order with the spacing variations numpy has produced over the years, nothing more. */
#include "data/npy.h"
#include "core/safe_file.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "twinrun/err.h"

static const char *const DESCR[TR_NPY_NDTYPES] = {"|i1", "|u1", "<i2", "<u2", "<i4", "<u4", "<i8"};
static const size_t ITEMSIZE[TR_NPY_NDTYPES] = {1, 1, 2, 2, 4, 4, 8};

size_t tr_npy_itemsize(tr_npy_dtype t) { return (unsigned)t < TR_NPY_NDTYPES ? ITEMSIZE[t] : 0; }
const char *tr_npy_descr(tr_npy_dtype t) { return (unsigned)t < TR_NPY_NDTYPES ? DESCR[t] : "?"; }

void tr_npy_free(tr_npy *a) {
    if (!a) return;
    free(a->data);
    a->data = NULL;
}

/* A tiny cursor over the header text. */
typedef struct cur {
    const char *p, *end;
} cur;

static void skip_ws(cur *c) {
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t')) c->p++;
}
static int eat(cur *c, char ch) {
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        c->p++;
        return 1;
    }
    return 0;
}
/* A quoted string ('...' or "...") without escapes; copies at most cap-1 bytes. */
static int quoted(cur *c, char *out, size_t cap) {
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"')) return 0;
    char q = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != q) {
        if (n + 1 >= cap) return 0;
        out[n++] = *c->p++;
    }
    if (c->p >= c->end) return 0;
    c->p++;
    out[n] = '\0';
    return 1;
}
static int integer(cur *c, int64_t *v) {
    skip_ws(c);
    if (c->p >= c->end || !isdigit((unsigned char)*c->p)) return 0;
    int64_t x = 0;
    while (c->p < c->end && isdigit((unsigned char)*c->p)) {
        if (x > (INT64_MAX - 9) / 10) return 0;
        x = x * 10 + (*c->p++ - '0');
    }
    if (c->p < c->end && *c->p == 'L') c->p++; /* Python 2 longs in very old files */
    *v = x;
    return 1;
}

static int parse_header(cur *c, const char *what, tr_npy *a, char *err, size_t errlen) {
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(c, '{')) return tr_errf(err, errlen, "%s: .npy header is not a dict", what);
    for (;;) {
        if (eat(c, '}')) break;
        char key[32], val[32];
        if (!quoted(c, key, sizeof key) || !eat(c, ':'))
            return tr_errf(err, errlen, "%s: .npy header: expected 'key': value", what);
        if (!strcmp(key, "descr")) {
            if (!quoted(c, val, sizeof val)) return tr_errf(err, errlen, "%s: .npy descr is not a string", what);
            int found = -1;
            for (int t = 0; t < TR_NPY_NDTYPES; t++)
                if (!strcmp(val, DESCR[t]) || (ITEMSIZE[t] == 1 && !strcmp(val + 1, DESCR[t] + 1))) found = t;
            if (found < 0)
                return tr_errf(err, errlen,
                               "%s: .npy dtype '%s' is not supported (little-endian integers only: "
                               "|i1 |u1 <i2 <u2 <i4 <u4 <i8)",
                               what, val);
            a->dtype = (tr_npy_dtype)found;
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            skip_ws(c);
            if ((size_t)(c->end - c->p) >= 5 && !strncmp(c->p, "False", 5)) c->p += 5;
            else if ((size_t)(c->end - c->p) >= 4 && !strncmp(c->p, "True", 4)) {
                c->p += 4;
                have_order = 2;
            } else return tr_errf(err, errlen, "%s: .npy fortran_order is not True/False", what);
            if (!have_order) have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if (!eat(c, '(')) return tr_errf(err, errlen, "%s: .npy shape is not a tuple", what);
            a->ndim = 0;
            a->shape[0] = a->shape[1] = 1;
            while (!eat(c, ')')) {
                int64_t d;
                if (a->ndim >= 2) return tr_errf(err, errlen, "%s: .npy array has more than 2 dimensions", what);
                if (!integer(c, &d)) return tr_errf(err, errlen, "%s: .npy shape entry is not an integer", what);
                a->shape[a->ndim++] = d;
                if (!eat(c, ',') && !(skip_ws(c), c->p < c->end && *c->p == ')'))
                    return tr_errf(err, errlen, "%s: .npy shape tuple is malformed", what);
            }
            if (a->ndim == 0) return tr_errf(err, errlen, "%s: .npy array is a scalar, expected 1-D or 2-D", what);
            have_shape = 1;
        } else {
            return tr_errf(err, errlen, "%s: .npy header has unknown key '%s'", what, key);
        }
        if (!eat(c, ',')) {
            if (!eat(c, '}')) return tr_errf(err, errlen, "%s: .npy header: expected ',' or '}'", what);
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape)
        return tr_errf(err, errlen, "%s: .npy header lacks descr, fortran_order or shape", what);
    if (have_order == 2 && a->ndim == 2 && a->shape[0] > 1 && a->shape[1] > 1)
        return tr_errf(err, errlen, "%s: .npy array is in Fortran order; expected C order", what);
    return 0;
}

int tr_npy_parse(const void *buf, size_t len, const char *what, tr_npy *a, char *err, size_t errlen) {
    const unsigned char *b = buf;
    memset(a, 0, sizeof *a);
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0)
        return tr_errf(err, errlen, "%s: not a .npy file (bad magic)", what);
    size_t hlen, hstart;
    if (b[6] == 1 && b[7] == 0) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        hstart = 10;
    } else if ((b[6] == 2 || b[6] == 3) && b[7] == 0) {
        if (len < 12) return tr_errf(err, errlen, "%s: .npy file truncated in its header", what);
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        hstart = 12;
    } else {
        return tr_errf(err, errlen, "%s: .npy format version %u.%u is not supported (1.0, 2.0, 3.0)", what, b[6], b[7]);
    }
    if (hlen > len - hstart) return tr_errf(err, errlen, "%s: .npy file truncated in its header", what);
    cur c = {(const char *)b + hstart, (const char *)b + hstart + hlen};
    if (parse_header(&c, what, a, err, errlen)) return -1;
    while (c.p < c.end && (*c.p == ' ' || *c.p == '\n')) c.p++;
    if (c.p != c.end) return tr_errf(err, errlen, "%s: .npy header has trailing text", what);
    size_t off = hstart + hlen;
    size_t isz = ITEMSIZE[a->dtype];
    /* shape entries are < 2^63; reject products that overflow what the file could hold */
    if (a->shape[1] != 0 && a->shape[0] > (int64_t)(SIZE_MAX / isz) / a->shape[1])
        return tr_errf(err, errlen, "%s: .npy shape is too large", what);
    a->count = a->shape[0] * a->shape[1];
    size_t need = (size_t)a->count * isz;
    if (len - off != need)
        return tr_errf(err, errlen, "%s: .npy payload is %zu bytes but shape and dtype %s need %zu", what, len - off,
                       DESCR[a->dtype], need);
    a->data = malloc(need ? need : 1);
    if (!a->data) return tr_errf(err, errlen, "%s: out of memory for %zu bytes", what, need);
    memcpy(a->data, b + off, need);
    return 0;
}

int tr_npy_load(const char *path, tr_npy *a, char *err, size_t errlen) {
    memset(a, 0, sizeof *a);
    char why[256];
    FILE *f = tr_safe_fopen_regular(path, why, sizeof why);
    if (!f) return tr_errf(err, errlen, "%s: cannot open: %s", path, why);
    if (fseek(f, 0, SEEK_END) != 0) {
        fclose(f);
        return tr_errf(err, errlen, "%s: cannot seek", path);
    }
    long sz = ftell(f);
    rewind(f);
    if (sz < 0) {
        fclose(f);
        return tr_errf(err, errlen, "%s: cannot size", path);
    }
    unsigned char *buf = malloc((size_t)sz + 1);
    if (!buf) {
        fclose(f);
        return tr_errf(err, errlen, "%s: out of memory", path);
    }
    size_t got = fread(buf, 1, (size_t)sz, f);
    fclose(f);
    if (got != (size_t)sz) {
        free(buf);
        return tr_errf(err, errlen, "%s: short read", path);
    }
    int rc = tr_npy_parse(buf, (size_t)sz, path, a, err, errlen);
    free(buf);
    return rc;
}

int tr_npy_save(const char *path, tr_npy_dtype dtype, int ndim, const int64_t *shape, const void *data, char *err,
                size_t errlen) {
    if ((unsigned)dtype >= TR_NPY_NDTYPES || ndim < 1 || ndim > 2)
        return tr_errf(err, errlen, "%s: unsupported array for .npy", path);
    /* numpy's layout: the sorted dict repr, spare spaces so the first axis can grow to 21 digits,
     * then spaces up to a 64-byte boundary and a newline. */
    char shape_s[64], h[256];
    if (ndim == 1) snprintf(shape_s, sizeof shape_s, "(%lld,)", (long long)shape[0]);
    else snprintf(shape_s, sizeof shape_s, "(%lld, %lld)", (long long)shape[0], (long long)shape[1]);
    int n = snprintf(h, sizeof h, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }", DESCR[dtype], shape_s);
    char first[32];
    int growth = 21 - snprintf(first, sizeof first, "%lld", (long long)shape[0]);
    while (growth-- > 0) h[n++] = ' ';
    int total = 10 + n + 1;
    int pad = 64 - total % 64;
    if (pad == 64) pad = 0;
    while (pad-- > 0) h[n++] = ' ';
    h[n++] = '\n';
    int64_t count = ndim == 1 ? shape[0] : shape[0] * shape[1];
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return tr_errf(err, errlen, "%s: path too long", path);
    FILE *f = fopen(tmp, "wb");
    if (!f) return tr_errf(err, errlen, "%s: cannot create: %s", tmp, strerror(errno));
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8)};
    int ok = fwrite(pre, 1, 10, f) == 10 && fwrite(h, 1, (size_t)n, f) == (size_t)n &&
             fwrite(data, ITEMSIZE[dtype], (size_t)count, f) == (size_t)count;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        remove(tmp);
        return tr_errf(err, errlen, "%s: write failed: %s", path, strerror(errno));
    }
    return 0;
}
