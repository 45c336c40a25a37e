/* Blocking points: how a rank gives the thread back to the scheduler, and how it comes back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "sched_internal.h"
#include "twinrun/err.h"

/* Back to the scheduler's loop; returns when the scheduler switches to r again. */
static void to_scheduler(twin_rank *r) {
    twin_sched *s = twin_sched_get();
    twin_ctx_switch(&r->ctx, &s->main_ctx);
}

void twin_sync(twin_rank *r) {
    twin_sched *s = twin_sched_get();
    if (!s) return;
    TR_CHECK(r == s->current, "twin_sync for a rank that is not running");
    int id;
    double t;
    if (!rank_heap_peek(&s->heap, &id, &t)) return;
    if (r->now < t || (r->now == t && r->id < id)) return; /* already the earliest: nothing to yield to */
    r->state = RANK_RUNNABLE;
    rank_heap_set(&s->heap, r->id, r->now);
    to_scheduler(r);
}

coll_status twin_wait(twin_rank *r, const char *what) {
    twin_sched *s = twin_sched_get();
    if (r->waiting > 0) {
        if (!s) tr_fatal("%s would wait forever: outside twin_run there is only rank 0 and no peer can arrive", what);
        TR_CHECK(r == s->current, "twin_wait for a rank that is not running");
        r->state = RANK_BLOCKED;
        r->blocked_on = what;
        /* across processes the watchdog counts wall time (sim/multiproc/multiproc.h): a stopped peer's clock never moves */
        r->deadline = r->watchdog_s > 0 && !s->xproc ? r->now + r->watchdog_s : INFINITY;
        if (isfinite(r->deadline)) rank_heap_set(&s->heap, r->id, r->deadline);
        to_scheduler(r);
        TR_CHECK(r->waiting == 0 && r->state == RANK_RUNNABLE, "rank resumed before its collectives finished");
    }
    coll_status st = r->wake_status;
    r->wake_status = COLL_OK;
    r->blocked_on = NULL;
    return st;
}

void twin_op_done(twin_rank *r, double t, coll_status st) {
    TR_CHECK(r->waiting > 0, "a collective completed twice for one rank");
    if (t > r->now) {
        r->coll_seconds += t - r->now;
        r->now = t;
    }
    if (st > r->wake_status) r->wake_status = st;
    if (--r->waiting == 0 && r->state == RANK_BLOCKED) {
        twin_sched *s = twin_sched_get();
        TR_CHECK(s != NULL, "a blocked rank outside twin_run");
        r->state = RANK_RUNNABLE;
        r->deadline = INFINITY;
        rank_heap_set(&s->heap, r->id, r->now);
    } else if (r->state == RANK_RUNNABLE) {
        /* a rank queued to run (inside a group) whose clock just moved: keep its place honest */
        twin_sched *s = twin_sched_get();
        if (s && rank_heap_contains(&s->heap, r->id)) rank_heap_set(&s->heap, r->id, r->now);
    }
}

_Noreturn void twin_rank_finish(twin_rank *r, rank_state how, int code) {
    twin_sched *s = twin_sched_get();
    TR_CHECK(s && r == s->current, "a rank ended outside twin_run");
    r->state = how;
    r->exit_code = code;
    twin_log("%.9f r%d %s %d", r->now, r->id, how == RANK_DONE ? "exit" : "fail", code);
    if (r->trace)
        twin_trace_mark_at(s->trace, r->id,
                           how == RANK_DONE     ? TWIN_MARK_EXIT
                           : how == RANK_KILLED ? TWIN_MARK_KILLED
                                                : TWIN_MARK_FAIL,
                           r->now, code, how == RANK_KILLED ? "ended by the watchdog's abort" : NULL);
    if (how == RANK_FAILED) {
        twin_report("rank %d failed with exit code %d at t=%.9f s%s%s", r->id, code, r->now, r->fail_msg ? ": " : "",
                    r->fail_msg ? r->fail_msg : "");
        if (!s->opt.quiet) fprintf(stderr, "twin: rank %d failed (exit %d) at t=%.9f s\n", r->id, code, r->now);
    }
    to_scheduler(r);
    abort(); /* the scheduler never resumes an ended rank */
}

_Noreturn void twin_hang_forever(void) {
    twin_sched *s = twin_sched_get();
    if (!s) tr_fatal("twin_hang_forever outside twin_run: the implicit rank would hang the process");
    twin_rank *r = twin_self();
    twin_log("%.9f r%d hang", r->now, r->id);
    if (r->trace) twin_trace_mark_at(s->trace, r->id, TWIN_MARK_HANG, r->now, 0, "twin_hang_forever");
    r->state = RANK_BLOCKED;
    r->blocked_on = "injected hang";
    r->deadline = INFINITY;
    twin_ctx_switch(&r->ctx, &s->main_ctx);
    abort(); /* never woken: killed when the run ends */
}
