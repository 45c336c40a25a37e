/* fakegpu: the subset of the CUDA runtime API that cuda's collective files (coll_*.c, cuda_dev.h)
 * use, run on the CPU (fake_cuda.c): streams are FIFO queues, each drained in order by a thread of its
 * own; events complete when their stream reaches them; a wait on an event blocks its stream until then.
 * Only for tools/fakegpu/fakegpu_check.sh: the asynchronous mode's ordering, locking and watchdog logic
 * tested without a GPU (and under ThreadSanitizer). Not a CUDA emulator. */
#ifndef TWINRUN_ENGINE_CUDA_TOOLS_FAKEGPU_CUDA_RUNTIME_H
#define TWINRUN_ENGINE_CUDA_TOOLS_FAKEGPU_CUDA_RUNTIME_H

#include <stddef.h>

typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorNotReady = 600,
    cudaErrorInvalidResourceHandle = 400,
} cudaError_t;

/* only device-to-device: the collective code copies between device buffers (a one-rank collective) */
enum cudaMemcpyKind { cudaMemcpyDeviceToDevice = 3 };

typedef struct fake_stream *cudaStream_t;
typedef struct fake_event *cudaEvent_t;

#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02

#ifdef __cplusplus
extern "C" {
#endif
const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaSetDevice(int d);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamQuery(cudaStream_t s);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags);
cudaError_t cudaEventCreate(cudaEvent_t *e);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s);
cudaError_t cudaEventQuery(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s);
/* a copy on s, in its order (device memory is host memory here); other kinds are refused */
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s);

/* fakegpu's own: enqueue fn(arg) on s (the "kernels" of fake_dev.c and fake_nccl.c) */
void fake_enqueue(cudaStream_t s, void (*fn)(void *), void *arg);
#ifdef __cplusplus
}
#endif

#endif
