/* libFuzzer: scenario files (scenario_parse) and hostfiles (scenario_hostfile_parse) on raw bytes. A
 * failure always says where ("NAME:LINE:..."); a success keeps the format's promises: the layout
 * multiplies out to the cluster, every fault passes its check inside the world and the job, and
 * the argv the runner hands the engine is one the engine's own parser takes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/scenario.h"
#include "twinrun/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char NAME[] = "fuzz/scenario.yaml";

static void check_loaded(const scenario *s) {
    long long world = (long long)s->nodes * s->gpus_per_node;
    if (s->nodes < 1 || s->gpus_per_node < 1 || s->gpus_per_node > 64) abort();
    if ((long long)s->tp * s->pp * s->cp * s->dp != world) abort();
    if (s->train_iters < 1 || s->faults.gpus_per_node != s->gpus_per_node) abort();
    if (s->faults.n > 0 && !s->faults.fired) abort();
    char err[512];
    for (int i = 0; i < s->faults.n; i++) {
        const fault_spec *f = &s->faults.faults[i];
        if (fault_spec_check(f, (int)world, s->gpus_per_node, err, sizeof err) || f->step > s->train_iters ||
            f->line < 1 || s->faults.fired[i].fired)
            abort();
        char d[256];
        fault_spec_describe(f, d, sizeof d);
        if (!d[0]) abort();
    }
    if (s->campaign.step_min < 1 || s->campaign.step_max > s->train_iters ||
        s->campaign.step_min > s->campaign.step_max)
        abort();
    for (int i = 0; i < s->nhosts; i++)
        if (s->hosts[i].slots != s->gpus_per_node) abort();

    char **argv;
    int argc;
    if (scenario_argv(s, &argv, &argc)) return; /* out of memory only */
    if (argv[argc] != NULL) abort();
    tr_config *cfg = malloc(sizeof *cfg);
    if (cfg) {
        tr_config_defaults(cfg);
        if (tr_config_parse(cfg, argc, argv, err, sizeof err) != 0) abort();
        if (cfg->train_iters != s->train_iters || cfg->tensor_model_parallel_size != s->tp) abort();
        free(cfg);
    }
    scenario_argv_free(argv, argc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    scenario s;
    char err[1024] = "";
    if (scenario_parse((const char *)data, size, NAME, &s, err, sizeof err) == 0) {
        check_loaded(&s);
        scenario_free(&s);
    } else {
        if (strncmp(err, NAME, sizeof NAME - 1) != 0 || err[sizeof NAME - 1] != ':') abort();
        if (s.flags || s.hosts || s.faults.faults) abort(); /* a failed load holds nothing */
    }

    sc_host *hosts;
    int n;
    err[0] = 0;
    if (scenario_hostfile_parse((const char *)data, size, "fuzz/hostfile", &hosts, &n, err, sizeof err) == 0) {
        if (n < 1) abort();
        for (int i = 0; i < n; i++)
            if (hosts[i].slots < 1 || !hosts[i].name[0] || hosts[i].line < 1) abort();
        free(hosts);
    } else if (strncmp(err, "fuzz/hostfile:", 14) != 0 || hosts) {
        abort();
    }
    return 0;
}
