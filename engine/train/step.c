#include "train/step.h"

#include <math.h>
#include <stdlib.h>

#include "twinrun/err.h"

int train_forward_backward(llama_model *m, const tr_config *cfg, int num_micro, tr_batch_fn next, void *ctx,
                           tr_step_result *res, char *err, size_t errlen) {
    const int N = m->dims.B * m->dims.T;
    int32_t *tokens = malloc((size_t)N * 4 * 3);
    float *mask = malloc((size_t)N * 4 * 3);
    if (!tokens || !mask) {
        free(tokens);
        free(mask);
        return tr_errf(err, errlen, "out of host memory for a micro-batch");
    }
    int32_t *labels = tokens + N, *pos = tokens + 2 * N;
    float *losses = mask + N, *dloss = mask + 2 * N;
    double loss_sum = 0, tok_sum = 0;
    int rc = 0;
    llama_zero_grads(m);
    for (int mb = 0; mb < num_micro && !rc; mb++) {
        rc = next(ctx, mb, tokens, labels, mask, pos, err, errlen);
        if (rc) break;
        llama_forward(m, tokens, labels, pos);
        llama_get_losses(m, losses);
        double mb_loss = 0, mb_tok = 0;
        for (int n = 0; n < N; n++) {
            mb_loss += (double)losses[n] * mask[n];
            mb_tok += mask[n];
        }
        loss_sum += mb_loss;
        tok_sum += mb_tok;
        /* Without per-token loss Megatron divides each micro-batch's sum by its own token count and
         * by the number of micro-batches; with it, the sum is scaled by the batch's tokens later. */
        double w = cfg->calculate_per_token_loss ? 1.0 : (mb_tok > 0 ? 1.0 / (mb_tok * num_micro) : 0.0);
        for (int n = 0; n < N; n++) dloss[n] = (float)(mask[n] * w);
        llama_backward(m, dloss);
    }
    if (!rc && cfg->calculate_per_token_loss && tok_sum > 0)
        kern_scale(m->stream, tr_buf_make(m->grads, m->dims.grad_dt), (float)(1.0 / tok_sum), m->total);
    free(tokens);
    free(mask);
    res->num_tokens = tok_sum;
    res->loss = tok_sum > 0 ? loss_sum / tok_sum : 0.0;
    res->loss_finite = isfinite(res->loss);
    return rc;
}

int train_step(llama_model *m, tr_optimizer *o, const tr_config *cfg, int num_micro, double lr, tr_batch_fn next,
               void *ctx, tr_step_result *res, char *err, size_t errlen) {
    if (train_forward_backward(m, cfg, num_micro, next, ctx, res, err, errlen)) return -1;
    res->lr = lr;
    res->grad_norm = optim_grad_norm(o, m);
    res->grad_finite = isfinite(res->grad_norm);
    if (cfg->check_for_nan_in_loss_and_grad && (!res->loss_finite || !res->grad_finite)) {
        tr_errf(err, errlen,
                "NaN/Inf detected in the %s (loss %g, grad norm %g); the update was not applied. Check the data "
                "and --lr; --no-check-for-nan-in-loss-and-grad turns this check off",
                res->loss_finite ? "gradients" : "loss", res->loss, res->grad_norm);
        return TR_EXIT_NAN;
    }
    optim_step(o, m, lr, res->grad_norm);
    return 0;
}

int train_evaluate(llama_model *m, int eval_iters, int num_micro, tr_batch_fn next, void *ctx, double *loss,
                   char *err, size_t errlen) {
    const int N = m->dims.B * m->dims.T;
    int32_t *tokens = malloc((size_t)N * 4 * 3);
    float *mask = malloc((size_t)N * 4 * 2);
    if (!tokens || !mask) {
        free(tokens);
        free(mask);
        return tr_errf(err, errlen, "out of host memory for a validation micro-batch");
    }
    double sum = 0, toks = 0;
    int rc = 0;
    for (int i = 0; i < eval_iters * num_micro && !rc; i++) {
        rc = next(ctx, i % num_micro, tokens, tokens + N, mask, tokens + 2 * N, err, errlen);
        if (rc) break;
        llama_forward(m, tokens, tokens + N, tokens + 2 * N);
        llama_get_losses(m, mask + N);
        for (int n = 0; n < N; n++) {
            sum += (double)mask[N + n] * mask[n];
            toks += mask[n];
        }
    }
    free(tokens);
    free(mask);
    *loss = toks > 0 ? sum / toks : 0.0;
    return rc;
}
