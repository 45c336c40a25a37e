/* AdamW with Megatron's rules: no weight decay on 1-D parameters, global-norm clipping
 * (coefficient max_norm / (norm + 1e-6) when below 1), fp32 state and master weights. */
#ifndef TR_OPTIM_OPTIMIZER_H
#define TR_OPTIM_OPTIMIZER_H

#include <stdbool.h>

#include "model/llama.h"
#include "twinrun/config.h"

typedef struct tr_optimizer {
    float *m, *v;      /* [total] fp32 moments */
    float *norm_accum; /* [1] fp32 on the device */
    int step;          /* updates taken */
    double beta1, beta2, eps, weight_decay, clip_grad;
} tr_optimizer;

tr_optimizer *optim_create(llama_model *model, const tr_config *cfg, char *err, size_t errlen);
void optim_destroy(tr_optimizer *o, llama_model *model);

/* L2 norm of all gradients (before clipping). NaN/Inf in any gradient makes it non-finite. */
double optim_grad_norm(tr_optimizer *o, llama_model *model);

/* One AdamW update at learning rate lr, clipping with the norm optim_grad_norm returned. */
void optim_step(tr_optimizer *o, llama_model *model, double lr, double grad_norm);

#endif
