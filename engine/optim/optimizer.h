/* AdamW with Megatron's rules: no weight decay on 1-D parameters, global-norm clipping
 * (coefficient max_norm / (norm + 1e-6) when below 1), fp32 state and master weights.
 *
 * With --use-distributed-optimizer each data-parallel rank owns a contiguous shard of the
 * parameter buffer: gradients are reduce-scattered into it (in place, into the shard's region of the
 * gradient buffer), Adam's moments and, in bf16 training, the fp32 master weights exist only for it,
 * and the updated parameters are all-gathered in the compute type (Megatron's distributed optimizer).
 *
 * Static memory per parameter of a rank, with DP = data x context parallel ranks:
 *   bf16, distributed:      2 (bf16 params) + 4 (fp32 grads, 2 with --grad-reduce-in-bf16) + 12/DP
 *                           (fp32 master + m + v)                 Megatron: 6 + 12/DP
 *   fp32, distributed:      4 (params = master) + 4 (grads) + 8/DP (m + v)
 *   not distributed:        bf16 2 + 4 + 4 + 8 = 18 (Megatron's 18); fp32 4 + 4 + 8 = 16 */
#ifndef TWINRUN_ENGINE_OPTIM_OPTIMIZER_H
#define TWINRUN_ENGINE_OPTIM_OPTIMIZER_H

#include <stdbool.h>

#include "model/llama.h"
#include "parallel/grid.h"
#include "twinrun/config.h"

typedef struct tr_optimizer {
    bool distributed;
    size_t shard_begin, shard_len; /* elements of the parameter buffer this rank updates */
    float *m, *v;                  /* [shard_len] fp32 moments */
    size_t state_bytes;            /* device memory m and v took (the device's count) */
    float *norm_accum;             /* [1] fp32 on the device */
    int step;                      /* updates taken */
    double beta1, beta2, eps, weight_decay, clip_grad;
    double decoupled_lr; /* this step's lr of the embedding and output layer; < 0: the step's lr */
} tr_optimizer;

/* The distributed optimizer's shards of the parameter buffer for this rank of grid (NULL: one rank):
 * *shards = DP x CP with --use-distributed-optimizer and DP x CP > 1, else 1; *shard the rank's
 * position in the dp_cp group (llama_layout.opt_shards, opt_shard). */
void optim_shard_of(const tr_config *cfg, const tr_grid *grid, int *shards, int *shard);

/* gr may be NULL for one rank. The model's buffers must be padded to a multiple of the DP size
 * when distributed (llama_create_shard's pad_to), and a bf16 model's master sharded to this rank's
 * shard (llama_layout.opt_shards = DP x CP, opt_shard = the rank's position in dp_cp). */
tr_optimizer *optim_create(llama_model *model, const tr_config *cfg, const tr_grid *grid, char *err, size_t errlen);
void optim_destroy(tr_optimizer *o, llama_model *model);

/* Reduces the gradients over data parallelism (all-reduce, or reduce-scatter into the shard's region
 * of the gradient buffer when distributed), multiplied by `scale` (1/DP for Megatron's average,
 * 1/tokens with per-token loss). */
void optim_reduce_grads(tr_optimizer *o, llama_model *model, const tr_groups *gr, float scale);

/* L2 norm of all gradients of the whole model (before clipping), the same on every rank: each
 * rank sums the squares it owns (TP-replicated parameters once, its shard when distributed) and the
 * sums are all-reduced. NaN/Inf in any gradient makes it non-finite. */
double optim_grad_norm(tr_optimizer *o, llama_model *model, const tr_grid *grid, const tr_groups *gr);

/* --decoupled-lr: the learning rate the next optim_step gives the input embedding and the output
 * layer (Megatron's is_decoupled_lr parameters); < 0 gives them the step's lr like every other. */
void optim_set_decoupled_lr(tr_optimizer *o, double lr);

/* One AdamW update at learning rate lr, clipping with the norm optim_grad_norm returned; when
 * distributed, the updated parameters are all-gathered over DP. */
void optim_step(tr_optimizer *o, llama_model *model, const tr_groups *gr, double lr, double grad_norm);

#endif
