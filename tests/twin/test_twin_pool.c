/* The worker pool (sim/sched/pool.h): every place where the host meets a rank's memory drains the
 * rank's queued work first. Each case runs "lazy" (threads -1: queued work runs only at drains, so a
 * missing drain reads stale memory every time, not by chance), with 2 and 4 threads, and with 1 (no
 * pool), and must see the same values, clocks and failures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_coll.h"
#include "twin.h"
#include "twinrun/dev.h"
#include "twinrun/kern.h"

enum { NRANKS = 4, N = 1000, BIG = 40000 /* floats: 160 KB, past the queued h2d's limit */ };

typedef struct pool_case {
    int bad[NRANKS];   /* wrong values each rank saw (cmocka must not assert on a coroutine) */
    float sum[NRANKS]; /* the all-reduced value each rank read back */
    bool bad_token;    /* rank 1 launches an embedding with a token id outside the vocabulary */
} pool_case;

static int check(const float *got, const float *want, size_t n) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += memcmp(&got[i], &want[i], sizeof got[i]) != 0;
    return bad;
}

static int entry(int rank, void *arg) {
    pool_case *pc = arg;
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *s = dev_stream_default(d);
    const int ranks[NRANKS] = {0, 1, 2, 3};
    coll_comm *world = coll_comm_create(d, ranks, NRANKS, rank, "world", err, sizeof err);
    float *x = dev_alloc(d, N * 4, "x"), *y = dev_alloc(d, N * 4, "y"), *out = dev_alloc(d, N * 4, "out");
    float *big = dev_alloc(d, BIG * 4, "big");
    float hx[N], hy[N], want[N], got[N];
    tt_fill(hx, TR_F32, rank, 0, N, 1);
    tt_fill(hy, TR_F32, rank, 0, N, 2);
    int bad = 0;

    /* queued h2d copies, then a kernel, then the read back */
    dev_copy_h2d(s, x, hx, sizeof hx);
    dev_copy_h2d(s, y, hy, sizeof hy);
    memset(hx, 0xff, sizeof hx); /* NaNs: a queued copy must have taken the bytes at the call */
    kern_add(s, tr_buf_f32(out), tr_buf_f32(x), tr_buf_f32(y), N);
    dev_copy_d2h(s, got, out, sizeof got);
    tt_fill(hx, TR_F32, rank, 0, N, 1);
    for (int i = 0; i < N; i++) want[i] = hx[i] + hy[i];
    bad += check(got, want, N);

    /* a kernel, a device copy and a memset in order, then another kernel */
    kern_scale(s, tr_buf_f32(out), 2.0f, N);
    dev_copy_d2d(s, y, out, N * 4);
    dev_memset_zero(s, x, N * 4);
    kern_add(s, tr_buf_f32(out), tr_buf_f32(x), tr_buf_f32(y), N);
    for (int i = 0; i < N; i++) want[i] *= 2.0f;
    dev_copy_d2h(s, got, out, sizeof got);
    bad += check(got, want, N);

    /* a large h2d lands after the queued kernel that writes the same memory, not under it */
    float *hbig = malloc(BIG * 4), *gbig = malloc(BIG * 4);
    tt_fill(hbig, TR_F32, rank, 0, BIG, 3);
    dev_memset_zero(s, big, BIG * 4);
    kern_scale(s, tr_buf_f32(big), 3.0f, BIG);
    dev_copy_h2d(s, big, hbig, BIG * 4);
    dev_copy_d2h(s, gbig, big, BIG * 4);
    bad += check(gbig, hbig, BIG);
    free(gbig);
    free(hbig);

    /* a collective over what queued kernels wrote: every member drained when the last arrives */
    float one = (float)(rank + 1);
    dev_copy_h2d(s, x, &one, 4);
    kern_scale(s, tr_buf_f32(x), 10.0f, 1);
    coll_all_reduce(world, s, x, x, 1, TR_F32, COLL_SUM);
    kern_add(s, tr_buf_f32(x), tr_buf_f32(x), tr_buf_f32(x), 1);
    dev_copy_d2h(s, &pc->sum[rank], x, 4);

    /* a freed buffer's memory goes back only after the queued work that reads it */
    kern_add(s, tr_buf_f32(out), tr_buf_f32(y), tr_buf_f32(y), N);
    dev_free(d, y);

    /* a token id written by a queued copy is checked at launch: the launching rank fails there */
    if (pc->bad_token && rank == 1) {
        int32_t *tok = dev_alloc(d, 4, "tokens");
        const int32_t t = 7;
        dev_copy_h2d(s, tok, &t, 4);
        kern_embedding_forward(s, tr_buf_f32(out), tok, tr_buf_f32(big), 1, 4, 5);
    }
    pc->bad[rank] = bad;
    dev_stream_sync(s);
    dev_free(d, out);
    dev_free(d, x);
    dev_free(d, big);
    coll_comm_destroy(world);
    dev_close(d);
    return 0;
}

static void run_with(int threads, bool bad_token, pool_case *pc, twin_result *res) {
    memset(pc, 0, sizeof *pc);
    pc->bad_token = bad_token;
    twin_options o;
    twin_options_default(&o);
    o.threads = threads;
    o.quiet = true;
    char err[256];
    assert_int_equal(twin_run(NRANKS, entry, pc, &o, res, err, sizeof err), 0);
}

static void test_drains_at_every_host_access(void **state) {
    (void)state;
    pool_case ref, pc;
    twin_result rref, res;
    run_with(1, false, &ref, &rref);
    for (int r = 0; r < NRANKS; r++) {
        assert_int_equal(ref.bad[r], 0);
        assert_int_equal(rref.rank_end[r], TWIN_RANK_EXITED);
        assert_true(ref.sum[r] == 200.0f); /* (10 + 20 + 30 + 40) x 2 */
    }
    const int threads[] = {-1, 2, 4};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        run_with(threads[k], false, &pc, &res);
        for (int r = 0; r < NRANKS; r++) {
            assert_int_equal(pc.bad[r], 0);
            assert_true(pc.sum[r] == ref.sum[r]);
            assert_int_equal(res.rank_end[r], TWIN_RANK_EXITED);
            assert_true(res.end_times[r] == rref.end_times[r]); /* clocks: charged at launch */
        }
        assert_int_equal(res.switches, rref.switches);
        assert_string_equal(res.report, rref.report);
        twin_result_free(&res);
    }
    twin_result_free(&rref);
}

static void test_content_check_fails_the_launching_rank(void **state) {
    (void)state;
    pool_case pc;
    twin_result ref, res;
    run_with(1, true, &pc, &ref);
    assert_int_equal(ref.rank_end[1], TWIN_RANK_FAILED);
    assert_non_null(ref.messages[1]);
    assert_non_null(strstr(ref.messages[1], "token id 7 at position 0 is outside the vocabulary [0, 5)"));
    const int threads[] = {-1, 2};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        run_with(threads[k], true, &pc, &res);
        for (int r = 0; r < NRANKS; r++) {
            assert_int_equal(res.rank_end[r], ref.rank_end[r]);
            assert_true(res.end_times[r] == ref.end_times[r]);
        }
        assert_string_equal(res.messages[1], ref.messages[1]);
        assert_string_equal(res.report, ref.report);
        twin_result_free(&res);
    }
    twin_result_free(&ref);
}

static void test_thread_setting_is_checked(void **state) {
    (void)state;
    pool_case pc;
    twin_options o;
    twin_options_default(&o);
    twin_result res;
    char err[256];
    o.threads = -2;
    assert_int_equal(twin_run(2, entry, &pc, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "threads -2"));
    o.threads = 0;
    setenv("TWINRUN_TWIN_THREADS", "two", 1);
    assert_int_equal(twin_run(2, entry, &pc, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "TWINRUN_TWIN_THREADS='two'"));
    setenv("TWINRUN_TWIN_THREADS", "lazy", 1);
    memset(&pc, 0, sizeof pc);
    assert_int_equal(twin_run(NRANKS, entry, &pc, &o, &res, err, sizeof err), 0);
    for (int r = 0; r < NRANKS; r++) assert_int_equal(pc.bad[r], 0);
    twin_result_free(&res);
    unsetenv("TWINRUN_TWIN_THREADS");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drains_at_every_host_access),
        cmocka_unit_test(test_content_check_fails_the_launching_rank),
        cmocka_unit_test(test_thread_setting_is_checked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
