/* SwiGLU activation, forward and backward, for the twin: out = silu(gate) * up, in double. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

static double sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

typedef struct swiglu_args {
    tr_buf out, h, dout; /* out / dout [N, F]; h (and dh, in out) [N, 2F]: gate then up */
    int N, F;
} swiglu_args;

static void swiglu_forward_body(void *args) {
    const swiglu_args *a = args;
    const tr_buf out = a->out, h = a->h;
    const int N = a->N;
    const size_t Fz = (size_t)a->F;
    for (size_t n = 0; n < (size_t)N; n++)
        for (size_t i = 0; i < Fz; i++) {
            const double gate = ld(h, n * 2 * Fz + i), up = ld(h, n * 2 * Fz + Fz + i);
            st_d(out, n * Fz + i, gate * sigmoid(gate) * up);
        }
}

void kern_swiglu_forward(dev_stream *s, tr_buf out, tr_buf h, int N, int F) {
    kern_cost(s, TWIN_K_SWIGLU_FWD, 6.0 * N * (double)F, 3.0 * N * F * tr_dtype_size(h.dt), TR_F32);
    kern_swiglu_forward_check(s, out, h, N, F);
    kern_access(s, "kernel swiglu_forward",
                (const twin_access[]){{out.p, kern_bytes(out, (size_t)N * (size_t)F), true},
                                      {h.p, kern_bytes(h, (size_t)N * (size_t)2 * F), false}},
                2);
    if (kern_shape_only(s)) return;
    swiglu_args a = {.out = out, .h = h, .N = N, .F = F};
    kern_submit(s, swiglu_forward_body, &a, sizeof a);
}

static void swiglu_backward_body(void *args) {
    const swiglu_args *a = args;
    const tr_buf dh = a->out, dout = a->dout, h = a->h;
    const int N = a->N;
    const size_t Fz = (size_t)a->F;
    for (size_t n = 0; n < (size_t)N; n++)
        for (size_t i = 0; i < Fz; i++) {
            /* Both halves of the pair are read before either is written, so dh may alias h. */
            const size_t ig = n * 2 * Fz + i, iu = ig + Fz;
            const double gate = ld(h, ig), up = ld(h, iu), g = ld(dout, n * Fz + i);
            const double sg = sigmoid(gate);
            /* d silu(x)/dx = sigmoid(x) * (1 + x * (1 - sigmoid(x))) */
            st_d(dh, ig, g * up * sg * (1.0 + gate * (1.0 - sg)));
            st_d(dh, iu, g * gate * sg);
        }
}

void kern_swiglu_backward(dev_stream *s, tr_buf dh, tr_buf dout, tr_buf h, int N, int F) {
    kern_cost(s, TWIN_K_SWIGLU_BWD, 12.0 * N * (double)F, 5.0 * N * F * tr_dtype_size(h.dt), TR_F32);
    kern_swiglu_backward_check(s, dh, dout, h, N, F);
    kern_access(s, "kernel swiglu_backward",
                (const twin_access[]){{dh.p, kern_bytes(dh, (size_t)N * (size_t)2 * F), true},
                                      {dout.p, kern_bytes(dout, (size_t)N * (size_t)F), false},
                                      {h.p, kern_bytes(h, (size_t)N * (size_t)2 * F), false}},
                3);
    if (kern_shape_only(s)) return;
    swiglu_args a = {.out = dh, .dout = dout, .h = h, .N = N, .F = F};
    kern_submit(s, swiglu_backward_body, &a, sizeof a);
}
