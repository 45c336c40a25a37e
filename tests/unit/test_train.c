/* The training step: determinism, layout-independent initialisation, gradient accumulation
 * across micro-batches, Megatron's two loss conventions, and the NaN check. */
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
#include "optim/optimizer.h"
#include "train/step.h"
#include "twinrun/err.h"

static tr_config tiny(int mbs, int gbs) {
    tr_config c;
    fx_tiny_llama(&c, 32, 64, 8, 100);
    c.micro_batch_size = mbs, c.global_batch_size = gbs;
    c.train_iters = 4, c.lr = 1e-2, c.min_lr = 1e-3, c.clip_grad = 1.0, c.weight_decay = 0.1;
    return c;
}

typedef struct gen {
    int mbs, T, vocab;
    int64_t sample;  /* next global sample */
    float mask_last; /* loss-mask value of each sample's last token */
} gen;

/* Sample s is a fixed pseudo-random sequence, so any micro-batching sees the same samples. */
static int gen_batch(void *ctx, int micro, int32_t *tok, int32_t *lab, float *mask, int32_t *pos, char *err,
                     size_t errlen) {
    (void)micro, (void)err, (void)errlen;
    gen *g = ctx;
    for (int b = 0; b < g->mbs; b++, g->sample++)
        for (int t = 0; t < g->T; t++) {
            int i = b * g->T + t;
            tok[i] = (int32_t)((g->sample * 7919 + t * 104729 + 13) % g->vocab);
            lab[i] = (int32_t)((g->sample * 7919 + (t + 1) * 104729 + 13) % g->vocab);
            mask[i] = t == g->T - 1 ? g->mask_last : 1.0f;
            pos[i] = t;
        }
    return 0;
}

typedef struct run {
    dev_device *d;
    llama_model *m;
    tr_optimizer *o;
} run;

static run open_run(const tr_config *c) {
    char err[512];
    run r;
    r.d = dev_open(0, 0, err, sizeof err);
    assert_non_null(r.d);
    r.m = llama_create(c, r.d, dev_stream_default(r.d), err, sizeof err);
    assert_non_null(r.m);
    r.o = optim_create(r.m, c, NULL, err, sizeof err);
    assert_non_null(r.o);
    llama_init_params(r.m, c->seed, c->init_method_std);
    return r;
}

static void close_run(run *r) {
    optim_destroy(r->o, r->m);
    llama_destroy(r->m);
    dev_close(r->d);
}

static void train_n(run *r, const tr_config *c, int steps, float *losses) {
    gen g = {c->micro_batch_size, c->seq_length, c->vocab_size, 0, 1.0f};
    char err[512];
    for (int k = 0; k < steps; k++) {
        tr_step_result res;
        int micro = c->global_batch_size / c->micro_batch_size;
        assert_int_equal(train_step(r->m, r->o, c, NULL, micro, 1e-2, gen_batch, &g, &res, err, sizeof err), 0);
        losses[k] = (float)res.loss;
    }
}

static void test_same_seed_same_bits(void **state) {
    (void)state;
    tr_config c = tiny(2, 4);
    run a = open_run(&c), b = open_run(&c);
    float la[3], lb[3];
    train_n(&a, &c, 3, la);
    train_n(&b, &c, 3, lb);
    assert_memory_equal(la, lb, sizeof la);
    float *wa = malloc(a.m->total * 4), *wb = malloc(b.m->total * 4);
    llama_get_master(a.m, wa);
    llama_get_master(b.m, wb);
    assert_memory_equal(wa, wb, a.m->total * 4);
    /* and the run really trained: the loss went down */
    assert_true(la[2] < la[0]);
    free(wa), free(wb);
    close_run(&a), close_run(&b);
}

static void test_init_depends_only_on_seed_name_element(void **state) {
    (void)state;
    /* micro-batch, sequence and batch do not change the initial model */
    tr_config c1 = tiny(1, 1), c2 = tiny(4, 8);
    c2.seq_length = 4;
    run a = open_run(&c1), b = open_run(&c2);
    assert_int_equal(a.m->total, b.m->total);
    float *wa = malloc(a.m->total * 4), *wb = malloc(b.m->total * 4);
    llama_get_master(a.m, wa);
    llama_get_master(b.m, wb);
    assert_memory_equal(wa, wb, a.m->total * 4);
    /* element e of a parameter is the formula's value, so a TP shard can compute its own slice */
    int p = llama_find_param(a.m, "model.layers.1.self_attn.o_proj.weight");
    assert_true(p >= 0);
    const llama_param *pp = &a.m->params_tab[p];
    assert_true(wa[pp->offset + 17] ==
                llama_init_value(c1.seed, pp->name, 17, LLAMA_INIT_SCALED, c1.init_method_std, c1.num_layers));
    /* another seed gives another model */
    assert_true(llama_init_value(c1.seed + 1, pp->name, 17, LLAMA_INIT_NORMAL, 0.02, 2) !=
                llama_init_value(c1.seed, pp->name, 17, LLAMA_INIT_NORMAL, 0.02, 2));
    free(wa), free(wb);
    close_run(&a), close_run(&b);
}

static void test_init_statistics(void **state) {
    (void)state;
    /* N(0, std) and the scaled N(0, std / sqrt(2L)) for output layers: 200k draws, 1% on std */
    const int n = 200000;
    double s1 = 0, s2 = 0, t2 = 0;
    for (int e = 0; e < n; e++) {
        double x = llama_init_value(1234, "w", (size_t)e, LLAMA_INIT_NORMAL, 0.02, 8);
        double y = llama_init_value(1234, "w", (size_t)e, LLAMA_INIT_SCALED, 0.02, 8);
        s1 += x, s2 += x * x, t2 += y * y;
    }
    double mean = s1 / n, sd = sqrt(s2 / n - mean * mean), sd_scaled = sqrt(t2 / n);
    assert_true(fabs(mean) < 0.02 * 0.01);
    assert_true(fabs(sd / 0.02 - 1.0) < 0.01);
    assert_true(fabs(sd_scaled / (0.02 / 4.0) - 1.0) < 0.01);
    assert_true(llama_init_value(1, "w", 0, LLAMA_INIT_ONES, 0.02, 8) == 1.0f);
}

/* Two micro-batches of 2 accumulate to the gradient of one micro-batch of 4. */
static void test_gradient_accumulation(void **state) {
    (void)state;
    for (int per_token = 0; per_token < 2; per_token++) {
        tr_config c2 = tiny(2, 4), c4 = tiny(4, 4);
        c2.calculate_per_token_loss = c4.calculate_per_token_loss = per_token;
        run a = open_run(&c2), b = open_run(&c4);
        gen ga = {2, c2.seq_length, c2.vocab_size, 0, 1.0f}, gb = {4, c4.seq_length, c4.vocab_size, 0, 1.0f};
        tr_step_result ra, rb;
        char err[256];
        assert_int_equal(train_forward_backward(a.m, a.o, &c2, NULL, 2, gen_batch, &ga, &ra, err, sizeof err), 0);
        assert_int_equal(train_forward_backward(b.m, b.o, &c4, NULL, 1, gen_batch, &gb, &rb, err, sizeof err), 0);
        assert_true(fabs(ra.loss - rb.loss) <= 1e-6 * fabs(rb.loss));
        float *ga_ = malloc(a.m->total * 4), *gb_ = malloc(b.m->total * 4);
        llama_get_grads(a.m, ga_);
        llama_get_grads(b.m, gb_);
        double num = 0, den = 0;
        for (size_t i = 0; i < a.m->total; i++) num += pow(ga_[i] - gb_[i], 2), den += pow(gb_[i], 2);
        assert_true(den > 0);
        assert_true(sqrt(num / den) < 1e-5);
        free(ga_), free(gb_);
        close_run(&a), close_run(&b);
    }
}

/* Megatron's two conventions (per-token weighs every token equally; the default weighs every
 * micro-batch's mean equally) agree when every micro-batch has the same number of tokens. */
static void test_loss_conventions_agree_on_equal_counts(void **state) {
    (void)state;
    tr_config c = tiny(1, 2);
    run a = open_run(&c);
    gen g = {1, c.seq_length, c.vocab_size, 0, 0.0f};
    tr_step_result r0, r1;
    char err[256];
    assert_int_equal(train_forward_backward(a.m, a.o, &c, NULL, 2, gen_batch, &g, &r0, err, sizeof err), 0);
    float *g0 = malloc(a.m->total * 4), *g1 = malloc(a.m->total * 4);
    llama_get_grads(a.m, g0);
    c.calculate_per_token_loss = true;
    g.sample = 0;
    assert_int_equal(train_forward_backward(a.m, a.o, &c, NULL, 2, gen_batch, &g, &r1, err, sizeof err), 0);
    llama_get_grads(a.m, g1);
    assert_true(r0.num_tokens == 2.0 * (c.seq_length - 1));
    /* equal token counts per micro-batch here, so the two gradients agree */
    double num = 0, den = 0;
    for (size_t i = 0; i < a.m->total; i++) num += pow(g0[i] - g1[i], 2), den += pow(g1[i], 2);
    assert_true(sqrt(num / den) < 1e-5);
    free(g0), free(g1);
    close_run(&a);
}

static int nan_batch(void *ctx, int micro, int32_t *tok, int32_t *lab, float *mask, int32_t *pos, char *err,
                     size_t errlen) {
    int rc = gen_batch(ctx, micro, tok, lab, mask, pos, err, errlen);
    mask[0] = NAN; /* poisons the loss */
    return rc;
}

static void test_nan_check_stops_the_update(void **state) {
    (void)state;
    tr_config c = tiny(1, 1);
    run a = open_run(&c);
    float *before = malloc(a.m->total * 4), *after = malloc(a.m->total * 4);
    llama_get_master(a.m, before);
    gen g = {1, c.seq_length, c.vocab_size, 0, 1.0f};
    tr_step_result res;
    char err[512];
    assert_int_equal(train_step(a.m, a.o, &c, NULL, 1, 1e-2, nan_batch, &g, &res, err, sizeof err), TR_EXIT_NAN);
    assert_non_null(strstr(err, "NaN"));
    llama_get_master(a.m, after);
    assert_memory_equal(before, after, a.m->total * 4);
    free(before), free(after);
    close_run(&a);
}

/* --decoupled-lr: the embedding and output layer take their own learning rate (here 0: they stay put)
 * while every other parameter moves; at the step's lr the update is the plain one, bit for bit. */
static void test_decoupled_lr_moves_only_embedding_and_head(void **state) {
    (void)state;
    tr_config c = tiny(2, 2);
    run a = open_run(&c), b = open_run(&c);
    size_t n = a.m->total;
    float *w0 = malloc(n * 4), *wa = malloc(n * 4), *wb = malloc(n * 4), loss[1];
    llama_get_master(a.m, w0);
    optim_set_decoupled_lr(a.o, 0.0);
    train_n(&a, &c, 1, loss);
    optim_set_decoupled_lr(b.o, 1e-2); /* = the step's lr */
    train_n(&b, &c, 1, loss);
    llama_get_master(a.m, wa);
    llama_get_master(b.m, wb);
    for (int i = 0; i < a.m->nparams; i++) {
        const llama_param *p = &a.m->params_tab[i];
        const bool decoupled = i == a.m->p_embed || i == a.m->p_head;
        const bool moved = memcmp(w0 + p->offset, wa + p->offset, p->numel * 4) != 0;
        if (moved == decoupled) fail_msg("%s %s at decoupled lr 0", p->name, moved ? "moved" : "stayed");
    }
    run r = open_run(&c);
    float *wr = malloc(n * 4);
    train_n(&r, &c, 1, loss);
    llama_get_master(r.m, wr);
    assert_memory_equal(wb, wr, n * 4);
    free(w0), free(wa), free(wb), free(wr);
    close_run(&a), close_run(&b), close_run(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_same_seed_same_bits),
        cmocka_unit_test(test_init_depends_only_on_seed_name_element),
        cmocka_unit_test(test_init_statistics),
        cmocka_unit_test(test_gradient_accumulation),
        cmocka_unit_test(test_loss_conventions_agree_on_equal_counts),
        cmocka_unit_test(test_nan_check_stops_the_update),
        cmocka_unit_test(test_decoupled_lr_moves_only_embedding_and_head),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
