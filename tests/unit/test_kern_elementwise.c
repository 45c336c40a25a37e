/* kern_add, kern_scale, kern_cast (bf16 rounding on known bit patterns) and kern_sum_squares. */
#include "common/fixture_kern.h"

static float f32_from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static bool bf16_is_nan(uint16_t h) { return (h & 0x7f80u) == 0x7f80u && (h & 0x007fu) != 0; }

/* Casts n fp32 bit patterns to bf16 on the device and returns the bf16 bits. */
static void cast_f32_bits_to_bf16(const uint32_t *in, uint16_t *out, size_t n) {
    uint32_t *src = kt_alloc(n * 4);
    uint16_t *dst = kt_alloc(n * 2);
    dev_copy_h2d(kt_s, src, in, n * 4);
    kern_cast(kt_s, tr_buf_make(dst, TR_BF16), tr_buf_make(src, TR_F32), n);
    dev_copy_d2h(kt_s, out, dst, n * 2);
    dev_stream_sync(kt_s);
    kt_free(dst);
    kt_free(src);
}

static void test_cast_rounds_to_nearest_even(void **state) {
    (void)state;
    static const struct {
        uint32_t f32;
        uint16_t bf16;
        const char *why;
    } cases[] = {
        {0x3f800000u, 0x3f80u, "1.0 is exact"},
        {0x3f808000u, 0x3f80u, "1.00390625: a tie, rounds down to the even 1.0"},
        {0x3f818000u, 0x3f82u, "1.01171875: a tie, rounds up to the even neighbour"},
        {0x3f808001u, 0x3f81u, "just above the tie rounds up"},
        {0x3f807fffu, 0x3f80u, "just below the tie rounds down"},
        {0xbf808000u, 0xbf80u, "negative tie, to even"},
        {0x7f7fffffu, 0x7f80u, "FLT_MAX overflows to +Inf"},
        {0x7f800000u, 0x7f80u, "+Inf stays +Inf"},
        {0xff800000u, 0xff80u, "-Inf stays -Inf"},
        {0x80000000u, 0x8000u, "-0 keeps its sign"},
        {0x00000001u, 0x0000u, "the smallest subnormal rounds to 0"},
        {0x00018000u, 0x0002u, "subnormal tie to even"},
    };
    const size_t n = sizeof cases / sizeof cases[0];
    uint32_t in[sizeof cases / sizeof cases[0]];
    uint16_t out[sizeof cases / sizeof cases[0]];
    for (size_t i = 0; i < n; i++) in[i] = cases[i].f32;
    cast_f32_bits_to_bf16(in, out, n);
    for (size_t i = 0; i < n; i++)
        if (out[i] != cases[i].bf16)
            fail_msg("cast 0x%08x -> 0x%04x, want 0x%04x (%s)", in[i], out[i], cases[i].bf16, cases[i].why);
}

static void test_cast_keeps_nan_a_nan(void **state) {
    (void)state;
    /* 0x7f800001 rounds to Inf and 0xffffffff wraps to 0 under naive rounding; both must stay NaN.
     * Only NaN-ness is checked: a GPU's cvt may return the canonical NaN instead of the payload. */
    const uint32_t in[4] = {0x7fc00000u, 0x7f800001u, 0xffffffffu, 0xff800001u};
    uint16_t out[4];
    cast_f32_bits_to_bf16(in, out, 4);
    for (int i = 0; i < 4; i++)
        if (!bf16_is_nan(out[i])) fail_msg("NaN 0x%08x cast to bf16 0x%04x, which is not a NaN", in[i], out[i]);
}

static void test_cast_widens_bf16_exactly(void **state) {
    (void)state;
    const uint16_t in[5] = {0x3f81u, 0xc2f7u, 0x0001u, 0xff80u, 0x7fc1u};
    uint16_t *src = kt_alloc(sizeof in);
    float *dst = kt_alloc(5 * sizeof(float));
    uint32_t out[5];
    dev_copy_h2d(kt_s, src, in, sizeof in);
    kern_cast(kt_s, tr_buf_f32(dst), tr_buf_make(src, TR_BF16), 5);
    dev_copy_d2h(kt_s, out, dst, sizeof out);
    dev_stream_sync(kt_s);
    for (int i = 0; i < 4; i++) assert_int_equal(out[i], (uint32_t)in[i] << 16);
    assert_true(isnan(f32_from_bits(out[4])));
    kt_free(dst);
    kt_free(src);
}

static void test_cast_same_type_copies_bits(void **state) {
    (void)state;
    const uint32_t in[3] = {0x7fc12345u, 0x80000000u, 0x3f800001u};
    uint32_t *src = kt_alloc(sizeof in), *dst = kt_alloc(sizeof in);
    uint32_t out[3];
    dev_copy_h2d(kt_s, src, in, sizeof in);
    kern_cast(kt_s, tr_buf_make(dst, TR_F32), tr_buf_make(src, TR_F32), 3);
    dev_copy_d2h(kt_s, out, dst, sizeof out);
    dev_stream_sync(kt_s);
    assert_memory_equal(out, in, sizeof in);
    kt_free(dst);
    kt_free(src);
}

/* A round trip fp32 -> bf16 -> fp32 on random values equals the host's rounding bit for bit. */
static void test_cast_round_trip_matches_host_rounding(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(21);
    enum { n = 4096 };
    float *x = kt_host(n), *back = kt_host(n);
    for (int i = 0; i < n; i++) x[i] = (float)(kt_sym(&r, 1.0f) * pow(2.0, kt_below(&r, 60) - 30));
    tr_buf src = kt_upload(x, n, TR_F32);
    tr_buf mid = tr_buf_make(kt_alloc(n * 2), TR_BF16), dst = tr_buf_make(kt_alloc(n * 4), TR_F32);
    kern_cast(kt_s, mid, src, n);
    kern_cast(kt_s, dst, mid, n);
    kt_download(back, dst, n);
    for (int i = 0; i < n; i++)
        if (back[i] != tr_round_bf16(x[i]))
            fail_msg("element %d: %a -> %a, want %a", i, x[i], back[i], tr_round_bf16(x[i]));
    kt_free(dst.p);
    kt_free(mid.p);
    kt_free(src.p);
    free(back);
    free(x);
}

static void test_add_and_scale_are_exact_fp32_ops(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(22);
    enum { n = 1000 };
    float *a = kt_host(n), *b = kt_host(n), *got = kt_host(n);
    kt_fill(&r, a, n, 3.0f);
    kt_fill(&r, b, n, 3.0f);
    for (int dti = 0; dti < 2; dti++) {
        const tr_dtype dt = dti ? TR_BF16 : TR_F32;
        float *ar = kt_host(n), *br = kt_host(n);
        for (int i = 0; i < n; i++) {
            ar[i] = dt == TR_BF16 ? tr_round_bf16(a[i]) : a[i];
            br[i] = dt == TR_BF16 ? tr_round_bf16(b[i]) : b[i];
        }
        tr_buf da = kt_upload(a, n, dt), db = kt_upload(b, n, dt), dout = tr_buf_make(kt_alloc(n * 4), dt);
        kern_add(kt_s, dout, da, db, n);
        kt_download(got, dout, n);
        for (int i = 0; i < n; i++) {
            const float want = dt == TR_BF16 ? tr_round_bf16(ar[i] + br[i]) : ar[i] + br[i];
            if (got[i] != want) fail_msg("%s add element %d: %a, want %a", tr_dtype_name(dt), i, got[i], want);
        }
        kern_add(kt_s, da, da, db, n); /* out aliases a */
        kt_download(got, da, n);
        for (int i = 0; i < n; i++) {
            const float want = dt == TR_BF16 ? tr_round_bf16(ar[i] + br[i]) : ar[i] + br[i];
            if (got[i] != want) fail_msg("%s in-place add element %d: %a, want %a", tr_dtype_name(dt), i, got[i], want);
        }
        kern_scale(kt_s, db, -0.37f, n);
        kt_download(got, db, n);
        for (int i = 0; i < n; i++) {
            const float want = dt == TR_BF16 ? tr_round_bf16(br[i] * -0.37f) : br[i] * -0.37f;
            if (got[i] != want) fail_msg("%s scale element %d: %a, want %a", tr_dtype_name(dt), i, got[i], want);
        }
        kt_free(dout.p);
        kt_free(db.p);
        kt_free(da.p);
        free(br);
        free(ar);
    }
    free(got);
    free(b);
    free(a);
}

static float sum_squares_on_device(const float *x, size_t n, tr_dtype dt, float start) {
    tr_buf dx = kt_upload(x, n, dt);
    float *out = kt_upload_f32(&start, 1);
    kern_sum_squares(kt_s, out, dx, n);
    float got;
    kt_download_f32(&got, out, 1);
    kt_free(out);
    kt_free(dx.p);
    return got;
}

static void test_sum_squares_accumulates(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(23);
    enum { n = 100003 };
    float *x = kt_host(n);
    kt_fill(&r, x, n, 2.0f);
    for (int dti = 0; dti < 2; dti++) {
        const tr_dtype dt = dti ? TR_BF16 : TR_F32;
        double want = 2.5;
        for (int i = 0; i < n; i++) {
            const double v = dt == TR_BF16 ? tr_round_bf16(x[i]) : x[i];
            want += v * v;
        }
        const float got = sum_squares_on_device(x, n, dt, 2.5f);
        const float again = sum_squares_on_device(x, n, dt, 2.5f);
        assert_memory_equal(&got, &again, sizeof got);
        kt_expect_close(dt == TR_BF16 ? "sum_squares bf16 (adds to out)" : "sum_squares fp32 (adds to out)",
                        fabs(got - want) / want, kt_fwd_tol());
    }
    x[777] = NAN;
    assert_true(isnan(sum_squares_on_device(x, n, TR_F32, 0.0f)));
    assert_true(isnan(sum_squares_on_device(x, n, TR_BF16, 0.0f)));
    x[777] = INFINITY;
    assert_true(isinf(sum_squares_on_device(x, n, TR_F32, 0.0f)));
    free(x);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cast_rounds_to_nearest_even),
        cmocka_unit_test(test_cast_keeps_nan_a_nan),
        cmocka_unit_test(test_cast_widens_bf16_exactly),
        cmocka_unit_test(test_cast_same_type_copies_bits),
        cmocka_unit_test(test_cast_round_trip_matches_host_rounding),
        cmocka_unit_test(test_add_and_scale_are_exact_fp32_ops),
        cmocka_unit_test(test_sum_squares_accumulates),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
