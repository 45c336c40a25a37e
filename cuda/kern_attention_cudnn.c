/* Causal grouped-query attention on cuDNN's fused flash-attention engines, through the backend graph
 * API from C (see kern_attention_cudnn.h for the contract).
 *
 * cuDNN has no single "attention" call on Hopper: the fused engines match a graph of generic
 * operations (matmul, pointwise, reduction, reshape) and compile it to one kernel. The graphs below are
 * the ones cuDNN's frontend library builds for scaled-dot-product attention with a causal mask and
 * softmax statistics, op for op, so that the same engines accept them:
 *
 *   forward   S = Q K^T (fp32); S *= scale; row/col = the indices of S; S = row + (Tk - Tq) >= col ? S : -inf;
 *             M = max_j S; E = exp(S - M); L = sum_j E; lse = M + log L; P = E / L (bf16); O = P V
 *   backward  Delta = sum_d dO * O (the "softmax sum", fp32, ours to hold); S as above less lse, masked;
 *             P = exp(S); dV = P^T dO; dP = dO V^T; dS = P (dP - Delta) scale; dK = dS^T Q; dQ = dS K.
 *             With groups of several heads dV and dK are first per query head, then summed over the
 *             group (a reduction the engine fuses). dQ goes through an fp32 accumulator of ours (the
 *             engine adds to it with atomics: not deterministic), or, deterministic, straight to dQ
 *             (the engine then stores dP in its workspace and sums dQ in a fixed order).
 *
 * Operands are 4-D [batch, head, row, column] with explicit strides, so twinrun's [B,T,NH,D] tensors
 * (and slices of them: one context-parallel chunk) go in without a copy; K^T and V^T are K and V
 * with the last two strides swapped. The scale, -inf, 1 and the two sequence lengths are scalars
 * passed by value (a host pointer in the variant pack).
 *
 * A plan (operation graph -> heuristics' engine configs -> the first that finalizes) is built once per
 * shape and kept for the device's life; its workspace comes from the stream's scratch at each call. A
 * shape that no engine takes is remembered as refused: the caller's own kernels serve it.
 *
 * The heuristics' first engine is not always the fastest (a few percent either way by shape, and for
 * a backward the deterministic engine sometimes beats the atomic one), so outside --deterministic-mode
 * the first call of each backward shape times the atomic and the deterministic graphs' first engines
 * (dnn_choose) on its own operands and keeps the faster, if its outputs agree with the other's (the
 * heuristics' second backward engines returned wrong dQ and dK on a context-parallel chunk without a
 * word, in some processes only: they are no longer candidates; kern_attention_cudnn_check.cu). The
 * first call of each forward shape times the heuristics' first two engines the same way: at some
 * shapes the first is the slower (D 64, T 1024 x 4 on an H100: a 64x256 tile where the second's
 * 64x128 is 6% faster, the tile torch's graph gets first); the wrong outputs seen were a backward's
 * only, and a forward candidate too is kept only if its outputs agree with the first engine's.
 * In --deterministic-mode the choice is fixed (the heuristics' first deterministic engine): a
 * timed choice could differ between two runs, and so could the bits. */
#include "kern_attention_cudnn.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_dev.h"

#if defined(TWINRUN_CUDNN) && !defined(TWINRUN_MUSA)

#include <cudnn.h>

#if CUDNN_MAJOR < 9
#error "kern_attention_cudnn.c needs cuDNN 9 (configure with -DTWINRUN_CUDNN=OFF to build without it)"
#endif

enum { DNN_MAX_DESC = 96, DNN_MAX_PLANS = 256, DNN_MAX_CFG = 64, DNN_MAX_CHOICES = 64 };

/* the real tensors' unique ids (virtual ones count up from UID_VIRTUAL) */
enum {
    UID_Q = 1,
    UID_K,
    UID_V,
    UID_O,
    UID_LSE,
    UID_DO,
    UID_DQ,
    UID_DK,
    UID_DV,
    UID_SCALE,
    UID_NEG_INF,
    UID_ONE,
    UID_SEQ_Q,
    UID_SEQ_KV,
    UID_DELTA,
    UID_DQ_ACC,
    UID_VIRTUAL = 100
};

typedef struct dnn_key {
    int bwd, det, alt, B, Tq, Tk, NH, KV, D; /* alt: which finalizing engine config (0: the heuristics' first) */
    int64_t q_bstride, k_bstride, lse_bstride, lse_hstride;
} dnn_key;

typedef struct dnn_plan {
    dnn_key key;
    bool ok; /* false: refused (no engine) */
    cudnnBackendDescriptor_t plan;
    int64_t workspace;
    cudnnBackendDescriptor_t desc[DNN_MAX_DESC]; /* everything the plan was built from */
    int ndesc;
} dnn_plan;

/* The plan a call of shape `want` (alt 0) runs: the fastest of the timed candidates. */
typedef struct dnn_choice {
    dnn_key want;
    const dnn_plan *plan; /* NULL: no candidate takes the shape */
} dnn_choice;

typedef struct dnn_state {
    bool usable;
    bool zero_dq_acc; /* cuDNN before 9.6.0 leaves the dQ accumulator's zeroing to its caller */
    int tune;         /* TWINRUN_CUDNN_TUNE: 0 the heuristics' first engine, 1 the fastest (default), 2 and say which */
    int only_det, only_alt; /* TWINRUN_CUDNN_CANDIDATE (-1: every candidate): the one candidate timed choices take */
    cudnnHandle_t h;
    dnn_plan *plans[DNN_MAX_PLANS];
    int nplans;
    dnn_choice choices[DNN_MAX_CHOICES];
    int nchoices;
} dnn_state;

/* a graph being built: its descriptors, the next virtual uid, the first failure */
typedef struct dnn_build {
    dnn_plan *p;
    int64_t next_uid;
    cudnnStatus_t st;
    char what[160];
} dnn_build;

static void dnn_state_free(void *arg) {
    dnn_state *g = (dnn_state *)arg;
    if (!g) return;
    for (int i = 0; i < g->nplans; i++) {
        dnn_plan *p = g->plans[i];
        if (p->plan) cudnnBackendDestroyDescriptor(p->plan);
        for (int k = p->ndesc - 1; k >= 0; k--) cudnnBackendDestroyDescriptor(p->desc[k]);
        free(p);
    }
    if (g->h) cudnnDestroy(g->h);
    free(g);
}

static dnn_state *dnn_state_get(dev_stream *s) {
    dev_device *d = s->dev;
    if (d->dnn) return (dnn_state *)d->dnn;
    dnn_state *g = (dnn_state *)calloc(1, sizeof *g);
    if (!g) tr_fatal("out of host memory creating the cuDNN state");
    d->dnn = g;
    d->dnn_free = dnn_state_free;
    int dev = 0, major = 0;
    CU_CHECK(cudaGetDevice(&dev));
    CU_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    const size_t version = cudnnGetVersion();
    if (version < 90000 || major < 8) return g; /* not usable: the flash kernels serve */
    const cudnnStatus_t st = cudnnCreate(&g->h);
    if (st != CUDNN_STATUS_SUCCESS) {
        fprintf(stderr, "twinrun: cuDNN %zu did not start (%s); attention takes the flash kernels\n", version,
                cudnnGetErrorString(st));
        g->h = NULL;
        return g;
    }
    g->usable = true;
    /* From 9.6.0 the engine zeroes the accumulator itself (the frontend stopped memsetting it then);
     * TWINRUN_CUDNN_DQ_MEMSET=1 zeroes it here too, for the A/B */
    const char *env = getenv("TWINRUN_CUDNN_DQ_MEMSET");
    g->zero_dq_acc = version < 90600 || (env && strcmp(env, "1") == 0);
    const char *tune = getenv("TWINRUN_CUDNN_TUNE");
    g->tune = !tune || !*tune ? 1 : strcmp(tune, "0") == 0 ? 0 : strcmp(tune, "log") == 0 ? 2 : 1;
    g->only_det = g->only_alt = -1;
    const char *only = getenv("TWINRUN_CUDNN_CANDIDATE");
    if (only && *only) {
        if (strcmp(only, "atomic0") == 0 || strcmp(only, "atomic1") == 0) g->only_det = 0;
        else if (strcmp(only, "det0") == 0 || strcmp(only, "det1") == 0) g->only_det = 1;
        else
            tr_fatal("TWINRUN_CUDNN_CANDIDATE is '%s': give atomic0, atomic1, det0 or det1 (a backward's graph and "
                     "which of the heuristics' engines; a forward takes the engine's number), or leave it unset",
                     only);
        g->only_alt = only[strlen(only) - 1] - '0';
    }
    return g;
}

bool tr_cu_cudnn_usable(dev_stream *s) { return dnn_state_get(s)->usable; }

/* ---- graph building: each helper records its descriptor, and does nothing after a failure ------ */

#define DNN_TRY(b, call, ...)                                                                                          \
    do {                                                                                                               \
        if ((b)->st == CUDNN_STATUS_SUCCESS) {                                                                         \
            cudnnStatus_t st_ = (call);                                                                                \
            if (st_ != CUDNN_STATUS_SUCCESS) {                                                                         \
                (b)->st = st_;                                                                                         \
                snprintf((b)->what, sizeof(b)->what, __VA_ARGS__);                                                     \
            }                                                                                                          \
        }                                                                                                              \
    } while (0)

static cudnnBackendDescriptor_t dnn_new(dnn_build *b, cudnnBackendDescriptorType_t type) {
    cudnnBackendDescriptor_t d = NULL;
    if (b->st != CUDNN_STATUS_SUCCESS) return NULL;
    if (b->p->ndesc == DNN_MAX_DESC) tr_fatal("kern_attention_cudnn: more than %d descriptors a graph", DNN_MAX_DESC);
    DNN_TRY(b, cudnnBackendCreateDescriptor(type, &d), "creating descriptor type %d", (int)type);
    if (b->st == CUDNN_STATUS_SUCCESS) b->p->desc[b->p->ndesc++] = d;
    return d;
}

static void dnn_set(dnn_build *b, cudnnBackendDescriptor_t d, cudnnBackendAttributeName_t name,
                    cudnnBackendAttributeType_t type, int64_t n, const void *value) {
    DNN_TRY(b, cudnnBackendSetAttribute(d, name, type, n, value), "setting attribute %d", (int)name);
}

static void dnn_finalize(dnn_build *b, cudnnBackendDescriptor_t d, const char *what) {
    DNN_TRY(b, cudnnBackendFinalize(d), "finalizing %s", what);
}

/* A tensor [d0,d1,d2,d3] with strides s in layout `reorder` (NONE: as the strides say); uid 0: a virtual
 * one (a fresh id). */
static cudnnBackendDescriptor_t dnn_tensor_laid(dnn_build *b, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                                                const int64_t strides[4], bool by_value,
                                                cudnnBackendTensorReordering_t reorder) {
    cudnnBackendDescriptor_t t = dnn_new(b, CUDNN_BACKEND_TENSOR_DESCRIPTOR);
    const bool virt = uid == 0;
    if (virt) uid = b->next_uid++;
    const int64_t align = 16;
    dnn_set(b, t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &dt);
    dnn_set(b, t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims);
    dnn_set(b, t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides);
    dnn_set(b, t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    dnn_set(b, t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &align);
    dnn_set(b, t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &virt);
    dnn_set(b, t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    if (reorder != CUDNN_TENSOR_REORDERING_NONE)
        dnn_set(b, t, CUDNN_ATTR_TENSOR_REORDERING_MODE, CUDNN_TYPE_TENSOR_REORDERING_MODE, 1, &reorder);
    dnn_finalize(b, t, "a tensor");
    return t;
}

static cudnnBackendDescriptor_t dnn_tensor(dnn_build *b, int64_t uid, cudnnDataType_t dt, const int64_t dims[4],
                                           const int64_t strides[4], bool by_value) {
    return dnn_tensor_laid(b, uid, dt, dims, strides, by_value, CUDNN_TENSOR_REORDERING_NONE);
}

/* A virtual tensor of the same kind as the dims/strides given. */
static cudnnBackendDescriptor_t dnn_virtual(dnn_build *b, cudnnDataType_t dt, int64_t d0, int64_t d1, int64_t d2,
                                            int64_t d3, int64_t s0, int64_t s1, int64_t s2, int64_t s3) {
    const int64_t dims[4] = {d0, d1, d2, d3}, strides[4] = {s0, s1, s2, s3};
    return dnn_tensor(b, 0, dt, dims, strides, false);
}

/* The fp32 dQ accumulator. cuDNN's frontend declares it in the F16x16 reordered layout (tiles the
 * engine's atomic adds cover whole), as it does the swizzled tensors of its other attention graphs; the
 * engine alone reads and writes it, so its layout is the engine's business. TWINRUN_CUDNN_DQ_REORDER=0
 * declares the plain row-major layout instead (the A/B of lab/attn_bench.sh). */
static bool dnn_dq_reordered(void) {
    static int on = -1;
    if (on < 0) {
        const char *e = getenv("TWINRUN_CUDNN_DQ_REORDER");
        on = !(e && strcmp(e, "0") == 0);
    }
    return on;
}

static cudnnBackendDescriptor_t dnn_dq_accumulator(dnn_build *b, const int64_t dims[4], const int64_t strides[4]) {
    return dnn_tensor_laid(b, UID_DQ_ACC, CUDNN_DATA_FLOAT, dims, strides, false,
                           dnn_dq_reordered() ? CUDNN_TENSOR_REORDERING_F16x16 : CUDNN_TENSOR_REORDERING_NONE);
}

static cudnnBackendDescriptor_t dnn_scalar(dnn_build *b, int64_t uid, cudnnDataType_t dt) {
    const int64_t one[4] = {1, 1, 1, 1};
    return dnn_tensor(b, uid, dt, one, one, true);
}

/* y = mode(x [, b [, t]]): a pointwise operation (math in `prec`; axis for GEN_INDEX, else -1). */
static cudnnBackendDescriptor_t dnn_pointwise(dnn_build *b, cudnnPointwiseMode_t mode, cudnnDataType_t prec,
                                              int64_t axis, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t in_b,
                                              cudnnBackendDescriptor_t in_t, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t pw = dnn_new(b, CUDNN_BACKEND_POINTWISE_DESCRIPTOR);
    dnn_set(b, pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    dnn_set(b, pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) dnn_set(b, pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    dnn_finalize(b, pw, "a pointwise descriptor");
    cudnnBackendDescriptor_t op = dnn_new(b, CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR);
    const float alpha = 1.0f;
    dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &pw);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    if (in_b) dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in_b);
    if (in_t) dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &in_t);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA1, CUDNN_TYPE_FLOAT, 1, &alpha);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_POINTWISE_ALPHA2, CUDNN_TYPE_FLOAT, 1, &alpha);
    dnn_finalize(b, op, "a pointwise operation");
    return op;
}

static cudnnBackendDescriptor_t dnn_reduce(dnn_build *b, cudnnReduceTensorOp_t mode, cudnnBackendDescriptor_t x,
                                           cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t r = dnn_new(b, CUDNN_BACKEND_REDUCTION_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    dnn_set(b, r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &mode);
    dnn_set(b, r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    dnn_finalize(b, r, "a reduction descriptor");
    cudnnBackendDescriptor_t op = dnn_new(b, CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &r);
    dnn_finalize(b, op, "a reduction operation");
    return op;
}

/* c = a b over the last two dimensions (fp32 accumulation), batched over the first two. */
static cudnnBackendDescriptor_t dnn_matmul(dnn_build *b, cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t bm,
                                           cudnnBackendDescriptor_t c) {
    cudnnBackendDescriptor_t mm = dnn_new(b, CUDNN_BACKEND_MATMUL_DESCRIPTOR);
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT;
    dnn_set(b, mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &f32);
    dnn_finalize(b, mm, "a matmul descriptor");
    cudnnBackendDescriptor_t op = dnn_new(b, CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &a);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &bm);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &c);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_MATMUL_DESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &mm);
    dnn_finalize(b, op, "a matmul operation");
    return op;
}

/* y: x seen with other dimensions/strides (a transpose, here). */
static cudnnBackendDescriptor_t dnn_reshape(dnn_build *b, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    cudnnBackendDescriptor_t op = dnn_new(b, CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &x);
    dnn_set(b, op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &y);
    dnn_finalize(b, op, "a reshape operation");
    return op;
}

/* The causal mask on s [B,NH,Tq,Tk] (fp32): row + (Tk - Tq) >= col keeps the score, else -inf. */
static cudnnBackendDescriptor_t dnn_causal(dnn_build *b, const dnn_key *k, cudnnBackendDescriptor_t s,
                                           cudnnBackendDescriptor_t *ops, int *nops) {
    const int64_t B = k->B, H = k->NH, Tq = k->Tq, Tk = k->Tk, sS[4] = {H * Tq * Tk, Tq * Tk, Tk, 1};
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, i32 = CUDNN_DATA_INT32, bl = CUDNN_DATA_BOOLEAN;
#define V_LIKE_S(dt) dnn_virtual(b, dt, B, H, Tq, Tk, sS[0], sS[1], sS[2], sS[3])
    cudnnBackendDescriptor_t row = V_LIKE_S(i32), col = V_LIKE_S(i32), keep = V_LIKE_S(bl), out = V_LIKE_S(f32);
    ops[(*nops)++] = dnn_pointwise(b, CUDNN_POINTWISE_GEN_INDEX, f32, 2, s, NULL, NULL, row);
    if (Tq != Tk) { /* bottom-right diagonal: row + Tk - Tq */
        cudnnBackendDescriptor_t r1 = V_LIKE_S(i32), r2 = V_LIKE_S(i32);
        cudnnBackendDescriptor_t skv = dnn_scalar(b, UID_SEQ_KV, i32), sq = dnn_scalar(b, UID_SEQ_Q, i32);
        ops[(*nops)++] = dnn_pointwise(b, CUDNN_POINTWISE_ADD, i32, 3, row, skv, NULL, r1);
        ops[(*nops)++] = dnn_pointwise(b, CUDNN_POINTWISE_SUB, i32, 3, r1, sq, NULL, r2);
        row = r2;
    }
    ops[(*nops)++] = dnn_pointwise(b, CUDNN_POINTWISE_GEN_INDEX, f32, 3, s, NULL, NULL, col);
    ops[(*nops)++] = dnn_pointwise(b, CUDNN_POINTWISE_CMP_GE, bl, -1, row, col, NULL, keep);
    cudnnBackendDescriptor_t neg_inf = dnn_scalar(b, UID_NEG_INF, f32);
    ops[(*nops)++] = dnn_pointwise(b, CUDNN_POINTWISE_BINARY_SELECT, f32, -1, s, neg_inf, keep, out);
#undef V_LIKE_S
    return out;
}

/* The operand tensors in twinrun's layouts, as 4-D [batch, head, row, col] views. */
typedef struct dnn_io {
    cudnnBackendDescriptor_t q, kt, v, o, lse;
} dnn_io;

static dnn_io dnn_operands(dnn_build *b, const dnn_key *k) {
    const int64_t B = k->B, NH = k->NH, KV = k->KV, Tq = k->Tq, Tk = k->Tk, D = k->D;
    const cudnnDataType_t bf16 = CUDNN_DATA_BFLOAT16;
    const int64_t dq[4] = {B, NH, Tq, D}, sq[4] = {k->q_bstride, D, NH * D, 1};
    const int64_t dkt[4] = {B, KV, D, Tk}, skt[4] = {k->k_bstride, D, 1, KV * D};
    const int64_t dv[4] = {B, KV, Tk, D}, sv[4] = {k->k_bstride, D, KV * D, 1};
    const int64_t dl[4] = {B, NH, Tq, 1}, sl[4] = {k->lse_bstride, k->lse_hstride, 1, 1};
    dnn_io io;
    io.q = dnn_tensor(b, UID_Q, bf16, dq, sq, false);
    io.kt = dnn_tensor(b, UID_K, bf16, dkt, skt, false);
    /* the forward reads V as [Tk, D], the backward as V^T [D, Tk] */
    io.v = k->bwd ? dnn_tensor(b, UID_V, bf16, dkt, skt, false) : dnn_tensor(b, UID_V, bf16, dv, sv, false);
    io.o = dnn_tensor(b, UID_O, bf16, dq, sq, false);
    io.lse = dnn_tensor(b, UID_LSE, CUDNN_DATA_FLOAT, dl, sl, false);
    return io;
}

static int dnn_forward_ops(dnn_build *b, const dnn_key *k, cudnnBackendDescriptor_t *ops) {
    const int64_t B = k->B, H = k->NH, Tq = k->Tq, Tk = k->Tk, sS[4] = {H * Tq * Tk, Tq * Tk, Tk, 1};
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, bf16 = CUDNN_DATA_BFLOAT16;
    int n = 0;
    const dnn_io io = dnn_operands(b, k);
#define V_S(dt) dnn_virtual(b, dt, B, H, Tq, Tk, sS[0], sS[1], sS[2], sS[3])
#define V_ROW() dnn_virtual(b, f32, B, H, Tq, 1, H *Tq, Tq, 1, 1)
    cudnnBackendDescriptor_t s0 = V_S(f32), s1 = V_S(f32);
    ops[n++] = dnn_matmul(b, io.q, io.kt, s0);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, s0, dnn_scalar(b, UID_SCALE, f32), NULL, s1);
    cudnnBackendDescriptor_t s2 = dnn_causal(b, k, s1, ops, &n);
    cudnnBackendDescriptor_t m = V_ROW(), s3 = V_S(f32), e = V_S(f32), l = V_ROW(), logl = V_ROW(), p = V_S(bf16);
    ops[n++] = dnn_reduce(b, CUDNN_REDUCE_TENSOR_MAX, s2, m);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_SUB, f32, -1, s2, m, NULL, s3);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_EXP, f32, -1, s3, NULL, NULL, e);
    ops[n++] = dnn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, e, l);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_LOG, f32, -1, l, NULL, NULL, logl);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_ADD, f32, -1, m, logl, NULL, io.lse);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_DIV, f32, -1, e, l, NULL, p);
    ops[n++] = dnn_matmul(b, p, io.v, io.o);
#undef V_S
#undef V_ROW
    return n;
}

static int dnn_backward_ops(dnn_build *b, const dnn_key *k, cudnnBackendDescriptor_t *ops) {
    const int64_t B = k->B, H = k->NH, KV = k->KV, Tq = k->Tq, Tk = k->Tk, D = k->D;
    const int64_t sS[4] = {H * Tq * Tk, Tq * Tk, Tk, 1};
    const cudnnDataType_t f32 = CUDNN_DATA_FLOAT, bf16 = CUDNN_DATA_BFLOAT16;
    int n = 0;
    const dnn_io io = dnn_operands(b, k);
    const int64_t dq[4] = {B, H, Tq, D}, sq[4] = {k->q_bstride, D, H * D, 1};
    const int64_t dk[4] = {B, KV, Tk, D}, sk[4] = {k->k_bstride, D, KV * D, 1};
    const int64_t drow[4] = {B, H, Tq, 1}, srow[4] = {H * Tq, Tq, 1, 1};
    cudnnBackendDescriptor_t dout = dnn_tensor(b, UID_DO, bf16, dq, sq, false);
    cudnnBackendDescriptor_t t_dq = dnn_tensor(b, UID_DQ, bf16, dq, sq, false);
    cudnnBackendDescriptor_t t_dk = dnn_tensor(b, UID_DK, bf16, dk, sk, false);
    cudnnBackendDescriptor_t t_dv = dnn_tensor(b, UID_DV, bf16, dk, sk, false);
    cudnnBackendDescriptor_t delta = dnn_tensor(b, UID_DELTA, f32, drow, srow, false);
    cudnnBackendDescriptor_t scale = dnn_scalar(b, UID_SCALE, f32);
#define V_S(dt) dnn_virtual(b, dt, B, H, Tq, Tk, sS[0], sS[1], sS[2], sS[3])
#define V_ST(dt) dnn_virtual(b, dt, B, H, Tk, Tq, sS[0], sS[1], 1, Tk) /* S^T: the same memory transposed */
    /* Delta = sum_d dO * O, through a multiplication by 1 (the pattern the engines expect) */
    cudnnBackendDescriptor_t dodo = dnn_virtual(b, f32, B, H, Tq, D, H * Tq * D, Tq * D, H * D, 1);
    cudnnBackendDescriptor_t dsum = dnn_virtual(b, f32, B, H, Tq, 1, H * Tq, Tq, 1, 1);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, dout, io.o, NULL, dodo);
    ops[n++] = dnn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, dodo, dsum);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, dsum, dnn_scalar(b, UID_ONE, f32), NULL, delta);
    /* P = exp(S * scale - lse), masked */
    cudnnBackendDescriptor_t s0 = V_S(f32), s1 = V_S(f32), s2 = V_S(f32);
    ops[n++] = dnn_matmul(b, io.q, io.kt, s0);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, s0, scale, NULL, s1);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_SUB, f32, -1, s1, io.lse, NULL, s2);
    cudnnBackendDescriptor_t s3 = dnn_causal(b, k, s2, ops, &n);
    cudnnBackendDescriptor_t p = V_S(f32), pt = V_ST(bf16);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_EXP, f32, -1, s3, NULL, NULL, p);
    ops[n++] = dnn_reshape(b, p, pt);
    /* dV = P^T dO: per query head, then summed over each group */
    if (H == KV) {
        ops[n++] = dnn_matmul(b, pt, dout, t_dv);
    } else {
        cudnnBackendDescriptor_t dv_full = dnn_virtual(b, bf16, B, H, Tk, D, H * Tk * D, Tk * D, D, 1);
        ops[n++] = dnn_matmul(b, pt, dout, dv_full);
        ops[n++] = dnn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, dv_full, t_dv);
    }
    /* dS = P (dO V^T - Delta) scale */
    cudnnBackendDescriptor_t dp = V_S(f32), t3 = V_S(f32), t4 = V_S(f32), ds = V_S(f32), dst = V_ST(bf16);
    ops[n++] = dnn_matmul(b, dout, io.v, dp);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_SUB, f32, -1, dp, delta, NULL, t3);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, t3, p, NULL, t4);
    ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_MUL, f32, -1, t4, scale, NULL, ds);
    ops[n++] = dnn_reshape(b, ds, dst);
    /* dK = dS^T Q */
    if (H == KV) {
        ops[n++] = dnn_matmul(b, dst, io.q, t_dk);
    } else {
        cudnnBackendDescriptor_t dk_full = dnn_virtual(b, bf16, B, H, Tk, D, H * Tk * D, Tk * D, D, 1);
        ops[n++] = dnn_matmul(b, dst, io.q, dk_full);
        ops[n++] = dnn_reduce(b, CUDNN_REDUCE_TENSOR_ADD, dk_full, t_dk);
    }
    /* dQ = dS K, K being K^T seen transposed */
    cudnnBackendDescriptor_t kk = dnn_virtual(b, bf16, B, KV, Tk, D, k->k_bstride, D, KV * D, 1);
    ops[n++] = dnn_reshape(b, io.kt, kk);
    if (k->det) {
        ops[n++] = dnn_matmul(b, ds, kk, t_dq);
    } else {
        const int64_t dacc[4] = {B, H, Tq, D}, sacc[4] = {H * Tq * D, Tq * D, D, 1};
        cudnnBackendDescriptor_t acc = dnn_dq_accumulator(b, dacc, sacc);
        ops[n++] = dnn_matmul(b, ds, kk, acc);
        ops[n++] = dnn_pointwise(b, CUDNN_POINTWISE_IDENTITY, f32, -1, acc, NULL, NULL, t_dq);
    }
#undef V_S
#undef V_ST
    return n;
}

/* True when the engine config's engine carries the numerical note. */
static bool dnn_cfg_has_note(dnn_build *b, cudnnBackendDescriptor_t cfg, cudnnBackendNumericalNote_t note) {
    cudnnBackendDescriptor_t eng = NULL;
    if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_ENGINE_DESCRIPTOR, &eng) != CUDNN_STATUS_SUCCESS) return true;
    int64_t n = 0;
    bool has = true;
    if (cudnnBackendGetAttribute(cfg, CUDNN_ATTR_ENGINECFG_ENGINE, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &n, &eng) ==
        CUDNN_STATUS_SUCCESS) {
        cudnnBackendNumericalNote_t notes[CUDNN_NUMERICAL_NOTE_TYPE_COUNT];
        n = 0;
        if (cudnnBackendGetAttribute(eng, CUDNN_ATTR_ENGINE_NUMERICAL_NOTE, CUDNN_TYPE_NUMERICAL_NOTE,
                                     CUDNN_NUMERICAL_NOTE_TYPE_COUNT, &n, notes) == CUDNN_STATUS_SUCCESS) {
            has = false;
            for (int64_t i = 0; i < n; i++) has = has || notes[i] == note;
        }
    }
    cudnnBackendDestroyDescriptor(eng);
    (void)b;
    return has;
}

/* The operation graph of key, the heuristics' configs in order, the first that finalizes (skipping
 * non-deterministic engines when the key asks for a deterministic backward). */
static void dnn_build_plan(dnn_state *g, dnn_plan *p) {
    dnn_build b = {.p = p, .next_uid = UID_VIRTUAL, .st = CUDNN_STATUS_SUCCESS, .what = ""};
    cudnnBackendDescriptor_t ops[48];
    const int nops = p->key.bwd ? dnn_backward_ops(&b, &p->key, ops) : dnn_forward_ops(&b, &p->key, ops);
    cudnnBackendDescriptor_t graph = dnn_new(&b, CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR);
    dnn_set(&b, graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, nops, ops);
    dnn_set(&b, graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &g->h);
    dnn_finalize(&b, graph, "the operation graph");
    cudnnBackendDescriptor_t heur = dnn_new(&b, CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR);
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    dnn_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &graph);
    dnn_set(&b, heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    dnn_finalize(&b, heur, "the heuristics query");
    int64_t ncfg = 0;
    DNN_TRY(
        &b,
        cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &ncfg, NULL),
        "counting the heuristics' engine configs");
    if (ncfg > DNN_MAX_CFG) ncfg = DNN_MAX_CFG;
    cudnnBackendDescriptor_t cfgs[DNN_MAX_CFG];
    for (int64_t i = 0; i < ncfg; i++) cfgs[i] = dnn_new(&b, CUDNN_BACKEND_ENGINECFG_DESCRIPTOR);
    int64_t got = 0;
    if (ncfg > 0)
        DNN_TRY(&b,
                cudnnBackendGetAttribute(heur, CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, ncfg, &got,
                                         cfgs),
                "reading the heuristics' engine configs");
    if (b.st == CUDNN_STATUS_SUCCESS && got == 0) {
        b.st = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(b.what, sizeof b.what, "the heuristics offered no engine");
    }
    int skip = p->key.alt; /* finalizing configs to pass over */
    for (int64_t i = 0; b.st == CUDNN_STATUS_SUCCESS && i < got && !p->plan; i++) {
        if (p->key.det && dnn_cfg_has_note(&b, cfgs[i], CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC)) continue;
        cudnnBackendDescriptor_t plan = NULL;
        if (cudnnBackendCreateDescriptor(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, &plan) != CUDNN_STATUS_SUCCESS)
            continue;
        if (cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &g->h) ==
                CUDNN_STATUS_SUCCESS &&
            cudnnBackendSetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1,
                                     &cfgs[i]) == CUDNN_STATUS_SUCCESS &&
            cudnnBackendFinalize(plan) == CUDNN_STATUS_SUCCESS) {
            int64_t n = 0;
            if (cudnnBackendGetAttribute(plan, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, &n,
                                         &p->workspace) == CUDNN_STATUS_SUCCESS &&
                skip-- == 0) {
                p->plan = plan;
                break;
            }
        }
        cudnnBackendDestroyDescriptor(plan);
    }
    if (b.st == CUDNN_STATUS_SUCCESS && !p->plan) {
        b.st = CUDNN_STATUS_NOT_SUPPORTED;
        snprintf(b.what, sizeof b.what, "none of the %lld engine configs finalized%s", (long long)got,
                 p->key.det ? " deterministically" : "");
    }
    p->ok = b.st == CUDNN_STATUS_SUCCESS;
    if (!p->ok && p->key.alt == 0) { /* a missing alternative is no news */
        char detail[512] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        const dnn_key *k = &p->key;
        fprintf(stderr,
                "twinrun: cuDNN %zu takes no attention %s%s B %d Tq %d Tk %d heads %d/%d D %d (%s: %s%s%s); "
                "the flash kernels serve it\n",
                cudnnGetVersion(), k->bwd ? "backward" : "forward", k->det ? " (deterministic)" : "", k->B, k->Tq,
                k->Tk, k->NH, k->KV, k->D, b.what, cudnnGetErrorString(b.st), *detail ? ": " : "", detail);
    }
}

static dnn_plan *dnn_plan_get(dnn_state *g, const dnn_key *key) {
    for (int i = 0; i < g->nplans; i++)
        if (memcmp(&g->plans[i]->key, key, sizeof *key) == 0) return g->plans[i];
    if (g->nplans == DNN_MAX_PLANS) return NULL; /* more shapes than a model has: our kernels serve the rest */
    dnn_plan *p = (dnn_plan *)calloc(1, sizeof *p);
    if (!p) tr_fatal("out of host memory creating a cuDNN attention plan");
    p->key = *key;
    g->plans[g->nplans++] = p;
    dnn_build_plan(g, p);
    return p;
}

static dnn_key dnn_key_of(const tr_cu_sdpa *a, int bwd, int det, int alt) {
    dnn_key k;
    memset(&k, 0, sizeof k); /* padding too: keys are compared with memcmp */
    k.bwd = bwd, k.det = det, k.alt = alt, k.B = a->B, k.Tq = a->Tq, k.Tk = a->Tk, k.NH = a->NH, k.KV = a->KV,
    k.D = a->D;
    k.q_bstride = a->q_bstride, k.k_bstride = a->k_bstride, k.lse_bstride = a->lse_bstride;
    k.lse_hstride = a->lse_hstride;
    return k;
}

/* Runs plan p on s with the pointers of uids[i] = ptrs[i] and a workspace of the plan's size. */
static void dnn_execute(dnn_state *g, dev_stream *s, const dnn_plan *p, int n, int64_t *uids, void **ptrs) {
    const cudnnStatus_t st0 = cudnnSetStream(g->h, tr_cu_stream(s));
    if (st0 != CUDNN_STATUS_SUCCESS)
        tr_cu_fail(__FILE__, __LINE__, "cudnn", "cudnnSetStream", (int)st0, cudnnGetErrorString(st0), NULL);
    void *ws = p->workspace > 0 ? tr_cu_scratch(s, (size_t)p->workspace, "cuDNN attention workspace") : NULL;
    cudnnBackendDescriptor_t vp = NULL;
    cudnnStatus_t st = cudnnBackendCreateDescriptor(CUDNN_BACKEND_VARIANT_PACK_DESCRIPTOR, &vp);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_UNIQUE_IDS, CUDNN_TYPE_INT64, n, uids);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_DATA_POINTERS, CUDNN_TYPE_VOID_PTR, n, ptrs);
    if (st == CUDNN_STATUS_SUCCESS)
        st = cudnnBackendSetAttribute(vp, CUDNN_ATTR_VARIANT_PACK_WORKSPACE, CUDNN_TYPE_VOID_PTR, 1, &ws);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendFinalize(vp);
    if (st == CUDNN_STATUS_SUCCESS) st = cudnnBackendExecute(g->h, p->plan, vp);
    if (st != CUDNN_STATUS_SUCCESS) {
        char detail[512] = "";
        cudnnGetLastErrorString(detail, sizeof detail);
        tr_cu_fail(__FILE__, __LINE__, "cudnn", "cudnnBackendExecute (attention)", (int)st, cudnnGetErrorString(st),
                   *detail ? detail : "TWINRUN_ATTENTION=flash runs twinrun's own kernels instead");
    }
    cudnnBackendDestroyDescriptor(vp);
    tr_cu_scratch_free(s, ws);
}

/* One forward of a on plan p. */
static void dnn_forward_run(dnn_state *g, dev_stream *s, const dnn_plan *p, const tr_cu_sdpa *a) {
    float scale = (float)(1.0 / sqrt((double)a->D)), neg_inf = -INFINITY;
    int32_t seq_q = a->Tq, seq_kv = a->Tk;
    int64_t uids[] = {UID_Q, UID_K, UID_V, UID_O, UID_LSE, UID_SCALE, UID_NEG_INF, UID_SEQ_Q, UID_SEQ_KV};
    void *ptrs[] = {(void *)a->q, (void *)a->k, (void *)a->v, a->out, a->lse, &scale, &neg_inf, &seq_q, &seq_kv};
    dnn_execute(g, s, p, a->Tq != a->Tk ? 9 : 7, uids, ptrs);
}

/* One backward of a on plan p (its key says atomic or deterministic). */
static void dnn_backward_run(dnn_state *g, dev_stream *s, const dnn_plan *p, const tr_cu_sdpa *a) {
    const bool deterministic = p->key.det;
    const size_t rows = (size_t)a->B * a->NH * a->Tq;
    float *delta = (float *)tr_cu_scratch(s, rows * sizeof(float), "attention delta"); /* [B,NH,Tq] */
    float *acc = deterministic
                     ? NULL
                     : (float *)tr_cu_scratch(s, rows * a->D * sizeof(float), "attention dQ sums"); /* [B,NH,Tq,D] */
    /* the engine adds every key block's share to the sums, which must start at zero; scratch comes back
     * holding the last call's. cuDNN 9.6.0 and later zero them inside the call (a memset here would
     * write the [B,NH,Tq,D] fp32 tensor once more: 134 MB at T 8192, 32 heads, D 128) */
    if (acc && g->zero_dq_acc) CU_CHECK(cudaMemsetAsync(acc, 0, rows * a->D * sizeof(float), tr_cu_stream(s)));
    float scale = (float)(1.0 / sqrt((double)a->D)), neg_inf = -INFINITY, one = 1.0f;
    int32_t seq_q = a->Tq, seq_kv = a->Tk;
    int64_t uids[16] = {UID_Q,  UID_K,  UID_V,     UID_O,       UID_LSE, UID_DO,    UID_DQ,
                        UID_DK, UID_DV, UID_SCALE, UID_NEG_INF, UID_ONE, UID_DELTA, 0};
    void *ptrs[16] = {(void *)a->q, (void *)a->k, (void *)a->v, (void *)a->out, a->lse, (void *)a->dout, a->dq, a->dk,
                      a->dv,        &scale,       &neg_inf,     &one,           delta};
    int n = 13;
    if (acc) uids[n] = UID_DQ_ACC, ptrs[n++] = acc;
    if (a->Tq != a->Tk) {
        uids[n] = UID_SEQ_Q, ptrs[n++] = &seq_q;
        uids[n] = UID_SEQ_KV, ptrs[n++] = &seq_kv;
    }
    dnn_execute(g, s, p, n, uids, ptrs);
    tr_cu_scratch_free(s, acc);
    tr_cu_scratch_free(s, delta);
}

static void dnn_run(dnn_state *g, dev_stream *s, const dnn_plan *p, const tr_cu_sdpa *a) {
    if (p->key.bwd) dnn_backward_run(g, s, p, a);
    else dnn_forward_run(g, s, p, a);
}

/* The fastest of p's runs on a's operands, in ms: one warm-up, then the best of three (a run
 * overwrites its outputs whole, so the caller's run afterwards is as if none had been). */
static float dnn_time(dnn_state *g, dev_stream *s, const dnn_plan *p, const tr_cu_sdpa *a) {
    cudaStream_t st = tr_cu_stream(s);
    cudaEvent_t e0, e1;
    CU_CHECK(cudaEventCreate(&e0));
    CU_CHECK(cudaEventCreate(&e1));
    dnn_run(g, s, p, a);
    float best = INFINITY;
    for (int r = 0; r < 3; r++) {
        float ms = 0;
        CU_CHECK(cudaEventRecord(e0, st));
        dnn_run(g, s, p, a);
        CU_CHECK(cudaEventRecord(e1, st));
        CU_CHECK(cudaEventSynchronize(e1));
        CU_CHECK(cudaEventElapsedTime(&ms, e0, e1));
        if (ms < best) best = ms;
    }
    CU_CHECK(cudaEventDestroy(e0));
    CU_CHECK(cudaEventDestroy(e1));
    return best;
}

/* The deterministic backward keeps dP, [B,NH,Tq,Tk] bf16, in its workspace: it is a candidate for a
 * call that did not ask for it only up to 512 MiB (B 4 x T 1024 x 32 heads and a little more), and only
 * while the device has that and 1 GiB more free (the timing must not be what runs a job out of memory). */
#define DNN_DP_WORKSPACE_MAX ((int64_t)512 << 20)

static bool dnn_dp_affordable(const dnn_plan *p) {
    size_t free_b = 0, total_b = 0;
    if (p->workspace > DNN_DP_WORKSPACE_MAX || cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) return false;
    return (int64_t)free_b >= p->workspace + ((int64_t)1 << 30);
}

/* The outputs a run of a writes, as strided rows: forward out [B rows of Tq*NH*D] and lse ([B*NH rows
 * of Tq]); backward dq, dk, dv. The check below compares each, whole. */
typedef struct dnn_out {
    void *p;
    bool bf16;
    int rows;
    int64_t n, rstride; /* elements */
} dnn_out;

static int dnn_outputs(const tr_cu_sdpa *a, int bwd, dnn_out out[3]) {
    const int64_t nq = (int64_t)a->Tq * a->NH * a->D, nk = (int64_t)a->Tk * a->KV * a->D;
    if (bwd) {
        out[0] = (dnn_out){a->dq, true, a->B, nq, a->q_bstride};
        out[1] = (dnn_out){a->dk, true, a->B, nk, a->k_bstride};
        out[2] = (dnn_out){a->dv, true, a->B, nk, a->k_bstride};
        return 3;
    }
    out[0] = (dnn_out){a->out, true, a->B, nq, a->q_bstride};
    /* lse: the rows of (b, h) are lse_hstride apart within a batch row; one row per (b, h) below */
    out[1] = (dnn_out){a->lse, false, a->B * a->NH, a->Tq, 0};
    return 2;
}

/* The element offset of row r of o (lse's rows are (b, h) pairs with two strides). */
static int64_t dnn_row_offset(const tr_cu_sdpa *a, const dnn_out *o, int r) {
    if (o->p == (void *)a->lse) return (int64_t)(r / a->NH) * a->lse_bstride + (int64_t)(r % a->NH) * a->lse_hstride;
    return (int64_t)r * o->rstride;
}

/* The reference engine's outputs, packed, kept while the other candidates run. */
typedef struct dnn_ref {
    int n;
    void *copy[3];
} dnn_ref;

/* Keeps a copy of a's outputs as the reference run left them; false (nothing kept) when the device
 * lacks the room and 1 GiB more: then no other candidate can be checked, and none is taken. */
static bool dnn_ref_keep(dev_stream *s, dnn_ref *ref, const tr_cu_sdpa *a, int bwd) {
    dnn_out o[3];
    ref->n = dnn_outputs(a, bwd, o);
    size_t need = 0, free_b = 0, total_b = 0;
    for (int i = 0; i < ref->n; i++) need += (size_t)o[i].rows * o[i].n * (o[i].bf16 ? 2 : 4);
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess || free_b < need + ((size_t)1 << 30)) return false;
    for (int i = 0; i < ref->n; i++) {
        const size_t es = o[i].bf16 ? 2 : 4, row = (size_t)o[i].n * es;
        ref->copy[i] = tr_cu_scratch(s, (size_t)o[i].rows * row, "attention reference outputs");
        for (int r = 0; r < o[i].rows; r++)
            CU_CHECK(cudaMemcpyAsync((char *)ref->copy[i] + (size_t)r * row,
                                     (const char *)o[i].p + (size_t)dnn_row_offset(a, &o[i], r) * es, row,
                                     cudaMemcpyDeviceToDevice, tr_cu_stream(s)));
    }
    return true;
}

static void dnn_ref_free(dev_stream *s, dnn_ref *ref) {
    for (int i = ref->n - 1; i >= 0; i--) tr_cu_scratch_free(s, ref->copy[i]);
    ref->n = 0;
}

/* The largest relative L2 distance of a's outputs (the last run's) from the reference's, and which. */
static double dnn_ref_distance(dev_stream *s, const dnn_ref *ref, const tr_cu_sdpa *a, int bwd, int *which) {
    dnn_out o[3];
    const int n = dnn_outputs(a, bwd, o);
    double worst = 0;
    *which = 0;
    for (int i = 0; i < n && i < ref->n; i++) {
        double sums[2] = {0, 0};
        if (o[i].p == (void *)a->lse) { /* one (b, h) row at a time: two strides */
            for (int r = 0; r < o[i].rows; r++)
                tr_cu_cudnn_diff_sums(s, (const float *)ref->copy[i] + (size_t)r * o[i].n,
                                      (const float *)o[i].p + dnn_row_offset(a, &o[i], r), false, 1, o[i].n, 0, sums);
        } else {
            tr_cu_cudnn_diff_sums(s, ref->copy[i], o[i].p, o[i].bf16, o[i].rows, o[i].n, o[i].rstride, sums);
        }
        const double d = sums[1] > 0 ? sqrt(sums[0] / sums[1]) : sums[0] > 0 ? INFINITY : 0;
        if (!(d <= worst)) worst = d, *which = i; /* NaN counts as the worst */
    }
    return worst;
}

/* Two engines' bf16 outputs differ by their sums' order, about 3e-3 (relative L2) at the oracle's
 * shapes against each other and against the twin; an engine that computes something else is far past
 * this (0.38 seen). */
#define DNN_AGREE 2e-2

/* The fastest of the candidates cand[nc] on a's operands that agree with the reference, the first of
 * the heuristics' first engines that takes the shape (DNN_AGREE); NULL when none does. */
static const dnn_plan *dnn_time_candidates(dnn_state *g, dev_stream *s, const tr_cu_sdpa *a, int bwd,
                                           const dnn_key *cand, int nc) {
    static const char *const out_names[2][3] = {{"out", "lse", ""}, {"dQ", "dK", "dV"}};
    dnn_ref ref = {0};
    bool ref_ran = false, have_ref = false; /* the reference has run; its outputs are kept */
    float best = INFINITY;
    const dnn_plan *pick = NULL;
    for (int i = 0; i < nc; i++) {
        const bool allowed = g->only_alt < 0 || (cand[i].alt == g->only_alt && (!bwd || cand[i].det == g->only_det));
        /* the reference: the first engine of the first graph that takes the shape (the atomic one's,
         * else the deterministic one's); it runs for the check even when not allowed */
        const bool is_ref = !ref_ran && cand[i].alt == 0;
        if (!allowed && !is_ref) continue;
        const dnn_plan *p = dnn_plan_get(g, &cand[i]);
        if (!p || !p->ok || (p->key.det && !dnn_dp_affordable(p))) continue;
        const float ms = dnn_time(g, s, p, a);
        const char *kind = p->key.det ? "deterministic" : bwd ? "atomic" : "fused";
        if (is_ref) {
            ref_ran = true;
            have_ref = dnn_ref_keep(s, &ref, a, bwd);
        } else {
            int which = 0;
            const double d = have_ref ? dnn_ref_distance(s, &ref, a, bwd, &which) : INFINITY;
            if (!(d <= DNN_AGREE)) {
                if (have_ref)
                    fprintf(stderr,
                            "twinrun: cuDNN attention %s B %d Tq %d Tk %d heads %d/%d D %d: the %s engine %d's %s "
                            "is %.2e (relative L2) from the heuristics' first engine's: not used\n",
                            bwd ? "backward" : "forward", a->B, a->Tq, a->Tk, a->NH, a->KV, a->D, kind, p->key.alt,
                            out_names[bwd][which], d);
                continue;
            }
        }
        if (g->tune == 2)
            fprintf(stderr, "twinrun: cuDNN attention %s B %d Tq %d Tk %d heads %d/%d D %d: %s engine %d %.3f ms\n",
                    bwd ? "backward" : "forward", a->B, a->Tq, a->Tk, a->NH, a->KV, a->D, kind, p->key.alt, ms);
        if (allowed && ms < best) best = ms, pick = p;
    }
    if (have_ref) dnn_ref_free(s, &ref);
    return pick;
}

/* The plan for a's shape: with --deterministic-mode (det) or TWINRUN_CUDNN_TUNE=0 the heuristics' first
 * engine; otherwise the fastest, timed at the first call, of the atomic and the deterministic graphs'
 * first engines (a backward) or of the heuristics' first two engines (a forward), each kept only if its
 * outputs agree with the first one's on these operands (DNN_AGREE). NULL when no engine takes the shape. */
static const dnn_plan *dnn_choose(dnn_state *g, dev_stream *s, const tr_cu_sdpa *a, int bwd, bool det) {
    const dnn_key want = dnn_key_of(a, bwd, det, 0);
    for (int i = 0; i < g->nchoices; i++)
        if (memcmp(&g->choices[i].want, &want, sizeof want) == 0) return g->choices[i].plan;
    dnn_key first_key = want; /* the mode picks timed or fixed; a forward plan never filtered engines by it */
    if (!bwd) first_key.det = 0;
    dnn_plan *first = dnn_plan_get(g, &first_key);
    const dnn_plan *pick = first && first->ok ? first : NULL;
    if (!det && g->tune && g->nchoices < DNN_MAX_CHOICES) {
        /* The heuristics' first engine of each graph. Their second engines are candidates only when
         * TWINRUN_CUDNN_CANDIDATE names one: cuDNN 9.19's returned wrong dQ/dK on a context-parallel
         * chunk in one process and right ones in another (dnn_time_candidates' check saw 0.42, then agreement),
         * so one agreement at the choice cannot vouch for the calls after it. */
        dnn_key cand[4];
        int nc = 0;
        cand[nc++] = want;
        if (bwd) cand[nc++] = dnn_key_of(a, bwd, 1, 0);
        if (g->only_alt == 1) {
            cand[nc++] = dnn_key_of(a, bwd, 0, 1);
            if (bwd) cand[nc++] = dnn_key_of(a, bwd, 1, 1);
        } else if (!bwd && g->only_alt < 0) {
            cand[nc++] = dnn_key_of(a, 0, 0, 1); /* the forward's second engine (above) */
        }
        /* a deterministic backward whose dP does not fit the workspace cap is no candidate: where it was the
         * only other one there is nothing to choose, and the first call runs once instead of five times
         * (the reference engine's timed runs and the copies of its outputs) */
        int keep = 0;
        for (int i = 0; i < nc; i++) {
            if (bwd && cand[i].det && !(g->only_alt >= 0 && g->only_det == 1)) {
                const dnn_plan *p = dnn_plan_get(g, &cand[i]);
                if (p && p->ok && !dnn_dp_affordable(p)) continue;
            }
            cand[keep++] = cand[i];
        }
        nc = keep;
        if (nc > 1) pick = dnn_time_candidates(g, s, a, bwd, cand, nc); /* else the first engine: nothing to time */
    }
    if (g->nchoices < DNN_MAX_CHOICES) g->choices[g->nchoices++] = (dnn_choice){want, pick};
    return pick;
}

bool tr_cu_cudnn_forward(dev_stream *s, const tr_cu_sdpa *a) {
    dnn_state *g = dnn_state_get(s);
    if (!g->usable) return false;
    const dnn_plan *p = dnn_choose(g, s, a, 0, dev_deterministic(s->dev));
    if (!p) return false;
    dnn_forward_run(g, s, p, a);
    return true;
}

bool tr_cu_cudnn_backward(dev_stream *s, const tr_cu_sdpa *a, bool deterministic) {
    dnn_state *g = dnn_state_get(s);
    if (!g->usable) return false;
    const dnn_plan *p = dnn_choose(g, s, a, 1, deterministic);
    if (!p) return false;
    dnn_backward_run(g, s, p, a);
    return true;
}

#else /* built without cuDNN (or for MUSA): the flash kernels serve every call */

bool tr_cu_cudnn_usable(dev_stream *s) {
    (void)s;
    return false;
}

bool tr_cu_cudnn_forward(dev_stream *s, const tr_cu_sdpa *a) {
    (void)s, (void)a;
    return false;
}

bool tr_cu_cudnn_backward(dev_stream *s, const tr_cu_sdpa *a, bool deterministic) {
    (void)s, (void)a, (void)deterministic;
    return false;
}

#endif
