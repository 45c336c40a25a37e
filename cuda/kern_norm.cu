/* RMSNorm and LayerNorm, forward and backward.
 *
 * Forward: one block per row; LayerNorm takes two passes (mean, then the centred sum of squares),
 * as the twin does. Backward: the input gradient is per row (one block per row, accumulated into
 * dinp); the weight/bias gradients are column sums over all rows, done deterministically in two
 * passes: per chunk of TR_NORM_ROWS rows each thread sums its column in row order, then the chunk
 * partials are summed in chunk order and added once into dweight/dbias. xhat is recomputed from the
 * stored fp32 mean/rstd, like the twin.
 *
 * Fast path (the model's case: input, output and the gradients of the rows in one storage type, 16-byte
 * aligned, C a multiple of 8 up to 16384): a row lives in registers, 16 elements a thread read with
 * 16-byte loads, so each tensor crosses memory once; the backward fuses the weight-gradient partials
 * into the input-gradient kernel, one block per chunk of TR_NORM_ROWS8 rows summing its columns in row
 * order (then the chunks in order, as above). The generic kernels below serve every other mix. */
#include "gpu_profile.h"
#include "kern_common.cuh"

#define TR_NORM_ROWS 64  /* rows per chunk of the weight-gradient column sums */
#define TR_NORM_ROWS8 16 /* the same in the fast path: 512 blocks at 8192 rows */
#define TR_NORM_VPT 2    /* the fast path's eight-element vectors a thread (16 elements) */

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
__global__ void k_norm_bwd_wpartial(float *pw, float *pb, tr_buf dout, tr_buf inp, const float *mean, const float *rstd,
                                    int N, int C, bool layer) {
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

/* ---- fast path --------------------------------------------------------------------------------------- */

/* Sums of a and b over a block of NT threads (a power of two); every thread gets both. A fixed tree, as
 * block_sum. sh has 2 * NT floats. */
template <int NT> __device__ __forceinline__ float2 block_sum2(float a, float b, float *sh) {
    const unsigned t = threadIdx.x;
    __syncthreads();
    sh[t] = a, sh[NT + t] = b;
    __syncthreads();
    for (unsigned stride = NT / 2; stride > 0; stride >>= 1) {
        if (t < stride) sh[t] = sh[t] + sh[t + stride], sh[NT + t] = sh[NT + t] + sh[NT + t + stride];
        __syncthreads();
    }
    return make_float2(sh[0], sh[NT]);
}

/* x[v][k] = row[(v * NT + threadIdx.x) * 8 + k], zero past C (those lanes never store). */
template <typename T, int NT>
__device__ __forceinline__ void norm_load_row(const T *row, int C, float x[TR_NORM_VPT][8]) {
#pragma unroll
    for (int v = 0; v < TR_NORM_VPT; v++) {
        const int c0 = (v * NT + (int)threadIdx.x) * 8;
        if (c0 < C) ld8(row + c0, x[v]);
        else
#pragma unroll
            for (int k = 0; k < 8; k++) x[v][k] = 0.0f;
    }
}

template <int NT>
__device__ __forceinline__ void norm_load_gamma(tr_buf weight, int C, bool zc, float g[TR_NORM_VPT][8]) {
#pragma unroll
    for (int v = 0; v < TR_NORM_VPT; v++) {
        const int c0 = (v * NT + (int)threadIdx.x) * 8;
#pragma unroll
        for (int k = 0; k < 8; k++) g[v][k] = c0 < C ? gamma_at(weight, c0 + k, zc) : 0.0f;
    }
}

/* one block of NT threads per row */
template <typename T, int NT>
__global__ void __launch_bounds__(NT) k_norm_fwd8(T *out, float *mean, float *rstd, const T *inp, tr_buf weight,
                                                  tr_buf bias, int C, bool layer, bool zc, float eps) {
    __shared__ float sh[2 * NT];
    const size_t row = (size_t)blockIdx.x * (size_t)C;
    float x[TR_NORM_VPT][8];
    norm_load_row<T, NT>(inp + row, C, x);
    float mu = 0.0f;
    if (layer) {
        float acc = 0.0f;
#pragma unroll
        for (int v = 0; v < TR_NORM_VPT; v++)
#pragma unroll
            for (int k = 0; k < 8; k++) acc = acc + x[v][k];
        mu = block_sum2<NT>(acc, 0.0f, sh).x / (float)C;
    }
    float acc = 0.0f;
#pragma unroll
    for (int v = 0; v < TR_NORM_VPT; v++) {
        const int c0 = (v * NT + (int)threadIdx.x) * 8;
        if (c0 >= C) continue;
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const float d = x[v][k] - mu;
            acc = acc + d * d;
        }
    }
    const float var = block_sum2<NT>(acc, 0.0f, sh).x / (float)C;
    const float r = 1.0f / sqrtf(var + eps);
    if (threadIdx.x == 0) {
        if (mean) mean[blockIdx.x] = mu;
        rstd[blockIdx.x] = r;
    }
#pragma unroll
    for (int v = 0; v < TR_NORM_VPT; v++) {
        const int c0 = (v * NT + (int)threadIdx.x) * 8;
        if (c0 >= C) continue;
        float y[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            y[k] = (x[v][k] - mu) * r * gamma_at(weight, c0 + k, zc);
            if (bias.p) y[k] = y[k] + ldf(bias, (size_t)(c0 + k));
        }
        st8(out + row + c0, y);
    }
}

/* One block of NT threads per chunk of TR_NORM_ROWS8 rows: dinp of each row (as k_norm_bwd_dinp), and
 * the chunk's column sums pw[chunk, c] = sum over its rows, in order, of dout * xhat (pb: of dout). */
template <typename T, int NT>
__global__ void __launch_bounds__(NT)
    k_norm_bwd8(T *dinp, float *pw, float *pb, const T *dout, const T *inp, tr_buf weight, const float *mean,
                const float *rstd, int N, int C, bool layer, bool zc) {
    __shared__ float sh[2 * NT];
    float g[TR_NORM_VPT][8], aw[TR_NORM_VPT][8], ab[TR_NORM_VPT][8];
    norm_load_gamma<NT>(weight, C, zc, g);
#pragma unroll
    for (int v = 0; v < TR_NORM_VPT; v++)
#pragma unroll
        for (int k = 0; k < 8; k++) aw[v][k] = 0.0f, ab[v][k] = 0.0f;
    const int n0 = blockIdx.x * TR_NORM_ROWS8, n1 = min(N, n0 + TR_NORM_ROWS8);
    for (int n = n0; n < n1; n++) {
        const size_t row = (size_t)n * (size_t)C;
        const float mu = layer ? mean[n] : 0.0f, r = rstd[n];
        float x[TR_NORM_VPT][8], dy[TR_NORM_VPT][8];
        norm_load_row<T, NT>(inp + row, C, x);
        norm_load_row<T, NT>(dout + row, C, dy);
        float s1 = 0.0f, s2 = 0.0f;
#pragma unroll
        for (int v = 0; v < TR_NORM_VPT; v++)
#pragma unroll
            for (int k = 0; k < 8; k++) {
                x[v][k] = (x[v][k] - mu) * r; /* xhat from here on */
                const float dxhat = dy[v][k] * g[v][k];
                s1 = s1 + dxhat;
                s2 = s2 + dxhat * x[v][k];
                aw[v][k] = aw[v][k] + dy[v][k] * x[v][k];
                ab[v][k] = ab[v][k] + dy[v][k];
            }
        const float2 sums = block_sum2<NT>(s1, s2, sh);
        const float mean_dxhat = layer ? sums.x / (float)C : 0.0f;
        const float mean_dxhat_xhat = sums.y / (float)C;
#pragma unroll
        for (int v = 0; v < TR_NORM_VPT; v++) {
            const int c0 = (v * NT + (int)threadIdx.x) * 8;
            if (c0 >= C) continue;
            float d[8];
            ld8(dinp + row + c0, d);
#pragma unroll
            for (int k = 0; k < 8; k++) {
                const float dxhat = dy[v][k] * g[v][k];
                d[k] = d[k] + r * (dxhat - mean_dxhat - x[v][k] * mean_dxhat_xhat);
            }
            st8(dinp + row + c0, d);
        }
    }
#pragma unroll
    for (int v = 0; v < TR_NORM_VPT; v++) {
        const int c0 = (v * NT + (int)threadIdx.x) * 8;
        if (c0 >= C) continue;
        float *w = pw + (size_t)blockIdx.x * C + c0;
        reinterpret_cast<float4 *>(w)[0] = make_float4(aw[v][0], aw[v][1], aw[v][2], aw[v][3]);
        reinterpret_cast<float4 *>(w)[1] = make_float4(aw[v][4], aw[v][5], aw[v][6], aw[v][7]);
        if (pb) {
            float *b = pb + (size_t)blockIdx.x * C + c0;
            reinterpret_cast<float4 *>(b)[0] = make_float4(ab[v][0], ab[v][1], ab[v][2], ab[v][3]);
            reinterpret_cast<float4 *>(b)[1] = make_float4(ab[v][4], ab[v][5], ab[v][6], ab[v][7]);
        }
    }
}

/* The fast path's block size for rows of C (0: the generic kernels): the smallest power of two from 64 to
 * 1024 threads whose 16 elements each cover the row. */
static int norm_fast_threads(int C, tr_buf a, tr_buf b, tr_buf c) {
    if (C % 8 != 0 || C > 1024 * 8 * TR_NORM_VPT) return 0;
    if (a.dt != b.dt || a.dt != c.dt || !tr_aligned16(a.p) || !tr_aligned16(b.p) || !tr_aligned16(c.p)) return 0;
    int nt = 64;
    while (nt * 8 * TR_NORM_VPT < C) nt *= 2;
    return nt;
}

#define NORM_FAST_SWITCH(nt, CALL)                                                                                     \
    switch (nt) {                                                                                                      \
    case 64: CALL(64); break;                                                                                          \
    case 128: CALL(128); break;                                                                                        \
    case 256: CALL(256); break;                                                                                        \
    case 512: CALL(512); break;                                                                                        \
    default: CALL(1024); break;                                                                                        \
    }

extern "C" void kern_norm_forward(dev_stream *s, const kern_norm_desc *nd, tr_buf out, float *mean, float *rstd,
                                  tr_buf inp, tr_buf weight, tr_buf bias, int N, int C) {
    TR_PROF(s, "norm_forward");
    kern_norm_forward_check(s, nd, out, mean, rstd, inp, weight, bias, N, C);
    const bool layer = nd->kind == KERN_NORM_LAYER;
    const int nt = norm_fast_threads(C, out, inp, inp);
    if (nt) {
        cudaStream_t st = tr_cu_stream(s);
        const bool zc = nd->zero_centered_gamma;
#define FWD8(NT)                                                                                                       \
    if (inp.dt == TR_BF16)                                                                                             \
        k_norm_fwd8<uint16_t, NT><<<N, NT, 0, st>>>((uint16_t *)out.p, mean, rstd, (const uint16_t *)inp.p, weight,    \
                                                    bias, C, layer, zc, nd->eps);                                      \
    else                                                                                                               \
        k_norm_fwd8<float, NT>                                                                                         \
            <<<N, NT, 0, st>>>((float *)out.p, mean, rstd, (const float *)inp.p, weight, bias, C, layer, zc, nd->eps)
        NORM_FAST_SWITCH(nt, FWD8)
#undef FWD8
        CU_CHECK_LAUNCH("k_norm_fwd8");
        return;
    }
    k_norm_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, mean, rstd, inp, weight, bias, C, layer,
                                                    nd->zero_centered_gamma, nd->eps);
    CU_CHECK_LAUNCH("k_norm_fwd");
}

extern "C" void kern_norm_backward(dev_stream *s, const kern_norm_desc *nd, tr_buf dinp, tr_buf dweight, tr_buf dbias,
                                   tr_buf dout, tr_buf inp, tr_buf weight, const float *mean, const float *rstd, int N,
                                   int C) {
    TR_PROF(s, "norm_backward");
    kern_norm_backward_check(s, nd, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C);
    const bool layer = nd->kind == KERN_NORM_LAYER;

    cudaStream_t st = tr_cu_stream(s);
    const int nt = dinp.dt == dout.dt ? norm_fast_threads(C, dinp, dout, inp) : 0;
    if (nt) {
        const int chunks = (N + TR_NORM_ROWS8 - 1) / TR_NORM_ROWS8;
        const size_t pbytes = (size_t)chunks * (size_t)C * sizeof(float);
        float *pw = (float *)tr_cu_scratch(s, pbytes, "norm dweight partials");
        float *pb = dbias.p ? (float *)tr_cu_scratch(s, pbytes, "norm dbias partials") : NULL;
        const bool zc = nd->zero_centered_gamma;
#define BWD8(NT)                                                                                                       \
    if (inp.dt == TR_BF16)                                                                                             \
        k_norm_bwd8<uint16_t, NT><<<chunks, NT, 0, st>>>((uint16_t *)dinp.p, pw, pb, (const uint16_t *)dout.p,         \
                                                         (const uint16_t *)inp.p, weight, mean, rstd, N, C, layer,     \
                                                         zc);                                                          \
    else                                                                                                               \
        k_norm_bwd8<float, NT><<<chunks, NT, 0, st>>>((float *)dinp.p, pw, pb, (const float *)dout.p,                  \
                                                      (const float *)inp.p, weight, mean, rstd, N, C, layer, zc)
        NORM_FAST_SWITCH(nt, BWD8)
#undef BWD8
        CU_CHECK_LAUNCH("k_norm_bwd8");
        k_norm_bwd_wfinal<<<(C + 127) / 128, 128, 0, st>>>(dweight, dbias, pw, pb, chunks, C);
        CU_CHECK_LAUNCH("k_norm_bwd_wfinal");
        tr_cu_scratch_free(s, pb);
        tr_cu_scratch_free(s, pw);
        return;
    }
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
