/* The scheduler: option checks, (time, rank) order, clocks synchronised at collectives, the
 * cost model's formulas, device memory capacity and OOM messages, mismatched calls, replay by
 * seed (byte-identical event logs) and the stack guard page. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_coll.h"
#include "twin.h"
#include "twin_cost.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"

static int noop(int rank, void *arg) {
    (void)arg;
    return rank;
}

static int nested(int rank, void *arg) {
    (void)rank;
    char *err = arg;
    twin_result res;
    return twin_run(2, noop, NULL, NULL, &res, err, 256) == -1 ? 0 : 1;
}

static void test_options_are_checked(void **state) {
    (void)state;
    twin_options o;
    twin_result res;
    char err[256];
    twin_options_default(&o);
    o.device = "B200";
    assert_int_equal(twin_run(2, noop, NULL, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "unknown device 'B200'; known: H100, H200, A100, MTT-S5000, H100-cal"));
    twin_options_default(&o);
    assert_int_equal(twin_run(0, noop, NULL, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "0 ranks"));
    o.cost_jitter = 2;
    assert_int_equal(twin_run(2, noop, NULL, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "cost_jitter"));
    twin_options_default(&o);
    o.stack_bytes = 100;
    assert_int_equal(twin_run(2, noop, NULL, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "stack_bytes"));
    /* defaults (opt NULL), exit codes, nesting refused */
    assert_int_equal(twin_run(3, noop, NULL, NULL, &res, err, sizeof err), 0);
    for (int r = 0; r < 3; r++) assert_int_equal(res.exit_codes[r], r);
    twin_result_free(&res);
    char inner[256] = "";
    assert_int_equal(twin_run(1, nested, inner, NULL, &res, err, sizeof err), 0);
    assert_int_equal(res.exit_codes[0], 0);
    assert_non_null(strstr(inner, "inside a running twin"));
    twin_result_free(&res);
}

/* ---- order ------------------------------------------------------------------------------ */
typedef struct order_case {
    int n, next, order[64];
    double when[64];
} order_case;

static double wake_time(int rank) { return (double)((rank * 7) % 5); }

static int sleeper(int rank, void *arg) {
    order_case *oc = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    if (twin_rank_id() != rank || twin_world_size() != oc->n || !twin_active()) return 1;
    dev_sleep(d, wake_time(rank));
    oc->when[oc->next] = dev_clock_now(d);
    oc->order[oc->next++] = rank;
    dev_close(d);
    return 0;
}

static void test_next_is_smallest_time_then_rank(void **state) {
    (void)state;
    order_case oc = {.n = 40};
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(oc.n, sleeper, &oc, NULL, &res, err, sizeof err), 0);
    assert_int_equal(oc.next, oc.n);
    /* serial expectation: sort ranks by (wake time, rank) */
    int k = 0;
    for (int t = 0; t < 5; t++)
        for (int r = 0; r < oc.n; r++)
            if (wake_time(r) == t) {
                assert_int_equal(oc.order[k], r);
                assert_true(oc.when[k] == (double)t);
                k++;
            }
    assert_true(res.end_time == 4.0);
    twin_result_free(&res);
}

/* ---- clocks at a collective ----------------------------------------------------------- */
static int barrier_after_sleep(int rank, void *arg) {
    double *after = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    int ranks[16];
    tt_range(ranks, 0, 16, 1);
    coll_comm *c = coll_comm_create(d, ranks, 16, rank, "world", err, sizeof err);
    dev_sleep(d, rank * 0.25);
    float *buf = dev_alloc(d, 1 << 20, "buf");
    coll_status st = coll_all_reduce(c, dev_stream_default(d), buf, buf, (1 << 20) / 4, TR_F32, COLL_SUM);
    after[rank] = dev_clock_now(d);
    dev_free(d, buf);
    coll_comm_destroy(c);
    dev_close(d);
    return st;
}

static void test_clocks_meet_at_collectives(void **state) {
    (void)state;
    double after[16];
    twin_options o;
    twin_options_default(&o);
    o.device = "H200";
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(16, barrier_after_sleep, after, &o, &res, err, sizeof err), 0);
    /* 16 ranks span two nodes of 8: inter-node alpha and beta; start = the last arrival, 3.75 s */
    const twin_device_spec *h200 = twin_device_spec_find("h200");
    const double S = 1 << 20, a = h200->net_latency, b = h200->net_bandwidth;
    const double ring = 2 * 15 * a + 2.0 * 15 / 16 * S / b, tree = 2 * 4 * a + 2 * S / b;
    const double want = 3.75 + (ring < tree ? ring : tree);
    for (int r = 0; r < 16; r++) {
        assert_int_equal(res.exit_codes[r], 0);
        assert_true(after[r] == want);
    }
    twin_result_free(&res);
}

static void test_cost_model_formulas(void **state) {
    (void)state;
    /* the four datasheet specs and the H100 with the H200's calibration (docs/prediction.md) */
    static const char *const names[] = {"H100", "H200", "A100", "MTT-S5000", "H100-cal"};
    assert_int_equal(twin_device_spec_count(), 5);
    for (int i = 0; i < 5; i++) assert_non_null(twin_device_spec_find(names[i]));
    for (int i = 0; i < twin_device_spec_count(); i++) {
        const twin_device_spec *s = twin_device_spec_at(i);
        assert_true(s->bf16_flops > 0 && s->fp32_flops > 0 && s->mem_bandwidth > 0 && s->mem_bytes > 0);
        assert_true(s->link_bandwidth > s->net_bandwidth);
        assert_true(strlen(s->source) > 20);
    }
    assert_ptr_equal(twin_device_spec_find("s5000"), twin_device_spec_find("MTT-S5000"));
    assert_null(twin_device_spec_find("V100"));
    const twin_device_spec *h100 = twin_device_spec_find("H100");
    /* compute-bound bf16 and memory-bound fp32 rooflines */
    assert_true(twin_kernel_seconds(h100, 1e15, 1e6, TR_BF16) == 4e-6 + 1e15 / 989.5e12);
    assert_true(twin_kernel_seconds(h100, 1e6, 3.35e12, TR_F32) == 4e-6 + 1.0);
    /* within one node: NVLink; one rank: free; p2p: alpha + S / beta */
    int node[8], pair[2] = {3, 12};
    tt_range(node, 0, 8, 1);
    const double S = 64e6;
    const double ring = 2 * 7 * 1e-6 + 2.0 * 7 / 8 * S / 450e9, tree = 2 * 3 * 1e-6 + 2 * S / 450e9;
    assert_true(twin_coll_seconds(h100, 8, TWIN_COST_ALL_REDUCE, node, 8, S) == (ring < tree ? ring : tree));
    assert_true(twin_coll_seconds(h100, 8, TWIN_COST_ALL_GATHER, node, 8, S) == 7 * 1e-6 + 7 * S / 450e9);
    assert_true(twin_coll_seconds(h100, 8, TWIN_COST_ALL_REDUCE, node, 1, S) == 0.0);
    assert_true(twin_coll_seconds(h100, 8, TWIN_COST_P2P, pair, 2, S) == 5e-6 + S / 50e9);
    assert_true(twin_coll_seconds(h100, 16, TWIN_COST_P2P, pair, 2, S) == 1e-6 + S / 450e9);
}

static int kernel_cost(int rank, void *arg) {
    (void)rank;
    double *t = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    twin_cost_kernel(dev_stream_default(d), &(twin_kernel_cost){.kind = TWIN_K_GEMM, .flops = 2e12, .dt = TR_BF16});
    *t = dev_clock_now(d);
    dev_close(d);
    return 0;
}

static void test_kernel_cost_hook_advances_the_clock(void **state) {
    (void)state;
    double t = 0;
    twin_options o;
    twin_options_default(&o);
    o.device = "A100";
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(1, kernel_cost, &t, &o, &res, err, sizeof err), 0);
    assert_true(t == 4e-6 + 2e12 / 312e12);
    twin_result_free(&res);
}

/* ---- device memory ---------------------------------------------------------------------- */
typedef struct mem_case {
    size_t capacity_seen;
    char oom[256];
    void *second;
} mem_case;

static int allocate_twice(int rank, void *arg) {
    mem_case *mc = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_info info;
    dev_get_info(d, &info);
    void *a = dev_alloc(d, 614400, "activations");
    void *b = dev_alloc(d, 614400, "activations");
    if (rank == 3) {
        mc->capacity_seen = info.capacity;
        mc->second = b;
        snprintf(mc->oom, sizeof mc->oom, "%s", dev_last_error(d));
    }
    if (dev_mem_peak(d) != 614400) return 1;
    dev_free(d, a);
    dev_free(d, b);
    dev_close(d);
    return 0;
}

static void test_capacity_and_oom_message(void **state) {
    (void)state;
    twin_options o;
    twin_options_default(&o);
    o.device_capacity = 1 << 20;
    mem_case mc = {0};
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(4, allocate_twice, &mc, &o, &res, err, sizeof err), 0);
    assert_int_equal(mc.capacity_seen, 1 << 20);
    assert_null(mc.second);
    assert_string_equal(mc.oom, "rank 3: out of device memory allocating 614400 bytes for activations: "
                                "614400 of 1048576 bytes in use (peak 614400)");
    for (int r = 0; r < 4; r++) assert_int_equal(res.exit_codes[r], 0);
    twin_result_free(&res);
    /* capacity from the spec, scaled: H100's 80 GiB x 1e-5 */
    twin_options_default(&o);
    o.capacity_scale = 1e-5;
    assert_int_equal(twin_run(4, allocate_twice, &mc, &o, &res, err, sizeof err), 0);
    assert_int_equal(mc.capacity_seen, (size_t)((double)(80ull << 30) * 1e-5));
    assert_null(mc.second); /* 858993 bytes hold one 614400-byte allocation but not two */
    assert_non_null(strstr(mc.oom, "of 858993 bytes in use"));
    twin_result_free(&res);
}

/* ---- mismatched calls ------------------------------------------------------------------- */
typedef struct mismatch_case {
    int culprit, kind;
} mismatch_case;

static int mismatching(int rank, void *arg) {
    mismatch_case *mc = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *s = dev_stream_default(d);
    int ranks[4] = {0, 1, 2, 3};
    coll_comm *c = coll_comm_create(d, ranks, 4, rank, "world", err, sizeof err);
    float *buf = dev_alloc(d, 4 * 32, "buf");
    coll_status st = coll_all_reduce(c, s, buf, buf, 8, TR_F32, COLL_SUM);
    if (mc->kind == 3) {
        /* p2p: rank 0 sends 4 elements to the culprit, which receives 6 */
        if (rank == 0) st = coll_send(c, s, buf, 4, TR_F32, mc->culprit);
        if (rank == mc->culprit) {
            coll_group_start();
            coll_recv(c, s, buf, 6, TR_F32, 0);
            coll_group_end();
        }
    } else if (rank != mc->culprit) st = coll_all_reduce(c, s, buf, buf, 4, TR_F32, COLL_SUM);
    else if (mc->kind == 0) st = coll_all_reduce(c, s, buf, buf, 8, TR_F32, COLL_SUM);
    else if (mc->kind == 1) st = coll_all_gather(c, s, buf + 4 * rank, buf, 4, TR_F32); /* in place: its own block */
    else st = coll_all_reduce(c, s, buf, buf, 4, TR_BF16, COLL_MAX);
    dev_free(d, buf);
    coll_comm_destroy(c);
    dev_close(d);
    return st;
}

static void expect_mismatch(int kind, const char *mine, const char *theirs) {
    mismatch_case mc = {.culprit = 2, .kind = kind};
    twin_options o;
    twin_options_default(&o);
    o.quiet = true;
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(4, mismatching, &mc, &o, &res, err, sizeof err), 0);
    if (!strstr(res.report, mine) || !strstr(res.report, theirs))
        fail_msg("report lacks '%s' / '%s':\n%s", mine, theirs, res.report);
    assert_int_equal(res.rank_end[2], TWIN_RANK_FAILED);
    assert_int_equal(res.blamed_rank, 2);
    twin_result_free(&res);
}

static void test_mismatches_report_both_sides(void **state) {
    (void)state;
    expect_mismatch(0, "mismatch on comm 'world'",
                    "seq 1: rank 2 called all_reduce(count=8, fp32, sum) but rank 0 "
                    "called all_reduce(count=4, fp32, sum)");
    expect_mismatch(1, "rank 2 called all_gather(count=4, fp32)", "rank 0 called all_reduce(count=4, fp32, sum)");
    expect_mismatch(2, "rank 2 called all_reduce(count=4, bf16, max)", "rank 0 called all_reduce(count=4, fp32, sum)");
    expect_mismatch(3, "p2p seq 0: rank 2 called recv(count=6, fp32, peer 0)",
                    "but rank 0 called send(count=4, fp32, peer 2)");
}

/* ---- replay by seed ---------------------------------------------------------------------- */
static int busy(int rank, void *arg) {
    (void)arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *s = dev_stream_default(d);
    int ranks[64], tp[8];
    tt_range(ranks, 0, 64, 1);
    tt_range(tp, rank / 8 * 8, 8, 1);
    coll_comm *w = coll_comm_create(d, ranks, 64, rank, "world", err, sizeof err);
    coll_comm *t = coll_comm_create(d, tp, 8, rank, "tp", err, sizeof err);
    float *buf = dev_alloc(d, 64 * 4, "buf");
    float host[64];
    tt_fill(host, TR_F32, rank, 0, 64, 5);
    dev_copy_h2d(s, buf, host, sizeof host);
    for (int i = 0; i < 6; i++) {
        dev_sleep(d, (double)(twin_rand() % 1000) * 1e-6);
        coll_all_reduce(i % 2 ? w : t, s, buf, buf, 64, TR_F32, i % 3 == 2 ? COLL_AVG : COLL_SUM);
    }
    dev_free(d, buf);
    coll_comm_destroy(t);
    coll_comm_destroy(w);
    dev_close(d);
    return 0;
}

static char *event_log(uint64_t seed, size_t *len) {
    char *text = NULL;
    FILE *f = open_memstream(&text, len);
    twin_options o;
    twin_options_default(&o);
    o.seed = seed;
    o.cost_jitter = 0.5;
    o.event_log = f;
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(64, busy, NULL, &o, &res, err, sizeof err), 0);
    twin_result_free(&res);
    fclose(f);
    return text;
}

/* The "done" lines without their times, sorted: which collective produced which result bits. */
static int cmp_str(const void *x, const void *y) { return strcmp(*(char *const *)x, *(char *const *)y); }

static char *done_lines(const char *log) {
    size_t n = 0, cap = 0, total = 1;
    char **lines = NULL;
    for (const char *p = log; (p = strstr(p, " done ")); p++) {
        const char *end = strchr(p, '\n');
        if (n == cap) lines = realloc(lines, sizeof *lines * (cap = cap ? 2 * cap : 64));
        lines[n] = strndup(p, (size_t)(end - p) + 1);
        total += strlen(lines[n++]);
    }
    qsort(lines, n, sizeof *lines, cmp_str);
    char *out = calloc(total, 1);
    for (size_t i = 0; i < n; i++) {
        strcat(out, lines[i]);
        free(lines[i]);
    }
    free(lines);
    return out;
}

static void test_same_seed_same_event_log(void **state) {
    (void)state;
    size_t la, lb, lc;
    char *a = event_log(7, &la), *b = event_log(7, &lb), *c = event_log(8, &lc);
    assert_true(la > 10000);
    assert_int_equal(la, lb);
    assert_memory_equal(a, b, la);
    assert_true(la != lc || memcmp(a, c, la) != 0); /* another seed: other delays, other order */
    /* yet every collective produced the same bits: 8 tp groups x 3 + world x 3 */
    char *da = done_lines(a), *dc = done_lines(c);
    assert_int_equal(strlen(da) > 0, 1);
    assert_string_equal(da, dc);
    assert_non_null(strstr(da, " done world "));
    free(da);
    free(dc);
    free(a);
    free(b);
    free(c);
}

/* ---- stack guard --------------------------------------------------------------------------- */
static int recurse(int depth) {
    volatile char pad[1024];
    pad[0] = (char)depth;
    return depth > 1000000 ? pad[0] : recurse(depth + 1) + pad[0];
}

static int overflow(int rank, void *arg) {
    (void)rank, (void)arg;
    return recurse(0);
}

static void test_stack_overflow_hits_the_guard_page(void **state) {
    (void)state;
    if (RUNNING_ON_VALGRIND) skip();
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        twin_options o;
        twin_options_default(&o);
        o.stack_bytes = 64 * 1024;
        twin_result res;
        char err[256];
        twin_run(1, overflow, NULL, &o, &res, err, sizeof err);
        _exit(0); /* not reached: the guard page faults first */
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGSEGV);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_options_are_checked),
        cmocka_unit_test(test_next_is_smallest_time_then_rank),
        cmocka_unit_test(test_clocks_meet_at_collectives),
        cmocka_unit_test(test_cost_model_formulas),
        cmocka_unit_test(test_kernel_cost_hook_advances_the_clock),
        cmocka_unit_test(test_capacity_and_oom_message),
        cmocka_unit_test(test_mismatches_report_both_sides),
        cmocka_unit_test(test_same_seed_same_event_log),
        cmocka_unit_test(test_stack_overflow_hits_the_guard_page),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
