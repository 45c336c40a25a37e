/* Context-parallel attention: kern_attention_forward_pos / _backward_pos.
 * - positions 0..T-1 reproduce kern_attention_forward/backward (bit for bit on the twin, where the
 *   causal kernels are this special case; within kt_fwd_tol elsewhere);
 * - Megatron's split (the sequence in 2*CP chunks, CP rank r holds chunks r and 2*CP-1-r, keys
 *   all-gathered in natural order) for CP = 2 and 4: out, lse and dq rows of the ranks are the full
 *   attention's rows; the ranks' dk/dv summed (the reduce-scatter) are the full dk/dv; keys no query
 *   of a rank sees get exactly 0 from it;
 * - arbitrary (unsorted) positions against a naive double reference with an explicit mask, and
 *   dq/dk/dv against finite differences;
 * - determinism. */
#include "common/fixture_kern.h"

typedef struct pos_case {
    int B, Tq, Tk, NH, KV, D;
    tr_dtype dt;
    float *q;     /* [B,Tq,NH,D] */
    float *k, *v; /* [B,Tk,KV,D] */
    float *w;     /* [B,Tq,NH,D] loss weights = dout */
    int32_t *qp;  /* [Tq] */
    int32_t *kp;  /* [Tk] */
} pos_case;

typedef struct pos_out {
    float *out, *lse, *dq, *dk, *dv; /* [B,Tq,NH,D], [B,NH,Tq], [B,Tq,NH,D], [B,Tk,KV,D] x2 */
} pos_out;

static size_t nq(const pos_case *pc) { return (size_t)pc->B * pc->Tq * pc->NH * pc->D; }
static size_t nkv(const pos_case *pc) { return (size_t)pc->B * pc->Tk * pc->KV * pc->D; }
static size_t nlse(const pos_case *pc) { return (size_t)pc->B * pc->NH * pc->Tq; }

static pos_case pos_case_make(kt_rng *r, int B, int Tq, int Tk, int NH, int KV, int D) {
    pos_case pc = {B, Tq, Tk, NH, KV, D, TR_F32, NULL, NULL, NULL, NULL, NULL, NULL};
    pc.q = kt_host(nq(&pc));
    pc.k = kt_host(nkv(&pc));
    pc.v = kt_host(nkv(&pc));
    pc.w = kt_host(nq(&pc));
    pc.qp = calloc((size_t)Tq, sizeof *pc.qp);
    pc.kp = calloc((size_t)Tk, sizeof *pc.kp);
    assert_non_null(pc.qp);
    assert_non_null(pc.kp);
    kt_fill(r, pc.q, nq(&pc), 1.5f);
    kt_fill(r, pc.k, nkv(&pc), 1.5f);
    kt_fill(r, pc.v, nkv(&pc), 1.0f);
    kt_fill(r, pc.w, nq(&pc), 1.0f);
    for (int i = 0; i < Tq; i++) pc.qp[i] = i;
    for (int j = 0; j < Tk; j++) pc.kp[j] = j;
    return pc;
}

static void pos_case_free(pos_case *pc) {
    free(pc->kp);
    free(pc->qp);
    free(pc->w);
    free(pc->v);
    free(pc->k);
    free(pc->q);
}

static pos_out pos_out_make(const pos_case *pc) {
    pos_out o = {kt_host(nq(pc)), kt_host(nlse(pc)), kt_host(nq(pc)), kt_host(nkv(pc)), kt_host(nkv(pc))};
    return o;
}

static void pos_out_free(pos_out *o) {
    free(o->out);
    free(o->lse);
    free(o->dq);
    free(o->dk);
    free(o->dv);
}

/* Forward and, when grads, the backward with dout = w; causal selects kern_attention_forward/backward
 * (then Tq == Tk and the positions are ignored). Every output buffer starts stale. */
static void pos_run(const pos_case *pc, pos_out *o, bool grads, bool causal) {
    tr_buf q = kt_upload(pc->q, nq(pc), pc->dt), k = kt_upload(pc->k, nkv(pc), pc->dt);
    tr_buf v = kt_upload(pc->v, nkv(pc), pc->dt), out = kt_upload(pc->w, nq(pc), pc->dt);
    int32_t *qp = kt_upload_i32(pc->qp, (size_t)pc->Tq), *kp = kt_upload_i32(pc->kp, (size_t)pc->Tk);
    float *lse = kt_alloc(nlse(pc) * sizeof(float));
    if (causal) kern_attention_forward(kt_s, out, lse, q, k, v, pc->B, pc->Tq, pc->NH, pc->KV, pc->D);
    else kern_attention_forward_pos(kt_s, out, lse, q, k, v, qp, kp, pc->B, pc->Tq, pc->Tk, pc->NH, pc->KV, pc->D);
    kt_download(o->out, out, nq(pc));
    kt_download_f32(o->lse, lse, nlse(pc));
    if (grads) {
        tr_buf dout = kt_upload(pc->w, nq(pc), pc->dt), dq = kt_upload(pc->w, nq(pc), pc->dt);
        tr_buf dk = kt_upload(pc->k, nkv(pc), pc->dt), dv = kt_upload(pc->v, nkv(pc), pc->dt);
        if (causal)
            kern_attention_backward(kt_s, dq, dk, dv, dout, q, k, v, out, lse, pc->B, pc->Tq, pc->NH, pc->KV, pc->D);
        else
            kern_attention_backward_pos(kt_s, dq, dk, dv, dout, q, k, v, out, lse, qp, kp, pc->B, pc->Tq, pc->Tk,
                                        pc->NH, pc->KV, pc->D);
        kt_download(o->dq, dq, nq(pc));
        kt_download(o->dk, dk, nkv(pc));
        kt_download(o->dv, dv, nkv(pc));
        kt_free(dv.p);
        kt_free(dk.p);
        kt_free(dq.p);
        kt_free(dout.p);
    }
    kt_free(lse);
    kt_free(kp);
    kt_free(qp);
    kt_free(out.p);
    kt_free(v.p);
    kt_free(k.p);
    kt_free(q.p);
}

static void expect_same(const char *what, const float *got, const float *want, size_t n, bool bits) {
    if (bits) {
        printf("  %-46s bit-identical\n", what);
        assert_memory_equal(got, want, n * sizeof(float));
    } else {
        kt_expect_close(what, kt_rel_l2_ff(got, want, n), kt_fwd_tol());
    }
}

/* B, T, NH, KV, D: GQA 4 per group, MHA, MQA. */
static const int pos_configs[][5] = {{2, 16, 8, 2, 4}, {1, 8, 3, 3, 8}, {1, 12, 4, 1, 4}};
enum { POS_CONFIGS = sizeof pos_configs / sizeof pos_configs[0] };

static void test_natural_positions_equal_causal_attention(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(401);
    const bool bits = kt_backend_is_twin(); /* the twin's causal kernel is this call */
    for (int ci = 0; ci < POS_CONFIGS; ci++) {
        const int *c = pos_configs[ci];
        pos_case pc = pos_case_make(&r, c[0], c[1], c[1], c[2], c[3], c[4]);
        for (int dti = 0; dti < 2; dti++) {
            pc.dt = dti ? TR_BF16 : TR_F32;
            pos_out a = pos_out_make(&pc), b = pos_out_make(&pc);
            pos_run(&pc, &a, true, false);
            pos_run(&pc, &b, true, true);
            char what[96];
            const char *nm[] = {"out", "lse", "dq", "dk", "dv"};
            const float *ga[] = {a.out, a.lse, a.dq, a.dk, a.dv}, *gb[] = {b.out, b.lse, b.dq, b.dk, b.dv};
            const size_t ns[] = {nq(&pc), nlse(&pc), nq(&pc), nkv(&pc), nkv(&pc)};
            for (int i = 0; i < 5; i++) {
                snprintf(what, sizeof what, "pos 0..T-1 vs causal T%d NH%d KV%d %s %s", pc.Tq, pc.NH, pc.KV,
                         tr_dtype_name(pc.dt), nm[i]);
                /* bf16 outputs elsewhere: one bf16 rounding apart at most */
                if (!bits && dti) kt_expect_close(what, kt_rel_l2_ff(ga[i], gb[i], ns[i]), 1e-2);
                else expect_same(what, ga[i], gb[i], ns[i], bits);
            }
            pos_out_free(&b);
            pos_out_free(&a);
        }
        pos_case_free(&pc);
    }
}

/* Rows of x [B,T,H,D] at the positions pos[Tsub] into dst [B,Tsub,H,D]. */
static void gather_rows(float *dst, const float *x, const int32_t *pos, int B, int T, int Tsub, int HD) {
    for (int b = 0; b < B; b++)
        for (int i = 0; i < Tsub; i++)
            memcpy(dst + ((size_t)b * Tsub + i) * HD, x + ((size_t)b * T + pos[i]) * HD, (size_t)HD * sizeof(float));
}

/* Megatron's CP layout for rank r of cp: chunks r and 2cp-1-r of T/(2cp) positions. pos [T/cp] */
static void cp_positions(int32_t *pos, int T, int cp, int rank) {
    const int chunk = T / (2 * cp);
    for (int i = 0; i < chunk; i++) {
        pos[i] = rank * chunk + i;
        pos[chunk + i] = (2 * cp - 1 - rank) * chunk + i;
    }
}

static void test_context_parallel_split_composes_to_full(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(402);
    const int B = 2, T = 16, NH = 4, KV = 2, D = 8;
    pos_case full = pos_case_make(&r, B, T, T, NH, KV, D);
    pos_out fo = pos_out_make(&full);
    pos_run(&full, &fo, true, true);
    const bool bits = kt_backend_is_twin(); /* a query's row depends only on its own visible keys */
    const int cps[] = {2, 4};
    for (int ci = 0; ci < 2; ci++) {
        const int cp = cps[ci], Tq = T / cp;
        double *dk_sum = kt_host_d(nkv(&full)), *dv_sum = kt_host_d(nkv(&full));
        for (int rank = 0; rank < cp; rank++) {
            pos_case pc = full; /* shares k, v and k_pos (0..T-1): the all-gathered keys */
            pc.Tq = Tq;
            pc.qp = calloc((size_t)Tq, sizeof *pc.qp);
            assert_non_null(pc.qp);
            cp_positions(pc.qp, T, cp, rank);
            pc.q = kt_host(nq(&pc));
            pc.w = kt_host(nq(&pc));
            gather_rows(pc.q, full.q, pc.qp, B, T, Tq, NH * D);
            gather_rows(pc.w, full.w, pc.qp, B, T, Tq, NH * D);
            pos_out o = pos_out_make(&pc);
            pos_run(&pc, &o, true, false);
            float *want = kt_host(nq(&pc)), *want_lse = kt_host(nlse(&pc));
            char what[96];
            gather_rows(want, fo.out, pc.qp, B, T, Tq, NH * D);
            snprintf(what, sizeof what, "CP%d rank %d out rows", cp, rank);
            expect_same(what, o.out, want, nq(&pc), bits);
            gather_rows(want, fo.dq, pc.qp, B, T, Tq, NH * D);
            snprintf(what, sizeof what, "CP%d rank %d dq rows", cp, rank);
            expect_same(what, o.dq, want, nq(&pc), bits);
            gather_rows(want_lse, fo.lse, pc.qp, B * NH, T, Tq, 1); /* lse [B,NH,T]: rows of width 1 */
            snprintf(what, sizeof what, "CP%d rank %d lse", cp, rank);
            expect_same(what, o.lse, want_lse, nlse(&pc), bits);
            /* Keys past this rank's last query are seen by none of its queries: exactly 0. */
            int32_t last = 0;
            for (int i = 0; i < Tq; i++) last = pc.qp[i] > last ? pc.qp[i] : last;
            for (int b = 0; b < B; b++)
                for (int j = last + 1; j < T; j++)
                    for (int x = 0; x < KV * D; x++) {
                        assert_true(o.dk[((size_t)b * T + j) * KV * D + x] == 0.0f);
                        assert_true(o.dv[((size_t)b * T + j) * KV * D + x] == 0.0f);
                    }
            for (size_t i = 0; i < nkv(&full); i++) {
                dk_sum[i] += o.dk[i]; /* the reduce-scatter's sum (in double: the test's reference) */
                dv_sum[i] += o.dv[i];
            }
            free(want_lse);
            free(want);
            pos_out_free(&o);
            free(pc.w);
            free(pc.q);
            free(pc.qp);
        }
        char what[96];
        snprintf(what, sizeof what, "CP%d sum of ranks' dk vs full dk", cp);
        kt_expect_close(what, kt_rel_l2(fo.dk, dk_sum, nkv(&full)), kt_fwd_tol());
        snprintf(what, sizeof what, "CP%d sum of ranks' dv vs full dv", cp);
        kt_expect_close(what, kt_rel_l2(fo.dv, dv_sum, nkv(&full)), kt_fwd_tol());
        free(dv_sum);
        free(dk_sum);
    }
    pos_out_free(&fo);
    pos_case_free(&full);
}

/* Naive double attention with an explicit visibility mask: out [B,Tq,NH,D], lse [B,NH,Tq]. */
static void pos_reference(const pos_case *pc, double *out, double *lse) {
    const int Tq = pc->Tq, Tk = pc->Tk, D = pc->D, group = pc->NH / pc->KV;
    double *s = kt_host_d((size_t)Tk);
    for (int b = 0; b < pc->B; b++)
        for (int h = 0; h < pc->NH; h++) {
            const int g = h / group;
            for (int i = 0; i < Tq; i++) {
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < Tk; j++) {
                    double dot = 0.0;
                    for (int d = 0; d < D; d++)
                        dot += (double)pc->q[(((size_t)b * Tq + i) * pc->NH + h) * D + d] *
                               pc->k[(((size_t)b * Tk + j) * pc->KV + g) * D + d];
                    s[j] = pc->kp[j] <= pc->qp[i] ? dot / sqrt((double)D) : -INFINITY;
                    mx = fmax(mx, s[j]);
                }
                for (int j = 0; j < Tk; j++) sum += exp(s[j] - mx);
                lse[((size_t)b * pc->NH + h) * Tq + i] = mx + log(sum);
                for (int d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int j = 0; j < Tk; j++)
                        acc += exp(s[j] - mx) / sum * pc->v[(((size_t)b * Tk + j) * pc->KV + g) * D + d];
                    out[(((size_t)b * Tq + i) * pc->NH + h) * D + d] = acc;
                }
            }
        }
    free(s);
}

/* Unsorted positions, a query at the first key position (one key), fewer queries than keys. */
static pos_case scrambled_case(kt_rng *r) {
    pos_case pc = pos_case_make(r, 2, 5, 8, 4, 2, 4);
    const int32_t qp[5] = {5, 2, 7, 0, 3}, kp[8] = {3, 0, 6, 1, 7, 2, 5, 4};
    memcpy(pc.qp, qp, sizeof qp);
    memcpy(pc.kp, kp, sizeof kp);
    return pc;
}

static void test_scrambled_positions_match_reference(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(403);
    pos_case pc = scrambled_case(&r);
    pos_out o = pos_out_make(&pc);
    pos_run(&pc, &o, false, false);
    double *want = kt_host_d(nq(&pc)), *want_lse = kt_host_d(nlse(&pc));
    pos_reference(&pc, want, want_lse);
    kt_expect_close("scrambled positions out vs double", kt_rel_l2(o.out, want, nq(&pc)), kt_fwd_tol());
    kt_expect_close("scrambled positions lse vs double", kt_rel_l2(o.lse, want_lse, nlse(&pc)), kt_fwd_tol());
    free(want_lse);
    free(want);
    pos_out_free(&o);
    pos_case_free(&pc);
}

static double pos_loss(void *ctx) {
    const pos_case *pc = ctx;
    pos_out o = pos_out_make(pc);
    pos_run(pc, &o, false, false);
    const double l = kt_dot(o.out, pc->w, nq(pc));
    pos_out_free(&o);
    return l;
}

static void test_pos_gradients_match_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(404);
    pos_case cases[2] = {scrambled_case(&r), pos_case_make(&r, 1, 4, 8, 2, 1, 4)};
    cp_positions(cases[1].qp, 8, 2, 1); /* CP2 rank 1: positions 2, 3, 4, 5 */
    for (int ci = 0; ci < 2; ci++) {
        pos_case *pc = &cases[ci];
        pos_out o = pos_out_make(pc);
        pos_run(pc, &o, true, false);
        const char *nm = ci ? "CP2 rank 1" : "scrambled";
        char what[96];
        snprintf(what, sizeof what, "attention_pos %s dq", nm);
        kt_fd_check(what, pc->q, nq(pc), o.dq, pos_loss, pc, 1e-2, 400, 1e-3, &r);
        snprintf(what, sizeof what, "attention_pos %s dk", nm);
        kt_fd_check(what, pc->k, nkv(pc), o.dk, pos_loss, pc, 1e-2, 400, 1e-3, &r);
        snprintf(what, sizeof what, "attention_pos %s dv", nm);
        kt_fd_check(what, pc->v, nkv(pc), o.dv, pos_loss, pc, 1e-2, 400, 1e-3, &r);
        pos_out_free(&o);
        pos_case_free(pc);
    }
}

static void test_pos_is_deterministic(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(405);
    pos_case pc = scrambled_case(&r);
    for (int dti = 0; dti < 2; dti++) {
        pc.dt = dti ? TR_BF16 : TR_F32;
        pos_out a = pos_out_make(&pc), b = pos_out_make(&pc);
        pos_run(&pc, &a, true, false);
        pos_run(&pc, &b, true, false);
        assert_memory_equal(a.out, b.out, nq(&pc) * sizeof(float));
        assert_memory_equal(a.lse, b.lse, nlse(&pc) * sizeof(float));
        assert_memory_equal(a.dq, b.dq, nq(&pc) * sizeof(float));
        assert_memory_equal(a.dk, b.dk, nkv(&pc) * sizeof(float));
        assert_memory_equal(a.dv, b.dv, nkv(&pc) * sizeof(float));
        pos_out_free(&b);
        pos_out_free(&a);
    }
    pos_case_free(&pc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_natural_positions_equal_causal_attention),
        cmocka_unit_test(test_context_parallel_split_composes_to_full),
        cmocka_unit_test(test_scrambled_positions_match_reference),
        cmocka_unit_test(test_pos_gradients_match_finite_differences),
        cmocka_unit_test(test_pos_is_deterministic),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
