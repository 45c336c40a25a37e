/* The Llama-3 model of one rank: parameter table, buffers, forward and backward.
 *
 * A rank holds a shard of the model: the layers of its pipeline stage, and with tensor parallelism
 * a slice of every linear (Megatron's column-parallel q/k/v/fc1 and row-parallel o/fc2), of the
 * vocabulary (embedding and output layer) and of the heads. One rank of a one-rank layout holds it all.
 *
 * Parameters live in one device buffer with an offsets table, in three copies: `params` in the
 * compute type (bf16 or fp32) that the kernels read, `master` in fp32 for the optimizer (the same
 * memory when training in fp32; in bf16 with the distributed optimizer only this data-parallel rank's
 * shard of it, as in Megatron), and `grads` in the gradient type (fp32, or bf16 with
 * --grad-reduce-in-bf16). Names are Hugging Face's, with global layer numbers,
 * except the fused fc1 "model.layers.{i}.mlp.gate_up_proj.weight" = [gate_proj; up_proj].
 *
 * Initialisation is layout-independent: element e of the *global* parameter gets a value that
 * depends only on (seed, name, e); a shard computes its own elements' global indices. */
#ifndef TWINRUN_ENGINE_MODEL_LLAMA_H
#define TWINRUN_ENGINE_MODEL_LLAMA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "twinrun/coll.h"
#include "twinrun/config.h"
#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"
#include "twinrun/kern.h"

#define LLAMA_NAME_LEN 96

typedef enum llama_init_kind {
    LLAMA_INIT_NORMAL = 0, /* N(0, init_method_std) */
    LLAMA_INIT_SCALED,     /* N(0, init_method_std / sqrt(2 * num_layers)): o_proj, down_proj */
    LLAMA_INIT_ONES,
    LLAMA_INIT_ZEROS,
} llama_init_kind;

/* Where a local parameter sits in the global one: local rows come from up to two global row
 * ranges (two for the fused fc1: a slice of gate rows, then the same slice of up rows) and local
 * columns are global columns [col0, col0 + local cols). */
typedef struct llama_placement {
    int64_t gshape[2]; /* global shape ([n] and 0 for 1-D) */
    int nseg;
    int64_t seg_local[2], seg_global[2], seg_rows[2];
    int64_t col0;
    bool tp_replicated;   /* the same on every TP rank (norm weights) */
    bool tp_partial_grad; /* replicated, but each TP rank's gradient covers only its heads (q/k norms):
                                summed over TP whether or not the sequence is split */
} llama_placement;

typedef struct llama_param {
    char name[LLAMA_NAME_LEN];
    int ndim;
    int64_t shape[2]; /* local shape */
    size_t offset;    /* elements from the start of the parameter buffers */
    size_t numel;
    llama_init_kind init;
    bool no_weight_decay; /* 1-D parameters (norm weights and biases): Megatron's rule */
    /* An FP8 module's weight kept in FP8 between steps (--fp8-param-gather): the optimizer casts its
     * shard, its buckets hold no other parameter and are all-gathered in FP8 (llama_fp8.c) */
    bool fp8_stored;
    llama_placement place;
} llama_param;

/* This rank's place in the layout, as the model needs it. */
typedef struct llama_layout {
    int tp, tp_rank;
    int pp, pp_rank;
    int cp, cp_rank; /* context parallelism: this rank holds sequence chunks cp_rank and 2*CP-1-cp_rank */
    int slots;       /* micro-batches whose activations are kept at once (1F1B: up to PP - pp_rank) */
    /* The distributed optimizer's data-parallel shards (DP x CP) and this rank's (opt_shards <= 1:
     * one): a bf16 model keeps the fp32 master weights of its shard only. */
    int opt_shards, opt_shard;
    /* Gradient buckets (Megatron's DDP bucket_size, --ddp-bucket-size with --overlap-grad-reduce):
     * parameters grouped from the last one back into buckets of at least this many elements, each
     * reduced over data parallelism as soon as the backward pass has written it; 0: one bucket. */
    size_t bucket_elems;
} llama_layout;

/* One contiguous part of a rank's distributed-optimizer shard: parameter-buffer elements
 * [begin, begin + len), kept at [local, local + len) of the rank's sharded buffers (master, moments). */
typedef struct llama_seg {
    size_t begin, len, local;
} llama_seg;

/* Model dimensions, derived once from the config and the layout. */
typedef struct llama_dims {
    int L, C, NH, KV, D, F, V; /* global: layers, hidden, heads, groups, head dim, ffn, padded vocab */
    int vocab;                 /* vocabulary before padding */
    int NHl, KVl, Fl, Vl;      /* this TP rank's heads, groups, ffn and vocabulary slice */
    int vocab_start;           /* first vocabulary row of the slice */
    int Vl_real;               /* rows of the slice below `vocab`: the rest pad the vocabulary and take no part
                                * in the softmax (Hugging Face's loss; Megatron's includes them) */
    int l0, nl;                /* this stage's first global layer and its layer count */
    bool first, last;          /* pipeline stage holds the embedding / the output layer and loss */
    int B, T;                  /* micro-batch and this rank's tokens of each sequence (seq / CP) */
    int Tfull;                 /* the whole sequence (--seq-length) */
    bool sp;                   /* sequence parallelism: the residual stream and norms hold Nl of N rows */
    int Nl;                    /* rows of the residual stream on this rank: B*T, or B*T/TP with sp */
    kern_norm_desc norm;
    bool norm_bias;   /* LayerNorm has a bias */
    bool qkv_bias;    /* q/k/v projections have biases (--add-qkv-bias, or linear biases) */
    bool linear_bias; /* every linear of a layer has one (Megatron's default --add-bias-linear) */
    bool qk_norm;     /* --qk-layernorm: each head's q and k normalised (--normalization kind) */
    kern_rope_desc rope;
    tr_dtype act_dt, grad_dt;
} llama_dims;

/* Per-layer parameter indices into the table ([nl], local layer order). */
typedef struct llama_layer_params {
    int ln1_w, ln1_b, wq, wk, wv, wo, ln2_w, ln2_b, fc1, fc2; /* ln*_b = -1 without bias */
    int bq, bk, bv, bo, b1, b2; /* linear biases (q, k, v, o, fc1 [gate | up], fc2); -1 without */
    int qn_w, qn_b, kn_w, kn_b; /* --qk-layernorm weights [D] (and LayerNorm biases); -1 without */
} llama_layer_params;

/* Activations of one micro-batch kept for its backward pass; rows are the micro-batch's N = B*T tokens.
 * The per-layer arrays ([nl, ...] below) hold the layers whose activations are kept (llama_model's
 * act_index); with activation recomputation they are fewer, and the recompute workspace (a llama_acts
 * of its own) holds the layers recomputed in the backward pass. */
typedef struct llama_acts {
    void *resid;     /* [nl+1, Nl, C] residual stream entering each local layer; [0] is the stage input */
    void *resid_mid; /* [nl, Nl, C] after attention */
    void *ln1, *ln2; /* [nl, N, C] norm outputs of every row (all-gathered with sp) */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [nl, Nl] */
    void *q;                                          /* [nl, N, NHl*D] after rope */
    void *q_pre, *k_pre; /* [nl, N, NHl*D], [nl, N, KVl*D] before the q/k norms (--qk-layernorm) */
    float *qn_mean, *qn_rstd, *kn_mean, *kn_rstd; /* [nl, N*NHl], [nl, N*KVl] their statistics */
    void *k, *v;                                  /* [nl, N, KVl*D] (k after rope) */
    void *att;                                    /* [nl, N, NHl*D] attention output */
    float *lse;                                   /* [nl, B, NHl, T] */
    void *kfull, *vfull;                   /* [nl, B, Tfull, KVl*D] keys and values of the whole sequence (CP > 1) */
    void *h;                               /* [nl, N, 2*Fl] fc1 output [gate | up] */
    void *act;                             /* [nl, N, Fl] swiglu output */
    void *lnf;                             /* [N, C] (last stage; all-gathered with sp) */
    float *lnf_mean, *lnf_rstd;            /* [Nl] */
    void *logits;                          /* [N, Vl]; holds dlogits after backward (last stage) */
    float *losses;                         /* [N] */
    float *ce_max, *ce_sum, *ce_target;    /* [N] vocab-parallel cross-entropy statistics */
    int32_t *tokens, *targets, *positions; /* [N] */
    bool have_positions;
} llama_acts;

/* Where the model hands a tensor to an observer (the trainer's NaN/Inf checks and fault injection):
 * a layer's output in the forward pass, the losses, and a layer's input gradient in the backward. */
typedef enum llama_site { LLAMA_SITE_ACTIVATION = 0, LLAMA_SITE_LOSS, LLAMA_SITE_GRADIENT } llama_site;
/* Called by the backward pass with the lowest offset whose gradients it has finished (every element at
 * or above it holds this micro-batch's final gradient); NULL: nobody listens. */
typedef void (*llama_grads_done_fn)(void *arg, size_t watermark);
/* Called by the forward pass before it reads the parameters below offset `end` (their all-gather may
 * still be in flight: --overlap-param-gather); NULL: nobody listens. */
typedef void (*llama_params_needed_fn)(void *arg, size_t end);
/* layer is global (0-based; -1 for the loss), x the tensor of n elements, micro the micro-batch. */
typedef void (*llama_site_fn)(void *arg, llama_site site, int layer, int micro, tr_buf x, size_t n);

/* FP8 of one rank's stage (--fp8-format; llama_fp8.c, docs/fp8.md). Each layer has four FP8 linear
 * modules as Transformer Engine has them (qkv, the attention output projection, fc1, fc2); a module's
 * forward tensors are its input and its weight (q, k and v share theirs: one fused module in Megatron),
 * its backward tensor the gradient of its output. All on the device. */
enum { LLAMA_FP8_QKV = 0, LLAMA_FP8_PROJ, LLAMA_FP8_FC1, LLAMA_FP8_FC2, LLAMA_FP8_MODULES };
typedef struct llama_fp8 {
    bool on, wgrad;                 /* FP8 GEMMs; the weight-gradient GEMM in FP8 too (not --no-fp8-wgrad) */
    tr_fp8_format fwd_fmt, bwd_fmt; /* e4m3 and e4m3 (--fp8-format e4m3) or e5m2 (hybrid) */
    tr_fp8_amax_algo algo;
    int len, margin;   /* --fp8-amax-history-len, --fp8-margin */
    int nfwd, nbwd;    /* nl * 4 modules * (input, weight); nl * 4 modules */
    float *fwd_hist;   /* [len, nfwd] amax histories (row 0 this pass's) */
    float *bwd_hist;   /* [len, nbwd] */
    float *fwd_scale;  /* [2, nfwd] scales, then their inverses */
    float *bwd_scale;  /* [2, nbwd] */
    float *slot_scale; /* [slots, 2, nfwd] the forward scales each micro-batch in flight quantised with,
                           kept for its backward pass (and recomputation) */
    /* scratch: a module's input [N, in] (the forward's) or its transpose [in, N] (the weight gradient's),
     * weight [out, in] or its transpose [in, out] (the data gradient's), output gradient [N, out] and its
     * transpose [out, N]: Hopper's FP8 GEMMs take both operands K-major (kern_fp8_cast_transpose) */
    uint8_t *qx, *qw, *qg, *qgt;
    /* --fp8-param-gather: the FP8 modules' weights kept in FP8 (Transformer Engine's FP8 parameters), cast
     * by the optimizer from its shard and all-gathered in FP8 (llama_fp8_cast_stored); the forward reads
     * them as they are, the data gradient their transpose (kern_fp8_transpose) */
    bool stored;
    /* Bucket k's FP8 copy, element e at wq_at[k][e - bucket_begin[k]] (NULL: not an FP8 bucket). It lies
     * inside the bucket's own bf16 parameters [2n bytes for n elements], in the half that holds none of
     * this rank's optimizer shard: the other shards' bf16 values, which nothing reads once the copy
     * exists (the forward and backward read the copy, the optimizer the rank's shard, checkpoints the
     * shard's master) — so the copy costs no memory, as Transformer Engine's, whose FP8 parameters
     * replace the bf16 ones. Where no half is free (one shard: the bucket is all the rank's; the middle
     * shard of an odd count; a copy that would break a weight's 16-byte alignment; or
     * TWINRUN_FP8_WEIGHTS=own), the bucket's copy lies in wq, a buffer of its own. */
    uint8_t **wq_at;             /* [nbuckets] */
    uint8_t *wq;                 /* [wq_len] the copies with no room in the parameters (NULL: none) */
    size_t wq_len, wq_in_params; /* bytes of copies in wq / inside the bf16 parameters */
    size_t qw_len;               /* bytes of the weight scratch qw (llama_fp8_cast_all stages chunks in it) */
    float *wq_scale;             /* [2, nfwd] the forward scales and inverses the stored weights were cast with */
    bool scratch_in_logits;      /* the scratch lies in the output layer's logits buffer (llama_fp8_create) */
    int slot;                    /* the micro-batch whose scales the next quantisation uses */
    bool record;                 /* quantisations record their amax (not while recomputing) */
    coll_comm *dp_cp_comm;       /* with tp_comm, the amax reduction group (TP x CP x DP); NULL: this rank alone */
    char shape_note[640];        /* a GEMM shape Hopper's FP8 GEMMs refuse ("": none) */
    float *host;                 /* [2, max(nfwd, nbwd)] host staging of a pass's own amaxes and scales */
    /* The largest spike this rank saw since the caller last cleared it: a pass's own amax of a tensor
     * (before the reduction) over what its scale allowed, >= LLAMA_FP8_SPIKE_RATIO (llama_fp8.c). */
    struct llama_fp8_spike {
        float ratio, amax, scale; /* ratio 0: none */
        int layer, mod, role;     /* global layer; module; 0 input, 1 weight, 2 output gradient */
    } spike;
    /* Test and fault hook: called with this rank's amaxes of a pass (host, before the reduction; forward:
     * [nfwd], else [nbwd]); may change them (an amax spike), returning true when it did. NULL: none. */
    bool (*amax_hook)(void *arg, bool forward, float *amax, int n, int l0);
    void *amax_hook_arg;
} llama_fp8;

/* A pass's amax this many times what its tensor's scale allowed is reported as a spike: its values
 * saturated at the format's largest, and the reduced amax lowers the scales of the passes after it. */
#define LLAMA_FP8_SPIKE_RATIO 16.0f

typedef struct llama_model {
    llama_dims dims;
    llama_layout layout;
    dev_device *dev;
    dev_stream *stream;
    coll_comm *tp_comm;     /* tensor-parallel group (a one-rank communicator at TP 1) */
    coll_comm *cp_comm;     /* context-parallel group (NULL at CP 1) */
    int32_t *q_pos, *k_pos; /* [T], [Tfull]: positions of this rank's tokens and of the whole sequence (CP > 1) */

    int nparams;
    llama_param *params_tab;
    llama_layer_params *layer;             /* [nl] */
    int p_embed, p_lnf_w, p_lnf_b, p_head; /* -1 where this stage has none */
    size_t total;         /* elements in the parameter buffers: the end of the last parameter (with buckets,
                           the padding between them included) */
    size_t total_alloc;   /* allocated elements: total rounded up for sharding (pad_to) */
    size_t param_elems;   /* parameters' elements (total less the padding between buckets) */
    int nbuckets;         /* gradient buckets: [bucket_begin[k], bucket_begin[k + 1]) of the buffers, ascending */
    size_t *bucket_begin; /* [nbuckets + 1], the last total_alloc; each bucket a multiple of the shards */
    bool *bucket_fp8;     /* [nbuckets]: the bucket holds fp8_stored weights (and only those) */

    void *ones;       /* [B*T] act_dt ones: a bias is a rank-1 product (ones x bias), its gradient dy^T x ones */
    void *params;     /* [total_alloc] act_dt */
    float *master;    /* [master_len] fp32: elements [master_begin, master_begin + master_len) of the parameter
                      buffers (== params, whole, in fp32 training) */
    void *grads;      /* [total_alloc] grad_dt */
    bool *grad_lazy;  /* [nparams] written first by its weight-gradient GEMM each step: not zeroed beforehand */
    bool *grad_fresh; /* [nparams] a lazy gradient not yet written this step (its memory holds old values) */
    size_t (*grad_zero_runs)[2]; /* [n_grad_zero_runs] element ranges llama_begin_grads zeroes: all but the lazy */
    int n_grad_zero_runs;
    bool grad_zero_pending; /* llama_begin_grads' zeroing not done yet: the first backward of the step does it */
    bool grad_zeroed_ahead; /* the optimizer's step ahead zeroed those runs behind its update
                             * (llama_zero_grad_runs): the next llama_begin_grads has nothing to zero */
    int16_t *master_rem;    /* [master_len] in bf16 with --store-param-remainders (the default): the fp32 master's
                            lower halves, whose upper halves are params' (twinrun/master_split.h); master NULL */
    size_t master_begin, master_len; /* (0, total_alloc), or the optimizer's shard (layout.opt_shard) in bf16 */
    size_t weight_bytes, grad_bytes; /* device memory params + master, and grads, took (the device's count) */

    llama_acts *acts; /* [layout.slots] */
    /* Activation recomputation (--recompute-granularity, engine/model/llama_acts.c). */
    tr_recompute recompute;
    int *act_index;                 /* [nl] >= 0: layer l's index in a slot's per-layer arrays; -1: recomputed */
    int *ws_index;                  /* [nl] a recomputed layer's index in the workspace */
    int *unit_start;                /* [nl] first local layer of a recomputed layer's unit (recomputed together) */
    int n_stored, n_ws;             /* per-layer entries of each slot, and of the workspace */
    llama_acts ws;                  /* recomputed layers' activations (full), or the core attention's (selective): one
                          set for every slot, rebuilt just before the backward that reads them */
    size_t act_bytes;               /* activation storage allocated (every slot and the workspace) */
    size_t act_bytes_plain;         /* what it would be without recomputation */
    llama_grads_done_fn grads_done; /* NULL = nobody listens (train/grad_buckets.c on the last micro-batch) */
    void *grads_done_arg;
    llama_params_needed_fn params_needed; /* NULL = nobody listens (optimizer, --overlap-param-gather) */
    void *params_needed_arg;
    llama_site_fn site; /* NULL = nobody watches */
    void *site_arg;
    int site_micro; /* the micro-batch the caller is running, for the observer */
    /* gradient scratch for the backward pass of one micro-batch */
    struct {
        void *dresid;          /* [Nl, C]: d(stage output) before backward (received on non-last stages),
                          d(stage input) after */
        void *sp_loc;          /* [Nl, C] a norm's output rows before the all-gather (sp) */
        void *sp_full;         /* [N, C] row-parallel partial sums before the reduce-scatter, gathered gradients (sp) */
        void *dln;             /* [N, C] */
        void *dq;              /* [N, NHl*D] */
        void *dqn, *dkn;       /* [N, NHl*D], [N, KVl*D] gradients before the q/k norms (--qk-layernorm) */
        void *dk, *dv;         /* [N, KVl*D] */
        void *datt;            /* [N, NHl*D] */
        void *dh;              /* [N, 2*Fl] */
        void *dact;            /* [N, Fl] */
        float *dloss;          /* [N] */
        void *dkfull, *dvfull; /* [B, Tfull, KVl*D] (CP > 1) */
        void *gather;          /* [CP, B, T, KVl*D] all-gather / reduce-scatter staging (CP > 1) */
    } g;
    /* The host buffers of the training step in flight (step.c), freed by step_free(step) in
     * llama_destroy when the step never ended: its rank was ended mid-step (dev_set_reclaim). */
    void *step;
    void (*step_free)(void *step);
    llama_fp8 fp8;
} llama_model;

/* The model settings twinrun's Llama cannot build (biases, tied embeddings, ...), each added to el.
 * Returns -1 when it added any, else 0. */
int llama_check_config(const tr_config *cfg, tr_errlist *el);

/* One layer's activations of one micro-batch, wherever they live (a slot, or the recompute workspace).
 * Rows: Nl of the residual stream, N of everything else (all-gathered with sequence parallelism). */
typedef struct llama_layer_view {
    tr_buf x, xmid, xout; /* [Nl, C] layer input, after attention, layer output (x of the next layer) */
    tr_buf ln1, ln2;      /* [N, C] norm outputs */
    float *ln1_mean, *ln1_rstd, *ln2_mean, *ln2_rstd; /* [Nl] */
    tr_buf q, att;                                    /* [N, NHl*D] queries after rope, attention output */
    tr_buf q_pre, k_pre;                              /* [N, NHl*D], [N, KVl*D] the projections before --qk-layernorm */
    float *qn_mean, *qn_rstd, *kn_mean, *kn_rstd;     /* [N*NHl], [N*KVl] */
    tr_buf k, v;                                      /* [N, KVl*D] */
    float *lse;                                       /* [B, NHl, T] */
    tr_buf kf, vf; /* [B, Tfull, KVl*D] the whole sequence's keys and values (CP > 1) */
    tr_buf h;      /* [N, 2*Fl] fc1 output [gate | up] */
    tr_buf a;      /* [N, Fl] swiglu output */
} llama_layer_view;

/* Decoder layer l (local) forward into its view; pos: the micro-batch's position ids on the device, or
 * NULL for 0..T-1 (llama_forward.c). */
void llama_layer_forward(llama_model *m, const llama_layer_view *v, int l, const int32_t *pos);
/* The layer's core attention: att and lse from q, k, v (with CP from kf, vf, all-gathered first when
 * `gather`; selective recomputation reuses the kept ones). */
void llama_core_attention(llama_model *m, const llama_layer_view *v, bool gather);
/* Where local layer l's activations of `slot` are (llama_acts.c). */
void llama_layer_view_of(const llama_model *m, int slot, int l, llama_layer_view *v);
/* Decides which layers keep their activations and which are recomputed (--recompute-granularity,
 * --recompute-method, --recompute-num-layers, as Megatron's TransformerBlock applies them to a stage):
 * fills act_index, ws_index, unit_start, n_stored, n_ws. 0, or -1 with err. */
int llama_plan_recompute(llama_model *m, const tr_config *cfg, char *err, size_t errlen);
/* True when the backward pass must recompute local layer l's unit before its backward: l is a
 * recomputed layer and the last of its unit. */
bool llama_unit_ends_at(const llama_model *m, int l);

/* Derives the dimensions for a layout; -1 with err when the config cannot describe the model or
 * the layout does not divide it (heads, groups, ffn or vocabulary by TP; layers by PP). */
int llama_dims_from_config(llama_dims *dims, const tr_config *cfg, const llama_layout *lay, char *err, size_t errlen);

/* One rank of a layout: builds the table and allocates every buffer on d, the parameter buffers
 * rounded up to a multiple of pad_to elements (the distributed optimizer's DP size; 1 otherwise),
 * which lay->opt_shards must divide.
 * tp_comm may be NULL when lay->tp == 1, cp_comm when lay->cp == 1. NULL with err on failure (naming the buffer on OOM). */
llama_model *llama_create_shard(const tr_config *cfg, const llama_layout *lay, size_t pad_to, coll_comm *tp_comm,
                                coll_comm *cp_comm, dev_device *d, dev_stream *s, char *err, size_t errlen);

/* Context parallelism: the position in the whole sequence of this rank's local token j
 * (Megatron's load-balanced split into 2*CP chunks, rank r holding chunks r and 2*CP-1-r). */
int llama_cp_position(int seq, int cp, int cp_rank, int j);
/* The parameter table of one rank of a layout (NULL: the whole model on one rank) without any buffer
 * or device: names, shapes and placements, for tools that move weights between formats on the host
 * and for counting parameters. Free with llama_destroy. */
llama_model *llama_create_table(const tr_config *cfg, const llama_layout *lay, char *err, size_t errlen);
/* The whole model on one rank. */
llama_model *llama_create(const tr_config *cfg, dev_device *d, dev_stream *s, char *err, size_t errlen);
void llama_destroy(llama_model *m);

int llama_find_param(const llama_model *m, const char *name);
/* Global element index of local element e of parameter p. */
size_t llama_global_index(const llama_param *p, size_t e);

/* True when master holds only the optimizer's shard of the parameter buffers (bf16 training with the
 * distributed optimizer): then the whole fp32 weights exist on no single rank. */
bool llama_master_sharded(const llama_model *m);
/* Elements of master that are parameters (its shard less the padding past `total`; with several
 * buckets the whole shard, padding between its segments included). */
size_t llama_master_count(const llama_model *m);

/* Gradient buckets (engine/model/llama_buckets.c). Plans them over the table (offsets assigned in the
 * forward order) for `shards` optimizer shards: with lay->bucket_elems > 0 each bucket is padded to a
 * multiple of shards and the offsets move past the padding; otherwise one bucket, the offsets as they
 * were. fp8_stored weights never share a bucket with other parameters (Megatron keeps them in a buffer
 * of their own): a bucket also ends where the kind changes, whatever bucket_elems. Sets nbuckets, bucket_begin, total (the span), param_elems and total_alloc (a multiple of
 * pad_to). -1 with err when out of host memory. */
int llama_plan_buckets(llama_model *m, size_t pad_to, int shards, char *err, size_t errlen);
/* Shard `shard` of `shards` in bucket k: the bucket's shard-th slice of len/shards elements. */
llama_seg llama_shard_seg(const llama_model *m, int shards, int shard, int k);
/* The bucket that holds parameter-buffer element e. */
int llama_bucket_of(const llama_model *m, size_t e);
/* Where element e of the parameter buffer lives in master, from its start (whole master: e itself; a
 * sharded one: in this rank's segment of e's bucket, which must hold e). */
size_t llama_master_index(const llama_model *m, size_t e);
/* With sequence parallelism each TP rank saw only its rows, so the replicated norm weights' gradients
 * are partial: sums over TP (Megatron's allreduce of layernorm grads) those whose offsets lie in
 * [lo, hi). The q/k norms' (--qk-layernorm) are partial with or without it (each TP rank holds other
 * heads). */
void llama_sp_reduce_norm_grads_range(llama_model *m, size_t lo, size_t hi);
/* The lowest parameter offset of local layer l (the backward pass writes a layer's gradients last to
 * first, so once layer l is done every gradient from here up is final, but for TP reductions). */
size_t llama_layer_first_offset(const llama_model *m, int l);
/* Where local layer l's forward pass reads its parameters, in order: ends[0] bounds what the attention's
 * input projections read (the input norm, q/k/v, their biases and norms), ends[1] the output projection's
 * (and its bias), ends[2] the MLP's input norm and fc1, ends[3] the whole layer (fc2 and its bias), the
 * next layer's first offset or the final norm's. The forward pass asks for each in turn
 * (llama_params_needed_fn), so an update running ahead of it (the optimizer's step) is waited for in
 * these pieces. */
enum { LLAMA_LAYER_NEEDS = 4 };
void llama_layer_need_ends(const llama_model *m, int l, size_t ends[LLAMA_LAYER_NEEDS]);

/* Fills master/params with the layout-independent initialisation (params whole, master its shard). */
void llama_init_params(llama_model *m, uint64_t seed, double init_method_std);
/* The value init gives element e of the global parameter `name` (host; also used by tests). */
float llama_init_value(uint64_t seed, const char *name, size_t e, llama_init_kind kind, double std, int num_layers);

/* Uploads fp32 host values [total] as master weights (its shard when sharded) and the compute-type copy
 * (all of them). */
void llama_set_master(llama_model *m, const float *host);
/* Downloads master weights / gradients as fp32 [total]; the master weights only when they are whole
 * (!llama_master_sharded). */
void llama_get_master(llama_model *m, float *host);
/* The fp32 master weights this rank keeps, into host[llama_master_count] indexed as llama_master_index
 * (a whole master, or the shard), joined from params and the remainders when it keeps those. */
void llama_download_master(llama_model *m, float *host);
void llama_get_grads(llama_model *m, float *host);
/* Re-derives params (compute type) of master's elements from master after the optimizer changed master. */
void llama_sync_params(llama_model *m);

void llama_zero_grads(llama_model *m);
/* The model's stream waits for every write of the parameters still in flight on another stream (the
 * optimizer's step ahead of the forward pass, --overlap-param-gather's gathers): the parameters, their
 * master and the gradients the update read may then be read and written on it. Called by every accessor
 * below; the forward pass waits piecewise instead (params_needed). */
void llama_params_settle(llama_model *m);
/* The start of a step's gradients: every gradient is zero, except that the weight-gradient GEMMs of the
 * linear layers overwrite theirs on first use instead of adding to a zeroed buffer (one pass over
 * 4 bytes a parameter saved). Until the step's llama_settle_grads, m->grads holds old values in their
 * ranges: read the gradients only after it. The zeroing itself waits for the step's first backward
 * (or llama_settle_grads): the previous step's update may still be reading the gradients on another
 * stream until the forward pass has waited for it (llama_params_settle). */
void llama_begin_grads(llama_model *m);
/* Zeroes the lazy gradients that no micro-batch wrote (none, in every layout the engine has) at or
 * above element `watermark`, so every gradient from there up is defined. */
void llama_settle_grads(llama_model *m, size_t watermark);
/* llama_begin_grads' zeroing, if not done yet this step (the backward pass calls it first). */
void llama_zero_pending_grads(llama_model *m);
/* llama_begin_grads' zeroing of the elements in [lo, hi), on stream s: the optimizer's step ahead zeroes
 * each chunk's gradients right after updating it, beside the next forward pass, and then sets
 * m->grad_zeroed_ahead (the forward pass waits for every chunk, so the backward finds them zero). */
void llama_zero_grad_runs(llama_model *m, dev_stream *s, size_t lo, size_t hi);

/* Hugging Face keeps the fused fc1 (mlp.gate_up_proj.weight or .bias) as two tensors: HF's name of
 * half `half` (0: gate_proj rows, 1: up_proj rows) into out. false for any other parameter. */
bool llama_hf_fc1_half(const char *name, int half, char *out, size_t n);

/* Parameter p in the compute type (a NULL buffer for p < 0). */
tr_buf llama_weight(const llama_model *m, int p);

/* Forward of one micro-batch into activation slot `slot`: tokens, targets, positions [B*T]
 * (host; positions may be NULL for 0..T-1). The first stage embeds the tokens; other stages read
 * their input from llama_stage_input(m, slot), which the caller filled (received). The last stage
 * leaves per-token losses (llama_get_losses); other stages' output is llama_stage_output. */
void llama_forward_slot(llama_model *m, int slot, const int32_t *tokens, const int32_t *targets,
                        const int32_t *positions);
void *llama_stage_input(llama_model *m, int slot);  /* [Nl, C] act_dt, device */
void *llama_stage_output(llama_model *m, int slot); /* [Nl, C] act_dt, device */
void llama_get_losses_slot(llama_model *m, int slot, float *losses /* [B*T] */);

/* Backward of the micro-batch in `slot`. The last stage starts from dloss [B*T] (host; each
 * token's loss weight); other stages from llama_stage_grad(m), which the caller filled with the
 * gradient of the stage output (received). Afterwards llama_stage_grad holds the gradient of the
 * stage input (to send to the previous stage). Gradients accumulate into m->grads. */
void llama_backward_slot(llama_model *m, int slot, const float *dloss);
void *llama_stage_grad(llama_model *m); /* [Nl, C] act_dt, device */

/* Context parallelism (llama_cp.c): full [B, Tfull, W] from the group's local [B, T, W] pieces, and
 * back (summing the group's gradients of this rank's rows). W is the elements per token. */
void llama_cp_gather(llama_model *m, tr_buf full, tr_buf local, size_t W);
void llama_cp_reduce_scatter(llama_model *m, tr_buf local, tr_buf full, size_t W);

/* FP8 (llama_fp8.c): buffers and initial state (scales 1, histories zero) when cfg asks for FP8;
 * -1 with err when a GEMM's shape cannot run in FP8. */
int llama_fp8_create(llama_model *m, const tr_config *cfg, char *err, size_t errlen);
void llama_fp8_destroy(llama_model *m);
/* A micro-batch's forward pass into `slot` starts (its scales are kept for its backward) / ends (the
 * amaxes it recorded are reduced over the group and the forward scales updated). */
void llama_fp8_forward_begin(llama_model *m, int slot);
void llama_fp8_forward_end(llama_model *m);
/* The backward pass of `slot` starts / ends (the gradients' amaxes reduced, their scales updated). */
void llama_fp8_backward_begin(llama_model *m, int slot);
void llama_fp8_backward_end(llama_model *m);
/* Module `mod` of local layer l: x [N, in] quantised into the input scratch with the slot's scale
 * (its amax recorded while m->fp8.record; transposed to [in, N] for the weight gradient's GEMM), then
 * y [N, out] = x @ W_p^T in FP8. */
void llama_fp8_quantize_input(llama_model *m, tr_buf x, int N, int in, int l, int mod, bool transposed);
void llama_fp8_linear_forward(llama_model *m, tr_buf y, int p, int N, int l, int mod);
/* Its backward, the input already quantised (llama_fp8_quantize_input transposed, record off): dy [N, out]
 * quantised with the gradient's scale (amax recorded), dW (+)= dy^T x (overwrite when first), and
 * dx [N, in] (+)= dy W when dx.p (add when accumulate). */
void llama_fp8_linear_backward(llama_model *m, tr_buf dw, bool first, tr_buf dx, tr_buf dy, int p, int N,
                               bool accumulate, int l, int mod);
/* --fp8-param-gather (m->fp8.stored; otherwise no-ops). llama_fp8_mark_stored flags the FP8 modules'
 * weights (before the buckets are planned: they get buckets of their own). llama_fp8_cast_begin keeps
 * the weights' current scales on the model's stream for the casts that follow (the optimizer's, once a
 * step); llama_fp8_cast_stored casts the weights' elements of parameter-buffer range [lo, hi) on s from
 * the bf16 parameters into the FP8 copy, each weight's amax into its history's row 0 (Transformer
 * Engine's cast of the master shard, whose amaxes the next forward pass's end reduces); llama_fp8_cast_all
 * does both for every weight on the model's stream (after the parameters were set: init, a load). */
void llama_fp8_mark_stored(llama_model *m);
void llama_fp8_cast_begin(llama_model *m);
void llama_fp8_cast_stored(llama_model *m, dev_stream *s, size_t lo, size_t hi);
void llama_fp8_cast_all(llama_model *m);
/* The FP8 copy of parameter-buffer element e (stored weights only). */
uint8_t *llama_fp8_stored_at(const llama_model *m, size_t e);
/* The FP8 state as fp32 host arrays, for checkpoints: histories then scales, forward then backward
 * ([len * nfwd + len * nbwd + 2 * nfwd + 2 * nbwd]); 0 floats without FP8. */
size_t llama_fp8_state_count(const llama_model *m);
void llama_fp8_get_state(llama_model *m, float *host);
void llama_fp8_set_state(llama_model *m, const float *host);

/* Slot 0 shorthands for one-stage use. */
void llama_forward(llama_model *m, const int32_t *tokens, const int32_t *targets, const int32_t *positions);
void llama_backward(llama_model *m, const float *dloss);
void llama_get_losses(llama_model *m, float *losses /* [B*T] */);
void llama_get_logits(llama_model *m, float *logits /* [B*T, Vl] */);

#endif
