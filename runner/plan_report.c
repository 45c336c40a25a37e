/* The planner's table (text) and its JSON (runner/plan.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/safe_file.h"
#include "runner/plan.h"

#define GIB 1073741824.0

/* The table's memory unit: GiB, or MiB for a CPU-sized rehearsal (a scaled-down device, or peaks all
 * under 1 GiB, which would read 0.00). */
typedef struct unit {
    double bytes;
    const char *name;
} unit;

static unit unit_of(const sc_plan_result *r) {
    size_t worst = 0;
    for (int i = 0; i < r->ncand; i++) worst = r->cand[i].peak > worst ? r->cand[i].peak : worst;
    return r->capacity < 4 * GIB || worst < GIB ? (unit){1048576.0, "MiB"} : (unit){GIB, "GiB"};
}

static const char *setting(sc_plan_recompute rc) {
    static const char *const s[SC_RC_COUNT] = {"no recomputation", "selective recomputation", "full recomputation"};
    return (int)rc >= 0 && rc < SC_RC_COUNT ? s[rc] : "?";
}

static const char *status_name(sc_plan_status st) {
    switch (st) {
    case SC_PLAN_FITS: return "yes";
    case SC_PLAN_NO_FIT: return "no";
    case SC_PLAN_SKIPPED: return "skipped";
    case SC_PLAN_INVALID: return "invalid";
    case SC_PLAN_FAILED: return "failed";
    }
    return "?";
}

static void layout(char *out, size_t len, const sc_plan_cand *c) {
    snprintf(out, len, "TP%d PP%d CP%d DP%d", c->tp, c->pp, c->cp, c->dp);
}

static bool several_layouts(const sc_plan_result *r) {
    for (int i = 1; i < r->ncand; i++)
        if (r->cand[i].tp != r->cand[0].tp || r->cand[i].pp != r->cand[0].pp || r->cand[i].cp != r->cand[0].cp)
            return true;
    return false;
}

/* What recomputation buys: per setting, the largest micro-batch that fits and its step, against the
 * fastest candidate without recomputation. */
static void recompute_summary(FILE *f, const sc_plan_result *r) {
    int none_best = -1;
    for (int i = 0; i < r->ncand; i++)
        if (r->cand[i].recompute == SC_RC_NONE && r->cand[i].status == SC_PLAN_FITS && r->cand[i].step_time > 0 &&
            (none_best < 0 || r->cand[i].step_time < r->cand[none_best].step_time))
            none_best = i;
    fprintf(f, "largest micro-batch that fits:");
    for (int rc = 0; rc < SC_RC_COUNT; rc++) {
        int largest = -1, seen = 0, lighter = 0, lighter_upto = 0, smallest_no = 0;
        for (int i = 0; i < r->ncand; i++) {
            const sc_plan_cand *c = &r->cand[i];
            if ((int)c->recompute != rc) continue;
            seen++;
            if (c->status == SC_PLAN_SKIPPED && strstr(c->note, "lighter") != NULL)
                lighter++, lighter_upto = c->micro > lighter_upto ? c->micro : lighter_upto;
            if (c->status == SC_PLAN_NO_FIT && (!smallest_no || c->micro < smallest_no)) smallest_no = c->micro;
            if (c->status == SC_PLAN_FITS &&
                (largest < 0 || c->micro > r->cand[largest].micro ||
                 (c->micro == r->cand[largest].micro && c->step_time < r->cand[largest].step_time)))
                largest = i;
        }
        if (!seen) continue;
        fprintf(f, "%s %s: ", rc ? ";" : "", setting((sc_plan_recompute)rc));
        if (largest < 0) {
            if (lighter) fprintf(f, "not needed up to micro-batch %d (a lighter setting fits)", lighter_upto);
            if (smallest_no) fprintf(f, "%smicro-batch %d does not fit", lighter ? ", and " : "none: ", smallest_no);
            if (!lighter && !smallest_no) fprintf(f, "not tried");
            continue;
        }
        const sc_plan_cand *c = &r->cand[largest];
        fprintf(f, "%d (", c->micro);
        if (several_layouts(r)) fprintf(f, "TP%d PP%d CP%d DP%d, ", c->tp, c->pp, c->cp, c->dp);
        fprintf(f, "step %.4g s", c->step_time);
        if (rc != SC_RC_NONE && none_best >= 0 && c->step_time > 0)
            fprintf(f, ", %.2fx the tokens/s of the best without", r->cand[none_best].step_time / c->step_time);
        fprintf(f, ")");
    }
    fprintf(f, "\n");
}

void plan_print(FILE *f, const sc_plan_result *r) {
    const double limit = (1.0 - r->headroom) * (double)r->capacity;
    const unit u = unit_of(r);
    fprintf(f,
            "plan: %s: %d ranks of %s, %.2f %s each (fits: peak <= %.0f%% = %.2f %s), global batch %" PRId64
            " x sequence %d\n",
            r->scenario, r->world, r->device, r->capacity / u.bytes, u.name, 100.0 * (1.0 - r->headroom),
            limit / u.bytes, u.name, r->global_batch, r->seq_length);
    fprintf(f, "  (M: micro-batches per DP rank; a candidate runs at min(M, PP) and, when it fits and M > PP + 1, "
               "at PP + 1, its step extrapolated to M)\n");
    char peak_head[16];
    snprintf(peak_head, sizeof peak_head, "peak %s", u.name);
    fprintf(f, "  %-18s %5s %-9s %5s %9s %7s %-7s %9s %11s %6s  %s\n", "layout", "micro", "recompute", "M", peak_head,
            "of cap", "fits", "step s", "tokens/s", "MFU", "note");
    for (int i = 0; i < r->ncand; i++) {
        const sc_plan_cand *c = &r->cand[i];
        char lay[64], peak[16] = "-", cap[16] = "-", step[16] = "-", tps[24] = "-", mfu[16] = "-";
        layout(lay, sizeof lay, c);
        if (c->peak) {
            snprintf(peak, sizeof peak, "%.2f", c->peak / u.bytes);
            snprintf(cap, sizeof cap, "%.1f%%", 100.0 * (double)c->peak / (double)r->capacity);
        }
        if (c->step_time > 0) {
            snprintf(step, sizeof step, "%.4g", c->step_time);
            snprintf(tps, sizeof tps, "%.0f", c->tokens_per_s);
            snprintf(mfu, sizeof mfu, "%.1f%%", 100.0 * c->mfu);
        }
        fprintf(f, "%c %-18s %5d %-9s %5" PRId64 " %9s %7s %-7s %9s %11s %6s  %s\n", i == r->best ? '*' : ' ', lay,
                c->micro, plan_recompute_name(c->recompute), c->micro_batches, peak, cap, status_name(c->status), step,
                tps, mfu, c->note);
    }
    if (r->best >= 0) {
        const sc_plan_cand *b = &r->cand[r->best];
        char lay[64];
        layout(lay, sizeof lay, b);
        fprintf(f,
                "best (*): %s, micro-batch %d, %s: step %.4g s, %.0f tokens/s, MFU %.1f%%, peak %.2f %s (%.1f%% of "
                "%.2f %s)\n",
                lay, b->micro, setting(b->recompute), b->step_time, b->tokens_per_s, 100.0 * b->mfu, b->peak / u.bytes,
                u.name, 100.0 * (double)b->peak / (double)r->capacity, r->capacity / u.bytes, u.name);
    } else {
        fprintf(f, "best: none fits; lower the micro-batch, recompute, or spread the model over more ranks "
                   "(--layouts)\n");
    }
    recompute_summary(f, r);
    fprintf(f, "planned in %.1f s: %d shape-only runs\n", r->wall_seconds, r->runs);
}

int plan_write_json(const char *path, const sc_plan_result *r) {
    cJSON *o = cJSON_CreateObject(), *arr = NULL;
    bool ok = o != NULL;
    ok = ok && cJSON_AddStringToObject(o, "scenario", r->scenario) && cJSON_AddStringToObject(o, "device", r->device) &&
         cJSON_AddNumberToObject(o, "capacity_bytes", (double)r->capacity) &&
         cJSON_AddNumberToObject(o, "headroom", r->headroom) && cJSON_AddNumberToObject(o, "world", r->world) &&
         cJSON_AddNumberToObject(o, "global_batch", (double)r->global_batch) &&
         cJSON_AddNumberToObject(o, "seq_length", r->seq_length) && cJSON_AddNumberToObject(o, "runs", r->runs) &&
         (r->best >= 0 ? cJSON_AddNumberToObject(o, "best", r->best) != NULL
                       : cJSON_AddNullToObject(o, "best") != NULL) &&
         (arr = cJSON_AddArrayToObject(o, "candidates")) != NULL;
    for (int i = 0; ok && i < r->ncand; i++) {
        const sc_plan_cand *c = &r->cand[i];
        cJSON *e = cJSON_CreateObject();
        ok = e && cJSON_AddItemToArray(arr, e);
        if (!ok) {
            cJSON_Delete(e);
            break;
        }
        const bool timed = c->step_time > 0;
        ok = cJSON_AddNumberToObject(e, "tp", c->tp) && cJSON_AddNumberToObject(e, "pp", c->pp) &&
             cJSON_AddNumberToObject(e, "cp", c->cp) && cJSON_AddNumberToObject(e, "dp", c->dp) &&
             cJSON_AddNumberToObject(e, "micro_batch", c->micro) &&
             cJSON_AddStringToObject(e, "recompute", plan_recompute_name(c->recompute)) &&
             cJSON_AddStringToObject(e, "status", status_name(c->status)) &&
             (c->peak ? cJSON_AddNumberToObject(e, "peak_bytes", (double)c->peak) != NULL
                      : cJSON_AddNullToObject(e, "peak_bytes") != NULL) &&
             (timed ? cJSON_AddNumberToObject(e, "step_time_s", c->step_time) != NULL
                    : cJSON_AddNullToObject(e, "step_time_s") != NULL) &&
             (timed ? cJSON_AddNumberToObject(e, "tokens_per_s", c->tokens_per_s) != NULL
                    : cJSON_AddNullToObject(e, "tokens_per_s") != NULL) &&
             (timed ? cJSON_AddNumberToObject(e, "mfu", c->mfu) != NULL : cJSON_AddNullToObject(e, "mfu") != NULL) &&
             cJSON_AddStringToObject(e, "note", c->note);
    }
    char *text = ok ? cJSON_Print(o) : NULL;
    cJSON_Delete(o);
    if (!text) return -1;
    /* a temporary name renamed over the old file once whole: a failed write leaves the old one */
    char why[512];
    tr_safe_file sf;
    int rc = tr_safe_open(&sf, path, true, NULL, why, sizeof why);
    if (!rc) {
        fputs(text, sf.f), fputc('\n', sf.f);
        rc = tr_safe_commit(&sf, why, sizeof why);
    }
    free(text);
    return rc;
}
