/* The real backend's private view of the device objects of dev.h, shared by dev_cuda.cu, the
 * kernels (which need the CUDA stream behind a dev_stream) and coll_nccl.c. C and C++. */
#ifndef TWINRUN_CUDA_CUDA_DEV_H
#define TWINRUN_CUDA_CUDA_DEV_H

#include <stddef.h>

#include "cuda_check.h"
#include "gpu_compat.h"
#include "seam.h"

struct dev_stream {
    dev_device *dev;
    cudaStream_t st;
    bool background; /* dev_stream_set_background: the lowest priority */
};

struct dev_event {
    dev_device *dev;
    cudaEvent_t ev;
};

typedef struct tr_cu_prof tr_cu_prof;

/* One live allocation, for accounting (an open-addressing table keyed by the pointer). */
typedef struct tr_cu_alloc {
    void *p;      /* NULL: empty slot; TR_CU_TOMBSTONE: freed slot */
    size_t bytes; /* as requested (what dev_mem_used counts) */
    int tag;      /* dev_mem_tag at allocation */
} tr_cu_alloc;

#define TR_CU_TOMBSTONE ((void *)1)

struct dev_device {
    int ordinal;
    size_t capacity, used, peak;
    size_t runtime_bytes; /* in use on the GPU when dev_open ran (the context, other processes): dev_info */
    int tag;              /* dev_mem_tag of the next allocations */
    size_t tag_used[DEV_MEM_TAG_COUNT]; /* bytes in use per purpose */
    size_t tag_peak[DEV_MEM_TAG_COUNT]; /* tag_used when `peak` was reached */
    struct dev_stream default_stream;
    char name[64];
    char last_error[512];
    tr_cu_alloc *tab;
    size_t tab_cap, tab_live, tab_dead;
    /* kern_gemm's library state (handles, workspace), created on first use, freed by dev_close. */
    void *blas;
    void (*blas_free)(void *blas);
    /* kern_attention_cudnn.c's state (the cuDNN handle, the attention plans), likewise. */
    void *dnn;
    void (*dnn_free)(void *dnn);
    /* dev_set_deterministic (--deterministic-mode): kernels with a faster order-free variant take the
     * fixed-order one. */
    bool deterministic;
    /* dev_stream_set_background: the multiprocessors the device has, how many a GEMM leaves to an active
     * background stream (TWINRUN_BACKGROUND_SMS), and how many it leaves now (0: none active); the
     * priorities other streams and background ones are created with. */
    int nsm, background_sms, sms_reserved;
    int prio_high, prio_low;
    /* coll_nccl.c: how many communicators this process made per group key, so a group created
     * again (after an abort) rendezvouses under a fresh name. */
    struct {
        unsigned long long key;
        unsigned gen;
    } coll_gen[64];
    int coll_ngen;
    double coll_timeout_s; /* coll_set_timeout (--distributed-timeout-minutes); 0: not set */
    /* coll_flight.c's recorder for this rank, created with the first communicator; dev_close frees it
     * (and dumps it with TWINRUN_FLIGHT_AT_EXIT=1) through flight_free. */
    struct tr_cu_flight *flight;
    void (*flight_free)(dev_device *d);
    /* coll_watchdog.c (asynchronous collectives), started with the first communicator: dev_free calls
     * wd_quiesce first (no buffer is freed under a collective still running on a communicator's
     * stream); dev_close calls wd_close before flight_free (thread stopped, works retired, so an exit
     * dump has their final states). */
    struct tr_cu_watchdog *wd;
    void (*wd_quiesce)(dev_device *d);
    void (*wd_close)(dev_device *d);
    /* gpu_profile.cu (TWINRUN_GPU_PROFILE=1): 0 not yet read, 1 off, 2 on; the tables when on. */
    int prof_mode;
    struct tr_cu_prof *prof;
};

#ifdef __cplusplus
extern "C" {
#endif

/* True while the collectives' watchdog ends the process (coll_watchdog.h): dev_rank_abort waits then. */
bool tr_cu_process_ending(void);

/* The physical device of the process's device `ordinal` (dev_select.c: offset by the launcher's local
 * rank), or -1 with err. */
int tr_cu_pick_device(int ordinal, int count, char *err, size_t errlen);

/* The CUDA stream behind s (checks s is not NULL). */
cudaStream_t tr_cu_stream(dev_stream *s);

/* Stream-ordered scratch for a kernel's temporaries (partial sums and the like): allocated and
 * freed on stream s (cudaMallocAsync), so streams never share it. Not counted in dev_mem_used:
 * it is transient, like the BLAS workspace. Out of memory is fatal for the rank. */
void *tr_cu_scratch(dev_stream *s, size_t bytes, const char *what);
void tr_cu_scratch_free(dev_stream *s, void *p);

/* "NCCL 2.27.3" (MCCL on MUSA), for dev_info.versions: the collective library the process loaded. */
void tr_cu_ccl_version(char *out, size_t outlen);

#ifdef __cplusplus
}
#endif

#endif
