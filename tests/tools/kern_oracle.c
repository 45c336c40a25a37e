/* kern_oracle: the twin's CPU kernels as the oracle for the GPU kernels (DESIGN.md §2), on random
 * inputs large enough to cross every tile, chunk and block boundary of cuda (attention over
 * more than 256 keys, norm over more than 64 rows, sums over many blocks, repeated tokens...).
 *
 * The twin's sim/kern sources are compiled into this program with every kern_X of TR_KERNELS (kern.h)
 * renamed twin_kern_X (see cuda/CMakeLists.txt); they run on host copies, the GPU kernels on device copies of
 * the same inputs. Each output is compared by relative L2 (fp32: 2e-5 forward, 1e-4 gradients;
 * bf16: 1e-2), and each GPU case runs twice to check the bits are identical (determinism). FP8 (--only
 * fp8): the quantising cast's bytes and amax and the scale update's outputs bit for bit, the FP8 GEMM
 * by relative L2 (fp32 output 3e-4, 1e-3 with the forward's fast accumulation: Hopper's FP8 accumulation,
 * see case_fp8_gemm; bf16 output 4e-3).
 * Prints one line per output; exits non-zero on any failure. Built for the cuda backend only. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/kern.h"
#include "twinrun/master_split.h"
#include "twinrun/version.h"

/* ---- the twin's kernels, renamed: twin_kern_X, declared from the one kernel list (kern.h) --------- */
#define TWIN_KERNEL_DECLARE(name, params) void twin_##name params;
TR_KERNELS(TWIN_KERNEL_DECLARE)
#undef TWIN_KERNEL_DECLARE

/* The twin kernels' cost hook (sim/include/twin_cost.h), which the twin's device defines. The oracle runs
 * them with a NULL stream and no simulated clock, so kern_cost never calls this; it only has to link. */
struct twin_kernel_cost; /* sim/include/twin_cost.h: what a launch is; only passed through here */
void twin_cost_kernel(dev_stream *s, const struct twin_kernel_cost *kc);
void twin_cost_kernel(dev_stream *s, const struct twin_kernel_cost *kc) { (void)s, (void)kc; }
/* and their predict-mode test (kern_shape_only), likewise never called with a NULL stream */
bool twin_stream_shape_only(const dev_stream *s);
bool twin_stream_shape_only(const dev_stream *s) {
    (void)s;
    return false;
}

/* Likewise the twin's deferred work (sim/include/twin_defer.h): with a NULL stream the kernels run their
 * math at once (kern_submit) and never drain. */
void twin_kern_submit(dev_stream *s, void (*fn)(void *), void *args, size_t size);
void twin_kern_submit(dev_stream *s, void (*fn)(void *), void *args, size_t size) {
    (void)s, (void)size;
    fn(args);
}
void twin_kern_drain(dev_stream *s);
void twin_kern_drain(dev_stream *s) { (void)s; }
/* and the stream hazard check's declaration of what a launch touches (sim/include/twin_stream.h):
 * kern_access skips it for a NULL stream; it only has to link */
struct twin_access;
void twin_stream_op(dev_stream *s, const char *what, const char *detail, const struct twin_access *acc, int n);
void twin_stream_op(dev_stream *s, const char *what, const char *detail, const struct twin_access *acc, int n) {
    (void)s, (void)what, (void)detail, (void)acc, (void)n;
}

/* ---- tensors held twice: host (twin) and device (GPU), from one initial value ----------------- */

static dev_device *g_dev;
static dev_stream *g_s;
static int g_fail;
static uint64_t g_rng = 12345;

static double urand(void) { /* splitmix64 -> [0, 1) */
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

typedef struct tens {
    tr_dtype dt;
    size_t n;
    void *h0, *h, *d, *g; /* initial, twin's, device, device result downloaded */
} tens;

#define MAX_T 16
static tens g_t[MAX_T];
static int g_nt;

static tens *t_new(tr_dtype dt, size_t n) {
    tens *t = &g_t[g_nt++];
    const size_t bytes = n * tr_dtype_size(dt);
    t->dt = dt;
    t->n = n;
    t->h0 = calloc(1, bytes + 4);
    t->h = calloc(1, bytes + 4);
    t->g = calloc(1, bytes + 4);
    t->d = dev_alloc(g_dev, bytes ? bytes : 4, "oracle tensor");
    if (!t->h0 || !t->h || !t->g || !t->d) {
        fprintf(stderr, "out of memory: %s\n", dev_last_error(g_dev));
        exit(1);
    }
    return t;
}

static void t_set(tens *t, size_t i, float v) {
    if (t->dt == TR_BF16) ((uint16_t *)t->h0)[i] = tr_f32_to_bf16(v);
    else ((float *)t->h0)[i] = v;
}

static void t_fill(tens *t, float scale) {
    for (size_t i = 0; i < t->n; i++) t_set(t, i, (float)((2.0 * urand() - 1.0) * scale));
}

static void t_fill_int(tens *t, int lo, int hi) {
    for (size_t i = 0; i < t->n; i++) ((int32_t *)t->h0)[i] = lo + (int32_t)(urand() * (hi - lo));
}

static float t_get(const tens *t, const void *base, size_t i) {
    return t->dt == TR_BF16 ? tr_bf16_to_f32(((const uint16_t *)base)[i]) : ((const float *)base)[i];
}

static tr_buf H(tens *t) { return tr_buf_make(t->h, t->dt); }
static tr_buf Dv(tens *t) { return tr_buf_make(t->d, t->dt); }

static void reset_host(void) {
    for (int i = 0; i < g_nt; i++) memcpy(g_t[i].h, g_t[i].h0, g_t[i].n * tr_dtype_size(g_t[i].dt));
}

static void reset_dev(void) {
    for (int i = 0; i < g_nt; i++) dev_copy_h2d(g_s, g_t[i].d, g_t[i].h0, g_t[i].n * tr_dtype_size(g_t[i].dt));
    dev_stream_sync(g_s);
}

static void release(void) {
    for (int i = 0; i < g_nt; i++) {
        dev_free(g_dev, g_t[i].d);
        free(g_t[i].h0);
        free(g_t[i].h);
        free(g_t[i].g);
    }
    g_nt = 0;
}

/* Runs the GPU op twice from the initial state; the outputs must be bit-identical. Keeps the
 * second run's results in each output's g. */
typedef void (*gpu_fn)(void *ctx);

/* false while a case runs a kernel whose sums have no fixed order (cuDNN's default attention backward,
 * dev_set_deterministic off): its two runs are compared with the oracle, not with each other */
static bool g_same_bits = true;

static void run_gpu_twice(const char *name, gpu_fn fn, void *ctx, tens **outs, int nouts) {
    void *first[8] = {NULL};
    for (int r = 0; r < 2; r++) {
        reset_dev();
        fn(ctx);
        dev_stream_sync(g_s);
        for (int o = 0; o < nouts; o++) {
            const size_t bytes = outs[o]->n * tr_dtype_size(outs[o]->dt);
            dev_copy_d2h(g_s, outs[o]->g, outs[o]->d, bytes);
            dev_stream_sync(g_s);
            if (r == 0) {
                first[o] = malloc(bytes + 4);
                memcpy(first[o], outs[o]->g, bytes);
            } else {
                if (g_same_bits && memcmp(first[o], outs[o]->g, bytes) != 0) {
                    printf("  %-48s NOT DETERMINISTIC (output %d)\n", name, o);
                    g_fail++;
                }
                free(first[o]);
            }
        }
    }
}

static void compare(const char *name, const tens *t, double tol_f32) {
    const double tol = t->dt == TR_BF16 ? 1e-2 : tol_f32;
    double num = 0.0, den = 0.0;
    size_t nan_mismatch = 0;
    for (size_t i = 0; i < t->n; i++) {
        const double w = t_get(t, t->h, i), g = t_get(t, t->g, i);
        if (isnan(w) != isnan(g)) nan_mismatch++;
        if (isnan(w) || isnan(g)) continue;
        num += (g - w) * (g - w);
        den += w * w;
    }
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    const int ok = rel <= tol && nan_mismatch == 0;
    printf("  %-48s rel L2 %.3e (bound %.0e)%s\n", name, rel, tol, ok ? "" : "  FAILED");
    if (!ok) g_fail++;
}

/* ---- cases ------------------------------------------------------------------------------------ */

typedef struct gemm_ctx {
    tens *c, *a, *b;
    int m, n, k;
    bool ta, tb;
    float alpha, beta;
} gemm_ctx;

static void gemm_gpu(void *p) {
    gemm_ctx *g = p;
    kern_gemm(g_s, Dv(g->c), Dv(g->a), Dv(g->b), g->m, g->n, g->k, g->ta, g->tb, g->alpha, g->beta);
}

static void case_gemm(tr_dtype ab, tr_dtype cd, bool ta, bool tb, float beta) {
    gemm_ctx g = {NULL, NULL, NULL, 300, 520, 700, ta, tb, 0.75f, beta};
    g.a = t_new(ab, (size_t)g.m * g.k);
    g.b = t_new(ab, (size_t)g.k * g.n);
    g.c = t_new(cd, (size_t)g.m * g.n);
    t_fill(g.a, 1.0f);
    t_fill(g.b, 1.0f);
    if (beta == 0.0f)
        for (size_t i = 0; i < g.c->n; i++) t_set(g.c, i, NAN); /* must be ignored */
    else t_fill(g.c, 1.0f);
    reset_host();
    twin_kern_gemm(NULL, H(g.c), H(g.a), H(g.b), g.m, g.n, g.k, ta, tb, g.alpha, beta);
    char name[96];
    snprintf(name, sizeof name, "gemm %s->%s ta=%d tb=%d beta=%g", tr_dtype_name(ab), tr_dtype_name(cd), ta, tb, beta);
    run_gpu_twice(name, gemm_gpu, &g, &g.c, 1);
    compare(name, g.c, 2e-5);
    release();
}

typedef struct attn_ctx {
    tens *out, *lse, *q, *k, *v, *dout, *dq, *dk, *dv;
    int B, T, NH, KV, D;
} attn_ctx;

static void attn_gpu(void *p) {
    attn_ctx *a = p;
    kern_attention_forward(g_s, Dv(a->out), a->lse->d, Dv(a->q), Dv(a->k), Dv(a->v), a->B, a->T, a->NH, a->KV, a->D);
    kern_attention_backward(g_s, Dv(a->dq), Dv(a->dk), Dv(a->dv), Dv(a->dout), Dv(a->q), Dv(a->k), Dv(a->v), Dv(a->out),
                            a->lse->d, a->B, a->T, a->NH, a->KV, a->D);
}

/* bf16 with D 64 or 128 takes cuDNN (kern_attention_cudnn.c) or the flash kernels, everything else the simple ones. */
static void case_attention(tr_dtype dt, int B, int T, int NH, int KV, int D) {
    attn_ctx a = {.B = B, .T = T, .NH = NH, .KV = KV, .D = D};
    const size_t nq = (size_t)a.B * a.T * a.NH * a.D, nk = (size_t)a.B * a.T * a.KV * a.D;
    a.q = t_new(dt, nq), a.k = t_new(dt, nk), a.v = t_new(dt, nk), a.dout = t_new(dt, nq);
    a.out = t_new(dt, nq), a.lse = t_new(TR_F32, (size_t)a.B * a.NH * a.T);
    a.dq = t_new(dt, nq), a.dk = t_new(dt, nk), a.dv = t_new(dt, nk);
    t_fill(a.q, 2.0f), t_fill(a.k, 2.0f), t_fill(a.v, 1.0f), t_fill(a.dout, 1.0f);
    reset_host();
    twin_kern_attention_forward(NULL, H(a.out), a.lse->h, H(a.q), H(a.k), H(a.v), a.B, a.T, a.NH, a.KV, a.D);
    twin_kern_attention_backward(NULL, H(a.dq), H(a.dk), H(a.dv), H(a.dout), H(a.q), H(a.k), H(a.v), H(a.out), a.lse->h,
                                 a.B, a.T, a.NH, a.KV, a.D);
    tens *outs[] = {a.out, a.lse, a.dq, a.dk, a.dv};
    run_gpu_twice("attention", attn_gpu, &a, outs, 5);
    char name[128];
    const char *nm[] = {"out", "lse", "dq", "dk", "dv"};
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "attention B%d T%d NH%d KV%d D%d %s %s%s", B, T, NH, KV, D, tr_dtype_name(dt),
                 nm[i], g_same_bits ? "" : " nondet");
        compare(name, outs[i], i < 2 ? 2e-5 : 1e-4);
    }
    release();
}

/* Context parallelism, CP = 2 over Tk = 4 L (Megatron's layout: the sequence in 4 chunks of L), the
 * rank's queries Tq = 2 L against the whole all-gathered key sequence (positions 0..Tk-1). rank 1
 * holds chunks 1 and 2 (positions L..3L-1, one run): keys 3L..4L-1 are seen by no query, so their
 * dk/dv must be exactly 0 on both sides; rank 0 holds chunks 0 and 3 (two runs). */
typedef struct attn_pos_ctx {
    tens *out, *lse, *q, *k, *v, *dout, *dq, *dk, *dv, *qp, *kp;
    int B, Tq, Tk, NH, KV, D;
} attn_pos_ctx;

static void attn_pos_gpu(void *p) {
    attn_pos_ctx *a = p;
    kern_attention_forward_pos(g_s, Dv(a->out), a->lse->d, Dv(a->q), Dv(a->k), Dv(a->v), a->qp->d, a->kp->d, a->B,
                               a->Tq, a->Tk, a->NH, a->KV, a->D);
    kern_attention_backward_pos(g_s, Dv(a->dq), Dv(a->dk), Dv(a->dv), Dv(a->dout), Dv(a->q), Dv(a->k), Dv(a->v),
                                Dv(a->out), a->lse->d, a->qp->d, a->kp->d, a->B, a->Tq, a->Tk, a->NH, a->KV, a->D);
}

static void case_attention_pos(tr_dtype dt, int B, int L, int rank, int NH, int KV, int D) {
    attn_pos_ctx a = {.B = B, .Tq = 2 * L, .Tk = 4 * L, .NH = NH, .KV = KV, .D = D};
    const size_t nq = (size_t)a.B * a.Tq * a.NH * a.D, nk = (size_t)a.B * a.Tk * a.KV * a.D;
    a.q = t_new(dt, nq), a.k = t_new(dt, nk), a.v = t_new(dt, nk), a.dout = t_new(dt, nq);
    a.out = t_new(dt, nq), a.lse = t_new(TR_F32, (size_t)a.B * a.NH * a.Tq);
    a.dq = t_new(dt, nq), a.dk = t_new(dt, nk), a.dv = t_new(dt, nk);
    a.qp = t_new(TR_I32, (size_t)a.Tq), a.kp = t_new(TR_I32, (size_t)a.Tk);
    t_fill(a.q, 2.0f), t_fill(a.k, 2.0f), t_fill(a.v, 1.0f), t_fill(a.dout, 1.0f);
    t_fill(a.dk, 1.0f), t_fill(a.dv, 1.0f); /* stale: the backward overwrites every key, seen or not */
    for (int i = 0; i < a.Tq; i++)          /* chunks rank and 3 - rank, in that order */
        ((int32_t *)a.qp->h0)[i] = i < L ? rank * L + i : (3 - rank) * L + (i - L);
    for (int j = 0; j < a.Tk; j++) ((int32_t *)a.kp->h0)[j] = j;
    reset_host();
    twin_kern_attention_forward_pos(NULL, H(a.out), a.lse->h, H(a.q), H(a.k), H(a.v), a.qp->h, a.kp->h, a.B, a.Tq, a.Tk,
                                    a.NH, a.KV, a.D);
    twin_kern_attention_backward_pos(NULL, H(a.dq), H(a.dk), H(a.dv), H(a.dout), H(a.q), H(a.k), H(a.v), H(a.out),
                                     a.lse->h, a.qp->h, a.kp->h, a.B, a.Tq, a.Tk, a.NH, a.KV, a.D);
    tens *outs[] = {a.out, a.lse, a.dq, a.dk, a.dv};
    run_gpu_twice("attention_pos", attn_pos_gpu, &a, outs, 5);
    char name[128];
    const char *nm[] = {"out", "lse", "dq", "dk", "dv"};
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "attention_pos CP2 rank%d Tq%d Tk%d NH%d KV%d D%d %s %s%s", rank, a.Tq, a.Tk, NH,
                 KV, D, tr_dtype_name(dt), nm[i], g_same_bits ? "" : " nondet");
        compare(name, outs[i], i < 2 ? 2e-5 : 1e-4);
    }
    release();
}

typedef struct norm_ctx {
    kern_norm_desc nd;
    tens *out, *mean, *rstd, *inp, *w, *bias, *dinp, *dw, *db, *dout;
    int N, C;
} norm_ctx;

static void norm_gpu(void *p) {
    norm_ctx *c = p;
    const bool layer = c->nd.kind == KERN_NORM_LAYER;
    kern_norm_forward(g_s, &c->nd, Dv(c->out), layer ? c->mean->d : NULL, c->rstd->d, Dv(c->inp), Dv(c->w),
                      layer ? Dv(c->bias) : tr_buf_none(), c->N, c->C);
    kern_norm_backward(g_s, &c->nd, Dv(c->dinp), Dv(c->dw), layer ? Dv(c->db) : tr_buf_none(), Dv(c->dout), Dv(c->inp),
                       Dv(c->w), layer ? c->mean->d : NULL, c->rstd->d, c->N, c->C);
}

/* C 1000: the generic kernels; C a multiple of 8 (4096, 8192): the fast path (rows in registers, more
 * rows than one chunk of the fused weight-gradient sums, and a last chunk cut short) */
static void case_norm(kern_norm_kind kind, bool zc, tr_dtype dt, int N, int C) {
    norm_ctx c = {.nd = {kind, 1e-5f, zc}, .N = N, .C = C};
    const size_t nc = (size_t)c.N * c.C;
    c.out = t_new(dt, nc), c.mean = t_new(TR_F32, c.N), c.rstd = t_new(TR_F32, c.N), c.inp = t_new(dt, nc);
    c.w = t_new(dt, c.C), c.bias = t_new(dt, c.C), c.dinp = t_new(dt, nc), c.dw = t_new(dt, c.C);
    c.db = t_new(dt, c.C), c.dout = t_new(dt, nc);
    t_fill(c.inp, 3.0f), t_fill(c.w, 1.0f), t_fill(c.bias, 1.0f), t_fill(c.dinp, 1.0f), t_fill(c.dw, 1.0f);
    t_fill(c.db, 1.0f), t_fill(c.dout, 1.0f);
    reset_host();
    const bool layer = kind == KERN_NORM_LAYER;
    twin_kern_norm_forward(NULL, &c.nd, H(c.out), layer ? c.mean->h : NULL, c.rstd->h, H(c.inp), H(c.w),
                           layer ? H(c.bias) : tr_buf_none(), c.N, c.C);
    twin_kern_norm_backward(NULL, &c.nd, H(c.dinp), H(c.dw), layer ? H(c.db) : tr_buf_none(), H(c.dout), H(c.inp),
                            H(c.w), layer ? c.mean->h : NULL, c.rstd->h, c.N, c.C);
    tens *outs[] = {c.out, c.rstd, c.dinp, c.dw, c.db};
    run_gpu_twice("norm", norm_gpu, &c, outs, 5);
    const char *nm[] = {"out", "rstd", "dinp (+=)", "dweight (+=)", "dbias (+=)"};
    char name[96];
    for (int i = 0; i < (layer ? 5 : 4); i++) {
        snprintf(name, sizeof name, "%s%s N%d C%d %s %s", layer ? "layernorm" : "rmsnorm", zc ? "+1p" : "", N, C,
                 tr_dtype_name(dt), nm[i]);
        compare(name, outs[i], i < 2 ? 2e-5 : 1e-4);
    }
    release();
}

typedef struct misc_ctx {
    tens *t[8];
    int N, C, V, F, B, T, Hh, D;
    kern_rope_desc rd;
    kern_adamw_desc ad;
    bool pos;
} misc_ctx;

static void emb_gpu(void *p) {
    misc_ctx *c = p;
    kern_embedding_forward(g_s, Dv(c->t[0]), c->t[1]->d, Dv(c->t[2]), c->N, c->C, c->V);
    kern_embedding_backward(g_s, Dv(c->t[3]), Dv(c->t[4]), c->t[1]->d, c->N, c->C, c->V);
}

static void case_embedding(tr_dtype dt) {
    misc_ctx c = {.N = 1000, .C = 700, .V = 300};
    c.t[0] = t_new(dt, (size_t)c.N * c.C), c.t[1] = t_new(TR_I32, c.N), c.t[2] = t_new(dt, (size_t)c.V * c.C);
    c.t[3] = t_new(dt, (size_t)c.V * c.C), c.t[4] = t_new(dt, (size_t)c.N * c.C);
    t_fill_int(c.t[1], 0, c.V), t_fill(c.t[2], 1.0f), t_fill(c.t[3], 1.0f), t_fill(c.t[4], 1.0f);
    reset_host();
    twin_kern_embedding_forward(NULL, H(c.t[0]), c.t[1]->h, H(c.t[2]), c.N, c.C, c.V);
    twin_kern_embedding_backward(NULL, H(c.t[3]), H(c.t[4]), c.t[1]->h, c.N, c.C, c.V);
    tens *outs[] = {c.t[0], c.t[3]};
    run_gpu_twice("embedding", emb_gpu, &c, outs, 2);
    char name[64];
    snprintf(name, sizeof name, "embedding N1000 V300 %s out", tr_dtype_name(dt));
    compare(name, c.t[0], 0.0);
    snprintf(name, sizeof name, "embedding N1000 V300 %s dwte (+=)", tr_dtype_name(dt));
    compare(name, c.t[3], 1e-5);
    release();
}

/* Vocabulary slice [vocab_start, vocab_start + V) = [600, 900) of a 1200-token vocabulary: tokens
 * drawn from the whole vocabulary, so most rows are zeros forward and skipped backward. */
static void emb_slice_gpu(void *p) {
    misc_ctx *c = p;
    kern_embedding_forward_slice(g_s, Dv(c->t[0]), c->t[1]->d, Dv(c->t[2]), c->B, c->N, c->C, c->V);
    kern_embedding_backward_slice(g_s, Dv(c->t[3]), Dv(c->t[4]), c->t[1]->d, c->B, c->N, c->C, c->V);
}

static void case_embedding_slice(tr_dtype dt) {
    misc_ctx c = {.N = 1000, .C = 700, .V = 300, .B = 600}; /* B: vocab_start */
    c.t[0] = t_new(dt, (size_t)c.N * c.C), c.t[1] = t_new(TR_I32, c.N), c.t[2] = t_new(dt, (size_t)c.V * c.C);
    c.t[3] = t_new(dt, (size_t)c.V * c.C), c.t[4] = t_new(dt, (size_t)c.N * c.C);
    t_fill_int(c.t[1], 0, 4 * c.V), t_fill(c.t[2], 1.0f), t_fill(c.t[3], 1.0f), t_fill(c.t[4], 1.0f);
    t_fill(c.t[0], 1.0f); /* stale: rows outside the slice must become 0 */
    reset_host();
    twin_kern_embedding_forward_slice(NULL, H(c.t[0]), c.t[1]->h, H(c.t[2]), c.B, c.N, c.C, c.V);
    twin_kern_embedding_backward_slice(NULL, H(c.t[3]), H(c.t[4]), c.t[1]->h, c.B, c.N, c.C, c.V);
    tens *outs[] = {c.t[0], c.t[3]};
    run_gpu_twice("embedding slice", emb_slice_gpu, &c, outs, 2);
    char name[64];
    snprintf(name, sizeof name, "embedding slice [600,900) %s out", tr_dtype_name(dt));
    compare(name, c.t[0], 0.0);
    snprintf(name, sizeof name, "embedding slice [600,900) %s dwte (+=)", tr_dtype_name(dt));
    compare(name, c.t[3], 1e-5);
    release();
}

/* The three cross-entropy passes and the backward on one slice [5000, 10000) of a 20000-token
 * vocabulary (the all-reduces of a one-rank group are the identity), targets from the whole
 * vocabulary; the backward in place. The slice's last 700 columns pad the vocabulary (c->F real). */
static void ce_slice_gpu(void *p) {
    misc_ctx *c = p;
    kern_ce_slice_max(g_s, c->t[1]->d, Dv(c->t[0]), c->N, c->V, c->F);
    kern_ce_slice_sums(g_s, c->t[2]->d, c->t[3]->d, Dv(c->t[0]), c->t[1]->d, c->t[5]->d, c->B, c->N, c->V, c->F);
    kern_ce_loss_from_stats(g_s, c->t[4]->d, c->t[1]->d, c->t[2]->d, c->t[3]->d, c->N);
    kern_ce_slice_backward(g_s, Dv(c->t[0]), Dv(c->t[0]), c->t[1]->d, c->t[2]->d, c->t[5]->d, c->B, c->t[6]->d, c->N,
                           c->V, c->F);
}

/* N rows: 64, and enough that a GPU block of the eight-a-thread backward walks several rows. */
static void case_ce_slice(tr_dtype dt, int N) {
    misc_ctx c = {.N = N, .V = 5000, .B = 5000, .F = 4300}; /* B: vocab_start, F: real columns */
    c.t[0] = t_new(dt, (size_t)c.N * c.V), c.t[1] = t_new(TR_F32, c.N), c.t[2] = t_new(TR_F32, c.N);
    c.t[3] = t_new(TR_F32, c.N), c.t[4] = t_new(TR_F32, c.N), c.t[5] = t_new(TR_I32, c.N), c.t[6] = t_new(TR_F32, c.N);
    t_fill(c.t[0], 8.0f), t_fill_int(c.t[5], 0, 4 * c.V), t_fill(c.t[6], 1.0f);
    for (int n = 0; n < 8; n++) ((int32_t *)c.t[5]->h0)[n] = c.B + n * 97; /* some targets surely inside */
    for (int n = 0; n < c.N; n++) { /* no target is a padding token: they lie past the vocabulary */
        int32_t *t = &((int32_t *)c.t[5]->h0)[n];
        if (*t >= c.B + c.F && *t < c.B + c.V) *t = c.B + c.F - 1;
    }
    reset_host();
    twin_kern_ce_slice_max(NULL, c.t[1]->h, H(c.t[0]), c.N, c.V, c.F);
    twin_kern_ce_slice_sums(NULL, c.t[2]->h, c.t[3]->h, H(c.t[0]), c.t[1]->h, c.t[5]->h, c.B, c.N, c.V, c.F);
    twin_kern_ce_loss_from_stats(NULL, c.t[4]->h, c.t[1]->h, c.t[2]->h, c.t[3]->h, c.N);
    twin_kern_ce_slice_backward(NULL, H(c.t[0]), H(c.t[0]), c.t[1]->h, c.t[2]->h, c.t[5]->h, c.B, c.t[6]->h, c.N, c.V,
                                c.F);
    tens *outs[] = {c.t[1], c.t[2], c.t[3], c.t[4], c.t[0]};
    run_gpu_twice("ce slice", ce_slice_gpu, &c, outs, 5);
    const char *nm[] = {"row_max", "sum_exp", "target_logit", "losses", "dlogits (in place)"};
    char name[96];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "ce slice [5000,10000) N %d %s %s", N, tr_dtype_name(dt), nm[i]);
        compare(name, outs[i], i == 0 || i == 2 ? 0.0 : i == 4 ? 1e-4 : 2e-5);
    }
    release();
}

static void rope_gpu(void *p) {
    misc_ctx *c = p;
    kern_rope_forward(g_s, &c->rd, Dv(c->t[0]), c->pos ? c->t[2]->d : NULL, c->B, c->T, c->Hh, c->D);
    kern_rope_backward(g_s, &c->rd, Dv(c->t[1]), c->pos ? c->t[2]->d : NULL, c->B, c->T, c->Hh, c->D);
}

static void case_rope(tr_dtype dt, bool pos) {
    misc_ctx c = {.B = 2, .T = 300, .Hh = 4, .D = 128, .rd = {500000.0f, 96}, .pos = pos};
    const size_t n = (size_t)c.B * c.T * c.Hh * c.D;
    c.t[0] = t_new(dt, n), c.t[1] = t_new(dt, n), c.t[2] = t_new(TR_I32, (size_t)c.B * c.T);
    t_fill(c.t[0], 1.0f), t_fill(c.t[1], 1.0f), t_fill_int(c.t[2], 0, 8192);
    reset_host();
    twin_kern_rope_forward(NULL, &c.rd, H(c.t[0]), pos ? c.t[2]->h : NULL, c.B, c.T, c.Hh, c.D);
    twin_kern_rope_backward(NULL, &c.rd, H(c.t[1]), pos ? c.t[2]->h : NULL, c.B, c.T, c.Hh, c.D);
    tens *outs[] = {c.t[0], c.t[1]};
    run_gpu_twice("rope", rope_gpu, &c, outs, 2);
    char name[64];
    snprintf(name, sizeof name, "rope rot96/128 %s%s fwd", tr_dtype_name(dt), pos ? " positions" : "");
    compare(name, c.t[0], 2e-5);
    snprintf(name, sizeof name, "rope rot96/128 %s%s bwd", tr_dtype_name(dt), pos ? " positions" : "");
    compare(name, c.t[1], 2e-5);
    release();
}

static void swiglu_ce_gpu(void *p) {
    misc_ctx *c = p;
    kern_swiglu_forward(g_s, Dv(c->t[0]), Dv(c->t[1]), c->N, c->F);
    kern_swiglu_backward(g_s, Dv(c->t[2]), Dv(c->t[3]), Dv(c->t[1]), c->N, c->F);
    kern_cross_entropy_forward(g_s, c->t[4]->d, Dv(c->t[5]), c->t[6]->d, c->N, c->V);
    kern_cross_entropy_backward(g_s, Dv(c->t[5]), Dv(c->t[5]), c->t[6]->d, c->t[7]->d, c->N, c->V); /* in place */
}

static void case_swiglu_ce(tr_dtype dt) {
    misc_ctx c = {.N = 64, .F = 1000, .V = 5000};
    c.t[0] = t_new(dt, (size_t)c.N * c.F), c.t[1] = t_new(dt, (size_t)c.N * 2 * c.F);
    c.t[2] = t_new(dt, (size_t)c.N * 2 * c.F), c.t[3] = t_new(dt, (size_t)c.N * c.F);
    c.t[4] = t_new(TR_F32, c.N), c.t[5] = t_new(dt, (size_t)c.N * c.V), c.t[6] = t_new(TR_I32, c.N);
    c.t[7] = t_new(TR_F32, c.N);
    t_fill(c.t[1], 4.0f), t_fill(c.t[3], 1.0f), t_fill(c.t[5], 8.0f), t_fill_int(c.t[6], 0, c.V);
    t_fill(c.t[7], 1.0f);
    reset_host();
    twin_kern_swiglu_forward(NULL, H(c.t[0]), H(c.t[1]), c.N, c.F);
    twin_kern_swiglu_backward(NULL, H(c.t[2]), H(c.t[3]), H(c.t[1]), c.N, c.F);
    twin_kern_cross_entropy_forward(NULL, c.t[4]->h, H(c.t[5]), c.t[6]->h, c.N, c.V);
    twin_kern_cross_entropy_backward(NULL, H(c.t[5]), H(c.t[5]), c.t[6]->h, c.t[7]->h, c.N, c.V);
    tens *outs[] = {c.t[0], c.t[2], c.t[4], c.t[5]};
    run_gpu_twice("swiglu+ce", swiglu_ce_gpu, &c, outs, 4);
    const char *nm[] = {"swiglu out", "swiglu dh", "cross entropy losses V5000", "cross entropy dlogits (in place)"};
    char name[96];
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "%s %s", nm[i], tr_dtype_name(dt));
        compare(name, outs[i], i == 0 || i == 2 ? 2e-5 : 1e-4);
    }
    release();
}

static void elem_gpu(void *p) {
    misc_ctx *c = p;
    const size_t n = c->t[0]->n;
    kern_add(g_s, Dv(c->t[1]), Dv(c->t[0]), Dv(c->t[1]), n); /* aliasing b */
    kern_scale(g_s, Dv(c->t[1]), 0.37f, n);
    kern_cast(g_s, Dv(c->t[2]), Dv(c->t[1]), n);
    kern_sum_squares(g_s, c->t[3]->d, Dv(c->t[0]), n);
    kern_adamw_update(g_s, &c->ad, c->t[4]->d, NULL, Dv(c->t[7]), Dv(c->t[0]), c->t[5]->d, c->t[6]->d, n);
}

static void case_elementwise(tr_dtype dt, size_t n) {
    misc_ctx c = {.ad = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.8f, 7}};
    c.t[0] = t_new(dt, n), c.t[1] = t_new(dt, n), c.t[2] = t_new(dt == TR_BF16 ? TR_F32 : TR_BF16, n);
    c.t[3] = t_new(TR_F32, 1), c.t[4] = t_new(TR_F32, n), c.t[5] = t_new(TR_F32, n), c.t[6] = t_new(TR_F32, n);
    c.t[7] = t_new(TR_BF16, n);
    t_fill(c.t[0], 1.0f), t_fill(c.t[1], 1.0f), t_fill(c.t[3], 1.0f), t_fill(c.t[4], 1.0f), t_fill(c.t[5], 0.01f);
    for (size_t i = 0; i < n; i++) ((float *)c.t[6]->h0)[i] = (float)(urand() * 1e-4);
    reset_host();
    twin_kern_add(NULL, H(c.t[1]), H(c.t[0]), H(c.t[1]), n);
    twin_kern_scale(NULL, H(c.t[1]), 0.37f, n);
    twin_kern_cast(NULL, H(c.t[2]), H(c.t[1]), n);
    twin_kern_sum_squares(NULL, c.t[3]->h, H(c.t[0]), n);
    twin_kern_adamw_update(NULL, &c.ad, c.t[4]->h, NULL, H(c.t[7]), H(c.t[0]), c.t[5]->h, c.t[6]->h, n);
    tens *outs[] = {c.t[1], c.t[2], c.t[3], c.t[4], c.t[5], c.t[6], c.t[7]};
    run_gpu_twice("elementwise", elem_gpu, &c, outs, 7);
    const char *nm[] = {"add+scale", "cast",    "sum_squares (+=, 3M)", "adamw master",
                        "adamw m",   "adamw v", "adamw model bf16"};
    char name[96];
    for (int i = 0; i < 7; i++) {
        snprintf(name, sizeof name, "%s %s n%zu", nm[i], tr_dtype_name(dt), n);
        compare(name, outs[i], i == 1 ? 0.0 : 1e-5);
    }
    release();
}

/* The multi-tensor forms over ranges of odd lengths (tiles end inside them), gaps between them and
 * a range of one element, each with its own weight decay. */
static const kern_range k_ranges[] = {
    {0, 1000003, 0.1f}, {1000010, 1000011, 0.0f}, {1000100, 2500000, 0.0f}, {2600000, 3999999, 0.05f}};
#define N_RANGES ((int)(sizeof k_ranges / sizeof k_ranges[0]))

static void ranges_gpu(void *p) {
    misc_ctx *c = p;
    kern_sum_squares_ranges(g_s, c->t[1]->d, Dv(c->t[0]), k_ranges, N_RANGES);
    kern_adamw_update_ranges(g_s, &c->ad, k_ranges, N_RANGES, c->t[2]->d, NULL, Dv(c->t[5]), Dv(c->t[0]), c->t[3]->d,
                             c->t[4]->d);
}

static void case_ranges(tr_dtype dt) {
    misc_ctx c = {.ad = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.8f, 7}};
    const size_t n = 4000000;
    c.t[0] = t_new(dt, n), c.t[1] = t_new(TR_F32, 1), c.t[2] = t_new(TR_F32, n), c.t[3] = t_new(TR_F32, n);
    c.t[4] = t_new(TR_F32, n), c.t[5] = t_new(TR_BF16, n);
    t_fill(c.t[0], 1.0f), t_fill(c.t[1], 1.0f), t_fill(c.t[2], 1.0f), t_fill(c.t[3], 0.01f), t_fill(c.t[5], 1.0f);
    for (size_t i = 0; i < n; i++) ((float *)c.t[4]->h0)[i] = (float)(urand() * 1e-4);
    reset_host();
    twin_kern_sum_squares_ranges(NULL, c.t[1]->h, H(c.t[0]), k_ranges, N_RANGES);
    twin_kern_adamw_update_ranges(NULL, &c.ad, k_ranges, N_RANGES, c.t[2]->h, NULL, H(c.t[5]), H(c.t[0]), c.t[3]->h,
                                  c.t[4]->h);
    tens *outs[] = {c.t[1], c.t[2], c.t[3], c.t[4], c.t[5]};
    run_gpu_twice("ranges", ranges_gpu, &c, outs, 5);
    const char *nm[] = {"sum_squares_ranges (+=)", "adamw_ranges master", "adamw_ranges m", "adamw_ranges v",
                        "adamw_ranges model bf16 (gaps kept)"};
    char name[96];
    for (int i = 0; i < 5; i++) {
        snprintf(name, sizeof name, "%s %s", nm[i], tr_dtype_name(dt));
        compare(name, outs[i], 1e-5);
    }
    release();
}

/* AdamW on the fp32 master kept as bf16 weights + 16-bit remainders (twinrun/master_split.h), the
 * master split from fp32 on the device first (kern_master_split): the joined master compared as fp32,
 * the weights and moments as usual. t[0] grad, t[1] fp32 master to split, t[2] weights (bf16),
 * t[3] remainders (two bytes an element: a bf16-typed tensor), t[4] m, t[5] v, t[6] the joined master. */
/* k_ranges moved to multiples of 8: the GPU's eight-elements-a-thread path (with range tails). */
static const kern_range k_ranges8[] = {
    {0, 1000003, 0.1f}, {1000008, 1000009, 0.0f}, {1000104, 2500000, 0.0f}, {2600000, 3999999, 0.05f}};
static const kern_range *g_rem_ranges;

static void ranges_rem_gpu(void *p) {
    misc_ctx *c = p;
    const size_t n = c->t[1]->n;
    kern_master_split(g_s, Dv(c->t[2]), (int16_t *)c->t[3]->d, c->t[1]->d, n);
    kern_adamw_update_ranges(g_s, &c->ad, g_rem_ranges, N_RANGES, NULL, (int16_t *)c->t[3]->d, Dv(c->t[2]), Dv(c->t[0]),
                             c->t[4]->d, c->t[5]->d);
}

static void case_ranges_rem(tr_dtype dt, bool aligned) {
    g_rem_ranges = aligned ? k_ranges8 : k_ranges;
    misc_ctx c = {.ad = {3e-4f, 0.9f, 0.95f, 1e-8f, 0.0f, 0.8f, 7}};
    const size_t n = 4000000;
    c.t[0] = t_new(dt, n), c.t[1] = t_new(TR_F32, n), c.t[2] = t_new(TR_BF16, n), c.t[3] = t_new(TR_BF16, n);
    c.t[4] = t_new(TR_F32, n), c.t[5] = t_new(TR_F32, n), c.t[6] = t_new(TR_F32, n);
    t_fill(c.t[0], 1.0f), t_fill(c.t[1], 1.0f), t_fill(c.t[4], 0.01f);
    for (size_t i = 0; i < n; i++) ((float *)c.t[5]->h0)[i] = (float)(urand() * 1e-4);
    reset_host();
    twin_kern_master_split(NULL, H(c.t[2]), (int16_t *)c.t[3]->h, c.t[1]->h, n);
    twin_kern_adamw_update_ranges(NULL, &c.ad, g_rem_ranges, N_RANGES, NULL, (int16_t *)c.t[3]->h, H(c.t[2]), H(c.t[0]),
                                  c.t[4]->h, c.t[5]->h);
    tens *outs[] = {c.t[2], c.t[3], c.t[4], c.t[5]};
    run_gpu_twice("ranges on remainders", ranges_rem_gpu, &c, outs, 4);
    for (size_t i = 0; i < n; i++) { /* the fp32 master each side ends with */
        ((float *)c.t[6]->h)[i] = tr_master_join(((uint16_t *)c.t[2]->h)[i], ((int16_t *)c.t[3]->h)[i]);
        ((float *)c.t[6]->g)[i] = tr_master_join(((uint16_t *)c.t[2]->g)[i], ((int16_t *)c.t[3]->g)[i]);
    }
    char name[96];
    snprintf(name, sizeof name, "adamw_ranges master (remainders%s) %s", aligned ? ", x8" : "", tr_dtype_name(dt));
    compare(name, c.t[6], 1e-5);
    snprintf(name, sizeof name, "adamw_ranges m (remainders%s) %s", aligned ? ", x8" : "", tr_dtype_name(dt));
    compare(name, c.t[4], 1e-5);
    snprintf(name, sizeof name, "adamw_ranges v (remainders%s) %s", aligned ? ", x8" : "", tr_dtype_name(dt));
    compare(name, c.t[5], 1e-5);
    snprintf(name, sizeof name, "adamw_ranges model bf16 (remainders%s) %s", aligned ? ", x8" : "", tr_dtype_name(dt));
    compare(name, c.t[2], 1e-5);
    release();
}

/* ---- FP8: the quantising cast (bytes and amax bit-identical), the scale update (bit-identical), the
 * FP8 GEMM (relative L2) ------------------------------------------------------------------------- */

/* A byte buffer in a tens: int32 elements enough for `bytes` (+16, for misaligned views). */
static tens *t_bytes(size_t bytes) { return t_new(TR_I32, (bytes + 16 + 3) / 4); }

/* A value of x that gives an exact round-to-nearest-even tie after the multiply by a power-of-two scale:
 * the midpoint of two neighbouring finite codes of fmt (at most 5 significant bits: exact in bf16). */
static float fp8_tie(tr_fp8_format fmt, float scale) {
    const int max_code = tr_fp8_spec_of(fmt).max_code;
    const int c = (int)(urand() * max_code); /* c, c + 1 both finite and positive */
    const double mid = 0.5 * ((double)tr_fp8_to_f32((uint8_t)c, fmt) + (double)tr_fp8_to_f32((uint8_t)(c + 1), fmt));
    return (float)((urand() < 0.5 ? -mid : mid) / scale);
}

/* Inputs that reach every branch of the conversion (scale a power of two, so x * scale is exact):
 * ties, NaN of both signs, infinities, huge, values just above the largest finite, the fp8 subnormal
 * range, values below its smallest half-quantum, fp32 subnormals, signed zeros, ordinary values. */
static float fp8_special(tr_fp8_format fmt, float scale) {
    const float max = tr_fp8_spec_of(fmt).max, sub = fmt == TR_FP8_E5M2 ? 0x1p-16f : 0x1p-9f;
    const double u = urand(), sgn = urand() < 0.5 ? -1.0 : 1.0;
    const int kind = (int)(u * 12.0);
    switch (kind) {
    case 0:
    case 1:
    case 2: return fp8_tie(fmt, scale);
    case 3: return urand() < 0.5 ? NAN : -NAN;
    case 4: return (float)(sgn * INFINITY);
    case 5: return (float)(sgn * (urand() < 0.5 ? 3.0e38 : 1.0e30));
    case 6: return (float)(sgn * max * (1.0 + urand() * 0.2) / scale); /* around and above the largest */
    case 7: return (float)(sgn * sub * urand() * 8.0 / scale);         /* fp8 subnormals */
    case 8: return (float)(sgn * sub * urand() * 0.6 / scale);         /* round to zero or the smallest */
    case 9: return (float)(sgn * 1.0e-40);                             /* an fp32 subnormal */
    case 10: return (float)(sgn * 0.0);
    default: return (float)(sgn * urand() * max * 1.5 / scale);
    }
}

typedef struct fp8q_ctx {
    tens *x, *q, *amax, *scale;
    size_t n, xoff, qoff; /* misaligned views: element offsets of x, byte offsets of q */
    tr_fp8_format fmt;
    bool with_amax;
} fp8q_ctx;

static tr_buf fp8q_x(fp8q_ctx *c, void *base) {
    return tr_buf_make((char *)base + c->xoff * tr_dtype_size(c->x->dt), c->x->dt);
}

static void fp8q_gpu(void *p) {
    fp8q_ctx *c = p;
    kern_fp8_quantize(g_s, (uint8_t *)c->q->d + c->qoff, c->with_amax ? (float *)c->amax->d : NULL, fp8q_x(c, c->x->d),
                      (const float *)c->scale->d, c->n, c->fmt);
}

/* special: the values of fp8_special with a power-of-two scale; else uniform values with an odd scale. */
static void case_fp8_quantize(tr_dtype dt, size_t n, tr_fp8_format fmt, bool special, size_t xoff, size_t qoff,
                              bool with_amax) {
    fp8q_ctx c = {.n = n, .xoff = xoff, .qoff = qoff, .fmt = fmt, .with_amax = with_amax};
    c.x = t_new(dt, n + xoff), c.q = t_bytes(n + qoff), c.amax = t_new(TR_F32, 1), c.scale = t_new(TR_F32, 1);
    const float scale = special ? 0.5f : (fmt == TR_FP8_E5M2 ? 1234.567f : 37.1f);
    ((float *)c.scale->h0)[0] = scale;
    ((float *)c.amax->h0)[0] = special ? 0.0f : 0.25f; /* below the data's amax: it must grow */
    for (size_t i = 0; i < n + xoff; i++)
        t_set(c.x, i, special ? fp8_special(fmt, scale) : (float)((2.0 * urand() - 1.0) * (fmt ? 40.0 : 10.0)));
    memset(c.q->h0, 0xA5, c.q->n * 4); /* bytes outside [qoff, qoff + n) must stay */
    reset_host();
    twin_kern_fp8_quantize(NULL, (uint8_t *)c.q->h + qoff, with_amax ? (float *)c.amax->h : NULL, fp8q_x(&c, c.x->h),
                           (const float *)c.scale->h, n, fmt);
    tens *outs[] = {c.q, c.amax};
    run_gpu_twice("fp8_quantize", fp8q_gpu, &c, outs, 2);
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < c.q->n * 4; i++)
        if (((uint8_t *)c.q->h)[i] != ((uint8_t *)c.q->g)[i] && !bad++) first = i;
    const uint32_t aw = ((uint32_t *)c.amax->h)[0], ag = ((uint32_t *)c.amax->g)[0];
    char name[128];
    snprintf(name, sizeof name, "fp8_quantize %s>%s n%zu%s%s%s", tr_dtype_name(dt), tr_fp8_name(fmt), n,
             special ? " special" : "", xoff || qoff ? " misaligned" : "", with_amax ? "" : " no-amax");
    if (bad) {
        const size_t i = first - qoff;
        printf("  %-48s %zu byte(s) differ; first at %zu: x %a * %a -> twin 0x%02x, gpu 0x%02x  FAILED\n", name, bad, i,
               (double)t_get(c.x, c.x->h0, i + xoff), (double)scale, ((uint8_t *)c.q->h)[first],
               ((uint8_t *)c.q->g)[first]);
        g_fail++;
    } else if (aw != ag) {
        printf("  %-48s bytes identical; amax twin %a, gpu %a  FAILED\n", name, (double)((float *)c.amax->h)[0],
               (double)((float *)c.amax->g)[0]);
        g_fail++;
    } else {
        printf("  %-48s bytes and amax identical (amax %g)\n", name, (double)((float *)c.amax->h)[0]);
    }
    release();
}

typedef struct fp8ct_ctx {
    tens *x, *q, *qt, *amax, *scale;
    int rows, cols;
    size_t xoff; /* a misaligned x: the one-a-thread kernel */
    bool with_q, with_qt;
    tr_fp8_format fmt;
} fp8ct_ctx;

static void fp8ct_gpu(void *p) {
    fp8ct_ctx *c = p;
    kern_fp8_cast_transpose(g_s, c->with_q ? (uint8_t *)c->q->d : NULL, c->with_qt ? (uint8_t *)c->qt->d : NULL,
                            (float *)c->amax->d, fp8q_x(&(fp8q_ctx){.x = c->x, .xoff = c->xoff}, c->x->d),
                            (const float *)c->scale->d, c->rows, c->cols, c->fmt);
}

/* The cast-transpose: q and qt bit-identical to the twin's (whose bytes are kern_fp8_quantize's, the
 * test_kern_fp8 unit test), bytes outside them untouched, the amax identical. Shapes of whole tiles, of
 * part tiles, and ones the tiled kernel does not take (cols % 8, rows % 4, misaligned x). */
static void case_fp8_cast_transpose(tr_dtype dt, int rows, int cols, tr_fp8_format fmt, bool with_q, bool with_qt,
                                    size_t xoff) {
    const size_t n = (size_t)rows * (size_t)cols;
    fp8ct_ctx c = {.rows = rows, .cols = cols, .xoff = xoff, .with_q = with_q, .with_qt = with_qt, .fmt = fmt};
    c.x = t_new(dt, n + xoff), c.q = t_bytes(n), c.qt = t_bytes(n), c.amax = t_new(TR_F32, 1);
    c.scale = t_new(TR_F32, 1);
    const float scale = fmt == TR_FP8_E5M2 ? 1234.567f : 37.1f;
    ((float *)c.scale->h0)[0] = scale;
    ((float *)c.amax->h0)[0] = 0.25f;
    for (size_t i = 0; i < n + xoff; i++)
        t_set(c.x, i, urand() < 0.01 ? fp8_special(fmt, 0.5f) : (float)((2.0 * urand() - 1.0) * (fmt ? 40.0 : 10.0)));
    memset(c.q->h0, 0xA5, c.q->n * 4);
    memset(c.qt->h0, 0x5A, c.qt->n * 4);
    reset_host();
    fp8q_ctx view = {.x = c.x, .xoff = xoff};
    twin_kern_fp8_cast_transpose(NULL, with_q ? (uint8_t *)c.q->h : NULL, with_qt ? (uint8_t *)c.qt->h : NULL,
                                 (float *)c.amax->h, fp8q_x(&view, c.x->h), (const float *)c.scale->h, rows, cols, fmt);
    tens *outs[] = {c.q, c.qt, c.amax};
    run_gpu_twice("fp8_cast_transpose", fp8ct_gpu, &c, outs, 3);
    char name[128];
    snprintf(name, sizeof name, "fp8_cast_transpose %s>%s %dx%d%s%s%s", tr_dtype_name(dt), tr_fp8_name(fmt), rows, cols,
             with_q ? " q" : "", with_qt ? " qt" : "", xoff ? " misaligned" : "");
    const int bad = memcmp(c.q->h, c.q->g, c.q->n * 4) != 0 || memcmp(c.qt->h, c.qt->g, c.qt->n * 4) != 0 ||
                    ((uint32_t *)c.amax->h)[0] != ((uint32_t *)c.amax->g)[0];
    printf("  %-48s %s\n", name, bad ? "q, qt or amax differ  FAILED" : "q, qt and amax identical");
    if (bad) g_fail++;
    release();
}

typedef struct fp8t_ctx {
    tens *q, *qt;
    int rows, cols;
    size_t off; /* a misaligned q: the one-byte kernel */
} fp8t_ctx;

static void fp8t_gpu(void *p) {
    fp8t_ctx *c = p;
    kern_fp8_transpose(g_s, (uint8_t *)c->qt->d, (const uint8_t *)c->q->d + c->off, c->rows, c->cols);
}

/* The byte transpose of an FP8 tensor kept in FP8 (--fp8-param-gather's weights): qt identical to the
 * twin's, bytes past it untouched. Shapes of whole and part 64 x 64 tiles, and ones the four-byte
 * kernel leaves to the one-byte one (rows or cols not multiples of 4, a misaligned q). */
static void case_fp8_transpose(int rows, int cols, size_t off) {
    const size_t n = (size_t)rows * (size_t)cols;
    fp8t_ctx c = {.rows = rows, .cols = cols, .off = off};
    c.q = t_bytes(n + off), c.qt = t_bytes(n);
    for (size_t i = 0; i < n + off; i++) ((uint8_t *)c.q->h0)[i] = (uint8_t)(urand() * 256.0);
    memset(c.qt->h0, 0x5A, c.qt->n * 4);
    reset_host();
    twin_kern_fp8_transpose(NULL, (uint8_t *)c.qt->h, (const uint8_t *)c.q->h + off, rows, cols);
    tens *outs[] = {c.qt};
    run_gpu_twice("fp8_transpose", fp8t_gpu, &c, outs, 1);
    char name[128];
    snprintf(name, sizeof name, "fp8_transpose %dx%d%s", rows, cols, off ? " misaligned" : "");
    const int bad = memcmp(c.qt->h, c.qt->g, c.qt->n * 4) != 0;
    printf("  %-48s %s\n", name, bad ? "qt differs  FAILED" : "qt identical");
    if (bad) g_fail++;
    release();
}

typedef struct fp8u_ctx {
    tens *hist, *scale, *scale_inv;
    int n, len, margin;
    tr_fp8_amax_algo algo;
    tr_fp8_format fmt;
} fp8u_ctx;

static void fp8u_gpu(void *p) {
    fp8u_ctx *c = p;
    for (int r = 0; r < 2; r++)
        kern_fp8_scale_update(g_s, c->hist->d, c->scale->d, c->scale_inv->d, c->n, c->len, c->algo, c->fmt, c->margin);
}

/* Histories of amaxes over many decades, with zeros, a NaN, an infinity and a tiny amax (its scale
 * overflows to FLT_MAX); scales not all 1. Twice: the second update reads the first's rolled history. */
static void case_fp8_scale_update(int n, int len, tr_fp8_amax_algo algo, tr_fp8_format fmt, int margin) {
    fp8u_ctx c = {.n = n, .len = len, .margin = margin, .algo = algo, .fmt = fmt};
    c.hist = t_new(TR_F32, (size_t)n * len), c.scale = t_new(TR_F32, n), c.scale_inv = t_new(TR_F32, n);
    float *h = c.hist->h0;
    for (size_t i = 0; i < (size_t)n * len; i++) {
        const double u = urand();
        h[i] = u < 0.15 ? 0.0f : (float)(pow(10.0, 12.0 * urand() - 6.0));
    }
    h[0] = NAN, h[(size_t)(len - 1) * n + 1 % n] = INFINITY, h[2 % n] = 1e-44f, h[3 % n] = 0.0f;
    for (int t = 0; t < n; t++) {
        ((float *)c.scale->h0)[t] = t % 3 ? (float)(0.5 + urand() * 100.0) : 1.0f;
        ((float *)c.scale_inv->h0)[t] = 1.0f / ((float *)c.scale->h0)[t];
    }
    reset_host();
    for (int r = 0; r < 2; r++)
        twin_kern_fp8_scale_update(NULL, c.hist->h, c.scale->h, c.scale_inv->h, n, len, algo, fmt, margin);
    tens *outs[] = {c.hist, c.scale, c.scale_inv};
    run_gpu_twice("fp8_scale_update", fp8u_gpu, &c, outs, 3);
    char name[128];
    snprintf(name, sizeof name, "fp8_scale_update n%d len%d %s %s margin %d", n, len,
             algo == TR_FP8_AMAX_MAX ? "max" : "most_recent", tr_fp8_name(fmt), margin);
    const char *what[] = {"history", "scale", "scale_inv"};
    int bad = 0;
    for (int o = 0; o < 3; o++)
        if (memcmp(outs[o]->h, outs[o]->g, outs[o]->n * 4) != 0) {
            printf("  %-48s %s differs  FAILED\n", name, what[o]);
            bad = 1;
        }
    if (bad) g_fail++;
    else printf("  %-48s history, scale, scale_inv identical\n", name);
    release();
}

typedef struct fp8g_ctx {
    tens *c, *a, *b, *sa, *sb;
    tr_fp8_format fa, fb;
    int m, n, k;
    bool ta, tb, fast;
    bool packed; /* b's scale_inv is the float after a's (4-byte aligned), as the engine keeps its scales */
    float alpha, beta;
} fp8g_ctx;

static void fp8g_gpu(void *p) {
    fp8g_ctx *g = p;
    const float *sb = g->packed ? (const float *)g->sa->d + 1 : (const float *)g->sb->d;
    const kern_fp8_operand a = {(const uint8_t *)g->a->d, g->fa, (const float *)g->sa->d};
    const kern_fp8_operand b = {(const uint8_t *)g->b->d, g->fb, sb};
    kern_gemm_fp8(g_s, Dv(g->c), a, b, g->m, g->n, g->k, g->ta, g->tb, g->alpha, g->beta, g->fast);
}

/* n bytes of fmt: x ~ N-ish(0, sigma) quantised with scale (as the engine's cast does), no NaN. */
static void fp8_fill(tens *t, size_t n, tr_fp8_format fmt, float scale, double sigma) {
    for (size_t i = 0; i < n; i++) {
        const double x = (urand() + urand() + urand() - 1.5) * 2.0 * sigma;
        ((uint8_t *)t->h0)[i] = tr_fp8_from_f32((float)x * scale, fmt);
    }
}

/* The FP8 GEMM against the twin's (FP8 values widened, summed in double). fp32 output within 3e-4
 * relative L2: Hopper's FP8 tensor cores add their products with fewer bits than fp32 even with the
 * split accumulation (cuBLASLt's default, CUBLASLT_MATMUL_DESC_FAST_ACCUM 0, promotes the partial sums
 * to fp32 every few k-blocks; between promotions about 14 bits are kept, as DeepSeek-V3's report
 * measured), so the figure on an H200 is ~1e-4, not the 1e-5 of an fp32 GEMM (the dequantising
 * fallback, TWINRUN_GEMM=blas, gives ~5e-8). The forward pass's GEMM (fast_accum) runs
 * with the fast accumulation by default, as Transformer Engine's fprop (TWINRUN_FP8_FAST_ACCUM, cuda/README.md):
 * no promotion at all, so its fp32 bound is 1e-3 (3.4e-4 measured at k 1024 on an H100). bf16 output
 * within 4e-3 (the two sums round to bf16 apart where they straddle a rounding boundary: one bf16 ulp,
 * 2^-8 relative). */
static void case_fp8_gemm(int m, int n, int k, bool ta, bool tb, bool fast, tr_fp8_format fa, tr_fp8_format fb,
                          tr_dtype cdt, float beta, bool packed) {
    fp8g_ctx g = {.fa = fa, .fb = fb, .m = m, .n = n, .k = k, .ta = ta, .tb = tb, .alpha = 0.75f, .beta = beta};
    g.fast = fast;
    g.packed = packed;
    g.a = t_bytes((size_t)m * k), g.b = t_bytes((size_t)k * n), g.c = t_new(cdt, (size_t)m * n);
    g.sa = t_new(TR_F32, 2), g.sb = t_new(TR_F32, 1);
    const float qa = fa == TR_FP8_E5M2 ? 3000.0f : 150.0f, qb = fb == TR_FP8_E5M2 ? 3000.0f : 150.0f;
    fp8_fill(g.a, (size_t)m * k, fa, qa, 1.0);
    fp8_fill(g.b, (size_t)k * n, fb, qb, 1.0);
    ((float *)g.sa->h0)[0] = 1.0f / qa, ((float *)g.sb->h0)[0] = 1.0f / qb, ((float *)g.sa->h0)[1] = 1.0f / qb;
    t_fill(g.c, 30.0f);
    reset_host();
    const kern_fp8_operand a = {(const uint8_t *)g.a->h, fa, (const float *)g.sa->h};
    const kern_fp8_operand b = {(const uint8_t *)g.b->h, fb, (const float *)g.sb->h};
    twin_kern_gemm_fp8(NULL, H(g.c), a, b, m, n, k, ta, tb, g.alpha, beta, fast);
    tens *outs[] = {g.c};
    run_gpu_twice("gemm_fp8", fp8g_gpu, &g, outs, 1);
    char name[128];
    snprintf(name, sizeof name, "gemm_fp8 %dx%dx%d %c%c%s %s.%s>%s%s%s", m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N',
             fast ? " fast" : "", tr_fp8_name(fa), tr_fp8_name(fb), tr_dtype_name(cdt), beta != 0.0f ? " +=" : "",
             packed ? " packed" : "");
    double num = 0.0, den = 0.0;
    size_t nan_mismatch = 0;
    for (size_t i = 0; i < g.c->n; i++) {
        const double w = t_get(g.c, g.c->h, i), v = t_get(g.c, g.c->g, i);
        if (isnan(w) != isnan(v)) nan_mismatch++;
        if (isnan(w) || isnan(v)) continue;
        num += (v - w) * (v - w), den += w * w;
    }
    const char *fa_env = getenv("TWINRUN_FP8_FAST_ACCUM");
    const bool fast_on = fast && !(fa_env && strcmp(fa_env, "0") == 0);
    const double rel = den > 0 ? sqrt(num / den) : sqrt(num), tol = cdt == TR_BF16 ? 4e-3 : fast_on ? 1e-3 : 3e-4;
    const int ok = rel <= tol && nan_mismatch == 0;
    printf("  %-48s rel L2 %.3e (bound %.0e)%s\n", name, rel, tol, ok ? "" : "  FAILED");
    if (!ok) g_fail++;
    release();
}

static void cases_fp8(void) {
    for (int f = 0; f < 2; f++) {
        const tr_fp8_format fmt = f ? TR_FP8_E5M2 : TR_FP8_E4M3;
        for (int d = 0; d < 2; d++) {
            const tr_dtype dt = d ? TR_BF16 : TR_F32;
            case_fp8_quantize(dt, 3000000, fmt, false, 0, 0, true); /* a multiple of 8: the vector path alone */
            case_fp8_quantize(dt, 1000003, fmt, false, 0, 0, true); /* and the remainder */
            case_fp8_quantize(dt, 7, fmt, false, 0, 0, true);       /* less than one vector */
            case_fp8_quantize(dt, 200001, fmt, true, 0, 0, true);
            case_fp8_quantize(dt, 100000, fmt, true, 1, 3, false); /* misaligned: one a thread */
        }
    }
    for (int a = 0; a < 2; a++)
        for (int margin = 0; margin <= 2; margin += 2) {
            const tr_fp8_amax_algo algo = a ? TR_FP8_AMAX_MOST_RECENT : TR_FP8_AMAX_MAX;
            case_fp8_scale_update(300, 1024, algo, margin ? TR_FP8_E5M2 : TR_FP8_E4M3, margin);
            case_fp8_scale_update(300, 1, algo, margin ? TR_FP8_E4M3 : TR_FP8_E5M2, margin);
            case_fp8_scale_update(5, 16, algo, TR_FP8_E4M3, margin);
        }
    /* The cast-transpose: the engine's shapes (whole 64 x 64 tiles), part tiles, and those the tiled kernel
     * leaves to the one-a-thread one (cols % 8, rows % 4, a misaligned x) */
    for (int f = 0; f < 2; f++) {
        const tr_fp8_format fmt = f ? TR_FP8_E5M2 : TR_FP8_E4M3;
        for (int d = 0; d < 2; d++) {
            const tr_dtype dt = d ? TR_BF16 : TR_F32;
            case_fp8_cast_transpose(dt, 1024, 768, fmt, true, true, 0);
            case_fp8_cast_transpose(dt, 1024, 768, fmt, false, true, 0);
            case_fp8_cast_transpose(dt, 100, 136, fmt, true, true, 0);
            case_fp8_cast_transpose(dt, 333, 264, fmt, f == 0, true, 0);
            case_fp8_cast_transpose(dt, 64, 100, fmt, true, true, 0);
            case_fp8_cast_transpose(dt, 64, 64, fmt, true, d == 0, 1);
        }
    }
    case_fp8_transpose(4096, 1024, 0);
    case_fp8_transpose(100, 136, 0);
    case_fp8_transpose(333, 264, 0);
    case_fp8_transpose(64, 99, 0);
    case_fp8_transpose(128, 64, 1);
    /* The GEMMs of a linear layer: the forward (ta F, tb T, fast accumulation), and the data and weight
     * gradients both as the engine runs them (its casts transpose: F T, split accumulation) and in the
     * layouts the backend transposes itself (F F; T F accumulating into an fp32 grad). Each with each
     * operand pair, bf16 and fp32 out. */
    static const struct {
        bool ta, tb, fast;
    } lay[] = {{false, true, true}, {false, true, false}, {false, false, false}, {true, false, false}};
    static const tr_fp8_format fa[] = {TR_FP8_E4M3, TR_FP8_E5M2, TR_FP8_E4M3};
    static const tr_fp8_format fb[] = {TR_FP8_E4M3, TR_FP8_E4M3, TR_FP8_E5M2};
    for (int l = 0; l < 4; l++)
        for (int p = 0; p < 3; p++) {
            const tr_dtype cdt = (l + p) % 2 ? TR_F32 : TR_BF16;
            const float beta = (l == 3 || p == 1) ? 1.0f : 0.0f;
            case_fp8_gemm(512, 768, 1024, lay[l].ta, lay[l].tb, lay[l].fast, fa[p], fb[p], cdt, beta, false);
        }
    for (int l = 0; l < 4; l++) /* odd m, n not a multiple of the tiles */
        case_fp8_gemm(333, 264, 336, lay[l].ta, lay[l].tb, lay[l].fast, TR_FP8_E4M3, TR_FP8_E4M3,
                      l == 3 ? TR_F32 : TR_BF16, l == 3 ? 1.0f : 0.0f, false);
    /* the scales as the engine keeps them, packed 4 bytes apart (cuBLASLt wants them 16-byte aligned: the
     * backend copies them), at the tiny model's shapes of the twin-vs-GPU check */
    for (int l = 0; l < 4; l++)
        case_fp8_gemm(64, 16, 64, lay[l].ta, lay[l].tb, lay[l].fast, l ? TR_FP8_E5M2 : TR_FP8_E4M3, TR_FP8_E4M3,
                      l == 3 ? TR_F32 : TR_BF16, l == 3 ? 1.0f : 0.0f, true);
}

/* --only KIND[,KIND...]: the cases of those kinds alone (gemm, attention, attention_pos, norm, embedding,
 * ce, rope, swiglu, elementwise, ranges, fp8), to look at one kernel again without the others' minutes */
static const char *g_only;

/* The comma-separated item at p: its length in *len; where the next one starts, NULL after the last. */
static const char *list_item(const char *p, size_t *len) {
    const char *e = strchr(p, ',');
    *len = e ? (size_t)(e - p) : strlen(p);
    return e ? e + 1 : NULL;
}

static bool want(const char *kind) {
    if (!g_only) return true;
    for (const char *p = g_only; p;) {
        size_t len;
        const char *next = list_item(p, &len);
        if (len == strlen(kind) && strncmp(p, kind, len) == 0) return true;
        p = next;
    }
    return false;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "kern_oracle");
        return 0;
    }
    static const char *const kinds[] = {"gemm", "attention", "attention_pos", "norm",   "embedding", "ce",
                                        "rope", "swiglu",    "elementwise",   "ranges", "fp8"};
    if (argc == 3 && strcmp(argv[1], "--only") == 0) {
        g_only = argv[2];
        for (const char *p = g_only; p;) { /* a misspelt kind would test nothing and pass */
            size_t len;
            const char *next = list_item(p, &len);
            bool known = false;
            for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++)
                known |= strlen(kinds[i]) == len && strncmp(kinds[i], p, len) == 0;
            if (!known) {
                fprintf(stderr,
                        "kern_oracle: --only: '%.*s' is no case kind (kinds: gemm, attention, attention_pos, "
                        "norm, embedding, ce, rope, swiglu, elementwise, ranges, fp8)\n",
                        (int)len, p);
                return 2;
            }
            p = next;
        }
    } else if (argc != 1) {
        fprintf(stderr, "usage: kern_oracle [--only KIND[,KIND...]] (kinds: gemm, attention, attention_pos, norm, "
                        "embedding, ce, rope, swiglu, elementwise, ranges, fp8)\n");
        return 2;
    }
    char err[256] = "";
    g_dev = dev_open(0, 0, err, sizeof err);
    if (!g_dev) {
        fprintf(stderr, "kern_oracle: %s\n", err);
        return 1;
    }
    g_s = dev_stream_default(g_dev);
    dev_info info;
    dev_get_info(g_dev, &info);
    printf("kern_oracle: twin CPU kernels vs %s (%s)\n", info.backend, info.name);
    for (int combo = 0; combo < 4; combo++) {
        if (want("gemm")) case_gemm(TR_F32, TR_F32, combo & 1, combo & 2, combo == 3 ? 0.5f : 0.0f);
        if (want("gemm")) case_gemm(TR_BF16, TR_BF16, combo & 1, combo & 2, combo == 1 ? 0.5f : 0.0f);
    }
    if (want("gemm")) case_gemm(TR_BF16, TR_F32, false, true, 1.0f);
    if (want("gemm")) case_gemm(TR_F32, TR_BF16, true, false, 0.0f); /* the fallback kernel */
    /* Attention runs with dev_set_deterministic on (--deterministic-mode: the cuDNN backward's fixed-order
     * variant), where both runs must give the same bits, then the long shapes once more with it off (the
     * default cuDNN backward, whose dQ sums have no fixed order): the oracle's bound only.
     * The seeds' lengths (bf16: cuDNN where it is built in, else the flash kernels): T 8192 with D 128 and
     * D 64, grouped heads; a context-parallel rank of a 8192 sequence, both of Megatron's chunk layouts;
     * the 1.5B model's T 4096 (the twin's double-precision side takes a while). */
    for (int det = 1; det >= 0; det--) {
        dev_set_deterministic(g_dev, det);
        g_same_bits = det;
        if (want("attention")) case_attention(TR_BF16, 1, 8192, 2, 1, 128);
        if (want("attention_pos")) case_attention_pos(TR_BF16, 1, det ? 2048 : 1024, 0, 2, 1, 128);
        /* the default backward's timed choice on the other chunk layout and head dim too */
        if (!det && want("attention_pos")) case_attention_pos(TR_BF16, 1, 1024, 1, 2, 1, 64);
        if (det) {
            if (want("attention")) case_attention(TR_BF16, 1, 8192, 2, 1, 64);
            if (want("attention_pos")) case_attention_pos(TR_BF16, 1, 2048, 1, 2, 1, 64);
            if (want("attention")) case_attention(TR_BF16, 1, 4096, 2, 1, 128);
            if (want("attention")) case_attention(TR_BF16, 1, 4096, 4, 1, 64);
        }
    }
    dev_set_deterministic(g_dev, true);
    g_same_bits = true;
    for (int dti = 0; dti < 2; dti++) {
        const tr_dtype dt = dti ? TR_BF16 : TR_F32;
        if (want("attention")) case_attention(dt, 2, 600, 4, 2, 64);
        if (want("attention")) case_attention(dt, 1, 333, 2, 1, 128);
        if (want("attention_pos")) case_attention_pos(dt, 2, 150, 1, 4, 2, 64);
        if (want("attention_pos")) case_attention_pos(dt, 2, 150, 0, 4, 2, 128);
        if (want("norm")) case_norm(KERN_NORM_RMS, false, dt, 200, 1000);
        if (want("norm")) case_norm(KERN_NORM_LAYER, true, dt, 200, 1000);
        if (want("norm")) case_norm(KERN_NORM_RMS, false, dt, 1000, 4096);
        if (want("norm")) case_norm(KERN_NORM_LAYER, false, dt, 333, 8192);
        if (want("embedding")) case_embedding(dt);
        if (want("embedding")) case_embedding_slice(dt);
        if (want("ce")) case_ce_slice(dt, 64);
        if (want("ce")) case_ce_slice(dt, 3000);
        if (want("rope")) case_rope(dt, false);
        if (want("rope")) case_rope(dt, true);
        if (want("swiglu")) case_swiglu_ce(dt);
        if (want("elementwise"))
            case_elementwise(dt, 3000001); /* > 1024 blocks of 4 x 256 elements: both sum_squares passes work */
        if (want("elementwise")) case_elementwise(dt, 3000000); /* a multiple of 8: add's eight-a-thread path */
        if (want("ranges")) case_ranges(dt);
        if (want("ranges")) case_ranges_rem(dt, false);
        if (want("ranges")) case_ranges_rem(dt, true);
    }
    if (want("fp8")) cases_fp8();
    const size_t used = dev_mem_used(g_dev);
    dev_close(g_dev);
    printf("kern_oracle: %s (%d failure(s)); device memory left %zu\n", g_fail || used ? "FAILED" : "all ok", g_fail,
           used);
    return g_fail || used ? 1 : 0;
}
