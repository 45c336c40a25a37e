/* kern_sum_squares_ranges and kern_adamw_update_ranges against the per-range kernels they replace:
 * 300 ranges of mixed sizes (more than one launch's chunk on a GPU), gaps between ranges that must
 * stay untouched, empty ranges, two weight decays, bf16 gradients and model copy. AdamW must match
 * bit for bit (the same arithmetic per element); the sum of squares to fp32 rounding (a GPU sums in
 * another order; the twin, range by range from the last, gives the same bits). The sum over every range
 * in one call and in calls over pieces of them, the highest piece first (the grad norm's sums during the
 * backward pass), give the same bits on every backend. */
#include "common/fixture_kern.h"

enum { NR = 300 };

static size_t make_ranges(kern_range *r, kt_rng *rng) {
    size_t at = 0;
    for (int i = 0; i < NR; i++) {
        at += (size_t)kt_below(rng, 3); /* a gap of 0..2 elements */
        const size_t len = i % 7 == 3 ? 0 : (size_t)(1 + kt_below(rng, i % 5 == 0 ? 5000 : 300));
        r[i] = (kern_range){at, at + len, i % 4 == 1 ? 0.0f : 0.1f};
        at += len;
    }
    return at + 3;
}

/* The ranges of make_ranges over a host buffer of *n values, uniform in [-2, 2), from seed. */
static float *ranges_and_values(uint64_t seed, kern_range r[NR], size_t *n) {
    kt_rng rng = kt_rng_make(seed);
    *n = make_ranges(r, &rng);
    float *x = kt_host(*n);
    kt_fill(&rng, x, *n, 2.0f);
    return x;
}

static void test_sum_squares_ranges_is_the_sum_of_the_ranges(void **state) {
    (void)state;
    kern_range r[NR];
    size_t n;
    float *x = ranges_and_values(81, r, &n);
    for (int dti = 0; dti < 2; dti++) {
        const tr_dtype dt = dti ? TR_BF16 : TR_F32;
        tr_buf dx = kt_upload(x, n, dt);
        float *acc = kt_upload_f32((float[]){0.5f}, 1), *acc_ref = kt_upload_f32((float[]){0.5f}, 1);
        kern_sum_squares_ranges(kt_s, acc, dx, r, NR);
        for (int i = NR - 1; i >= 0; i--)
            kern_sum_squares(kt_s, acc_ref, tr_buf_at(dx, r[i].begin), r[i].end - r[i].begin);
        float got, want;
        kt_download_f32(&got, acc, 1);
        kt_download_f32(&want, acc_ref, 1);
        printf("  sum_squares_ranges %s: %.9g vs per range %.9g\n", tr_dtype_name(dt), (double)got, (double)want);
        if (kt_backend_is_twin()) assert_memory_equal(&got, &want, sizeof got);
        else assert_true(fabs((double)got - (double)want) <= 1e-5 * fabs((double)want));
        kt_free(acc_ref), kt_free(acc), kt_free(dx.p);
    }
    free(x);
}

static void test_sum_squares_ranges_in_pieces_is_one_call(void **state) {
    (void)state;
    kern_range r[NR];
    size_t n;
    float *x = ranges_and_values(83, r, &n);
    /* cuts within and across a GPU launch's chunk of ranges, the highest piece summed first */
    const int cuts[] = {NR, 297, 290, 200, 130, 128, 127, 5, 1, 0};
    for (int dti = 0; dti < 2; dti++) {
        const tr_dtype dt = dti ? TR_BF16 : TR_F32;
        tr_buf dx = kt_upload(x, n, dt);
        float *whole = kt_upload_f32((float[]){0.25f}, 1), *pieces = kt_upload_f32((float[]){0.25f}, 1);
        kern_sum_squares_ranges(kt_s, whole, dx, r, NR);
        for (int c = 0; c + 1 < (int)(sizeof cuts / sizeof cuts[0]); c++)
            kern_sum_squares_ranges(kt_s, pieces, dx, r + cuts[c + 1], cuts[c] - cuts[c + 1]);
        float a, b;
        kt_download_f32(&a, whole, 1);
        kt_download_f32(&b, pieces, 1);
        printf("  sum_squares_ranges %s: one call %.9g, in pieces %.9g\n", tr_dtype_name(dt), (double)a, (double)b);
        assert_memory_equal(&a, &b, sizeof a);
        kt_free(pieces), kt_free(whole), kt_free(dx.p);
    }
    free(x);
}

static void test_adamw_ranges_is_adamw_per_range(void **state) {
    (void)state;
    kt_rng rng = kt_rng_make(82);
    kern_range r[NR];
    const size_t n = make_ranges(r, &rng);
    float *w = kt_host(n), *g = kt_host(n), *m = kt_host(n), *v = kt_host(n);
    kt_fill(&rng, w, n, 1.0f), kt_fill(&rng, g, n, 0.1f), kt_fill(&rng, m, n, 0.01f);
    for (size_t i = 0; i < n; i++) v[i] = (float)(kt_uniform(&rng) * 1e-4);
    const kern_adamw_desc ad = {.lr = 3e-4f,
                                .beta1 = 0.9f,
                                .beta2 = 0.95f,
                                .eps = 1e-8f,
                                .weight_decay = 123.0f,
                                .grad_scale = 0.7f,
                                .step = 5};
    float *out[2][4]; /* [multi, per range][master, m, v, model] */
    for (int way = 0; way < 2; way++) {
        float *dw = kt_upload_f32(w, n), *dm = kt_upload_f32(m, n), *dv = kt_upload_f32(v, n);
        tr_buf dg = kt_upload(g, n, TR_BF16), model = kt_upload(w, n, TR_BF16);
        if (way == 0) {
            kern_adamw_update_ranges(kt_s, &ad, r, NR, dw, NULL, model, dg, dm, dv);
        } else {
            for (int i = 0; i < NR; i++) {
                kern_adamw_desc d = ad;
                d.weight_decay = r[i].weight_decay;
                const size_t b = r[i].begin;
                kern_adamw_update(kt_s, &d, dw + b, NULL, tr_buf_at(model, b), tr_buf_at(dg, b), dm + b, dv + b,
                                  r[i].end - b);
            }
        }
        for (int k = 0; k < 4; k++) out[way][k] = kt_host(n);
        kt_download_f32(out[way][0], dw, n);
        kt_download_f32(out[way][1], dm, n);
        kt_download_f32(out[way][2], dv, n);
        kt_download(out[way][3], model, n);
        kt_free(model.p), kt_free(dg.p), kt_free(dv), kt_free(dm), kt_free(dw);
    }
    for (int k = 0; k < 4; k++) {
        assert_memory_equal(out[0][k], out[1][k], n * sizeof(float));
        free(out[0][k]), free(out[1][k]);
    }
    /* the gaps are untouched: master there is still w */
    float *dw = kt_upload_f32(w, n), *dm = kt_upload_f32(m, n), *dv = kt_upload_f32(v, n);
    tr_buf dg = kt_upload(g, n, TR_F32);
    kern_adamw_update_ranges(kt_s, &ad, r, NR, dw, NULL, tr_buf_make(dw, TR_F32), dg, dm, dv);
    float *after = kt_host(n);
    kt_download_f32(after, dw, n);
    size_t at = 0;
    for (int i = 0; i < NR; i++) {
        for (; at < r[i].begin; at++) assert_memory_equal(&after[at], &w[at], sizeof(float));
        at = r[i].end;
    }
    for (; at < n; at++) assert_memory_equal(&after[at], &w[at], sizeof(float));
    free(after);
    kt_free(dg.p), kt_free(dv), kt_free(dm), kt_free(dw);
    free(v), free(m), free(g), free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sum_squares_ranges_is_the_sum_of_the_ranges),
        cmocka_unit_test(test_sum_squares_ranges_in_pieces_is_one_call),
        cmocka_unit_test(test_adamw_ranges_is_adamw_per_range),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
