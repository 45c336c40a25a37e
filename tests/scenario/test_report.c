/* The scenario report writers on a hand-built report: JSON parses back with every value, JUnit
 * counts and escapes, the text summary ends in the right verdict, the progress bar stays out of
 * files. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <cmocka.h>

#include "common/fixture.h"

#include "runner/report.h"

#define ITERS 4
#define NASTY "loss <&\"> 'x'\x01 differs\nat iteration 3"

static void fill(sc_report *r) {
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "unit<&>");
    snprintf(r->path, sizeof r->path, "scenarios/unit.yaml");
    r->nodes = 2, r->gpus_per_node = 4, r->world = 8;
    r->tp = 2, r->pp = 2, r->cp = 1, r->dp = 2;
    snprintf(r->device, sizeof r->device, "H100");
    r->train_iters = ITERS;
    r->nattempts = 2;
    r->attempts = calloc(2, sizeof *r->attempts);
    r->attempts[0] = (sc_attempt){0, 0, 2, 1, "watchdog: rank 5 never joined dp all_reduce #41", 612.5, 0.25};
    r->attempts[1] = (sc_attempt){1, 2, ITERS, 0, "", 20.0, 0.125};
    r->nfaults = 2;
    r->faults = calloc(2, sizeof *r->faults);
    sc_fault_outcome *h = &r->faults[0], *n = &r->faults[1];
    fault_spec_default(&h->fault, FAULT_HANG);
    h->fault.step = 3, h->fault.rank = 5;
    snprintf(h->fault.group, sizeof h->fault.group, "dp");
    snprintf(h->fault.op, sizeof h->fault.op, "all_reduce");
    h->fired = h->detected = h->attributed = true;
    h->attempt = 0, h->fired_at = 12.0, h->detect_seconds = 600.0;
    snprintf(h->diagnosis, sizeof h->diagnosis, "blame: rank 5 never joined dp all_reduce seq 41");
    fault_spec_default(&n->fault, FAULT_NAN);
    n->fault.step = 9, n->fault.rank = 2;
    n->attempt = -1, n->detect_seconds = -1;
    r->nchecks = 2;
    r->checks = calloc(2, sizeof *r->checks);
    r->checks[0] = (sc_check){"completes", true, "reached iteration 4 after 1 restart"};
    r->checks[1] = (sc_check){"continuity", false, NASTY};
    r->has_campaign = true;
    r->campaign.trials = 3, r->campaign.fired = 3, r->campaign.detected = 2;
    r->campaign.per_kind_trials[FAULT_HANG] = 2, r->campaign.per_kind_ok[FAULT_HANG] = 1;
    r->campaign.max_detect_seconds = 600, r->campaign.mean_detect_seconds = 300;
    r->campaign.mean_trial_seconds = 1.5, r->campaign.jobs = 2, r->campaign.seed = (1ULL << 60) + 1;
    r->losses = malloc(sizeof(double) * (ITERS + 1));
    r->reference_losses = malloc(sizeof(double) * (ITERS + 1));
    for (int i = 0; i <= ITERS; i++) r->losses[i] = r->reference_losses[i] = 10.0 / (i + 1) + 0.1;
    r->losses[0] = r->reference_losses[0] = NAN;
    r->losses[3] = NAN;
    r->peak_bytes = (size_t)3 << 30, r->capacity_bytes = (size_t)80 << 30;
    r->wall_seconds = 0.375, r->sim_seconds = 632.5;
    r->passed = false;
}

static void write_json(FILE *f, const void *r) { assert_int_equal(report_json(f, r), 0); }
static void write_text(FILE *f, const void *r) { report_text(f, r); }
static void write_junit1(FILE *f, const void *r) {
    const sc_report *list[1] = {r};
    assert_int_equal(report_junit(f, list, 1), 0);
}

static const cJSON *get(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    return v;
}
static double num(const cJSON *o, const char *key) {
    const cJSON *v = get(o, key);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}
static const char *str(const cJSON *o, const char *key) {
    const cJSON *v = get(o, key);
    assert_true(cJSON_IsString(v));
    return v->valuestring;
}

static void test_json_round_trip(void **state) {
    (void)state;
    sc_report r;
    fill(&r);
    char *text = fx_capture(write_json, &r);
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_string_equal(str(root, "name"), "unit<&>");
    assert_string_equal(str(root, "path"), "scenarios/unit.yaml");
    assert_true(cJSON_IsFalse(get(root, "passed")));
    assert_int_equal((int)num(root, "world"), 8);
    assert_int_equal((int)num(root, "nodes"), 2);
    assert_int_equal((int)num(get(root, "layout"), "tp"), 2);
    assert_int_equal((int)num(get(root, "layout"), "dp"), 2);
    assert_string_equal(str(root, "device"), "H100");
    assert_int_equal((int)num(root, "train_iters"), ITERS);

    const cJSON *att = get(root, "attempts");
    assert_int_equal(cJSON_GetArraySize(att), 2);
    assert_string_equal(str(cJSON_GetArrayItem(att, 0), "cause"), r.attempts[0].cause);
    assert_true(num(cJSON_GetArrayItem(att, 0), "sim_seconds") == 612.5);
    assert_int_equal((int)num(cJSON_GetArrayItem(att, 1), "start_iteration"), 2);
    assert_int_equal((int)num(cJSON_GetArrayItem(att, 1), "exit_code"), 0);

    const cJSON *faults = get(root, "faults");
    assert_int_equal(cJSON_GetArraySize(faults), 2);
    const cJSON *h = cJSON_GetArrayItem(faults, 0), *n = cJSON_GetArrayItem(faults, 1);
    assert_string_equal(str(h, "kind"), "hang");
    char desc[256];
    fault_spec_describe(&r.faults[0].fault, desc, sizeof desc);
    assert_string_equal(str(h, "description"), desc);
    assert_int_equal((int)num(h, "rank"), 5);
    assert_string_equal(str(h, "group"), "dp");
    assert_true(cJSON_IsTrue(get(h, "attributed")));
    assert_int_equal((int)num(h, "attempt"), 0);
    assert_true(num(h, "detect_seconds") == 600.0);
    assert_true(num(h, "fired_at") == 12.0);
    assert_string_equal(str(h, "diagnosis"), r.faults[0].diagnosis);
    assert_string_equal(str(n, "kind"), "nan");
    assert_true(cJSON_IsFalse(get(n, "fired")));
    assert_true(cJSON_IsNull(get(n, "attempt"))); /* never fired */
    assert_true(cJSON_IsNull(get(n, "fired_at")));
    assert_true(cJSON_IsNull(get(n, "detect_seconds"))); /* never detected */

    const cJSON *checks = get(root, "checks");
    assert_int_equal(cJSON_GetArraySize(checks), 2);
    assert_true(cJSON_IsTrue(get(cJSON_GetArrayItem(checks, 0), "passed")));
    assert_string_equal(str(cJSON_GetArrayItem(checks, 1), "name"), "continuity");
    assert_string_equal(str(cJSON_GetArrayItem(checks, 1), "detail"), NASTY); /* every byte survives */

    const cJSON *c = get(root, "campaign");
    assert_int_equal((int)num(c, "trials"), 3);
    assert_int_equal((int)num(get(get(c, "per_kind"), "hang"), "trials"), 2);
    assert_int_equal((int)num(get(get(c, "per_kind"), "hang"), "ok"), 1);
    assert_int_equal((int)num(c, "jobs"), 2);
    assert_true(num(c, "mean_trial_seconds") == 1.5);
    assert_string_equal(cJSON_GetStringValue(get(c, "seed")), "1152921504606846977"); /* beyond 2^53: exact, as text */

    const cJSON *losses = get(root, "losses"), *ref = get(root, "reference_losses");
    assert_int_equal(cJSON_GetArraySize(losses), ITERS + 1);
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(losses, 0)));
    assert_true(cJSON_IsNull(cJSON_GetArrayItem(losses, 3)));
    assert_true(cJSON_GetArrayItem(losses, 2)->valuedouble == r.losses[2]); /* bit-exact round trip */
    assert_true(cJSON_GetArrayItem(ref, 3)->valuedouble == r.reference_losses[3]);
    assert_true(num(root, "peak_bytes") == (double)r.peak_bytes);
    assert_true(num(root, "capacity_bytes") == (double)r.capacity_bytes);
    assert_true(num(root, "sim_seconds") == 632.5);
    cJSON_Delete(root);
    free(text);

    /* no campaign, no reference run: null, not a missing key */
    r.has_campaign = false;
    free(r.reference_losses);
    r.reference_losses = NULL;
    text = fx_capture(write_json, &r);
    root = cJSON_Parse(text);
    assert_non_null(root);
    assert_true(cJSON_IsNull(get(root, "campaign")));
    assert_true(cJSON_IsNull(get(root, "reference_losses")));
    cJSON_Delete(root);
    free(text);
    report_free(&r);
}

static int count(const char *s, const char *needle) {
    int n = 0;
    for (const char *p = strstr(s, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static void test_junit_counts_and_escapes(void **state) {
    (void)state;
    sc_report a, b;
    fill(&a);
    fill(&b);
    snprintf(b.name, sizeof b.name, "clean");
    b.checks[1].passed = true;
    b.passed = true;
    char *x = fx_capture(write_junit1, &a);
    assert_true(strncmp(x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", 39) == 0);
    assert_non_null(strstr(x, "<testsuites name=\"twinrun scenarios\" tests=\"2\" failures=\"1\""));
    assert_non_null(strstr(x, "<testsuite name=\"unit&lt;&amp;&gt;\" tests=\"2\" failures=\"1\""));
    assert_int_equal(count(x, "<testcase "), 2);
    assert_int_equal(count(x, "<failure "), 1);
    assert_non_null(
        strstr(x, "<testcase classname=\"twinrun.scenario.unit&lt;&amp;&gt;\" name=\"continuity\" time=\"0\">"));
    assert_non_null(
        strstr(x, "<testcase classname=\"twinrun.scenario.unit&lt;&amp;&gt;\" name=\"completes\" time=\"0\"/>"));
    /* the attribute keeps its newline as a reference; the element text keeps it as is */
    assert_non_null(strstr(x, "message=\"loss &lt;&amp;&quot;&gt; &apos;x&apos; differs&#10;at iteration 3\">"));
    assert_non_null(strstr(x, ">loss &lt;&amp;&quot;&gt; &apos;x&apos; differs\nat iteration 3</failure>"));
    assert_null(strchr(x, '\x01'));
    assert_null(strstr(x, "<&"));
    assert_non_null(strstr(x, "<system-out>"));
    assert_non_null(strstr(x, "FAILED: 1 of 2 expectations: continuity\n</system-out>"));
    assert_null(strchr(x, '\033')); /* no colour in a file */
    assert_true(strstr(x, "</properties>") < strstr(x, "<testcase ") &&
                strstr(x, "</testcase>") < strstr(x, "<system-out>")); /* the schema's order */
    assert_non_null(strstr(x, "</testsuite>\n</testsuites>\n"));
    free(x);

    FILE *f = tmpfile();
    const sc_report *both[2] = {&a, &b};
    assert_int_equal(report_junit(f, both, 2), 0);
    long len = ftell(f);
    rewind(f);
    x = calloc(1, (size_t)len + 1);
    assert_int_equal(fread(x, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    assert_non_null(
        strstr(x, "<testsuites name=\"twinrun scenarios\" tests=\"4\" failures=\"1\" errors=\"0\" time=\"0.750\">"));
    assert_non_null(strstr(x, "<testsuite name=\"clean\" tests=\"2\" failures=\"0\""));
    assert_int_equal(count(x, "<testsuite "), 2);
    free(x);

    /* a run with no expectations still gives CI a test case to fail */
    b.nchecks = 0;
    b.passed = false;
    x = fx_capture(write_junit1, &b);
    assert_non_null(strstr(x, "tests=\"1\" failures=\"1\""));
    assert_non_null(strstr(x, "name=\"scenario\" time=\"0\">"));
    free(x);
    assert_int_equal(report_junit(stdout, NULL, 1), -1);
    report_free(&a);
    report_free(&b);
}

static void test_text_summary(void **state) {
    (void)state;
    sc_report r;
    fill(&r);
    char *t = fx_capture(write_text, &r);
    fputs(t, stdout);
    assert_non_null(strstr(t, "scenario unit<&>: 2 nodes x 4 GPUs (H100), 8 ranks, TP2xPP2xCP1xDP2, 4 iterations\n"));
    assert_non_null(strstr(t, "watchdog: rank 5 never joined dp all_reduce #41"));
    assert_non_null(strstr(t, "hang of rank 5"));
    assert_non_null(strstr(t, "600.000"));
    assert_non_null(strstr(t, "campaign: 3 trials"));
    assert_non_null(strstr(t, "hang 1/2"));
    assert_non_null(strstr(t, "\n  1.500 s a trial, 2 at a time\n"));
    assert_non_null(strstr(t, "FAIL  continuity: loss <&\"> 'x'? differs at iteration 3\n"));
    assert_non_null(strstr(t, "PASS  completes"));
    assert_non_null(
        strstr(t, "loss: final 2.100000; same bits as the fault-free run at 3/3 iterations; missing at 1 iteration\n"));
    const char *last = strstr(t, "FAILED: 1 of 2 expectations: continuity\n");
    assert_non_null(last);
    assert_int_equal(last[strlen("FAILED: 1 of 2 expectations: continuity\n")], '\0'); /* the verdict ends it */
    assert_null(strchr(t, '\033'));
    int lines = count(t, "\n");
    assert_true(lines <= 40);
    for (const char *l = t; *l;) { /* one screen wide, except a failure's full detail */
        const char *e = strchr(l, '\n');
        if (!strstr(l, "FAIL") || strstr(l, "FAIL") > e) assert_true(e - l <= 100);
        l = e + 1;
    }
    free(t);

    r.checks[1].passed = true;
    r.passed = true;
    t = fx_capture(write_text, &r);
    assert_non_null(strstr(t, "PASSED: 2/2 expectations\n"));
    free(t);
    report_free(&r);
    report_free(&r); /* idempotent */
    report_free(NULL);
}

static void test_progress_is_silent_in_files(void **state) {
    (void)state;
    FILE *f = tmpfile();
    assert_non_null(f);
    report_progress(f, "attempt 1, iteration", 3, 8);
    report_progress(f, "attempt 1, iteration", 8, 8);
    assert_int_equal(ftell(f), 0);
    fclose(f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_json_round_trip),
        cmocka_unit_test(test_junit_counts_and_escapes),
        cmocka_unit_test(test_text_summary),
        cmocka_unit_test(test_progress_is_silent_in_files),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
