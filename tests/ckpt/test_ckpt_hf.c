/* Hugging Face export: the tiny_gqa reference weights exported (one file, then shards with an
 * index) and imported again through engine/io (hf_config_load, st_model_open, llama_hf_read) are
 * bit-identical, tensor by tensor, to the originals; config.json maps back to the same config. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ckpt/hf_export.h"
#include "common/fixture.h"
#include "common/fixture_ckpt.h"
#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/llama.h"
#include "model/llama_hf.h"

#define TINY FX_TINY_GQA

typedef struct fixture {
    tr_config cfg;
    hf_llama_config hf;
    dev_device *d;
    llama_model *m;
    float *orig;
    char dir[256];
} fixture;

static int setup(void **state) {
    fixture *f = calloc(1, sizeof *f);
    char err[512];
    if (fx_tiny_gqa(&f->cfg, &f->hf, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return -1;
    }
    f->d = dev_open(0, 0, err, sizeof err);
    f->m = f->d ? llama_create(&f->cfg, f->d, dev_stream_default(f->d), err, sizeof err) : NULL;
    if (!f->m) return fprintf(stderr, "%s\n", err), -1;
    f->orig = malloc(f->m->total * sizeof *f->orig);
    if (llama_hf_read(f->m, TINY, f->orig, err, sizeof err)) return fprintf(stderr, "%s\n", err), -1;
    if (fx_tmppath(f->dir, sizeof f->dir, "ckpt_hf")) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture *f = *state;
    fx_rm_rf(f->dir);
    free(f->orig);
    llama_destroy(f->m);
    dev_close(f->d);
    free(f);
    return 0;
}

/* Every tensor of the reference file is in the export with the same shape and the same bits,
 * and the export has nothing else. */
static void same_tensors(const char *dir) {
    char err[512];
    st_model a, b;
    assert_int_equal(st_model_open(&a, TINY, err, sizeof err), 0);
    if (st_model_open(&b, dir, err, sizeof err)) fail_msg("%s", err);
    assert_int_equal(st_model_count(&a), st_model_count(&b));
    for (int i = 0; i < st_model_count(&a); i++) {
        const char *name = st_model_name(&a, i);
        const st_tensor *ta = st_model_find(&a, name, NULL), *tb = st_model_find(&b, name, NULL);
        if (!tb) fail_msg("export lacks %s", name);
        assert_int_equal(ta->ndim, tb->ndim);
        assert_memory_equal(ta->shape, tb->shape, sizeof ta->shape[0] * (size_t)ta->ndim);
        uint64_t n = st_tensor_numel(ta);
        float *x = malloc(n * 4), *y = malloc(n * 4);
        assert_int_equal(st_model_read_f32(&a, name, x, ta->shape, ta->ndim, err, sizeof err), 0);
        assert_int_equal(st_model_read_f32(&b, name, y, tb->shape, tb->ndim, err, sizeof err), 0);
        assert_memory_equal(x, y, n * 4);
        free(x), free(y);
    }
    st_model_close(&a), st_model_close(&b);
}

static void reimport(fixture *f) {
    char err[512], path[300];
    snprintf(path, sizeof path, "%s/config.json", f->dir);
    hf_llama_config hf;
    if (hf_config_load(&hf, path, err, sizeof err)) fail_msg("%s", err);
    assert_memory_equal(&hf, &f->hf, sizeof hf);
    tr_config cfg;
    tr_config_defaults(&cfg);
    assert_int_equal(hf_config_apply(&hf, &cfg, err, sizeof err), 0);
    assert_true(cfg.num_layers == f->cfg.num_layers && cfg.num_query_groups == f->cfg.num_query_groups &&
                cfg.kv_channels == f->cfg.kv_channels && cfg.ffn_hidden_size == f->cfg.ffn_hidden_size &&
                cfg.vocab_size == f->cfg.vocab_size && cfg.rotary_base == f->cfg.rotary_base &&
                cfg.norm_epsilon == f->cfg.norm_epsilon);
    float *back = malloc(f->m->total * sizeof *back);
    if (llama_hf_read(f->m, f->dir, back, err, sizeof err)) fail_msg("%s", err);
    assert_memory_equal(back, f->orig, f->m->total * sizeof *back);
    free(back);
    same_tensors(f->dir);
}

static void test_single_file(void **state) {
    fixture *f = *state;
    char err[512], path[300];
    if (ckpt_hf_export(f->m, &f->cfg, f->orig, f->dir, 0, true, err, sizeof err)) fail_msg("%s", err);
    reimport(f);
    snprintf(path, sizeof path, "%s/model.safetensors.index.json", f->dir);
    assert_int_equal(access(path, F_OK), -1);
}

static void test_sharded(void **state) {
    fixture *f = *state;
    char err[512], path[300];
    uint64_t limit = f->m->total * 4 / 3; /* about four shards */
    if (ckpt_hf_export(f->m, &f->cfg, f->orig, f->dir, limit, true, err, sizeof err)) fail_msg("%s", err);
    snprintf(path, sizeof path, "%s/model.safetensors", f->dir);
    assert_int_equal(access(path, F_OK), -1); /* a single file would win over the index */
    snprintf(path, sizeof path, "%s/model-00001-of-00004.safetensors", f->dir);
    assert_int_equal(access(path, F_OK), 0);
    snprintf(path, sizeof path, "%s/model-00004-of-00004.safetensors", f->dir);
    assert_int_equal(access(path, F_OK), 0);
    reimport(f);
    /* shards never exceed the limit unless one tensor alone does */
    st_model sm;
    assert_int_equal(st_model_open(&sm, f->dir, err, sizeof err), 0);
    assert_int_equal(sm.nfiles, 4);
    for (int i = 0; i < sm.nfiles; i++) assert_true(sm.files[i].data_len <= limit || sm.files[i].n == 1);
    st_model_close(&sm);
    /* exporting a single file again over a sharded export leaves a directory that reads as the single file */
    if (ckpt_hf_export(f->m, &f->cfg, f->orig, f->dir, 0, true, err, sizeof err)) fail_msg("%s", err);
    reimport(f);
}

static void test_refuses_non_llama(void **state) {
    fixture *f = *state;
    char err[512];
    tr_config cfg = f->cfg;
    cfg.normalization = TR_NORM_LAYERNORM;
    assert_null(ckpt_hf_config_json(&cfg, err, sizeof err));
    assert_non_null(strstr(err, "LayerNorm"));
    cfg = f->cfg, cfg.untie_embeddings_and_output_weights = false;
    assert_int_equal(ckpt_hf_export(f->m, &cfg, f->orig, f->dir, 0, true, err, sizeof err), -1);
    assert_non_null(strstr(err, "tied embeddings"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_file),
        cmocka_unit_test(test_sharded),
        cmocka_unit_test(test_refuses_non_llama),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
