/* coll_hang.h: a kernel that spins on a host-mapped flag, the GPU-side hang TWINRUN_COLL_HANG injects.
 *
 * The flag is pinned host memory mapped into the device (cudaHostAllocMapped), allocated once per
 * process at the first injection; the kernel reads it through a volatile pointer, so a host store is
 * seen within microseconds, with no CUDA call (the release must work while the device is busy, from
 * the watchdog thread). Process-wide on purpose: one process drives one device, and the watchdog's
 * end must release every spin without knowing where it was enqueued. */
#include <stdio.h>

#include "coll_hang.h"
#include "cuda_check.h"

static int *hang_flag_host; /* written once by the main thread before the first launch */

__global__ void k_coll_hang(const volatile int *flag) {
    while (*flag == 0) {
#ifndef TWINRUN_MUSA
        __nanosleep(1000);
#endif
    }
}

extern "C" void tr_cu_hang_enqueue(cudaStream_t st) {
    if (!hang_flag_host) {
        int *h = NULL;
        CU_CHECK(cudaHostAlloc((void **)&h, sizeof *h, cudaHostAllocMapped));
        __atomic_store_n(h, 0, __ATOMIC_SEQ_CST);
        __atomic_store_n(&hang_flag_host, h, __ATOMIC_RELEASE);
    }
    int *dflag = NULL;
    CU_CHECK(cudaHostGetDevicePointer((void **)&dflag, hang_flag_host, 0));
    k_coll_hang<<<1, 1, 0, st>>>(dflag);
    CU_CHECK_LAUNCH("k_coll_hang");
}

extern "C" void tr_cu_hang_release(void) {
    int *h = __atomic_load_n(&hang_flag_host, __ATOMIC_ACQUIRE);
    if (h) __atomic_store_n(h, 1, __ATOMIC_SEQ_CST);
}
