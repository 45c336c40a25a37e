/* The Perfetto trace of the simulated timeline: a small run with waits, grouped send/recv and a
 * hung rank is written, parsed back, and checked span by span; tracing leaves the run's results
 * bit-identical; the recorder's bounds (rank lists, dropped events, nesting) hold. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_coll.h"
#include "trace/trace.h"
#include "twin.h"
#include "twin_cost.h"
#include "twinrun/dev.h"

#define NRANKS 4
#define ROUNDS 4
#define HUNG_RANK 3
#define HANG_ROUND 2

typedef struct run_case {
    int problems; /* counted inside ranks: cmocka must not longjmp across coroutine stacks */
} run_case;

static int entry(int rank, void *arg) {
    run_case *rc = arg;
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    if (!d) return 10;
    dev_stream *s = dev_stream_default(d);
    int all[NRANKS], pair[2];
    tt_range(all, 0, NRANKS, 1);
    tt_range(pair, rank / 2 * 2, 2, 1);
    coll_comm *world = coll_comm_create(d, all, NRANKS, rank, "world", err, sizeof err);
    coll_comm *node = coll_comm_create(d, pair, 2, rank, "node", err, sizeof err);
    float *buf = dev_alloc(d, 64, "buf"), *peer = dev_alloc(d, 64, "peer");
    if (!world || !node || !buf || !peer) return 11;
    dev_memset_zero(s, buf, 64);
    coll_status st = COLL_OK;
    for (int round = 0; round < ROUNDS && st == COLL_OK; round++) {
        for (int k = 0; k < 3; k++)
            twin_cost_kernel(s, &(twin_kernel_cost){.kind = TWIN_K_GEMM,
                                                    .flops = 1e9 * (rank + 1),
                                                    .bytes = 1e6,
                                                    .dt = TR_BF16}); /* one compute span */
        dev_sleep(d, 0.01 * (rank + 1)); /* ranks arrive at different times: the early ones wait */
        if (rank == HUNG_RANK && round == HANG_ROUND) twin_hang_forever();
        st = coll_all_reduce(world, s, buf, buf, 16, TR_F32, COLL_SUM);
        if (st != COLL_OK) break;
        coll_group_start(); /* a send and a receive launched together, as a pipeline stage does */
        coll_send(node, s, buf, 8, TR_F32, 1 - rank % 2);
        coll_recv(node, s, peer, 8, TR_F32, 1 - rank % 2);
        coll_group_end();
    }
    if (st == COLL_OK) rc->problems++; /* everyone must have been stopped by the hang */
    dev_free(d, buf);
    dev_free(d, peer);
    coll_comm_destroy(node);
    coll_comm_destroy(world);
    dev_close(d);
    return st == COLL_TIMEOUT ? 4 : 3;
}

static void run(const char *trace_path, const char *trace_ranks, twin_result *res) {
    twin_options o;
    twin_options_default(&o);
    o.stack_bytes = 64 * 1024;
    o.gpus_per_node = 2;
    o.watchdog_timeout_s = 5.0;
    o.quiet = true;
    o.trace_path = trace_path;
    o.trace_ranks = trace_ranks;
    run_case rc = {0};
    char err[256];
    assert_int_equal(twin_run(NRANKS, entry, &rc, &o, res, err, sizeof err), 0);
    assert_int_equal(rc.problems, 0);
}

static cJSON *load_trace(const char *path) {
    char *text = fx_read_file(path, NULL);
    assert_non_null(text);
    cJSON *root = cJSON_Parse(text);
    free(text);
    assert_non_null(root);
    assert_true(cJSON_IsArray(cJSON_GetObjectItem(root, "traceEvents")));
    assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(root, "displayTimeUnit")), "ms");
    return root;
}

static const char *str_of(const cJSON *e, const char *key) { return cJSON_GetStringValue(cJSON_GetObjectItem(e, key)); }
static double num_of(const cJSON *e, const char *key) {
    const cJSON *v = cJSON_GetObjectItem(e, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void test_trace_of_a_hang(void **state) {
    (void)state;
    char path[128];
    assert_int_equal(fx_tmppath(path, sizeof path, "trace_hang.json"), 0);
    twin_result plain, traced;
    run(NULL, NULL, &plain);
    run(path, NULL, &traced);

    /* tracing changes nothing the run computes */
    assert_true(plain.end_time == traced.end_time);
    assert_int_equal(plain.switches, traced.switches);
    assert_int_equal(plain.watchdog_rank, traced.watchdog_rank);
    assert_int_equal(plain.blamed_rank, HUNG_RANK);
    assert_int_equal(traced.blamed_rank, HUNG_RANK);
    assert_string_equal(plain.report, traced.report);
    for (int r = 0; r < NRANKS; r++) {
        assert_int_equal(plain.exit_codes[r], traced.exit_codes[r]);
        assert_int_equal(plain.rank_end[r], traced.rank_end[r]);
    }
    assert_int_equal(traced.rank_end[HUNG_RANK], TWIN_RANK_KILLED);

    cJSON *root = load_trace(path);
    const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
    bool named[NRANKS] = {0};
    double last_ts[NRANKS];
    int colls[NRANKS] = {0}, waits[NRANKS] = {0}, computes[NRANKS] = {0}, sleeps[NRANKS] = {0};
    int watchdogs = 0, hangs = 0, killed = 0, nodes = 0;
    for (int r = 0; r < NRANKS; r++) last_ts[r] = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const char *ph = str_of(e, "ph"), *name = str_of(e, "name");
        assert_non_null(ph);
        assert_non_null(name);
        const int pid = (int)num_of(e, "pid"), tid = (int)num_of(e, "tid"), rank = tid - 1;
        assert_true(rank >= 0 && rank < NRANKS);
        assert_int_equal(pid, rank / 2 + 1); /* node + 1: Perfetto reserves pid 0 */
        if (!strcmp(ph, "M")) {
            const char *arg = str_of(cJSON_GetObjectItem(e, "args"), "name");
            if (!strcmp(name, "thread_name")) {
                char want[64];
                snprintf(want, sizeof want, "rank %d (node %d, gpu %d)", rank, rank / 2, rank % 2);
                assert_string_equal(arg, want);
                named[rank] = true;
            } else if (!strcmp(name, "process_name")) {
                nodes++;
            }
            continue;
        }
        const double ts = num_of(e, "ts");
        if (!strcmp(ph, "X")) {
            const double dur = num_of(e, "dur");
            assert_true(dur >= 0);
            assert_true(ts >= last_ts[rank]); /* written in time order per rank */
            last_ts[rank] = ts;
            const char *cat = str_of(e, "cat");
            const cJSON *args = cJSON_GetObjectItem(e, "args");
            if (!strcmp(cat, "coll")) {
                colls[rank]++;
                if (!strncmp(name, "world all_reduce #", 18)) {
                    assert_int_equal((int)num_of(args, "count"), 16);
                    assert_string_equal(str_of(args, "dtype"), "fp32");
                    assert_string_equal(str_of(args, "redop"), "sum");
                    const char *st = str_of(args, "status");
                    const int seq = atoi(name + 18);
                    assert_true(seq >= 0 && seq <= HANG_ROUND);
                    assert_string_equal(st, seq < HANG_ROUND               ? "ok"
                                            : rank == traced.watchdog_rank ? "timeout"
                                                                           : "aborted");
                    if (seq == HANG_ROUND && rank == traced.watchdog_rank) assert_true(fabs(dur - 5e6) < 1e-2);
                    /* rank 3 arrives last at every completed all-reduce: the others wait for it */
                    if (seq < HANG_ROUND) assert_true((num_of(args, "wait_us") > 0) == (rank != NRANKS - 1));
                } else {
                    assert_true(!strncmp(name, "node send #", 11) || !strncmp(name, "node recv #", 11));
                    assert_int_equal((int)num_of(args, "peer"), 1 - rank % 2);
                }
            } else if (!strcmp(cat, "wait")) {
                waits[rank]++;
            } else if (!strcmp(cat, "compute")) {
                computes[rank]++;
                assert_int_equal((int)num_of(args, "kernels"), 3);
            } else if (!strcmp(cat, "sleep")) {
                sleeps[rank]++;
            } else {
                assert_string_equal(name, "hung (twin_hang_forever)");
                assert_int_equal(rank, HUNG_RANK);
            }
        } else {
            assert_string_equal(ph, "i");
            if (!strncmp(name, "watchdog: rank ", 15)) {
                watchdogs++;
                assert_string_equal(str_of(e, "s"), "g");
                assert_int_equal(atoi(name + 15), traced.watchdog_rank);
                assert_true(ts >= 5e6);
            } else if (!strcmp(name, "hang")) {
                hangs++;
                assert_int_equal(rank, HUNG_RANK);
            } else if (!strcmp(name, "killed")) {
                killed++;
                assert_int_equal(rank, HUNG_RANK);
            } else {
                assert_true(!strncmp(name, "exit ", 5));
            }
        }
    }
    assert_int_equal(nodes, 2);
    assert_int_equal(watchdogs, 1);
    assert_int_equal(hangs, 1);
    assert_int_equal(killed, 1);
    for (int r = 0; r < NRANKS; r++) {
        assert_true(named[r]);
        /* two rounds of (all-reduce, send, recv) completed, then the hung round's all-reduce */
        assert_int_equal(colls[r], r == HUNG_RANK ? 6 : 7);
        assert_int_equal(computes[r], HANG_ROUND + 1);
        assert_int_equal(sleeps[r], HANG_ROUND + 1);
    }
    assert_true(waits[0] >= HANG_ROUND + 1); /* a nested "wait for peers" under every all-reduce of rank 0 */
    cJSON_Delete(root);
    unlink(path);
    twin_result_free(&plain);
    twin_result_free(&traced);
}

/* trace_ranks picks the threads; a bad list or path is an option error before anything runs. */
static void test_trace_ranks_and_errors(void **state) {
    (void)state;
    char path[128];
    assert_int_equal(fx_tmppath(path, sizeof path, "trace_ranks.json"), 0);
    twin_result res;
    run(path, "1,3", &res);
    twin_result_free(&res);
    cJSON *root = load_trace(path);
    int threads = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        const int tid = (int)num_of(e, "tid");
        if (!strcmp(str_of(e, "ph"), "X")) assert_true(tid == 2 || tid == 4);
        if (!strcmp(str_of(e, "name"), "thread_name")) threads++;
    }
    assert_int_equal(threads, 2);
    assert_string_equal(str_of(cJSON_GetObjectItem(root, "otherData"), "traced_ranks"), "1,3");
    cJSON_Delete(root);
    unlink(path);

    twin_options o;
    twin_options_default(&o);
    o.trace_path = path;
    o.trace_ranks = "2,9";
    run_case rc = {0};
    char err[256];
    assert_int_equal(twin_run(NRANKS, entry, &rc, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "trace_ranks '2,9': rank 9 outside the world of 4"));
    twin_result_free(&res);
    o.trace_ranks = NULL;
    o.trace_path = "/nonexistent-dir/trace.json";
    assert_int_equal(twin_run(NRANKS, entry, &rc, &o, &res, err, sizeof err), -1);
    assert_non_null(strstr(err, "cannot write trace_path '/nonexistent-dir/trace.json'"));
    twin_result_free(&res);
}

static char *write_to_string(twin_trace *t, double end) {
    FILE *f = tmpfile();
    assert_non_null(f);
    char err[256];
    assert_int_equal(twin_trace_write(t, f, end, err, sizeof err), 0);
    long n = ftell(f);
    rewind(f);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* Each of 1024 traced ranks keeps its newest 195 spans; the file says how many went. */
static void test_dropped_events_are_counted(void **state) {
    (void)state;
    twin_trace *t;
    char err[256];
    assert_int_equal(twin_trace_create("0-1023", 1024, 8, "H100", &t, err, sizeof err), 0);
    twin_trace_rank *r = twin_trace_rank_of(t, 5);
    assert_non_null(r);
    assert_null(twin_trace_rank_of(t, 1024));
    const int per_rank = TWIN_TRACE_MAX_EVENTS / 1024;
    for (int i = 0; i < per_rank + 10; i++) twin_trace_sleep(r, i, i + 0.5);
    char *json = write_to_string(t, 1000);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    assert_int_equal((int)num_of(cJSON_GetObjectItem(root, "otherData"), "dropped_events"), 10);
    int sleeps = 0, notes = 0;
    double first = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        if (!strcmp(str_of(e, "name"), "sleep")) {
            if (first < 0) first = num_of(e, "ts");
            sleeps++;
        }
        if (strstr(str_of(e, "name"), "10 events dropped")) notes++;
    }
    assert_int_equal(sleeps, per_rank);
    assert_true(first == 10e6); /* the oldest went */
    assert_int_equal(notes, 1);
    cJSON_Delete(root);
    free(json);
    twin_trace_free(t);
}

/* What the ring drops is summarized, not lost: a rank of 1024 runs 6000 spans (sleeps and
 * collectives with a wait before their data moves) with a 600 s quiet stretch in the middle; its
 * "twinrun_dropped" intervals are at most 128, ascending, start at its first span, keep the quiet
 * stretch a gap, and with the kept spans account for all of its busy and waiting time. */
static void test_dropped_spans_are_summarized(void **state) {
    (void)state;
    twin_trace *t;
    char err[256];
    assert_int_equal(twin_trace_create("0-1023", 1024, 8, "H100", &t, err, sizeof err), 0);
    twin_trace_rank *r = twin_trace_rank_of(t, 7);
    assert_non_null(r);
    double now = 0, busy = 0, wait = 0, gap0 = 0, gap1 = 0;
    for (int i = 0; i < 6000; i++) {
        if (i == 3000) gap0 = now, now += 600.0, gap1 = now; /* a hang's watchdog wait */
        if (i % 2 == 0) {
            twin_trace_sleep(r, now, now + 1e-3);
            busy += 1e-3, now += 1e-3;
        } else {
            const twin_trace_coll c = {.group = "tp",
                                       .op = FLIGHT_ALL_REDUCE,
                                       .seq = (uint64_t)i,
                                       .count = 8,
                                       .dtype = TR_F32,
                                       .redop = 0,
                                       .peer = -1,
                                       .arrival = now,
                                       .xfer_start = now + 2e-3,
                                       .end = now + 2.5e-3,
                                       .status = 0};
            twin_trace_coll_done(r, &c);
            wait += 2e-3, busy += 0.5e-3, now += 2.5e-3;
        }
    }
    char *json = write_to_string(t, now);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    double kept_busy = 0, kept_wait = 0, sum_busy = 0, sum_wait = 0;
    int nsums = -1;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        const cJSON *tid = cJSON_GetObjectItem(e, "tid");
        if (!cJSON_IsNumber(tid) || tid->valueint != 8) continue;
        const char *ph = str_of(e, "ph"), *cat = str_of(e, "cat");
        if (!strcmp(ph, "X")) {
            const double d = num_of(e, "dur") * 1e-6;
            if (!strcmp(cat, "wait")) kept_wait += d, kept_busy -= d; /* nested in its collective's span */
            else kept_busy += d;
        } else if (!strcmp(ph, "M") && !strcmp(str_of(e, "name"), "twinrun_dropped")) {
            const cJSON *args = cJSON_GetObjectItem(e, "args");
            const cJSON *t0 = cJSON_GetObjectItem(args, "t0"), *t1 = cJSON_GetObjectItem(args, "t1");
            const cJSON *b = cJSON_GetObjectItem(args, "busy"), *w = cJSON_GetObjectItem(args, "wait");
            nsums = cJSON_GetArraySize(t0);
            assert_int_equal(cJSON_GetArraySize(t1), nsums);
            assert_true(nsums >= 1 && nsums <= 128);
            assert_true(fabs(cJSON_GetArrayItem(t0, 0)->valuedouble) < 1e-9); /* from the first span */
            double prev = -1;
            for (int i = 0; i < nsums; i++) {
                const double a = cJSON_GetArrayItem(t0, i)->valuedouble * 1e-6;
                const double z = cJSON_GetArrayItem(t1, i)->valuedouble * 1e-6;
                const double bi = cJSON_GetArrayItem(b, i)->valuedouble * 1e-6;
                const double wi = cJSON_GetArrayItem(w, i)->valuedouble * 1e-6;
                assert_true(a >= prev - 1e-9 && z >= a && bi + wi <= z - a + 1e-9);
                assert_false(a < gap0 + 1.0 && z > gap1 - 1.0); /* the quiet stretch stays a gap */
                prev = z;
                sum_busy += bi, sum_wait += wi;
            }
        }
    }
    assert_true(nsums > 0);
    assert_true(fabs(kept_busy + sum_busy - busy) < 1e-6 * busy);
    assert_true(fabs(kept_wait + sum_wait - wait) < 1e-6 * wait);
    cJSON_Delete(root);
    free(json);
    twin_trace_free(t);
}

/* Slices on one thread must nest for Perfetto: a grouped operation that outlives its sibling is
 * clipped at the enclosing slice's end, and back-to-back kernels become one compute span. */
static void test_slices_nest_and_kernels_coalesce(void **state) {
    (void)state;
    twin_trace *t;
    char err[256];
    assert_int_equal(twin_trace_create(NULL, 2, 8, "H100", &t, err, sizeof err), 0);
    twin_trace_rank *r = twin_trace_rank_of(t, 0);
    twin_trace_compute(r, 0.0, 0.25);
    twin_trace_compute(r, 0.25, 0.5);
    twin_trace_compute(r, 0.5, 1.0);
    twin_trace_coll c = {.group = "pp\"x",
                         .op = FLIGHT_SEND,
                         .seq = 0,
                         .count = 4,
                         .dtype = TR_F32,
                         .redop = -1,
                         .peer = 1,
                         .arrival = 1.0,
                         .xfer_start = 1.5,
                         .end = 3.0,
                         .status = COLL_OK};
    twin_trace_coll_done(r, &c);
    c.op = FLIGHT_RECV, c.arrival = 2.0, c.xfer_start = 2.0, c.end = 4.0;
    twin_trace_coll_done(r, &c);
    char *json = write_to_string(t, 4.0);
    cJSON *root = cJSON_Parse(json);
    assert_non_null(root);
    int n = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
        if (strcmp(str_of(e, "ph"), "X")) continue;
        const char *name = str_of(e, "name");
        const double ts = num_of(e, "ts"), dur = num_of(e, "dur");
        const cJSON *args = cJSON_GetObjectItem(e, "args");
        switch (n++) {
        case 0:
            assert_string_equal(name, "compute");
            assert_true(ts == 0 && dur == 1e6);
            assert_int_equal((int)num_of(args, "kernels"), 3);
            break;
        case 1:
            assert_string_equal(name, "pp\"x send #0"); /* escaped in the file, whole once parsed */
            assert_true(ts == 1e6 && dur == 2e6);
            assert_true(num_of(args, "wait_us") == 0.5e6 && num_of(args, "transfer_us") == 1.5e6);
            break;
        case 2:
            assert_string_equal(name, "wait for peers");
            assert_true(ts == 1e6 && dur == 0.5e6);
            break;
        case 3:
            assert_string_equal(name, "pp\"x recv #0");
            assert_true(ts == 2e6 && dur == 1e6); /* clipped at the send's end */
            assert_true(num_of(args, "clipped_from_us") == 2e6);
            break;
        default: fail_msg("unexpected slice %s", name);
        }
    }
    assert_int_equal(n, 4);
    cJSON_Delete(root);
    free(json);
    twin_trace_free(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trace_of_a_hang),
        cmocka_unit_test(test_trace_ranks_and_errors),
        cmocka_unit_test(test_dropped_events_are_counted),
        cmocka_unit_test(test_dropped_spans_are_summarized),
        cmocka_unit_test(test_slices_nest_and_kernels_coalesce),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
