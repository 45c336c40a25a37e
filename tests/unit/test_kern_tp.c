/* Tensor-parallel pieces: the vocab-slice embedding and the three-pass vocab-parallel cross-entropy.
 * The vocabulary is split into S = 1, 2 and 4 equal slices (Megatron's layout); the all-reduces are
 * emulated on the host (MAX, and an fp32 SUM in rank order as a collective would do) and the
 * composed result is compared with the full-vocabulary kernels: embedding rows and dwte bit for bit
 * (one slice holds each token, the others add exact zeros / skip the row), losses and dlogits within
 * kt_fwd_tol. Then the backward against finite differences of the composed loss, the statistics of
 * slices that do not hold a row's target, in-place backward, bf16 storage and determinism. */
#include "common/fixture_kern.h"

enum { TP_N = 24, TP_C = 12, TP_V = 64 }; /* token rows, hidden, whole (padded) vocabulary */

static const int tp_splits[] = {1, 2, 4};
enum { TP_SPLITS = sizeof tp_splits / sizeof tp_splits[0] };

/* Token/target ids over the whole vocabulary, with repeats and both ends of every slice of 4.
 * ids [N] */
static void tp_ids(kt_rng *r, int32_t *ids, int N, int V) {
    for (int n = 0; n < N; n++) ids[n] = kt_below(r, V);
    const int ends[] = {0, V - 1, V / 4 - 1, V / 4, V / 2 - 1, V / 2, 3 * V / 4};
    for (int i = 0; i < (int)(sizeof ends / sizeof ends[0]) && 2 * i < N; i++) ids[2 * i] = ends[i];
    ids[N - 1] = ids[1]; /* a repeated token */
}

/* ---- embedding ---------------------------------------------------------------------------------- */

static void test_embedding_slices_compose_to_full(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(301);
    const int N = TP_N, C = TP_C, V = TP_V;
    int32_t ids[TP_N];
    tp_ids(&r, ids, N, V);
    float *wte = kt_host((size_t)V * C), *dwte0 = kt_host((size_t)V * C), *dout = kt_host((size_t)N * C);
    kt_fill(&r, wte, (size_t)V * C, 1.0f);
    kt_fill(&r, dwte0, (size_t)V * C, 1.0f);
    kt_fill(&r, dout, (size_t)N * C, 1.0f);
    float *want = kt_host((size_t)N * C), *want_dw = kt_host((size_t)V * C);
    float *got = kt_host((size_t)N * C), *got_dw = kt_host((size_t)V * C), *part = kt_host((size_t)N * C);
    int32_t *d_ids = kt_upload_i32(ids, (size_t)N);
    for (int dti = 0; dti < 2; dti++) {
        const tr_dtype dt = dti ? TR_BF16 : TR_F32;
        tr_buf d_w = kt_upload(wte, (size_t)V * C, dt), d_out = kt_upload(dout, (size_t)N * C, dt);
        tr_buf d_dout = kt_upload(dout, (size_t)N * C, dt), d_dw = kt_upload(dwte0, (size_t)V * C, dt);
        kern_embedding_forward(kt_s, d_out, d_ids, d_w, N, C, V);
        kern_embedding_backward(kt_s, d_dw, d_dout, d_ids, N, C, V);
        kt_download(want, d_out, (size_t)N * C);
        kt_download(want_dw, d_dw, (size_t)V * C);
        kt_free(d_dw.p);
        kt_free(d_w.p);
        for (int si = 0; si < TP_SPLITS; si++) {
            const int S = tp_splits[si], Vs = V / S;
            for (size_t i = 0; i < (size_t)N * C; i++) got[i] = 0.0f;
            for (int rank = 0; rank < S; rank++) {
                const int vs = rank * Vs;
                tr_buf w_s = kt_upload(wte + (size_t)vs * C, (size_t)Vs * C, dt);
                tr_buf dw_s = kt_upload(dwte0 + (size_t)vs * C, (size_t)Vs * C, dt);
                kt_write(d_out, dout, (size_t)N * C); /* stale: rows of other slices must become 0 */
                kern_embedding_forward_slice(kt_s, d_out, d_ids, w_s, vs, N, C, Vs);
                kern_embedding_backward_slice(kt_s, dw_s, d_dout, d_ids, vs, N, C, Vs);
                kt_download(part, d_out, (size_t)N * C);
                for (size_t i = 0; i < (size_t)N * C; i++) got[i] += part[i]; /* the all-reduce SUM */
                kt_download(got_dw + (size_t)vs * C, dw_s, (size_t)Vs * C);
                for (int n = 0; n < N; n++)
                    if (ids[n] < vs || ids[n] >= vs + Vs)
                        for (int c = 0; c < C; c++) assert_true(part[(size_t)n * C + c] == 0.0f);
                kt_free(dw_s.p);
                kt_free(w_s.p);
            }
            printf("  embedding %s, %d slice(s): out and dwte bit-identical to the full vocabulary\n",
                   tr_dtype_name(dt), S);
            assert_memory_equal(got, want, (size_t)N * C * sizeof(float));
            assert_memory_equal(got_dw, want_dw, (size_t)V * C * sizeof(float));
        }
        kt_free(d_dout.p);
        kt_free(d_out.p);
    }
    kt_free(d_ids);
    free(part);
    free(got_dw);
    free(got);
    free(want_dw);
    free(want);
    free(dout);
    free(dwte0);
    free(wte);
}

/* ---- cross-entropy ------------------------------------------------------------------------------ */

typedef struct ce_case {
    int N, V, S;
    tr_dtype dt;
    float *logits;    /* [N,V] the whole vocabulary */
    int32_t *targets; /* [N] */
    float *dloss;     /* [N] */
} ce_case;

typedef struct ce_stats {
    float *row_max, *sum_exp, *target_logit; /* [S][N]: each slice's statistics before the all-reduce */
} ce_stats;

/* The three passes on S slices with host all-reduces; losses [N]; dlogits [N,V] (whole vocabulary,
 * gathered from the slices) when not NULL; per-slice statistics into st when not NULL. in_place runs
 * the backward with dlogits aliasing logits. */
static void ce_run_slices(const ce_case *cc, float *losses, float *dlogits, ce_stats *st, bool in_place) {
    const int N = cc->N, S = cc->S, Vs = cc->V / S;
    float *host = kt_host((size_t)N * Vs), *stat = kt_host((size_t)N);
    float *mx = kt_host((size_t)N), *se = kt_host((size_t)N), *tl = kt_host((size_t)N);
    for (int n = 0; n < N; n++) mx[n] = -INFINITY;
    int32_t *d_t = kt_upload_i32(cc->targets, (size_t)N);
    tr_buf d_l[8];
    float *d_mx = kt_alloc((size_t)N * sizeof(float)), *d_se = kt_alloc((size_t)N * sizeof(float));
    float *d_tl = kt_alloc((size_t)N * sizeof(float));
    assert_true(S <= 8);
    for (int rank = 0; rank < S; rank++) {
        for (int n = 0; n < N; n++)
            memcpy(host + (size_t)n * Vs, cc->logits + (size_t)n * cc->V + (size_t)rank * Vs,
                   (size_t)Vs * sizeof(float));
        d_l[rank] = kt_upload(host, (size_t)N * Vs, cc->dt);
        kern_ce_slice_max(kt_s, d_mx, d_l[rank], N, Vs, Vs);
        kt_download_f32(stat, d_mx, (size_t)N);
        for (int n = 0; n < N; n++) mx[n] = fmaxf(mx[n], stat[n]); /* all-reduce MAX */
        if (st) memcpy(st->row_max + (size_t)rank * N, stat, (size_t)N * sizeof(float));
    }
    float *d_gmx = kt_upload_f32(mx, (size_t)N);
    for (int rank = 0; rank < S; rank++) {
        kern_ce_slice_sums(kt_s, d_se, d_tl, d_l[rank], d_gmx, d_t, rank * Vs, N, Vs, Vs);
        kt_download_f32(stat, d_se, (size_t)N);
        for (int n = 0; n < N; n++) se[n] = rank ? se[n] + stat[n] : stat[n]; /* fp32 SUM in rank order */
        if (st) memcpy(st->sum_exp + (size_t)rank * N, stat, (size_t)N * sizeof(float));
        kt_download_f32(stat, d_tl, (size_t)N);
        for (int n = 0; n < N; n++) tl[n] = rank ? tl[n] + stat[n] : stat[n];
        if (st) memcpy(st->target_logit + (size_t)rank * N, stat, (size_t)N * sizeof(float));
    }
    float *d_gse = kt_upload_f32(se, (size_t)N), *d_gtl = kt_upload_f32(tl, (size_t)N);
    float *d_loss = kt_alloc((size_t)N * sizeof(float));
    kern_ce_loss_from_stats(kt_s, d_loss, d_gmx, d_gse, d_gtl, N);
    kt_download_f32(losses, d_loss, (size_t)N);
    if (dlogits) {
        float *d_dloss = kt_upload_f32(cc->dloss, (size_t)N);
        for (int rank = 0; rank < S; rank++) {
            tr_buf d_dl = in_place ? d_l[rank] : kt_upload(cc->logits, (size_t)N * Vs, cc->dt); /* stale */
            kern_ce_slice_backward(kt_s, d_dl, d_l[rank], d_gmx, d_gse, d_t, rank * Vs, d_dloss, N, Vs, Vs);
            kt_download(host, d_dl, (size_t)N * Vs);
            for (int n = 0; n < N; n++)
                memcpy(dlogits + (size_t)n * cc->V + (size_t)rank * Vs, host + (size_t)n * Vs,
                       (size_t)Vs * sizeof(float));
            if (!in_place) kt_free(d_dl.p);
        }
        kt_free(d_dloss);
    }
    for (int rank = 0; rank < S; rank++) kt_free(d_l[rank].p);
    kt_free(d_loss);
    kt_free(d_gtl);
    kt_free(d_gse);
    kt_free(d_gmx);
    kt_free(d_tl);
    kt_free(d_se);
    kt_free(d_mx);
    kt_free(d_t);
    free(tl);
    free(se);
    free(mx);
    free(stat);
    free(host);
}

/* The full-vocabulary kernels on the same inputs: losses [N], dlogits [N,V]. */
static void ce_run_full(const ce_case *cc, float *losses, float *dlogits) {
    const size_t nl = (size_t)cc->N * cc->V;
    tr_buf d_l = kt_upload(cc->logits, nl, cc->dt);
    int32_t *d_t = kt_upload_i32(cc->targets, (size_t)cc->N);
    float *d_loss = kt_alloc((size_t)cc->N * sizeof(float)), *d_dloss = kt_upload_f32(cc->dloss, (size_t)cc->N);
    kern_cross_entropy_forward(kt_s, d_loss, d_l, d_t, cc->N, cc->V);
    kern_cross_entropy_backward(kt_s, d_l, d_l, d_t, d_dloss, cc->N, cc->V);
    kt_download_f32(losses, d_loss, (size_t)cc->N);
    kt_download(dlogits, d_l, nl);
    kt_free(d_dloss);
    kt_free(d_loss);
    kt_free(d_t);
    kt_free(d_l.p);
}

static ce_case ce_case_make(kt_rng *r, int N, int V, float scale) {
    ce_case cc = {N, V, 1, TR_F32, kt_host((size_t)N * V), NULL, kt_host((size_t)N)};
    cc.targets = calloc((size_t)N, sizeof *cc.targets);
    assert_non_null(cc.targets);
    kt_fill(r, cc.logits, (size_t)N * V, scale);
    tp_ids(r, cc.targets, N, V);
    for (int n = 0; n < N; n++) cc.dloss[n] = (float)(0.5 + kt_uniform(r)); /* mask x normaliser */
    return cc;
}

static void ce_case_free(ce_case *cc) {
    free(cc->dloss);
    free(cc->targets);
    free(cc->logits);
}

static void test_ce_slices_compose_to_full(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(302);
    ce_case cc = ce_case_make(&r, TP_N, TP_V, 4.0f);
    const size_t nl = (size_t)cc.N * cc.V;
    float *want = kt_host((size_t)cc.N), *want_d = kt_host(nl), *got = kt_host((size_t)cc.N), *got_d = kt_host(nl);
    for (int dti = 0; dti < 2; dti++) {
        cc.dt = dti ? TR_BF16 : TR_F32;
        ce_run_full(&cc, want, want_d);
        for (int si = 0; si < TP_SPLITS; si++) {
            cc.S = tp_splits[si];
            for (int in_place = 0; in_place < 2; in_place++) {
                ce_run_slices(&cc, got, got_d, NULL, in_place);
                char what[96];
                snprintf(what, sizeof what, "ce %s %d slice(s)%s losses", tr_dtype_name(cc.dt), cc.S,
                         in_place ? " in place" : "");
                kt_expect_close(what, kt_rel_l2_ff(got, want, (size_t)cc.N), kt_fwd_tol());
                snprintf(what, sizeof what, "ce %s %d slice(s)%s dlogits", tr_dtype_name(cc.dt), cc.S,
                         in_place ? " in place" : "");
                /* bf16 dlogits: both sides round to bf16 (8 bits), so the bound is bf16's. */
                kt_expect_close(what, kt_rel_l2_ff(got_d, want_d, nl), dti ? 1e-2 : kt_fwd_tol());
            }
        }
    }
    free(got_d);
    free(got);
    free(want_d);
    free(want);
    ce_case_free(&cc);
}

/* Every target lies in exactly one slice: the others report target_logit 0 (exactly), the holder
 * the logit itself (exactly); each slice's row_max is its own max and the all-reduced sum_exp is
 * the whole row's. */
static void test_ce_slice_statistics(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(303);
    ce_case cc = ce_case_make(&r, TP_N, TP_V, 4.0f);
    cc.S = 4;
    const int Vs = cc.V / cc.S;
    ce_stats st = {kt_host((size_t)cc.S * cc.N), kt_host((size_t)cc.S * cc.N), kt_host((size_t)cc.S * cc.N)};
    float *losses = kt_host((size_t)cc.N);
    ce_run_slices(&cc, losses, NULL, &st, false);
    double *want_se = kt_host_d((size_t)cc.N), *want_loss = kt_host_d((size_t)cc.N);
    float *got_se = kt_host((size_t)cc.N);
    for (int n = 0; n < cc.N; n++) {
        const float *row = cc.logits + (size_t)n * cc.V;
        float gmx = -INFINITY;
        for (int j = 0; j < cc.V; j++) gmx = fmaxf(gmx, row[j]);
        for (int rank = 0; rank < cc.S; rank++) {
            float smx = -INFINITY;
            for (int j = rank * Vs; j < (rank + 1) * Vs; j++) smx = fmaxf(smx, row[j]);
            assert_true(st.row_max[(size_t)rank * cc.N + n] == smx);
            const bool holds = cc.targets[n] / Vs == rank;
            assert_true(st.target_logit[(size_t)rank * cc.N + n] == (holds ? row[cc.targets[n]] : 0.0f));
        }
        double se = 0.0;
        for (int j = 0; j < cc.V; j++) se += exp((double)row[j] - gmx);
        want_se[n] = se;
        want_loss[n] = log(se) + gmx - row[cc.targets[n]];
        got_se[n] = 0.0f;
        for (int rank = 0; rank < cc.S; rank++) got_se[n] += st.sum_exp[(size_t)rank * cc.N + n];
    }
    kt_expect_close("ce 4 slices: all-reduced sum_exp vs double", kt_rel_l2(got_se, want_se, (size_t)cc.N),
                    kt_fwd_tol());
    kt_expect_close("ce 4 slices: losses vs double", kt_rel_l2(losses, want_loss, (size_t)cc.N), kt_fwd_tol());
    free(got_se);
    free(want_loss);
    free(want_se);
    free(losses);
    free(st.target_logit);
    free(st.sum_exp);
    free(st.row_max);
    ce_case_free(&cc);
}

static double ce_slices_loss(void *ctx) {
    const ce_case *cc = ctx;
    float *losses = kt_host((size_t)cc->N);
    ce_run_slices(cc, losses, NULL, NULL, false);
    const double l = kt_dot(losses, cc->dloss, (size_t)cc->N);
    free(losses);
    return l;
}

/* dlogits from the slices against central differences of L = sum_n dloss[n] * loss[n] computed
 * through the three passes (host all-reduces included). */
static void test_ce_slice_backward_matches_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(304);
    ce_case cc = ce_case_make(&r, 6, 32, 2.0f);
    const size_t nl = (size_t)cc.N * cc.V;
    float *losses = kt_host((size_t)cc.N), *dl = kt_host(nl);
    for (int si = 1; si < TP_SPLITS; si++) {
        cc.S = tp_splits[si];
        ce_run_slices(&cc, losses, dl, NULL, false);
        char what[64];
        snprintf(what, sizeof what, "ce %d slices dlogits", cc.S);
        /* Smooth in the logits; h = 1e-2 leaves O(h^2) ~ 1e-5 truncation. */
        kt_fd_check(what, cc.logits, nl, dl, ce_slices_loss, &cc, 1e-2, nl, 1e-3, &r);
    }
    free(dl);
    free(losses);
    ce_case_free(&cc);
}

static void test_tp_kernels_are_deterministic(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(305);
    ce_case cc = ce_case_make(&r, TP_N, TP_V, 4.0f);
    cc.S = 2;
    const size_t nl = (size_t)cc.N * cc.V;
    float *l1 = kt_host((size_t)cc.N), *l2 = kt_host((size_t)cc.N), *d1 = kt_host(nl), *d2 = kt_host(nl);
    ce_run_slices(&cc, l1, d1, NULL, false);
    ce_run_slices(&cc, l2, d2, NULL, false);
    assert_memory_equal(l1, l2, (size_t)cc.N * sizeof(float));
    assert_memory_equal(d1, d2, nl * sizeof(float));

    const int N = TP_N, C = TP_C, Vs = TP_V / 2, vs = Vs;
    float *w = kt_host((size_t)Vs * C), *o1 = kt_host((size_t)N * C), *o2 = kt_host((size_t)N * C);
    float *g1 = kt_host((size_t)Vs * C), *g2 = kt_host((size_t)Vs * C), *dout = kt_host((size_t)N * C);
    kt_fill(&r, w, (size_t)Vs * C, 1.0f);
    kt_fill(&r, dout, (size_t)N * C, 1.0f);
    int32_t *d_ids = kt_upload_i32(cc.targets, (size_t)N);
    for (int run = 0; run < 2; run++) {
        tr_buf d_w = kt_upload(w, (size_t)Vs * C, TR_F32), d_dw = kt_upload(w, (size_t)Vs * C, TR_F32);
        tr_buf d_o = kt_upload(dout, (size_t)N * C, TR_F32), d_do = kt_upload(dout, (size_t)N * C, TR_F32);
        kern_embedding_forward_slice(kt_s, d_o, d_ids, d_w, vs, N, C, Vs);
        kern_embedding_backward_slice(kt_s, d_dw, d_do, d_ids, vs, N, C, Vs);
        kt_download(run ? o2 : o1, d_o, (size_t)N * C);
        kt_download(run ? g2 : g1, d_dw, (size_t)Vs * C);
        kt_free(d_do.p);
        kt_free(d_o.p);
        kt_free(d_dw.p);
        kt_free(d_w.p);
    }
    assert_memory_equal(o1, o2, (size_t)N * C * sizeof(float));
    assert_memory_equal(g1, g2, (size_t)Vs * C * sizeof(float));
    kt_free(d_ids);
    free(dout);
    free(g2);
    free(g1);
    free(o2);
    free(o1);
    free(w);
    free(d2);
    free(d1);
    free(l2);
    free(l1);
    ce_case_free(&cc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_slices_compose_to_full),
        cmocka_unit_test(test_ce_slices_compose_to_full),
        cmocka_unit_test(test_ce_slice_statistics),
        cmocka_unit_test(test_ce_slice_backward_matches_finite_differences),
        cmocka_unit_test(test_tp_kernels_are_deterministic),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
