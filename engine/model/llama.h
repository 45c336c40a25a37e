/* The Llama-3 model of one rank: parameter table, buffers, forward and backward.
 *
 * Parameters live in one device buffer with an offsets table (the order below), in three copies:
 * `params` in the compute type (bf16 or fp32) that the kernels read, `master` in fp32 that the
 * optimizer updates (the same memory as `params` when training in fp32), and `grads` in the
 * gradient type (fp32, or bf16 with --grad-reduce-in-bf16). Parameter names are Hugging Face's,
 * except the fused fc1 "model.layers.{i}.mlp.gate_up_proj.weight" = [gate_proj; up_proj].
 *
 * Initialisation is layout-independent: element e of parameter p gets a value that depends only
 * on (seed, name of p, e), so every TP/PP/DP layout starts from the same model. */
#ifndef TR_MODEL_LLAMA_H
#define TR_MODEL_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "twinrun/config.h"
#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/kern.h"

#define LLAMA_NAME_LEN 96

typedef enum llama_init_kind {
    LLAMA_INIT_NORMAL = 0, /* N(0, init_method_std) */
    LLAMA_INIT_SCALED,     /* N(0, init_method_std / sqrt(2 * num_layers)): o_proj, down_proj */
    LLAMA_INIT_ONES,
    LLAMA_INIT_ZEROS,
} llama_init_kind;

typedef struct llama_param {
    char name[LLAMA_NAME_LEN];
    int ndim;
    int64_t shape[2];
    size_t offset; /* elements from the start of the parameter buffers */
    size_t numel;
    llama_init_kind init;
    bool no_weight_decay; /* 1-D parameters (norm weights and biases): Megatron's rule */
} llama_param;

/* Model dimensions, derived once from the config. */
typedef struct llama_dims {
    int L, C, NH, KV, D, F, V; /* V: padded vocabulary */
    int vocab;                 /* vocabulary before padding */
    int B, T;                  /* micro-batch and sequence */
    kern_norm_desc norm;
    bool norm_bias;            /* LayerNorm has a bias */
    kern_rope_desc rope;
    tr_dtype act_dt, grad_dt;
} llama_dims;

/* Per-layer parameter indices into the table. */
typedef struct llama_layer_params {
    int ln1_w, ln1_b, wq, wk, wv, wo, ln2_w, ln2_b, fc1, fc2; /* ln*_b = -1 without bias */
} llama_layer_params;

typedef struct llama_model {
    llama_dims dims;
    dev_device *dev;
    dev_stream *stream;

    int nparams;
    llama_param *params_tab;
    llama_layer_params *layer; /* [L] */
    int p_embed, p_lnf_w, p_lnf_b, p_head;
    size_t total; /* elements in each parameter buffer */

    void *params;  /* [total] act_dt */
    float *master; /* [total] fp32 (== params when act_dt is fp32) */
    void *grads;   /* [total] grad_dt */

    /* activations kept for backward, all [N, ...] rows of the current micro-batch */
    struct {
        void *resid;          /* [L+1, N, C] residual stream entering each layer, last = final */
        void *resid_mid;      /* [L, N, C] after attention */
        void *ln1, *ln2;      /* [L, N, C] */
        float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [L, N] */
        void *q;              /* [L, N, NH*D] after rope */
        void *k, *v;          /* [L, N, KV*D] (k after rope) */
        void *att;            /* [L, N, NH*D] attention output */
        float *lse;           /* [L, B, NH, T] */
        void *h;              /* [L, N, 2F] fc1 output [gate | up] */
        void *act;            /* [L, N, F] swiglu output */
        void *lnf;            /* [N, C] */
        float *lnf_mean, *lnf_rstd; /* [N] */
        void *logits;         /* [N, V]; holds dlogits after backward */
        float *losses;        /* [N] */
        float *dloss;         /* [N] */
        int32_t *tokens, *targets, *positions; /* [N] */
    } a;
    /* gradient scratch for the backward pass */
    struct {
        void *dresid; /* [N, C] */
        void *dln;    /* [N, C] */
        void *dq;     /* [N, NH*D] */
        void *dk, *dv; /* [N, KV*D] */
        void *datt;   /* [N, NH*D] */
        void *dh;     /* [N, 2F] */
        void *dact;   /* [N, F] */
    } g;
    bool have_positions;
} llama_model;

/* Derives the dimensions; -1 with err when the config cannot describe a Llama model. */
int llama_dims_from_config(llama_dims *dims, const tr_config *cfg, char *err, size_t errlen);

/* Builds the table and allocates every buffer on d. NULL with err on failure (e.g. out of memory,
 * naming the buffer). */
llama_model *llama_create(const tr_config *cfg, dev_device *d, dev_stream *s, char *err, size_t errlen);
void llama_destroy(llama_model *m);

int llama_find_param(const llama_model *m, const char *name);

/* Fills master/params with the layout-independent initialisation. */
void llama_init_params(llama_model *m, uint64_t seed, double init_method_std);
/* The value init gives element e of parameter p (host; also used by tests). */
float llama_init_value(uint64_t seed, const char *name, size_t e, llama_init_kind kind, double std, int num_layers);

/* Uploads fp32 host values [total] as master weights (and the compute-type copy). */
void llama_set_master(llama_model *m, const float *host);
/* Downloads master weights / gradients as fp32 [total]. */
void llama_get_master(llama_model *m, float *host);
void llama_get_grads(llama_model *m, float *host);
/* Re-derives params (compute type) from master after the optimizer changed master. */
void llama_sync_params(llama_model *m);

void llama_zero_grads(llama_model *m);

/* Parameter p in the compute type (a NULL buffer for p < 0). */
tr_buf llama_weight(const llama_model *m, int p);

/* Forward over one micro-batch: tokens, targets [B*T] int32 (host), positions [B*T] or NULL.
 * Leaves per-token losses on the device; llama_get_losses copies them out. */
void llama_forward(llama_model *m, const int32_t *tokens, const int32_t *targets, const int32_t *positions);
void llama_get_losses(llama_model *m, float *losses /* [B*T] */);
void llama_get_logits(llama_model *m, float *logits /* [B*T, V] */);
/* Backward for the same micro-batch; dloss [B*T] host, the weight of each token's loss.
 * Gradients accumulate into m->grads. */
void llama_backward(llama_model *m, const float *dloss);

#endif
