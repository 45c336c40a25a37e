/* Context parallelism's position-masked attention (kern_attention_*_pos) on cuDNN, as causal blocks.
 *
 * A rank's queries are a few runs of consecutive positions (Megatron's load balancing: chunks r and
 * 2 CP - 1 - r of the sequence) and its keys the whole all-gathered sequence, k_pos = 0..Tk-1. A run
 * of queries at positions p0 .. p0+len-1 sees exactly the keys 0 .. p0+len-1, causally with the
 * diagonal at the bottom right: one cuDNN call with Tq = len, Tk = p0 + len on slices of q, out, lse
 * (kern_attention_cudnn.h). The backward's dK/dV are the sum of the runs' (the longest run writes
 * them, each other one a zeroed copy that is then added; keys no query sees stay 0).
 *
 * The runs come from the positions on the device: read once per (q_pos, k_pos, Tq, Tk) — the model
 * writes them once, at start-up — and kept until dev_free frees either buffer (tr_cu_cudnn_forget);
 * every later call checks on the device that the positions still are those runs (a kernel of Tq + Tk
 * threads that stops the rank otherwise: positions rewritten in place). Positions of any
 * other shape (k_pos not 0..Tk-1, more than TR_CP_MAX_RUNS runs) take the flash kernels. */
#include <stdlib.h>
#include <string.h>

#include "cuda_dev.h"
#include "kern_attention_cudnn.h"
#include "kern_common.cuh"

#if defined(TWINRUN_CUDNN) && !defined(TWINRUN_MUSA)

namespace {

constexpr int TR_CP_MAX_RUNS = 8, TR_CP_MAX_LAYOUTS = 16;

struct cp_runs {
    int n;                          /* 0: the positions are not runs over k_pos = 0..Tk-1 */
    int row0[TR_CP_MAX_RUNS];       /* first query row of each run */
    int pos0[TR_CP_MAX_RUNS];       /* its position */
    int len[TR_CP_MAX_RUNS];
};

struct cp_layout {
    const int32_t *q_pos, *k_pos;
    int Tq, Tk;
    cp_runs runs;
};

/* the layouts seen so far, per process (one model's positions, a test's few) */
cp_layout g_layouts[TR_CP_MAX_LAYOUTS];
int g_nlayouts;

/* Stops the rank if q_pos / k_pos are no longer the runs they were read as. */
__global__ void k_cp_runs_check(const int32_t *q_pos, const int32_t *k_pos, int Tq, int Tk, cp_runs r) {
    const int t = blockIdx.x * blockDim.x + threadIdx.x;
    if (t < Tq) {
        int want = -1;
        for (int i = 0; i < r.n; i++)
            if (t >= r.row0[i] && t < r.row0[i] + r.len[i]) want = r.pos0[i] + (t - r.row0[i]);
        if (q_pos[t] != want)
            TR_DEVICE_FAIL("attention (cuDNN, context parallel): q_pos[%d] is %d, it was %d when first read: the "
                           "positions changed under a kept layout\n",
                           t, q_pos[t], want);
    } else if (t < Tq + Tk) {
        const int j = t - Tq;
        if (k_pos[j] != j)
            TR_DEVICE_FAIL("attention (cuDNN, context parallel): k_pos[%d] is %d, it was %d when first read\n", j,
                           k_pos[j], j);
    }
}

cp_runs runs_of(const int32_t *qp, const int32_t *kp, int Tq, int Tk) {
    cp_runs r;
    memset(&r, 0, sizeof r);
    for (int j = 0; j < Tk; j++)
        if (kp[j] != j) return r;
    int n = 0;
    for (int i = 0; i < Tq; i++) {
        if (qp[i] < 0 || qp[i] >= Tk) return cp_runs{};
        if (n > 0 && qp[i] == r.pos0[n - 1] + r.len[n - 1]) {
            r.len[n - 1]++;
            continue;
        }
        if (n == TR_CP_MAX_RUNS) return cp_runs{};
        r.row0[n] = i, r.pos0[n] = qp[i], r.len[n] = 1, n++;
    }
    r.n = n;
    return r;
}

/* The runs of these positions (n 0: not cuDNN's), read once and checked on the device afterwards. */
const cp_runs *runs_get(dev_stream *s, const int32_t *q_pos, const int32_t *k_pos, int Tq, int Tk) {
    cp_layout *l = NULL;
    for (int i = 0; i < g_nlayouts && !l; i++)
        if (g_layouts[i].q_pos == q_pos && g_layouts[i].k_pos == k_pos && g_layouts[i].Tq == Tq &&
            g_layouts[i].Tk == Tk)
            l = &g_layouts[i];
    if (!l) {
        if (g_nlayouts == TR_CP_MAX_LAYOUTS) return NULL;
        int32_t *h = (int32_t *)malloc(((size_t)Tq + Tk) * sizeof(int32_t));
        if (!h) tr_fatal("out of host memory reading the context-parallel positions");
        dev_copy_d2h(s, h, q_pos, (size_t)Tq * sizeof(int32_t));
        dev_copy_d2h(s, h + Tq, k_pos, (size_t)Tk * sizeof(int32_t));
        dev_stream_sync(s);
        l = &g_layouts[g_nlayouts++];
        l->q_pos = q_pos, l->k_pos = k_pos, l->Tq = Tq, l->Tk = Tk;
        l->runs = runs_of(h, h + Tq, Tq, Tk);
        free(h);
    }
    if (l->runs.n == 0) return &l->runs;
    const unsigned n = (unsigned)Tq + (unsigned)Tk;
    k_cp_runs_check<<<(n + 255) / 256, 256, 0, tr_cu_stream(s)>>>(q_pos, k_pos, Tq, Tk, l->runs);
    CU_CHECK_LAUNCH("k_cp_runs_check");
    return &l->runs;
}

/* The cuDNN call of run i: its query rows of q/out/lse (whole-tensor strides), keys 0 .. pos0+len-1. */
tr_cu_sdpa run_sdpa(const cp_runs *r, int i, int B, int Tq, int Tk, int NH, int KV, int D) {
    tr_cu_sdpa a;
    memset(&a, 0, sizeof a);
    a.B = B, a.Tq = r->len[i], a.Tk = r->pos0[i] + r->len[i], a.NH = NH, a.KV = KV, a.D = D;
    a.q_bstride = (int64_t)Tq * NH * D, a.k_bstride = (int64_t)Tk * KV * D;
    a.lse_bstride = (int64_t)NH * Tq, a.lse_hstride = Tq;
    return a;
}

const uint16_t *rows_c(tr_buf b, int row0, int width) { return (const uint16_t *)b.p + (size_t)row0 * width; }
uint16_t *rows(tr_buf b, int row0, int width) { return (uint16_t *)b.p + (size_t)row0 * width; }

} /* namespace */

extern "C" void tr_cu_cudnn_forget(const void *p) {
    for (int i = 0; i < g_nlayouts;)
        if (g_layouts[i].q_pos == p || g_layouts[i].k_pos == p) g_layouts[i] = g_layouts[--g_nlayouts];
        else i++;
}

extern "C" bool tr_cu_cudnn_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                        const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH,
                                        int KV, int D) {
    const cp_runs *r = runs_get(s, q_pos, k_pos, Tq, Tk);
    if (!r || r->n == 0) return false;
    for (int i = 0; i < r->n; i++) {
        tr_cu_sdpa a = run_sdpa(r, i, B, Tq, Tk, NH, KV, D);
        a.q = rows_c(q, r->row0[i], NH * D), a.out = rows(out, r->row0[i], NH * D);
        a.k = k.p, a.v = v.p, a.lse = lse + r->row0[i];
        /* the first run decides for all (same engines): a refusal there writes nothing */
        if (!tr_cu_cudnn_forward(s, &a)) {
            if (i == 0) return false;
            tr_fatal("attention (cuDNN, context parallel): run %d of %d was refused after the first was taken", i,
                     r->n);
        }
    }
    return true;
}

extern "C" bool tr_cu_cudnn_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q,
                                         tr_buf k, tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos,
                                         const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D,
                                         bool deterministic) {
    const cp_runs *r = runs_get(s, q_pos, k_pos, Tq, Tk);
    if (!r || r->n == 0) return false;
    int first = 0; /* the run that sees the most keys writes dk/dv; the others are added to them */
    for (int i = 1; i < r->n; i++)
        if (r->pos0[i] + r->len[i] > r->pos0[first] + r->len[first]) first = i;
    const size_t nk = (size_t)B * Tk * KV * D, bytes = nk * sizeof(uint16_t);
    uint16_t *tk = NULL, *tv = NULL; /* [B,Tk,KV,D]: another run's dK, dV */
    if (r->n > 1) {
        tk = (uint16_t *)tr_cu_scratch(s, bytes, "context-parallel dK of a chunk");
        tv = (uint16_t *)tr_cu_scratch(s, bytes, "context-parallel dV of a chunk");
    }
    bool ok = true;
    for (int n = 0; n < r->n && ok; n++) {
        const int i = n == 0 ? first : (n <= first ? n - 1 : n);
        tr_cu_sdpa a = run_sdpa(r, i, B, Tq, Tk, NH, KV, D);
        a.q = rows_c(q, r->row0[i], NH * D), a.out = rows(out, r->row0[i], NH * D);
        a.dout = rows_c(dout, r->row0[i], NH * D), a.dq = rows(dq, r->row0[i], NH * D);
        a.k = k.p, a.v = v.p, a.lse = (float *)lse + r->row0[i];
        if (n == 0) {
            /* keys past the longest run's are seen by no query: 0 */
            if (a.Tk < Tk) {
                CU_CHECK(cudaMemsetAsync(dk.p, 0, bytes, tr_cu_stream(s)));
                CU_CHECK(cudaMemsetAsync(dv.p, 0, bytes, tr_cu_stream(s)));
            }
            a.dk = dk.p, a.dv = dv.p;
            ok = tr_cu_cudnn_backward(s, &a, deterministic);
            if (!ok) break;
        } else {
            CU_CHECK(cudaMemsetAsync(tk, 0, bytes, tr_cu_stream(s)));
            CU_CHECK(cudaMemsetAsync(tv, 0, bytes, tr_cu_stream(s)));
            a.dk = tk, a.dv = tv;
            if (!tr_cu_cudnn_backward(s, &a, deterministic))
                tr_fatal("attention (cuDNN, context parallel): run %d of %d was refused after the first was taken",
                         i, r->n);
            const tr_buf bk = {tk, TR_BF16}, bv = {tv, TR_BF16};
            kern_add(s, dk, dk, bk, nk);
            kern_add(s, dv, dv, bv, nk);
        }
    }
    tr_cu_scratch_free(s, tv);
    tr_cu_scratch_free(s, tk);
    return ok;
}

#else /* without cuDNN: the flash kernels serve */

extern "C" void tr_cu_cudnn_forget(const void *p) { (void)p; }

extern "C" bool tr_cu_cudnn_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                        const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH,
                                        int KV, int D) {
    (void)s, (void)out, (void)lse, (void)q, (void)k, (void)v, (void)q_pos, (void)k_pos;
    (void)B, (void)Tq, (void)Tk, (void)NH, (void)KV, (void)D;
    return false;
}

extern "C" bool tr_cu_cudnn_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q,
                                         tr_buf k, tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos,
                                         const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D,
                                         bool deterministic) {
    (void)s, (void)dq, (void)dk, (void)dv, (void)dout, (void)q, (void)k, (void)v, (void)out, (void)lse;
    (void)q_pos, (void)k_pos, (void)B, (void)Tq, (void)Tk, (void)NH, (void)KV, (void)D, (void)deterministic;
    return false;
}

#endif
