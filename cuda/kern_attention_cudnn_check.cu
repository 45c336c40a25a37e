/* How far a cuDNN attention candidate's outputs are from the reference engine's (kern_attention_cudnn.c,
 * dnn_choose): the sums of (x - ref)^2 and ref^2 over strided rows.
 *
 * Why: a timed choice may take an engine other than the heuristics' first, and cuDNN 9.19's second
 * engines (atomic and deterministic backward alike) returned dQ and dK 38% (relative L2) away from the
 * right ones on a context-parallel chunk (B 1, Tq = Tk = 1024 taken out of a 2048-row tensor, 2 heads /
 * 1 group, D 128) while dV was right — no error, no refusal. So a candidate is taken only when its
 * outputs agree with the first engine's on the call's own operands. Run once per shape, at the choice:
 * the order of the sums does not matter (double atomics, a threshold test, not bits). */
#include "cuda_dev.h"
#include "kern_attention_cudnn.h"
#include "kern_common.cuh"

#if defined(TWINRUN_CUDNN) && !defined(TWINRUN_MUSA)

namespace {

/* ref: [rows, n] packed; x: row r at x + r * rstride. sums[0] += (x - ref)^2, sums[1] += ref^2 */
__global__ void k_diff_sums(const void *ref, const void *x, bool bf16, int rows, int64_t n, int64_t rstride,
                            double *sums) {
    __shared__ double sd[256], sr[256];
    double d = 0, r2 = 0;
    const int64_t total = (int64_t)rows * n;
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (int64_t)gridDim.x * blockDim.x) {
        const int64_t row = i / n, col = i - row * n, xi = row * rstride + col;
        const float rv = bf16 ? tr_bf16_bits_to_f32(((const uint16_t *)ref)[i]) : ((const float *)ref)[i];
        const float xv = bf16 ? tr_bf16_bits_to_f32(((const uint16_t *)x)[xi]) : ((const float *)x)[xi];
        const double e = (double)xv - (double)rv;
        d += e * e, r2 += (double)rv * rv;
    }
    sd[threadIdx.x] = d, sr[threadIdx.x] = r2;
    __syncthreads();
    for (int w = blockDim.x / 2; w > 0; w /= 2) {
        if ((int)threadIdx.x < w) sd[threadIdx.x] += sd[threadIdx.x + w], sr[threadIdx.x] += sr[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) atomicAdd(&sums[0], sd[0]), atomicAdd(&sums[1], sr[0]);
}

} /* namespace */

extern "C" void tr_cu_cudnn_diff_sums(dev_stream *s, const void *ref, const void *x, bool bf16, int rows, int64_t n,
                                      int64_t rstride, double sums[2]) {
    cudaStream_t st = tr_cu_stream(s);
    double *d = (double *)tr_cu_scratch(s, 2 * sizeof(double), "attention candidate check");
    CU_CHECK(cudaMemsetAsync(d, 0, 2 * sizeof(double), st));
    const int64_t total = (int64_t)rows * n;
    const int blocks = (int)(total / 256 + 1 < 1024 ? total / 256 + 1 : 1024);
    k_diff_sums<<<blocks, 256, 0, st>>>(ref, x, bf16, rows, n, rstride, d);
    CU_CHECK_LAUNCH("k_diff_sums");
    double h[2];
    CU_CHECK(cudaMemcpyAsync(h, d, sizeof h, cudaMemcpyDeviceToHost, st));
    CU_CHECK(cudaStreamSynchronize(st));
    tr_cu_scratch_free(s, d);
    sums[0] += h[0], sums[1] += h[1];
}

#else

extern "C" void tr_cu_cudnn_diff_sums(dev_stream *s, const void *ref, const void *x, bool bf16, int rows, int64_t n,
                                      int64_t rstride, double sums[2]) {
    (void)s, (void)ref, (void)x, (void)bf16, (void)rows, (void)n, (void)rstride, (void)sums;
}

#endif
