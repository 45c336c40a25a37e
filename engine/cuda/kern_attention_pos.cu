/* Grouped-query attention with explicit query and key positions (context parallelism: a rank's
 * query chunks against the all-gathered keys), forward and backward: straightforward and
 * deterministic, the kernels of kern_attention.cu with the causal test j <= t replaced by
 * k_pos[j] <= q_pos[i] and the key loops running over all Tk keys.
 *
 * Layouts: q, out, dq [B,Tq,NH,D]; k, v, dk, dv [B,Tk,KV,D]; lse [B,NH,Tq]; q_pos [Tq], k_pos [Tk]
 * int32. Head h reads group h / (NH/KV). Scale 1/sqrt(D). A score is always the fp32 dot over d in
 * ascending order, times the scale, so the backward's recomputed probabilities match the forward.
 * Keys a query does not see are skipped (never multiplied by zero: their values may be anything).
 *
 * Forward, one block per (query i, head h, batch b): pass 1 the max over visible keys (a query that
 * sees none stops the kernel with a message); pass 2 in tiles of TR_BLOCK keys: p_j into shared
 * memory, then each thread owning an output dim d adds p_j v_j[d] over the tile's visible keys in
 * key order. lse = max + log(sum p).
 * Backward (P = exp(S - lse), dP = dO V^T, Delta_i = dO_i . O_i, dS = P (dP - Delta)):
 *   k_attn_pos_bwd_dq   one block per query row: Delta_i (kept in scratch), dq_i = scale sum_j dS_ij k_j;
 *   k_attn_pos_bwd_dkv  one block per (key j, group g, batch b): the group's heads in order, the
 *                       queries that see j in order: dv_j = sum P_ij dO_i, dk_j = scale sum dS_ij q_i
 *                       (0 for a key no query sees: the CP reduce-scatter adds the other ranks').
 * No atomics: every output element is written by one thread after a fixed-order sum. */
#include <math.h>

#include "kern_common.cuh"

#define TR_ATTN_POS_MAX_D 1024

__device__ __forceinline__ float pos_dot_row(const float *xs, tr_buf y, size_t off, int D) {
    float s = 0.0f;
    for (int d = 0; d < D; d++) s = s + xs[d] * ldf(y, off + d);
    return s;
}

__global__ void k_attn_pos_fwd(tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, const int32_t *q_pos,
                               const int32_t *k_pos, int Tq, int Tk, int NH, int KV, int D, float scale) {
    extern __shared__ float smem[];
    float *qs = smem, *acc = qs + D, *p = acc + D, *vis = p + TR_BLOCK, *sh = vis + TR_BLOCK;
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / KV);
    const int32_t qp = q_pos[i];
    const size_t qoff = (((size_t)b * Tq + i) * NH + h) * (size_t)D;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        qs[d] = ldf(q, qoff + d);
        acc[d] = 0.0f;
    }
    __syncthreads();
    float mx = -INFINITY, seen = 0.0f;
    for (int j = threadIdx.x; j < Tk; j += TR_BLOCK) {
        if (k_pos[j] > qp) continue;
        seen = 1.0f;
        mx = nan_max(mx, pos_dot_row(qs, k, (((size_t)b * Tk + j) * KV + g) * (size_t)D, D) * scale);
    }
    mx = block_max(mx, sh);
    if (block_max(seen, sh) == 0.0f) { /* uniform over the block: every thread returns */
        if (threadIdx.x == 0)
            TR_DEVICE_FAIL("attention forward: query %d at position %d sees no key; with context parallelism, "
                           "check the chunk layout and that k_pos covers the all-gathered sequence\n",
                           i, (int)qp);
        return;
    }
    float lsum = 0.0f;
    for (int j0 = 0; j0 < Tk; j0 += TR_BLOCK) {
        const int j = j0 + threadIdx.x;
        float pj = 0.0f, vj = 0.0f;
        if (j < Tk && k_pos[j] <= qp) {
            pj = expf(pos_dot_row(qs, k, (((size_t)b * Tk + j) * KV + g) * (size_t)D, D) * scale - mx);
            lsum = lsum + pj;
            vj = 1.0f;
        }
        p[threadIdx.x] = pj;
        vis[threadIdx.x] = vj;
        __syncthreads();
        const int nj = min(TR_BLOCK, Tk - j0);
        for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
            float a = acc[d];
            for (int jj = 0; jj < nj; jj++)
                if (vis[jj] != 0.0f) a = a + p[jj] * ldf(v, (((size_t)b * Tk + j0 + jj) * KV + g) * (size_t)D + d);
            acc[d] = a;
        }
        __syncthreads();
    }
    const float total = block_sum(lsum, sh);
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) stf(out, qoff + d, acc[d] / total);
    if (threadIdx.x == 0) lse[((size_t)b * NH + h) * Tq + i] = mx + logf(total);
}

__global__ void k_attn_pos_bwd_dq(tr_buf dq, float *delta, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, tr_buf out,
                                  const float *lse, const int32_t *q_pos, const int32_t *k_pos, int Tq, int Tk,
                                  int NH, int KV, int D, float scale) {
    extern __shared__ float smem[];
    float *qs = smem, *dos = qs + D, *acc = dos + D, *ds = acc + D, *vis = ds + TR_BLOCK, *sh = vis + TR_BLOCK;
    const int i = blockIdx.x, h = blockIdx.y, b = blockIdx.z, g = h / (NH / KV);
    const int32_t qp = q_pos[i];
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
    for (int j0 = 0; j0 < Tk; j0 += TR_BLOCK) {
        const int j = j0 + threadIdx.x;
        float dsj = 0.0f, vj = 0.0f;
        if (j < Tk && k_pos[j] <= qp) {
            const size_t koff = (((size_t)b * Tk + j) * KV + g) * (size_t)D;
            const float pj = expf(pos_dot_row(qs, k, koff, D) * scale - L);
            dsj = pj * (pos_dot_row(dos, v, koff, D) - dl);
            vj = 1.0f;
        }
        ds[threadIdx.x] = dsj;
        vis[threadIdx.x] = vj;
        __syncthreads();
        const int nj = min(TR_BLOCK, Tk - j0);
        for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
            float a = acc[d];
            for (int jj = 0; jj < nj; jj++)
                if (vis[jj] != 0.0f) a = a + ds[jj] * ldf(k, (((size_t)b * Tk + j0 + jj) * KV + g) * (size_t)D + d);
            acc[d] = a;
        }
        __syncthreads();
    }
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) stf(dq, qoff + d, acc[d] * scale);
}

__global__ void k_attn_pos_bwd_dkv(tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, const float *lse,
                                   const float *delta, const int32_t *q_pos, const int32_t *k_pos, int Tq, int Tk,
                                   int NH, int KV, int D, float scale) {
    extern __shared__ float smem[];
    float *ks = smem, *vs = ks + D, *adk = vs + D, *adv = adk + D, *ps = adv + D, *ds = ps + TR_BLOCK;
    float *vis = ds + TR_BLOCK;
    const int j = blockIdx.x, g = blockIdx.y, b = blockIdx.z, rep = NH / KV;
    const int32_t kp = k_pos[j];
    const size_t koff = (((size_t)b * Tk + j) * KV + g) * (size_t)D;
    for (int d = threadIdx.x; d < D; d += TR_BLOCK) {
        ks[d] = ldf(k, koff + d);
        vs[d] = ldf(v, koff + d);
        adk[d] = 0.0f;
        adv[d] = 0.0f;
    }
    __syncthreads();
    for (int h = g * rep; h < (g + 1) * rep; h++) {
        for (int i0 = 0; i0 < Tq; i0 += TR_BLOCK) {
            const int i = i0 + threadIdx.x;
            float pi = 0.0f, dsi = 0.0f, vi = 0.0f;
            if (i < Tq && kp <= q_pos[i]) {
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

/* This kernel's limits, after the contract (kern_attention_*_pos_check). */
static void check_attn_pos(int B, int NH, int KV, int D) {
    TR_CHECK(D <= TR_ATTN_POS_MAX_D, "attention: head dims above 1024 are not supported by the CUDA kernel");
    TR_CHECK(NH <= 65535 && B <= 65535 && KV <= 65535, "attention: more than 65535 heads or micro-batch rows per call");
}

static float attn_pos_scale(int D) { return (float)(1.0 / sqrt((double)D)); }

extern "C" void kern_attention_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                           const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH,
                                           int KV, int D) {
    kern_attention_forward_pos_check(s, out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
    check_attn_pos(B, NH, KV, D);
    const size_t shm = (size_t)(2 * D + 3 * TR_BLOCK) * sizeof(float);
    k_attn_pos_fwd<<<dim3((unsigned)Tq, (unsigned)NH, (unsigned)B), TR_BLOCK, shm, tr_cu_stream(s)>>>(
        out, lse, q, k, v, q_pos, k_pos, Tq, Tk, NH, KV, D, attn_pos_scale(D));
    CU_CHECK_LAUNCH("k_attn_pos_fwd");
}

extern "C" void kern_attention_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q,
                                            tr_buf k, tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos,
                                            const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D) {
    kern_attention_backward_pos_check(s, dq, dk, dv, dout, q, k, v, out, lse, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
    check_attn_pos(B, NH, KV, D);
    kern_check_float_buf(out, "attention out"); /* read here for sum(dout * out) */
    cudaStream_t st = tr_cu_stream(s);
    float *delta = (float *)tr_cu_scratch(s, (size_t)B * NH * Tq * sizeof(float), "attention delta"); /* [B,NH,Tq] */
    const float scale = attn_pos_scale(D);
    const size_t shm_dq = (size_t)(3 * D + 3 * TR_BLOCK) * sizeof(float);
    k_attn_pos_bwd_dq<<<dim3((unsigned)Tq, (unsigned)NH, (unsigned)B), TR_BLOCK, shm_dq, st>>>(
        dq, delta, dout, q, k, v, out, lse, q_pos, k_pos, Tq, Tk, NH, KV, D, scale);
    CU_CHECK_LAUNCH("k_attn_pos_bwd_dq");
    const size_t shm_dkv = (size_t)(4 * D + 3 * TR_BLOCK) * sizeof(float);
    k_attn_pos_bwd_dkv<<<dim3((unsigned)Tk, (unsigned)KV, (unsigned)B), TR_BLOCK, shm_dkv, st>>>(
        dk, dv, dout, q, k, v, lse, delta, q_pos, k_pos, Tq, Tk, NH, KV, D, scale);
    CU_CHECK_LAUNCH("k_attn_pos_bwd_dkv");
    tr_cu_scratch_free(s, delta);
}
