/* `scenario plan FILE.yaml [options]`: the planner's command line (runner/plan.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/plan.h"

static int plan_usage(void) {
    fputs("usage: scenario plan FILE.yaml [--device NAME] [--micro-batches 1,2,4] [--max-micro-batch N]\n"
          "                               [--recompute none,selective,full] [--layouts] [--all] [--headroom F]\n"
          "                               [--work DIR] [--json FILE]\n"
          "Tries micro-batch sizes and recomputation settings (--layouts: also the TP x PP x CP x DP factorisations\n"
          "of the world) for the scenario's job, each a shape-only predict run on the twin, and prints the table and\n"
          "the fastest that fits (docs/prediction.md#the-planner). Exit 0: one fits; 1: none fits; 2: bad input.\n",
          stderr);
    return 2;
}

/* "1,2,4" into out (at most cap positive integers): the count, or -1. */
static int int_list(const char *s, int *out, int cap) {
    int n = 0;
    while (*s) {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 1 || v > 1 << 20 || n == cap || (*end && *end != ',')) return -1;
        out[n++] = (int)v;
        s = *end ? end + 1 : end;
    }
    return n > 0 ? n : -1;
}

static int recompute_list(const char *s, unsigned *mask) {
    *mask = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int k = -1;
        for (int rc = 0; rc < SC_RC_COUNT; rc++)
            if (strcmp(t, plan_recompute_name((sc_plan_recompute)rc)) == 0) k = rc;
        if (k < 0) return -1;
        *mask |= 1u << k;
    }
    return *mask ? 0 : -1;
}

int plan_main(int argc, char **argv) {
    sc_plan_options o;
    plan_options_default(&o);
    const char *file = NULL, *json = NULL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const bool has = i + 1 < argc;
        if (!strcmp(a, "--layouts")) o.layouts = true;
        else if (!strcmp(a, "--all")) o.all = true;
        else if (!strcmp(a, "--device") && has) o.device = argv[++i];
        else if (!strcmp(a, "--work") && has) o.work_dir = argv[++i];
        else if (!strcmp(a, "--json") && has) json = argv[++i];
        else if (!strcmp(a, "--micro-batches") && has) {
            if ((o.nmicro = int_list(argv[++i], o.micro, SC_PLAN_MAX_MICRO)) < 0)
                return fprintf(stderr,
                               "scenario plan: --micro-batches %s: want positive integers, like 1,2,4 "
                               "(at most %d)\n",
                               argv[i], SC_PLAN_MAX_MICRO),
                       2;
        } else if (!strcmp(a, "--max-micro-batch") && has) {
            int v[1];
            if (int_list(argv[++i], v, 1) != 1)
                return fprintf(stderr, "scenario plan: --max-micro-batch %s: want a positive integer\n", argv[i]), 2;
            o.max_micro = v[0];
        } else if (!strcmp(a, "--recompute") && has) {
            if (recompute_list(argv[++i], &o.recompute))
                return fprintf(stderr, "scenario plan: --recompute %s: want a list of none, selective, full\n",
                               argv[i]),
                       2;
        } else if (!strcmp(a, "--headroom") && has) {
            char *end;
            o.headroom = strtod(argv[++i], &end);
            if (*end || end == argv[i] || !(o.headroom >= 0 && o.headroom < 1))
                return fprintf(stderr, "scenario plan: --headroom %s: want a fraction, 0 <= F < 1\n", argv[i]), 2;
        } else if (a[0] == '-') {
            fprintf(stderr, "scenario plan: %s %s\n", a,
                    has ? "is not an option" : "needs a value, or is not an option");
            return plan_usage();
        } else if (!file) file = a;
        else return fprintf(stderr, "scenario plan: one scenario at a time (%s, then %s)\n", file, a), 2;
    }
    if (!file) return plan_usage();
    scenario s;
    char err[4096] = "", path[4096];
    const int where = scenario_find(file, path, sizeof path, err, sizeof err);
    if (where < 0) return fprintf(stderr, "scenario plan: %s\n", err), 2;
    if (where == 1) fprintf(stderr, "scenario plan: %s: not in the current directory; using %s\n", file, path);
    if (scenario_load(path, &s, err, sizeof err)) return fprintf(stderr, "scenario plan: %s\n", err), 2;
    o.progress = stderr;
    sc_plan_result r;
    int rc = plan_search(&s, &o, &r, err, sizeof err);
    scenario_free(&s);
    if (rc) return fprintf(stderr, "scenario plan: %s\n", err), 2;
    plan_print(stdout, &r);
    int status = r.best >= 0 ? 0 : 1;
    if (json && plan_write_json(json, &r))
        fprintf(stderr, "scenario plan: cannot write %s (an old one is left as it was)\n", json), status = 2;
    plan_free(&r);
    return status;
}
