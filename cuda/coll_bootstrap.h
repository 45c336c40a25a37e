/* How the members of a new NCCL communicator get its rank 0's unique id:
 *   TWINRUN_RENDEZVOUS_DIR set: through files in that directory (coll_rendezvous.c; one host, or a
 *     shared file system);
 *   else: through the TCP rendezvous store that global rank 0 serves on MASTER_ADDR:MASTER_PORT
 *     (base/launch/tcp_store.h; launch_cuda.c starts it), as torchrun and mpirun launches give.
 * Keys: <run id>.<group name>.r<first rank>.<hash of the rank list>.g<generation>, the generation
 * counting re-creations of the same group in this process (after an abort). */
#ifndef TWINRUN_CUDA_COLL_BOOTSTRAP_H
#define TWINRUN_CUDA_COLL_BOOTSTRAP_H

#include <stddef.h>

#include "twinrun/dev.h"

/* pos 0 publishes id[len]; the others wait up to timeout_s for it. 0, or -1 with err. */
int tr_cu_exchange_id(dev_device *d, const char *name, const int *ranks, int nranks, int pos, void *id, size_t len,
                      double timeout_s, char *err, size_t errlen);
/* After every member joined: pos 0 removes what it published (files only; the store forgets at exit). */
void tr_cu_exchange_done(dev_device *d, const char *name, const int *ranks, int nranks, int pos);

#endif
