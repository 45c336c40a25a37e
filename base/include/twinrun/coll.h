/* The collectives seam: communicators from rank lists and the collectives Megatron uses.
 *
 * Resolved at link time: sim/coll/ (twin: fake collectives among the ranks of this process; members in
 * other processes of a multi-process twin meet through sim/multiproc over libfabric) or
 * cuda/coll_nccl.c (NCCL / MCCL). All calls are enqueued on a device stream like NCCL's. Reduction order is fixed
 * by group rank in the twin, so results never depend on arrival order.
 *
 * Failures (timeout, abort, mismatched calls) are fatal for the rank unless the communicator was
 * aborted, in which case the call returns COLL_ABORTED. */
#ifndef TWINRUN_BASE_COLL_H
#define TWINRUN_BASE_COLL_H

#include <stddef.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"

typedef struct coll_comm coll_comm;

typedef enum coll_op { COLL_SUM = 0, COLL_AVG, COLL_MAX, COLL_MIN } coll_op;

typedef enum coll_status { COLL_OK = 0, COLL_ABORTED = 1, COLL_TIMEOUT = 2, COLL_ERROR = 3 } coll_status;

/* Builds the communicator over `ranks` (global ranks, ascending group order), of which the caller
 * is `my_rank`. `name` ("tp", "dp", "pp", "world", ...) appears in flight-recorder dumps.
 * Returns NULL and fills err on failure. */
coll_comm *coll_comm_create(dev_device *d, const int *ranks, int nranks, int my_rank, const char *name, char *err,
                            size_t errlen);
void coll_comm_destroy(coll_comm *c);
int coll_comm_size(const coll_comm *c);
int coll_comm_rank(const coll_comm *c); /* position of the caller within the group */
const char *coll_comm_name(const coll_comm *c);

/* count is in elements of dt. send and recv may alias (in place). */
coll_status coll_all_reduce(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                            coll_op op);
/* recv holds size*count elements, group rank r's block at r*count. In place when send is the caller's
 * own block of recv (send = recv + rank*count, NCCL's rule); otherwise the buffers must not overlap. */
coll_status coll_all_gather(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt);
/* send holds size*count elements; recv gets this rank's reduced block of count. In place when recv is
 * the caller's own block of send (recv = send + rank*count, NCCL's rule: the distributed optimizer's
 * gradient shard); otherwise the buffers must not overlap. */
coll_status coll_reduce_scatter(coll_comm *c, dev_stream *s, const void *send, void *recv, size_t count, tr_dtype dt,
                                coll_op op);
coll_status coll_broadcast(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int root);
coll_status coll_send(coll_comm *c, dev_stream *s, const void *buf, size_t count, tr_dtype dt, int peer);
coll_status coll_recv(coll_comm *c, dev_stream *s, void *buf, size_t count, tr_dtype dt, int peer);
coll_status coll_barrier(coll_comm *c, dev_stream *s);
void coll_group_start(void);
void coll_group_end(void);
/* Aborts every outstanding and future call on c (NCCL's ncclCommAbort). */
void coll_abort(coll_comm *c);
/* The watchdog deadline, in seconds of d's clock, for the rank's collectives and communicator setup
 * from now on (Megatron's --distributed-timeout-minutes; NCCL's and the twin's default is 600 s).
 * Past it the rank's communicators are aborted and the timed-out call returns COLL_TIMEOUT (twin) or
 * the process writes its flight-recorder dump and exits (real backend; see cuda/coll_nccl.c). */
void coll_set_timeout(dev_device *d, double seconds);

/* A slow link (the fault kind slow_link: a degraded NIC or cable): from now on every collective and
 * transfer of the calling rank that crosses nodes takes `factor` (>= 1) times as long. The twin's cost
 * model charges it (a ring runs at its slowest link: a group's factor is its largest member's); a real
 * network cannot be slowed on request, so the real backends only accept it. */
void coll_set_link_slowdown(dev_device *d, double factor);

/* Called at the start of every call on c, before the rank joins its peers, with the call's name
 * ("all_reduce", "send", ...): the fault library's injection site for hangs and mismatches. The
 * observer may itself issue calls on c (they are not observed). NULL removes it. */
typedef void (*coll_observer)(void *arg, coll_comm *c, const char *op);
void coll_comm_set_observer(coll_comm *c, coll_observer fn, void *arg);

#endif
