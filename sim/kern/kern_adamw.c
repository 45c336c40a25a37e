/* Decoupled AdamW (torch.optim.AdamW / Megatron FusedAdam semantics) for the twin.
 * Each element is updated in double from its fp32 state and the new m, v and master are rounded
 * to fp32 once; the bias corrections are computed in double, as torch computes them in Python.
 * The fp32 master is a buffer of its own, or the bf16 model joined with 16-bit remainders
 * (twinrun/master_split.h); also kern_master_split, which makes such a pair from fp32 values. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"
#include "twinrun/master_split.h"

typedef struct adamw_args {
    kern_adamw_desc ad;    /* copied: the caller's descriptor may be gone when the body runs */
    float *master, *m, *v; /* [n] fp32 (master NULL: rem) */
    int16_t *rem;          /* [n] the master's lower halves, or NULL */
    tr_buf model, grad;    /* [n] */
    size_t n;
} adamw_args;

static void adamw_body(void *args) {
    const adamw_args *a = args;
    const kern_adamw_desc *ad = &a->ad;
    float *master = a->master, *m = a->m, *v = a->v;
    const tr_buf model = a->model, grad = a->grad;
    const bool write_model = model.p != NULL && model.p != (void *)master;
    uint16_t *hi = a->rem ? (uint16_t *)model.p : NULL; /* [n] bf16 bits, the master's upper halves */

    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr, eps = ad->eps;
    const double bc1 = 1.0 - pow(b1, (double)ad->step), bc2 = 1.0 - pow(b2, (double)ad->step);
    const double decay = 1.0 - lr * (double)ad->weight_decay;
    for (size_t i = 0; i < a->n; i++) {
        const double g = (double)ld(grad, i) * (double)ad->grad_scale;
        const float mi = (float)(b1 * (double)m[i] + (1.0 - b1) * g);
        const float vi = (float)(b2 * (double)v[i] + (1.0 - b2) * g * g);
        const double mhat = (double)mi / bc1, vhat = (double)vi / bc2;
        const float w0 = hi ? tr_master_join(hi[i], a->rem[i]) : master[i];
        const float w = (float)((double)w0 * decay - lr * mhat / (sqrt(vhat) + eps));
        m[i] = mi;
        v[i] = vi;
        if (hi) {
            tr_master_split(w, &hi[i], &a->rem[i]);
            continue;
        }
        master[i] = w;
        if (write_model) st(model, i, w);
    }
}

void kern_adamw_update(dev_stream *s, const kern_adamw_desc *ad, float *master, int16_t *master_rem, tr_buf model,
                       tr_buf grad, float *m, float *v, size_t n) {
    /* bytes: m, v read and written; the master's 4 (or its remainder's 2 and model's 2) likewise */
    const double master_bytes = master_rem ? 2.0 : 4.0;
    kern_cost(s, TWIN_K_ADAMW, 16.0 * n,
              (double)n * (8.0 + 2.0 * master_bytes + tr_dtype_size(grad.dt) + tr_dtype_size(model.dt)), TR_F32);
    kern_adamw_update_check(s, ad, master, master_rem, model, grad, m, v, n);
    kern_access(s, "kernel adamw",
                (const twin_access[]){{master, master ? n * sizeof *master : 0, true},
                                      {master_rem, master_rem ? n * sizeof *master_rem : 0, true},
                                      {m, n * sizeof *m, true},
                                      {v, n * sizeof *v, true},
                                      {model.p, kern_bytes(model, n), true},
                                      {grad.p, kern_bytes(grad, n), false}},
                6);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    adamw_args a = {*ad, master, m, v, master_rem, model, grad, n};
    kern_submit(s, adamw_body, &a, sizeof a);
}

typedef struct split_args {
    uint16_t *hi;   /* [n] bf16 bits */
    int16_t *rem;   /* [n] or NULL */
    const float *w; /* [n] */
    size_t n;
} split_args;

static void split_body(void *args) {
    const split_args *a = args;
    for (size_t i = 0; i < a->n; i++) {
        int16_t r;
        tr_master_split(a->w[i], &a->hi[i], &r);
        if (a->rem) a->rem[i] = r;
    }
}

void kern_master_split(dev_stream *s, tr_buf model, int16_t *rem, const float *w, size_t n) {
    kern_cost(s, TWIN_K_CAST, 4.0 * n, (double)n * (rem ? 8.0 : 6.0), TR_F32);
    kern_master_split_check(s, model, rem, w, n);
    kern_access(s, "kernel master_split",
                (const twin_access[]){{model.p, kern_bytes(model, n), true},
                                      {rem, rem ? n * sizeof *rem : 0, true},
                                      {w, n * sizeof *w, false}},
                3);
    if (kern_shape_only(s) || n == 0) return;
    split_args a = {(uint16_t *)model.p, rem, w, n};
    kern_submit(s, split_body, &a, sizeof a);
}
