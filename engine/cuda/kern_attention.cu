/* Causal grouped-query attention, forward and backward: straightforward and deterministic.
 *
 * Layouts: q, out, dq [B,T,NH,D]; k, v, dk, dv [B,T,KV,D]; lse [B,NH,T]. Head h reads group
 * h / (NH/KV). Scale 1/sqrt(D). A score is always computed the same way (fp32 dot over d in
 * ascending order, times the scale), so the backward's recomputed probabilities match the forward.
 *
 * Forward, one block per (query t, head h, batch b): pass 1 the row max over keys j <= t; pass 2
 * in tiles of TR_BLOCK keys: p_j = exp(s_j - max) into shared memory, then each thread owning an
 * output dim d adds p_j v_j[d] over the tile in key order. lse = max + log(sum p).
 *
 * Backward (P = exp(S - lse), dP = dO V^T, Delta_i = dO_i . O_i, dS = P (dP - Delta)):
 *   k_attn_bwd_dq   one block per query row: Delta_i (kept in scratch), dq_i = scale sum_j dS_ij k_j;
 *   k_attn_bwd_dkv  one block per (key j, group g, batch b): loops over the group's heads in order
 *                   and over queries i >= j in order: dv_j = sum P_ij dO_i, dk_j = scale sum dS_ij q_i.
 * No atomics: every output element is written by one thread after a fixed-order sum. Slow (scores
 * are recomputed three times, loads are uncoalesced) but correct; a flash-style kernel is a later
 * speed issue. */
#include <math.h>

#include "kern_common.cuh"

#define TR_ATTN_MAX_D 1024

__device__ __forceinline__ float dot_row(const float *xs, tr_buf y, size_t off, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s = s + xs[d] * ldf(y, off + d);
    return s;
}

__global__ void k_attn_fwd(tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int T, int NH, int KV, int D,
                           float scale) {
    extern __shared__ float smem[];
    float *qs = smem, *acc = qs + D, *p = acc + D, *sh = p + TR_BLOCK;
    const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / KV);
    const size_t qoff = (((size_t)b * T + t) * NH + h) * (size_t)D;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        qs[d] = ldf(q, qoff + d);
        acc[d] = 0.0f;
    }
    __syncthreads();
    float mx = -INFINITY;
    for (int j = threadIdx.x; j <= t; j += TR_BLOCK)
        mx = nan_max(mx, dot_row(qs, k, (((size_t)b * T + j) * KV + g) * (size_t)D, D) * scale);
    mx = block_max(mx, sh);
    float lsum = 0.0f;
    for (int j0 = 0; j0 <= t; j0 += TR_BLOCK) {
        const int j = j0 + threadIdx.x;
        float pj = 0.0f;
        if (j <= t) {
            pj = expf(dot_row(qs, k, (((size_t)b * T + j) * KV + g) * (size_t)D, D) * scale - mx);
            lsum = lsum + pj;
        }
        p[threadIdx.x] = pj;
        __syncthreads();
        const int nj = min(TR_BLOCK, t - j0 + 1);
        for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
            float a = acc[d];
            for (int jj = 0; jj < nj; jj++) a = a + p[jj] * ldf(v, (((size_t)b * T + j0 + jj) * KV + g) * (size_t)D + d);
            acc[d] = a;
        }
        __syncthreads();
    }
    const float total = block_sum(lsum, sh);
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) stf(out, qoff + d, acc[d] / total);
    if (threadIdx.x == 0) lse[((size_t)b * NH + h) * T + t] = mx + logf(total);
}

__global__ void k_attn_bwd_dq(tr_buf dq, float *delta, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, tr_buf out,
                              const float *lse, int T, int NH, int KV, int D, float scale) {
    extern __shared__ float smem[];
    float *qs = smem, *dos = qs + D, *acc = dos + D, *ds = acc + D, *sh = ds + TR_BLOCK;
    const int t = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / KV);
    const size_t qoff = (((size_t)b * T + t) * NH + h) * (size_t)D;
    float part = 0.0f;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        qs[d] = ldf(q, qoff + d);
        dos[d] = ldf(dout, qoff + d);
        acc[d] = 0.0f;
        part = part + dos[d] * ldf(out, qoff + d);
    }
    const float dl = block_sum(part, sh); /* also the barrier after filling qs/dos */
    const size_t row = ((size_t)b * NH + h) * T + t;
    if (threadIdx.x == 0) delta[row] = dl;
    const float L = lse[row];
    for (int j0 = 0; j0 <= t; j0 += TR_BLOCK) {
        const int j = j0 + threadIdx.x;
        float dsj = 0.0f;
        if (j <= t) {
            const size_t koff = (((size_t)b * T + j) * KV + g) * (size_t)D;
            const float pj = expf(dot_row(qs, k, koff, D) * scale - L);
            dsj = pj * (dot_row(dos, v, koff, D) - dl);
        }
        ds[threadIdx.x] = dsj;
        __syncthreads();
        const int nj = min(TR_BLOCK, t - j0 + 1);
        for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
            float a = acc[d];
            for (int jj = 0; jj < nj; jj++) a = a + ds[jj] * ldf(k, (((size_t)b * T + j0 + jj) * KV + g) * (size_t)D + d);
            acc[d] = a;
        }
        __syncthreads();
    }
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) stf(dq, qoff + d, acc[d] * scale);
}

__global__ void k_attn_bwd_dkv(tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, const float *lse,
                               const float *delta, int T, int NH, int KV, int D, float scale) {
    extern __shared__ float smem[];
    float *ks = smem, *vs = ks + D, *adk = vs + D, *adv = adk + D, *ps = adv + D, *ds = ps + TR_BLOCK;
    const int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z, rep = NH / KV;
    const size_t koff = (((size_t)b * T + j) * KV + g) * (size_t)D;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        ks[d] = ldf(k, koff + d);
        vs[d] = ldf(v, koff + d);
        adk[d] = 0.0f;
        adv[d] = 0.0f;
    }
    __syncthreads();
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        for (int i0 = j; i0 < T; i0 += TR_BLOCK) {
            const int i = i0 + threadIdx.x;
            float pi = 0.0f, dsi = 0.0f;
            if (i < T) {
                const size_t qoff = (((size_t)b * T + i) * NH + h) * (size_t)D;
                const size_t row = ((size_t)b * NH + h) * T + i;
                /* s_ij = q_i . k_j in the same order as the forward (q on the left). */
                float s = 0.0f, dp = 0.0f;
                for (int d = 0; d < D; d++) s = s + ldf(q, qoff + d) * ks[d];
                for (int d = 0; d < D; d++) dp = dp + ldf(dout, qoff + d) * vs[d];
                pi = expf(s * scale - lse[row]);
                dsi = pi * (dp - delta[row]);
            }
            ps[threadIdx.x] = pi;
            ds[threadIdx.x] = dsi;
            __syncthreads();
            const int ni = min(TR_BLOCK, T - i0);
            for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
                float av = adv[d], ak = adk[d];
                for (int ii = 0; ii < ni; ii++) {
                    const size_t qoff = (((size_t)b * T + i0 + ii) * NH + h) * (size_t)D + d;
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

/* This kernel's limits, after the contract (kern_attention_*_check). */
static void check_attn(int B, int NH, int D) {
    TR_CHECK(D <= TR_ATTN_MAX_D, "attention: head dims above 1024 are not supported by the CUDA kernel");
    TR_CHECK(NH <= 65535 && B <= 65535, "attention: more than 65535 heads or micro-batch rows per call");
}

static float attn_scale(int D) { return (float)(1.0 / sqrt((double)D)); }

extern "C" void kern_attention_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B,
                                       int T, int NH, int KV, int D) {
    kern_attention_forward_check(s, out, lse, q, k, v, B, T, NH, KV, D);
    check_attn(B, NH, D);
    const size_t shm = (size_t)(2 * D + 2 * TR_BLOCK) * sizeof(float);
    k_attn_fwd<<<dim3((unsigned)T, (unsigned)NH, (unsigned)B), TR_BLOCK, shm, tr_cu_stream(s)>>>(
        out, lse, q, k, v, T, NH, KV, D, attn_scale(D));
    CU_CHECK_LAUNCH("k_attn_fwd");
}

extern "C" void kern_attention_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q,
                                        tr_buf k, tr_buf v, tr_buf out, const float *lse, int B, int T, int NH, int KV,
                                        int D) {
    kern_attention_backward_check(s, dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, KV, D);
    check_attn(B, NH, D);
    kern_check_float_buf(out, "attention out"); /* read here for sum(dout * out) */
    cudaStream_t st = tr_cu_stream(s);
    float *delta = (float *)tr_cu_scratch(s, (size_t)B * NH * T * sizeof(float), "attention delta");
    const float scale = attn_scale(D);
    const size_t shm_dq = (size_t)(3 * D + 2 * TR_BLOCK) * sizeof(float);
    k_attn_bwd_dq<<<dim3((unsigned)T, (unsigned)NH, (unsigned)B), TR_BLOCK, shm_dq, st>>>(dq, delta, dout, q, k, v,
                                                                                        out, lse, T, NH, KV, D, scale);
    CU_CHECK_LAUNCH("k_attn_bwd_dq");
    const size_t shm_dkv = (size_t)(4 * D + 2 * TR_BLOCK) * sizeof(float);
    k_attn_bwd_dkv<<<dim3((unsigned)T, (unsigned)KV, (unsigned)B), TR_BLOCK, shm_dkv, st>>>(
        dk, dv, dout, q, k, v, lse, delta, T, NH, KV, D, scale);
    CU_CHECK_LAUNCH("k_attn_bwd_dkv");
    tr_cu_scratch_free(s, delta);
}
