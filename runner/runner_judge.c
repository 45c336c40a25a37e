/* Did the job notice the fault, and did it name the right culprit? One rule per kind, from what
 * the engine diagnosed (NaN origin, preflight table, checkpoint writer) and what the twin saw
 * (the watchdog's blame, the failed ranks' messages). */
#include <stdio.h>
#include <string.h>

#include "runner_internal.h"

static int node_of(const sc_job *j, int rank) { return rank < 0 ? -1 : rank / j->opt.gpus_per_node; }

/* The first rank that failed (not killed by the watchdog) whose message contains `needle`; -1 none. */
static int failed_with(const sc_run *run, const char *needle) {
    const twin_result *t = &run->tres;
    for (int r = 0; r < t->nranks; r++)
        if (t->rank_end[r] == TWIN_RANK_FAILED && t->messages[r] && strstr(t->messages[r], needle)) return r;
    return -1;
}

/* Whether msg names one of the job's data files (PREFIX.bin; the weights of a blend name none). */
static bool names_data_file(const sc_job *j, const char *msg) {
    for (int i = 0; i < j->cfg->n_data_path; i++) {
        char file[TR_PATH_LEN + 8];
        snprintf(file, sizeof file, "%s.bin", j->cfg->data_path[i]);
        if (strstr(msg, file)) return true;
    }
    return false;
}

void runner_run_cause(const sc_job *j, const sc_run *run, char *out, size_t outlen) {
    const twin_result *t = &run->tres;
    const tr_diagnosis *d = &run->sum.diag;
    if (run->rc == 0 && run->sum.signal_exit_iteration > 0) {
        snprintf(out, outlen, "SIGTERM: saved at iteration %lld and exited 0",
                 (long long)run->sum.signal_exit_iteration);
    } else if (run->rc == 0) {
        snprintf(out, outlen, "completed");
    } else if (t->hang && t->blamed_rank >= 0) {
        snprintf(out, outlen, "watchdog at t=%.1f s: rank %d (node %d) stopped first (%s)", t->watchdog_time,
                 t->blamed_rank, node_of(j, t->blamed_rank),
                 t->rank_end[t->blamed_rank] == TWIN_RANK_FAILED ? "failed" : "hung");
    } else if (!strcmp(d->kind, "nan")) {
        char layer[32] = "";
        if (d->layer >= 0) snprintf(layer, sizeof layer, " of layer %d", d->layer);
        snprintf(out, outlen, "NaN/Inf at iteration %lld, first at rank %d (node %d), %s%s (micro-batch %d)",
                 (long long)d->iteration, d->rank, node_of(j, d->rank), d->detail, layer, d->micro);
    } else if (!strcmp(d->kind, "preflight")) {
        snprintf(out, outlen, "preflight: the ranks disagree on their %s, first rank %d (node %d)", d->detail, d->rank,
                 node_of(j, d->rank));
    } else if (!strcmp(d->kind, "ckpt_write")) {
        snprintf(out, outlen, "checkpoint of iteration %lld not committed: rank %d could not write its shard",
                 (long long)d->iteration, d->rank);
    } else if (d->kind[0]) {
        snprintf(out, outlen, "%s: %.400s", d->kind, run->err);
    } else {
        snprintf(out, outlen, "exit %d: %.400s", run->rc, run->err);
    }
}

void runner_judge_fault(const sc_job *j, const fault_plan *plan, int i, const sc_run *run, sc_fault_outcome *o) {
    const fault_spec *f = &plan->faults[i];
    const twin_result *t = &run->tres;
    const tr_diagnosis *d = &run->sum.diag;
    const int want_rank = plan->supervised ? plan->fired[i].rank : f->rank;
    const int want_node = f->node >= 0 ? f->node : node_of(j, want_rank);
    double when = -1;
    int named = -1;
    bool by_node = false;
    switch (f->kind) {
    case FAULT_HANG:
    case FAULT_CRASH:
    case FAULT_CKPT_CRASH:
    case FAULT_NODE_CRASH:
        if (t->hang) named = t->blamed_rank, when = t->watchdog_time;
        by_node = f->kind == FAULT_NODE_CRASH;
        snprintf(o->diagnosis, sizeof o->diagnosis, "watchdog blame: rank %d stopped first", t->blamed_rank);
        break;
    case FAULT_COLL_MISMATCH: {
        int r = failed_with(run, "collective mismatch");
        if (r >= 0) {
            when = t->end_times[r];
            char me[32];
            snprintf(me, sizeof me, "rank %d ", want_rank);
            named = strstr(t->messages[r], me) ? want_rank : r;
            snprintf(o->diagnosis, sizeof o->diagnosis, "%.500s", t->messages[r]);
        }
        break;
    }
    case FAULT_NAN:
        if (!strcmp(d->kind, "nan")) {
            bool place = !strcmp(d->detail, fault_tensor_name(f->tensor)) &&
                         (f->tensor == FAULT_T_LOSS || f->layer < 0 || f->layer == d->layer);
            named = place ? d->rank : -2, when = d->time;
            snprintf(o->diagnosis, sizeof o->diagnosis, "NaN origin: rank %d, layer %d %s, micro-batch %d", d->rank,
                     d->layer, d->detail, d->micro);
        }
        break;
    case FAULT_AMAX_SPIKE:
        if (!strcmp(d->kind, "fp8_spike")) {
            const char *want = f->tensor == FAULT_T_GRADIENT ? "qkv.grad" : "qkv.input";
            bool place = !strcmp(d->detail, want) && (f->layer < 0 || f->layer == d->layer);
            named = place ? d->rank : -2, when = d->time;
            snprintf(o->diagnosis, sizeof o->diagnosis, "FP8 amax spike: rank %d, layer %d %s, iteration %lld", d->rank,
                     d->layer, d->detail, (long long)d->iteration);
        }
        break;
    case FAULT_STRAGGLER:
        if (run->sum.straggler_rank >= 0 && run->sum.straggler_ratio > TR_STRAGGLER_RATIO) {
            named = run->sum.straggler_rank, when = run->sum.straggler_time;
            snprintf(o->diagnosis, sizeof o->diagnosis, "straggler report: rank %d at %.2fx the median busy time",
                     run->sum.straggler_rank, run->sum.straggler_ratio);
        }
        break;
    case FAULT_CKPT_ENOSPC:
        if (!strcmp(d->kind, "ckpt_write")) named = d->rank, when = d->time;
        snprintf(o->diagnosis, sizeof o->diagnosis, "%.500s", run->err);
        break;
    case FAULT_OOM: {
        int r = failed_with(run, "out of device memory");
        if (r >= 0)
            named = r, when = t->end_times[r], snprintf(o->diagnosis, sizeof o->diagnosis, "%.500s", t->messages[r]);
        break;
    }
    case FAULT_SHORT_NODE:
    case FAULT_VERSION_SKEW:
        by_node = true;
        if (!strcmp(d->kind, "preflight") &&
            !strcmp(d->detail, f->kind == FAULT_SHORT_NODE ? "device count" : "build version"))
            named = d->rank, when = d->time;
        snprintf(o->diagnosis, sizeof o->diagnosis, "%.500s", run->err);
        break;
    case FAULT_CKPT_CORRUPT:
    case FAULT_DATA_CORRUPT: break; /* judged by the supervisor, which damaged the file and read the load's error */
    case FAULT_PREEMPT:
        /* noticed when the whole job agreed to stop at that iteration, saved, and exited 0 */
        if (run->rc == 0 && run->sum.signal_exit_iteration == f->step)
            named = want_rank, when = run->sum.signal_exit_time;
        else if (t->hang) /* no --exit-signal-handler: the rank died of SIGTERM and the watchdog saw it */
            named = t->blamed_rank, when = t->watchdog_time;
        snprintf(o->diagnosis, sizeof o->diagnosis,
                 run->rc == 0 ? "SIGTERM at iteration %lld: checkpoint saved, exit 0"
                              : "SIGTERM at iteration %lld: the rank died",
                 (long long)f->step);
        break;
    case FAULT_DATA_STALL: {
        /* the stalled rank's own data watchdog, naming the file it read (mock data has none to name) */
        int r = failed_with(run, "data watchdog:");
        if (r >= 0) {
            named = j->cfg->n_data_path == 0 || names_data_file(j, t->messages[r]) ? r : -2, when = t->end_times[r];
            snprintf(o->diagnosis, sizeof o->diagnosis, "%.500s", t->messages[r]);
        }
        break;
    }
    case FAULT_SLOW_LINK:
    case FAULT_HIDDEN_DIR: /* the doctor names them (runner_doctor.c); a training scenario refuses them */
    case FAULT_KIND_COUNT: break;
    }
    o->detected = named != -1;
    o->attributed = by_node ? node_of(j, named) == want_node : named == want_rank;
    o->detect_seconds = o->detected && when >= 0 ? when - o->fired_at : -1;
    if (o->detect_seconds < 0 && o->detected) o->detect_seconds = 0;
}
