/* The host side of the flash-attention kernels (kern_attention_flash.cuh): the launch templates, one
 * instantiation per head dim and mask, each in its own translation unit (kern_attention_flash_d*.cu)
 * so that nvcc compiles them side by side — as one file it was a 65-s compile that alone set the
 * cuda build's wall time on 2 cores. kern_attention_flash.cu holds the entry points and the variant
 * choice. Not for MUSA (no tensor-core path there: kern_attention_flash.cu builds only the stubs). */
#ifndef TWINRUN_CUDA_KERN_ATTENTION_FLASH_LAUNCH_CUH
#define TWINRUN_CUDA_KERN_ATTENTION_FLASH_LAUNCH_CUH

#include <math.h>
#include <type_traits>

#include "kern_attention_flash.h"
#include "kern_common.cuh"

#include "kern_attention_flash.cuh" /* after kern_common.cuh, whose helpers its kernels use */

namespace tr_flash_launch {
using namespace tr_flash;

/* the FLV_* flags in force: by tr_cu_flash_set_variant, else TWINRUN_FLASH_VARIANT (kern_attention_flash.cu) */
unsigned flash_variant();

/* f(std::integral_constant<unsigned, flags & MASK>()): one instantiation for each subset of MASK, the
 * kernel templates' V, chosen by the run-time flags. */
template <unsigned MASK, unsigned V = 0, class F> void with_flags(unsigned flags, F &&f) {
    if constexpr (MASK == 0) {
        f(std::integral_constant<unsigned, V>());
    } else {
        constexpr unsigned bit = MASK & (~MASK + 1u); /* the lowest flag left */
        if (flags & bit) with_flags<MASK & ~bit, V | bit>(flags, f);
        else with_flags<MASK & ~bit, V>(flags, f);
    }
}

/* Kernels with more than the default 48 KiB of dynamic shared memory must say so first. */
template <class Kernel> void allow_smem(Kernel kernel, size_t bytes) {
    if (bytes > 48u * 1024u)
        CU_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

inline void flash_scales(int D, float *scale, float *scale_log2) {
    const double sc = 1.0 / sqrt((double)D);
    *scale = (float)sc;
    *scale_log2 = (float)(sc * 1.4426950408889634);
}

template <int D, class Mask>
void forward_d(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int Tq, int Tk, int NH,
               int KV, Mask mask) {
    float scale, scale_log2;
    flash_scales(D, &scale, &scale_log2);
    with_flags<FLV_FWD_FLAGS>(flash_variant(), [&](auto vtag) {
        constexpr unsigned V = decltype(vtag)::value;
        constexpr int BM = fwd_bm<D, V>;
        const size_t shm = fwd_smem<D, V>();
        allow_smem(k_flash_fwd<D, Mask, V>, shm);
        const dim3 grid((unsigned)((Tq + BM - 1) / BM), (unsigned)NH, (unsigned)B);
        k_flash_fwd<D, Mask, V><<<grid, FL_THREADS, shm, tr_cu_stream(s)>>>(
            (uint16_t *)out.p, lse, (const uint16_t *)q.p, (const uint16_t *)k.p, (const uint16_t *)v.p, Tq, Tk, NH, KV,
            scale_log2, mask);
        CU_CHECK_LAUNCH("k_flash_fwd");
    });
}

template <int D, class Mask>
void backward_d(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, tr_buf out,
                const float *lse, int B, int Tq, int Tk, int NH, int KV, Mask mask) {
    float scale, scale_log2;
    flash_scales(D, &scale, &scale_log2);
    cudaStream_t st = tr_cu_stream(s);
    const size_t rows = (size_t)B * Tq * NH;
    float *delta = (float *)tr_cu_scratch(s, rows * sizeof(float), "attention delta"); /* [B,NH,Tq] */
    k_flash_delta<D><<<(unsigned)((rows + FL_THREADS / 32 - 1) / (FL_THREADS / 32)), FL_THREADS, 0, st>>>(
        delta, (const uint16_t *)dout.p, (const uint16_t *)out.p, Tq, NH, rows);
    CU_CHECK_LAUNCH("k_flash_delta");
    const unsigned variant = flash_variant();
    with_flags<FLV_DQ_FLAGS>(variant, [&](auto vtag) {
        constexpr unsigned V = decltype(vtag)::value;
        const size_t shm_dq = dq_smem<D, V>();
        allow_smem(k_flash_bwd_dq<D, Mask, V>, shm_dq);
        k_flash_bwd_dq<D, Mask, V>
            <<<dim3((unsigned)((Tq + FL_BM - 1) / FL_BM), (unsigned)NH, (unsigned)B), FL_THREADS, shm_dq, st>>>(
                (uint16_t *)dq.p, (const uint16_t *)dout.p, (const uint16_t *)q.p, (const uint16_t *)k.p,
                (const uint16_t *)v.p, lse, delta, Tq, Tk, NH, KV, scale, scale_log2, mask);
        CU_CHECK_LAUNCH("k_flash_bwd_dq");
    });
    const int rep = NH / KV;
    const size_t nk = (size_t)B * Tk * KV * D;
    float *part_k = NULL, *part_v = NULL; /* [B,Tk,NH,D] each: every head's dK/dV share (groups of > 1 head) */
    if (rep > 1) {
        part_k = (float *)tr_cu_scratch(s, nk * rep * sizeof(float), "attention dK shares");
        part_v = (float *)tr_cu_scratch(s, nk * rep * sizeof(float), "attention dV shares");
    }
    with_flags<FLV_DKV_FLAGS>(variant, [&](auto vtag) {
        constexpr unsigned V = decltype(vtag)::value;
        const size_t shm_dkv = dkv_smem<D, V>();
        allow_smem(k_flash_bwd_dkv<D, Mask, V>, shm_dkv);
        k_flash_bwd_dkv<D, Mask, V>
            <<<dim3((unsigned)((Tk + FL_BN - 1) / FL_BN), (unsigned)NH, (unsigned)B), FL_THREADS, shm_dkv, st>>>(
                (uint16_t *)dk.p, (uint16_t *)dv.p, part_k, part_v, (const uint16_t *)dout.p, (const uint16_t *)q.p,
                (const uint16_t *)k.p, (const uint16_t *)v.p, lse, delta, Tq, Tk, NH, KV, scale, scale_log2, mask);
        CU_CHECK_LAUNCH("k_flash_bwd_dkv");
    });
    if (rep > 1) {
        k_flash_dkv_reduce<<<(unsigned)((nk + 255) / 256), 256, 0, st>>>((uint16_t *)dk.p, (uint16_t *)dv.p, part_k,
                                                                         part_v, KV, rep, D, scale, nk);
        CU_CHECK_LAUNCH("k_flash_dkv_reduce");
        tr_cu_scratch_free(s, part_v);
        tr_cu_scratch_free(s, part_k);
    }
    tr_cu_scratch_free(s, delta);
}

} /* namespace tr_flash_launch */

/* One (head dim, mask) pair's forward and backward, compiled in the file that expands this. */
#define TR_FLASH_INSTANTIATE(D, Mask)                                                                                  \
    namespace tr_flash_launch {                                                                                        \
    template void forward_d<D, Mask>(dev_stream *, tr_buf, float *, tr_buf, tr_buf, tr_buf, int, int, int, int, int,   \
                                     Mask);                                                                            \
    template void backward_d<D, Mask>(dev_stream *, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf,    \
                                      const float *, int, int, int, int, int, Mask);                                   \
    }

/* The same, declared: the entry points' file must not instantiate them itself. */
#define TR_FLASH_EXTERN(D, Mask)                                                                                       \
    namespace tr_flash_launch {                                                                                        \
    extern template void forward_d<D, Mask>(dev_stream *, tr_buf, float *, tr_buf, tr_buf, tr_buf, int, int, int, int, \
                                            int, Mask);                                                                \
    extern template void backward_d<D, Mask>(dev_stream *, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf, tr_buf,     \
                                             tr_buf, const float *, int, int, int, int, int, Mask);                    \
    }

#endif
