/* Parameter initialisation for the twin: the generator of twinrun/init_normal.h, element by element.
 * It charges no simulated time: it stands for the host generation and copy that the twin's clock
 * never saw, so runs keep their timelines. A call already computed in this process (every
 * data-parallel replica makes the same ones) copies its values from kern_init_memo.h instead. */
#include "kern_cpu.h"
#include "kern_init_memo.h"
#include "twinrun/init_normal.h"
#include "twinrun/kern.h"
#include "twinrun/kern_check.h"

typedef struct init_args {
    kern_init_desc d; /* copied: the caller's descriptor may be gone when the body runs */
    float *out;       /* [n] */
    size_t n;
} init_args;

static void init_body(void *args) {
    const init_args *a = args;
    const kern_init_desc *d = &a->d;
    if (kern_init_memo_get(d, a->n, a->out)) return;
    for (size_t i = 0; i < a->n; i++)
        a->out[i] = d->normal ? (float)tr_init_normal_double(
                                    d->key,
                                    tr_init_global_index((uint64_t)d->first + i, d->cols, d->gcols, d->col0, d->nseg,
                                                         d->seg_local1, d->seg_global0, d->seg_global1),
                                    d->std)
                              : d->constant;
    kern_init_memo_put(d, a->n, a->out);
}

void kern_init_param(dev_stream *s, const kern_init_desc *d, float *out, size_t n) {
    kern_init_param_check(s, d, out, n);
    kern_access(s, "kernel init_param", &(twin_access){out, n * sizeof *out, true}, 1);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    init_args a = {*d, out, n};
    kern_submit(s, init_body, &a, sizeof a);
}
