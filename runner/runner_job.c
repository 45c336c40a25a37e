/* The job as the supervisor runs it: the scenario's flags parsed by the engine's own parser for
 * this layout, and one run of it on the twin with the result kept. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner_internal.h"
#include "twinrun/err.h"

int runner_job_init(sc_job *j, const scenario *s, const sc_run_options *o, char *err, size_t errlen) {
    memset(j, 0, sizeof *j);
    j->world = s->nodes * s->gpus_per_node;
    j->cfg = calloc(1, sizeof *j->cfg);
    if (!j->cfg) return tr_errf(err, errlen, "out of host memory for the job's config");
    char **argv = NULL;
    int argc = 0;
    if (scenario_argv(s, &argv, &argc)) return tr_errf(err, errlen, "out of host memory for the job's flags");
    tr_config_defaults(j->cfg);
    char perr[2048] = "";
    int rc = tr_config_parse(j->cfg, argc, argv, perr, sizeof perr);
    scenario_argv_free(argv, argc);
    if (rc) return tr_errf(err, errlen, "%s: the job's flags: %s", s->path, rc == 1 ? "--help is not a job" : perr);
    j->cfg->log_straggler = true; /* the supervisor wants to know about slow ranks */
    if (s->watchdog_seconds > 0) j->cfg->distributed_timeout_minutes = s->watchdog_seconds / 60.0;
    if (train_prepare_config(j->cfg, j->world, perr, sizeof perr))
        return tr_errf(err, errlen, "%s: the job does not fit this layout: %s", s->path, perr);
    j->iters = j->cfg->train_iters > 0 ? j->cfg->train_iters : j->cfg->train_samples / j->cfg->global_batch_size;
    twin_options_default(&j->opt);
    j->opt.seed = s->seed;
    j->opt.device = s->device;
    j->opt.gpus_per_node = s->gpus_per_node;
    j->opt.capacity_scale = s->capacity_scale > 0 ? s->capacity_scale : 1.0;
    j->opt.watchdog_timeout_s = j->cfg->distributed_timeout_minutes * 60.0;
    j->opt.quiet = true;
    snprintf(j->ckpt_dir, sizeof j->ckpt_dir, "%s/checkpoints", o->work_dir);
    /* Megatron's default cache sits beside the data: a rehearsal writes only in its work folder */
    if (!j->cfg->data_cache_path[0])
        snprintf(j->cfg->data_cache_path, sizeof j->cfg->data_cache_path, "%.*s/data_cache",
                 (int)sizeof j->cfg->data_cache_path - 16, o->work_dir);
    return 0;
}

void runner_job_free(sc_job *j) {
    free(j->cfg);
    memset(j, 0, sizeof *j);
}

void runner_run_free(sc_run *r) {
    twin_result_free(&r->tres);
    free(r->losses);
    free(r->digests);
    memset(r, 0, sizeof *r);
}

int runner_launch_on_twin(void *ctx, int world, launch_entry entry, void *arg, char *err, size_t errlen) {
    const sc_launch *l = ctx;
    return twin_launch(world, entry, arg, l->opt, l->result, err, errlen);
}

void runner_job_run(sc_job *j, sc_run *out) {
    memset(out, 0, sizeof *out);
    out->losses = malloc(sizeof(double) * (size_t)(j->iters + 1));
    out->digests = calloc((size_t)j->world, sizeof *out->digests);
    TR_CHECK(out->losses && out->digests, "out of host memory for a run's results");
    for (int64_t i = 0; i <= j->iters; i++) out->losses[i] = NAN;
    out->sum.iteration_loss = out->losses;
    out->sum.weight_digest = out->digests;
    out->sum.predict = j->predict;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    sc_launch l = {&j->opt, &out->tres};
    out->rc = train_run_with(j->cfg, j->world, j->log, &out->sum, runner_launch_on_twin, &l, out->err, sizeof out->err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    out->wall = (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
    fflush(j->log);
}
