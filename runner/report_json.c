/* The scenario report as JSON, every field of sc_report (docs/reports.md lists them). What is
 * not there is null rather than a sentinel: a NaN loss, the detection time of a fault nobody
 * detected, the attempt of a fault that never fired. */
#include <math.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "runner/report.h"

/* cJSON's adders return NULL when out of memory; one flag checked at the end keeps the builders
 * readable. */
typedef struct builder {
    bool oom;
} builder;

static cJSON *check(builder *b, cJSON *item) {
    if (!item) b->oom = true;
    return item;
}

static void num(builder *b, cJSON *o, const char *key, double v) {
    check(b, isfinite(v) ? cJSON_AddNumberToObject(o, key, v) : cJSON_AddNullToObject(o, key));
}
static void str(builder *b, cJSON *o, const char *key, const char *v) { check(b, cJSON_AddStringToObject(o, key, v)); }
static void boolean(builder *b, cJSON *o, const char *key, bool v) { check(b, cJSON_AddBoolToObject(o, key, v)); }
static void null_or_num(builder *b, cJSON *o, const char *key, bool present, double v) {
    if (present) num(b, o, key, v);
    else check(b, cJSON_AddNullToObject(o, key));
}

static cJSON *array(builder *b, cJSON *o, const char *key) { return check(b, cJSON_AddArrayToObject(o, key)); }
static cJSON *object(builder *b, cJSON *o, const char *key) { return check(b, cJSON_AddObjectToObject(o, key)); }
static cJSON *element(builder *b, cJSON *arr) {
    cJSON *e = check(b, cJSON_CreateObject());
    if (e && arr) cJSON_AddItemToArray(arr, e);
    else if (e) cJSON_Delete(e), e = NULL;
    return e;
}

static void attempts(builder *b, cJSON *root, const sc_report *r) {
    cJSON *arr = array(b, root, "attempts");
    for (int i = 0; i < r->nattempts && arr; i++) {
        const sc_attempt *a = &r->attempts[i];
        cJSON *o = element(b, arr);
        if (!o) return;
        num(b, o, "index", a->index);
        num(b, o, "start_iteration", (double)a->start_iteration);
        num(b, o, "end_iteration", (double)a->end_iteration);
        num(b, o, "exit_code", a->exit_code);
        str(b, o, "cause", a->cause);
        num(b, o, "sim_seconds", a->sim_seconds);
        num(b, o, "wall_seconds", a->wall_seconds);
    }
}

/* Every field of the spec, so a reader can rebuild the fault without the scenario file. */
static void spec(builder *b, cJSON *o, const fault_spec *f) {
    str(b, o, "kind", fault_kind_name(f->kind));
    char desc[256];
    fault_spec_describe(f, desc, sizeof desc);
    str(b, o, "description", desc);
    num(b, o, "step", (double)f->step);
    num(b, o, "rank", f->rank);
    num(b, o, "node", f->node);
    str(b, o, "group", f->group);
    str(b, o, "op", f->op);
    str(b, o, "tensor", fault_tensor_name(f->tensor));
    num(b, o, "layer", f->layer);
    boolean(b, o, "inf", f->inf);
    num(b, o, "factor", f->factor);
    num(b, o, "devices", f->devices);
    str(b, o, "version", f->version);
    str(b, o, "damage", fault_damage_name(f->damage));
    num(b, o, "line", f->line);
    num(b, o, "col", f->col);
}

/* A fault and its fate: an element of faults[] and of campaign.trials[]. */
static void outcome(builder *b, cJSON *o, const sc_fault_outcome *x) {
    spec(b, o, &x->fault);
    boolean(b, o, "fired", x->fired);
    boolean(b, o, "detected", x->detected);
    boolean(b, o, "attributed", x->attributed);
    null_or_num(b, o, "attempt", x->attempt >= 0, x->attempt);
    null_or_num(b, o, "fired_at", x->fired, x->fired_at);
    null_or_num(b, o, "detect_seconds", x->detected && x->detect_seconds >= 0, x->detect_seconds);
    str(b, o, "diagnosis", x->diagnosis);
}

static void faults(builder *b, cJSON *root, const sc_report *r) {
    cJSON *arr = array(b, root, "faults");
    for (int i = 0; i < r->nfaults && arr; i++) {
        cJSON *o = element(b, arr);
        if (!o) return;
        outcome(b, o, &r->faults[i]);
    }
}

static void checks(builder *b, cJSON *root, const sc_report *r) {
    cJSON *arr = array(b, root, "checks");
    for (int i = 0; i < r->nchecks && arr; i++) {
        cJSON *o = element(b, arr);
        if (!o) return;
        str(b, o, "name", r->checks[i].name);
        boolean(b, o, "passed", r->checks[i].passed);
        str(b, o, "detail", r->checks[i].detail);
    }
}

static void campaign(builder *b, cJSON *root, const sc_report *r) {
    if (!r->has_campaign) {
        check(b, cJSON_AddNullToObject(root, "campaign"));
        return;
    }
    const sc_campaign_result *c = &r->campaign;
    cJSON *o = object(b, root, "campaign");
    if (!o) return;
    num(b, o, "trials", c->trials);
    num(b, o, "fired", c->fired);
    num(b, o, "detected", c->detected);
    num(b, o, "attributed", c->attributed);
    num(b, o, "continuity_ok", c->continuity_ok);
    num(b, o, "recovered", c->recovered);
    num(b, o, "max_detect_seconds", c->max_detect_seconds);
    num(b, o, "mean_detect_seconds", c->mean_detect_seconds);
    num(b, o, "wall_seconds", c->wall_seconds);
    num(b, o, "mean_trial_seconds", c->mean_trial_seconds);
    num(b, o, "jobs", c->jobs);
    if (c->seed <= (1ULL << 53)) { /* a JSON number holds it exactly; a larger seed goes as its decimal string */
        num(b, o, "seed", (double)c->seed);
    } else {
        char seed[24];
        snprintf(seed, sizeof seed, "%llu", (unsigned long long)c->seed);
        str(b, o, "seed", seed);
    }
    num(b, o, "replay_trial", (double)c->replay_trial);
    cJSON *kinds = object(b, o, "per_kind");
    for (int k = 0; k < FAULT_KIND_COUNT && kinds; k++) {
        cJSON *e = object(b, kinds, fault_kind_name((fault_kind)k));
        if (!e) return;
        num(b, e, "trials", c->per_kind_trials[k]);
        num(b, e, "ok", c->per_kind_ok[k]);
    }
    if (!c->trial) {
        check(b, cJSON_AddNullToObject(o, "per_trial"));
        return;
    }
    cJSON *arr = array(b, o, "per_trial");
    for (int t = 0; t < c->trials && arr; t++) {
        cJSON *e = element(b, arr);
        if (!e) return;
        num(b, e, "trial", c->trial[t].number);
        num(b, e, "wall_seconds", c->trial[t].wall_seconds);
        num(b, e, "resumed_from", (double)c->trial[t].resumed_from);
        num(b, e, "replayed_from", (double)c->trial[t].replayed_from);
        outcome(b, e, &c->trial[t].outcome);
        boolean(b, e, "continuity_ok", c->trial[t].continuity_ok);
        boolean(b, e, "completed", c->trial[t].completed);
        boolean(b, e, "ok", c->trial[t].ok);
    }
}

/* [train_iters + 1] values, null where NaN (no iteration 0 loss, or a missing one). */
static void losses(builder *b, cJSON *root, const char *key, const double *v, int64_t train_iters) {
    if (!v || train_iters < 0) {
        check(b, cJSON_AddNullToObject(root, key));
        return;
    }
    cJSON *arr = array(b, root, key);
    for (int64_t i = 0; i <= train_iters && arr; i++) {
        cJSON *x = check(b, isfinite(v[i]) ? cJSON_CreateNumber(v[i]) : cJSON_CreateNull());
        if (!x) return;
        cJSON_AddItemToArray(arr, x);
    }
}

int report_json(FILE *f, const sc_report *r) {
    if (!f || !r) return -1;
    builder b = {false};
    cJSON *root = check(&b, cJSON_CreateObject());
    if (!root) return -1;
    str(&b, root, "name", r->name);
    str(&b, root, "path", r->path);
    boolean(&b, root, "passed", r->passed);
    num(&b, root, "world", r->world);
    num(&b, root, "nodes", r->nodes);
    num(&b, root, "gpus_per_node", r->gpus_per_node);
    cJSON *layout = object(&b, root, "layout");
    if (layout) {
        num(&b, layout, "tp", r->tp);
        num(&b, layout, "pp", r->pp);
        num(&b, layout, "cp", r->cp);
        num(&b, layout, "dp", r->dp);
    }
    str(&b, root, "device", r->device);
    num(&b, root, "train_iters", (double)r->train_iters);
    attempts(&b, root, r);
    faults(&b, root, r);
    checks(&b, root, r);
    campaign(&b, root, r);
    losses(&b, root, "losses", r->losses, r->train_iters);
    losses(&b, root, "reference_losses", r->reference_losses, r->train_iters);
    num(&b, root, "peak_bytes", (double)r->peak_bytes);
    num(&b, root, "capacity_bytes", (double)r->capacity_bytes);
    num(&b, root, "wall_seconds", r->wall_seconds);
    num(&b, root, "sim_seconds", r->sim_seconds);
    if (r->predict) { /* mode: predict; the per-stage memory is in the work folder's predict.json */
        cJSON *p = object(&b, root, "predict");
        if (p) {
            num(&b, p, "step_time_s", r->step_time_s);
            num(&b, p, "tokens_per_s", r->tokens_per_s);
            num(&b, p, "mfu", r->mfu);
        }
    }
    char *text = b.oom ? NULL : cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return -1;
    const int rc = fputs(text, f) < 0 || fputc('\n', f) == EOF || fflush(f) ? -1 : 0;
    cJSON_free(text);
    return rc;
}
