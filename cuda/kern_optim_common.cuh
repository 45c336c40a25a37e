/* Device code the optimizer's kernels share (kern_adamw.cu, kern_elementwise.cu, kern_multi_tensor.cu):
 * one AdamW element, and the second pass of the deterministic sum of squares. */
#ifndef TWINRUN_CUDA_KERN_OPTIM_COMMON_CUH
#define TWINRUN_CUDA_KERN_OPTIM_COMMON_CUH

#include <math.h>

#include "kern_common.cuh"
#include "twinrun/master_split.h"

/* One decoupled AdamW update, as the twin computes it: in double from the fp32 state, m, v and
 * master rounded to fp32 once. decay = 1 - lr * weight_decay, ibc1/ibc2 the reciprocals of the bias
 * corrections (the twin divides by them: a multiply is an ulp of a double away, far below the fp32
 * rounding that follows, and two double divisions an element fewer kept the kernel off the FP64 units'
 * limit). g is the gradient as stored (fp32, or bf16 widened), before grad_scale. */
__device__ __forceinline__ void adamw_math(float g32, float *mi, float *vi, float *w, double b1, double b2, double lr,
                                           double eps, double decay, double ibc1, double ibc2, double grad_scale) {
    const double g = (double)g32 * grad_scale;
    const float m1 = (float)(b1 * (double)*mi + (1.0 - b1) * g);
    const float v1 = (float)(b2 * (double)*vi + (1.0 - b2) * g * g);
    const double mhat = (double)m1 * ibc1, vhat = (double)v1 * ibc2;
    *w = (float)((double)*w * decay - lr * mhat / (sqrt(vhat) + eps));
    *mi = m1;
    *vi = v1;
}

/* The fp32 master of element i: master[i], or (master NULL) model's bf16 joined with rem[i]. */
__device__ __forceinline__ float master_load(size_t i, const float *master, const int16_t *rem, tr_buf model) {
    return master ? master[i] : tr_master_join(((const uint16_t *)model.p)[i], rem[i]);
}

/* Stores the updated master w of element i where master_load found it, and the model's copy. */
__device__ __forceinline__ void master_store(size_t i, float w, float *master, int16_t *rem, tr_buf model,
                                             bool write_model) {
    if (!master) {
        uint16_t hi;
        tr_master_split(w, &hi, &rem[i]);
        ((uint16_t *)model.p)[i] = hi;
        return;
    }
    master[i] = w;
    if (write_model) stf(model, i, w);
}

/* Element i of a decoupled AdamW step (adamw_math on the buffers). */
__device__ __forceinline__ void adamw_element(size_t i, float *master, int16_t *rem, tr_buf model, bool write_model,
                                              tr_buf grad, float *m, float *v, double b1, double b2, double lr,
                                              double eps, double decay, double ibc1, double ibc2, double grad_scale) {
    float mi = m[i], vi = v[i], w = master_load(i, master, rem, model);
    adamw_math(ldf(grad, i), &mi, &vi, &w, b1, b2, lr, eps, decay, ibc1, ibc2, grad_scale);
    m[i] = mi;
    v[i] = vi;
    master_store(i, w, master, rem, model, write_model);
}

/* Pass 2 of a sum of squares: one block sums the G partials (thread t: t, t + TR_BLOCK, ... in
 * order; then the tree) and adds the total to out[0]. */
static __global__ void k_sumsq_final(float *out, const float *partial, unsigned G) {
    __shared__ float sh[TR_BLOCK];
    float acc = 0.0f;
    for (unsigned i = threadIdx.x; i < G; i += TR_BLOCK) acc = acc + partial[i];
    const float s = block_sum(acc, sh);
    if (threadIdx.x == 0) out[0] = out[0] + s;
}

/* Blocks of pass 1 for n elements: about 4 per thread, at most 1024 (pass 2 is one block). */
static inline unsigned sumsq_blocks(unsigned long long n) {
    const unsigned long long g = (n + 4 * TR_BLOCK - 1) / (4 * TR_BLOCK);
    return (unsigned)(g < 1 ? 1 : (g > 1024 ? 1024 : g));
}

#endif
