/* AdamW with Megatron's rules: no weight decay on 1-D parameters, global-norm clipping
 * (coefficient max_norm / (norm + 1e-6) when below 1), fp32 state and master weights.
 *
 * With --use-distributed-optimizer each data-parallel rank owns a shard of the parameter buffer, one
 * slice of every gradient bucket (one contiguous slice without --overlap-grad-reduce): gradients are
 * reduce-scattered into it bucket by bucket (in place, into the shard's region of the gradient buffer),
 * Adam's moments and, in bf16 training, the fp32 master weights exist only for it, and the updated
 * parameters are all-gathered in the compute type (Megatron's distributed optimizer).
 *
 * With --overlap-grad-reduce each bucket's reduction starts on a stream of its own as soon as the last
 * micro-batch's backward pass has written the bucket (optim_arm_overlap), ordered after that work by an
 * event; optim_reduce_grads starts the rest and makes the model's stream wait for them all. With
 * --overlap-param-gather too, the updated parameters are all-gathered on that stream bucket by bucket,
 * and the next forward pass waits for each bucket just before it reads it. Without the distributed
 * optimizer the update itself runs ahead of the next forward pass on a stream of its own (`ahead`).
 *
 * Static memory per parameter of a rank, with DP = data x context parallel ranks:
 *   bf16, distributed:      2 (bf16 params) + 4 (fp32 grads, 2 with --grad-reduce-in-bf16) + 10/DP
 *                           (the fp32 master as 16-bit remainders of the params + m + v; 12/DP with
 *                           --no-store-param-remainders)           Megatron: 6 + 12/DP
 *   fp32, distributed:      4 (params = master) + 4 (grads) + 8/DP (m + v)
 *   not distributed:        bf16 2 + 4 + 2 + 8 = 16 (18 with a whole fp32 master: Megatron's 18);
 *                           fp32 4 + 4 + 8 = 16 */
#ifndef TWINRUN_ENGINE_OPTIM_OPTIMIZER_H
#define TWINRUN_ENGINE_OPTIM_OPTIMIZER_H

#include <stdbool.h>

#include "model/llama.h"
#include "parallel/grid.h"
#include "twinrun/config.h"

typedef struct tr_optimizer {
    bool distributed;
    size_t shard_len; /* elements this rank updates (its segments') */
    int nseg;         /* this rank's shard: one segment per bucket (distributed), else one */
    llama_seg *segs;  /* [nseg] */
    /* --overlap-grad-reduce */
    dev_stream *comm;        /* the buckets' reductions (NULL: on the model's stream, after the backward) */
    dev_event *ready, *done; /* model stream -> comm (a bucket written), comm -> model (all reduced) */
    int launched_from;       /* buckets [launched_from, nbuckets) started this step */
    size_t tp_from;          /* TP-replicated gradients at offsets >= this were reduced over TP */
    llama_model *armed;      /* the model whose backward pass calls back (optim_arm_overlap) */
    const tr_groups *armed_groups;
    /* --overlap-param-gather: the step's all-gathers run on comm, bucket k's done at gathered[k]; the
     * next forward pass waits for each bucket before it reads it (buckets below gather_waited done) */
    bool overlap_gather;
    dev_event *stepped;   /* the update written: comm may gather */
    dev_event **gathered; /* [nbuckets] */
    int gather_waited;    /* buckets [0, gather_waited) waited for; nbuckets: nothing in flight */
    bool test_skip_wait;  /* TWINRUN_TEST_SKIP_WAIT=grad-reduce: the model's stream skips its wait (a test) */
    /* The step ahead of the next forward pass (not distributed; TWINRUN_OPTIM_AHEAD=0 turns it off): the
     * update runs on `ahead`, chunk by chunk in the order the forward pass reads the parameters (the
     * embedding, each layer, the final norm and output layer), and the forward pass waits for each chunk
     * just before it reads it, as for a gathered bucket: the update's memory traffic beside the forward's
     * GEMMs. The same kernels on the same elements: the same bits as one update on the model's stream. */
    dev_stream *ahead;
    int nchunks;
    size_t *chunk_end;      /* [nchunks] ascending element offsets; the last total_alloc */
    dev_event **chunk_done; /* [nchunks] */
    int chunk_waited;       /* chunks [0, chunk_waited) waited for; nchunks: nothing in flight */
    /* The grad norm's sums during the last micro-batch's backward pass (with the step ahead, one rank
     * holding whole gradients: no TP, DP or CP reduction after the backward; TWINRUN_NORM_AHEAD=0 turns it
     * off): each part's squares summed on `ahead` as soon as the backward has written it, highest first
     * (kern_sum_squares_ranges' order, so the same bits as one sum afterwards). */
    bool norm_ahead;
    bool norm_armed;        /* this step's sums were started (optim_arm_overlap) */
    bool norm_valid;        /* and no gradient changed since (a scale in optim_reduce_grads) */
    size_t norm_from;       /* gradients at offsets >= this are summed into norm_accum */
    dev_event *norm_ready;  /* the model's stream -> ahead: a part written */
    dev_event *norm_summed; /* ahead -> the model's stream: the sums done */
    float *m, *v;           /* [shard_len] fp32 moments */
    size_t state_bytes;     /* device memory m and v took (the device's count) */
    float *norm_accum;      /* [1] fp32 on the device */
    int step;               /* updates taken */
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

/* Before the last micro-batch's backward pass: with --overlap-grad-reduce, its callbacks reduce the
 * TP-replicated gradients and start each bucket's reduction as soon as it is written; with the norm's
 * sums ahead (tr_optimizer.norm_ahead), they sum each part's squares; otherwise nothing. */
void optim_arm_overlap(tr_optimizer *o, llama_model *model, const tr_groups *gr);
/* After it: no more callbacks, and the model's stream waits for the norm's sums (they read the
 * gradients). The TP-replicated gradients below the returned offset still need their TP reduction
 * (llama_sp_reduce_norm_grads_range(model, 0, it)); model->total when nothing was armed. */
size_t optim_disarm_overlap(tr_optimizer *o, llama_model *model);
/* With --overlap-param-gather, the step's parameter all-gathers may still be running: makes the model's
 * stream wait for all of them. Call before anything but the training forward pass reads the parameters
 * (checkpoints, evaluation, digests); a no-op otherwise. */
void optim_params_ready(tr_optimizer *o, llama_model *model);
/* This rank's segment of the bucket that holds parameter-buffer element e (its whole range when not
 * distributed). */
llama_seg optim_seg_of(const tr_optimizer *o, const llama_model *model, size_t e);

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
