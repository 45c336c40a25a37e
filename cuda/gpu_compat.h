/* One set of sources, two GPU stacks: the code in cuda is written against CUDA's names
 * (cudaX, cublasX, cublasLtX, ncclX). Built with -DTWINRUN_MUSA (mcc -x musa, or the C compiler
 * for the .c files), this header maps each name the code uses onto Moore Threads' MUSA stack:
 * cudaX -> musaX (musa_runtime.h), cublasX -> mublasX (mublas.h), ncclX -> mcclX (mccl.h).
 *
 * Optional parts: define GPU_COMPAT_BLAS before including for the BLAS names, GPU_COMPAT_CCL for
 * the collectives. Device code uses no vendor bf16 type (bf16 is handled as raw uint16_t bits,
 * see kern_common.cuh), so no __nv_bfloat16 -> __mt_bfloat16 mapping is needed.
 *
 * The MUSA half is UNTESTED: no MUSA SDK was available to compile it. Names follow Moore Threads'
 * published porting rule (a prefix swap); muBLAS has no cuBLASLt-style API that we could confirm,
 * so on MUSA kern_gemm uses the classic GemmEx path (TWINRUN_GPU_HAS_BLASLT is 0). */
#ifndef TWINRUN_CUDA_GPU_COMPAT_H
#define TWINRUN_CUDA_GPU_COMPAT_H

#ifndef TWINRUN_MUSA
/* ------------------------------------------------------------------ CUDA: the names as they are */
#include <cuda_runtime.h>
#define TWINRUN_GPU_BACKEND "cuda"
#ifdef GPU_COMPAT_BLAS
#include <cublasLt.h>
#include <cublas_v2.h>
#define TWINRUN_GPU_HAS_BLASLT 1
#endif
#ifdef GPU_COMPAT_CCL
#include <nccl.h>
#endif

#else
/* ------------------------------------------------------------------ MUSA (untested) */
#include <musa_runtime.h>
#define TWINRUN_GPU_BACKEND "musa"

#define cudaError_t musaError_t
#define cudaSuccess musaSuccess
#define cudaErrorNotReady musaErrorNotReady
#define cudaErrorMemoryAllocation musaErrorMemoryAllocation
#define cudaErrorAssert musaErrorAssert
#define cudaErrorIllegalAddress musaErrorIllegalAddress
#define cudaErrorInsufficientDriver musaErrorInsufficientDriver
#define cudaErrorInvalidConfiguration musaErrorInvalidConfiguration
#define cudaErrorInvalidDevice musaErrorInvalidDevice
#define cudaErrorInvalidValue musaErrorInvalidValue
#define cudaErrorLaunchFailure musaErrorLaunchFailure
#define cudaErrorNoDevice musaErrorNoDevice
#define cudaGetErrorString musaGetErrorString
#define cudaGetErrorName musaGetErrorName
#define cudaGetLastError musaGetLastError
#define cudaGetDeviceCount musaGetDeviceCount
#define cudaDriverGetVersion musaDriverGetVersion
#define cudaRuntimeGetVersion musaRuntimeGetVersion
#define cudaSetDevice musaSetDevice
#define cudaGetDevice musaGetDevice
#define cudaDeviceProp musaDeviceProp
#define cudaGetDeviceProperties musaGetDeviceProperties
#define cudaDeviceGetAttribute musaDeviceGetAttribute
#define cudaDeviceGetPCIBusId musaDeviceGetPCIBusId
#define cudaDevAttrComputeCapabilityMajor musaDevAttrComputeCapabilityMajor
#define cudaMemGetInfo musaMemGetInfo
#define cudaMalloc musaMalloc
#define cudaFree musaFree
#define cudaMallocAsync musaMallocAsync
#define cudaMemPool_t musaMemPool_t
#define cudaDeviceGetDefaultMemPool musaDeviceGetDefaultMemPool
#define cudaMemPoolSetAttribute musaMemPoolSetAttribute
#define cudaMemPoolAttrReleaseThreshold musaMemPoolAttrReleaseThreshold
#define cudaMemPoolGetAttribute musaMemPoolGetAttribute
#define cudaMemPoolAttrUsedMemHigh musaMemPoolAttrUsedMemHigh
#define cudaMemPoolAttrReservedMemHigh musaMemPoolAttrReservedMemHigh
#define cudaFreeAsync musaFreeAsync
#define cudaStream_t musaStream_t
#define cudaStreamCreateWithFlags musaStreamCreateWithFlags
#define cudaStreamCreateWithPriority musaStreamCreateWithPriority
#define cudaDeviceGetStreamPriorityRange musaDeviceGetStreamPriorityRange
#define cudaStreamNonBlocking musaStreamNonBlocking
#define cudaStreamDestroy musaStreamDestroy
#define cudaStreamSynchronize musaStreamSynchronize
#define cudaStreamQuery musaStreamQuery
#define cudaStreamWaitEvent musaStreamWaitEvent
#define cudaEvent_t musaEvent_t
#define cudaEventCreateWithFlags musaEventCreateWithFlags
#define cudaEventDisableTiming musaEventDisableTiming
#define cudaEventDestroy musaEventDestroy
#define cudaEventRecord musaEventRecord
#define cudaEventCreate musaEventCreate
#define cudaEventSynchronize musaEventSynchronize
#define cudaEventQuery musaEventQuery
#define cudaHostAlloc musaHostAlloc
#define cudaHostAllocMapped musaHostAllocMapped
#define cudaHostGetDevicePointer musaHostGetDevicePointer
#define cudaEventElapsedTime musaEventElapsedTime
#define cudaFuncSetAttribute musaFuncSetAttribute
#define cudaFuncAttributeMaxDynamicSharedMemorySize musaFuncAttributeMaxDynamicSharedMemorySize
#define cudaMemcpyAsync musaMemcpyAsync
#define cudaMemcpyHostToDevice musaMemcpyHostToDevice
#define cudaMemcpyDeviceToHost musaMemcpyDeviceToHost
#define cudaMemcpyDeviceToDevice musaMemcpyDeviceToDevice
#define cudaMemsetAsync musaMemsetAsync
#define cudaDataType musaDataType_t
#define CUDA_R_32F MUSA_R_32F
#define CUDA_R_16BF MUSA_R_16BF

#ifdef GPU_COMPAT_BLAS
#include <mublas.h>
#define TWINRUN_GPU_HAS_BLASLT 0
#define cublasHandle_t mublasHandle_t
#define cublasStatus_t mublasStatus_t
#define CUBLAS_STATUS_SUCCESS MUBLAS_STATUS_SUCCESS
#define cublasCreate mublasCreate
#define cublasDestroy mublasDestroy
#define cublasSetStream mublasSetStream
#define cublasGemmEx mublasGemmEx
#define cublasOperation_t mublasOperation_t
#define CUBLAS_OP_N MUBLAS_OP_N
#define CUBLAS_OP_T MUBLAS_OP_T
#define cublasComputeType_t mublasComputeType_t
#define CUBLAS_COMPUTE_32F MUBLAS_COMPUTE_32F
#define CUBLAS_GEMM_DEFAULT MUBLAS_GEMM_DEFAULT
#endif

#ifdef GPU_COMPAT_CCL
#include <mccl.h>
#define ncclResult_t mcclResult_t
#define ncclSuccess mcclSuccess
#define ncclInProgress mcclInProgress
#define ncclGetErrorString mcclGetErrorString
#define ncclGetLastError mcclGetLastError
#define ncclComm_t mcclComm_t
#define ncclUniqueId mcclUniqueId
#define ncclGetUniqueId mcclGetUniqueId
#define ncclGetVersion mcclGetVersion
#define ncclConfig_t mcclConfig_t
#define NCCL_CONFIG_INITIALIZER MCCL_CONFIG_INITIALIZER
#define ncclCommInitRankConfig mcclCommInitRankConfig
#define ncclCommGetAsyncError mcclCommGetAsyncError
#define ncclCommFinalize mcclCommFinalize
#define ncclCommDestroy mcclCommDestroy
#define ncclCommAbort mcclCommAbort
#define ncclDataType_t mcclDataType_t
#define ncclFloat32 mcclFloat32
#define ncclBfloat16 mcclBfloat16
#define ncclInt32 mcclInt32
#define ncclUint8 mcclUint8
#define ncclRedOp_t mcclRedOp_t
#define ncclSum mcclSum
#define ncclAvg mcclAvg
#define ncclMax mcclMax
#define ncclMin mcclMin
#define ncclAllReduce mcclAllReduce
#define ncclAllGather mcclAllGather
#define ncclReduceScatter mcclReduceScatter
#define ncclBroadcast mcclBroadcast
#define ncclSend mcclSend
#define ncclRecv mcclRecv
#define ncclGroupStart mcclGroupStart
#define ncclGroupEnd mcclGroupEnd
#endif
#endif /* TWINRUN_MUSA */

#endif
