/* kern_norm_forward/backward (RMSNorm and LayerNorm, with and without --apply-layernorm-1p, with
 * and without bias): values and statistics against a naive double reference, every gradient
 * against finite differences, accumulation into existing gradients, determinism, bf16 storage. */
#include "common/fixture_kern.h"

typedef struct norm_case {
    kern_norm_desc nd;
    bool has_bias;
    int N, C;
    tr_dtype dt;
    float *inp;    /* [N,C] */
    float *weight; /* [C] */
    float *bias;   /* [C] (Layer with bias only) */
    float *w;      /* [N,C] loss weights */
} norm_case;

typedef struct norm_out {
    float *out;  /* [N,C] */
    float *mean; /* [N] */
    float *rstd; /* [N] */
} norm_out;

static norm_case norm_case_make(kt_rng *r, kern_norm_kind kind, bool zero_centered, bool has_bias, int N, int C) {
    norm_case nc = {{kind, 1e-5f, zero_centered},
                    has_bias,
                    N,
                    C,
                    TR_F32,
                    kt_host((size_t)N * C),
                    kt_host((size_t)C),
                    kt_host((size_t)C),
                    kt_host((size_t)N * C)};
    for (int i = 0; i < N * C; i++) nc.inp[i] = kt_sym(r, 1.0f) + (kind == KERN_NORM_LAYER ? 0.4f : 0.0f);
    /* Norm weights away from their neutral value, so a gamma mix-up cannot hide. */
    for (int c = 0; c < C; c++) nc.weight[c] = (zero_centered ? 0.0f : 1.0f) + kt_sym(r, 0.5f);
    kt_fill(r, nc.bias, (size_t)C, 0.5f);
    kt_fill(r, nc.w, (size_t)N * C, 1.0f);
    return nc;
}

static void norm_case_free(norm_case *nc) {
    free(nc->inp);
    free(nc->weight);
    free(nc->bias);
    free(nc->w);
}

static norm_out norm_out_make(const norm_case *nc) {
    norm_out o = {kt_host((size_t)nc->N * nc->C), kt_host((size_t)nc->N), kt_host((size_t)nc->N)};
    return o;
}

static void norm_out_free(norm_out *o) {
    free(o->out);
    free(o->mean);
    free(o->rstd);
}

static const char *norm_name(const norm_case *nc) {
    static const char *names[8] = {"rms",   "rms+1p",   "rms+bias(never)", "rms+1p+bias(never)",
                                   "layer", "layer+1p", "layer+bias",      "layer+1p+bias"};
    return names[(nc->nd.kind == KERN_NORM_LAYER) * 4 + nc->has_bias * 2 + nc->nd.zero_centered_gamma];
}

static void norm_forward(const norm_case *nc, norm_out *o) {
    const size_t nct = (size_t)nc->N * nc->C;
    const bool layer = nc->nd.kind == KERN_NORM_LAYER;
    tr_buf inp = kt_upload(nc->inp, nct, nc->dt), weight = kt_upload(nc->weight, (size_t)nc->C, nc->dt);
    tr_buf bias = nc->has_bias ? kt_upload(nc->bias, (size_t)nc->C, nc->dt) : tr_buf_none();
    tr_buf out = kt_upload(nc->w, nct, nc->dt); /* stale contents: the forward overwrites */
    float *mean = layer ? kt_alloc(sizeof(float) * nc->N) : NULL;
    float *rstd = kt_alloc(sizeof(float) * nc->N);
    kern_norm_forward(kt_s, &nc->nd, out, mean, rstd, inp, weight, bias, nc->N, nc->C);
    kt_download(o->out, out, nct);
    if (layer) kt_download_f32(o->mean, mean, (size_t)nc->N);
    kt_download_f32(o->rstd, rstd, (size_t)nc->N);
    kt_free(rstd);
    if (mean) kt_free(mean);
    kt_free(out.p);
    if (bias.p) kt_free(bias.p);
    kt_free(weight.p);
    kt_free(inp.p);
}

/* Gradients for L = sum(out * w), added onto dinp0/dw0/db0 (each may be NULL for zeros). */
static void norm_backward(const norm_case *nc, const float *dinp0, const float *dw0, const float *db0, float *dinp,
                          float *dweight, float *dbias) {
    const size_t nct = (size_t)nc->N * nc->C, C = (size_t)nc->C;
    const bool layer = nc->nd.kind == KERN_NORM_LAYER;
    float *zeros = kt_host(nct);
    tr_buf inp = kt_upload(nc->inp, nct, nc->dt), weight = kt_upload(nc->weight, C, nc->dt);
    tr_buf bias = nc->has_bias ? kt_upload(nc->bias, C, nc->dt) : tr_buf_none();
    tr_buf out = tr_buf_make(kt_alloc(nct * tr_dtype_size(nc->dt)), nc->dt);
    tr_buf dout = kt_upload(nc->w, nct, nc->dt);
    tr_buf di = kt_upload(dinp0 ? dinp0 : zeros, nct, nc->dt), dw = kt_upload(dw0 ? dw0 : zeros, C, nc->dt);
    tr_buf db = nc->has_bias ? kt_upload(db0 ? db0 : zeros, C, nc->dt) : tr_buf_none();
    float *mean = layer ? kt_alloc(sizeof(float) * nc->N) : NULL;
    float *rstd = kt_alloc(sizeof(float) * nc->N);
    kern_norm_forward(kt_s, &nc->nd, out, mean, rstd, inp, weight, bias, nc->N, nc->C);
    kern_norm_backward(kt_s, &nc->nd, di, dw, db, dout, inp, weight, mean, rstd, nc->N, nc->C);
    kt_download(dinp, di, nct);
    kt_download(dweight, dw, C);
    if (nc->has_bias) kt_download(dbias, db, C);
    kt_free(rstd);
    if (mean) kt_free(mean);
    if (db.p) kt_free(db.p);
    kt_free(dw.p);
    kt_free(di.p);
    kt_free(dout.p);
    kt_free(out.p);
    if (bias.p) kt_free(bias.p);
    kt_free(weight.p);
    kt_free(inp.p);
    free(zeros);
}

/* Naive double reference: out[N,C], mean[N], rstd[N]. */
static void norm_reference(const norm_case *nc, double *out, double *mean, double *rstd) {
    for (int n = 0; n < nc->N; n++) {
        const float *x = nc->inp + (size_t)n * nc->C;
        double mu = 0.0, ss = 0.0;
        if (nc->nd.kind == KERN_NORM_LAYER) {
            for (int c = 0; c < nc->C; c++) mu += x[c];
            mu /= nc->C;
        }
        for (int c = 0; c < nc->C; c++) ss += ((double)x[c] - mu) * ((double)x[c] - mu);
        mean[n] = mu;
        rstd[n] = 1.0 / sqrt(ss / nc->C + (double)nc->nd.eps);
        for (int c = 0; c < nc->C; c++) {
            const double gamma = nc->nd.zero_centered_gamma ? 1.0 + nc->weight[c] : nc->weight[c];
            out[(size_t)n * nc->C + c] = ((double)x[c] - mu) * rstd[n] * gamma + (nc->has_bias ? nc->bias[c] : 0.0);
        }
    }
}

static double norm_loss(void *ctx) {
    const norm_case *nc = ctx;
    norm_out o = norm_out_make(nc);
    norm_forward(nc, &o);
    const double l = kt_dot(o.out, nc->w, (size_t)nc->N * nc->C);
    norm_out_free(&o);
    return l;
}

/* The six configurations the engine can ask for (RMSNorm never has a bias). */
static const struct {
    kern_norm_kind kind;
    bool zero_centered, bias;
} norm_configs[] = {
    {KERN_NORM_RMS, false, false},  {KERN_NORM_RMS, true, false},   {KERN_NORM_LAYER, false, false},
    {KERN_NORM_LAYER, true, false}, {KERN_NORM_LAYER, false, true}, {KERN_NORM_LAYER, true, true},
};
enum { NORM_CONFIGS = sizeof norm_configs / sizeof norm_configs[0] };

static void test_norm_forward_matches_reference(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(41);
    for (int ci = 0; ci < NORM_CONFIGS; ci++) {
        norm_case nc =
            norm_case_make(&r, norm_configs[ci].kind, norm_configs[ci].zero_centered, norm_configs[ci].bias, 10, 64);
        norm_out o = norm_out_make(&nc);
        double *out = kt_host_d(10 * 64), mean[10], rstd[10];
        norm_forward(&nc, &o);
        norm_reference(&nc, out, mean, rstd);
        char what[96];
        snprintf(what, sizeof what, "norm %s out", norm_name(&nc));
        kt_expect_close(what, kt_rel_l2(o.out, out, 10 * 64), kt_fwd_tol());
        snprintf(what, sizeof what, "norm %s rstd", norm_name(&nc));
        kt_expect_close(what, kt_rel_l2(o.rstd, rstd, 10), kt_fwd_tol());
        if (nc.nd.kind == KERN_NORM_LAYER) {
            snprintf(what, sizeof what, "norm %s mean", norm_name(&nc));
            kt_expect_close(what, kt_rel_l2(o.mean, mean, 10), kt_fwd_tol());
        }
        free(out);
        norm_out_free(&o);
        norm_case_free(&nc);
    }
}

static void test_norm_gradients_match_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(42);
    for (int ci = 0; ci < NORM_CONFIGS; ci++) {
        enum { N = 5, C = 16 };
        norm_case nc =
            norm_case_make(&r, norm_configs[ci].kind, norm_configs[ci].zero_centered, norm_configs[ci].bias, N, C);
        float dinp[N * C], dweight[C], dbias[C];
        norm_backward(&nc, NULL, NULL, NULL, dinp, dweight, dbias);
        char what[96];
        /* Smooth in every input: h = 1e-2 leaves O(h^2) truncation; measured ~1e-5, bound 1e-3. */
        snprintf(what, sizeof what, "norm %s dinp", norm_name(&nc));
        kt_fd_check(what, nc.inp, N * C, dinp, norm_loss, &nc, 1e-2, 1000, 1e-3, &r);
        snprintf(what, sizeof what, "norm %s dweight", norm_name(&nc));
        kt_fd_check(what, nc.weight, C, dweight, norm_loss, &nc, 1e-2, 1000, 1e-3, &r);
        if (nc.has_bias) {
            snprintf(what, sizeof what, "norm %s dbias", norm_name(&nc));
            kt_fd_check(what, nc.bias, C, dbias, norm_loss, &nc, 1e-2, 1000, 1e-3, &r);
        }
        norm_case_free(&nc);
    }
}

static void test_norm_backward_accumulates(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(43);
    for (int ci = 0; ci < NORM_CONFIGS; ci++) {
        enum { N = 7, C = 24 };
        norm_case nc =
            norm_case_make(&r, norm_configs[ci].kind, norm_configs[ci].zero_centered, norm_configs[ci].bias, N, C);
        float di0[N * C], dw0[C], db0[C], di[N * C], dw[C], db[C], dia[N * C], dwa[C], dba[C];
        kt_fill(&r, di0, N * C, 2.0f);
        kt_fill(&r, dw0, C, 2.0f);
        kt_fill(&r, db0, C, 2.0f);
        norm_backward(&nc, NULL, NULL, NULL, di, dw, db);
        norm_backward(&nc, di0, dw0, db0, dia, dwa, dba);
        double want_i[N * C], want_w[C], want_b[C];
        for (int i = 0; i < N * C; i++) want_i[i] = (double)di0[i] + di[i];
        for (int c = 0; c < C; c++) {
            want_w[c] = (double)dw0[c] + dw[c];
            want_b[c] = (double)db0[c] + db[c];
        }
        kt_expect_close("norm dinp += ", kt_rel_l2(dia, want_i, N * C), 1e-6);
        kt_expect_close("norm dweight += ", kt_rel_l2(dwa, want_w, C), 1e-6);
        if (nc.has_bias) kt_expect_close("norm dbias += ", kt_rel_l2(dba, want_b, C), 1e-6);
        norm_case_free(&nc);
    }
}

static void test_norm_is_deterministic_and_bf16_tracks_fp32(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(44);
    for (int ci = 0; ci < NORM_CONFIGS; ci++) {
        enum { N = 9, C = 96 };
        norm_case nc =
            norm_case_make(&r, norm_configs[ci].kind, norm_configs[ci].zero_centered, norm_configs[ci].bias, N, C);
        norm_out f32 = norm_out_make(&nc), f32b = norm_out_make(&nc);
        norm_forward(&nc, &f32);
        norm_forward(&nc, &f32b);
        assert_memory_equal(f32.out, f32b.out, sizeof(float) * N * C);
        assert_memory_equal(f32.rstd, f32b.rstd, sizeof(float) * N);
        float di[N * C], dw[C], db[C], di2[N * C], dw2[C], db2[C];
        norm_backward(&nc, NULL, NULL, NULL, di, dw, db);
        norm_backward(&nc, NULL, NULL, NULL, di2, dw2, db2);
        assert_memory_equal(di, di2, sizeof di);
        assert_memory_equal(dw, dw2, sizeof dw);
        if (nc.has_bias) assert_memory_equal(db, db2, sizeof db);

        nc.dt = TR_BF16;
        norm_out b16 = norm_out_make(&nc), b16b = norm_out_make(&nc);
        norm_forward(&nc, &b16);
        norm_forward(&nc, &b16b);
        assert_memory_equal(b16.out, b16b.out, sizeof(float) * N * C);
        kt_expect_close("norm bf16 vs fp32 out", kt_rel_l2_ff(b16.out, f32.out, N * C), 1e-2);
        norm_out_free(&b16b);
        norm_out_free(&b16);
        norm_out_free(&f32b);
        norm_out_free(&f32);
        norm_case_free(&nc);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_norm_forward_matches_reference),
        cmocka_unit_test(test_norm_gradients_match_finite_differences),
        cmocka_unit_test(test_norm_backward_accumulates),
        cmocka_unit_test(test_norm_is_deterministic_and_bf16_tracks_fp32),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
