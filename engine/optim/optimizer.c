#include "optim/optimizer.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"
#include "twinrun/kern.h"

void optim_shard_of(const tr_config *cfg, const tr_grid *grid, int *shards, int *shard) {
    /* gradients reduce over data x context parallelism (Megatron's DP group with CP) */
    const int dp = grid ? grid->size[TR_AXIS_DP] * grid->size[TR_AXIS_CP] : 1;
    *shards = cfg->use_distributed_optimizer && dp > 1 ? dp : 1;
    *shard =
        *shards > 1 ? grid->coord[TR_AXIS_DP] * grid->size[TR_AXIS_CP] + grid->coord[TR_AXIS_CP] : 0; /* in dp_cp */
}

/* The chunks of the step ahead: the ends of what the forward pass asks for (llama_forward.c's
 * params_needed: the embedding, then each layer in the pieces of llama_layer_need_ends), ascending, so
 * the first layer's attention starts once its input projections are updated, while the rest of its
 * update runs beside it. Fewer than two: nothing to overlap, no stream. */
static void plan_ahead(tr_optimizer *o, llama_model *m) {
    const char *env = getenv("TWINRUN_OPTIM_AHEAD");
    if (env && strcmp(env, "0") == 0) return;
    size_t *end = calloc((size_t)m->dims.nl * LLAMA_LAYER_NEEDS + 3, sizeof *end);
    TR_CHECK(end != NULL, "out of host memory for the optimizer's chunks");
    int n = 0;
#define ADD_END(x)                                                                                                     \
    do {                                                                                                               \
        const size_t x_ = (x);                                                                                         \
        if (x_ > (n ? end[n - 1] : 0) && x_ < m->total_alloc) end[n++] = x_;                                           \
    } while (0)
    if (m->p_embed >= 0) ADD_END(m->params_tab[m->p_embed].offset + m->params_tab[m->p_embed].numel);
    for (int l = 0; l < m->dims.nl; l++) {
        size_t need[LLAMA_LAYER_NEEDS];
        llama_layer_need_ends(m, l, need);
        for (int k = 0; k < LLAMA_LAYER_NEEDS; k++) ADD_END(need[k]);
    }
    if (m->p_lnf_w >= 0) ADD_END(m->params_tab[m->p_lnf_w].offset);
#undef ADD_END
    end[n++] = m->total_alloc;
    if (n < 2) {
        free(end);
        return;
    }
    o->nchunks = n, o->chunk_end = end, o->chunk_waited = n;
    o->ahead = dev_stream_create(m->dev);
    dev_stream_set_name(o->ahead, "optimizer"); /* the twin's reports name it */
    dev_stream_set_background(o->ahead, false); /* yields to the forward pass it runs beside */
    if (!o->stepped) o->stepped = dev_event_create(m->dev);
    o->chunk_done = calloc((size_t)n, sizeof *o->chunk_done);
    TR_CHECK(o->chunk_done != NULL, "out of host memory for the optimizer's events");
    for (int c = 0; c < n; c++) o->chunk_done[c] = dev_event_create(m->dev);
}

/* The forward pass reads the parameters below `end` next: the model's stream waits for the chunks of the
 * step ahead that hold them. */
static void on_chunks_needed(void *arg, size_t end) {
    tr_optimizer *o = arg;
    llama_model *m = o->armed;
    while (o->chunk_waited < o->nchunks && (o->chunk_waited ? o->chunk_end[o->chunk_waited - 1] : 0) < end)
        dev_stream_wait_event(m->stream, o->chunk_done[o->chunk_waited++]);
    if (o->chunk_waited == o->nchunks) {
        m->params_needed = NULL, m->params_needed_arg = NULL;
        dev_stream_set_background(o->ahead, false); /* the GEMMs from here on take the whole device */
    }
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
    o->nseg = o->distributed ? model->nbuckets : 1;
    o->segs = calloc((size_t)(o->nseg > 0 ? o->nseg : 1), sizeof *o->segs);
    if (!o->segs) {
        tr_errf(err, errlen, "out of host memory");
        free(o);
        return NULL;
    }
    if (o->distributed) {
        for (int k = 0; k < model->nbuckets; k++)
            if ((model->bucket_begin[k + 1] - model->bucket_begin[k]) % (size_t)dp) {
                tr_errf(err, errlen, "gradient bucket %d of the parameter buffer is not padded to DP %d", k, dp);
                optim_destroy(o, model);
                return NULL;
            }
        for (int k = 0; k < o->nseg; k++) o->segs[k] = llama_shard_seg(model, dp, pos, k);
        o->shard_len = model->total_alloc / (size_t)dp;
    } else {
        o->segs[0] = (llama_seg){0, model->total, 0};
        o->shard_len = model->total;
    }
    /* a sharded master (bf16 with the distributed optimizer) must be exactly the shard this rank updates */
    if (llama_master_sharded(model) &&
        (!o->distributed || model->layout.opt_shard != pos || model->master_len != o->shard_len)) {
        tr_errf(err, errlen,
                "the model keeps the master weights of shard %d (%zu elements) but the optimizer updates shard %d "
                "(%zu elements): build the model with the optimizer's shard (llama_layout.opt_shards, opt_shard)",
                model->layout.opt_shard, model->master_len, o->distributed ? pos : 0, o->shard_len);
        optim_destroy(o, model);
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
    if (cfg->overlap_grad_reduce && grid && grid->size[TR_AXIS_DP] * grid->size[TR_AXIS_CP] > 1) {
        o->comm = dev_stream_create(model->dev);
        dev_stream_set_name(o->comm, "dp_grads"); /* the twin's reports name it */
        o->ready = dev_event_create(model->dev);
        o->done = dev_event_create(model->dev);
        /* Megatron's rule: the parameter gather overlaps only with the distributed optimizer's buckets */
        if (cfg->overlap_param_gather && o->distributed) {
            o->overlap_gather = true;
            o->stepped = dev_event_create(model->dev);
            o->gathered = calloc((size_t)model->nbuckets, sizeof *o->gathered);
            TR_CHECK(o->gathered != NULL, "out of host memory for the parameter-gather events");
            for (int k = 0; k < model->nbuckets; k++) o->gathered[k] = dev_event_create(model->dev);
        }
    }
    if (!o->distributed) plan_ahead(o, model);
    /* the grad norm's sums during the backward pass need gradients final when written: no TP reduction of
     * the norms' (sequence parallelism, --qk-layernorm) and no DP or CP reduction after the backward */
    const char *norm_env = getenv("TWINRUN_NORM_AHEAD");
    const bool one_holder =
        !grid || (grid->size[TR_AXIS_TP] == 1 && grid->size[TR_AXIS_DP] * grid->size[TR_AXIS_CP] == 1);
    if (o->ahead && !o->comm && one_holder && !(norm_env && strcmp(norm_env, "0") == 0)) {
        o->norm_ahead = true;
        o->norm_ready = dev_event_create(model->dev);
        o->norm_summed = dev_event_create(model->dev);
    }
    /* A test hook, not a knob: the bug the twin's stream-race check exists to catch (docs/twin.md). */
    const char *skip = getenv("TWINRUN_TEST_SKIP_WAIT");
    o->test_skip_wait = o->comm && skip && strcmp(skip, "grad-reduce") == 0;
    o->armed = model;
    o->launched_from = model->nbuckets;
    o->gather_waited = model->nbuckets;
    return o;
}

void optim_destroy(tr_optimizer *o, llama_model *model) {
    if (!o) return;
    if (o->comm) dev_stream_sync(o->comm);
    if (o->ahead) dev_stream_sync(o->ahead);
    if (model->params_needed_arg == o) model->params_needed = NULL, model->params_needed_arg = NULL;
    if (o->gathered)
        for (int k = 0; k < model->nbuckets; k++) dev_event_destroy(o->gathered[k]);
    free(o->gathered);
    for (int c = 0; c < o->nchunks; c++) dev_event_destroy(o->chunk_done[c]);
    free(o->chunk_done);
    free(o->chunk_end);
    dev_stream_destroy(o->ahead);
    dev_event_destroy(o->stepped);
    dev_event_destroy(o->norm_ready);
    dev_event_destroy(o->norm_summed);
    dev_event_destroy(o->ready);
    dev_event_destroy(o->done);
    dev_stream_destroy(o->comm);
    dev_free(model->dev, o->m);
    dev_free(model->dev, o->v);
    dev_free(model->dev, o->norm_accum);
    free(o->segs);
    free(o);
}

llama_seg optim_seg_of(const tr_optimizer *o, const llama_model *model, size_t e) {
    return o->distributed ? o->segs[llama_bucket_of(model, e)] : o->segs[0];
}

/* Element `e` of a device buffer of type dt. */
static void *elem(void *base, tr_dtype dt, size_t e) { return (char *)base + e * tr_dtype_size(dt); }

/* Bucket k's reduction over data parallelism on stream s: reduce-scatter into this rank's segment of it,
 * or all-reduce of its parameters. */
static void reduce_bucket(tr_optimizer *o, llama_model *model, const tr_groups *gr, int k, dev_stream *s) {
    const tr_dtype dt = model->dims.grad_dt;
    const size_t b = model->bucket_begin[k];
    if (o->distributed) {
        /* in place, as Megatron does: the shard's reduced gradients land in the shard's own region of
         * the gradient buffer (NCCL's in-place reduce-scatter, recv = send + rank * count), so no second
         * gradient buffer exists; the rest of the bucket keeps this rank's unreduced gradients, which
         * nothing reads before the next step zeroes them */
        coll_reduce_scatter(gr->dp_cp, s, elem(model->grads, dt, b), elem(model->grads, dt, o->segs[k].begin),
                            o->segs[k].len, dt, COLL_SUM);
        return;
    }
    const size_t e = model->bucket_begin[k + 1] < model->total ? model->bucket_begin[k + 1] : model->total;
    if (gr && coll_comm_size(gr->dp_cp) > 1 && e > b)
        coll_all_reduce(gr->dp_cp, s, elem(model->grads, dt, b), elem(model->grads, dt, b), e - b, dt, COLL_SUM);
}

/* Starts the reductions of the buckets not started yet that begin at or above `from`, last first (the
 * order the backward pass finishes them in, the same on every rank). */
static void launch_buckets_from(tr_optimizer *o, llama_model *model, const tr_groups *gr, size_t from) {
    while (o->launched_from > 0 && model->bucket_begin[o->launched_from - 1] >= from) {
        const int k = --o->launched_from;
        dev_stream *s = model->stream;
        if (o->comm) { /* after everything the model's stream has queued: the bucket's last gradient */
            dev_event_record(o->ready, model->stream);
            dev_stream_wait_event(o->comm, o->ready);
            s = o->comm;
        }
        reduce_bucket(o, model, gr, k, s);
    }
}

/* The parts of segment sg of this rank's shard that each parameter covers, relative to sg.begin, with the
 * parameter's weight decay; TP-replicated parameters left out when !replicated; of the parameters of
 * `which` group. Returns the count; *out (freed by the caller) has one range per parameter at most. */
typedef enum ranges_of { RANGES_ALL, RANGES_MAIN, RANGES_DECOUPLED } ranges_of;

static int seg_ranges_in(const llama_model *model, llama_seg sg, size_t wlo, size_t whi, double weight_decay,
                         bool replicated, ranges_of which, kern_range **out) {
    kern_range *r = malloc(sizeof *r * (size_t)(model->nparams > 0 ? model->nparams : 1));
    TR_CHECK(r != NULL, "out of host memory for the optimizer's parameter ranges");
    const size_t lo = sg.begin, hi = sg.begin + sg.len;
    int n = 0;
    for (int i = 0; i < model->nparams; i++) {
        const llama_param *p = &model->params_tab[i];
        if (p->place.tp_replicated && !replicated) continue;
        const bool dec = i == model->p_embed || i == model->p_head; /* --decoupled-lr's parameters */
        if ((which == RANGES_MAIN && dec) || (which == RANGES_DECOUPLED && !dec)) continue;
        size_t b = p->offset > lo ? p->offset : lo, e = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (b < wlo) b = wlo;
        if (e > whi) e = whi;
        if (b >= e) continue;
        r[n++] = (kern_range){b - lo, e - lo, p->no_weight_decay ? 0.0f : (float)weight_decay};
    }
    *out = r;
    return n;
}

/* The grad norm's squares of the gradients at offsets [wlo, whi) this rank counts (TP-replicated ones on
 * TP rank 0 only), into norm_accum on s: the segments last first, as kern_sum_squares_ranges takes each
 * segment's ranges, so consecutive windows summed highest first give the bits of one window over all. */
static void sum_squares_window(tr_optimizer *o, llama_model *model, dev_stream *s, size_t wlo, size_t whi,
                               bool tp_leader) {
    const tr_buf grads = tr_buf_make(model->grads, model->dims.grad_dt);
    for (int k = o->nseg - 1; k >= 0; k--) {
        kern_range *ranges;
        const int nr = seg_ranges_in(model, o->segs[k], wlo, whi, o->weight_decay, tp_leader, RANGES_ALL, &ranges);
        kern_sum_squares_ranges(s, o->norm_accum, tr_buf_at(grads, o->segs[k].begin), ranges, nr);
        free(ranges);
    }
}

/* The norm's sums of what the backward pass wrote at and above `watermark` and not summed yet, on the
 * step-ahead stream, beside the rest of the backward pass (at its priority, below the model's stream). */
static void norm_ahead_to(tr_optimizer *o, llama_model *m, size_t watermark) {
    if (watermark >= o->norm_from) return;
    dev_event_record(o->norm_ready, m->stream);
    dev_stream_wait_event(o->ahead, o->norm_ready);
    sum_squares_window(o, m, o->ahead, watermark, o->norm_from, true);
    o->norm_from = watermark;
}

/* The backward pass finished every gradient at or above `watermark` (llama_grads_done_fn). */
static void on_grads_done(void *arg, size_t watermark) {
    tr_optimizer *o = arg;
    llama_model *m = o->armed;
    if (o->comm && watermark < o->tp_from) {
        llama_sp_reduce_norm_grads_range(m, watermark, o->tp_from); /* TP first, then DP: the order without overlap */
        o->tp_from = watermark;
        launch_buckets_from(o, m, o->armed_groups, watermark);
    }
    if (o->norm_armed) norm_ahead_to(o, m, watermark);
}

/* The forward pass reads the parameters below `end` next (llama_params_needed_fn): the model's stream
 * waits for the all-gathers of the buckets that hold them. */
static void on_params_needed(void *arg, size_t end) {
    tr_optimizer *o = arg;
    llama_model *m = o->armed;
    while (o->gather_waited < m->nbuckets && m->bucket_begin[o->gather_waited] < end)
        dev_stream_wait_event(m->stream, o->gathered[o->gather_waited++]);
    if (o->gather_waited == m->nbuckets) m->params_needed = NULL, m->params_needed_arg = NULL;
}

void optim_arm_overlap(tr_optimizer *o, llama_model *model, const tr_groups *gr) {
    if (!o || (!o->comm && !o->norm_ahead)) return;
    if (o->norm_ahead) { /* the last step's norm was read (optim_grad_norm synchronised): the sum restarts */
        o->norm_armed = o->norm_valid = true, o->norm_from = model->total;
        dev_memset_zero(o->ahead, o->norm_accum, sizeof(float));
    }
    o->armed = model, o->armed_groups = gr, o->tp_from = model->total;
    model->grads_done = on_grads_done, model->grads_done_arg = o;
}

size_t optim_disarm_overlap(tr_optimizer *o, llama_model *model) {
    if (!o || model->grads_done != on_grads_done) return model->total;
    model->grads_done = NULL, model->grads_done_arg = NULL;
    if (o->norm_armed) { /* whatever the model's stream does next to the gradients (the norm's read, a
                          * scale, a test's zeroing) comes after the sums have read them */
        dev_event_record(o->norm_summed, o->ahead);
        dev_stream_wait_event(model->stream, o->norm_summed);
    }
    return o->tp_from;
}

void optim_reduce_grads(tr_optimizer *o, llama_model *model, const tr_groups *gr, float scale) {
    launch_buckets_from(o, model, gr, 0);
    o->launched_from = model->nbuckets; /* the next step starts again */
    if (o->comm) {                      /* the model's stream reads the reduced gradients next */
        dev_event_record(o->done, o->comm);
        if (!o->test_skip_wait) dev_stream_wait_event(model->stream, o->done);
    }
    if (scale == 1.0f) return;
    o->norm_valid = false; /* the backward pass's sums (done: optim_disarm_overlap) are of the gradients before this */
    const tr_buf g = tr_buf_make(model->grads, model->dims.grad_dt);
    for (int k = 0; k < o->nseg; k++) kern_scale(model->stream, tr_buf_at(g, o->segs[k].begin), scale, o->segs[k].len);
}

double optim_grad_norm(tr_optimizer *o, llama_model *model, const tr_grid *grid, const tr_groups *gr) {
    const bool tp_leader = !grid || grid->coord[TR_AXIS_TP] == 0; /* replicated parameters counted once */
    /* the backward pass summed from norm_from up on `ahead`, and the model's stream waited for them
     * (optim_disarm_overlap): what is left continues the sum here, in the same order */
    if (o->norm_armed && o->norm_valid) {
        sum_squares_window(o, model, model->stream, 0, o->norm_from, tp_leader);
    } else { /* no sums ahead, or the gradients changed since (a scale): all of them, here */
        dev_memset_zero(model->stream, o->norm_accum, sizeof(float));
        sum_squares_window(o, model, model->stream, 0, SIZE_MAX, tp_leader);
    }
    o->norm_armed = false;
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
    /* every parameter of each segment of the shard in one multi-tensor update, each with its weight
     * decay; with --decoupled-lr the input embedding and output layer are a second update at their lr */
    const tr_buf grads = tr_buf_make(model->grads, model->dims.grad_dt);
    const tr_buf params = tr_buf_make(model->params, model->dims.act_dt);
    const bool decoupled = o->decoupled_lr >= 0;
    dev_stream *s = model->stream;
    llama_fp8_cast_begin(model);    /* --fp8-param-gather: the scales the updated weights are cast with */
    if (o->ahead) {                 /* after the gradients and their norm: the step ahead of the next forward pass */
        llama_params_settle(model); /* the previous step's chunks, should no forward pass have waited */
        dev_event_record(o->stepped, model->stream);
        dev_stream_wait_event(o->ahead, o->stepped);
        s = o->ahead;
    }
    for (int c = 0; c < (o->ahead ? o->nchunks : 1); c++) {
        const size_t wlo = o->ahead && c > 0 ? o->chunk_end[c - 1] : 0, whi = o->ahead ? o->chunk_end[c] : SIZE_MAX;
        for (int group = 0; group < (decoupled ? 2 : 1); group++) {
            kern_adamw_desc ad = {
                .lr = (float)(group == 1 ? o->decoupled_lr : lr),
                .beta1 = (float)o->beta1,
                .beta2 = (float)o->beta2,
                .eps = (float)o->eps,
                .grad_scale = (float)coeff,
                .step = o->step,
            };
            for (int k = 0; k < o->nseg; k++) {
                const llama_seg sg = o->segs[k];
                kern_range *ranges;
                const int nr = seg_ranges_in(model, sg, wlo, whi, o->weight_decay, true,
                                             !decoupled ? RANGES_ALL
                                             : group    ? RANGES_DECOUPLED
                                                        : RANGES_MAIN,
                                             &ranges);
                /* the segment's master: whole or sharded, the same elements (fp32, or remainders) */
                const size_t mi = llama_master_index(model, sg.begin);
                if (nr > 0 || !o->ahead)
                    kern_adamw_update_ranges(s, &ad, ranges, nr, model->master ? model->master + mi : NULL,
                                             model->master_rem ? model->master_rem + mi : NULL,
                                             tr_buf_at(params, sg.begin), tr_buf_at(grads, sg.begin), o->m + sg.local,
                                             o->v + sg.local);
                free(ranges);
            }
        }
        if (!o->distributed) llama_fp8_cast_stored(model, s, wlo, whi); /* the chunk's FP8 weights */
        if (o->ahead) { /* the chunk's gradients are read: the next step's zeroing of them, here too */
            llama_zero_grad_runs(model, o->ahead, wlo, whi);
            dev_event_record(o->chunk_done[c], o->ahead);
        }
    }
    if (o->ahead) {
        model->grad_zeroed_ahead = true;
        o->chunk_waited = 0;
        model->params_needed = on_chunks_needed, model->params_needed_arg = o;
        dev_stream_set_background(o->ahead, true); /* the forward's GEMMs leave the update a share */
    }
    if (o->distributed) {
        /* every DP rank gets every shard's update in the compute type (in fp32 the params are the
         * master), bucket by bucket; the fp32 master of a bf16 model stays sharded. With
         * --overlap-param-gather on the buckets' stream, each bucket's end an event the next forward
         * pass waits for just before it reads that bucket (on_params_needed) */
        const tr_dtype dt = model->dims.act_dt;
        dev_stream *s = model->stream;
        for (int k = 0; k < o->nseg; k++) /* --fp8-param-gather: each shard casts its FP8 weights, gathered below */
            if (model->bucket_fp8[k])
                llama_fp8_cast_stored(model, s, o->segs[k].begin, o->segs[k].begin + o->segs[k].len);
        if (o->overlap_gather) {
            dev_event_record(o->stepped, model->stream);
            dev_stream_wait_event(o->comm, o->stepped);
            s = o->comm;
        }
        for (int k = 0; k < o->nseg; k++) {
            if (model->bucket_fp8[k]) /* FP8 weights: one byte an element */
                coll_all_gather(gr->dp_cp, s, llama_fp8_stored_at(model, o->segs[k].begin),
                                llama_fp8_stored_at(model, model->bucket_begin[k]), o->segs[k].len, TR_U8);
            else
                coll_all_gather(gr->dp_cp, s, elem(model->params, dt, o->segs[k].begin),
                                elem(model->params, dt, model->bucket_begin[k]), o->segs[k].len, dt);
            if (o->overlap_gather) dev_event_record(o->gathered[k], o->comm);
        }
        if (o->overlap_gather) {
            o->gather_waited = 0;
            model->params_needed = on_params_needed, model->params_needed_arg = o;
        }
    }
}

void optim_params_ready(tr_optimizer *o, llama_model *model) {
    if (o && o->overlap_gather && o->gather_waited < model->nbuckets) on_params_needed(o, model->total_alloc);
    if (o && o->ahead && o->chunk_waited < o->nchunks) on_chunks_needed(o, model->total_alloc);
}
