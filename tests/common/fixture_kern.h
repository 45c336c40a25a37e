/* The kernel tests' fixtures (tests/unit/test_kern_*.c; fixture_kern.c in twinrun_test_fixtures).
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
#ifndef TWINRUN_TESTS_COMMON_FIXTURE_KERN_H
#define TWINRUN_TESTS_COMMON_FIXTURE_KERN_H

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

/* The device every test in a program shares (opened by kt_setup) and its default stream. Tests are
 * not engine code, so one program-wide handle is fine here. */
extern dev_device *kt_dev;
extern dev_stream *kt_s;

/* cmocka group setup and teardown: opens device 0; closes it, asserting every test freed what it
 * allocated. */
int kt_setup(void **state);
int kt_teardown(void **state);

/* ---- random numbers: splitmix64, the same sequence on every machine ---------------------- */

typedef struct kt_rng {
    uint64_t state;
} kt_rng;

kt_rng kt_rng_make(uint64_t seed);

uint64_t kt_next(kt_rng *r);

/* Uniform in [0, 1) with 53 random bits. */
double kt_uniform(kt_rng *r);

/* Uniform in [-scale, scale). */
float kt_sym(kt_rng *r, float scale);

void kt_fill(kt_rng *r, float *x, size_t n, float scale);

int kt_below(kt_rng *r, int n);

float *kt_host(size_t n);

double *kt_host_d(size_t n);

/* ---- device buffers ------------------------------------------------------------------------ */

void *kt_alloc(size_t bytes);

void kt_free(void *p);

/* Writes host fp32 values into an existing device tensor of type b.dt (bf16: nearest-even). */
void kt_write(tr_buf b, const float *host, size_t n);

/* A new device tensor of type dt holding host[n]. */
tr_buf kt_upload(const float *host, size_t n, tr_dtype dt);

/* host[n] = the device tensor b, widened to fp32 (exact for bf16). */
void kt_download(float *host, tr_buf b, size_t n);

float *kt_upload_f32(const float *host, size_t n);

void kt_download_f32(float *host, const float *dev, size_t n);

int32_t *kt_upload_i32(const int32_t *host, size_t n);

/* ---- comparisons --------------------------------------------------------------------------- */

/* ||got - want|| / ||want|| (L2 over the vector); 0 when both are zero. */
double kt_rel_l2(const float *got, const double *want, size_t n);

double kt_rel_l2_ff(const float *got, const float *want, size_t n);

/* Asserts rel_l2 <= tol and says by how much it passed, so a drifting margin is visible. */
void kt_expect_close(const char *what, double rel, double tol);

/* Bound for an fp32 forward against the test's double reference. The twin accumulates in double
 * and rounds once (~6e-8 relative), so 1e-6 proves that; a GPU backend accumulating in fp32 over
 * a few hundred terms drifts to ~1e-6, and the engine's budget for it is 1e-5 (DESIGN.md, §6). */
double kt_fwd_tol(void);

bool kt_backend_is_twin(void);

double kt_dot(const float *a, const float *w, size_t n);

/* ---- finite differences -------------------------------------------------------------------- */

/* The scalar loss L = sum(out * w) of a forward run on the current host inputs in ctx. */
typedef double (*kt_loss_fn)(void *ctx);

/* Compares analytic[n] (dL/dx) with central differences of L on min(n, max_samples) elements of
 * the host input x[n] (all of them, or a random subset), and asserts relative L2 <= tol. */
void kt_fd_check(const char *what, float *x, size_t n, const float *analytic, kt_loss_fn loss, void *ctx, double h,
                 size_t max_samples, double tol, kt_rng *r);

#endif
