#include "train/step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

/* Host copies of the micro-batches a stage has in flight (1F1B keeps up to `slots`). */
typedef struct batches {
    int N, slots;
    int cp, cp_rank, B, T, Tfull;      /* context parallelism: this rank keeps T of each Tfull tokens */
    int32_t *ftokens, *flabels, *fpos; /* [B * Tfull] the whole micro-batch, when CP > 1 */
    float *fmask;
    int32_t *tokens, *labels, *pos; /* [slots, N] */
    float *mask;                    /* [slots, N] */
    float *losses, *dloss;          /* [N] */
} batches;

static int batches_init(batches *b, int N, int slots) {
    memset(b, 0, sizeof *b);
    b->N = N, b->slots = slots;
    size_t n = (size_t)N * (size_t)slots;
    b->tokens = malloc(n * 4), b->labels = malloc(n * 4), b->pos = malloc(n * 4), b->mask = malloc(n * 4);
    b->losses = malloc((size_t)N * 4), b->dloss = malloc((size_t)N * 4);
    return b->tokens && b->labels && b->pos && b->mask && b->losses && b->dloss ? 0 : -1;
}

static int batches_init_cp(batches *b, int cp, int cp_rank, int B, int T) {
    b->cp = cp, b->cp_rank = cp_rank, b->B = B, b->T = T, b->Tfull = T * cp;
    if (cp == 1) return 0;
    size_t n = (size_t)B * (size_t)b->Tfull;
    b->ftokens = malloc(n * 4), b->flabels = malloc(n * 4), b->fpos = malloc(n * 4), b->fmask = malloc(n * 4);
    return b->ftokens && b->flabels && b->fpos && b->fmask ? 0 : -1;
}

/* Idempotent: a step ended mid-way (run_state_free_host) may free them after the step already did. */
static void batches_free(batches *b) {
    free(b->tokens), free(b->labels), free(b->pos), free(b->mask), free(b->losses), free(b->dloss);
    free(b->ftokens), free(b->flabels), free(b->fpos), free(b->fmask);
    b->tokens = b->labels = b->pos = b->ftokens = b->flabels = b->fpos = NULL;
    b->mask = b->losses = b->dloss = b->fmask = NULL;
}

/* Reads micro-batch `micro` into slot arrays; with CP, keeps this rank's chunks of each sequence. */
static int fetch(batches *b, tr_batch_fn next, void *ctx, int micro, int32_t *tok, int32_t *lab, float *mask,
                 int32_t *pos, char *err, size_t errlen) {
    if (b->cp == 1) return next(ctx, micro, tok, lab, mask, pos, err, errlen);
    int rc = next(ctx, micro, b->ftokens, b->flabels, b->fmask, b->fpos, err, errlen);
    if (rc) return rc;
    for (int r = 0; r < b->B; r++)
        for (int j = 0; j < b->T; j++) {
            size_t src = (size_t)r * b->Tfull + (size_t)llama_cp_position(b->Tfull, b->cp, b->cp_rank, j);
            size_t dst = (size_t)r * b->T + (size_t)j;
            tok[dst] = b->ftokens[src], lab[dst] = b->flabels[src], mask[dst] = b->fmask[src], pos[dst] = b->fpos[src];
        }
    return 0;
}

typedef struct pipeline {
    llama_model *m;
    coll_comm *pp; /* NULL for one stage */
    int rank, size;
    size_t count; /* N * C activations between stages */
    tr_dtype dt;
} pipeline;

/* This rank's pipeline stage: its neighbours' group (NULL without one) and what moves between stages. */
static pipeline pipeline_of(llama_model *m, const tr_parallel *par) {
    const bool grouped = par && par->grid && par->groups;
    return (pipeline){m,
                      grouped ? par->groups->pp : NULL,
                      m->layout.pp_rank,
                      m->layout.pp,
                      (size_t)m->dims.Nl * m->dims.C,
                      m->dims.act_dt};
}

static void recv_forward(pipeline *p, int slot) {
    if (p->rank > 0) coll_recv(p->pp, p->m->stream, llama_stage_input(p->m, slot), p->count, p->dt, p->rank - 1);
}
static void send_forward(pipeline *p, int slot) {
    if (p->rank < p->size - 1)
        coll_send(p->pp, p->m->stream, llama_stage_output(p->m, slot), p->count, p->dt, p->rank + 1);
}
static void recv_backward(pipeline *p) {
    if (p->rank < p->size - 1) coll_recv(p->pp, p->m->stream, llama_stage_grad(p->m), p->count, p->dt, p->rank + 1);
}
static void send_backward(pipeline *p) {
    if (p->rank > 0) coll_send(p->pp, p->m->stream, llama_stage_grad(p->m), p->count, p->dt, p->rank - 1);
}
/* Megatron's combined p2p steps, posted as one group so neighbours never wait on each other. */
static void send_forward_recv_backward(pipeline *p, int slot) {
    coll_group_start();
    send_forward(p, slot);
    recv_backward(p);
    coll_group_end();
}
static void send_backward_recv_forward(pipeline *p, int slot) {
    coll_group_start();
    send_backward(p);
    recv_forward(p, slot);
    coll_group_end();
}

typedef struct run_state {
    llama_model *m;
    const tr_config *cfg;
    batches b;
    pipeline pipe;
    int num_micro, dp_total;
    coll_comm *cp; /* context-parallel group (NULL at CP 1) */
    float *scalar; /* [1] device scratch for the micro-batch's token count over CP */
    /* Each micro-batch's losses stay on the device until the step reads them all at once (no host
     * synchronisation between micro-batches): loss_dev [num_micro * N + 2] (the last two floats: the
     * loss reduction's pair), mask_all [num_micro * N] the host masks they are weighed with. */
    float *loss_dev, *mask_all;
    double loss_sum, tok_sum;
    tr_batch_fn next;
    void *ctx;
    tr_optimizer *o;         /* NULL: gradients only */
    const tr_groups *gr;     /* NULL: one rank */
    size_t tp_unreduced_end; /* TP-replicated gradients below this still need their TP reduction */
} run_state;

static int load_batch(run_state *st, int micro, char *err, size_t errlen) {
    int slot = micro % st->b.slots;
    size_t o = (size_t)slot * (size_t)st->b.N;
    /* --predict: device memory holds no values, so the tokens would feed nothing and the data is not
     * read (reading it was a fifth of a 70B prediction's time; it costs a GPU no device time). Each slot
     * is filled once: every token counts, positions 0..T-1 (the values only reach no-op copies). */
    if (st->cfg->predict) {
        for (int n = 0; micro < st->b.slots && n < st->b.N; n++) {
            st->b.tokens[o + n] = st->b.labels[o + n] = 0;
            st->b.mask[o + n] = 1.0f;
            st->b.pos[o + n] = n % st->m->dims.T;
        }
        return 0;
    }
    return fetch(&st->b, st->next, st->ctx, micro, st->b.tokens + o, st->b.labels + o, st->b.mask + o, st->b.pos + o,
                 err, errlen);
}

static void forward(run_state *st, int micro) {
    int slot = micro % st->b.slots;
    size_t o = (size_t)slot * (size_t)st->b.N;
    st->m->site_micro = micro;
    llama_forward_slot(st->m, slot, st->b.tokens + o, st->b.labels + o, st->b.pos + o);
}

static void backward(run_state *st, int micro) {
    int slot = micro % st->b.slots, N = st->b.N;
    st->m->site_micro = micro;
    const float *mask = st->b.mask + (size_t)slot * (size_t)N;
    if (st->m->dims.last) {
        dev_copy_d2d(st->m->stream, st->loss_dev + (size_t)micro * N, st->m->acts[slot].losses, (size_t)N * 4);
        memcpy(st->mask_all + (size_t)micro * N, mask, (size_t)N * 4);
        double mb_tok = 0;
        for (int n = 0; n < N; n++) mb_tok += mask[n];
        st->tok_sum += mb_tok;
        if (st->cp) { /* the micro-batch's mean is over its whole sequences, every CP rank's tokens */
            float t = (float)mb_tok;
            dev_copy_h2d(st->m->stream, st->scalar, &t, sizeof t);
            coll_all_reduce(st->cp, st->m->stream, st->scalar, st->scalar, 1, TR_F32, COLL_SUM);
            dev_copy_d2h(st->m->stream, &t, st->scalar, sizeof t);
            dev_stream_sync(st->m->stream);
            mb_tok = t;
        }
        /* Without per-token loss Megatron divides each micro-batch's sum by its own token count and by
         * the number of micro-batches (the DP average comes with the reduction); with it, the sums
         * are scaled by the global batch's tokens after the reduction. */
        double w = st->cfg->calculate_per_token_loss ? 1.0 : (mb_tok > 0 ? 1.0 / (mb_tok * st->num_micro) : 0.0);
        for (int n = 0; n < N; n++) st->b.dloss[n] = (float)(mask[n] * w);
    }
    /* the last micro-batch writes the final gradients: with --overlap-grad-reduce each bucket's
     * reduction starts as soon as it is written */
    const bool last = micro == st->num_micro - 1;
    if (last) optim_arm_overlap(st->o, st->m, st->gr);
    llama_backward_slot(st->m, slot, st->b.dloss);
    if (last) st->tp_unreduced_end = optim_disarm_overlap(st->o, st->m);
}

/* The step's one read of the losses: every micro-batch's, summed with their masks in micro-batch
 * order (each micro-batch's sum first, in double), as they were when each was read on its own. */
static void read_losses(run_state *st, int num_micro) {
    if (!st->m->dims.last || num_micro == 0) return;
    const size_t N = (size_t)st->b.N, n = (size_t)num_micro * N;
    float *h = malloc(n * sizeof *h);
    TR_CHECK(h != NULL, "out of host memory for the step's losses");
    dev_copy_d2h(st->m->stream, h, st->loss_dev, n * sizeof *h);
    dev_stream_sync(st->m->stream);
    for (int micro = 0; micro < num_micro; micro++) {
        double mb_loss = 0;
        for (size_t i = 0; i < N; i++) mb_loss += (double)h[micro * N + i] * st->mask_all[micro * N + i];
        st->loss_sum += mb_loss;
    }
    free(h);
}

/* Sums [loss, tokens] over the pipeline (only the last stage has them) and data parallelism, so
 * every rank knows the batch's token count and the last stage the batch's loss. dbuf [2] device. */
static void reduce_loss(llama_model *m, const tr_parallel *par, float *dbuf, double *loss_sum, double *tok_sum) {
    if (!par || !par->groups) return;
    float h[2] = {m->dims.last ? (float)*loss_sum : 0.0f, m->dims.last ? (float)*tok_sum : 0.0f};
    dev_copy_h2d(m->stream, dbuf, h, sizeof h);
    coll_all_reduce(par->groups->pp, m->stream, dbuf, dbuf, 2, TR_F32, COLL_SUM);
    coll_all_reduce(par->groups->dp_cp, m->stream, dbuf, dbuf, 2, TR_F32, COLL_SUM);
    dev_copy_d2h(m->stream, h, dbuf, sizeof h);
    dev_stream_sync(m->stream);
    *loss_sum = h[0], *tok_sum = h[1];
}

/* llama_model.step_free: the host buffers of a step whose rank was ended mid-step (dev_set_reclaim).
 * The run_state lives on that rank's stack, which the twin frees only after this has run. */
static void run_state_free_host(void *arg) {
    run_state *st = arg;
    batches_free(&st->b);
    free(st->mask_all);
}

int train_forward_backward(llama_model *m, tr_optimizer *o, const tr_config *cfg, const tr_parallel *par, int num_micro,
                           tr_batch_fn next, void *ctx, tr_step_result *res, char *err, size_t errlen) {
    run_state st = {.m = m,
                    .cfg = cfg,
                    .num_micro = num_micro,
                    .next = next,
                    .ctx = ctx,
                    .dp_total = 1,
                    .o = o,
                    .gr = par ? par->groups : NULL,
                    .tp_unreduced_end = m->total};
    const int N = m->dims.B * m->dims.T;
    if (batches_init(&st.b, N, m->layout.slots)) {
        batches_free(&st.b);
        return tr_errf(err, errlen, "out of host memory for micro-batches");
    }
    const tr_grid *g = par ? par->grid : NULL;
    if (g) st.dp_total = g->size[TR_AXIS_DP]; /* the DP average; CP ranks share each micro-batch's mean */
    if (batches_init_cp(&st.b, m->layout.cp, m->layout.cp_rank, m->dims.B, m->dims.T)) {
        batches_free(&st.b);
        return tr_errf(err, errlen, "out of host memory for micro-batches");
    }
    if (m->layout.cp > 1) {
        st.cp = par->groups->cp;
        st.scalar = dev_alloc(m->dev, sizeof(float), "context-parallel token count");
        TR_CHECK(st.scalar != NULL, "out of device memory for a scalar");
    }
    st.pipe = pipeline_of(m, par);
    const size_t nhist = m->dims.last ? (size_t)num_micro * (size_t)N : 0;
    st.loss_dev = dev_alloc(m->dev, (nhist + 2) * sizeof(float), "the step's losses");
    st.mask_all = malloc((nhist + 1) * sizeof(float));
    TR_CHECK(st.loss_dev != NULL, "out of device memory for the step's losses");
    TR_CHECK(st.mask_all != NULL, "out of host memory for the step's loss masks");
    m->step = &st, m->step_free = run_state_free_host;
    llama_begin_grads(m);

    /* Megatron's non-interleaved 1F1B: warm-up forwards, steady one-forward-one-backward, cool-down */
    const int P = m->layout.pp, r = m->layout.pp_rank, M = num_micro;
    int warmup = P - r - 1 < M ? P - r - 1 : M, remaining = M - warmup, fwd = 0, bwd = 0, rc = 0;
    TR_CHECK(warmup + 1 <= m->layout.slots || remaining == 0, "1F1B needs PP - pp_rank activation slots");
    for (int i = 0; i < warmup && !rc; i++, fwd++) {
        if ((rc = load_batch(&st, fwd, err, errlen))) break;
        recv_forward(&st.pipe, fwd % st.b.slots);
        forward(&st, fwd);
        send_forward(&st.pipe, fwd % st.b.slots);
    }
    if (!rc && remaining > 0 && !(rc = load_batch(&st, fwd, err, errlen))) recv_forward(&st.pipe, fwd % st.b.slots);
    for (int i = 0; i < remaining && !rc; i++) {
        forward(&st, fwd);
        send_forward_recv_backward(&st.pipe, fwd % st.b.slots);
        fwd++;
        backward(&st, bwd++);
        if (i == remaining - 1) {
            send_backward(&st.pipe);
        } else {
            if ((rc = load_batch(&st, fwd, err, errlen))) break;
            send_backward_recv_forward(&st.pipe, fwd % st.b.slots);
        }
    }
    for (int i = 0; i < warmup && !rc; i++) {
        recv_backward(&st.pipe);
        backward(&st, bwd++);
        send_backward(&st.pipe);
    }
    batches_free(&st.b);
    llama_settle_grads(m, 0); /* a no-op after a full backward; after a failed one, no old values stay */
    if (st.scalar) dev_free(m->dev, st.scalar);
    if (!rc) {
        llama_sp_reduce_norm_grads_range(m, 0, st.tp_unreduced_end); /* what the buckets' callbacks left */
        read_losses(&st, num_micro);
        reduce_loss(m, par, st.loss_dev + nhist, &st.loss_sum, &st.tok_sum);
    }
    dev_free(m->dev, st.loss_dev);       /* after the reads above: the device has nothing left to do with it */
    m->step = NULL, m->step_free = NULL; /* the step's last collective is behind us */
    free(st.mask_all);
    if (rc) return rc;

    float scale = cfg->calculate_per_token_loss ? (st.tok_sum > 0 ? (float)(1.0 / st.tok_sum) : 1.0f)
                                                : (float)(1.0 / st.dp_total);
    if (o) optim_reduce_grads(o, m, par ? par->groups : NULL, scale);
    else if (scale != 1.0f) kern_scale(m->stream, tr_buf_make(m->grads, m->dims.grad_dt), scale, m->total);
    res->num_tokens = st.tok_sum;
    res->loss = st.tok_sum > 0 ? st.loss_sum / st.tok_sum : 0.0;
    res->loss_finite = isfinite(res->loss);
    return 0;
}

/* True on every rank of c when `mine` is true on any. */
static bool any_rank(llama_model *m, coll_comm *c, bool mine) {
    float *d = dev_alloc(m->dev, sizeof(float), "NaN check flag");
    TR_CHECK(d != NULL, "out of device memory for a flag");
    float h = mine ? 1.0f : 0.0f;
    dev_copy_h2d(m->stream, d, &h, sizeof h);
    coll_all_reduce(c, m->stream, d, d, 1, TR_F32, COLL_MAX);
    dev_copy_d2h(m->stream, &h, d, sizeof h);
    dev_stream_sync(m->stream);
    dev_free(m->dev, d);
    return h > 0.5f;
}

int train_step(llama_model *m, tr_optimizer *o, const tr_config *cfg, const tr_parallel *par, int num_micro, double lr,
               tr_batch_fn next, void *ctx, tr_step_result *res, char *err, size_t errlen) {
    if (train_forward_backward(m, o, cfg, par, num_micro, next, ctx, res, err, errlen)) return -1;
    res->lr = lr;
    res->grad_norm = optim_grad_norm(o, m, par ? par->grid : NULL, par ? par->groups : NULL);
    res->grad_finite = isfinite(res->grad_norm);
    /* the grad norm is global and the loss is reduced over PP and DP; tensor-parallel replicas of the
     * loss can still differ (a fault in one), so they agree first and every rank decides alike */
    if (cfg->check_for_nan_in_loss_and_grad && par && par->groups && m->layout.tp > 1)
        res->loss_finite = !any_rank(m, par->groups->tp, !res->loss_finite);
    if (cfg->check_for_nan_in_loss_and_grad && (!res->loss_finite || !res->grad_finite)) {
        tr_errf(err, errlen,
                "NaN/Inf detected in the %s (loss %g, grad norm %g); the update was not applied. Check the data "
                "and --lr; --no-check-for-nan-in-loss-and-grad turns this check off",
                res->grad_finite ? "loss" : "gradients", res->loss, res->grad_norm);
        return TR_EXIT_NAN;
    }
    optim_step(o, m, par ? par->groups : NULL, lr, res->grad_norm);
    return 0;
}

int train_evaluate(llama_model *m, const tr_parallel *par, int eval_iters, int num_micro, tr_batch_fn next, void *ctx,
                   double *loss, char *err, size_t errlen) {
    run_state st = {.m = m, .next = next, .ctx = ctx};
    const int N = m->dims.B * m->dims.T;
    if (batches_init(&st.b, N, 1)) {
        batches_free(&st.b);
        return tr_errf(err, errlen, "out of host memory for a validation micro-batch");
    }
    st.pipe = pipeline_of(m, par);
    int rc = batches_init_cp(&st.b, m->layout.cp, m->layout.cp_rank, m->dims.B, m->dims.T) ? -1 : 0;
    if (rc) tr_errf(err, errlen, "out of host memory for a validation micro-batch");
    for (int i = 0; i < eval_iters * num_micro && !rc; i++) {
        if ((rc = fetch(&st.b, st.next, st.ctx, i % num_micro, st.b.tokens, st.b.labels, st.b.mask, st.b.pos, err,
                        errlen)))
            break;
        recv_forward(&st.pipe, 0);
        llama_forward_slot(m, 0, st.b.tokens, st.b.labels, st.b.pos);
        send_forward(&st.pipe, 0);
        if (!m->dims.last) continue;
        llama_get_losses_slot(m, 0, st.b.losses);
        for (int n = 0; n < N; n++) {
            st.loss_sum += (double)st.b.losses[n] * st.b.mask[n];
            st.tok_sum += st.b.mask[n];
        }
    }
    batches_free(&st.b);
    if (rc) return rc;
    float *pair = dev_alloc(m->dev, 2 * sizeof(float), "loss reduction"); /* [2] */
    TR_CHECK(pair != NULL, "out of device memory for the loss reduction");
    reduce_loss(m, par, pair, &st.loss_sum, &st.tok_sum);
    dev_free(m->dev, pair);
    *loss = st.tok_sum > 0 ? st.loss_sum / st.tok_sum : 0.0;
    return 0;
}
