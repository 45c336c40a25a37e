/* Private to kern_attention.cu: the FlashAttention-2-style kernels (kern_attention_flash.cu) for bf16
 * q/k/v/out (and their gradients) with head dim 64 or 128, every pointer 16-byte aligned. q_pos and
 * k_pos NULL: causal (Tq = Tk); else query i sees key j iff k_pos[j] <= q_pos[i]. Shapes and lse as in
 * kern.h. The MUSA build has no tensor-core path here: tr_cu_flash_supported is false there. */
#ifndef TWINRUN_CUDA_KERN_ATTENTION_FLASH_H
#define TWINRUN_CUDA_KERN_ATTENTION_FLASH_H

#include "seam.h"

#ifdef __cplusplus
extern "C" {
#endif

bool tr_cu_flash_supported(int D);
/* Chooses the kernel variant of the launches that follow (names as TWINRUN_FLASH_VARIANT takes them:
 * "default" (= "all"), "plain" (none), or rt2, occ, bq64, ex2, all joined by '+'; kern_attention_flash.cuh's FLV_* say what
 * they do), overriding the variable. Returns the variant's flags, or -1 (nothing changed) for an
 * unknown name; -1 on MUSA. For tools/flash_bench. */
int tr_cu_flash_set_variant(const char *name);
/* The flags of that result that change the arithmetic (FLV_EX2): a variant without them must give
 * the default's bits. */
#define TR_CU_FLASH_INEXACT 8
void tr_cu_flash_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, const int32_t *q_pos,
                         const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D);
void tr_cu_flash_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v,
                          tr_buf out, const float *lse, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq,
                          int Tk, int NH, int KV, int D);

#ifdef __cplusplus
}
#endif

#endif
