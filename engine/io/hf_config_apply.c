/* Merging a Hugging Face Llama config into the Megatron-style tr_config: the HF config decides the
 * model shape, and a flag the user set to something else is a conflict, never silently overridden. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_config.h"
#include "twinrun/config.h"
#include "twinrun/err.h"

#define CONFLICT_HINT "drop the flag (config.json decides the model shape) or use a matching checkpoint"

/* Each merge first checks, and writes only when `commit`: a first pass finds any conflict, so that
 * cfg is untouched on error without copying the (large) config. */
static int merge_int(int *field, int dflt, int hf, bool commit, const char *flag, const char *key, char *err,
                     size_t errlen) {
    if (*field != dflt && *field != hf)
        return tr_errf(err, errlen, "%s %d disagrees with %s %d in the Hugging Face config.json; " CONFLICT_HINT, flag,
                       *field, key, hf);
    if (commit) *field = hf;
    return 0;
}

static int merge_double(double *field, double dflt, double hf, bool commit, const char *flag, const char *key,
                        char *err, size_t errlen) {
    if (*field != dflt && *field != hf)
        return tr_errf(err, errlen, "%s %.15g disagrees with %s %.15g in the Hugging Face config.json; " CONFLICT_HINT,
                       flag, *field, key, hf);
    if (commit) *field = hf;
    return 0;
}

/* A setting whose only Llama value is `want`: the user may have set it to that, nothing else. */
static int require_setting(bool user_set_other, const char *what, char *err, size_t errlen) {
    if (user_set_other)
        return tr_errf(err, errlen, "%s, but a Hugging Face Llama checkpoint needs otherwise; drop the flag", what);
    return 0;
}

static int merge(const hf_llama_config *hf, tr_config *c, const tr_config *d, bool commit, char *err, size_t errlen) {
    if (merge_int(&c->num_layers, d->num_layers, hf->num_hidden_layers, commit, "--num-layers", "num_hidden_layers",
                  err, errlen) ||
        merge_int(&c->hidden_size, d->hidden_size, hf->hidden_size, commit, "--hidden-size", "hidden_size", err,
                  errlen) ||
        merge_int(&c->ffn_hidden_size, d->ffn_hidden_size, hf->intermediate_size, commit, "--ffn-hidden-size",
                  "intermediate_size", err, errlen) ||
        merge_int(&c->num_attention_heads, d->num_attention_heads, hf->num_attention_heads, commit,
                  "--num-attention-heads", "num_attention_heads", err, errlen) ||
        merge_int(&c->num_query_groups, d->num_query_groups, hf->num_key_value_heads, commit, "--num-query-groups",
                  "num_key_value_heads", err, errlen) ||
        merge_int(&c->kv_channels, d->kv_channels, hf->head_dim, commit, "--kv-channels", "head_dim", err, errlen) ||
        merge_int(&c->vocab_size, d->vocab_size, hf->vocab_size, commit, "--vocab-size", "vocab_size", err, errlen) ||
        merge_int(&c->max_position_embeddings, d->max_position_embeddings, hf->max_position_embeddings, commit,
                  "--max-position-embeddings", "max_position_embeddings", err, errlen) ||
        merge_double(&c->rotary_base, d->rotary_base, hf->rope_theta, commit, "--rotary-base", "rope_theta", err,
                     errlen) ||
        merge_double(&c->norm_epsilon, d->norm_epsilon, hf->rms_norm_eps, commit, "--norm-epsilon", "rms_norm_eps", err,
                     errlen))
        return -1;

    bool untie = !hf->tie_word_embeddings;
    if (c->untie_embeddings_and_output_weights != d->untie_embeddings_and_output_weights &&
        c->untie_embeddings_and_output_weights != untie)
        return tr_errf(err, errlen,
                       "--untie-embeddings-and-output-weights is set but config.json has "
                       "tie_word_embeddings true (one shared embedding/output matrix); drop the flag");
    if (require_setting(c->normalization != d->normalization && c->normalization != TR_NORM_RMSNORM,
                        "--normalization is LayerNorm", err, errlen) ||
        require_setting(c->position_embedding_type != d->position_embedding_type &&
                            c->position_embedding_type != TR_POS_ROPE,
                        "--position-embedding-type is not rope", err, errlen) ||
        require_setting(c->apply_layernorm_1p,
                        "--apply-layernorm-1p is set (Llama's RMSNorm weight is not "
                        "zero-centred)",
                        err, errlen) ||
        require_setting(c->rotary_percent != 1.0, "--rotary-percent is below 1 (Llama rotates whole heads)", err,
                        errlen) ||
        require_setting(c->add_qkv_bias && !hf->attention_bias, "--add-qkv-bias is set (config.json has no biases)",
                        err, errlen))
        return -1;
    if (!commit) return 0;
    /* --group-query-attention with as many groups as heads is plain multi-head attention, so a user
     * flag is only ever raised, never contradicted */
    c->group_query_attention = c->group_query_attention || hf->num_key_value_heads < hf->num_attention_heads;
    c->untie_embeddings_and_output_weights = untie;
    c->normalization = TR_NORM_RMSNORM;
    c->position_embedding_type = TR_POS_ROPE;
    c->swiglu = true;
    c->disable_bias_linear = !hf->attention_bias; /* parse made attention_bias == mlp_bias */
    return 0;
}

int hf_config_apply(const hf_llama_config *hf, struct tr_config *cfg, char *err, size_t errlen) {
    if (hf->has_rope_scaling)
        return tr_errf(err, errlen,
                       "config.json asks for Llama 3.1 rope_scaling (rope_type llama3, factor %g, "
                       "low_freq_factor %g, high_freq_factor %g, original_max_position_embeddings %d), which twinrun's "
                       "RoPE cannot apply yet; training would silently use other frequencies. Use a Llama 3 (not 3.1) "
                       "checkpoint",
                       hf->rope_factor, hf->rope_low_freq_factor, hf->rope_high_freq_factor,
                       hf->rope_original_max_position_embeddings);
    /* on the heap: tr_config holds ~70 KB of paths, too much for a small rank stack */
    tr_config *d = malloc(sizeof *d);
    if (!d) return tr_errf(err, errlen, "out of memory applying the Hugging Face config");
    tr_config_defaults(d);
    int rc = merge(hf, cfg, d, false, err, errlen);
    if (rc == 0) rc = merge(hf, cfg, d, true, err, errlen);
    free(d);
    return rc;
}
