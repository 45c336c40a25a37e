/* Private helpers of the twin's CPU kernels: typed element access and fp64 scratch.
 *
 * Numerics shared by every kernel in this folder (the oracle's contract):
 * - loads widen bf16 -> fp32 exactly; arithmetic on loaded values happens in double;
 * - long reductions (dot products, softmax sums, norm statistics) accumulate in double in a
 *   fixed, documented order, and the result is rounded once, double -> fp32 -> storage type,
 *   at the store. A product of two fp32 values is exact in double, so a double accumulator
 *   stays far inside the 1e-5 (logits) / 1e-4 (grads) tolerances against a float64 reference;
 * - no threads inside a kernel, no reassociation (-ffp-contract=off, no fast-math): same inputs, same bits.
 * In the twin, device memory is host memory, so kernels dereference the pointers they get.
 *
 * Each kernel is a launch and a body. The launch (kern_X itself) charges the simulated time
 * (kern_cost), checks the arguments (kern_X_check), and hands the body an argument struct through
 * kern_submit; the body may run later on a worker thread (twin_defer.h), so it reads only its struct
 * and device memory. A check that reads device memory (token ids, targets, positions) runs at launch
 * after kern_drain, so a bad id still ends the rank that launched the kernel, at the same point. In
 * predict (shape-only) mode the launch returns after its check (kern_shape_only): no drain, no body, no
 * queued work; device memory is only addresses then. */
#ifndef TWINRUN_SIM_KERN_KERN_CPU_H
#define TWINRUN_SIM_KERN_KERN_CPU_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "kern_bf16x4.h"
#include "twin_cost.h"
#include "twin_defer.h"
#include "twin_stream.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"
#include "twinrun/kern_check.h" /* the contract every kernel checks first: kern_X_check */

/* Advances the simulated clock of the stream's rank by the kernel's cost (twin_cost.h): the FLOPs it
 * does and the bytes it moves, as a GPU would (the CPU's own time never enters), under its kind (a
 * calibrated spec has an efficiency per kind). bf16 storage runs at the tensor-core rate. */
static inline void kern_cost(dev_stream *s, twin_kernel_kind kind, double flops, double bytes, tr_dtype dt) {
    /* negative sizes: the kernel's argument check (kern_X_check), just after, names the bad argument */
    if (s && flops >= 0 && bytes >= 0)
        twin_cost_kernel(s, &(twin_kernel_cost){.kind = kind, .flops = flops, .bytes = bytes, .dt = dt});
}

/* kern_cost of a GEMM: bf16 inputs into an fp32 output are the weight gradients' class; the shape
 * names the launch in the twin's profile. */
/* A GEMM launch of kind (its shape and types name it in TWINRUN_TWIN_PROFILE), computing at dt's rate. */
static inline void kern_cost_gemm_as(dev_stream *s, twin_kernel_kind kind, tr_dtype dt, tr_buf c, tr_buf a, tr_buf b,
                                     int m, int n, int k, bool ta, bool tb, float beta, double flops, double bytes) {
    if (!s || flops < 0 || bytes < 0) return;
    twin_cost_kernel(s, &(twin_kernel_cost){.kind = kind,
                                            .flops = flops,
                                            .bytes = bytes,
                                            .dt = dt,
                                            .m = m,
                                            .n = n,
                                            .k = k,
                                            .ta = ta,
                                            .tb = tb,
                                            .accumulate = beta != 0.0f,
                                            .a_dt = a.dt,
                                            .b_dt = b.dt,
                                            .c_dt = c.dt});
}

static inline void kern_cost_gemm(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb,
                                  float beta, double flops, double bytes) {
    const bool wgrad = a.dt == TR_BF16 && c.dt == TR_F32;
    kern_cost_gemm_as(s, wgrad ? TWIN_K_GEMM_WGRAD : TWIN_K_GEMM, a.dt, c, a, b, m, n, k, ta, tb, beta, flops, bytes);
}

/* The device ranges a launch reads and writes, for the twin's stream hazard check (twin_stream.h),
 * after its argument check. A NULL stream (the GPU build's kern_oracle) has nothing to check. Kernels
 * that declare nothing are not checked (docs/twin.md#streams lists which do). */
static inline void kern_access(dev_stream *s, const char *what, const twin_access *acc, int n) {
    if (s) twin_stream_op(s, what, NULL, acc, n);
}

/* Bytes of n elements of b's type. */
static inline size_t kern_bytes(tr_buf b, size_t n) { return n * tr_dtype_size(b.dt); }

/* Predict mode: after its cost and its argument check a kernel returns here, before it reads or
 * writes device memory (which is only addresses then) or takes host scratch, and before
 * it submits anything (kern_submit): in shape-only mode nothing is queued. */
static inline bool kern_shape_only(dev_stream *s) { return s && twin_stream_shape_only(s); }

/* Runs body(args) after the work issued before it on s's device; args (size bytes) is copied. A NULL
 * stream (the GPU build's kern_oracle) runs it now. */
static inline void kern_submit(dev_stream *s, twin_job_fn *body, void *args, size_t size) {
    if (s) twin_kern_submit(s, body, args, size);
    else body(args);
}

/* Before a launch reads device memory: the work issued before it has run. */
static inline void kern_drain(dev_stream *s) {
    if (s) twin_kern_drain(s);
}

static inline float ld(tr_buf b, size_t i) {
    switch (b.dt) {
    case TR_F32: return ((const float *)b.p)[i];
    case TR_BF16: return tr_bf16_to_f32(((const uint16_t *)b.p)[i]);
    case TR_I32:
    case TR_U8: break;
    }
    tr_fatal("kernel: element type %s is not a floating-point tensor type", tr_dtype_name(b.dt));
}

/* Store v into element i of b, rounding to nearest-even when b is bf16. */
static inline void st(tr_buf b, size_t i, float v) {
    switch (b.dt) {
    case TR_F32: ((float *)b.p)[i] = v; return;
    case TR_BF16: ((uint16_t *)b.p)[i] = tr_f32_to_bf16(v); return;
    case TR_I32:
    case TR_U8: break;
    }
    tr_fatal("kernel: element type %s is not a floating-point tensor type", tr_dtype_name(b.dt));
}

/* The one rounding of a double result: double -> fp32 here, fp32 -> bf16 inside st(). */
static inline void st_d(tr_buf b, size_t i, double v) { st(b, i, (float)v); }

/* Host scratch for the twin's kernels; out of host memory is fatal for the rank. */
static inline void *kern_scratch(size_t count, size_t elem_size, const char *what) {
    if (count == 0) count = 1;
    if (count > SIZE_MAX / elem_size) tr_fatal("kernel: scratch for %s overflows size_t (%zu elements)", what, count);
    void *p = malloc(count * elem_size);
    if (!p) tr_fatal("kernel: out of host memory for %zu elements of scratch (%s)", count, what);
    return p;
}

#ifdef __SSE2__
/* Four elements at src widened to double as two pairs: cvtps2pd is cvtss2sd lane by lane (exact, a
 * NaN quieted the same way), bf16 widened by moving its 16 bits to the top of an fp32 (tr_bf16_to_f32). */
static inline void widen4_f32(const float *src, __m128d *lo, __m128d *hi) {
    const __m128 f = _mm_loadu_ps(src);
    *lo = _mm_cvtps_pd(f), *hi = _mm_cvtps_pd(_mm_movehl_ps(f, f));
}
static inline void widen4_bf16(const uint16_t *src, __m128d *lo, __m128d *hi) {
    const __m128 f = f32x4_of_bf16(src);
    *lo = _mm_cvtps_pd(f), *hi = _mm_cvtps_pd(_mm_movehl_ps(f, f));
}
/* Four doubles into dst[0], dst[step], dst[2 * step], dst[3 * step]. */
static inline void store4_strided_d(double *dst, size_t step, __m128d lo, __m128d hi) {
    if (step == 1) {
        _mm_storeu_pd(dst, lo), _mm_storeu_pd(dst + 2, hi);
        return;
    }
    _mm_storel_pd(dst, lo), _mm_storeh_pd(dst + step, lo);
    _mm_storel_pd(dst + 2 * step, hi), _mm_storeh_pd(dst + 3 * step, hi);
}
#endif

/* n elements at src (fp32, or bf16 where bf16) widened to double into dst[0], dst[step], ...: four at
 * a time where SSE2 is. Called with a constant bf16, so the test folds out of the loops. */
static inline void widen_row_d(double *dst, size_t step, const void *src, size_t n, bool bf16) {
    const float *f = src;
    const uint16_t *h = src;
    size_t i = 0;
#ifdef __SSE2__
    for (__m128d lo, hi; i + 4 <= n; i += 4) {
        if (bf16) widen4_bf16(h + i, &lo, &hi);
        else widen4_f32(f + i, &lo, &hi);
        store4_strided_d(dst + i * step, step, lo, hi);
    }
#endif
    for (; i < n; i++) dst[i * step] = bf16 ? tr_bf16_to_f32(h[i]) : f[i];
}

/* n elements of b starting at element off, widened to double into dst[0], dst[step], ...: the dtype
 * test once per row, not per element (the values are ld()'s: bf16 -> fp32 -> double, all exact). */
static inline void ld_row_strided_d(double *dst, size_t step, tr_buf b, size_t off, size_t n) {
    switch (b.dt) {
    case TR_F32: widen_row_d(dst, step, (const float *)b.p + off, n, false); return;
    case TR_BF16: widen_row_d(dst, step, (const uint16_t *)b.p + off, n, true); return;
    case TR_I32:
    case TR_U8: break;
    }
    tr_fatal("kernel: element type %s is not a floating-point tensor type", tr_dtype_name(b.dt));
}

/* n consecutive elements of b starting at element off, widened to double. */
static inline void ld_row_d(double *dst, tr_buf b, size_t off, size_t n) { ld_row_strided_d(dst, 1, b, off, n); }

/* A whole tensor of n elements widened into fresh double scratch. */
static inline double *ld_all_d(tr_buf b, size_t n, const char *what) {
    double *d = kern_scratch(n, sizeof *d, what);
    ld_row_d(d, b, 0, n);
    return d;
}

#endif
