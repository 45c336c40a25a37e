/* One training iteration: forward and backward over the micro-batches (Megatron's 1F1B pipeline
 * schedule across stages), gradient reduction over data parallelism with Megatron's loss
 * semantics, the NaN check, global-norm clipping and the AdamW update. */
#ifndef TWINRUN_ENGINE_TRAIN_STEP_H
#define TWINRUN_ENGINE_TRAIN_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "model/llama.h"
#include "optim/optimizer.h"
#include "parallel/grid.h"
#include "twinrun/config.h"

/* Fills one micro-batch: tokens, labels, position ids [B*T] int32 and loss mask [B*T].
 * Returns 0, or -1 with err. */
typedef int (*tr_batch_fn)(void *ctx, int micro, int32_t *tokens, int32_t *labels, float *loss_mask, int32_t *positions,
                           char *err, size_t errlen);

/* Where a rank sits; NULL members mean one rank. */
typedef struct tr_parallel {
    const tr_grid *grid;
    const tr_groups *groups;
} tr_parallel;

typedef struct tr_step_result {
    double loss;      /* token-weighted mean over the iteration's micro-batches and DP ranks ("lm loss") */
    double grad_norm; /* before clipping */
    double lr;
    double num_tokens; /* loss-mask sum over the iteration (all DP ranks) */
    bool loss_finite, grad_finite;
} tr_step_result;

/* Runs forward and backward over num_micro micro-batches (this DP rank's share) and leaves the
 * gradients reduced and scaled, ready for the optimizer: with --calculate-per-token-loss each token
 * weighs 1/(tokens in the whole global batch); without, each micro-batch's mean weighs
 * 1/(num_micro * DP) (Megatron's two conventions). The loss is known on the last pipeline stage;
 * res->loss is meaningful there. */
int train_forward_backward(llama_model *m, tr_optimizer *o, const tr_config *cfg, const tr_parallel *par, int num_micro,
                           tr_batch_fn next, void *ctx, tr_step_result *res, char *err, size_t errlen);

/* forward_backward, then grad norm, then (unless the NaN check fails) the optimizer update at lr.
 * Returns 0; -1 with err on a data error; TR_EXIT_NAN when the NaN check fires (the update is not
 * applied). */
int train_step(llama_model *m, tr_optimizer *o, const tr_config *cfg, const tr_parallel *par, int num_micro, double lr,
               tr_batch_fn next, void *ctx, tr_step_result *res, char *err, size_t errlen);

/* Megatron's evaluate(): forward only over eval_iters iterations of num_micro validation
 * micro-batches; the loss is token-weighted over all of them (and all DP ranks). */
int train_evaluate(llama_model *m, const tr_parallel *par, int eval_iters, int num_micro, tr_batch_fn next, void *ctx,
                   double *loss, char *err, size_t errlen);

#endif
