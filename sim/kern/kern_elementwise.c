/* Elementwise kernels for the twin: add, scale, cast, sum of squares. */
#include <string.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

void kern_add(dev_stream *s, tr_buf out, tr_buf a, tr_buf b, size_t n) {
    kern_cost(s, TWIN_K_ADD, (double)n, (double)n * (tr_dtype_size(a.dt) + tr_dtype_size(b.dt) + tr_dtype_size(out.dt)),
              TR_F32);
    kern_add_check(s, out, a, b, n);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    /* One fp32 add per element, as a GPU does it; element i is read before it is written,
     * so out may alias a or b. */
    for (size_t i = 0; i < n; i++) st(out, i, ld(a, i) + ld(b, i));
}

void kern_scale(dev_stream *s, tr_buf x, float alpha, size_t n) {
    kern_cost(s, TWIN_K_SCALE, (double)n, 2.0 * n * tr_dtype_size(x.dt), TR_F32);
    kern_scale_check(s, x, alpha, n);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    for (size_t i = 0; i < n; i++) st(x, i, ld(x, i) * alpha);
}

void kern_cast(dev_stream *s, tr_buf dst, tr_buf src, size_t n) {
    kern_cost(s, TWIN_K_CAST, 0.0, (double)n * (tr_dtype_size(src.dt) + tr_dtype_size(dst.dt)), TR_F32);
    kern_cast_check(s, dst, src, n);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    if (dst.dt == src.dt) {
        /* Same type: a bit copy, so NaN payloads and -0 survive untouched. */
        memmove(dst.p, src.p, n * tr_dtype_size(dst.dt));
        return;
    }
    for (size_t i = 0; i < n; i++) st(dst, i, ld(src, i));
}

void kern_sum_squares(dev_stream *s, float *out, tr_buf x, size_t n) {
    kern_cost(s, TWIN_K_SUM_SQUARES, 2.0 * n, (double)n * tr_dtype_size(x.dt), TR_F32);
    kern_sum_squares_check(s, out, x, n);
    if (kern_shape_only(s)) return;
    if (n == 0) return;
    /* Ascending-order sum in double (squares of fp32 are exact there); NaN/Inf propagate. */
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        const double v = ld(x, i);
        sum += v * v;
    }
    out[0] = (float)((double)out[0] + sum);
}
