/* Shared by the kernels of this folder: typed element access, bf16 bits, deterministic block
 * reductions, launch helpers and host-side argument checks.
 *
 * Numerics (what "naive but exact in spirit" means here):
 * - loads widen bf16 -> fp32 exactly; arithmetic is fp32; stores to bf16 round to nearest-even
 *   with the same bit recipe as tr_f32_to_bf16 (dtype.h), so a cast agrees with the twin bit for bit;
 * - built with --fmad=false (no multiply-add contraction), like the twin's -ffp-contract=off;
 * - every reduction has a fixed order: a shared-memory tree over a fixed block size (no warp
 *   shuffles, whose width differs on MUSA; no float atomics), so same inputs give the same bits
 *   on every run. The order differs from the twin's (which sums in double), hence tolerances.
 * - element types are read at run time from tr_buf.dt (a warp-uniform branch), so one kernel
 *   serves every fp32/bf16 mix without a template per combination. */
#ifndef TWINRUN_CUDA_KERN_COMMON_CUH
#define TWINRUN_CUDA_KERN_COMMON_CUH

#include <stdint.h>
#include <stdio.h>

#include "cuda_check.h"
#include "cuda_dev.h"
#include "seam.h"

#define TR_BLOCK 256 /* threads per block for reductions; a power of two */

/* ---- bf16 bits ------------------------------------------------------------------------------- */

__device__ __forceinline__ float tr_bf16_bits_to_f32(uint16_t h) { return __uint_as_float((uint32_t)h << 16); }

__device__ __forceinline__ uint16_t tr_f32_to_bf16_bits(float f) {
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu)) return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- typed access ------------------------------------------------------------------------------ */

__device__ __forceinline__ float ldf(tr_buf b, size_t i) {
    return b.dt == TR_BF16 ? tr_bf16_bits_to_f32(((const uint16_t *)b.p)[i]) : ((const float *)b.p)[i];
}

__device__ __forceinline__ void stf(tr_buf b, size_t i, float v) {
    if (b.dt == TR_BF16)
        ((uint16_t *)b.p)[i] = tr_f32_to_bf16_bits(v);
    else
        ((float *)b.p)[i] = v;
}

/* ---- eight elements at a time (16-byte loads and stores) --------------------------------------------
 * For the memory-bound kernels' fast paths: T is the storage type (uint16_t for bf16 bits, float);
 * p must be 16-byte aligned (tr_aligned16). The values are exactly ldf/stf's, only the loads are wider. */

template <typename T> __device__ __forceinline__ void ld8(const T *p, float v[8]);
template <typename T> __device__ __forceinline__ void st8(T *p, const float v[8]);

template <> __device__ __forceinline__ void ld8<uint16_t>(const uint16_t *p, float v[8]) {
    const uint4 u = *reinterpret_cast<const uint4 *>(p);
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; k++) {
        v[2 * k] = tr_bf16_bits_to_f32((uint16_t)(w[k] & 0xffffu));
        v[2 * k + 1] = tr_bf16_bits_to_f32((uint16_t)(w[k] >> 16));
    }
}

template <> __device__ __forceinline__ void st8<uint16_t>(uint16_t *p, const float v[8]) {
    uint32_t w[4];
#pragma unroll
    for (int k = 0; k < 4; k++)
        w[k] = (uint32_t)tr_f32_to_bf16_bits(v[2 * k]) | ((uint32_t)tr_f32_to_bf16_bits(v[2 * k + 1]) << 16);
    *reinterpret_cast<uint4 *>(p) = make_uint4(w[0], w[1], w[2], w[3]);
}

template <> __device__ __forceinline__ void ld8<float>(const float *p, float v[8]) {
    const float4 a = reinterpret_cast<const float4 *>(p)[0], b = reinterpret_cast<const float4 *>(p)[1];
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}

template <> __device__ __forceinline__ void st8<float>(float *p, const float v[8]) {
    reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
    reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}

/* ---- deterministic block reductions (blockDim.x == TR_BLOCK) ------------------------------------ */

/* Sum of v over the block; every thread gets the result. sh has TR_BLOCK floats. Fixed tree:
 * thread i adds i + stride for stride = TR_BLOCK/2 .. 1. */
__device__ __forceinline__ float block_sum(float v, float *sh) {
    const unsigned t = threadIdx.x;
    __syncthreads(); /* sh may still be read from a previous reduction */
    sh[t] = v;
    __syncthreads();
    for (unsigned stride = TR_BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride) sh[t] = sh[t] + sh[t + stride];
        __syncthreads();
    }
    return sh[0];
}

/* Max of v over the block (NaN-propagating: a NaN anywhere gives NaN). */
__device__ __forceinline__ float nan_max(float a, float b) { return (a != a || b != b) ? (a + b) : (a > b ? a : b); }

__device__ __forceinline__ float block_max(float v, float *sh) {
    const unsigned t = threadIdx.x;
    __syncthreads();
    sh[t] = v;
    __syncthreads();
    for (unsigned stride = TR_BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride) sh[t] = nan_max(sh[t], sh[t + stride]);
        __syncthreads();
    }
    return sh[0];
}

/* Reports a bad value found on the device (e.g. a token id outside the vocabulary) and stops the
 * kernel; the host sees cudaErrorAssert / a launch failure at its next synchronising call. */
#define TR_DEVICE_FAIL(...)                                                                                    \
    do {                                                                                                       \
        printf("twinrun: fatal (device): " __VA_ARGS__);                                                      \
        __trap();                                                                                              \
    } while (0)

/* ---- host helpers ------------------------------------------------------------------------------------ */

/* Whether p is 16-byte aligned (the ld8/st8 fast paths). */
static inline bool tr_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* Blocks for a grid-stride elementwise loop over n items at TR_BLOCK threads a block. */
static inline unsigned grid_for(size_t n) {
    size_t b = (n + TR_BLOCK - 1) / TR_BLOCK;
    if (b < 1) b = 1;
    if (b > 65535u * 8u) b = 65535u * 8u;
    return (unsigned)b;
}

#endif
