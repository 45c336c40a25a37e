/* The NCCL communicator behind a coll_comm: private to coll_nccl.c (the calls) and coll_watchdog.c (the
 * asynchronous mode's streams, events and watchdog thread), which both need its fields. */
#ifndef TWINRUN_CUDA_COLL_COMM_H
#define TWINRUN_CUDA_COLL_COMM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define GPU_COMPAT_CCL
#include "gpu_compat.h"
#include "twinrun/coll.h"

struct tr_cu_watchdog;

struct coll_comm {
    dev_device *dev;
    /* NULL once aborted. In asynchronous mode the watchdog thread may abort it: the main thread then
     * reads and uses it only under the watchdog's lock (tr_cu_wd_lock). */
    ncclComm_t comm;
    int size, rank;
    _Atomic coll_status dead; /* COLL_OK while usable; else what every later call returns (set by either thread) */
    unsigned long long seq;   /* NCCL calls issued, for messages */
    double timeout_s;
    bool sync; /* TWINRUN_COLL_SYNC=1: the calls run on the caller's stream and are waited for on the host */
    char name[32];
    coll_observer observer; /* fault injection (fault/); not called while it runs */
    void *observer_arg;
    bool in_observer;
    int flight;                    /* this communicator's index in the rank's flight records */
    uint64_t cseq;                 /* collectives so far (the twin's seq) */
    uint64_t *p2p_send, *p2p_recv; /* [size] sends/receives so far per peer */
    uint64_t hang_seq;             /* TWINRUN_COLL_HANG: the collective to hang on the GPU; UINT64_MAX: none */
    /* Asynchronous mode (coll_watchdog.h); unused when sync. */
    struct tr_cu_watchdog *wd; /* the device's watchdog; NULL in sync mode */
    cudaStream_t cs;           /* the communicator's own stream: its NCCL calls run there */
    cudaEvent_t ready;         /* recorded on the caller's stream, waited for by cs (reused: the wait copies it) */
};

#endif
