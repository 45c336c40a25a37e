/* bench_twin: the twin runtime's costs, measured on this machine.
 *
 *   bench_twin [--ranks N] [--allreduces K] [--bytes B] [--switches M] [--device NAME]
 *
 * Prints (1) the coroutine switch cost, raw and through the scheduler, with swapcontext for
 * comparison; (2) resident memory per idle rank (besides its own buffers) while N ranks wait at
 * a barrier; (3) wall time for N ranks to do K all-reduces of B bytes each (default 1024 ranks,
 * 1000 all-reduces, 4 KiB). Wall clocks here measure the simulator, never the simulated run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "sched/ctx.h"
#include "twin.h"
#include "twinrun/coll.h"
#include "twinrun/dev.h"
#include "twinrun/version.h"

static double wall(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long rss_bytes(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (!f) return -1;
    if (fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = -1;
    fclose(f);
    return resident * sysconf(_SC_PAGESIZE);
}

/* ---- (1) raw switches: main <-> one coroutine, ping-pong ------------------------------------ */
static twin_ctx main_ctx, co_ctx;
static volatile long co_left;

static void co_body(void *arg) {
    (void)arg;
    for (;;) {
        co_left--;
        twin_ctx_switch(&co_ctx, &main_ctx);
    }
}

static double raw_switch_ns(long n) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    twin_ctx_init(&co_ctx, stack, sizeof stack, co_body, NULL);
    co_left = n;
    double t0 = wall();
    for (long i = 0; i < n; i++) twin_ctx_switch(&main_ctx, &co_ctx);
    return (wall() - t0) * 1e9 / (2.0 * (double)n);
}

static ucontext_t uc_main, uc_co;
static void uc_body(void) {
    for (;;) swapcontext(&uc_co, &uc_main);
}

static double swapcontext_ns(long n) {
    static char stack[64 * 1024] __attribute__((aligned(16)));
    getcontext(&uc_co);
    uc_co.uc_stack.ss_sp = stack;
    uc_co.uc_stack.ss_size = sizeof stack;
    uc_co.uc_link = NULL;
    makecontext(&uc_co, uc_body, 0);
    double t0 = wall();
    for (long i = 0; i < n; i++) swapcontext(&uc_main, &uc_co);
    return (wall() - t0) * 1e9 / (2.0 * (double)n);
}

/* Through the scheduler: two ranks taking turns with dev_sleep (a heap pop and two switches). */
typedef struct sleep_case {
    long rounds;
} sleep_case;

static int sleeper(int rank, void *arg) {
    sleep_case *sc = arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    if (!d) return 1;
    (void)rank;
    for (long i = 0; i < sc->rounds; i++) dev_sleep(d, 1e-6);
    dev_close(d);
    return 0;
}

/* ---- (2) and (3) ------------------------------------------------------------------------ */
typedef struct bench_case {
    int n, allreduces;
    size_t bytes;
    size_t ring;
    long rss_before, rss_idle;
} bench_case;

static int idle_entry(int rank, void *arg) {
    bench_case *bc = arg;
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    int *ranks = malloc(sizeof(int) * (size_t)bc->n);
    for (int i = 0; i < bc->n; i++) ranks[i] = i;
    coll_comm *w = coll_comm_create(d, ranks, bc->n, rank, "world", err, sizeof err);
    free(ranks);
    if (!w) return 1;
    /* fill the flight-recorder ring, so the figure is the steady state of a long run */
    for (size_t i = 0; i <= bc->ring; i++) coll_barrier(w, dev_stream_default(d));
    /* the last rank to resume measures while every other rank waits in the next barrier */
    if (rank == bc->n - 1) bc->rss_idle = rss_bytes();
    coll_barrier(w, dev_stream_default(d));
    coll_comm_destroy(w);
    dev_close(d);
    return 0;
}

static int allreduce_entry(int rank, void *arg) {
    bench_case *bc = arg;
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *s = dev_stream_default(d);
    int *ranks = malloc(sizeof(int) * (size_t)bc->n);
    for (int i = 0; i < bc->n; i++) ranks[i] = i;
    coll_comm *w = coll_comm_create(d, ranks, bc->n, rank, "world", err, sizeof err);
    free(ranks);
    float *buf = dev_alloc(d, bc->bytes, "grads");
    if (!w || !buf) return 1;
    dev_memset_zero(s, buf, bc->bytes);
    int bad = 0;
    for (int i = 0; i < bc->allreduces; i++)
        bad |= coll_all_reduce(w, s, buf, buf, bc->bytes / 4, TR_F32, COLL_SUM) != COLL_OK;
    dev_free(d, buf);
    coll_comm_destroy(w);
    dev_close(d);
    return bad;
}

static long parse_long(const char *flag, const char *v, long lo, long hi) {
    char *end;
    errno = 0;
    long x = v ? strtol(v, &end, 10) : 0;
    if (!v || errno || *end || x < lo || x > hi) {
        fprintf(stderr, "bench_twin: %s needs an integer in [%ld, %ld]\n", flag, lo, hi);
        exit(2);
    }
    return x;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "bench_twin");
        return 0;
    }
    bench_case bc = {.n = 1024, .allreduces = 1000, .bytes = 4096};
    long switches = 2000000;
    twin_options o;
    twin_options_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(argv[i], "--ranks") == 0) bc.n = (int)parse_long(argv[i], v, 1, 1 << 20), i++;
        else if (strcmp(argv[i], "--allreduces") == 0) bc.allreduces = (int)parse_long(argv[i], v, 1, 1 << 30), i++;
        else if (strcmp(argv[i], "--bytes") == 0) bc.bytes = (size_t)parse_long(argv[i], v, 4, 1L << 30) / 4 * 4, i++;
        else if (strcmp(argv[i], "--switches") == 0) switches = parse_long(argv[i], v, 1, 1L << 40), i++;
        else if (strcmp(argv[i], "--device") == 0 && v) o.device = v, i++;
        else {
            fprintf(stderr,
                    "usage: bench_twin [--ranks N] [--allreduces K] [--bytes B] [--switches M] [--device NAME]\n");
            return 2;
        }
    }
    char err[256];
    twin_result res;

    printf("coroutine switch (one way, ns):\n");
    printf("  twin_ctx_switch (x86-64 asm)      %8.1f\n", raw_switch_ns(switches));
    printf("  swapcontext (glibc, for compare)  %8.1f\n", swapcontext_ns(switches / 4));
    sleep_case sc = {.rounds = switches / 4};
    double t0 = wall();
    if (twin_run(2, sleeper, &sc, &o, &res, err, sizeof err)) return fprintf(stderr, "bench_twin: %s\n", err), 1;
    double t = wall() - t0;
    printf("  scheduler round trip per dev_sleep %7.1f  (2 ranks, %llu switches in)\n",
           t * 1e9 / (2.0 * (double)sc.rounds), (unsigned long long)res.switches);
    twin_result_free(&res);

    bc.ring = o.flight_capacity;
    bc.rss_before = rss_bytes();
    if (twin_run(bc.n, idle_entry, &bc, &o, &res, err, sizeof err)) return fprintf(stderr, "bench_twin: %s\n", err), 1;
    twin_result_free(&res);
    printf("memory per idle rank: %.1f KiB resident (%d ranks waiting in a barrier after %zu collectives filled "
           "their flight rings; %zu KiB virtual stack each)\n",
           (double)(bc.rss_idle - bc.rss_before) / 1024.0 / bc.n, bc.n, bc.ring + 1, o.stack_bytes / 1024);

    t0 = wall();
    if (twin_run(bc.n, allreduce_entry, &bc, &o, &res, err, sizeof err))
        return fprintf(stderr, "bench_twin: %s\n", err), 1;
    t = wall() - t0;
    int failed = 0;
    for (int r = 0; r < bc.n; r++) failed += res.exit_codes[r] != 0;
    printf("%d ranks x %d all-reduces of %zu bytes: %.3f s wall (%.1f us per all-reduce), "
           "%.6f s simulated on %s, %llu switches%s\n",
           bc.n, bc.allreduces, bc.bytes, t, t * 1e6 / bc.allreduces, res.end_time, o.device,
           (unsigned long long)res.switches, failed ? " -- SOME RANKS FAILED" : "");
    twin_result_free(&res);
    return failed ? 1 : 0;
}
