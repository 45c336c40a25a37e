/* Elementwise kernels for the twin: add, scale, cast, sum of squares. */
#include <string.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

/* The elementwise kernels' arguments: x (and y) in, out; n elements. */
typedef struct elem_args {
    tr_buf out, x, y;
    float *sum; /* sum of squares: the fp32 scalar it adds to */
    float alpha;
    size_t n;
} elem_args;

static void add_body(void *args) {
    const elem_args *e = args;
    /* One fp32 add per element, as a GPU does it; element i is read before it is written,
     * so out may alias a or b. */
    for (size_t i = 0; i < e->n; i++) st(e->out, i, ld(e->x, i) + ld(e->y, i));
}

void kern_add(dev_stream *s, tr_buf out, tr_buf a, tr_buf b, size_t n) {
    kern_cost(s, TWIN_K_ADD, (double)n, (double)n * (tr_dtype_size(a.dt) + tr_dtype_size(b.dt) + tr_dtype_size(out.dt)),
              TR_F32);
    kern_add_check(s, out, a, b, n);
    kern_access(s, "kernel add",
                (const twin_access[]){
                    {out.p, kern_bytes(out, n), true}, {a.p, kern_bytes(a, n), false}, {b.p, kern_bytes(b, n), false}},
                3);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    elem_args e = {.out = out, .x = a, .y = b, .n = n};
    kern_submit(s, add_body, &e, sizeof e);
}

static void scale_body(void *args) {
    const elem_args *e = args;
    for (size_t i = 0; i < e->n; i++) st(e->out, i, ld(e->out, i) * e->alpha);
}

void kern_scale(dev_stream *s, tr_buf x, float alpha, size_t n) {
    kern_cost(s, TWIN_K_SCALE, (double)n, 2.0 * n * tr_dtype_size(x.dt), TR_F32);
    kern_scale_check(s, x, alpha, n);
    kern_access(s, "kernel scale", &(twin_access){x.p, kern_bytes(x, n), true}, 1);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    elem_args e = {.out = x, .alpha = alpha, .n = n};
    kern_submit(s, scale_body, &e, sizeof e);
}

static void cast_body(void *args) {
    const elem_args *e = args;
    if (e->out.dt == e->x.dt) {
        /* Same type: a bit copy, so NaN payloads and -0 survive untouched. */
        memmove(e->out.p, e->x.p, e->n * tr_dtype_size(e->out.dt));
        return;
    }
    for (size_t i = 0; i < e->n; i++) st(e->out, i, ld(e->x, i));
}

void kern_cast(dev_stream *s, tr_buf dst, tr_buf src, size_t n) {
    kern_cost(s, TWIN_K_CAST, 0.0, (double)n * (tr_dtype_size(src.dt) + tr_dtype_size(dst.dt)), TR_F32);
    kern_cast_check(s, dst, src, n);
    kern_access(s, "kernel cast",
                (const twin_access[]){{dst.p, kern_bytes(dst, n), true}, {src.p, kern_bytes(src, n), false}}, 2);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    elem_args e = {.out = dst, .x = src, .n = n};
    kern_submit(s, cast_body, &e, sizeof e);
}

static void sum_squares_body(void *args) {
    const elem_args *e = args;
    /* Ascending-order sum in double (squares of fp32 are exact there); NaN/Inf propagate. */
    double sum = 0.0;
    for (size_t i = 0; i < e->n; i++) {
        const double v = ld(e->x, i);
        sum += v * v;
    }
    e->sum[0] = (float)((double)e->sum[0] + sum);
}

void kern_sum_squares(dev_stream *s, float *out, tr_buf x, size_t n) {
    kern_cost(s, TWIN_K_SUM_SQUARES, 2.0 * n, (double)n * tr_dtype_size(x.dt), TR_F32);
    kern_sum_squares_check(s, out, x, n);
    kern_access(s, "kernel sum_squares",
                (const twin_access[]){{out, sizeof *out, true}, {x.p, kern_bytes(x, n), false}}, 2);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    elem_args e = {.sum = out, .x = x, .n = n};
    kern_submit(s, sum_squares_body, &e, sizeof e);
}
