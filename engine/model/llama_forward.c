/* Forward pass of one micro-batch through this rank's stage: embedding (first stage), its decoder
 * layers, final norm, output layer and loss (last stage). With tensor parallelism q/k/v and fc1 are
 * column-parallel (local heads and ffn slice), o and fc2 row-parallel (partial sums all-reduced over
 * TP), and the embedding and output layer hold a vocabulary slice. */
#include <stdlib.h>

#include "model/llama.h"
#include "twinrun/err.h"

static tr_buf act(const llama_model *m, void *base, size_t off) {
    return tr_buf_at(tr_buf_make(base, m->dims.act_dt), off);
}

tr_buf llama_weight(const llama_model *m, int p) {
    if (p < 0) return tr_buf_make(NULL, m->dims.act_dt);
    return tr_buf_at(tr_buf_make(m->params, m->dims.act_dt), m->params_tab[p].offset);
}

/* y[N, out] = x[N, in] @ W[out, in]^T (local shapes) */
static void linear_forward(const llama_model *m, tr_buf y, tr_buf x, int p, int N) {
    const llama_param *w = &m->params_tab[p];
    kern_gemm(m->stream, y, x, llama_weight(m, p), N, (int)w->shape[0], (int)w->shape[1], false, true, 1.0f, 0.0f);
}

/* A decoder layer's linear (module `mod` of local layer l; llama_fp8.c): in FP8 with --fp8-format.
 * new_x: x is not the input the module's previous linear read (q, k and v read one). */
static void block_linear_forward(llama_model *m, tr_buf y, tr_buf x, int p, int N, int l, int mod, bool new_x) {
    if (!m->fp8.on) {
        linear_forward(m, y, x, p, N);
        return;
    }
    if (new_x) llama_fp8_quantize_input(m, x, N, (int)m->params_tab[p].shape[1], l, mod, false);
    llama_fp8_linear_forward(m, y, p, N, l, mod);
}

/* y[rows, out] += bias[out] on every row: the rank-1 product ones[rows, 1] x bias[1, out], one rounding
 * as an add would do. No-op for pb < 0 (no bias). */
static void add_bias(const llama_model *m, tr_buf y, int pb, int rows) {
    if (pb < 0) return;
    const int out = (int)m->params_tab[pb].shape[0];
    kern_gemm(m->stream, y, tr_buf_make(m->ones, m->dims.act_dt), llama_weight(m, pb), rows, out, 1, false, false, 1.0f,
              1.0f);
}

/* Where a row-parallel product or a vocabulary-slice lookup writes its partial sums [N, C]: in place
 * without sequence parallelism, a staging buffer with it. */
static tr_buf partial_out(const llama_model *m, tr_buf dst) { return m->dims.sp ? act(m, m->g.sp_full, 0) : dst; }

/* Completes partial [N, C] into dst: the sum over TP of every row (all-reduce), or with sequence
 * parallelism only this rank's Nl rows (reduce-scatter), as Megatron does. */
static void tp_rows(const llama_model *m, tr_buf dst, tr_buf partial) {
    if (m->layout.tp == 1) return;
    size_t NlC = (size_t)m->dims.Nl * m->dims.C;
    if (m->dims.sp) coll_reduce_scatter(m->tp_comm, m->stream, partial.p, dst.p, NlC, dst.dt, COLL_SUM);
    else coll_all_reduce(m->tp_comm, m->stream, dst.p, dst.p, NlC, dst.dt, COLL_SUM);
}

/* Norm of this rank's Nl rows into full [N, C] (all-gathered with sequence parallelism). */
static void norm_rows(llama_model *m, tr_buf full, float *mean, float *rstd, tr_buf x, int pw, int pb) {
    const llama_dims *dm = &m->dims;
    tr_buf out = dm->sp ? act(m, m->g.sp_loc, 0) : full;
    kern_norm_forward(m->stream, &dm->norm, out, mean, rstd, x, llama_weight(m, pw), llama_weight(m, pb), dm->Nl,
                      dm->C);
    if (dm->sp) coll_all_gather(m->tp_comm, m->stream, out.p, full.p, (size_t)dm->Nl * dm->C, out.dt);
}

void *llama_stage_input(llama_model *m, int slot) { return m->acts[slot].resid; }

void *llama_stage_output(llama_model *m, int slot) {
    size_t NC = (size_t)m->dims.Nl * m->dims.C;
    return act(m, m->acts[slot].resid, (size_t)m->dims.nl * NC).p;
}

/* Every parameter below `end` is read next: the listener (the optimizer's step ahead, --overlap-param-gather)
 * makes the model's stream wait for their update or all-gather. */
static void params_needed(llama_model *m, size_t end) {
    if (m->params_needed) m->params_needed(m->params_needed_arg, end);
}

/* Decoder layer l (local) of one micro-batch into its view: attention, then MLP, each a residual
 * branch; the recompute path of the backward pass calls it again with the same inputs (same bits). */
void llama_layer_forward(llama_model *m, const llama_layer_view *v, int l, const int32_t *pos) {
    const llama_dims *dm = &m->dims;
    dev_stream *s = m->stream;
    const llama_layer_params *lp = &m->layer[l];
    const int B = dm->B, T = dm->T, NH = dm->NHl, KV = dm->KVl, D = dm->D, F = dm->Fl;
    const int N = B * T;
    const size_t NlC = (size_t)dm->Nl * dm->C;
    size_t need[LLAMA_LAYER_NEEDS];
    llama_layer_need_ends(m, l, need);

    params_needed(m, need[0]);
    norm_rows(m, v->ln1, v->ln1_mean, v->ln1_rstd, v->x, lp->ln1_w, lp->ln1_b);
    /* --qk-layernorm: the projections land before their norm, which writes q and k (rows of one head) */
    const tr_buf qlin = dm->qk_norm ? v->q_pre : v->q, klin = dm->qk_norm ? v->k_pre : v->k;
    block_linear_forward(m, qlin, v->ln1, lp->wq, N, l, LLAMA_FP8_QKV, true);
    add_bias(m, qlin, lp->bq, N);
    block_linear_forward(m, klin, v->ln1, lp->wk, N, l, LLAMA_FP8_QKV, false);
    add_bias(m, klin, lp->bk, N);
    if (dm->qk_norm) {
        kern_norm_forward(s, &dm->norm, v->q, v->qn_mean, v->qn_rstd, v->q_pre, llama_weight(m, lp->qn_w),
                          llama_weight(m, lp->qn_b), N * NH, D);
        kern_norm_forward(s, &dm->norm, v->k, v->kn_mean, v->kn_rstd, v->k_pre, llama_weight(m, lp->kn_w),
                          llama_weight(m, lp->kn_b), N * KV, D);
    }
    block_linear_forward(m, v->v, v->ln1, lp->wv, N, l, LLAMA_FP8_QKV, false);
    add_bias(m, v->v, lp->bv, N);
    kern_rope_forward(s, &dm->rope, v->q, pos, B, T, NH, D);
    kern_rope_forward(s, &dm->rope, v->k, pos, B, T, KV, D);
    llama_core_attention(m, v, true);
    tr_buf o = partial_out(m, v->xmid);
    params_needed(m, need[1]);
    block_linear_forward(m, o, v->att, lp->wo, N, l, LLAMA_FP8_PROJ, true);
    tp_rows(m, v->xmid, o);
    add_bias(m, v->xmid, lp->bo, dm->Nl); /* after the reduction: once, not once per TP rank */
    kern_add(s, v->xmid, v->xmid, v->x, NlC);

    params_needed(m, need[2]);
    norm_rows(m, v->ln2, v->ln2_mean, v->ln2_rstd, v->xmid, lp->ln2_w, lp->ln2_b);
    block_linear_forward(m, v->h, v->ln2, lp->fc1, N, l, LLAMA_FP8_FC1, true);
    add_bias(m, v->h, lp->b1, N);
    kern_swiglu_forward(s, v->a, v->h, N, F);
    tr_buf f = partial_out(m, v->xout);
    params_needed(m, need[3]);
    block_linear_forward(m, f, v->a, lp->fc2, N, l, LLAMA_FP8_FC2, true);
    tp_rows(m, v->xout, f);
    add_bias(m, v->xout, lp->b2, dm->Nl);
    kern_add(s, v->xout, v->xout, v->xmid, NlC);
}

void llama_core_attention(llama_model *m, const llama_layer_view *v, bool gather) {
    const llama_dims *dm = &m->dims;
    const int B = dm->B, T = dm->T, NH = dm->NHl, KV = dm->KVl, D = dm->D;
    if (m->layout.cp > 1) {
        /* the whole sequence's keys and values, gathered from the context-parallel group */
        if (gather) llama_cp_gather(m, v->kf, v->k, (size_t)KV * D);
        if (gather) llama_cp_gather(m, v->vf, v->v, (size_t)KV * D);
        kern_attention_forward_pos(m->stream, v->att, v->lse, v->q, v->kf, v->vf, m->q_pos, m->k_pos, B, T, dm->Tfull,
                                   NH, KV, D);
    } else {
        kern_attention_forward(m->stream, v->att, v->lse, v->q, v->k, v->v, B, T, NH, KV, D);
    }
}

void llama_forward_slot(llama_model *m, int slot, const int32_t *tokens, const int32_t *targets,
                        const int32_t *positions) {
    const llama_dims *dm = &m->dims;
    dev_stream *s = m->stream;
    TR_CHECK(slot >= 0 && slot < m->layout.slots, "activation slot out of range");
    llama_acts *A = &m->acts[slot];
    const int C = dm->C, N = dm->B * dm->T;
    const size_t NlC = (size_t)dm->Nl * C;

    for (int n = 0; n < N; n++) {
        if (tokens[n] < 0 || tokens[n] >= dm->vocab || targets[n] < 0 || targets[n] >= dm->vocab)
            tr_fatal("token %d or label %d at position %d of the micro-batch is outside the vocabulary [0, %d); "
                     "check the data against --vocab-size",
                     tokens[n], targets[n], n, dm->vocab);
    }
    dev_copy_h2d(s, A->tokens, tokens, (size_t)N * 4);
    dev_copy_h2d(s, A->targets, targets, (size_t)N * 4);
    A->have_positions = positions != NULL;
    if (positions) dev_copy_h2d(s, A->positions, positions, (size_t)N * 4);
    const int32_t *pos = positions ? A->positions : NULL;
    llama_fp8_forward_begin(m, slot);

    if (dm->first) {
        params_needed(m, m->params_tab[m->p_embed].offset + m->params_tab[m->p_embed].numel);
        tr_buf x0 = act(m, A->resid, 0), e = partial_out(m, x0);
        kern_embedding_forward_slice(s, e, A->tokens, llama_weight(m, m->p_embed), dm->vocab_start, N, C, dm->Vl);
        tp_rows(m, x0, e);
    }

    for (int l = 0; l < dm->nl; l++) { /* each layer waits for its parameters piece by piece */
        llama_layer_view v;
        llama_layer_view_of(m, slot, l, &v);
        llama_layer_forward(m, &v, l, pos);
        if (m->site) m->site(m->site_arg, LLAMA_SITE_ACTIVATION, dm->l0 + l, m->site_micro, v.xout, (size_t)dm->Nl * C);
    }
    params_needed(m, m->total_alloc); /* the rest, and nothing left in flight when the backward begins */

    llama_fp8_forward_end(m); /* the last FP8 GEMM of this stage's pass is behind us */
    if (!dm->last) return;
    tr_buf xl = act(m, A->resid, (size_t)dm->nl * NlC);
    tr_buf lnf = act(m, A->lnf, 0), logits = act(m, A->logits, 0);
    norm_rows(m, lnf, A->lnf_mean, A->lnf_rstd, xl, m->p_lnf_w, m->p_lnf_b);
    linear_forward(m, logits, lnf, m->p_head, N);
    /* vocab-parallel cross-entropy: global row max, then global sum of exponentials and target logit */
    kern_ce_slice_max(s, A->ce_max, logits, N, dm->Vl, dm->Vl_real);
    if (m->layout.tp > 1) coll_all_reduce(m->tp_comm, s, A->ce_max, A->ce_max, (size_t)N, TR_F32, COLL_MAX);
    kern_ce_slice_sums(s, A->ce_sum, A->ce_target, logits, A->ce_max, A->targets, dm->vocab_start, N, dm->Vl,
                       dm->Vl_real);
    if (m->layout.tp > 1) {
        coll_all_reduce(m->tp_comm, s, A->ce_sum, A->ce_sum, (size_t)N, TR_F32, COLL_SUM);
        coll_all_reduce(m->tp_comm, s, A->ce_target, A->ce_target, (size_t)N, TR_F32, COLL_SUM);
    }
    kern_ce_loss_from_stats(s, A->losses, A->ce_max, A->ce_sum, A->ce_target, N);
    if (m->site) m->site(m->site_arg, LLAMA_SITE_LOSS, -1, m->site_micro, tr_buf_f32(A->losses), (size_t)N);
}

void llama_get_losses_slot(llama_model *m, int slot, float *losses) {
    TR_CHECK(m->dims.last, "only the last pipeline stage computes the loss");
    size_t N = (size_t)m->dims.B * m->dims.T;
    dev_copy_d2h(m->stream, losses, m->acts[slot].losses, N * 4);
    dev_stream_sync(m->stream);
}

void llama_forward(llama_model *m, const int32_t *tokens, const int32_t *targets, const int32_t *positions) {
    llama_forward_slot(m, 0, tokens, targets, positions);
}

void llama_get_losses(llama_model *m, float *losses) { llama_get_losses_slot(m, 0, losses); }

void llama_get_logits(llama_model *m, float *logits) {
    size_t n = (size_t)m->dims.B * m->dims.T * m->dims.Vl;
    TR_CHECK(m->dims.last, "only the last pipeline stage has logits");
    if (m->dims.act_dt == TR_F32) {
        dev_copy_d2h(m->stream, logits, m->acts[0].logits, n * 4);
        dev_stream_sync(m->stream);
        return;
    }
    uint16_t *tmp = malloc(n * 2);
    TR_CHECK(tmp != NULL, "out of host memory reading logits");
    dev_copy_d2h(m->stream, tmp, m->acts[0].logits, n * 2);
    dev_stream_sync(m->stream);
    for (size_t i = 0; i < n; i++) logits[i] = tr_bf16_to_f32(tmp[i]);
    free(tmp);
}
