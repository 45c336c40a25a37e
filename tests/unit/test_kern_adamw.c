/* kern_adamw_update against the AdamW formula evaluated by hand in double over three steps, the
 * wd = 0 path, grad_scale, bf16 model and gradient copies, model aliasing master, determinism. */
#include "common/fixture_kern.h"

enum { AW_N = 37, AW_STEPS = 3 };

typedef struct adamw_state {
    float master[AW_N], m[AW_N], v[AW_N];
    float model[AW_N]; /* what came back in the model copy */
} adamw_state;

static kern_adamw_desc adamw_desc(float wd, float grad_scale, int step) {
    kern_adamw_desc ad = {.lr = 1e-2f,
                          .beta1 = 0.9f,
                          .beta2 = 0.95f,
                          .eps = 1e-8f,
                          .weight_decay = wd,
                          .grad_scale = grad_scale,
                          .step = step};
    return ad;
}

/* Runs steps 1..AW_STEPS on the device from st (in/out); grads [AW_STEPS][AW_N]. model_dt picks
 * the model copy's type; alias_model makes model.p == master (fp32 training). */
static void adamw_run(adamw_state *st, const float grads[AW_STEPS][AW_N], float wd, float grad_scale, tr_dtype grad_dt,
                      tr_dtype model_dt, bool alias_model) {
    float *master = kt_upload_f32(st->master, AW_N), *m = kt_upload_f32(st->m, AW_N), *v = kt_upload_f32(st->v, AW_N);
    tr_buf model = alias_model ? tr_buf_f32(master) : tr_buf_make(kt_alloc(AW_N * tr_dtype_size(model_dt)), model_dt);
    tr_buf grad = tr_buf_make(kt_alloc(AW_N * tr_dtype_size(grad_dt)), grad_dt);
    for (int step = 1; step <= AW_STEPS; step++) {
        const kern_adamw_desc ad = adamw_desc(wd, grad_scale, step);
        kt_write(grad, grads[step - 1], AW_N);
        kern_adamw_update(kt_s, &ad, master, NULL, model, grad, m, v, AW_N);
    }
    kt_download_f32(st->master, master, AW_N);
    kt_download_f32(st->m, m, AW_N);
    kt_download_f32(st->v, v, AW_N);
    kt_download(st->model, model, AW_N);
    kt_free(grad.p);
    if (!alias_model) kt_free(model.p);
    kt_free(v);
    kt_free(m);
    kt_free(master);
}

static void adamw_init(adamw_state *st, float grads[AW_STEPS][AW_N], kt_rng *r) {
    memset(st, 0, sizeof *st);
    kt_fill(r, st->master, AW_N, 1.0f);
    for (int s = 0; s < AW_STEPS; s++) kt_fill(r, grads[s], AW_N, 2.0f);
    grads[0][5] = 0.0f; /* a zero first gradient: the update is 0 / (0 + eps) */
}

/* torch.optim.AdamW's decoupled update, written out in double with the state in double. */
static void adamw_reference(const adamw_state *st0, const float grads[AW_STEPS][AW_N], float wd, float grad_scale,
                            double *master) {
    const kern_adamw_desc ad = adamw_desc(wd, grad_scale, 1);
    double m[AW_N] = {0}, v[AW_N] = {0};
    for (int i = 0; i < AW_N; i++) master[i] = st0->master[i];
    for (int t = 1; t <= AW_STEPS; t++)
        for (int i = 0; i < AW_N; i++) {
            const double g = (double)grads[t - 1][i] * ad.grad_scale;
            m[i] = ad.beta1 * m[i] + (1.0 - ad.beta1) * g;
            v[i] = ad.beta2 * v[i] + (1.0 - ad.beta2) * g * g;
            const double mhat = m[i] / (1.0 - pow(ad.beta1, t)), vhat = v[i] / (1.0 - pow(ad.beta2, t));
            master[i] = master[i] * (1.0 - (double)ad.lr * ad.weight_decay) - ad.lr * mhat / (sqrt(vhat) + ad.eps);
        }
}

static void test_adamw_matches_formula_for_three_steps(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(91);
    const struct {
        float wd, grad_scale;
        const char *what;
    } cases[] = {{0.1f, 1.0f, "adamw wd=0.1"}, {0.0f, 1.0f, "adamw wd=0"}, {0.1f, 0.3f, "adamw grad_scale=0.3"}};
    for (int ci = 0; ci < 3; ci++) {
        adamw_state st0, st;
        float grads[AW_STEPS][AW_N];
        double want[AW_N];
        adamw_init(&st0, grads, &r);
        st = st0;
        adamw_run(&st, grads, cases[ci].wd, cases[ci].grad_scale, TR_F32, TR_F32, false);
        adamw_reference(&st0, grads, cases[ci].wd, cases[ci].grad_scale, want);
        /* Compare the change, not the weights: lr 1e-2 moves them by ~3e-2, and that is what the
         * formula governs. fp32 state between steps costs ~1e-7 of it. */
        float delta[AW_N];
        double want_delta[AW_N];
        for (int i = 0; i < AW_N; i++) {
            delta[i] = (float)((double)st.master[i] - st0.master[i]);
            want_delta[i] = want[i] - st0.master[i];
        }
        kt_expect_close(cases[ci].what, kt_rel_l2(delta, want_delta, AW_N), 1e-5);
        assert_memory_equal(st.model, st.master, sizeof st.model); /* fp32 model copy = master */
    }
}

static void test_adamw_zero_grad_without_decay_keeps_weights(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(92);
    adamw_state st0, st;
    float grads[AW_STEPS][AW_N] = {{0}};
    adamw_init(&st0, grads, &r);
    memset(grads, 0, sizeof grads);
    st = st0;
    adamw_run(&st, grads, 0.0f, 1.0f, TR_F32, TR_F32, false);
    assert_memory_equal(st.master, st0.master, sizeof st.master);
    st = st0; /* with decay only the decay acts: master * (1 - lr wd)^3 */
    adamw_run(&st, grads, 0.5f, 1.0f, TR_F32, TR_F32, false);
    double want[AW_N];
    for (int i = 0; i < AW_N; i++) want[i] = st0.master[i] * pow(1.0 - 1e-2 * 0.5, 3);
    kt_expect_close("adamw zero grad, decay only", kt_rel_l2(st.master, want, AW_N), 1e-6);
}

static void test_adamw_grad_scale_scales_the_gradient(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(93);
    adamw_state st0, scaled, prescaled;
    float grads[AW_STEPS][AW_N], grads_quarter[AW_STEPS][AW_N];
    adamw_init(&st0, grads, &r);
    for (int s = 0; s < AW_STEPS; s++)
        for (int i = 0; i < AW_N; i++) grads_quarter[s][i] = grads[s][i] * 0.25f; /* exact: a power of two */
    scaled = st0;
    prescaled = st0;
    adamw_run(&scaled, grads, 0.1f, 0.25f, TR_F32, TR_F32, false);
    adamw_run(&prescaled, grads_quarter, 0.1f, 1.0f, TR_F32, TR_F32, false);
    assert_memory_equal(&scaled, &prescaled, sizeof scaled);
}

static void test_adamw_bf16_copies_and_aliasing(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(94);
    adamw_state st0, plain, bf16_model, aliased, bf16_grad;
    float grads[AW_STEPS][AW_N], grads_rounded[AW_STEPS][AW_N];
    adamw_init(&st0, grads, &r);
    for (int s = 0; s < AW_STEPS; s++)
        for (int i = 0; i < AW_N; i++) grads_rounded[s][i] = tr_round_bf16(grads[s][i]);
    plain = bf16_model = aliased = bf16_grad = st0;
    adamw_run(&plain, grads_rounded, 0.1f, 1.0f, TR_F32, TR_F32, false);
    adamw_run(&bf16_model, grads_rounded, 0.1f, 1.0f, TR_F32, TR_BF16, false);
    adamw_run(&aliased, grads_rounded, 0.1f, 1.0f, TR_F32, TR_F32, true);
    adamw_run(&bf16_grad, grads, 0.1f, 1.0f, TR_BF16, TR_F32, false); /* rounds on upload */
    /* The model copy's type never feeds back into the fp32 master/moments. */
    assert_memory_equal(bf16_model.master, plain.master, sizeof plain.master);
    for (int i = 0; i < AW_N; i++) assert_true(bf16_model.model[i] == tr_round_bf16(bf16_model.master[i]));
    /* model.p == master: the same memory, the same result. */
    assert_memory_equal(aliased.master, plain.master, sizeof plain.master);
    assert_memory_equal(aliased.model, plain.master, sizeof plain.master);
    /* A bf16 gradient is read exactly: same as an fp32 gradient holding the same values. */
    assert_memory_equal(&bf16_grad.master, &plain.master, sizeof plain.master);
    assert_memory_equal(&bf16_grad.m, &plain.m, sizeof plain.m);
    assert_memory_equal(&bf16_grad.v, &plain.v, sizeof plain.v);
}

static void test_adamw_is_deterministic(void **state) {
    (void)state;
    kt_rng r = kt_rng_make(95);
    adamw_state st0, a, b;
    float grads[AW_STEPS][AW_N];
    adamw_init(&st0, grads, &r);
    a = st0;
    b = st0;
    adamw_run(&a, grads, 0.1f, 0.7f, TR_BF16, TR_BF16, false);
    adamw_run(&b, grads, 0.1f, 0.7f, TR_BF16, TR_BF16, false);
    assert_memory_equal(&a, &b, sizeof a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_adamw_matches_formula_for_three_steps),
        cmocka_unit_test(test_adamw_zero_grad_without_decay_keeps_weights),
        cmocka_unit_test(test_adamw_grad_scale_scales_the_gradient),
        cmocka_unit_test(test_adamw_bf16_copies_and_aliasing),
        cmocka_unit_test(test_adamw_is_deterministic),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
