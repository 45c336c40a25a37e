/* Shared helpers for the kernel tests (tests/unit/test_kern_*.c).
 *
 * The tests only ever touch host arrays: inputs are uploaded with dev_copy_h2d, kernels run on
 * the device's default stream, outputs come back with dev_copy_d2h + dev_stream_sync. So the same
 * programs link against the twin or a GPU backend.
 *
 * Finite differences: the forward kernels store fp32, so a scalar loss L = sum(out * w) carries
 * rounding noise of about sqrt(#out) * |out| * 6e-8. A central difference with step h has
 * truncation error O(h^2) and noise O(eps_L / h); h = 1e-2 on O(1) inputs balances the two at
 * roughly 1e-4 relative, so the analytic gradient must agree to a relative L2 error well under
 * 1e-2 (each test states its bound). The step actually taken is (float)(x+h) - (float)(x-h),
 * not 2h, so fp32 rounding of the perturbed input does not bias the quotient. */
#ifndef TWINRUN_TESTS_UNIT_KERN_TESTLIB_H
#define TWINRUN_TESTS_UNIT_KERN_TESTLIB_H

#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/kern.h"

/* The device every test in a program shares (opened by kt_setup). Tests are not engine code,
 * so one file-level handle is fine here. */
static dev_device *kt_dev;
static dev_stream *kt_s;

static inline int kt_setup(void **state) {
    (void)state;
    char err[256] = "";
    kt_dev = dev_open(0, 0, err, sizeof err);
    if (!kt_dev) {
        fprintf(stderr, "dev_open failed: %s\n", err);
        return -1;
    }
    kt_s = dev_stream_default(kt_dev);
    return 0;
}

static inline int kt_teardown(void **state) {
    (void)state;
    if (kt_dev) {
        assert_int_equal(dev_mem_used(kt_dev), 0); /* every test frees what it allocates */
        dev_close(kt_dev);
    }
    kt_dev = NULL;
    kt_s = NULL;
    return 0;
}

/* ---- random numbers: splitmix64, the same sequence on every machine ---------------------- */

typedef struct kt_rng {
    uint64_t state;
} kt_rng;

static inline kt_rng kt_rng_make(uint64_t seed) {
    kt_rng r = {seed};
    return r;
}

static inline uint64_t kt_next(kt_rng *r) {
    uint64_t z = (r->state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1) with 53 random bits. */
static inline double kt_uniform(kt_rng *r) { return (double)(kt_next(r) >> 11) * 0x1.0p-53; }

/* Uniform in [-scale, scale). */
static inline float kt_sym(kt_rng *r, float scale) { return (float)((2.0 * kt_uniform(r) - 1.0) * scale); }

static inline void kt_fill(kt_rng *r, float *x, size_t n, float scale) {
    for (size_t i = 0; i < n; i++) x[i] = kt_sym(r, scale);
}

static inline int kt_below(kt_rng *r, int n) { return (int)(kt_uniform(r) * (double)n); }

static inline float *kt_host(size_t n) {
    float *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static inline double *kt_host_d(size_t n) {
    double *p = calloc(n ? n : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* ---- device buffers ------------------------------------------------------------------------ */

static inline void *kt_alloc(size_t bytes) {
    void *p = dev_alloc(kt_dev, bytes ? bytes : 1, "kernel test");
    assert_non_null(p);
    return p;
}

static inline void kt_free(void *p) { dev_free(kt_dev, p); }

/* Writes host fp32 values into an existing device tensor of type b.dt (bf16: nearest-even). */
static inline void kt_write(tr_buf b, const float *host, size_t n) {
    if (b.dt == TR_F32) {
        dev_copy_h2d(kt_s, b.p, host, n * sizeof(float));
        dev_stream_sync(kt_s);
        return;
    }
    assert_int_equal(b.dt, TR_BF16);
    uint16_t *tmp = calloc(n ? n : 1, sizeof *tmp);
    assert_non_null(tmp);
    for (size_t i = 0; i < n; i++) tmp[i] = tr_f32_to_bf16(host[i]);
    dev_copy_h2d(kt_s, b.p, tmp, n * sizeof *tmp);
    dev_stream_sync(kt_s);
    free(tmp);
}

/* A new device tensor of type dt holding host[n]. */
static inline tr_buf kt_upload(const float *host, size_t n, tr_dtype dt) {
    tr_buf b = tr_buf_make(kt_alloc(n * tr_dtype_size(dt)), dt);
    kt_write(b, host, n);
    return b;
}

/* host[n] = the device tensor b, widened to fp32 (exact for bf16). */
static inline void kt_download(float *host, tr_buf b, size_t n) {
    if (b.dt == TR_F32) {
        dev_copy_d2h(kt_s, host, b.p, n * sizeof(float));
        dev_stream_sync(kt_s);
        return;
    }
    assert_int_equal(b.dt, TR_BF16);
    uint16_t *tmp = calloc(n ? n : 1, sizeof *tmp);
    assert_non_null(tmp);
    dev_copy_d2h(kt_s, tmp, b.p, n * sizeof *tmp);
    dev_stream_sync(kt_s);
    for (size_t i = 0; i < n; i++) host[i] = tr_bf16_to_f32(tmp[i]);
    free(tmp);
}

static inline float *kt_upload_f32(const float *host, size_t n) { return kt_upload(host, n, TR_F32).p; }

static inline void kt_download_f32(float *host, const float *dev, size_t n) {
    kt_download(host, tr_buf_f32((float *)dev), n);
}

static inline int32_t *kt_upload_i32(const int32_t *host, size_t n) {
    int32_t *d = kt_alloc(n * sizeof *d);
    dev_copy_h2d(kt_s, d, host, n * sizeof *d);
    dev_stream_sync(kt_s);
    return d;
}

/* ---- comparisons --------------------------------------------------------------------------- */

/* ||got - want|| / ||want|| (L2 over the vector); 0 when both are zero. */
static inline double kt_rel_l2(const float *got, const double *want, size_t n) {
    double num = 0.0, den = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double d = (double)got[i] - want[i];
        num += d * d;
        den += want[i] * want[i];
    }
    if (den == 0.0) return sqrt(num);
    return sqrt(num / den);
}

static inline double kt_rel_l2_ff(const float *got, const float *want, size_t n) {
    double *w = kt_host_d(n);
    for (size_t i = 0; i < n; i++) w[i] = want[i];
    const double r = kt_rel_l2(got, w, n);
    free(w);
    return r;
}

/* Asserts rel_l2 <= tol and says by how much it passed, so a drifting margin is visible. */
static inline void kt_expect_close(const char *what, double rel, double tol) {
    printf("  %-46s rel L2 %.3e (bound %.0e)\n", what, rel, tol);
    if (!(rel <= tol)) fail_msg("%s: relative L2 error %.3e exceeds %.0e", what, rel, tol);
}

/* Bound for an fp32 forward against the test's double reference. The twin accumulates in double
 * and rounds once (~6e-8 relative), so 1e-6 proves that; a GPU backend accumulating in fp32 over
 * a few hundred terms drifts to ~1e-6, and the engine's budget for it is 1e-5 (DESIGN.md, §6). */
static inline double kt_fwd_tol(void) {
    dev_info info;
    dev_get_info(kt_dev, &info);
    return strcmp(info.backend, "twin") == 0 ? 1e-6 : 1e-5;
}

static inline bool kt_backend_is_twin(void) {
    dev_info info;
    dev_get_info(kt_dev, &info);
    return strcmp(info.backend, "twin") == 0;
}

static inline double kt_dot(const float *a, const float *w, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc += (double)a[i] * (double)w[i];
    return acc;
}

/* ---- finite differences -------------------------------------------------------------------- */

/* The scalar loss L = sum(out * w) of a forward run on the current host inputs in ctx. */
typedef double (*kt_loss_fn)(void *ctx);

/* Compares analytic[n] (dL/dx) with central differences of L on min(n, max_samples) elements of
 * the host input x[n] (all of them, or a random subset), and asserts relative L2 <= tol. */
static inline void kt_fd_check(const char *what, float *x, size_t n, const float *analytic, kt_loss_fn loss, void *ctx,
                               double h, size_t max_samples, double tol, kt_rng *r) {
    const size_t count = n < max_samples ? n : max_samples;
    float *ana = kt_host(count);
    double *num = kt_host_d(count);
    for (size_t j = 0; j < count; j++) {
        const size_t i = count == n ? j : (size_t)kt_below(r, (int)n);
        const float x0 = x[i];
        const float xp = (float)((double)x0 + h), xm = (float)((double)x0 - h);
        x[i] = xp;
        const double lp = loss(ctx);
        x[i] = xm;
        const double lm = loss(ctx);
        x[i] = x0;
        num[j] = (lp - lm) / ((double)xp - (double)xm);
        ana[j] = analytic[i];
    }
    char label[256];
    snprintf(label, sizeof label, "fd %s (%zu of %zu)", what, count, n);
    kt_expect_close(label, kt_rel_l2(ana, num, count), tol);
    free(num);
    free(ana);
}

#endif
