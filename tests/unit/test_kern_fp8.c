/* The twin's FP8 kernels against their definitions: the quantising cast byte for byte against
 * tr_fp8_from_f32 of x * scale (fp32 and bf16 inputs, special values) with its amax, and the
 * cast-transpose against the cast; the FP8 GEMM against
 * a double loop over the decoded FP8 values for every transpose combination and both output types; the
 * delayed-scaling update against tr_fp8_scale_update per tensor of a [len, n] history. */
#include "common/fixture_kern.h"
#include "twinrun/fp8.h"
#include "twinrun/fp8_scaling.h"

/* 300,000 fp32 bit patterns of every exponent, scale 1: the kernel's bytes are tr_fp8_from_f32's. */
static void test_quantize_every_exponent(void **state) {
    (void)state;
    enum { N = 300000 };
    float *x = kt_host(N);
    uint32_t s = 12345;
    for (int i = 0; i < N; i++) {
        s = s * 1664525u + 1013904223u;
        uint32_t u = s;
        if (i % 3 == 0)
            u = (u & 0x80000000u) | ((uint32_t)(100 + i % 60) << 23) | (u & 0x7fffffu); /* near fp8's range */
        if (i % 7 == 0) u &= ~0xfffffu; /* short mantissas: exact values and ties */
        memcpy(&x[i], &u, 4);
    }
    const float one = 1.0f;
    float *scale = kt_upload_f32(&one, 1);
    tr_buf xd = kt_upload(x, N, TR_F32);
    uint8_t *q = kt_alloc(N), *qh = malloc(N);
    for (int f = 0; f < 2; f++) {
        kern_fp8_quantize(kt_s, q, NULL, xd, scale, N, (tr_fp8_format)f);
        dev_copy_d2h(kt_s, qh, q, N);
        for (int i = 0; i < N; i++)
            if (qh[i] != tr_fp8_from_f32(x[i], (tr_fp8_format)f))
                fail_msg("%s of %a: 0x%02x, tr_fp8_from_f32 0x%02x", tr_fp8_name((tr_fp8_format)f), (double)x[i], qh[i],
                         tr_fp8_from_f32(x[i], (tr_fp8_format)f));
    }
    kt_free(q), kt_free(xd.p), kt_free(scale), free(qh), free(x);
}

static void test_quantize_bytes_and_amax(void **state) {
    (void)state;
    kt_rng r = {7};
    enum { N = 1037 }; /* not a multiple of any vector width */
    float *x = kt_host(N);
    kt_fill(&r, x, N, 3.0f);
    const float special[] = {
        0.0f,      -0.0f, 1e-9f, -1e-9f, 448.0f,   449.0f,  -1e6f,  INFINITY,
        -INFINITY, NAN,   0.5f,  2e-3f,  57344.0f, 1.0625f, 1.1875f}; /* ties of E4M3 at 1 + 1/16, 3/16 */
    for (size_t i = 0; i < sizeof special / sizeof special[0]; i++) x[i * 7] = special[i];
    for (int dti = 0; dti < 2; dti++)
        for (int fi = 0; fi < 2; fi++) {
            const tr_dtype dt = dti ? TR_BF16 : TR_F32;
            const tr_fp8_format fmt = fi ? TR_FP8_E5M2 : TR_FP8_E4M3;
            const float scale_h = 37.5f, amax0 = 0.25f;
            tr_buf xd = kt_upload(x, N, dt);
            float *xs = kt_host(N); /* x as stored */
            kt_download(xs, xd, N);
            float *scale = kt_upload_f32(&scale_h, 1), *amax = kt_upload_f32(&amax0, 1);
            uint8_t *q = kt_alloc(N), qh[N];
            kern_fp8_quantize(kt_s, q, amax, xd, scale, N, fmt);
            dev_copy_d2h(kt_s, qh, q, N);
            float amax_h;
            kt_download_f32(&amax_h, amax, 1);
            float want = amax0;
            for (int i = 0; i < N; i++) {
                assert_int_equal(qh[i], tr_fp8_from_f32(xs[i] * scale_h, fmt));
                if (!isnan(xs[i])) want = fmaxf(want, fabsf(xs[i]));
            }
            assert_true(isinf(want) && amax_h == want); /* the infinity counts, the NaN does not */
            /* without an amax pointer nothing else is written; a NaN becomes 0x7F */
            kern_fp8_quantize(kt_s, q, NULL, xd, scale, N, fmt);
            dev_copy_d2h(kt_s, qh, q, N);
            assert_int_equal(qh[9 * 7], 0x7F);
            kt_free(q), kt_free(scale), kt_free(amax), kt_free(xd.p), free(xs);
        }
    free(x);
}

/* The cast-transpose writes kern_fp8_quantize's bytes in both layouts (each alone, or both) and its amax:
 * shapes of whole 64 x 64 tiles, of part tiles, and ones a GPU's tiled kernel leaves to its
 * element-a-thread one (cols % 8, rows % 4). */
static void test_cast_transpose_is_quantize(void **state) {
    (void)state;
    kt_rng r = {13};
    static const int shapes[][2] = {{128, 192}, {72, 40}, {36, 24}, {7, 13}, {64, 100}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
        for (int dti = 0; dti < 2; dti++)
            for (int mode = 0; mode < 3; mode++) { /* q and qt, q alone, qt alone */
                const int rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
                const tr_dtype dt = dti ? TR_BF16 : TR_F32;
                const tr_fp8_format fmt = (si + (size_t)mode) % 2 ? TR_FP8_E5M2 : TR_FP8_E4M3;
                float *x = kt_host((size_t)n);
                kt_fill(&r, x, (size_t)n, 5.0f);
                x[n / 3] = 1e6f, x[n / 2] = NAN; /* saturates; skipped by the amax */
                tr_buf xd = kt_upload(x, (size_t)n, dt);
                const float scale_h = 21.25f, amax0 = 0.5f;
                float *scale = kt_upload_f32(&scale_h, 1), *amax = kt_upload_f32(&amax0, 1),
                      *amax2 = kt_upload_f32(&amax0, 1);
                uint8_t *want = kt_alloc((size_t)n), *q = kt_alloc((size_t)n), *qt = kt_alloc((size_t)n);
                uint8_t *wh = malloc((size_t)n), *qh = malloc((size_t)n), *qth = malloc((size_t)n);
                memset(qh, 0xA5, (size_t)n), memset(qth, 0xA5, (size_t)n);
                dev_copy_h2d(kt_s, q, qh, (size_t)n);
                dev_copy_h2d(kt_s, qt, qth, (size_t)n);
                kern_fp8_quantize(kt_s, want, amax, xd, scale, (size_t)n, fmt);
                kern_fp8_cast_transpose(kt_s, mode != 2 ? q : NULL, mode != 1 ? qt : NULL, amax2, xd, scale, rows, cols,
                                        fmt);
                dev_copy_d2h(kt_s, wh, want, (size_t)n);
                dev_copy_d2h(kt_s, qh, q, (size_t)n);
                dev_copy_d2h(kt_s, qth, qt, (size_t)n);
                for (int i = 0; i < rows; i++)
                    for (int j = 0; j < cols; j++) {
                        const uint8_t w = wh[i * cols + j];
                        assert_int_equal(qh[i * cols + j], mode != 2 ? w : 0xA5);
                        assert_int_equal(qth[j * rows + i], mode != 1 ? w : 0xA5);
                    }
                float a1, a2;
                kt_download_f32(&a1, amax, 1);
                kt_download_f32(&a2, amax2, 1);
                assert_memory_equal(&a1, &a2, sizeof a1);
                assert_true(a1 >= 1e6f * 0.99f);
                kt_free(want), kt_free(q), kt_free(qt), kt_free(scale), kt_free(amax), kt_free(amax2), kt_free(xd.p);
                free(wh), free(qh), free(qth), free(x);
            }
}

/* The byte transpose: every byte where the transpose puts it, and the cast-transpose's qt is the
 * transpose of its q (an FP8 weight kept in FP8 gives the data gradient the bytes a cast would). */
static void test_fp8_transpose(void **state) {
    (void)state;
    kt_rng r = {17};
    static const int shapes[][2] = {{128, 192}, {72, 40}, {7, 13}, {1, 9}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        const int rows = shapes[si][0], cols = shapes[si][1], n = rows * cols;
        float *x = kt_host((size_t)n);
        kt_fill(&r, x, (size_t)n, 5.0f);
        tr_buf xd = kt_upload(x, (size_t)n, TR_BF16);
        const float scale_h = 3.5f;
        float *scale = kt_upload_f32(&scale_h, 1);
        uint8_t *q = kt_alloc((size_t)n), *qt = kt_alloc((size_t)n), *qt2 = kt_alloc((size_t)n);
        uint8_t *qh = malloc((size_t)n), *qth = malloc((size_t)n), *qt2h = malloc((size_t)n);
        kern_fp8_cast_transpose(kt_s, q, qt, NULL, xd, scale, rows, cols, TR_FP8_E4M3);
        kern_fp8_transpose(kt_s, qt2, q, rows, cols);
        dev_copy_d2h(kt_s, qh, q, (size_t)n);
        dev_copy_d2h(kt_s, qth, qt, (size_t)n);
        dev_copy_d2h(kt_s, qt2h, qt2, (size_t)n);
        for (int i = 0; i < rows; i++)
            for (int j = 0; j < cols; j++) assert_int_equal(qt2h[j * rows + i], qh[i * cols + j]);
        assert_memory_equal(qt2h, qth, (size_t)n);
        kt_free(q), kt_free(qt), kt_free(qt2), kt_free(scale), kt_free(xd.p);
        free(qh), free(qth), free(qt2h), free(x);
    }
}

/* c[m,n] from the decoded FP8 values in double, then alpha * sa * sb and beta * c0 as the kernel's contract. */
static void reference(double *c, const uint8_t *a, tr_fp8_format fa, const uint8_t *b, tr_fp8_format fb, int m, int n,
                      int k, bool ta, bool tb) {
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int p = 0; p < k; p++)
                s += (double)tr_fp8_to_f32(ta ? a[p * m + i] : a[i * k + p], fa) *
                     tr_fp8_to_f32(tb ? b[j * k + p] : b[p * n + j], fb);
            c[i * n + j] = s;
        }
}

static void test_gemm_against_decoded_values(void **state) {
    (void)state;
    kt_rng r = {11};
    const int m = 48, n = 32, k = 80;
    uint8_t ah[48 * 80], bh[80 * 32];
    for (int combo = 0; combo < 8; combo++) {
        const bool ta = combo & 1, tb = combo & 2, fast = combo & 4;
        const tr_fp8_format fa = TR_FP8_E5M2, fb = TR_FP8_E4M3; /* hybrid: a gradient times an input */
        for (size_t i = 0; i < sizeof ah; i++)
            ah[i] = (uint8_t)(kt_sym(&r, 1.0f) > 0 ? 0x00 : 0x80) | (uint8_t)(i % 0x78);
        for (size_t i = 0; i < sizeof bh; i++) bh[i] = (uint8_t)((i * 37) % 0x7E) | (uint8_t)(i % 3 ? 0 : 0x80);
        double *want = malloc(sizeof(double) * m * n);
        reference(want, ah, fa, bh, fb, m, n, k, ta, tb);
        const float sa = 0.125f, sb = 3.0f, alpha = 0.5f;
        float *sad = kt_upload_f32(&sa, 1), *sbd = kt_upload_f32(&sb, 1);
        uint8_t *ad = kt_alloc(sizeof ah), *bd = kt_alloc(sizeof bh);
        dev_copy_h2d(kt_s, ad, ah, sizeof ah);
        dev_copy_h2d(kt_s, bd, bh, sizeof bh);
        for (int beta_i = 0; beta_i < 2; beta_i++)
            for (int dti = 0; dti < 2; dti++) {
                const tr_dtype dt = dti ? TR_BF16 : TR_F32;
                const float beta = beta_i ? 1.0f : 0.0f;
                float *c0 = kt_host((size_t)m * n), *got = kt_host((size_t)m * n);
                kt_fill(&r, c0, (size_t)m * n, 1.0f);
                tr_buf c = kt_upload(c0, (size_t)m * n, dt);
                kt_download(c0, c, (size_t)m * n); /* c0 as stored */
                kern_gemm_fp8(kt_s, c, (kern_fp8_operand){ad, fa, sad}, (kern_fp8_operand){bd, fb, sbd}, m, n, k, ta,
                              tb, alpha, beta, fast);
                kt_download(got, c, (size_t)m * n);
                double err2 = 0, ref2 = 0;
                for (int i = 0; i < m * n; i++) {
                    const double w = (double)(alpha * (sa * sb)) * want[i] + beta * c0[i];
                    err2 += (got[i] - w) * (got[i] - w), ref2 += w * w;
                }
                /* fp32 output: the twin sums in double and rounds once; Hopper's FP8 tensor cores keep
                 * ~14 bits between promotions to fp32, and none with the forward layout's fast
                 * accumulation (the bounds of kern_oracle's FP8 cases: 3e-4 and 1e-3) */
                const double tol = dt == TR_BF16 ? 4e-3 : kt_backend_is_twin() ? 1e-6 : fast ? 1e-3 : 3e-4;
                kt_expect_close("gemm_fp8", sqrt(err2 / ref2), tol);
                kt_free(c.p), free(c0), free(got);
            }
        kt_free(ad), kt_free(bd), kt_free(sad), kt_free(sbd), free(want);
    }
}

static void test_scale_update_per_tensor(void **state) {
    (void)state;
    enum { T = 5, LEN = 4 };
    const float hist0[LEN * T] = {
        3.0f, 0.0f, NAN,  1e-40f, 2.0f,     /* row 0: this pass's amaxes */
        1.0f, 0.0f, 5.0f, 0.0f,   INFINITY, /* the oldest */
        7.0f, 0.0f, 1.0f, 0.0f,   1.0f,     2.0f, 0.0f, 1.0f, 0.0f, 1.0f,
    };
    for (int algo = 0; algo < 2; algo++)
        for (int margin = 0; margin <= 2; margin += 2) {
            float *hist = kt_upload_f32(hist0, LEN * T);
            const float ones[T * 2] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
            float *scales = kt_upload_f32(ones, T * 2);
            kern_fp8_scale_update(kt_s, hist, scales, scales + T, T, LEN, (tr_fp8_amax_algo)algo, TR_FP8_E5M2, margin);
            float got_h[LEN * T], got_s[2 * T];
            kt_download_f32(got_h, hist, LEN * T);
            kt_download_f32(got_s, scales, 2 * T);
            for (int t = 0; t < T; t++) {
                float h[LEN], sc = 1.0f, inv = 1.0f;
                for (int i = 0; i < LEN; i++) h[i] = hist0[i * T + t];
                tr_fp8_scale_update(h, LEN, (tr_fp8_amax_algo)algo, 57344.0f, margin, &sc, &inv);
                for (int i = 0; i < LEN; i++) assert_memory_equal(&got_h[i * T + t], &h[i], sizeof(float));
                assert_memory_equal(&got_s[t], &sc, sizeof sc);
                assert_memory_equal(&got_s[T + t], &inv, sizeof inv);
            }
            /* tensor 3's amax 1e-40 under most_recent: a scale past fp32's range becomes FLT_MAX */
            if (algo == TR_FP8_AMAX_MOST_RECENT) assert_true(got_s[3] == FLT_MAX);
            kt_free(hist), kt_free(scales);
        }
}

/* More tensors than a GPU block's 32 and a history longer than its 32-row band: every tensor's rolled
 * history and scale as tr_fp8_scale_update's, over three passes (each reads the last one's roll). */
static void test_scale_update_many(void **state) {
    (void)state;
    enum { T = 70, LEN = 75 };
    kt_rng r = {17};
    float *h0 = kt_host(LEN * T), *want = kt_host(LEN * T), sc[T], inv[T];
    kt_fill(&r, h0, LEN * T, 100.0f);
    for (int i = 0; i < LEN * T; i++) h0[i] = i % 11 == 0 ? 0.0f : fabsf(h0[i]);
    h0[5] = NAN, h0[(LEN - 1) * T + 6] = INFINITY;
    memcpy(want, h0, sizeof(float) * LEN * T);
    for (int t = 0; t < T; t++) sc[t] = 1.0f + (float)t, inv[t] = 1.0f / sc[t];
    float scales_h[2 * T];
    memcpy(scales_h, sc, sizeof sc), memcpy(scales_h + T, inv, sizeof inv);
    float *hist = kt_upload_f32(h0, LEN * T), *scales = kt_upload_f32(scales_h, 2 * T);
    for (int pass = 0; pass < 3; pass++) {
        kern_fp8_scale_update(kt_s, hist, scales, scales + T, T, LEN, TR_FP8_AMAX_MAX, TR_FP8_E4M3, 1);
        for (int t = 0; t < T; t++)
            tr_fp8_scale_update_strided(want + t, LEN, T, TR_FP8_AMAX_MAX, 448.0f, 1, &sc[t], &inv[t]);
    }
    float got_h[LEN * T], got_s[2 * T];
    kt_download_f32(got_h, hist, LEN * T);
    kt_download_f32(got_s, scales, 2 * T);
    assert_memory_equal(got_h, want, sizeof got_h);
    assert_memory_equal(got_s, sc, sizeof sc);
    assert_memory_equal(got_s + T, inv, sizeof inv);
    kt_free(hist), kt_free(scales), free(h0), free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantize_every_exponent),
        cmocka_unit_test(test_quantize_bytes_and_amax),
        cmocka_unit_test(test_gemm_against_decoded_values),
        cmocka_unit_test(test_scale_update_per_tensor),
        cmocka_unit_test(test_scale_update_many),
        cmocka_unit_test(test_cast_transpose_is_quantize),
        cmocka_unit_test(test_fp8_transpose),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
