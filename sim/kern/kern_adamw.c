/* Decoupled AdamW (torch.optim.AdamW / Megatron FusedAdam semantics) for the twin.
 * Each element is updated in double from its fp32 state and the new m, v and master are rounded
 * to fp32 once; the bias corrections are computed in double, as torch computes them in Python. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

void kern_adamw_update(dev_stream *s, const kern_adamw_desc *ad, float *master, tr_buf model, tr_buf grad, float *m,
                       float *v, size_t n) {
    kern_cost(s, 16.0 * n, (double)n * (16.0 + tr_dtype_size(grad.dt) + tr_dtype_size(model.dt)), TR_F32);
    TR_CHECK(ad != NULL, "adamw needs a descriptor");
    TR_CHECK(ad->step >= 1, "adamw step is 1-based; the first update is step 1");
    TR_CHECK(ad->beta1 >= 0.0f && ad->beta1 < 1.0f && ad->beta2 >= 0.0f && ad->beta2 < 1.0f,
             "adamw betas must lie in [0, 1); check --adam-beta1 and --adam-beta2");
    if (n == 0) return;
    TR_CHECK(master != NULL && m != NULL && v != NULL, "adamw needs master weights and both moments");
    kern_check_float_buf(grad, "adamw grad");
    const bool write_model = model.p != NULL && model.p != (void *)master;
    if (write_model) kern_check_float_buf(model, "adamw model");
    TR_CHECK(model.p != (void *)master || model.dt == TR_F32, "adamw model aliases master only when it is fp32");

    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr, eps = ad->eps;
    const double bc1 = 1.0 - pow(b1, (double)ad->step), bc2 = 1.0 - pow(b2, (double)ad->step);
    const double decay = 1.0 - lr * (double)ad->weight_decay;
    for (size_t i = 0; i < n; i++) {
        const double g = (double)ld(grad, i) * (double)ad->grad_scale;
        const float mi = (float)(b1 * (double)m[i] + (1.0 - b1) * g);
        const float vi = (float)(b2 * (double)v[i] + (1.0 - b2) * g * g);
        const double mhat = (double)mi / bc1, vhat = (double)vi / bc2;
        const float w = (float)((double)master[i] * decay - lr * mhat / (sqrt(vhat) + eps));
        m[i] = mi;
        v[i] = vi;
        master[i] = w;
        if (write_model) st(model, i, w);
    }
}
