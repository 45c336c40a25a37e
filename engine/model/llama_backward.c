/* Backward pass of one micro-batch through this rank's stage: the forward in reverse, gradients
 * accumulating into m->grads. The residual stream's gradient lives in g.dresid; norm backward adds
 * into it, so each layer's branch and skip paths meet without an extra add. With tensor
 * parallelism the input gradient of a column-parallel linear (and of the output layer) is a partial
 * sum, completed by an all-reduce over TP before the norm it flows into. */
#include "model/llama.h"
#include "twinrun/err.h"

static tr_buf act(const llama_model *m, void *base, size_t off) {
    return tr_buf_at(tr_buf_make(base, m->dims.act_dt), off);
}

static tr_buf grad(const llama_model *m, int p) {
    if (p < 0) return tr_buf_make(NULL, m->dims.grad_dt);
    return tr_buf_at(tr_buf_make(m->grads, m->dims.grad_dt), m->params_tab[p].offset);
}

/* For y[N,out] = x[N,in] @ W^T: dx[N,in] = dy @ W (overwrite, or add when accumulate),
 * dW[out,in] += dy^T @ x; the step's first write of a lazy gradient overwrites it (llama_begin_grads). */
static void linear_backward(const llama_model *m, tr_buf dx, tr_buf dy, tr_buf x, int p, int N, bool accumulate) {
    const llama_param *w = &m->params_tab[p];
    int out = (int)w->shape[0], in = (int)w->shape[1];
    const bool first = m->grad_fresh && m->grad_fresh[p];
    kern_gemm(m->stream, grad(m, p), dy, x, out, in, N, true, false, 1.0f, first ? 0.0f : 1.0f);
    if (first) m->grad_fresh[p] = false;
    if (dx.p)
        kern_gemm(m->stream, dx, dy, llama_weight(m, p), N, in, out, false, false, 1.0f, accumulate ? 1.0f : 0.0f);
}

/* A decoder layer's linear (module `mod` of local layer l), in FP8 with --fp8-format; new_x: its input
 * is not the one the previous call quantised (q, k and v share theirs). */
static void block_linear_backward(llama_model *m, tr_buf dx, tr_buf dy, tr_buf x, int p, int N, bool accumulate, int l,
                                  int mod, bool new_x) {
    if (!m->fp8.on) {
        linear_backward(m, dx, dy, x, p, N, accumulate);
        return;
    }
    const bool first = m->grad_fresh && m->grad_fresh[p];
    if (new_x && m->fp8.wgrad) llama_fp8_quantize_input(m, x, N, (int)m->params_tab[p].shape[1], l, mod, true);
    if (!m->fp8.wgrad) /* --no-fp8-wgrad: dW in bf16 from the bf16 operands */
        kern_gemm(m->stream, grad(m, p), dy, x, (int)m->params_tab[p].shape[0], (int)m->params_tab[p].shape[1], N, true,
                  false, 1.0f, first ? 0.0f : 1.0f);
    llama_fp8_linear_backward(m, grad(m, p), first, dx, dy, p, N, accumulate, l, mod);
    if (first) m->grad_fresh[p] = false;
}

/* dbias[out] += the sum over rows of dy[rows, out] (dy^T x ones). A row-parallel linear's bias sees this
 * rank's rows only with sequence parallelism, so it is TP-replicated and summed with the norms' gradients
 * (llama_sp_reduce_norm_grads). No-op for pb < 0. */
static void bias_backward(const llama_model *m, tr_buf dy, int pb, int rows) {
    if (pb < 0) return;
    const int out = (int)m->params_tab[pb].shape[0];
    kern_gemm(m->stream, grad(m, pb), dy, tr_buf_make(m->ones, m->dims.act_dt), out, 1, rows, true, false, 1.0f, 1.0f);
}

/* Where a column-parallel linear's input gradient (a partial sum over TP) goes: in place, or a
 * staging buffer of every row with sequence parallelism. */
static tr_buf partial_out(const llama_model *m, tr_buf dst) { return m->dims.sp ? act(m, m->g.sp_full, 0) : dst; }

/* Completes partial [N, C] into dst: all rows (all-reduce), or this rank's Nl rows (reduce-scatter, sp). */
static void tp_rows(const llama_model *m, tr_buf dst, tr_buf partial) {
    if (m->layout.tp == 1) return;
    size_t NlC = (size_t)m->dims.Nl * m->dims.C;
    if (m->dims.sp) coll_reduce_scatter(m->tp_comm, m->stream, partial.p, dst.p, NlC, dst.dt, COLL_SUM);
    else coll_all_reduce(m->tp_comm, m->stream, dst.p, dst.p, NlC, dst.dt, COLL_SUM);
}

/* The residual gradient of every row [N, C]: this rank's Nl rows all-gathered with sp. */
static tr_buf all_rows(const llama_model *m, tr_buf dres) {
    if (!m->dims.sp) return dres;
    tr_buf full = act(m, m->g.sp_full, 0);
    coll_all_gather(m->tp_comm, m->stream, dres.p, full.p, (size_t)m->dims.Nl * m->dims.C, dres.dt);
    return full;
}

void llama_sp_reduce_norm_grads_range(llama_model *m, size_t lo, size_t hi) {
    if (m->layout.tp == 1) return;
    tr_dtype dt = m->dims.grad_dt;
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        if (!p->place.tp_replicated || (!m->dims.sp && !p->place.tp_partial_grad)) continue;
        if (p->offset < lo || p->offset >= hi) continue;
        void *g = (char *)m->grads + p->offset * tr_dtype_size(dt);
        coll_all_reduce(m->tp_comm, m->stream, g, g, p->numel, dt, COLL_SUM);
    }
}

void *llama_stage_grad(llama_model *m) { return m->g.dresid; }

/* Tells the listener (gradient buckets with --overlap-grad-reduce) that every gradient at or above
 * `watermark` is final for this micro-batch. */
static void grads_done(llama_model *m, size_t watermark) {
    llama_settle_grads(m, watermark);
    if (m->grads_done) m->grads_done(m->grads_done_arg, watermark);
}

/* Full recomputation: the forward of the unit that ends at local layer `last`, from the unit's kept
 * input, into the workspace: the same kernels on the same inputs, so the same bits as the first time. */
static void recompute_unit(llama_model *m, int slot, int last, const int32_t *pos) {
    for (int l = m->unit_start[last]; l <= last; l++) {
        llama_layer_view v;
        llama_layer_view_of(m, slot, l, &v);
        llama_layer_forward(m, &v, l, pos); /* observers are not called: they saw these tensors already */
    }
}

void llama_backward_slot(llama_model *m, int slot, const float *dloss) {
    const llama_dims *dm = &m->dims;
    dev_stream *s = m->stream;
    TR_CHECK(slot >= 0 && slot < m->layout.slots, "activation slot out of range");
    llama_acts *A = &m->acts[slot];
    const int B = dm->B, T = dm->T, C = dm->C, NH = dm->NHl, KV = dm->KVl, D = dm->D, F = dm->Fl;
    const int N = B * T, Nl = dm->Nl;
    const size_t NlC = (size_t)Nl * C;
    const int32_t *pos = A->have_positions ? A->positions : NULL;
    tr_buf dres = act(m, m->g.dresid, 0), dln = act(m, m->g.dln, 0);
    llama_zero_pending_grads(m);
    llama_fp8_backward_begin(m, slot);

    if (dm->last) {
        dev_copy_h2d(s, m->g.dloss, dloss, (size_t)N * 4);
        tr_buf dlogits = act(m, A->logits, 0); /* in place over the logits */
        kern_ce_slice_backward(s, dlogits, dlogits, A->ce_max, A->ce_sum, A->targets, dm->vocab_start, m->g.dloss, N,
                               dm->Vl, dm->Vl_real);
        dev_memset_zero(s, m->g.dresid, NlC * tr_dtype_size(dm->act_dt));
        tr_buf dp = partial_out(m, dln);
        linear_backward(m, dp, dlogits, act(m, A->lnf, 0), m->p_head, N, false);
        tp_rows(m, dln, dp);
        kern_norm_backward(s, &dm->norm, dres, grad(m, m->p_lnf_w), grad(m, m->p_lnf_b), dln,
                           act(m, A->resid, (size_t)dm->nl * NlC), llama_weight(m, m->p_lnf_w), A->lnf_mean,
                           A->lnf_rstd, Nl, C);
        grads_done(m, m->params_tab[m->p_lnf_w].offset); /* the output layer and the final norm */
    }

    tr_buf dq = act(m, m->g.dq, 0), dk = act(m, m->g.dk, 0), dv = act(m, m->g.dv, 0);
    tr_buf datt = act(m, m->g.datt, 0), dh = act(m, m->g.dh, 0), da = act(m, m->g.dact, 0);
    for (int l = dm->nl - 1; l >= 0; l--) {
        const llama_layer_params *lp = &m->layer[l];
        if (llama_unit_ends_at(m, l)) recompute_unit(m, slot, l, pos);
        llama_layer_view v;
        llama_layer_view_of(m, slot, l, &v);

        /* MLP: xout = xmid + fc2(swiglu(fc1(norm2(xmid)))) */
        bias_backward(m, dres, lp->b2, Nl);
        block_linear_backward(m, da, all_rows(m, dres), v.a, lp->fc2, N, false, l, LLAMA_FP8_FC2, true);
        kern_swiglu_backward(s, dh, da, v.h, N, F);
        bias_backward(m, dh, lp->b1, N);
        tr_buf dp = partial_out(m, dln);
        block_linear_backward(m, dp, dh, v.ln2, lp->fc1, N, false, l, LLAMA_FP8_FC1, true);
        tp_rows(m, dln, dp);
        kern_norm_backward(s, &dm->norm, dres, grad(m, lp->ln2_w), grad(m, lp->ln2_b), dln, v.xmid,
                           llama_weight(m, lp->ln2_w), v.ln2_mean, v.ln2_rstd, Nl, C);

        /* attention: xmid = x + wo(attn(rope(wq ln1), rope(wk ln1), wv ln1)) */
        if (m->recompute == TR_RECOMPUTE_SELECTIVE) llama_core_attention(m, &v, false); /* att, lse again */
        bias_backward(m, dres, lp->bo, Nl);
        block_linear_backward(m, datt, all_rows(m, dres), v.att, lp->wo, N, false, l, LLAMA_FP8_PROJ, true);
        if (m->layout.cp > 1) {
            tr_buf dkf = act(m, m->g.dkfull, 0), dvf = act(m, m->g.dvfull, 0);
            kern_attention_backward_pos(s, dq, dkf, dvf, datt, v.q, v.kf, v.vf, v.att, v.lse, m->q_pos, m->k_pos, B, T,
                                        dm->Tfull, NH, KV, D);
            llama_cp_reduce_scatter(m, dk, dkf, (size_t)KV * D);
            llama_cp_reduce_scatter(m, dv, dvf, (size_t)KV * D);
        } else {
            kern_attention_backward(s, dq, dk, dv, datt, v.q, v.k, v.v, v.att, v.lse, B, T, NH, KV, D);
        }
        kern_rope_backward(s, &dm->rope, dq, pos, B, T, NH, D);
        kern_rope_backward(s, &dm->rope, dk, pos, B, T, KV, D);
        tr_buf dql = dq, dkl = dk; /* gradients of the q/k projections' outputs */
        if (dm->qk_norm) {
            dql = act(m, m->g.dqn, 0), dkl = act(m, m->g.dkn, 0);
            dev_memset_zero(s, dql.p, (size_t)N * NH * D * tr_dtype_size(dql.dt));
            dev_memset_zero(s, dkl.p, (size_t)N * KV * D * tr_dtype_size(dkl.dt));
            kern_norm_backward(s, &dm->norm, dql, grad(m, lp->qn_w), grad(m, lp->qn_b), dq, v.q_pre,
                               llama_weight(m, lp->qn_w), v.qn_mean, v.qn_rstd, N * NH, D);
            kern_norm_backward(s, &dm->norm, dkl, grad(m, lp->kn_w), grad(m, lp->kn_b), dk, v.k_pre,
                               llama_weight(m, lp->kn_w), v.kn_mean, v.kn_rstd, N * KV, D);
        }
        bias_backward(m, dql, lp->bq, N);
        bias_backward(m, dkl, lp->bk, N);
        bias_backward(m, dv, lp->bv, N);
        dp = partial_out(m, dln);
        block_linear_backward(m, dp, dql, v.ln1, lp->wq, N, false, l, LLAMA_FP8_QKV, true);
        block_linear_backward(m, dp, dkl, v.ln1, lp->wk, N, true, l, LLAMA_FP8_QKV, false);
        block_linear_backward(m, dp, dv, v.ln1, lp->wv, N, true, l, LLAMA_FP8_QKV, false);
        tp_rows(m, dln, dp);
        kern_norm_backward(s, &dm->norm, dres, grad(m, lp->ln1_w), grad(m, lp->ln1_b), dln, v.x,
                           llama_weight(m, lp->ln1_w), v.ln1_mean, v.ln1_rstd, Nl, C);
        if (m->site) m->site(m->site_arg, LLAMA_SITE_GRADIENT, dm->l0 + l, m->site_micro, dres, NlC);
        grads_done(m, llama_layer_first_offset(m, l));
    }
    llama_fp8_backward_end(m);
    if (dm->first)
        kern_embedding_backward_slice(s, grad(m, m->p_embed), all_rows(m, dres), A->tokens, dm->vocab_start, N, C,
                                      dm->Vl);
    grads_done(m, 0);
}

void llama_backward(llama_model *m, const float *dloss) { llama_backward_slot(m, 0, dloss); }
