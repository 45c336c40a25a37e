/* Private to the GEMM files: the simple tiled kernel that kern_gemm falls back on for type
 * combinations cuBLAS does not offer (e.g. fp32 operands with a bf16 output, or mixed operand
 * types), or everywhere with TWINRUN_GEMM=naive. */
#ifndef TWINRUN_CUDA_KERN_GEMM_H
#define TWINRUN_CUDA_KERN_GEMM_H

#include "seam.h"

#ifdef __cplusplus
extern "C" {
#endif

void tr_cu_gemm_naive(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
                      float beta);

/* kern_gemm without its argument check and profile span: for kernels that run a GEMM inside their
 * own span (the FP8 GEMM's dequantising fallback). */
void tr_cu_gemm_unprofiled(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb,
                           float alpha, float beta);

/* Whether FP8 GEMMs run on cuBLASLt here (TWINRUN_GEMM=lt, the CUDA default; not on MUSA). */
bool tr_cu_gemm_fp8_lt_enabled(dev_stream *s);

/* c[m,n] = alpha * a.scale_inv * b.scale_inv * a[m,k] @ b[n,k]^T + beta * c through cuBLASLt's FP8
 * GEMM (both operands K-major, row-major a [m,k] and b [n,k]; k a multiple of 16, 16-byte aligned
 * operands). fast_accum: cuBLASLt's fast accumulation (kern_gemm_fp8's, unless
 * TWINRUN_FP8_FAST_ACCUM=0), else the split one. Only where tr_cu_gemm_fp8_lt_enabled; fatal when cuBLASLt has no algorithm. */
void tr_cu_gemm_fp8_lt(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k,
                       float alpha, float beta, bool fast_accum);

#ifdef __cplusplus
}
#endif

#endif
