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

/* Where a row-parallel product or a vocabulary-slice lookup writes its partial sums [N, C]: in place
 * without sequence parallelism, a staging buffer with it. */
static tr_buf partial_out(const llama_model *m, tr_buf dst) {
    return m->dims.sp ? act(m, m->g.sp_full, 0) : dst;
}

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
    kern_norm_forward(m->stream, &dm->norm, out, mean, rstd, x, llama_weight(m, pw), llama_weight(m, pb), dm->Nl, dm->C);
    if (dm->sp) coll_all_gather(m->tp_comm, m->stream, out.p, full.p, (size_t)dm->Nl * dm->C, out.dt);
}

void *llama_stage_input(llama_model *m, int slot) { return m->acts[slot].resid; }

void *llama_stage_output(llama_model *m, int slot) {
    size_t NC = (size_t)m->dims.Nl * m->dims.C;
    return act(m, m->acts[slot].resid, (size_t)m->dims.nl * NC).p;
}

void llama_forward_slot(llama_model *m, int slot, const int32_t *tokens, const int32_t *targets,
                        const int32_t *positions) {
    const llama_dims *dm = &m->dims;
    dev_stream *s = m->stream;
    TR_CHECK(slot >= 0 && slot < m->layout.slots, "activation slot out of range");
    llama_acts *A = &m->acts[slot];
    const int B = dm->B, T = dm->T, C = dm->C, NH = dm->NHl, KV = dm->KVl, D = dm->D, F = dm->Fl;
    const int N = B * T, Nl = dm->Nl;
    const size_t NC = (size_t)N * C, NlC = (size_t)Nl * C, NQ = (size_t)N * NH * D, NK = (size_t)N * KV * D;

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

    if (dm->first) {
        tr_buf x0 = act(m, A->resid, 0), e = partial_out(m, x0);
        kern_embedding_forward_slice(s, e, A->tokens, llama_weight(m, m->p_embed), dm->vocab_start, N, C, dm->Vl);
        tp_rows(m, x0, e);
    }

    for (int l = 0; l < dm->nl; l++) {
        const llama_layer_params *lp = &m->layer[l];
        tr_buf x = act(m, A->resid, (size_t)l * NlC);        /* [Nl, C] */
        tr_buf xmid = act(m, A->resid_mid, (size_t)l * NlC); /* [Nl, C] */
        tr_buf xout = act(m, A->resid, (size_t)(l + 1) * NlC);
        tr_buf ln1 = act(m, A->ln1, (size_t)l * NC), ln2 = act(m, A->ln2, (size_t)l * NC);
        tr_buf q = act(m, A->q, (size_t)l * NQ), att = act(m, A->att, (size_t)l * NQ); /* [N, NHl*D] */
        tr_buf k = act(m, A->k, (size_t)l * NK), v = act(m, A->v, (size_t)l * NK);     /* [N, KVl*D] */
        tr_buf h = act(m, A->h, (size_t)l * N * 2 * F);                                 /* [N, 2Fl] */
        tr_buf a = act(m, A->act, (size_t)l * N * F);                                   /* [N, Fl] */
        float *lse = A->lse + (size_t)l * N * NH;                                       /* [B, NHl, T] */

        norm_rows(m, ln1, A->ln1_mean + (size_t)l * Nl, A->ln1_rstd + (size_t)l * Nl, x, lp->ln1_w, lp->ln1_b);
        linear_forward(m, q, ln1, lp->wq, N);
        linear_forward(m, k, ln1, lp->wk, N);
        linear_forward(m, v, ln1, lp->wv, N);
        kern_rope_forward(s, &dm->rope, q, pos, B, T, NH, D);
        kern_rope_forward(s, &dm->rope, k, pos, B, T, KV, D);
        if (m->layout.cp > 1) {
            const size_t NKf = (size_t)B * dm->Tfull * KV * D;
            tr_buf kf = act(m, A->kfull, (size_t)l * NKf), vf = act(m, A->vfull, (size_t)l * NKf);
            llama_cp_gather(m, kf, k, (size_t)KV * D);
            llama_cp_gather(m, vf, v, (size_t)KV * D);
            kern_attention_forward_pos(s, att, lse, q, kf, vf, m->q_pos, m->k_pos, B, T, dm->Tfull, NH, KV, D);
        } else {
            kern_attention_forward(s, att, lse, q, k, v, B, T, NH, KV, D);
        }
        tr_buf o = partial_out(m, xmid);
        linear_forward(m, o, att, lp->wo, N);
        tp_rows(m, xmid, o);
        kern_add(s, xmid, xmid, x, NlC);

        norm_rows(m, ln2, A->ln2_mean + (size_t)l * Nl, A->ln2_rstd + (size_t)l * Nl, xmid, lp->ln2_w, lp->ln2_b);
        linear_forward(m, h, ln2, lp->fc1, N);
        kern_swiglu_forward(s, a, h, N, F);
        tr_buf f = partial_out(m, xout);
        linear_forward(m, f, a, lp->fc2, N);
        tp_rows(m, xout, f);
        kern_add(s, xout, xout, xmid, NlC);
        if (m->site) m->site(m->site_arg, LLAMA_SITE_ACTIVATION, dm->l0 + l, m->site_micro, xout, NlC);
    }

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
