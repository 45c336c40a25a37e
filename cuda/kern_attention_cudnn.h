/* Private to kern_attention.cu: causal grouped-query attention through cuDNN's fused flash-attention
 * engines (kern_attention_cudnn.c), bf16 in and out, fp32 statistics. Built when CMake finds cuDNN 9
 * (TWINRUN_CUDNN); without it tr_cu_cudnn_usable is false and the flash kernels serve.
 *
 * One call is one causal block: queries [B,Tq,NH,D] against keys and values [B,Tk,KV,D], query i
 * sees key j iff j <= i + (Tk - Tq) (the diagonal at the bottom right: with Tq = Tk plain causal
 * attention, with Tq < Tk the queries are the last Tq positions of a sequence whose first Tk keys
 * they see — one context-parallel chunk against the all-gathered prefix). The tensors may be slices
 * of larger ones: the row strides are the layouts' (NH*D, KV*D), the batch strides are given, and the
 * statistics row of (b, h) starts at lse + b * lse_bstride + h * lse_hstride. */
#ifndef TWINRUN_CUDA_KERN_ATTENTION_CUDNN_H
#define TWINRUN_CUDA_KERN_ATTENTION_CUDNN_H

#include <stdbool.h>
#include <stdint.h>

#include "seam.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tr_cu_sdpa {
    int B, Tq, Tk, NH, KV, D;
    int64_t q_bstride;   /* elements between batch rows of q, out, dout, dq */
    int64_t k_bstride;   /* of k, v, dk, dv */
    int64_t lse_bstride; /* of lse */
    int64_t lse_hstride; /* between heads of lse */
    const void *q, *k, *v, *dout;
    void *out, *dq, *dk, *dv;
    float *lse; /* log-sum-exp of each query's scaled scores, natural log (kern.h's lse) */
} tr_cu_sdpa;

/* cuDNN is built in, its library is 9.x, and the device can run its fused attention (sm_80 or later).
 * Read once per device. */
bool tr_cu_cudnn_usable(dev_stream *s);
/* out and lse from q, k, v. False (nothing written) when cuDNN has no engine for this shape: the
 * caller takes its own kernels, and the first refusal of each shape says why on stderr. */
bool tr_cu_cudnn_forward(dev_stream *s, const tr_cu_sdpa *a);
/* dq, dk, dv (overwrite) from dout, q, k, v, out, lse. deterministic: cuDNN's dP-workspace backward
 * (dQ summed in a fixed order; a [B,NH,Tq,Tk] bf16 workspace), else the default one, whose dQ is
 * accumulated in fp32 with atomics. False (nothing written) when no engine takes the shape. */
bool tr_cu_cudnn_backward(dev_stream *s, const tr_cu_sdpa *a, bool deterministic);

/* kern_attention_forward_pos / backward_pos's contract (kern.h) on cuDNN, when the positions are runs
 * of consecutive query positions against k_pos = 0..Tk-1 (kern_attention_cudnn_cp.cu); false,
 * nothing written, otherwise or when cuDNN refuses the shape. */
bool tr_cu_cudnn_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, const int32_t *q_pos,
                             const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D);
bool tr_cu_cudnn_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v,
                              tr_buf out, const float *lse, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq,
                              int Tk, int NH, int KV, int D, bool deterministic);

/* dnn_choose's check of a candidate engine against the reference one (kern_attention_cudnn_check.cu):
 * adds sum (x - ref)^2 to sums[0] and sum ref^2 to sums[1] over `rows` rows of n elements (bf16, else
 * fp32); ref is packed [rows, n], x's row r starts at x + r * rstride elements. Synchronizes s. */
void tr_cu_cudnn_diff_sums(dev_stream *s, const void *ref, const void *x, bool bf16, int rows, int64_t n,
                           int64_t rstride, double sums[2]);

/* dev_free's notice: layouts of positions read from p are dropped (kern_attention_cudnn_cp.cu). */
void tr_cu_cudnn_forget(const void *p);

/* Chooses the kernels of the attention calls that follow, as TWINRUN_ATTENTION names them (cudnn,
 * flash, simple), overriding the variable; -1 (nothing changed) for another name. For tools/attn_bench. */
int tr_cu_attention_set_path(const char *name);

#ifdef __cplusplus
}
#endif

#endif
