/* Predict mode (--predict, docs/prediction.md): the shape-only device (sizes without memory, zeros
 * on the way back, allocations counted by purpose), the peak agreeing byte for byte with a normal
 * twin run of the same small configs, the JSON report's fields and their sums, and the flag checks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/fixture.h"

#include "fault/fault.h"
#include "train/predict_report.h"
#include "train/trainer.h"
#include "twinrun/config.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"

/* ---- the device ---------------------------------------------------------------------------- */

static void test_shape_only_device(void **state) {
    (void)state;
    char err[256];
    dev_device *d = dev_open(0, (size_t)1 << 20, err, sizeof err); /* 1 MiB: shape-only may go past it */
    assert_non_null(d);
    assert_int_equal(dev_set_shape_only(d, err, sizeof err), 0);
    assert_true(dev_shape_only(d));
    dev_mem_tag_set(d, DEV_MEM_WEIGHTS);
    uint8_t *w = dev_alloc(d, (size_t)1 << 40, "weights"); /* 1 TiB: no host memory behind it */
    assert_non_null(w);
    dev_mem_tag_set(d, DEV_MEM_ACTIVATIONS);
    uint8_t *a = dev_alloc(d, 1000, "activations");
    uint8_t *z = dev_alloc(d, 0, "empty");
    assert_non_null(a);
    assert_non_null(z);
    /* distinct, non-overlapping ranges: the collectives' overlap checks compare them */
    assert_true(a >= w + ((size_t)1 << 40) && z >= a + 1000);
    assert_int_equal(dev_mem_used(d), ((size_t)1 << 40) + 1000);
    /* reads come back as zeros, writes vanish (the host buffer is what matters) */
    uint8_t host[64];
    memset(host, 0xab, sizeof host);
    dev_copy_h2d(dev_stream_default(d), a, host, sizeof host);
    dev_copy_d2h(dev_stream_default(d), host, a + 8, sizeof host);
    for (size_t i = 0; i < sizeof host; i++) assert_int_equal(host[i], 0);
    dev_free(d, w);
    dev_mem_tag_set(d, DEV_MEM_WORKSPACE);
    assert_non_null(dev_alloc(d, 24, "flag"));
    size_t parts[DEV_MEM_TAG_COUNT], sum = 0;
    dev_mem_peak_parts(d, parts);
    for (int t = 0; t < DEV_MEM_TAG_COUNT; t++) sum += parts[t];
    assert_int_equal(sum, dev_mem_peak(d));
    assert_int_equal(parts[DEV_MEM_WEIGHTS], (size_t)1 << 40);
    assert_int_equal(parts[DEV_MEM_ACTIVATIONS], 1000);
    assert_int_equal(parts[DEV_MEM_WORKSPACE], 0); /* allocated after the peak */
    assert_int_equal(dev_mem_used(d), 1000 + 24);
    dev_free(d, a);
    dev_free(d, z);
    dev_close(d);
    /* too late once something is allocated: the first allocation would have real memory */
    d = dev_open(0, 0, err, sizeof err);
    void *p = dev_alloc(d, 16, "x");
    assert_int_equal(dev_set_shape_only(d, err, sizeof err), -1);
    assert_non_null(strstr(err, "before the first allocation"));
    dev_free(d, p);
    dev_close(d);
}

/* ---- whole runs -------------------------------------------------------------------------- */

/* A small Llama of the 70B seed's architecture; `extra` are the layout's flags. */
static int prepare(tr_config *c, int world, const char *extra, char *err, size_t errlen) {
    char text[2048];
    snprintf(text, sizeof text,
             "--num-layers 4 --hidden-size 64 --ffn-hidden-size 128 --num-attention-heads 8 --group-query-attention "
             "--num-query-groups 4 --seq-length 32 --max-position-embeddings 32 --position-embedding-type rope "
             "--normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear "
             "--attention-dropout 0 --hidden-dropout 0 --vocab-size 512 --micro-batch-size 1 --train-iters 2 "
             "--lr 1e-3 --mock-data --log-interval 1 --eval-iters 0 %s",
             extra); /* no --data-cache-path: the mock indices stay in memory (a cache left 99 MB in /tmp per run) */
    char *argv[128];
    int argc = 0;
    for (char *tok = strtok(text, " "); tok && argc < 128; tok = strtok(NULL, " ")) argv[argc++] = tok;
    tr_config_defaults(c);
    if (tr_config_parse(c, argc, argv, err, errlen)) return -1;
    return train_prepare_config(c, world, err, errlen);
}

/* Runs the config quietly; the summary's peak, and with predict the report. */
static int run(const tr_config *c, int world, tr_train_summary *sum, char *err, size_t errlen) {
    FILE *log = fopen("/dev/null", "w");
    assert_non_null(log);
    int rc = train_run(c, world, log, sum, err, errlen);
    fclose(log);
    return rc;
}

static void check_agreement(int world, const char *layout, int stages) {
    char err[2048] = "";
    tr_config c;
    assert_int_equal(prepare(&c, world, layout, err, sizeof err), 0);
    tr_train_summary normal = {0};
    if (run(&c, world, &normal, err, sizeof err)) fail_msg("%s: normal run: %s", layout, err);
    tr_predict p = {0};
    tr_train_summary pred = {.predict = &p};
    c.predict = true;
    if (run(&c, world, &pred, err, sizeof err)) fail_msg("%s: predict run: %s", layout, err);
    /* the same allocations, so the same peak, to the byte */
    assert_true(normal.device_peak_bytes > 0);
    assert_int_equal(pred.device_peak_bytes, normal.device_peak_bytes);
    assert_int_equal(p.nstages, stages);
    assert_int_equal(p.ranks, world);
    int at;
    assert_int_equal(train_predict_max_peak(&p, &at), normal.device_peak_bytes);
    for (int s = 0; s < stages; s++) {
        size_t sum = 0;
        for (int t = 0; t < DEV_MEM_TAG_COUNT; t++) sum += p.stage[s].parts[t];
        assert_int_equal(sum, p.stage[s].peak);
        assert_true(p.stage[s].parts[DEV_MEM_WEIGHTS] > 0 && p.stage[s].parts[DEV_MEM_MAIN_GRADS] > 0 &&
                    p.stage[s].parts[DEV_MEM_OPTIMIZER] > 0 && p.stage[s].parts[DEV_MEM_ACTIVATIONS] > 0);
        const tr_predict_time *t = &p.stage[s].time;
        assert_true(t->step > 0 && t->compute > 0);
        assert_float_equal(t->compute + t->comm + t->bubble, t->step, 1e-9 * t->step);
    }
    assert_true(p.step_time > 0);
    assert_int_equal(pred.iterations, 2);
    /* the normal run trained; the shape-only one read zeros, and finished anyway */
    assert_true(normal.last_loss > 0);
    assert_true(pred.last_loss == 0.0);
    train_predict_free(&p);
}

static void test_peak_agrees_tp2_pp2_dp2(void **state) {
    (void)state;
    check_agreement(8,
                    "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel "
                    "--use-distributed-optimizer --bf16 --global-batch-size 8",
                    2);
}

static void test_peak_agrees_cp2_pp2_recompute(void **state) {
    (void)state;
    check_agreement(8,
                    "--context-parallel-size 2 --pipeline-model-parallel-size 2 --global-batch-size 4 "
                    "--recompute-granularity selective",
                    2);
}

/* The worker pool (docs/twin.md#threads) gets nothing from a shape-only device: every kernel returns
 * after its check, before it would queue (twin_kern_submit refuses a shape-only device, so one that
 * queued would fail its rank), and copies do nothing. The prediction is the same at 1 thread, 2 and
 * "lazy" (queued work runs only at drains), to the bit. */
static void test_predict_same_with_pool(void **state) {
    (void)state;
    const char *was = getenv("TWINRUN_TWIN_THREADS");
    char *saved = was ? strdup(was) : NULL;
    static const char *const threads[] = {"1", "2", "lazy"};
    tr_predict first = {0};
    for (size_t k = 0; k < sizeof threads / sizeof threads[0]; k++) {
        setenv("TWINRUN_TWIN_THREADS", threads[k], 1);
        char err[2048] = "";
        tr_config c;
        assert_int_equal(prepare(&c, 8,
                                 "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 2 --sequence-parallel "
                                 "--use-distributed-optimizer --bf16 --global-batch-size 8 --predict",
                                 err, sizeof err),
                         0);
        tr_predict p = {0};
        tr_train_summary sum = {.predict = &p};
        if (run(&c, 8, &sum, err, sizeof err)) fail_msg("threads %s: predict run: %s", threads[k], err);
        assert_int_equal(p.ranks, 8);
        if (k == 0) {
            first = p;
            continue;
        }
        assert_int_equal(p.nstages, first.nstages);
        assert_true(p.step_time == first.step_time);
        for (int st = 0; st < p.nstages; st++) {
            assert_int_equal(p.stage[st].peak, first.stage[st].peak);
            assert_true(memcmp(&p.stage[st].time, &first.stage[st].time, sizeof p.stage[st].time) == 0);
        }
        train_predict_free(&p);
    }
    train_predict_free(&first);
    if (saved) setenv("TWINRUN_TWIN_THREADS", saved, 1);
    else unsetenv("TWINRUN_TWIN_THREADS");
    free(saved);
}

/* The JSON report: exactly the documented keys, parts summing to each stage's peak, the figures
 * consistent with each other. */
static void test_predict_json(void **state) {
    (void)state;
    char err[2048] = "", path[256];
    assert_int_equal(fx_tmppath(path, sizeof path, "predict.json"), 0);
    tr_config c;
    assert_int_equal(prepare(&c, 8,
                             "--tensor-model-parallel-size 2 --pipeline-model-parallel-size 4 --bf16 "
                             "--global-batch-size 8 --predict",
                             err, sizeof err),
                     0);
    snprintf(c.predict_json, sizeof c.predict_json, "%s", path);
    tr_train_summary sum = {0};
    if (run(&c, 8, &sum, err, sizeof err)) fail_msg("predict run: %s", err);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    unlink(path);
    text[n] = 0;
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    static const char *const top[] = {"device", "capacity_bytes", "runtime_bytes", "step_time_s", "tokens_per_s",
                                      "mfu",    "stages"};
    assert_int_equal(cJSON_GetArraySize(root), 7);
    for (size_t i = 0; i < 7; i++)
        if (!cJSON_GetObjectItemCaseSensitive(root, top[i])) fail_msg("no \"%s\" in %s", top[i], text);
    assert_string_equal(cJSON_GetObjectItem(root, "device")->valuestring, "H100");
    /* the card's 80 GiB: what the runtime holds (the spec's measured figure, > 0) and what ranks may allocate */
    const double runtime = cJSON_GetObjectItem(root, "runtime_bytes")->valuedouble;
    assert_true(runtime > 0 && runtime < (double)(8ull << 30));
    assert_true(cJSON_GetObjectItem(root, "capacity_bytes")->valuedouble + runtime == (double)(80ull << 30));
    const double step = cJSON_GetObjectItem(root, "step_time_s")->valuedouble;
    const double tps = cJSON_GetObjectItem(root, "tokens_per_s")->valuedouble;
    const double mfu = cJSON_GetObjectItem(root, "mfu")->valuedouble;
    assert_true(step > 0);
    assert_float_equal(tps, 8.0 * 32.0 / step, 1e-9 * tps); /* global batch x seq per step */
    assert_true(mfu > 0 && mfu < 1);
    const cJSON *stages = cJSON_GetObjectItem(root, "stages");
    assert_int_equal(cJSON_GetArraySize(stages), 4);
    static const char *const keys[] = {"stage",       "weights",   "main_grads",   "optimizer",
                                       "activations", "workspace", "comm_buffers", "peak"};
    double largest = 0;
    for (int s = 0; s < 4; s++) {
        const cJSON *st = cJSON_GetArrayItem(stages, s);
        assert_int_equal(cJSON_GetArraySize(st), 8);
        double parts = 0;
        for (size_t k = 0; k < 8; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(st, keys[k]);
            if (!v || !cJSON_IsNumber(v)) fail_msg("stage %d: no number \"%s\"", s, keys[k]);
            if (k >= 1 && k <= 6) parts += v->valuedouble;
        }
        assert_int_equal(cJSON_GetObjectItem(st, "stage")->valueint, s);
        const double peak = cJSON_GetObjectItem(st, "peak")->valuedouble;
        assert_true(parts == peak);
        if (peak > largest) largest = peak;
    }
    assert_true(largest == (double)sum.device_peak_bytes);
    cJSON_Delete(root);
}

/* ---- the flags -------------------------------------------------------------------------- */

static void expect_refused(const char *extra, const char *needle) {
    char err[2048] = "";
    tr_config c;
    if (prepare(&c, 1, extra, err, sizeof err) == 0) fail_msg("accepted: %s", extra);
    if (!strstr(err, needle)) fail_msg("%s: the message lacks \"%s\": %s", extra, needle, err);
}

static void test_bad_flag_combinations(void **state) {
    (void)state;
    expect_refused("--global-batch-size 1 --predict-json /tmp/x.json", "--predict-json /tmp/x.json writes the "
                                                                       "predict report: give --predict too");
    expect_refused("--global-batch-size 1 --predict --load /tmp/ckpt", "drop --load /tmp/ckpt");
    /* --hf-load merges its config.json first (so it needs one that agrees): the rule itself, on a valid config */
    char err[2048] = "";
    tr_config c;
    assert_int_equal(prepare(&c, 1, "--global-batch-size 1 --predict", err, sizeof err), 0);
    snprintf(c.hf_load, sizeof c.hf_load, "/tmp/hf");
    assert_int_equal(tr_config_validate(&c, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "--predict reads no weights: drop --hf-load /tmp/hf"));
    c.hf_load[0] = 0;
    fault_plan plan = {0}; /* a scenario's or TWINRUN_FAULTS' plan, even an empty one */
    c.faults = &plan;
    assert_int_equal(tr_config_validate(&c, 1, err, sizeof err), -1);
    assert_non_null(strstr(err, "injected faults"));
    /* --save is dropped with a warning: the seed's flags predict as they are */
    assert_int_equal(
        prepare(&c, 1, "--global-batch-size 1 --predict --save /tmp/ckpt --save-interval 1", err, sizeof err), 0);
    assert_string_equal(c.save, "");
    assert_non_null(strstr(c.warnings, "--predict writes no checkpoint"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape_only_device),
        cmocka_unit_test(test_peak_agrees_tp2_pp2_dp2),
        cmocka_unit_test(test_peak_agrees_cp2_pp2_recompute),
        cmocka_unit_test(test_predict_same_with_pool),
        cmocka_unit_test(test_predict_json),
        cmocka_unit_test(test_bad_flag_combinations),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
