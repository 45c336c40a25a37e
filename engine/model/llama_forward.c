/* Forward pass of one micro-batch: embedding, L decoder layers, final norm, output layer, loss. */
#include <stdlib.h>

#include "model/llama.h"
#include "twinrun/err.h"

/* Typed view of element `off` of an activation buffer. */
static tr_buf act(const llama_model *m, void *base, size_t off) {
    return tr_buf_at(tr_buf_make(base, m->dims.act_dt), off);
}

tr_buf llama_weight(const llama_model *m, int p) {
    if (p < 0) return tr_buf_make(NULL, m->dims.act_dt);
    return tr_buf_at(tr_buf_make(m->params, m->dims.act_dt), m->params_tab[p].offset);
}

/* y[N, out] = x[N, in] @ W[out, in]^T */
static void linear_forward(const llama_model *m, tr_buf y, tr_buf x, int p, int N) {
    const llama_param *w = &m->params_tab[p];
    kern_gemm(m->stream, y, x, llama_weight(m, p), N, (int)w->shape[0], (int)w->shape[1], false, true, 1.0f, 0.0f);
}

void llama_forward(llama_model *m, const int32_t *tokens, const int32_t *targets, const int32_t *positions) {
    const llama_dims *dm = &m->dims;
    dev_stream *s = m->stream;
    const int B = dm->B, T = dm->T, C = dm->C, NH = dm->NH, KV = dm->KV, D = dm->D, F = dm->F, V = dm->V;
    const int N = B * T;
    const size_t NC = (size_t)N * C, NQ = (size_t)N * NH * D, NK = (size_t)N * KV * D;

    for (int n = 0; n < N; n++) {
        if (tokens[n] < 0 || tokens[n] >= dm->vocab || targets[n] < 0 || targets[n] >= dm->vocab)
            tr_fatal("token %d or label %d at position %d of the micro-batch is outside the vocabulary [0, %d); "
                     "check the data against --vocab-size",
                     tokens[n], targets[n], n, dm->vocab);
    }
    dev_copy_h2d(s, m->a.tokens, tokens, (size_t)N * 4);
    dev_copy_h2d(s, m->a.targets, targets, (size_t)N * 4);
    m->have_positions = positions != NULL;
    if (positions) dev_copy_h2d(s, m->a.positions, positions, (size_t)N * 4);
    const int32_t *pos = positions ? m->a.positions : NULL;

    kern_embedding_forward(s, act(m, m->a.resid, 0), m->a.tokens, llama_weight(m, m->p_embed), N, C, V);

    for (int l = 0; l < dm->L; l++) {
        const llama_layer_params *lp = &m->layer[l];
        tr_buf x = act(m, m->a.resid, (size_t)l * NC);        /* [N, C] */
        tr_buf xmid = act(m, m->a.resid_mid, (size_t)l * NC); /* [N, C] */
        tr_buf xout = act(m, m->a.resid, (size_t)(l + 1) * NC);
        tr_buf ln1 = act(m, m->a.ln1, (size_t)l * NC), ln2 = act(m, m->a.ln2, (size_t)l * NC);
        tr_buf q = act(m, m->a.q, (size_t)l * NQ), att = act(m, m->a.att, (size_t)l * NQ); /* [N, NH*D] */
        tr_buf k = act(m, m->a.k, (size_t)l * NK), v = act(m, m->a.v, (size_t)l * NK);     /* [N, KV*D] */
        tr_buf h = act(m, m->a.h, (size_t)l * N * 2 * F);                                   /* [N, 2F] */
        tr_buf a = act(m, m->a.act, (size_t)l * N * F);                                     /* [N, F] */
        float *lse = m->a.lse + (size_t)l * N * NH;                                          /* [B, NH, T] */

        kern_norm_forward(s, &dm->norm, ln1, m->a.ln1_mean + (size_t)l * N, m->a.ln1_rstd + (size_t)l * N, x,
                          llama_weight(m, lp->ln1_w), llama_weight(m, lp->ln1_b), N, C);
        linear_forward(m, q, ln1, lp->wq, N);
        linear_forward(m, k, ln1, lp->wk, N);
        linear_forward(m, v, ln1, lp->wv, N);
        kern_rope_forward(s, &dm->rope, q, pos, B, T, NH, D);
        kern_rope_forward(s, &dm->rope, k, pos, B, T, KV, D);
        kern_attention_forward(s, att, lse, q, k, v, B, T, NH, KV, D);
        linear_forward(m, xmid, att, lp->wo, N);
        kern_add(s, xmid, xmid, x, NC);

        kern_norm_forward(s, &dm->norm, ln2, m->a.ln2_mean + (size_t)l * N, m->a.ln2_rstd + (size_t)l * N, xmid,
                          llama_weight(m, lp->ln2_w), llama_weight(m, lp->ln2_b), N, C);
        linear_forward(m, h, ln2, lp->fc1, N);
        kern_swiglu_forward(s, a, h, N, F);
        linear_forward(m, xout, a, lp->fc2, N);
        kern_add(s, xout, xout, xmid, NC);
    }

    tr_buf xl = act(m, m->a.resid, (size_t)dm->L * NC);
    tr_buf lnf = act(m, m->a.lnf, 0);
    kern_norm_forward(s, &dm->norm, lnf, m->a.lnf_mean, m->a.lnf_rstd, xl, llama_weight(m, m->p_lnf_w),
                      llama_weight(m, m->p_lnf_b), N, C);
    linear_forward(m, act(m, m->a.logits, 0), lnf, m->p_head, N);
    kern_cross_entropy_forward(s, m->a.losses, act(m, m->a.logits, 0), m->a.targets, N, V);
}

void llama_get_losses(llama_model *m, float *losses) {
    size_t N = (size_t)m->dims.B * m->dims.T;
    dev_copy_d2h(m->stream, losses, m->a.losses, N * 4);
    dev_stream_sync(m->stream);
}

void llama_get_logits(llama_model *m, float *logits) {
    size_t n = (size_t)m->dims.B * m->dims.T * m->dims.V;
    if (m->dims.act_dt == TR_F32) {
        dev_copy_d2h(m->stream, logits, m->a.logits, n * 4);
        dev_stream_sync(m->stream);
        return;
    }
    uint16_t *tmp = malloc(n * 2);
    TR_CHECK(tmp != NULL, "out of host memory reading logits");
    dev_copy_d2h(m->stream, tmp, m->a.logits, n * 2);
    dev_stream_sync(m->stream);
    for (size_t i = 0; i < n; i++) logits[i] = tr_bf16_to_f32(tmp[i]);
    free(tmp);
}
