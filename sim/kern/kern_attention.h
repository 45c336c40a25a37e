/* The positional attention kernels after their argument checks (kern_attention_pos.c), for the
 * causal kernels too (kern_attention.c, whose positions 0..T-1 are host scratch): q_pos [Tq] and
 * k_pos [Tk] must be readable now (device memory the caller drained, or host memory); they are
 * checked, counted for the cost and copied into the deferred work, so the caller may free them. */
#ifndef TWINRUN_SIM_KERN_KERN_ATTENTION_H
#define TWINRUN_SIM_KERN_KERN_ATTENTION_H

#include <stdint.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"

void twin_attention_forward_at(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                               const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                               int D);
void twin_attention_backward_at(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                tr_buf v, const float *lse, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq,
                                int Tk, int NH, int KV, int D);

/* kern_access of the forward and backward kernels' tensors (positions NULL: host memory). */
void twin_attention_forward_access(dev_stream *s, const char *what, tr_buf out, const float *lse, tr_buf q, tr_buf k,
                                   tr_buf v, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH,
                                   int KV, int D);
void twin_attention_backward_access(dev_stream *s, const char *what, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout,
                                    tr_buf q, tr_buf k, tr_buf v, const float *lse, const int32_t *q_pos,
                                    const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D);

#endif
