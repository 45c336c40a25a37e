/* kern_cross_entropy_forward/backward: losses against a double log-sum-exp reference (also with
 * huge logits), dlogits against finite differences of sum(losses * dloss) with masked rows,
 * in-place backward, determinism and bf16 storage. */
#include "common/fixture_kern.h"

enum { CE_N = 6, CE_V = 11 };

typedef struct ce_case {
    tr_dtype dt;
    float logits[CE_N * CE_V]; /* [N,V] */
    int32_t targets[CE_N];     /* [N] */
    float dloss[CE_N];         /* [N]: the mask and normaliser; also the loss weights */
} ce_case;

static void ce_case_init(ce_case *cc, kt_rng *r, float offset) {
    cc->dt = TR_F32;
    for (int i = 0; i < CE_N * CE_V; i++) cc->logits[i] = kt_sym(r, 3.0f) + offset;
    for (int n = 0; n < CE_N; n++) {
        cc->targets[n] = kt_below(r, CE_V);
        cc->dloss[n] = n == 2 ? 0.0f : (float)(0.5 + kt_uniform(r)) / CE_N; /* row 2 is masked out */
    }
    cc->targets[0] = 0;
    cc->targets[CE_N - 1] = CE_V - 1;
}

static void ce_forward(const ce_case *cc, float *losses) {
    tr_buf logits = kt_upload(cc->logits, CE_N * CE_V, cc->dt);
    int32_t *targets = kt_upload_i32(cc->targets, CE_N);
    float *l = kt_upload_f32(cc->dloss, CE_N); /* stale: overwritten */
    kern_cross_entropy_forward(kt_s, l, logits, targets, CE_N, CE_V);
    kt_download_f32(losses, l, CE_N);
    kt_free(l);
    kt_free(targets);
    kt_free(logits.p);
}

static void ce_backward(const ce_case *cc, float *dlogits, bool in_place) {
    tr_buf logits = kt_upload(cc->logits, CE_N * CE_V, cc->dt);
    tr_buf d = in_place ? logits : kt_upload(cc->logits, CE_N * CE_V, cc->dt); /* stale: overwritten */
    int32_t *targets = kt_upload_i32(cc->targets, CE_N);
    float *dloss = kt_upload_f32(cc->dloss, CE_N);
    kern_cross_entropy_backward(kt_s, d, logits, targets, dloss, CE_N, CE_V);
    kt_download(dlogits, d, CE_N * CE_V);
    kt_free(dloss);
    kt_free(targets);
    if (!in_place) kt_free(d.p);
    kt_free(logits.p);
}

static double ce_loss(void *ctx) {
    const ce_case *cc = ctx;
    float losses[CE_N];
    ce_forward(cc, losses);
    return kt_dot(losses, cc->dloss, CE_N);
}

static void ce_reference(const ce_case *cc, double *losses) {
    for (int n = 0; n < CE_N; n++) {
        const float *row = cc->logits + n * CE_V;
        double mx = row[0], sum = 0.0;
        for (int j = 1; j < CE_V; j++) mx = fmax(mx, row[j]);
        for (int j = 0; j < CE_V; j++) sum += exp((double)row[j] - mx);
        losses[n] = mx + log(sum) - row[cc->targets[n]];
    }
}

static void test_cross_entropy_forward_matches_reference(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(81);
    /* exp(100) overflows fp32 unless max-shifted. Not +-1000: there the fp32 ulp of the logits
     * (6e-5) alone puts a correct fp32 GPU kernel at ~5e-6 of its 1e-5 bound (measured on H200). */
    const float offsets[] = {0.0f, 100.0f, -100.0f};
    for (int oi = 0; oi < 3; oi++) {
        ce_case cc;
        ce_case_init(&cc, &r, offsets[oi]);
        float losses[CE_N];
        double want[CE_N];
        ce_forward(&cc, losses);
        ce_reference(&cc, want);
        for (int n = 0; n < CE_N; n++) assert_true(isfinite(losses[n]) && losses[n] >= 0.0f);
        char what[64];
        snprintf(what, sizeof what, "cross entropy losses, logits offset %g", offsets[oi]);
        kt_expect_close(what, kt_rel_l2(losses, want, CE_N), kt_fwd_tol());
    }
}

static void test_cross_entropy_backward_matches_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(82);
    ce_case cc;
    ce_case_init(&cc, &r, 0.0f);
    float d[CE_N * CE_V], d_in_place[CE_N * CE_V];
    ce_backward(&cc, d, false);
    for (int j = 0; j < CE_V; j++) assert_true(d[2 * CE_V + j] == 0.0f); /* masked row */
    for (int n = 0; n < CE_N; n++) {                                     /* softmax - onehot sums to 0 */
        double row = 0.0;
        for (int j = 0; j < CE_V; j++) row += d[n * CE_V + j];
        assert_true(fabs(row) < 1e-6);
    }
    /* Smooth; h = 1e-2 on logits of size ~3: O(h^2) truncation, measured ~1e-5. */
    kt_fd_check("cross entropy dlogits", cc.logits, CE_N * CE_V, d, ce_loss, &cc, 1e-2, 1000, 1e-3, &r);
    ce_backward(&cc, d_in_place, true);
    assert_memory_equal(d, d_in_place, sizeof d);
}

static void test_cross_entropy_is_deterministic_and_bf16_tracks_fp32(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(83);
    ce_case cc;
    ce_case_init(&cc, &r, 0.0f);
    float l32[CE_N], l32b[CE_N], l16[CE_N], l16b[CE_N];
    float d32[CE_N * CE_V], d32b[CE_N * CE_V], d16[CE_N * CE_V], d16b[CE_N * CE_V];
    ce_forward(&cc, l32);
    ce_forward(&cc, l32b);
    ce_backward(&cc, d32, false);
    ce_backward(&cc, d32b, false);
    cc.dt = TR_BF16;
    ce_forward(&cc, l16);
    ce_forward(&cc, l16b);
    ce_backward(&cc, d16, false);
    ce_backward(&cc, d16b, false);
    assert_memory_equal(l32, l32b, sizeof l32);
    assert_memory_equal(d32, d32b, sizeof d32);
    assert_memory_equal(l16, l16b, sizeof l16);
    assert_memory_equal(d16, d16b, sizeof d16);
    kt_expect_close("cross entropy bf16 vs fp32 losses", kt_rel_l2_ff(l16, l32, CE_N), 1e-2);
    kt_expect_close("cross entropy bf16 vs fp32 dlogits", kt_rel_l2_ff(d16, d32, CE_N * CE_V), 1e-2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_entropy_forward_matches_reference),
        cmocka_unit_test(test_cross_entropy_backward_matches_finite_differences),
        cmocka_unit_test(test_cross_entropy_is_deterministic_and_bf16_tracks_fp32),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
