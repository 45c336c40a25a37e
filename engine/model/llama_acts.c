/* Activation recomputation's bookkeeping: which local layers keep their activations, which are
 * recomputed in the backward pass and in which units, and where a layer's activations live.
 *
 * Megatron (TransformerBlock._checkpointed_forward) applies recomputation per pipeline stage:
 *   full, uniform, k: the stage's layers in units of k; only each unit's input is kept, the unit is
 *                     recomputed as a whole before its backward;
 *   full, block, n:   the stage's first n layers, each its own unit; the rest keep everything;
 *   selective:        core attention only: twinrun's attention kernel is fused (flash-style) and never
 *                     stores the s x s scores, so what selective drops is the attention output and its
 *                     log-sum-exp, recomputed from the kept q, k, v before the attention's backward.
 * The residual stream entering every layer stays in each slot ([nl+1, Nl, C], small beside the rest). */
#include <stdlib.h>

#include "model/llama.h"
#include "twinrun/err.h"

int llama_plan_recompute(llama_model *m, const tr_config *cfg, char *err, size_t errlen) {
    const int nl = m->dims.nl;
    const int n = nl > 0 ? nl : 1;
    m->act_index = calloc((size_t)n, sizeof *m->act_index);
    m->ws_index = calloc((size_t)n, sizeof *m->ws_index);
    m->unit_start = calloc((size_t)n, sizeof *m->unit_start);
    if (!m->act_index || !m->ws_index || !m->unit_start) return tr_errf(err, errlen, "out of host memory");
    m->recompute = cfg->recompute_granularity;
    m->n_stored = nl, m->n_ws = 0;
    for (int l = 0; l < nl; l++) m->act_index[l] = l, m->ws_index[l] = -1, m->unit_start[l] = l;
    if (m->recompute == TR_RECOMPUTE_SELECTIVE) {
        m->n_ws = nl > 0 ? 1 : 0; /* one layer's attention output, rebuilt per layer */
        return 0;
    }
    if (m->recompute != TR_RECOMPUTE_FULL) return 0;
    const int k = cfg->recompute_num_layers;
    if (k < 1) return tr_errf(err, errlen, "--recompute-granularity full needs --recompute-num-layers N");
    if (cfg->recompute_method == TR_RECOMPUTE_METHOD_UNIFORM) {
        if (nl % k)
            return tr_errf(err, errlen, "--recompute-num-layers %d does not divide the %d layers of a stage", k, nl);
        for (int l = 0; l < nl; l++) m->act_index[l] = -1, m->ws_index[l] = l % k, m->unit_start[l] = l - l % k;
        m->n_stored = 0, m->n_ws = nl > 0 ? k : 0;
    } else { /* block: the first k layers of the stage, one by one */
        const int nb = k < nl ? k : nl;
        for (int l = 0; l < nl; l++) {
            m->act_index[l] = l < nb ? -1 : l - nb;
            m->ws_index[l] = l < nb ? 0 : -1;
        }
        m->n_stored = nl - nb, m->n_ws = nb > 0 ? 1 : 0;
    }
    return 0;
}

bool llama_unit_ends_at(const llama_model *m, int l) {
    if (m->recompute != TR_RECOMPUTE_FULL || m->act_index[l] >= 0) return false;
    return l == m->dims.nl - 1 || m->act_index[l + 1] >= 0 || m->unit_start[l + 1] != m->unit_start[l];
}

static tr_buf at(const llama_model *m, void *base, size_t off) {
    return tr_buf_at(tr_buf_make(base, m->dims.act_dt), off);
}

void llama_layer_view_of(const llama_model *m, int slot, int l, llama_layer_view *v) {
    const llama_dims *dm = &m->dims;
    const llama_acts *S = &m->acts[slot];
    const bool kept = m->act_index[l] >= 0;
    const llama_acts *A = kept ? S : &m->ws;
    const size_t i = (size_t)(kept ? m->act_index[l] : m->ws_index[l]);
    const size_t N = (size_t)dm->B * dm->T, Nl = (size_t)dm->Nl, C = (size_t)dm->C;
    const size_t NQ = N * (size_t)dm->NHl * dm->D, NK = N * (size_t)dm->KVl * dm->D, F = (size_t)dm->Fl;
    v->x = at(m, S->resid, (size_t)l * Nl * C);
    v->xout = at(m, S->resid, (size_t)(l + 1) * Nl * C);
    v->xmid = at(m, A->resid_mid, i * Nl * C);
    v->ln1 = at(m, A->ln1, i * N * C), v->ln2 = at(m, A->ln2, i * N * C);
    v->ln1_mean = A->ln1_mean + i * Nl, v->ln1_rstd = A->ln1_rstd + i * Nl;
    v->ln2_mean = A->ln2_mean + i * Nl, v->ln2_rstd = A->ln2_rstd + i * Nl;
    v->q = at(m, A->q, i * NQ);
    const bool qk = dm->qk_norm;
    v->q_pre = qk ? at(m, A->q_pre, i * NQ) : tr_buf_make(NULL, dm->act_dt);
    v->k_pre = qk ? at(m, A->k_pre, i * NK) : tr_buf_make(NULL, dm->act_dt);
    v->qn_mean = qk ? A->qn_mean + i * N * (size_t)dm->NHl : NULL;
    v->qn_rstd = qk ? A->qn_rstd + i * N * (size_t)dm->NHl : NULL;
    v->kn_mean = qk ? A->kn_mean + i * N * (size_t)dm->KVl : NULL;
    v->kn_rstd = qk ? A->kn_rstd + i * N * (size_t)dm->KVl : NULL;
    v->k = at(m, A->k, i * NK), v->v = at(m, A->v, i * NK);
    v->h = at(m, A->h, i * N * 2 * F), v->a = at(m, A->act, i * N * F);
    const size_t NKf = (size_t)dm->B * dm->Tfull * dm->KVl * dm->D;
    const bool cp = m->layout.cp > 1;
    v->kf = cp ? at(m, A->kfull, i * NKf) : tr_buf_make(NULL, dm->act_dt);
    v->vf = cp ? at(m, A->vfull, i * NKf) : tr_buf_make(NULL, dm->act_dt);
    /* selective: the attention output lives in the workspace's single entry whatever the layer */
    const bool ws_attn = m->recompute == TR_RECOMPUTE_SELECTIVE || !kept;
    const llama_acts *AA = ws_attn ? &m->ws : S;
    const size_t ia = m->recompute == TR_RECOMPUTE_SELECTIVE ? 0 : i;
    v->att = at(m, AA->att, ia * NQ);
    v->lse = AA->lse + ia * N * (size_t)dm->NHl;
}
