/* twin_run: validate the options, start N coroutines, run the (time, rank) order to the end,
 * fire watchdogs, and hand back what happened. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sched_internal.h"
#include "twinrun/err.h"

#define TWIN_MAX_RANKS (1 << 20)

void twin_options_default(twin_options *o) {
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->stack_bytes = (size_t)1 << 20;
    o->watchdog_timeout_s = 600.0;
    o->device = "H100";
    o->gpus_per_node = 8;
    o->capacity_scale = 1.0;
    o->flight_capacity = 256;
}

static int validate(int nranks, int (*entry)(int, void *), const twin_options *o, char *err, size_t errlen) {
    if (twin_sched_get())
        return tr_errf(err, errlen, "twin_run: called from inside a running twin (nesting is not supported)");
    if (!entry) return tr_errf(err, errlen, "twin_run: entry function is NULL");
    if (nranks < 1 || nranks > TWIN_MAX_RANKS)
        return tr_errf(err, errlen, "twin_run: %d ranks; use 1 to %d", nranks, TWIN_MAX_RANKS);
    if (o->stack_bytes < 16384 || o->stack_bytes > ((size_t)1 << 30))
        return tr_errf(err, errlen, "twin_run: stack_bytes %zu; use 16 KiB to 1 GiB", o->stack_bytes);
    if (!(o->watchdog_timeout_s >= 0) || !isfinite(o->watchdog_timeout_s))
        return tr_errf(err, errlen, "twin_run: watchdog_timeout_s must be finite and >= 0 (0 disables it)");
    if (!twin_device_spec_find(o->device)) {
        char names[128] = "";
        for (int i = 0; i < twin_device_spec_count(); i++) {
            strncat(names, i ? ", " : "", sizeof names - strlen(names) - 1);
            strncat(names, twin_device_spec_at(i)->name, sizeof names - strlen(names) - 1);
        }
        return tr_errf(err, errlen, "twin_run: unknown device '%s'; known: %s", o->device ? o->device : "(null)",
                       names);
    }
    if (o->gpus_per_node < 1) return tr_errf(err, errlen, "twin_run: gpus_per_node %d must be >= 1", o->gpus_per_node);
    if (!(o->capacity_scale > 0) || !isfinite(o->capacity_scale))
        return tr_errf(err, errlen, "twin_run: capacity_scale must be a positive finite number");
    if (!(o->cost_jitter >= 0 && o->cost_jitter <= 1))
        return tr_errf(err, errlen, "twin_run: cost_jitter %g must be in [0, 1]", o->cost_jitter);
    if (o->flight_capacity < 1 || o->flight_capacity > (1u << 24))
        return tr_errf(err, errlen, "twin_run: flight_capacity %zu; use 1 to 16777216 records", o->flight_capacity);
    if (o->world_size) {
        const int chunk = o->rank_chunk ? o->rank_chunk : nranks;
        if (o->world_size > TWIN_MAX_RANKS || o->nprocs < 1 || o->proc < 0 || o->proc >= o->nprocs || chunk < 1 ||
            nranks % chunk || (long long)nranks * o->nprocs != o->world_size)
            return tr_errf(err, errlen,
                           "twin_run: %d ranks as process %d of %d in chunks of %d do not make a world of %d", nranks,
                           o->proc, o->nprocs, chunk, o->world_size);
    }
    if (o->world_size && o->world_size != nranks && !o->remote)
        return tr_errf(err, errlen,
                       "twin_run: %d of the %d ranks run here: the others' processes must be reachable "
                       "(twin_options.remote; the twin's launch starts them, docs/multiprocess.md)",
                       nranks, o->world_size);
    if (o->world_size && o->world_size != nranks && o->trace_path)
        return tr_errf(err, errlen, "twin_run: trace_path with ranks in several processes is not supported yet");
    return 0;
}

static void rank_body(void *p) {
    twin_rank *r = p;
    twin_sched *s = twin_sched_get();
    twin_log("%.9f r%d start", r->now, r->id);
    int code = s->entry(r->id, s->arg);
    twin_rank_finish(r, RANK_DONE, code);
}

static void release_rank(twin_rank *r) {
    coll_twin_reclaim(r);
    dev_twin_reclaim(r);
    twin_rank_drain(r); /* its queued work, then the frees the reclaim queued behind it */
    twin_stack_free(&r->stack);
}

/* The earliest blocked rank's watchdog: report once, then abort every communicator so all
 * waiting ranks return (COLL_TIMEOUT for this one, COLL_ABORTED for the others). */
static void watchdog_fire(twin_sched *s, twin_rank *r, double t) {
    twin_log("%.9f r%d watchdog", t, r->id);
    if (!s->hang) {
        s->hang = true;
        s->watchdog_rank = r->id;
        s->watchdog_time = t;
        twin_report("watchdog: rank %d waited %.3f s (simulated) in %s; aborting every communicator at t=%.9f s", r->id,
                    r->watchdog_s, r->blocked_on ? r->blocked_on : "a collective", t);
        twin_hang_report(s, "watchdog");
    }
    if (s->trace) twin_trace_mark_at(s->trace, r->id, TWIN_MARK_WATCHDOG, t, 0, r->blocked_on);
    r->now = t;
    coll_twin_abort_all(r, t);
    TR_CHECK(r->state == RANK_RUNNABLE, "a timed-out rank is still blocked after the abort");
}

/* Nothing can run and no deadline is left: ranks waiting on collectives are deadlocked (the
 * watchdog is off). Report and abort as the watchdog would; returns false if none were waiting. */
static bool deadlock_check(twin_sched *s) {
    int first = -1;
    for (int i = 0; i < s->nranks; i++)
        if (s->ranks[i].state == RANK_BLOCKED && s->ranks[i].waiting > 0) {
            first = i;
            break;
        }
    if (first < 0) return false;
    twin_log("%.9f deadlock", s->now);
    if (!s->hang) {
        s->hang = true;
        twin_report("deadlock: no rank can run and no watchdog is armed (rank %d waits in %s)", s->ranks[first].id,
                    s->ranks[first].blocked_on ? s->ranks[first].blocked_on : "a collective");
        twin_hang_report(s, "deadlock");
    }
    if (s->trace)
        twin_trace_mark_at(s->trace, s->ranks[first].id, TWIN_MARK_DEADLOCK, s->now, 0, s->ranks[first].blocked_on);
    coll_twin_abort_all(NULL, s->now);
    return true;
}

static void run_loop(twin_sched *s) {
    for (;;) {
        int id;
        double t;
        while (rank_heap_peek(&s->heap, &id, &t)) {
            twin_rank *r = &s->ranks[s->xproc ? twin_local_index(s, id) : id];
            rank_heap_remove(&s->heap, id);
            /* with other processes, ranks wake in wall-clock order: clocks here may be past a wake-up */
            TR_CHECK(t >= s->now || s->xproc, "simulated time went backwards in the scheduler");
            if (t > s->now) s->now = t;
            if (r->state == RANK_BLOCKED) {
                watchdog_fire(s, r, t);
                continue;
            }
            TR_CHECK(r->state == RANK_RUNNABLE, "a finished rank was scheduled");
            s->current = r;
            s->switches++;
            twin_ctx_switch(&s->main_ctx, &r->ctx);
            s->current = NULL;
            /* ended (returned, failed, or killed by the watchdog's abort mid-call): what its OS would reclaim */
            if (r->state == RANK_DONE || r->state == RANK_FAILED || r->state == RANK_KILLED) release_rank(r);
            if (s->xproc && r->state == RANK_FAILED) s->remote->rank_failed(s->remote->job, r);
            if (s->xproc && (++s->polls & 63) == 0) /* now and then: what the network brought */
                s->remote->progress(s->remote->job, false);
        }
        /* nothing can run here: wait for other processes */
        if (s->xproc && s->remote->progress(s->remote->job, true)) continue;
        if (!deadlock_check(s)) break;
    }
    if (s->xproc) s->remote->run_end(s->remote->job, s);
    if (s->pool) /* ranks the watchdog's abort ended (end_on_abort) still hold queued work */
        for (int i = 0; i < s->nranks; i++) twin_rank_drain(&s->ranks[i]);
    for (int i = 0; i < s->nranks; i++) {
        twin_rank *r = &s->ranks[i];
        if (r->state != RANK_BLOCKED) continue;
        twin_log("%.9f r%d killed", s->now, r->id);
        twin_report("rank %d killed at the end of the run: it was stopped in %s", r->id,
                    r->blocked_on ? r->blocked_on : "?");
        r->state = RANK_KILLED;
        r->exit_code = -1;
        if (r->trace) twin_trace_mark_at(s->trace, r->id, TWIN_MARK_KILLED, s->now, -1, r->blocked_on);
        release_rank(r);
    }
}

/* The run happened whatever the trace's fate: a write error goes into the report, not into
 * twin_run's result. */
static void write_trace(twin_sched *s, double end_time) {
    char err[256];
    int rc = twin_trace_write(s->trace, s->trace_file, end_time, err, sizeof err);
    if (fclose(s->trace_file) != 0 && rc == 0) rc = tr_errf(err, sizeof err, "trace: write error");
    s->trace_file = NULL;
    if (rc) {
        twin_report("trace: %s: %s", s->opt.trace_path, err);
        if (!s->opt.quiet) fprintf(stderr, "twin: trace %s: %s\n", s->opt.trace_path, err);
    }
}

static int setup(twin_sched *s, int nranks, const twin_options *o, char *err, size_t errlen) {
    s->nranks = nranks;
    s->world = o->world_size ? o->world_size : nranks;
    s->xproc = s->world != nranks;
    s->proc = s->xproc ? o->proc : 0;
    s->nprocs = s->xproc ? o->nprocs : 1;
    s->chunk = s->xproc && o->rank_chunk ? o->rank_chunk : nranks;
    s->remote = s->xproc ? o->remote : NULL;
    s->opt = *o;
    s->spec = twin_device_spec_find(o->device);
    s->watchdog_rank = s->blamed_rank = -1;
    const int threads = twin_threads_resolve(o, nranks, err, errlen);
    if (threads < 0) return -1;
    s->report_stream = open_memstream(&s->report, &s->report_len);
    s->ranks = calloc((size_t)nranks, sizeof *s->ranks);
    if (!s->report_stream || !s->ranks || rank_heap_init(&s->heap, s->world)) /* keyed by global rank */
        return tr_errf(err, errlen, "twin_run: out of host memory for %d ranks", nranks);
    if (o->trace_path) {
        if (twin_trace_create(o->trace_ranks, nranks, o->gpus_per_node, s->spec->name, &s->trace, err, errlen))
            return -1;
        /* opened now so that a bad path is an option error, not a surprise after an hour's run */
        s->trace_file = fopen(o->trace_path, "w");
        if (!s->trace_file)
            return tr_errf(err, errlen, "twin_run: cannot write trace_path '%s': %s", o->trace_path, strerror(errno));
    }
    for (int i = 0; i < nranks; i++) {
        twin_rank *r = &s->ranks[i];
        r->id = twin_global_rank(s, i);
        r->state = RANK_RUNNABLE;
        r->deadline = INFINITY;
        r->watchdog_s = o->watchdog_timeout_s;
        r->rng = twin_mix64(o->seed ^ twin_mix64((uint64_t)r->id + 1));
        r->recording = true;
        r->trace = s->trace ? twin_trace_rank_of(s->trace, i) : NULL;
        flight_ring_init(&r->flight, o->flight_capacity);
        if (twin_stack_alloc(&r->stack, o->stack_bytes))
            return tr_errf(err, errlen,
                           "twin_run: cannot map the stack of rank %d (%zu bytes): address space or "
                           "vm.max_map_count exhausted; lower stack_bytes or the rank count",
                           i, o->stack_bytes);
        twin_ctx_init(&r->ctx, r->stack.usable, r->stack.usable_size, rank_body, r);
        rank_heap_set(&s->heap, r->id, 0.0);
    }
    /* 1 thread: no pool, kernels run at launch; 0 ("lazy"): queues that only drains run */
    if (threads != 1 && !(s->pool = twin_pool_create(threads - 1)))
        return tr_errf(err, errlen, "twin_run: cannot start %d worker threads", threads - 1);
    return 0;
}

static void teardown(twin_sched *s) {
    twin_pool_destroy(s->pool); /* every queue is empty: each rank was drained when it ended */
    if (s->ranks)
        for (int i = 0; i < s->nranks; i++) {
            twin_stack_free(&s->ranks[i].stack);
            flight_ring_free(&s->ranks[i].flight);
            free(s->ranks[i].fail_msg);
        }
    coll_twin_registry_free(&s->groups);
    twin_trace_free(s->trace);
    if (s->trace_file) fclose(s->trace_file);
    free(s->ranks);
    rank_heap_free(&s->heap);
    if (s->report_stream) fclose(s->report_stream);
}

int twin_run(int nranks, int (*entry)(int rank, void *arg), void *arg, const twin_options *opt, twin_result *res,
             char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    twin_options defaults;
    twin_options_default(&defaults);
    if (!opt) opt = &defaults;
    if (validate(nranks, entry, opt, err, errlen)) return -1;
    twin_sched s = {0};
    s.entry = entry;
    s.arg = arg;
    if (setup(&s, nranks, opt, err, errlen)) {
        teardown(&s);
        free(s.report);
        return -1;
    }
    res->exit_codes = calloc((size_t)nranks, sizeof *res->exit_codes);
    res->rank_end = calloc((size_t)nranks, 1);
    res->messages = calloc((size_t)nranks, sizeof *res->messages);
    res->end_times = calloc((size_t)nranks, sizeof *res->end_times);
    if (!res->exit_codes || !res->rank_end || !res->messages || !res->end_times) {
        teardown(&s);
        free(s.report);
        twin_result_free(res);
        return tr_errf(err, errlen, "twin_run: out of host memory for the result of %d ranks", nranks);
    }
    twin_sched_set(&s);
    run_loop(&s);
    twin_sched_set(NULL);
    res->nranks = nranks;
    for (int i = 0; i < nranks; i++) {
        const twin_rank *r = &s.ranks[i];
        res->exit_codes[i] = r->exit_code;
        res->rank_end[i] = r->state == RANK_DONE     ? TWIN_RANK_EXITED
                           : r->state == RANK_FAILED ? TWIN_RANK_FAILED
                                                     : TWIN_RANK_KILLED;
        if (r->now > res->end_time) res->end_time = r->now;
        res->end_times[i] = r->now;
        res->messages[i] = s.ranks[i].fail_msg; /* handed over */
        s.ranks[i].fail_msg = NULL;
    }
    res->watchdog_time = s.watchdog_time;
    if (s.trace) write_trace(&s, res->end_time);
    if (s.opt.dump_dir && s.opt.dump_at_exit && !s.hang) twin_dump_all(&s);
    res->hang = s.hang;
    res->watchdog_rank = s.watchdog_rank;
    res->blamed_rank = s.blamed_rank;
    res->switches = s.switches;
    teardown(&s);
    res->report = s.report ? s.report : calloc(1, 1);
    TR_CHECK(res->report != NULL, "out of host memory for the twin report");
    return 0;
}

void twin_result_free(twin_result *res) {
    if (res->messages)
        for (int i = 0; i < res->nranks; i++) free(res->messages[i]);
    free(res->messages);
    free(res->end_times);
    free(res->exit_codes);
    free(res->rank_end);
    free(res->report);
    memset(res, 0, sizeof *res);
}
