/* Grouped-query attention with explicit query and key positions, for the twin: the general kernel
 * behind kern_attention_forward/backward (kern_attention.c passes positions 0..T-1) and the
 * context-parallel case (a rank's query chunks against the all-gathered keys).
 *
 * Query head h reads key/value group h / (NH/KV). Query i sees key j iff k_pos[j] <= q_pos[i]; the
 * keys a query sees are visited in ascending j, always, so with q_pos = k_pos = 0..T-1 this is the
 * causal prefix j <= i in the order the causal kernel used (same bits). For every (b, h, i) the
 * scores s_j = <q_i, k_j> / sqrt(D) of the visible keys are formed in double; the forward keeps
 * lse = max + log(sum exp(s - max)) and writes out_i = sum_j exp(s_j - lse) v_j. The backward
 * recomputes p_j = exp(s_j - lse) from q, k and the stored lse (the flash-attention contract), then
 *   dp_j = <dout_i, v_j>,  ds_j = p_j (dp_j - sum_m p_m dp_m)
 *   dq_i = scale sum_j ds_j k_j,  dk_j += scale ds_j q_i,  dv_j += p_j dout_i.
 * sum_m p_m dp_m equals <dout_i, out_i>; it is formed from p and dp in double rather than from the
 * stored (rounded) out, so bf16 storage of out does not leak into the gradient.
 * Each (b, group) has its k and v widened once into contiguous [Tk, D] double scratch; dk and dv
 * accumulate there over the group's heads in ascending h, then i, and are rounded once. A key no
 * query of this call sees gets dk = dv = 0 (context parallelism sums the ranks' dk/dv). */
#include <math.h>

#include "kern_attention.h"
#include "kern_cpu.h"
#include "twinrun/kern.h"

/* Every query must see a key: a query with none has no softmax (lse = -inf, out = 0/0), which in
 * context parallelism means the chunk layout or the all-gathered key positions are wrong. */
static void check_positions(const int32_t *q_pos, const int32_t *k_pos, int Tq, int Tk, const char *who) {
    int32_t kmin = k_pos[0];
    for (int j = 1; j < Tk; j++)
        if (k_pos[j] < kmin) kmin = k_pos[j];
    for (int i = 0; i < Tq; i++)
        if (q_pos[i] < kmin)
            tr_fatal("%s: query %d at position %d sees no key (the smallest key position is %d); with context "
                     "parallelism, check the chunk layout and that k_pos covers the all-gathered sequence",
                     who, i, (int)q_pos[i], (int)kmin);
}

/* Number of (query, key) pairs that are visible: the work the roofline charges for. */
static double visible_pairs(const int32_t *q_pos, const int32_t *k_pos, int Tq, int Tk) {
    double pairs = 0.0;
    for (int i = 0; i < Tq; i++)
        for (int j = 0; j < Tk; j++) pairs += k_pos[j] <= q_pos[i] ? 1.0 : 0.0;
    return pairs;
}

/* visible_pairs without reading the positions (predict mode, where they are device memory): causal
 * attention over the whole sequence (Tq = Tk, positions 0..T-1) sees T(T+1)/2 pairs, and a context-
 * parallel rank's two chunks (llama_cp_position: chunks r and 2CP-1-r of Tq/2 queries each, keys of the
 * whole sequence) see Tq(Tk+1)/2 as well, exactly. */
static double causal_pairs(int Tq, int Tk) { return (double)Tq * ((double)Tk + 1.0) / 2.0; }

/* The roofline charges of both directions for `pairs` visible (query, key) pairs. */
static void forward_cost(dev_stream *s, double pairs, tr_buf q, int B, int Tq, int Tk, int NH, int KV, int D) {
    kern_cost(s, TWIN_K_ATTENTION_FWD, 4.0 * B * NH * pairs * D,
              ((double)B * (2.0 * NH * Tq + 2.0 * KV * Tk) * D) * tr_dtype_size(q.dt), q.dt);
}

static void backward_cost(dev_stream *s, double pairs, tr_buf q, int B, int Tq, int Tk, int NH, int KV, int D) {
    kern_cost(s, TWIN_K_ATTENTION_BWD, 10.0 * B * NH * pairs * D, /* recompute + four products */
              ((double)B * (4.0 * NH * Tq + 4.0 * KV * Tk) * D) * tr_dtype_size(q.dt), q.dt);
}

/* Widen the [T, D] slice of head `head` (of H) in batch b of x [B, T, H, D] into dst [T, D]. */
static void load_head(double *dst, tr_buf x, int b, int head, int T, int H, int D) {
    for (int t = 0; t < T; t++)
        ld_row_d(dst + (size_t)t * (size_t)D, x,
                 (((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)head) * (size_t)D, (size_t)D);
}

/* Store src [T, D] into head `head` of batch b of x [B, T, H, D], one rounding per element. */
static void store_head(tr_buf x, const double *src, int b, int head, int T, int H, int D) {
    for (int t = 0; t < T; t++) {
        const size_t off = (((size_t)b * (size_t)T + (size_t)t) * (size_t)H + (size_t)head) * (size_t)D;
        for (int d = 0; d < D; d++) st_d(x, off + (size_t)d, src[(size_t)t * (size_t)D + (size_t)d]);
    }
}

/* The keys query position qp sees, ascending: vis[0..count-1] (returned count >= 1 after
 * check_positions). vis [Tk]. */
static int visible_keys(int *vis, const int32_t *k_pos, int Tk, int32_t qp) {
    int count = 0;
    for (int j = 0; j < Tk; j++)
        if (k_pos[j] <= qp) vis[count++] = j;
    return count;
}

/* scores[m] = <q, k_vis[m]> * scale for the visible keys; returns their max. */
static double visible_scores(double *scores, const double *q, const double *kh, const int *vis, int count, int D,
                             double scale) {
    double mx = -INFINITY;
    for (int m = 0; m < count; m++) {
        const double *kj = kh + (size_t)vis[m] * (size_t)D;
        double dot = 0.0;
        for (int d = 0; d < D; d++) dot += q[d] * kj[d];
        scores[m] = dot * scale;
        if (scores[m] > mx) mx = scores[m];
    }
    return mx;
}

/* Both directions' arguments, then the positions themselves: q_pos [Tq], k_pos [Tk] int32, copied at
 * launch (they were read there for the check and the cost) so the body never reads the caller's. */
typedef struct attn_args {
    tr_buf out, q, k, v, dq, dk, dv, dout; /* q, out, dq, dout [B, Tq, NH, D]; k, v, dk, dv [B, Tk, KV, D] */
    float *lse_out;                        /* [B, NH, Tq] the forward writes */
    const float *lse;                      /* [B, NH, Tq] the backward reads */
    int B, Tq, Tk, NH, KV, D;
} attn_args;

static const int32_t *q_pos_of(const attn_args *a) { return (const int32_t *)(a + 1); }
static const int32_t *k_pos_of(const attn_args *a) { return q_pos_of(a) + a->Tq; }

/* Submits body on a copy of a followed by the positions. */
static void submit_with_positions(dev_stream *s, twin_job_fn *body, const attn_args *a, const int32_t *q_pos,
                                  const int32_t *k_pos) {
    const size_t bytes = sizeof *a + sizeof(int32_t) * ((size_t)a->Tq + (size_t)a->Tk);
    attn_args *copy = kern_scratch(bytes, 1, "attention arguments");
    *copy = *a;
    memcpy((int32_t *)(copy + 1), q_pos, sizeof(int32_t) * (size_t)a->Tq);
    memcpy((int32_t *)(copy + 1) + a->Tq, k_pos, sizeof(int32_t) * (size_t)a->Tk);
    kern_submit(s, body, copy, bytes);
    free(copy);
}

static void attention_forward_body(void *args) {
    const attn_args *a = args;
    const tr_buf out = a->out, q = a->q, k = a->k, v = a->v;
    float *lse = a->lse_out;
    const int32_t *q_pos = q_pos_of(a), *k_pos = k_pos_of(a);
    const int B = a->B, Tq = a->Tq, Tk = a->Tk, NH = a->NH, KV = a->KV, D = a->D;
    const int heads_per_group = NH / KV;
    const double scale = 1.0 / sqrt((double)D);
    const size_t QD = (size_t)Tq * (size_t)D, KD = (size_t)Tk * (size_t)D;
    double *kh = kern_scratch(KD, sizeof *kh, "attention k head");                 /* [Tk, D] */
    double *vh = kern_scratch(KD, sizeof *vh, "attention v head");                 /* [Tk, D] */
    double *qh = kern_scratch(QD, sizeof *qh, "attention q head");                 /* [Tq, D] */
    double *oh = kern_scratch(QD, sizeof *oh, "attention out head");               /* [Tq, D] */
    double *scores = kern_scratch((size_t)Tk, sizeof *scores, "attention scores"); /* [Tk] */
    int *vis = kern_scratch((size_t)Tk, sizeof *vis, "attention visible keys");    /* [Tk] */

    for (int b = 0; b < B; b++) {
        for (int g = 0; g < KV; g++) {
            load_head(kh, k, b, g, Tk, KV, D);
            load_head(vh, v, b, g, Tk, KV, D);
            for (int h = g * heads_per_group; h < (g + 1) * heads_per_group; h++) {
                load_head(qh, q, b, h, Tq, NH, D);
                for (int i = 0; i < Tq; i++) {
                    const int count = visible_keys(vis, k_pos, Tk, q_pos[i]);
                    const double mx = visible_scores(scores, qh + (size_t)i * (size_t)D, kh, vis, count, D, scale);
                    double sum = 0.0;
                    for (int m = 0; m < count; m++) sum += exp(scores[m] - mx);
                    const double l = mx + log(sum);
                    double *o = oh + (size_t)i * (size_t)D;
                    for (int d = 0; d < D; d++) o[d] = 0.0;
                    for (int m = 0; m < count; m++) {
                        const double p = exp(scores[m] - l);
                        const double *vj = vh + (size_t)vis[m] * (size_t)D;
                        for (int d = 0; d < D; d++) o[d] += p * vj[d];
                    }
                    lse[((size_t)b * (size_t)NH + (size_t)h) * (size_t)Tq + (size_t)i] = (float)l;
                }
                store_head(out, oh, b, h, Tq, NH, D);
            }
        }
    }
    free(vis);
    free(scores);
    free(oh);
    free(qh);
    free(vh);
    free(kh);
}

void twin_attention_forward_at(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                               const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                               int D) {
    check_positions(q_pos, k_pos, Tq, Tk, "attention forward");
    forward_cost(s, visible_pairs(q_pos, k_pos, Tq, Tk), q, B, Tq, Tk, NH, KV, D);
    const attn_args a = {
        .out = out, .q = q, .k = k, .v = v, .lse_out = lse, .B = B, .Tq = Tq, .Tk = Tk, .NH = NH, .KV = KV, .D = D};
    submit_with_positions(s, attention_forward_body, &a, q_pos, k_pos);
}

/* The tensors attention reads and writes, for the stream hazard check (kern_access); positions NULL
 * when they are host memory (the causal kernels' own table). */
void twin_attention_forward_access(dev_stream *s, const char *what, tr_buf out, const float *lse, tr_buf q, tr_buf k,
                                   tr_buf v, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH,
                                   int KV, int D) {
    const size_t qn = (size_t)B * (size_t)Tq * (size_t)NH * (size_t)D,
                 kn = (size_t)B * (size_t)Tk * (size_t)KV * (size_t)D;
    kern_access(s, what,
                (const twin_access[]){{out.p, kern_bytes(out, qn), true},
                                      {lse, (size_t)B * (size_t)NH * (size_t)Tq * sizeof(float), true},
                                      {q.p, kern_bytes(q, qn), false},
                                      {k.p, kern_bytes(k, kn), false},
                                      {v.p, kern_bytes(v, kn), false},
                                      {q_pos, (size_t)Tq * sizeof(int32_t), false},
                                      {k_pos, (size_t)Tk * sizeof(int32_t), false}},
                7);
}

void twin_attention_backward_access(dev_stream *s, const char *what, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout,
                                    tr_buf q, tr_buf k, tr_buf v, const float *lse, const int32_t *q_pos,
                                    const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D) {
    const size_t qn = (size_t)B * (size_t)Tq * (size_t)NH * (size_t)D,
                 kn = (size_t)B * (size_t)Tk * (size_t)KV * (size_t)D;
    kern_access(s, what,
                (const twin_access[]){{dq.p, kern_bytes(dq, qn), true},
                                      {dk.p, kern_bytes(dk, kn), true},
                                      {dv.p, kern_bytes(dv, kn), true},
                                      {dout.p, kern_bytes(dout, qn), false},
                                      {q.p, kern_bytes(q, qn), false},
                                      {k.p, kern_bytes(k, kn), false},
                                      {v.p, kern_bytes(v, kn), false},
                                      {lse, (size_t)B * (size_t)NH * (size_t)Tq * sizeof(float), false},
                                      {q_pos, (size_t)Tq * sizeof(int32_t), false},
                                      {k_pos, (size_t)Tk * sizeof(int32_t), false}},
                10);
}

void kern_attention_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                                int D) {
    kern_attention_forward_pos_check(s, out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
    twin_attention_forward_access(s, "kernel attention_forward_pos", out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV,
                                  D);
    if (kern_shape_only(s)) { /* positions are device memory, not readable then: only the cost */
        forward_cost(s, causal_pairs(Tq, Tk), q, B, Tq, Tk, NH, KV, D);
        return;
    }
    kern_drain(s); /* the positions as the work before this launch left them */
    twin_attention_forward_at(s, out, lse, q, k, v, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
}

static void attention_backward_body(void *args) {
    const attn_args *a = args;
    const tr_buf dq = a->dq, dk = a->dk, dv = a->dv, dout = a->dout, q = a->q, k = a->k, v = a->v;
    const float *lse = a->lse;
    const int32_t *q_pos = q_pos_of(a), *k_pos = k_pos_of(a);
    const int B = a->B, Tq = a->Tq, Tk = a->Tk, NH = a->NH, KV = a->KV, D = a->D;
    const int heads_per_group = NH / KV;
    const double scale = 1.0 / sqrt((double)D);
    const size_t QD = (size_t)Tq * (size_t)D, KD = (size_t)Tk * (size_t)D;
    double *kh = kern_scratch(KD, sizeof *kh, "attention k head");              /* [Tk, D] */
    double *vh = kern_scratch(KD, sizeof *vh, "attention v head");              /* [Tk, D] */
    double *dkh = kern_scratch(KD, sizeof *dkh, "attention dk head");           /* [Tk, D] */
    double *dvh = kern_scratch(KD, sizeof *dvh, "attention dv head");           /* [Tk, D] */
    double *qh = kern_scratch(QD, sizeof *qh, "attention q head");              /* [Tq, D] */
    double *doh = kern_scratch(QD, sizeof *doh, "attention dout head");         /* [Tq, D] */
    double *dqh = kern_scratch(QD, sizeof *dqh, "attention dq head");           /* [Tq, D] */
    double *p = kern_scratch((size_t)Tk, sizeof *p, "attention probabilities"); /* [Tk] */
    double *dp = kern_scratch((size_t)Tk, sizeof *dp, "attention dprobs");      /* [Tk] */
    int *vis = kern_scratch((size_t)Tk, sizeof *vis, "attention visible keys"); /* [Tk] */

    for (int b = 0; b < B; b++) {
        for (int g = 0; g < KV; g++) {
            load_head(kh, k, b, g, Tk, KV, D);
            load_head(vh, v, b, g, Tk, KV, D);
            memset(dkh, 0, KD * sizeof *dkh);
            memset(dvh, 0, KD * sizeof *dvh);
            for (int h = g * heads_per_group; h < (g + 1) * heads_per_group; h++) {
                load_head(qh, q, b, h, Tq, NH, D);
                load_head(doh, dout, b, h, Tq, NH, D);
                for (int i = 0; i < Tq; i++) {
                    const double *qi = qh + (size_t)i * (size_t)D, *doi = doh + (size_t)i * (size_t)D;
                    const double l = lse[((size_t)b * (size_t)NH + (size_t)h) * (size_t)Tq + (size_t)i];
                    const int count = visible_keys(vis, k_pos, Tk, q_pos[i]);
                    (void)visible_scores(p, qi, kh, vis, count, D, scale);
                    double sum_p_dp = 0.0;
                    for (int m = 0; m < count; m++) {
                        p[m] = exp(p[m] - l);
                        const double *vj = vh + (size_t)vis[m] * (size_t)D;
                        double acc = 0.0;
                        for (int d = 0; d < D; d++) acc += doi[d] * vj[d];
                        dp[m] = acc;
                        sum_p_dp += p[m] * acc;
                    }
                    double *dqi = dqh + (size_t)i * (size_t)D;
                    for (int d = 0; d < D; d++) dqi[d] = 0.0;
                    for (int m = 0; m < count; m++) {
                        const double ds = p[m] * (dp[m] - sum_p_dp) * scale;
                        const size_t j = (size_t)vis[m];
                        const double *kj = kh + j * (size_t)D;
                        double *dkj = dkh + j * (size_t)D, *dvj = dvh + j * (size_t)D;
                        for (int d = 0; d < D; d++) {
                            dqi[d] += ds * kj[d];
                            dkj[d] += ds * qi[d];
                            dvj[d] += p[m] * doi[d];
                        }
                    }
                }
                store_head(dq, dqh, b, h, Tq, NH, D);
            }
            store_head(dk, dkh, b, g, Tk, KV, D);
            store_head(dv, dvh, b, g, Tk, KV, D);
        }
    }
    free(vis);
    free(dp);
    free(p);
    free(dqh);
    free(doh);
    free(qh);
    free(dvh);
    free(dkh);
    free(vh);
    free(kh);
}

void twin_attention_backward_at(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                tr_buf v, const float *lse, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq,
                                int Tk, int NH, int KV, int D) {
    check_positions(q_pos, k_pos, Tq, Tk, "attention backward");
    backward_cost(s, visible_pairs(q_pos, k_pos, Tq, Tk), q, B, Tq, Tk, NH, KV, D);
    const attn_args a = {.dq = dq,
                         .dk = dk,
                         .dv = dv,
                         .dout = dout,
                         .q = q,
                         .k = k,
                         .v = v,
                         .lse = lse,
                         .B = B,
                         .Tq = Tq,
                         .Tk = Tk,
                         .NH = NH,
                         .KV = KV,
                         .D = D};
    submit_with_positions(s, attention_backward_body, &a, q_pos, k_pos);
}

void kern_attention_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                 tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos, const int32_t *k_pos,
                                 int B, int Tq, int Tk, int NH, int KV, int D) {
    /* out is not read: see the header comment, sum p*dp is formed exactly instead */
    kern_attention_backward_pos_check(s, dq, dk, dv, dout, q, k, v, out, lse, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
    twin_attention_backward_access(s, "kernel attention_backward_pos", dq, dk, dv, dout, q, k, v, lse, q_pos, k_pos, B,
                                   Tq, Tk, NH, KV, D);
    if (kern_shape_only(s)) {
        backward_cost(s, causal_pairs(Tq, Tk), q, B, Tq, Tk, NH, KV, D);
        return;
    }
    kern_drain(s); /* the positions as the work before this launch left them */
    twin_attention_backward_at(s, dq, dk, dv, dout, q, k, v, lse, q_pos, k_pos, B, Tq, Tk, NH, KV, D);
}
