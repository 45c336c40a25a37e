/* kern_gemm for the twin: c = alpha * op(a) @ op(b) + beta * c.
 *
 * Each c[i,j] is the sum over p = 0..k-1, in ascending order, of a[i,p]*b[p,j]: products of fp32
 * values are exact in double and the sum is a double, starting from +0.0 and rounded once in the
 * epilogue alpha*acc + beta*c (also double). Tiling and vector width only decide which elements
 * are in flight, never that per-element order, so the bits do not depend on them: every vector
 * lane does, per p, one IEEE double multiply and one IEEE double add (-ffp-contract=off, and the
 * AVX2 micro-kernel is compiled for "avx2" only, not "fma"), exactly the scalar loop's operations.
 *
 * Layout. op(a) and op(b) are packed into double panels: op(b)'s columns in strips of nr
 * ([k, nr] each, contiguous), op(a)'s rows in strips of GEMM_MR ([k, GEMM_MR] each), padded with
 * zeros to whole strips (padded rows and columns are computed and never stored). A micro-kernel
 * keeps a GEMM_MR x nr block of c in registers (2 * GEMM_MR x 4, two row strips, for a c at most
 * four wide with AVX2: gemm_micro_8x4) over a depth block of GEMM_TILE_K, then parks it
 * in the double accumulator tile (a double round trip through memory is exact), so scratch stays
 * bounded by k whatever m and n are. Each column panel of op(b) (k x GEMM_TILE_N) is packed once;
 * row panels of op(a) (GEMM_TILE_M x k) are repacked per column panel, 1/GEMM_TILE_N of the
 * multiply work. Packing only widens (bf16 -> fp32 -> double, exact) and moves values, and the
 * epilogue does per element exactly the scalar operations, so their AVX2 forms (pack_strips_avx2,
 * store_tile_avx2, chosen with the micro-kernel at run time) give the SSE2 forms' bits. A call that
 * fits takes its scratch from a per-thread buffer (t_gemm_scratch), the rest from the heap.
 *
 * Why registers: the flagship's GEMMs are tiny (16 tokens x 16..128 wide x 16..128 deep, 1024
 * ranks), 54% of its CPU time was the scalar load-multiply-add-store loop over the accumulator
 * (perf, before this kernel). */
#include <stdbool.h>
#include <stdint.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define GEMM_X86_ASM 1
#define GEMM_HAVE_AVX2 1 /* AVX2 functions compiled for "avx2" only, chosen at run time (gemm_body) */
#include <immintrin.h>
#endif

enum {
    GEMM_MR = 4,       /* rows of c per micro-kernel block */
    GEMM_NR_MAX = 8,   /* columns of c per micro-kernel block: 8 with AVX2 (2 x 4 lanes), 4 without or for n <= 4 */
    GEMM_TILE_M = 32,  /* rows of c in flight: a multiple of GEMM_MR */
    GEMM_TILE_N = 256, /* columns of c in flight, a multiple of every nr: the 32x256 accumulator is 64 KiB */
    GEMM_TILE_K = 128, /* depth per pass: a 128x256 block of the op(b) panel (256 KiB) stays in cache */
};

/* Vector types for the micro-kernels; the _u forms load and store at 8-byte alignment (malloc
 * gives 16 bytes, the strips' offsets are multiples of 8). */
typedef double v2d __attribute__((vector_size(16)));
typedef double v2d_u __attribute__((vector_size(16), aligned(8)));

static size_t round_up(size_t x, size_t to) { return (x + to - 1) / to * to; }

/* Packs lanes [l0, l0 + nl) of x, each k deep, as strips of w lanes:
 * dst[(ll / w) * k * w + p * w + ll % w] = x[(l0 + ll) * lane_stride + p * depth_stride], zeros for
 * ll in [nl, round_up(nl, w)). op(a)'s lanes are its rows (strips of GEMM_MR), op(b)'s its columns
 * (strips of nr); one of the two strides is 1, and the loop runs along it so reads stay contiguous,
 * a run of elements at a time with the dtype test out of the loop (ld_row_strided_d). */
static void pack_strips(double *dst, tr_buf x, size_t lane_stride, size_t depth_stride, size_t l0, size_t nl, size_t k,
                        size_t w) {
    const size_t nlp = round_up(nl, w);
    if (depth_stride == 1) { /* a lane is a contiguous run of x: into column ll % w of its strip */
        for (size_t ll = 0; ll < nlp; ll++) {
            double *d = dst + ll / w * k * w + ll % w;
            if (ll < nl) ld_row_strided_d(d, w, x, (l0 + ll) * lane_stride, k);
            else
                for (size_t p = 0; p < k; p++) d[p * w] = 0.0;
        }
        return;
    }
    /* lane_stride == 1: depth p of x is a contiguous run across the lanes, w of them per strip */
    for (size_t p = 0; p < k; p++) {
        const size_t off = l0 + p * depth_stride;
        for (size_t s = 0; s < nlp; s += w) {
            double *d = dst + s * k + p * w;
            const size_t n = nl - s < w ? nl - s : w;
            ld_row_d(d, x, off + s, n);
            for (size_t ll = n; ll < w; ll++) d[ll] = 0.0;
        }
    }
}

#ifdef GEMM_HAVE_AVX2
/* pack_strips with AVX2, the same values in the same places (widening is exact and orders nothing,
 * so only the speed differs). The flagship's panels are a few KiB and packing them a call at a time
 * was as costly as the multiply: here the dtype test is once per panel and four elements move per
 * instruction in both layouts. bf16 is a compile-time constant of each inlined copy. */

/* A body inlined into each caller whose bool and width arguments are constants: one copy per dtype
 * (and strip width, or beta test), the tests folded out of the loops. */
#define GEMM_AVX2_SPECIALISED __attribute__((target("avx2"), always_inline)) static inline

/* Four elements at src widened to double (the values of widen4_f32 and widen4_bf16). */
__attribute__((target("avx2"))) static inline __m256d widen4_avx(const void *src, bool bf16) {
    const __m128 f =
        bf16 ? _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), _mm_loadl_epi64(src))) : _mm_loadu_ps(src);
    return _mm256_cvtps_pd(f);
}

/* lane_stride == 1: depth p of x is a run across the lanes; a strip's row p is w (4 or 8) of them. */
GEMM_AVX2_SPECIALISED void pack_depth_rows_avx2(double *dst, const void *x, size_t depth_stride, size_t l0, size_t nl,
                                                size_t k, size_t w, bool bf16) {
    const size_t es = bf16 ? 2 : 4, full = nl / w * w; /* lanes in whole strips */
    for (size_t p = 0; p < k; p++) {
        const char *src = (const char *)x + (l0 + p * depth_stride) * es;
        double *d = dst + p * w;
        for (size_t s = 0; s < full; s += w, d += k * w)
            for (size_t q = 0; q < w; q += 4) _mm256_storeu_pd(d + q, widen4_avx(src + (s + q) * es, bf16));
        if (full < nl) { /* the last strip, part lanes and part zeros */
            size_t ll = full;
            for (; ll < nl; ll++)
                d[ll - full] = bf16 ? tr_bf16_to_f32(((const uint16_t *)src)[ll]) : ((const float *)src)[ll];
            for (; ll < full + w; ll++) d[ll - full] = 0.0;
        }
    }
}

/* depth_stride == 1: a lane is a run along p. Four lanes at a time, four deep: the 4x4 block of
 * doubles transposed in registers so each store is a strip's row p (four lanes side by side). */
GEMM_AVX2_SPECIALISED void pack_lane_runs_avx2(double *dst, const void *x, size_t lane_stride, size_t l0, size_t nl,
                                               size_t k, size_t w, bool bf16) {
    const size_t es = bf16 ? 2 : 4, nlp = round_up(nl, w);
    /* The padding lanes of a last, partial strip: the strip zeroed in one run first, its lanes below nl
     * written over below (lane by lane down k, the zeros were most of a 16 x 2 x 128 GEMM's packing). */
    if (nl < nlp) memset(dst + (nlp - w) * k, 0, k * w * sizeof *dst);
    size_t ll = 0;
    for (; ll + 4 <= nl; ll += 4) {
        double *d = dst + ll / w * k * w + ll % w;
        const char *r0 = (const char *)x + (l0 + ll) * lane_stride * es, *r1 = r0 + lane_stride * es,
                   *r2 = r1 + lane_stride * es, *r3 = r2 + lane_stride * es;
        size_t p = 0;
        for (; p + 4 <= k; p += 4, d += 4 * w) {
            const __m256d x0 = widen4_avx(r0 + p * es, bf16), x1 = widen4_avx(r1 + p * es, bf16),
                          x2 = widen4_avx(r2 + p * es, bf16), x3 = widen4_avx(r3 + p * es, bf16);
            const __m256d t0 = _mm256_unpacklo_pd(x0, x1), t1 = _mm256_unpackhi_pd(x0, x1); /* p, p+1 | p+2, p+3 */
            const __m256d t2 = _mm256_unpacklo_pd(x2, x3), t3 = _mm256_unpackhi_pd(x2, x3);
            _mm256_storeu_pd(d, _mm256_permute2f128_pd(t0, t2, 0x20));
            _mm256_storeu_pd(d + w, _mm256_permute2f128_pd(t1, t3, 0x20));
            _mm256_storeu_pd(d + 2 * w, _mm256_permute2f128_pd(t0, t2, 0x31));
            _mm256_storeu_pd(d + 3 * w, _mm256_permute2f128_pd(t1, t3, 0x31));
        }
        for (; p < k; p++, d += w)
            for (size_t q = 0; q < 4; q++) {
                const char *r = r0 + q * lane_stride * es;
                d[q] = bf16 ? tr_bf16_to_f32(((const uint16_t *)r)[p]) : ((const float *)r)[p];
            }
    }
    for (; ll < nl; ll++) /* fewer than four lanes left: one at a time */
        widen_row_d(dst + ll / w * k * w + ll % w, w, (const char *)x + (l0 + ll) * lane_stride * es, k, bf16);
}

/* pack_strips for x's dtype and the strip width (GEMM_MR or nr = 8), tested once per panel so each
 * inlined copy has its loops' trip counts as constants. */
__attribute__((target("avx2"))) static void pack_strips_avx2(double *dst, tr_buf x, size_t lane_stride,
                                                             size_t depth_stride, size_t l0, size_t nl, size_t k,
                                                             size_t w) {
    const bool bf16 = x.dt == TR_BF16;
    if (!bf16 && x.dt != TR_F32)
        tr_fatal("kernel: element type %s is not a floating-point tensor type", tr_dtype_name(x.dt));
#define GEMM_PACK_AVX2(W, BF16)                                                                                        \
    (depth_stride == 1 ? pack_lane_runs_avx2(dst, x.p, lane_stride, l0, nl, k, W, BF16)                                \
                       : pack_depth_rows_avx2(dst, x.p, depth_stride, l0, nl, k, W, BF16))
    if (w == 4) bf16 ? GEMM_PACK_AVX2(4, true) : GEMM_PACK_AVX2(4, false);
    else if (w == 8) bf16 ? GEMM_PACK_AVX2(8, true) : GEMM_PACK_AVX2(8, false);
    else bf16 ? GEMM_PACK_AVX2(w, true) : GEMM_PACK_AVX2(w, false);
#undef GEMM_PACK_AVX2
}
#endif

/* x + y and x * y with x the first source: where both are NaN the result is x's NaN (x86), so a NaN
 * gradient accumulated over a NaN one (beta = 1) keeps the sign it had with the scalar loop; pinned in
 * asm as madd_2 pins the micro-kernel's. */
static inline double add_x_first(double x, double y) {
#ifdef GEMM_X86_ASM
    __asm__("addsd %1, %0" : "+x"(x) : "x"(y));
    return x;
#else
    return x + y;
#endif
}

#ifdef GEMM_X86_ASM
static inline __m128d add2_x_first(__m128d x, __m128d y) {
    __asm__("addpd %1, %0" : "+x"(x) : "x"(y));
    return x;
}
static inline __m128d mul2_x_first(__m128d x, __m128d y) {
    __asm__("mulpd %1, %0" : "+x"(x) : "x"(y));
    return x;
}

/* alpha * acc[0..4) (+ beta * old), in double, rounded to fp32 (cvtpd2ps: cvtsd2ss lane by lane). */
static inline __m128 epilogue4(const double *acc, __m128d al, __m128d be, bool with_old, __m128d old_lo,
                               __m128d old_hi) {
    __m128d lo = mul2_x_first(_mm_loadu_pd(acc), al), hi = mul2_x_first(_mm_loadu_pd(acc + 2), al);
    if (with_old) lo = add2_x_first(lo, mul2_x_first(old_lo, be)), hi = add2_x_first(hi, mul2_x_first(old_hi, be));
    return _mm_movelh_ps(_mm_cvtpd_ps(lo), _mm_cvtpd_ps(hi));
}
#endif

/* The epilogue of one row of the tile: c[i] = alpha * acc[i] + beta * c[i] for i < n, in double,
 * rounded once at the store (double -> fp32, then fp32 -> bf16 for a bf16 c: st_d's rounding). The
 * dtype and beta tests are out of the loop; beta == 0 leaves the old c unread. Four elements at a time
 * on x86-64 (SSE2), the same operations lane by lane as the scalar tail. */
static void store_row(tr_buf c, size_t off, const double *acc, size_t n, float alpha, float beta) {
    const double al = alpha, be = beta;
    const bool with_old = beta != 0.0f;
    size_t i = 0;
#ifdef GEMM_X86_ASM
    const __m128d al2 = _mm_set1_pd(al), be2 = _mm_set1_pd(be);
    __m128d old_lo = _mm_setzero_pd(), old_hi = old_lo;
#endif
    switch (c.dt) {
    case TR_F32: {
        float *dst = (float *)c.p + off;
#ifdef GEMM_X86_ASM
        for (; i + 4 <= n; i += 4) {
            if (with_old) widen4_f32(dst + i, &old_lo, &old_hi);
            _mm_storeu_ps(dst + i, epilogue4(acc + i, al2, be2, with_old, old_lo, old_hi));
        }
#endif
        if (with_old)
            for (; i < n; i++) dst[i] = (float)add_x_first(acc[i] * al, (double)dst[i] * be);
        else
            for (; i < n; i++) dst[i] = (float)(acc[i] * al);
        return;
    }
    case TR_BF16: {
        uint16_t *dst = (uint16_t *)c.p + off;
#ifdef GEMM_X86_ASM
        for (; i + 4 <= n; i += 4) {
            if (with_old) widen4_bf16(dst + i, &old_lo, &old_hi);
            _mm_storel_epi64((__m128i *)(dst + i), bf16x4_of(epilogue4(acc + i, al2, be2, with_old, old_lo, old_hi)));
        }
#endif
        if (with_old)
            for (; i < n; i++)
                dst[i] = tr_f32_to_bf16((float)add_x_first(acc[i] * al, (double)tr_bf16_to_f32(dst[i]) * be));
        else
            for (; i < n; i++) dst[i] = tr_f32_to_bf16((float)(acc[i] * al));
        return;
    }
    case TR_I32:
    case TR_U8: break;
    }
    tr_fatal("kernel: element type %s is not a floating-point tensor type", tr_dtype_name(c.dt));
}

/* store_row for rows rows of the tile (row stride lda) into c (row stride ldc from element off). */
static void store_tile(tr_buf c, size_t off, size_t ldc, const double *acc, size_t lda, size_t rows, size_t n,
                       float alpha, float beta) {
    for (size_t r = 0; r < rows; r++) store_row(c, off + r * ldc, acc + r * lda, n, alpha, beta);
}

#ifdef GEMM_HAVE_AVX2
/* epilogue4 in AVX2: alpha * acc[0..4) (+ beta * old), each operand order pinned as there (the
 * accumulator first in its multiply, old c first in its, the product alpha * acc first in the add),
 * rounded to fp32 by vcvtpd2ps, cvtsd2ss lane by lane. */
__attribute__((target("avx2"))) static inline __m128 epilogue4_avx2(const double *acc, __m256d al, __m256d be,
                                                                    bool with_old, __m256d old) {
    const __m256d a = _mm256_loadu_pd(acc);
    __m256d r, o;
    __asm__("vmulpd %2, %1, %0" : "=x"(r) : "x"(a), "x"(al));
    if (with_old) {
        __asm__("vmulpd %2, %1, %0" : "=x"(o) : "x"(old), "x"(be));
        __asm__("vaddpd %2, %1, %0" : "=x"(r) : "x"(r), "x"(o));
    }
    return _mm256_cvtpd_ps(r);
}

/* Eight fp32 values (lo's four, then hi's) to bf16: tr_f32_to_bf16 lane by lane, as bf16x4_of, in
 * one 256-bit pass (a blend where bf16x4_of masks twice, an unsigned pack where it sign-extends):
 * the epilogue of a bf16 c was mostly this rounding. */
__attribute__((target("avx2"))) static inline __m128i bf16x8_of_avx2(__m128 lo, __m128 hi) {
    const __m256i u = _mm256_castps_si256(_mm256_insertf128_ps(_mm256_castps128_ps256(lo), hi, 1));
    const __m256i top = _mm256_srli_epi32(u, 16);
    const __m256i nan =
        _mm256_cmpgt_epi32(_mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff)), _mm256_set1_epi32(0x7f800000));
    const __m256i quiet = _mm256_or_si256(top, _mm256_set1_epi32(0x40));
    const __m256i rounded = _mm256_srli_epi32(
        _mm256_add_epi32(_mm256_add_epi32(u, _mm256_set1_epi32(0x7fff)), _mm256_and_si256(top, _mm256_set1_epi32(1))),
        16);
    const __m256i r = _mm256_blendv_epi8(rounded, quiet, nan); /* each < 2^16: the unsigned pack keeps it */
    return _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
}

/* The epilogue of rows rows of the tile (row stride lda) into c (row stride ldc from element off),
 * eight elements at a time, c's dtype and the beta test compile-time constants of each inlined copy;
 * a row's last n % 8 go to store_row, whose lanes do the same operations. One call per tile, not per
 * row: the flagship's rows are 16 wide as often as 128. */
GEMM_AVX2_SPECIALISED void store_rows8_avx2(tr_buf c, size_t off, size_t ldc, const double *acc, size_t lda,
                                            size_t rows, size_t n, float alpha, float beta, bool bf16, bool with_old) {
    const __m256d al = _mm256_set1_pd(alpha), be = _mm256_set1_pd(beta);
    const size_t es = bf16 ? 2 : 4, n8 = n / 8 * 8;
    __m256d old0 = _mm256_setzero_pd(), old1 = old0;
    for (size_t r = 0; r < rows; r++, off += ldc, acc += lda) {
        char *d = (char *)c.p + off * es;
        for (size_t i = 0; i < n8; i += 8, d += 8 * es) {
            if (with_old) old0 = widen4_avx(d, bf16), old1 = widen4_avx(d + 4 * es, bf16);
            const __m128 lo = epilogue4_avx2(acc + i, al, be, with_old, old0),
                         hi = epilogue4_avx2(acc + i + 4, al, be, with_old, old1);
            if (bf16) _mm_storeu_si128((__m128i *)d, bf16x8_of_avx2(lo, hi));
            else _mm_storeu_ps((float *)d, lo), _mm_storeu_ps((float *)d + 4, hi);
        }
        if (n8 < n) store_row(c, off + n8, acc + n8, n - n8, alpha, beta);
    }
}

__attribute__((target("avx2"))) static void store_tile_avx2(tr_buf c, size_t off, size_t ldc, const double *acc,
                                                            size_t lda, size_t rows, size_t n, float alpha,
                                                            float beta) {
    const bool with_old = beta != 0.0f;
    switch (c.dt) {
    case TR_F32:
        if (with_old) store_rows8_avx2(c, off, ldc, acc, lda, rows, n, alpha, beta, false, true);
        else store_rows8_avx2(c, off, ldc, acc, lda, rows, n, alpha, beta, false, false);
        return;
    case TR_BF16:
        if (with_old) store_rows8_avx2(c, off, ldc, acc, lda, rows, n, alpha, beta, true, true);
        else store_rows8_avx2(c, off, ldc, acc, lda, rows, n, alpha, beta, true, false);
        return;
    case TR_I32:
    case TR_U8: break;
    }
    tr_fatal("kernel: element type %s is not a floating-point tensor type", tr_dtype_name(c.dt));
}
#endif

/* A micro-kernel: the GEMM_MR x nr block acc (row stride ldc) += ap [kb, MR] x bp [kb, nr] over p
 * ascending; first: the block starts at +0.0 instead of being loaded. Written as prod = b * a,
 * acc = prod + acc, the operand order of the scalar loop it replaces (x86 keeps the first operand's
 * payload when both are NaN). */
typedef void gemm_micro_fn(double *acc, size_t ldc, const double *ap, const double *bp, size_t kb, bool first);

/* The micro-kernel's body for vectors V of L lanes (VU: V at 8-byte alignment), nr = 2L: eight
 * accumulators c<row><half>, each row's a broadcast to all lanes by element (no arithmetic);
 * MADD(b, a, acc) is b * a + acc in the scalar loop's operand order. */
#define GEMM_MICRO_BODY(V, VU, L, MADD)                                                                                \
    V c00 = {0}, c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;                          \
    if (!first) {                                                                                                      \
        c00 = *(const VU *)(acc + 0 * ldc), c01 = *(const VU *)(acc + 0 * ldc + (L));                                  \
        c10 = *(const VU *)(acc + 1 * ldc), c11 = *(const VU *)(acc + 1 * ldc + (L));                                  \
        c20 = *(const VU *)(acc + 2 * ldc), c21 = *(const VU *)(acc + 2 * ldc + (L));                                  \
        c30 = *(const VU *)(acc + 3 * ldc), c31 = *(const VU *)(acc + 3 * ldc + (L));                                  \
    }                                                                                                                  \
    for (size_t p = 0; p < kb; p++) {                                                                                  \
        const V b0 = *(const VU *)(bp + p * 2 * (L)), b1 = *(const VU *)(bp + p * 2 * (L) + (L));                      \
        const double *a = ap + p * GEMM_MR;                                                                            \
        V a0, a1, a2, a3;                                                                                              \
        for (int l = 0; l < (L); l++) a0[l] = a[0], a1[l] = a[1], a2[l] = a[2], a3[l] = a[3];                          \
        c00 = MADD(b0, a0, c00), c01 = MADD(b1, a0, c01);                                                              \
        c10 = MADD(b0, a1, c10), c11 = MADD(b1, a1, c11);                                                              \
        c20 = MADD(b0, a2, c20), c21 = MADD(b1, a2, c21);                                                              \
        c30 = MADD(b0, a3, c30), c31 = MADD(b1, a3, c31);                                                              \
    }                                                                                                                  \
    *(VU *)(acc + 0 * ldc) = c00, *(VU *)(acc + 0 * ldc + (L)) = c01;                                                  \
    *(VU *)(acc + 1 * ldc) = c10, *(VU *)(acc + 1 * ldc + (L)) = c11;                                                  \
    *(VU *)(acc + 2 * ldc) = c20, *(VU *)(acc + 2 * ldc + (L)) = c21;                                                  \
    *(VU *)(acc + 3 * ldc) = c30, *(VU *)(acc + 3 * ldc + (L)) = c31

/* b * a + acc, two roundings. Where both operands of an x86 multiply or add are NaN, the result is
 * the first source's NaN, so the operand order shows in a NaN's sign (a "-nan" grad norm in a
 * diagnosis): on x86-64 it is pinned in asm to the scalar loop's, b first in the multiply (mulsd a,
 * b) and the product first in the add (addsd acc, prod). C's * and + leave it to the compiler. */
static inline v2d madd_2(v2d b, v2d a, v2d acc) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __asm__("mulpd %1, %0" : "+x"(b) : "x"(a));
    __asm__("addpd %1, %0" : "+x"(b) : "x"(acc));
    return b;
#else
    return b * a + acc;
#endif
}

/* nr = 4 in two-lane vectors: 8 of the 16 xmm registers, any x86-64 (SSE2), and other targets. */
static void gemm_micro_4(double *acc, size_t ldc, const double *ap, const double *bp, size_t kb, bool first) {
    GEMM_MICRO_BODY(v2d, v2d_u, 2, madd_2);
}

#ifdef GEMM_HAVE_AVX2
typedef double v4d __attribute__((vector_size(32)));
typedef double v4d_u __attribute__((vector_size(32), aligned(8)));

/* madd_2 in AVX2 (three operands; AT&T order: vmulpd src2, src1, dst, src1 the first source). */
__attribute__((target("avx2"))) static inline v4d madd_4(v4d b, v4d a, v4d acc) {
    v4d prod, sum;
    __asm__("vmulpd %2, %1, %0" : "=x"(prod) : "x"(b), "x"(a));
    __asm__("vaddpd %2, %1, %0" : "=x"(sum) : "x"(prod), "x"(acc));
    return sum;
}

/* nr = 8 in four-lane AVX2 vectors (8 of the 16 ymm registers). "avx2" does not enable FMA, so the
 * multiply and the add stay two roundings, as in gemm_micro_4. */
__attribute__((target("avx2"))) static void gemm_micro_8(double *acc, size_t ldc, const double *ap, const double *bp,
                                                         size_t kb, bool first) {
    GEMM_MICRO_BODY(v4d, v4d_u, 4, madd_4);
}

/* Two row strips (rows 0..3 from ap, 4..7 from ap2) x nr = 4 columns in four-lane AVX2 vectors, the
 * same per-element operations: for a c at most four wide (the flagship's 16 x 2 x 128), where
 * gemm_micro_8 would spend three quarters of its lanes on padding columns. */
__attribute__((target("avx2"))) static void gemm_micro_8x4(double *acc, size_t ldc, const double *ap, const double *ap2,
                                                           const double *bp, size_t kb, bool first) {
    v4d c0 = {0}, c1 = c0, c2 = c0, c3 = c0, c4 = c0, c5 = c0, c6 = c0, c7 = c0;
    if (!first) {
        c0 = *(const v4d_u *)(acc + 0 * ldc), c1 = *(const v4d_u *)(acc + 1 * ldc);
        c2 = *(const v4d_u *)(acc + 2 * ldc), c3 = *(const v4d_u *)(acc + 3 * ldc);
        c4 = *(const v4d_u *)(acc + 4 * ldc), c5 = *(const v4d_u *)(acc + 5 * ldc);
        c6 = *(const v4d_u *)(acc + 6 * ldc), c7 = *(const v4d_u *)(acc + 7 * ldc);
    }
    for (size_t p = 0; p < kb; p++) {
        const v4d b = *(const v4d_u *)(bp + p * 4);
        const double *a = ap + p * GEMM_MR, *a2 = ap2 + p * GEMM_MR;
        v4d x0, x1, x2, x3, x4, x5, x6, x7;
        for (int l = 0; l < 4; l++)
            x0[l] = a[0], x1[l] = a[1], x2[l] = a[2], x3[l] = a[3], x4[l] = a2[0], x5[l] = a2[1], x6[l] = a2[2],
            x7[l] = a2[3];
        c0 = madd_4(b, x0, c0), c1 = madd_4(b, x1, c1), c2 = madd_4(b, x2, c2), c3 = madd_4(b, x3, c3);
        c4 = madd_4(b, x4, c4), c5 = madd_4(b, x5, c5), c6 = madd_4(b, x6, c6), c7 = madd_4(b, x7, c7);
    }
    *(v4d_u *)(acc + 0 * ldc) = c0, *(v4d_u *)(acc + 1 * ldc) = c1;
    *(v4d_u *)(acc + 2 * ldc) = c2, *(v4d_u *)(acc + 3 * ldc) = c3;
    *(v4d_u *)(acc + 4 * ldc) = c4, *(v4d_u *)(acc + 5 * ldc) = c5;
    *(v4d_u *)(acc + 6 * ldc) = c6, *(v4d_u *)(acc + 7 * ldc) = c7;
}
#endif

typedef struct gemm_args {
    tr_buf c, a, b; /* c [m, n], op(a) [m, k], op(b) [k, n] */
    int m, n, k;
    bool ta, tb;
    float alpha, beta;
} gemm_args;

typedef void gemm_pack_fn(double *dst, tr_buf x, size_t lane_stride, size_t depth_stride, size_t l0, size_t nl,
                          size_t k, size_t w);
typedef void gemm_store_fn(tr_buf c, size_t off, size_t ldc, const double *acc, size_t lda, size_t rows, size_t n,
                           float alpha, float beta);

/* Scratch of the calls that fit (all of the flagship's: 6656 doubles at most), so the ~5 million
 * GEMMs of the flagship do not each malloc and free their panels. One per thread: bodies run on the
 * pool's workers side by side, and a body never yields, so no two calls on a thread overlap. Only ever
 * holds a call's own packed inputs and partial sums, written before they are read: no value crosses
 * calls (docs/architecture.md#mutable-state). */
enum { GEMM_SCRATCH_SMALL = 8192 }; /* doubles: 64 KiB a thread */
static _Thread_local _Alignas(64) double t_gemm_scratch[GEMM_SCRATCH_SMALL];

static void gemm_body(void *args) {
    const gemm_args *g = args;
    const tr_buf c = g->c, a = g->a, b = g->b;
    const bool ta = g->ta, tb = g->tb;
    const float alpha = g->alpha, beta = g->beta;
    const size_t M = (size_t)g->m, N = (size_t)g->n, K = (size_t)g->k; /* all > 0: kern_gemm_check */

    /* The functions for this CPU; all give the same bits (see the top of the file). */
    gemm_micro_fn *micro = gemm_micro_4;
    gemm_pack_fn *pack = pack_strips;
    gemm_store_fn *store = store_tile;
    size_t nr = 4;
    bool thin = false; /* gemm_micro_8x4 on pairs of row strips, gemm_micro_4 on a last odd one */
#ifdef GEMM_HAVE_AVX2
    if (__builtin_cpu_supports("avx2")) {
        pack = pack_strips_avx2, store = store_tile_avx2;
        if (N <= 4) thin = true;
        else micro = gemm_micro_8, nr = 8;
    }
#endif
    _Static_assert(GEMM_TILE_M % GEMM_MR == 0 && GEMM_TILE_N % GEMM_NR_MAX == 0, "tiles hold whole strips");

    /* Scratch only as large as this call needs: tiny GEMMs are the common case. */
    const size_t tn = round_up(N < GEMM_TILE_N ? N : GEMM_TILE_N, nr);
    const size_t tm = round_up(M < GEMM_TILE_M ? M : GEMM_TILE_M, GEMM_MR);
    const size_t need = K * tn + K * tm + tm * tn; /* K <= INT_MAX and tm, tn <= 256: no overflow */
    double *heap = need > GEMM_SCRATCH_SMALL ? kern_scratch(need, sizeof *heap, "gemm panels") : NULL;
    double *bp = heap ? heap : t_gemm_scratch; /* [tn/nr][k][nr] */
    double *ap = bp + K * tn;                  /* [tm/MR][k][MR] */
    double *acc = ap + K * tm;                 /* [tm, tn] */

    for (size_t j0 = 0; j0 < N; j0 += GEMM_TILE_N) {
        const size_t nt = N - j0 < GEMM_TILE_N ? N - j0 : GEMM_TILE_N, ntp = round_up(nt, nr);
        pack(bp, b, tb ? K : 1, tb ? 1 : N, j0, nt, K, nr); /* op(b)[p, j]: b[j*k + p] or b[p*n + j] */
        for (size_t i0 = 0; i0 < M; i0 += GEMM_TILE_M) {
            const size_t mt = M - i0 < GEMM_TILE_M ? M - i0 : GEMM_TILE_M, mtp = round_up(mt, GEMM_MR);
            pack(ap, a, ta ? 1 : K, ta ? M : 1, i0, mt, K, GEMM_MR); /* op(a)[i, p]: a[p*m + i] or a[i*k + p] */
            for (size_t p0 = 0; p0 < K; p0 += GEMM_TILE_K) {
                const size_t kb = K - p0 < GEMM_TILE_K ? K - p0 : GEMM_TILE_K;
                for (size_t ii = 0; ii < mtp; ii += GEMM_MR) {
#ifdef GEMM_HAVE_AVX2
                    if (thin && ii + GEMM_MR < mtp) { /* ntp == nr == 4: one column strip */
                        gemm_micro_8x4(acc + ii * ntp, ntp, ap + ii * K + p0 * GEMM_MR,
                                       ap + (ii + GEMM_MR) * K + p0 * GEMM_MR, bp + p0 * nr, kb, p0 == 0);
                        ii += GEMM_MR;
                        continue;
                    }
#endif
                    for (size_t jj = 0; jj < ntp; jj += nr)
                        micro(acc + ii * ntp + jj, ntp, ap + ii * K + p0 * GEMM_MR, bp + jj * K + p0 * nr, kb, p0 == 0);
                }
            }
            store(c, i0 * N + j0, N, acc, ntp, mt, nt, alpha, beta);
        }
    }
    free(heap);
}

void kern_gemm(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
               float beta) {
    kern_cost_gemm(s, c, a, b, m, n, k, ta, tb, beta, 2.0 * m * n * (double)k,
                   (double)m * k * tr_dtype_size(a.dt) + (double)k * n * tr_dtype_size(b.dt) +
                       (double)m * n * tr_dtype_size(c.dt) * (beta != 0.0f ? 2.0 : 1.0));
    kern_gemm_check(s, c, a, b, m, n, k, ta, tb, alpha, beta);
    kern_access(s, "kernel gemm",
                (const twin_access[]){{c.p, kern_bytes(c, (size_t)m * (size_t)n), true},
                                      {a.p, kern_bytes(a, (size_t)m * (size_t)k), false},
                                      {b.p, kern_bytes(b, (size_t)k * (size_t)n), false}},
                3);
    if (kern_shape_only(s)) return;
    gemm_args g = {c, a, b, m, n, k, ta, tb, alpha, beta};
    kern_submit(s, gemm_body, &g, sizeof g);
}
