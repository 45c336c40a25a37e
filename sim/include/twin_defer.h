/* How the twin's CPU kernels (sim/kern) hand their math to the device: a kernel charges its simulated
 * time and checks its arguments at launch, on the rank's own coroutine, then submits the math as a
 * closure. Without a worker pool it runs at once; with one (twin_options.threads, docs/twin.md#threads)
 * it waits in the rank's queue, in issue order, and runs on a worker thread or wherever the host next
 * needs the rank's memory. Either way the results are the same bits.
 *
 * The closure must be self-contained: its arguments are copied at submission (descriptors passed by
 * pointer included), and it must not call back into the scheduler, the clock, the trace or the rank's
 * state, nor fail (a failure there ends the process: it belongs to no running rank).
 *
 * On a shape-only (predict) device a kernel returns after its check and submits nothing: its memory is
 * only addresses (twin_kern_submit refuses). */
#ifndef TWINRUN_SIM_TWIN_DEFER_H
#define TWINRUN_SIM_TWIN_DEFER_H

#include <stddef.h>

#include "twinrun/dev.h"

typedef void twin_job_fn(void *args);

/* Runs fn(args) on the stream's device, after the work issued before it; args[0..size) is copied. */
void twin_kern_submit(dev_stream *s, twin_job_fn *fn, void *args, size_t size);
/* Returns when every piece of work issued on the stream's device has run: for a kernel that reads
 * device memory at launch (token ids it checks, positions its cost counts). */
void twin_kern_drain(dev_stream *s);

#endif
