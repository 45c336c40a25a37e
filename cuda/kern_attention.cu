/* Grouped-query attention, forward and backward: the causal kernels (kern_attention_forward/backward)
 * and the position-masked ones of context parallelism (kern_attention_forward_pos/backward_pos), in
 * one file as the twin has them.
 *
 * Two implementations behind the four entry points:
 *   flash   kern_attention_flash.cu: FlashAttention-2-style tiles on the tensor cores (mma.sync bf16,
 *           fp32 accumulation), never a score matrix in memory, a deterministic backward (dK/dV and dQ
 *           in two kernels, no atomics). Taken for bf16 tensors with head dim 64 or 128 and 16-byte
 *           aligned pointers, on CUDA.
 *   simple  the kernels below: one block per query row (forward, dq) or key row (dk/dv), fp32 scalar
 *           arithmetic, exact enough for the fp32 twin-vs-GPU comparison. Everything else takes them
 *           (fp32, other head dims, MUSA); TWINRUN_ATTENTION=simple forces them (the reference).
 *
 * Layouts: q, out, dq [B,Tq,NH,D]; k, v, dk, dv [B,Tk,KV,D]; lse [B,NH,Tq]; q_pos [Tq], k_pos [Tk]
 * int32 (device). Head h reads group h / (NH/KV). Scale 1/sqrt(D). Causal: Tq = Tk = T, query i sees
 * keys j <= i; with positions: query i sees key j iff k_pos[j] <= q_pos[i].
 *
 * Simple kernels (a mask type gives the visible keys; they are visited in ascending j, so the causal
 * mask and positions 0..T-1 give the same bits). A score is always the fp32 dot over d in ascending
 * order, times the scale, so the backward's recomputed probabilities match the forward's. Keys a query
 * does not see are skipped, never multiplied by zero.
 *   forward, one block per (query i, head h, batch b): pass 1 the max over visible keys (a query that
 *     sees none stops the kernel); pass 2 in tiles of TR_BLOCK keys: p_j into shared memory, then each
 *     thread owning an output dim d adds p_j v_j[d] in key order. lse = max + log(sum p).
 *   backward (P = exp(S - lse), dP = dO V^T, Delta_i = dO_i . O_i, dS = P (dP - Delta)):
 *     k_attn_bwd_dq   one block per query row: Delta_i (kept in scratch), dq_i = scale sum_j dS_ij k_j;
 *     k_attn_bwd_dkv  one block per (key j, group g, batch b): the group's heads in order, the queries
 *                     that see j in order: dv_j = sum P_ij dO_i, dk_j = scale sum dS_ij q_i (0 for a key
 *                     no query sees: the CP reduce-scatter adds the other ranks').
 * No atomics anywhere: every output element is written by one thread after a fixed-order sum. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_profile.h"
#include "kern_attention_cudnn.h"
#include "kern_attention_flash.h"
#include "kern_common.cuh"

#define TR_ATTN_MAX_D 1024

/* Causal: keys [0, i] of query i, all visible. */
struct attn_causal {
    __device__ int key_end(int i, int Tk) const { return i + 1 < Tk ? i + 1 : Tk; }
    __device__ bool visible(int, int) const { return true; } /* for j < key_end(i) */
    __device__ int query_begin(int j) const { return j; }
    __device__ int query_pos(int i) const { return i; }
};

/* Positions: every key may be visible to any query. */
struct attn_positions {
    const int32_t *q_pos, *k_pos;
    __device__ int key_end(int, int Tk) const { return Tk; }
    __device__ bool visible(int i, int j) const { return k_pos[j] <= q_pos[i]; }
    __device__ int query_begin(int) const { return 0; }
    __device__ int query_pos(int i) const { return q_pos[i]; }
};

__device__ __forceinline__ float attn_dot_row(const float *xs, tr_buf y, size_t off, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s = s + xs[d] * ldf(y, off + d);
    return s;
}

/* acc[d] += w[jj] * x[key j0 + jj of group g][d] over the visible keys jj < nj, in jj order, for this
 * thread's d (t, t + TR_BLOCK, ...): O += P V in the forward, dQ += dS K in the backward. */
__device__ __forceinline__ void attn_accumulate_rows(float *acc, const float *w, const float *vis, int nj, tr_buf x,
                                                     int b, int Tk, int KV, int g, int j0, int D) {
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        float a = acc[d];
        for (int jj = 0; jj < nj; jj++)
            if (vis[jj] != 0.0f) a = a + w[jj] * ldf(x, (((size_t)b * Tk + j0 + jj) * KV + g) * (size_t)D + d);
        acc[d] = a;
    }
}

template <class Mask>
__global__ void k_attn_fwd(tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int Tq, int Tk, int NH, int KV,
                           int D, float scale, Mask mask) {
    extern __shared__ float smem[];
    float *qs = smem, *acc = qs + D, *p = acc + D, *vis = p + TR_BLOCK, *sh = vis + TR_BLOCK;
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / KV);
    const int kend = mask.key_end(i, Tk);
    const size_t qoff = (((size_t)b * Tq + i) * NH + h) * (size_t)D;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        qs[d] = ldf(q, qoff + d);
        acc[d] = 0.0f;
    }
    __syncthreads();
    float mx = -INFINITY, seen = 0.0f;
    for (int j = threadIdx.x; j < kend; j += TR_BLOCK) {
        if (!mask.visible(i, j)) continue;
        seen = 1.0f;
        mx = nan_max(mx, attn_dot_row(qs, k, (((size_t)b * Tk + j) * KV + g) * (size_t)D, D) * scale);
    }
    mx = block_max(mx, sh);
    if (block_max(seen, sh) == 0.0f) { /* uniform over the block: every thread returns */
        if (threadIdx.x == 0)
            TR_DEVICE_FAIL("attention forward: query %d at position %d sees no key; with context parallelism, "
                           "check the chunk layout and that k_pos covers the all-gathered sequence\n",
                           i, mask.query_pos(i));
        return;
    }
    float lsum = 0.0f;
    for (int j0 = 0; j0 < kend; j0 += TR_BLOCK) {
        const int j = j0 + threadIdx.x;
        float pj = 0.0f, vj = 0.0f;
        if (j < kend && mask.visible(i, j)) {
            pj = expf(attn_dot_row(qs, k, (((size_t)b * Tk + j) * KV + g) * (size_t)D, D) * scale - mx);
            lsum = lsum + pj;
            vj = 1.0f;
        }
        p[threadIdx.x] = pj;
        vis[threadIdx.x] = vj;
        __syncthreads();
        attn_accumulate_rows(acc, p, vis, min(TR_BLOCK, kend - j0), v, b, Tk, KV, g, j0, D);
        __syncthreads();
    }
    const float total = block_sum(lsum, sh);
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) stf(out, qoff + d, acc[d] / total);
    if (threadIdx.x == 0) lse[((size_t)b * NH + h) * Tq + i] = mx + logf(total);
}

template <class Mask>
__global__ void k_attn_bwd_dq(tr_buf dq, float *delta, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, tr_buf out,
                              const float *lse, int Tq, int Tk, int NH, int KV, int D, float scale, Mask mask) {
    extern __shared__ float smem[];
    float *qs = smem, *dos = qs + D, *acc = dos + D, *ds = acc + D, *vis = ds + TR_BLOCK, *sh = vis + TR_BLOCK;
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / KV);
    const int kend = mask.key_end(i, Tk);
    const size_t qoff = (((size_t)b * Tq + i) * NH + h) * (size_t)D;
    float part = 0.0f;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        qs[d] = ldf(q, qoff + d);
        dos[d] = ldf(dout, qoff + d);
        acc[d] = 0.0f;
        part = part + dos[d] * ldf(out, qoff + d);
    }
    const float dl = block_sum(part, sh); /* also the barrier after filling qs/dos */
    const size_t row = ((size_t)b * NH + h) * Tq + i;
    if (threadIdx.x == 0) delta[row] = dl;
    const float L = lse[row];
    for (int j0 = 0; j0 < kend; j0 += TR_BLOCK) {
        const int j = j0 + threadIdx.x;
        float dsj = 0.0f, vj = 0.0f;
        if (j < kend && mask.visible(i, j)) {
            const size_t koff = (((size_t)b * Tk + j) * KV + g) * (size_t)D;
            const float pj = expf(attn_dot_row(qs, k, koff, D) * scale - L);
            dsj = pj * (attn_dot_row(dos, v, koff, D) - dl);
            vj = 1.0f;
        }
        ds[threadIdx.x] = dsj;
        vis[threadIdx.x] = vj;
        __syncthreads();
        attn_accumulate_rows(acc, ds, vis, min(TR_BLOCK, kend - j0), k, b, Tk, KV, g, j0, D);
        __syncthreads();
    }
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) stf(dq, qoff + d, acc[d] * scale);
}

template <class Mask>
__global__ void k_attn_bwd_dkv(tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, const float *lse,
                               const float *delta, int Tq, int Tk, int NH, int KV, int D, float scale, Mask mask) {
    extern __shared__ float smem[];
    float *ks = smem, *vs = ks + D, *adk = vs + D, *adv = adk + D, *ps = adv + D, *ds = ps + TR_BLOCK;
    float *vis = ds + TR_BLOCK;
    const int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z, rep = NH / KV;
    const size_t koff = (((size_t)b * Tk + j) * KV + g) * (size_t)D;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        ks[d] = ldf(k, koff + d);
        vs[d] = ldf(v, koff + d);
        adk[d] = 0.0f;
        adv[d] = 0.0f;
    }
    __syncthreads();
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        for (int i0 = mask.query_begin(j); i0 < Tq; i0 += TR_BLOCK) {
            const int i = i0 + threadIdx.x;
            float pi = 0.0f, dsi = 0.0f, vi = 0.0f;
            if (i < Tq && mask.visible(i, j)) {
                const size_t qoff = (((size_t)b * Tq + i) * NH + h) * (size_t)D;
                const size_t row = ((size_t)b * NH + h) * Tq + i;
                /* s_ij = q_i . k_j in the same order as the forward (q on the left). */
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; d++) s = s + ldf(q, qoff + d) * ks[d];
                for (int d = 0; d < D; d++) dp = dp + ldf(dout, qoff + d) * vs[d];
                pi = expf(s * scale - lse[row]);
                dsi = pi * (dp - delta[row]);
                vi = 1.0f;
            }
            ps[threadIdx.x] = pi;
            ds[threadIdx.x] = dsi;
            vis[threadIdx.x] = vi;
            __syncthreads();
            const int ni = min(TR_BLOCK, Tq - i0);
            for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
                float av = adv[d], ak = adk[d];
                for (int ii = 0; ii < ni; ii++) {
                    if (vis[ii] == 0.0f) continue;
                    const size_t qoff = (((size_t)b * Tq + i0 + ii) * NH + h) * (size_t)D + d;
                    av = av + ps[ii] * ldf(dout, qoff);
                    ak = ak + ds[ii] * ldf(q, qoff);
                }
                adv[d] = av;
                adk[d] = ak;
            }
            __syncthreads();
        }
    }
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        stf(dk, koff + d, adk[d] * scale);
        stf(dv, koff + d, adv[d]);
    }
}

/* ---- host side ---------------------------------------------------------------------------------- */

/* This kernel's limits, after the contract (kern_attention_*_check). */
static void check_attn(int B, int NH, int KV, int D) {
    TR_CHECK(D <= TR_ATTN_MAX_D, "attention: head dims above 1024 are not supported by the CUDA kernel");
    TR_CHECK(NH <= 65535 && B <= 65535 && KV <= 65535, "attention: more than 65535 heads or micro-batch rows per call");
}

static float attn_scale(int D) { return (float)(1.0 / sqrt((double)D)); }

/* Which kernels serve a call (TWINRUN_ATTENTION, read once: cudnn, flash or simple; unset: cuDNN where
 * it is built in and usable, else flash). cuDNN and flash need bf16 tensors, 16-byte aligned, and
 * head dim 64 or 128; anything else takes the simple kernels. */
enum attn_path { ATTN_SIMPLE, ATTN_FLASH, ATTN_CUDNN };

static int g_attn_chosen = -1; /* the variable's choice, -1 until read; ATTN_CUDNN also when unset */

extern "C" int tr_cu_attention_set_path(const char *name) {
    const int p = !name ? -1
                  : strcmp(name, "cudnn") == 0 ? ATTN_CUDNN
                  : strcmp(name, "flash") == 0 ? ATTN_FLASH
                  : strcmp(name, "simple") == 0 ? ATTN_SIMPLE
                                                : -1;
    if (p >= 0) g_attn_chosen = p;
    return p;
}

static enum attn_path attn_path_of(dev_stream *s, const tr_buf *bufs, int n, int D) {
    int &chosen = g_attn_chosen;
    if (chosen < 0) {
        const char *env = getenv("TWINRUN_ATTENTION");
        chosen = ATTN_CUDNN;
        if (env && *env) {
            if (strcmp(env, "simple") == 0) chosen = ATTN_SIMPLE;
            else if (strcmp(env, "flash") == 0) chosen = ATTN_FLASH;
            else if (strcmp(env, "cudnn") != 0)
                tr_fatal("TWINRUN_ATTENTION=%s: use cudnn (the default where cuDNN is built in), flash (twinrun's "
                         "tensor-core kernels) or simple (the reference kernels)",
                         env);
            else if (!tr_cu_cudnn_usable(s))
                tr_fatal("TWINRUN_ATTENTION=cudnn: this build has no usable cuDNN 9 (configure with cuDNN found, "
                         "-DCUDNN_ROOT=<prefix>, on an sm_80 or later GPU), or use flash");
        }
    }
    if (chosen == ATTN_SIMPLE || !tr_cu_flash_supported(D)) return ATTN_SIMPLE;
    for (int i = 0; i < n; i++)
        if (bufs[i].dt != TR_BF16 || ((uintptr_t)bufs[i].p & 15u) != 0) return ATTN_SIMPLE;
    return chosen == ATTN_CUDNN && tr_cu_cudnn_usable(s) ? ATTN_CUDNN : ATTN_FLASH;
}

/* The cuDNN call of a causal block over whole tensors (kern_attention_cudnn.h). */
static tr_cu_sdpa attn_sdpa(int B, int Tq, int Tk, int NH, int KV, int D) {
    tr_cu_sdpa a;
    memset(&a, 0, sizeof a);
    a.B = B, a.Tq = Tq, a.Tk = Tk, a.NH = NH, a.KV = KV, a.D = D;
    a.q_bstride = (int64_t)Tq * NH * D, a.k_bstride = (int64_t)Tk * KV * D;
    a.lse_bstride = (int64_t)NH * Tq, a.lse_hstride = Tq;
    return a;
}

template <class Mask>
static void simple_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int Tq, int Tk,
                           int NH, int KV, int D, Mask mask) {
    const size_t shm = (size_t)(2 * D + 3 * TR_BLOCK) * sizeof(float);
    k_attn_fwd<Mask><<<dim3((unsigned)Tq, (unsigned)NH, (unsigned)B), TR_BLOCK, shm, tr_cu_stream(s)>>>(
        out, lse, q, k, v, Tq, Tk, NH, KV, D, attn_scale(D), mask);
    CU_CHECK_LAUNCH("k_attn_fwd");
}

template <class Mask>
static void simple_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v,
                            tr_buf out, const float *lse, int B, int Tq, int Tk, int NH, int KV, int D, Mask mask) {
    cudaStream_t st = tr_cu_stream(s);
    float *delta = (float *)tr_cu_scratch(s, (size_t)B * NH * Tq * sizeof(float), "attention delta"); /* [B,NH,Tq] */
    const float scale = attn_scale(D);
    const size_t shm_dq = (size_t)(3 * D + 3 * TR_BLOCK) * sizeof(float);
    k_attn_bwd_dq<Mask><<<dim3((unsigned)Tq, (unsigned)NH, (unsigned)B), TR_BLOCK, shm_dq, st>>>(
        dq, delta, dout, q, k, v, out, lse, Tq, Tk, NH, KV, D, scale, mask);
    CU_CHECK_LAUNCH("k_attn_bwd_dq");
    const size_t shm_dkv = (size_t)(4 * D + 3 * TR_BLOCK) * sizeof(float);
    k_attn_bwd_dkv<Mask><<<dim3((unsigned)Tk, (unsigned)KV, (unsigned)B), TR_BLOCK, shm_dkv, st>>>(
        dk, dv, dout, q, k, v, lse, delta, Tq, Tk, NH, KV, D, scale, mask);
    CU_CHECK_LAUNCH("k_attn_bwd_dkv");
    tr_cu_scratch_free(s, delta);
}

extern "C" void kern_attention_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B,
                                       int T, int NH, int KV, int D) {
    TR_PROF(s, "attention_forward");
    kern_attention_forward_check(s, out, lse, q, k, v, B, T, NH, KV, D);
    check_attn(B, NH, KV, D);
    const tr_buf bufs[] = {out, q, k, v};
    const enum attn_path path = attn_path_of(s, bufs, 4, D);
    if (path == ATTN_CUDNN) {
        tr_cu_sdpa a = attn_sdpa(B, T, T, NH, KV, D);
        a.q = q.p, a.k = k.p, a.v = v.p, a.out = out.p, a.lse = lse;
        if (tr_cu_cudnn_forward(s, &a)) return;
    }
    if (path != ATTN_SIMPLE) {
        tr_cu_flash_forward(s, out, lse, q, k, v, NULL, NULL, B, T, T, NH, KV, D);
        return;
    }
    simple_forward(s, out, lse, q, k, v, B, T, T, NH, KV, D, attn_causal());
}

extern "C" void kern_attention_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q,
                                        tr_buf k, tr_buf v, tr_buf out, const float *lse, int B, int T, int NH, int KV,
                                        int D) {
    TR_PROF(s, "attention_backward");
    kern_attention_backward_check(s, dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, KV, D);
    check_attn(B, NH, KV, D);
    kern_check_float_buf(out, "attention out"); /* read here for sum(dout * out) */
    const tr_buf bufs[] = {dq, dk, dv, dout, q, k, v, out};
    const enum attn_path path = attn_path_of(s, bufs, 8, D);
    if (path == ATTN_CUDNN) {
        tr_cu_sdpa a = attn_sdpa(B, T, T, NH, KV, D);
        a.q = q.p, a.k = k.p, a.v = v.p, a.out = out.p, a.lse = (float *)lse, a.dout = dout.p;
        a.dq = dq.p, a.dk = dk.p, a.dv = dv.p;
        if (tr_cu_cudnn_backward(s, &a, dev_deterministic(s->dev))) return;
    }
    if (path != ATTN_SIMPLE) {
        tr_cu_flash_backward(s, dq, dk, dv, dout, q, k, v, out, lse, NULL, NULL, B, T, T, NH, KV, D);
        return;
    }
    simple_backward(s, dq, dk, dv, dout, q, k, v, out, lse, B, T, T, NH, KV, D, attn_causal());
}

extern "C" void kern_attention_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                           const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH,
                                           int KV, int D) {
    TR_PROF(s, "attention_forward_pos");
    kern_attention_forward_pos_check(s, out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
    check_attn(B, NH, KV, D);
    const tr_buf bufs[] = {out, q, k, v};
    const enum attn_path path = attn_path_of(s, bufs, 4, D);
    if (path == ATTN_CUDNN && tr_cu_cudnn_forward_pos(s, out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV, D)) return;
    if (path != ATTN_SIMPLE) {
        tr_cu_flash_forward(s, out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
        return;
    }
    simple_forward(s, out, lse, q, k, v, B, Tq, Tk, NH, KV, D, attn_positions{q_pos, k_pos});
}

extern "C" void kern_attention_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q,
                                            tr_buf k, tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos,
                                            const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D) {
    TR_PROF(s, "attention_backward_pos");
    kern_attention_backward_pos_check(s, dq, dk, dv, dout, q, k, v, out, lse, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
    check_attn(B, NH, KV, D);
    kern_check_float_buf(out, "attention out"); /* read here for sum(dout * out) */
    const tr_buf bufs[] = {dq, dk, dv, dout, q, k, v, out};
    const enum attn_path path = attn_path_of(s, bufs, 8, D);
    if (path == ATTN_CUDNN && tr_cu_cudnn_backward_pos(s, dq, dk, dv, dout, q, k, v, out, lse, q_pos, k_pos, B, Tq, Tk,
                                                       NH, KV, D, dev_deterministic(s->dev)))
        return;
    if (path != ATTN_SIMPLE) {
        tr_cu_flash_backward(s, dq, dk, dv, dout, q, k, v, out, lse, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
        return;
    }
    simple_backward(s, dq, dk, dv, dout, q, k, v, out, lse, B, Tq, Tk, NH, KV, D, attn_positions{q_pos, k_pos});
}
