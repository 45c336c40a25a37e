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

/* Every pass's arguments (each uses some). */
typedef struct ce_slice_args {
    tr_buf logits, dlogits; /* [N, V] */
    float *out0, *out1;     /* [N] fp32 the pass writes: row_max; sum_exp, target_logit; losses */
    const float *row_max, *sum_exp, *target_logit, *dloss; /* [N] fp32 the pass reads */
    const int32_t *targets;                                /* [N] device */
    int vocab_start, N, V, V_real;
} ce_slice_args;

static void max_body(void *args) {
    const ce_slice_args *a = args;
    for (int n = 0; n < a->N; n++) {
        const size_t row = (size_t)n * (size_t)a->V;
        float mx = -INFINITY;
        for (int j = 0; j < a->V_real; j++) {
            const float x = ld(a->logits, row + (size_t)j);
            if (x > mx || isnan(x)) mx = x;
            if (isnan(mx)) break; /* stays NaN */
        }
        a->out0[n] = mx;
    }
}

void kern_ce_slice_max(dev_stream *s, float *row_max, tr_buf logits, int N, int V, int V_real) {
    kern_cost(s, TWIN_K_CE_MAX, (double)N * V, (double)N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_ce_slice_max_check(s, row_max, logits, N, V, V_real);
    kern_access(s, "kernel ce_slice_max",
                (const twin_access[]){{row_max, (size_t)N * sizeof(float), true},
                                      {logits.p, kern_bytes(logits, (size_t)N * (size_t)V), false}},
                2);
    if (kern_shape_only(s)) return;
    ce_slice_args a = {.logits = logits, .out0 = row_max, .N = N, .V = V, .V_real = V_real};
    kern_submit(s, max_body, &a, sizeof a);
}

static void sums_body(void *args) {
    const ce_slice_args *a = args;
    for (int n = 0; n < a->N; n++) {
        const size_t row = (size_t)n * (size_t)a->V;
        const double mx = a->row_max[n];
        double sum = 0.0;
        for (int j = 0; j < a->V_real; j++) sum += exp((double)ld(a->logits, row + (size_t)j) - mx);
        a->out0[n] = (float)sum;
        a->out1[n] = in_slice(a->targets[n], a->vocab_start, a->V_real)
                         ? ld(a->logits, row + (size_t)(a->targets[n] - a->vocab_start))
                         : 0.0f;
    }
}

void kern_ce_slice_sums(dev_stream *s, float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,
                        const int32_t *targets, int vocab_start, int N, int V, int V_real) {
    kern_cost(s, TWIN_K_CE_SUMS, 3.0 * N * (double)V, (double)N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_ce_slice_sums_check(s, sum_exp, target_logit, logits, row_max, targets, vocab_start, N, V, V_real);
    kern_access(s, "kernel ce_slice_sums",
                (const twin_access[]){{sum_exp, (size_t)N * sizeof(float), true},
                                      {target_logit, (size_t)N * sizeof(float), true},
                                      {logits.p, kern_bytes(logits, (size_t)N * (size_t)V), false},
                                      {row_max, (size_t)N * sizeof(float), false},
                                      {targets, (size_t)N * sizeof(int32_t), false}},
                5);
    if (kern_shape_only(s)) return;
    kern_drain(s); /* the targets as the work before this launch left them */
    check_targets(targets, N, "cross entropy (vocab slice)");
    ce_slice_args a = {.logits = logits,
                       .out0 = sum_exp,
                       .out1 = target_logit,
                       .row_max = row_max,
                       .targets = targets,
                       .vocab_start = vocab_start,
                       .N = N,
                       .V = V,
                       .V_real = V_real};
    kern_submit(s, sums_body, &a, sizeof a);
}

static void loss_body(void *args) {
    const ce_slice_args *a = args;
    for (int n = 0; n < a->N; n++)
        a->out0[n] = (float)((log((double)a->sum_exp[n]) + (double)a->row_max[n]) - (double)a->target_logit[n]);
}

void kern_ce_loss_from_stats(dev_stream *s, float *losses, const float *row_max, const float *sum_exp,
                             const float *target_logit, int N) {
    kern_cost(s, TWIN_K_CE_LOSS, 3.0 * N, 16.0 * N, TR_F32);
    kern_ce_loss_from_stats_check(s, losses, row_max, sum_exp, target_logit, N);
    kern_access(s, "kernel ce_loss_from_stats",
                (const twin_access[]){{losses, (size_t)N * sizeof(float), true},
                                      {row_max, (size_t)N * sizeof(float), false},
                                      {sum_exp, (size_t)N * sizeof(float), false},
                                      {target_logit, (size_t)N * sizeof(float), false}},
                4);
    if (kern_shape_only(s)) return;
    ce_slice_args a = {.out0 = losses, .row_max = row_max, .sum_exp = sum_exp, .target_logit = target_logit, .N = N};
    kern_submit(s, loss_body, &a, sizeof a);
}

static void backward_body(void *args) {
    const ce_slice_args *a = args;
    const int V = a->V, V_real = a->V_real;
    for (int n = 0; n < a->N; n++) {
        const size_t row = (size_t)n * (size_t)V;
        const double mx = a->row_max[n], se = a->sum_exp[n], scale = a->dloss[n];
        const int64_t local = (int64_t)a->targets[n] - (int64_t)a->vocab_start; /* may lie outside [0, V) */
        /* Element j is read before it is written, so dlogits may alias logits. */
        for (int j = 0; j < V_real; j++) {
            const double p = exp((double)ld(a->logits, row + (size_t)j) - mx) / se;
            st_d(a->dlogits, row + (size_t)j, (p - (j == local ? 1.0 : 0.0)) * scale);
        }
        for (int j = V_real; j < V; j++) st_d(a->dlogits, row + (size_t)j, 0.0); /* padding: no gradient */
    }
}

void kern_ce_slice_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const float *row_max, const float *sum_exp,
                            const int32_t *targets, int vocab_start, const float *dloss, int N, int V, int V_real) {
    kern_cost(s, TWIN_K_CE_BWD, 5.0 * N * (double)V, 2.0 * N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_ce_slice_backward_check(s, dlogits, logits, row_max, sum_exp, targets, vocab_start, dloss, N, V, V_real);
    kern_access(s, "kernel ce_slice_backward",
                (const twin_access[]){{dlogits.p, kern_bytes(dlogits, (size_t)N * (size_t)V), true},
                                      {logits.p, kern_bytes(logits, (size_t)N * (size_t)V), false},
                                      {row_max, (size_t)N * sizeof(float), false},
                                      {sum_exp, (size_t)N * sizeof(float), false},
                                      {targets, (size_t)N * sizeof(int32_t), false},
                                      {dloss, (size_t)N * sizeof(float), false}},
                6);
    if (kern_shape_only(s)) return;
    kern_drain(s);
    check_targets(targets, N, "cross entropy backward (vocab slice)");
    ce_slice_args a = {.logits = logits,
                       .dlogits = dlogits,
                       .row_max = row_max,
                       .sum_exp = sum_exp,
                       .dloss = dloss,
                       .targets = targets,
                       .vocab_start = vocab_start,
                       .N = N,
                       .V = V,
                       .V_real = V_real};
    kern_submit(s, backward_body, &a, sizeof a);
}
