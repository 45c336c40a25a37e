/* kern_gemm: c[m,n] = alpha * op(a) @ op(b) + beta * c, row-major, fp32 compute.
 *
 * Row-major through a column-major library: the row-major c[m,n] is the column-major c^T[n,m],
 * and c^T = op(b)^T op(a)^T, so the library computes an (n x m x k) product with A' = b, B' = a:
 *   A' = b: stored col-major as [n,k] ld n (op N) when !tb, as [k,n] ld k (op T) when tb;
 *   B' = a: stored col-major as [k,m] ld k (op N) when !ta, as [m,k] ld m (op T) when ta;
 *   C' = c: [n,m] ld n.
 *
 * Paths (env TWINRUN_GEMM, read when a device first runs a GEMM):
 *   lt     cuBLASLt (default on CUDA): heuristic algorithm, 32 MiB workspace, the pointers' real
 *          alignment passed to the heuristic (so tr_buf_at offsets are fine); the descriptors and the
 *          heuristic's choice are built once per shape (m, n, k, ta, tb, the three types, the three
 *          alignments) and kept in a plan cache on the device, so a step of ~350 GEMMs asks the
 *          heuristic only on its first iteration;
 *   blas   cublasGemmEx (the MUSA default: muBLAS offers GemmEx; no Lt API confirmed);
 *   naive  the tiled fallback kernel for everything.
 * Types the libraries take with CUBLAS_COMPUTE_32F (true fp32, never TF32): a, b fp32 with c fp32;
 * a, b bf16 with c bf16 or fp32. Anything else (fp32 operands into bf16, mixed operands) and any
 * library refusal (no algorithm found) runs the tiled fallback. beta == 0 never reads c (the
 * libraries do not read C when beta is 0, nor does the fallback), so NaN in old c is ignored.
 *
 * FP8 (kern_gemm_fp8, cuda/kern_fp8.cu) shares the plan cache: tr_cu_gemm_fp8_lt runs the one layout
 * Hopper's FP8 kernels take, both operands K-major (row-major a [m,k] and b [n,k]: cuBLASLt's "TN"),
 * with the FP8 types in the key (codes TR_LT_FP8 + format), the operands' scale_inv as the A/B scale
 * pointers (set on the cached descriptor before each call) and the fast-accumulation flag in the key.
 * The library state (handles, workspace) lives on the device and is freed by dev_close; it is not
 * counted in dev_mem_used. */
#include <stdlib.h>
#include <string.h>

#define GPU_COMPAT_BLAS
#include "gpu_compat.h"
#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_gemm.h"

#define TR_LT_WORKSPACE (32u << 20)

enum gemm_mode { GEMM_LT = 0, GEMM_BLAS = 1, GEMM_NAIVE = 2 };

typedef struct gemm_state {
    enum gemm_mode mode;
    cublasHandle_t blas;
    bool have_blas;
#if TWINRUN_GPU_HAS_BLASLT
    cublasLtHandle_t lt;
    bool have_lt;
    void *ws;
    bool fp8_fast; /* forward FP8 GEMMs without the split accumulation (TWINRUN_FP8_FAST_ACCUM=0: with it) */
    struct lt_plan *plans; /* [TR_LT_PLANS] open addressing on the shape key */
    int nplans;
#endif
} gemm_state;

#if TWINRUN_GPU_HAS_BLASLT
#define TR_LT_PLANS 1024 /* a power of two; a model has a few dozen GEMM shapes */

/* Operand type codes of the key beyond tr_dtype's: TR_LT_FP8 + tr_fp8_format. */
#define TR_LT_FP8 16

/* Everything that decides the descriptors and the algorithm of one GEMM. */
typedef struct lt_key {
    int m, n, k;
    unsigned char ta, tb, dta, dtb, dtc;
    unsigned char fast; /* FP8: CUBLASLT_MATMUL_DESC_FAST_ACCUM */
    unsigned short al_a, al_b, al_c; /* byte alignment of the pointers, capped at 256 */
    unsigned short sms; /* CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, 0: the whole device (dev_stream_set_background) */
} lt_key;

/* A shape's descriptors and the heuristic's algorithm, built once. ok = false: cuBLASLt found no
 * algorithm (the fallback kernel runs, every time, without asking again). */
typedef struct lt_plan {
    bool used, ok;
    lt_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
} lt_plan;
#endif

static const char *blas_status_string(cublasStatus_t st) {
#ifndef TWINRUN_MUSA
    return cublasGetStatusString(st);
#else
    (void)st;
    return "muBLAS status (see mublas.h)";
#endif
}

#define BLAS_CHECK(call)                                                                                      \
    do {                                                                                                      \
        cublasStatus_t st_ = (call);                                                                          \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                                     \
            tr_cu_fail(__FILE__, __LINE__, "cublas", #call, (int)st_, blas_status_string(st_),                \
                       "a cuBLAS call failed: check the CUDA toolkit/driver match and the GEMM shapes; "      \
                       "TWINRUN_GEMM=naive bypasses cuBLAS");                                                 \
    } while (0)

static void gemm_state_free(void *p) {
    gemm_state *g = (gemm_state *)p;
    if (!g) return;
    if (g->have_blas) cublasDestroy(g->blas);
#if TWINRUN_GPU_HAS_BLASLT
    for (int i = 0; g->plans && i < TR_LT_PLANS; i++) {
        lt_plan *p = &g->plans[i];
        if (!p->used) continue;
        cublasLtMatrixLayoutDestroy(p->lc);
        cublasLtMatrixLayoutDestroy(p->lb);
        cublasLtMatrixLayoutDestroy(p->la);
        cublasLtMatmulDescDestroy(p->op);
    }
    free(g->plans);
    if (g->have_lt) cublasLtDestroy(g->lt);
    if (g->ws) cudaFree(g->ws);
#endif
    free(g);
}

static gemm_state *gemm_state_get(dev_device *d) {
    if (d->blas) return (gemm_state *)d->blas;
    gemm_state *g = (gemm_state *)calloc(1, sizeof *g);
    if (!g) tr_fatal("out of host memory creating the GEMM state");
    g->mode = TWINRUN_GPU_HAS_BLASLT ? GEMM_LT : GEMM_BLAS;
    const char *env = getenv("TWINRUN_GEMM");
    if (env && *env) {
        if (strcmp(env, "lt") == 0 && TWINRUN_GPU_HAS_BLASLT)
            g->mode = GEMM_LT;
        else if (strcmp(env, "blas") == 0)
            g->mode = GEMM_BLAS;
        else if (strcmp(env, "naive") == 0)
            g->mode = GEMM_NAIVE;
        else
            tr_fatal("TWINRUN_GEMM=%s: use lt (cuBLASLt, CUDA only), blas (GemmEx) or naive", env);
    }
    d->blas = g;
    d->blas_free = gemm_state_free;
    if (g->mode == GEMM_BLAS) {
        BLAS_CHECK(cublasCreate(&g->blas));
        g->have_blas = true;
    }
#if TWINRUN_GPU_HAS_BLASLT
    if (g->mode == GEMM_LT) {
        BLAS_CHECK(cublasLtCreate(&g->lt));
        g->have_lt = true;
        CU_CHECK(cudaMalloc(&g->ws, TR_LT_WORKSPACE));
        g->plans = (lt_plan *)calloc(TR_LT_PLANS, sizeof *g->plans);
        if (!g->plans) tr_fatal("out of host memory creating the cuBLASLt plan cache");
        const char *fast = getenv("TWINRUN_FP8_FAST_ACCUM");
        if (fast && *fast && strcmp(fast, "0") != 0 && strcmp(fast, "1") != 0)
            tr_fatal("TWINRUN_FP8_FAST_ACCUM=%s: use 1 (forward FP8 GEMMs with fast accumulation) or 0", fast);
        g->fp8_fast = !(fast && strcmp(fast, "0") == 0); /* Transformer Engine's default: fprop fast, grads split */
    }
#endif
    return g;
}

static cudaDataType lib_type(tr_dtype dt) { return dt == TR_BF16 ? CUDA_R_16BF : CUDA_R_32F; }

#if TWINRUN_GPU_HAS_BLASLT
/* A key's operand type code: a tr_dtype, or TR_LT_FP8 + tr_fp8_format. */
static cudaDataType lt_type(unsigned code) {
    if (code >= TR_LT_FP8) return code == TR_LT_FP8 + TR_FP8_E5M2 ? CUDA_R_8F_E5M2 : CUDA_R_8F_E4M3;
    return lib_type((tr_dtype)code);
}
#endif

/* The combinations cuBLAS runs with fp32 compute. */
static bool lib_supports(tr_buf c, tr_buf a, tr_buf b) {
    if (a.dt != b.dt) return false;
    if (a.dt == TR_F32) return c.dt == TR_F32;
    return a.dt == TR_BF16 && (c.dt == TR_BF16 || c.dt == TR_F32);
}

static void gemm_blas(gemm_state *g, dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta,
                      bool tb, float alpha, float beta) {
    BLAS_CHECK(cublasSetStream(g->blas, tr_cu_stream(s)));
    BLAS_CHECK(cublasGemmEx(g->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N, ta ? CUBLAS_OP_T : CUBLAS_OP_N, n, m, k, &alpha,
                            b.p, lib_type(b.dt), tb ? k : n, a.p, lib_type(a.dt), ta ? m : k, &beta, c.p,
                            lib_type(c.dt), n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

#if TWINRUN_GPU_HAS_BLASLT
static uint32_t ptr_align(const void *p) {
    uintptr_t u = (uintptr_t)p;
    uintptr_t lo = u & (~u + 1); /* lowest set bit */
    return lo == 0 || lo > 256 ? 256u : (uint32_t)lo;
}

/* The SM-count target of a GEMM launched now: the device less what an active background stream keeps. */
static unsigned short lt_sms(const dev_device *d) {
    return d->sms_reserved > 0 ? (unsigned short)(d->nsm - d->sms_reserved) : 0;
}

static bool lt_key_eq(const lt_key *a, const lt_key *b) {
    return a->m == b->m && a->n == b->n && a->k == b->k && a->ta == b->ta && a->tb == b->tb && a->dta == b->dta &&
           a->dtb == b->dtb && a->dtc == b->dtc && a->fast == b->fast && a->al_a == b->al_a && a->al_b == b->al_b &&
           a->al_c == b->al_c && a->sms == b->sms;
}

static uint64_t lt_key_hash(const lt_key *k) {
    const uint64_t f[] = {(uint64_t)k->m, (uint64_t)k->n, (uint64_t)k->k,
                          (uint64_t)k->ta | (uint64_t)k->tb << 8 | (uint64_t)k->dta << 16 | (uint64_t)k->dtb << 24 |
                              (uint64_t)k->dtc << 32 | (uint64_t)k->fast << 40,
                          (uint64_t)k->al_a | (uint64_t)k->al_b << 16 | (uint64_t)k->al_c << 32 |
                              (uint64_t)k->sms << 48};
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) h = (h ^ f[i]) * 0x100000001b3ULL;
    return h ^ (h >> 29);
}

/* Builds the descriptors of key's GEMM and asks the heuristic once. a_scale, b_scale: FP8's scale
 * pointers of cuBLASLt's A (our b) and B (our a), or NULL. */
static void lt_plan_build(gemm_state *g, lt_plan *p, const lt_key *key, const float *a_scale, const float *b_scale) {
    const int m = key->m, n = key->n, k = key->k;
    const bool ta = key->ta, tb = key->tb;
    const cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N, opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    p->key = *key;
    p->used = true;
    BLAS_CHECK(cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof opa));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof opb));
    if (key->sms) { /* the heuristic picks for, and the kernel launches on, this many multiprocessors */
        const int32_t sms = key->sms;
        BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_SM_COUNT_TARGET, &sms, sizeof sms));
    }
    if (key->dta >= TR_LT_FP8) { /* FP8: split (precise) accumulation unless the key asks for fast */
        const int8_t fast = key->fast ? 1 : 0;
        BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast));
        if (a_scale) /* the heuristic sees a scaled GEMM; the pointers are set again before each call */
            BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &a_scale,
                                                      sizeof a_scale));
        if (b_scale)
            BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &b_scale,
                                                      sizeof b_scale));
    }
    /* A' = b, B' = a, C' = c (see the top of the file). */
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&p->la, lt_type(key->dtb), tb ? k : n, tb ? n : k, tb ? k : n));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lb, lt_type(key->dta), ta ? m : k, ta ? k : m, ta ? m : k));
    BLAS_CHECK(cublasLtMatrixLayoutCreate(&p->lc, lib_type((tr_dtype)key->dtc), n, m, n));
    cublasLtMatmulPreference_t pref = NULL;
    BLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    const size_t ws = TR_LT_WORKSPACE;
    const uint32_t al_a = key->al_b, al_b = key->al_a, al_c = key->al_c; /* A' = b, B' = a */
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof al_a));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof al_b));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof al_c));
    BLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_c, sizeof al_c));
    cublasLtMatmulHeuristicResult_t res;
    memset(&res, 0, sizeof res);
    int found = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(g->lt, p->op, p->la, p->lb, p->lc, p->lc, pref, 1, &res,
                                                             &found);
    cublasLtMatmulPreferenceDestroy(pref);
    p->ok = st == CUBLAS_STATUS_SUCCESS && found > 0;
    if (p->ok) p->algo = res.algo;
}

/* The cached plan of this GEMM (built on first sight), or NULL when the cache is full. */
static lt_plan *lt_plan_get(gemm_state *g, const lt_key *key, const float *a_scale, const float *b_scale) {
    const unsigned mask = TR_LT_PLANS - 1;
    for (unsigned i = (unsigned)lt_key_hash(key) & mask, probes = 0; probes < TR_LT_PLANS; i = (i + 1) & mask, probes++) {
        lt_plan *p = &g->plans[i];
        if (p->used && lt_key_eq(&p->key, key)) return p;
        if (!p->used) {
            if (g->nplans >= TR_LT_PLANS / 2) return NULL; /* keep probes short: build per call beyond this */
            lt_plan_build(g, p, key, a_scale, b_scale);
            g->nplans++;
            return p;
        }
    }
    return NULL;
}

/* Returns false when cuBLASLt finds no algorithm (the caller falls back). */
static bool gemm_lt(gemm_state *g, dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb,
                    float alpha, float beta) {
    lt_key key;
    memset(&key, 0, sizeof key); /* padding too: keys are compared field by field, hashed likewise */
    key.m = m, key.n = n, key.k = k, key.ta = ta, key.tb = tb;
    key.dta = (unsigned char)a.dt, key.dtb = (unsigned char)b.dt, key.dtc = (unsigned char)c.dt;
    key.al_a = (unsigned short)ptr_align(a.p), key.al_b = (unsigned short)ptr_align(b.p);
    key.al_c = (unsigned short)ptr_align(c.p);
    key.sms = lt_sms(dev_stream_device(s));
    lt_plan *p = lt_plan_get(g, &key, NULL, NULL), tmp;
    if (!p) { /* cache full: a one-off plan */
        memset(&tmp, 0, sizeof tmp);
        lt_plan_build(g, &tmp, &key, NULL, NULL);
        p = &tmp;
    }
    if (p->ok)
        BLAS_CHECK(cublasLtMatmul(g->lt, p->op, &alpha, b.p, p->la, a.p, p->lb, &beta, c.p, p->lc, c.p, p->lc, &p->algo,
                                  g->ws, TR_LT_WORKSPACE, tr_cu_stream(s)));
    const bool ok = p->ok;
    if (p == &tmp) {
        cublasLtMatrixLayoutDestroy(tmp.lc);
        cublasLtMatrixLayoutDestroy(tmp.lb);
        cublasLtMatrixLayoutDestroy(tmp.la);
        cublasLtMatmulDescDestroy(tmp.op);
    }
    return ok;
}
#endif

static void gemm_dispatch(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb,
                          float alpha, float beta) {
    gemm_state *g = gemm_state_get(dev_stream_device(s));
    if (g->mode != GEMM_NAIVE && lib_supports(c, a, b)) {
#if TWINRUN_GPU_HAS_BLASLT
        if (g->mode == GEMM_LT) {
            if (gemm_lt(g, s, c, a, b, m, n, k, ta, tb, alpha, beta)) return;
            tr_cu_gemm_naive(s, c, a, b, m, n, k, ta, tb, alpha, beta); /* no Lt algorithm for this case */
            return;
        }
#endif
        gemm_blas(g, s, c, a, b, m, n, k, ta, tb, alpha, beta);
        return;
    }
    tr_cu_gemm_naive(s, c, a, b, m, n, k, ta, tb, alpha, beta);
}

extern "C" void kern_gemm(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb,
                          float alpha, float beta) {
    kern_gemm_check(s, c, a, b, m, n, k, ta, tb, alpha, beta);
    char kind[96] = "gemm";
    if (tr_prof_enabled(dev_stream_device(s)))
        snprintf(kind, sizeof kind, "gemm %dx%dx%d %c%c %s.%s>%s%s", m, n, k, ta ? 'T' : 'N', tb ? 'T' : 'N',
                 tr_dtype_name(a.dt), tr_dtype_name(b.dt), tr_dtype_name(c.dt), beta != 0.0f ? " +=" : "");
    TR_PROF(s, kind);
    gemm_dispatch(s, c, a, b, m, n, k, ta, tb, alpha, beta);
}

extern "C" void tr_cu_gemm_unprofiled(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta,
                                      bool tb, float alpha, float beta) {
    gemm_dispatch(s, c, a, b, m, n, k, ta, tb, alpha, beta);
}

extern "C" bool tr_cu_gemm_fp8_lt_enabled(dev_stream *s) {
#if TWINRUN_GPU_HAS_BLASLT
    return gemm_state_get(dev_stream_device(s))->mode == GEMM_LT;
#else
    (void)s;
    return false;
#endif
}

extern "C" void tr_cu_gemm_fp8_lt(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n,
                                  int k, float alpha, float beta, bool fast_accum) {
#if TWINRUN_GPU_HAS_BLASLT
    gemm_state *g = gemm_state_get(dev_stream_device(s));
    if (g->mode != GEMM_LT) tr_fatal("gemm_fp8: the cuBLASLt path called with TWINRUN_GEMM other than lt");
    lt_key key;
    memset(&key, 0, sizeof key);
    key.m = m, key.n = n, key.k = k, key.ta = 0, key.tb = 1; /* a [m,k], b [n,k]: cuBLASLt's TN */
    key.dta = (unsigned char)(TR_LT_FP8 + a.fmt), key.dtb = (unsigned char)(TR_LT_FP8 + b.fmt);
    key.dtc = (unsigned char)c.dt;
    key.fast = fast_accum && g->fp8_fast;
    key.al_a = (unsigned short)ptr_align(a.p), key.al_b = (unsigned short)ptr_align(b.p);
    key.al_c = (unsigned short)ptr_align(c.p);
    key.sms = lt_sms(dev_stream_device(s));
    /* The scale pointers are read 16-byte aligned like the matrices: the engine keeps its scales packed
     * (4-byte steps), and cublasLtMatmul refused them ("not supported") where the oracle's own allocations
     * passed, so unaligned ones travel through an aligned copy (32 bytes, stream-ordered). */
    const float *sa = b.scale_inv, *sb = a.scale_inv;
    float *sc = NULL;
    if (!tr_aligned16(sa) || !tr_aligned16(sb)) {
        sc = (float *)tr_cu_scratch(s, 32, "gemm_fp8 scales");
        CU_CHECK(cudaMemcpyAsync(sc, sa, sizeof(float), cudaMemcpyDeviceToDevice, tr_cu_stream(s)));
        CU_CHECK(cudaMemcpyAsync(sc + 4, sb, sizeof(float), cudaMemcpyDeviceToDevice, tr_cu_stream(s)));
        sa = sc, sb = sc + 4;
    }
    /* cuBLASLt's A is our b, its B our a (the top of the file) */
    lt_plan *p = lt_plan_get(g, &key, sa, sb), tmp;
    if (!p) {
        memset(&tmp, 0, sizeof tmp);
        lt_plan_build(g, &tmp, &key, sa, sb);
        p = &tmp;
    }
    if (!p->ok)
        tr_fatal("gemm_fp8: cuBLASLt has no FP8 algorithm for m %d n %d k %d (%s x %s -> %s) on this device (FP8 "
                 "GEMMs need sm_89 or newer, k a multiple of 16 and 16-byte aligned operands); TWINRUN_GEMM=blas runs "
                 "FP8 GEMMs through the dequantising fallback, or leave this model's --fp8-format off",
                 m, n, k, tr_fp8_name(a.fmt), tr_fp8_name(b.fmt), tr_dtype_name(c.dt));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa));
    BLAS_CHECK(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb));
    BLAS_CHECK(cublasLtMatmul(g->lt, p->op, &alpha, b.p, p->la, a.p, p->lb, &beta, c.p, p->lc, c.p, p->lc, &p->algo,
                              g->ws, TR_LT_WORKSPACE, tr_cu_stream(s)));
    if (sc) tr_cu_scratch_free(s, sc);
    if (p == &tmp) {
        cublasLtMatrixLayoutDestroy(tmp.lc);
        cublasLtMatrixLayoutDestroy(tmp.lb);
        cublasLtMatrixLayoutDestroy(tmp.la);
        cublasLtMatmulDescDestroy(tmp.op);
    }
#else
    (void)s, (void)c, (void)a, (void)b, (void)m, (void)n, (void)k, (void)alpha, (void)beta, (void)fast_accum;
    tr_fatal("gemm_fp8: this build has no cuBLASLt (tr_cu_gemm_fp8_lt_enabled said so)");
#endif
}
