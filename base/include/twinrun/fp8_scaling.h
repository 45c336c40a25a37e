/* Per-tensor delayed scaling: how an FP8 tensor's scale follows its amax history, as Transformer
 * Engine's DelayedScaling recipe does it (Megatron's --fp8-format, --fp8-amax-history-len,
 * --fp8-amax-compute-algo, --fp8-margin; docs/fp8.md). Plain C on the host, the same bits on both
 * builds: the twin's recipe and the oracle of a device-side update.
 *
 * A tensor's state is its history, len floats, and its scale (1 at the start, the history zeros):
 *
 *   hist[0]          this pass's amax: the cast records max |x| of the tensor it quantises there
 *                    (reduced, max, over the ranks that share the tensor before the update)
 *   hist[1..len-1]   the earlier passes' amaxes, oldest first
 *
 * A "pass" is one micro-batch's forward pass for the tensors it quantises (inputs, weights) and one
 * backward pass for the gradients: Transformer Engine updates the first at fp8_autocast's exit and the
 * second at the end of the backward pass, so with gradient accumulation the history advances once per
 * micro-batch. At the pass's end tr_fp8_scale_update rolls the history — the oldest leaves, this
 * pass's amax becomes the newest, hist[0] is cleared for the next — and takes the scale's amax from the
 * window before the roll: the largest of all len entries (`max`) or hist[0] alone (`most_recent`).
 * The scale is (fp8_max * 2^-margin) / amax in fp32, kept as it was when that amax is zero or not
 * finite; the GEMM's inputs are x * scale cast to FP8, its product multiplied by both inputs'
 * scale_inv = 1 / scale. A pass quantises with the scale the previous pass's update left ("delayed"),
 * so one spike of amax in pass s lowers the scales of passes s + 1 .. s + len and no others (`max`;
 * with `most_recent`, pass s + 1's alone). */
#ifndef TWINRUN_BASE_FP8_SCALING_H
#define TWINRUN_BASE_FP8_SCALING_H

#include <float.h>
#include <math.h>

typedef enum tr_fp8_amax_algo {
    TR_FP8_AMAX_MAX = 0,         /* the largest amax of the history window */
    TR_FP8_AMAX_MOST_RECENT = 1, /* this step's amax */
} tr_fp8_amax_algo;

/* Host and device (a CUDA kernel calls the same function, so both builds compute the same bits). */
#ifdef __CUDACC__
#define TR_FP8_HD __host__ __device__
#else
#define TR_FP8_HD
#endif

/* The scale of an amax window (the tail of tr_fp8_scale_update_strided, on its own for a device update
 * that rolls the history in parallel): window_max is the largest entry of the window before the roll
 * (fmaxf from 0: a NaN skipped), last its entry 0. Returns the amax the scale was computed from (0 or
 * non-finite: the scale was kept; a scale that overflows fp32 becomes FLT_MAX, as Transformer Engine's
 * update does). The scaled maximum is exact (a power of two times the format's largest value), the two
 * divisions are IEEE's correctly rounded ones on both builds. */
static inline TR_FP8_HD float tr_fp8_scale_from_window(float window_max, float last, tr_fp8_amax_algo algo,
                                                       float fp8_max, int margin, float *scale, float *scale_inv) {
    const float amax = algo == TR_FP8_AMAX_MOST_RECENT ? last : window_max;
    const float scaled_max = ldexpf(fp8_max, -margin);
    if (isfinite(amax) && amax > 0.0f) *scale = scaled_max / amax;
    if (isinf(*scale)) *scale = FLT_MAX; /* an amax so small that its scale overflows: the largest scale */
    *scale_inv = 1.0f / *scale;
    return amax;
}

/* Rolls the history hist[0], hist[stride], ..., hist[(len - 1) * stride] and updates *scale and
 * *scale_inv (see the top of this file; tr_fp8_scale_from_window): the largest entry is a max, which no
 * order of taking it changes, so a parallel roll that takes it in any order gets the same bits. */
static inline TR_FP8_HD float tr_fp8_scale_update_strided(float *hist, int len, int stride, tr_fp8_amax_algo algo,
                                                          float fp8_max, int margin, float *scale, float *scale_inv) {
    const float last = hist[0];
    float window_max = 0.0f;
    for (int i = 0; i < len; i++) {
        const float a = i < len - 1 ? hist[(i + 1) * stride] : last;
        window_max = fmaxf(window_max, a);
        hist[i * stride] = i > 0 ? a : 0.0f; /* in place: entry i + 1 is read before it is written */
    }
    return tr_fp8_scale_from_window(window_max, last, algo, fp8_max, margin, scale, scale_inv);
}

/* One tensor's history, contiguous: hist[len]. */
static inline float tr_fp8_scale_update(float *hist, int len, tr_fp8_amax_algo algo, float fp8_max, int margin,
                                        float *scale, float *scale_inv) {
    return tr_fp8_scale_update_strided(hist, len, 1, algo, fp8_max, margin, scale, scale_inv);
}

#endif
