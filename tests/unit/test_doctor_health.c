/* The doctor's `health` check end to end but for the GPU: base/nvml/nvml_probe.c opens a fake
 * libnvidia-ml (tests/tools/fake_nvml, through TWINRUN_NVML_LIBRARY) whose GPUs and readings come from
 * the environment; each rank's readings travel through the facts' lines (doctor_health_format/parse) and
 * engine/doctor/doctor_health.c judges them: healthy, an ECC error (fail, naming node, GPU, bus id and
 * the fix), hot (warning), lifetime-only errors (warning), readings NVML_ERROR_NOT_SUPPORTED (skipped),
 * no library, a driver that does not start, a bus id NVML does not know (skipped with the reason), a
 * driver whose nvmlDeviceGetTemperatureV refuses the struct (the older call), and ranks whose
 * CUDA_VISIBLE_DEVICES reorders the cards (matched by bus id, named by NVML's index). */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "doctor/doctor_internal.h"
#include "nvml/nvml_probe.h"

/* NVML's spelling of eight cards' bus ids, index order; a rank asks with CUDA's spelling (4-digit domain) */
static const char *const NVML_BUS = "00000000:18:00.0,00000000:2A:00.0,00000000:3A:00.0,00000000:5D:00.0,"
                                    "00000000:9A:00.0,00000000:AB:00.0,00000000:BA:00.0,00000000:DB:00.0";
static const char *const CUDA_BUS[8] = {"0000:18:00.0", "0000:2a:00.0", "0000:3a:00.0", "0000:5d:00.0",
                                        "0000:9a:00.0", "0000:ab:00.0", "0000:ba:00.0", "0000:db:00.0"};

static void clear_env(void) {
    static const char *const names[] = {"FAKE_NVML_INIT_RC", "FAKE_NVML_ECC_VOLATILE", "FAKE_NVML_ECC_AGGREGATE",
                                        "FAKE_NVML_TEMP",    "FAKE_NVML_ECC_RC",       "FAKE_NVML_TEMP_RC",
                                        "FAKE_NVML_TEMPV_RC"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) unsetenv(names[i]);
    setenv("FAKE_NVML_GPUS", NVML_BUS, 1);
    setenv(TR_NVML_LIBRARY_ENV, FAKE_NVML_PATH, 1);
}

static int setup(void **state) {
    (void)state;
    clear_env();
    return 0;
}

/* the fake's nvmlInit_v2 calls not matched by nvmlShutdown (the same handle the probe opened) */
static int open_sessions(void) {
    void *lib = dlopen(FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    const int *n = (const int *)dlsym(lib, "fake_nvml_sessions");
    assert_non_null(n);
    const int v = *n;
    dlclose(lib);
    return v;
}

/* one rank's readings as rank 0 gets them: probed, written as facts, parsed back */
static void probe(const char *bus, dev_health *h) {
    dev_health raw;
    tr_nvml_probe(bus, &raw);
    assert_int_equal(open_sessions(), 0);
    char text[1024];
    doctor_health_format(&raw, text, sizeof text);
    doctor_health_parse(text, h);
    assert_int_equal(h->reported, raw.reported);
}

/* a report of `world` ranks, 8 a node, judged from all[] */
static const doctor_check *judge(doctor_report *r, int world, const dev_health *all) {
    memset(r, 0, sizeof *r);
    r->world = world, r->gpus_per_node = world < 8 ? world : 8, r->nodes = (world + 7) / 8;
    doctor_health_judge(r, all);
    assert_int_equal(r->nchecks, 1);
    assert_string_equal(r->checks[0].id, "health");
    printf("  %s: %s\n", doctor_status_name(r->checks[0].status), r->checks[0].detail);
    return &r->checks[0];
}

static void test_healthy(void **state) {
    (void)state;
    setenv("FAKE_NVML_TEMP", "50,51,52,53,54,55,71,57", 1);
    dev_health all[8];
    for (int rk = 0; rk < 8; rk++) probe(CUDA_BUS[rk], &all[rk]);
    assert_true(all[6].reported && all[6].has_ecc_volatile && all[6].has_ecc_aggregate && all[6].has_temperature);
    assert_int_equal(all[6].index, 6);
    assert_int_equal(all[6].temperature_c, 71);
    assert_true(all[6].ecc_volatile == 0 && all[6].ecc_aggregate == 0);
    doctor_report r;
    const doctor_check *c = judge(&r, 8, all);
    assert_int_equal(c->status, DOCTOR_PASS);
    assert_non_null(strstr(c->detail, "8 GPUs: no uncorrectable ECC errors (8 report ECC)"));
    assert_non_null(strstr(c->detail, "hottest 71 C, node 0 (ranks 0-7) GPU 6 (PCI 00000000:BA:00.0, rank 6)"));
    doctor_report_free(&r);
}

/* 16 ranks, 2 nodes; node 1's launcher reversed CUDA_VISIBLE_DEVICES (7,6,...,0): its rank 13 (local 5)
 * drives NVML's GPU 2, which has the errors. The check must name GPU 2 and its bus id, not GPU 5. */
static void test_ecc_error_named_by_bus_id(void **state) {
    (void)state;
    dev_health all[16];
    for (int rk = 0; rk < 8; rk++) probe(CUDA_BUS[rk], &all[rk]);
    setenv("FAKE_NVML_ECC_VOLATILE", "0,0,2,0,0,0,0,0", 1);
    setenv("FAKE_NVML_ECC_AGGREGATE", "0,0,7,0,0,0,0,0", 1);
    for (int rk = 8; rk < 16; rk++) probe(CUDA_BUS[7 - (rk - 8)], &all[rk]);
    assert_int_equal(all[13].index, 2);
    assert_true(all[13].ecc_volatile == 2 && all[13].ecc_aggregate == 7);
    doctor_report r;
    const doctor_check *c = judge(&r, 16, all);
    assert_int_equal(c->status, DOCTOR_FAIL);
    assert_int_equal(c->node, 1);
    assert_true(c->first_rank == 8 && c->last_rank == 15);
    assert_non_null(strstr(c->detail, "node 1 (ranks 8-15) GPU 2 (PCI 00000000:3A:00.0, rank 13) reports 2 "
                                      "uncorrectable ECC errors since the driver loaded (lifetime: 7)"));
    assert_non_null(strstr(c->detail, "drain node 1 from the hostfile"));
    assert_non_null(strstr(c->detail, "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER -i 2"));
    doctor_report_free(&r);
}

static void test_hot_warns(void **state) {
    (void)state;
    setenv("FAKE_NVML_TEMP", "60,60,60,91", 1);
    dev_health all[4];
    for (int rk = 0; rk < 4; rk++) probe(CUDA_BUS[rk], &all[rk]);
    doctor_report r;
    const doctor_check *c = judge(&r, 4, all);
    assert_int_equal(c->status, DOCTOR_WARN);
    assert_int_equal(c->node, 0);
    assert_non_null(strstr(c->detail, "GPU 3 (PCI 00000000:5D:00.0, rank 3) is at 91 C: above 85 C"));
    assert_non_null(strstr(c->detail, "check the node's cooling"));
    doctor_report_free(&r);
    /* 85 C itself is not above the limit */
    setenv("FAKE_NVML_TEMP", "60,60,60,85", 1);
    probe(CUDA_BUS[3], &all[3]);
    assert_int_equal(judge(&r, 4, all)->status, DOCTOR_PASS);
    doctor_report_free(&r);
}

/* errors only in the lifetime counter warn; with the volatile counter not reported they fail */
static void test_lifetime_errors(void **state) {
    (void)state;
    setenv("FAKE_NVML_ECC_AGGREGATE", "0,3", 1);
    dev_health all[2];
    for (int rk = 0; rk < 2; rk++) probe(CUDA_BUS[rk], &all[rk]);
    doctor_report r;
    const doctor_check *c = judge(&r, 2, all);
    assert_int_equal(c->status, DOCTOR_WARN);
    assert_non_null(strstr(c->detail, "GPU 1 (PCI 00000000:2A:00.0, rank 1) reports 3 uncorrectable ECC errors in "
                                      "its lifetime (none since the driver loaded)"));
    doctor_report_free(&r);
    all[1].has_ecc_volatile = false;
    c = judge(&r, 2, all);
    assert_int_equal(c->status, DOCTOR_FAIL);
    doctor_report_free(&r);
}

/* NVML_ERROR_NOT_SUPPORTED: the reading is left out and named, never a failure */
static void test_not_supported(void **state) {
    (void)state;
    setenv("FAKE_NVML_ECC_RC", "3", 1);
    setenv("FAKE_NVML_TEMP_RC", "3", 1);
    dev_health all[2];
    for (int rk = 0; rk < 2; rk++) probe(CUDA_BUS[rk], &all[rk]);
    assert_true(all[0].reported);
    assert_false(all[0].has_ecc_volatile || all[0].has_ecc_aggregate || all[0].has_temperature);
    assert_string_equal(all[0].missing,
                        "volatile ECC: Not Supported; aggregate ECC: Not Supported; temperature: Not Supported");
    doctor_report r;
    const doctor_check *c = judge(&r, 2, all);
    assert_int_equal(c->status, DOCTOR_SKIP);
    assert_non_null(strstr(c->detail, "reports neither ECC errors nor temperature"));
    doctor_report_free(&r);
    /* ECC unsupported (a card without it, or ECC off), temperature read: judged on what there is */
    unsetenv("FAKE_NVML_TEMP_RC");
    setenv("FAKE_NVML_TEMP", "95", 1);
    for (int rk = 0; rk < 2; rk++) probe(CUDA_BUS[rk], &all[rk]);
    c = judge(&r, 2, all);
    assert_int_equal(c->status, DOCTOR_WARN);
    doctor_report_free(&r);
    setenv("FAKE_NVML_TEMP", "45", 1);
    for (int rk = 0; rk < 2; rk++) probe(CUDA_BUS[rk], &all[rk]);
    c = judge(&r, 2, all);
    assert_int_equal(c->status, DOCTOR_PASS);
    assert_non_null(strstr(c->detail, "(0 report ECC)"));
    assert_non_null(strstr(c->detail, "not reported by node 0 (ranks 0-1) GPU 0 (PCI 00000000:18:00.0, rank 0): "
                                      "volatile ECC: Not Supported"));
    doctor_report_free(&r);
}

static void test_library_absent(void **state) {
    (void)state;
    setenv(TR_NVML_LIBRARY_ENV, "/nonexistent/libnvidia-ml.so.1", 1);
    dev_health all[2];
    for (int rk = 0; rk < 2; rk++) {
        tr_nvml_probe(CUDA_BUS[rk], &all[rk]);
        assert_false(all[rk].reported);
        assert_non_null(strstr(all[rk].reason, "cannot load /nonexistent/libnvidia-ml.so.1"));
    }
    doctor_report r;
    const doctor_check *c = judge(&r, 2, all);
    assert_int_equal(c->status, DOCTOR_SKIP);
    assert_non_null(strstr(c->detail, "not reported (cannot load /nonexistent/libnvidia-ml.so.1 (NVML, installed "
                                      "with the NVIDIA driver)"));
    doctor_report_free(&r);
    /* the default name: where no driver is installed (a CI machine) the same reason, never a failure;
     * where one is (a GPU node), the real NVML loads and knows no card at this test's bus id */
    unsetenv(TR_NVML_LIBRARY_ENV);
    dev_health h;
    tr_nvml_probe(CUDA_BUS[0], &h);
    if (!h.reported)
        assert_true(strstr(h.reason, "libnvidia-ml.so.1") || strstr(h.reason, "NVML knows no GPU at PCI bus id"));
}

static void test_driver_refuses(void **state) {
    (void)state;
    dev_health h;
    setenv("FAKE_NVML_INIT_RC", "9", 1);
    probe(CUDA_BUS[0], &h);
    assert_false(h.reported);
    assert_string_equal(h.reason, "nvmlInit_v2 failed: Driver Not Loaded");
    unsetenv("FAKE_NVML_INIT_RC");
    probe("0000:ff:00.0", &h);
    assert_false(h.reported);
    assert_string_equal(h.reason, "NVML knows no GPU at PCI bus id 0000:ff:00.0: Not Found");
    probe("", &h);
    assert_false(h.reported);
    assert_non_null(strstr(h.reason, "PCI bus id is unknown"));
}

/* nvmlDeviceGetTemperatureV refusing the struct's version: the older call answers; the versioned call
 * saying the sensor is missing is believed */
static void test_temperature_fallback(void **state) {
    (void)state;
    dev_health h;
    setenv("FAKE_NVML_TEMP", "66", 1);
    setenv("FAKE_NVML_TEMPV_RC", "25", 1);
    probe(CUDA_BUS[0], &h);
    assert_true(h.has_temperature);
    assert_int_equal(h.temperature_c, 66);
    setenv("FAKE_NVML_TEMPV_RC", "3", 1);
    probe(CUDA_BUS[0], &h);
    assert_false(h.has_temperature);
    assert_string_equal(h.missing, "temperature: Not Supported");
}

/* ranks that share a card count it once; a rank that reported nothing is said in the pass */
static void test_shared_and_partial(void **state) {
    (void)state;
    dev_health all[4];
    probe(CUDA_BUS[0], &all[0]);
    probe(CUDA_BUS[0], &all[1]);
    probe(CUDA_BUS[1], &all[2]);
    setenv(TR_NVML_LIBRARY_ENV, "/nonexistent/libnvidia-ml.so.1", 1);
    probe(CUDA_BUS[2], &all[3]);
    doctor_report r;
    const doctor_check *c = judge(&r, 4, all);
    assert_int_equal(c->status, DOCTOR_PASS);
    assert_non_null(strstr(c->detail, "2 GPUs: no uncorrectable ECC errors"));
    assert_non_null(strstr(c->detail, "1 rank reported nothing (rank 3: cannot load"));
    doctor_report_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_healthy, setup),
        cmocka_unit_test_setup(test_ecc_error_named_by_bus_id, setup),
        cmocka_unit_test_setup(test_hot_warns, setup),
        cmocka_unit_test_setup(test_lifetime_errors, setup),
        cmocka_unit_test_setup(test_not_supported, setup),
        cmocka_unit_test_setup(test_library_absent, setup),
        cmocka_unit_test_setup(test_driver_refuses, setup),
        cmocka_unit_test_setup(test_temperature_fallback, setup),
        cmocka_unit_test_setup(test_shared_and_partial, setup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
