/* libFuzzer target: hf_config_parse on raw bytes, then hf_config_apply onto Megatron's defaults. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_config.h"
#include "twinrun/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    hf_llama_config hf;
    char err[512] = "";
    if (hf_config_parse(&hf, (const char *)data, size, "fuzz/config.json", err, sizeof err) != 0) {
        if (err[0] == '\0') abort(); /* a failure always says why */
        return 0;
    }
    /* what a successful parse promises */
    if (hf.hidden_size <= 0 || hf.num_attention_heads <= 0 || hf.num_key_value_heads <= 0 || hf.head_dim <= 0 ||
        hf.num_attention_heads % hf.num_key_value_heads != 0 || !(hf.rope_theta > 0) || !(hf.rms_norm_eps > 0))
        abort();
    tr_config *cfg = malloc(sizeof *cfg);
    if (!cfg) return 0;
    tr_config_defaults(cfg);
    if (hf_config_apply(&hf, cfg, err, sizeof err) == 0 &&
        (cfg->num_layers != hf.num_hidden_layers || cfg->num_query_groups != hf.num_key_value_heads))
        abort();
    free(cfg);
    return 0;
}
