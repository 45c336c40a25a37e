/* gemm_fp8_bench: the FP8 GEMM (kern_gemm_fp8) against the bf16 GEMM (kern_gemm) on a linear layer's
 * three GEMMs, through the engine's entry points, at the 8B and 1.5B models' shapes (M = 8192 token
 * rows: one 8192-token sequence; N, K the layer's out and in features):
 *
 *   fwd    y[M,N]  = x[M,K] @ w[N,K]^T       (bf16 out; FP8 e4m3 x e4m3, fast accumulation)
 *   dgrad  dx[M,K] = dy[M,N] @ w[N,K]        (bf16 out; e5m2 x e4m3, split accumulation)
 *   wgrad  dw[N,K] += dy[M,N]^T @ x[M,K]     (fp32 accumulated; e5m2 x e4m3, split accumulation)
 *
 * The bf16 GEMM takes the operands as the engine keeps them (dgrad ta F tb F, wgrad ta T tb F); the FP8
 * one as the engine's casts write them, every GEMM in cuBLASLt's native TN layout (ta F, tb T: dgrad's
 * w and wgrad's dy and x transposed by kern_fp8_cast_transpose). Each call is timed between CUDA events
 * (the median of RUNS after WARMUP). "fp8" is kern_gemm_fp8 alone (operands already FP8); "fp8+q" adds
 * the casts of both operands from bf16 (with their amax), as the engine pays them. TFLOP/s on 2 M N K;
 * "x" columns are bf16 time over FP8 time. TWINRUN_FP8_FAST_ACCUM=0 turns fwd's fast accumulation off.
 *
 * Usage: gemm_fp8_bench [--quick] (--quick: the 1.5B shapes alone). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_time.h"
#include "cuda_dev.h"
#include "twinrun/version.h"

enum { WARMUP = 3, RUNS = 11, M_ROWS = 8192 };

static dev_device *g_dev;
static dev_stream *g_s;

typedef struct problem {
    int m, n, k;
    bool ta, tb; /* the bf16 GEMM's layout; the FP8 one's is always ta F, tb T */
    bool fast;
    tr_dtype cdt;
    float beta;
    tr_buf a16, b16, c; /* bf16 operands (a: op(a) [m,k], b: op(b) [k,n], stored as ta/tb say) */
    uint8_t *a8, *b8;
    tr_fp8_format fa, fb;
    float *scale, *scale_inv, *amax; /* [2] each: a, b */
} problem;

static void run_bf16(void *arg) {
    problem *p = arg;
    kern_gemm(g_s, p->c, p->a16, p->b16, p->m, p->n, p->k, p->ta, p->tb, 1.0f, p->beta);
}

static void run_fp8(void *arg) {
    problem *p = arg;
    const kern_fp8_operand a = {p->a8, p->fa, p->scale_inv}, b = {p->b8, p->fb, p->scale_inv + 1};
    kern_gemm_fp8(g_s, p->c, a, b, p->m, p->n, p->k, false, true, 1.0f, p->beta, p->fast);
}

static void run_fp8_quant(void *arg) {
    problem *p = arg;
    /* op(a) [m,k] and op(b)^T [n,k] from the bf16 operands as stored: a cast, or a cast-transpose */
    kern_fp8_cast_transpose(g_s, p->ta ? NULL : p->a8, p->ta ? p->a8 : NULL, p->amax, p->a16, p->scale,
                            p->ta ? p->k : p->m, p->ta ? p->m : p->k, p->fa);
    kern_fp8_cast_transpose(g_s, p->tb ? p->b8 : NULL, p->tb ? NULL : p->b8, p->amax + 1, p->b16, p->scale + 1,
                            p->tb ? p->n : p->k, p->tb ? p->k : p->n, p->fb);
    run_fp8(p);
}

/* the median milliseconds of f(p) (bench_time.h) */
static double time_ms(void (*f)(void *), problem *p) {
    float ms[RUNS];
    tr_cu_bench_times(g_s, WARMUP, RUNS, f, p, ms);
    return ms[RUNS / 2];
}

static void *alloc(size_t bytes, const char *what) {
    void *p = dev_alloc(g_dev, bytes, what);
    if (!p) {
        fprintf(stderr, "gemm_fp8_bench: %s\n", dev_last_error(g_dev));
        exit(1);
    }
    return p;
}

/* bf16 values in [-1, 1) (a fixed pattern: the timing does not depend on them). */
static void fill_bf16(void *d, size_t n) {
    uint16_t *h = malloc(n * 2);
    if (!h) exit(1);
    uint32_t x = 12345;
    for (size_t i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        h[i] = tr_f32_to_bf16((float)((double)(x >> 8) / (double)(1u << 24) * 2.0 - 1.0));
    }
    dev_copy_h2d(g_s, d, h, n * 2);
    dev_stream_sync(g_s);
    free(h);
}

static void bench(const char *model, const char *layer, const char *gemm, int m, int n, int k, bool ta, bool tb,
                  bool fast, tr_fp8_format fa, tr_fp8_format fb, tr_dtype cdt, float beta) {
    problem p = {.m = m, .n = n, .k = k, .ta = ta, .tb = tb, .cdt = cdt, .beta = beta, .fa = fa, .fb = fb};
    p.fast = fast;
    const size_t an = (size_t)m * k, bn = (size_t)k * n, cn = (size_t)m * n;
    p.a16 = tr_buf_make(alloc(an * 2, "a bf16"), TR_BF16);
    p.b16 = tr_buf_make(alloc(bn * 2, "b bf16"), TR_BF16);
    p.c = tr_buf_make(alloc(cn * tr_dtype_size(cdt), "c"), cdt);
    p.a8 = alloc(an, "a fp8");
    p.b8 = alloc(bn, "b fp8");
    p.scale = alloc(2 * sizeof(float), "scale");
    p.scale_inv = alloc(2 * sizeof(float), "scale_inv");
    p.amax = alloc(2 * sizeof(float), "amax");
    fill_bf16(p.a16.p, an);
    fill_bf16(p.b16.p, bn);
    dev_memset_zero(g_s, p.c.p, cn * tr_dtype_size(cdt));
    const float sc[2] = {fa == TR_FP8_E5M2 ? 8192.0f : 256.0f, fb == TR_FP8_E5M2 ? 8192.0f : 256.0f};
    const float si[2] = {1.0f / sc[0], 1.0f / sc[1]}, zero[2] = {0.0f, 0.0f};
    dev_copy_h2d(g_s, p.scale, sc, sizeof sc);
    dev_copy_h2d(g_s, p.scale_inv, si, sizeof si);
    dev_copy_h2d(g_s, p.amax, zero, sizeof zero);
    kern_fp8_quantize(g_s, p.a8, NULL, p.a16, p.scale, an, fa);
    kern_fp8_quantize(g_s, p.b8, NULL, p.b16, p.scale + 1, bn, fb);
    dev_stream_sync(g_s);
    const double t16 = time_ms(run_bf16, &p), t8 = time_ms(run_fp8, &p), t8q = time_ms(run_fp8_quant, &p);
    const double tf = 2.0 * m * (double)n * k * 1e-9; /* GFLOP: / ms = TFLOP/s */
    printf("%-5s %-4s %-5s %6d %6d %6d  %c%c %s.%s>%-4s %9.3f %7.1f %9.3f %7.1f %9.3f %7.1f %6.2f %6.2f\n", model,
           layer, gemm, m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N', tr_fp8_name(fa), tr_fp8_name(fb), tr_dtype_name(cdt),
           t16, tf / t16, t8, tf / t8, t8q, tf / t8q, t16 / t8, t16 / t8q);
    fflush(stdout);
    dev_free(g_dev, p.amax);
    dev_free(g_dev, p.scale_inv);
    dev_free(g_dev, p.scale);
    dev_free(g_dev, p.b8);
    dev_free(g_dev, p.a8);
    dev_free(g_dev, p.c.p);
    dev_free(g_dev, p.b16.p);
    dev_free(g_dev, p.a16.p);
}

/* A linear layer y = x w^T with w [N, K], M token rows: its three GEMMs. */
static void layer(const char *model, const char *name, int N, int K) {
    const int M = M_ROWS;
    bench(model, name, "fwd", M, N, K, false, true, true, TR_FP8_E4M3, TR_FP8_E4M3, TR_BF16, 0.0f);
    bench(model, name, "dgrad", M, K, N, false, false, false, TR_FP8_E5M2, TR_FP8_E4M3, TR_BF16, 0.0f);
    bench(model, name, "wgrad", N, K, M, true, false, false, TR_FP8_E5M2, TR_FP8_E4M3, TR_F32, 1.0f);
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "gemm_fp8_bench");
        return 0;
    }
    const bool quick = argc == 2 && strcmp(argv[1], "--quick") == 0;
    if (argc > 2 || (argc == 2 && !quick)) {
        fprintf(stderr, "usage: gemm_fp8_bench [--quick]\n");
        return 2;
    }
    char err[256] = "";
    g_dev = dev_open(0, 0, err, sizeof err);
    if (!g_dev) {
        fprintf(stderr, "gemm_fp8_bench: %s\n", err);
        return 1;
    }
    g_s = dev_stream_default(g_dev);
    dev_info info;
    dev_get_info(g_dev, &info);
    const char *fast = getenv("TWINRUN_FP8_FAST_ACCUM");
    printf("gemm_fp8_bench on %s (%s): median of %d after %d warm-up; TWINRUN_FP8_FAST_ACCUM=%s\n", info.name,
           info.backend, RUNS, WARMUP, fast && *fast ? fast : "1 (the default)");
    printf("%-5s %-4s %-5s %6s %6s %6s  %-17s %9s %7s %9s %7s %9s %7s %6s %6s\n", "model", "lin", "gemm", "M", "N", "K",
           "op types", "bf16_ms", "TFLOP/s", "fp8_ms", "TFLOP/s", "fp8+q_ms", "TFLOP/s", "x", "x+q");
    /* 1.5B: hidden 2048, FFN 8192, 32 heads of 64, 8 groups (qkv 2048 + 2 * 512) */
    layer("1.5B", "qkv", 3072, 2048);
    layer("1.5B", "proj", 2048, 2048);
    layer("1.5B", "fc1", 2 * 8192, 2048);
    layer("1.5B", "fc2", 2048, 8192);
    if (!quick) { /* 8B: hidden 4096, FFN 14336, 32 heads of 128, 8 groups */
        layer("8B", "qkv", 6144, 4096);
        layer("8B", "fc1", 2 * 14336, 4096);
        layer("8B", "fc2", 4096, 14336);
    }
    dev_close(g_dev);
    return 0;
}
