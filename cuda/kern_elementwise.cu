/* Elementwise kernels: add, scale, cast, and the deterministic sum of squares. */
#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_optim_common.cuh"

__global__ void k_add(tr_buf out, tr_buf a, tr_buf b, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        stf(out, i, ldf(a, i) + ldf(b, i)); /* element i read before written: out may alias a or b */
}

/* out = a + b eight elements a thread (one dtype, n % 8 == 0, 16-byte aligned): the same sums. */
template <typename T> __global__ void k_add8(T *out, const T *a, const T *b, size_t n8) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n8; j += (size_t)gridDim.x * blockDim.x) {
        float x[8], y[8];
        ld8<T>(a + 8 * j, x);
        ld8<T>(b + 8 * j, y);
#pragma unroll
        for (int k = 0; k < 8; k++) x[k] = x[k] + y[k];
        st8<T>(out + 8 * j, x);
    }
}

__global__ void k_scale(tr_buf x, float alpha, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        stf(x, i, ldf(x, i) * alpha);
}

__global__ void k_cast(tr_buf dst, tr_buf src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        stf(dst, i, ldf(src, i));
}

/* Pass 1: block j sums the squares of elements j*TR_BLOCK + t + r*G*TR_BLOCK (r = 0, 1, ...) per
 * thread in ascending r, then the block tree; partial[j] = that. G depends on n only. */
__global__ void k_sumsq_partial(float *partial, tr_buf x, size_t n) {
    __shared__ float sh[TR_BLOCK];
    float acc = 0.0f;
    for (size_t i = blockIdx.x * (size_t)TR_BLOCK + threadIdx.x; i < n; i += (size_t)gridDim.x * TR_BLOCK) {
        const float v = ldf(x, i);
        acc = acc + v * v;
    }
    const float s = block_sum(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/* Pass 2: k_sumsq_final (kern_optim_common.cuh). */

extern "C" void kern_add(dev_stream *s, tr_buf out, tr_buf a, tr_buf b, size_t n) {
    TR_PROF(s, "add");
    kern_add_check(s, out, a, b, n);
    if (n == 0) return;
    if (out.dt == a.dt && a.dt == b.dt && (a.dt == TR_BF16 || a.dt == TR_F32) && n % 8 == 0 && tr_aligned16(out.p) &&
        tr_aligned16(a.p) && tr_aligned16(b.p)) {
        if (a.dt == TR_BF16)
            k_add8<uint16_t><<<grid_for(n / 8), TR_BLOCK, 0, tr_cu_stream(s)>>>(
                (uint16_t *)out.p, (const uint16_t *)a.p, (const uint16_t *)b.p, n / 8);
        else
            k_add8<float><<<grid_for(n / 8), TR_BLOCK, 0, tr_cu_stream(s)>>>((float *)out.p, (const float *)a.p,
                                                                              (const float *)b.p, n / 8);
        CU_CHECK_LAUNCH("k_add8");
        return;
    }
    k_add<<<grid_for(n), TR_BLOCK, 0, tr_cu_stream(s)>>>(out, a, b, n);
    CU_CHECK_LAUNCH("k_add");
}

extern "C" void kern_scale(dev_stream *s, tr_buf x, float alpha, size_t n) {
    TR_PROF(s, "scale");
    kern_scale_check(s, x, alpha, n);
    if (n == 0) return;
    k_scale<<<grid_for(n), TR_BLOCK, 0, tr_cu_stream(s)>>>(x, alpha, n);
    CU_CHECK_LAUNCH("k_scale");
}

extern "C" void kern_cast(dev_stream *s, tr_buf dst, tr_buf src, size_t n) {
    TR_PROF(s, "cast");
    kern_cast_check(s, dst, src, n);
    if (n == 0) return;
    if (dst.dt == src.dt) { /* a bit copy: NaN payloads and -0 survive */
        dev_copy_d2d(s, dst.p, src.p, n * tr_dtype_size(dst.dt));
        return;
    }
    k_cast<<<grid_for(n), TR_BLOCK, 0, tr_cu_stream(s)>>>(dst, src, n);
    CU_CHECK_LAUNCH("k_cast");
}

extern "C" void kern_sum_squares(dev_stream *s, float *out, tr_buf x, size_t n) {
    TR_PROF(s, "sum_squares");
    kern_sum_squares_check(s, out, x, n);
    if (n == 0) return;
    const unsigned G = sumsq_blocks(n);
    float *partial = (float *)tr_cu_scratch(s, G * sizeof(float), "sum_squares partials");
    k_sumsq_partial<<<G, TR_BLOCK, 0, tr_cu_stream(s)>>>(partial, x, n);
    CU_CHECK_LAUNCH("k_sumsq_partial");
    k_sumsq_final<<<1, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, partial, G);
    CU_CHECK_LAUNCH("k_sumsq_final");
    tr_cu_scratch_free(s, partial);
}
