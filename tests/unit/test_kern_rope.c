/* kern_rope_forward/backward: rotate-half RoPE against a naive double reference (full and partial
 * rot_dim, implicit and explicit positions), the backward against finite differences of the
 * forward, pass-through of the unrotated dims, determinism and bf16 storage. */
#include "common/fixture_kern.h"

typedef struct rope_case {
    kern_rope_desc rd;
    int B, T, H, D;
    bool explicit_positions;
    tr_dtype dt;
    int32_t *positions; /* [B*T] */
    float *x;           /* [B,T,H,D] */
    float *w;           /* [B,T,H,D] loss weights */
} rope_case;

static size_t rope_numel(const rope_case *rc) { return (size_t)rc->B * rc->T * rc->H * rc->D; }

static rope_case rope_case_make(kt_rng *r, float theta, int rot_dim, bool explicit_positions) {
    rope_case rc = {{theta, rot_dim}, 2, 5, 3, 8, explicit_positions, TR_F32, NULL, NULL, NULL};
    rc.positions = calloc((size_t)rc.B * rc.T, sizeof *rc.positions);
    assert_non_null(rc.positions);
    /* Packed sequences restart positions; large ones stress the fp32 angle. */
    for (int i = 0; i < rc.B * rc.T; i++) rc.positions[i] = i == 3 ? 0 : kt_below(r, 4000);
    rc.x = kt_host(rope_numel(&rc));
    rc.w = kt_host(rope_numel(&rc));
    kt_fill(r, rc.x, rope_numel(&rc), 1.0f);
    kt_fill(r, rc.w, rope_numel(&rc), 1.0f);
    return rc;
}

static void rope_case_free(rope_case *rc) {
    free(rc->positions);
    free(rc->x);
    free(rc->w);
}

static const int32_t *rope_positions(const rope_case *rc) { return rc->explicit_positions ? rc->positions : NULL; }

/* y = rope(x) (forward) or rope^T(x) (backward) on the device. */
static void rope_run(const rope_case *rc, const float *x, float *y, bool backward) {
    const size_t n = rope_numel(rc);
    tr_buf d = kt_upload(x, n, rc->dt);
    int32_t *pos = rc->explicit_positions ? kt_upload_i32(rc->positions, (size_t)rc->B * rc->T) : NULL;
    if (backward) kern_rope_backward(kt_s, &rc->rd, d, pos, rc->B, rc->T, rc->H, rc->D);
    else kern_rope_forward(kt_s, &rc->rd, d, pos, rc->B, rc->T, rc->H, rc->D);
    kt_download(y, d, n);
    if (pos) kt_free(pos);
    kt_free(d.p);
}

/* Hugging Face's rotate-half: y = x * cos + rotate_half(x) * sin over the first rot_dim dims, with
 * the angle formed in fp32 from an fp32 inv_freq, as kern.h specifies. */
static void rope_reference(const rope_case *rc, double *y) {
    const int half = rc->rd.rot_dim / 2;
    const int32_t *positions = rope_positions(rc);
    for (int bt = 0; bt < rc->B * rc->T; bt++) {
        const int32_t pos = positions ? positions[bt] : bt % rc->T;
        for (int h = 0; h < rc->H; h++) {
            const float *x = rc->x + ((size_t)bt * rc->H + h) * rc->D;
            double *out = y + ((size_t)bt * rc->H + h) * rc->D;
            for (int d = 0; d < rc->D; d++) out[d] = x[d];
            for (int i = 0; i < half; i++) {
                const float inv_freq = (float)pow((double)rc->rd.theta, -2.0 * i / rc->rd.rot_dim);
                const float angle = (float)pos * inv_freq;
                const double c = (float)cos((double)angle), s = (float)sin((double)angle);
                out[i] = x[i] * c - x[i + half] * s;
                out[i + half] = x[i + half] * c + x[i] * s;
            }
        }
    }
}

static double rope_loss(void *ctx) {
    const rope_case *rc = ctx;
    float *y = kt_host(rope_numel(rc));
    rope_run(rc, rc->x, y, false);
    const double l = kt_dot(y, rc->w, rope_numel(rc));
    free(y);
    return l;
}

static const struct {
    float theta;
    int rot_dim;
    bool explicit_positions;
} rope_configs[] = {
    {500000.0f, 8, false}, {500000.0f, 8, true}, {10000.0f, 4, false}, {10000.0f, 4, true}, {10000.0f, 2, true},
};
enum { ROPE_CONFIGS = sizeof rope_configs / sizeof rope_configs[0] };

static void rope_label(char *buf, size_t len, const char *what, const rope_case *rc) {
    snprintf(buf, len, "rope %s theta=%g rot=%d/%d pos=%s", what, rc->rd.theta, rc->rd.rot_dim, rc->D,
             rc->explicit_positions ? "given" : "t");
}

static void test_rope_forward_matches_reference(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(51);
    for (int ci = 0; ci < ROPE_CONFIGS; ci++) {
        rope_case rc =
            rope_case_make(&r, rope_configs[ci].theta, rope_configs[ci].rot_dim, rope_configs[ci].explicit_positions);
        const size_t n = rope_numel(&rc);
        float *y = kt_host(n);
        double *want = kt_host_d(n);
        rope_run(&rc, rc.x, y, false);
        rope_reference(&rc, want);
        char what[96];
        rope_label(what, sizeof what, "fwd", &rc);
        kt_expect_close(what, kt_rel_l2(y, want, n), kt_fwd_tol());
        /* Dims past rot_dim pass through bit for bit. */
        for (size_t row = 0; row < n / (size_t)rc.D; row++)
            for (int d = rc.rd.rot_dim; d < rc.D; d++) assert_true(y[row * rc.D + d] == rc.x[row * rc.D + d]);
        free(want);
        free(y);
        rope_case_free(&rc);
    }
}

static void test_rope_backward_matches_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(52);
    for (int ci = 0; ci < ROPE_CONFIGS; ci++) {
        rope_case rc =
            rope_case_make(&r, rope_configs[ci].theta, rope_configs[ci].rot_dim, rope_configs[ci].explicit_positions);
        const size_t n = rope_numel(&rc);
        float *dx = kt_host(n);
        rope_run(&rc, rc.w, dx, true); /* dL/dx = rope^T(w) */
        char what[96];
        rope_label(what, sizeof what, "dx", &rc);
        /* A rotation is linear: no truncation error, only fp32 output rounding / h. */
        kt_fd_check(what, rc.x, n, dx, rope_loss, &rc, 1e-2, 1000, 1e-4, &r);
        free(dx);
        rope_case_free(&rc);
    }
}

static void test_rope_backward_inverts_forward(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(53);
    for (int ci = 0; ci < ROPE_CONFIGS; ci++) {
        rope_case rc =
            rope_case_make(&r, rope_configs[ci].theta, rope_configs[ci].rot_dim, rope_configs[ci].explicit_positions);
        const size_t n = rope_numel(&rc);
        float *y = kt_host(n), *back = kt_host(n);
        rope_run(&rc, rc.x, y, false);
        rope_run(&rc, y, back, true);
        kt_expect_close("rope backward(forward(x)) == x", kt_rel_l2_ff(back, rc.x, n), 1e-6);
        free(back);
        free(y);
        rope_case_free(&rc);
    }
}

static void test_rope_is_deterministic_and_bf16_tracks_fp32(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(54);
    for (int ci = 0; ci < ROPE_CONFIGS; ci++) {
        rope_case rc =
            rope_case_make(&r, rope_configs[ci].theta, rope_configs[ci].rot_dim, rope_configs[ci].explicit_positions);
        const size_t n = rope_numel(&rc);
        float *y1 = kt_host(n), *y2 = kt_host(n), *b1 = kt_host(n), *b2 = kt_host(n);
        for (int backward = 0; backward < 2; backward++) {
            rc.dt = TR_F32;
            rope_run(&rc, rc.x, y1, backward);
            rope_run(&rc, rc.x, y2, backward);
            assert_memory_equal(y1, y2, n * sizeof(float));
            rc.dt = TR_BF16;
            rope_run(&rc, rc.x, b1, backward);
            rope_run(&rc, rc.x, b2, backward);
            assert_memory_equal(b1, b2, n * sizeof(float));
            kt_expect_close(backward ? "rope bwd bf16 vs fp32" : "rope fwd bf16 vs fp32", kt_rel_l2_ff(b1, y1, n),
                            1e-2);
        }
        free(b2);
        free(b1);
        free(y2);
        free(y1);
        rope_case_free(&rc);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rope_forward_matches_reference),
        cmocka_unit_test(test_rope_backward_matches_finite_differences),
        cmocka_unit_test(test_rope_backward_inverts_forward),
        cmocka_unit_test(test_rope_is_deterministic_and_bf16_tracks_fp32),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
