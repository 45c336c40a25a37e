/* The trace recorder: which ranks are traced, and what the hooks keep of each. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"

#define DEFAULT_TRACED 64
#define MAX_MARKS TWIN_TRACE_MAX_EVENTS
#define MAX_NAMES 65536

int twin_trace_create(const char *ranks, int world, int gpus_per_node, const char *device, twin_trace **out, char *err,
                      size_t errlen) {
    *out = NULL;
    TR_CHECK(world >= 1 && gpus_per_node >= 1, "trace of an empty world");
    twin_trace *t = calloc(1, sizeof *t);
    if (!t) return tr_errf(err, errlen, "trace: out of host memory");
    t->world = world;
    t->gpus_per_node = gpus_per_node;
    snprintf(t->device, sizeof t->device, "%s", device ? device : "?");
    if (ranks) {
        char perr[256];
        if (flight_ranks_parse(ranks, world, &t->traced, &t->ntraced, perr, sizeof perr)) {
            free(t);
            return tr_errf(err, errlen, "twin_run: trace_ranks '%s': %s", ranks, perr);
        }
    } else {
        t->ntraced = world < DEFAULT_TRACED ? world : DEFAULT_TRACED;
        t->traced = malloc(sizeof *t->traced * (size_t)t->ntraced);
        if (t->traced)
            for (int i = 0; i < t->ntraced; i++) t->traced[i] = i;
    }
    t->ranks = t->traced ? calloc((size_t)t->ntraced, sizeof *t->ranks) : NULL;
    if (!t->ranks) {
        twin_trace_free(t);
        return tr_errf(err, errlen, "trace: out of host memory for %d traced ranks", world);
    }
    /* the bound is on the whole trace: 1024 traced ranks keep 195 spans each (a few iterations) */
    size_t limit = TWIN_TRACE_MAX_EVENTS / (size_t)t->ntraced;
    if (limit < 1) limit = 1;
    for (int i = 0; i < t->ntraced; i++) {
        t->ranks[i].trace = t;
        t->ranks[i].rank = t->traced[i];
        t->ranks[i].limit = limit;
        t->ranks[i].last_group = UINT32_MAX;
    }
    *out = t;
    return 0;
}

void twin_trace_free(twin_trace *t) {
    if (!t) return;
    if (t->ranks)
        for (int i = 0; i < t->ntraced; i++) free(t->ranks[i].spans), free(t->ranks[i].sums);
    free(t->ranks);
    free(t->traced);
    free(t->names);
    free(t->marks);
    free(t);
}

twin_trace_rank *twin_trace_rank_of(twin_trace *t, int r) {
    int lo = 0, hi = t->ntraced;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->traced[mid] < r) lo = mid + 1;
        else hi = mid;
    }
    return lo < t->ntraced && t->traced[lo] == r ? &t->ranks[lo] : NULL;
}

/* Halves the summaries, or nearly: neighbours merge in pairs where the gap between them is at most
 * r->gap (a quiet stretch wider than that stays a gap the heat map can show as one); while that frees
 * less than a quarter, the gap allowed doubles. span becomes the longest interval. */
static void sums_compact(twin_trace_rank *r) {
    for (;;) {
        int k = 0;
        double smallest = INFINITY;
        for (int i = 0; i < r->nsums;) {
            trace_sum a = r->sums[i++];
            if (i < r->nsums) {
                const double g = r->sums[i].t0 - a.t1;
                if (g <= r->gap) {
                    const trace_sum b = r->sums[i++];
                    a.t1 = b.t1 > a.t1 ? b.t1 : a.t1, a.busy += b.busy, a.wait += b.wait;
                } else if (g < smallest) {
                    smallest = g;
                }
            }
            if (a.t1 - a.t0 > r->span) r->span = a.t1 - a.t0;
            r->sums[k++] = a;
        }
        const bool enough = k <= r->nsums * 3 / 4;
        r->nsums = k;
        if (enough) return;
        r->gap = r->gap > 0 ? (2 * r->gap > smallest ? 2 * r->gap : smallest) : smallest;
    }
}

/* Adds a dropped span to the summaries (memory permitting: a trace must never end the run). */
static void sum_add(twin_trace_rank *r, const trace_span *s) {
    /* a hung span is the newest (never dropped); the JSON must hold finite times */
    if (s->kind == SPAN_HUNG || !(s->t1 >= s->t0) || !isfinite(s->t1)) return;
    double wait = 0;
    if (s->kind == SPAN_COLL) /* the nested wait, as the writer slices it */
        wait = (s->status == COLL_OK && s->xfer_start >= 0 ? s->xfer_start : s->t1) - s->t0;
    if (wait < 0) wait = 0;
    const double busy = s->t1 - s->t0 - wait;
    if (!r->sums && !(r->sums = malloc(TRACE_SUMS * sizeof *r->sums))) return;
    if (r->nsums > 0) {
        trace_sum *l = &r->sums[r->nsums - 1];
        if (s->t0 - l->t1 <= r->gap && s->t1 - l->t0 <= r->span) {
            if (s->t1 > l->t1) l->t1 = s->t1;
            l->busy += busy, l->wait += wait;
            return;
        }
    }
    if (r->nsums == TRACE_SUMS) sums_compact(r);
    r->sums[r->nsums++] = (trace_sum){s->t0, s->t1, busy, wait};
}

/* A slot for a new span: grow the ring until its limit, then overwrite the oldest. Returns NULL
 * only when host memory ran out (the span is then counted as dropped: a trace must never end
 * the run it describes). */
static trace_span *push(twin_trace_rank *r) {
    if (r->len < r->limit) {
        if (r->len == r->cap) {
            size_t cap = r->cap ? 2 * r->cap : 64;
            if (cap > r->limit) cap = r->limit;
            trace_span *s = realloc(r->spans, cap * sizeof *s);
            if (!s) {
                r->dropped++;
                return NULL;
            }
            r->spans = s;
            r->cap = cap;
        }
        trace_span *s = &r->spans[r->len++];
        memset(s, 0, sizeof *s);
        return s;
    }
    trace_span *s = &r->spans[r->head];
    r->head = (r->head + 1) % r->limit;
    r->dropped++;
    sum_add(r, s);
    memset(s, 0, sizeof *s);
    return s;
}

void trace_flush_compute(twin_trace_rank *r) {
    if (!r->open) return;
    r->open = false;
    trace_span *s = push(r);
    if (!s) return;
    s->kind = SPAN_COMPUTE;
    s->t0 = r->c0;
    s->t1 = r->c1;
    s->count = r->kernels;
}

void twin_trace_compute(twin_trace_rank *r, double t0, double t1) {
    if (r->open && t0 == r->c1) { /* exact: nothing else moved the clock since the last kernel */
        r->c1 = t1;
        r->kernels++;
        return;
    }
    trace_flush_compute(r);
    r->open = true;
    r->c0 = t0;
    r->c1 = t1;
    r->kernels = 1;
}

void twin_trace_sleep(twin_trace_rank *r, double t0, double t1) {
    trace_flush_compute(r);
    trace_span *s = push(r);
    if (!s) return;
    s->kind = SPAN_SLEEP;
    s->t0 = t0;
    s->t1 = t1;
}

static uint32_t intern(twin_trace_rank *r, const char *name) {
    twin_trace *t = r->trace;
    if (r->last_group < (uint32_t)t->nnames && !strcmp(t->names[r->last_group], name)) return r->last_group;
    for (int i = 0; i < t->nnames; i++)
        if (!strcmp(t->names[i], name)) return r->last_group = (uint32_t)i;
    if (t->nnames == t->names_cap) {
        int cap = t->names_cap ? 2 * t->names_cap : 16;
        void *n = cap <= MAX_NAMES ? realloc(t->names, (size_t)cap * sizeof *t->names) : NULL;
        if (!n) return UINT32_MAX; /* written as "?" */
        t->names = n;
        t->names_cap = cap;
    }
    snprintf(t->names[t->nnames], sizeof t->names[0], "%s", name);
    return r->last_group = (uint32_t)t->nnames++;
}

void twin_trace_coll_done(twin_trace_rank *r, const twin_trace_coll *c) {
    TR_CHECK(c->end >= c->arrival, "a traced collective ended before it started");
    trace_flush_compute(r);
    uint32_t group = intern(r, c->group ? c->group : "?");
    trace_span *s = push(r);
    if (!s) return;
    s->kind = SPAN_COLL;
    s->t0 = c->arrival;
    s->t1 = c->end;
    s->xfer_start = c->xfer_start;
    s->seq = c->seq;
    s->count = c->count;
    s->group = group;
    s->peer = c->peer;
    s->op = (uint8_t)c->op;
    s->dtype = (uint8_t)c->dtype;
    s->status = (uint8_t)c->status;
    s->redop = (int8_t)c->redop;
}

void twin_trace_mark_at(twin_trace *t, int rank, twin_trace_mark m, double time, int code, const char *what) {
    TR_CHECK(m >= 0 && m < TWIN_MARK_COUNT, "unknown trace mark");
    twin_trace_rank *r = twin_trace_rank_of(t, rank);
    const bool run_wide = m == TWIN_MARK_WATCHDOG || m == TWIN_MARK_DEADLOCK;
    if (!r && !run_wide) return;
    if (r) trace_flush_compute(r);
    if (r && m == TWIN_MARK_HANG) { /* a span to the end of the run makes the stopped rank stand out */
        trace_span *s = push(r);
        if (s) {
            s->kind = SPAN_HUNG;
            s->t0 = time;
            s->t1 = INFINITY;
        }
    }
    if (t->nmarks == t->marks_cap) {
        int cap = t->marks_cap ? 2 * t->marks_cap : 64;
        void *n = cap <= MAX_MARKS ? realloc(t->marks, (size_t)cap * sizeof *t->marks) : NULL;
        if (!n) {
            t->dropped_marks++;
            return;
        }
        t->marks = n;
        t->marks_cap = cap;
    }
    trace_mark *k = &t->marks[t->nmarks++];
    k->t = time;
    k->rank = rank;
    k->code = code;
    k->kind = m;
    snprintf(k->what, sizeof k->what, "%s", what ? what : "");
}
