/* kern_embedding_forward_adamw, the lookup of a pending AdamW update (the optimizer's step ahead issues
 * the input embedding's update after the next forward pass has read its rows): bit for bit the lookup
 * kern_embedding_forward_slice makes after kern_adamw_update, for each way the master is kept (fp32 with
 * a bf16 model copy, 16-bit remainders, fp32 training where the master is the model), gradients fp32 or
 * bf16, a vocabulary slice with tokens outside it and repeated; and it writes none of the state. */
#include "common/fixture_kern.h"
#include "twinrun/master_split.h"

enum { VS = 5, V = 37, C = 24, N = 19 }; /* the slice [VS, VS + V) of a 50-row vocabulary */

typedef enum { MASTER_FP32, MASTER_REM, MASTER_IS_MODEL } master_kind;

typedef struct table {
    float *master; /* [V, C] or NULL */
    int16_t *rem;  /* [V, C] or NULL */
    tr_buf wte;    /* [V, C] the model's copy */
    tr_buf grad;   /* [V, C] */
    float *m, *v;  /* [V, C] */
} table;

/* A table with random weights, moments and gradients, kept as `kind` says. */
static table table_make(kt_rng *r, master_kind kind, tr_dtype grad_dt) {
    const size_t n = (size_t)V * C;
    float *w = kt_host(n), *m = kt_host(n), *v = kt_host(n), *g = kt_host(n);
    kt_fill(r, w, n, 0.5f);
    kt_fill(r, m, n, 1e-2f);
    kt_fill(r, g, n, 1.0f);
    for (size_t i = 0; i < n; i++) v[i] = (float)(kt_uniform(r) * 1e-4);
    table t = {0};
    if (kind == MASTER_REM) {
        uint16_t *h = malloc(n * 2);
        int16_t *rr = malloc(n * 2);
        assert_non_null(h);
        assert_non_null(rr);
        for (size_t i = 0; i < n; i++) tr_master_split(w[i], &h[i], &rr[i]);
        t.wte = tr_buf_make(kt_alloc(n * 2), TR_BF16);
        t.rem = kt_alloc(n * 2);
        dev_copy_h2d(kt_s, t.wte.p, h, n * 2);
        dev_copy_h2d(kt_s, t.rem, rr, n * 2);
        dev_stream_sync(kt_s);
        free(h), free(rr);
    } else {
        t.master = kt_upload_f32(w, n);
        t.wte = kind == MASTER_IS_MODEL ? tr_buf_make(t.master, TR_F32) : kt_upload(w, n, TR_BF16);
    }
    t.grad = kt_upload(g, n, grad_dt);
    t.m = kt_upload_f32(m, n), t.v = kt_upload_f32(v, n);
    free(w), free(m), free(v), free(g);
    return t;
}

static void table_free(table *t) {
    if (t->wte.p != (void *)t->master) kt_free(t->wte.p);
    kt_free(t->master), kt_free(t->rem), kt_free(t->grad.p), kt_free(t->m), kt_free(t->v);
}

/* The device bytes of b's n elements. */
static void *bytes_of(const void *p, size_t bytes) {
    void *h = malloc(bytes);
    assert_non_null(h);
    dev_copy_d2h(kt_s, h, p, bytes);
    dev_stream_sync(kt_s);
    return h;
}

static void check_kind(master_kind kind, tr_dtype grad_dt, tr_dtype out_dt, uint64_t seed) {
    kt_rng r = kt_rng_make(seed);
    table t = table_make(&r, kind, grad_dt);
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = kt_below(&r, 50); /* some outside the slice, some repeated */
    tok[0] = VS, tok[1] = VS + V - 1, tok[2] = VS - 1, tok[3] = VS + V, tok[4] = VS; /* the edges */
    int32_t *dtok = kt_upload_i32(tok, N);
    const kern_adamw_desc ad = {
        .lr = 3e-2f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .weight_decay = 0.1f, .grad_scale = 0.75f, .step = 3};
    const size_t n = (size_t)V * C, esz = tr_dtype_size(out_dt);
    void *m0 = bytes_of(t.m, n * 4), *v0 = bytes_of(t.v, n * 4), *w0 = bytes_of(t.wte.p, n * tr_dtype_size(t.wte.dt));
    tr_buf ahead = tr_buf_make(kt_alloc((size_t)N * C * esz), out_dt),
           after = tr_buf_make(kt_alloc((size_t)N * C * esz), out_dt);
    kern_embedding_forward_adamw(kt_s, ahead, dtok, &ad, t.master, t.rem, t.wte, t.grad, t.m, t.v, VS, N, C, V);
    /* nothing written: the update that follows finds the state as it was */
    void *m1 = bytes_of(t.m, n * 4), *v1 = bytes_of(t.v, n * 4), *w1 = bytes_of(t.wte.p, n * tr_dtype_size(t.wte.dt));
    assert_memory_equal(m0, m1, n * 4);
    assert_memory_equal(v0, v1, n * 4);
    assert_memory_equal(w0, w1, n * tr_dtype_size(t.wte.dt));
    kern_adamw_update(kt_s, &ad, t.master, t.rem, t.wte, t.grad, t.m, t.v, n);
    kern_embedding_forward_slice(kt_s, after, dtok, t.wte, VS, N, C, V);
    unsigned char *a = bytes_of(ahead.p, (size_t)N * C * esz), *b = bytes_of(after.p, (size_t)N * C * esz);
    assert_memory_equal(a, b, (size_t)N * C * esz);
    /* the update moved the rows (a lookup of the old table would not pass) */
    unsigned char *old = malloc((size_t)N * C * esz);
    assert_non_null(old);
    tr_buf oldb = tr_buf_make(old, out_dt);
    int moved = 0;
    for (int i = 0; i < N; i++) {
        const int row = tok[i] - VS;
        for (int c = 0; c < C; c++) {
            float was = 0.0f;
            if (row >= 0 && row < V) {
                const size_t e = (size_t)row * C + c;
                was = t.wte.dt == TR_BF16 ? tr_bf16_to_f32(((const uint16_t *)w0)[e]) : ((const float *)w0)[e];
            }
            if (out_dt == TR_BF16) ((uint16_t *)oldb.p)[(size_t)i * C + c] = tr_f32_to_bf16(was);
            else ((float *)oldb.p)[(size_t)i * C + c] = was;
        }
    }
    for (size_t k = 0; k < (size_t)N * C; k++) moved += memcmp(old + k * esz, a + k * esz, esz) != 0;
    assert_true(moved > N * C / 2);
    free(old), free(a), free(b), free(m0), free(v0), free(w0), free(m1), free(v1), free(w1);
    kt_free(ahead.p), kt_free(after.p), kt_free(dtok);
    table_free(&t);
}

static void test_fp32_master_bf16_model(void **state) {
    (void)state;
    check_kind(MASTER_FP32, TR_F32, TR_BF16, 3);
    check_kind(MASTER_FP32, TR_BF16, TR_F32, 4);
}

static void test_remainders(void **state) {
    (void)state;
    check_kind(MASTER_REM, TR_F32, TR_F32, 5); /* fp32 out: the model copy's rounding shows whole */
    check_kind(MASTER_REM, TR_BF16, TR_BF16, 6);
}

static void test_fp32_training(void **state) {
    (void)state;
    check_kind(MASTER_IS_MODEL, TR_F32, TR_F32, 7);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp32_master_bf16_model),
        cmocka_unit_test(test_remainders),
        cmocka_unit_test(test_fp32_training),
    };
    return cmocka_run_group_tests(tests, kt_setup, kt_teardown);
}
