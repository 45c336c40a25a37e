/* The real backend's flight recorder and watchdog ending, in the twin's format (base/flight/flight.h),
 * so `blame` reads GPU dumps as it reads the twin's and lab/compare_flight.py compares the two.
 *
 * Each rank (one process, one device) records every collective its communicators issue: group,
 * sequence number (per communicator; send/recv per peer and direction, as the twin counts), op,
 * count, dtype, reduction, peer, state and times. When a collective outlives the timeout
 * (--distributed-timeout-minutes, or TWINRUN_COLL_TIMEOUT_S): the rank writes its dump to
 * TWINRUN_FLIGHT_DIR (else /tmp) as flight_rank<R>.txt, aborts every communicator it has
 * (ncclCommAbort) and exits with status 1, as PyTorch's NCCL watchdog tears the process down;
 * TWINRUN_COLL_ON_TIMEOUT=return makes the call return COLL_TIMEOUT instead (coll_smoke's test).
 * With TWINRUN_FLIGHT_AT_EXIT=1 every rank also dumps when its device closes.
 *
 * In asynchronous mode (coll_watchdog.h) the watchdog thread moves records on and dumps while the main
 * thread appends: every function here is thread-safe (one mutex per rank's recorder). The timeout's
 * end is then the watchdog's (tr_cu_wd_fire), not tr_cu_flight_watchdog. */
#ifndef TWINRUN_CUDA_COLL_FLIGHT_H
#define TWINRUN_CUDA_COLL_FLIGHT_H

#include <stddef.h>
#include <stdint.h>

#include "flight/flight.h"
#include "twinrun/coll.h"
#include "twinrun/dev.h"

/* A new communicator of this rank (global rank my_rank); uid from the NCCL unique id, the same on
 * every member. Returns its index in the rank's records. */
int tr_cu_flight_comm(dev_device *d, int my_rank, const void *id, size_t idlen, const char *name, const int *ranks,
                      int nranks, coll_comm *c);
/* The communicator is destroyed: the watchdog no longer aborts it (its records stay). */
void tr_cu_flight_comm_gone(dev_device *d, coll_comm *c);
/* Appends a record in state st (scheduled inside a group, else started); returns its id. */
uint64_t tr_cu_flight_rec(dev_device *d, int comm, flight_op op, uint64_t seq, size_t count, int dtype, int redop,
                          int peer, flight_state st);
/* Moves a record on (started, completed, aborted), stamping the time. */
void tr_cu_flight_set(dev_device *d, uint64_t id, flight_state st);
/* The same with the time given (seconds of dev_clock_now's clock: an event's time, coll_watchdog.c). */
void tr_cu_flight_set_at(dev_device *d, uint64_t id, flight_state st, double t);
/* Writes the rank's dump now, with this status ("blocked" for a watchdog's end); nothing else. */
void tr_cu_flight_dump(dev_device *d, const char *status);
/* The rank the recorder was created for (-1 before the first communicator), for messages. */
int tr_cu_flight_rank(const dev_device *d);
/* A collective timed out (`what` says which): dump, abort all, exit, unless TWINRUN_COLL_ON_TIMEOUT=return. */
void tr_cu_flight_watchdog(dev_device *d, const char *what);

#endif
