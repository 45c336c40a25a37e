/* tr_config_finalize: write in what Megatron derives, then validate (see config.h). */
#include <limits.h>

#include "config/derived.h"
#include "config/flags.h"
#include "twinrun/config.h"
#include "twinrun/err.h"

int tr_config_finalize(tr_config *cfg, int world, char *err, size_t errlen) {
    if (!cfg) return tr_errf(err, errlen, "tr_config_finalize: no config");
    /* validate first: it explains a bad shape better than a derived value could */
    if (tr_config_validate(cfg, world, err, errlen)) return -1;
    cfg->kv_channels = (int)tr_eff_kv_channels(cfg);
    cfg->num_query_groups = (int)tr_eff_query_groups(cfg);
    cfg->ffn_hidden_size = (int)tr_eff_ffn_hidden_size(cfg);
    cfg->global_batch_size = (int)tr_eff_global_batch(cfg, world);
    /* Megatron's default dropout is 0.1 and the 70B seed never sets it; twinrun has no dropout, so a
     * run that asks for it would silently differ: say so once. */
    if (cfg->attention_dropout > 0 || cfg->hidden_dropout > 0)
        tr_config_warn(cfg,
                       "--attention-dropout %g / --hidden-dropout %g ignored: twinrun trains without dropout "
                       "(Megatron's default is 0.1; pass 0.0 for both to match Llama pretraining and silence this)",
                       cfg->attention_dropout, cfg->hidden_dropout);
    /* the 70B guide's MODEL_ARGS have no --disable-bias-linear: Megatron then builds every linear with a
     * bias, and so does twinrun; one line says it, since a Llama 3 checkpoint has none */
    if (!cfg->disable_bias_linear)
        tr_config_warn(cfg, "linear layers have biases (Megatron's default without --disable-bias-linear); Llama 3 "
                            "itself has none");
    if (cfg->ddp_bucket_size > 0 && !cfg->overlap_grad_reduce)
        tr_config_warn(cfg,
                       "--ddp-bucket-size %lld ignored: without --overlap-grad-reduce the gradients are one "
                       "bucket, as in Megatron",
                       (long long)cfg->ddp_bucket_size);
    /* the seed's flags, --save and all, should predict as they are: a shape-only run has no weights to save */
    if (cfg->predict && cfg->save[0]) {
        tr_config_warn(cfg, "--predict writes no checkpoint (device memory holds no values): --save %s ignored",
                       cfg->save);
        cfg->save[0] = 0;
    }
    return tr_config_validate(cfg, world, err, errlen);
}
