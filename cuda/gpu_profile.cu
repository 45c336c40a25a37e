/* The per-kind event timer behind TWINRUN_GPU_PROFILE=1 (gpu_profile.h). Lives on the device
 * (dev_device.prof), like the GEMM state; dev_close prints and frees it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_check.h"
#include "cuda_dev.h"
#include "gpu_profile.h"

#define PROF_KINDS 512
#define PROF_PENDING 4096 /* spans in flight before the host waits for the oldest half */
#define PROF_NAME 96

typedef struct prof_kind {
    char name[PROF_NAME];
    unsigned long long calls, steady_calls;
    double ms, max_ms, steady_ms; /* steady_*: the spans of the steady iterations (tr_prof_step) */
} prof_kind;

typedef struct prof_span {
    cudaEvent_t a, b; /* created on the slot's first use, reused after */
    int kind;
    bool ended, steady;
} prof_span;

struct tr_cu_prof {
    prof_kind kinds[PROF_KINDS];
    int nkinds;
    prof_span ring[PROF_PENDING]; /* FIFO of spans not yet summed: [head, head + count) */
    unsigned head, count;
    unsigned long long dropped; /* spans not timed: more than PROF_KINDS kinds, or the ring full of open spans */
    /* dev_step_mark: the iteration running now (0: none), the first counted as steady (the ones before
     * are warm-up: the first launch of a kernel loads its module, cuBLASLt picks its algorithms), how
     * many steady iterations began and the last of them */
    long long step, first_steady, steady_steps, last_step;
    /* tr_prof_mem: the driver's view of the GPU (cudaMemGetInfo) beside the accounted bytes, sampled
     * after every span and allocation, to find device memory that dev_alloc does not see (the CUDA
     * context, libraries' buffers, the scratch pool): at the first sample, and where the gap and the
     * driver's own use were largest */
    bool mem_sampled;
    size_t mem_first_gap, mem_gap_max, mem_in_use_max, mem_used_at_max;
    char mem_gap_at[PROF_NAME + 32];
};

extern "C" bool tr_prof_enabled(dev_device *d) {
    if (d->prof_mode == 0) {
        const char *v = getenv("TWINRUN_GPU_PROFILE");
        d->prof_mode = v && strcmp(v, "1") == 0 ? 2 : 1;
        if (d->prof_mode == 2) {
            d->prof = (tr_cu_prof *)calloc(1, sizeof *d->prof);
            if (!d->prof) tr_fatal("out of host memory for TWINRUN_GPU_PROFILE's tables");
            const char *skip = getenv("TWINRUN_GPU_PROFILE_SKIP");
            d->prof->first_steady = 1 + (skip && *skip ? atoll(skip) : 1);
            if (d->prof->first_steady < 1) d->prof->first_steady = 1;
        }
    }
    return d->prof_mode == 2;
}

static int kind_of(tr_cu_prof *p, const char *name) {
    for (int i = 0; i < p->nkinds; i++)
        if (strncmp(p->kinds[i].name, name, PROF_NAME - 1) == 0) return i;
    if (p->nkinds == PROF_KINDS) return -1;
    snprintf(p->kinds[p->nkinds].name, PROF_NAME, "%s", name);
    return p->nkinds++;
}

/* Sums the oldest `n` spans (stops at one still open). */
static void resolve(tr_cu_prof *p, unsigned n) {
    while (n-- > 0 && p->count > 0) {
        prof_span *sp = &p->ring[p->head];
        if (!sp->ended) return;
        CU_CHECK(cudaEventSynchronize(sp->b));
        float ms = 0.0f;
        CU_CHECK(cudaEventElapsedTime(&ms, sp->a, sp->b));
        prof_kind *k = &p->kinds[sp->kind];
        k->calls++;
        k->ms += ms;
        if (ms > k->max_ms) k->max_ms = ms;
        if (sp->steady) k->steady_calls++, k->steady_ms += ms;
        p->head = (p->head + 1) % PROF_PENDING;
        p->count--;
    }
}

extern "C" void *tr_prof_begin(dev_stream *s, const char *kind) {
    if (!s || !tr_prof_enabled(s->dev)) return NULL;
    tr_cu_prof *p = s->dev->prof;
    if (p->count == PROF_PENDING) resolve(p, PROF_PENDING / 2);
    const int k = kind_of(p, kind);
    if (k < 0 || p->count == PROF_PENDING) {
        p->dropped++;
        return NULL;
    }
    prof_span *sp = &p->ring[(p->head + p->count) % PROF_PENDING];
    if (!sp->a) {
        CU_CHECK(cudaEventCreate(&sp->a));
        CU_CHECK(cudaEventCreate(&sp->b));
    }
    sp->kind = k;
    sp->ended = false;
    sp->steady = p->step >= p->first_steady;
    p->count++;
    CU_CHECK(cudaEventRecord(sp->a, tr_cu_stream(s)));
    return sp;
}

extern "C" void tr_prof_mem(dev_device *d, const char *what) {
    if (!tr_prof_enabled(d)) return;
    tr_cu_prof *p = d->prof;
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        (void)cudaGetLastError();
        return;
    }
    const size_t in_use = total_b - free_b, gap = in_use > d->used ? in_use - d->used : 0;
    if (!p->mem_sampled) p->mem_sampled = true, p->mem_first_gap = gap;
    if (gap > p->mem_gap_max) {
        p->mem_gap_max = gap;
        snprintf(p->mem_gap_at, sizeof p->mem_gap_at, "%s, iteration %lld", what, p->step);
    }
    if (in_use > p->mem_in_use_max) p->mem_in_use_max = in_use, p->mem_used_at_max = d->used;
}

extern "C" void tr_prof_end(dev_stream *s, void *span) {
    if (!span) return;
    prof_span *sp = (prof_span *)span;
    CU_CHECK(cudaEventRecord(sp->b, tr_cu_stream(s)));
    sp->ended = true;
    tr_prof_mem(s->dev, s->dev->prof->kinds[sp->kind].name);
}

extern "C" void tr_prof_step(dev_device *d, long long iteration) {
    if (!tr_prof_enabled(d)) return;
    tr_cu_prof *p = d->prof;
    p->step = iteration;
    if (iteration >= p->first_steady && iteration != p->last_step) p->steady_steps++, p->last_step = iteration;    tr_prof_mem(d, "the iteration's start");
}

/* What the device held besides the accounted allocations: the scratch pool's high-water marks
 * (cudaMallocAsync, not counted by dev_alloc) and the driver's view of the whole GPU at the end. */
static void print_memory(FILE *f, dev_device *d) {
    cudaMemPool_t pool;
    unsigned long long used_high = 0, reserved_high = 0;
    if (cudaDeviceGetDefaultMemPool(&pool, d->ordinal) == cudaSuccess) {
        (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemHigh, &used_high);
        (void)cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemHigh, &reserved_high);
    }
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    (void)cudaGetLastError();
    fprintf(f,
            "# memory: accounted peak %zu bytes (dev_alloc); scratch pool high %llu bytes used, %llu reserved; "
            "device in use at the end %zu of %zu bytes (every process, the CUDA context included)\n",
            d->peak, used_high, reserved_high, total_b - free_b, total_b);
    const tr_cu_prof *p = d->prof;
    if (p->mem_sampled)
        fprintf(f,
                "# memory beyond dev_alloc (cudaMemGetInfo minus accounted, sampled after every span and "
                "allocation): %zu bytes at the first sample, at most %zu bytes (after %s); the driver's peak %zu "
                "bytes with %zu accounted\n",
                p->mem_first_gap, p->mem_gap_max, p->mem_gap_at, p->mem_in_use_max, p->mem_used_at_max);
}

extern "C" void tr_prof_close(dev_device *d) {
    tr_cu_prof *p = d->prof;
    if (!p) return;
    resolve(p, PROF_PENDING);
    int order[PROF_KINDS];
    double total = 0.0;
    for (int i = 0; i < p->nkinds; i++) order[i] = i, total += p->kinds[i].ms;
    for (int i = 1; i < p->nkinds; i++) /* insertion sort, largest total first */
        for (int j = i; j > 0 && p->kinds[order[j]].ms > p->kinds[order[j - 1]].ms; j--) {
            const int t = order[j];
            order[j] = order[j - 1], order[j - 1] = t;
        }
    const char *path = getenv("TWINRUN_GPU_PROFILE_FILE");
    FILE *out = path && *path ? fopen(path, "w") : NULL;
    FILE *f = out ? out : stderr;
    fprintf(f, "twinrun GPU profile (TWINRUN_GPU_PROFILE=1) on %s: %d kinds, %.3f ms of stream time in spans%s\n",
            d->name, p->nkinds, total, p->dropped ? " (some spans dropped: more kinds than the table holds)" : "");
    /* step_calls and step_ms: per steady iteration (the mean over them), what a calibration fits */
    fprintf(f, "# steady iterations: %lld, from iteration %lld (TWINRUN_GPU_PROFILE_SKIP=%lld warm-up iterations)\n",
            p->steady_steps, p->first_steady, p->first_steady - 1);
    print_memory(f, d);
    fprintf(f, "%12s %6s %10s %12s %12s %10s %12s  %s\n", "total_ms", "share", "calls", "mean_us", "max_us",
            "step_calls", "step_ms", "kind");
    const double n = p->steady_steps > 0 ? (double)p->steady_steps : 1.0;
    for (int i = 0; i < p->nkinds; i++) {
        const prof_kind *k = &p->kinds[order[i]];
        fprintf(f, "%12.3f %5.1f%% %10llu %12.2f %12.2f %10.2f %12.4f  %s\n", k->ms,
                total > 0 ? 100.0 * k->ms / total : 0.0, k->calls, k->calls ? 1000.0 * k->ms / (double)k->calls : 0.0,
                1000.0 * k->max_ms, (double)k->steady_calls / n, k->steady_ms / n, k->name);
    }
    if (out) fclose(out);
    for (unsigned i = 0; i < PROF_PENDING; i++)
        if (p->ring[i].a) {
            cudaEventDestroy(p->ring[i].a);
            cudaEventDestroy(p->ring[i].b);
        }
    free(p);
    d->prof = NULL;
}
