/* Vocab-parallel softmax cross-entropy: the three passes around the tensor-parallel all-reduces
 * and the backward from the all-reduced statistics. One block per row for the row reductions
 * (block tree reductions: deterministic), one thread per element for the backward.
 *
 * row_max is NaN-propagating, so a NaN logit makes the loss and the gradient NaN, never hides.
 * Only negative targets stop the kernel (device-side check): a slice cannot tell a target past the
 * end of the vocabulary from one another rank holds. */
#include "kern_common.cuh"

__device__ __forceinline__ long long ce_local(int32_t target, int vocab_start) {
    return (long long)target - (long long)vocab_start;
}

/* Columns from V_real on pad the vocabulary: never in the max or the sum, zero gradient. */
__global__ void k_ce_slice_max(float *row_max, tr_buf logits, int V, int V_real) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    const size_t row = (size_t)n * (size_t)V;
    float mx = -INFINITY;
    for (int j = threadIdx.x; j < V_real; j += TR_BLOCK) mx = nan_max(mx, ldf(logits, row + j));
    mx = block_max(mx, sh);
    if (threadIdx.x == 0) row_max[n] = mx;
}

__global__ void k_ce_slice_sums(float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,
                                const int32_t *targets, int vocab_start, int V, int V_real) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    const int32_t t = targets[n];
    if (t < 0) {
        if (threadIdx.x == 0)
            TR_DEVICE_FAIL("cross entropy (vocab slice): target %d at row %d is negative; check --vocab-size and the "
                           "data\n",
                           (int)t, n);
        return;
    }
    const size_t row = (size_t)n * (size_t)V;
    const float mx = row_max[n];
    float acc = 0.0f;
    for (int j = threadIdx.x; j < V_real; j += TR_BLOCK) acc = acc + expf(ldf(logits, row + j) - mx);
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) {
        const long long local = ce_local(t, vocab_start);
        sum_exp[n] = acc;
        target_logit[n] = (local >= 0 && local < V_real) ? ldf(logits, row + (size_t)local) : 0.0f;
    }
}

__global__ void k_ce_loss_from_stats(float *losses, const float *row_max, const float *sum_exp,
                                     const float *target_logit, int N) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x)
        losses[n] = (row_max[n] - target_logit[n]) + logf(sum_exp[n]);
}

/* Thread per element (grid-stride over N*V): element i read, then written by the same thread, so
 * dlogits may alias logits. */
__global__ void k_ce_slice_bwd(tr_buf dlogits, tr_buf logits, const float *row_max, const float *sum_exp,
                               const int32_t *targets, int vocab_start, const float *dloss, int N, int V,
                               int V_real) {
    const size_t total = (size_t)N * (size_t)V;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        const int n = (int)(i / (size_t)V), j = (int)(i % (size_t)V);
        const int32_t t = targets[n];
        if (t < 0) {
            if (j == 0)
                TR_DEVICE_FAIL("cross entropy backward (vocab slice): target %d at row %d is negative\n", (int)t, n);
            continue;
        }
        if (j >= V_real) {
            stf(dlogits, i, 0.0f);
            continue;
        }
        const float p = expf(ldf(logits, i) - row_max[n]) / sum_exp[n];
        stf(dlogits, i, (p - (ce_local(t, vocab_start) == j ? 1.0f : 0.0f)) * dloss[n]);
    }
}

static void check_ce(int N, int V, int V_real, int vocab_start, const int32_t *targets) {
    TR_CHECK(N > 0 && V > 0, "cross entropy needs N and V positive");
    TR_CHECK(V_real >= 0 && V_real <= V, "cross entropy: the real vocabulary columns V_real must be in [0, V]");
    TR_CHECK(targets != NULL, "vocab-parallel cross entropy needs targets");
    TR_CHECK(vocab_start >= 0, "vocab-parallel cross entropy: vocab_start is a row of the padded vocabulary, so >= 0");
}

extern "C" void kern_ce_slice_max(dev_stream *s, float *row_max, tr_buf logits, int N, int V, int V_real) {
    TR_CHECK(N > 0 && V > 0, "cross entropy needs N and V positive");
    TR_CHECK(V_real >= 0 && V_real <= V, "cross entropy: the real vocabulary columns V_real must be in [0, V]");
    TR_CHECK(row_max != NULL, "vocab-parallel cross entropy writes row_max[N]");
    kern_check_float_buf(logits, "cross entropy logits");
    k_ce_slice_max<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(row_max, logits, V, V_real);
    CU_CHECK_LAUNCH("k_ce_slice_max");
}

extern "C" void kern_ce_slice_sums(dev_stream *s, float *sum_exp, float *target_logit, tr_buf logits,
                                   const float *row_max, const int32_t *targets, int vocab_start, int N, int V,
                                   int V_real) {
    check_ce(N, V, V_real, vocab_start, targets);
    TR_CHECK(sum_exp != NULL && target_logit != NULL && row_max != NULL,
             "vocab-parallel cross entropy sums need sum_exp[N], target_logit[N] and row_max[N]");
    kern_check_float_buf(logits, "cross entropy logits");
    k_ce_slice_sums<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(sum_exp, target_logit, logits, row_max, targets,
                                                         vocab_start, V, V_real);
    CU_CHECK_LAUNCH("k_ce_slice_sums");
}

extern "C" void kern_ce_loss_from_stats(dev_stream *s, float *losses, const float *row_max, const float *sum_exp,
                                        const float *target_logit, int N) {
    TR_CHECK(N > 0, "cross entropy needs N positive");
    TR_CHECK(losses != NULL && row_max != NULL && sum_exp != NULL && target_logit != NULL,
             "vocab-parallel cross entropy loss needs losses, row_max, sum_exp and target_logit [N]");
    k_ce_loss_from_stats<<<grid_for((size_t)N), TR_BLOCK, 0, tr_cu_stream(s)>>>(losses, row_max, sum_exp,
                                                                              target_logit, N);
    CU_CHECK_LAUNCH("k_ce_loss_from_stats");
}

extern "C" void kern_ce_slice_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const float *row_max,
                                       const float *sum_exp, const int32_t *targets, int vocab_start,
                                       const float *dloss, int N, int V, int V_real) {
    check_ce(N, V, V_real, vocab_start, targets);
    TR_CHECK(dloss != NULL && row_max != NULL && sum_exp != NULL,
             "vocab-parallel cross entropy backward needs dloss, row_max and sum_exp [N]");
    kern_check_float_buf(dlogits, "cross entropy dlogits");
    kern_check_float_buf(logits, "cross entropy logits");
    k_ce_slice_bwd<<<grid_for((size_t)N * (size_t)V), TR_BLOCK, 0, tr_cu_stream(s)>>>(
        dlogits, logits, row_max, sum_exp, targets, vocab_start, dloss, N, V, V_real);
    CU_CHECK_LAUNCH("k_ce_slice_bwd");
}
