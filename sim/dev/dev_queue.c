/* The twin device's work in issue order: copies, memsets and the kernels' math (sim/kern submits
 * it through twin_defer.h). With a worker pool (sched/pool.h) work that stays on the device is
 * queued on the owning rank; whatever hands memory to the host (dev_copy_d2h) drains the queue
 * first. Without one, everything runs here and now, as the twin always did. */
#include <string.h>

#include "dev_internal.h"
#include "twin_cost.h"
#include "twin_defer.h"
#include "twin_stream.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"

/* Host-to-device copies up to this size are queued with a copy of the source (the caller may reuse
 * it at once, as with cudaMemcpyAsync from pageable memory); larger ones (checkpoint loads) drain
 * the queue and copy in place rather than hold a second copy of a shard. */
enum { H2D_QUEUED_MAX = 1 << 16 };

typedef struct copy_args {
    void *dst;
    const void *src; /* NULL for a memset; unused for a queued h2d, whose bytes follow */
    size_t bytes;
} copy_args;

static void d2d_job(void *p) {
    const copy_args *a = p;
    memmove(a->dst, a->src, a->bytes);
}

static void memset_job(void *p) {
    const copy_args *a = p;
    memset(a->dst, 0, a->bytes);
}

/* copy_args then the bytes themselves */
static void h2d_job(void *p) {
    const copy_args *a = p;
    memcpy(a->dst, (const unsigned char *)p + sizeof *a, a->bytes);
}

static bool pooled(void) {
    const twin_sched *s = twin_sched_get();
    return s && s->pool;
}

/* The hazard check's view of a copy (dev_hazard.c): the device bytes it reads and writes. */
static void declare(dev_stream *s, const char *what, const void *dst, const void *src, size_t bytes) {
    twin_stream_op(s, what, NULL, (const twin_access[]){{dst, bytes, true}, {src, bytes, false}}, src ? 2 : 1);
}

/* Shape-only (predict) mode: device memory holds nothing, so reads give zeros and writes vanish; nothing
 * is queued (a shape-only device's queue stays empty: its kernels compute nothing either). */

void dev_copy_h2d(dev_stream *s, void *dst, const void *src, size_t bytes) {
    if (!bytes || s->dev->shape_only) return;
    declare(s, "copy h2d", dst, NULL, bytes);
    twin_rank *r = s->dev->owner;
    if (!pooled() || bytes > H2D_QUEUED_MAX) {
        twin_rank_drain(r);
        memcpy(dst, src, bytes);
        return;
    }
    const copy_args a = {dst, NULL, bytes};
    twin_rank_submit_with(r, h2d_job, &a, sizeof a, src, bytes);
}

void dev_copy_d2h(dev_stream *s, void *dst, const void *src, size_t bytes) {
    if (!bytes) return;
    if (s->dev->shape_only) {
        memset(dst, 0, bytes);
        twin_stream_host_wait(s);
        return;
    }
    twin_stream_op(s, "copy d2h", NULL, &(twin_access){src, bytes, false}, 1);
    twin_rank_drain(s->dev->owner); /* the host reads it now */
    memcpy(dst, src, bytes);
    twin_stream_host_wait(s); /* as cudaMemcpy: the host has waited for the stream */
}

void dev_copy_d2d(dev_stream *s, void *dst, const void *src, size_t bytes) {
    if (!bytes || s->dev->shape_only) return;
    declare(s, "copy d2d", dst, src, bytes);
    copy_args a = {dst, src, bytes};
    twin_rank_submit(s->dev->owner, d2d_job, &a, sizeof a);
}

void dev_memset_zero(dev_stream *s, void *dst, size_t bytes) {
    if (!bytes) return;
    declare(s, "memset", dst, NULL, bytes);
    /* charged at launch, like a kernel (and in shape-only mode too) */
    twin_cost_kernel(s, &(twin_kernel_cost){.kind = TWIN_K_MEMSET, .bytes = (double)bytes, .dt = TR_F32});
    if (s->dev->shape_only) return;
    copy_args a = {dst, NULL, bytes};
    twin_rank_submit(s->dev->owner, memset_job, &a, sizeof a);
}

void twin_kern_submit(dev_stream *s, twin_job_fn *fn, void *args, size_t size) {
    /* a shape-only launch returns after its check (kern_shape_only): its memory is only addresses */
    TR_CHECK(!s->dev->shape_only, "a kernel queued work on a shape-only (predict) device");
    twin_rank_submit(s->dev->owner, fn, args, size);
}

void twin_kern_drain(dev_stream *s) { twin_rank_drain(s->dev->owner); }
