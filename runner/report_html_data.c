/* What the HTML report draws, gathered into one JSON object: the JSON report itself, each run's
 * loss and grad norm (the work folder's metrics_reference.jsonl and metrics_attempt<N>.jsonl, a real
 * run's --compare JSONL), each attempt's rank x simulated time states (trace_attempt<N>.json, every
 * rank) and the per-stage memory the job logged ([memory] lines of job.log). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "report_html_internal.h"

#define HEAT_COLS 480   /* columns of a heat map: active time plus its breaks */
#define BREAK_COLS 8    /* a quiet stretch (no rank changed state) drawn as a break this wide */
#define BREAK_FRAC 0.02 /* quiet for more than this share of the attempt: a break */

enum { ST_NONE = 0, ST_BUSY, ST_WAIT, ST_HUNG, ST_DEAD, ST_UNREC, ST_COUNT, ST_SUMMARY = ST_COUNT };

char *report_html_slurp(const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, errlen, "cannot read %s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t got; buf && (got = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += got;
        if (n == cap) {
            char *b = realloc(buf, cap * 2 + 1);
            if (!b) free(buf);
            buf = b, cap *= 2;
        }
    }
    const bool bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        free(buf);
        snprintf(err, errlen, "cannot read %s: %s", path, bad ? "read error" : "out of memory");
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

static bool exists(const char *path) {
    FILE *f = fopen(path, "rb");
    if (f) fclose(f);
    return f != NULL;
}

/* ---- metrics JSONL: [[iteration, lm_loss, grad_norm], ...] ------------------------------------ */

static cJSON *num_or_null(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? cJSON_CreateNumber(v->valuedouble) : cJSON_CreateNull();
}

/* Each line one object with a numeric "iteration" (a blank line is skipped). -1 with FILE:LINE and
 * what is wrong; *out NULL when the file is absent and may be (optional). */
static int read_metrics(const char *path, bool optional, cJSON **out, char *err, size_t errlen) {
    *out = NULL;
    if (optional && !exists(path)) return 0;
    char *text = report_html_slurp(path, NULL, err, errlen);
    if (!text) return -1;
    cJSON *arr = cJSON_CreateArray();
    int line = 0, rc = 0;
    for (char *p = text, *next; arr && p && *p; p = next) {
        line++;
        next = strchr(p, '\n');
        if (next) *next++ = 0;
        if (strspn(p, " \t\r") == strlen(p)) continue;
        cJSON *o = cJSON_Parse(p);
        const cJSON *it = cJSON_GetObjectItemCaseSensitive(o, "iteration");
        if (!cJSON_IsObject(o) || !cJSON_IsNumber(it) || it->valuedouble < 0) {
            snprintf(err, errlen, "%s:%d: %s", path, line,
                     !cJSON_IsObject(o) ? "not a JSON object (a metrics JSONL has one object per line, as "
                                          "--metrics-jsonl writes)"
                                        : "no \"iteration\" (a number >= 0)");
            cJSON_Delete(o);
            rc = -1;
            break;
        }
        cJSON *row = cJSON_CreateArray();
        cJSON_AddItemToArray(row, cJSON_CreateNumber(it->valuedouble));
        cJSON_AddItemToArray(row, num_or_null(o, "lm_loss"));
        cJSON_AddItemToArray(row, num_or_null(o, "grad_norm"));
        cJSON_AddItemToArray(arr, row);
        cJSON_Delete(o);
    }
    free(text);
    if (rc || !arr) {
        cJSON_Delete(arr);
        if (!rc) snprintf(err, errlen, "out of memory reading %s", path);
        return -1;
    }
    if (cJSON_GetArraySize(arr) == 0 && !optional) {
        cJSON_Delete(arr);
        snprintf(err, errlen, "%s: no iterations in it (a metrics JSONL, as --metrics-jsonl writes)", path);
        return -1;
    }
    *out = arr;
    return 0;
}

/* ---- heat map: one attempt's trace of every rank ----------------------------------------------- */

typedef struct span {
    double t0, t1;
    int state;         /* ST_SUMMARY: the trace's summary of dropped spans, busy and wait below */
    double busy, wait; /* ST_SUMMARY: microseconds of each within [t0, t1] */
} span;

typedef struct rank_spans {
    span *s;
    int n, cap;
    double first; /* earliest span start */
} rank_spans;

static void add_span_w(rank_spans *r, double t0, double t1, int state, double busy, double wait) {
    if (!(t1 >= t0)) return;
    if (r->n == r->cap) {
        int cap = r->cap ? r->cap * 2 : 64;
        span *s = realloc(r->s, sizeof *s * (size_t)cap);
        if (!s) return;
        r->s = s, r->cap = cap;
    }
    r->s[r->n++] = (span){t0, t1, state, busy, wait};
    if (t0 < r->first) r->first = t0;
}

static void add_span(rank_spans *r, double t0, double t1, int state) { add_span_w(r, t0, t1, state, 0, 0); }

/* The trace's "twinrun_dropped" metadata of one rank (sim/trace/trace_write.c): parallel arrays t0, t1,
 * busy, wait in microseconds, one summary interval of dropped spans each. */
static void add_dropped(rank_spans *r, const cJSON *args) {
    const cJSON *a[4] = {cJSON_GetObjectItemCaseSensitive(args, "t0"), cJSON_GetObjectItemCaseSensitive(args, "t1"),
                         cJSON_GetObjectItemCaseSensitive(args, "busy"),
                         cJSON_GetObjectItemCaseSensitive(args, "wait")};
    for (int k = 0; k < 4; k++)
        if (!cJSON_IsArray(a[k]) || cJSON_GetArraySize(a[k]) != cJSON_GetArraySize(a[0])) return;
    const int n = cJSON_GetArraySize(a[0]);
    const cJSON *e[4] = {a[0]->child, a[1]->child, a[2]->child, a[3]->child};
    for (int i = 0; i < n; i++) {
        if (cJSON_IsNumber(e[0]) && cJSON_IsNumber(e[1]) && cJSON_IsNumber(e[2]) && cJSON_IsNumber(e[3]))
            add_span_w(r, e[0]->valuedouble, e[1]->valuedouble, ST_SUMMARY, e[2]->valuedouble, e[3]->valuedouble);
        for (int k = 0; k < 4; k++) e[k] = e[k]->next;
    }
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

typedef struct segment {
    double t0, t1;
    int c0, c1; /* columns [c0, c1) */
    bool brk;
} segment;

/* The time axis: active stretches in proportion to their length, every quiet stretch longer than
 * BREAK_FRAC of the attempt as a break of BREAK_COLS columns. */
static int make_axis(rank_spans *ranks, int world, double end, segment *seg, int maxseg) {
    size_t nb = 0;
    for (int r = 0; r < world; r++) nb += 2 * (size_t)ranks[r].n;
    double *b = malloc(sizeof *b * (nb + 2));
    int nseg = 0;
    if (!b) {
        seg[0] = (segment){0, end, 0, HEAT_COLS, false};
        return 1;
    }
    nb = 0;
    b[nb++] = 0, b[nb++] = end;
    for (int r = 0; r < world; r++)
        for (int i = 0; i < ranks[r].n; i++) b[nb++] = ranks[r].s[i].t0, b[nb++] = ranks[r].s[i].t1;
    qsort(b, nb, sizeof *b, cmp_double);
    const double gap = end * BREAK_FRAC;
    double start = 0, active = 0;
    for (size_t i = 1; i < nb && nseg < maxseg - 2; i++) {
        if (b[i] - b[i - 1] > gap && gap > 0) {
            if (b[i - 1] > start) seg[nseg++] = (segment){start, b[i - 1], 0, 0, false}, active += b[i - 1] - start;
            seg[nseg++] = (segment){b[i - 1], b[i], 0, 0, true};
            start = b[i];
        }
    }
    if (end > start || nseg == 0) seg[nseg++] = (segment){start, end, 0, 0, false}, active += end - start;
    free(b);
    int nbrk = 0;
    for (int i = 0; i < nseg; i++) nbrk += seg[i].brk;
    const int cols = HEAT_COLS - nbrk * BREAK_COLS > 60 ? HEAT_COLS - nbrk * BREAK_COLS : 60;
    int c = 0;
    for (int i = 0; i < nseg; i++) {
        int w = seg[i].brk ? BREAK_COLS : (active > 0 ? (int)lround(cols * (seg[i].t1 - seg[i].t0) / active) : cols);
        if (w < 1) w = 1;
        seg[i].c0 = c, seg[i].c1 = c + w, c += w;
    }
    return nseg;
}

/* Adds a span's time, times `weight`, to the columns it covers. */
static void paint_w(double *cov, const segment *seg, int nseg, double t0, double t1, double weight) {
    for (int i = 0; i < nseg; i++) {
        const segment *g = &seg[i];
        if (t1 <= g->t0 || t0 >= g->t1) continue;
        const int ncol = g->c1 - g->c0;
        const double w = (g->t1 - g->t0) / ncol;
        if (w <= 0) continue;
        const double a = t0 > g->t0 ? t0 : g->t0, z = t1 < g->t1 ? t1 : g->t1;
        int c = (int)((a - g->t0) / w), cz = (int)((z - g->t0) / w);
        if (cz >= ncol) cz = ncol - 1;
        for (; c <= cz; c++) {
            const double lo = g->t0 + c * w, hi = lo + w;
            const double o = (z < hi ? z : hi) - (a > lo ? a : lo);
            if (o > 0) cov[g->c0 + c] += weight * o / w;
        }
    }
}

static void paint(double *cov, const segment *seg, int nseg, double t0, double t1) {
    paint_w(cov, seg, nseg, t0, t1, 1.0);
}

/* "b12c388": state letter (a = none, b busy, c waiting, d hung, e dead, f not recorded) and run length. */
static void encode_row(const unsigned char *st, int cols, char *out, size_t outlen) {
    size_t n = 0;
    out[0] = 0;
    for (int c = 0; c < cols;) {
        int e = c;
        while (e < cols && st[e] == st[c]) e++;
        n += (size_t)snprintf(out + n, n < outlen ? outlen - n : 0, "%c%d", 'a' + st[c], e - c);
        c = e;
    }
}

static cJSON *heat_of(const char *path, int attempt, char *err, size_t errlen) {
    char *text = report_html_slurp(path, NULL, err, errlen);
    if (!text) return NULL;
    cJSON *t = cJSON_Parse(text);
    free(text);
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(t, "otherData");
    const cJSON *events = cJSON_GetObjectItemCaseSensitive(t, "traceEvents");
    const cJSON *jworld = cJSON_GetObjectItemCaseSensitive(meta, "world");
    const cJSON *jend = cJSON_GetObjectItemCaseSensitive(meta, "end_time_s");
    if (!cJSON_IsArray(events) || !cJSON_IsNumber(jworld) || !cJSON_IsNumber(jend) || jworld->valueint < 1) {
        snprintf(err, errlen, "%s: not a twin trace (no traceEvents, otherData.world, otherData.end_time_s)", path);
        cJSON_Delete(t);
        return NULL;
    }
    const int world = jworld->valueint;
    const double end = jend->valuedouble * 1e6; /* microseconds, as the events */
    const cJSON *jdrop = cJSON_GetObjectItemCaseSensitive(meta, "dropped_events");
    const double dropped = cJSON_IsNumber(jdrop) ? jdrop->valuedouble : 0;
    rank_spans *ranks = calloc((size_t)world, sizeof *ranks);
    double *dead_at = malloc(sizeof *dead_at * (size_t)world), *exit_at = malloc(sizeof *exit_at * (size_t)world);
    if (!ranks || !dead_at || !exit_at) {
        free(ranks), free(dead_at), free(exit_at), cJSON_Delete(t);
        snprintf(err, errlen, "out of memory for the heat map of %s", path);
        return NULL;
    }
    for (int r = 0; r < world; r++) ranks[r].first = INFINITY, dead_at[r] = exit_at[r] = INFINITY;
    const cJSON *e;
    cJSON_ArrayForEach(e, events) {
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(e, "ph"), *cat = cJSON_GetObjectItemCaseSensitive(e, "cat");
        const cJSON *tid = cJSON_GetObjectItemCaseSensitive(e, "tid"), *ts = cJSON_GetObjectItemCaseSensitive(e, "ts");
        if (!cJSON_IsString(ph) || !cJSON_IsString(cat) || !cJSON_IsNumber(tid) || !cJSON_IsNumber(ts)) continue;
        const int r = tid->valueint - 1;
        if (r < 0 || r >= world) continue;
        if (!strcmp(ph->valuestring, "X")) {
            const cJSON *dur = cJSON_GetObjectItemCaseSensitive(e, "dur");
            const double t0 = ts->valuedouble, t1 = t0 + (cJSON_IsNumber(dur) ? dur->valuedouble : 0);
            const char *c = cat->valuestring;
            const int st = !strcmp(c, "wait") ? ST_WAIT : !strcmp(c, "fault") ? ST_HUNG : ST_BUSY;
            add_span(&ranks[r], t0, t1, st);
        } else if (!strcmp(ph->valuestring, "M") && !strcmp(cat->valuestring, "summary")) {
            add_dropped(&ranks[r], cJSON_GetObjectItemCaseSensitive(e, "args"));
        } else if (!strcmp(ph->valuestring, "i") && !strcmp(cat->valuestring, "rank")) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(e, "name");
            const char *nm = cJSON_IsString(name) ? name->valuestring : "";
            if (!strncmp(nm, "failed", 6) || (!strncmp(nm, "exit ", 5) && strcmp(nm, "exit 0")))
                dead_at[r] = ts->valuedouble < dead_at[r] ? ts->valuedouble : dead_at[r];
            else if (!strcmp(nm, "exit 0")) exit_at[r] = ts->valuedouble;
        }
    }
    cJSON_Delete(t);
    for (int r = 0; r < world; r++)
        if (isfinite(dead_at[r]) && end > dead_at[r]) add_span(&ranks[r], dead_at[r], end, ST_DEAD);
    segment seg[64];
    const int nseg = make_axis(ranks, world, end, seg, 64);
    const int cols = seg[nseg - 1].c1;
    double *cov = malloc(sizeof *cov * (size_t)cols * ST_COUNT);
    unsigned char *st = malloc((size_t)cols);
    char *row = malloc((size_t)cols * 8 + 1);
    cJSON *h = cJSON_CreateObject(), *rows = cJSON_CreateArray(), *index = cJSON_CreateArray();
    if (!cov || !st || !row || !h || !rows || !index) {
        free(cov), free(st), free(row), cJSON_Delete(h), cJSON_Delete(rows), cJSON_Delete(index);
        for (int r = 0; r < world; r++) free(ranks[r].s);
        free(ranks), free(dead_at), free(exit_at);
        snprintf(err, errlen, "out of memory for the heat map of %s", path);
        return NULL;
    }
    for (int r = 0; r < world; r++) {
        memset(cov, 0, sizeof *cov * (size_t)cols * ST_COUNT);
        for (int i = 0; i < ranks[r].n; i++) {
            const span *sp = &ranks[r].s[i];
            if (sp->state != ST_SUMMARY) {
                paint(cov + (size_t)sp->state * cols, seg, nseg, sp->t0, sp->t1);
                continue;
            }
            /* a summary's busy and waiting time spread evenly over its interval; busy counts the wait
             * as a collective's span does, so the subtraction below leaves the busy part */
            const double len = sp->t1 - sp->t0;
            if (len <= 0) continue;
            paint_w(cov + (size_t)ST_BUSY * cols, seg, nseg, sp->t0, sp->t1, (sp->busy + sp->wait) / len);
            paint_w(cov + (size_t)ST_WAIT * cols, seg, nseg, sp->t0, sp->t1, sp->wait / len);
        }
        if (dropped > 0 && isfinite(ranks[r].first) && ranks[r].first > 0)
            paint(cov + (size_t)ST_UNREC * cols, seg, nseg, 0, ranks[r].first);
        for (int c = 0; c < cols; c++) {
            double busy = cov[ST_BUSY * cols + c] - cov[ST_WAIT * cols + c]; /* waits nest in collectives */
            cov[ST_BUSY * cols + c] = busy > 0 ? busy : 0;
            int best = ST_NONE;
            double most = 0.02;
            for (int s = ST_BUSY; s < ST_COUNT; s++)
                if (cov[s * cols + c] > most) most = cov[s * cols + c], best = s;
            st[c] = (unsigned char)best;
        }
        encode_row(st, cols, row, (size_t)cols * 8 + 1);
        int k = 0, n = cJSON_GetArraySize(rows);
        for (; k < n; k++)
            if (!strcmp(cJSON_GetArrayItem(rows, k)->valuestring, row)) break;
        if (k == n) cJSON_AddItemToArray(rows, cJSON_CreateString(row));
        cJSON_AddItemToArray(index, cJSON_CreateNumber(k));
        free(ranks[r].s);
    }
    cJSON *segs = cJSON_AddArrayToObject(h, "segments");
    for (int i = 0; i < nseg; i++) {
        cJSON *g = cJSON_CreateObject();
        cJSON_AddNumberToObject(g, "t0", seg[i].t0 * 1e-6);
        cJSON_AddNumberToObject(g, "t1", seg[i].t1 * 1e-6);
        cJSON_AddNumberToObject(g, "c0", seg[i].c0);
        cJSON_AddNumberToObject(g, "c1", seg[i].c1);
        cJSON_AddBoolToObject(g, "break", seg[i].brk);
        cJSON_AddItemToArray(segs, g);
    }
    cJSON_AddNumberToObject(h, "attempt", attempt);
    cJSON_AddNumberToObject(h, "world", world);
    cJSON_AddNumberToObject(h, "cols", cols);
    cJSON_AddNumberToObject(h, "end_s", end * 1e-6);
    cJSON_AddNumberToObject(h, "dropped_events", dropped);
    cJSON_AddItemToObject(h, "rows", rows);
    cJSON_AddItemToObject(h, "rank_row", index);
    free(cov), free(st), free(row), free(ranks), free(dead_at), free(exit_at);
    return h;
}

/* ---- memory: job.log's [memory] lines (each stage's first rank, and the reporter) ---------------------- */

static cJSON *memory_of(const char *work, const cJSON *report) {
    char path[REPORT_HTML_PATH];
    snprintf(path, sizeof path, "%s/job.log", work);
    char err[256];
    char *text = exists(path) ? report_html_slurp(path, NULL, err, sizeof err) : NULL;
    cJSON *stages = cJSON_CreateArray();
    const cJSON *world = cJSON_GetObjectItemCaseSensitive(report, "world");
    const cJSON *pp = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(report, "layout"), "pp");
    const int per_stage = cJSON_IsNumber(world) && cJSON_IsNumber(pp) && pp->valueint > 0 && world->valueint > 0
                              ? world->valueint / pp->valueint
                              : 1;
    double seen[64] = {0}; /* by stage: the last line wins (each attempt logs again) */
    cJSON *by_stage[64] = {0};
    for (char *p = text, *next; p && *p; p = next) {
        next = strchr(p, '\n');
        if (next) *next++ = 0;
        const char *m = strstr(p, "[memory] rank ");
        int rank;
        double w, g, o, a, peak;
        if (!m || sscanf(m,
                         "[memory] rank %d: weights %lf MB | gradients %lf MB | optimizer %lf MB | activations and "
                         "scratch %lf MB | device peak %lf MB",
                         &rank, &w, &g, &o, &a, &peak) != 6)
            continue;
        const int stage = rank / (per_stage > 0 ? per_stage : 1);
        if (stage < 0 || stage >= 64) continue;
        cJSON *s = cJSON_CreateObject();
        const double MB = 1024.0 * 1024.0;
        cJSON_AddNumberToObject(s, "stage", stage);
        cJSON_AddNumberToObject(s, "rank", rank);
        cJSON_AddNumberToObject(s, "weights", w * MB);
        cJSON_AddNumberToObject(s, "gradients", g * MB);
        cJSON_AddNumberToObject(s, "optimizer", o * MB);
        cJSON_AddNumberToObject(s, "activations", a * MB);
        cJSON_AddNumberToObject(s, "peak", peak * MB);
        if (by_stage[stage]) cJSON_Delete(by_stage[stage]);
        by_stage[stage] = s, seen[stage] = 1;
    }
    for (int i = 0; i < 64; i++)
        if (seen[i]) cJSON_AddItemToArray(stages, by_stage[i]);
    free(text);
    return stages;
}

cJSON *report_html_data(const char *report_json, const char *work, const char *compare, char *err, size_t errlen) {
    cJSON *report = cJSON_Parse(report_json);
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(report, "name");
    const cJSON *checks = cJSON_GetObjectItemCaseSensitive(report, "checks");
    const cJSON *attempts = cJSON_GetObjectItemCaseSensitive(report, "attempts");
    if (!cJSON_IsObject(report) || !cJSON_IsString(name) || !cJSON_IsArray(checks) || !cJSON_IsArray(attempts)) {
        snprintf(err, errlen,
                 "not a scenario report (a JSON object with name, checks and attempts, as `scenario run "
                 "--json` writes)%s",
                 cJSON_IsArray(report) ? ": it holds several scenarios; the page draws one" : "");
        cJSON_Delete(report);
        return NULL;
    }
    cJSON *d = cJSON_CreateObject();
    cJSON_AddItemToObject(d, "report", report);
    char path[REPORT_HTML_PATH];
    cJSON *ref = NULL, *runs = cJSON_AddArrayToObject(d, "attempt_metrics"), *heat = cJSON_AddArrayToObject(d, "heat");
    if (work) {
        snprintf(path, sizeof path, "%s/metrics_reference.jsonl", work);
        if (read_metrics(path, true, &ref, err, errlen)) goto fail;
    }
    cJSON_AddItemToObject(d, "reference_metrics", ref ? ref : cJSON_CreateNull());
    const int na = cJSON_GetArraySize(attempts);
    for (int a = 0; a < na; a++) {
        cJSON *m = NULL, *h = NULL;
        if (work) {
            snprintf(path, sizeof path, "%s/metrics_attempt%d.jsonl", work, a);
            if (read_metrics(path, true, &m, err, errlen)) goto fail;
            snprintf(path, sizeof path, "%s/trace_attempt%d.json", work, a);
            if (exists(path) && !(h = heat_of(path, a, err, errlen))) {
                cJSON_Delete(m);
                goto fail;
            }
        }
        cJSON_AddItemToArray(runs, m ? m : cJSON_CreateNull());
        if (h) cJSON_AddItemToArray(heat, h);
    }
    cJSON *cmp = NULL;
    if (compare && read_metrics(compare, false, &cmp, err, errlen)) goto fail;
    if (cmp) {
        cJSON *c = cJSON_AddObjectToObject(d, "compare");
        cJSON_AddStringToObject(c, "path", compare);
        cJSON_AddItemToObject(c, "metrics", cmp);
    } else {
        cJSON_AddNullToObject(d, "compare");
    }
    cJSON_AddItemToObject(d, "memory", work ? memory_of(work, report) : cJSON_CreateArray());
    return d;
fail:
    cJSON_Delete(d);
    return NULL;
}
