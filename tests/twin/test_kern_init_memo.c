/* The memo of kern_init_param (sim/kern/kern_init_memo.h): a call answered from the memo gives the
 * generator's values bit for bit; a call that differs from a remembered one in any single field the
 * generator reads (the parameter's key, std, the placement, the first local element, the length) is
 * computed, not copied; threads calling at once see the same bits; the memo stays within its budget.
 * Kernels run with no stream (at once, on the calling thread), as the GPU build's oracle runs them. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "kern/kern_init_memo.h"
#include "twinrun/init_normal.h"
#include "twinrun/kern.h"

enum { ROWS = 8, COLS = 12, N = ROWS * COLS, NVARIANTS = 11 };

/* A tensor-parallel shard of a fused [gate; up] fc1: local rows 0..3 are global 4..7, 4..7 are 12..15. */
static kern_init_desc base_desc(void) {
    return (kern_init_desc){.normal = true,
                            .key = tr_init_key(1234, "model.layers.3.mlp.gate_up_proj.weight"),
                            .std = 0.02,
                            .cols = COLS,
                            .gcols = 2 * COLS,
                            .col0 = 0,
                            .nseg = 2,
                            .seg_local1 = 4,
                            .seg_global0 = 4,
                            .seg_global1 = 12};
}

/* The base descriptor with one field changed (v = 0: unchanged); *n its length. */
static kern_init_desc variant(int v, size_t *n) {
    kern_init_desc d = base_desc();
    *n = N;
    switch (v) {
    case 1: d.key = tr_init_key(1235, "model.layers.3.mlp.gate_up_proj.weight"); break;
    case 2: d.std = 0.04; break;
    case 3: d.cols = COLS - 1; break;
    case 4: d.gcols = 3 * COLS; break;
    case 5: d.col0 = COLS; break;
    case 6: d.nseg = 1; break;
    case 7: d.seg_local1 = 5; break;
    case 8: d.seg_global0 = 0; break;
    case 9: d.first = 41; break; /* a distributed optimizer's shard of the same length, 41 elements on */
    case 10: *n = N - 1; break;
    default: break;
    }
    return d;
}

/* Number of elements of out[n] that are not the generator's value, bit for bit. */
static size_t wrong_bits(const kern_init_desc *d, const float *out, size_t n) {
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        const uint64_t e = tr_init_global_index((uint64_t)d->first + i, d->cols, d->gcols, d->col0, d->nseg,
                                                d->seg_local1, d->seg_global0, d->seg_global1);
        const float want = (float)tr_init_normal_double(d->key, e, d->std);
        bad += memcmp(&want, &out[i], sizeof want) != 0;
    }
    return bad;
}

static void test_memo_hit_and_every_field_of_the_key(void **state) {
    (void)state;
    kern_init_memo_reset();
    float out[N];
    size_t n;
    kern_init_desc d = variant(0, &n);
    kern_init_param(NULL, &d, out, n); /* computed and remembered */
    memset(out, 0xff, sizeof out);
    kern_init_param(NULL, &d, out, n); /* copied */
    assert_int_equal(wrong_bits(&d, out, n), 0);
    kern_init_memo_stats s = kern_init_memo_stats_now();
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.misses, 1);
    assert_int_equal(s.entries, 1);
    for (int v = 1; v < NVARIANTS; v++) { /* each differs from the remembered call in one field */
        d = variant(v, &n);
        memset(out, 0xff, sizeof out);
        kern_init_param(NULL, &d, out, n);
        if (wrong_bits(&d, out, n)) fail_msg("variant %d: the memo answered for another call", v);
    }
    s = kern_init_memo_stats_now();
    assert_int_equal(s.hits, 1);
    assert_int_equal(s.misses, NVARIANTS);
    assert_int_equal(s.entries, NVARIANTS);
    for (int v = 0; v < NVARIANTS; v++) { /* every one now held, and still the generator's bits */
        d = variant(v, &n);
        memset(out, 0xff, sizeof out);
        kern_init_param(NULL, &d, out, n);
        assert_int_equal(wrong_bits(&d, out, n), 0);
    }
    assert_int_equal(kern_init_memo_stats_now().hits, 1 + NVARIANTS);
    /* a constant fill is not remembered (a fill is cheaper than a copy) */
    kern_init_desc ones = {.normal = false, .constant = 1.0f, .cols = 1, .gcols = 1, .nseg = 1};
    kern_init_param(NULL, &ones, out, N);
    for (size_t i = 0; i < N; i++) assert_true(out[i] == 1.0f);
    assert_int_equal(kern_init_memo_stats_now().entries, NVARIANTS);
    kern_init_memo_reset();
}

enum { NTHREADS = 4, CALLS = 60 };

/* Each thread calls every variant in its own order, many times; returns its count of wrong bits. */
static void *caller(void *arg) {
    const int t = (int)(intptr_t)arg;
    size_t bad = 0;
    float out[N];
    for (int c = 0; c < CALLS; c++) {
        size_t n;
        const int v = (c * (2 * t + 1) + t) % NVARIANTS;
        const kern_init_desc d = variant(v, &n);
        memset(out, 0xff, sizeof out);
        kern_init_param(NULL, &d, out, n);
        bad += wrong_bits(&d, out, n);
    }
    return (void *)(intptr_t)bad;
}

static void test_memo_threads_see_the_same_bits(void **state) {
    (void)state;
    kern_init_memo_reset();
    pthread_t th[NTHREADS];
    for (int t = 0; t < NTHREADS; t++) assert_int_equal(pthread_create(&th[t], NULL, caller, (void *)(intptr_t)t), 0);
    size_t bad = 0;
    for (int t = 0; t < NTHREADS; t++) {
        void *r;
        assert_int_equal(pthread_join(th[t], &r), 0);
        bad += (size_t)(intptr_t)r;
    }
    assert_int_equal(bad, 0);
    const kern_init_memo_stats s = kern_init_memo_stats_now();
    assert_int_equal(s.hits + s.misses, NTHREADS * CALLS);
    assert_int_equal(s.entries, NVARIANTS); /* a call computed twice at once is kept once */
    kern_init_memo_reset();
}

static void test_memo_stays_within_its_budget(void **state) {
    (void)state;
    kern_init_memo_reset();
    const size_t n = KERN_INIT_MEMO_BUDGET / sizeof(float) / 8 * 3; /* 3/8 of the budget */
    float *vals = calloc(n, sizeof(float));
    assert_non_null(vals);
    kern_init_desc d = base_desc();
    for (int i = 0; i < 3; i++) { /* the third would pass the budget: the memo drops the first two */
        d.first = i;
        kern_init_memo_put(&d, n, vals);
        assert_true(kern_init_memo_stats_now().bytes <= KERN_INIT_MEMO_BUDGET);
    }
    assert_int_equal(kern_init_memo_stats_now().entries, 1);
    d.first = 0;
    assert_false(kern_init_memo_get(&d, n, vals));                       /* dropped */
    kern_init_memo_put(&d, KERN_INIT_MEMO_BUDGET / sizeof(float), vals); /* past half the budget: not kept */
    assert_int_equal(kern_init_memo_stats_now().entries, 1);
    free(vals);
    kern_init_memo_reset();
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memo_hit_and_every_field_of_the_key),
        cmocka_unit_test(test_memo_threads_see_the_same_bits),
        cmocka_unit_test(test_memo_stays_within_its_budget),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
