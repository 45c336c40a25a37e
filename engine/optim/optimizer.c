#include "optim/optimizer.h"

#include <math.h>
#include <stdlib.h>

#include "twinrun/err.h"
#include "twinrun/kern.h"

void optim_shard_of(const tr_config *cfg, const tr_grid *grid, int *shards, int *shard) {
    /* gradients reduce over data x context parallelism (Megatron's DP group with CP) */
    const int dp = grid ? grid->size[TR_AXIS_DP] * grid->size[TR_AXIS_CP] : 1;
    *shards = cfg->use_distributed_optimizer && dp > 1 ? dp : 1;
    *shard =
        *shards > 1 ? grid->coord[TR_AXIS_DP] * grid->size[TR_AXIS_CP] + grid->coord[TR_AXIS_CP] : 0; /* in dp_cp */
}

tr_optimizer *optim_create(llama_model *model, const tr_config *cfg, const tr_grid *grid, char *err, size_t errlen) {
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
    o->decoupled_lr = -1.0;
    int dp, pos;
    optim_shard_of(cfg, grid, &dp, &pos);
    o->distributed = dp > 1;
    if (o->distributed) {
        if (model->total_alloc % (size_t)dp) {
            tr_errf(err, errlen, "parameter buffer of %zu elements is not padded to DP %d", model->total_alloc, dp);
            free(o);
            return NULL;
        }
        o->shard_len = model->total_alloc / (size_t)dp;
        o->shard_begin = (size_t)pos * o->shard_len;
    } else {
        o->shard_begin = 0;
        o->shard_len = model->total;
    }
    /* a sharded master (bf16 with the distributed optimizer) must be exactly the shard this rank updates */
    if (llama_master_sharded(model) &&
        (!o->distributed || model->master_begin != o->shard_begin || model->master_len != o->shard_len)) {
        tr_errf(err, errlen,
                "the model keeps master weights [%zu, +%zu) but the optimizer updates [%zu, +%zu): build the model "
                "with the optimizer's shard (llama_layout.opt_shards, opt_shard)",
                model->master_begin, model->master_len, o->shard_begin, o->shard_len);
        free(o);
        return NULL;
    }
    size_t bytes = o->shard_len * sizeof(float);
    const size_t used0 = dev_mem_used(model->dev);
    const dev_mem_tag was = dev_mem_tag_set(model->dev, DEV_MEM_OPTIMIZER);
    o->m = dev_alloc(model->dev, bytes ? bytes : 4, "optimizer: first moment");                /* [shard_len] fp32 */
    o->v = o->m ? dev_alloc(model->dev, bytes ? bytes : 4, "optimizer: second moment") : NULL; /* [shard_len] */
    dev_mem_tag_set(model->dev, was);
    o->state_bytes = dev_mem_used(model->dev) - used0;
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

/* The gradients of this rank's shard, from its start: [shard_len] grad_dt. */
static tr_buf shard_grads(const tr_optimizer *o, const llama_model *model) {
    return tr_buf_at(tr_buf_make(model->grads, model->dims.grad_dt), o->shard_begin);
}

void optim_reduce_grads(tr_optimizer *o, llama_model *model, const tr_groups *gr, float scale) {
    tr_buf g = tr_buf_make(model->grads, model->dims.grad_dt);
    if (o->distributed) {
        /* in place, as Megatron does: the shard's reduced gradients land in the shard's own region of
         * the gradient buffer (NCCL's in-place reduce-scatter, recv = send + rank * count), so no second
         * gradient buffer exists; the rest of the buffer keeps this rank's unreduced gradients, which
         * nothing reads before the next step zeroes them */
        const tr_buf mine = shard_grads(o, model);
        coll_reduce_scatter(gr->dp_cp, model->stream, model->grads, mine.p, o->shard_len, g.dt, COLL_SUM);
        if (scale != 1.0f) kern_scale(model->stream, mine, scale, o->shard_len);
        return;
    }
    if (gr && coll_comm_size(gr->dp_cp) > 1)
        coll_all_reduce(gr->dp_cp, model->stream, model->grads, model->grads, model->total, g.dt, COLL_SUM);
    if (scale != 1.0f) kern_scale(model->stream, g, scale, model->total);
}

/* The parts of this rank's shard [lo, hi) that each parameter covers, relative to lo, with the
 * parameter's weight decay; TP-replicated parameters left out when !replicated; of the parameters of
 * `which` group. Returns the count; *out (freed by the caller) has one range per parameter at most. */
typedef enum ranges_of { RANGES_ALL, RANGES_MAIN, RANGES_DECOUPLED } ranges_of;

static int shard_ranges(const tr_optimizer *o, const llama_model *model, bool replicated, ranges_of which,
                        kern_range **out) {
    kern_range *r = malloc(sizeof *r * (size_t)(model->nparams > 0 ? model->nparams : 1));
    TR_CHECK(r != NULL, "out of host memory for the optimizer's parameter ranges");
    const size_t lo = o->shard_begin, hi = o->shard_begin + o->shard_len;
    int n = 0;
    for (int i = 0; i < model->nparams; i++) {
        const llama_param *p = &model->params_tab[i];
        if (p->place.tp_replicated && !replicated) continue;
        const bool dec = i == model->p_embed || i == model->p_head; /* --decoupled-lr's parameters */
        if ((which == RANGES_MAIN && dec) || (which == RANGES_DECOUPLED && !dec)) continue;
        size_t b = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (b >= e) continue;
        r[n++] = (kern_range){b - lo, e - lo, p->no_weight_decay ? 0.0f : (float)o->weight_decay};
    }
    *out = r;
    return n;
}

double optim_grad_norm(tr_optimizer *o, llama_model *model, const tr_grid *grid, const tr_groups *gr) {
    dev_memset_zero(model->stream, o->norm_accum, sizeof(float));
    const bool tp_leader = !grid || grid->coord[TR_AXIS_TP] == 0;
    const tr_buf g = shard_grads(o, model); /* indexed from the shard's start */
    kern_range *ranges;
    const int nr =
        shard_ranges(o, model, tp_leader, RANGES_ALL, &ranges); /* replicated ones counted once, on TP rank 0 */
    kern_sum_squares_ranges(model->stream, o->norm_accum, g, ranges, nr);
    free(ranges);
    if (gr) {
        /* TP and PP ranks hold different parameters; distributed DP ranks different shards */
        coll_all_reduce(gr->tp, model->stream, o->norm_accum, o->norm_accum, 1, TR_F32, COLL_SUM);
        coll_all_reduce(gr->pp, model->stream, o->norm_accum, o->norm_accum, 1, TR_F32, COLL_SUM);
        if (o->distributed)
            coll_all_reduce(gr->dp_cp, model->stream, o->norm_accum, o->norm_accum, 1, TR_F32, COLL_SUM);
    }
    float sumsq = 0;
    dev_copy_d2h(model->stream, &sumsq, o->norm_accum, sizeof sumsq);
    dev_stream_sync(model->stream);
    return sqrt((double)sumsq);
}

void optim_set_decoupled_lr(tr_optimizer *o, double lr) { o->decoupled_lr = lr; }

void optim_step(tr_optimizer *o, llama_model *model, const tr_groups *gr, double lr, double grad_norm) {
    o->step++;
    double coeff = 1.0;
    if (o->clip_grad > 0) {
        double c = o->clip_grad / (grad_norm + 1.0e-6);
        if (c < 1.0) coeff = c;
    }
    const size_t lo = o->shard_begin;
    /* every parameter of the shard in one multi-tensor update, each with its weight decay; with
     * --decoupled-lr the input embedding and output layer are a second update at their own lr */
    const tr_buf g = shard_grads(o, model);
    float *master = model->master + (lo - model->master_begin); /* the shard's, whole or sharded master */
    const bool decoupled = o->decoupled_lr >= 0;
    for (int group = 0; group < (decoupled ? 2 : 1); group++) {
        kern_adamw_desc ad = {
            .lr = (float)(group == 1 ? o->decoupled_lr : lr),
            .beta1 = (float)o->beta1,
            .beta2 = (float)o->beta2,
            .eps = (float)o->eps,
            .grad_scale = (float)coeff,
            .step = o->step,
        };
        kern_range *ranges;
        const int nr = shard_ranges(o, model, true,
                                    !decoupled ? RANGES_ALL
                                    : group    ? RANGES_DECOUPLED
                                               : RANGES_MAIN,
                                    &ranges);
        kern_adamw_update_ranges(model->stream, &ad, ranges, nr, master,
                                 tr_buf_at(tr_buf_make(model->params, model->dims.act_dt), lo), g, o->m, o->v);
        free(ranges);
    }
    if (o->distributed) {
        /* every DP rank gets every shard's update in the compute type (in fp32 the params are the
         * master); the fp32 master of a bf16 model stays sharded */
        tr_dtype dt = model->dims.act_dt;
        size_t es = tr_dtype_size(dt);
        coll_all_gather(gr->dp_cp, model->stream, (char *)model->params + lo * es, model->params, o->shard_len, dt);
    }
}
