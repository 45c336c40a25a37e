/* The collective test as the guide stages it (FAQ Q3): one node's cards, two nodes, one model-parallel
 * group, all ranks; all-reduce, all-gather, reduce-scatter and send/recv at each size, every group of a
 * stage at once, each timed by its ranks on the device clock (wall time on GPUs, the cost model's
 * simulated time in the twin). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_internal.h"
#include "twinrun/err.h"

const char *doctor_round_stage(int round) {
    static const char *const names[DOCTOR_ROUNDS] = {"one_node", "two_nodes", "two_nodes", "mp_group", "all_ranks"};
    return (unsigned)round < DOCTOR_ROUNDS ? names[round] : "?";
}

const char *doctor_op_name(int op) {
    static const char *const names[DOCTOR_OPS] = {"all_reduce", "all_gather", "reduce_scatter", "sendrecv"};
    return (unsigned)op < DOCTOR_OPS ? names[op] : "?";
}

/* nccl-tests, doc/PERFORMANCE.md: busbw = algbw x 2(n-1)/n for all-reduce, (n-1)/n for all-gather and
 * reduce-scatter (S the whole gathered or scattered buffer), 1 for send/recv. */
double doctor_busbw_factor(int op, int n) {
    if (n < 1) return 0;
    switch (op) {
    case DOCTOR_OP_ALL_REDUCE: return 2.0 * (n - 1) / n;
    case DOCTOR_OP_ALL_GATHER:
    case DOCTOR_OP_REDUCE_SCATTER: return (double)(n - 1) / n;
    default: return 1.0;
    }
}

size_t doctor_op_bytes(int op, size_t size, int n) {
    size_t elems = size / sizeof(float);
    if (elems < 1) elems = 1;
    if (op == DOCTOR_OP_ALL_GATHER || op == DOCTOR_OP_REDUCE_SCATTER) {
        size_t block = elems / (size_t)n;
        elems = (block ? block : 1) * (size_t)n;
    }
    return elems * sizeof(float);
}

int doctor_group(const doctor_options *o, int world, int round, int rank, int *ranks) {
    const int g = o->gpus_per_node, nodes = world / g, node = rank / g;
    int n = 0;
    switch (round) {
    case DOCTOR_R_NODE:
        for (int r = node * g; r < (node + 1) * g; r++) ranks[n++] = r;
        return n;
    case DOCTOR_R_PAIR_A:
    case DOCTOR_R_PAIR_B: {
        if (nodes < 2 || (round == DOCTOR_R_PAIR_B && nodes < 3)) return 0;
        /* A: 0-1, 2-3, ...; B: 1-2, 3-4, ..., and with an even count (n-1)-0, so every node is in two pairs */
        const int shift = round == DOCTOR_R_PAIR_B;
        const int pos = (node - shift + nodes) % nodes, first = pos - pos % 2;
        if (first + 1 >= nodes) return 0; /* the odd node out */
        int a = (first + shift) % nodes, b = (first + 1 + shift) % nodes;
        if (a > b) a ^= b, b ^= a, a ^= b;
        for (int r = a * g; r < (a + 1) * g; r++) ranks[n++] = r;
        for (int r = b * g; r < (b + 1) * g; r++) ranks[n++] = r;
        return n;
    }
    case DOCTOR_R_MP: {
        /* Megatron's order, tp fastest (tp-cp-dp-pp): the ranks of one data-parallel index */
        const int tc = o->tp * o->cp, mp = tc * o->pp, dp = world / mp;
        if (mp < 1 || world % mp) return 0;
        const int d = rank / tc % dp;
        for (int p = 0; p < o->pp; p++)
            for (int i = 0; i < tc; i++) ranks[n++] = (p * dp + d) * tc + i;
        return n;
    }
    case DOCTOR_R_ALL:
        for (int r = 0; r < world; r++) ranks[n++] = r;
        return n;
    }
    return 0;
}

static int my_index(const int *ranks, int n, int rank) {
    for (int i = 0; i < n; i++)
        if (ranks[i] == rank) return i;
    return -1;
}

static void one_op(coll_comm *c, dev_stream *s, int op, void *a, void *b, size_t bytes, int n, int me) {
    const size_t elems = bytes / sizeof(float), block = elems / (size_t)n;
    switch (op) {
    case DOCTOR_OP_ALL_REDUCE: coll_all_reduce(c, s, a, b, elems, TR_F32, COLL_SUM); break;
    case DOCTOR_OP_ALL_GATHER: coll_all_gather(c, s, a, b, block, TR_F32); break;
    case DOCTOR_OP_REDUCE_SCATTER: coll_reduce_scatter(c, s, a, b, block, TR_F32, COLL_SUM); break;
    case DOCTOR_OP_SENDRECV:
        /* nccl-tests' sendrecv: each rank sends to the next and receives from the previous */
        coll_group_start();
        coll_send(c, s, a, elems, TR_F32, (me + 1) % n);
        coll_recv(c, s, b, elems, TR_F32, (me + n - 1) % n);
        coll_group_end();
        break;
    }
}

/* One round on this rank's group: every op at every size, one warm-up then `iters` timed. */
static int run_round(const doctor_options *o, dev_device *d, int round, int rank, int iters, const int *ranks, int n,
                     doctor_wire *w, char *err, size_t errlen) {
    char name[32];
    snprintf(name, sizeof name, "doctor_%s%s", doctor_round_stage(round), round == DOCTOR_R_PAIR_B ? "_b" : "");
    coll_comm *c = coll_comm_create(d, ranks, n, rank, name, err, errlen);
    if (!c) return -1;
    size_t most = 0;
    for (int k = 0; k < o->nsizes; k++) most = o->sizes[k] > most ? o->sizes[k] : most;
    most = doctor_op_bytes(DOCTOR_OP_ALL_REDUCE, most, 1);
    void *a = dev_alloc(d, most, "doctor: send buffer"), *b = dev_alloc(d, most, "doctor: receive buffer");
    if (!a || !b) {
        tr_errf(err, errlen, "%s", dev_last_error(d));
        if (a) dev_free(d, a);
        coll_comm_destroy(c);
        return -1;
    }
    dev_stream *s = dev_stream_default(d);
    const int me = my_index(ranks, n, rank);
    for (int op = 0; op < DOCTOR_OPS; op++)
        for (int k = 0; k < o->nsizes; k++) {
            const size_t bytes = doctor_op_bytes(op, o->sizes[k], n);
            /* the in-place forms NCCL allows: this rank's block of the large buffer */
            void *src = a, *dst = b;
            if (op == DOCTOR_OP_ALL_GATHER) src = (char *)b + (size_t)me * (bytes / (size_t)n);
            if (op == DOCTOR_OP_REDUCE_SCATTER) dst = (char *)a + (size_t)me * (bytes / (size_t)n);
            one_op(c, s, op, src, dst, bytes, n, me);
            coll_barrier(c, s);
            dev_stream_sync(s);
            const double t0 = dev_clock_now(d);
            for (int i = 0; i < iters; i++) one_op(c, s, op, src, dst, bytes, n, me);
            dev_stream_sync(s);
            w->times[doctor_time_index(round, op, k)] = (dev_clock_now(d) - t0) / iters;
        }
    dev_free(d, a);
    dev_free(d, b);
    coll_comm_destroy(c);
    return 0;
}

int doctor_coll_test(const doctor_options *o, dev_device *d, int rank, int world, int iters, doctor_wire *w, char *err,
                     size_t errlen) {
    for (int i = 0; i < DOCTOR_TIMES; i++) w->times[i] = -1;
    if (world < 2) return 0;
    int *ranks = malloc(sizeof *ranks * (size_t)world);
    if (!ranks) return tr_errf(err, errlen, "out of host memory for the collective test");
    int rc = 0;
    for (int round = 0; round < DOCTOR_ROUNDS && !rc; round++) {
        const int n = doctor_group(o, world, round, rank, ranks);
        if (n < 2) continue;
        rc = run_round(o, d, round, rank, iters, ranks, n, w, err, errlen);
    }
    free(ranks);
    return rc;
}
