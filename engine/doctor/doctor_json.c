/* The doctor's report as JSON (docs/doctor.md lists the fields), for CI and for comparing clusters. */
#include <math.h>
#include <stdlib.h>

#include <cjson/cJSON.h>

#include "doctor/doctor_internal.h"

static void num(cJSON *o, const char *k, double v) {
    if (isfinite(v)) cJSON_AddNumberToObject(o, k, v);
    else cJSON_AddNullToObject(o, k);
}

static cJSON *build(const doctor_report *r) {
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    num(root, "world", r->world);
    num(root, "nodes", r->nodes);
    num(root, "gpus_per_node", r->gpus_per_node);
    cJSON_AddStringToObject(root, "build", r->build);
    cJSON_AddStringToObject(root, "backend", r->backend);
    cJSON_AddStringToObject(root, "device", r->device);
    cJSON_AddStringToObject(root, "versions", r->versions);
    if (r->simulated[0]) cJSON_AddStringToObject(root, "simulated", r->simulated);
    else cJSON_AddNullToObject(root, "simulated");
    cJSON_AddBoolToObject(root, "passed", r->passed);
    num(root, "clock_skew_seconds", r->clock_skew_s);
    num(root, "clock_skew_rank", r->clock_skew_rank);
    cJSON_AddStringToObject(root, "slowest_link", r->slowest_link);
    if (r->slow_node >= 0) num(root, "slow_node", r->slow_node);
    else cJSON_AddNullToObject(root, "slow_node");
    cJSON *checks = cJSON_AddArrayToObject(root, "checks");
    for (int i = 0; checks && i < r->nchecks; i++) {
        const doctor_check *c = &r->checks[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(checks, o);
        cJSON_AddStringToObject(o, "id", c->id);
        cJSON_AddStringToObject(o, "title", c->title);
        cJSON_AddStringToObject(o, "status", doctor_status_name(c->status));
        if (c->node >= 0) num(o, "node", c->node);
        else cJSON_AddNullToObject(o, "node");
        if (c->first_rank >= 0) {
            num(o, "first_rank", c->first_rank);
            num(o, "last_rank", c->last_rank);
        } else {
            cJSON_AddNullToObject(o, "first_rank");
            cJSON_AddNullToObject(o, "last_rank");
        }
        cJSON_AddStringToObject(o, "detail", c->detail);
    }
    cJSON *ms = cJSON_AddArrayToObject(root, "collectives");
    for (int i = 0; ms && i < r->nmeasures; i++) {
        const doctor_measure *m = &r->measures[i];
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddItemToArray(ms, o);
        cJSON_AddStringToObject(o, "stage", m->stage);
        cJSON_AddStringToObject(o, "op", m->op);
        num(o, "bytes", (double)m->bytes);
        num(o, "groups", m->groups);
        num(o, "group_size", m->group_size);
        num(o, "time_seconds", m->time_s);
        num(o, "algbw", m->algbw);
        num(o, "busbw", m->busbw);
        num(o, "median_busbw", m->median_busbw);
        cJSON_AddStringToObject(o, "slowest_group", m->slow_name);
        num(o, "slowest_first_rank", m->slow_first);
        num(o, "slowest_last_rank", m->slow_last);
    }
    return root;
}

int doctor_report_json(FILE *f, const doctor_report *r) {
    cJSON *root = build(r);
    char *text = root ? cJSON_Print(root) : NULL;
    cJSON_Delete(root);
    if (!text) return -1;
    fputs(text, f);
    fputc('\n', f);
    free(text);
    return fflush(f) || ferror(f) ? -1 : 0;
}
