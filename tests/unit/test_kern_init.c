/* kern_init_param: every element is bit for bit the host generator's value (twinrun/init_normal.h),
 * for a fused two-segment row-parallel shard, a 1-D parameter large enough that the CUDA kernel
 * hands some values back to the host (about one in 30 000: ~30 here), constants, and a part of a shard
 * that starts inside it (kern_init_desc.first); and llama_init_value
 * (the engine's host path) agrees with it. */
#include "common/fixture_kern.h"
#include "model/llama.h"
#include "twinrun/init_normal.h"

static float expected(const kern_init_desc *d, size_t i) {
    if (!d->normal) return d->constant;
    return (float)tr_init_normal_double(d->key,
                                        tr_init_global_index((uint64_t)d->first + i, d->cols, d->gcols, d->col0,
                                                             d->nseg, d->seg_local1, d->seg_global0, d->seg_global1),
                                        d->std);
}

/* Runs the kernel over n elements and compares every bit; returns the host copy. */
static void expect_bits(const char *what, const kern_init_desc *d, size_t n) {
    float *dev = kt_alloc(n * sizeof(float));
    float *got = kt_host(n), *want = kt_host(n);
    kern_init_param(kt_s, d, dev, n);
    kt_download_f32(got, dev, n);
    for (size_t i = 0; i < n; i++) want[i] = expected(d, i);
    size_t diff = 0, first = n;
    for (size_t i = 0; i < n; i++)
        if (memcmp(&got[i], &want[i], sizeof(float)) != 0) {
            if (first == n) first = i;
            diff++;
        }
    printf("  %-48s %zu elements, %zu differ\n", what, n, diff);
    if (diff)
        fail_msg("%s: %zu of %zu elements differ from the host generator (first at %zu: %.9g vs %.9g)", what, diff, n,
                 first, (double)got[first], (double)want[first]);
    free(want);
    free(got);
    kt_free(dev);
}

static void test_init_is_the_host_generator_bit_for_bit(void **state) {
    (void)state;
    /* tensor-parallel rank 1 of 2 of a fused [gate; up] fc1 with 16 global rows of 12 columns: local
     * rows 0..3 are global 4..7, local rows 4..7 global 12..15 */
    kern_init_desc fused = {.normal = true,
                            .key = tr_init_key(1234, "model.layers.3.mlp.gate_up_proj.weight"),
                            .std = 0.02,
                            .cols = 12,
                            .gcols = 12,
                            .col0 = 0,
                            .nseg = 2,
                            .seg_local1 = 4,
                            .seg_global0 = 4,
                            .seg_global1 = 12};
    expect_bits("fused fc1 shard (two segments)", &fused, 8 * 12);
    /* the same shard from local element 41 on (a distributed optimizer's shard of the master weights
     * starting inside the parameter, across the segment boundary at local row 4) */
    kern_init_desc fused_tail = fused;
    fused_tail.first = 41;
    expect_bits("fused fc1 shard from local element 41", &fused_tail, 8 * 12 - 41);
    float *whole = kt_alloc(8 * 12 * sizeof(float)), *tail = kt_alloc((8 * 12 - 41) * sizeof(float));
    float *hw = kt_host(8 * 12), *ht = kt_host(8 * 12 - 41); /* [96], [55] */
    kern_init_param(kt_s, &fused, whole, 8 * 12);
    kern_init_param(kt_s, &fused_tail, tail, 8 * 12 - 41);
    kt_download_f32(hw, whole, 8 * 12);
    kt_download_f32(ht, tail, 8 * 12 - 41);
    assert_memory_equal(ht, hw + 41, (8 * 12 - 41) * sizeof(float)); /* the tail is the whole shard's tail */
    free(hw), free(ht);
    kt_free(whole), kt_free(tail);
    /* a row-parallel shard: columns 6..11 of 12 */
    kern_init_desc rowpar = {.normal = true,
                             .key = tr_init_key(7, "model.layers.0.self_attn.o_proj.weight"),
                             .std = 0.02 / sqrt(8.0),
                             .cols = 6,
                             .gcols = 12,
                             .col0 = 6,
                             .nseg = 1};
    expect_bits("row-parallel shard (columns 6..11)", &rowpar, 10 * 6);
    kern_init_desc big = {.normal = true,
                          .key = tr_init_key(42, "model.embed_tokens.weight"),
                          .std = 0.02,
                          .cols = 1,
                          .gcols = 1,
                          .nseg = 1};
    expect_bits("1-D, 1M elements (~30 host fix-ups on a GPU)", &big, (size_t)1 << 20);
    kern_init_desc ones = {.normal = false, .constant = 1.0f, .cols = 1, .gcols = 1, .nseg = 1};
    expect_bits("constant 1", &ones, 1000);
}

static void test_host_value_matches_the_kernel(void **state) {
    (void)state;
    kern_init_desc d = {
        .normal = true, .key = tr_init_key(1234, "lm_head.weight"), .std = 0.02, .cols = 1, .gcols = 1, .nseg = 1};
    for (size_t e = 0; e < 1000; e += 37) {
        const float a = llama_init_value(1234, "lm_head.weight", e, LLAMA_INIT_NORMAL, 0.02, 16);
        const float b = expected(&d, e);
        assert_memory_equal(&a, &b, sizeof a);
    }
    const float s = llama_init_value(5, "x", 3, LLAMA_INIT_SCALED, 0.02, 16);
    const float t = (float)tr_init_normal_double(tr_init_key(5, "x"), 3, 0.02 / sqrt(32.0));
    assert_memory_equal(&s, &t, sizeof s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_init_is_the_host_generator_bit_for_bit),
        cmocka_unit_test(test_host_value_matches_the_kernel),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
