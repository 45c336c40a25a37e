/* Element types that cross the seam, and host-side bf16 conversion.
 * bf16 rounding is round-to-nearest-even, as torch and CUDA's __float2bfloat16 do,
 * so the twin and the GPU agree bit for bit on a cast. */
#ifndef TWINRUN_BASE_DTYPE_H
#define TWINRUN_BASE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef enum tr_dtype {
    TR_F32 = 0,
    TR_BF16 = 1,
    TR_I32 = 2,
    TR_U8 = 3, /* bytes: FP8 values, moved (gathered, copied), never reduced */
} tr_dtype;

/* A typed device pointer: kernels take these so one kernel serves fp32 and bf16. */
typedef struct tr_buf {
    void *p;
    tr_dtype dt;
} tr_buf;

static inline tr_buf tr_buf_make(void *p, tr_dtype dt) {
    tr_buf b = {p, dt};
    return b;
}
static inline tr_buf tr_buf_f32(float *p) { return tr_buf_make(p, TR_F32); }
static inline tr_buf tr_buf_none(void) { return tr_buf_make(NULL, TR_F32); }

static inline size_t tr_dtype_size(tr_dtype dt) {
    switch (dt) {
    case TR_F32: return 4;
    case TR_BF16: return 2;
    case TR_I32: return 4;
    case TR_U8: return 1;
    }
    return 0;
}

static inline const char *tr_dtype_name(tr_dtype dt) {
    switch (dt) {
    case TR_F32: return "fp32";
    case TR_BF16: return "bf16";
    case TR_I32: return "int32";
    case TR_U8: return "uint8";
    }
    return "?";
}

/* Element i of buf, offset in elements (device pointer arithmetic, no dereference). */
static inline tr_buf tr_buf_at(tr_buf b, size_t i) {
    return tr_buf_make(b.p ? (char *)b.p + i * tr_dtype_size(b.dt) : NULL, b.dt);
}

static inline uint16_t tr_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) /* NaN: keep it a quiet NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline float tr_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round an fp32 value through bf16 (what storing it in a bf16 tensor does). */
static inline float tr_round_bf16(float f) { return tr_bf16_to_f32(tr_f32_to_bf16(f)); }

#endif
