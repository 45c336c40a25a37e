/* Hugging Face import/export of the model: round trip, and every way a checkpoint can disagree
 * with the model (missing tensor, wrong shape, extra tensor) is refused with a message that names it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/fixture.h"

#include "ckpt/hf_export.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/llama.h"
#include "model/llama_hf.h"

#define TINY FX_TINY_GQA

typedef struct fixture {
    tr_config cfg;
    dev_device *d;
    llama_model *m;
    char dir[256];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    char err[512];
    if (fx_tiny_gqa(&f->cfg, NULL, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    f->d = dev_open(0, 0, err, sizeof err);
    f->m = llama_create(&f->cfg, f->d, dev_stream_default(f->d), err, sizeof err);
    if (!f->m) return -1;
    if (fx_tmpdir(f->dir, sizeof f->dir, "hf-import")) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    fx_rm_rf(f->dir);
    llama_destroy(f->m);
    dev_close(f->d);
    free(f);
    return 0;
}

static void test_round_trip(void **state) {
    fixture *f = *state;
    char err[512], path[300];
    float *a = malloc(f->m->total * 4), *b = malloc(f->m->total * 4);
    assert_int_equal(llama_hf_read(f->m, TINY, a, err, sizeof err), 0);
    snprintf(path, sizeof path, "%s/model.safetensors", f->dir);
    assert_int_equal(llama_hf_write(f->m, a, path, "", err, sizeof err), 0);
    assert_int_equal(llama_hf_read(f->m, f->dir, b, err, sizeof err), 0);
    assert_memory_equal(a, b, f->m->total * 4);
    /* the fused fc1 holds gate_proj rows first, then up_proj rows */
    st_file st;
    assert_int_equal(st_open(&st, TINY "/model.safetensors", err, sizeof err), 0);
    int p = llama_find_param(f->m, "model.layers.1.mlp.gate_up_proj.weight");
    const llama_param *pp = &f->m->params_tab[p];
    int64_t shape[2] = {pp->shape[0] / 2, pp->shape[1]};
    float *up = malloc(pp->numel / 2 * 4);
    assert_int_equal(st_read_f32(&st, "model.layers.1.mlp.up_proj.weight", up, shape, 2, err, sizeof err), 0);
    assert_memory_equal(up, a + pp->offset + pp->numel / 2, pp->numel / 2 * 4);
    st_close(&st);
    free(up), free(a), free(b);
}

/* Writes the tiny model with one change: tensor `drop` left out, `reshape` given one row less, or
 * an `extra` tensor added; then expects llama_hf_read to refuse and to name `expect`. */
static void expect_refused(fixture *f, const char *drop, const char *reshape, const char *extra, const char *expect) {
    char err[512], path[300];
    st_file st;
    assert_int_equal(st_open(&st, TINY "/model.safetensors", err, sizeof err), 0);
    st_writer *w = st_writer_new();
    for (int i = 0; i < st.n; i++) {
        const st_tensor *t = &st.tensors[i];
        if (drop && !strcmp(t->name, drop)) continue;
        int64_t numel = 1;
        for (int k = 0; k < t->ndim; k++) numel *= t->shape[k];
        float *buf = malloc((size_t)numel * 4);
        assert_int_equal(st_read_f32(&st, t->name, buf, t->shape, t->ndim, err, sizeof err), 0);
        int64_t shape[8];
        memcpy(shape, t->shape, sizeof shape);
        if (reshape && !strcmp(t->name, reshape)) shape[0]--;
        assert_int_equal(st_writer_add(w, t->name, ST_F32, shape, t->ndim, buf, err, sizeof err), 0);
        free(buf);
    }
    if (extra) {
        float z[4] = {0};
        int64_t shape[1] = {4};
        assert_int_equal(st_writer_add(w, extra, ST_F32, shape, 1, z, err, sizeof err), 0);
    }
    snprintf(path, sizeof path, "%s/model.safetensors", f->dir);
    assert_int_equal(st_writer_write(w, path, err, sizeof err), 0);
    st_writer_free(w);
    st_close(&st);
    float *host = malloc(f->m->total * 4);
    err[0] = 0;
    assert_int_equal(llama_hf_read(f->m, f->dir, host, err, sizeof err), -1);
    if (!strstr(err, expect)) fail_msg("message \"%s\" does not name \"%s\"", err, expect);
    free(host);
}

static void test_missing_tensor(void **state) {
    expect_refused(*state, "model.layers.0.self_attn.k_proj.weight", NULL, NULL,
                   "model.layers.0.self_attn.k_proj.weight");
}

static void test_wrong_shape(void **state) {
    expect_refused(*state, NULL, "model.layers.1.mlp.down_proj.weight", NULL, "model.layers.1.mlp.down_proj.weight");
}

static void test_extra_tensor(void **state) {
    expect_refused(*state, NULL, NULL, "model.layers.0.self_attn.q_proj.bias", "model.layers.0.self_attn.q_proj.bias");
}

/* Imports the Hugging Face directory `dir` (its config.json decides the model; micro-batch and sequence
 * from `like`) and leaves the logits of tok/lab in logits [N, Vl]; returns the config it read. */
static hf_llama_config import_logits(fixture *f, const char *dir, const tr_config *like, const int32_t *tok,
                                     const int32_t *lab, float *logits) {
    char err[512], path[400];
    tr_config c2;
    tr_config_defaults(&c2);
    hf_llama_config hf;
    snprintf(path, sizeof path, "%s/config.json", dir);
    assert_int_equal(hf_config_load(&hf, path, err, sizeof err), 0);
    assert_int_equal(hf_config_apply(&hf, &c2, err, sizeof err), 0);
    c2.micro_batch_size = like->micro_batch_size, c2.seq_length = like->seq_length;
    llama_model *m2 = llama_create(&c2, f->d, dev_stream_default(f->d), err, sizeof err);
    assert_non_null(m2);
    if (llama_hf_load(m2, dir, err, sizeof err)) fail_msg("%s", err);
    llama_forward(m2, tok, lab, NULL);
    llama_get_logits(m2, logits);
    llama_destroy(m2);
    assert_int_equal(fx_rm_rf(dir), 0);
    return hf;
}

/* A model exported to Hugging Face (config.json + sharded safetensors) and imported again gives the
 * same logits, bit for bit: the weights are perturbed first, so nothing comes from the original file. */
static void test_export_import_same_logits(void **state) {
    fixture *f = *state;
    char err[512], dir[300];
    float *w = malloc(f->m->total * 4);
    assert_int_equal(llama_hf_read(f->m, TINY, w, err, sizeof err), 0);
    for (size_t i = 0; i < f->m->total; i++) w[i] *= 1.0f + 0.01f * (float)((i * 7919) % 13);
    llama_set_master(f->m, w);
    const int N = f->m->dims.B * f->m->dims.T, V = f->m->dims.Vl;
    int32_t tok[64], lab[64];
    for (int n = 0; n < N; n++) tok[n] = (n * 37 + 5) % 512, lab[n] = (n * 11 + 3) % 512;
    float *a = malloc((size_t)N * V * 4), *b = malloc((size_t)N * V * 4);
    llama_forward(f->m, tok, lab, NULL);
    llama_get_logits(f->m, a);
    snprintf(dir, sizeof dir, "%s/export", f->dir);
    mkdir(dir, 0755);
    /* a small shard limit: the sharded index path, as for a real model */
    if (ckpt_hf_export(f->m, &f->cfg, w, dir, 100000, false, err, sizeof err)) fail_msg("%s", err);
    import_logits(f, dir, &f->cfg, tok, lab, b);
    assert_memory_equal(a, b, (size_t)N * V * 4);
    free(w), free(a), free(b);
}

/* With Megatron's linear biases: config.json says attention_bias and mlp_bias, the biases travel as
 * q/k/v/o_proj.bias, gate/up/down_proj.bias, and the imported model gives the same logits, bit for bit. */
static void test_biases_export_import(void **state) {
    fixture *f = *state;
    char err[512], dir[300], path[400];
    tr_config c = f->cfg;
    c.disable_bias_linear = false;
    llama_model *m = llama_create(&c, f->d, dev_stream_default(f->d), err, sizeof err);
    assert_non_null(m);
    assert_true(llama_find_param(m, "model.layers.0.mlp.gate_up_proj.bias") >= 0);
    llama_init_params(m, 11, 0.05);
    float *w = malloc(m->total * 4);
    llama_get_master(m, w);
    for (size_t i = 0; i < m->total; i++) w[i] += 0.01f * (float)((i * 7919) % 13); /* biases away from 0 */
    llama_set_master(m, w);
    const int N = m->dims.B * m->dims.T, V = m->dims.Vl;
    int32_t tok[64], lab[64];
    for (int n = 0; n < N; n++) tok[n] = (n * 37 + 5) % 512, lab[n] = (n * 11 + 3) % 512;
    float *a = malloc((size_t)N * V * 4), *b = malloc((size_t)N * V * 4);
    llama_forward(m, tok, lab, NULL);
    llama_get_logits(m, a);
    snprintf(dir, sizeof dir, "%s/export_bias", f->dir);
    mkdir(dir, 0755);
    if (ckpt_hf_export(m, &c, w, dir, 0, false, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    st_file st;
    assert_int_equal(st_open(&st, path, err, sizeof err), 0);
    int found = 0;
    for (int i = 0; i < st.n; i++)
        found += !strcmp(st.tensors[i].name, "model.layers.1.mlp.up_proj.bias") ||
                 !strcmp(st.tensors[i].name, "model.layers.1.self_attn.o_proj.bias");
    st_close(&st);
    assert_int_equal(found, 2);
    hf_llama_config hf = import_logits(f, dir, &c, tok, lab, b);
    assert_true(hf.attention_bias && hf.mlp_bias);
    assert_memory_equal(a, b, (size_t)N * V * 4);
    llama_destroy(m);
    free(w), free(a), free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_missing_tensor),
        cmocka_unit_test(test_wrong_shape),
        cmocka_unit_test(test_extra_tensor),
        cmocka_unit_test(test_export_import_same_logits),
        cmocka_unit_test(test_biases_export_import),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
