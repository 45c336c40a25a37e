#include "optim/optimizer.h"

#include <math.h>
#include <stdlib.h>

#include "twinrun/err.h"
#include "twinrun/kern.h"

tr_optimizer *optim_create(llama_model *model, const tr_config *cfg, char *err, size_t errlen) {
    tr_optimizer *o = calloc(1, sizeof *o);
    if (!o) {
        tr_errf(err, errlen, "out of host memory");
        return NULL;
    }
    o->beta1 = cfg->adam_beta1;
    o->beta2 = cfg->adam_beta2;
    o->eps = cfg->adam_eps;
    o->weight_decay = cfg->weight_decay;
    o->clip_grad = cfg->clip_grad;
    size_t bytes = model->total * sizeof(float);
    o->m = dev_alloc(model->dev, bytes, "optimizer: first moment");
    o->v = o->m ? dev_alloc(model->dev, bytes, "optimizer: second moment") : NULL;
    o->norm_accum = o->v ? dev_alloc(model->dev, sizeof(float), "optimizer: grad norm") : NULL;
    if (!o->norm_accum) {
        tr_errf(err, errlen, "%s; add devices (more DP ranks with --use-distributed-optimizer) or use a smaller model",
                dev_last_error(model->dev));
        optim_destroy(o, model);
        return NULL;
    }
    dev_memset_zero(model->stream, o->m, bytes);
    dev_memset_zero(model->stream, o->v, bytes);
    return o;
}

void optim_destroy(tr_optimizer *o, llama_model *model) {
    if (!o) return;
    dev_free(model->dev, o->m);
    dev_free(model->dev, o->v);
    dev_free(model->dev, o->norm_accum);
    free(o);
}

double optim_grad_norm(tr_optimizer *o, llama_model *model) {
    dev_memset_zero(model->stream, o->norm_accum, sizeof(float));
    kern_sum_squares(model->stream, o->norm_accum, tr_buf_make(model->grads, model->dims.grad_dt), model->total);
    float sumsq = 0;
    dev_copy_d2h(model->stream, &sumsq, o->norm_accum, sizeof sumsq);
    dev_stream_sync(model->stream);
    return sqrt((double)sumsq);
}

void optim_step(tr_optimizer *o, llama_model *model, double lr, double grad_norm) {
    o->step++;
    double coeff = 1.0;
    if (o->clip_grad > 0) {
        double c = o->clip_grad / (grad_norm + 1.0e-6);
        if (c < 1.0) coeff = c;
    }
    for (int i = 0; i < model->nparams; i++) {
        const llama_param *p = &model->params_tab[i];
        kern_adamw_desc ad = {
            .lr = (float)lr,
            .beta1 = (float)o->beta1,
            .beta2 = (float)o->beta2,
            .eps = (float)o->eps,
            .weight_decay = p->no_weight_decay ? 0.0f : (float)o->weight_decay,
            .grad_scale = (float)coeff,
            .step = o->step,
        };
        tr_buf model_copy = tr_buf_at(tr_buf_make(model->params, model->dims.act_dt), p->offset);
        tr_buf g = tr_buf_at(tr_buf_make(model->grads, model->dims.grad_dt), p->offset);
        kern_adamw_update(model->stream, &ad, model->master + p->offset, model_copy, g, o->m + p->offset,
                          o->v + p->offset, p->numel);
    }
}
