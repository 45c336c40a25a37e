/* Causal grouped-query attention for the twin, forward and backward: the positional kernels of
 * kern_attention_pos.c with q_pos = k_pos = 0..T-1 (query t sees keys j <= t). The numerics, the
 * reduction order and the roofline cost are documented there; they are those this file had before
 * the positional kernels existed, so the results are the same bits. */
#include "kern_attention.h"
#include "kern_cpu.h"
#include "twinrun/kern.h"

/* Positions 0..T-1 in host scratch (the twin's device memory is host memory). [T] */
static int32_t *natural_positions(int T) {
    int32_t *pos = kern_scratch((size_t)T, sizeof *pos, "attention positions");
    for (int t = 0; t < T; t++) pos[t] = t;
    return pos;
}

/* Predict mode (kern_shape_only): the positional kernels read no positions then, so the T-element
 * table (filled twice per layer and micro-batch: a fifth of a 70B prediction's time) is not built; this
 * stands for it. */
static const int32_t unread_positions[1];

void kern_attention_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int T, int NH,
                            int KV, int D) {
    kern_attention_forward_check(s, out, lse, q, k, v, B, T, NH, KV, D);
    if (kern_shape_only(s)) { /* the cost only, and nothing queued */
        kern_attention_forward_pos(s, out, lse, q, k, v, unread_positions, unread_positions, B, T, T, NH, KV, D);
        return;
    }
    /* (the shape-only branch above declares through kern_attention_forward_pos) */
    twin_attention_forward_access(s, "kernel attention_forward", out, lse, q, k, v, NULL, NULL, B, T, T, NH, KV, D);
    int32_t *pos = natural_positions(T);
    kern_attention_forward_pos_check(s, out, lse, q, k, v, pos, pos, B, T, T, NH, KV, D);
    twin_attention_forward_at(s, out, lse, q, k, v, pos, pos, B, T, T, NH, KV, D); /* host positions: no drain */
    free(pos);
}

void kern_attention_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v,
                             tr_buf out, const float *lse, int B, int T, int NH, int KV, int D) {
    kern_attention_backward_check(s, dq, dk, dv, dout, q, k, v, out, lse, B, T, NH, KV, D);
    if (kern_shape_only(s)) {
        kern_attention_backward_pos(s, dq, dk, dv, dout, q, k, v, out, lse, unread_positions, unread_positions, B, T, T,
                                    NH, KV, D);
        return;
    }
    twin_attention_backward_access(s, "kernel attention_backward", dq, dk, dv, dout, q, k, v, lse, NULL, NULL, B, T, T,
                                   NH, KV, D);
    int32_t *pos = natural_positions(T);
    kern_attention_backward_pos_check(s, dq, dk, dv, dout, q, k, v, out, lse, pos, pos, B, T, T, NH, KV, D);
    twin_attention_backward_at(s, dq, dk, dv, dout, q, k, v, lse, pos, pos, B, T, T, NH, KV, D);
    free(pos);
}
