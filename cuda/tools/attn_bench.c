/* attn_bench: twinrun's attention kernels timed through the engine's entry points
 * (kern_attention_forward / kern_attention_backward, causal, GQA, bf16), each path of
 * TWINRUN_ATTENTION in turn: cudnn (cuDNN's fused flash attention, kern_attention_cudnn.c), cudnn with
 * the deterministic backward (dev_set_deterministic, as --deterministic-mode sets it), and flash
 * (twinrun's own tensor-core kernels).
 *
 * Shapes: head dim 64 and 128, T 1024 (micro-batch 4), 4096 and 8192 (micro-batch 1), 32 query heads
 * and 8 groups. Each call is timed between CUDA events, the median of RUNS after WARMUP; TFLOP/s on
 * the causal count (forward 4 B NH T^2 D / 2, backward 2.5 times that). The cudnn paths' outputs are
 * compared with flash's on the same inputs (relative L2 of out, dq, dk, dv; bf16 roundings of the
 * same function: at most 2e-2), and each path is run twice, before and after its timed calls: both
 * runs are compared, and "bits" says whether the two gave the same bits. Exits 1 when a comparison fails or a deterministic path is not.
 *
 * Output: one line per (shape, path), "attn path D T B fwd_ms bwd_ms fwd_tflops bwd_tflops rel_l2
 * bits", which lab/attn_bench.sh puts beside torch's SDPA backends; and "host path D T B enqueue fwd
 * .. us bwd .. us a call": the host's time to enqueue a call, which the event times include when it is
 * not below them (the GPU idles between calls).
 *
 * TWINRUN_ATTN_BENCH_SHAPE="D T" runs one shape and TWINRUN_ATTN_BENCH_PATHS="cudnn ..." some of the
 * paths: lab/attn_bench.sh's interleaved rounds, where each process times one path of one shape beside
 * torch's (without flash's run no path is compared: rel_l2 prints as "-"). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_time.h"
#include "cuda_dev.h"
#include "kern_attention_cudnn.h"
#include "twinrun/version.h"

enum { WARMUP = 3, RUNS = 15, NH = 32, KV = 8 };

static dev_device *g_dev;
static dev_stream *g_s;
static uint64_t g_rng = 4242;

static double urand(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static uint16_t bf16_of(float f) { /* nearest-even; the inputs are finite */
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static float f32_of(uint16_t h) {
    const uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void *halloc(size_t bytes) {
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "attn_bench: out of host memory\n");
        exit(1);
    }
    return p;
}

static void *dalloc(size_t bytes) {
    void *p = dev_alloc(g_dev, bytes, "attn_bench tensor");
    if (!p) {
        fprintf(stderr, "attn_bench: %s\n", dev_last_error(g_dev));
        exit(1);
    }
    return p;
}

static void *random_bf16(size_t n, double scale) {
    uint16_t *h = halloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = bf16_of((float)((2.0 * urand() - 1.0) * scale));
    void *d = dalloc(n * 2);
    dev_copy_h2d(g_s, d, h, n * 2);
    dev_stream_sync(g_s);
    free(h);
    return d;
}

typedef struct problem {
    int B, T, D;
    size_t nq, nk, nl;
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *lse;
} problem;

static tr_buf bf(void *p) { return tr_buf_make(p, TR_BF16); }

static void forward(void *arg) {
    problem *p = arg;
    kern_attention_forward(g_s, bf(p->out), p->lse, bf(p->q), bf(p->k), bf(p->v), p->B, p->T, NH, KV, p->D);
}

static void backward(void *arg) {
    problem *p = arg;
    kern_attention_backward(g_s, bf(p->dq), bf(p->dk), bf(p->dv), bf(p->dout), bf(p->q), bf(p->k), bf(p->v), bf(p->out),
                            p->lse, p->B, p->T, NH, KV, p->D);
}

/* the median milliseconds of f(p) (bench_time.h) */
static double time_ms(void (*f)(void *), problem *p) {
    float ms[RUNS];
    tr_cu_bench_times(g_s, WARMUP, RUNS, f, p, ms);
    return ms[RUNS / 2];
}

/* The host's microseconds a call of f(p) takes to enqueue, over RUNS calls without a wait: a path whose
 * calls wait for the GPU (or enqueue slower than it runs) shows here near its event time, and the GPU
 * then idles between calls, which the event time counts. */
static double host_us(void (*f)(void *), problem *p) {
    dev_stream_sync(g_s);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int i = 0; i < RUNS; i++) f(p);
    clock_gettime(CLOCK_MONOTONIC, &b);
    dev_stream_sync(g_s);
    return ((double)(b.tv_sec - a.tv_sec) * 1e6 + (double)(b.tv_nsec - a.tv_nsec) * 1e-3) / RUNS;
}

/* host copies of out, dq, dk, dv (bf16) after one forward and backward */
typedef struct outputs {
    uint16_t *t[4];
} outputs;

static void run_once(problem *p, outputs *o) {
    forward(p);
    backward(p);
    void *src[4] = {p->out, p->dq, p->dk, p->dv};
    const size_t n[4] = {p->nq, p->nq, p->nk, p->nk};
    for (int i = 0; i < 4; i++) {
        o->t[i] = halloc(n[i] * 2);
        dev_copy_d2h(g_s, o->t[i], src[i], n[i] * 2);
    }
    dev_stream_sync(g_s);
}

static void outputs_free(outputs *o) {
    for (int i = 0; i < 4; i++) free(o->t[i]);
}

static double max_rel_l2(const problem *p, const outputs *ref, const outputs *got) {
    const size_t n[4] = {p->nq, p->nq, p->nk, p->nk};
    double worst = 0;
    for (int t = 0; t < 4; t++) {
        double num = 0, den = 0;
        for (size_t i = 0; i < n[t]; i++) {
            const double r = f32_of(ref->t[t][i]), g = f32_of(got->t[t][i]);
            num += (g - r) * (g - r);
            den += r * r;
        }
        const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
        worst = rel > worst || isnan(rel) ? rel : worst;
    }
    return worst;
}

static bool same_bits(const problem *p, const outputs *a, const outputs *b) {
    const size_t n[4] = {p->nq, p->nq, p->nk, p->nk};
    for (int t = 0; t < 4; t++)
        if (memcmp(a->t[t], b->t[t], n[t] * 2)) return false;
    return true;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "attn_bench");
        return 0;
    }
    char err[256] = "";
    g_dev = dev_open(0, 0, err, sizeof err);
    if (!g_dev) {
        fprintf(stderr, "attn_bench: %s\n", err);
        return 1;
    }
    g_s = dev_stream_default(g_dev);
    const bool have_cudnn = tr_cu_cudnn_usable(g_s);
    printf("attn_bench: cuDNN fused attention %s; heads %d/%d, causal, bf16\n",
           have_cudnn ? "available" : "NOT available (built without it or unusable)", NH, KV);
    const int dims[] = {64, 128};
    const int shapes[][2] = {{4, 1024}, {1, 4096}, {1, 8192}}; /* B, T */
    /* flash first: the reference the others are compared with */
    const char *paths[] = {"flash", "cudnn", "cudnn-det"};
    /* TWINRUN_ATTN_BENCH_SHAPE="D T": that shape alone (a profiler's run) */
    int only_d = 0, only_t = 0;
    const char *only = getenv("TWINRUN_ATTN_BENCH_SHAPE");
    if (only && sscanf(only, "%d %d", &only_d, &only_t) != 2) {
        fprintf(stderr, "attn_bench: TWINRUN_ATTN_BENCH_SHAPE is '%s': give the head dim and T, e.g. \"128 8192\"\n",
                only);
        return 2;
    }
    bool want[3] = {true, true, true};
    const char *only_paths = getenv("TWINRUN_ATTN_BENCH_PATHS");
    if (only_paths && *only_paths) {
        char buf[128];
        snprintf(buf, sizeof buf, "%s", only_paths);
        want[0] = want[1] = want[2] = false;
        for (char *tok = strtok(buf, " ,"); tok; tok = strtok(NULL, " ,")) {
            int pi = 0;
            while (pi < 3 && strcmp(tok, paths[pi]) != 0) pi++;
            if (pi == 3) {
                fprintf(stderr,
                        "attn_bench: TWINRUN_ATTN_BENCH_PATHS names '%s': give some of flash, cudnn, cudnn-det\n", tok);
                return 2;
            }
            want[pi] = true;
        }
    }
    int fails = 0;
    for (int di = 0; di < 2; di++) {
        for (int si = 0; si < 3; si++) {
            if (only && (dims[di] != only_d || shapes[si][1] != only_t)) continue;
            problem p = {.B = shapes[si][0], .T = shapes[si][1], .D = dims[di]};
            p.nq = (size_t)p.B * p.T * NH * p.D, p.nk = (size_t)p.B * p.T * KV * p.D, p.nl = (size_t)p.B * NH * p.T;
            p.q = random_bf16(p.nq, 1.0), p.k = random_bf16(p.nk, 1.0), p.v = random_bf16(p.nk, 1.0);
            p.dout = random_bf16(p.nq, 1.0);
            p.out = dalloc(p.nq * 2), p.dq = dalloc(p.nq * 2), p.dk = dalloc(p.nk * 2), p.dv = dalloc(p.nk * 2);
            p.lse = dalloc(p.nl * 4);
            const double flops = 4.0 * p.B * NH * (double)p.T * p.T * p.D / 2.0;
            outputs ref = {{0}};
            for (int pi = 0; pi < 3; pi++) {
                const bool det = pi == 2;
                if (!want[pi] || (pi > 0 && !have_cudnn)) continue;
                tr_cu_attention_set_path(pi == 0 ? "flash" : "cudnn");
                dev_set_deterministic(g_dev, det);
                /* b after the timed calls too: a path whose scratch carried one call's sums into the next
                 * (an accumulator not cleared) would pass on the first call and fail here */
                outputs a, b;
                run_once(&p, &a);
                const double fwd = time_ms(forward, &p), bwd = time_ms(backward, &p);
                run_once(&p, &b);
                const bool bits = same_bits(&p, &a, &b);
                /* the reference: flash's outputs, when flash ran */
                const outputs *ref_of = pi == 0 ? &a : ref.t[0] ? &ref : NULL;
                const double rel_a = pi == 0 || !ref_of ? 0.0 : max_rel_l2(&p, ref_of, &a);
                const double rel_b = ref_of ? max_rel_l2(&p, ref_of, &b) : 0.0;
                const double rel = rel_a > rel_b || isnan(rel_a) ? rel_a : rel_b;
                const bool bad = rel > 2e-2 || isnan(rel) || ((pi == 0 || det) && !bits);
                fails += bad;
                char rel_s[16] = "-";
                if (ref_of) snprintf(rel_s, sizeof rel_s, "%.2e", rel);
                printf("attn %-9s D %3d T %5d B %d fwd %8.3f ms bwd %8.3f ms  %6.1f / %6.1f TFLOP/s  rel_l2 %s  "
                       "bits %s%s\n",
                       paths[pi], p.D, p.T, p.B, fwd, bwd, flops / fwd * 1e-9, 2.5 * flops / bwd * 1e-9, rel_s,
                       bits ? "same" : "differ", bad ? "  FAILED" : "");
                printf("host %-9s D %3d T %5d B %d enqueue fwd %8.1f us bwd %8.1f us a call\n", paths[pi], p.D, p.T,
                       p.B, host_us(forward, &p), host_us(backward, &p));
                fflush(stdout);
                if (pi == 0) ref = a;
                else outputs_free(&a);
                outputs_free(&b);
            }
            if (ref.t[0]) outputs_free(&ref);
            void *bufs[] = {p.q, p.k, p.v, p.dout, p.out, p.dq, p.dk, p.dv, p.lse};
            for (int i = 0; i < 9; i++) dev_free(g_dev, bufs[i]);
        }
    }
    dev_close(g_dev);
    printf("attn_bench: %s\n", fails ? "FAILED" : "ok");
    return fails ? 1 : 0;
}
