/* The fallback GEMM: 16x16 shared-memory tiles, one output element per thread, fp32 accumulation
 * in ascending k (deterministic), epilogue alpha*acc + beta*c with c unread when beta == 0.
 * Row-major with the same op(a)/op(b) conventions as kern_gemm. Correct, not fast. */
#include "kern_common.cuh"
#include "kern_gemm.h"

#define TR_GEMM_TILE 16

__global__ void k_gemm_tiled(tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
                             float beta) {
    __shared__ float As[TR_GEMM_TILE][TR_GEMM_TILE + 1], Bs[TR_GEMM_TILE][TR_GEMM_TILE + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TR_GEMM_TILE + ty, col = blockIdx.x * TR_GEMM_TILE + tx;
    float acc = 0.0f;
    for (int p0 = 0; p0 < k; p0 += TR_GEMM_TILE) {
        const int ac = p0 + tx; /* op(a)[row, ac] */
        As[ty][tx] = (row < m && ac < k) ? ldf(a, ta ? (size_t)ac * m + row : (size_t)row * k + ac) : 0.0f;
        const int br = p0 + ty; /* op(b)[br, col] */
        Bs[ty][tx] = (br < k && col < n) ? ldf(b, tb ? (size_t)col * k + br : (size_t)br * n + col) : 0.0f;
        __syncthreads();
        const int pn = min(TR_GEMM_TILE, k - p0);
        for (int pp = 0; pp < pn; pp++) acc = acc + As[ty][pp] * Bs[pp][tx];
        __syncthreads();
    }
    if (row < m && col < n) {
        const size_t idx = (size_t)row * n + col;
        float v = alpha * acc;
        if (beta != 0.0f) v = v + beta * ldf(c, idx);
        stf(c, idx, v);
    }
}

extern "C" void tr_cu_gemm_naive(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb,
                                 float alpha, float beta) {
    TR_CHECK((m + TR_GEMM_TILE - 1) / TR_GEMM_TILE <= 65535, "gemm: m too large for the fallback kernel's grid");
    dim3 grid((unsigned)((n + TR_GEMM_TILE - 1) / TR_GEMM_TILE), (unsigned)((m + TR_GEMM_TILE - 1) / TR_GEMM_TILE));
    k_gemm_tiled<<<grid, dim3(TR_GEMM_TILE, TR_GEMM_TILE), 0, tr_cu_stream(s)>>>(c, a, b, m, n, k, ta, tb, alpha,
                                                                                 beta);
    CU_CHECK_LAUNCH("k_gemm_tiled");
}
