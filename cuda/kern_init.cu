/* Parameter initialisation on the device: the generator of twinrun/init_normal.h, one thread per
 * element, so the 1.5B-parameter model starts in milliseconds instead of a minute of host Box-Muller.
 *
 * Bit-identical to the host (the twin, checkpoints written by either build, llama_init_value): the
 * uniforms and sqrt are exact on both sides, but the GPU's double log and cos may differ from libm's
 * in their last bits. Those differences (a few ulps of double) can change the fp32 rounding of a value
 * only if it lies within them of a rounding boundary (the midpoint between two floats). The kernel
 * flags every value within 2^-40 of one (relative: thousands of ulps of margin, about 1 element in
 * 30 000) and the host recomputes those with libm and writes them over the device's. */
#include <stdlib.h>

#include "gpu_profile.h"
#include "kern_common.cuh"
#include "twinrun/init_normal.h"

/* v rounds to f; could a last-bit change of v round it elsewhere? */
__device__ __forceinline__ bool init_rounding_close(double v, float f) {
    const double a = fabs(v);
    if (!(a >= 0x1p-60)) return true; /* 0, tiny or NaN: the host decides */
    const float g = nextafterf(f, v > (double)f ? INFINITY : -INFINITY); /* the neighbour on v's side */
    const double mid = ((double)f + (double)g) * 0.5; /* exact: two adjacent floats */
    return fabs(v - mid) <= a * 0x1p-40;
}

__global__ void k_init_param(float *out, size_t n, kern_init_desc d, unsigned long long *nfix,
                             unsigned long long *fix, unsigned long long cap) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        if (!d.normal) {
            out[i] = d.constant;
            continue;
        }
        const uint64_t e = tr_init_global_index((uint64_t)d.first + i, d.cols, d.gcols, d.col0, d.nseg, d.seg_local1,
                                                d.seg_global0, d.seg_global1); /* out[i] is local element first + i */
        const double v = tr_init_normal_double(d.key, e, d.std);
        const float f = (float)v;
        out[i] = f;
        if (init_rounding_close(v, f)) {
            const unsigned long long slot = atomicAdd(nfix, 1ull);
            if (slot < cap) fix[slot] = (unsigned long long)i;
        }
    }
}

__global__ void k_init_scatter(float *out, const unsigned long long *idx, const float *val, size_t m) {
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < m; j += (size_t)gridDim.x * blockDim.x)
        out[idx[j]] = val[j];
}

static float host_value(const kern_init_desc *d, size_t i) {
    return (float)tr_init_normal_double(
        d->key,
        tr_init_global_index((uint64_t)d->first + i, d->cols, d->gcols, d->col0, d->nseg, d->seg_local1, d->seg_global0,
                             d->seg_global1),
        d->std);
}

extern "C" void kern_init_param(dev_stream *s, const kern_init_desc *d, float *out, size_t n) {
    TR_PROF(s, "init_param");
    kern_init_param_check(s, d, out, n);
    if (n == 0) return;
    cudaStream_t st = tr_cu_stream(s);
    const unsigned long long cap = (unsigned long long)(n / 1024 + 4096);
    unsigned long long *nfix =
        (unsigned long long *)tr_cu_scratch(s, (size_t)(cap + 1) * sizeof *nfix, "init fix-up list"); /* [1 + cap] */
    CU_CHECK(cudaMemsetAsync(nfix, 0, sizeof *nfix, st));
    k_init_param<<<grid_for(n), TR_BLOCK, 0, st>>>(out, n, *d, nfix, nfix + 1, cap);
    CU_CHECK_LAUNCH("k_init_param");
    if (!d->normal) {
        tr_cu_scratch_free(s, nfix);
        return;
    }
    unsigned long long count = 0;
    CU_CHECK(cudaMemcpyAsync(&count, nfix, sizeof count, cudaMemcpyDeviceToHost, st));
    CU_CHECK(cudaStreamSynchronize(st));
    if (count > cap) { /* never expected (about n / 30000 values): the host computes the whole shard */
        float *h = (float *)malloc(n * sizeof *h);
        if (!h) tr_fatal("out of host memory initialising a parameter of %zu elements", n);
        for (size_t i = 0; i < n; i++) h[i] = host_value(d, i);
        CU_CHECK(cudaMemcpyAsync(out, h, n * sizeof *h, cudaMemcpyHostToDevice, st));
        CU_CHECK(cudaStreamSynchronize(st));
        free(h);
    } else if (count > 0) {
        const size_t m = (size_t)count;
        unsigned long long *idx = (unsigned long long *)malloc(m * sizeof *idx);
        float *val = (float *)malloc(m * sizeof *val);
        if (!idx || !val) tr_fatal("out of host memory for %zu initialisation fix-ups", m);
        CU_CHECK(cudaMemcpyAsync(idx, nfix + 1, m * sizeof *idx, cudaMemcpyDeviceToHost, st));
        CU_CHECK(cudaStreamSynchronize(st));
        for (size_t j = 0; j < m; j++) val[j] = host_value(d, (size_t)idx[j]);
        float *dval = (float *)tr_cu_scratch(s, m * sizeof *dval, "init fix-up values"); /* [m] */
        CU_CHECK(cudaMemcpyAsync(dval, val, m * sizeof *val, cudaMemcpyHostToDevice, st));
        k_init_scatter<<<grid_for(m), TR_BLOCK, 0, st>>>(out, nfix + 1, dval, m);
        CU_CHECK_LAUNCH("k_init_scatter");
        CU_CHECK(cudaStreamSynchronize(st)); /* the host arrays are freed next */
        tr_cu_scratch_free(s, dval);
        free(val);
        free(idx);
    }
    tr_cu_scratch_free(s, nfix);
}
