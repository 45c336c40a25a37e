/* Vocab-parallel softmax cross-entropy: the three passes around the tensor-parallel all-reduces
 * and the backward from the all-reduced statistics. One block per row for the row reductions
 * (block tree reductions: deterministic), one thread per element for the backward; eight elements a
 * thread with 16-byte loads in each pass where the types and alignment allow (the 8B and 70B layers'
 * logits, [8192, 128256] bf16, are 2 GB read three times and written once a step).
 *
 * row_max is NaN-propagating, so a NaN logit makes the loss and the gradient NaN, never hides.
 * Only negative targets stop the kernel (device-side check): a slice cannot tell a target past the
 * end of the vocabulary from one another rank holds. */
#include "gpu_profile.h"
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

/* A row's target below zero stops the kernel (reported by the block's first thread); past the end of
 * the vocabulary it may be another rank's slice, so only negative ones are errors. */
__device__ __forceinline__ bool ce_target_negative(int32_t t, int n) {
    if (t >= 0) return false;
    if (threadIdx.x == 0)
        TR_DEVICE_FAIL("cross entropy (vocab slice): target %d at row %d is negative; check --vocab-size and the "
                       "data\n",
                       (int)t, n);
    return true;
}

__global__ void k_ce_slice_sums(float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,
                                const int32_t *targets, int vocab_start, int V, int V_real) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    const int32_t t = targets[n];
    if (ce_target_negative(t, n)) return;
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

__device__ __forceinline__ float ce_ld(const float *p) { return *p; }
__device__ __forceinline__ float ce_ld(const uint16_t *p) { return tr_bf16_bits_to_f32(*p); }

/* k_ce_slice_max and k_ce_slice_sums eight elements a thread (one dtype T, V % 8 == 0, 16-byte
 * aligned rows; the padding columns from V_real masked per element): 16-byte loads instead of one
 * two-byte logit a thread. The max is the same; the sum adds in another fixed order (deterministic). */
template <typename T> __global__ void k_ce_slice_max8(float *row_max, const T *logits, int V, int V_real) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    const T *row = logits + (size_t)n * (size_t)V;
    float mx = -INFINITY;
    for (int j0 = threadIdx.x * 8; j0 < V_real; j0 += TR_BLOCK * 8) {
        float x[8];
        ld8<T>(row + j0, x);
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (j0 + e < V_real) mx = nan_max(mx, x[e]);
    }
    mx = block_max(mx, sh);
    if (threadIdx.x == 0) row_max[n] = mx;
}

template <typename T>
__global__ void k_ce_slice_sums8(float *sum_exp, float *target_logit, const T *logits, const float *row_max,
                                 const int32_t *targets, int vocab_start, int V, int V_real) {
    __shared__ float sh[TR_BLOCK];
    const int n = blockIdx.x;
    const int32_t t = targets[n];
    if (ce_target_negative(t, n)) return;
    const T *row = logits + (size_t)n * (size_t)V;
    const float mx = row_max[n];
    float acc = 0.0f;
    for (int j0 = threadIdx.x * 8; j0 < V_real; j0 += TR_BLOCK * 8) {
        float x[8];
        ld8<T>(row + j0, x);
#pragma unroll
        for (int e = 0; e < 8; e++)
            if (j0 + e < V_real) acc = acc + expf(x[e] - mx);
    }
    acc = block_sum(acc, sh);
    if (threadIdx.x == 0) {
        const long long local = ce_local(t, vocab_start);
        sum_exp[n] = acc;
        target_logit[n] = (local >= 0 && local < V_real) ? ce_ld(row + local) : 0.0f;
    }
}

__global__ void k_ce_loss_from_stats(float *losses, const float *row_max, const float *sum_exp,
                                     const float *target_logit, int N) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x)
        losses[n] = (row_max[n] - target_logit[n]) + logf(sum_exp[n]);
}

/* Row n's backward constants (max, the reciprocal of the sum of exponentials, dloss, the target's
 * column in the slice). A negative target stops the kernel (reported by one thread). */
struct ce_row {
    float mx, inv_se, dl;
    long long local;
};

__device__ __forceinline__ ce_row ce_row_of(int n, const int32_t *targets, int vocab_start, const float *row_max,
                                            const float *sum_exp, const float *dloss) {
    const int32_t t = targets[n];
    if (t < 0 && blockIdx.x == 0 && threadIdx.x == 0)
        TR_DEVICE_FAIL("cross entropy backward (vocab slice): target %d at row %d is negative\n", (int)t, n);
    return ce_row{row_max[n], 1.0f / sum_exp[n], dloss[n], ce_local(t, vocab_start)};
}

/* d loss / d logit j of a row from the logit x: (softmax - one-hot) * dloss; 0 on padding columns.
 * The softmax multiplies by the row's reciprocal sum (an fp32 division per logit held the backward
 * below the memory's bandwidth; within an ulp of the twin's quotient, far below bf16's rounding). */
__device__ __forceinline__ float ce_grad(const ce_row &r, float x, int j, int V_real) {
    if (j >= V_real) return 0.0f;
    const float p = expf(x - r.mx) * r.inv_se;
    return (p - (r.local == j ? 1.0f : 0.0f)) * r.dl;
}

/* A 2-D grid: blocks along a row (x) and over rows (y, striding past 65535), so no thread divides by
 * V. Element i is read, then written by the same thread, so dlogits may alias logits. */
__global__ void k_ce_slice_bwd(tr_buf dlogits, tr_buf logits, const float *row_max, const float *sum_exp,
                               const int32_t *targets, int vocab_start, const float *dloss, int N, int V,
                               int V_real) {
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        const ce_row r = ce_row_of(n, targets, vocab_start, row_max, sum_exp, dloss);
        const size_t row = (size_t)n * (size_t)V;
        for (int j = blockIdx.x * blockDim.x + threadIdx.x; j < V; j += gridDim.x * blockDim.x)
            stf(dlogits, row + j, j < V_real ? ce_grad(r, ldf(logits, row + j), j, V_real) : 0.0f);
    }
}

/* k_ce_slice_bwd eight elements a thread (one dtype, V % 8 == 0, 16-byte aligned rows): the same
 * arithmetic per element, 16-byte loads and stores. */
template <typename T>
__global__ void k_ce_slice_bwd8(T *dlogits, const T *logits, const float *row_max, const float *sum_exp,
                                const int32_t *targets, int vocab_start, const float *dloss, int N, int V, int V_real) {
    for (int n = blockIdx.y; n < N; n += gridDim.y) {
        const ce_row r = ce_row_of(n, targets, vocab_start, row_max, sum_exp, dloss);
        const size_t row = (size_t)n * (size_t)V;
        for (int j0 = (blockIdx.x * blockDim.x + threadIdx.x) * 8; j0 < V; j0 += gridDim.x * blockDim.x * 8) {
            float x[8];
            ld8<T>(logits + row + j0, x);
#pragma unroll
            for (int e = 0; e < 8; e++) x[e] = ce_grad(r, x[e], j0 + e, V_real);
            st8<T>(dlogits + row + j0, x);
        }
    }
}

/* Rows the eight-a-thread kernels take: bf16 or fp32, V a multiple of 8, 16-byte aligned. */
static bool ce_rows8(tr_buf logits, int V) {
    return (logits.dt == TR_BF16 || logits.dt == TR_F32) && V % 8 == 0 && tr_aligned16(logits.p);
}

extern "C" void kern_ce_slice_max(dev_stream *s, float *row_max, tr_buf logits, int N, int V, int V_real) {
    TR_PROF(s, "ce_slice_max");
    kern_ce_slice_max_check(s, row_max, logits, N, V, V_real);
    if (ce_rows8(logits, V)) {
        if (logits.dt == TR_BF16)
            k_ce_slice_max8<uint16_t><<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(row_max, (const uint16_t *)logits.p, V, V_real);
        else
            k_ce_slice_max8<float><<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(row_max, (const float *)logits.p, V, V_real);
        CU_CHECK_LAUNCH("k_ce_slice_max8");
        return;
    }
    k_ce_slice_max<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(row_max, logits, V, V_real);
    CU_CHECK_LAUNCH("k_ce_slice_max");
}

extern "C" void kern_ce_slice_sums(dev_stream *s, float *sum_exp, float *target_logit, tr_buf logits,
                                   const float *row_max, const int32_t *targets, int vocab_start, int N, int V,
                                   int V_real) {
    TR_PROF(s, "ce_slice_sums");
    kern_ce_slice_sums_check(s, sum_exp, target_logit, logits, row_max, targets, vocab_start, N, V, V_real);
    if (ce_rows8(logits, V)) {
        if (logits.dt == TR_BF16)
            k_ce_slice_sums8<uint16_t><<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(
                sum_exp, target_logit, (const uint16_t *)logits.p, row_max, targets, vocab_start, V, V_real);
        else
            k_ce_slice_sums8<float><<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(
                sum_exp, target_logit, (const float *)logits.p, row_max, targets, vocab_start, V, V_real);
        CU_CHECK_LAUNCH("k_ce_slice_sums8");
        return;
    }
    k_ce_slice_sums<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(sum_exp, target_logit, logits, row_max, targets,
                                                         vocab_start, V, V_real);
    CU_CHECK_LAUNCH("k_ce_slice_sums");
}

extern "C" void kern_ce_loss_from_stats(dev_stream *s, float *losses, const float *row_max, const float *sum_exp,
                                        const float *target_logit, int N) {
    TR_PROF(s, "ce_loss_from_stats");
    kern_ce_loss_from_stats_check(s, losses, row_max, sum_exp, target_logit, N);
    k_ce_loss_from_stats<<<grid_for((size_t)N), TR_BLOCK, 0, tr_cu_stream(s)>>>(losses, row_max, sum_exp,
                                                                              target_logit, N);
    CU_CHECK_LAUNCH("k_ce_loss_from_stats");
}

extern "C" void kern_ce_slice_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const float *row_max,
                                       const float *sum_exp, const int32_t *targets, int vocab_start,
                                       const float *dloss, int N, int V, int V_real) {
    TR_PROF(s, "ce_slice_backward");
    kern_ce_slice_backward_check(s, dlogits, logits, row_max, sum_exp, targets, vocab_start, dloss, N, V, V_real);
    if (N == 0 || V == 0) return;
    if (dlogits.dt == logits.dt && (logits.dt == TR_BF16 || logits.dt == TR_F32) && V % 8 == 0 &&
        tr_aligned16(dlogits.p) && tr_aligned16(logits.p)) {
        /* a few thousand blocks, each over many rows: a block per (chunk, row) made ~500k blocks of
         * 16-byte loads at the 8B/70B shapes (N 8192, V 128256), their scheduling a large share */
        const int chunks = (V / 8 + TR_BLOCK - 1) / TR_BLOCK, gx = chunks < 64 ? chunks : 64;
        const int gy = N < 8192 / gx ? N : (8192 / gx > 0 ? 8192 / gx : 1);
        const dim3 grid8((unsigned)gx, (unsigned)gy);
        if (logits.dt == TR_BF16)
            k_ce_slice_bwd8<uint16_t><<<grid8, TR_BLOCK, 0, tr_cu_stream(s)>>>(
                (uint16_t *)dlogits.p, (const uint16_t *)logits.p, row_max, sum_exp, targets, vocab_start, dloss, N,
                V, V_real);
        else
            k_ce_slice_bwd8<float><<<grid8, TR_BLOCK, 0, tr_cu_stream(s)>>>((float *)dlogits.p,
                                                                            (const float *)logits.p, row_max, sum_exp,
                                                                            targets, vocab_start, dloss, N, V, V_real);
        CU_CHECK_LAUNCH("k_ce_slice_bwd8");
        return;
    }
    const unsigned bx = (unsigned)((V + TR_BLOCK - 1) / TR_BLOCK < 64 ? (V + TR_BLOCK - 1) / TR_BLOCK : 64);
    const dim3 grid(bx, (unsigned)(N < 65535 ? N : 65535));
    k_ce_slice_bwd<<<grid, TR_BLOCK, 0, tr_cu_stream(s)>>>(dlogits, logits, row_max, sum_exp, targets, vocab_start,
                                                           dloss, N, V, V_real);
    CU_CHECK_LAUNCH("k_ce_slice_bwd");
}
