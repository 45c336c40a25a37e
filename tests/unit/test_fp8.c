/* FP8 conversion (base/include/twinrun/fp8.h) against the OCP 8-bit floating point specification's
 * values and against a brute-force oracle that shares no code with it: for an fp32 input, the nearest
 * of the format's 256 decoded values by exact distance in double, a tie going to the even encoding,
 * beyond the largest finite value the largest finite value (satfinite). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "twinrun/fp8.h"

/* The specification's values, decoded by hand from the bit layout. */
static void test_fp8_known_values(void **state) {
    (void)state;
    /* E4M3: max 0.1111.110 = 1.75 * 2^8; smallest normal 2^-6; smallest subnormal 2^-9 */
    assert_true(tr_fp8_to_f32(0x7E, TR_FP8_E4M3) == 448.0f);
    assert_true(tr_fp8_to_f32(0xFE, TR_FP8_E4M3) == -448.0f);
    assert_true(tr_fp8_to_f32(0x08, TR_FP8_E4M3) == 0x1p-6f);
    assert_true(tr_fp8_to_f32(0x01, TR_FP8_E4M3) == 0x1p-9f);
    assert_true(tr_fp8_to_f32(0x38, TR_FP8_E4M3) == 1.0f);
    assert_true(isnan(tr_fp8_to_f32(0x7F, TR_FP8_E4M3)));
    assert_true(isnan(tr_fp8_to_f32(0xFF, TR_FP8_E4M3)));
    /* E5M2: max 0.11110.11 = 1.75 * 2^15; 0.11111.00 is inf; smallest subnormal 2^-16 */
    assert_true(tr_fp8_to_f32(0x7B, TR_FP8_E5M2) == 57344.0f);
    assert_true(isinf(tr_fp8_to_f32(0x7C, TR_FP8_E5M2)) && tr_fp8_to_f32(0x7C, TR_FP8_E5M2) > 0);
    assert_true(isnan(tr_fp8_to_f32(0x7D, TR_FP8_E5M2)));
    assert_true(tr_fp8_to_f32(0x01, TR_FP8_E5M2) == 0x1p-16f);
    assert_true(tr_fp8_to_f32(0x3C, TR_FP8_E5M2) == 1.0f);
    /* saturation and specials on the way in */
    assert_int_equal(tr_fp8_from_f32(1e6f, TR_FP8_E4M3), 0x7E);
    assert_int_equal(tr_fp8_from_f32(-1e6f, TR_FP8_E4M3), 0xFE);
    assert_int_equal(tr_fp8_from_f32(INFINITY, TR_FP8_E4M3), 0x7E);
    assert_int_equal(tr_fp8_from_f32(-INFINITY, TR_FP8_E5M2), 0xFB);
    assert_int_equal(tr_fp8_from_f32(NAN, TR_FP8_E4M3), 0x7F);
    assert_int_equal(tr_fp8_from_f32(NAN, TR_FP8_E5M2), 0x7F);
    assert_int_equal(tr_fp8_from_f32(-0.0f, TR_FP8_E4M3), 0x80);
    assert_int_equal(tr_fp8_from_f32(0.0f, TR_FP8_E5M2), 0x00);
    /* ties to even: 1 + 1/16 lies halfway between 1 (mantissa 000) and 1.125 (001) in E4M3 */
    assert_int_equal(tr_fp8_from_f32(1.0625f, TR_FP8_E4M3), 0x38);
    assert_int_equal(tr_fp8_from_f32(1.1875f, TR_FP8_E4M3), 0x3A); /* between 001 and 010: to 010 */
    /* half the smallest subnormal rounds to zero (even), three halves to two */
    assert_int_equal(tr_fp8_from_f32(0x1p-10f, TR_FP8_E4M3), 0x00);
    assert_int_equal(tr_fp8_from_f32(0x3p-10f, TR_FP8_E4M3), 0x02);
}

/* Every finite encoding decodes and encodes back to itself (both zeros included). */
static void test_fp8_round_trip_every_code(void **state) {
    (void)state;
    for (int f = TR_FP8_E4M3; f <= TR_FP8_E5M2; f++) {
        int finite = 0;
        for (int c = 0; c < 256; c++) {
            const float v = tr_fp8_to_f32((uint8_t)c, (tr_fp8_format)f);
            if (!isfinite(v)) continue;
            finite++;
            assert_int_equal(tr_fp8_from_f32(v, (tr_fp8_format)f), c);
        }
        /* E4M3: 256 less 2 NaNs; E5M2: 256 less 2 infinities and 6 NaNs */
        assert_int_equal(finite, f == TR_FP8_E4M3 ? 254 : 248);
    }
}

/* The oracle: nearest finite value by exact distance, ties to the even encoding, saturating. */
static uint8_t oracle(float x, tr_fp8_format f) {
    if (isnan(x)) return 0x7F;
    double best_d = INFINITY;
    int best = -1;
    for (int c = 0; c < 256; c++) {
        const float v = tr_fp8_to_f32((uint8_t)c, f);
        if (!isfinite(v)) continue;
        if (v == 0.0f && (signbit(v) != signbit(x))) continue; /* a zero keeps the input's sign */
        const double d = fabs((double)x - (double)v);
        if (d < best_d || (d == best_d && (c & 1) == 0 && (best & 1) == 1)) best_d = d, best = c;
    }
    const uint8_t max_code = f == TR_FP8_E4M3 ? 0x7E : 0x7B;
    if (fabs((double)x) > (double)tr_fp8_to_f32(max_code, f)) return (uint8_t)((signbit(x) ? 0x80 : 0) | max_code);
    return (uint8_t)best;
}

/* fp32 inputs spread over every exponent (every 2^14-th bit pattern of both signs, the midpoints between
 * neighbouring fp8 values and the points next to them): the conversion equals the oracle. */
static void test_fp8_matches_oracle(void **state) {
    (void)state;
    long checked = 0;
    for (int f = TR_FP8_E4M3; f <= TR_FP8_E5M2; f++) {
        for (uint64_t u = 0; u < (1ull << 32); u += 16384 + 7) {
            uint32_t bits = (uint32_t)u;
            float x;
            memcpy(&x, &bits, 4);
            if (isnan(x)) continue;
            assert_int_equal(tr_fp8_from_f32(x, (tr_fp8_format)f), oracle(x, (tr_fp8_format)f));
            checked++;
        }
        for (int c = 0; c < 255; c++) { /* midpoints between c and c + 1 (same sign, increasing) */
            const float a = tr_fp8_to_f32((uint8_t)c, (tr_fp8_format)f),
                        b = tr_fp8_to_f32((uint8_t)(c + 1), (tr_fp8_format)f);
            if (!isfinite(a) || !isfinite(b) || (c & 0x7F) == 0x7F) continue;
            const float mid = (float)(((double)a + (double)b) / 2); /* exact: fp8 values have few bits */
            assert_true((double)mid == ((double)a + (double)b) / 2);
            const float pts[3] = {mid, nextafterf(mid, -INFINITY), nextafterf(mid, INFINITY)};
            for (int k = 0; k < 3; k++) {
                assert_int_equal(tr_fp8_from_f32(pts[k], (tr_fp8_format)f), oracle(pts[k], (tr_fp8_format)f));
                assert_int_equal(tr_fp8_from_f32(-pts[k], (tr_fp8_format)f), oracle(-pts[k], (tr_fp8_format)f));
                checked += 2;
            }
        }
    }
    assert_true(checked > 500000);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_known_values),
        cmocka_unit_test(test_fp8_round_trip_every_code),
        cmocka_unit_test(test_fp8_matches_oracle),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
