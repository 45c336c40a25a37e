/* FP8 element formats (OCP 8-bit floating point, as Hopper's tensor cores and Transformer Engine use
 * them) and their conversion from and to fp32, the same bits on the twin and the GPU:
 *
 *   E4M3 ("fn"): 1 sign, 4 exponent (bias 7), 3 mantissa bits; no infinities; S.1111.111 is NaN,
 *                so the largest finite value is S.1111.110 = 448; subnormals down to 2^-9.
 *   E5M2:        1 sign, 5 exponent (bias 15), 2 mantissa bits; IEEE-like with infinities and NaNs;
 *                largest finite 57344; subnormals down to 2^-16.
 *
 * fp32 -> fp8 rounds to nearest, ties to even, and saturates as PTX's cvt.rn.satfinite does (the
 * conversion Transformer Engine's cast kernels use): a finite value beyond the largest finite one,
 * and an infinity, become the largest finite value of the sign; a NaN becomes the canonical NaN 0x7F.
 * Rounding is done in double, where every step is exact (an fp32 value divided by a power of two), so
 * the result does not depend on the host's floating-point environment beyond round-to-nearest. */
#ifndef TWINRUN_BASE_FP8_H
#define TWINRUN_BASE_FP8_H

#include <math.h>
#include <stdint.h>

typedef enum tr_fp8_format {
    TR_FP8_E4M3 = 0,
    TR_FP8_E5M2 = 1,
} tr_fp8_format;

typedef struct tr_fp8_spec {
    int man_bits;     /* mantissa bits */
    int bias;         /* exponent bias */
    int emax;         /* exponent of the largest finite value */
    float max;        /* the largest finite value */
    uint8_t max_code; /* its encoding (positive) */
} tr_fp8_spec;

static inline tr_fp8_spec tr_fp8_spec_of(tr_fp8_format f) {
    if (f == TR_FP8_E5M2) {
        tr_fp8_spec s = {2, 15, 15, 57344.0f, 0x7B};
        return s;
    }
    tr_fp8_spec s = {3, 7, 8, 448.0f, 0x7E};
    return s;
}

static inline const char *tr_fp8_name(tr_fp8_format f) { return f == TR_FP8_E5M2 ? "e5m2" : "e4m3"; }

/* fp32 -> fp8 bits: round to nearest even, saturating (see the top of this file). */
static inline uint8_t tr_fp8_from_f32(float x, tr_fp8_format f) {
    const tr_fp8_spec s = tr_fp8_spec_of(f);
    if (isnan(x)) return 0x7F;
    const uint8_t sign = signbit(x) ? 0x80 : 0x00;
    double a = fabs((double)x);
    if (a > (double)s.max) return (uint8_t)(sign | s.max_code); /* also +-inf */
    if (a == 0.0) return sign;
    const int emin = 1 - s.bias; /* exponent of the smallest normal */
    int e;
    (void)frexp(a, &e);
    e -= 1;                 /* a = m * 2^e with 1 <= m < 2 */
    if (e < emin) e = emin; /* subnormal range: the quantum of the smallest normal binade */
    /* a / quantum is exact in double; rint rounds half to even under the default rounding mode */
    const double q = ldexp(1.0, e - s.man_bits);
    const double n = rint(a / q);
    const double v = n * q; /* <= max: max is representable and a <= max */
    int ev;
    (void)frexp(v, &ev);
    ev -= 1;
    if (v == 0.0) return sign;
    if (ev < emin) /* subnormal: exponent field 0, mantissa v / 2^(emin - man_bits) */
        return (uint8_t)(sign | (uint8_t)ldexp(v, s.man_bits - emin));
    const int mant = (int)ldexp(v, s.man_bits - ev) - (1 << s.man_bits);
    return (uint8_t)(sign | (uint8_t)((ev + s.bias) << s.man_bits) | (uint8_t)mant);
}

/* fp8 bits -> fp32 (exact: every fp8 value is an fp32 value). */
static inline float tr_fp8_to_f32(uint8_t b, tr_fp8_format f) {
    const tr_fp8_spec s = tr_fp8_spec_of(f);
    const int exp_bits = 7 - s.man_bits;
    const int ef = (b >> s.man_bits) & ((1 << exp_bits) - 1);
    const int mf = b & ((1 << s.man_bits) - 1);
    const double sign = (b & 0x80) ? -1.0 : 1.0;
    if (f == TR_FP8_E4M3 && ef == 15 && mf == 7) return NAN;
    if (f == TR_FP8_E5M2 && ef == 31) return mf ? NAN : (float)(sign * INFINITY);
    if (ef == 0) return (float)(sign * ldexp((double)mf, 1 - s.bias - s.man_bits));
    return (float)(sign * ldexp((double)(mf + (1 << s.man_bits)), ef - s.bias - s.man_bits));
}

/* Round an fp32 value through fp8 (what a quantise-dequantise of it does). */
static inline float tr_fp8_round(float x, tr_fp8_format f) { return tr_fp8_to_f32(tr_fp8_from_f32(x, f), f); }

#endif
