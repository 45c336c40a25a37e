/* The twin's per-kind kernel ledger (cost_ledger.h). Only a run that asks for it pays: devices of other
 * ranks, and every run without TWINRUN_TWIN_PROFILE, get a NULL ledger and one branch per launch. */
#include "cost/cost_ledger.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

#define LEDGER_LABEL 96

typedef struct ledger_row {
    char label[LEDGER_LABEL];
    twin_kernel_kind kind;
    unsigned long long calls;
    double flops, bytes, compute_s, memory_s, roofline_s, seconds;
} ledger_row;

typedef struct ledger_table {
    ledger_row *rows;
    size_t n, cap;
} ledger_table;

struct twin_ledger {
    char path[1024];
    int rank;
    int64_t iteration; /* running now (0: none) */
    int64_t done_iter; /* the iteration `done` holds (0: none yet) */
    ledger_table cur;  /* the running iteration's launches */
    ledger_table done; /* the last completed iteration's */
};

twin_ledger *twin_ledger_open(int rank) {
    const char *path = getenv("TWINRUN_TWIN_PROFILE");
    if (!path || !*path) return NULL;
    const char *want = getenv("TWINRUN_TWIN_PROFILE_RANK");
    if ((want && *want ? atoi(want) : 0) != rank) return NULL;
    twin_ledger *l = calloc(1, sizeof *l);
    TR_CHECK(l != NULL, "out of host memory for TWINRUN_TWIN_PROFILE's ledger");
    snprintf(l->path, sizeof l->path, "%s", path);
    l->rank = rank;
    return l;
}

/* The GPU profile's name for the launch: GEMMs by shape and types (cuda/kern_gemm_cublaslt.cu
 * spells it so), every other kind by its entry point. */
static void label_of(char *out, size_t len, const twin_kernel_cost *kc) {
    if (kc->m > 0)
        snprintf(out, len, "gemm %dx%dx%d %c%c %s.%s>%s%s", kc->m, kc->n, kc->k, kc->ta ? 'T' : 'N', kc->tb ? 'T' : 'N',
                 tr_dtype_name(kc->a_dt), tr_dtype_name(kc->b_dt), tr_dtype_name(kc->c_dt),
                 kc->accumulate ? " +=" : "");
    else snprintf(out, len, "%s", twin_kernel_kind_name(kc->kind));
}

static ledger_row *row_of(ledger_table *t, const char *label, twin_kernel_kind kind) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->rows[i].label, label) == 0) return &t->rows[i];
    if (t->n == t->cap) {
        const size_t cap = t->cap ? 2 * t->cap : 64;
        ledger_row *rows = realloc(t->rows, cap * sizeof *rows);
        TR_CHECK(rows != NULL, "out of host memory for TWINRUN_TWIN_PROFILE's ledger");
        t->rows = rows, t->cap = cap;
    }
    ledger_row *r = &t->rows[t->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->label, sizeof r->label, "%s", label);
    r->kind = kind;
    return r;
}

void twin_ledger_kernel(twin_ledger *l, const twin_device_spec *spec, const twin_kernel_cost *kc, double seconds) {
    if (!l || l->iteration <= 0) return; /* set-up and tail: not an iteration */
    char label[LEDGER_LABEL];
    label_of(label, sizeof label, kc);
    ledger_row *r = row_of(&l->cur, label, kc->kind);
    r->calls++;
    r->flops += kc->flops, r->bytes += kc->bytes;
    r->compute_s += kc->flops / twin_kernel_peak(spec, kc->kind, kc->dt);
    r->memory_s += kc->bytes / spec->mem_bandwidth;
    r->roofline_s += twin_kernel_roofline_seconds(spec, kc);
    r->seconds += seconds;
}

/* The running iteration is complete: it becomes the one the file reports. */
static void complete(twin_ledger *l) {
    if (l->iteration <= 0) return;
    ledger_table t = l->done;
    l->done = l->cur;
    l->done_iter = l->iteration;
    t.n = 0;
    l->cur = t;
}

void twin_ledger_step(twin_ledger *l, int64_t iteration) {
    if (!l) return;
    complete(l);
    l->iteration = iteration;
}

/* A JSON number: finite always (sums of finite costs). */
static void num(FILE *f, const char *key, double v, const char *sep) { fprintf(f, "\"%s\": %.17g%s", key, v, sep); }

void twin_ledger_close(twin_ledger *l, const twin_device_spec *spec) {
    if (!l) return;
    /* a run that ended inside an iteration (an error, no iteration mark of 0) reports the last complete one */
    FILE *f = fopen(l->path, "w");
    if (!f) {
        fprintf(stderr, "twinrun: warning: TWINRUN_TWIN_PROFILE: cannot write %s\n", l->path);
    } else {
        double total = 0;
        for (size_t i = 0; i < l->done.n; i++) total += l->done.rows[i].seconds;
        fprintf(f, "{\"device\": \"%s\", \"rank\": %d, \"iteration\": %lld, ", spec ? spec->name : "twin-cpu", l->rank,
                (long long)l->done_iter);
        num(f, "kernel_s", total, ",\n \"kinds\": [");
        for (size_t i = 0; i < l->done.n; i++) {
            const ledger_row *r = &l->done.rows[i];
            fprintf(f, "%s\n  {\"kind\": \"%s\", \"class\": \"%s\", \"calls\": %llu, ", i ? "," : "", r->label,
                    twin_kernel_kind_name(r->kind), r->calls);
            num(f, "flops", r->flops, ", ");
            num(f, "bytes", r->bytes, ", ");
            num(f, "compute_s", r->compute_s, ", ");
            num(f, "memory_s", r->memory_s, ", ");
            num(f, "roofline_s", r->roofline_s, ", ");
            num(f, "seconds", r->seconds, "}");
        }
        fprintf(f, "\n]}\n");
        if (fclose(f) != 0) fprintf(stderr, "twinrun: warning: TWINRUN_TWIN_PROFILE: writing %s failed\n", l->path);
    }
    free(l->cur.rows);
    free(l->done.rows);
    free(l);
}
