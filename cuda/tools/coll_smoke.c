/* coll_smoke: exercises coll_nccl.c on real GPUs, one process per rank on one host.
 *
 *   coll_smoke RANK WORLD [timeout|hang]
 *
 * Rank r opens device r (WORLD GPUs needed; WORLD = 1 works on one GPU), builds a "world"
 * communicator over 0..WORLD-1 (file rendezvous: set TWINRUN_RENDEZVOUS_DIR), and checks
 * all-reduce (sum, avg, max; fp32, bf16, int32; in place), all-gather, reduce-scatter, broadcast,
 * a send/recv ring in a group, barrier, and that a call after coll_abort returns COLL_ABORTED.
 * With "timeout" (WORLD >= 2), rank 0 issues an all-reduce that rank 1 never joins and expects
 * COLL_TIMEOUT after TWINRUN_COLL_TIMEOUT_S (TWINRUN_COLL_ON_TIMEOUT=return: the watchdog aborts the
 * rank's communicators and writes its flight dump, then returns instead of exiting; in asynchronous
 * mode the call returns at once and the stream comes back when the watchdog thread has aborted it).
 * With "hang" (any WORLD, one GPU is enough): after the checks, a second communicator "hang" is made with
 * TWINRUN_COLL_HANG=hang:1, so its second all-reduce hangs on the GPU; the rank then waits for its
 * stream and must never come back: the watchdog (thread in asynchronous mode, the waiting call in
 * synchronous mode) dumps the flight recorder and exits 1 after TWINRUN_COLL_TIMEOUT_S (exit 3 here if
 * the wait returns). cuda/tools/async_check.sh times it and runs blame on the dump.
 * Also checked: the ordering of a collective between the caller's copies with no host wait in between
 * (64 MB, three rounds), and on one GPU a send/recv to oneself in a group.
 * Prints the mode (TWINRUN_COLL_SYNC) and one line per check; exits non-zero on failure.
 * Built only for the cuda/musa backends: `cmake --build build/cuda --target coll_smoke`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/coll.h"
#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/version.h"

static int failures;

static void check(int rank, const char *what, int ok) {
    printf("rank %d: %-36s %s\n", rank, what, ok ? "ok" : "FAILED");
    fflush(stdout);
    if (!ok) failures++;
}

static void put(dev_stream *s, void *dst, const void *src, size_t bytes) {
    dev_copy_h2d(s, dst, src, bytes);
    dev_stream_sync(s);
}

static void get(dev_stream *s, void *dst, const void *src, size_t bytes) {
    dev_copy_d2h(s, dst, src, bytes);
    dev_stream_sync(s);
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "coll_smoke");
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: coll_smoke RANK WORLD [timeout|hang]\n");
        return 2;
    }
    const int rank = atoi(argv[1]), world = atoi(argv[2]);
    const int want_timeout = argc > 3 && strcmp(argv[3], "timeout") == 0;
    const int want_hang = argc > 3 && strcmp(argv[3], "hang") == 0;
    const char *sync_env = getenv("TWINRUN_COLL_SYNC");
    const int async = !(sync_env && strcmp(sync_env, "1") == 0);
    printf("rank %d: collectives %s (TWINRUN_COLL_SYNC=%s)\n", rank, async ? "asynchronous" : "synchronous",
           sync_env ? sync_env : "unset");
    /* the timeout case checks the returned status: the watchdog returns instead of ending the process */
    if (want_timeout) setenv("TWINRUN_COLL_ON_TIMEOUT", "return", 0);
    char err[512] = "";
    dev_device *d = dev_open(rank, 0, err, sizeof err);
    if (!d) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    dev_stream *s = dev_stream_default(d);
    int ranks[64];
    for (int i = 0; i < world && i < 64; i++) ranks[i] = i;
    coll_comm *c = coll_comm_create(d, ranks, world, rank, "world", err, sizeof err);
    if (!c) {
        fprintf(stderr, "rank %d: %s\n", rank, err);
        return 1;
    }
    check(rank, "size and rank", coll_comm_size(c) == world && coll_comm_rank(c) == rank);

    enum { N = 1000 };
    const size_t total = (size_t)N * (size_t)world;
    float *h = calloc(total, sizeof *h), *g = calloc(total, sizeof *g);
    float *x = dev_alloc(d, total * sizeof(float), "smoke x");
    float *y = dev_alloc(d, total * sizeof(float), "smoke y");
    const double tri = 0.5 * world * (world + 1); /* sum of rank+1 */

    for (int i = 0; i < N; i++) h[i] = (float)(rank + 1) * (float)(i % 7);
    put(s, x, h, N * sizeof(float));
    int ok = coll_all_reduce(c, s, x, x, N, TR_F32, COLL_SUM) == COLL_OK;
    get(s, g, x, N * sizeof(float));
    for (int i = 0; i < N; i++) ok &= fabs(g[i] - tri * (i % 7)) < 1e-4;
    check(rank, "all_reduce sum fp32 in place", ok);

    put(s, x, h, N * sizeof(float));
    ok = coll_all_reduce(c, s, x, y, N, TR_F32, COLL_AVG) == COLL_OK;
    get(s, g, y, N * sizeof(float));
    for (int i = 0; i < N; i++) ok &= fabs(g[i] - tri / world * (i % 7)) < 1e-4;
    check(rank, "all_reduce avg fp32", ok);

    ok = coll_all_reduce(c, s, x, y, N, TR_F32, COLL_MAX) == COLL_OK;
    get(s, g, y, N * sizeof(float));
    for (int i = 0; i < N; i++) ok &= g[i] == (float)world * (float)(i % 7);
    check(rank, "all_reduce max fp32", ok);

    uint16_t hb[N], gb[N];
    for (int i = 0; i < N; i++) hb[i] = tr_f32_to_bf16((float)(rank + 1));
    put(s, x, hb, sizeof hb);
    ok = coll_all_reduce(c, s, x, x, N, TR_BF16, COLL_SUM) == COLL_OK;
    get(s, gb, x, sizeof gb);
    for (int i = 0; i < N; i++) ok &= tr_bf16_to_f32(gb[i]) == (float)tri;
    check(rank, "all_reduce sum bf16", ok);

    int32_t hi[N], gi[N];
    for (int i = 0; i < N; i++) hi[i] = rank + 1 + i;
    put(s, x, hi, sizeof hi);
    ok = coll_all_reduce(c, s, x, x, N, TR_I32, COLL_SUM) == COLL_OK;
    get(s, gi, x, sizeof gi);
    for (int i = 0; i < N; i++) ok &= gi[i] == (int32_t)tri + world * i;
    check(rank, "all_reduce sum int32", ok);

    for (int i = 0; i < N; i++) h[i] = (float)(rank * 10000 + i);
    put(s, x, h, N * sizeof(float));
    ok = coll_all_gather(c, s, x, y, N, TR_F32) == COLL_OK;
    get(s, g, y, total * sizeof(float));
    for (size_t i = 0; i < total; i++) ok &= g[i] == (float)((i / N) * 10000 + i % N);
    check(rank, "all_gather", ok);

    for (size_t i = 0; i < total; i++) h[i] = (float)(i % 97);
    put(s, x, h, total * sizeof(float));
    ok = coll_reduce_scatter(c, s, x, y, N, TR_F32, COLL_SUM) == COLL_OK;
    get(s, g, y, N * sizeof(float));
    for (int i = 0; i < N; i++) ok &= g[i] == (float)(world * (((size_t)rank * N + i) % 97));
    check(rank, "reduce_scatter sum", ok);

    const int root = world - 1;
    for (int i = 0; i < N; i++) h[i] = rank == root ? (float)(i * 3) : -1.0f;
    put(s, x, h, N * sizeof(float));
    ok = coll_broadcast(c, s, x, N, TR_F32, root) == COLL_OK;
    get(s, g, x, N * sizeof(float));
    for (int i = 0; i < N; i++) ok &= g[i] == (float)(i * 3);
    check(rank, "broadcast from the last rank", ok);

    if (world > 1) { /* ring: send to rank+1, receive from rank-1 */
        for (int i = 0; i < N; i++) h[i] = (float)(rank * 100 + i);
        put(s, x, h, N * sizeof(float));
        coll_group_start();
        ok = coll_send(c, s, x, N, TR_F32, (rank + 1) % world) == COLL_OK;
        ok &= coll_recv(c, s, y, N, TR_F32, (rank + world - 1) % world) == COLL_OK;
        coll_group_end();
        get(s, g, y, N * sizeof(float));
        const int from = (rank + world - 1) % world;
        for (int i = 0; i < N; i++) ok &= g[i] == (float)(from * 100 + i);
        check(rank, "send/recv ring in a group", ok);
    }

    if (world == 1) { /* the group path on one GPU: a send to oneself and the receive, in one group */
        for (int i = 0; i < N; i++) h[i] = (float)(7 * i);
        put(s, x, h, N * sizeof(float));
        coll_group_start();
        ok = coll_send(c, s, x, N, TR_F32, 0) == COLL_OK;
        ok &= coll_recv(c, s, y, N, TR_F32, 0) == COLL_OK;
        coll_group_end();
        get(s, g, y, N * sizeof(float));
        for (int i = 0; i < N; i++) ok &= g[i] == (float)(7 * i);
        check(rank, "send/recv to oneself in a group", ok);
    }

    { /* copy in, collective, copy out, one host wait at the end: the events order all three */
        /* 64 MB: the copy in takes milliseconds, long enough to race (COLL_SMOKE_BIG_MB: fakegpu under TSan) */
        const char *mb = getenv("COLL_SMOKE_BIG_MB");
        const size_t M = (size_t)(mb ? atoi(mb) : 64) << 18;
        float *hb = malloc(M * sizeof *hb), *gbig = malloc(M * sizeof *gbig);
        float *bx = dev_alloc(d, M * sizeof(float), "smoke big x"),
              *by = dev_alloc(d, M * sizeof(float), "smoke big y");
        ok = hb && gbig && bx && by;
        for (int round = 1; ok && round <= 3; round++) {
            for (size_t i = 0; i < M; i++) hb[i] = (float)((i + (size_t)round * 13) % 1021);
            for (size_t i = 0; i < M; i++) gbig[i] = -1.0f;
            dev_copy_h2d(s, bx, hb, M * sizeof(float));
            ok &= coll_all_reduce(c, s, bx, by, M, TR_F32, COLL_SUM) == COLL_OK;
            dev_copy_d2h(s, gbig, by, M * sizeof(float));
            dev_stream_sync(s);
            for (size_t i = 0; i < M && ok; i++) ok &= gbig[i] == (float)world * hb[i];
        }
        check(rank, "h2d -> all_reduce -> d2h, no host wait", ok);
        dev_free(d, by);
        dev_free(d, bx);
        free(gbig);
        free(hb);
    }

    check(rank, "barrier", coll_barrier(c, s) == COLL_OK);

    if (want_hang) {
        /* a communicator of its own, so the hang's sequence number does not depend on the checks above */
        setenv("TWINRUN_COLL_HANG", "hang:1", 1);
        coll_comm *hc = coll_comm_create(d, ranks, world, rank, "hang", err, sizeof err);
        if (!hc) {
            fprintf(stderr, "rank %d: %s\n", rank, err);
            return 1;
        }
        put(s, x, h, N * sizeof(float));
        ok = coll_all_reduce(hc, s, x, x, N, TR_F32, COLL_SUM) == COLL_OK; /* seq 0: runs */
        dev_stream_sync(s);
        check(rank, "hang communicator: seq 0 runs", ok);
        printf("rank %d: seq 1 hangs on the GPU; waiting for the watchdog (timeout %s s)\n", rank,
               getenv("TWINRUN_COLL_TIMEOUT_S") ? getenv("TWINRUN_COLL_TIMEOUT_S") : "default");
        fflush(stdout);
        const double t0 = dev_clock_now(d);
        const coll_status st = coll_all_reduce(hc, s, x, x, N, TR_F32, COLL_SUM); /* seq 1: hangs */
        dev_stream_sync(s);
        printf("rank %d: FAILED: came back from the injected hang (status %d) after %.1f s: the watchdog did not end "
               "the process\n",
               rank, (int)st, dev_clock_now(d) - t0);
        return 3;
    }

    if (want_timeout && world > 1) {
        if (rank == 0 && async) {
            const double t0 = dev_clock_now(d);
            const coll_status st = coll_all_reduce(c, s, x, x, N, TR_F32, COLL_SUM);
            check(rank, "lone all_reduce enqueued -> COLL_OK", st == COLL_OK);
            dev_stream_sync(s); /* comes back once the watchdog thread has aborted the communicator */
            printf("rank 0: lone all_reduce: the stream came back after %.1f s\n", dev_clock_now(d) - t0);
            const coll_status next = coll_barrier(c, s);
            check(rank, "next call -> COLL_TIMEOUT or COLL_ABORTED", next == COLL_TIMEOUT || next == COLL_ABORTED);
        } else if (rank == 0) {
            const double t0 = dev_clock_now(d);
            const coll_status st = coll_all_reduce(c, s, x, x, N, TR_F32, COLL_SUM);
            printf("rank 0: lone all_reduce returned %d after %.1f s\n", (int)st, dev_clock_now(d) - t0);
            check(rank, "lone all_reduce -> COLL_TIMEOUT", st == COLL_TIMEOUT);
            /* the watchdog aborted every communicator of the rank (and dumped its flight recorder) */
            check(rank, "next call -> COLL_ABORTED", coll_barrier(c, s) == COLL_ABORTED);
        } else {
            dev_sleep(d, 2.0 * atof(getenv("TWINRUN_COLL_TIMEOUT_S") ? getenv("TWINRUN_COLL_TIMEOUT_S") : "5"));
            coll_abort(c); /* what the engine does once a peer has failed */
            check(rank, "after coll_abort -> COLL_ABORTED", coll_barrier(c, s) == COLL_ABORTED);
        }
    } else {
        coll_abort(c);
        check(rank, "after coll_abort -> COLL_ABORTED",
              coll_all_reduce(c, s, x, x, N, TR_F32, COLL_SUM) == COLL_ABORTED);
    }
    coll_comm_destroy(c);
    dev_free(d, y);
    dev_free(d, x);
    check(rank, "device memory back to 0", dev_mem_used(d) == 0);
    dev_close(d);
    free(g);
    free(h);
    printf("rank %d: %s\n", rank, failures ? "FAILED" : "all ok");
    return failures ? 1 : 0;
}
