/* The twin across processes (sim/multiproc): 8 ranks as 4 forked processes of 2, started with
 * torchrun-style variables, run every collective on groups inside one process, across two, and
 * strided over all four; results must equal the serial references bit for bit, and every rank's
 * simulated clock must equal the one-process run's. A call that differs between processes and a
 * rank that fails end the whole job at once, with the reason in every process's report; a rank
 * that hangs is found as soon as every process waits (quiescence), long before the wall-clock
 * watchdog, and blamed by every process. */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/fixture.h"
#include "common/fixture_coll.h"
#include "twin.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"

#define NRANKS 8
#define NPROCS 4
#define COUNT 13

typedef enum scenario { GOOD, MISMATCH, FAILURE, HANG, KILLED } scenario;

typedef struct xcase {
    scenario what;
    int errors;
    char first_error[256];
} xcase;

static const tr_dtype dts[3] = {TR_F32, TR_BF16, TR_I32};
static const coll_op ops[4] = {COLL_SUM, COLL_AVG, COLL_MAX, COLL_MIN};

static void note(xcase *xc, int rank, const char *fmt, ...) {
    if (xc->errors++) return;
    int k = snprintf(xc->first_error, sizeof xc->first_error, "rank %d: ", rank);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(xc->first_error + k, sizeof xc->first_error - (size_t)k, fmt, ap);
    va_end(ap);
}

typedef struct rk {
    xcase *xc;
    int rank;
    dev_device *d;
    dev_stream *s;
    void *h_in, *h_out, *h_ref, *d_send, *d_recv;
} rk;

static void check(rk *x, const void *want, size_t bytes, const char *what) {
    if (memcmp(x->h_out, want, bytes) != 0) note(x->xc, x->rank, "%s differs from the serial reference", what);
}

/* all-reduce in every type and op, all-gather, reduce-scatter, on group c of members[n] */
static void reductions(rk *x, coll_comm *c, const int *members, int n, int salt) {
    const int me = coll_comm_rank(c);
    for (int di = 0; di < 3; di++)
        for (int oi = 0; oi < 4; oi++) {
            const size_t bytes = COUNT * tr_dtype_size(dts[di]);
            tt_fill(x->h_in, dts[di], x->rank, 0, COUNT, salt + di * 4 + oi);
            dev_copy_h2d(x->s, x->d_send, x->h_in, bytes);
            dev_sleep(x->d, 1e-6 * (x->rank * 7 % 5)); /* arrivals differ */
            if (coll_all_reduce(c, x->s, x->d_send, x->d_recv, COUNT, dts[di], ops[oi]) != COLL_OK)
                note(x->xc, x->rank, "all_reduce failed");
            dev_copy_d2h(x->s, x->h_out, x->d_recv, bytes);
            tt_reduce_ref(x->h_ref, dts[di], ops[oi], members, n, 0, COUNT, salt + di * 4 + oi);
            check(x, x->h_ref, bytes, "all_reduce");
        }
    tt_fill(x->h_in, TR_F32, x->rank, 0, COUNT, salt); /* in place */
    dev_copy_h2d(x->s, x->d_recv, x->h_in, COUNT * 4);
    if (coll_all_reduce(c, x->s, x->d_recv, x->d_recv, COUNT, TR_F32, COLL_SUM) != COLL_OK)
        note(x->xc, x->rank, "in-place all_reduce failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, COUNT * 4);
    tt_reduce_ref(x->h_ref, TR_F32, COLL_SUM, members, n, 0, COUNT, salt);
    check(x, x->h_ref, COUNT * 4, "in-place all_reduce");
    tt_fill(x->h_in, TR_F32, x->rank, 0, COUNT, salt + 20);
    dev_copy_h2d(x->s, x->d_send, x->h_in, COUNT * 4);
    if (coll_all_gather(c, x->s, x->d_send, x->d_recv, COUNT, TR_F32) != COLL_OK)
        note(x->xc, x->rank, "all_gather failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, (size_t)n * COUNT * 4);
    for (int r = 0; r < n; r++) tt_fill((float *)x->h_ref + (size_t)r * COUNT, TR_F32, members[r], 0, COUNT, salt + 20);
    check(x, x->h_ref, (size_t)n * COUNT * 4, "all_gather");
    for (int di = 0; di < 2; di++) {
        const size_t esz = tr_dtype_size(dts[di]);
        tt_fill(x->h_in, dts[di], x->rank, 0, (size_t)n * COUNT, salt + 21 + di);
        dev_copy_h2d(x->s, x->d_send, x->h_in, (size_t)n * COUNT * esz);
        if (coll_reduce_scatter(c, x->s, x->d_send, x->d_recv, COUNT, dts[di], COLL_SUM) != COLL_OK)
            note(x->xc, x->rank, "reduce_scatter failed");
        dev_copy_d2h(x->s, x->h_out, x->d_recv, COUNT * esz);
        tt_reduce_ref(x->h_ref, dts[di], COLL_SUM, members, n, (size_t)me * COUNT, COUNT, salt + 21 + di);
        check(x, x->h_ref, COUNT * esz, "reduce_scatter");
        /* in place: recv is this rank's block of send, whose other blocks other processes still read */
        char *own = (char *)x->d_send + (size_t)me * COUNT * esz; /* [COUNT] inside send [n*COUNT] */
        dev_copy_h2d(x->s, x->d_send, x->h_in, (size_t)n * COUNT * esz);
        if (coll_reduce_scatter(c, x->s, x->d_send, own, COUNT, dts[di], COLL_SUM) != COLL_OK)
            note(x->xc, x->rank, "in-place reduce_scatter failed");
        dev_copy_d2h(x->s, x->h_out, own, COUNT * esz);
        check(x, x->h_ref, COUNT * esz, "in-place reduce_scatter");
    }
}

/* broadcast from a root in another process, barrier, and a ring of grouped sends and receives */
static void ring(rk *x, coll_comm *c, const int *members, int n, int salt) {
    const int me = coll_comm_rank(c), root = n - 1, next = (me + 1) % n, prev = (me + n - 1) % n;
    tt_fill(x->h_in, TR_F32, me == root ? x->rank : -1, 0, COUNT, salt);
    dev_copy_h2d(x->s, x->d_recv, x->h_in, COUNT * 4);
    if (coll_broadcast(c, x->s, x->d_recv, COUNT, TR_F32, root) != COLL_OK) note(x->xc, x->rank, "broadcast failed");
    dev_copy_d2h(x->s, x->h_out, x->d_recv, COUNT * 4);
    tt_fill(x->h_ref, TR_F32, members[root], 0, COUNT, salt);
    check(x, x->h_ref, COUNT * 4, "broadcast");
    if (coll_barrier(c, x->s) != COLL_OK) note(x->xc, x->rank, "barrier failed");
    tt_fill(x->h_in, TR_BF16, x->rank, 0, COUNT, salt + 1);
    dev_copy_h2d(x->s, x->d_send, x->h_in, COUNT * 2);
    coll_group_start();
    coll_send(c, x->s, x->d_send, COUNT, TR_BF16, next);
    coll_recv(c, x->s, x->d_recv, COUNT, TR_BF16, prev);
    coll_group_end();
    dev_copy_d2h(x->s, x->h_out, x->d_recv, COUNT * 2);
    tt_fill(x->h_ref, TR_BF16, members[prev], 0, COUNT, salt + 1);
    check(x, x->h_ref, COUNT * 2, "ring send/recv");
}

static coll_comm *make(rk *x, const int *members, int n, const char *name) {
    char err[256];
    coll_comm *c = coll_comm_create(x->d, members, n, x->rank, name, err, sizeof err);
    if (!c) note(x->xc, x->rank, "%s: %s", name, err);
    return c;
}

static int entry(int rank, int world, void *arg) {
    xcase *xc = arg;
    char err[256];
    rk x = {.xc = xc, .rank = rank};
    if (world != NRANKS) note(xc, rank, "world %d", world);
    x.d = dev_open(0, 0, err, sizeof err);
    x.s = dev_stream_default(x.d);
    const size_t big = (size_t)NRANKS * COUNT * 4;
    x.h_in = malloc(big);
    x.h_out = malloc(big);
    x.h_ref = malloc(big);
    x.d_send = dev_alloc(x.d, big, "send");
    x.d_recv = dev_alloc(x.d, big, "recv");
    int all[NRANKS], strided[NRANKS / 2], pair[2], local[2];
    tt_range(all, 0, NRANKS, 1);
    tt_range(strided, rank % 2, NRANKS / 2, 2);                        /* one member in each process */
    pair[0] = (rank + 1) / 2 * 2 - 1 < 0 ? 0 : (rank + 1) / 2 * 2 - 1; /* {1,2} {3,4} {5,6}: two processes */
    pair[1] = pair[0] + 1;
    if (rank == 0 || rank == NRANKS - 1) pair[0] = 0, pair[1] = NRANKS - 1;
    tt_range(local, rank / 2 * 2, 2, 1);
    coll_comm *w = make(&x, all, NRANKS, "world"), *st = make(&x, strided, NRANKS / 2, "strided");
    coll_comm *pr = make(&x, pair, 2, "pair"), *lo = make(&x, local, 2, "local");
    if (xc->what == FAILURE && rank == 5) tr_fatal("injected failure of rank 5");
    if (xc->what == HANG && rank == 5) {
        reductions(&x, w, all, NRANKS, 1); /* some progress first, so the others are past their start */
        twin_hang_forever();
    }
    if (xc->what == KILLED && rank == 6) {
        reductions(&x, w, all, NRANKS, 1); /* some progress first, as a process killed mid-run */
        raise(SIGKILL);                    /* process 3 (ranks 6 and 7) ends at once, as under kill -9 */
    }
    if (xc->what == MISMATCH) {
        float *f = x.d_send;
        coll_all_reduce(w, x.s, f, x.d_recv, rank == 6 ? 4 : 3, TR_F32, COLL_SUM);
    } else if (w && st && pr && lo) {
        reductions(&x, w, all, NRANKS, 1);
        reductions(&x, st, strided, NRANKS / 2, 100);
        reductions(&x, pr, pair, 2, 200);
        reductions(&x, lo, local, 2, 300);
        ring(&x, w, all, NRANKS, 400);
        ring(&x, st, strided, NRANKS / 2, 500);
        ring(&x, pr, pair, 2, 600);
    }
    coll_comm_destroy(w);
    coll_comm_destroy(st);
    coll_comm_destroy(pr);
    coll_comm_destroy(lo);
    dev_free(x.d, x.d_send);
    dev_free(x.d, x.d_recv);
    free(x.h_in);
    free(x.h_out);
    free(x.h_ref);
    dev_close(x.d);
    return xc->errors ? 3 : 0;
}

/* One process of the job: its ranks' clocks (%a) or the report's first line go to `out`. */
static int child(int proc, int port, scenario what, const char *out) {
    char v[32];
    snprintf(v, sizeof v, "%d", proc);
    setenv("RANK", v, 1);
    setenv("LOCAL_RANK", v, 1);
    snprintf(v, sizeof v, "%d", NPROCS);
    setenv("WORLD_SIZE", v, 1);
    snprintf(v, sizeof v, "%d", port);
    setenv("MASTER_PORT", v, 1);
    setenv("MASTER_ADDR", "127.0.0.1", 1);
    setenv("TWINRUN_RANKS_PER_PROCESS", "2", 1);
    setenv("TWINRUN_REMOTE_TIMEOUT", what == KILLED ? "2" : "20", 1);
    setenv("FI_PROVIDER", "tcp;ofi_rxm", 1);
    twin_options o;
    twin_options_default(&o);
    o.quiet = true;
    o.end_on_abort = true;
    twin_result res = {0};
    xcase xc = {.what = what};
    char err[512];
    const int rc = twin_launch(NRANKS, entry, &xc, &o, &res, err, sizeof err);
    FILE *f = fopen(out, "w");
    if (!f) return 100;
    if (rc < 0) fprintf(f, "launch: %s\n", err);
    if (xc.errors) fprintf(f, "check: %s\n", xc.first_error);
    for (int i = 0; i < res.nranks; i++) fprintf(f, "rank %d %a\n", proc * 2 + i, res.end_times[i]);
    fputs(res.report, f);
    fclose(f);
    twin_result_free(&res);
    return rc < 0 ? 101 : rc;
}

#ifdef TWINRUN_COVERAGE
/* libgcov (coverage builds): a child starts from zero counters (not the parent's counts so far, which the
 * parent writes itself) and writes them before _exit, which skips the atexit handler that would */
void __gcov_reset(void);
void __gcov_dump(void);
#endif

/* Runs the job as NPROCS processes; codes[p] their exit codes, texts[p] what they wrote. */
static void run_job(scenario what, int codes[NPROCS], char *texts[NPROCS]) {
    const int port = fx_free_port(); /* each job its own: no socket of the last one lingers on it */
    assert_true(port > 0);
    pid_t pids[NPROCS];
    char paths[NPROCS][64];
    fflush(NULL);
    for (int p = 0; p < NPROCS; p++) {
        snprintf(paths[p], sizeof paths[p], "/tmp/twin_xproc_%ld_%d.txt", (long)getpid(), p);
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
#ifdef TWINRUN_COVERAGE
            __gcov_reset();
#endif
            const int rc = child(p, port, what, paths[p]);
#ifdef TWINRUN_COVERAGE
            __gcov_dump();
#endif
            _exit(rc);
        }
    }
    for (int p = 0; p < NPROCS; p++) {
        int st;
        assert_int_equal(waitpid(pids[p], &st, 0), pids[p]);
        codes[p] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        FILE *f = fopen(paths[p], "r");
        texts[p] = calloc(1, 1 << 16);
        assert_non_null(texts[p]);
        if (f) {
            size_t n = fread(texts[p], 1, (1 << 16) - 1, f);
            texts[p][n] = '\0';
            fclose(f);
        }
        unlink(paths[p]);
    }
}

static int in_process_entry(int rank, void *arg) { return entry(rank, NRANKS, arg); }

static void test_same_bits_and_clocks_as_one_process(void **state) {
    (void)state;
    xcase xc = {.what = GOOD};
    twin_options o;
    twin_options_default(&o);
    twin_result one;
    char err[256];
    assert_int_equal(twin_run(NRANKS, in_process_entry, &xc, &o, &one, err, sizeof err), 0);
    if (xc.errors) fail_msg("in one process: %s", xc.first_error);
    int codes[NPROCS];
    char *texts[NPROCS];
    run_job(GOOD, codes, texts);
    for (int p = 0; p < NPROCS; p++) {
        if (codes[p] != 0) fail_msg("process %d exited %d:\n%s", p, codes[p], texts[p]);
        for (int i = 0; i < 2; i++) {
            char want[64];
            snprintf(want, sizeof want, "rank %d %a\n", p * 2 + i, one.end_times[p * 2 + i]);
            if (!strstr(texts[p], want))
                fail_msg("process %d: clock differs from one process (%s):\n%s", p, want, texts[p]);
        }
        free(texts[p]);
    }
    twin_result_free(&one);
}

static void test_mismatch_across_processes_ends_the_job(void **state) {
    (void)state;
    int codes[NPROCS];
    char *texts[NPROCS];
    run_job(MISMATCH, codes, texts);
    for (int p = 0; p < NPROCS; p++) {
        if (codes[p] == 0) fail_msg("process %d exited 0", p);
        if (!strstr(texts[p], "called all_reduce(count=4, fp32, sum) but rank") &&
            !strstr(texts[p], "rank 6 called all_reduce(count=4, fp32, sum)"))
            fail_msg("process %d does not report the mismatch:\n%s", p, texts[p]);
        free(texts[p]);
    }
}

static void test_failed_rank_ends_the_job(void **state) {
    (void)state;
    int codes[NPROCS];
    char *texts[NPROCS];
    run_job(FAILURE, codes, texts);
    for (int p = 0; p < NPROCS; p++) {
        if (codes[p] == 0) fail_msg("process %d exited 0", p);
        if (!strstr(texts[p], "rank 5 failed with exit code") || !strstr(texts[p], "injected failure of rank 5"))
            fail_msg("process %d does not report rank 5's failure:\n%s", p, texts[p]);
        free(texts[p]);
    }
}

static void test_hang_found_by_quiescence(void **state) {
    (void)state;
    int codes[NPROCS];
    char *texts[NPROCS];
    run_job(HANG, codes, texts); /* TWINRUN_REMOTE_TIMEOUT=20: the watchdog must not be what finds it */
    for (int p = 0; p < NPROCS; p++) {
        if (codes[p] == 0) fail_msg("process %d exited 0", p);
        if (strstr(texts[p], "watchdog:") || !strstr(texts[p], "deadlock") ||
            !strstr(texts[p], "stopped first: rank 5 "))
            fail_msg("process %d does not blame rank 5's hang as a deadlock:\n%s", p, texts[p]);
        free(texts[p]);
    }
}

/* The line that names process 3 in a survivor's report, up to "; found by: " (NULL if none), and in
 * *how what follows: which way that survivor learned of the kill. */
static const char *killed_line(const char *text, size_t *len, const char **how) {
    const char *l = strstr(text, "no answer from process 3 ");
    if (!l) return NULL;
    const char *end = strchr(l, '\n'), *f = strstr(l, "; found by: ");
    if (!end || !f || f > end) return NULL;
    *len = (size_t)(f - l);
    *how = f + strlen("; found by: ");
    return l;
}

/* Is the "found by" one of the ways a survivor can learn of the kill? */
static bool known_path(const char *how) {
    int from = -1, k = 0;
    if (!strncmp(how, "watchdog\n", 9) || !strncmp(how, "broken pipe\n", 12)) return true;
    return sscanf(how, "abort from process %d%n", &from, &k) == 1 && from >= 0 && from < NPROCS - 1 && how[k] == '\n';
}

/* kill -9 of process 3: nothing tells the others. A survivor learns of it by its own wall-clock
 * watchdog (TWINRUN_REMOTE_TIMEOUT=2 here), a broken pipe to process 3, or another survivor's abort,
 * whichever comes first (a race); every survivor exits non-zero and reports it the same way: process 3
 * named with its ranks and pid, how it was found, and the blame on its rank 6 or 7 (no dump). Not under
 * valgrind, whose slowed survivors could wait 2 s for each other too. */
static void test_killed_process_blamed_by_every_survivor(void **state) {
    (void)state;
    const char *vg = getenv("TWINRUN_UNDER_VALGRIND");
    if (vg && *vg == '1') skip();
    int codes[NPROCS];
    char *texts[NPROCS];
    run_job(KILLED, codes, texts);
    assert_int_equal(codes[3], 128 + SIGKILL);
    const char *first = NULL;
    size_t first_len = 0;
    for (int p = 0; p < NPROCS - 1; p++) {
        size_t len = 0;
        const char *how = NULL, *l = killed_line(texts[p], &len, &how);
        if (codes[p] == 0) fail_msg("survivor %d exited 0", p);
        unsigned pid = 0;
        if (!l || sscanf(l, "no answer from process 3 (ranks 6-7 on host %*[^,], pid %u)", &pid) != 1 || !pid ||
            !known_path(how) ||
            (!strstr(texts[p], "stopped first: rank 6 (no dump)") &&
             !strstr(texts[p], "stopped first: rank 7 (no dump)")))
            fail_msg("survivor %d does not blame the killed process 3:\n%s", p, texts[p]);
        if (!first) first = l, first_len = len;
        else if (len != first_len || memcmp(l, first, len) != 0)
            fail_msg("survivor %d names process 3 otherwise than survivor 0:\n%.*s\n%.*s", p, (int)len, l,
                     (int)first_len, first);
    }
    for (int p = 0; p < NPROCS; p++) free(texts[p]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_bits_and_clocks_as_one_process),
        cmocka_unit_test(test_mismatch_across_processes_ends_the_job),
        cmocka_unit_test(test_failed_rank_ends_the_job),
        cmocka_unit_test(test_hang_found_by_quiescence),
        cmocka_unit_test(test_killed_process_blamed_by_every_survivor),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
