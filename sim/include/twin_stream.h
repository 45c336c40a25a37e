/* The twin's streams as its kernels and collectives see them (docs/twin.md#streams).
 *
 * The default stream keeps the rank's clock (twin_rank.now), as it always did. A stream made with
 * dev_stream_create has a clock of its own: its work starts at max(its clock, the host's clock at
 * enqueue) and does not move the host's clock; events and syncs bring clocks together.
 *
 * The hazard check: a launch declares the bytes it reads and writes (twin_stream_op) and the device
 * reports, as a fatal error of the rank, an access that conflicts with another stream's work that no
 * event wait or sync has ordered before it. While a device has never had a second stream the call
 * returns at once and records nothing, so a program on the default stream alone runs as before. */
#ifndef TWINRUN_SIM_TWIN_STREAM_H
#define TWINRUN_SIM_TWIN_STREAM_H

#include <stdbool.h>
#include <stddef.h>

#include "twinrun/dev.h"

/* One range an operation touches. */
typedef struct twin_access {
    const void *p;
    size_t bytes;
    bool write; /* false: read only */
} twin_access;

/* Checks the operation `what` (a static string: "kernel gemm", "all_reduce"; `detail` another one or
 * NULL, e.g. the communicator's name) on stream s against the other streams' unordered work, then
 * records it. Ranges with p == NULL or bytes == 0 are skipped. */
void twin_stream_op(dev_stream *s, const char *what, const char *detail, const twin_access *acc, int n);

/* A stream other than the device's default one (its own clock). */
bool twin_stream_is_side(const dev_stream *s);
/* When work enqueued on s now may start: max(s's clock, the host's) on a side stream, the host's
 * clock on the default stream. */
double twin_stream_start(const dev_stream *s);
/* Work on the side stream s ends at t: its clock moves there (never back). */
void twin_stream_advance(dev_stream *s, double t);

#endif
