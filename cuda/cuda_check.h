/* xCheck-style macros for the real backend: on failure print file:line, the call, the vendor's
 * error name and string and a hint with the likely fix, then end the rank (dev_rank_abort). */
#ifndef TWINRUN_CUDA_CUDA_CHECK_H
#define TWINRUN_CUDA_CUDA_CHECK_H

#include "gpu_compat.h"
#include "seam.h"

#ifdef __cplusplus
extern "C" {
#define TR_CU_NORETURN [[noreturn]]
#else
#define TR_CU_NORETURN _Noreturn
#endif

/* Defined in dev_cuda.cu. `status` is the library's own code (cudaError_t, cublasStatus_t,
 * ncclResult_t) and `detail` its message (may be NULL). */
TR_CU_NORETURN void tr_cu_fail(const char *file, int line, const char *lib, const char *call, int status,
                               const char *detail, const char *hint);
/* The hint for a runtime error: what usually causes it. */
const char *tr_cu_hint(cudaError_t e);

#ifdef __cplusplus
}
#endif

/* A CUDA/MUSA runtime call that must succeed. */
#define CU_CHECK(call)                                                                                                 \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess)                                                                                         \
            tr_cu_fail(__FILE__, __LINE__, "cuda", #call, (int)e_, cudaGetErrorString(e_), tr_cu_hint(e_));            \
    } while (0)

/* After a kernel launch: launch-configuration errors show at once, faults in the kernel at the
 * next synchronising call (dev_stream_sync), which CU_CHECK reports there. */
#define CU_CHECK_LAUNCH(kernel_name)                                                                                   \
    do {                                                                                                               \
        cudaError_t e_ = cudaGetLastError();                                                                           \
        if (e_ != cudaSuccess)                                                                                         \
            tr_cu_fail(__FILE__, __LINE__, "cuda", "launch of " kernel_name, (int)e_, cudaGetErrorString(e_),          \
                       tr_cu_hint(e_));                                                                                \
    } while (0)

#endif
