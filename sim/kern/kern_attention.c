/* Causal grouped-query attention for the twin, forward and backward.
 *
 * Query head h reads key/value group h / (NH/KV). For every (b, h, t) the scores
 * s_j = <q_t, k_j> / sqrt(D), j <= t, are formed in double; the forward keeps
 * lse = max + log(sum exp(s - max)) and writes out_t = sum_j exp(s_j - lse) v_j. The backward
 * recomputes p_j = exp(s_j - lse) from q, k and the stored lse (the flash-attention contract), then
 *   dp_j = <dout_t, v_j>,  ds_j = p_j (dp_j - sum_i p_i dp_i)
 *   dq_t = scale sum_j ds_j k_j,  dk_j += scale ds_j q_t,  dv_j += p_j dout_t.
 * sum_i p_i dp_i equals <dout_t, out_t>; it is formed from p and dp in double rather than from the
 * stored (rounded) out, so bf16 storage of out does not leak into the gradient.
 * Each (b, group) has its k and v widened once into contiguous [T, D] double scratch; dk and dv
 * accumulate there over the group's heads in ascending h, then t, and are rounded once. */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

static void check_attention_args(int B, int T, int NH, int KV, int D) {
    TR_CHECK(B > 0 && T > 0 && NH > 0 && KV > 0 && D > 0, "attention needs B, T, NH, KV, D > 0");
    TR_CHECK(NH % KV == 0, "attention heads must be a multiple of query groups (--num-query-groups)");
}

/* Widen the [T, D] slice of head `head` (of H) in batch b of x [B, T, H, D] into dst [T, D]. */
static void load_head(double *dst, tr_buf x, int b, int head, int T, int H, int D) {
    for (int t = 0; t < T; t++)
        ld_row_d(dst + (size_t)t * (size_t)D, x, (((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)head) * (size_t)D,
                 (size_t)D);
}

/* Store src [T, D] into head `head` of batch b of x [B, T, H, D], one rounding per element. */
static void store_head(tr_buf x, const double *src, int b, int head, int T, int H, int D) {
    for (int t = 0; t < T; t++) {
        const size_t off = (((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)head) * (size_t)D;
        for (int d = 0; d < D; d++) st_d(x, off + (size_t)d, src[(size_t)t * (size_t)D + (size_t)d]);
    }
}

/* scores[0..t] = <q, k_j> * scale for the causal prefix; returns their max. */
static double causal_scores(double *scores, const double *q, const double *kh, int t, int D, double scale) {
    double mx = -INFINITY;
    for (int j = 0; j <= t; j++) {
        const double *kj = kh + (size_t)j * (size_t)D;
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += q[d] * kj[d];
        scores[j] = dot * scale;
        if (scores[j] > mx) mx = scores[j];
    }
    return mx;
}

void kern_attention_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int T,
                            int NH, int KV, int D) {
    kern_cost(s, 4.0 * B * NH * (double)T * (T + 1) / 2.0 * D,
              ((double)B * T * (2.0 * NH + 2.0 * KV) * D) * tr_dtype_size(q.dt), q.dt);
    check_attention_args(B, T, NH, KV, D);
    kern_check_float_buf(out, "attention out");
    kern_check_float_buf(q, "attention q");
    kern_check_float_buf(k, "attention k");
    kern_check_float_buf(v, "attention v");
    TR_CHECK(lse != NULL, "attention forward writes lse[B, NH, T]");
    const int heads_per_group = NH / KV;
    const double scale = 1.0 / sqrt((double)D);
    const size_t TD = (size_t)T * (size_t)D;
    double *kh = kern_scratch(TD, sizeof *kh, "attention k head");    /* [T, D] */
    double *vh = kern_scratch(TD, sizeof *vh, "attention v head");    /* [T, D] */
    double *qh = kern_scratch(TD, sizeof *qh, "attention q head");    /* [T, D] */
    double *oh = kern_scratch(TD, sizeof *oh, "attention out head");  /* [T, D] */
    double *scores = kern_scratch((size_t)T, sizeof *scores, "attention scores"); /* [T] */

    for (int b = 0; b < B; b++) {
        for (int g = 0; g < KV; g++) {
            load_head(kh, k, b, g, T, KV, D);
            load_head(vh, v, b, g, T, KV, D);
            for (int h = g * heads_per_group; h < (g + 1) * heads_per_group; h++) {
                load_head(qh, q, b, h, T, NH, D);
                for (int t = 0; t < T; t++) {
                    const double mx = causal_scores(scores, qh + (size_t)t * (size_t)D, kh, t, D, scale);
                    double sum = 0.0;
                    for (int j = 0; j <= t; j++) sum += exp(scores[j] - mx);
                    const double l = mx + log(sum);
                    double *o = oh + (size_t)t * (size_t)D;
                    for (int d = 0; d < D; d++) o[d] = 0.0;
                    for (int j = 0; j <= t; j++) {
                        const double p = exp(scores[j] - l);
                        const double *vj = vh + (size_t)j * (size_t)D;
                        for (int d = 0; d < D; d++) o[d] += p * vj[d];
                    }
                    lse[((size_t)b * (size_t)NH + (size_t)h) * (size_t)T + (size_t)t] = (float)l;
                }
                store_head(out, oh, b, h, T, NH, D);
            }
        }
    }
    free(scores);
    free(oh);
    free(qh);
    free(vh);
    free(kh);
}

void kern_attention_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                             tr_buf v, tr_buf out, const float *lse, int B, int T, int NH, int KV, int D) {
    kern_cost(s, 10.0 * B * NH * (double)T * (T + 1) / 2.0 * D, /* recompute + four products */
              ((double)B * T * (4.0 * NH + 4.0 * KV) * D) * tr_dtype_size(q.dt), q.dt);
    (void)out; /* see the header comment: sum p*dp is formed exactly instead */
    check_attention_args(B, T, NH, KV, D);
    kern_check_float_buf(dq, "attention dq");
    kern_check_float_buf(dk, "attention dk");
    kern_check_float_buf(dv, "attention dv");
    kern_check_float_buf(dout, "attention dout");
    kern_check_float_buf(q, "attention q");
    kern_check_float_buf(k, "attention k");
    kern_check_float_buf(v, "attention v");
    TR_CHECK(lse != NULL, "attention backward reads the forward's lse[B, NH, T]");
    const int heads_per_group = NH / KV;
    const double scale = 1.0 / sqrt((double)D);
    const size_t TD = (size_t)T * (size_t)D;
    double *kh = kern_scratch(TD, sizeof *kh, "attention k head");      /* [T, D] */
    double *vh = kern_scratch(TD, sizeof *vh, "attention v head");      /* [T, D] */
    double *qh = kern_scratch(TD, sizeof *qh, "attention q head");      /* [T, D] */
    double *doh = kern_scratch(TD, sizeof *doh, "attention dout head"); /* [T, D] */
    double *dqh = kern_scratch(TD, sizeof *dqh, "attention dq head");   /* [T, D] */
    double *dkh = kern_scratch(TD, sizeof *dkh, "attention dk head");   /* [T, D] */
    double *dvh = kern_scratch(TD, sizeof *dvh, "attention dv head");   /* [T, D] */
    double *p = kern_scratch((size_t)T, sizeof *p, "attention probabilities"); /* [T] */
    double *dp = kern_scratch((size_t)T, sizeof *dp, "attention dprobs");      /* [T] */

    for (int b = 0; b < B; b++) {
        for (int g = 0; g < KV; g++) {
            load_head(kh, k, b, g, T, KV, D);
            load_head(vh, v, b, g, T, KV, D);
            memset(dkh, 0, TD * sizeof *dkh);
            memset(dvh, 0, TD * sizeof *dvh);
            for (int h = g * heads_per_group; h < (g + 1) * heads_per_group; h++) {
                load_head(qh, q, b, h, T, NH, D);
                load_head(doh, dout, b, h, T, NH, D);
                for (int t = 0; t < T; t++) {
                    const double *qt = qh + (size_t)t * (size_t)D, *dot = doh + (size_t)t * (size_t)D;
                    const double l = lse[((size_t)b * (size_t)NH + (size_t)h) * (size_t)T + (size_t)t];
                    (void)causal_scores(p, qt, kh, t, D, scale);
                    double sum_p_dp = 0.0;
                    for (int j = 0; j <= t; j++) {
                        p[j] = exp(p[j] - l);
                        const double *vj = vh + (size_t)j * (size_t)D;
                        double acc = 0.0;
                        for (int d = 0; d < D; d++) acc += dot[d] * vj[d];
                        dp[j] = acc;
                        sum_p_dp += p[j] * acc;
                    }
                    double *dqt = dqh + (size_t)t * (size_t)D;
                    for (int d = 0; d < D; d++) dqt[d] = 0.0;
                    for (int j = 0; j <= t; j++) {
                        const double ds = p[j] * (dp[j] - sum_p_dp) * scale;
                        const double *kj = kh + (size_t)j * (size_t)D;
                        double *dkj = dkh + (size_t)j * (size_t)D, *dvj = dvh + (size_t)j * (size_t)D;
                        for (int d = 0; d < D; d++) {
                            dqt[d] += ds * kj[d];
                            dkj[d] += ds * qt[d];
                            dvj[d] += p[j] * dot[d];
                        }
                    }
                }
                store_head(dq, dqh, b, h, T, NH, D);
            }
            store_head(dk, dkh, b, g, T, KV, D);
            store_head(dv, dvh, b, g, T, KV, D);
        }
    }
    free(dp);
    free(p);
    free(dvh);
    free(dkh);
    free(dqh);
    free(doh);
    free(qh);
    free(vh);
    free(kh);
}
