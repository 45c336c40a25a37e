/* SwiGLU: h [N,2F] rows are [gate | up]; out = silu(gate) * up. A thread reads both halves of its
 * elements before writing either (so dh may even alias h). sigmoid via expf (accurate libdevice
 * expf; no fast-math).
 * Fast path (every buffer of one type, F a multiple of 8, 16-byte aligned): a block per row and
 * blockIdx.y over the row's chunks, eight elements a thread with 16-byte loads — the same
 * arithmetic per element as the general kernels, so the same bits. */
#include "gpu_profile.h"
#include "kern_common.cuh"

__device__ __forceinline__ float sigmoidf_(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void k_swiglu_fwd(tr_buf out, tr_buf h, size_t F, size_t total) {
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, i = idx % F;
        const float gate = ldf(h, n * 2 * F + i), up = ldf(h, n * 2 * F + F + i);
        stf(out, idx, gate * sigmoidf_(gate) * up);
    }
}

__global__ void k_swiglu_bwd(tr_buf dh, tr_buf dout, tr_buf h, size_t F, size_t total) {
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const size_t n = idx / F, i = idx % F;
        const size_t ig = n * 2 * F + i, iu = ig + F;
        const float gate = ldf(h, ig), up = ldf(h, iu), g = ldf(dout, idx);
        const float sg = sigmoidf_(gate);
        /* d silu(x)/dx = sigmoid(x) * (1 + x * (1 - sigmoid(x))) */
        stf(dh, ig, g * up * sg * (1.0f + gate * (1.0f - sg)));
        stf(dh, iu, g * gate * sg);
    }
}

template <typename T> __global__ void k_swiglu_fwd8(T *out, const T *h, int F) {
    const size_t n = blockIdx.x;
    const int i = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
    if (i >= F) return;
    float gate[8], up[8], y[8];
    ld8<T>(h + n * 2 * (size_t)F + i, gate);
    ld8<T>(h + n * 2 * (size_t)F + F + i, up);
#pragma unroll
    for (int k = 0; k < 8; k++) y[k] = gate[k] * sigmoidf_(gate[k]) * up[k];
    st8<T>(out + n * (size_t)F + i, y);
}

template <typename T> __global__ void k_swiglu_bwd8(T *dh, const T *dout, const T *h, int F) {
    const size_t n = blockIdx.x;
    const int i = (blockIdx.y * blockDim.x + threadIdx.x) * 8;
    if (i >= F) return;
    float gate[8], up[8], g[8], dg[8], du[8];
    const size_t ig = n * 2 * (size_t)F + i, iu = ig + F;
    ld8<T>(h + ig, gate);
    ld8<T>(h + iu, up);
    ld8<T>(dout + n * (size_t)F + i, g);
#pragma unroll
    for (int k = 0; k < 8; k++) {
        const float sg = sigmoidf_(gate[k]);
        dg[k] = g[k] * up[k] * sg * (1.0f + gate[k] * (1.0f - sg));
        du[k] = g[k] * gate[k] * sg;
    }
    st8<T>(dh + ig, dg);
    st8<T>(dh + iu, du);
}

/* Whether the fast path takes these buffers (one dtype, fp32 or bf16, F % 8 == 0, 16-byte aligned). */
static bool swiglu_fast(tr_buf a, tr_buf b, tr_buf c, int F) {
    return a.dt == b.dt && b.dt == c.dt && (a.dt == TR_BF16 || a.dt == TR_F32) && F % 8 == 0 && tr_aligned16(a.p) &&
           tr_aligned16(b.p) && tr_aligned16(c.p);
}

static dim3 swiglu_grid(int N, int F) { return dim3((unsigned)N, (unsigned)((F / 8 + TR_BLOCK - 1) / TR_BLOCK)); }

extern "C" void kern_swiglu_forward(dev_stream *s, tr_buf out, tr_buf h, int N, int F) {
    TR_PROF(s, "swiglu_forward");
    kern_swiglu_forward_check(s, out, h, N, F);
    if (N == 0 || F == 0) return;
    if (swiglu_fast(out, h, h, F)) {
        if (out.dt == TR_BF16)
            k_swiglu_fwd8<uint16_t><<<swiglu_grid(N, F), TR_BLOCK, 0, tr_cu_stream(s)>>>(
                (uint16_t *)out.p, (const uint16_t *)h.p, F);
        else
            k_swiglu_fwd8<float><<<swiglu_grid(N, F), TR_BLOCK, 0, tr_cu_stream(s)>>>((float *)out.p,
                                                                                     (const float *)h.p, F);
        CU_CHECK_LAUNCH("k_swiglu_fwd8");
        return;
    }
    const size_t total = (size_t)N * (size_t)F;
    k_swiglu_fwd<<<grid_for(total), TR_BLOCK, 0, tr_cu_stream(s)>>>(out, h, (size_t)F, total);
    CU_CHECK_LAUNCH("k_swiglu_fwd");
}

extern "C" void kern_swiglu_backward(dev_stream *s, tr_buf dh, tr_buf dout, tr_buf h, int N, int F) {
    TR_PROF(s, "swiglu_backward");
    kern_swiglu_backward_check(s, dh, dout, h, N, F);
    if (N == 0 || F == 0) return;
    if (swiglu_fast(dh, dout, h, F)) {
        if (dh.dt == TR_BF16)
            k_swiglu_bwd8<uint16_t><<<swiglu_grid(N, F), TR_BLOCK, 0, tr_cu_stream(s)>>>(
                (uint16_t *)dh.p, (const uint16_t *)dout.p, (const uint16_t *)h.p, F);
        else
            k_swiglu_bwd8<float><<<swiglu_grid(N, F), TR_BLOCK, 0, tr_cu_stream(s)>>>(
                (float *)dh.p, (const float *)dout.p, (const float *)h.p, F);
        CU_CHECK_LAUNCH("k_swiglu_bwd8");
        return;
    }
    const size_t total = (size_t)N * (size_t)F;
    k_swiglu_bwd<<<grid_for(total), TR_BLOCK, 0, tr_cu_stream(s)>>>(dh, dout, h, (size_t)F, total);
    CU_CHECK_LAUNCH("k_swiglu_bwd");
}
