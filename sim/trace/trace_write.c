/* Writes the recorded timeline as Trace Event Format JSON (the "JSON Object Format" that
 * ui.perfetto.dev and chrome://tracing open).
 *
 * Processes are nodes and threads are ranks. Perfetto treats pid 0 and tid 0 as the kernel's
 * idle task, so ids are shifted by one: pid = node + 1, tid = rank + 1; the names say the real
 * node and rank. Times are microseconds of simulated time.
 *
 * Complete ("X") events on one thread must nest: Perfetto drops a slice that starts inside
 * another and ends after it. Grouped collectives can overlap that way (a send and a receive
 * launched together finish in any order), so each rank's slices are sorted and a slice that
 * would cross its parent's end is clipped there (its args keep the true duration). Nesting is
 * decided, and ts and dur written, in whole nanoseconds: rounding ts and dur separately would
 * make back-to-back slices overlap by a rounding step. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trace_internal.h"
#include "twinrun/coll.h"
#include "twinrun/dtype.h"
#include "twinrun/err.h"

/* One X event to write: a span, or the "wait" nested in a collective. */
typedef struct slice {
    int64_t t0, t1; /* nanoseconds */
    int64_t full;   /* t1 before clipping */
    const trace_span *span;
    size_t order; /* recording order: ties sort the same way on every run */
    bool wait;    /* the nested wait of a collective */
} slice;

/* Events are separated by ",\n"; ev() starts one and returns the stream. */
typedef struct out {
    FILE *f;
    bool any;
} out;

static FILE *ev(out *o) {
    fputs(o->any ? ",\n{" : "{", o->f);
    o->any = true;
    return o->f;
}

static void json_str(FILE *f, const char *s) {
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
        if (*c == '"' || *c == '\\') fprintf(f, "\\%c", *c);
        else if (*c < 0x20) fprintf(f, "\\u%04x", *c);
        else fputc(*c, f);
    }
    fputc('"', f);
}

/* Simulated clocks are exact to far better than a nanosecond. */
static int64_t ns(double seconds) {
    TR_CHECK(isfinite(seconds) && seconds >= 0 && seconds < 9e9, "a trace time is not a finite time >= 0");
    return llround(seconds * 1e9);
}

/* Microseconds, printed exactly from nanoseconds. */
static void us_value(FILE *f, int64_t t) {
    TR_CHECK(t >= 0, "a negative trace time or duration");
    fprintf(f, "%lld.%03lld", (long long)(t / 1000), (long long)(t % 1000));
}

/* ,"key":microseconds */
static void us(FILE *f, const char *key, int64_t t) {
    fprintf(f, ",\"%s\":", key);
    us_value(f, t);
}

static int pid_of(const twin_trace *t, int rank) { return rank / t->gpus_per_node + 1; }

static int cmp_slice(const void *a, const void *b) {
    const slice *x = a, *y = b;
    if (x->t0 != y->t0) return x->t0 < y->t0 ? -1 : 1;
    if (x->t1 != y->t1) return x->t1 > y->t1 ? -1 : 1; /* the longer one is the parent */
    if (x->wait != y->wait) return x->wait ? 1 : -1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static const char *status_name(int st) {
    switch (st) {
    case COLL_OK: return "ok";
    case COLL_ABORTED: return "aborted";
    case COLL_TIMEOUT: return "timeout";
    case COLL_ERROR: return "error";
    }
    return "?";
}

static void write_coll_name(FILE *f, const twin_trace *t, const trace_span *s) {
    char name[FLIGHT_NAME_MAX + 64];
    snprintf(name, sizeof name, "%s %s #%llu", s->group < (uint32_t)t->nnames ? t->names[s->group] : "?",
             flight_op_name((flight_op)s->op), (unsigned long long)s->seq);
    json_str(f, name);
}

static void write_slice(out *o, const twin_trace *t, int rank, const slice *sl) {
    const trace_span *s = sl->span;
    FILE *f = ev(o);
    fputs("\"ph\":\"X\",\"name\":", f);
    if (sl->wait) fputs("\"wait for peers\",\"cat\":\"wait\"", f);
    else if (s->kind == SPAN_COLL) write_coll_name(f, t, s), fputs(",\"cat\":\"coll\"", f);
    else if (s->kind == SPAN_COMPUTE) fputs("\"compute\",\"cat\":\"compute\"", f);
    else if (s->kind == SPAN_SLEEP) fputs("\"sleep\",\"cat\":\"sleep\"", f);
    else fputs("\"hung (twin_hang_forever)\",\"cat\":\"fault\"", f);
    fprintf(f, ",\"pid\":%d,\"tid\":%d", pid_of(t, rank), rank + 1);
    us(f, "ts", sl->t0);
    us(f, "dur", sl->t1 - sl->t0);
    fputs(",\"args\":{", f);
    const char *sep = "";
    if (s->kind == SPAN_COLL && !sl->wait) {
        const bool moved = s->status == COLL_OK && s->xfer_start >= 0;
        const int64_t wait = ns(moved ? s->xfer_start : s->t1) - ns(s->t0);
        fprintf(f, "\"count\":%llu,\"dtype\":\"%s\",\"bytes\":%llu,\"status\":\"%s\"", (unsigned long long)s->count,
                tr_dtype_name((tr_dtype)s->dtype), (unsigned long long)(s->count * tr_dtype_size((tr_dtype)s->dtype)),
                status_name(s->status));
        if (s->redop >= 0) fprintf(f, ",\"redop\":\"%s\"", flight_redop_name(s->redop));
        if (s->peer >= 0) fprintf(f, ",\"%s\":%d", s->op == FLIGHT_BROADCAST ? "root" : "peer", s->peer);
        us(f, "wait_us", wait);
        us(f, "transfer_us", moved ? ns(s->t1) - ns(s->xfer_start) : 0);
        sep = ",";
    } else if (s->kind == SPAN_COMPUTE) {
        fprintf(f, "\"kernels\":%llu", (unsigned long long)s->count);
        sep = ",";
    }
    if (sl->t1 < sl->full) {
        fprintf(f, "%s\"clipped_from_us\":", sep);
        us_value(f, sl->full - sl->t0);
    }
    fputs("}}", f);
}

/* The rank's spans, oldest first, as slices (hung spans end at end_time). */
static slice *rank_slices(const twin_trace_rank *r, double end_time, size_t *n) {
    slice *sl = malloc(sizeof *sl * (2 * r->len + 1));
    if (!sl) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < r->len; i++) {
        const trace_span *s = &r->spans[(r->head + i) % r->len];
        const int64_t t0 = ns(s->t0), t1 = ns(s->kind == SPAN_HUNG ? fmax(end_time, s->t0) : s->t1);
        sl[k] = (slice){t0, t1, t1, s, k, false};
        k++;
        if (s->kind != SPAN_COLL) continue;
        const int64_t wend = ns(s->status == COLL_OK && s->xfer_start >= 0 ? s->xfer_start : s->t1);
        if (wend > t0) {
            sl[k] = (slice){t0, wend, wend, s, k, true};
            k++;
        }
    }
    *n = k;
    return sl;
}

/* The summaries of a rank's dropped spans as one metadata event ("twinrun_dropped": interval starts and
 * ends, and the busy and waiting time within each, in microseconds): what the report page's heat map
 * draws where the ring kept no spans; trace viewers pass it by. */
static void write_sums(out *o, const twin_trace *t, const twin_trace_rank *r) {
    if (r->nsums == 0) return;
    FILE *f = ev(o);
    fprintf(f,
            "\"ph\":\"M\",\"name\":\"twinrun_dropped\",\"cat\":\"summary\",\"pid\":%d,\"tid\":%d,\"ts\":0,\"args\":{",
            pid_of(t, r->rank), r->rank + 1);
    const char *keys[4] = {"t0", "t1", "busy", "wait"};
    for (int k = 0; k < 4; k++) {
        fprintf(f, "%s\"%s\":[", k ? "," : "", keys[k]);
        for (int i = 0; i < r->nsums; i++) {
            const trace_sum *s = &r->sums[i];
            const double v = k == 0 ? s->t0 : k == 1 ? s->t1 : k == 2 ? s->busy : s->wait;
            fprintf(f, "%s%.3f", i ? "," : "", v * 1e6);
        }
        fputc(']', f);
    }
    fputs("}}", f);
}

static int write_rank(out *o, const twin_trace *t, twin_trace_rank *r, double end_time) {
    trace_flush_compute(r);
    size_t n = 0;
    slice *sl = rank_slices(r, end_time, &n);
    int64_t *stack = malloc(sizeof *stack * (n + 1));
    if (!sl || !stack) {
        free(sl);
        free(stack);
        return -1;
    }
    qsort(sl, n, sizeof *sl, cmp_slice);
    size_t depth = 0;
    for (size_t i = 0; i < n; i++) {
        while (depth && stack[depth - 1] <= sl[i].t0) depth--;
        if (depth && sl[i].t1 > stack[depth - 1]) sl[i].t1 = stack[depth - 1];
        stack[depth++] = sl[i].t1;
        write_slice(o, t, r->rank, &sl[i]);
    }
    free(sl);
    free(stack);
    return 0;
}

static const char *mark_name(twin_trace_mark m) {
    switch (m) {
    case TWIN_MARK_EXIT: return "exit";
    case TWIN_MARK_FAIL: return "failed";
    case TWIN_MARK_HANG: return "hang";
    case TWIN_MARK_KILLED: return "killed";
    case TWIN_MARK_WATCHDOG: return "watchdog";
    case TWIN_MARK_DEADLOCK: return "deadlock";
    case TWIN_MARK_COUNT: break;
    }
    return "?";
}

static void write_mark(out *o, const twin_trace *t, const trace_mark *m) {
    const bool run_wide = m->kind == TWIN_MARK_WATCHDOG || m->kind == TWIN_MARK_DEADLOCK;
    char name[160];
    if (m->kind == TWIN_MARK_EXIT || m->kind == TWIN_MARK_FAIL)
        snprintf(name, sizeof name, "%s %d", mark_name(m->kind), m->code);
    else if (run_wide) snprintf(name, sizeof name, "%s: rank %d", mark_name(m->kind), m->rank);
    else snprintf(name, sizeof name, "%s", mark_name(m->kind));
    FILE *f = ev(o);
    fputs("\"ph\":\"i\",\"name\":", f);
    json_str(f, name);
    fprintf(f, ",\"cat\":\"%s\",\"s\":\"%s\",\"pid\":%d,\"tid\":%d", run_wide ? "run" : "rank", run_wide ? "g" : "t",
            pid_of(t, m->rank), m->rank + 1);
    us(f, "ts", ns(m->t));
    fprintf(f, ",\"args\":{\"rank\":%d,\"code\":%d,\"what\":", m->rank, m->code);
    json_str(f, m->what);
    fputs("}}", f);
}

static void write_metadata(out *o, const twin_trace *t) {
    int last_node = -1;
    for (int i = 0; i < t->ntraced; i++) {
        const int r = t->traced[i], node = r / t->gpus_per_node;
        if (node != last_node) {
            fprintf(ev(o),
                    "\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"node %d\"}}",
                    node + 1, r + 1, node);
            fprintf(ev(o),
                    "\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                    node + 1, r + 1, node);
            last_node = node;
        }
        fprintf(
            ev(o),
            "\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"rank %d (node %d, gpu %d)\"}}",
            node + 1, r + 1, r, node, r % t->gpus_per_node);
        fprintf(ev(o),
                "\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
                node + 1, r + 1, r);
    }
}

int twin_trace_write(twin_trace *t, FILE *f, double end_time, char *err, size_t errlen) {
    uint64_t dropped = t->dropped_marks;
    for (int i = 0; i < t->ntraced; i++) dropped += t->ranks[i].dropped;
    fputs(
        "{\"displayTimeUnit\":\"ms\",\"otherData\":{\"generator\":\"twinrun twin\",\"clock\":\"simulated\",\"device\":",
        f);
    json_str(f, t->device);
    fprintf(f, ",\"world\":%d,\"gpus_per_node\":%d,\"traced_ranks\":\"", t->world, t->gpus_per_node);
    flight_ranks_format(f, t->traced, t->ntraced);
    fprintf(f, "\",\"end_time_s\":%.9f,\"max_events\":%d,\"dropped_events\":%llu},\n\"traceEvents\":[\n", end_time,
            TWIN_TRACE_MAX_EVENTS, (unsigned long long)dropped);
    out o = {f, false};
    write_metadata(&o, t);
    if (dropped) { /* said where it is seen: on the timeline, not only in otherData */
        char what[128];
        snprintf(what, sizeof what, "%llu events dropped: each rank kept its newest %zu spans",
                 (unsigned long long)dropped, t->ranks[0].limit);
        fputs("\"ph\":\"i\",\"s\":\"g\",\"cat\":\"trace\",\"name\":", ev(&o));
        json_str(f, what);
        fprintf(f, ",\"pid\":%d,\"tid\":%d,\"ts\":0}", pid_of(t, t->traced[0]), t->traced[0] + 1);
    }
    for (int i = 0; i < t->ntraced; i++) {
        if (write_rank(&o, t, &t->ranks[i], end_time))
            return tr_errf(err, errlen, "trace: out of host memory writing rank %d", t->ranks[i].rank);
        write_sums(&o, t, &t->ranks[i]);
    }
    for (int i = 0; i < t->nmarks; i++) write_mark(&o, t, &t->marks[i]);
    fputs("\n]}\n", f);
    if (fflush(f) || ferror(f)) return tr_errf(err, errlen, "trace: write error");
    return 0;
}
