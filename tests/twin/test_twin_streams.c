/* Streams in the twin (docs/twin.md#streams): a side stream's clock, event waits that bring clocks
 * together, and the hazard check that reports a missing event wait as a stream race naming both
 * streams, the allocation and both operations. cmocka's asserts never run inside a rank (their
 * longjmp would cross coroutine stacks): the ranks fill a struct, the test asserts on it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "dev/dev_streams.h" /* white box: the pending operations, for the memory bound */
#include "twin.h"
#include "twinrun/coll.h"
#include "twinrun/dev.h"
#include "twinrun/kern.h"

enum { N = 1 << 16 };

typedef enum mode { WITH_EVENT, NO_EVENT, WAR_WITH_EVENT, WAR_NO_EVENT, SYNCED } mode;

typedef struct clocks {
    mode m;
    double t_launch;   /* host clock after enqueueing the side stream's kernel */
    double t_default;  /* host clock after the default stream's own kernel */
    double t_wait;     /* host clock after waiting on the side stream's event */
    double one_kernel; /* the default stream's kernel alone */
    float value;       /* an element of the result */
} clocks;

/* Side stream writes `a` (scale by 2); the default stream scales c (its own work, overlapping), then
 * reads `a` into b, with or without waiting on an event recorded after the side stream's kernel. */
static int read_after_write(int rank, void *arg) {
    (void)rank;
    clocks *k = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *def = dev_stream_default(d), *side = dev_stream_create(d);
    dev_stream_set_name(side, "dp_grads");
    dev_mem_tag_set(d, DEV_MEM_MAIN_GRADS);
    float *a = dev_alloc(d, N * sizeof(float), "a");
    dev_mem_tag_set(d, DEV_MEM_WORKSPACE);
    float *b = dev_alloc(d, N * sizeof(float), "b"), *c = dev_alloc(d, N * sizeof(float), "c");
    const float one = 1.0f;
    dev_memset_zero(def, a, N * sizeof(float));
    dev_copy_h2d(def, a, &one, sizeof one);
    dev_memset_zero(def, c, N * sizeof(float));
    dev_stream_sync(def); /* the setup is done before the side stream starts */
    dev_event *e = dev_event_create(d);
    const double t0 = dev_clock_now(d);
    kern_scale(side, tr_buf_make(a, TR_F32), 2.0f, N);
    dev_event_record(e, side);
    k->t_launch = dev_clock_now(d) - t0;
    kern_scale(def, tr_buf_make(c, TR_F32), 3.0f, N);
    k->t_default = dev_clock_now(d) - t0;
    k->one_kernel = k->t_default;
    if (k->m == WITH_EVENT) dev_stream_wait_event(def, e);
    if (k->m == SYNCED) dev_stream_sync(side);
    k->t_wait = dev_clock_now(d) - t0;
    kern_add(def, tr_buf_make(b, TR_F32), tr_buf_make(a, TR_F32), tr_buf_make(c, TR_F32), N);
    dev_copy_d2h(def, &k->value, b, sizeof k->value);
    dev_event_destroy(e);
    dev_stream_destroy(side);
    dev_close(d);
    return 0;
}

/* Write after read: the default stream reads `a`, then the side stream overwrites it. */
static int write_after_read(int rank, void *arg) {
    (void)rank;
    clocks *k = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *def = dev_stream_default(d), *side = dev_stream_create(d);
    float *a = dev_alloc(d, N * sizeof(float), "a"), *b = dev_alloc(d, N * sizeof(float), "b");
    dev_memset_zero(def, a, N * sizeof(float));
    dev_stream_sync(def); /* the write before: ordered, so only the read below is in question */
    dev_event *e = dev_event_create(d);
    kern_cast(def, tr_buf_make(b, TR_F32), tr_buf_make(a, TR_F32), N);
    dev_event_record(e, def);
    if (k->m == WAR_WITH_EVENT) dev_stream_wait_event(side, e);
    dev_memset_zero(side, a + 1024, 4096);
    dev_stream_sync(side);
    dev_event_destroy(e);
    dev_stream_destroy(side);
    dev_close(d);
    return 0;
}

/* nranks ranks of entry(arg), quiet, on `threads` (twin_options.threads); the run must happen. */
static void run_ranks(int nranks, int (*entry)(int, void *), void *arg, int threads, twin_result *res) {
    twin_options o;
    twin_options_default(&o);
    o.quiet = true;
    o.threads = threads;
    char err[256];
    assert_int_equal(twin_run(nranks, entry, arg, &o, res, err, sizeof err), 0);
}

static void run_threads(int (*entry)(int, void *), clocks *k, twin_result *res, int threads) {
    run_ranks(1, entry, k, threads, res);
}

static void run_one(int (*entry)(int, void *), clocks *k, twin_result *res) { run_threads(entry, k, res, 1); }

static void expect_in(const char *text, const char *want) {
    if (!strstr(text, want)) fail_msg("'%s' lacks '%s'", text, want);
}

static void test_event_wait_orders_and_overlaps(void **state) {
    (void)state;
    clocks k = {.m = WITH_EVENT};
    twin_result res;
    run_one(read_after_write, &k, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_EXITED);
    assert_true(k.t_launch == 0.0);  /* the side stream's kernel does not move the host's clock */
    assert_true(k.one_kernel > 0.0); /* the default stream's does */
    /* the wait takes the later of the two: both kernels ran side by side, not one after the other */
    assert_true(k.t_wait >= k.t_default);
    assert_true(k.t_wait < 1.5 * k.one_kernel);
    assert_true(k.value == 2.0f);
    twin_result_free(&res);
}

/* The same clocks, result and report with a worker pool (2 threads) and lazily queued work. */
static void test_any_thread_count(void **state) {
    (void)state;
    for (int m = WITH_EVENT; m <= NO_EVENT; m++) {
        clocks one = {.m = (mode)m};
        twin_result res1;
        run_one(read_after_write, &one, &res1);
        for (int threads = -1; threads <= 2; threads += 3) {
            clocks k = {.m = (mode)m};
            twin_result res;
            run_threads(read_after_write, &k, &res, threads);
            assert_memory_equal(&k, &one, sizeof k);
            assert_string_equal(res.report, res1.report);
            twin_result_free(&res);
        }
        twin_result_free(&res1);
    }
}

typedef struct bound_case {
    size_t most_pending; /* the largest number of unsettled operations seen on any stream */
    float value;
} bound_case;

static size_t pending(dev_device *d) {
    size_t most = 0;
    for (int i = 0; i < TWIN_STREAMS_MAX; i++) {
        const stream_slot *sl = &d->streams->slot[i];
        if (sl->n - sl->head > most) most = sl->n - sl->head;
    }
    return most;
}

/* A step loop as an overlapped gradient reduction would run it: the side stream waits for the
 * gradient, works on it, the default stream waits for that. Recorded operations settle every step. */
static int step_loop(int rank, void *arg) {
    (void)rank;
    bound_case *bc = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *def = dev_stream_default(d), *side = dev_stream_create(d);
    float *g = dev_alloc(d, 1024 * sizeof(float), "g");
    dev_memset_zero(def, g, 1024 * sizeof(float));
    dev_event *ready = dev_event_create(d), *done = dev_event_create(d);
    const float one = 1.0f;
    for (int step = 0; step < 10000; step++) {
        dev_copy_h2d(def, g, &one, sizeof one);
        dev_event_record(ready, def);
        dev_stream_wait_event(side, ready);
        kern_scale(side, tr_buf_make(g, TR_F32), 2.0f, 1024);
        dev_event_record(done, side);
        dev_stream_wait_event(def, done);
        const size_t p = pending(d);
        if (p > bc->most_pending) bc->most_pending = p;
    }
    dev_copy_d2h(def, &bc->value, g, sizeof bc->value);
    dev_event_destroy(ready);
    dev_event_destroy(done);
    dev_free(d, g);
    dev_close(d); /* the side stream goes with its device */
    return 0;
}

static void test_recorded_operations_stay_bounded(void **state) {
    (void)state;
    twin_result res;
    bound_case bc = {0};
    run_ranks(1, step_loop, &bc, 1, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_EXITED);
    assert_true(bc.value == 2.0f);
    assert_true(bc.most_pending <= 2);
    twin_result_free(&res);
}

static void test_missing_wait_is_a_race(void **state) {
    (void)state;
    clocks k = {.m = NO_EVENT};
    twin_result res;
    run_one(read_after_write, &k, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_FAILED);
    const char *msg = res.messages[0];
    assert_non_null(msg);
    expect_in(msg, "stream race on rank 0: kernel add on stream 'default' reads bytes [0, 262144) of a 262144-byte "
                   "main_grads allocation");
    expect_in(msg, "which kernel scale on stream 'dp_grads' (its operation 1) writes with no event between them");
    expect_in(msg, "Record an event on 'dp_grads' after kernel scale and dev_stream_wait_event on 'default'");
    expect_in(res.report, "stream race on rank 0");
    twin_result_free(&res);
}

static void test_sync_orders_too(void **state) {
    (void)state;
    clocks k = {.m = SYNCED};
    twin_result res;
    run_one(read_after_write, &k, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_EXITED);
    assert_true(k.t_wait >= k.t_default);
    assert_true(k.value == 2.0f);
    twin_result_free(&res);
}

static void test_write_after_read(void **state) {
    (void)state;
    clocks k = {.m = WAR_NO_EVENT};
    twin_result res;
    run_one(write_after_read, &k, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_FAILED);
    expect_in(res.messages[0],
              "memset on stream 'stream 1' writes bytes [4096, 8192) of a 262144-byte workspace allocation");
    expect_in(res.messages[0], "which kernel cast on stream 'default' (its operation 2) reads");
    twin_result_free(&res);
    k.m = WAR_WITH_EVENT;
    run_one(write_after_read, &k, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_EXITED);
    twin_result_free(&res);
}

/* Beyond the gradient path: a SwiGLU on the side stream, a GEMM on the default stream reading its
 * output with no event between them. */
static int swiglu_then_gemm(int rank, void *arg) {
    (void)rank, (void)arg;
    enum { ROWS = 4, F = 8 };
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *def = dev_stream_default(d), *side = dev_stream_create(d);
    dev_mem_tag_set(d, DEV_MEM_ACTIVATIONS);
    float *h = dev_alloc(d, ROWS * 2 * F * sizeof(float), "h"), *act = dev_alloc(d, ROWS * F * sizeof(float), "act");
    float *w = dev_alloc(d, F * F * sizeof(float), "w"), *y = dev_alloc(d, ROWS * F * sizeof(float), "y");
    dev_memset_zero(def, h, ROWS * 2 * F * sizeof(float));
    dev_memset_zero(def, w, F * F * sizeof(float));
    dev_stream_sync(def);
    kern_swiglu_forward(side, tr_buf_make(act, TR_F32), tr_buf_make(h, TR_F32), ROWS, F);
    kern_gemm(def, tr_buf_make(y, TR_F32), tr_buf_make(act, TR_F32), tr_buf_make(w, TR_F32), ROWS, F, F, false, false,
              1.0f, 0.0f);
    dev_close(d);
    return 0;
}

static void test_other_kernels_declare_too(void **state) {
    (void)state;
    twin_result res;
    run_ranks(1, swiglu_then_gemm, NULL, 1, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_FAILED);
    expect_in(res.messages[0],
              "kernel gemm on stream 'default' reads bytes [0, 128) of a 128-byte activations allocation");
    expect_in(res.messages[0], "which kernel swiglu_forward on stream 'stream 1' (its operation 1) writes");
    twin_result_free(&res);
}

/* ---- a collective on a side stream ----------------------------------------------------- */
typedef struct coll_case {
    bool wait;
    double host_after_launch[2], host_after_wait[2], busy_before[2];
    float sum[2];
} coll_case;

static int reduce_on_side(int rank, void *arg) {
    coll_case *cc = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *def = dev_stream_default(d), *side = dev_stream_create(d);
    dev_stream_set_name(side, "dp_grads");
    int ranks[2] = {0, 1};
    coll_comm *c = coll_comm_create(d, ranks, 2, rank, "dp", err, sizeof err);
    float *g = dev_alloc(d, N * sizeof(float), "grads"), *w = dev_alloc(d, N * sizeof(float), "work");
    const float v = (float)(rank + 1);
    dev_copy_h2d(def, g, &v, sizeof v);
    dev_memset_zero(def, w, N * sizeof(float));
    if (rank == 1) kern_scale(def, tr_buf_make(w, TR_F32), 2.0f, N); /* rank 1's host launches later */
    dev_event *ready = dev_event_create(d), *done = dev_event_create(d);
    dev_event_record(ready, def);
    dev_stream_wait_event(side, ready); /* the gradient is written before the side stream reads it */
    cc->busy_before[rank] = dev_clock_now(d);
    coll_all_reduce(c, side, g, g, N, TR_F32, COLL_SUM);
    cc->host_after_launch[rank] = dev_clock_now(d);
    dev_event_record(done, side);
    kern_scale(def, tr_buf_make(w, TR_F32), 2.0f, N); /* overlaps the transfer */
    if (cc->wait) dev_stream_wait_event(def, done);
    cc->host_after_wait[rank] = dev_clock_now(d);
    kern_cast(def, tr_buf_make(w, TR_F32), tr_buf_make(g, TR_F32), 1);
    dev_copy_d2h(def, &cc->sum[rank], w, sizeof(float));
    dev_event_destroy(ready);
    dev_event_destroy(done);
    dev_stream_destroy(side);
    coll_comm_destroy(c);
    dev_close(d);
    return 0;
}

static void test_collective_on_a_side_stream(void **state) {
    (void)state;
    twin_result res;
    coll_case cc = {.wait = true};
    run_ranks(2, reduce_on_side, &cc, 1, &res);
    for (int r = 0; r < 2; r++) {
        assert_int_equal(res.rank_end[r], TWIN_RANK_EXITED);
        assert_true(cc.sum[r] == 3.0f);
        /* the host waited for the last member's host to launch, not for the transfer */
        assert_true(cc.host_after_launch[r] == cc.busy_before[1]);
        /* after the wait the host has caught up with the transfer's end, past the overlapping kernel */
        assert_true(cc.host_after_wait[r] > cc.host_after_launch[r]);
    }
    assert_true(cc.busy_before[1] > cc.busy_before[0]);
    twin_result_free(&res);

    cc = (coll_case){.wait = false};
    run_ranks(2, reduce_on_side, &cc, 1, &res);
    assert_int_equal(res.rank_end[0], TWIN_RANK_FAILED);
    expect_in(res.messages[0], "kernel cast on stream 'default' reads bytes [0, 4) of a 262144-byte workspace "
                               "allocation");
    expect_in(res.messages[0], "which all_reduce on 'dp' on stream 'dp_grads' (its operation 1) writes");
    twin_result_free(&res);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_event_wait_orders_and_overlaps),
        cmocka_unit_test(test_missing_wait_is_a_race),
        cmocka_unit_test(test_any_thread_count),
        cmocka_unit_test(test_recorded_operations_stay_bounded),
        cmocka_unit_test(test_sync_orders_too),
        cmocka_unit_test(test_write_after_read),
        cmocka_unit_test(test_other_kernels_declare_too),
        cmocka_unit_test(test_collective_on_a_side_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
