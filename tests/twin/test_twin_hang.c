/* Hangs, failures and deadlocks end the run with a blame report that names the culprit:
 * one hung rank among 1024 in well under a second of wall time with NCCL's 600 s timeout. */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <valgrind/valgrind.h>

#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_coll.h"
#include "flight/flight.h"
#include "twin.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"

typedef enum fault { HANG_FOREVER, SLEEP_LONG, FAIL, EXIT_EARLY, SKIP_RECV, HANG_IN_TP } fault;

typedef struct hang_case {
    int n, culprit, rounds, bad_round;
    fault how;
    int statuses[4]; /* how many ranks saw OK, ABORTED, TIMEOUT, ERROR on their last call */
} hang_case;

static int entry(int rank, void *arg) {
    hang_case *hc = arg;
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    if (!d) return 10;
    dev_stream *s = dev_stream_default(d);
    int *all = malloc(sizeof(int) * (size_t)hc->n);
    tt_range(all, 0, hc->n, 1);
    coll_comm *world = coll_comm_create(d, all, hc->n, rank, "world", err, sizeof err);
    free(all); /* before any fault: host memory of a dead rank is lost, as a crashed process's is */
    int tp_members[8];
    tt_range(tp_members, rank / 8 * 8, 8, 1);
    coll_comm *tp = hc->how == HANG_IN_TP ? coll_comm_create(d, tp_members, 8, rank, "tp", err, sizeof err) : NULL;
    float *buf = dev_alloc(d, 16, "buf");
    dev_memset_zero(s, buf, 16);
    coll_status st = COLL_OK;
    int code = 0;
    for (int round = 0; round < hc->rounds && st == COLL_OK; round++) {
        dev_sleep(d, 0.5); /* a training step's compute */
        if (rank == hc->culprit && round == hc->bad_round) {
            switch (hc->how) {
            case HANG_FOREVER:
            case HANG_IN_TP: twin_hang_forever();
            case SLEEP_LONG: dev_sleep(d, 1e6); break;
            case FAIL: tr_fatal("injected failure on rank %d", rank);
            case EXIT_EARLY: code = 7; goto out;
            case SKIP_RECV: goto out;
            }
        }
        if (tp) st = coll_all_reduce(tp, s, buf, buf, 4, TR_F32, COLL_SUM);
        if (st != COLL_OK) break;
        if (hc->how == SKIP_RECV && round == hc->bad_round) {
            if (rank == 0) st = coll_send(world, s, buf, 4, TR_F32, hc->culprit);
            continue;
        }
        st = coll_all_reduce(world, s, buf, buf, 4, TR_F32, COLL_SUM);
    }
    hc->statuses[st]++;
    code = st == COLL_OK ? 0 : 3;
out:
    dev_free(d, buf);
    if (tp) coll_comm_destroy(tp);
    coll_comm_destroy(world);
    dev_close(d);
    return code;
}

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void run(hang_case *hc, double watchdog, const char *dump_dir, twin_result *res) {
    twin_options o;
    twin_options_default(&o);
    o.watchdog_timeout_s = watchdog;
    o.stack_bytes = 64 * 1024;
    o.dump_dir = dump_dir;
    o.quiet = true;
    char err[256];
    assert_int_equal(twin_run(hc->n, entry, hc, &o, res, err, sizeof err), 0);
}

static void test_one_hung_rank_among_1024(void **state) {
    (void)state;
    hang_case hc = {.n = 1024, .culprit = 17, .rounds = 5, .bad_round = 3, .how = HANG_FOREVER};
    twin_result res;
    double t0 = wall();
    run(&hc, 600.0, NULL, &res);
    double took = wall() - t0;
    if (!RUNNING_ON_VALGRIND) assert_true(took < 1.0);
    print_message("1024 ranks, one hung: found in %.3f s of wall time, simulated end %.3f s\n", took, res.end_time);
    assert_true(res.hang);
    assert_int_equal(res.blamed_rank, 17);
    assert_non_null(strstr(res.report, "comm 'world'"));
    assert_non_null(strstr(res.report, "seq 3 all_reduce count 4 fp32 sum: 1023 joined"));
    assert_non_null(strstr(res.report, "1 never joined: 17\n"));
    assert_non_null(strstr(res.report, "stopped first: rank 17"));
    assert_true(res.end_time >= 600.0 && res.end_time < 700.0); /* the watchdog, not a wall clock */
    assert_int_equal(res.rank_end[17], TWIN_RANK_KILLED);
    assert_int_equal(hc.statuses[COLL_TIMEOUT], 1); /* the rank whose watchdog fired */
    assert_int_equal(hc.statuses[COLL_ABORTED], 1022);
    for (int r = 0; r < 1024; r++)
        if (r != 17) assert_int_equal(res.exit_codes[r], 3);
    twin_result_free(&res);
}

/* A rank that is only slow past the timeout is blamed the same way, and the run still ends. */
static void test_slow_rank_past_the_timeout(void **state) {
    (void)state;
    hang_case hc = {.n = 64, .culprit = 63, .rounds = 3, .bad_round = 1, .how = SLEEP_LONG};
    twin_result res;
    run(&hc, 600.0, NULL, &res);
    assert_true(res.hang);
    assert_int_equal(res.blamed_rank, 63);
    assert_int_equal(res.rank_end[63], TWIN_RANK_EXITED);
    assert_int_equal(res.exit_codes[63], 3); /* its late call finds the communicator aborted */
    assert_true(res.end_time >= 1e6);
    twin_result_free(&res);
}

static void test_failed_rank_is_blamed(void **state) {
    (void)state;
    hang_case hc = {.n = 8, .culprit = 5, .rounds = 3, .bad_round = 1, .how = FAIL};
    twin_result res;
    run(&hc, 600.0, NULL, &res);
    assert_int_equal(res.rank_end[5], TWIN_RANK_FAILED);
    assert_int_equal(res.exit_codes[5], TR_EXIT_FATAL);
    assert_true(res.hang);
    assert_int_equal(res.blamed_rank, 5);
    assert_non_null(strstr(res.report, "rank 5 failed with exit code 1"));
    assert_non_null(strstr(res.report, "7 joined"));
    assert_non_null(strstr(res.report, "status failed 1"));
    for (int r = 0; r < 8; r++)
        if (r != 5) assert_int_equal(res.rank_end[r], TWIN_RANK_EXITED);
    twin_result_free(&res);
}

/* Watchdog off: nobody can run and no deadline is left; the run must still end, with blame. */
static void test_deadlock_without_watchdog(void **state) {
    (void)state;
    hang_case hc = {.n = 4, .culprit = 2, .rounds = 3, .bad_round = 1, .how = EXIT_EARLY};
    twin_result res;
    run(&hc, 0.0, NULL, &res);
    assert_true(res.hang);
    assert_int_equal(res.watchdog_rank, -1);
    assert_non_null(strstr(res.report, "deadlock"));
    assert_non_null(strstr(res.report, "never joined: 2\n"));
    assert_int_equal(res.blamed_rank, 2);
    assert_int_equal(res.exit_codes[2], 7);
    twin_result_free(&res);
}

static void test_unmatched_send_is_blamed(void **state) {
    (void)state;
    hang_case hc = {.n = 4, .culprit = 3, .rounds = 2, .bad_round = 1, .how = SKIP_RECV};
    twin_result res;
    run(&hc, 600.0, NULL, &res);
    assert_true(res.hang);
    assert_non_null(strstr(res.report, "send count 4 fp32 peer 3: 1 joined"));
    assert_int_equal(res.blamed_rank, 3);
    twin_result_free(&res);
}

/* The hung rank's tensor-parallel peers wait in 'tp', everyone else in 'world': blame still
 * picks the rank that stopped first. */
static void test_hang_inside_a_subgroup(void **state) {
    (void)state;
    hang_case hc = {.n = 64, .culprit = 42, .rounds = 3, .bad_round = 2, .how = HANG_IN_TP};
    twin_result res;
    run(&hc, 600.0, NULL, &res);
    assert_true(res.hang);
    print_message("%s", res.report);
    assert_int_equal(res.blamed_rank, 42);
    assert_non_null(strstr(res.report, "comm 'tp'"));
    assert_non_null(strstr(res.report, "7 joined"));
    twin_result_free(&res);
}

/* The dumps on disk say the same as the in-memory analysis: parse them back and blame again. */
static void test_dumps_round_trip_through_blame(void **state) {
    (void)state;
    char dir[64];
    assert_int_equal(fx_tmpdir(dir, sizeof dir, "twin-dumps"), 0);
    hang_case hc = {.n = 16, .culprit = 9, .rounds = 3, .bad_round = 2, .how = HANG_FOREVER};
    twin_result res;
    run(&hc, 600.0, dir, &res);
    assert_int_equal(res.blamed_rank, 9);
    flight_dump dumps[16];
    for (int r = 0; r < 16; r++) {
        char path[256];
        snprintf(path, sizeof path, "%s/flight_rank%05d.txt", dir, r);
        FILE *f = fopen(path, "rb");
        assert_non_null(f);
        char text[65536];
        size_t len = fread(text, 1, sizeof text, f);
        fclose(f);
        size_t pos = 0, line = 0;
        char err[256];
        int rc = flight_dump_parse(text, len, &pos, &line, &dumps[r], err, sizeof err);
        if (rc != 1) fail_msg("%s: %s", path, err);
        assert_int_equal(dumps[r].rank, r);
        assert_string_equal(dumps[r].status, r == 9 ? "blocked" : "blocked");
        unlink(path);
    }
    assert_int_equal(rmdir(dir), 0);
    flight_blame_result b;
    char err[256];
    assert_int_equal(flight_blame(dumps, 16, &b, err, sizeof err), 0);
    assert_int_equal(b.first_stopped, 9);
    assert_int_equal(b.nstuck, 1);
    assert_int_equal(b.stuck[0].nmissing, 1);
    assert_int_equal(b.stuck[0].missing[0], 9);
    assert_int_equal((int)b.stuck[0].seq, 2);
    flight_blame_free(&b);
    for (int r = 0; r < 16; r++) flight_dump_free(&dumps[r]);
    twin_result_free(&res);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_hung_rank_among_1024),       cmocka_unit_test(test_slow_rank_past_the_timeout),
        cmocka_unit_test(test_failed_rank_is_blamed),          cmocka_unit_test(test_deadlock_without_watchdog),
        cmocka_unit_test(test_unmatched_send_is_blamed),       cmocka_unit_test(test_hang_inside_a_subgroup),
        cmocka_unit_test(test_dumps_round_trip_through_blame),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
