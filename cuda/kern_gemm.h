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

#ifdef __cplusplus
}
#endif

#endif
