/* Softmax cross-entropy over a vocabulary row, forward and backward, for the twin.
 * The log-sum-exp of each row is a double reduction in ascending vocabulary order. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

static void check_target(const int32_t *targets, int n, int V) {
    const int32_t t = targets[n];
    if (t < 0 || t >= V)
        tr_fatal("cross entropy: target %d at row %d is outside the vocabulary [0, %d); check --vocab-size and "
                 "the data",
                 (int)t, n, V);
}

/* log(sum_j exp(logits[row + j])) over j = 0..V-1, max-shifted. */
static double row_lse(tr_buf logits, size_t row, size_t V) {
    double mx = -INFINITY;
    for (size_t j = 0; j < V; j++) {
        const double x = ld(logits, row + j);
        if (x > mx || isnan(x)) mx = x; /* a NaN logit makes the loss NaN, never hides */
    }
    if (isinf(mx) || isnan(mx)) return mx;
    double sum = 0.0;
    for (size_t j = 0; j < V; j++) sum += exp((double)ld(logits, row + j) - mx);
    return mx + log(sum);
}

typedef struct ce_args {
    tr_buf logits, dlogits; /* [N, V] */
    float *losses;          /* [N] forward */
    const float *dloss;     /* [N] backward */
    const int32_t *targets; /* [N] device */
    int N, V;
} ce_args;

static void ce_forward_body(void *args) {
    const ce_args *a = args;
    for (int n = 0; n < a->N; n++) {
        const size_t row = (size_t)n * (size_t)a->V;
        a->losses[n] =
            (float)(row_lse(a->logits, row, (size_t)a->V) - (double)ld(a->logits, row + (size_t)a->targets[n]));
    }
}

void kern_cross_entropy_forward(dev_stream *s, float *losses, tr_buf logits, const int32_t *targets, int N, int V) {
    kern_cost(s, TWIN_K_XENT_FWD, 4.0 * N * (double)V, (double)N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_cross_entropy_forward_check(s, losses, logits, targets, N, V);
    kern_access(s, "kernel cross_entropy_forward",
                (const twin_access[]){{losses, (size_t)N * sizeof(float), true},
                                      {logits.p, kern_bytes(logits, (size_t)N * (size_t)V), false},
                                      {targets, (size_t)N * sizeof(int32_t), false}},
                3);
    if (kern_shape_only(s)) return;
    kern_drain(s);                                           /* the targets as the work before this launch left them */
    for (int n = 0; n < N; n++) check_target(targets, n, V); /* all before any work, as in the backward */
    ce_args a = {.logits = logits, .losses = losses, .targets = targets, .N = N, .V = V};
    kern_submit(s, ce_forward_body, &a, sizeof a);
}

static void ce_backward_body(void *args) {
    const ce_args *a = args;
    const tr_buf dlogits = a->dlogits, logits = a->logits;
    const int V = a->V;
    for (int n = 0; n < a->N; n++) {
        const size_t row = (size_t)n * (size_t)V;
        const double lse = row_lse(logits, row, (size_t)V), scale = a->dloss[n];
        /* Element j is read before it is written, so dlogits may alias logits. */
        for (int j = 0; j < V; j++) {
            const double p = exp((double)ld(logits, row + (size_t)j) - lse);
            st_d(dlogits, row + (size_t)j, (p - (j == a->targets[n] ? 1.0 : 0.0)) * scale);
        }
    }
}

void kern_cross_entropy_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const int32_t *targets,
                                 const float *dloss, int N, int V) {
    kern_cost(s, TWIN_K_XENT_BWD, 6.0 * N * (double)V, 2.0 * N * V * tr_dtype_size(logits.dt), TR_F32);
    kern_cross_entropy_backward_check(s, dlogits, logits, targets, dloss, N, V);
    kern_access(s, "kernel cross_entropy_backward",
                (const twin_access[]){{dlogits.p, kern_bytes(dlogits, (size_t)N * (size_t)V), true},
                                      {logits.p, kern_bytes(logits, (size_t)N * (size_t)V), false},
                                      {targets, (size_t)N * sizeof(int32_t), false},
                                      {dloss, (size_t)N * sizeof(float), false}},
                4);
    if (kern_shape_only(s)) return;
    kern_drain(s);
    for (int n = 0; n < N; n++) check_target(targets, n, V);
    ce_args a = {.logits = logits, .dlogits = dlogits, .dloss = dloss, .targets = targets, .N = N, .V = V};
    kern_submit(s, ce_backward_body, &a, sizeof a);
}
