/* kern_attention_forward/backward: causal GQA against a naive double softmax attention with an
 * explicit mask (out and lse), dq/dk/dv against finite differences for NH/KV = 4, 1 and NH (one
 * shared group), determinism and bf16 storage. */
#include "common/fixture_kern.h"

typedef struct attn_case {
    int B, T, NH, KV, D;
    tr_dtype dt;
    float *q; /* [B,T,NH,D] */
    float *k; /* [B,T,KV,D] */
    float *v; /* [B,T,KV,D] */
    float *w; /* [B,T,NH,D] loss weights */
} attn_case;

typedef struct attn_grads {
    float *dq, *dk, *dv;
} attn_grads;

static size_t nq(const attn_case *ac) { return (size_t)ac->B * ac->T * ac->NH * ac->D; }
static size_t nkv(const attn_case *ac) { return (size_t)ac->B * ac->T * ac->KV * ac->D; }
static size_t nlse(const attn_case *ac) { return (size_t)ac->B * ac->NH * ac->T; }

static attn_case attn_case_make(kt_rng *r, int B, int T, int NH, int KV, int D) {
    attn_case ac = {B, T, NH, KV, D, TR_F32, NULL, NULL, NULL, NULL};
    ac.q = kt_host(nq(&ac));
    ac.k = kt_host(nkv(&ac));
    ac.v = kt_host(nkv(&ac));
    ac.w = kt_host(nq(&ac));
    /* Scores of a few units: peaked but not one-hot softmax rows. */
    kt_fill(r, ac.q, nq(&ac), 1.5f);
    kt_fill(r, ac.k, nkv(&ac), 1.5f);
    kt_fill(r, ac.v, nkv(&ac), 1.0f);
    kt_fill(r, ac.w, nq(&ac), 1.0f);
    return ac;
}

static void attn_case_free(attn_case *ac) {
    free(ac->q);
    free(ac->k);
    free(ac->v);
    free(ac->w);
}

static attn_grads attn_grads_make(const attn_case *ac) {
    attn_grads g = {kt_host(nq(ac)), kt_host(nkv(ac)), kt_host(nkv(ac))};
    return g;
}

static void attn_grads_free(attn_grads *g) {
    free(g->dq);
    free(g->dk);
    free(g->dv);
}

/* Forward (out [B,T,NH,D], lse [B,NH,T]) and, when g != NULL, the backward with dout = w. */
static void attn_run(const attn_case *ac, float *out, float *lse, attn_grads *g) {
    tr_buf q = kt_upload(ac->q, nq(ac), ac->dt), k = kt_upload(ac->k, nkv(ac), ac->dt);
    tr_buf v = kt_upload(ac->v, nkv(ac), ac->dt), o = kt_upload(ac->w, nq(ac), ac->dt); /* stale o */
    float *l = kt_alloc(nlse(ac) * sizeof(float));
    kern_attention_forward(kt_s, o, l, q, k, v, ac->B, ac->T, ac->NH, ac->KV, ac->D);
    kt_download(out, o, nq(ac));
    kt_download_f32(lse, l, nlse(ac));
    if (g) {
        tr_buf dout = kt_upload(ac->w, nq(ac), ac->dt);
        /* Stale gradient buffers: the backward overwrites. */
        tr_buf dq = kt_upload(ac->w, nq(ac), ac->dt), dk = kt_upload(ac->k, nkv(ac), ac->dt);
        tr_buf dv = kt_upload(ac->v, nkv(ac), ac->dt);
        kern_attention_backward(kt_s, dq, dk, dv, dout, q, k, v, o, l, ac->B, ac->T, ac->NH, ac->KV, ac->D);
        kt_download(g->dq, dq, nq(ac));
        kt_download(g->dk, dk, nkv(ac));
        kt_download(g->dv, dv, nkv(ac));
        kt_free(dv.p);
        kt_free(dk.p);
        kt_free(dq.p);
        kt_free(dout.p);
    }
    kt_free(l);
    kt_free(o.p);
    kt_free(v.p);
    kt_free(k.p);
    kt_free(q.p);
}

/* Naive attention: a full [T,T] score matrix with -inf above the diagonal, softmax, P @ V. */
static void attn_reference(const attn_case *ac, double *out, double *lse) {
    const int T = ac->T, D = ac->D, group = ac->NH / ac->KV;
    double *s = kt_host_d((size_t)T * T);
    for (int b = 0; b < ac->B; b++)
        for (int h = 0; h < ac->NH; h++) {
            const int g = h / group;
            for (int t = 0; t < T; t++)
                for (int j = 0; j < T; j++) {
                    double dot = 0.0;
                    for (int d = 0; d < D; d++)
                        dot += (double)ac->q[(((size_t)b * T + t) * ac->NH + h) * D + d] *
                               ac->k[(((size_t)b * T + j) * ac->KV + g) * D + d];
                    s[t * T + j] = j <= t ? dot / sqrt((double)D) : -INFINITY;
                }
            for (int t = 0; t < T; t++) {
                double mx = -INFINITY, sum = 0.0;
                for (int j = 0; j < T; j++) mx = fmax(mx, s[t * T + j]);
                for (int j = 0; j < T; j++) sum += exp(s[t * T + j] - mx);
                lse[((size_t)b * ac->NH + h) * T + t] = mx + log(sum);
                for (int d = 0; d < D; d++) {
                    double acc = 0.0;
                    for (int j = 0; j < T; j++)
                        acc += exp(s[t * T + j] - mx) / sum * ac->v[(((size_t)b * T + j) * ac->KV + g) * D + d];
                    out[(((size_t)b * T + t) * ac->NH + h) * D + d] = acc;
                }
            }
        }
    free(s);
}

static double attn_loss(void *ctx) {
    const attn_case *ac = ctx;
    float *out = kt_host(nq(ac)), *lse = kt_host(nlse(ac));
    attn_run(ac, out, lse, NULL);
    const double l = kt_dot(out, ac->w, nq(ac));
    free(lse);
    free(out);
    return l;
}

/* B, T, NH, KV, D: GQA with 4 heads per group, plain MHA (1 per group), and MQA (one group). */
static const int attn_configs[][5] = {{2, 6, 8, 2, 4}, {1, 5, 3, 3, 8}, {1, 7, 4, 1, 4}};
enum { ATTN_CONFIGS = sizeof attn_configs / sizeof attn_configs[0] };

static attn_case attn_config(kt_rng *r, int ci) {
    const int *c = attn_configs[ci];
    return attn_case_make(r, c[0], c[1], c[2], c[3], c[4]);
}

static void attn_label(char *buf, size_t len, const char *what, const attn_case *ac) {
    snprintf(buf, len, "attention %s B%d T%d NH%d KV%d D%d", what, ac->B, ac->T, ac->NH, ac->KV, ac->D);
}

static void test_attention_forward_matches_reference(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(61);
    for (int ci = 0; ci < ATTN_CONFIGS; ci++) {
        attn_case ac = attn_config(&r, ci);
        float *out = kt_host(nq(&ac)), *lse = kt_host(nlse(&ac));
        double *want = kt_host_d(nq(&ac)), *want_lse = kt_host_d(nlse(&ac));
        attn_run(&ac, out, lse, NULL);
        attn_reference(&ac, want, want_lse);
        char what[96];
        attn_label(what, sizeof what, "out", &ac);
        kt_expect_close(what, kt_rel_l2(out, want, nq(&ac)), kt_fwd_tol());
        attn_label(what, sizeof what, "lse", &ac);
        kt_expect_close(what, kt_rel_l2(lse, want_lse, nlse(&ac)), kt_fwd_tol());
        free(want_lse);
        free(want);
        free(lse);
        free(out);
        attn_case_free(&ac);
    }
}

static void test_attention_gradients_match_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(62);
    for (int ci = 0; ci < ATTN_CONFIGS; ci++) {
        attn_case ac = attn_config(&r, ci);
        float *out = kt_host(nq(&ac)), *lse = kt_host(nlse(&ac));
        attn_grads g = attn_grads_make(&ac);
        attn_run(&ac, out, lse, &g);
        char what[96];
        /* Smooth (softmax of bilinear scores); h = 1e-2 gives O(h^2) truncation, measured ~1e-5. */
        attn_label(what, sizeof what, "dq", &ac);
        kt_fd_check(what, ac.q, nq(&ac), g.dq, attn_loss, &ac, 1e-2, 400, 1e-3, &r);
        attn_label(what, sizeof what, "dk", &ac);
        kt_fd_check(what, ac.k, nkv(&ac), g.dk, attn_loss, &ac, 1e-2, 400, 1e-3, &r);
        attn_label(what, sizeof what, "dv", &ac);
        kt_fd_check(what, ac.v, nkv(&ac), g.dv, attn_loss, &ac, 1e-2, 400, 1e-3, &r);
        attn_grads_free(&g);
        free(lse);
        free(out);
        attn_case_free(&ac);
    }
}

static void test_attention_is_deterministic_and_bf16_tracks_fp32(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(63);
    for (int ci = 0; ci < ATTN_CONFIGS; ci++) {
        attn_case ac = attn_config(&r, ci);
        float *o1 = kt_host(nq(&ac)), *o2 = kt_host(nq(&ac)), *l1 = kt_host(nlse(&ac)), *l2 = kt_host(nlse(&ac));
        attn_grads g1 = attn_grads_make(&ac), g2 = attn_grads_make(&ac);
        for (int dti = 0; dti < 2; dti++) {
            ac.dt = dti ? TR_BF16 : TR_F32;
            attn_run(&ac, o1, l1, &g1);
            attn_run(&ac, o2, l2, &g2);
            assert_memory_equal(o1, o2, nq(&ac) * sizeof(float));
            assert_memory_equal(l1, l2, nlse(&ac) * sizeof(float));
            assert_memory_equal(g1.dq, g2.dq, nq(&ac) * sizeof(float));
            assert_memory_equal(g1.dk, g2.dk, nkv(&ac) * sizeof(float));
            assert_memory_equal(g1.dv, g2.dv, nkv(&ac) * sizeof(float));
        }
        /* o1 is the bf16 run now; redo fp32 into o2. */
        ac.dt = TR_F32;
        attn_run(&ac, o2, l2, NULL);
        kt_expect_close("attention bf16 vs fp32 out", kt_rel_l2_ff(o1, o2, nq(&ac)), 1e-2);
        attn_grads_free(&g2);
        attn_grads_free(&g1);
        free(l2);
        free(l1);
        free(o2);
        free(o1);
        attn_case_free(&ac);
    }
}

/* Double-precision dq, dk, dv of sum(out * w) for the causal case (P = softmax, dP = w V^T,
 * dS = P (dP - rowsum(P dP))). */
static void attn_reference_grads(const attn_case *ac, double *dq, double *dk, double *dv) {
    const int T = ac->T, D = ac->D, group = ac->NH / ac->KV;
    const double scale = 1.0 / sqrt((double)D);
    double *p = kt_host_d((size_t)T), *dp = kt_host_d((size_t)T);
    memset(dk, 0, nkv(ac) * sizeof *dk);
    memset(dv, 0, nkv(ac) * sizeof *dv);
    for (int b = 0; b < ac->B; b++)
        for (int h = 0; h < ac->NH; h++) {
            const int g = h / group;
            for (int t = 0; t < T; t++) {
                const size_t qo = (((size_t)b * T + t) * ac->NH + h) * D;
                double mx = -INFINITY, sum = 0.0, dl = 0.0;
                for (int j = 0; j <= t; j++) {
                    const size_t ko = (((size_t)b * T + j) * ac->KV + g) * D;
                    double dot = 0.0, dw = 0.0;
                    for (int d = 0; d < D; d++) dot += (double)ac->q[qo + d] * ac->k[ko + d];
                    for (int d = 0; d < D; d++) dw += (double)ac->w[qo + d] * ac->v[ko + d];
                    p[j] = dot * scale;
                    dp[j] = dw;
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j <= t; j++) sum += exp(p[j] - mx);
                for (int j = 0; j <= t; j++) p[j] = exp(p[j] - mx) / sum, dl += p[j] * dp[j];
                for (int d = 0; d < D; d++) dq[qo + d] = 0.0;
                for (int j = 0; j <= t; j++) {
                    const size_t ko = (((size_t)b * T + j) * ac->KV + g) * D;
                    const double ds = p[j] * (dp[j] - dl);
                    for (int d = 0; d < D; d++) {
                        dq[qo + d] += ds * ac->k[ko + d] * scale;
                        dk[ko + d] += ds * ac->q[qo + d] * scale;
                        dv[ko + d] += p[j] * ac->w[qo + d];
                    }
                }
            }
        }
    free(dp);
    free(p);
}

/* bf16 at the head dims of real models (64, 128) and lengths that cross 64-row tiles: the shapes
 * the CUDA backend serves with its tensor-core (flash) kernels. Inputs are rounded to bf16 first,
 * so the double reference sees exactly what the kernel sees; the bound is bf16's. */
static void test_attention_bf16_model_shapes_match_reference(void **state) {
    (void)state;
    static const int cfgs[][5] = {{1, 70, 4, 2, 64}, {2, 65, 2, 1, 128}, {1, 129, 4, 1, 64}};
    kt_rng r = kt_rng_make(64);
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        attn_case ac = attn_case_make(&r, cfgs[ci][0], cfgs[ci][1], cfgs[ci][2], cfgs[ci][3], cfgs[ci][4]);
        ac.dt = TR_BF16;
        float *arrs[] = {ac.q, ac.k, ac.v, ac.w};
        const size_t lens[] = {nq(&ac), nkv(&ac), nkv(&ac), nq(&ac)};
        for (int a = 0; a < 4; a++)
            for (size_t i = 0; i < lens[a]; i++) arrs[a][i] = tr_bf16_to_f32(tr_f32_to_bf16(arrs[a][i]));
        float *out = kt_host(nq(&ac)), *lse = kt_host(nlse(&ac));
        attn_grads g = attn_grads_make(&ac);
        attn_run(&ac, out, lse, &g);
        double *want = kt_host_d(nq(&ac)), *want_lse = kt_host_d(nlse(&ac));
        double *wdq = kt_host_d(nq(&ac)), *wdk = kt_host_d(nkv(&ac)), *wdv = kt_host_d(nkv(&ac));
        attn_reference(&ac, want, want_lse);
        attn_reference_grads(&ac, wdq, wdk, wdv);
        char what[96];
        attn_label(what, sizeof what, "bf16 out", &ac);
        kt_expect_close(what, kt_rel_l2(out, want, nq(&ac)), 1e-2);
        attn_label(what, sizeof what, "bf16 lse", &ac);
        kt_expect_close(what, kt_rel_l2(lse, want_lse, nlse(&ac)), 1e-5);
        attn_label(what, sizeof what, "bf16 dq", &ac);
        kt_expect_close(what, kt_rel_l2(g.dq, wdq, nq(&ac)), 2e-2);
        attn_label(what, sizeof what, "bf16 dk", &ac);
        kt_expect_close(what, kt_rel_l2(g.dk, wdk, nkv(&ac)), 2e-2);
        attn_label(what, sizeof what, "bf16 dv", &ac);
        kt_expect_close(what, kt_rel_l2(g.dv, wdv, nkv(&ac)), 2e-2);
        free(wdv), free(wdk), free(wdq), free(want_lse), free(want);
        attn_grads_free(&g);
        free(lse);
        free(out);
        attn_case_free(&ac);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_attention_forward_matches_reference),
        cmocka_unit_test(test_attention_gradients_match_finite_differences),
        cmocka_unit_test(test_attention_is_deterministic_and_bf16_tracks_fp32),
        cmocka_unit_test(test_attention_bf16_model_shapes_match_reference),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
