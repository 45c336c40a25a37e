/* JUnit XML, the one test-report format every CI reads (Jenkins' junit step, GitHub's
 * dorny/test-reporter and mikepenz/action-junit-report, GitLab's artifacts:reports:junit): a
 * <testsuite> per scenario and a <testcase> per expectation, so a red build names the
 * expectation that failed. Element order inside a suite follows the Jenkins/Ant schema:
 * properties, testcases, system-out. */
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "runner/report.h"

/* The document's text: base's escaper, which the doctor's report shares. */
static void xml(FILE *f, const char *s, bool attribute) { tr_xml_text(f, s, attribute); }

static int failures_of(const sc_report *r) {
    if (r->nchecks == 0) return !r->passed;
    int n = 0;
    for (int i = 0; i < r->nchecks; i++) n += !r->checks[i].passed;
    return n;
}

/* A scenario without expectations still gets one test case, so a failed run turns CI red. */
static int tests_of(const sc_report *r) { return r->nchecks > 0 ? r->nchecks : 1; }

static void property(FILE *f, const char *name, const char *value) {
    fputs("      <property name=\"", f);
    xml(f, name, true);
    fputs("\" value=\"", f);
    xml(f, value, true);
    fputs("\"/>\n", f);
}

static void properties(FILE *f, const sc_report *r) {
    char v[128];
    fputs("    <properties>\n", f);
    property(f, "path", r->path);
    property(f, "device", r->device);
    snprintf(v, sizeof v, "%d nodes x %d GPUs (%d ranks)", r->nodes, r->gpus_per_node, r->world);
    property(f, "world", v);
    snprintf(v, sizeof v, "TP%dxPP%dxCP%dxDP%d", r->tp, r->pp, r->cp, r->dp);
    property(f, "layout", v);
    snprintf(v, sizeof v, "%lld", (long long)r->train_iters);
    property(f, "train_iters", v);
    snprintf(v, sizeof v, "%d", r->nattempts);
    property(f, "attempts", v);
    snprintf(v, sizeof v, "%.3f", r->sim_seconds);
    property(f, "sim_seconds", v);
    fputs("    </properties>\n", f);
}

static void testcase(FILE *f, const sc_report *r, const char *name, bool passed, const char *detail) {
    fputs("    <testcase classname=\"twinrun.scenario.", f);
    xml(f, r->name, true);
    fputs("\" name=\"", f);
    xml(f, name, true);
    fputs("\" time=\"0\"", f);
    if (passed) {
        fputs("/>\n", f);
        return;
    }
    fputs(">\n      <failure type=\"expectation\" message=\"", f);
    xml(f, detail && *detail ? detail : name, true);
    fputs("\">", f);
    xml(f, detail, false);
    fputs("</failure>\n    </testcase>\n", f);
}

/* The text summary, without colour (a memory stream is no terminal). */
static int system_out(FILE *f, const sc_report *r) {
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return -1;
    report_text(m, r);
    if (fclose(m) != 0) {
        free(text);
        return -1;
    }
    fputs("    <system-out>", f);
    xml(f, text, false);
    fputs("</system-out>\n", f);
    free(text);
    return 0;
}

static int suite(FILE *f, const sc_report *r) {
    fputs("  <testsuite name=\"", f);
    xml(f, r->name, true);
    fprintf(f, "\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"0\" time=\"%.3f\">\n", tests_of(r),
            failures_of(r), r->wall_seconds);
    properties(f, r);
    if (r->nchecks == 0)
        testcase(f, r, "scenario", r->passed, r->passed ? "" : "the scenario did not pass (no expectations checked)");
    for (int i = 0; i < r->nchecks; i++) testcase(f, r, r->checks[i].name, r->checks[i].passed, r->checks[i].detail);
    if (system_out(f, r)) return -1;
    fputs("  </testsuite>\n", f);
    return 0;
}

int report_junit(FILE *f, const sc_report *const *reports, int n) {
    if (!f || n < 0 || (n > 0 && !reports)) return -1;
    int tests = 0, failures = 0;
    double time = 0;
    for (int i = 0; i < n; i++) {
        if (!reports[i]) return -1;
        tests += tests_of(reports[i]);
        failures += failures_of(reports[i]);
        time += reports[i]->wall_seconds;
    }
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"twinrun scenarios\" tests=\"%d\" failures=\"%d\" errors=\"0\" time=\"%.3f\">\n",
            tests, failures, time);
    for (int i = 0; i < n; i++)
        if (suite(f, reports[i])) return -1;
    fputs("</testsuites>\n", f);
    return fflush(f) || ferror(f) ? -1 : 0;
}
