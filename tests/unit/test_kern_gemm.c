/* kern_gemm against a naive double reference (to tolerance, and bit for bit against its contract's
 * scalar loop), its gradients (the gemms a linear layer's backward
 * issues) against finite differences, beta == 0 semantics, determinism and bf16 storage. */
#include "common/fixture_kern.h"

typedef struct gemm_case {
    int m, n, k;
    bool ta, tb;
    float alpha, beta;
    tr_dtype dt;
    float *a;  /* [m,k], or [k,m] when ta */
    float *b;  /* [k,n], or [n,k] when tb */
    float *c0; /* [m,n] c before the call */
    float *w;  /* [m,n] loss weights: L = sum(c * w) */
} gemm_case;

static gemm_case gemm_case_make(kt_rng *r, int m, int n, int k, bool ta, bool tb, float alpha, float beta) {
    gemm_case gc = {m, n, k, ta, tb, alpha, beta, TR_F32, NULL, NULL, NULL, NULL};
    gc.a = kt_host((size_t)m * k);
    gc.b = kt_host((size_t)k * n);
    gc.c0 = kt_host((size_t)m * n);
    gc.w = kt_host((size_t)m * n);
    kt_fill(r, gc.a, (size_t)m * k, 1.0f);
    kt_fill(r, gc.b, (size_t)k * n, 1.0f);
    kt_fill(r, gc.c0, (size_t)m * n, 1.0f);
    kt_fill(r, gc.w, (size_t)m * n, 1.0f);
    return gc;
}

static void gemm_case_free(gemm_case *gc) {
    free(gc->a);
    free(gc->b);
    free(gc->c0);
    free(gc->w);
}

/* c_out[m,n] = the kernel's result on the case's inputs stored as gc->dt. */
static void gemm_run(const gemm_case *gc, float *c_out) {
    const size_t mk = (size_t)gc->m * gc->k, kn = (size_t)gc->k * gc->n, mn = (size_t)gc->m * gc->n;
    tr_buf a = kt_upload(gc->a, mk, gc->dt), b = kt_upload(gc->b, kn, gc->dt), c = kt_upload(gc->c0, mn, gc->dt);
    kern_gemm(kt_s, c, a, b, gc->m, gc->n, gc->k, gc->ta, gc->tb, gc->alpha, gc->beta);
    kt_download(c_out, c, mn);
    kt_free(c.p);
    kt_free(b.p);
    kt_free(a.p);
}

static double op_a(const gemm_case *gc, int i, int p) { return gc->ta ? gc->a[p * gc->m + i] : gc->a[i * gc->k + p]; }
static double op_b(const gemm_case *gc, int p, int j) { return gc->tb ? gc->b[j * gc->k + p] : gc->b[p * gc->n + j]; }

static void gemm_reference(const gemm_case *gc, double *c) {
    for (int i = 0; i < gc->m; i++)
        for (int j = 0; j < gc->n; j++) {
            double acc = 0.0;
            for (int p = 0; p < gc->k; p++) acc += op_a(gc, i, p) * op_b(gc, p, j);
            c[i * gc->n + j] = gc->alpha * acc + (gc->beta != 0.0f ? gc->beta * (double)gc->c0[i * gc->n + j] : 0.0);
        }
}

static double gemm_loss(void *ctx) {
    const gemm_case *gc = ctx;
    const size_t mn = (size_t)gc->m * gc->n;
    float *c = kt_host(mn);
    gemm_run(gc, c);
    const double l = kt_dot(c, gc->w, mn);
    free(c);
    return l;
}

static void test_gemm_forward_matches_reference(void **state) {
    (void)state;
    static const int sizes[][3] = {{7, 5, 13}, {1, 1, 1}, {70, 300, 260}}; /* the last crosses every tile edge */
    kt_rng r = kt_rng_make(11);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int combo = 0; combo < 4; combo++)
            for (int with_beta = 0; with_beta < 2; with_beta++) {
                const int m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
                gemm_case gc = gemm_case_make(&r, m, n, k, combo & 1, combo & 2, with_beta ? 0.7f : 1.0f,
                                              with_beta ? -0.3f : 0.0f);
                float *c = kt_host((size_t)m * n);
                double *want = kt_host_d((size_t)m * n);
                gemm_run(&gc, c);
                gemm_reference(&gc, want);
                char what[96];
                snprintf(what, sizeof what, "gemm %dx%dx%d ta=%d tb=%d beta=%g", m, n, k, gc.ta, gc.tb, gc.beta);
                kt_expect_close(what, kt_rel_l2(c, want, (size_t)m * n), kt_fwd_tol());
                free(want);
                free(c);
                gemm_case_free(&gc);
            }
}

static void test_gemm_beta_zero_ignores_old_c(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(12);
    for (int combo = 0; combo < 4; combo++) {
        gemm_case gc = gemm_case_make(&r, 9, 6, 5, combo & 1, combo & 2, 1.5f, 0.0f);
        for (int i = 0; i < 9 * 6; i++) gc.c0[i] = i % 2 ? NAN : INFINITY;
        float *c = kt_host(9 * 6);
        double *want = kt_host_d(9 * 6);
        gemm_run(&gc, c);
        gemm_reference(&gc, want);
        for (int i = 0; i < 9 * 6; i++) assert_true(isfinite(c[i]));
        kt_expect_close("gemm beta=0 over NaN/Inf c", kt_rel_l2(c, want, 9 * 6), kt_fwd_tol());
        free(want);
        free(c);
        gemm_case_free(&gc);
    }
}

/* dL/da and dL/db for L = sum(c * w), computed with kern_gemm the way a linear layer's backward
 * does: d op(a) = alpha * w @ op(b)^T, d op(b) = alpha * op(a)^T @ w, transposed back as needed. */
static void gemm_grads(const gemm_case *gc, float *da, float *db) {
    const int m = gc->m, n = gc->n, k = gc->k;
    tr_buf a = kt_upload(gc->a, (size_t)m * k, TR_F32), b = kt_upload(gc->b, (size_t)k * n, TR_F32);
    tr_buf w = kt_upload(gc->w, (size_t)m * n, TR_F32);
    tr_buf dad = kt_upload(gc->a, (size_t)m * k, TR_F32), dbd = kt_upload(gc->b, (size_t)k * n, TR_F32);
    if (!gc->ta) kern_gemm(kt_s, dad, w, b, m, k, n, false, !gc->tb, gc->alpha, 0.0f); /* [m,k] */
    else kern_gemm(kt_s, dad, b, w, k, m, n, gc->tb, true, gc->alpha, 0.0f);           /* [k,m] */
    if (!gc->tb) kern_gemm(kt_s, dbd, a, w, k, n, m, !gc->ta, false, gc->alpha, 0.0f); /* [k,n] */
    else kern_gemm(kt_s, dbd, w, a, n, k, m, true, gc->ta, gc->alpha, 0.0f);           /* [n,k] */
    kt_download(da, dad, (size_t)m * k);
    kt_download(db, dbd, (size_t)k * n);
    kt_free(dbd.p);
    kt_free(dad.p);
    kt_free(w.p);
    kt_free(b.p);
    kt_free(a.p);
}

static void test_gemm_gradients_match_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(13);
    for (int combo = 0; combo < 4; combo++) {
        const int m = 6, n = 5, k = 7;
        gemm_case gc = gemm_case_make(&r, m, n, k, combo & 1, combo & 2, 0.7f, 0.3f);
        float *da = kt_host((size_t)m * k), *db = kt_host((size_t)k * n), *dc0 = kt_host((size_t)m * n);
        gemm_grads(&gc, da, db);
        for (int i = 0; i < m * n; i++) dc0[i] = gc.beta * gc.w[i];
        char what[64];
        /* L is linear in each input, so the difference quotient has no truncation error; what is
         * left is fp32 output rounding amplified by 1/h, ~1e-5 relative at h = 1e-2. */
        snprintf(what, sizeof what, "gemm da ta=%d tb=%d", gc.ta, gc.tb);
        kt_fd_check(what, gc.a, (size_t)m * k, da, gemm_loss, &gc, 1e-2, 1000, 1e-3, &r);
        snprintf(what, sizeof what, "gemm db ta=%d tb=%d", gc.ta, gc.tb);
        kt_fd_check(what, gc.b, (size_t)k * n, db, gemm_loss, &gc, 1e-2, 1000, 1e-3, &r);
        snprintf(what, sizeof what, "gemm dc ta=%d tb=%d (beta*w)", gc.ta, gc.tb);
        kt_fd_check(what, gc.c0, (size_t)m * n, dc0, gemm_loss, &gc, 1e-2, 1000, 1e-3, &r);
        free(dc0);
        free(db);
        free(da);
        gemm_case_free(&gc);
    }
}

static void test_gemm_is_deterministic(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(14);
    for (int dt = 0; dt < 2; dt++)
        for (int combo = 0; combo < 4; combo++) {
            gemm_case gc = gemm_case_make(&r, 40, 270, 140, combo & 1, combo & 2, 0.9f, 0.5f);
            gc.dt = dt ? TR_BF16 : TR_F32;
            float *c1 = kt_host(40 * 270), *c2 = kt_host(40 * 270);
            gemm_run(&gc, c1);
            gemm_run(&gc, c2);
            assert_memory_equal(c1, c2, sizeof(float) * 40 * 270);
            free(c2);
            free(c1);
            gemm_case_free(&gc);
        }
}

static void test_gemm_bf16_storage_tracks_fp32(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(15);
    for (int combo = 0; combo < 4; combo++) {
        gemm_case gc = gemm_case_make(&r, 24, 33, 48, combo & 1, combo & 2, 1.0f, 0.5f);
        float *c32 = kt_host(24 * 33), *c16 = kt_host(24 * 33);
        gemm_run(&gc, c32);
        gc.dt = TR_BF16;
        gemm_run(&gc, c16);
        /* bf16 inputs and output each carry ~2^-9 relative rounding. */
        kt_expect_close("gemm bf16 vs fp32", kt_rel_l2_ff(c16, c32, 24 * 33), 1e-2);
        free(c16);
        free(c32);
        gemm_case_free(&gc);
    }
}

/* The kernel's contract, as a scalar loop: acc = +0.0, acc = op(a)[i,p] * op(b)[p,j] + acc for p
 * ascending, in double; then alpha * acc (+ beta * c), rounded once to the storage type. Inputs
 * are the stored (possibly bf16-rounded) values. */
static float gemm_contract(const gemm_case *gc, const float *a, const float *b, const float *c0, int i, int j) {
    double acc = 0.0;
    for (int p = 0; p < gc->k; p++) {
        const double x = gc->ta ? a[p * gc->m + i] : a[i * gc->k + p];
        const double y = gc->tb ? b[j * gc->k + p] : b[p * gc->n + j];
        acc = y * x + acc;
    }
    double v = (double)gc->alpha * acc;
    if (gc->beta != 0.0f) v += (double)gc->beta * (double)c0[i * gc->n + j];
    return gc->dt == TR_BF16 ? tr_round_bf16((float)v) : (float)v;
}

/* The twin: same bits as the scalar loop whatever the tiling and vector width: shapes on and across every
 * register-block (4 rows, 4 or 8 columns), packing-block (4 lanes x 4 deep), epilogue (8 and 4 wide) and
 * tile (32 x 256 x 128) edge, signed zeros among the inputs, fp32 and bf16 storage, all four transpose
 * combinations, with and without beta. */
static void test_gemm_bits_match_scalar_contract(void **state) {
    (void)state;
    if (!kt_backend_is_twin()) skip(); /* a GPU promises the tolerance of the tests above, not this order */
    static const int sizes[][3] = {{1, 1, 1},      {3, 5, 7},     {4, 8, 1},    {5, 9, 130},
                                   {12, 20, 9},    {16, 16, 128}, {16, 2, 128}, {128, 128, 16},
                                   {33, 257, 129}, {2, 128, 16},  {16, 128, 2}};
    kt_rng r = kt_rng_make(16);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
        for (int dt = 0; dt < 2; dt++)
            for (int combo = 0; combo < 4; combo++)
                for (int with_beta = 0; with_beta < 2; with_beta++) {
                    const int m = sizes[si][0], n = sizes[si][1], k = sizes[si][2];
                    gemm_case gc = gemm_case_make(&r, m, n, k, combo & 1, combo & 2, with_beta ? 0.7f : 1.0f,
                                                  with_beta ? -0.3f : 0.0f);
                    gc.dt = dt ? TR_BF16 : TR_F32;
                    const size_t mk = (size_t)m * k, kn = (size_t)k * n, mn = (size_t)m * n;
                    for (size_t e = 0; e < mk; e += 5) gc.a[e] = e % 2 ? -0.0f : 0.0f;
                    for (size_t e = 0; e < kn; e += 7) gc.b[e] = -0.0f;
                    /* the values as stored */
                    float *a = kt_host(mk), *b = kt_host(kn), *c0 = kt_host(mn), *c = kt_host(mn), *want = kt_host(mn);
                    for (size_t e = 0; e < mk; e++) a[e] = dt ? tr_round_bf16(gc.a[e]) : gc.a[e];
                    for (size_t e = 0; e < kn; e++) b[e] = dt ? tr_round_bf16(gc.b[e]) : gc.b[e];
                    for (size_t e = 0; e < mn; e++) c0[e] = dt ? tr_round_bf16(gc.c0[e]) : gc.c0[e];
                    gemm_run(&gc, c);
                    for (int i = 0; i < m; i++)
                        for (int j = 0; j < n; j++) want[i * n + j] = gemm_contract(&gc, a, b, c0, i, j);
                    if (memcmp(c, want, sizeof(float) * mn) != 0)
                        fail_msg("gemm %dx%dx%d ta=%d tb=%d beta=%g %s: bits differ from the scalar loop", m, n, k,
                                 gc.ta, gc.tb, gc.beta, tr_dtype_name(gc.dt));
                    free(want);
                    free(c);
                    free(c0);
                    free(b);
                    free(a);
                    gemm_case_free(&gc);
                }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gemm_forward_matches_reference),
        cmocka_unit_test(test_gemm_beta_zero_ignores_old_c),
        cmocka_unit_test(test_gemm_gradients_match_finite_differences),
        cmocka_unit_test(test_gemm_is_deterministic),
        cmocka_unit_test(test_gemm_bf16_storage_tracks_fp32),
        cmocka_unit_test(test_gemm_bits_match_scalar_contract),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
