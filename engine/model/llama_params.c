/* Parameter table, buffers and the layout-independent initialisation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama.h"
#include "twinrun/err.h"

int llama_dims_from_config(llama_dims *dm, const tr_config *cfg, char *err, size_t errlen) {
    memset(dm, 0, sizeof *dm);
    dm->L = cfg->num_layers;
    dm->C = cfg->hidden_size;
    dm->NH = cfg->num_attention_heads;
    dm->KV = cfg->group_query_attention ? cfg->num_query_groups : cfg->num_attention_heads;
    if (dm->L <= 0 || dm->C <= 0 || dm->NH <= 0 || dm->KV <= 0)
        return tr_errf(err, errlen, "model shape unset: give --num-layers, --hidden-size, --num-attention-heads "
                                    "(or --hf-load DIR)");
    if (dm->NH % dm->KV)
        return tr_errf(err, errlen, "--num-query-groups %d does not divide --num-attention-heads %d", dm->KV, dm->NH);
    if (cfg->kv_channels > 0) {
        dm->D = cfg->kv_channels;
    } else {
        if (dm->C % dm->NH)
            return tr_errf(err, errlen, "--hidden-size %d is not divisible by --num-attention-heads %d; "
                                        "change one or give --kv-channels", dm->C, dm->NH);
        dm->D = dm->C / dm->NH;
    }
    if (!cfg->swiglu) return tr_errf(err, errlen, "twinrun's Llama needs --swiglu");
    if (!cfg->disable_bias_linear)
        return tr_errf(err, errlen, "twinrun's Llama has no linear biases: add --disable-bias-linear");
    if (!cfg->untie_embeddings_and_output_weights)
        return tr_errf(err, errlen, "tied embeddings are not supported: add --untie-embeddings-and-output-weights");
    if (cfg->position_embedding_type != TR_POS_ROPE)
        return tr_errf(err, errlen, "Llama uses rotary embeddings: add --position-embedding-type rope");
    dm->F = cfg->ffn_hidden_size;
    if (dm->F <= 0) return tr_errf(err, errlen, "--ffn-hidden-size is required with --swiglu");
    if (cfg->vocab_size <= 0) return tr_errf(err, errlen, "vocabulary size unknown: give --vocab-size (or --hf-load DIR)");
    dm->vocab = cfg->vocab_size;
    int mult = cfg->make_vocab_size_divisible_by * cfg->tensor_model_parallel_size;
    if (mult <= 0) mult = 1;
    dm->V = (dm->vocab + mult - 1) / mult * mult; /* Megatron pads to a multiple of divisible_by * TP */
    dm->B = cfg->micro_batch_size;
    dm->T = cfg->seq_length;
    if (dm->B <= 0 || dm->T <= 0) return tr_errf(err, errlen, "--micro-batch-size and --seq-length must be positive");
    dm->norm.kind = cfg->normalization == TR_NORM_RMSNORM ? KERN_NORM_RMS : KERN_NORM_LAYER;
    dm->norm.eps = (float)cfg->norm_epsilon;
    dm->norm.zero_centered_gamma = cfg->apply_layernorm_1p;
    dm->norm_bias = dm->norm.kind == KERN_NORM_LAYER;
    dm->rope.theta = (float)cfg->rotary_base;
    dm->rope.rot_dim = (int)(dm->D * cfg->rotary_percent);
    if (dm->rope.rot_dim <= 0 || dm->rope.rot_dim % 2)
        return tr_errf(err, errlen, "rotary dimension kv-channels %d x --rotary-percent %g = %d must be a positive even "
                                    "number", dm->D, cfg->rotary_percent, dm->rope.rot_dim);
    dm->act_dt = cfg->bf16 ? TR_BF16 : TR_F32;
    dm->grad_dt = cfg->bf16 && cfg->grad_reduce_in_bf16 ? TR_BF16 : TR_F32;
    return 0;
}

static int add_param(llama_model *m, int cap, const char *name, int64_t d0, int64_t d1, llama_init_kind init) {
    TR_CHECK(m->nparams < cap, "parameter table overflow");
    llama_param *p = &m->params_tab[m->nparams];
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    p->offset = m->total;
    p->init = init;
    p->no_weight_decay = p->ndim == 1;
    m->total += p->numel;
    return m->nparams++;
}

static void build_table(llama_model *m) {
    const llama_dims *dm = &m->dims;
    int cap = 3 + 10 * dm->L + 2;
    m->params_tab = calloc((size_t)cap, sizeof *m->params_tab);
    m->layer = calloc((size_t)dm->L, sizeof *m->layer);
    TR_CHECK(m->params_tab && m->layer, "out of host memory for the parameter table");
    llama_init_kind norm_init = dm->norm.zero_centered_gamma ? LLAMA_INIT_ZEROS : LLAMA_INIT_ONES;
    char name[LLAMA_NAME_LEN];
    m->p_embed = add_param(m, cap, "model.embed_tokens.weight", dm->V, dm->C, LLAMA_INIT_NORMAL);
    for (int l = 0; l < dm->L; l++) {
        llama_layer_params *lp = &m->layer[l];
#define P(field, suffix, d0, d1, init)                                                 \
    snprintf(name, sizeof name, "model.layers.%d.%s", l, suffix);                     \
    lp->field = add_param(m, cap, name, d0, d1, init)
        P(ln1_w, "input_layernorm.weight", dm->C, 0, norm_init);
        lp->ln1_b = -1;
        if (dm->norm_bias) { P(ln1_b, "input_layernorm.bias", dm->C, 0, LLAMA_INIT_ZEROS); }
        P(wq, "self_attn.q_proj.weight", dm->NH * dm->D, dm->C, LLAMA_INIT_NORMAL);
        P(wk, "self_attn.k_proj.weight", dm->KV * dm->D, dm->C, LLAMA_INIT_NORMAL);
        P(wv, "self_attn.v_proj.weight", dm->KV * dm->D, dm->C, LLAMA_INIT_NORMAL);
        P(wo, "self_attn.o_proj.weight", dm->C, dm->NH * dm->D, LLAMA_INIT_SCALED);
        P(ln2_w, "post_attention_layernorm.weight", dm->C, 0, norm_init);
        lp->ln2_b = -1;
        if (dm->norm_bias) { P(ln2_b, "post_attention_layernorm.bias", dm->C, 0, LLAMA_INIT_ZEROS); }
        P(fc1, "mlp.gate_up_proj.weight", 2 * dm->F, dm->C, LLAMA_INIT_NORMAL);
        P(fc2, "mlp.down_proj.weight", dm->C, dm->F, LLAMA_INIT_SCALED);
#undef P
    }
    m->p_lnf_w = add_param(m, cap, "model.norm.weight", dm->C, 0, norm_init);
    m->p_lnf_b = dm->norm_bias ? add_param(m, cap, "model.norm.bias", dm->C, 0, LLAMA_INIT_ZEROS) : -1;
    m->p_head = add_param(m, cap, "lm_head.weight", dm->V, dm->C, LLAMA_INIT_NORMAL);
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

llama_model *llama_create(const tr_config *cfg, dev_device *d, dev_stream *s, char *err, size_t errlen) {
    llama_model *m = calloc(1, sizeof *m);
    if (!m) {
        tr_errf(err, errlen, "out of host memory");
        return NULL;
    }
    if (llama_dims_from_config(&m->dims, cfg, err, errlen)) {
        free(m);
        return NULL;
    }
    m->dev = d;
    m->stream = s;
    build_table(m);
    const llama_dims *dm = &m->dims;
    size_t N = (size_t)dm->B * dm->T, L = (size_t)dm->L, C = (size_t)dm->C;
    size_t qd = (size_t)dm->NH * dm->D, kd = (size_t)dm->KV * dm->D, F = (size_t)dm->F, V = (size_t)dm->V;
    size_t as = tr_dtype_size(dm->act_dt);
    int failed = 0;
#define A(ptr, bytes, what) ptr = alloc_or_fail(m, bytes, what, &failed, err, errlen)
    A(m->params, m->total * as, "parameters");
    if (dm->act_dt == TR_F32) m->master = m->params;
    else A(m->master, m->total * 4, "fp32 master parameters");
    A(m->grads, m->total * tr_dtype_size(dm->grad_dt), "gradients");
    A(m->a.resid, (L + 1) * N * C * as, "activations: residual stream");
    A(m->a.resid_mid, L * N * C * as, "activations: residual after attention");
    A(m->a.ln1, L * N * C * as, "activations: input norm");
    A(m->a.ln2, L * N * C * as, "activations: post-attention norm");
    A(m->a.ln1_mean, L * N * 4, "activations: norm statistics");
    A(m->a.ln1_rstd, L * N * 4, "activations: norm statistics");
    A(m->a.ln2_mean, L * N * 4, "activations: norm statistics");
    A(m->a.ln2_rstd, L * N * 4, "activations: norm statistics");
    A(m->a.q, L * N * qd * as, "activations: queries");
    A(m->a.k, L * N * kd * as, "activations: keys");
    A(m->a.v, L * N * kd * as, "activations: values");
    A(m->a.att, L * N * qd * as, "activations: attention output");
    A(m->a.lse, L * N * (size_t)dm->NH * 4, "activations: attention log-sum-exp");
    A(m->a.h, L * N * 2 * F * as, "activations: fc1 output");
    A(m->a.act, L * N * F * as, "activations: swiglu output");
    A(m->a.lnf, N * C * as, "activations: final norm");
    A(m->a.lnf_mean, N * 4, "activations: norm statistics");
    A(m->a.lnf_rstd, N * 4, "activations: norm statistics");
    A(m->a.logits, N * V * as, "activations: logits");
    A(m->a.losses, N * 4, "losses");
    A(m->a.dloss, N * 4, "loss weights");
    A(m->a.tokens, N * 4, "tokens");
    A(m->a.targets, N * 4, "targets");
    A(m->a.positions, N * 4, "position ids");
    A(m->g.dresid, N * C * as, "gradients: residual stream");
    A(m->g.dln, N * C * as, "gradients: norm output");
    A(m->g.dq, N * qd * as, "gradients: queries");
    A(m->g.dk, N * kd * as, "gradients: keys");
    A(m->g.dv, N * kd * as, "gradients: values");
    A(m->g.datt, N * qd * as, "gradients: attention output");
    A(m->g.dh, N * 2 * F * as, "gradients: fc1 output");
    A(m->g.dact, N * F * as, "gradients: swiglu output");
#undef A
    if (failed) {
        llama_destroy(m);
        return NULL;
    }
    llama_zero_grads(m);
    return m;
}

void llama_destroy(llama_model *m) {
    if (!m) return;
    void *bufs[] = {m->params, m->grads, m->a.resid, m->a.resid_mid, m->a.ln1, m->a.ln2, m->a.ln1_mean,
                    m->a.ln1_rstd, m->a.ln2_mean, m->a.ln2_rstd, m->a.q, m->a.k, m->a.v, m->a.att, m->a.lse,
                    m->a.h, m->a.act, m->a.lnf, m->a.lnf_mean, m->a.lnf_rstd, m->a.logits, m->a.losses,
                    m->a.dloss, m->a.tokens, m->a.targets, m->a.positions, m->g.dresid, m->g.dln, m->g.dq,
                    m->g.dk, m->g.dv, m->g.datt, m->g.dh, m->g.dact};
    if (m->master != m->params) dev_free(m->dev, m->master);
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(m->dev, bufs[i]);
    free(m->params_tab);
    free(m->layer);
    free(m);
}

int llama_find_param(const llama_model *m, const char *name) {
    for (int i = 0; i < m->nparams; i++)
        if (!strcmp(m->params_tab[i].name, name)) return i;
    return -1;
}

/* splitmix64: a well-mixed 64-bit hash, so (seed, parameter, element) -> independent bits. */
static uint64_t mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

static uint64_t name_hash(const char *s) { /* FNV-1a: the parameter's identity is its name */
    uint64_t h = 0xcbf29ce484222325ULL;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ULL;
    return h;
}

float llama_init_value(uint64_t seed, const char *name, size_t e, llama_init_kind kind, double std, int num_layers) {
    switch (kind) {
    case LLAMA_INIT_ONES: return 1.0f;
    case LLAMA_INIT_ZEROS: return 0.0f;
    case LLAMA_INIT_SCALED: std /= sqrt(2.0 * num_layers); break;
    case LLAMA_INIT_NORMAL: break;
    }
    uint64_t k = mix64(seed ^ mix64(name_hash(name))) ^ mix64((uint64_t)e);
    uint64_t r1 = mix64(k), r2 = mix64(k ^ 0xa5a5a5a5a5a5a5a5ULL);
    /* Box-Muller on two uniforms in (0, 1]; 53-bit mantissas, so the tails are exact enough. */
    double u1 = ((double)(r1 >> 11) + 1.0) / 9007199254740992.0;
    double u2 = (double)(r2 >> 11) / 9007199254740992.0;
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * 3.14159265358979323846 * u2);
    return (float)(z * std);
}

void llama_init_params(llama_model *m, uint64_t seed, double std) {
    float *host = malloc(m->total * sizeof *host);
    TR_CHECK(host != NULL, "out of host memory initialising parameters");
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        for (size_t e = 0; e < p->numel; e++)
            host[p->offset + e] = llama_init_value(seed, p->name, e, p->init, std, m->dims.L);
    }
    llama_set_master(m, host);
    free(host);
}

void llama_set_master(llama_model *m, const float *host) {
    dev_copy_h2d(m->stream, m->master, host, m->total * sizeof(float));
    llama_sync_params(m);
    dev_stream_sync(m->stream);
}

void llama_sync_params(llama_model *m) {
    if (m->params != m->master)
        kern_cast(m->stream, tr_buf_make(m->params, m->dims.act_dt), tr_buf_f32(m->master), m->total);
}

void llama_get_master(llama_model *m, float *host) {
    dev_copy_d2h(m->stream, host, m->master, m->total * sizeof(float));
    dev_stream_sync(m->stream);
}

void llama_get_grads(llama_model *m, float *host) {
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

void llama_zero_grads(llama_model *m) {
    dev_memset_zero(m->stream, m->grads, m->total * tr_dtype_size(m->dims.grad_dt));
}
