/* Backward pass of one micro-batch: the forward in reverse, gradients accumulating into m->grads.
 * The residual stream's gradient lives in g.dresid; norm backward adds into it, so each layer's
 * branch and skip paths meet without an extra add. */
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
 * dW[out,in] += dy^T @ x. */
static void linear_backward(const llama_model *m, tr_buf dx, tr_buf dy, tr_buf x, int p, int N, bool accumulate) {
    const llama_param *w = &m->params_tab[p];
    int out = (int)w->shape[0], in = (int)w->shape[1];
    kern_gemm(m->stream, grad(m, p), dy, x, out, in, N, true, false, 1.0f, 1.0f);
    if (dx.p) kern_gemm(m->stream, dx, dy, llama_weight(m, p), N, in, out, false, false, 1.0f, accumulate ? 1.0f : 0.0f);
}

void llama_backward(llama_model *m, const float *dloss) {
    const llama_dims *dm = &m->dims;
    dev_stream *s = m->stream;
    const int B = dm->B, T = dm->T, C = dm->C, NH = dm->NH, KV = dm->KV, D = dm->D, F = dm->F, V = dm->V;
    const int N = B * T;
    const size_t NC = (size_t)N * C, NQ = (size_t)N * NH * D, NK = (size_t)N * KV * D;
    const int32_t *pos = m->have_positions ? m->a.positions : NULL;

    dev_copy_h2d(s, m->a.dloss, dloss, (size_t)N * 4);
    tr_buf dlogits = act(m, m->a.logits, 0); /* in place over the logits */
    kern_cross_entropy_backward(s, dlogits, dlogits, m->a.targets, m->a.dloss, N, V);

    tr_buf dres = act(m, m->g.dresid, 0), dln = act(m, m->g.dln, 0);
    dev_memset_zero(s, m->g.dresid, NC * tr_dtype_size(dm->act_dt));
    linear_backward(m, dln, dlogits, act(m, m->a.lnf, 0), m->p_head, N, false);
    kern_norm_backward(s, &dm->norm, dres, grad(m, m->p_lnf_w), grad(m, m->p_lnf_b), dln,
                       act(m, m->a.resid, (size_t)dm->L * NC), llama_weight(m, m->p_lnf_w), m->a.lnf_mean,
                       m->a.lnf_rstd, N, C);

    tr_buf dq = act(m, m->g.dq, 0), dk = act(m, m->g.dk, 0), dv = act(m, m->g.dv, 0);
    tr_buf datt = act(m, m->g.datt, 0), dh = act(m, m->g.dh, 0), da = act(m, m->g.dact, 0);
    for (int l = dm->L - 1; l >= 0; l--) {
        const llama_layer_params *lp = &m->layer[l];
        tr_buf x = act(m, m->a.resid, (size_t)l * NC), xmid = act(m, m->a.resid_mid, (size_t)l * NC);
        tr_buf ln1 = act(m, m->a.ln1, (size_t)l * NC), ln2 = act(m, m->a.ln2, (size_t)l * NC);
        tr_buf q = act(m, m->a.q, (size_t)l * NQ), att = act(m, m->a.att, (size_t)l * NQ);
        tr_buf k = act(m, m->a.k, (size_t)l * NK), v = act(m, m->a.v, (size_t)l * NK);
        tr_buf h = act(m, m->a.h, (size_t)l * N * 2 * F), a = act(m, m->a.act, (size_t)l * N * F);
        const float *lse = m->a.lse + (size_t)l * N * NH;

        /* MLP: xout = xmid + fc2(swiglu(fc1(norm2(xmid)))) */
        linear_backward(m, da, dres, a, lp->fc2, N, false);
        kern_swiglu_backward(s, dh, da, h, N, F);
        linear_backward(m, dln, dh, ln2, lp->fc1, N, false);
        kern_norm_backward(s, &dm->norm, dres, grad(m, lp->ln2_w), grad(m, lp->ln2_b), dln, xmid,
                           llama_weight(m, lp->ln2_w), m->a.ln2_mean + (size_t)l * N, m->a.ln2_rstd + (size_t)l * N,
                           N, C);

        /* attention: xmid = x + wo(attn(rope(wq ln1), rope(wk ln1), wv ln1)) */
        linear_backward(m, datt, dres, att, lp->wo, N, false);
        kern_attention_backward(s, dq, dk, dv, datt, q, k, v, att, lse, B, T, NH, KV, D);
        kern_rope_backward(s, &dm->rope, dq, pos, B, T, NH, D);
        kern_rope_backward(s, &dm->rope, dk, pos, B, T, KV, D);
        linear_backward(m, dln, dq, ln1, lp->wq, N, false);
        linear_backward(m, dln, dk, ln1, lp->wk, N, true);
        linear_backward(m, dln, dv, ln1, lp->wv, N, true);
        kern_norm_backward(s, &dm->norm, dres, grad(m, lp->ln1_w), grad(m, lp->ln1_b), dln, x,
                           llama_weight(m, lp->ln1_w), m->a.ln1_mean + (size_t)l * N, m->a.ln1_rstd + (size_t)l * N,
                           N, C);
    }
    kern_embedding_backward(s, grad(m, m->p_embed), dres, m->a.tokens, N, C, V);
}
