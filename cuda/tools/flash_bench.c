/* flash_bench: times the flash-attention variants (TWINRUN_FLASH_VARIANT, kern_attention_flash.cuh's
 * FLV_*) on the 1.5B model's attention shapes, for one A/B call on a GPU.
 *
 * For each shape (B x T, 32 heads / 8 groups, head dim 64, causal, bf16) and each variant: the
 * forward (tr_cu_flash_forward) and the backward (tr_cu_flash_backward: Delta, dQ, dK/dV and the
 * group reduction, with its scratch allocations) timed with CUDA events around each call, the
 * median of RUNS calls after WARMUP; TFLOP/s on the causal count (forward 2 * 2 * B * T^2 * NH * D / 2,
 * backward 2.5 times that, as FlashAttention reports). Each variant's outputs (out, lse, dq, dk, dv)
 * are compared with the first variant's (plain's) on the same inputs: the variants that keep
 * its arithmetic must give its bits, those with ex2 a relative L2 of at most 1e-2 (bf16 roundings,
 * ~1e-3 in flash_emu); a second run checks that the variant is deterministic. Exits 1 on any such
 * failure.
 *
 * Usage: flash_bench [VARIANT ...]   (names as TWINRUN_FLASH_VARIANT takes them; default: the list below)
 * On the GPU machine: cuda/tools/flash_bench.sh (builds it, runs it, writes OUTDIR/flash_bench.txt). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "cuda_dev.h"
#include "kern_attention_flash.h"
#include "twinrun/version.h"

enum { WARMUP = 3, RUNS = 20, NH = 32, KV = 8, D = 64 };

static const char *k_default_variants[] = {"plain", "rt2",      "ex2",     "rt2+ex2", "occ",
                                           "bq64",  "occ+bq64", "occ+ex2", "all"};

typedef struct shape {
    int B, T;
} shape;
static const shape k_shapes[] = {{1, 4096}, {4, 4096}, {4, 1024}};

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

static void *dalloc(size_t bytes) {
    void *p = dev_alloc(g_dev, bytes, "flash_bench tensor");
    if (!p) {
        fprintf(stderr, "flash_bench: %s\n", dev_last_error(g_dev));
        exit(1);
    }
    return p;
}

static void *halloc(size_t bytes) {
    void *p = malloc(bytes);
    if (!p) {
        fprintf(stderr, "flash_bench: out of host memory\n");
        exit(1);
    }
    return p;
}

/* a device bf16 tensor of n uniform values in [-scale, scale) */
static void *random_bf16(size_t n, double scale) {
    uint16_t *h = halloc(n * 2);
    for (size_t i = 0; i < n; i++) h[i] = bf16_of((float)((2.0 * urand() - 1.0) * scale));
    void *d = dalloc(n * 2);
    dev_copy_h2d(g_s, d, h, n * 2);
    dev_stream_sync(g_s);
    free(h);
    return d;
}

/* One shape's tensors: inputs once, outputs rewritten by every call. */
typedef struct problem {
    int B, T;
    size_t nq, nk, nl; /* elements of q/out/dq/dout, of k/v/dk/dv, of lse */
    void *q, *k, *v, *dout, *out, *dq, *dk, *dv;
    float *lse;
} problem;

/* Host copies of a problem's outputs, for comparing variants. */
typedef struct outputs {
    uint16_t *out, *dq, *dk, *dv;
    float *lse;
} outputs;

static void forward(void *arg) {
    problem *p = arg;
    tr_cu_flash_forward(g_s, tr_buf_make(p->out, TR_BF16), p->lse, tr_buf_make(p->q, TR_BF16),
                        tr_buf_make(p->k, TR_BF16), tr_buf_make(p->v, TR_BF16), NULL, NULL, p->B, p->T, p->T, NH, KV,
                        D);
}

static void backward(void *arg) {
    problem *p = arg;
    tr_cu_flash_backward(g_s, tr_buf_make(p->dq, TR_BF16), tr_buf_make(p->dk, TR_BF16), tr_buf_make(p->dv, TR_BF16),
                         tr_buf_make(p->dout, TR_BF16), tr_buf_make(p->q, TR_BF16), tr_buf_make(p->k, TR_BF16),
                         tr_buf_make(p->v, TR_BF16), tr_buf_make(p->out, TR_BF16), p->lse, NULL, NULL, p->B, p->T, p->T,
                         NH, KV, D);
}

/* the median milliseconds of f(p) (bench_time.h) */
static double time_ms(void (*f)(void *), problem *p) {
    float ms[RUNS];
    tr_cu_bench_times(g_s, WARMUP, RUNS, f, p, ms);
    return 0.5 * (ms[RUNS / 2 - 1] + ms[RUNS / 2]);
}

static void download(problem *p, outputs *o) {
    dev_copy_d2h(g_s, o->out, p->out, p->nq * 2);
    dev_copy_d2h(g_s, o->dq, p->dq, p->nq * 2);
    dev_copy_d2h(g_s, o->dk, p->dk, p->nk * 2);
    dev_copy_d2h(g_s, o->dv, p->dv, p->nk * 2);
    dev_copy_d2h(g_s, o->lse, p->lse, p->nl * 4);
    dev_stream_sync(g_s);
}

static void outputs_alloc(const problem *p, outputs *o) {
    o->out = halloc(p->nq * 2), o->dq = halloc(p->nq * 2);
    o->dk = halloc(p->nk * 2), o->dv = halloc(p->nk * 2);
    o->lse = halloc(p->nl * 4);
}

static void outputs_free(outputs *o) { free(o->out), free(o->dq), free(o->dk), free(o->dv), free(o->lse); }

static bool same_bits(const problem *p, const outputs *a, const outputs *b) {
    return !memcmp(a->out, b->out, p->nq * 2) && !memcmp(a->dq, b->dq, p->nq * 2) && !memcmp(a->dk, b->dk, p->nk * 2) &&
           !memcmp(a->dv, b->dv, p->nk * 2) && !memcmp(a->lse, b->lse, p->nl * 4);
}

static double rel_l2_bf16(const uint16_t *ref, const uint16_t *got, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        const double r = f32_of(ref[i]), g = f32_of(got[i]);
        num += (g - r) * (g - r);
        den += r * r;
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

/* the largest relative L2 difference of out, dq, dk, dv between two variants */
static double max_rel_l2(const problem *p, const outputs *a, const outputs *b) {
    const double r[4] = {rel_l2_bf16(a->out, b->out, p->nq), rel_l2_bf16(a->dq, b->dq, p->nq),
                         rel_l2_bf16(a->dk, b->dk, p->nk), rel_l2_bf16(a->dv, b->dv, p->nk)};
    double m = 0;
    for (int i = 0; i < 4; i++) m = r[i] > m || isnan(r[i]) ? r[i] : m;
    return m;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "flash_bench");
        return 0;
    }
    const char **variants = k_default_variants;
    int nvar = (int)(sizeof k_default_variants / sizeof k_default_variants[0]);
    if (argc > 1) variants = (const char **)(argv + 1), nvar = argc - 1;
    for (int v = 0; v < nvar; v++)
        if (tr_cu_flash_set_variant(variants[v]) < 0) {
            fprintf(stderr,
                    "flash_bench: unknown variant %s (default, plain, or rt2, occ, bq64, ex2, all joined by +)\n",
                    variants[v]);
            return 2;
        }
    char err[256] = "";
    g_dev = dev_open(0, 0, err, sizeof err);
    if (!g_dev) {
        fprintf(stderr, "flash_bench: %s\n", err);
        return 1;
    }
    g_s = dev_stream_default(g_dev);
    dev_info info;
    dev_get_info(g_dev, &info);
    printf("flash_bench on %s: causal bf16 attention, NH %d, KV %d, D %d; median of %d calls after %d; the first\n"
           "variant is the reference of the speed-up and check columns\n",
           info.name, NH, KV, D, RUNS, WARMUP);
    printf("%-10s %-10s %8s %8s %8s %8s %7s %7s  %s\n", "shape", "variant", "fwd ms", "TFLOP/s", "bwd ms", "TFLOP/s",
           "fwd x", "bwd x", "check");
    int failures = 0;
    for (size_t si = 0; si < sizeof k_shapes / sizeof k_shapes[0]; si++) {
        problem p = {.B = k_shapes[si].B, .T = k_shapes[si].T};
        p.nq = (size_t)p.B * p.T * NH * D, p.nk = (size_t)p.B * p.T * KV * D, p.nl = (size_t)p.B * NH * p.T;
        p.q = random_bf16(p.nq, 2.0), p.k = random_bf16(p.nk, 2.0), p.v = random_bf16(p.nk, 1.0);
        p.dout = random_bf16(p.nq, 1.0);
        p.out = dalloc(p.nq * 2), p.dq = dalloc(p.nq * 2), p.dk = dalloc(p.nk * 2), p.dv = dalloc(p.nk * 2);
        p.lse = dalloc(p.nl * 4);
        const double fwd_flop = 2.0 * 2.0 * p.B * (double)p.T * p.T * NH * D / 2.0, bwd_flop = 2.5 * fwd_flop;
        outputs ref, got, again;
        outputs_alloc(&p, &ref), outputs_alloc(&p, &got), outputs_alloc(&p, &again);
        double ref_fwd = 0, ref_bwd = 0, best_fwd = 1e30, best_bwd = 1e30;
        int best_fwd_v = 0, best_bwd_v = 0, ref_flags = 0;
        char label[32];
        snprintf(label, sizeof label, "B%d T%d", p.B, p.T);
        for (int v = 0; v < nvar; v++) {
            const int flags = tr_cu_flash_set_variant(variants[v]);
            const double fwd = time_ms(forward, &p); /* leaves out and lse of this variant for the backward */
            const double bwd = time_ms(backward, &p);
            download(&p, &got);
            forward(&p), backward(&p);
            download(&p, &again);
            char check[96];
            bool ok = same_bits(&p, &got, &again);
            if (!ok) snprintf(check, sizeof check, "NOT DETERMINISTIC");
            else if (v == 0) snprintf(check, sizeof check, "deterministic");
            else if (same_bits(&p, &ref, &got)) snprintf(check, sizeof check, "= %s's bits", variants[0]);
            else {
                /* only ex2 may differ: bf16 roundings that tip the other way (emulator: ~1e-3 at most) */
                const double d = max_rel_l2(&p, &ref, &got);
                ok = ((flags | ref_flags) & TR_CU_FLASH_INEXACT) && d <= 1e-2;
                snprintf(check, sizeof check, "rel L2 vs %s %.1e%s", variants[0], d, ok ? "" : " FAILED");
            }
            failures += !ok;
            if (v == 0) {
                ref_fwd = fwd, ref_bwd = bwd, ref_flags = flags;
                outputs t = ref;
                ref = got, got = t;
            }
            if (fwd < best_fwd) best_fwd = fwd, best_fwd_v = v;
            if (bwd < best_bwd) best_bwd = bwd, best_bwd_v = v;
            printf("%-10s %-10s %8.3f %8.1f %8.3f %8.1f %6.2fx %6.2fx  %s\n", label, variants[v], fwd,
                   fwd_flop / (fwd * 1e9), bwd, bwd_flop / (bwd * 1e9), ref_fwd / fwd, ref_bwd / bwd, check);
            fflush(stdout);
        }
        printf("%-10s best forward %s (%.3f ms, %.2fx), best backward %s (%.3f ms, %.2fx)\n", label,
               variants[best_fwd_v], best_fwd, ref_fwd / best_fwd, variants[best_bwd_v], best_bwd, ref_bwd / best_bwd);
        outputs_free(&ref), outputs_free(&got), outputs_free(&again);
        void *bufs[] = {p.q, p.k, p.v, p.dout, p.out, p.dq, p.dk, p.dv, p.lse};
        for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(g_dev, bufs[i]);
    }
    dev_close(g_dev);
    printf("flash_bench: %s (%d failure(s))\n", failures ? "FAILED" : "all ok", failures);
    return failures ? 1 : 0;
}
