/* The whole model's backward against finite differences of its loss, in configurations the
 * Hugging Face reference does not cover: LayerNorm with bias and --apply-layernorm-1p (the 8B
 * seed's setting), partial rotary (--rotary-percent 0.5), GQA, padded vocabulary, a loss mask.
 * Forward in fp32; central differences with h = 1e-2 on weights of scale ~0.1 keep the truncation
 * error ~1e-5 relative and the fp32 rounding of the loss (~1e-7 * 6 / 2h ~ 3e-5) below the 2e-3 tolerance. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/fixture.h"

#include "model/llama.h"

enum { B = 2, T = 6 };

static int g_biases;   /* the next check's model: 0 no biases, 1 Megatron's linear biases, 2 --add-qkv-bias only */
static bool g_qk_norm; /* and --qk-layernorm */

static tr_config config(tr_norm_type norm, bool one_p, double rotary_percent) {
    tr_config c;
    fx_tiny_llama(&c, 16, 24, T, 50); /* vocabulary padded to 128 */
    c.normalization = norm, c.apply_layernorm_1p = one_p;
    c.rotary_percent = rotary_percent, c.rotary_base = 10000;
    c.disable_bias_linear = g_biases != 1;
    c.add_qkv_bias = g_biases == 2;
    c.qk_layernorm = g_qk_norm;
    c.micro_batch_size = B, c.global_batch_size = B;
    c.init_method_std = 0.1; /* larger weights: gradients well above the differencing noise */
    return c;
}

static int32_t tok[B * T], lab[B * T];
static float dloss[B * T];

static double loss_of(llama_model *m) {
    float losses[B * T];
    llama_forward(m, tok, lab, NULL);
    llama_get_losses(m, losses);
    double s = 0;
    for (int n = 0; n < B * T; n++) s += (double)losses[n] * dloss[n];
    return s;
}

static void check(tr_norm_type norm, bool one_p, double rotary_percent) {
    tr_config c = config(norm, one_p, rotary_percent);
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    llama_model *m = llama_create(&c, d, dev_stream_default(d), err, sizeof err);
    assert_non_null(m);
    llama_init_params(m, 7, c.init_method_std);
    float *w = malloc(m->total * 4), *g = malloc(m->total * 4);
    llama_get_master(m, w);
    /* norm weights and biases start at 1 (or 0) and 0: move them so their gradients are generic */
    for (size_t i = 0; i < m->total; i++) w[i] += 0.05f * (float)sin(0.7 * (double)i);
    llama_set_master(m, w);
    for (int n = 0; n < B * T; n++) {
        tok[n] = (n * 17 + 3) % 50;
        lab[n] = (n * 29 + 11) % 50;
        dloss[n] = n % 5 == 4 ? 0.0f : 1.0f / (B * T); /* a loss mask */
    }
    llama_zero_grads(m);
    loss_of(m);
    llama_backward(m, dloss);
    llama_get_grads(m, g);
    const double h = 1e-2;
    double num = 0, den = 0;
    int checked = 0;
    for (int p = 0; p < m->nparams; p++) {
        const llama_param *pp = &m->params_tab[p];
        for (int k = 0; k < 3; k++) { /* three elements of every parameter */
            size_t e = pp->offset + (size_t)((k * 7919 + p * 31) % (int)pp->numel);
            if ((p == m->p_embed || p == m->p_head) && (e - pp->offset) / (size_t)c.hidden_size >= 50) continue;
            float keep = w[e];
            w[e] = keep + (float)h;
            llama_set_master(m, w);
            double lp = loss_of(m);
            w[e] = keep - (float)h;
            llama_set_master(m, w);
            double lm = loss_of(m);
            w[e] = keep;
            double fd = (lp - lm) / (2 * h);
            num += (fd - g[e]) * (fd - g[e]);
            den += fd * fd;
            checked++;
        }
    }
    llama_set_master(m, w);
    assert_true(checked > 50);
    assert_true(den > 0); /* finite differences all zero: the loss does not depend on the weights */
    double rel = sqrt(num / den);
    print_message("sampled gradients: relative error %.3e over %d elements\n", rel, checked);
    /* written so that NaN fails: a NaN gradient makes rel NaN, and NaN > 2e-3 is false */
    if (!(rel <= 2e-3)) fail_msg("relative error of the sampled gradients %.3e exceeds 2e-3 (or is NaN)", rel);
    free(w), free(g);
    llama_destroy(m);
    dev_close(d);
}

static void test_rmsnorm_full_rotary(void **s) {
    (void)s;
    check(TR_NORM_RMSNORM, false, 1.0);
}
static void test_layernorm_1p_partial_rotary(void **s) {
    (void)s;
    check(TR_NORM_LAYERNORM, true, 0.5);
}
static void test_rmsnorm_1p(void **s) {
    (void)s;
    check(TR_NORM_RMSNORM, true, 1.0);
}
/* Megatron's default linear biases (q, k, v, o, fc1 gate and up, fc2), with LayerNorm's own */
static void test_linear_biases(void **s) {
    (void)s;
    g_biases = 1;
    check(TR_NORM_LAYERNORM, false, 1.0);
    check(TR_NORM_RMSNORM, false, 1.0);
    g_biases = 2;
    check(TR_NORM_RMSNORM, false, 1.0);
    g_biases = 0;
}

/* Padded vocabulary: the loss is Hugging Face's, a softmax over the 50 real tokens only (the
 * 78 padding rows of the output layer take no part), and the padding rows get no gradient. */
static void test_padding_takes_no_part(void **s) {
    (void)s;
    tr_config c = config(TR_NORM_RMSNORM, false, 1.0);
    char err[256];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    llama_model *m = llama_create(&c, d, dev_stream_default(d), err, sizeof err);
    assert_non_null(m);
    assert_int_equal(m->dims.V, 128);
    llama_init_params(m, 7, c.init_method_std);
    for (int n = 0; n < B * T; n++) tok[n] = (n * 17 + 3) % 50, lab[n] = (n * 29 + 11) % 50, dloss[n] = 1.0f;
    float losses[B * T], *logits = malloc(sizeof(float) * B * T * 128), *g = malloc(m->total * 4);
    llama_forward(m, tok, lab, NULL);
    llama_get_losses(m, losses);
    llama_get_logits(m, logits);
    for (int n = 0; n < B * T; n++) {
        const float *row = logits + (size_t)n * 128;
        double mx = row[0], sum = 0;
        for (int j = 1; j < 50; j++) mx = row[j] > mx ? row[j] : mx;
        for (int j = 0; j < 50; j++) sum += exp((double)row[j] - mx);
        const double want = log(sum) + mx - row[lab[n]];
        /* written so that NaN fails (every comparison with NaN is false) */
        if (!(fabs(losses[n] - want) <= 1e-5 * fabs(want)))
            fail_msg("row %d: loss %.9g, softmax over the vocabulary %.9g", n, losses[n], want);
    }
    llama_zero_grads(m);
    llama_backward(m, dloss);
    llama_get_grads(m, g);
    const llama_param *head = &m->params_tab[m->p_head];
    for (size_t e = 50 * (size_t)c.hidden_size; e < head->numel; e++)
        if (g[head->offset + e] != 0.0f)
            fail_msg("padding row %zu of lm_head has gradient %g", e / c.hidden_size, g[head->offset + e]);
    free(logits), free(g);
    llama_destroy(m);
    dev_close(d);
}

/* --qk-layernorm: each head's queries and keys normalised (RMSNorm, LayerNorm with its bias, 1p) */
static void test_qk_layernorm(void **s) {
    (void)s;
    g_qk_norm = true;
    check(TR_NORM_RMSNORM, false, 1.0);
    check(TR_NORM_LAYERNORM, true, 0.5);
    g_biases = 1;
    check(TR_NORM_RMSNORM, false, 1.0);
    g_biases = 0;
    g_qk_norm = false;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rmsnorm_full_rotary), cmocka_unit_test(test_layernorm_1p_partial_rotary),
        cmocka_unit_test(test_rmsnorm_1p),          cmocka_unit_test(test_padding_takes_no_part),
        cmocka_unit_test(test_linear_biases),       cmocka_unit_test(test_qk_layernorm),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
