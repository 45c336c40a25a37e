/* The doctor's report for a terminal: one line a check, then the collective test's table in nccl-tests'
 * units (GB/s = 1e9 bytes a second). */
#include <stdio.h>

#include "doctor/doctor_internal.h"

void doctor_report_text(FILE *f, const doctor_report *r) {
    fprintf(f, "doctor: %d ranks, %d node%s of %d; %s, backend %s, %s%s%s\n", r->world, r->nodes,
            r->nodes == 1 ? "" : "s", r->gpus_per_node, r->build, r->backend, r->versions,
            r->simulated[0] ? "; times simulated on " : "", r->simulated);
    int failed = 0;
    for (int i = 0; i < r->nchecks; i++) {
        const doctor_check *c = &r->checks[i];
        static const char *const tag[] = {"  ok  ", " WARN ", " FAIL ", " skip "};
        fprintf(f, "%s %-38s %s\n", tag[c->status], c->title, c->detail);
        failed += c->status == DOCTOR_FAIL;
    }
    if (r->nmeasures) {
        fprintf(f, "\n  %-10s %-15s %10s %7s %11s %10s %10s %11s  %s\n", "stage", "op", "size", "groups", "time (us)",
                "algbw", "busbw", "median bus", "slowest group (GB/s)");
        for (int i = 0; i < r->nmeasures; i++) {
            const doctor_measure *m = &r->measures[i];
            fprintf(f, "  %-10s %-15s %10zu %7d %11.1f %10.2f %10.2f %11.2f  %s\n", m->stage, m->op, m->bytes,
                    m->groups, m->time_s * 1e6, m->algbw / 1e9, m->busbw / 1e9, m->median_busbw / 1e9, m->slow_name);
        }
    }
    if (r->slowest_link[0]) fprintf(f, "\nslowest link: %s\n", r->slowest_link);
    if (failed) fprintf(f, "doctor: %d check%s FAILED\n", failed, failed == 1 ? "" : "s");
    else fprintf(f, "doctor: every check passed\n");
}
