/* Reading a safetensors tensor into float32 or int32 host memory, with an exact shape check. */
#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "io/safetensors.h"
#include "io/safetensors_internal.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"

static float f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1Fu;
    uint32_t man = h & 0x3FFu;
    uint32_t bits;
    if (exp == 0x1F) {
        bits = sign | 0x7F800000u | (man << 13); /* inf, or NaN keeping its payload */
    } else if (exp != 0) {
        bits = sign | ((exp + 112u) << 23) | (man << 13); /* rebias 15 -> 127 */
    } else if (man == 0) {
        bits = sign;
    } else {
        /* subnormal half: normalise; every one is a normal float */
        int e = -1;
        do {
            man <<= 1;
            e++;
        } while (!(man & 0x400u));
        bits = sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3FFu) << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static int check_shape(const st_file *f, const st_tensor *t, const int64_t *shape, int ndim, char *err, size_t errlen) {
    bool same = t->ndim == ndim;
    for (int i = 0; same && i < ndim; i++) same = t->shape[i] == shape[i];
    if (same) return 0;
    char want[160], found[160];
    st_format_shape(want, sizeof want, shape, ndim);
    st_format_shape(found, sizeof found, t->shape, t->ndim);
    return tr_errf(err, errlen,
                   "%s: tensor '%s' has shape %s, expected %s; the checkpoint does not match the model "
                   "config (check hidden size, heads, kv heads, ffn size and vocab)",
                   f->path, t->name, found, want);
}

int st_tensor_read_f32(const st_file *f, const st_tensor *t, float *dst, const int64_t *shape, int ndim, char *err,
                       size_t errlen) {
    if (check_shape(f, t, shape, ndim, err, errlen) != 0) return -1;
    const uint8_t *src = f->data + t->begin;
    uint64_t n = st_tensor_numel(t);
    switch (t->dtype) {
    case ST_F32:
        for (uint64_t i = 0; i < n; i++) {
            uint32_t u = (uint32_t)st_load_le(src + 4 * i, 4);
            memcpy(&dst[i], &u, 4);
        }
        return 0;
    case ST_BF16:
        for (uint64_t i = 0; i < n; i++) dst[i] = tr_bf16_to_f32((uint16_t)st_load_le(src + 2 * i, 2));
        return 0;
    case ST_F16:
        for (uint64_t i = 0; i < n; i++) dst[i] = f16_to_f32((uint16_t)st_load_le(src + 2 * i, 2));
        return 0;
    case ST_F64:
        for (uint64_t i = 0; i < n; i++) {
            uint64_t u = st_load_le(src + 8 * i, 8);
            double d;
            memcpy(&d, &u, 8);
            float v = (float)d;
            if (isinf(v) && !isinf(d))
                return tr_errf(err, errlen,
                               "%s: tensor '%s' (F64): element %" PRIu64 " = %g does not fit float32; "
                               "the weights are corrupt or not a model's",
                               f->path, t->name, i, d);
            dst[i] = v;
        }
        return 0;
    default:
        return tr_errf(err, errlen,
                       "%s: tensor '%s' has dtype %s, expected a floating type (F32, BF16, F16 or F64); "
                       "is this the right tensor?",
                       f->path, t->name, st_dtype_name(t->dtype));
    }
}

int st_tensor_read_i32(const st_file *f, const st_tensor *t, int32_t *dst, const int64_t *shape, int ndim, char *err,
                       size_t errlen) {
    if (t->dtype == ST_F32 || t->dtype == ST_BF16 || t->dtype == ST_F16 || t->dtype == ST_F64)
        return tr_errf(err, errlen,
                       "%s: tensor '%s' has dtype %s, expected an integer type (I32, I64, U8, I8, "
                       "I16, U16 or BOOL); is this the right tensor?",
                       f->path, t->name, st_dtype_name(t->dtype));
    if (check_shape(f, t, shape, ndim, err, errlen) != 0) return -1;
    const uint8_t *src = f->data + t->begin;
    uint64_t n = st_tensor_numel(t);
    size_t size = st_dtype_size(t->dtype);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t u = st_load_le(src + size * i, (int)size);
        int64_t v;
        switch (t->dtype) {
        case ST_I32: v = (int32_t)(uint32_t)u; break;
        case ST_I64: v = (int64_t)u; break;
        case ST_U8: v = (uint8_t)u; break;
        case ST_I8: v = (int8_t)(uint8_t)u; break;
        case ST_I16: v = (int16_t)(uint16_t)u; break;
        case ST_U16: v = (uint16_t)u; break;
        case ST_BOOL:
            if (u > 1)
                return tr_errf(err, errlen,
                               "%s: tensor '%s' (BOOL): element %" PRIu64 " is byte %" PRIu64 ", not 0 "
                               "or 1; the data is corrupt",
                               f->path, t->name, i, u);
            v = (int64_t)u;
            break;
        default: v = 0; break; /* floating types were turned away above */
        }
        if (v < INT32_MIN || v > INT32_MAX)
            return tr_errf(err, errlen, "%s: tensor '%s' (I64): element %" PRIu64 " = %" PRId64 " does not fit int32",
                           f->path, t->name, i, v);
        dst[i] = (int32_t)v;
    }
    return 0;
}

static const st_tensor *find_or_err(const st_file *f, const char *name, char *err, size_t errlen) {
    const st_tensor *t = st_find(f, name);
    if (!t)
        tr_errf(err, errlen,
                "%s: no tensor named '%s' (the file has %d tensors); the checkpoint is for a different "
                "model or was saved with other names",
                f->path, name, f->n);
    return t;
}

int st_read_f32(const st_file *f, const char *name, float *dst, const int64_t *shape, int ndim, char *err,
                size_t errlen) {
    const st_tensor *t = find_or_err(f, name, err, errlen);
    return t ? st_tensor_read_f32(f, t, dst, shape, ndim, err, errlen) : -1;
}

int st_read_i32(const st_file *f, const char *name, int32_t *dst, const int64_t *shape, int ndim, char *err,
                size_t errlen) {
    const st_tensor *t = find_or_err(f, name, err, errlen);
    return t ? st_tensor_read_i32(f, t, dst, shape, ndim, err, errlen) : -1;
}
