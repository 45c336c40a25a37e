/* Out-of-band exchange of NCCL's unique id through files, for processes on one host (or on hosts
 * sharing a file system): the group's rank 0 publishes, the others poll. */
#ifndef TWINRUN_CUDA_COLL_RENDEZVOUS_H
#define TWINRUN_CUDA_COLL_RENDEZVOUS_H

#include <stddef.h>

#include "twinrun/dev.h"

/* Writes len bytes under dir/key atomically (temporary file + rename). 0, or -1 with err. */
int tr_cu_rdv_publish(const char *dir, const char *key, const void *data, size_t len, char *err, size_t errlen);
/* Polls dir/key until it holds len bytes, or timeout_s (device clock) passes. 0, or -1 with err. */
int tr_cu_rdv_fetch(dev_device *d, const char *dir, const char *key, void *data, size_t len, double timeout_s,
                    char *err, size_t errlen);
/* Removes dir/key (rank 0, once every member has joined). */
void tr_cu_rdv_remove(const char *dir, const char *key);

#endif
