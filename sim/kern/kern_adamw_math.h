/* One AdamW element as the twin computes it, for every twin kernel that applies the update
 * (kern_adamw.c, and kern_embedding_adamw.c's lookup of a pending one): the same operations in the
 * same order, so both give the same bits. In double from the fp32 state; m, v and the master rounded
 * to fp32 once; the bias corrections in double, divided by, as torch computes them in Python. */
#ifndef TWINRUN_SIM_KERN_KERN_ADAMW_MATH_H
#define TWINRUN_SIM_KERN_KERN_ADAMW_MATH_H

#include <math.h>

#include "twinrun/kern.h"

typedef struct twin_adamw_consts {
    double b1, b2, lr, eps, bc1, bc2, decay, grad_scale;
} twin_adamw_consts;

static inline twin_adamw_consts twin_adamw_consts_of(const kern_adamw_desc *ad) {
    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr;
    return (twin_adamw_consts){b1,
                               b2,
                               lr,
                               ad->eps,
                               1.0 - pow(b1, (double)ad->step),
                               1.0 - pow(b2, (double)ad->step),
                               1.0 - lr * (double)ad->weight_decay,
                               ad->grad_scale};
}

/* The updated master of an element whose master is w0, gradient g (as stored) and moments *m, *v
 * (updated in place). */
static inline float twin_adamw_element(const twin_adamw_consts *k, float g32, float *m, float *v, float w0) {
    const double g = (double)g32 * k->grad_scale;
    const float mi = (float)(k->b1 * (double)*m + (1.0 - k->b1) * g);
    const float vi = (float)(k->b2 * (double)*v + (1.0 - k->b2) * g * g);
    const double mhat = (double)mi / k->bc1, vhat = (double)vi / k->bc2;
    *m = mi;
    *v = vi;
    return (float)((double)w0 * k->decay - k->lr * mhat / (sqrt(vhat) + k->eps));
}

#endif
