/* The injected GPU hang of TWINRUN_COLL_HANG=NAME:SEQ (coll_nccl.c): the collective number SEQ of
 * communicator NAME (its flight-record seq) is preceded, on the stream that runs it, by a one-thread
 * kernel that spins until the process releases it. The collective never starts on this GPU, exactly as
 * if a peer never arrived; on one GPU (a group of one completes at once otherwise) this is how the
 * watchdog's timeout, dump, abort and exit are tested. Every watchdog end releases the spin first, so
 * ncclCommAbort and the exit never wait for it. C and C++. */
#ifndef TWINRUN_CUDA_COLL_HANG_H
#define TWINRUN_CUDA_COLL_HANG_H

#include "gpu_compat.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Enqueues the spinning kernel on st (the flag it reads is host memory mapped into the device). */
void tr_cu_hang_enqueue(cudaStream_t st);
/* Ends every spin enqueued so far (any thread; no CUDA call, so safe while the device is stuck). */
void tr_cu_hang_release(void);

#ifdef __cplusplus
}
#endif

#endif
