/* The doctor's report as JUnit XML, as the scenario runner writes its own (runner/report_junit.c): one
 * <testsuite>, a <testcase> per check, a failed check a <failure> with its message and fix, a skipped
 * one <skipped/>, and the text report in <system-out>. */
#include <stdlib.h>
#include <string.h>

#include "core/text.h"
#include "doctor/doctor_internal.h"

int doctor_report_junit(FILE *f, const doctor_report *r) {
    int failures = 0, skipped = 0;
    for (int i = 0; i < r->nchecks; i++)
        failures += r->checks[i].status == DOCTOR_FAIL, skipped += r->checks[i].status == DOCTOR_SKIP;
    fputs("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n", f);
    fprintf(f, "<testsuites name=\"twinrun doctor\" tests=\"%d\" failures=\"%d\" errors=\"0\">\n", r->nchecks,
            failures);
    fprintf(f, "  <testsuite name=\"doctor\" tests=\"%d\" failures=\"%d\" errors=\"0\" skipped=\"%d\">\n", r->nchecks,
            failures, skipped);
    fputs("    <properties>\n", f);
    char v[64];
    snprintf(v, sizeof v, "%d nodes x %d GPUs (%d ranks)", r->nodes, r->gpus_per_node, r->world);
    const char *props[][2] = {{"build", r->build}, {"backend", r->backend}, {"versions", r->versions}, {"world", v}};
    for (size_t i = 0; i < sizeof props / sizeof *props; i++) {
        fputs("      <property name=\"", f);
        tr_xml_text(f, props[i][0], true);
        fputs("\" value=\"", f);
        tr_xml_text(f, props[i][1], true);
        fputs("\"/>\n", f);
    }
    fputs("    </properties>\n", f);
    for (int i = 0; i < r->nchecks; i++) {
        const doctor_check *c = &r->checks[i];
        fputs("    <testcase classname=\"twinrun.doctor\" name=\"", f);
        tr_xml_text(f, c->id, true);
        fputs("\" time=\"0\">\n", f);
        if (c->status == DOCTOR_FAIL) {
            fputs("      <failure type=\"check\" message=\"", f);
            tr_xml_text(f, c->detail, true);
            fputs("\">", f);
            tr_xml_text(f, c->detail, false);
            fputs("</failure>\n", f);
        } else if (c->status == DOCTOR_SKIP) {
            fputs("      <skipped message=\"", f);
            tr_xml_text(f, c->detail, true);
            fputs("\"/>\n", f);
        }
        fputs("      <system-out>", f);
        tr_xml_text(f, c->detail, false);
        fputs("</system-out>\n    </testcase>\n", f);
    }
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m) return -1;
    doctor_report_text(m, r);
    if (fclose(m)) {
        free(text);
        return -1;
    }
    fputs("    <system-out>", f);
    tr_xml_text(f, text, false);
    fputs("</system-out>\n  </testsuite>\n</testsuites>\n", f);
    free(text);
    return fflush(f) || ferror(f) ? -1 : 0;
}
