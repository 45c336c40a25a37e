/* The multi-tensor forms for the twin: exactly the per-range kernels, one range after another (same
 * bits). Each range is charged as the separate launch it replaces, so twin timelines stay as they
 * were; on a GPU they are one or a few launches. */
#include "kern_cpu.h"
#include "twinrun/kern.h"
#include "twinrun/kern_check.h"

void kern_sum_squares_ranges(dev_stream *s, float *out, tr_buf x, const kern_range *ranges, int nranges) {
    kern_sum_squares_ranges_check(s, out, x, ranges, nranges);
    for (int r = nranges - 1; r >= 0; r--) /* the last range first (twinrun/kern.h) */
        kern_sum_squares(s, out, tr_buf_at(x, ranges[r].begin), ranges[r].end - ranges[r].begin);
}

void kern_adamw_update_ranges(dev_stream *s, const kern_adamw_desc *ad, const kern_range *ranges, int nranges,
                              float *master, int16_t *master_rem, tr_buf model, tr_buf grad, float *m, float *v) {
    kern_adamw_update_ranges_check(s, ad, ranges, nranges, master, master_rem, model, grad, m, v);
    for (int r = 0; r < nranges; r++) {
        kern_adamw_desc d = *ad;
        d.weight_decay = ranges[r].weight_decay;
        const size_t b = ranges[r].begin;
        kern_adamw_update(s, &d, master ? master + b : NULL, master_rem ? master_rem + b : NULL,
                          model.p ? tr_buf_at(model, b) : model, tr_buf_at(grad, b), m + b, v + b, ranges[r].end - b);
    }
}
