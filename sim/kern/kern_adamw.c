/* Decoupled AdamW (torch.optim.AdamW / Megatron FusedAdam semantics) for the twin.
 * Each element is updated in double from its fp32 state and the new m, v and master are rounded
 * to fp32 once; the bias corrections are computed in double, as torch computes them in Python. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

typedef struct adamw_args {
    kern_adamw_desc ad;    /* copied: the caller's descriptor may be gone when the body runs */
    float *master, *m, *v; /* [n] fp32 */
    tr_buf model, grad;    /* [n] */
    size_t n;
} adamw_args;

static void adamw_body(void *args) {
    const adamw_args *a = args;
    const kern_adamw_desc *ad = &a->ad;
    float *master = a->master, *m = a->m, *v = a->v;
    const tr_buf model = a->model, grad = a->grad;
    const bool write_model = model.p != NULL && model.p != (void *)master;

    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr, eps = ad->eps;
    const double bc1 = 1.0 - pow(b1, (double)ad->step), bc2 = 1.0 - pow(b2, (double)ad->step);
    const double decay = 1.0 - lr * (double)ad->weight_decay;
    for (size_t i = 0; i < a->n; i++) {
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

void kern_adamw_update(dev_stream *s, const kern_adamw_desc *ad, float *master, tr_buf model, tr_buf grad, float *m,
                       float *v, size_t n) {
    kern_cost(s, TWIN_K_ADAMW, 16.0 * n, (double)n * (16.0 + tr_dtype_size(grad.dt) + tr_dtype_size(model.dt)), TR_F32);
    kern_adamw_update_check(s, ad, master, model, grad, m, v, n);
    kern_access(s, "kernel adamw",
                (const twin_access[]){{master, n * sizeof *master, true},
                                      {m, n * sizeof *m, true},
                                      {v, n * sizeof *v, true},
                                      {model.p, kern_bytes(model, n), true},
                                      {grad.p, kern_bytes(grad, n), false}},
                5);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    adamw_args a = {*ad, master, m, v, model, grad, n};
    kern_submit(s, adamw_body, &a, sizeof a);
}
