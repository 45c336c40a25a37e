/* Parameter table, buffers and the layout-independent initialisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama.h"
#include "twinrun/err.h"
#include "twinrun/init_normal.h"
#include "twinrun/master_split.h"

int llama_dims_from_config(llama_dims *dm, const tr_config *cfg, const llama_layout *lay, char *err, size_t errlen) {
    memset(dm, 0, sizeof *dm);
    dm->L = cfg->num_layers;
    dm->C = cfg->hidden_size;
    dm->NH = cfg->num_attention_heads;
    dm->KV = cfg->group_query_attention ? cfg->num_query_groups : cfg->num_attention_heads;
    if (dm->L <= 0 || dm->C <= 0 || dm->NH <= 0 || dm->KV <= 0)
        return tr_errf(err, errlen,
                       "model shape unset: give --num-layers, --hidden-size, --num-attention-heads "
                       "(or --hf-load DIR)");
    if (dm->NH % dm->KV)
        return tr_errf(err, errlen, "--num-query-groups %d does not divide --num-attention-heads %d", dm->KV, dm->NH);
    if (cfg->kv_channels > 0) {
        dm->D = cfg->kv_channels;
    } else {
        if (dm->C % dm->NH)
            return tr_errf(err, errlen,
                           "--hidden-size %d is not divisible by --num-attention-heads %d; "
                           "change one or give --kv-channels",
                           dm->C, dm->NH);
        dm->D = dm->C / dm->NH;
    }
    tr_errlist el;
    tr_errlist_init(&el);
    if (llama_check_config(cfg, &el)) return tr_errlist_format(&el, err, errlen);
    dm->F = cfg->ffn_hidden_size;
    if (dm->F <= 0) return tr_errf(err, errlen, "--ffn-hidden-size is required with --swiglu");
    if (cfg->vocab_size <= 0)
        return tr_errf(err, errlen, "vocabulary size unknown: give --vocab-size (or --hf-load DIR)");
    dm->vocab = cfg->vocab_size;
    int tp = lay->tp, pp = lay->pp;
    if (tp < 1 || pp < 1 || lay->tp_rank < 0 || lay->tp_rank >= tp || lay->pp_rank < 0 || lay->pp_rank >= pp)
        return tr_errf(err, errlen, "layout TP %d rank %d, PP %d rank %d is not a layout", tp, lay->tp_rank, pp,
                       lay->pp_rank);
    int mult = cfg->make_vocab_size_divisible_by * tp;
    if (mult <= 0) mult = tp;
    dm->V = (dm->vocab + mult - 1) / mult * mult; /* Megatron pads to a multiple of divisible_by * TP */
    if (dm->NH % tp || dm->KV % tp || dm->F % tp)
        return tr_errf(err, errlen,
                       "--tensor-model-parallel-size %d must divide the heads (%d), the query groups (%d) "
                       "and --ffn-hidden-size (%d)",
                       tp, dm->NH, dm->KV, dm->F);
    if (dm->L % pp)
        return tr_errf(err, errlen, "--num-layers %d is not divisible by --pipeline-model-parallel-size %d", dm->L, pp);
    dm->NHl = dm->NH / tp, dm->KVl = dm->KV / tp, dm->Fl = dm->F / tp, dm->Vl = dm->V / tp;
    dm->vocab_start = lay->tp_rank * dm->Vl;
    dm->Vl_real = dm->vocab - dm->vocab_start;
    dm->Vl_real = dm->Vl_real < 0 ? 0 : dm->Vl_real > dm->Vl ? dm->Vl : dm->Vl_real;
    dm->nl = dm->L / pp;
    dm->l0 = lay->pp_rank * dm->nl;
    dm->first = lay->pp_rank == 0;
    dm->last = lay->pp_rank == pp - 1;
    dm->B = cfg->micro_batch_size;
    dm->Tfull = cfg->seq_length;
    int cp = lay->cp > 0 ? lay->cp : 1;
    if (dm->B <= 0 || dm->Tfull <= 0)
        return tr_errf(err, errlen, "--micro-batch-size and --seq-length must be positive");
    if (dm->Tfull % (2 * cp) && cp > 1)
        return tr_errf(err, errlen, "--seq-length %d must be divisible by 2 x --context-parallel-size = %d", dm->Tfull,
                       2 * cp);
    dm->T = dm->Tfull / cp;
    dm->sp = cfg->sequence_parallel && tp > 1;
    dm->Nl = dm->B * dm->T;
    if (dm->sp) {
        if (dm->Nl % tp)
            return tr_errf(err, errlen,
                           "--sequence-parallel: micro-batch x sequence tokens %d are not divisible by "
                           "--tensor-model-parallel-size %d",
                           dm->Nl, tp);
        dm->Nl /= tp;
    }
    dm->norm.kind = cfg->normalization == TR_NORM_RMSNORM ? KERN_NORM_RMS : KERN_NORM_LAYER;
    dm->norm.eps = (float)cfg->norm_epsilon;
    dm->norm.zero_centered_gamma = cfg->apply_layernorm_1p;
    dm->norm_bias = dm->norm.kind == KERN_NORM_LAYER;
    dm->linear_bias = !cfg->disable_bias_linear;
    dm->qkv_bias = dm->linear_bias || cfg->add_qkv_bias; /* Megatron: linear biases imply q/k/v biases */
    dm->qk_norm = cfg->qk_layernorm;
    dm->rope.theta = (float)cfg->rotary_base;
    dm->rope.rot_dim = (int)(dm->D * cfg->rotary_percent);
    if (dm->rope.rot_dim <= 0 || dm->rope.rot_dim % 2)
        return tr_errf(err, errlen,
                       "rotary dimension kv-channels %d x --rotary-percent %g = %d must be a positive even "
                       "number",
                       dm->D, cfg->rotary_percent, dm->rope.rot_dim);
    dm->act_dt = cfg->bf16 ? TR_BF16 : TR_F32;
    dm->grad_dt = cfg->bf16 && cfg->grad_reduce_in_bf16 ? TR_BF16 : TR_F32;
    return 0;
}

/* How a parameter is split across tensor-parallel ranks. */
typedef enum split_kind {
    SPLIT_NONE,  /* replicated (norms) */
    SPLIT_ROWS,  /* column-parallel linear or vocabulary slice: rows split */
    SPLIT_COLS,  /* row-parallel linear: columns split */
    SPLIT_FUSED, /* fc1 [gate; up]: the same row slice of each half */
} split_kind;

static int add_param(llama_model *m, int cap, const char *name, int64_t g0, int64_t g1, split_kind split,
                     llama_init_kind init) {
    TR_CHECK(m->nparams < cap, "parameter table overflow");
    const int tp = m->layout.tp, r = m->layout.tp_rank;
    llama_param *p = &m->params_tab[m->nparams];
    llama_placement *pl = &p->place;
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = g1 > 0 ? 2 : 1;
    pl->gshape[0] = g0;
    pl->gshape[1] = g1 > 0 ? g1 : 0;
    int64_t rows = g0, cols = g1 > 0 ? g1 : 1;
    pl->nseg = 1;
    pl->seg_local[0] = 0, pl->seg_global[0] = 0, pl->seg_rows[0] = g0;
    switch (split) {
    case SPLIT_NONE: pl->tp_replicated = true; break;
    case SPLIT_ROWS:
        rows = g0 / tp;
        pl->seg_global[0] = r * rows, pl->seg_rows[0] = rows;
        break;
    case SPLIT_COLS:
        cols = g1 / tp;
        pl->col0 = r * cols;
        break;
    case SPLIT_FUSED: {
        int64_t half = g0 / 2 / tp;
        rows = 2 * half;
        pl->nseg = 2;
        pl->seg_local[0] = 0, pl->seg_global[0] = r * half, pl->seg_rows[0] = half;
        pl->seg_local[1] = half, pl->seg_global[1] = g0 / 2 + r * half, pl->seg_rows[1] = half;
        break;
    }
    }
    p->shape[0] = rows;
    p->shape[1] = g1 > 0 ? cols : 0;
    p->numel = (size_t)rows * (size_t)cols;
    p->offset = m->total;
    p->init = init;
    p->no_weight_decay = p->ndim == 1;
    m->total += p->numel;
    return m->nparams++;
}

size_t llama_global_index(const llama_param *p, size_t e) {
    const llama_placement *pl = &p->place;
    /* a 1-D parameter is a column of rows: a TP-split bias follows its weight's rows */
    int64_t lcols = p->ndim == 2 ? p->shape[1] : 1, gcols = p->ndim == 2 ? pl->gshape[1] : 1;
    int64_t row = (int64_t)e / lcols, col = (int64_t)e % lcols;
    int s = pl->nseg == 2 && row >= pl->seg_local[1] ? 1 : 0;
    int64_t grow = pl->seg_global[s] + (row - pl->seg_local[s]);
    return (size_t)(grow * gcols + pl->col0 + col);
}

bool llama_hf_fc1_half(const char *name, int half, char *out, size_t n) {
    static const char fused[] = "mlp.gate_up_proj";
    const char *gu = strstr(name, fused);
    if (!gu || (strcmp(gu + sizeof fused - 1, ".weight") && strcmp(gu + sizeof fused - 1, ".bias"))) return false;
    snprintf(out, n, "%.*smlp.%s_proj%s", (int)(gu - name), name, half ? "up" : "gate", gu + sizeof fused - 1);
    return true;
}

static void build_table(llama_model *m) {
    const llama_dims *dm = &m->dims;
    int cap = 3 + 20 * dm->nl + 2;
    m->params_tab = calloc((size_t)cap, sizeof *m->params_tab);
    m->layer = calloc((size_t)(dm->nl > 0 ? dm->nl : 1), sizeof *m->layer);
    TR_CHECK(m->params_tab && m->layer, "out of host memory for the parameter table");
    llama_init_kind norm_init = dm->norm.zero_centered_gamma ? LLAMA_INIT_ZEROS : LLAMA_INIT_ONES;
    char name[LLAMA_NAME_LEN];
    m->p_embed = m->p_lnf_w = m->p_lnf_b = m->p_head = -1;
    if (dm->first)
        m->p_embed = add_param(m, cap, "model.embed_tokens.weight", dm->V, dm->C, SPLIT_ROWS, LLAMA_INIT_NORMAL);
    for (int i = 0; i < dm->nl; i++) {
        int l = dm->l0 + i;
        llama_layer_params *lp = &m->layer[i];
#define P(field, suffix, d0, d1, split, init)                                                                          \
    snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);                                                      \
    lp->field = add_param(m, cap, name, d0, d1, split, init)
        P(ln1_w, "input_layernorm.weight", dm->C, 0, SPLIT_NONE, norm_init);
        lp->ln1_b = -1;
        if (dm->norm_bias) {
            P(ln1_b, "input_layernorm.bias", dm->C, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
        }
        lp->bq = lp->bk = lp->bv = lp->bo = lp->b1 = lp->b2 = -1;
        /* biases start at zero (Megatron's init); a column-parallel linear's bias is split with its rows, a
         * row-parallel one's is whole on every TP rank (added once, after the partial sums are reduced) */
        P(wq, "self_attn.q_proj.weight", dm->NH * dm->D, dm->C, SPLIT_ROWS, LLAMA_INIT_NORMAL);
        if (dm->qkv_bias) {
            P(bq, "self_attn.q_proj.bias", dm->NH * dm->D, 0, SPLIT_ROWS, LLAMA_INIT_ZEROS);
        }
        P(wk, "self_attn.k_proj.weight", dm->KV * dm->D, dm->C, SPLIT_ROWS, LLAMA_INIT_NORMAL);
        if (dm->qkv_bias) {
            P(bk, "self_attn.k_proj.bias", dm->KV * dm->D, 0, SPLIT_ROWS, LLAMA_INIT_ZEROS);
        }
        P(wv, "self_attn.v_proj.weight", dm->KV * dm->D, dm->C, SPLIT_ROWS, LLAMA_INIT_NORMAL);
        if (dm->qkv_bias) {
            P(bv, "self_attn.v_proj.bias", dm->KV * dm->D, 0, SPLIT_ROWS, LLAMA_INIT_ZEROS);
        }
        lp->qn_w = lp->qn_b = lp->kn_w = lp->kn_b = -1;
        if (dm->qk_norm) { /* one [D] norm shared by every head (Megatron's q_layernorm, k_layernorm) */
            P(qn_w, "self_attn.q_norm.weight", dm->D, 0, SPLIT_NONE, norm_init);
            if (dm->norm_bias) {
                P(qn_b, "self_attn.q_norm.bias", dm->D, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
            }
            P(kn_w, "self_attn.k_norm.weight", dm->D, 0, SPLIT_NONE, norm_init);
            if (dm->norm_bias) {
                P(kn_b, "self_attn.k_norm.bias", dm->D, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
            }
            const int qk[] = {lp->qn_w, lp->qn_b, lp->kn_w, lp->kn_b};
            for (int j = 0; j < 4; j++)
                if (qk[j] >= 0) m->params_tab[qk[j]].place.tp_partial_grad = true;
        }
        P(wo, "self_attn.o_proj.weight", dm->C, dm->NH * dm->D, SPLIT_COLS, LLAMA_INIT_SCALED);
        if (dm->linear_bias) {
            P(bo, "self_attn.o_proj.bias", dm->C, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
        }
        P(ln2_w, "post_attention_layernorm.weight", dm->C, 0, SPLIT_NONE, norm_init);
        lp->ln2_b = -1;
        if (dm->norm_bias) {
            P(ln2_b, "post_attention_layernorm.bias", dm->C, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
        }
        P(fc1, "mlp.gate_up_proj.weight", 2 * dm->F, dm->C, SPLIT_FUSED, LLAMA_INIT_NORMAL);
        if (dm->linear_bias) {
            P(b1, "mlp.gate_up_proj.bias", 2 * dm->F, 0, SPLIT_FUSED, LLAMA_INIT_ZEROS);
        }
        P(fc2, "mlp.down_proj.weight", dm->C, dm->F, SPLIT_COLS, LLAMA_INIT_SCALED);
        if (dm->linear_bias) {
            P(b2, "mlp.down_proj.bias", dm->C, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
        }
#undef P
    }
    if (dm->last) {
        m->p_lnf_w = add_param(m, cap, "model.norm.weight", dm->C, 0, SPLIT_NONE, norm_init);
        if (dm->norm_bias) m->p_lnf_b = add_param(m, cap, "model.norm.bias", dm->C, 0, SPLIT_NONE, LLAMA_INIT_ZEROS);
        m->p_head = add_param(m, cap, "lm_head.weight", dm->V, dm->C, SPLIT_ROWS, LLAMA_INIT_NORMAL);
    }
}

static void *alloc_or_fail(llama_model *m, size_t bytes, const char *what, int *failed, char *err, size_t errlen) {
    if (*failed) return NULL;
    void *p = dev_alloc(m->dev, bytes ? bytes : 1, what);
    if (!p) {
        *failed = 1;
        tr_errf(err, errlen, "%s; lower --micro-batch-size or --seq-length, or use a device with more memory",
                dev_last_error(m->dev));
    }
    return p;
}

/* What an activation set holds: the slot's own buffers (residual stream, loss side, inputs), the
 * per-layer arrays of `layers` layers, and the attention output and its log-sum-exp of as many. */
enum { ACTS_SLOT = 1, ACTS_LAYERS = 2, ACTS_ATTN = 4 };

/* Allocates (or with dry, only counts) one activation set; returns its bytes. */
static size_t alloc_acts(llama_model *m, llama_acts *a, int layers, int parts, bool dry, int *failed, char *err,
                         size_t errlen) {
    const llama_dims *dm = &m->dims;
    size_t N = (size_t)dm->B * dm->T, L = (size_t)layers, C = (size_t)dm->C;
    size_t qd = (size_t)dm->NHl * dm->D, kd = (size_t)dm->KVl * dm->D, F = (size_t)dm->Fl, V = (size_t)dm->Vl;
    size_t as = tr_dtype_size(dm->act_dt), total = 0;
#define A(ptr, bytes, what)                                                                                            \
    do {                                                                                                               \
        total += (bytes);                                                                                              \
        if (!dry) ptr = alloc_or_fail(m, bytes, what, failed, err, errlen);                                            \
    } while (0)
    size_t Nl = (size_t)dm->Nl;
    if (parts & ACTS_SLOT) A(a->resid, ((size_t)dm->nl + 1) * Nl * C * as, "activations: residual stream");
    if (parts & ACTS_LAYERS && L > 0) {
        A(a->resid_mid, L * Nl * C * as, "activations: residual after attention");
        A(a->ln1, L * N * C * as, "activations: input norm");
        A(a->ln2, L * N * C * as, "activations: post-attention norm");
        A(a->ln1_mean, L * Nl * 4, "activations: norm statistics");
        A(a->ln1_rstd, L * Nl * 4, "activations: norm statistics");
        A(a->ln2_mean, L * Nl * 4, "activations: norm statistics");
        A(a->ln2_rstd, L * Nl * 4, "activations: norm statistics");
        A(a->q, L * N * qd * as, "activations: queries");
        if (dm->qk_norm) {
            A(a->q_pre, L * N * qd * as, "activations: queries before their norm");
            A(a->k_pre, L * N * kd * as, "activations: keys before their norm");
            A(a->qn_mean, L * N * (size_t)dm->NHl * 4, "activations: q norm statistics");
            A(a->qn_rstd, L * N * (size_t)dm->NHl * 4, "activations: q norm statistics");
            A(a->kn_mean, L * N * (size_t)dm->KVl * 4, "activations: k norm statistics");
            A(a->kn_rstd, L * N * (size_t)dm->KVl * 4, "activations: k norm statistics");
        }
        A(a->k, L * N * kd * as, "activations: keys");
        A(a->v, L * N * kd * as, "activations: values");
        if (m->layout.cp > 1) {
            size_t Nf = (size_t)dm->B * dm->Tfull;
            A(a->kfull, L * Nf * kd * as, "activations: gathered keys");
            A(a->vfull, L * Nf * kd * as, "activations: gathered values");
        }
        A(a->h, L * N * 2 * F * as, "activations: fc1 output");
        A(a->act, L * N * F * as, "activations: swiglu output");
    }
    if (parts & ACTS_ATTN && L > 0) {
        A(a->att, L * N * qd * as, "activations: attention output");
        A(a->lse, L * N * (size_t)dm->NHl * 4, "activations: attention log-sum-exp");
    }
    if (parts & ACTS_SLOT) {
        if (dm->last) {
            A(a->lnf, N * C * as, "activations: final norm");
            A(a->lnf_mean, Nl * 4, "activations: norm statistics");
            A(a->lnf_rstd, Nl * 4, "activations: norm statistics");
            A(a->logits, N * V * as, "activations: logits");
            A(a->losses, N * 4, "losses");
            A(a->ce_max, N * 4, "cross-entropy statistics");
            A(a->ce_sum, N * 4, "cross-entropy statistics");
            A(a->ce_target, N * 4, "cross-entropy statistics");
        }
        A(a->tokens, N * 4, "tokens");
        A(a->targets, N * 4, "targets");
        A(a->positions, N * 4, "position ids");
    }
#undef A
    return total;
}

/* Every slot's activations and the recompute workspace, as llama_plan_recompute laid them out; and
 * what the same slots would take without recomputation (the memory report's comparison). */
static void alloc_all_acts(llama_model *m, int *failed, char *err, size_t errlen) {
    const bool selective = m->recompute == TR_RECOMPUTE_SELECTIVE;
    const int slot_parts = ACTS_SLOT | ACTS_LAYERS | (selective ? 0 : ACTS_ATTN);
    m->act_bytes = m->act_bytes_plain = 0;
    for (int i = 0; i < m->layout.slots && !*failed; i++) {
        m->act_bytes += alloc_acts(m, &m->acts[i], m->n_stored, slot_parts, false, failed, err, errlen);
        llama_acts none = {0};
        m->act_bytes_plain +=
            alloc_acts(m, &none, m->dims.nl, ACTS_SLOT | ACTS_LAYERS | ACTS_ATTN, true, failed, err, errlen);
    }
    if (m->n_ws > 0 && !*failed)
        m->act_bytes +=
            alloc_acts(m, &m->ws, m->n_ws, selective ? ACTS_ATTN : ACTS_LAYERS | ACTS_ATTN, false, failed, err, errlen);
}

static void free_acts(llama_model *m, llama_acts *a) {
    void *bufs[] = {a->q_pre,     a->k_pre,  a->qn_mean,   a->qn_rstd,  a->kn_mean,  a->kn_rstd,  a->resid,
                    a->resid_mid, a->ln1,    a->ln2,       a->ln1_mean, a->ln1_rstd, a->ln2_mean, a->ln2_rstd,
                    a->q,         a->k,      a->v,         a->kfull,    a->vfull,    a->att,      a->lse,
                    a->h,         a->act,    a->lnf,       a->lnf_mean, a->lnf_rstd, a->logits,   a->losses,
                    a->ce_max,    a->ce_sum, a->ce_target, a->tokens,   a->targets,  a->positions};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(m->dev, bufs[i]);
}

int llama_cp_position(int seq, int cp, int cp_rank, int j) {
    int chunk_len = seq / (2 * cp);
    int chunk = j < chunk_len ? cp_rank : 2 * cp - 1 - cp_rank;
    return chunk * chunk_len + j % chunk_len;
}

llama_model *llama_create_shard(const tr_config *cfg, const llama_layout *lay, size_t pad_to, coll_comm *tp_comm,
                                coll_comm *cp_comm, dev_device *d, dev_stream *s, char *err, size_t errlen) {
    llama_model *m = calloc(1, sizeof *m);
    if (!m) {
        tr_errf(err, errlen, "out of host memory");
        return NULL;
    }
    if (llama_dims_from_config(&m->dims, cfg, lay, err, errlen)) {
        free(m);
        return NULL;
    }
    if ((lay->tp > 1 && !tp_comm) || (lay->cp > 1 && !cp_comm)) {
        tr_errf(err, errlen, "tensor and context parallelism need their communicators");
        free(m);
        return NULL;
    }
    m->layout = *lay;
    if (m->layout.cp < 1) m->layout.cp = 1;
    m->cp_comm = cp_comm;
    if (m->layout.slots < 1) m->layout.slots = 1;
    m->dev = d;
    m->stream = s;
    m->tp_comm = tp_comm;
    build_table(m);
    if (cfg->fp8 != TR_FP8_MODE_NONE && cfg->fp8_param_gather) llama_fp8_mark_stored(m); /* buckets of their own */
    const llama_dims *dm = &m->dims;
    const int shards = lay->opt_shards > 1 ? lay->opt_shards : 1;
    if (llama_plan_buckets(m, pad_to, shards, err, errlen)) {
        llama_destroy(m);
        return NULL;
    }
    if (m->total_alloc % (size_t)shards || lay->opt_shard < 0 || (shards > 1 && lay->opt_shard >= shards)) {
        tr_errf(err, errlen, "optimizer shard %d of %d of a parameter buffer padded to %zu elements", lay->opt_shard,
                shards, m->total_alloc);
        llama_destroy(m);
        return NULL;
    }
    size_t N = (size_t)dm->B * dm->T, C = (size_t)dm->C;
    size_t qd = (size_t)dm->NHl * dm->D, kd = (size_t)dm->KVl * dm->D, F = (size_t)dm->Fl;
    size_t as = tr_dtype_size(dm->act_dt);
    int failed = 0;
#define A(ptr, bytes, what) ptr = alloc_or_fail(m, bytes, what, &failed, err, errlen)
    const size_t used0 = dev_mem_used(d);
    /* each buffer under its purpose (dev_mem_tag): the memory and predict reports' parts */
    const dev_mem_tag tag0 = dev_mem_tag_set(d, DEV_MEM_WEIGHTS);
    A(m->params, m->total_alloc * as, "parameters"); /* [total_alloc] compute type */
    /* fp32 training updates params in place: they are the master and stay whole. In bf16 the fp32
     * master is the optimizer's alone, so with the distributed optimizer only its shard exists here
     * (Megatron's 6 + 12/DP bytes per parameter: bf16 params and fp32 gradients whole, fp32 master
     * and Adam's two moments sharded) */
    m->master_begin = 0, m->master_len = m->total_alloc;
    if (dm->act_dt == TR_F32) {
        m->master = m->params;
    } else {
        m->master_len = m->total_alloc / (size_t)shards;
        m->master_begin = shards > 1 ? (size_t)lay->opt_shard * m->master_len : 0;
        dev_mem_tag_set(d, DEV_MEM_OPTIMIZER); /* Megatron counts the fp32 master with the optimizer state */
        if (cfg->store_param_remainders)       /* the fp32 master in 2 bytes: params hold its upper halves */
            A(m->master_rem, m->master_len * 2, "fp32 master parameters' remainders"); /* [master_len] int16 */
        else A(m->master, m->master_len * 4, "fp32 master parameters");                /* [master_len] fp32 */
    }
    m->weight_bytes = dev_mem_used(d) - used0;
    dev_mem_tag_set(d, DEV_MEM_MAIN_GRADS);
    A(m->grads, m->total_alloc * tr_dtype_size(dm->grad_dt), "gradients"); /* [total_alloc] grad type */
    m->grad_bytes = dev_mem_used(d) - used0 - m->weight_bytes;
    m->acts = calloc((size_t)m->layout.slots, sizeof *m->acts);
    if (!m->acts) failed = 1, tr_errf(err, errlen, "out of host memory");
    if (!failed && llama_plan_recompute(m, cfg, err, errlen)) failed = 1;
    dev_mem_tag_set(d, DEV_MEM_ACTIVATIONS);
    if (!failed) alloc_all_acts(m, &failed, err, errlen);
    dev_mem_tag_set(d, DEV_MEM_WORKSPACE); /* the backward pass's scratch, reused by every layer */
    A(m->g.dresid, N * C * as, "gradients: residual stream");
    if (dm->sp) {
        dev_mem_tag_set(d, DEV_MEM_COMM);
        A(m->g.sp_loc, (size_t)dm->Nl * C * as, "sequence-parallel staging");
        A(m->g.sp_full, N * C * as, "sequence-parallel staging");
        dev_mem_tag_set(d, DEV_MEM_WORKSPACE);
    }
    A(m->g.dln, N * C * as, "gradients: norm output");
    A(m->g.dq, N * qd * as, "gradients: queries");
    if (dm->qk_norm) {
        A(m->g.dqn, N * qd * as, "gradients: queries before their norm");
        A(m->g.dkn, N * kd * as, "gradients: keys before their norm");
    }
    A(m->g.dk, N * kd * as, "gradients: keys");
    A(m->g.dv, N * kd * as, "gradients: values");
    A(m->g.datt, N * qd * as, "gradients: attention output");
    A(m->g.dh, N * 2 * F * as, "gradients: fc1 output");
    A(m->g.dact, N * F * as, "gradients: swiglu output");
    A(m->g.dloss, N * 4, "loss weights");
    if (dm->qkv_bias) A(m->ones, N * as, "ones for the linear biases");
    if (m->layout.cp > 1) {
        size_t Nf = (size_t)dm->B * dm->Tfull;
        A(m->g.dkfull, Nf * kd * as, "gradients: gathered keys");
        A(m->g.dvfull, Nf * kd * as, "gradients: gathered values");
        dev_mem_tag_set(d, DEV_MEM_COMM);
        A(m->g.gather, Nf * kd * as, "context-parallel staging");
        dev_mem_tag_set(d, DEV_MEM_WORKSPACE);
        A(m->q_pos, (size_t)dm->T * 4, "context-parallel positions");
        A(m->k_pos, (size_t)dm->Tfull * 4, "context-parallel positions");
    }
#undef A
    dev_mem_tag_set(d, tag0);
    if (!failed && llama_fp8_create(m, cfg, err, errlen)) failed = 1;
    if (failed) {
        llama_destroy(m);
        return NULL;
    }
    if (m->layout.cp > 1 && !failed) {
        int32_t *hp = malloc((size_t)dm->Tfull * 4);
        TR_CHECK(hp != NULL, "out of host memory");
        for (int j = 0; j < dm->T; j++) hp[j] = llama_cp_position(dm->Tfull, m->layout.cp, m->layout.cp_rank, j);
        dev_copy_h2d(s, m->q_pos, hp, (size_t)dm->T * 4);
        for (int j = 0; j < dm->Tfull; j++) hp[j] = j;
        dev_copy_h2d(s, m->k_pos, hp, (size_t)dm->Tfull * 4);
        dev_stream_sync(s);
        free(hp);
    }
    if (m->ones) { /* the constant the bias products multiply: 1 in the compute type */
        void *h = malloc(N * as);
        TR_CHECK(h != NULL, "out of host memory");
        for (size_t i = 0; i < N; i++) {
            if (as == 4) ((float *)h)[i] = 1.0f;
            else ((uint16_t *)h)[i] = tr_f32_to_bf16(1.0f);
        }
        dev_copy_h2d(s, m->ones, h, N * as);
        dev_stream_sync(s);
        free(h);
    }
    /* padding stays zero forever: the optimizer's shards may cover it */
    dev_memset_zero(s, m->params, m->total_alloc * as);
    if (m->master && m->master != m->params) dev_memset_zero(s, m->master, m->master_len * 4);
    if (m->master_rem) dev_memset_zero(s, m->master_rem, m->master_len * 2);
    llama_zero_grads(m);
    return m;
}

llama_model *llama_create_table(const tr_config *cfg, const llama_layout *lay, char *err, size_t errlen) {
    llama_model *m = calloc(1, sizeof *m);
    if (!m) {
        tr_errf(err, errlen, "out of host memory");
        return NULL;
    }
    m->layout = lay ? *lay : (llama_layout){.tp = 1, .pp = 1, .cp = 1, .slots = 1};
    if (llama_dims_from_config(&m->dims, cfg, &m->layout, err, errlen)) {
        free(m);
        return NULL;
    }
    build_table(m);
    m->param_elems = m->total_alloc = m->total;
    return m;
}

llama_model *llama_create(const tr_config *cfg, dev_device *d, dev_stream *s, char *err, size_t errlen) {
    const llama_layout one = {.tp = 1, .pp = 1, .cp = 1, .slots = 1};
    return llama_create_shard(cfg, &one, 1, NULL, NULL, d, s, err, errlen);
}

void llama_destroy(llama_model *m) {
    if (!m) return;
    if (!m->dev) { /* a table without buffers (llama_create_table) */
        free(m->act_index), free(m->ws_index), free(m->unit_start);
        free(m->params_tab);
        free(m->layer);
        free(m->bucket_begin), free(m->bucket_fp8);
        free(m);
        return;
    }
    if (m->step && m->step_free) m->step_free(m->step);
    llama_fp8_destroy(m);
    free(m->grad_lazy), free(m->grad_fresh), free(m->grad_zero_runs);
    if (m->acts)
        for (int i = 0; i < m->layout.slots; i++) free_acts(m, &m->acts[i]);
    free_acts(m, &m->ws);
    free(m->act_index), free(m->ws_index), free(m->unit_start);
    void *bufs[] = {m->params,   m->grads,     m->ones,     m->g.dqn,    m->g.dkn,    m->g.dresid, m->g.dln,
                    m->g.dq,     m->g.dk,      m->g.dv,     m->g.datt,   m->g.dh,     m->g.dact,   m->g.dloss,
                    m->g.sp_loc, m->g.sp_full, m->g.dkfull, m->g.dvfull, m->g.gather, m->q_pos,    m->k_pos};
    if (m->master != m->params) dev_free(m->dev, m->master);
    dev_free(m->dev, m->master_rem);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(m->dev, bufs[i]);
    free(m->acts);
    free(m->params_tab);
    free(m->layer);
    free(m->bucket_begin), free(m->bucket_fp8);
    free(m);
}

int llama_find_param(const llama_model *m, const char *name) {
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params_tab[i].name, name)) return i;
    return -1;
}

static double init_std(llama_init_kind kind, double std, int num_layers) {
    return kind == LLAMA_INIT_SCALED ? std / sqrt(2.0 * num_layers) : std;
}

float llama_init_value(uint64_t seed, const char *name, size_t e, llama_init_kind kind, double std, int num_layers) {
    switch (kind) {
    case LLAMA_INIT_ONES: return 1.0f;
    case LLAMA_INIT_ZEROS: return 0.0f;
    case LLAMA_INIT_SCALED:
    case LLAMA_INIT_NORMAL: break;
    }
    return (float)tr_init_normal_double(tr_init_key(seed, name), (uint64_t)e, init_std(kind, std, num_layers));
}

bool llama_master_sharded(const llama_model *m) { return m->master_len < m->total_alloc; }

size_t llama_master_count(const llama_model *m) {
    if (m->nbuckets > 1 && llama_master_sharded(m)) return m->master_len; /* padding between its segments too */
    if (m->master_begin >= m->total) return 0;
    return m->total - m->master_begin < m->master_len ? m->total - m->master_begin : m->master_len;
}

/* Writes fp32 values of parameter-buffer elements [lo, lo + n) into out[n] (a range of master). */
typedef void (*master_fill_fn)(llama_model *m, void *ctx, size_t lo, size_t n, float *out);

/* fill_master with remainders: no fp32 buffer holds a shard, so the values pass through a small
 * staging buffer, chunk by chunk, split into params (every element) and the remainders (this rank's). */
static void fill_master_split(llama_model *m, master_fill_fn fill, void *ctx) {
    const bool sharded = llama_master_sharded(m);
    const int shards = sharded ? (int)(m->total_alloc / m->master_len) : 1, own = sharded ? m->layout.opt_shard : 0;
    const size_t chunk = m->total < ((size_t)1 << 22) ? (m->total ? m->total : 1) : (size_t)1 << 22;
    const dev_mem_tag tag = dev_mem_tag_set(m->dev, DEV_MEM_WORKSPACE);
    float *tmp = dev_alloc(m->dev, chunk * sizeof(float), "fp32 master staging"); /* [chunk] */
    dev_mem_tag_set(m->dev, tag);
    if (!tmp)
        tr_fatal("no device memory for the 16 MiB that stage the fp32 master weights: %s", dev_last_error(m->dev));
    const tr_buf params = tr_buf_make(m->params, m->dims.act_dt); /* [total_alloc] */
    for (int sh = 0; sh < shards; sh++)
        for (int b = 0; b < (sharded ? m->nbuckets : 1); b++) {
            const llama_seg sg = sharded ? llama_shard_seg(m, shards, sh, b) : (llama_seg){0, m->total, 0};
            const size_t n = sg.begin >= m->total ? 0 : m->total - sg.begin < sg.len ? m->total - sg.begin : sg.len;
            for (size_t off = 0; off < n; off += chunk) {
                const size_t len = n - off < chunk ? n - off : chunk;
                fill(m, ctx, sg.begin + off, len, tmp);
                kern_master_split(m->stream, tr_buf_at(params, sg.begin + off),
                                  sh == own ? m->master_rem + sg.local + off : NULL, tmp, len);
            }
        }
    dev_stream_sync(m->stream);
    dev_free(m->dev, tmp);
}

/* Fills master and params from fill. A sharded master cannot hold the whole model's fp32 values that
 * the compute copy is cast from, so the master buffer stages every optimizer shard in turn: fill
 * writes its fp32 values, a cast makes its compute-type params, and the rank's own shard comes last so
 * master ends holding it. Every params element is the same cast of the same value as from a whole
 * master, bit for bit, with no second whole fp32 buffer and no collective. */
static void fill_master(llama_model *m, master_fill_fn fill, void *ctx) {
    if (m->master_rem) {
        fill_master_split(m, fill, ctx);
        return;
    }
    if (!llama_master_sharded(m)) {
        fill(m, ctx, 0, m->total, m->master);
        llama_sync_params(m);
        return;
    }
    const int shards = (int)(m->total_alloc / m->master_len), own = m->layout.opt_shard;
    const tr_buf params = tr_buf_make(m->params, m->dims.act_dt); /* [total_alloc] */
    for (int k = 1; k <= shards; k++) {
        const int sh = (own + k) % shards;                        /* k == shards: the own shard, last */
        dev_memset_zero(m->stream, m->master, m->master_len * 4); /* the padding stays zero */
        for (int b = 0; b < m->nbuckets; b++) {                   /* the shard's segment of each bucket */
            const llama_seg sg = llama_shard_seg(m, shards, sh, b);
            const size_t n = sg.begin >= m->total ? 0 : m->total - sg.begin < sg.len ? m->total - sg.begin : sg.len;
            fill(m, ctx, sg.begin, n, m->master + sg.local);
        }
        for (int b = 0; b < m->nbuckets; b++) {
            const llama_seg sg = llama_shard_seg(m, shards, sh, b);
            kern_cast(m->stream, tr_buf_at(params, sg.begin), tr_buf_f32(m->master + sg.local), sg.len);
        }
    }
}

typedef struct init_ctx {
    uint64_t seed;
    double std;
} init_ctx;

/* Each parameter's elements in [lo, lo + n) are generated where they live (kern_init_param): on a GPU,
 * the 1.5B model in milliseconds rather than a minute on the host, with the host's values bit for bit. */
static void init_fill(llama_model *m, void *arg, size_t lo, size_t n, float *out) {
    const init_ctx *c = arg;
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        const size_t b = p->offset > lo ? p->offset : lo;
        const size_t e = p->offset + p->numel < lo + n ? p->offset + p->numel : lo + n;
        if (b >= e) continue;
        const llama_placement *pl = &p->place;
        const bool two_d = p->ndim == 2;
        kern_init_desc d = {
            .normal = p->init == LLAMA_INIT_NORMAL || p->init == LLAMA_INIT_SCALED,
            .constant = p->init == LLAMA_INIT_ONES ? 1.0f : 0.0f,
            .key = tr_init_key(c->seed, p->name),
            .std = init_std(p->init, c->std, m->dims.L),
            .cols = two_d ? p->shape[1] : 1,
            .gcols = two_d ? pl->gshape[1] : 1,
            .col0 = two_d ? pl->col0 : 0,
            .nseg = two_d ? pl->nseg : 1,
            .seg_local1 = two_d && pl->nseg == 2 ? pl->seg_local[1] : 0,
            .seg_global0 = two_d ? pl->seg_global[0] - pl->seg_local[0] : 0,
            .seg_global1 = two_d && pl->nseg == 2 ? pl->seg_global[1] : 0,
            .first = (int64_t)(b - p->offset),
        };
        kern_init_param(m->stream, &d, out + (b - lo), e - b);
    }
}

void llama_init_params(llama_model *m, uint64_t seed, double std) {
    llama_params_settle(m);
    init_ctx c = {seed, std};
    fill_master(m, init_fill, &c);
    llama_fp8_cast_all(m);
    dev_stream_sync(m->stream);
}

static void host_fill(llama_model *m, void *arg, size_t lo, size_t n, float *out) {
    dev_copy_h2d(m->stream, out, (const float *)arg + lo, n * sizeof(float));
}

void llama_set_master(llama_model *m, const float *host) {
    llama_params_settle(m);
    fill_master(m, host_fill, (void *)host);
    llama_fp8_cast_all(m);
    dev_stream_sync(m->stream);
}

void llama_sync_params(llama_model *m) {
    llama_params_settle(m);
    if (m->params == m->master || m->master_rem) return; /* remainders: params are the master's upper halves */
    const tr_buf params = tr_buf_make(m->params, m->dims.act_dt);
    if (!llama_master_sharded(m)) {
        kern_cast(m->stream, params, tr_buf_f32(m->master), m->total);
        return;
    }
    const int shards = (int)(m->total_alloc / m->master_len);
    for (int b = 0; b < m->nbuckets; b++) { /* this rank's segment of each bucket, less padding past total */
        const llama_seg sg = llama_shard_seg(m, shards, m->layout.opt_shard, b);
        const size_t n = sg.begin >= m->total ? 0 : m->total - sg.begin < sg.len ? m->total - sg.begin : sg.len;
        if (n) kern_cast(m->stream, tr_buf_at(params, sg.begin), tr_buf_f32(m->master + sg.local), n);
    }
}

void llama_get_master(llama_model *m, float *host) {
    TR_CHECK(!llama_master_sharded(m), "llama_get_master: this rank keeps only its distributed-optimizer shard of "
                                       "the fp32 master weights, not the whole model's");
    llama_download_master(m, host);
}

/* host[local + i] = the join of params[begin + i] (bf16 bits) and rem[local + i], i < n. */
static void join_range(llama_model *m, float *host, size_t begin, size_t local, size_t n, uint16_t *hi, int16_t *rem) {
    dev_copy_d2h(m->stream, hi, (const uint16_t *)m->params + begin, n * sizeof *hi);
    dev_copy_d2h(m->stream, rem, m->master_rem + local, n * sizeof *rem);
    dev_stream_sync(m->stream);
    for (size_t i = 0; i < n; i++) host[local + i] = tr_master_join(hi[i], rem[i]);
}

void llama_download_master(llama_model *m, float *host) {
    llama_params_settle(m);
    const size_t count = llama_master_count(m);
    if (!m->master_rem) {
        dev_copy_d2h(m->stream, host, m->master, count * sizeof(float));
        dev_stream_sync(m->stream);
        return;
    }
    uint16_t *hi = malloc((count ? count : 1) * sizeof *hi);
    int16_t *rem = malloc((count ? count : 1) * sizeof *rem);
    TR_CHECK(hi && rem, "out of host memory for the master weights");
    if (!llama_master_sharded(m)) {
        join_range(m, host, 0, 0, count, hi, rem);
    } else {
        const int shards = (int)(m->total_alloc / m->master_len);
        for (int b = 0; b < m->nbuckets; b++) { /* this rank's segment of each bucket, as far as count reaches */
            const llama_seg sg = llama_shard_seg(m, shards, m->layout.opt_shard, b);
            const size_t n = sg.local >= count ? 0 : count - sg.local < sg.len ? count - sg.local : sg.len;
            if (n) join_range(m, host, sg.begin, sg.local, n, hi, rem);
        }
    }
    free(hi), free(rem);
}

void llama_get_grads(llama_model *m, float *host) {
    llama_params_settle(m);
    if (m->dims.grad_dt == TR_F32) {
        dev_copy_d2h(m->stream, host, m->grads, m->total * sizeof(float));
    } else {
        uint16_t *tmp = malloc(m->total * 2);
        TR_CHECK(tmp != NULL, "out of host memory reading gradients");
        dev_copy_d2h(m->stream, tmp, m->grads, m->total * 2);
        dev_stream_sync(m->stream);
        for (size_t i = 0; i < m->total; i++) host[i] = tr_bf16_to_f32(tmp[i]);
        free(tmp);
    }
    dev_stream_sync(m->stream);
}

void llama_params_settle(llama_model *m) {
    if (m->params_needed) m->params_needed(m->params_needed_arg, m->total_alloc);
}

void llama_zero_grads(llama_model *m) {
    llama_params_settle(m);
    m->grad_zero_pending = false;
    dev_memset_zero(m->stream, m->grads, m->total_alloc * tr_dtype_size(m->dims.grad_dt));
    if (m->grad_fresh) memset(m->grad_fresh, 0, (size_t)m->nparams * sizeof *m->grad_fresh);
}

/* Which gradients the linear layers' weight-gradient GEMMs write first (llama_backward.c's
 * linear_backward: beta 0 on first use), and the runs of the buffer that are zeroed at each step's start:
 * everything else, the padding between buckets and at the end included. */
static void plan_lazy_grads(llama_model *m) {
    m->grad_lazy = calloc((size_t)m->nparams + 1, sizeof *m->grad_lazy);
    m->grad_fresh = calloc((size_t)m->nparams + 1, sizeof *m->grad_fresh);
    m->grad_zero_runs = calloc((size_t)m->nparams + 2, sizeof *m->grad_zero_runs);
    TR_CHECK(m->grad_lazy && m->grad_fresh && m->grad_zero_runs, "out of host memory for the gradient plan");
    for (int l = 0; l < m->dims.nl; l++) {
        const llama_layer_params *lp = &m->layer[l];
        const int w[] = {lp->wq, lp->wk, lp->wv, lp->wo, lp->fc1, lp->fc2};
        for (size_t j = 0; j < sizeof w / sizeof w[0]; j++) m->grad_lazy[w[j]] = true;
    }
    if (m->p_head >= 0 && m->p_head != m->p_embed) m->grad_lazy[m->p_head] = true;
    /* the parameters lie in ascending offsets: the runs between lazy ones */
    size_t at = 0;
    int n = 0;
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        if (!m->grad_lazy[i] || p->numel == 0) continue;
        TR_CHECK(p->offset >= at, "parameters out of order in the gradient buffer");
        if (p->offset > at) m->grad_zero_runs[n][0] = at, m->grad_zero_runs[n][1] = p->offset, n++;
        at = p->offset + p->numel;
    }
    if (m->total_alloc > at) m->grad_zero_runs[n][0] = at, m->grad_zero_runs[n][1] = m->total_alloc, n++;
    m->n_grad_zero_runs = n;
}

void llama_begin_grads(llama_model *m) {
    if (!m->grad_lazy) plan_lazy_grads(m);
    m->grad_zero_pending = !m->grad_zeroed_ahead;
    m->grad_zeroed_ahead = false;
    for (int i = 0; i < m->nparams; i++) m->grad_fresh[i] = m->grad_lazy[i] && m->params_tab[i].numel > 0;
}

void llama_zero_pending_grads(llama_model *m) {
    if (!m->grad_zero_pending) return;
    m->grad_zero_pending = false;
    llama_params_settle(m); /* a no-op after a forward pass: it waited for the update piece by piece */
    const size_t es = tr_dtype_size(m->dims.grad_dt);
    for (int r = 0; r < m->n_grad_zero_runs; r++)
        dev_memset_zero(m->stream, (char *)m->grads + m->grad_zero_runs[r][0] * es,
                        (m->grad_zero_runs[r][1] - m->grad_zero_runs[r][0]) * es);
}

void llama_zero_grad_runs(llama_model *m, dev_stream *s, size_t lo, size_t hi) {
    if (!m->grad_lazy) plan_lazy_grads(m);
    const size_t es = tr_dtype_size(m->dims.grad_dt);
    for (int r = 0; r < m->n_grad_zero_runs; r++) {
        const size_t b = m->grad_zero_runs[r][0] > lo ? m->grad_zero_runs[r][0] : lo;
        const size_t e = m->grad_zero_runs[r][1] < hi ? m->grad_zero_runs[r][1] : hi;
        if (b < e) dev_memset_zero(s, (char *)m->grads + b * es, (e - b) * es);
    }
}

void llama_settle_grads(llama_model *m, size_t watermark) {
    if (!m->grad_fresh) return;
    llama_params_settle(m); /* a step that ends before its forward pass: the update may still read them */
    llama_zero_pending_grads(m);
    const size_t es = tr_dtype_size(m->dims.grad_dt);
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        if (!m->grad_fresh[i] || p->offset < watermark) continue;
        dev_memset_zero(m->stream, (char *)m->grads + p->offset * es, p->numel * es);
        m->grad_fresh[i] = false;
    }
}
