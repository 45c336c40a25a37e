/* Model presets: Llama 3's published shapes as Megatron flags (the seeds' MODEL_ARGS), and a
 * tiny one of the same architecture that a CPU trains in seconds. */
#include <string.h>

#include "runner/scenario.h"

/* The switches every Llama 3 shares: GQA, RoPE with base 500000, RMSNorm, SwiGLU, no biases,
 * untied output, no dropout, Llama 3's 128256-token vocabulary unless a preset says otherwise. */
#define LLAMA3_SWITCHES                                                                                                \
    "group-query-attention", NULL, "position-embedding-type", "rope", "rotary-base", "500000", "normalization",        \
        "RMSNorm", "swiglu", NULL, "untie-embeddings-and-output-weights", NULL, "disable-bias-linear", NULL,           \
        "attention-dropout", "0", "hidden-dropout", "0"

/* flag, value pairs, a row at a time */
/* clang-format off */
static const char *const llama3_8b[] = {
    "num-layers", "32", "hidden-size", "4096", "ffn-hidden-size", "14336", "num-attention-heads", "32",
    "num-query-groups", "8", "seq-length", "8192", "max-position-embeddings", "8192", "vocab-size", "128256",
    LLAMA3_SWITCHES, NULL, NULL,
};

static const char *const llama3_70b[] = {
    "num-layers", "80", "hidden-size", "8192", "ffn-hidden-size", "28672", "num-attention-heads", "64",
    "num-query-groups", "8", "seq-length", "8192", "max-position-embeddings", "8192", "vocab-size", "128256",
    LLAMA3_SWITCHES, NULL, NULL,
};

/* 64 hidden, 4 heads of 16, 2 KV groups, SwiGLU width 176 (= 8h/3 rounded up to a multiple of 8):
 * every code path of the big models at a size the twin runs in well under a second per step. */
static const char *const tiny[] = {
    "num-layers", "2", "hidden-size", "64", "ffn-hidden-size", "176", "num-attention-heads", "4",
    "num-query-groups", "2", "seq-length", "32", "max-position-embeddings", "32", "vocab-size", "256",
    LLAMA3_SWITCHES, NULL, NULL,
};
/* clang-format on */

static const struct {
    const char *name;
    const char *const *flags;
} presets[] = {{"llama3-8b", llama3_8b}, {"llama3-70b", llama3_70b}, {"tiny", tiny}};

const char *const *scenario_model_preset(const char *name) {
    if (!name) return NULL;
    for (size_t i = 0; i < sizeof presets / sizeof presets[0]; i++)
        if (strcmp(name, presets[i].name) == 0) return presets[i].flags;
    return NULL;
}

const char *scenario_model_preset_names(void) { return "llama3-8b, llama3-70b, tiny"; }
