/* SwiGLU: h [N,2F] rows are [gate | up]; out = silu(gate) * up. One thread per (n, i) pair, which
 * reads both halves before writing either (so dh may even alias h). sigmoid via expf (accurate
 * libdevice expf; no fast-math). */
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

extern "C" void kern_swiglu_forward(dev_stream *s, tr_buf out, tr_buf h, int N, int F) {
    TR_PROF(s, "swiglu_forward");
    kern_swiglu_forward_check(s, out, h, N, F);
    const size_t total = (size_t)N * (size_t)F;
    k_swiglu_fwd<<<grid_for(total), TR_BLOCK, 0, tr_cu_stream(s)>>>(out, h, (size_t)F, total);
    CU_CHECK_LAUNCH("k_swiglu_fwd");
}

extern "C" void kern_swiglu_backward(dev_stream *s, tr_buf dh, tr_buf dout, tr_buf h, int N, int F) {
    TR_PROF(s, "swiglu_backward");
    kern_swiglu_backward_check(s, dh, dout, h, N, F);
    const size_t total = (size_t)N * (size_t)F;
    k_swiglu_bwd<<<grid_for(total), TR_BLOCK, 0, tr_cu_stream(s)>>>(dh, dout, h, (size_t)F, total);
    CU_CHECK_LAUNCH("k_swiglu_bwd");
}
