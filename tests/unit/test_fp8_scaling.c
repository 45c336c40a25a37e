/* Delayed scaling's update (base/include/twinrun/fp8_scaling.h) against the rule it follows, worked by
 * hand here: the roll of the history, the amax of each algorithm, the margin, the scale kept on a zero
 * or non-finite amax, and the window — one amax spike changes exactly the next len passes' scales. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "twinrun/fp8.h"
#include "twinrun/fp8_scaling.h"

/* [3 | 1 7 2]: this pass's 3, then the earlier passes oldest first */
static void test_roll_and_max(void **state) {
    (void)state;
    float hist[4] = {3, 1, 7, 2}, scale = 1, inv = 1;
    const float amax = tr_fp8_scale_update(hist, 4, TR_FP8_AMAX_MAX, 448.0f, 0, &scale, &inv);
    assert_true(amax == 7.0f); /* every entry before the roll, the oldest (1) included */
    const float want[4] = {0, 7, 2, 3};
    assert_memory_equal(hist, want, sizeof want); /* 1 left, 3 is the newest, the slot is clear */
    assert_true(scale == 448.0f / 7.0f);
    assert_true(inv == 1.0f / (448.0f / 7.0f));
}

static void test_most_recent_and_margin(void **state) {
    (void)state;
    float hist[3] = {5, 100, 100}, scale = 1, inv = 1;
    const float amax = tr_fp8_scale_update(hist, 3, TR_FP8_AMAX_MOST_RECENT, 57344.0f, 2, &scale, &inv);
    assert_true(amax == 5.0f);
    assert_true(scale == 57344.0f * 0.25f / 5.0f); /* E5M2's largest, 2^-margin, over this pass's amax */
    const float want[3] = {0, 100, 5};
    assert_memory_equal(hist, want, sizeof want);
}

/* A history of one: the amax is this pass's under both algorithms. */
static void test_length_one(void **state) {
    (void)state;
    for (int algo = 0; algo < 2; algo++) {
        float hist[1] = {2}, scale = 1, inv = 1;
        assert_true(tr_fp8_scale_update(hist, 1, (tr_fp8_amax_algo)algo, 448.0f, 0, &scale, &inv) == 2.0f);
        assert_true(hist[0] == 0.0f);
        assert_true(scale == 224.0f);
    }
}

/* Zero, infinite and NaN amaxes keep the scale; a NaN among earlier ones is skipped by max. */
static void test_scale_kept(void **state) {
    (void)state;
    const float bad[] = {0.0f, INFINITY, NAN};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        float hist[2] = {bad[i], 0}, scale = 3.5f, inv = 0;
        tr_fp8_scale_update(hist, 2, TR_FP8_AMAX_MOST_RECENT, 448.0f, 0, &scale, &inv);
        assert_true(scale == 3.5f);
        assert_true(inv == 1.0f / 3.5f);
    }
    float hist[3] = {4, NAN, 2}, scale = 1, inv = 1;
    assert_true(tr_fp8_scale_update(hist, 3, TR_FP8_AMAX_MAX, 448.0f, 0, &scale, &inv) == 4.0f);
    assert_true(scale == 112.0f);
}

/* Steady amax 2 with one spike of 64 in pass 10, len 5: the scales of passes 11..15 come from 64, every
 * other from 2 (max); with most_recent pass 11's alone. Pass s quantises with the scale the update at
 * the end of pass s - 1 left. */
static void test_spike_window(void **state) {
    (void)state;
    enum { LEN = 5, PASSES = 30, SPIKE = 10 };
    for (int algo = 0; algo < 2; algo++) {
        float hist[LEN] = {0}, scale = 1, inv = 1;
        for (int pass = 1; pass <= PASSES; pass++) {
            if (pass > 1) { /* the scale this pass quantises with */
                const bool spiked = algo == TR_FP8_AMAX_MAX ? pass > SPIKE && pass <= SPIKE + LEN : pass == SPIKE + 1;
                assert_true(scale == 448.0f / (spiked ? 64.0f : 2.0f));
            }
            hist[0] = pass == SPIKE ? 64.0f : 2.0f; /* the cast's record of this pass's amax */
            tr_fp8_scale_update(hist, LEN, (tr_fp8_amax_algo)algo, 448.0f, 0, &scale, &inv);
        }
    }
}

/* A value at the history's amax, scaled, lands on the format's largest finite value: the scale uses
 * the whole range and nothing within the window saturates. */
static void test_scaled_amax_is_fp8_max(void **state) {
    (void)state;
    const float amaxes[] = {1e-3f, 0.37f, 3.0f, 1234.5f};
    for (int f = 0; f < 2; f++) {
        const tr_fp8_spec sp = tr_fp8_spec_of((tr_fp8_format)f);
        for (size_t i = 0; i < sizeof amaxes / sizeof *amaxes; i++) {
            float hist[2] = {amaxes[i], 0}, scale = 1, inv = 1;
            tr_fp8_scale_update(hist, 2, TR_FP8_AMAX_MAX, sp.max, 0, &scale, &inv);
            assert_true(tr_fp8_round(amaxes[i] * scale, (tr_fp8_format)f) == sp.max);
            assert_true(fabsf(amaxes[i] * scale - sp.max) <= sp.max * 1e-6f);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roll_and_max), cmocka_unit_test(test_most_recent_and_margin),
        cmocka_unit_test(test_length_one),   cmocka_unit_test(test_scale_kept),
        cmocka_unit_test(test_spike_window), cmocka_unit_test(test_scaled_amax_is_fp8_max),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
