/* --fp8-param-gather's FP8 copy inside the bf16 parameters (engine/model/llama_fp8.c, place_copies and
 * llama_fp8_cast_all), one rank of a distributed-optimizer layout at a time, no collective needed:
 * where each bucket's copy lies (off this rank's shard's bytes, 16-byte aligned, in a buffer of its own
 * exactly where no half is free), and that the in-place cast, which overwrites the other shards' bf16
 * values as it goes, leaves the bytes, the amax histories and this rank's own bf16 values of a copy
 * kept in a buffer of its own (TWINRUN_FP8_WEIGHTS=own). On a GPU build the same checks run on the
 * device's kernels. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/fixture.h"

#include "model/llama.h"
#include "twinrun/dev.h"

typedef struct shard_model {
    dev_device *d;
    llama_model *m;
} shard_model;

/* Rank `shard` of `shards` optimizer shards of a 3-layer model with FP8 weights kept in FP8, buckets of
 * about bucket_elems elements (0: one bucket a kind), initialised from seed 1234. */
static shard_model make(int hidden, int ffn, int shards, int shard, size_t bucket_elems, const char *where) {
    tr_config c;
    fx_tiny_llama(&c, hidden, ffn, 16, 256);
    c.num_layers = 3, c.bf16 = true, c.fp8 = TR_FP8_MODE_HYBRID, c.fp8_param_gather = true;
    c.use_distributed_optimizer = true, c.fp8_amax_history_len = 4;
    const llama_layout lay = {
        .tp = 1, .pp = 1, .cp = 1, .slots = 1, .opt_shards = shards, .opt_shard = shard, .bucket_elems = bucket_elems};
    char err[512];
    shard_model s;
    s.d = dev_open(0, 0, err, sizeof err);
    assert_non_null(s.d);
    assert_int_equal(setenv("TWINRUN_FP8_WEIGHTS", where, 1), 0);
    s.m = llama_create_shard(&c, &lay, (size_t)shards, NULL, NULL, s.d, dev_stream_default(s.d), err, sizeof err);
    unsetenv("TWINRUN_FP8_WEIGHTS");
    if (!s.m) fail_msg("%s", err);
    llama_init_params(s.m, 1234, 0.02);
    return s;
}

static void drop(shard_model *s) {
    llama_destroy(s->m);
    dev_close(s->d);
}

static void download(const shard_model *s, void *host, const void *dev, size_t bytes) {
    dev_copy_d2h(s->m->stream, host, dev, bytes);
    dev_stream_sync(s->m->stream);
}

/* Where each FP8 bucket's copy lies: inside the bucket's bf16 bytes and off this rank's shard's, or in
 * the own buffer; every weight's copy 16 bytes from the parameters' (or the buffer's) start. Returns the
 * buckets whose copy lies inside the parameters. */
static int check_places(const llama_model *m, int shards) {
    const uint8_t *params = (const uint8_t *)m->params;
    int inside = 0;
    for (int k = 0; k < m->nbuckets; k++) {
        if (!m->bucket_fp8[k]) {
            assert_null(m->fp8.wq_at[k]);
            continue;
        }
        const size_t b = m->bucket_begin[k], n = m->bucket_begin[k + 1] - b;
        const uint8_t *at = m->fp8.wq_at[k], *bf = params + 2 * b;
        if (at >= bf && at < bf + 2 * n) {
            const llama_seg sg = llama_shard_seg(m, shards, m->layout.opt_shard, k);
            const uint8_t *lo = params + 2 * sg.begin, *hi = lo + 2 * sg.len;
            assert_true(at + n <= bf + 2 * n);     /* within the bucket's bf16 bytes */
            assert_true(at + n <= lo || at >= hi); /* and off this rank's shard */
            inside++;
        } else {
            assert_true(at >= m->fp8.wq && at + n <= m->fp8.wq + m->fp8.wq_len);
        }
    }
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *w = &m->params_tab[i];
        if (!w->fp8_stored) continue;
        const uint8_t *q = llama_fp8_stored_at(m, w->offset);
        const uint8_t *base = q >= params && q < params + 2 * m->total_alloc ? params : m->fp8.wq;
        assert_int_equal((size_t)(q - base) % 16, 0);
    }
    return inside;
}

/* The in-place copy against one in a buffer of its own: every FP8 weight's bytes, the FP8 state (the
 * casts' amaxes), and this rank's shard of the bf16 parameters. */
static void check_same_as_own(const shard_model *in, const shard_model *own, int shards) {
    const llama_model *a = in->m, *b = own->m;
    assert_int_equal(a->nparams, b->nparams);
    for (int i = 0; i < a->nparams; i++) {
        const llama_param *w = &a->params_tab[i];
        if (!w->fp8_stored) continue;
        uint8_t *qa = malloc(w->numel), *qb = malloc(w->numel);
        assert_true(qa && qb);
        download(in, qa, llama_fp8_stored_at(a, w->offset), w->numel);
        download(own, qb, llama_fp8_stored_at(b, w->offset), w->numel);
        if (memcmp(qa, qb, w->numel) != 0) fail_msg("%s: the in-place FP8 copy differs from its own buffer's", w->name);
        free(qa), free(qb);
    }
    const size_t ns = llama_fp8_state_count(a);
    float *sa = malloc(ns * sizeof *sa), *sb = malloc(ns * sizeof *sb);
    assert_true(sa && sb);
    llama_fp8_get_state(in->m, sa);
    llama_fp8_get_state(own->m, sb);
    assert_memory_equal(sa, sb, ns * sizeof *sa);
    free(sa), free(sb);
    for (int k = 0; k < a->nbuckets; k++) { /* the shard's bf16 values: the optimizer's, untouched */
        const llama_seg sg = llama_shard_seg(a, shards > 1 ? shards : 1, shards > 1 ? a->layout.opt_shard : 0, k);
        uint16_t *ha = malloc(2 * sg.len + 2), *hb = malloc(2 * sg.len + 2);
        assert_true(ha && hb);
        download(in, ha, (const uint16_t *)a->params + sg.begin, 2 * sg.len);
        download(own, hb, (const uint16_t *)b->params + sg.begin, 2 * sg.len);
        assert_memory_equal(ha, hb, 2 * sg.len);
        free(ha), free(hb);
    }
}

/* Every rank of 1 to 4 shards, one bucket a kind and small buckets: where the copies lie, and the bytes. */
static void test_fp8_weights_placed_and_cast(void **state) {
    (void)state;
    const size_t buckets[] = {0, 20000};
    for (int shards = 1; shards <= 4; shards++)
        for (int r = 0; r < shards; r++)
            for (int bk = 0; bk < 2; bk++) {
                shard_model in = make(64, 128, shards, r, buckets[bk], "params");
                shard_model own = make(64, 128, shards, r, buckets[bk], "own");
                const int inside = check_places(in.m, shards);
                assert_int_equal(check_places(own.m, shards), 0);
                /* one shard: the rank's shard is the whole bucket; three: the middle one straddles it */
                const bool none = shards == 1 || (shards == 3 && r == 1);
                if (none) {
                    assert_int_equal(inside, 0);
                } else {
                    assert_true(inside > 0);
                    assert_int_equal(in.m->fp8.wq_len, 0); /* widths of multiples of 16: every copy inside */
                }
                size_t fp8_elems = 0; /* every FP8 bucket's elements, padding included: one byte each */
                for (int k = 0; k < in.m->nbuckets; k++)
                    if (in.m->bucket_fp8[k]) fp8_elems += in.m->bucket_begin[k + 1] - in.m->bucket_begin[k];
                assert_int_equal(in.m->fp8.wq_in_params, none ? 0 : fp8_elems);
                assert_true(own.m->fp8.wq_len >= fp8_elems && own.m->fp8.wq_in_params == 0);
                check_same_as_own(&in, &own, shards);
                drop(&in), drop(&own);
            }
}

/* Widths that leave a copy's start off a 16-byte boundary at the half's edge: the copy moves within the
 * free half, or takes a buffer of its own, and is still the same bytes. */
static void test_fp8_weights_unaligned_widths(void **state) {
    (void)state;
    for (int shards = 2; shards <= 3; shards++)
        for (int r = 0; r < shards; r++) {
            shard_model in = make(40, 72, shards, r, 3000, "params");
            shard_model own = make(40, 72, shards, r, 3000, "own");
            check_places(in.m, shards);
            check_same_as_own(&in, &own, shards);
            drop(&in), drop(&own);
        }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fp8_weights_placed_and_cast),
        cmocka_unit_test(test_fp8_weights_unaligned_widths),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
