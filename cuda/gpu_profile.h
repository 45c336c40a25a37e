/* TWINRUN_GPU_PROFILE=1: where a run's device time goes, without nsys (which the GPU machine lacks).
 *
 * Every kernel entry point of this folder (and each NCCL call) opens a span on its stream: a pair of
 * CUDA events around the work it enqueues, under a kind name ("attention_fwd", "gemm 4096x6144x2048
 * NT bf16.bf16>bf16", "nccl all_reduce"). Spans are resolved in batches (the host waits for the
 * oldest only when 4096 are pending) and summed per kind; dev_close prints the table to stderr,
 * largest total first. Off (the default), a span costs one branch on a flag cached in the device.
 *
 * The times are stream times between the two events: kernels of other streams running meanwhile are
 * counted too, so on one stream (the engine's case) they add up to the device's busy time. */
#ifndef TWINRUN_CUDA_GPU_PROFILE_H
#define TWINRUN_CUDA_GPU_PROFILE_H

#include "seam.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A span of `kind` (copied; up to 95 characters) on s, or NULL when profiling is off. */
void *tr_prof_begin(dev_stream *s, const char *kind);
/* Closes a span tr_prof_begin returned (NULL: nothing). */
void tr_prof_end(dev_stream *s, void *span);
/* True when TWINRUN_GPU_PROFILE is set to 1 for this device (read once). */
bool tr_prof_enabled(dev_device *d);
/* dev_step_mark: spans begun from here on belong to `iteration` (0: outside the iterations). The
 * table's step_calls and step_ms columns sum the iterations after the first TWINRUN_GPU_PROFILE_SKIP
 * (default 1: the warm-up) and divide by their number. */
void tr_prof_step(dev_device *d, long long iteration);
/* Samples the driver's memory use beside the accounted bytes after `what` (profiling only; the gap
 * and its largest value go into the table's header). */
void tr_prof_mem(dev_device *d, const char *what);
/* dev_close: waits for the pending spans, prints the table, frees the profiler. */
void tr_prof_close(dev_device *d);

#ifdef __cplusplus
}

/* A span for the rest of the enclosing C++ scope. */
struct tr_prof_scope {
    dev_stream *s;
    void *span;
    tr_prof_scope(dev_stream *s_, const char *kind) : s(s_), span(tr_prof_begin(s_, kind)) {}
    ~tr_prof_scope() { tr_prof_end(s, span); }
    tr_prof_scope(const tr_prof_scope &) = delete;
    tr_prof_scope &operator=(const tr_prof_scope &) = delete;
};
#define TR_PROF(stream, kind) tr_prof_scope tr_prof_scope_here_(stream, kind)
#endif

#endif
