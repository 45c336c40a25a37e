/* Causal grouped-query attention, forward and backward, for the twin.
 *
 * Plain softmax attention in double: for query (b, t, h), scores s_j = (q . k_j) / sqrt(D) for
 * j = 0..t, lse = max + log(sum_j exp(s_j - max)), p_j = exp(s_j - lse), out = sum_j p_j v_j,
 * all sums in ascending j (and d) order. The backward recomputes p_j from q, k and the stored fp32
 * lse, as a flash-attention backward does. Query head h reads key/value group h / (NH / KV). */
#include <math.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

typedef struct attn_dims {
    size_t B, T, NH, KV, D, heads_per_group;
} attn_dims;

static attn_dims check_dims(int B, int T, int NH, int KV, int D) {
    TR_CHECK(B > 0 && T > 0 && NH > 0 && KV > 0 && D > 0, "attention needs B, T, NH, KV and D positive");
    TR_CHECK(NH % KV == 0, "attention heads must be a multiple of query groups; check --num-query-groups");
    attn_dims d = {(size_t)B, (size_t)T, (size_t)NH, (size_t)KV, (size_t)D, (size_t)(NH / KV)};
    return d;
}

/* Offset of row (b, t, head) of a [B, T, heads, D] tensor. */
static size_t at(const attn_dims *d, size_t b, size_t t, size_t heads, size_t head) {
    return ((b * d->T + t) * heads + head) * d->D;
}

static double dot(const double *x, const double *y, size_t n) {
    double acc = 0.0;
    for (size_t i = 0; i < n; i++) acc += x[i] * y[i];
    return acc;
}

void kern_attention_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int T,
                            int NH, int KV, int D) {
    (void)s;
    const attn_dims d = check_dims(B, T, NH, KV, D);
    kern_check_float_buf(out, "attention out");
    kern_check_float_buf(q, "attention q");
    kern_check_float_buf(k, "attention k");
    kern_check_float_buf(v, "attention v");
    TR_CHECK(lse != NULL, "attention forward writes lse [B,NH,T]; pass a buffer");
    const double scale = 1.0 / sqrt((double)D);
    const size_t nq = d.B * d.T * d.NH * d.D, nkv = d.B * d.T * d.KV * d.D;
    double *qd = ld_all_d(q, nq, "attention q");   /* [B,T,NH,D] */
    double *kd = ld_all_d(k, nkv, "attention k");  /* [B,T,KV,D] */
    double *vd = ld_all_d(v, nkv, "attention v");  /* [B,T,KV,D] */
    double *sc = kern_scratch(d.T, sizeof *sc, "attention scores"); /* [T] */
    double *o = kern_scratch(d.D, sizeof *o, "attention out row");  /* [D] */

    for (size_t b = 0; b < d.B; b++)
        for (size_t h = 0; h < d.NH; h++) {
            const size_t g = h / d.heads_per_group;
            for (size_t t = 0; t < d.T; t++) {
                const double *qr = qd + at(&d, b, t, d.NH, h);
                double mx = -INFINITY;
                for (size_t j = 0; j <= t; j++) {
                    sc[j] = dot(qr, kd + at(&d, b, j, d.KV, g), d.D) * scale;
                    if (sc[j] > mx) mx = sc[j];
                }
                double sum = 0.0;
                for (size_t j = 0; j <= t; j++) sum += exp(sc[j] - mx);
                const double l = mx + log(sum);
                for (size_t i = 0; i < d.D; i++) o[i] = 0.0;
                for (size_t j = 0; j <= t; j++) {
                    const double p = exp(sc[j] - l);
                    const double *vr = vd + at(&d, b, j, d.KV, g);
                    for (size_t i = 0; i < d.D; i++) o[i] += p * vr[i];
                }
                const size_t orow = at(&d, b, t, d.NH, h);
                for (size_t i = 0; i < d.D; i++) st_d(out, orow + i, o[i]);
                lse[(b * d.NH + h) * d.T + t] = (float)l;
            }
        }
    free(o);
    free(sc);
    free(vd);
    free(kd);
    free(qd);
}

void kern_attention_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                             tr_buf v, tr_buf out, const float *lse, int B, int T, int NH, int KV, int D) {
    (void)s;
    /* The twin recomputes sum_j p_j dp_j from the probabilities instead of reading dout . out,
     * so a bf16-rounded out does not leak into the oracle's gradients. */
    (void)out;
    const attn_dims d = check_dims(B, T, NH, KV, D);
    kern_check_float_buf(dq, "attention dq");
    kern_check_float_buf(dk, "attention dk");
    kern_check_float_buf(dv, "attention dv");
    kern_check_float_buf(dout, "attention dout");
    kern_check_float_buf(q, "attention q");
    kern_check_float_buf(k, "attention k");
    kern_check_float_buf(v, "attention v");
    TR_CHECK(lse != NULL, "attention backward needs the forward's lse [B,NH,T]");
    const double scale = 1.0 / sqrt((double)D);
    const size_t nq = d.B * d.T * d.NH * d.D, nkv = d.B * d.T * d.KV * d.D;
    double *qd = ld_all_d(q, nq, "attention q");        /* [B,T,NH,D] */
    double *kd = ld_all_d(k, nkv, "attention k");       /* [B,T,KV,D] */
    double *vd = ld_all_d(v, nkv, "attention v");       /* [B,T,KV,D] */
    double *dod = ld_all_d(dout, nq, "attention dout"); /* [B,T,NH,D] */
    double *dkd = kern_scratch(nkv, sizeof *dkd, "attention dk sum"); /* [B,T,KV,D] */
    double *dvd = kern_scratch(nkv, sizeof *dvd, "attention dv sum"); /* [B,T,KV,D] */
    double *p = kern_scratch(d.T, sizeof *p, "attention probs");      /* [T] */
    double *dp = kern_scratch(d.T, sizeof *dp, "attention dprobs");   /* [T] */
    double *dqr = kern_scratch(d.D, sizeof *dqr, "attention dq row"); /* [D] */
    for (size_t i = 0; i < nkv; i++) {
        dkd[i] = 0.0;
        dvd[i] = 0.0;
    }

    /* dk and dv collect contributions in the fixed order (b, h, t) ascending. */
    for (size_t b = 0; b < d.B; b++)
        for (size_t h = 0; h < d.NH; h++) {
            const size_t g = h / d.heads_per_group;
            for (size_t t = 0; t < d.T; t++) {
                const size_t qrow = at(&d, b, t, d.NH, h);
                const double *qr = qd + qrow, *dor = dod + qrow;
                const double l = lse[(b * d.NH + h) * d.T + t];
                double sum_p_dp = 0.0;
                for (size_t j = 0; j <= t; j++) {
                    const size_t kvrow = at(&d, b, j, d.KV, g);
                    p[j] = exp(dot(qr, kd + kvrow, d.D) * scale - l);
                    dp[j] = dot(dor, vd + kvrow, d.D);
                    sum_p_dp += p[j] * dp[j];
                }
                for (size_t i = 0; i < d.D; i++) dqr[i] = 0.0;
                for (size_t j = 0; j <= t; j++) {
                    const size_t kvrow = at(&d, b, j, d.KV, g);
                    const double ds = p[j] * (dp[j] - sum_p_dp) * scale; /* d loss / d raw score */
                    const double *kr = kd + kvrow;
                    double *dkr = dkd + kvrow, *dvr = dvd + kvrow;
                    for (size_t i = 0; i < d.D; i++) {
                        dqr[i] += ds * kr[i];
                        dkr[i] += ds * qr[i];
                        dvr[i] += p[j] * dor[i];
                    }
                }
                for (size_t i = 0; i < d.D; i++) st_d(dq, qrow + i, dqr[i]);
            }
        }
    for (size_t i = 0; i < nkv; i++) {
        st_d(dk, i, dkd[i]);
        st_d(dv, i, dvd[i]);
    }
    free(dqr);
    free(dp);
    free(p);
    free(dvd);
    free(dkd);
    free(dod);
    free(vd);
    free(kd);
    free(qd);
}
