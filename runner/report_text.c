/* The one-screen summary of a scenario run: what ran, each attempt, each fault's fate, the
 * campaign's totals, every expectation, and one verdict line at the end (where a terminal leaves
 * the eye). Lines are kept under ~100 columns by truncating free text, never numbers. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runner/report.h"

#define WIDTH 100
#define MAX_PASSED_LISTED 12 /* more passed checks than this are counted, not listed */
#define MAX_FAULTS_LISTED 8

typedef struct style {
    bool on;
} style;

/* Colour only for a person at a terminal who has not asked for none (https://no-color.org:
 * NO_COLOR set and non-empty turns it off). */
static style style_for(FILE *f) {
    const char *no = getenv("NO_COLOR");
    return (style){isatty(fileno(f)) && !(no && *no)};
}

static const char *sgr(style s, const char *code) { return s.on ? code : ""; }
#define BOLD "\033[1m"
#define RED "\033[31m"
#define GREEN "\033[32m"
#define YELLOW "\033[33m"
#define RESET "\033[0m"

/* Copies src into out (at most width bytes of text), ending in "..." when cut; never splits a
 * UTF-8 sequence. */
static const char *fit(char *out, size_t outlen, const char *src, size_t width) {
    if (width + 1 > outlen) width = outlen - 1;
    size_t n = strlen(src);
    if (n <= width) {
        memcpy(out, src, n + 1);
        return out;
    }
    size_t keep = width > 3 ? width - 3 : 0;
    while (keep > 0 && ((unsigned char)src[keep] & 0xC0) == 0x80) keep--;
    memcpy(out, src, keep);
    memcpy(out + keep, "...", 4);
    return out;
}

/* Newlines in free text would break the table, and other control characters (an escape
 * sequence in a diagnosis) would reach the terminal. */
static void one_line(char *s) {
    for (; *s; s++)
        if (*s == '\n' || *s == '\r' || *s == '\t') *s = ' ';
        else if ((unsigned char)*s < 0x20 || *s == 0x7f) *s = '?';
}

static const char *yes_no(bool b) { return b ? "yes" : "no"; }

static void bytes_text(char *out, size_t n, size_t bytes) {
    const double gib = (double)bytes / (1024.0 * 1024.0 * 1024.0);
    if (gib >= 1.0) snprintf(out, n, "%.2f GiB", gib);
    else snprintf(out, n, "%.1f MiB", (double)bytes / (1024.0 * 1024.0));
}

static void header(FILE *f, style s, const sc_report *r) {
    fprintf(f, "%sscenario %s%s: %d nodes x %d GPUs (%s), %d ranks, TP%dxPP%dxCP%dxDP%d, %lld iterations\n",
            sgr(s, BOLD), r->name, sgr(s, RESET), r->nodes, r->gpus_per_node, r->device, r->world, r->tp, r->pp, r->cp,
            r->dp, (long long)r->train_iters);
    char peak[32], cap[32];
    bytes_text(peak, sizeof peak, r->peak_bytes);
    bytes_text(cap, sizeof cap, r->capacity_bytes);
    char path[48];
    fprintf(f, "  %s; simulated %.3f s (wall %.3f s); memory peak %s of %s\n",
            fit(path, sizeof path, r->path[0] ? r->path : "(no file)", 40), r->sim_seconds, r->wall_seconds, peak, cap);
}

static void attempts(FILE *f, const sc_report *r) {
    if (r->nattempts <= 0) return;
    fprintf(f, "%-7s %-14s %4s  %11s  %s\n", "attempt", "iterations", "exit", "simulated s", "cause");
    for (int i = 0; i < r->nattempts; i++) {
        const sc_attempt *a = &r->attempts[i];
        char cause[sizeof a->cause], cut[64];
        snprintf(cause, sizeof cause, "%s", a->cause[0] ? a->cause : a->exit_code == 0 ? "completed" : "?");
        one_line(cause);
        fprintf(f, "  #%-4d %5lld -> %-5lld %4d  %11.3f  %s\n", a->index, (long long)a->start_iteration,
                (long long)a->end_iteration, a->exit_code, a->sim_seconds, fit(cut, sizeof cut, cause, 56));
    }
}

/* Two lines a fault: what it was and its fate, then what the diagnosis said. */
static void faults(FILE *f, style s, const sc_report *r) {
    if (r->nfaults <= 0) return;
    fprintf(f, "%-59s  %-7s  %-8s  %-10s  %8s\n", "faults", "attempt", "detected", "attributed", "detect s");
    for (int i = 0; i < r->nfaults && i < MAX_FAULTS_LISTED; i++) {
        const sc_fault_outcome *o = &r->faults[i];
        char desc[256], diag[sizeof o->diagnosis], d1[64], d2[WIDTH], when[16], det[16];
        fault_spec_describe(&o->fault, desc, sizeof desc);
        one_line(desc);
        snprintf(diag, sizeof diag, "%s",
                 o->diagnosis[0] ? o->diagnosis
                 : o->fired      ? "(no diagnosis)"
                                 : "(never fired)");
        one_line(diag);
        if (o->fired && o->attempt >= 0) snprintf(when, sizeof when, "#%d", o->attempt);
        else snprintf(when, sizeof when, "-");
        if (o->detected && o->detect_seconds >= 0) snprintf(det, sizeof det, "%.3f", o->detect_seconds);
        else snprintf(det, sizeof det, "-");
        const bool missed = o->fired && !o->detected, unattributed = o->fired && o->detected && !o->attributed;
        fprintf(f, "  %2d %-54s  %-7s  %s%-8s%s  %s%-10s%s  %8s\n", i + 1, fit(d1, sizeof d1, desc, 54), when,
                sgr(s, missed ? RED : ""), yes_no(o->detected), sgr(s, missed ? RESET : ""),
                sgr(s, unattributed ? YELLOW : ""), yes_no(o->attributed), sgr(s, unattributed ? RESET : ""), det);
        fprintf(f, "       %s\n", fit(d2, sizeof d2, diag, WIDTH - 7));
    }
    if (r->nfaults > MAX_FAULTS_LISTED)
        fprintf(f, "  ... %d more faults (all of them are in the JSON report)\n", r->nfaults - MAX_FAULTS_LISTED);
}

static void campaign(FILE *f, const sc_report *r) {
    if (!r->has_campaign) return;
    const sc_campaign_result *c = &r->campaign;
    fprintf(f, "campaign: %d trials, %d fired, %d detected, %d attributed, %d continuity, %d recovered\n", c->trials,
            c->fired, c->detected, c->attributed, c->continuity_ok, c->recovered);
    if (c->replay_trial > 0)
        fprintf(f, "  the replay of trial %lld of the campaign drawn from seed %llu\n", (long long)c->replay_trial,
                (unsigned long long)c->seed);
    fprintf(f,
            "  detection max %.3f s, mean %.3f s (simulated); %.3f s of wall time\n"
            "  %.3f s a trial, %d at a time\n",
            c->max_detect_seconds, c->mean_detect_seconds, c->wall_seconds, c->mean_trial_seconds, c->jobs);
    int stood = 0;
    for (int t = 0; c->trial && t < c->trials; t++) stood += c->trial[t].replayed_from >= 0;
    if (stood)
        fprintf(f, "  %d trials' last restart not run: a verified resume stood in (--to-the-end runs them)\n", stood);
    fputs("  per kind (ok/trials):", f);
    int col = 22, listed = 0;
    for (int k = 0; k < FAULT_KIND_COUNT; k++) {
        if (c->per_kind_trials[k] <= 0) continue;
        char item[64];
        int n = snprintf(item, sizeof item, " %s %d/%d", fault_kind_name((fault_kind)k), c->per_kind_ok[k],
                         c->per_kind_trials[k]);
        if (col + n > WIDTH) {
            fputs("\n   ", f);
            col = 3;
        }
        fputs(item, f);
        col += n;
        listed++;
    }
    fputs(listed ? "\n" : " none\n", f);
}

/* Iterations whose loss is bit-identical to the fault-free run's, of those both runs have. */
static void losses(FILE *f, const sc_report *r) {
    if (!r->losses || r->train_iters < 1) return;
    const double last = r->losses[r->train_iters];
    int have = 0, same = 0, missing = 0;
    for (int64_t it = 1; it <= r->train_iters; it++) {
        const double x = r->losses[it];
        if (isnan(x)) {
            missing++;
            continue;
        }
        if (!r->reference_losses || isnan(r->reference_losses[it])) continue;
        have++;
        same += memcmp(&x, &r->reference_losses[it], sizeof x) == 0;
    }
    fprintf(f, "loss: final %s", isnan(last) ? "missing" : "");
    if (!isnan(last)) fprintf(f, "%.6f", last);
    if (r->reference_losses) fprintf(f, "; same bits as the fault-free run at %d/%d iterations", same, have);
    if (missing) fprintf(f, "; missing at %d iteration%s", missing, missing == 1 ? "" : "s");
    fputc('\n', f);
}

static void checks(FILE *f, style s, const sc_report *r) {
    if (r->nchecks <= 0) return;
    int passed = 0;
    for (int i = 0; i < r->nchecks; i++) passed += r->checks[i].passed;
    const bool list_passed = passed <= MAX_PASSED_LISTED;
    fprintf(f, "expectations\n");
    for (int i = 0; i < r->nchecks; i++) {
        const sc_check *c = &r->checks[i];
        if (c->passed && !list_passed) continue;
        char detail[sizeof c->detail], cut[WIDTH];
        snprintf(detail, sizeof detail, "%s", c->detail);
        one_line(detail);
        const size_t used = 8 + strlen(c->name) + 2;
        /* a failure's detail is the reason CI went red: never cut it */
        const char *text = c->passed ? fit(cut, sizeof cut, detail, used < WIDTH - 10 ? WIDTH - used : 10) : detail;
        fprintf(f, "  %s%s%s  %s%s%s\n", sgr(s, c->passed ? GREEN : RED), c->passed ? "PASS" : "FAIL", sgr(s, RESET),
                c->name, text[0] ? ": " : "", text);
    }
    if (!list_passed) fprintf(f, "  (%d passed expectations not listed)\n", passed);
}

static void verdict(FILE *f, style s, const sc_report *r) {
    int failed = 0;
    for (int i = 0; i < r->nchecks; i++) failed += !r->checks[i].passed;
    if (failed == 0 && r->passed) {
        fprintf(f, "%s%sPASSED%s: %d/%d expectations\n", sgr(s, BOLD), sgr(s, GREEN), sgr(s, RESET), r->nchecks,
                r->nchecks);
        return;
    }
    fprintf(f, "%s%sFAILED%s: ", sgr(s, BOLD), sgr(s, RED), sgr(s, RESET));
    if (failed == 0) {
        fprintf(f, "the run did not pass, though none of its %d expectations failed\n", r->nchecks);
        return;
    }
    fprintf(f, "%d of %d expectations:", failed, r->nchecks);
    const char *sep = " ";
    for (int i = 0; i < r->nchecks; i++)
        if (!r->checks[i].passed) {
            fprintf(f, "%s%s", sep, r->checks[i].name);
            sep = ", ";
        }
    fputc('\n', f);
}

void report_text(FILE *f, const sc_report *r) {
    const style s = style_for(f);
    header(f, s, r);
    if (r->doctor_text) fputs(r->doctor_text, f);   /* mode: doctor: its report, as the doctor program prints it */
    if (r->predict_text) fputs(r->predict_text, f); /* mode: predict: the engine's report, as train_llama3 prints it */
    attempts(f, r);
    faults(f, s, r);
    campaign(f, r);
    losses(f, r);
    checks(f, s, r);
    verdict(f, s, r);
}
