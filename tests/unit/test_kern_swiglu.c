/* kern_swiglu_forward/backward: silu(gate) * up against a double reference, dh against finite
 * differences, in-place backward, determinism and bf16 storage. */
#include "common/fixture_kern.h"

enum { SW_N = 5, SW_F = 7 };

typedef struct swiglu_case {
    tr_dtype dt;
    float h[SW_N * 2 * SW_F]; /* [N,2F]: gate | up */
    float w[SW_N * SW_F];     /* [N,F] loss weights */
} swiglu_case;

static void swiglu_case_init(swiglu_case *sc, kt_rng *r) {
    sc->dt = TR_F32;
    kt_fill(r, sc->h, SW_N * 2 * SW_F, 3.0f); /* covers silu's curved region and both tails */
    kt_fill(r, sc->w, SW_N * SW_F, 1.0f);
}

static void swiglu_forward(const swiglu_case *sc, float *out) {
    tr_buf h = kt_upload(sc->h, SW_N * 2 * SW_F, sc->dt), o = kt_upload(sc->w, SW_N * SW_F, sc->dt);
    kern_swiglu_forward(kt_s, o, h, SW_N, SW_F);
    kt_download(out, o, SW_N * SW_F);
    kt_free(o.p);
    kt_free(h.p);
}

/* dh[N,2F] for dout = w; in_place runs the backward with dh aliasing h. */
static void swiglu_backward(const swiglu_case *sc, float *dh, bool in_place) {
    tr_buf h = kt_upload(sc->h, SW_N * 2 * SW_F, sc->dt), dout = kt_upload(sc->w, SW_N * SW_F, sc->dt);
    tr_buf d = in_place ? h : kt_upload(sc->h, SW_N * 2 * SW_F, sc->dt); /* stale: overwritten */
    kern_swiglu_backward(kt_s, d, dout, h, SW_N, SW_F);
    kt_download(dh, d, SW_N * 2 * SW_F);
    if (!in_place) kt_free(d.p);
    kt_free(dout.p);
    kt_free(h.p);
}

static double swiglu_loss(void *ctx) {
    const swiglu_case *sc = ctx;
    float out[SW_N * SW_F];
    swiglu_forward(sc, out);
    return kt_dot(out, sc->w, SW_N * SW_F);
}

static void test_swiglu_forward_matches_reference(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(71);
    swiglu_case sc;
    swiglu_case_init(&sc, &r);
    float out[SW_N * SW_F];
    double want[SW_N * SW_F];
    swiglu_forward(&sc, out);
    for (int n = 0; n < SW_N; n++)
        for (int i = 0; i < SW_F; i++) {
            const double gate = sc.h[n * 2 * SW_F + i], up = sc.h[n * 2 * SW_F + SW_F + i];
            want[n * SW_F + i] = gate / (1.0 + exp(-gate)) * up;
        }
    kt_expect_close("swiglu out", kt_rel_l2(out, want, SW_N * SW_F), kt_fwd_tol());
}

static void test_swiglu_backward_matches_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(72);
    swiglu_case sc;
    swiglu_case_init(&sc, &r);
    float dh[SW_N * 2 * SW_F], dh_in_place[SW_N * 2 * SW_F];
    swiglu_backward(&sc, dh, false);
    /* Smooth; h = 1e-2 on inputs of size ~3 gives O(h^2) truncation, measured ~1e-6. */
    kt_fd_check("swiglu dh", sc.h, SW_N * 2 * SW_F, dh, swiglu_loss, &sc, 1e-2, 1000, 1e-3, &r);
    swiglu_backward(&sc, dh_in_place, true);
    assert_memory_equal(dh, dh_in_place, sizeof dh);
}

static void test_swiglu_is_deterministic_and_bf16_tracks_fp32(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(73);
    swiglu_case sc;
    swiglu_case_init(&sc, &r);
    float o32[SW_N * SW_F], o32b[SW_N * SW_F], o16[SW_N * SW_F], o16b[SW_N * SW_F];
    float d32[SW_N * 2 * SW_F], d32b[SW_N * 2 * SW_F], d16[SW_N * 2 * SW_F], d16b[SW_N * 2 * SW_F];
    swiglu_forward(&sc, o32);
    swiglu_forward(&sc, o32b);
    swiglu_backward(&sc, d32, false);
    swiglu_backward(&sc, d32b, false);
    sc.dt = TR_BF16;
    swiglu_forward(&sc, o16);
    swiglu_forward(&sc, o16b);
    swiglu_backward(&sc, d16, false);
    swiglu_backward(&sc, d16b, false);
    assert_memory_equal(o32, o32b, sizeof o32);
    assert_memory_equal(d32, d32b, sizeof d32);
    assert_memory_equal(o16, o16b, sizeof o16);
    assert_memory_equal(d16, d16b, sizeof d16);
    kt_expect_close("swiglu bf16 vs fp32 out", kt_rel_l2_ff(o16, o32, SW_N * SW_F), 1e-2);
    kt_expect_close("swiglu bf16 vs fp32 dh", kt_rel_l2_ff(d16, d32, SW_N * 2 * SW_F), 1e-2);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_swiglu_forward_matches_reference),
        cmocka_unit_test(test_swiglu_backward_matches_finite_differences),
        cmocka_unit_test(test_swiglu_is_deterministic_and_bf16_tracks_fp32),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
