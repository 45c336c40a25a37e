/* Vocab-parallel softmax cross-entropy for the twin: the three passes around the tensor-parallel
 * all-reduces (MAX of row_max, SUM of sum_exp and target_logit), then the backward from the
 * all-reduced statistics. Each row's reductions run in double in ascending vocabulary order and
 * are rounded once to fp32 (the statistics travel through fp32 all-reduces, as in Megatron).
 *
 * Non-finite logits never hide: a NaN logit makes row_max NaN (NaN-propagating max), hence the
 * loss and the gradient NaN; a +-Inf row max makes exp(x - max) NaN, likewise.
 *
 * A slice cannot tell a target past the end of the vocabulary from one another rank holds, so only
 * negative targets are caught here; a target >= the padded vocabulary contributes target_logit 0 on
 * every rank and must be checked where the whole vocabulary is known (see kern_embedding_slice.c). */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

static int in_slice(int32_t target, int vocab_start, int V) {
    const int64_t local = (int64_t)target - (int64_t)vocab_start;
    return local >= 0 && local < (int64_t)V;
}

/* The targets this twin can read (the arguments were checked by kern_X_check). */
static void check_targets(const int32_t *targets, int N, const char *who) {
    for (int n = 0; n < N; n++)
        if (targets[n] < 0)
            tr_fatal("%s: target %d at row %d is negative; check --vocab-size and the data", who, (int)targets[n], n);
}

void kern_ce_slice_max(dev_stream *s, float *row_max, tr_buf logits, int N, int V, int V_real) {
    kern_cost(s, TWIN_K_CE_MAX, (double)N * V, (double)N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_ce_slice_max_check(s, row_max, logits, N, V, V_real);
    if (kern_shape_only(s)) return;
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * (size_t)V;
        float mx = -INFINITY;
        for (int j = 0; j < V_real; j++) {
            const float x = ld(logits, row + (size_t)j);
            if (x > mx || isnan(x)) mx = x;
            if (isnan(mx)) break; /* stays NaN */
        }
        row_max[n] = mx;
    }
}

void kern_ce_slice_sums(dev_stream *s, float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,
                        const int32_t *targets, int vocab_start, int N, int V, int V_real) {
    kern_cost(s, TWIN_K_CE_SUMS, 3.0 * N * (double)V, (double)N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_ce_slice_sums_check(s, sum_exp, target_logit, logits, row_max, targets, vocab_start, N, V, V_real);
    if (kern_shape_only(s)) return;
    check_targets(targets, N, "cross entropy (vocab slice)");
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * (size_t)V;
        const double mx = row_max[n];
        double sum = 0.0;
        for (int j = 0; j < V_real; j++) sum += exp((double)ld(logits, row + (size_t)j) - mx);
        sum_exp[n] = (float)sum;
        target_logit[n] =
            in_slice(targets[n], vocab_start, V_real) ? ld(logits, row + (size_t)(targets[n] - vocab_start)) : 0.0f;
    }
}

void kern_ce_loss_from_stats(dev_stream *s, float *losses, const float *row_max, const float *sum_exp,
                             const float *target_logit, int N) {
    kern_cost(s, TWIN_K_CE_LOSS, 3.0 * N, 16.0 * N, TR_F32);
    kern_ce_loss_from_stats_check(s, losses, row_max, sum_exp, target_logit, N);
    if (kern_shape_only(s)) return;
    for (int n = 0; n < N; n++)
        losses[n] = (float)((log((double)sum_exp[n]) + (double)row_max[n]) - (double)target_logit[n]);
}

void kern_ce_slice_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const float *row_max, const float *sum_exp,
                            const int32_t *targets, int vocab_start, const float *dloss, int N, int V, int V_real) {
    kern_cost(s, TWIN_K_CE_BWD, 5.0 * N * (double)V, 2.0 * N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_ce_slice_backward_check(s, dlogits, logits, row_max, sum_exp, targets, vocab_start, dloss, N, V, V_real);
    if (kern_shape_only(s)) return;
    check_targets(targets, N, "cross entropy backward (vocab slice)");
    for (int n = 0; n < N; n++) {
        const size_t row = (size_t)n * (size_t)V;
        const double mx = row_max[n], se = sum_exp[n], scale = dloss[n];
        const int64_t local = (int64_t)targets[n] - (int64_t)vocab_start; /* may lie outside [0, V) */
        /* Element j is read before it is written, so dlogits may alias logits. */
        for (int j = 0; j < V_real; j++) {
            const double p = exp((double)ld(logits, row + (size_t)j) - mx) / se;
            st_d(dlogits, row + (size_t)j, (p - (j == local ? 1.0 : 0.0)) * scale);
        }
        for (int j = V_real; j < V; j++) st_d(dlogits, row + (size_t)j, 0.0); /* padding: no gradient */
    }
}
