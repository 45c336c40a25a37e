/* RMSNorm and LayerNorm, forward and backward.
 *
 * Forward: one block per row; LayerNorm takes two passes (mean, then the centred sum of squares),
 * as the twin does. Backward: the input gradient is per row (one block per row, accumulated into
 * dinp); the weight/bias gradients are column sums over all rows, done deterministically in two
 * passes: per chunk of TR_NORM_ROWS rows each thread sums its column in row order, then the chunk
 * partials are summed in chunk order and added once into dweight/dbias. xhat is recomputed from the
 * stored fp32 mean/rstd, like the twin. */
#include "gpu_profile.h"
#include "kern_common.cuh"

#define TR_NORM_ROWS 64 /* rows per chunk of the weight-gradient column sums */

__device__ __forceinline__ float gamma_at(tr_buf weight, int c, bool zc) {
    const float w = ldf(weight, (size_t)c);
    return zc ? 1.0f + w : w;
}

__global__ void k_norm_fwd(tr_buf out, float *mean, float *rstd, tr_buf inp, tr_buf weight, tr_buf bias, int C,
                           bool layer, bool zc, float eps) {
    __shared__ float sh[TR_BLOCK];
    const size_t row = (size_t)blockIdx.x * (size_t)C;
    float mu = 0.0f;
    if (layer) {
        float acc = 0.0f;
        for (int c = threadIdx.x; c < C; c += TR_BLOCK) acc = acc + ldf(inp, row + c);
        mu = block_sum(acc, sh) / (float)C;
    }
    float acc = 0.0f;
    for (int c = threadIdx.x; c < C; c += TR_BLOCK) {
        const float d = ldf(inp, row + c) - mu;
        acc = acc + d * d;
    }
    const float var = block_sum(acc, sh) / (float)C;
    const float r = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
        if (mean) mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = r;
    }
    for (int c = threadIdx.x; c < C; c += TR_BLOCK) {
        float y = (ldf(inp, row + c) - mu) * r * gamma_at(weight, c, zc);
        if (bias.p) y = y + ldf(bias, (size_t)c);
        stf(out, row + c, y);
    }
}

/* dinp[n,:] += r * (dxhat - mean(dxhat) [Layer] - xhat * mean(dxhat * xhat)), dxhat = dout * gamma. */
__global__ void k_norm_bwd_dinp(tr_buf dinp, tr_buf dout, tr_buf inp, tr_buf weight, const float *mean,
                                const float *rstd, int C, bool layer, bool zc) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    const size_t row = (size_t)n * (size_t)C;
    const float mu = layer ? mean[n] : 0.0f, r = rstd[n];
    float s1 = 0.0f, s2 = 0.0f;
    for (int c = threadIdx.x; c < C; c += TR_BLOCK) {
        const float xhat = (ldf(inp, row + c) - mu) * r;
        const float dxhat = ldf(dout, row + c) * gamma_at(weight, c, zc);
        s1 = s1 + dxhat;
        s2 = s2 + dxhat * xhat;
    }
    const float sum_dxhat = block_sum(s1, sh);
    const float sum_dxhat_xhat = block_sum(s2, sh);
    const float mean_dxhat = layer ? sum_dxhat / (float)C : 0.0f;
    const float mean_dxhat_xhat = sum_dxhat_xhat / (float)C;
    for (int c = threadIdx.x; c < C; c += TR_BLOCK) {
        const float xhat = (ldf(inp, row + c) - mu) * r;
        const float dxhat = ldf(dout, row + c) * gamma_at(weight, c, zc);
        const float dx = r * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat);
        stf(dinp, row + c, ldf(dinp, row + c) + dx);
    }
}

/* pw[chunk, c] = sum over the chunk's rows (in order) of dout * xhat; pb likewise of dout. */
__global__ void k_norm_bwd_wpartial(float *pw, float *pb, tr_buf dout, tr_buf inp, const float *mean,
                                    const float *rstd, int N, int C, bool layer) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    const int n0 = blockIdx.y * TR_NORM_ROWS, n1 = min(N, n0 + TR_NORM_ROWS);
    float aw = 0.0f, ab = 0.0f;
    for (int n = n0; n < n1; n++) {
        const size_t i = (size_t)n * (size_t)C + c;
        const float mu = layer ? mean[n] : 0.0f;
        const float g = ldf(dout, i);
        aw = aw + g * ((ldf(inp, i) - mu) * rstd[n]);
        ab = ab + g;
    }
    pw[(size_t)blockIdx.y * C + c] = aw;
    if (pb) pb[(size_t)blockIdx.y * C + c] = ab;
}

__global__ void k_norm_bwd_wfinal(tr_buf dweight, tr_buf dbias, const float *pw, const float *pb, int chunks, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float aw = 0.0f, ab = 0.0f;
    for (int j = 0; j < chunks; j++) {
        aw = aw + pw[(size_t)j * C + c];
        if (pb) ab = ab + pb[(size_t)j * C + c];
    }
    stf(dweight, (size_t)c, ldf(dweight, (size_t)c) + aw); /* d(1 + w)/dw = 1: same with zero-centred gamma */
    if (dbias.p) stf(dbias, (size_t)c, ldf(dbias, (size_t)c) + ab);
}

extern "C" void kern_norm_forward(dev_stream *s, const kern_norm_desc *nd, tr_buf out, float *mean, float *rstd,
                                  tr_buf inp, tr_buf weight, tr_buf bias, int N, int C) {
    TR_PROF(s, "norm_forward");
    kern_norm_forward_check(s, nd, out, mean, rstd, inp, weight, bias, N, C);
    const bool layer = nd->kind == KERN_NORM_LAYER;
    k_norm_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, mean, rstd, inp, weight, bias, C, layer,
                                                    nd->zero_centered_gamma, nd->eps);
    CU_CHECK_LAUNCH("k_norm_fwd");
}

extern "C" void kern_norm_backward(dev_stream *s, const kern_norm_desc *nd, tr_buf dinp, tr_buf dweight,
                                   tr_buf dbias, tr_buf dout, tr_buf inp, tr_buf weight, const float *mean,
                                   const float *rstd, int N, int C) {
    TR_PROF(s, "norm_backward");
    kern_norm_backward_check(s, nd, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    const bool layer = nd->kind == KERN_NORM_LAYER;

    cudaStream_t st = tr_cu_stream(s);
    /* Weight gradients first, then dinp: the column sums read dout before dinp is touched. */
    const int chunks = (N + TR_NORM_ROWS - 1) / TR_NORM_ROWS;
    const size_t pbytes = (size_t)chunks * (size_t)C * sizeof(float);
    float *pw = (float *)tr_cu_scratch(s, pbytes, "norm dweight partials");
    float *pb = dbias.p ? (float *)tr_cu_scratch(s, pbytes, "norm dbias partials") : NULL;
    dim3 g1((unsigned)((C + 127) / 128), (unsigned)chunks);
    k_norm_bwd_wpartial<<<g1, 128, 0, st>>>(pw, pb, dout, inp, mean, rstd, N, C, layer);
    CU_CHECK_LAUNCH("k_norm_bwd_wpartial");
    k_norm_bwd_wfinal<<<(C + 127) / 128, 128, 0, st>>>(dweight, dbias, pw, pb, chunks, C);
    CU_CHECK_LAUNCH("k_norm_bwd_wfinal");
    tr_cu_scratch_free(s, pb);
    tr_cu_scratch_free(s, pw);

    k_norm_bwd_dinp<<<N, TR_BLOCK, 0, st>>>(dinp, dout, inp, weight, mean, rstd, C, layer, nd->zero_centered_gamma);
    CU_CHECK_LAUNCH("k_norm_bwd_dinp");
}
