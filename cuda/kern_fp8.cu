/* FP8 kernels: the quantising cast with its amax, the FP8 GEMM, the delayed-scaling update
 * (kern.h's FP8 section; the twin's sim/kern/kern_fp8.c is their oracle, tests/tools/kern_oracle.c --only fp8).
 *
 * Quantize: q[i] = fp8(x[i] * scale) — the fp32 product (--fmad=false), then the hardware's
 * cvt.rn.satfinite (cuda_fp8.h's __nv_cvt_float_to_fp8 with __NV_SATFINITE): round to nearest even,
 * +-inf and overflows to +-max, the same bytes as tr_fp8_from_f32. A NaN is written as 0x7F whatever
 * the hardware gives (the twin's canonical NaN, the same in both formats). Eight elements a thread
 * (16-byte loads, one 8-byte store) where x and q are aligned, the remainder one a thread. The amax is
 * fmaxf(|x|) over a thread, then over the block (fmaxf: a NaN is skipped), then one atomicMax per block
 * on the float's bits into amax[0] (non-negative floats order like their bits as ints): max is
 * order-free, so the result is deterministic. TWINRUN_FP8_CAST=sw takes the software conversion (the
 * MUSA build's, which has no cuda_fp8.h), so the oracle checks it on NVIDIA hardware too.
 *
 * Scale update: a block per 32 tensors rolls their histories and takes each window's largest entry in
 * parallel (k_fp8_scale_update), then computes the scale with tr_fp8_scale_from_window
 * (twinrun/fp8_scaling.h, __host__ __device__), the twin's own function: IEEE division (the build has
 * no fast-math and -prec-div's default, true), so both builds compute the same bits.
 *
 * GEMM: cuBLASLt's FP8 GEMM (kern_gemm_cublaslt.cu's plan cache, tr_cu_gemm_fp8_lt) takes both
 * operands K-major: in the seam's row-major terms only ta = false, tb = true is native. The engine's
 * casts write its operands in that layout (kern_fp8_cast_transpose: the weight gradient's transposed
 * input and output gradient, the data gradient's transposed weight), so every GEMM of a step is; other
 * callers' operands are byte-transposed into stream-ordered scratch first. fast_accum picks cuBLASLt's
 * fast accumulation (the forward's, TWINRUN_FP8_FAST_ACCUM=0 turns it off) or the split one.
 * Where cuBLASLt is not the GEMM path (TWINRUN_GEMM=blas or naive, the MUSA build), the fallback
 * widens both operands to bf16 (exact: every FP8 value is a bf16 value), runs kern_gemm's path into
 * an fp32 scratch product and applies alpha * scale_inv_a * scale_inv_b and beta in a last kernel.
 * The fallback is slower and (on MUSA) untested on hardware: docs/musa.md. */
#include <stdlib.h>
#include <string.h>

#ifndef TWINRUN_MUSA
#include <cuda_fp8.h>
#endif

#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_gemm.h"

/* ---- the conversion ------------------------------------------------------------------------------ */

/* Software fp32 -> fp8 (round to nearest even, saturating), tr_fp8_from_f32's rule in fp32 bits:
 * with e the exponent of |x| clamped below at emin (the subnormals' quantum), q = 2^(e - man) and
 * n = rint(|x| / q) (exact division by a power of two; rint rounds half to even), the code is
 * ((e - emin) << man) + n: n in [2^man, 2^(man+1)] carries into the exponent field by itself, and in
 * the subnormal range e = emin gives n alone. */
__device__ __forceinline__ uint8_t fp8_from_f32_sw(float x, int fmt) {
    if (x != x) return 0x7F;
    const int man = fmt == TR_FP8_E5M2 ? 2 : 3, bias = fmt == TR_FP8_E5M2 ? 15 : 7;
    const float maxv = fmt == TR_FP8_E5M2 ? 57344.0f : 448.0f;
    const uint8_t max_code = fmt == TR_FP8_E5M2 ? 0x7B : 0x7E;
    const uint32_t u = __float_as_uint(x);
    const uint8_t sign = (u >> 24) & 0x80u;
    const float a = __uint_as_float(u & 0x7fffffffu);
    if (a > maxv) return (uint8_t)(sign | max_code); /* also +-inf */
    if (a == 0.0f) return sign;
    const int emin = 1 - bias;
    int e = (int)((u >> 23) & 0xffu) - 127; /* fp32 subnormals (-127) are far below emin */
    if (e < emin) e = emin;
    const float n = rintf(a * __uint_as_float((uint32_t)(127 - (e - man)) << 23)); /* a / 2^(e - man) */
    return (uint8_t)(sign | (uint8_t)(((e - emin) << man) + (int)n));
}

__device__ __forceinline__ uint8_t fp8_from_f32(float x, int fmt, bool sw) {
#ifndef TWINRUN_MUSA
    if (!sw) {
        if (x != x) return 0x7F; /* the twin's canonical NaN, whatever the hardware's is */
        return (uint8_t)__nv_cvt_float_to_fp8(x, __NV_SATFINITE, fmt == TR_FP8_E5M2 ? __NV_E5M2 : __NV_E4M3);
    }
#else
    (void)sw;
#endif
    return fp8_from_f32_sw(x, fmt);
}

/* fp8 -> fp32, exact (tr_fp8_to_f32). */
__device__ __forceinline__ float fp8_to_f32(uint8_t b, int fmt) {
    const int man = fmt == TR_FP8_E5M2 ? 2 : 3, bias = fmt == TR_FP8_E5M2 ? 15 : 7;
    const int ef = (b & 0x7f) >> man, mf = b & ((1 << man) - 1);
    const float sign = (b & 0x80) ? -1.0f : 1.0f;
    if (fmt == TR_FP8_E4M3 && ef == 15 && mf == 7) return __uint_as_float(0x7fc00000u);
    if (fmt == TR_FP8_E5M2 && ef == 31) return mf ? __uint_as_float(0x7fc00000u) : sign * __uint_as_float(0x7f800000u);
    if (ef == 0) return sign * ldexpf((float)mf, 1 - bias - man);
    return sign * ldexpf((float)(mf + (1 << man)), ef - bias - man);
}

/* ---- quantize ----------------------------------------------------------------------------------- */

#define FP8_Q_BLOCKS_MAX 4096u

/* Max over the block with fmaxf (a NaN is skipped); thread 0 gets it. */
__device__ __forceinline__ float block_fmax(float v, float *sh) {
    const unsigned t = threadIdx.x;
    sh[t] = v;
    __syncthreads();
    for (unsigned stride = TR_BLOCK / 2; stride > 0; stride >>= 1) {
        if (t < stride) sh[t] = fmaxf(sh[t], sh[t + stride]);
        __syncthreads();
    }
    return sh[0];
}

__device__ __forceinline__ void amax_publish(float *amax, float v, float *sh) {
    const float m = block_fmax(v, sh);
    if (amax && threadIdx.x == 0) atomicMax((int *)amax, __float_as_int(m));
}

/* Elements [8 * n8, n) one a thread (all of them when n8 = 0: unaligned pointers). */
__global__ void k_fp8_quantize(uint8_t *q, float *amax, tr_buf x, const float *scale, size_t n8, size_t n, int fmt,
                               bool sw) {
    __shared__ float sh[TR_BLOCK];
    const float sc = scale[0];
    float am = 0.0f;
    for (size_t i = 8 * n8 + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = ldf(x, i);
        am = fmaxf(am, fabsf(v));
        q[i] = fp8_from_f32(v * sc, fmt, sw);
    }
    amax_publish(amax, am, sh);
}

/* Eight elements a thread: x 16-byte aligned, q 8-byte aligned; elements [0, 8 * n8). */
template <typename T>
__global__ void k_fp8_quantize8(uint8_t *q, float *amax, const T *x, const float *scale, size_t n8, int fmt, bool sw) {
    __shared__ float sh[TR_BLOCK];
    const float sc = scale[0];
    float am = 0.0f;
    for (size_t j = blockIdx.x * (size_t)blockDim.x + threadIdx.x; j < n8; j += (size_t)gridDim.x * blockDim.x) {
        float v[8];
        ld8<T>(x + 8 * j, v);
        uint32_t w[2] = {0u, 0u};
#pragma unroll
        for (int e = 0; e < 8; e++) {
            am = fmaxf(am, fabsf(v[e]));
            w[e >> 2] |= (uint32_t)fp8_from_f32(v[e] * sc, fmt, sw) << (8 * (e & 3));
        }
        reinterpret_cast<uint2 *>(q)[j] = make_uint2(w[0], w[1]);
    }
    amax_publish(amax, am, sh);
}

static unsigned fp8_q_grid(size_t items) {
    size_t b = (items + TR_BLOCK - 1) / TR_BLOCK;
    if (b < 1) b = 1;
    if (b > FP8_Q_BLOCKS_MAX) b = FP8_Q_BLOCKS_MAX; /* grid-stride beyond: fewer atomics on amax */
    return (unsigned)b;
}

/* TWINRUN_FP8_CAST=sw: the software conversion (the MUSA path) on CUDA too; read once per process. */
static bool fp8_cast_sw(void) {
    static int mode = -1;
    if (mode < 0) {
        const char *v = getenv("TWINRUN_FP8_CAST");
        if (v && *v && strcmp(v, "sw") != 0 && strcmp(v, "hw") != 0)
            tr_fatal("TWINRUN_FP8_CAST=%s: use hw (the hardware's conversion, the default on CUDA) or sw", v);
#ifdef TWINRUN_MUSA
        mode = 1;
#else
        mode = v && strcmp(v, "sw") == 0;
#endif
    }
    return mode == 1;
}

extern "C" void kern_fp8_quantize(dev_stream *s, uint8_t *q, float *amax, tr_buf x, const float *scale, size_t n,
                                  tr_fp8_format fmt) {
    TR_PROF(s, "fp8_quantize");
    kern_fp8_quantize_check(s, q, amax, x, scale, n, fmt);
    if (n == 0) return;
    const bool sw = fp8_cast_sw();
    const bool vec = tr_aligned16(x.p) && ((uintptr_t)q & 7u) == 0;
    const size_t n8 = vec ? n / 8 : 0;
    if (n8) {
        if (x.dt == TR_BF16)
            k_fp8_quantize8<uint16_t><<<fp8_q_grid(n8), TR_BLOCK, 0, tr_cu_stream(s)>>>(q, amax, (const uint16_t *)x.p,
                                                                                        scale, n8, (int)fmt, sw);
        else
            k_fp8_quantize8<float><<<fp8_q_grid(n8), TR_BLOCK, 0, tr_cu_stream(s)>>>(q, amax, (const float *)x.p, scale,
                                                                                     n8, (int)fmt, sw);
        CU_CHECK_LAUNCH("k_fp8_quantize8");
    }
    if (8 * n8 < n) {
        k_fp8_quantize<<<fp8_q_grid(n - 8 * n8), TR_BLOCK, 0, tr_cu_stream(s)>>>(q, amax, x, scale, n8, n, (int)fmt,
                                                                                 sw);
        CU_CHECK_LAUNCH("k_fp8_quantize");
    }
}

/* ---- cast-transpose ------------------------------------------------------------------------------ */

#define FP8_CT_TILE 64 /* a tile of x: 64 rows x 64 columns */

/* q [rows, cols] and/or qt [cols, rows] = fp8(x * scale), 64 x 64 tiles, a block of TR_BLOCK (256)
 * threads striding over them (one amax reduction a block, not a tile): each thread reads eight
 * neighbouring elements of a row (16 bytes of bf16), writes their eight bytes to q and to the tile in
 * shared memory; then each writes four bytes of a qt row — four rows of x at one column — from the
 * tile, so both stores are whole lines. Needs cols % 8 == 0, rows % 4 == 0, x 16-byte, q 8-byte and qt
 * 4-byte aligned (kern_fp8_cast_transpose checks; k_fp8_cast_t1 takes the rest). */
template <typename T>
__global__ void k_fp8_cast_t8(uint8_t *q, uint8_t *qt, float *amax, const T *x, const float *scale, int rows, int cols,
                              int fmt, bool sw) {
    __shared__ uint8_t tile[FP8_CT_TILE][FP8_CT_TILE + 4];
    __shared__ float sh[TR_BLOCK];
    const float sc = scale[0];
    const int row_tiles = (rows + FP8_CT_TILE - 1) / FP8_CT_TILE, col_tiles = (cols + FP8_CT_TILE - 1) / FP8_CT_TILE;
    const int c8 = (threadIdx.x % 8) * 8, q4 = (threadIdx.x % 16) * 4; /* 8 threads a row of x, 16 a row of qt */
    float am = 0.0f;
    for (long long tl = blockIdx.x; tl < (long long)row_tiles * col_tiles; tl += gridDim.x) {
        const int r0 = (int)(tl / col_tiles) * FP8_CT_TILE, c0 = (int)(tl % col_tiles) * FP8_CT_TILE;
        for (int dr = threadIdx.x / 8; dr < FP8_CT_TILE; dr += TR_BLOCK / 8) {
            const int r = r0 + dr, c = c0 + c8;
            if (r >= rows || c >= cols) continue; /* cols % 8 == 0: the eight are in or out together */
            float v[8];
            ld8<T>(x + (size_t)r * cols + c, v);
            uint32_t w[2] = {0u, 0u};
#pragma unroll
            for (int e = 0; e < 8; e++) {
                am = fmaxf(am, fabsf(v[e]));
                w[e >> 2] |= (uint32_t)fp8_from_f32(v[e] * sc, fmt, sw) << (8 * (e & 3));
            }
            if (q) *reinterpret_cast<uint2 *>(q + (size_t)r * cols + c) = make_uint2(w[0], w[1]);
            *reinterpret_cast<uint32_t *>(&tile[dr][c8]) = w[0];
            *reinterpret_cast<uint32_t *>(&tile[dr][c8 + 4]) = w[1];
        }
        __syncthreads(); /* the tile written */
        for (int dc = threadIdx.x / 16; dc < FP8_CT_TILE; dc += TR_BLOCK / 16) {
            const int c = c0 + dc, r = r0 + q4; /* qt row c, bytes r .. r + 3 (rows % 4 == 0: all or none) */
            if (c >= cols || r >= rows) continue;
            *reinterpret_cast<uint32_t *>(qt + (size_t)c * rows + r) =
                (uint32_t)tile[q4][dc] | (uint32_t)tile[q4 + 1][dc] << 8 | (uint32_t)tile[q4 + 2][dc] << 16 |
                (uint32_t)tile[q4 + 3][dc] << 24;
        }
        __syncthreads(); /* the tile read before the next one overwrites it */
    }
    amax_publish(amax, am, sh);
}

/* Any shape and alignment: one element a thread. */
__global__ void k_fp8_cast_t1(uint8_t *q, uint8_t *qt, float *amax, tr_buf x, const float *scale, size_t rows,
                              size_t cols, int fmt, bool sw) {
    __shared__ float sh[TR_BLOCK];
    const float sc = scale[0];
    float am = 0.0f;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < rows * cols;
         i += (size_t)gridDim.x * blockDim.x) {
        const float v = ldf(x, i);
        am = fmaxf(am, fabsf(v));
        const uint8_t b = fp8_from_f32(v * sc, fmt, sw);
        if (q) q[i] = b;
        if (qt) qt[(i % cols) * rows + i / cols] = b;
    }
    amax_publish(amax, am, sh);
}

extern "C" void kern_fp8_cast_transpose(dev_stream *s, uint8_t *q, uint8_t *qt, float *amax, tr_buf x,
                                        const float *scale, int rows, int cols, tr_fp8_format fmt) {
    kern_fp8_cast_transpose_check(s, q, qt, amax, x, scale, rows, cols, fmt);
    const size_t n = (size_t)rows * (size_t)cols;
    if (!qt) { /* the rows alone: the cast's own eight-a-thread path (its span and checks too) */
        kern_fp8_quantize(s, q, amax, x, scale, n, fmt);
        return;
    }
    TR_PROF(s, "fp8_quantize");
    if (n == 0) return;
    const bool sw = fp8_cast_sw();
    const bool tiled =
        cols % 8 == 0 && rows % 4 == 0 && tr_aligned16(x.p) && ((uintptr_t)q & 7u) == 0 && ((uintptr_t)qt & 3u) == 0;
    if (!tiled) {
        k_fp8_cast_t1<<<fp8_q_grid(n), TR_BLOCK, 0, tr_cu_stream(s)>>>(q, qt, amax, x, scale, (size_t)rows,
                                                                       (size_t)cols, (int)fmt, sw);
        CU_CHECK_LAUNCH("k_fp8_cast_t1");
        return;
    }
    /* as many blocks as stay resident (about eight of these a multiprocessor), each striding over tiles */
    const size_t tiles =
        (size_t)((rows + FP8_CT_TILE - 1) / FP8_CT_TILE) * (size_t)((cols + FP8_CT_TILE - 1) / FP8_CT_TILE);
    const size_t resident = (size_t)8 * (size_t)dev_stream_device(s)->nsm;
    const unsigned grid = (unsigned)(tiles < resident ? tiles : resident);
    if (x.dt == TR_BF16)
        k_fp8_cast_t8<uint16_t><<<grid, TR_BLOCK, 0, tr_cu_stream(s)>>>(q, qt, amax, (const uint16_t *)x.p, scale,
                                                                        rows, cols, (int)fmt, sw);
    else
        k_fp8_cast_t8<float><<<grid, TR_BLOCK, 0, tr_cu_stream(s)>>>(q, qt, amax, (const float *)x.p, scale, rows,
                                                                     cols, (int)fmt, sw);
    CU_CHECK_LAUNCH("k_fp8_cast_t8");
}

/* ---- scale update -------------------------------------------------------------------------------- */

#define FP8_SU_TENSORS 32 /* tensors a block: a warp's 32 neighbouring floats of each history row */
#define FP8_SU_ROWS 32    /* rows of the history a block moves at a time */

/* The histories [len, n] rolled by a block per 32 tensors: threadIdx.x picks the tensor (a warp reads a
 * row's 32 neighbouring floats), threadIdx.y a row of each band of 32. Row i takes row i + 1's entry
 * (the last row entry 0's, row 0 a zero), band after band from the top: a band reads rows up to one past
 * its own, waits for the block, then writes its rows — the next band reads only rows below those, so no
 * entry is written before it is read, and one block owns every row of its tensors. The window's largest
 * entry is a max over the thread's rows, then over the block's column (order-free), and the column's
 * first thread computes the scale with the twin's own tr_fp8_scale_from_window: the same bits as
 * tr_fp8_scale_update_strided per tensor (a thread walking a tensor's 1024 rows alone would take ~400 us
 * for 96 histories on an H100: one dependent load after another). */
__global__ void k_fp8_scale_update(float *hist, float *scale, float *scale_inv, int n, int len, int algo, float fp8_max,
                                   int margin) {
    __shared__ float col_max[FP8_SU_ROWS][FP8_SU_TENSORS + 1];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int t = blockIdx.x * FP8_SU_TENSORS + tx;
    const bool on = t < n; /* every thread reaches every barrier */
    const float last = on ? hist[t] : 0.0f;
    float wmax = 0.0f;
    for (int band = 0; band < len; band += FP8_SU_ROWS) {
        const int i = band + ty;
        float a = 0.0f;
        if (on && i < len) {
            a = i < len - 1 ? hist[(size_t)(i + 1) * n + t] : last;
            wmax = fmaxf(wmax, a);
        }
        __syncthreads(); /* the band's reads (and, in band 0, every thread's read of row 0) before its writes */
        if (on && i < len) hist[(size_t)i * n + t] = i > 0 ? a : 0.0f;
    }
    col_max[ty][tx] = wmax;
    __syncthreads();
    if (ty == 0 && on) {
        float m = 0.0f;
        for (int r = 0; r < FP8_SU_ROWS; r++) m = fmaxf(m, col_max[r][tx]);
        tr_fp8_scale_from_window(m, last, (tr_fp8_amax_algo)algo, fp8_max, margin, scale + t, scale_inv + t);
    }
}

extern "C" void kern_fp8_scale_update(dev_stream *s, float *hist, float *scale, float *scale_inv, int n, int len,
                                      tr_fp8_amax_algo algo, tr_fp8_format fmt, int margin) {
    TR_PROF(s, "fp8_scale_update");
    kern_fp8_scale_update_check(s, hist, scale, scale_inv, n, len, algo, fmt, margin);
    if (n == 0) return;
    /* tr_fp8_spec_of is host-only (twinrun/fp8.h): its max comes from here */
    const float fp8_max = tr_fp8_spec_of(fmt).max;
    const dim3 block(FP8_SU_TENSORS, FP8_SU_ROWS);
    k_fp8_scale_update<<<(unsigned)((n + FP8_SU_TENSORS - 1) / FP8_SU_TENSORS), block, 0, tr_cu_stream(s)>>>(
        hist, scale, scale_inv, n, len, (int)algo, fp8_max, margin);
    CU_CHECK_LAUNCH("k_fp8_scale_update");
}

/* ---- GEMM -------------------------------------------------------------------------------------- */

#define TR_T_TILE 32

/* dst[cols, rows] = src[rows, cols]^T, bytes; a 32 x 32 tile per block of 32 x 8 threads. */
__global__ void k_transpose_u8(uint8_t *dst, const uint8_t *src, int rows, int cols) {
    __shared__ uint8_t tile[TR_T_TILE][TR_T_TILE + 4];
    const int c0 = blockIdx.x * TR_T_TILE, r0 = blockIdx.y * TR_T_TILE;
    for (int dy = threadIdx.y; dy < TR_T_TILE; dy += blockDim.y) {
        const int r = r0 + dy, c = c0 + threadIdx.x;
        if (r < rows && c < cols) tile[dy][threadIdx.x] = src[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int dy = threadIdx.y; dy < TR_T_TILE; dy += blockDim.y) {
        const int c = c0 + dy, r = r0 + threadIdx.x; /* dst row c, column r */
        if (c < cols && r < rows) dst[(size_t)c * rows + r] = tile[threadIdx.x][dy];
    }
}

#define TR_T4_TILE 64

/* The same where rows and cols are multiples of 4 (every FP8 GEMM operand the engine makes): a 64 x 64
 * byte tile per block of 256 threads, each moving four bytes at a time both ways. The one-byte kernel
 * above moves 32 bytes a warp per access; this one 128, which is what the memory system wants. */
__global__ void k_transpose_u8x4(uint8_t *dst, const uint8_t *src, int rows, int cols) {
    __shared__ uint8_t tile[TR_T4_TILE][TR_T4_TILE + 4];
    const int c0 = blockIdx.x * TR_T4_TILE, r0 = blockIdx.y * TR_T4_TILE;
    const int q = (threadIdx.x % 16) * 4, line = threadIdx.x / 16; /* 16 threads a 64-byte line */
    for (int dy = line; dy < TR_T4_TILE; dy += 16) {
        const int r = r0 + dy, c = c0 + q;
        if (r < rows && c < cols) *(uint32_t *)&tile[dy][q] = *(const uint32_t *)&src[(size_t)r * cols + c];
    }
    __syncthreads();
    for (int dc = line; dc < TR_T4_TILE; dc += 16) { /* dst row c0 + dc, bytes r0 + q .. + 3 */
        const int c = c0 + dc, r = r0 + q;
        if (c < cols && r < rows)
            *(uint32_t *)&dst[(size_t)c * rows + r] = (uint32_t)tile[q][dc] | (uint32_t)tile[q + 1][dc] << 8 |
                                                      (uint32_t)tile[q + 2][dc] << 16 | (uint32_t)tile[q + 3][dc] << 24;
    }
}

static void transpose_u8_into(dev_stream *s, uint8_t *dst, const uint8_t *src, int rows, int cols) {
    if (rows % 4 == 0 && cols % 4 == 0 && ((uintptr_t)src | (uintptr_t)dst) % 4 == 0) {
        const dim3 grid((unsigned)((cols + TR_T4_TILE - 1) / TR_T4_TILE),
                        (unsigned)((rows + TR_T4_TILE - 1) / TR_T4_TILE));
        k_transpose_u8x4<<<grid, 256, 0, tr_cu_stream(s)>>>(dst, src, rows, cols);
        CU_CHECK_LAUNCH("k_transpose_u8x4");
        return;
    }
    const dim3 grid((unsigned)((cols + TR_T_TILE - 1) / TR_T_TILE), (unsigned)((rows + TR_T_TILE - 1) / TR_T_TILE));
    k_transpose_u8<<<grid, dim3(TR_T_TILE, 8), 0, tr_cu_stream(s)>>>(dst, src, rows, cols);
    CU_CHECK_LAUNCH("k_transpose_u8");
}

static uint8_t *transpose_u8(dev_stream *s, const uint8_t *src, int rows, int cols, const char *what) {
    uint8_t *dst = (uint8_t *)tr_cu_scratch(s, (size_t)rows * (size_t)cols, what);
    transpose_u8_into(s, dst, src, rows, cols);
    return dst;
}

extern "C" void kern_fp8_transpose(dev_stream *s, uint8_t *qt, const uint8_t *q, int rows, int cols) {
    TR_PROF(s, "fp8_quantize"); /* the cost class of the casts: bytes moved, no arithmetic */
    kern_fp8_transpose_check(s, qt, q, rows, cols);
    if ((size_t)rows * (size_t)cols == 0) return;
    transpose_u8_into(s, qt, q, rows, cols);
}

/* The fallback's operands: fp8 -> bf16 bits (exact). */
__global__ void k_fp8_to_bf16(uint16_t *out, const uint8_t *in, size_t n, int fmt) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = tr_f32_to_bf16_bits(fp8_to_f32(in[i], fmt));
}

/* The fallback's end: c = (alpha * (sa * sb)) * prod + beta * c (beta 0: c not read). */
__global__ void k_fp8_epilogue(tr_buf c, const float *prod, const float *sa, const float *sb, float alpha, float beta,
                               size_t n) {
    const float f = alpha * (sa[0] * sb[0]);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        const float v = f * prod[i];
        stf(c, i, beta != 0.0f ? v + beta * ldf(c, i) : v);
    }
}

static void gemm_fp8_fallback(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k,
                              bool ta, bool tb, float alpha, float beta) {
    const size_t an = (size_t)m * (size_t)k, bn = (size_t)k * (size_t)n, cn = (size_t)m * (size_t)n;
    uint16_t *a16 = (uint16_t *)tr_cu_scratch(s, an * 2, "gemm_fp8 fallback a (bf16)");
    uint16_t *b16 = (uint16_t *)tr_cu_scratch(s, bn * 2, "gemm_fp8 fallback b (bf16)");
    float *prod = (float *)tr_cu_scratch(s, cn * 4, "gemm_fp8 fallback product (fp32)");
    k_fp8_to_bf16<<<grid_for(an), TR_BLOCK, 0, tr_cu_stream(s)>>>(a16, a.p, an, (int)a.fmt);
    CU_CHECK_LAUNCH("k_fp8_to_bf16");
    k_fp8_to_bf16<<<grid_for(bn), TR_BLOCK, 0, tr_cu_stream(s)>>>(b16, b.p, bn, (int)b.fmt);
    CU_CHECK_LAUNCH("k_fp8_to_bf16");
    tr_cu_gemm_unprofiled(s, tr_buf_make(prod, TR_F32), tr_buf_make(a16, TR_BF16), tr_buf_make(b16, TR_BF16), m, n, k,
                          ta, tb, 1.0f, 0.0f);
    k_fp8_epilogue<<<grid_for(cn), TR_BLOCK, 0, tr_cu_stream(s)>>>(c, prod, a.scale_inv, b.scale_inv, alpha, beta, cn);
    CU_CHECK_LAUNCH("k_fp8_epilogue");
    tr_cu_scratch_free(s, prod);
    tr_cu_scratch_free(s, b16);
    tr_cu_scratch_free(s, a16);
}

extern "C" void kern_gemm_fp8(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k,
                              bool ta, bool tb, float alpha, float beta, bool fast_accum) {
    TR_PROF(s, "gemm_fp8");
    kern_gemm_fp8_check(s, c, a, b, m, n, k, ta, tb, alpha, beta, fast_accum);
    if (!tr_cu_gemm_fp8_lt_enabled(s)) {
        gemm_fp8_fallback(s, c, a, b, m, n, k, ta, tb, alpha, beta);
        return;
    }
    /* cuBLASLt's FP8 rules (cuBLAS docs, cublasLtMatmul, "FP8"): the TN layout (made here by
     * transposing), leading dimensions of A and B (k bytes) and of C/D (n elements) multiples of 16
     * bytes, 16-byte aligned pointers. */
    const size_t csz = tr_dtype_size(c.dt);
    if (k % 16 != 0 || ((size_t)n * csz) % 16 != 0 || !tr_aligned16(a.p) || !tr_aligned16(b.p) || !tr_aligned16(c.p))
        tr_fatal("gemm_fp8: m %d n %d k %d (ta %d tb %d) is no shape cuBLASLt's FP8 GEMM takes: k must be a multiple "
                 "of 16, n a multiple of %zu (%s output) and a, b, c 16-byte aligned; pad the layer's sizes, or run "
                 "FP8 GEMMs through the dequantising fallback (TWINRUN_GEMM=blas)",
                 m, n, k, (int)ta, (int)tb, 16 / csz, tr_dtype_name(c.dt));
    kern_fp8_operand ak = a, bk = b; /* a [m,k] and b [n,k], K-major */
    uint8_t *at = NULL, *bt = NULL;
    if (ta) ak.p = at = transpose_u8(s, a.p, k, m, "gemm_fp8 a transposed");  /* a [k,m] -> [m,k] */
    if (!tb) bk.p = bt = transpose_u8(s, b.p, k, n, "gemm_fp8 b transposed"); /* b [k,n] -> [n,k] */
    tr_cu_gemm_fp8_lt(s, c, ak, bk, m, n, k, alpha, beta, fast_accum);
    if (bt) tr_cu_scratch_free(s, bt);
    if (at) tr_cu_scratch_free(s, at);
}
