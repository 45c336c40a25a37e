/* Every twin collective at 2, 8, 64, 1024 and 8192 ranks against a serial computation, on the
 * world, on tensor-parallel-like blocks of 8 and on strided data-parallel-like groups; results
 * must not depend on arrival order (seeded random delays before each call). */
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

typedef struct coll_case {
    int n;
    size_t count;  /* all-reduce elements */
    size_t gcount; /* world all-gather / reduce-scatter elements per rank; 0 skips them */
    bool full;     /* every dtype and op; otherwise fp32 sum and bf16 avg */
    bool shuffle;  /* seeded random delay before each call, so arrival order varies with the seed */
    void *ref[3][4];
    int errors;
    char first_error[512];
} coll_case;

static const tr_dtype dts[3] = {TR_F32, TR_BF16, TR_I32};
static const coll_op ops[4] = {COLL_SUM, COLL_AVG, COLL_MAX, COLL_MIN};

static bool wanted(const coll_case *cc, int di, int oi) {
    return cc->full || (di == 0 && oi == 0) || (di == 1 && oi == 1);
}

static void note_fail(coll_case *cc, int rank, const char *fmt, ...) {
    if (cc->errors++ == 0) {
        int k = snprintf(cc->first_error, sizeof cc->first_error, "rank %d: ", rank);
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cc->first_error + k, sizeof cc->first_error - (size_t)k, fmt, ap);
        va_end(ap);
    }
}

static void jitter(coll_case *cc, dev_device *d) {
    if (cc->shuffle) dev_sleep(d, (double)(twin_rand() % 1000) * 1e-6);
}

/* Launches through the device like engine code: host -> device, collective, device -> host. */
typedef struct rank_ctx {
    coll_case *cc;
    int rank;
    dev_device *d;
    dev_stream *s;
    void *h_in, *h_out, *h_ref;
    void *d_send, *d_recv;
} rank_ctx;

static void check_bytes(rank_ctx *x, const void *got, const void *want, size_t bytes, const char *what) {
    if (memcmp(got, want, bytes) != 0) note_fail(x->cc, x->rank, "%s differs from the serial reference", what);
}

static void world_all_reduce(rank_ctx *x, coll_comm *world) {
    const size_t C = x->cc->count;
    for (int di = 0; di < 3; di++)
        for (int oi = 0; oi < 4; oi++) {
            if (!wanted(x->cc, di, oi)) continue;
            const size_t bytes = C * tr_dtype_size(dts[di]);
            tt_fill(x->h_in, dts[di], x->rank, 0, C, di * 4 + oi);
            dev_copy_h2d(x->s, x->d_send, x->h_in, bytes);
            jitter(x->cc, x->d);
            if (coll_all_reduce(world, x->s, x->d_send, x->d_recv, C, dts[di], ops[oi]) != COLL_OK)
                note_fail(x->cc, x->rank, "all_reduce failed");
            dev_copy_d2h(x->s, x->h_out, x->d_recv, bytes);
            char what[64];
            snprintf(what, sizeof what, "all_reduce %s op %d", tr_dtype_name(dts[di]), oi);
            check_bytes(x, x->h_out, x->cc->ref[di][oi], bytes, what);
        }
    /* in place: send == recv */
    tt_fill(x->h_in, TR_F32, x->rank, 0, C, 0);
    dev_copy_h2d(x->s, x->d_recv, x->h_in, C * 4);
    if (coll_all_reduce(world, x->s, x->d_recv, x->d_recv, C, TR_F32, COLL_SUM) != COLL_OK)
        note_fail(x->cc, x->rank, "in-place all_reduce failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, C * 4);
    check_bytes(x, x->h_out, x->cc->ref[0][0], C * 4, "in-place all_reduce");
}

static void group_gather_scatter(rank_ctx *x, coll_comm *c, const int *members, int n, size_t g, int salt) {
    const int me = coll_comm_rank(c);
    /* all-gather: block r is member r's input */
    tt_fill(x->h_in, TR_F32, members[me], 0, g, salt);
    dev_copy_h2d(x->s, x->d_send, x->h_in, g * 4);
    jitter(x->cc, x->d);
    if (coll_all_gather(c, x->s, x->d_send, x->d_recv, g, TR_F32) != COLL_OK)
        note_fail(x->cc, x->rank, "all_gather failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, (size_t)n * g * 4);
    for (int r = 0; r < n; r++) tt_fill((float *)x->h_ref + (size_t)r * g, TR_F32, members[r], 0, g, salt);
    check_bytes(x, x->h_out, x->h_ref, (size_t)n * g * 4, "all_gather");
    /* reduce-scatter: this rank's block of the sum of everyone's n*g inputs */
    tt_fill(x->h_in, TR_BF16, members[me], 0, (size_t)n * g, salt + 1);
    dev_copy_h2d(x->s, x->d_send, x->h_in, (size_t)n * g * 2);
    jitter(x->cc, x->d);
    if (coll_reduce_scatter(c, x->s, x->d_send, x->d_recv, g, TR_BF16, COLL_SUM) != COLL_OK)
        note_fail(x->cc, x->rank, "reduce_scatter failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, g * 2);
    tt_reduce_ref(x->h_ref, TR_BF16, COLL_SUM, members, n, (size_t)me * g, g, salt + 1);
    check_bytes(x, x->h_out, x->h_ref, g * 2, "reduce_scatter");
    /* in place (the distributed optimizer's gradient shard): recv is this rank's block of send */
    char *own = (char *)x->d_send + (size_t)me * g * 2; /* [g] bf16 inside send [n*g] */
    dev_copy_h2d(x->s, x->d_send, x->h_in, (size_t)n * g * 2);
    jitter(x->cc, x->d);
    if (coll_reduce_scatter(c, x->s, x->d_send, own, g, TR_BF16, COLL_SUM) != COLL_OK)
        note_fail(x->cc, x->rank, "in-place reduce_scatter failed");
    dev_copy_d2h(x->s, x->h_out, own, g * 2);
    check_bytes(x, x->h_out, x->h_ref, g * 2, "in-place reduce_scatter");
    /* in-place all-gather: send is this rank's block of recv */
    float *mine = (float *)x->d_recv + (size_t)me * g; /* [g] fp32 inside recv [n*g] */
    tt_fill(x->h_in, TR_F32, members[me], 0, g, salt + 2);
    dev_copy_h2d(x->s, mine, x->h_in, g * 4);
    jitter(x->cc, x->d);
    if (coll_all_gather(c, x->s, mine, x->d_recv, g, TR_F32) != COLL_OK)
        note_fail(x->cc, x->rank, "in-place all_gather failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, (size_t)n * g * 4);
    for (int r = 0; r < n; r++) tt_fill((float *)x->h_ref + (size_t)r * g, TR_F32, members[r], 0, g, salt + 2);
    check_bytes(x, x->h_out, x->h_ref, (size_t)n * g * 4, "in-place all_gather");
}

static void broadcast_ring_barrier(rank_ctx *x, coll_comm *world) {
    const int n = x->cc->n, C = (int)x->cc->count, root = n - 1;
    if (x->rank == root) tt_fill(x->h_in, TR_F32, root, 0, (size_t)C, 21);
    else memset(x->h_in, 0, (size_t)C * 4);
    dev_copy_h2d(x->s, x->d_recv, x->h_in, (size_t)C * 4);
    jitter(x->cc, x->d);
    if (coll_broadcast(world, x->s, x->d_recv, (size_t)C, TR_F32, root) != COLL_OK)
        note_fail(x->cc, x->rank, "broadcast failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, (size_t)C * 4);
    tt_fill(x->h_ref, TR_F32, root, 0, (size_t)C, 21);
    check_bytes(x, x->h_out, x->h_ref, (size_t)C * 4, "broadcast");
    /* a ring of sends and receives posted together, as a pipeline stage does */
    const int next = (x->rank + 1) % n, prev = (x->rank + n - 1) % n;
    tt_fill(x->h_in, TR_F32, x->rank, 0, (size_t)C, 22);
    dev_copy_h2d(x->s, x->d_send, x->h_in, (size_t)C * 4);
    jitter(x->cc, x->d);
    coll_group_start();
    if (coll_send(world, x->s, x->d_send, (size_t)C, TR_F32, next) != COLL_OK) note_fail(x->cc, x->rank, "send failed");
    if (coll_recv(world, x->s, x->d_recv, (size_t)C, TR_F32, prev) != COLL_OK) note_fail(x->cc, x->rank, "recv failed");
    coll_group_end();
    dev_copy_d2h(x->s, x->h_out, x->d_recv, (size_t)C * 4);
    tt_fill(x->h_ref, TR_F32, prev, 0, (size_t)C, 22);
    check_bytes(x, x->h_out, x->h_ref, (size_t)C * 4, "ring send/recv");
    jitter(x->cc, x->d);
    if (coll_barrier(world, x->s) != COLL_OK) note_fail(x->cc, x->rank, "barrier failed");
}

static void tp_block(rank_ctx *x) {
    const int n = x->cc->n, t = n < 8 ? n : 8, first = x->rank / t * t;
    int members[8];
    tt_range(members, first, t, 1);
    char err[256];
    coll_comm *tp = coll_comm_create(x->d, members, t, x->rank, "tp", err, sizeof err);
    if (!tp) {
        note_fail(x->cc, x->rank, "tp: %s", err);
        return;
    }
    const size_t C = x->cc->count;
    tt_fill(x->h_in, TR_F32, x->rank, 0, C, 31);
    dev_copy_h2d(x->s, x->d_send, x->h_in, C * 4);
    jitter(x->cc, x->d);
    if (coll_all_reduce(tp, x->s, x->d_send, x->d_recv, C, TR_F32, COLL_MAX) != COLL_OK)
        note_fail(x->cc, x->rank, "tp all_reduce failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, C * 4);
    tt_reduce_ref(x->h_ref, TR_F32, COLL_MAX, members, t, 0, C, 31);
    check_bytes(x, x->h_out, x->h_ref, C * 4, "tp all_reduce");
    group_gather_scatter(x, tp, members, t, 3, 32);
    coll_comm_destroy(tp);
}

static void dp_strided(rank_ctx *x) {
    const int n = x->cc->n, size = n / 8;
    int *members = malloc(sizeof(int) * (size_t)size);
    tt_range(members, x->rank % 8, size, 8);
    char err[256];
    coll_comm *dp = coll_comm_create(x->d, members, size, x->rank, "dp", err, sizeof err);
    if (!dp) note_fail(x->cc, x->rank, "dp: %s", err);
    else group_gather_scatter(x, dp, members, size, 2, 41);
    coll_comm_destroy(dp);
    free(members);
}

static int entry(int rank, void *arg) {
    coll_case *cc = arg;
    const int n = cc->n;
    char err[256];
    rank_ctx x = {.cc = cc, .rank = rank};
    x.d = dev_open(0, 0, err, sizeof err);
    if (!x.d) {
        note_fail(cc, rank, "dev_open: %s", err);
        return 1;
    }
    x.s = dev_stream_default(x.d);
    /* buffers as large as the biggest call needs: world gathers, tp blocks of 8 x 3, dp groups */
    size_t big = cc->count > 24 ? cc->count : 24;
    if (cc->gcount && (size_t)n * cc->gcount > big) big = (size_t)n * cc->gcount;
    if (n >= 16 && n <= 1024 && (size_t)n / 8 * 2 > big) big = (size_t)n / 8 * 2;
    x.h_in = malloc(big * 4);
    x.h_out = malloc(big * 4);
    x.h_ref = malloc(big * 4);
    x.d_send = dev_alloc(x.d, big * 4, "send");
    x.d_recv = dev_alloc(x.d, big * 4, "recv");
    int *all = malloc(sizeof(int) * (size_t)n);
    tt_range(all, 0, n, 1);
    coll_comm *world = coll_comm_create(x.d, all, n, rank, "world", err, sizeof err);
    if (!world) note_fail(cc, rank, "world: %s", err);
    else {
        world_all_reduce(&x, world);
        if (cc->gcount) group_gather_scatter(&x, world, all, n, cc->gcount, 11);
        broadcast_ring_barrier(&x, world);
        tp_block(&x);
        if (n >= 16 && n <= 1024) dp_strided(&x);
        if (coll_comm_size(world) != n || coll_comm_rank(world) != rank || strcmp(coll_comm_name(world), "world"))
            note_fail(cc, rank, "communicator accessors");
        coll_comm_destroy(world);
    }
    free(all);
    dev_free(x.d, x.d_send);
    dev_free(x.d, x.d_recv);
    free(x.h_in);
    free(x.h_out);
    free(x.h_ref);
    dev_close(x.d);
    return 0;
}

static void run_case(int n, size_t count, size_t gcount, bool full, bool shuffle, uint64_t seed) {
    coll_case cc = {.n = n, .count = count, .gcount = gcount, .full = full, .shuffle = shuffle};
    int *all = malloc(sizeof(int) * (size_t)n);
    tt_range(all, 0, n, 1);
    for (int di = 0; di < 3; di++)
        for (int oi = 0; oi < 4; oi++) {
            if (!wanted(&cc, di, oi)) continue;
            cc.ref[di][oi] = malloc(count * 4);
            tt_reduce_ref(cc.ref[di][oi], dts[di], ops[oi], all, n, 0, count, di * 4 + oi);
        }
    twin_options o;
    twin_options_default(&o);
    o.seed = seed;
    o.stack_bytes = n >= 4096 ? 32 * 1024 : 256 * 1024; /* small stacks keep 8192 ranks cheap under memcheck */
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(n, entry, &cc, &o, &res, err, sizeof err), 0);
    if (cc.errors) fail_msg("%d problems; first: %s", cc.errors, cc.first_error);
    assert_false(res.hang);
    for (int r = 0; r < n; r++) {
        assert_int_equal(res.rank_end[r], TWIN_RANK_EXITED);
        assert_int_equal(res.exit_codes[r], 0);
    }
    assert_true(res.end_time > 0); /* collectives cost simulated time */
    twin_result_free(&res);
    for (int di = 0; di < 3; di++)
        for (int oi = 0; oi < 4; oi++) free(cc.ref[di][oi]);
    free(all);
}

static void test_2_ranks(void **state) {
    (void)state;
    run_case(2, 37, 5, true, false, 1);
}
static void test_8_ranks(void **state) {
    (void)state;
    run_case(8, 64, 4, true, false, 1);
}
static void test_64_ranks(void **state) {
    (void)state;
    run_case(64, 64, 4, true, false, 1);
}
static void test_1024_ranks(void **state) {
    (void)state;
    run_case(1024, 16, 2, true, false, 1);
}
static void test_8192_ranks(void **state) {
    (void)state;
    /* under memcheck (ci/memcheck.py sets the variable) this case alone took 4 minutes, the whole
     * stage's longest test; the 1024-rank case runs the same code there */
    const char *vg = getenv("TWINRUN_UNDER_VALGRIND");
    if (vg && strcmp(vg, "1") == 0) skip();
    run_case(8192, 4, 0, false, false, 1);
}

/* Seeded delays reorder arrivals; the bits must not change. */
static void test_arrival_order_does_not_matter(void **state) {
    (void)state;
    for (uint64_t seed = 1; seed <= 3; seed++) run_case(64, 33, 3, true, true, seed);
}

/* Outside twin_run the implicit rank 0 runs one-rank communicators (what train_llama3 does). */
static void test_implicit_single_rank(void **state) {
    (void)state;
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    assert_non_null(d);
    dev_stream *s = dev_stream_default(d);
    const int one[1] = {0}, two[2] = {0, 1};
    assert_null(coll_comm_create(d, two, 2, 0, "world", err, sizeof err));
    assert_non_null(strstr(err, "twin_run"));
    coll_comm *c = coll_comm_create(d, one, 1, 0, "world", err, sizeof err);
    assert_non_null(c);
    float *buf = dev_alloc(d, 16, "buf"), *out = dev_alloc(d, 16, "out"), h[4] = {1, 2, 3, 4}, g[4];
    dev_copy_h2d(s, buf, h, 16);
    assert_int_equal(coll_all_reduce(c, s, buf, out, 4, TR_F32, COLL_AVG), COLL_OK);
    dev_copy_d2h(s, g, out, 16);
    for (int i = 0; i < 4; i++) assert_true(g[i] == h[i] * (float)(1.0 / 1));
    assert_int_equal(coll_broadcast(c, s, buf, 4, TR_F32, 0), COLL_OK);
    assert_int_equal(coll_barrier(c, s), COLL_OK);
    assert_false(twin_active());
    assert_int_equal(twin_world_size(), 1);
    coll_abort(c);
    assert_int_equal(coll_barrier(c, s), COLL_ABORTED);
    coll_comm_destroy(c);
    dev_free(d, buf);
    dev_free(d, out);
    dev_close(d);
}

int main(int argc, char **argv) {
    if (argc > 1) cmocka_set_test_filter(argv[1]); /* e.g. test_twin_coll '*8192*' */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_implicit_single_rank),
        cmocka_unit_test(test_2_ranks),
        cmocka_unit_test(test_8_ranks),
        cmocka_unit_test(test_64_ranks),
        cmocka_unit_test(test_1024_ranks),
        cmocka_unit_test(test_8192_ranks),
        cmocka_unit_test(test_arrival_order_does_not_matter),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
