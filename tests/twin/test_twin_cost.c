/* The cost model's calibration: a calibrated spec charges each kind its fitted
 * latency and efficiencies, an uncalibrated one the roofline it always did (a memset nothing), the
 * additive form sums the terms; the kinds' names round-trip; the H200 table is sane; and the
 * TWINRUN_TWIN_PROFILE ledger reports one rank's last complete iteration, nothing of the set-up or
 * the tail. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "twin.h"
#include "twin_cost.h"
#include "twinrun/dev.h"
#include "twinrun/err.h"

static twin_kernel_cost gemm(double flops, double bytes) {
    return (twin_kernel_cost){.kind = TWIN_K_GEMM, .flops = flops, .bytes = bytes, .dt = TR_BF16};
}

static void test_uncalibrated_specs_keep_the_roofline(void **state) {
    (void)state;
    const twin_device_spec *h100 = twin_device_spec_find("H100");
    assert_non_null(h100);
    assert_null(h100->cal);
    twin_kernel_cost g = gemm(1e15, 1e6);
    assert_true(twin_kernel_cost_seconds(h100, &g) == twin_kernel_seconds(h100, 1e15, 1e6, TR_BF16));
    twin_kernel_cost norm = {.kind = TWIN_K_NORM_BWD, .flops = 1e6, .bytes = 3.35e12, .dt = TR_F32};
    assert_true(twin_kernel_cost_seconds(h100, &norm) == 4e-6 + 1.0);
    twin_kernel_cost memset_ = {.kind = TWIN_K_MEMSET, .bytes = 1e9, .dt = TR_F32};
    assert_true(twin_kernel_cost_seconds(h100, &memset_) == 0.0); /* as before calibration */
}

static void test_the_h200_charges_its_fitted_efficiencies(void **state) {
    (void)state;
    const twin_device_spec *h200 = twin_device_spec_find("h200");
    assert_non_null(h200);
    assert_non_null(h200->cal);
    const twin_kernel_eff *e = &h200->cal->kind[TWIN_K_GEMM];
    assert_true(e->flops_eff > 0 && !e->additive);
    twin_kernel_cost g = gemm(2.0 * 4096 * 2048 * 2048, 1e6);
    assert_true(twin_kernel_cost_seconds(h200, &g) == e->latency + g.flops / (h200->bf16_flops * e->flops_eff));
    assert_true(twin_kernel_cost_seconds(h200, &g) > twin_kernel_seconds(h200, g.flops, g.bytes, TR_BF16));
    const twin_kernel_eff *m = &h200->cal->kind[TWIN_K_MEMSET];
    twin_kernel_cost memset_ = {.kind = TWIN_K_MEMSET, .bytes = 6e9, .dt = TR_F32};
    assert_true(twin_kernel_cost_seconds(h200, &memset_) == m->latency + 6e9 / (h200->mem_bandwidth * m->bytes_eff));
    /* every entry of the generated table is a plausible one: lab/fit_cost_model.py bounds them so */
    for (int k = 0; k < TWIN_K_COUNT; k++) {
        const twin_kernel_eff *x = &h200->cal->kind[k];
        assert_true(x->flops_eff > 0 && x->flops_eff <= 5 && x->bytes_eff > 0 && x->bytes_eff <= 5);
        assert_true(x->latency >= 0 && x->latency <= 1e-4);
    }
}

static void test_an_additive_kind_sums_its_terms(void **state) {
    (void)state;
    twin_calibration cal = {.name = "test"};
    cal.kind[TWIN_K_ATTENTION_FWD] =
        (twin_kernel_eff){.latency = 5e-6, .flops_eff = 0.5, .bytes_eff = 0.25, .additive = true};
    cal.kind[TWIN_K_ATTENTION_BWD] = (twin_kernel_eff){.latency = 5e-6, .flops_eff = 0.5, .bytes_eff = 0.25};
    twin_device_spec spec = *twin_device_spec_find("H200");
    spec.cal = &cal;
    twin_kernel_cost a = {.kind = TWIN_K_ATTENTION_FWD, .flops = 1e12, .bytes = 1e9, .dt = TR_BF16};
    const double c = 1e12 / (spec.bf16_flops * 0.5), m = 1e9 / (spec.mem_bandwidth * 0.25);
    assert_true(twin_kernel_cost_seconds(&spec, &a) == 5e-6 + (c + m));
    a.kind = TWIN_K_ATTENTION_BWD; /* the roofline form: the larger term */
    assert_true(twin_kernel_cost_seconds(&spec, &a) == 5e-6 + (c > m ? c : m));
    a.kind = TWIN_K_ADD; /* not in this calibration: the roofline */
    assert_true(twin_kernel_cost_seconds(&spec, &a) == twin_kernel_seconds(&spec, 1e12, 1e9, TR_BF16));
}

static void test_kind_names_round_trip(void **state) {
    (void)state;
    for (int k = 0; k < TWIN_K_COUNT; k++) {
        const char *name = twin_kernel_kind_name((twin_kernel_kind)k);
        assert_non_null(name);
        assert_int_equal(twin_kernel_kind_find(name), k);
    }
    assert_string_equal(twin_kernel_kind_name(TWIN_K_ATTENTION_BWD), "attention_backward");
    assert_null(twin_kernel_kind_name(TWIN_K_COUNT));
    assert_int_equal(twin_kernel_kind_find("attention"), -1);
    assert_int_equal(twin_kernel_kind_find(NULL), -1);
}

/* ---- the ledger -------------------------------------------------------------------------- */

static int ledger_rank(int rank, void *arg) {
    (void)arg;
    char err[128];
    dev_device *d = dev_open(0, 0, err, sizeof err);
    dev_stream *s = dev_stream_default(d);
    float *buf = dev_alloc(d, 4096, "buf");
    twin_kernel_cost big = gemm(1e12, 1e6);
    twin_kernel_cost shaped = {.kind = TWIN_K_GEMM_WGRAD,
                               .flops = 2.0 * 64 * 32 * 16,
                               .bytes = 1e4,
                               .dt = TR_BF16,
                               .m = 64,
                               .n = 32,
                               .k = 16,
                               .ta = true,
                               .accumulate = true,
                               .a_dt = TR_BF16,
                               .b_dt = TR_BF16,
                               .c_dt = TR_F32};
    twin_cost_kernel(s, &big); /* set-up: not an iteration */
    for (int it = 1; it <= 2; it++) {
        dev_step_mark(d, it);
        for (int k = 0; k < it + rank; k++) twin_cost_kernel(s, &big);
        twin_cost_kernel(s, &shaped);
        dev_memset_zero(s, buf, 4096);
    }
    dev_step_mark(d, 0);
    twin_cost_kernel(s, &big); /* the tail */
    twin_cost_kernel(s, &big);
    dev_free(d, buf);
    dev_close(d);
    return 0;
}

static cJSON *row(cJSON *kinds, const char *kind) {
    cJSON *r;
    cJSON_ArrayForEach(r, kinds) if (strcmp(cJSON_GetObjectItem(r, "kind")->valuestring, kind) == 0) return r;
    return NULL;
}

static void test_the_ledger_reports_the_last_iteration(void **state) {
    (void)state;
    char path[] = "/tmp/twinrun-ledger-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    setenv("TWINRUN_TWIN_PROFILE", path, 1);
    setenv("TWINRUN_TWIN_PROFILE_RANK", "1", 1); /* the second rank's: 3 large GEMMs in iteration 2 */
    twin_options o;
    twin_options_default(&o);
    o.device = "H200";
    twin_result res;
    char err[256];
    assert_int_equal(twin_run(2, ledger_rank, NULL, &o, &res, err, sizeof err), 0);
    twin_result_free(&res);
    unsetenv("TWINRUN_TWIN_PROFILE");
    unsetenv("TWINRUN_TWIN_PROFILE_RANK");

    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    unlink(path);
    cJSON *j = cJSON_Parse(text);
    assert_non_null(j);
    assert_string_equal(cJSON_GetObjectItem(j, "device")->valuestring, "H200");
    assert_int_equal(cJSON_GetObjectItem(j, "rank")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(j, "iteration")->valueint, 2);
    cJSON *kinds = cJSON_GetObjectItem(j, "kinds");
    assert_int_equal(cJSON_GetArraySize(kinds), 3);
    const twin_device_spec *h200 = twin_device_spec_find("H200");
    cJSON *g = row(kinds, "gemm");
    assert_non_null(g);
    assert_int_equal(cJSON_GetObjectItem(g, "calls")->valueint, 3);
    assert_string_equal(cJSON_GetObjectItem(g, "class")->valuestring, "gemm");
    assert_true(cJSON_GetObjectItem(g, "flops")->valuedouble == 3e12);
    assert_true(cJSON_GetObjectItem(g, "compute_s")->valuedouble == 3 * (1e12 / h200->bf16_flops));
    twin_kernel_cost big = gemm(1e12, 1e6);
    assert_true(cJSON_GetObjectItem(g, "seconds")->valuedouble == 3 * twin_kernel_cost_seconds(h200, &big));
    cJSON *w = row(kinds, "gemm 64x32x16 TN bf16.bf16>fp32 +="); /* the GPU profile's name for it */
    assert_non_null(w);
    assert_string_equal(cJSON_GetObjectItem(w, "class")->valuestring, "gemm_wgrad");
    cJSON *ms = row(kinds, "memset");
    assert_non_null(ms);
    assert_true(cJSON_GetObjectItem(ms, "bytes")->valuedouble == 4096);
    assert_true(cJSON_GetObjectItem(ms, "seconds")->valuedouble > 0); /* the H200 charges memsets */
    cJSON_Delete(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uncalibrated_specs_keep_the_roofline),
        cmocka_unit_test(test_the_h200_charges_its_fitted_efficiencies),
        cmocka_unit_test(test_an_additive_kind_sums_its_terms),
        cmocka_unit_test(test_kind_names_round_trip),
        cmocka_unit_test(test_the_ledger_reports_the_last_iteration),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
