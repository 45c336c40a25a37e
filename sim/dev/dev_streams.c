/* The twin's streams and events (docs/twin.md#streams): each stream an ordered queue with a clock of
 * its own, streams ordered only by events and syncs.
 *
 * The default stream keeps the rank's clock (twin_rank.now) exactly as before streams were real, so a
 * program that never makes a second stream runs bit for bit and tick for tick as it did: nothing
 * here is allocated or consulted until dev_stream_create. A side stream's work starts at
 * max(its clock, the host's clock at enqueue) and moves only its own clock; an event carries the
 * recorded stream's clock and vector clock, a wait takes the max of both. The math itself still runs
 * in issue order (dev_queue.c): a race-free program gets the same bits either way. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/background_sms.h"
#include "dev_internal.h"
#include "dev_streams.h"
#include "twinrun/err.h"

/* The table, made at the first side stream, with the default stream in slot 0. */
static twin_streams *table(dev_device *d) {
    if (d->streams) return d->streams;
    d->streams = calloc(1, sizeof *d->streams);
    TR_CHECK(d->streams != NULL, "out of host memory for a device's stream table");
    d->streams->slot[0].stream = &d->default_stream;
    snprintf(d->streams->slot[0].name, sizeof d->streams->slot[0].name, "default");
    return d->streams;
}

void twin_streams_free(dev_device *d) {
    if (!d->streams) return;
    for (int i = 0; i < TWIN_STREAMS_MAX; i++) {
        free(d->streams->slot[i].ops);
        /* streams still alive go with their device, as a CUDA context's do */
        if (i && d->streams->slot[i].stream) free(d->streams->slot[i].stream);
    }
    free(d->streams);
    d->streams = NULL;
}

dev_stream *dev_stream_default(dev_device *d) { return &d->default_stream; }
dev_device *dev_stream_device(dev_stream *s) { return s->dev; }

dev_stream *dev_stream_create(dev_device *d) {
    twin_streams *t = table(d);
    int id = 1;
    /* a slot whose stream was destroyed is reused once its work is no longer pending */
    while (id < TWIN_STREAMS_MAX && (t->slot[id].stream || t->slot[id].head < t->slot[id].n)) id++;
    TR_CHECK(id < TWIN_STREAMS_MAX, "more streams alive on one twin device than it tells apart (16)");
    dev_stream *s = calloc(1, sizeof *s);
    TR_CHECK(s != NULL, "out of host memory creating a stream");
    s->dev = d;
    s->id = id;
    s->clock = d->owner->now;
    stream_slot *sl = &t->slot[id];
    sl->stream = s;
    snprintf(sl->name, sizeof sl->name, "stream %d", id);
    /* a new stream is ordered after nothing (cudaStreamNonBlocking): only what the host waited for */
    memset(sl->seen, 0, sizeof sl->seen);
    return s;
}

void dev_stream_destroy(dev_stream *s) {
    if (!s || s == &s->dev->default_stream) return;
    /* as cudaStreamDestroy: the work already enqueued still runs and can still race */
    s->dev->streams->slot[s->id].stream = NULL;
    free(s);
}

void dev_stream_set_name(dev_stream *s, const char *name) {
    if (!s->dev->streams) return; /* the default stream alone: no report can name it */
    stream_slot *sl = &s->dev->streams->slot[s->id];
    snprintf(sl->name, sizeof sl->name, "%s", name ? name : "");
}

/* The speed of a background stream's kernels beside the model stream's, as a fraction of their own cost:
 * TWINRUN_TWIN_BACKGROUND_RATE (a what-if, and the fit's knob: lab/calib/fit_background_rate.py), else
 * the spec's measured figure, else 1 (an uncalibrated spec: full speed, the roofline's optimism). */
static double background_rate(const twin_device_spec *spec) {
    const char *env = getenv("TWINRUN_TWIN_BACKGROUND_RATE");
    if (env && *env) {
        char *end;
        const double r = strtod(env, &end);
        if (*end || !(r > 0 && r <= 1))
            tr_fatal("TWINRUN_TWIN_BACKGROUND_RATE=%s: give the fraction of full speed a background stream's "
                     "kernels run at, above 0 and at most 1 (e.g. 0.5), or unset it for the device's figure",
                     env);
        return r;
    }
    return spec->background_rate > 0 ? spec->background_rate : 1;
}

/* A side stream's work already runs beside the default stream's in simulated time. What the GPU gives up
 * for it is the multiprocessors the default stream's GEMMs leave free meanwhile (twin_cost_kernel charges
 * them), and what the background work gets is less than the whole device: a low-priority stream's blocks
 * run on that share and in the gaps between the model's kernels, so its kernels take 1 / rate of their
 * own time (the spec's background_rate, fitted to measured steps). */
void dev_stream_set_background(dev_stream *s, bool active) {
    dev_device *d = s->dev;
    const twin_device_spec *spec = d->spec ? d->spec : twin_spec();
    d->background_sms = 0;
    if (s->id && d->background_id != s->id) {
        d->background_id = s->id;
        d->background_rate = background_rate(spec);
    }
    if (!active || !s->id || spec->sms <= 0) return;
    char err[256];
    const int n = tr_background_sms(spec->sms, err, sizeof err);
    if (n < 0) tr_fatal("%s", err);
    d->background_sms = n;
}

bool twin_stream_is_side(const dev_stream *s) { return s->id != 0; }

double twin_stream_start(const dev_stream *s) {
    const double now = s->dev->owner->now;
    return s->id ? fmax(s->clock, now) : now;
}

void twin_stream_advance(dev_stream *s, double t) {
    if (s->id && t > s->clock) s->clock = t;
}

void twin_streams_clock_of(const dev_device *d, int id, uint64_t vc[TWIN_STREAMS_MAX]) {
    const stream_slot *sl = &d->streams->slot[id];
    memcpy(vc, sl->seen, sizeof sl->seen);
    vc[id] = sl->seq;
}

void twin_streams_saw(dev_device *d, int id, const uint64_t vc[TWIN_STREAMS_MAX]) {
    stream_slot *sl = &d->streams->slot[id];
    for (int j = 0; j < TWIN_STREAMS_MAX; j++)
        if (vc[j] > sl->seen[j]) sl->seen[j] = vc[j];
    twin_streams_prune(d);
}

void twin_streams_host_saw(dev_device *d, int id) {
    twin_streams *t = d->streams;
    uint64_t vc[TWIN_STREAMS_MAX];
    twin_streams_clock_of(d, id, vc); /* what the stream had seen, the host has now seen too */
    for (int j = 0; j < TWIN_STREAMS_MAX; j++)
        if (vc[j] > t->host_seen[j]) t->host_seen[j] = vc[j];
    twin_streams_prune(d);
}

/* The host waits for s: its clock catches up with the stream's, and s's work is ordered before
 * everything enqueued afterwards. */
void twin_stream_host_wait(dev_stream *s) {
    twin_rank *r = s->dev->owner;
    if (s->id && s->clock > r->now) r->now = s->clock;
    if (s->dev->streams) twin_streams_host_saw(s->dev, s->id);
}

void dev_stream_sync(dev_stream *s) {
    twin_rank_drain(s->dev->owner);
    twin_stream_host_wait(s);
}

dev_event *dev_event_create(dev_device *d) {
    dev_event *e = calloc(1, sizeof *e);
    TR_CHECK(e != NULL, "out of host memory creating an event");
    e->dev = d;
    return e;
}

void dev_event_destroy(dev_event *e) { free(e); }

void dev_event_record(dev_event *e, dev_stream *s) {
    e->recorded = true;
    e->stream = s->id;
    e->time = s->id ? s->clock : s->dev->owner->now;
    if (s->dev->streams) twin_streams_clock_of(s->dev, s->id, e->vc);
    else memset(e->vc, 0, sizeof e->vc);
}

void dev_stream_wait_event(dev_stream *s, dev_event *e) {
    if (!e->recorded) return; /* CUDA: waiting on an event never recorded waits for nothing */
    if (s->id) s->clock = fmax(s->clock, e->time);
    else if (e->time > s->dev->owner->now) s->dev->owner->now = e->time;
    if (s->dev->streams && e->dev == s->dev) twin_streams_saw(s->dev, s->id, e->vc);
}
