/* kern_embedding_forward/backward: lookup values, scatter-add gradient against finite differences,
 * accumulation in row order, determinism and bf16 storage. */
#include "common/fixture_kern.h"

enum { EMB_N = 12, EMB_C = 5, EMB_V = 9 };

typedef struct emb_case {
    tr_dtype dt;
    int32_t tokens[EMB_N]; /* [N], with repeats */
    float *wte;            /* [V,C] */
    float *w;              /* [N,C] loss weights */
} emb_case;

static emb_case emb_case_make(kt_rng *r) {
    emb_case ec = {TR_F32, {0}, kt_host(EMB_V * EMB_C), kt_host(EMB_N * EMB_C)};
    for (int n = 0; n < EMB_N; n++) ec.tokens[n] = n < 3 ? 4 : kt_below(r, EMB_V); /* token 4 three times */
    ec.tokens[EMB_N - 1] = EMB_V - 1;
    kt_fill(r, ec.wte, EMB_V * EMB_C, 1.0f);
    kt_fill(r, ec.w, EMB_N * EMB_C, 1.0f);
    return ec;
}

static void emb_case_free(emb_case *ec) {
    free(ec->wte);
    free(ec->w);
}

static void emb_forward(const emb_case *ec, float *out) {
    int32_t *tok = kt_upload_i32(ec->tokens, EMB_N);
    tr_buf wte = kt_upload(ec->wte, EMB_V * EMB_C, ec->dt);
    tr_buf o = kt_upload(ec->w, EMB_N * EMB_C, ec->dt); /* stale contents: the forward overwrites */
    kern_embedding_forward(kt_s, o, tok, wte, EMB_N, EMB_C, EMB_V);
    kt_download(out, o, EMB_N * EMB_C);
    kt_free(o.p);
    kt_free(wte.p);
    kt_free(tok);
}

/* dwte[V,C] = dwte0 + scatter of dout by tokens. */
static void emb_backward(const emb_case *ec, const float *dwte0, const float *dout, float *dwte) {
    int32_t *tok = kt_upload_i32(ec->tokens, EMB_N);
    tr_buf d = kt_upload(dwte0, EMB_V * EMB_C, ec->dt), g = kt_upload(dout, EMB_N * EMB_C, ec->dt);
    kern_embedding_backward(kt_s, d, g, tok, EMB_N, EMB_C, EMB_V);
    kt_download(dwte, d, EMB_V * EMB_C);
    kt_free(g.p);
    kt_free(d.p);
    kt_free(tok);
}

static double emb_loss(void *ctx) {
    const emb_case *ec = ctx;
    float out[EMB_N * EMB_C];
    emb_forward(ec, out);
    return kt_dot(out, ec->w, EMB_N * EMB_C);
}

static void test_embedding_forward_copies_rows(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(31);
    emb_case ec = emb_case_make(&r);
    for (int dti = 0; dti < 2; dti++) {
        ec.dt = dti ? TR_BF16 : TR_F32;
        float out[EMB_N * EMB_C], again[EMB_N * EMB_C];
        emb_forward(&ec, out);
        emb_forward(&ec, again);
        assert_memory_equal(out, again, sizeof out);
        for (int n = 0; n < EMB_N; n++)
            for (int c = 0; c < EMB_C; c++) {
                const float want = ec.wte[ec.tokens[n] * EMB_C + c];
                assert_true(out[n * EMB_C + c] == (ec.dt == TR_BF16 ? tr_round_bf16(want) : want));
            }
    }
    emb_case_free(&ec);
}

static void test_embedding_backward_matches_finite_differences(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(32);
    emb_case ec = emb_case_make(&r);
    float zero[EMB_V * EMB_C] = {0}, dwte[EMB_V * EMB_C];
    emb_backward(&ec, zero, ec.w, dwte);
    /* L is linear in wte: only fp32 rounding of the output limits the quotient. */
    kt_fd_check("embedding dwte", ec.wte, EMB_V * EMB_C, dwte, emb_loss, &ec, 1e-2, 1000, 1e-4, &r);
    emb_case_free(&ec);
}

static void test_embedding_backward_accumulates_in_row_order(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(33);
    emb_case ec = emb_case_make(&r);
    for (int dti = 0; dti < 2; dti++) {
        ec.dt = dti ? TR_BF16 : TR_F32;
        float dwte0[EMB_V * EMB_C], dout[EMB_N * EMB_C], got[EMB_V * EMB_C], again[EMB_V * EMB_C];
        float want[EMB_V * EMB_C];
        double sum[EMB_V * EMB_C];
        /* Values spread over many binades make the summation visible in the low bits. */
        for (int i = 0; i < EMB_V * EMB_C; i++) dwte0[i] = kt_sym(&r, 1000.0f);
        for (int i = 0; i < EMB_N * EMB_C; i++) dout[i] = (float)(kt_sym(&r, 1.0f) * pow(10.0, kt_below(&r, 6) - 3));
        /* The twin's contract: per vocabulary element, the old value plus the token's rows in
         * ascending n, summed in double and rounded once. */
        for (int i = 0; i < EMB_V * EMB_C; i++) sum[i] = ec.dt == TR_BF16 ? tr_round_bf16(dwte0[i]) : dwte0[i];
        for (int n = 0; n < EMB_N; n++)
            for (int c = 0; c < EMB_C; c++)
                sum[ec.tokens[n] * EMB_C + c] +=
                    ec.dt == TR_BF16 ? tr_round_bf16(dout[n * EMB_C + c]) : dout[n * EMB_C + c];
        for (int i = 0; i < EMB_V * EMB_C; i++)
            want[i] = ec.dt == TR_BF16 ? tr_round_bf16((float)sum[i]) : (float)sum[i];
        emb_backward(&ec, dwte0, dout, got);
        emb_backward(&ec, dwte0, dout, again);
        assert_memory_equal(got, again, sizeof got);
        if (kt_backend_is_twin()) { /* the twin promises this exact order; a GPU only the tolerance */
            assert_memory_equal(got, want, sizeof got);
        } else if (ec.dt == TR_F32) {
            kt_expect_close("embedding accumulate", kt_rel_l2(got, sum, EMB_V * EMB_C), 1e-5);
        } else {
            /* bf16 storage rounds the result once (~2e-3 relative), so a bound against the exact
             * sum would test bf16, not the kernel: a GPU's fp32 sum, rounded once, is the nearest
             * bf16 of the exact sum or, at a near-tie, its neighbour. */
            for (int i = 0; i < EMB_V * EMB_C; i++) {
                int e;
                (void)frexp(want[i], &e);
                const double bf16_ulp = ldexp(1.0, e - 8); /* 8 significant bits */
                if (!(fabs((double)got[i] - want[i]) <= bf16_ulp))
                    fail_msg("embedding accumulate bf16: element %d is %a, want %a within one bf16 ulp", i, got[i],
                             want[i]);
            }
        }
    }
    emb_case_free(&ec);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_embedding_forward_copies_rows),
        cmocka_unit_test(test_embedding_backward_matches_finite_differences),
        cmocka_unit_test(test_embedding_backward_accumulates_in_row_order),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
