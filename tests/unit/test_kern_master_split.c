/* The fp32 master kept as bf16 weights and 16-bit remainders (twinrun/master_split.h): every bit
 * pattern round-trips (NaN keeps its NaN and sign), the bf16 half is the nearest bf16 with ties away
 * from zero, kern_master_split is the host split, and AdamW on remainders moves the same fp32 master
 * as AdamW on a whole fp32 copy, bit for bit. */
#include "common/fixture_kern.h"
#include "twinrun/master_split.h"

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t to_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static bool is_nan_bits(uint32_t u) { return (u & 0x7fffffffu) > 0x7f800000u; }

/* Every upper half with the lower halves where rounding changes: 0, 1, below/at/above the tie, the
 * top, and a few others. */
static const uint16_t LOWS[] = {0x0000, 0x0001, 0x1234, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xabcd, 0xfffe, 0xffff};

static void test_split_join_round_trips(void **state) {
    (void)state;
    for (uint32_t hi = 0; hi <= 0xffffu; hi++)
        for (size_t k = 0; k < sizeof LOWS / sizeof LOWS[0]; k++) {
            const uint32_t u = hi << 16 | LOWS[k];
            uint16_t h;
            int16_t r;
            tr_master_split(from_bits(u), &h, &r);
            const uint32_t back = to_bits(tr_master_join(h, r));
            if (is_nan_bits(u)) {
                assert_true(is_nan_bits(back));
                assert_int_equal(back >> 31, u >> 31);
                assert_true(is_nan_bits((uint32_t)h << 16)); /* the weight the model sees is NaN too */
            } else {
                assert_int_equal(back, u);
            }
        }
}

static void test_split_rounds_to_nearest_ties_away(void **state) {
    (void)state;
    for (uint32_t hi = 0; hi <= 0xffffu; hi++)
        for (size_t k = 0; k < sizeof LOWS / sizeof LOWS[0]; k++) {
            const uint32_t u = hi << 16 | LOWS[k];
            if (is_nan_bits(u)) continue;
            uint16_t h;
            int16_t r;
            tr_master_split(from_bits(u), &h, &r);
            if (LOWS[k] == 0x8000) /* the tie: away from zero, one up in magnitude */
                assert_int_equal(h, (uint16_t)(hi + 1));
            else /* otherwise the nearest bf16, as the round-to-nearest-even cast gives */
                assert_int_equal(h, tr_f32_to_bf16(from_bits(u)));
        }
}

static void test_kern_master_split_is_the_host_split(void **state) {
    (void)state;
    enum { N = 4099 };
    kt_rng r = kt_rng_make(17);
    float *w = kt_host(N);
    kt_fill(&r, w, N, 3.0f);
    w[0] = from_bits(0x3f808000u), w[1] = from_bits(0x3f818000u); /* ties, even and odd upper halves */
    w[2] = from_bits(0x7fc00001u), w[3] = -INFINITY, w[4] = 0.0f, w[5] = from_bits(0x7f7fffffu);
    float *dw = kt_upload_f32(w, N);
    uint16_t *dh = kt_alloc(N * 2), *dh2 = kt_alloc(N * 2);
    int16_t *dr = kt_alloc(N * 2);
    kern_master_split(kt_s, tr_buf_make(dh, TR_BF16), dr, dw, N);
    kern_master_split(kt_s, tr_buf_make(dh2, TR_BF16), NULL, dw, N); /* the weights alone */
    uint16_t h[N], h2[N];
    int16_t rem[N];
    dev_copy_d2h(kt_s, h, dh, sizeof h);
    dev_copy_d2h(kt_s, h2, dh2, sizeof h2);
    dev_copy_d2h(kt_s, rem, dr, sizeof rem);
    dev_stream_sync(kt_s);
    for (int i = 0; i < N; i++) {
        uint16_t wh;
        int16_t wr;
        tr_master_split(w[i], &wh, &wr);
        assert_int_equal(h[i], wh);
        assert_int_equal(h2[i], wh);
        assert_int_equal(rem[i], wr);
    }
    kt_free(dw), kt_free(dh), kt_free(dh2), kt_free(dr);
    free(w);
}

/* Three AdamW steps from the same state: an fp32 master with a bf16 model copy, and the remainders. */
static void test_adamw_on_remainders_moves_the_same_master(void **state) {
    (void)state;
    enum { N = 1031, STEPS = 3 };
    kt_rng r = kt_rng_make(29);
    float *w = kt_host(N), *m = kt_host(N), *v = kt_host(N), *g = kt_host(STEPS * N);
    kt_fill(&r, w, N, 0.5f);
    kt_fill(&r, m, N, 1e-2f);
    kt_fill(&r, g, STEPS * N, 1.0f);
    for (int i = 0; i < N; i++) v[i] = (float)(kt_uniform(&r) * 1e-4);
    w[0] = from_bits(0x3e808000u); /* starts on a tie */
    uint16_t h0[N];
    int16_t r0[N];
    for (int i = 0; i < N; i++) tr_master_split(w[i], &h0[i], &r0[i]);
    float *dw = kt_upload_f32(w, N), *dm[2], *dv[2];
    tr_buf model = kt_upload(w, N, TR_BF16), grad = kt_upload(g, N, TR_F32);
    uint16_t *dh = kt_alloc(N * 2);
    int16_t *dr = kt_alloc(N * 2);
    dev_copy_h2d(kt_s, dh, h0, sizeof h0);
    dev_copy_h2d(kt_s, dr, r0, sizeof r0);
    for (int k = 0; k < 2; k++) dm[k] = kt_upload_f32(m, N), dv[k] = kt_upload_f32(v, N);
    /* ranges from multiples of 8 with lengths that are not (a GPU's eight-a-thread path and its tails) */
    const kern_range ranges[] = {{0, 503, 0.1f}, {504, 505, 0.0f}, {600, N, 0.05f}};
    for (int step = 1; step <= STEPS; step++) {
        kt_write(grad, g + (size_t)(step - 1) * N, N);
        const kern_adamw_desc ad = {
            .lr = 1e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .grad_scale = 0.5f, .step = step};
        kern_adamw_update_ranges(kt_s, &ad, ranges, 3, dw, NULL, model, grad, dm[0], dv[0]);
        kern_adamw_update_ranges(kt_s, &ad, ranges, 3, NULL, dr, tr_buf_make(dh, TR_BF16), grad, dm[1], dv[1]);
    }
    float *w1 = kt_host(N), *mm[2], *vv[2];
    uint16_t h[N];
    int16_t rem[N];
    kt_download_f32(w1, dw, N);
    dev_copy_d2h(kt_s, h, dh, sizeof h);
    dev_copy_d2h(kt_s, rem, dr, sizeof rem);
    for (int k = 0; k < 2; k++) {
        mm[k] = kt_host(N), vv[k] = kt_host(N);
        kt_download_f32(mm[k], dm[k], N);
        kt_download_f32(vv[k], dv[k], N);
    }
    int changed = 0;
    for (int i = 0; i < N; i++) {
        assert_int_equal(to_bits(tr_master_join(h[i], rem[i])), to_bits(w1[i]));
        uint16_t wh;
        int16_t wr;
        tr_master_split(w1[i], &wh, &wr);
        assert_int_equal(h[i], wh);
        changed += to_bits(w1[i]) != to_bits(w[i]);
    }
    assert_int_equal(changed, N - 96); /* every element in a range moved; the 96 between ranges did not */
    assert_memory_equal(mm[0], mm[1], N * sizeof(float));
    assert_memory_equal(vv[0], vv[1], N * sizeof(float));
    kt_free(dw), kt_free(model.p), kt_free(grad.p), kt_free(dh), kt_free(dr);
    for (int k = 0; k < 2; k++) kt_free(dm[k]), kt_free(dv[k]), free(mm[k]), free(vv[k]);
    free(w), free(m), free(v), free(g), free(w1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_join_round_trips),
        cmocka_unit_test(test_split_rounds_to_nearest_ties_away),
        cmocka_unit_test(test_kern_master_split_is_the_host_split),
        cmocka_unit_test(test_adamw_on_remainders_moves_the_same_master),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
