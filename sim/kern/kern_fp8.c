/* FP8 kernels for the twin: the quantising cast with its amax, the FP8 GEMM and the delayed-scaling
 * update — the oracle of the GPU's (cuda/kern_fp8.cu).
 *
 * The cast is one fp32 multiply by the scale and tr_fp8_from_f32's rounding (to nearest even, saturating),
 * the operations the GPU's cvt.rn.satfinite does, so both builds write the same bytes. The GEMM widens
 * each FP8 value to fp32 (exact) and runs the twin's kern_gemm on them with alpha times both
 * scale_invs: products of FP8 values are exact, the sum in double, so it differs from the GPU's fp32
 * tensor-core sum only by the GPU's rounding (docs/fp8.md). */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/fp8.h"
#include "twinrun/fp8_scaling.h"
#include "twinrun/kern.h"

/* The rounding boundaries of a format's non-negative codes: mid[c] is halfway between code c's value and
 * code c + 1's (exact in fp32: one more mantissa bit), c < max_code. */
typedef struct fp8_table {
    float mid[128];
    int max_code;
} fp8_table;

static void fp8_table_make(fp8_table *t, tr_fp8_format fmt) {
    t->max_code = tr_fp8_spec_of(fmt).max_code;
    for (int c = 0; c < t->max_code; c++)
        t->mid[c] = (tr_fp8_to_f32((uint8_t)c, fmt) + tr_fp8_to_f32((uint8_t)(c + 1), fmt)) * 0.5f;
}

/* tr_fp8_from_f32 by a binary search of the boundaries (the same bytes, tested against it, ten times
 * faster): the code whose interval holds |v|, a tie to the even code, saturating, NaN to 0x7F. */
static uint8_t fp8_encode(const fp8_table *t, float v) {
    if (isnan(v)) return 0x7F;
    const uint8_t sign = signbit(v) ? 0x80 : 0x00;
    const float a = fabsf(v);
    int lo = 0, hi = t->max_code; /* the first c with a <= mid[c], or max_code */
    while (lo < hi) {
        const int mid = (lo + hi) / 2;
        if (a <= t->mid[mid]) hi = mid;
        else lo = mid + 1;
    }
    if (lo < t->max_code && a == t->mid[lo] && (lo & 1)) lo++; /* a tie: the even code */
    return (uint8_t)(sign | lo);
}

typedef struct cast_t_args {
    uint8_t *q, *qt;
    float *amax;
    tr_buf x;
    const float *scale;
    size_t rows, cols;
    tr_fp8_format fmt;
} cast_t_args;

/* q [rows, cols] and/or qt [cols, rows]: kern_fp8_quantize is one row of n */
static void cast_t_body(void *args) {
    const cast_t_args *a = args;
    const float scale = a->scale[0];
    fp8_table t;
    fp8_table_make(&t, a->fmt);
    float amax = 0.0f;
    for (size_t r = 0; r < a->rows; r++)
        for (size_t c = 0; c < a->cols; c++) {
            const float v = ld(a->x, r * a->cols + c);
            amax = fmaxf(amax, fabsf(v));
            const uint8_t b = fp8_encode(&t, v * scale);
            if (a->q) a->q[r * a->cols + c] = b;
            if (a->qt) a->qt[c * a->rows + r] = b;
        }
    if (a->amax) a->amax[0] = fmaxf(a->amax[0], amax);
}

void kern_fp8_quantize(dev_stream *s, uint8_t *q, float *amax, tr_buf x, const float *scale, size_t n,
                       tr_fp8_format fmt) {
    kern_cost(s, TWIN_K_FP8_QUANTIZE, 2.0 * (double)n, (double)n * (tr_dtype_size(x.dt) + 1), TR_F32);
    kern_fp8_quantize_check(s, q, amax, x, scale, n, fmt);
    const twin_access acc[] = {
        {q, n, true}, {x.p, kern_bytes(x, n), false}, {scale, sizeof *scale, false}, {amax, sizeof *amax, true}};
    kern_access(s, "kernel fp8_quantize", acc, amax ? 4 : 3);
    if (kern_shape_only(s) || n == 0) return;
    cast_t_args a = {q, NULL, amax, x, scale, 1, n, fmt};
    kern_submit(s, cast_t_body, &a, sizeof a);
}

void kern_fp8_cast_transpose(dev_stream *s, uint8_t *q, uint8_t *qt, float *amax, tr_buf x, const float *scale,
                             int rows, int cols, tr_fp8_format fmt) {
    const size_t n = (size_t)(rows > 0 ? rows : 0) * (size_t)(cols > 0 ? cols : 0);
    kern_cost(s, TWIN_K_FP8_QUANTIZE, 2.0 * (double)n, (double)n * (tr_dtype_size(x.dt) + (q ? 1 : 0) + (qt ? 1 : 0)),
              TR_F32);
    kern_fp8_cast_transpose_check(s, q, qt, amax, x, scale, rows, cols, fmt);
    twin_access acc[5] = {{x.p, kern_bytes(x, n), false}, {scale, sizeof *scale, false}};
    int na = 2; /* then whichever of q, qt and amax the call has */
    if (q) acc[na++] = (twin_access){q, n, true};
    if (qt) acc[na++] = (twin_access){qt, n, true};
    if (amax) acc[na++] = (twin_access){amax, sizeof *amax, true};
    kern_access(s, "kernel fp8_cast_transpose", acc, na);
    if (kern_shape_only(s) || n == 0) return;
    cast_t_args a = {q, qt, amax, x, scale, (size_t)rows, (size_t)cols, fmt};
    kern_submit(s, cast_t_body, &a, sizeof a);
}

typedef struct transpose_args {
    uint8_t *qt;
    const uint8_t *q;
    size_t rows, cols;
} transpose_args;

static void transpose_body(void *args) {
    const transpose_args *a = args;
    for (size_t r = 0; r < a->rows; r++)
        for (size_t c = 0; c < a->cols; c++) a->qt[c * a->rows + r] = a->q[r * a->cols + c];
}

void kern_fp8_transpose(dev_stream *s, uint8_t *qt, const uint8_t *q, int rows, int cols) {
    const size_t n = (size_t)(rows > 0 ? rows : 0) * (size_t)(cols > 0 ? cols : 0);
    kern_cost(s, TWIN_K_FP8_QUANTIZE, 0.0, 2.0 * (double)n, TR_F32);
    kern_fp8_transpose_check(s, qt, q, rows, cols);
    const twin_access acc[] = {{qt, n, true}, {q, n, false}};
    kern_access(s, "kernel fp8_transpose", acc, 2);
    if (kern_shape_only(s) || n == 0) return;
    transpose_args a = {qt, q, (size_t)rows, (size_t)cols};
    kern_submit(s, transpose_body, &a, sizeof a);
}

typedef struct gemm8_args {
    tr_buf c;
    kern_fp8_operand a, b;
    int m, n, k;
    bool ta, tb;
    float alpha, beta;
} gemm8_args;

/* The FP8 values of p[n] as fp32, unscaled. */
static float *widen(const uint8_t *p, size_t n, tr_fp8_format fmt) {
    float *w = kern_scratch(n, sizeof *w, "fp8 gemm operand");
    float lut[256];
    for (int b = 0; b < 256; b++) lut[b] = tr_fp8_to_f32((uint8_t)b, fmt);
    for (size_t i = 0; i < n; i++) w[i] = lut[p[i]];
    return w;
}

static void gemm8_body(void *args) {
    const gemm8_args *g = args;
    const size_t an = (size_t)g->m * (size_t)g->k, bn = (size_t)g->k * (size_t)g->n;
    float *a = widen(g->a.p, an, g->a.fmt), *b = widen(g->b.p, bn, g->b.fmt);
    const float alpha = g->alpha * (g->a.scale_inv[0] * g->b.scale_inv[0]);
    kern_gemm(NULL, g->c, tr_buf_f32(a), tr_buf_f32(b), g->m, g->n, g->k, g->ta, g->tb, alpha, g->beta);
    free(a);
    free(b);
}

void kern_gemm_fp8(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k, bool ta,
                   bool tb, float alpha, float beta, bool fast_accum) {
    /* the profile names FP8 operands by their bf16 counterparts: the twin's dtypes have no FP8 */
    const double bytes = (double)m * k + (double)k * n + (double)m * n * tr_dtype_size(c.dt) * (beta != 0.0f ? 2 : 1);
    const tr_buf op = tr_buf_make(NULL, TR_BF16);
    if (m >= 0 && n >= 0 && k >= 0)
        kern_cost_gemm_as(s, TWIN_K_GEMM_FP8, TR_BF16, c, op, op, m, n, k, ta, tb, beta, 2.0 * m * n * (double)k,
                          bytes);
    kern_gemm_fp8_check(s, c, a, b, m, n, k, ta, tb, alpha, beta, fast_accum);
    const twin_access acc[] = {{c.p, kern_bytes(c, (size_t)m * (size_t)n), true},
                               {a.p, (size_t)m * (size_t)k, false},
                               {b.p, (size_t)k * (size_t)n, false},
                               {a.scale_inv, sizeof(float), false},
                               {b.scale_inv, sizeof(float), false}};
    kern_access(s, "kernel gemm_fp8", acc, 5);
    if (kern_shape_only(s)) return;
    gemm8_args g = {c, a, b, m, n, k, ta, tb, alpha, beta};
    kern_submit(s, gemm8_body, &g, sizeof g);
}

typedef struct update_args {
    float *hist, *scale, *scale_inv;
    int n, len, margin;
    tr_fp8_amax_algo algo;
    tr_fp8_format fmt;
} update_args;

static void update_body(void *args) {
    const update_args *u = args;
    const float fp8_max = tr_fp8_spec_of(u->fmt).max;
    for (int t = 0; t < u->n; t++)
        tr_fp8_scale_update_strided(u->hist + t, u->len, u->n, u->algo, fp8_max, u->margin, u->scale + t,
                                    u->scale_inv + t);
}

void kern_fp8_scale_update(dev_stream *s, float *hist, float *scale, float *scale_inv, int n, int len,
                           tr_fp8_amax_algo algo, tr_fp8_format fmt, int margin) {
    kern_cost(s, TWIN_K_FP8_SCALE_UPDATE, 2.0 * n * (double)len, 4.0 * n * (2.0 * len + 3.0), TR_F32);
    kern_fp8_scale_update_check(s, hist, scale, scale_inv, n, len, algo, fmt, margin);
    const size_t nz = (size_t)(n > 0 ? n : 0), lz = (size_t)(len > 0 ? len : 0);
    const twin_access acc[] = {{hist, 4 * nz * lz, true}, {scale, 4 * nz, true}, {scale_inv, 4 * nz, true}};
    kern_access(s, "kernel fp8_scale_update", acc, 3);
    if (kern_shape_only(s) || n == 0) return;
    update_args u = {hist, scale, scale_inv, n, len, margin, algo, fmt};
    kern_submit(s, update_body, &u, sizeof u);
}
