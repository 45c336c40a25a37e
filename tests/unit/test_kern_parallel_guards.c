/* Guards of the tensor- and context-parallel kernels on the twin: each case runs in a forked child
 * and must end through tr_fatal with a message naming the problem.
 * Where a bad id is caught: a vocabulary slice cannot tell an id >= the padded vocabulary from one
 * another rank holds, so the slice kernels reject only negative ids; ids past the end are caught
 * by the full-vocabulary kernels (test_kern_guards.c) or by the caller, which knows the vocabulary.
 * Twin only: a GPU backend checks ids on the device (the kernel traps) and positions not at all
 * on the host. */
#include "common/fixture.h"
#include "common/fixture_kern.h"

/* Small device tensors every case can point at. */
static tr_buf g_a, g_b;
static float *g_stats;
static int32_t *g_ids, *g_qp, *g_kp;

static int guards_setup(void **state) {
    if (kt_setup(state) != 0) return -1;
    static const float zeros[4 * 64] = {0};
    g_a = kt_upload(zeros, 4 * 64, TR_F32);
    g_b = kt_upload(zeros, 4 * 64, TR_F32);
    g_stats = kt_upload_f32(zeros, 4 * 64);
    const int32_t ids[4] = {1, 2, -3, 3}; /* -3: negative, never a token */
    g_ids = kt_upload_i32(ids, 4);
    const int32_t qp[2] = {4, 1}, kp[3] = {2, 3, 4}; /* query at position 1 sees no key (smallest is 2) */
    g_qp = kt_upload_i32(qp, 2);
    g_kp = kt_upload_i32(kp, 3);
    return 0;
}

static int guards_teardown(void **state) {
    kt_free(g_kp);
    kt_free(g_qp);
    kt_free(g_ids);
    kt_free(g_stats);
    kt_free(g_b.p);
    kt_free(g_a.p);
    return kt_teardown(state);
}

static void run_emb_slice_fwd_negative(void) { kern_embedding_forward_slice(kt_s, g_a, g_ids, g_b, 16, 4, 1, 16); }
static void run_emb_slice_bwd_negative(void) { kern_embedding_backward_slice(kt_s, g_a, g_b, g_ids, 0, 4, 1, 16); }
static void run_emb_slice_bad_start(void) { kern_embedding_forward_slice(kt_s, g_a, g_ids, g_b, -16, 4, 1, 16); }
static void run_ce_sums_negative(void) {
    kern_ce_slice_sums(kt_s, g_stats, g_stats + 8, g_a, g_stats + 16, g_ids, 16, 4, 16, 16);
}
static void run_ce_bwd_negative(void) {
    kern_ce_slice_backward(kt_s, g_a, g_a, g_stats, g_stats + 8, g_ids, 16, g_stats + 16, 4, 16, 16);
}
static void run_attn_fwd_blind_query(void) {
    kern_attention_forward_pos(kt_s, g_a, g_stats, g_a, g_b, g_b, g_qp, g_kp, 1, 2, 3, 2, 1, 4);
}
static void run_attn_bwd_blind_query(void) {
    kern_attention_backward_pos(kt_s, g_a, g_b, g_b, g_a, g_a, g_b, g_b, g_a, g_stats, g_qp, g_kp, 1, 2, 3, 2, 1, 4);
}
static void run_attn_no_positions(void) {
    kern_attention_forward_pos(kt_s, g_a, g_stats, g_a, g_b, g_b, NULL, g_kp, 1, 2, 3, 2, 1, 4);
}
static void run_attn_pos_heads(void) {
    kern_attention_forward_pos(kt_s, g_a, g_stats, g_a, g_b, g_b, g_qp, g_kp, 1, 2, 3, 3, 2, 4);
}

static void test_parallel_kernels_reject_nonsense(void **state) {
    (void)state;
    if (!kt_backend_is_twin()) skip();
    fx_expect_fatal("embedding slice fwd, token -3", run_emb_slice_fwd_negative, "token id -3 at position 2",
                    "negative");
    fx_expect_fatal("embedding slice bwd, token -3", run_emb_slice_bwd_negative, "token id -3", "negative");
    fx_expect_fatal("embedding slice, start -16", run_emb_slice_bad_start, "vocab_start >= 0", "padded vocabulary");
    fx_expect_fatal("ce slice sums, target -3", run_ce_sums_negative, "target -3 at row 2", "negative");
    fx_expect_fatal("ce slice bwd, target -3", run_ce_bwd_negative, "target -3 at row 2", "negative");
    fx_expect_fatal("attention fwd, blind query", run_attn_fwd_blind_query, "query 1 at position 1 sees no key",
                    "smallest key position is 2");
    fx_expect_fatal("attention bwd, blind query", run_attn_bwd_blind_query, "query 1 at position 1 sees no key",
                    "context parallelism");
    fx_expect_fatal("attention, no q_pos", run_attn_no_positions, "q_pos != NULL", "q_pos[Tq]");
    fx_expect_fatal("attention pos, NH % KV", run_attn_pos_heads, "NH % KV == 0", "--num-query-groups");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parallel_kernels_reject_nonsense),
    };
    return cmocka_run_group_tests(tests, guards_setup, guards_teardown);
}
