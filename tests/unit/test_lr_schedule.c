/* Megatron's lr schedule. Expected values are written out from Megatron's formulas by hand
 * (OptimizerParamScheduler.get_lr), and the cosine case is the reference.json lr_per_step of
 * tests/data/tiny_gqa, which Megatron's rule produced independently of this code. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "optim/lr_schedule.h"

static tr_config base(void) {
    tr_config c;
    tr_config_defaults(&c);
    c.global_batch_size = 2;
    c.lr = 3e-3;
    c.min_lr = 3e-4;
    c.train_samples = 12;
    c.train_iters = 0;
    c.lr_warmup_samples = 4;
    c.lr_decay_samples = 12;
    c.lr_decay_style = TR_LR_COSINE;
    return c;
}

static void test_cosine_matches_reference(void **state) {
    (void)state;
    tr_config c = base();
    tr_lr_schedule s;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    const double want[6] = {0.0, 0.0015, 0.003, 0.002604594154601839, 0.00165, 0.0006954058453981609};
    for (int k = 0; k < 6; k++) assert_true(fabs(tr_lr_at(&s, 2 * k) - want[k]) <= 1e-15);
    assert_true(tr_lr_at(&s, 13) == 3e-4); /* past the decay span: min_lr */
}

static void test_linear_constant_inverse_sqrt(void **state) {
    (void)state;
    tr_config c = base();
    tr_lr_schedule s;
    c.lr_decay_style = TR_LR_LINEAR;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    /* 8 samples: ratio (8-4)/(12-4) = 0.5 -> 3e-4 + 0.5 * 2.7e-3 */
    assert_true(fabs(tr_lr_at(&s, 8) - 1.65e-3) < 1e-15);
    c.lr_decay_style = TR_LR_CONSTANT;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    assert_true(tr_lr_at(&s, 2) == 1.5e-3); /* warmup still applies */
    assert_true(tr_lr_at(&s, 100) == 3e-3);
    c.lr_decay_style = TR_LR_INVERSE_SQRT;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    /* 9 samples: 3e-3 * sqrt(4) / sqrt(9) = 2e-3 */
    assert_true(fabs(tr_lr_at(&s, 9) - 2e-3) < 1e-15);
}

static void test_iteration_based_and_fraction(void **state) {
    (void)state;
    tr_config c = base();
    c.train_samples = 0;
    c.train_iters = 6;
    c.lr_warmup_samples = 0;
    c.lr_decay_samples = 0;
    c.lr_warmup_iters = 2; /* x GBS 2 = 4 samples */
    tr_lr_schedule s;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    assert_int_equal(s.warmup_samples, 4);
    assert_int_equal(s.decay_samples, 12);
    c.lr_warmup_iters = 0;
    c.lr_warmup_fraction = 0.25;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    assert_int_equal(s.warmup_samples, 3);
}

static void test_rejects_bad_spans(void **state) {
    (void)state;
    tr_config c = base();
    tr_lr_schedule s;
    char err[256];
    c.lr_warmup_samples = 20;
    assert_int_equal(tr_lr_schedule_init(&s, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "warmup"));
    c = base();
    c.min_lr = 1.0;
    assert_int_equal(tr_lr_schedule_init(&s, &c, err, sizeof err), -1);
    assert_non_null(strstr(err, "--min-lr"));
}

/* --decoupled-lr: the same warmup and decay shape between --lr-warmup-init, --decoupled-lr and
 * --decoupled-min-lr (or --min-lr when that is not given), as Megatron's decoupled param group. */
static void test_decoupled_schedule(void **state) {
    (void)state;
    tr_config c = base();
    tr_lr_schedule s, d;
    assert_int_equal(tr_lr_schedule_init(&s, &c, NULL, 0), 0);
    assert_false(tr_lr_schedule_decoupled(&d, &s, &c));
    c.decoupled_lr = 6e-3;
    assert_true(tr_lr_schedule_decoupled(&d, &s, &c));
    assert_true(tr_lr_at(&d, 2) == 3e-3);  /* half way up the warmup to 6e-3 */
    assert_true(tr_lr_at(&d, 4) == 6e-3);  /* its peak */
    assert_true(tr_lr_at(&d, 13) == 3e-4); /* floor: --min-lr */
    c.decoupled_min_lr = 1e-4;
    assert_true(tr_lr_schedule_decoupled(&d, &s, &c));
    assert_true(tr_lr_at(&d, 13) == 1e-4);
    assert_true(fabs(tr_lr_at(&d, 8) - (1e-4 + 0.5 * (6e-3 - 1e-4))) <= 1e-15); /* cosine mid-point */
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cosine_matches_reference),     cmocka_unit_test(test_linear_constant_inverse_sqrt),
        cmocka_unit_test(test_iteration_based_and_fraction), cmocka_unit_test(test_rejects_bad_spans),
        cmocka_unit_test(test_decoupled_schedule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
