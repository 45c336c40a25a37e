/* Softmax cross-entropy over vocabulary rows, forward and backward: one block per row; the row's
 * max and sum of exp(x - max) are block tree reductions (deterministic). A NaN logit makes the
 * loss NaN; a row whose max is +-Inf or NaN has lse = max, as in the twin. Out-of-range targets
 * stop the kernel with a message (device-side check). */
#include "gpu_profile.h"
#include "kern_common.cuh"

/* The row's max (mx) and log(sum_j exp(x_j - mx)) (ls); every thread of the block gets them.
 * Kept apart, not summed into one lse, so that x - lse = (x - mx) - ls keeps its precision when the
 * logits sit far from zero (x - mx is exact for nearby values; mx + ls would round at |mx|). */
__device__ void row_lse(tr_buf logits, size_t row, int V, float *sh, float *mx_out, float *ls_out) {
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V; j += TR_BLOCK) mx = nan_max(mx, ldf(logits, row + j));
    mx = block_max(mx, sh);
    *mx_out = mx;
    if (isinf(mx) || isnan(mx)) { /* lse = mx, as in the twin */
        *ls_out = 0.0f;
        return;
    }
    float acc = 0.0f;
    for (int j = threadIdx.x; j < V; j += TR_BLOCK) acc = acc + expf(ldf(logits, row + j) - mx);
    *ls_out = logf(block_sum(acc, sh));
}

__device__ bool target_ok(const int32_t *targets, int n, int V) {
    const int32_t t = targets[n];
    if (t >= 0 && t < V) return true;
    if (threadIdx.x == 0)
        TR_DEVICE_FAIL("cross entropy: target %d at row %d is outside the vocabulary [0, %d); check --vocab-size and "
                       "the data\n",
                       (int)t, n, V);
    return false;
}

__global__ void k_ce_fwd(float *losses, tr_buf logits, const int32_t *targets, int V) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    if (!target_ok(targets, n, V)) return;
    const size_t row = (size_t)n * (size_t)V;
    float mx, ls;
    row_lse(logits, row, V, sh, &mx, &ls);
    if (threadIdx.x == 0) losses[n] = (mx - ldf(logits, row + targets[n])) + ls;
}

__global__ void k_ce_bwd(tr_buf dlogits, tr_buf logits, const int32_t *targets, const float *dloss, int V) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    if (!target_ok(targets, n, V)) return;
    const size_t row = (size_t)n * (size_t)V;
    float mx, ls;
    row_lse(logits, row, V, sh, &mx, &ls); /* ends with a barrier: all reads of the row done */
    const float scale = dloss[n];
    const int t = targets[n];
    for (int j = threadIdx.x; j < V; j += TR_BLOCK) { /* element j read, then written: may alias */
        const float p = expf((ldf(logits, row + j) - mx) - ls);
        stf(dlogits, row + j, (p - (j == t ? 1.0f : 0.0f)) * scale);
    }
}

extern "C" void kern_cross_entropy_forward(dev_stream *s, float *losses, tr_buf logits, const int32_t *targets,
                                           int N, int V) {
    TR_PROF(s, "cross_entropy_forward");
    kern_cross_entropy_forward_check(s, losses, logits, targets, N, V);
    k_ce_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(losses, logits, targets, V);
    CU_CHECK_LAUNCH("k_ce_fwd");
}

extern "C" void kern_cross_entropy_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const int32_t *targets,
                                            const float *dloss, int N, int V) {
    TR_PROF(s, "cross_entropy_backward");
    kern_cross_entropy_backward_check(s, dlogits, logits, targets, dloss, N, V);
    k_ce_bwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(dlogits, logits, targets, dloss, V);
    CU_CHECK_LAUNCH("k_ce_bwd");
}
