/* Decoupled AdamW (torch.optim.AdamW / Megatron FusedAdam), elementwise. Mirrors the twin: each
 * element is updated in double from its fp32 state (bias corrections computed on the host in
 * double) and m, v, master are rounded to fp32 once, so the optimizer state of a CUDA run tracks the
 * twin's closely over many steps. Memory-bound; the fp64 arithmetic costs nothing that matters. */
#include <math.h>

#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_optim_common.cuh"

__global__ void k_adamw(float *master, int16_t *rem, tr_buf model, bool write_model, tr_buf grad, float *m, float *v,
                        size_t n, double b1, double b2, double lr, double eps, double decay, double ibc1, double ibc2,
                        double grad_scale) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        adamw_element(i, master, rem, model, write_model, grad, m, v, b1, b2, lr, eps, decay, ibc1, ibc2, grad_scale);
}

__global__ void k_master_split(uint16_t *hi, int16_t *rem, const float *w, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        int16_t r;
        tr_master_split(w[i], &hi[i], &r);
        if (rem) rem[i] = r;
    }
}

extern "C" void kern_master_split(dev_stream *s, tr_buf model, int16_t *rem, const float *w, size_t n) {
    TR_PROF(s, "master_split");
    kern_master_split_check(s, model, rem, w, n);
    if (n == 0) return;
    k_master_split<<<grid_for(n), TR_BLOCK, 0, tr_cu_stream(s)>>>((uint16_t *)model.p, rem, w, n);
    CU_CHECK_LAUNCH("k_master_split");
}

extern "C" void kern_adamw_update(dev_stream *s, const kern_adamw_desc *ad, float *master, int16_t *master_rem,
                                  tr_buf model, tr_buf grad, float *m, float *v, size_t n) {
    TR_PROF(s, "adamw_update");
    kern_adamw_update_check(s, ad, master, master_rem, model, grad, m, v, n);
    if (n == 0) return;
    const bool write_model = model.p != NULL && model.p != (void *)master;
    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr;
    const double ibc1 = 1.0 / (1.0 - pow(b1, (double)ad->step)), ibc2 = 1.0 / (1.0 - pow(b2, (double)ad->step));
    const double decay = 1.0 - lr * (double)ad->weight_decay;
    k_adamw<<<grid_for(n), TR_BLOCK, 0, tr_cu_stream(s)>>>(master, master_rem, model, write_model, grad, m, v, n, b1,
                                                           b2, lr, (double)ad->eps, decay, ibc1, ibc2,
                                                           (double)ad->grad_scale);
    CU_CHECK_LAUNCH("k_adamw");
}
