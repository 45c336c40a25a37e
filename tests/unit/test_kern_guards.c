/* The twin kernels' argument guards: nonsense shapes and out-of-range ids end the rank through
 * tr_fatal with a message that names the problem. Each case runs in a forked child so the fatal
 * exit can be observed. Twin only: a GPU backend checks token ids on the device, if at all. */
#include "common/fixture.h"
#include "common/fixture_kern.h"

/* Small fp32 device tensors every case can point at. */
static tr_buf g_a, g_b, g_c;
static float *g_stats;
static int32_t *g_ids;

static int guards_setup(void **state) {
    if (kt_setup(state) != 0) return -1;
    /* Large enough for every case's shapes (4 x 512 logits), so only the guard can stop a case. */
    static const float zeros[4 * 512] = {0};
    g_a = kt_upload(zeros, 4 * 512, TR_F32);
    g_b = kt_upload(zeros, 4 * 512, TR_F32);
    g_c = kt_upload(zeros, 4 * 512, TR_F32);
    g_stats = kt_upload_f32(zeros, 4 * 512);
    const int32_t ids[4] = {1, 2, 512, 3}; /* 512 is outside a 512-token vocabulary */
    g_ids = kt_upload_i32(ids, 4);
    return 0;
}

static int guards_teardown(void **state) {
    kt_free(g_ids);
    kt_free(g_stats);
    kt_free(g_c.p);
    kt_free(g_b.p);
    kt_free(g_a.p);
    return kt_teardown(state);
}

static void run_embedding_forward_bad_token(void) { kern_embedding_forward(kt_s, g_a, g_ids, g_b, 4, 1, 512); }
static void run_embedding_backward_bad_token(void) { kern_embedding_backward(kt_s, g_a, g_b, g_ids, 4, 1, 512); }
static void run_cross_entropy_bad_target(void) { kern_cross_entropy_forward(kt_s, g_stats, g_a, g_ids, 4, 512); }
static void run_cross_entropy_bwd_bad_target(void) {
    kern_cross_entropy_backward(kt_s, g_a, g_a, g_ids, g_stats, 4, 512);
}
static void run_embedding_empty(void) { kern_embedding_forward(kt_s, g_a, g_ids, g_b, 0, 1, 512); }
static void run_gemm_zero_k(void) { kern_gemm(kt_s, g_c, g_a, g_b, 2, 2, 0, false, false, 1.0f, 0.0f); }
static void run_attention_heads_not_multiple(void) {
    kern_attention_forward(kt_s, g_a, g_stats, g_a, g_b, g_c, 1, 2, 6, 4, 2);
}
static void run_rope_odd_rot_dim(void) {
    const kern_rope_desc rd = {10000.0f, 3};
    kern_rope_forward(kt_s, &rd, g_a, NULL, 1, 2, 2, 4);
}
static void run_rope_rot_dim_beyond_head(void) {
    const kern_rope_desc rd = {10000.0f, 8};
    kern_rope_forward(kt_s, &rd, g_a, NULL, 1, 2, 2, 4);
}
static void run_rms_norm_with_bias(void) {
    const kern_norm_desc nd = {KERN_NORM_RMS, 1e-5f, false};
    kern_norm_forward(kt_s, &nd, g_a, NULL, g_stats, g_b, g_c, g_c, 2, 4);
}
static void run_swiglu_empty(void) { kern_swiglu_forward(kt_s, g_a, g_b, -1, 4); }
static void run_adamw_step_zero(void) {
    const kern_adamw_desc ad = {1e-3f, 0.9f, 0.95f, 1e-8f, 0.0f, 1.0f, 0};
    kern_adamw_update(kt_s, &ad, g_stats, NULL, g_a, g_b, g_stats + 64, g_stats + 128, 8);
}
static void run_cast_int_to_float(void) { kern_cast(kt_s, g_a, tr_buf_make(g_ids, TR_I32), 4); }

static void test_kernels_reject_nonsense(void **state) {
    (void)state;
    if (!kt_backend_is_twin()) skip();
    fx_expect_fatal("embedding fwd, token 512", run_embedding_forward_bad_token, "512 at", "[0, 512)");
    fx_expect_fatal("embedding bwd, token 512", run_embedding_backward_bad_token, "512 at", "[0, 512)");
    fx_expect_fatal("cross entropy, target 512", run_cross_entropy_bad_target, "target 512", "[0, 512)");
    fx_expect_fatal("cross entropy bwd, target", run_cross_entropy_bwd_bad_target, "target 512", "[0, 512)");
    fx_expect_fatal("embedding N = 0", run_embedding_empty, "N > 0", "embedding");
    fx_expect_fatal("gemm k = 0", run_gemm_zero_k, "k > 0", "gemm");
    fx_expect_fatal("attention NH % KV", run_attention_heads_not_multiple, "NH % KV == 0", "--num-query-groups");
    fx_expect_fatal("rope odd rot_dim", run_rope_odd_rot_dim, "rot_dim % 2 == 0", "--rotary-percent");
    fx_expect_fatal("rope rot_dim > D", run_rope_rot_dim_beyond_head, "rot_dim <= D", "head dim");
    fx_expect_fatal("RMSNorm with a bias", run_rms_norm_with_bias, "bias.p == NULL", "RMSNorm");
    fx_expect_fatal("swiglu N < 0", run_swiglu_empty, "N > 0", "swiglu");
    fx_expect_fatal("adamw step 0", run_adamw_step_zero, "step >= 1", "1-based");
    fx_expect_fatal("cast from int32", run_cast_int_to_float, "int32", "fp32 or bf16");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_kernels_reject_nonsense),
    };
    return cmocka_run_group_tests(tests, guards_setup, guards_teardown);
}
