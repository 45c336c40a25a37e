/* The predict report: collection over ranks, text and JSON (predict_report.h). */
#include "train/predict_report.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "core/safe_file.h"
#include "twinrun/err.h"

#define GIB (1024.0 * 1024.0 * 1024.0)

int train_predict_init(tr_predict *p, int nstages, int world) {
    memset(p, 0, sizeof *p);
    p->stage = calloc((size_t)(nstages > 0 ? nstages : 1), sizeof *p->stage);
    if (!p->stage) return -1;
    p->nstages = nstages;
    p->world = world;
    p->step_rank = -1;
    return 0;
}

void train_predict_free(tr_predict *p) {
    free(p->stage);
    memset(p, 0, sizeof *p);
}

void train_predict_add_rank(tr_predict *p, int stage, int rank, const dev_device *d, const tr_predict_time *t) {
    if (stage < 0 || stage >= p->nstages) return;
    p->ranks++;
    if (t->step > p->step_time || p->step_rank < 0) p->step_time = t->step, p->step_rank = rank;
    tr_predict_stage *s = &p->stage[stage];
    const size_t peak = dev_mem_peak(d);
    /* ties keep the lowest rank, whatever order the ranks end in */
    if (s->seen && (peak < s->peak || (peak == s->peak && rank > s->rank))) return;
    s->seen = true;
    s->rank = rank;
    s->peak = peak;
    dev_mem_peak_parts(d, s->parts);
    s->time = *t;
}

size_t train_predict_max_peak(const tr_predict *p, int *stage) {
    size_t best = 0;
    int at = -1;
    for (int i = 0; i < p->nstages; i++)
        if (p->stage[i].seen && (at < 0 || p->stage[i].peak > best)) best = p->stage[i].peak, at = i;
    if (stage) *stage = at;
    return best;
}

double train_predict_tokens_per_s(const tr_predict *p) {
    return p->step_time > 0 ? p->tokens_per_step / p->step_time : 0.0;
}

double train_predict_mfu(const tr_predict *p) {
    if (!(p->step_time > 0) || !(p->peak_flops > 0) || p->world < 1) return 0.0;
    return p->flops_per_step / (p->step_time * p->world * p->peak_flops);
}

static double gib(size_t b) { return (double)b / GIB; }

int train_predict_largest_micro_batch(const tr_predict *p, int *stage) {
    int best = -1;
    for (int i = 0; i < p->nstages && p->capacity && p->micro_batch > 0; i++) {
        const tr_predict_stage *s = &p->stage[i];
        if (!s->seen) continue;
        const size_t fixed = s->parts[DEV_MEM_WEIGHTS] + s->parts[DEV_MEM_MAIN_GRADS] + s->parts[DEV_MEM_OPTIMIZER];
        const double per = (double)(s->peak - fixed) / p->micro_batch; /* bytes a sample */
        double fit = fixed >= p->capacity ? 0 : per > 0 ? (double)(p->capacity - fixed) / per : 1e6;
        const int n = fit > 1e6 ? 1000000 : (int)fit;
        if (best < 0 || n < best) {
            best = n;
            if (stage) *stage = i;
        }
    }
    return best;
}

/* The table's unit: GiB, or MiB when every peak is below 1 GiB (a small config's table would read 0.00). */
static double unit_of(const tr_predict *p, const char **name) {
    const size_t worst = train_predict_max_peak(p, NULL);
    *name = worst >= (size_t)1 << 30 ? "GiB" : "MiB";
    return worst >= (size_t)1 << 30 ? GIB : 1024.0 * 1024.0;
}

void train_predict_print(FILE *out, const tr_predict *p) {
    fprintf(out,
            "[predict] shape-only run: %d ranks on %s, %.2f GiB each; the kernels computed nothing and charged "
            "the cost model's time\n",
            p->world, p->device, gib(p->capacity));
    if (p->runtime)
        fprintf(out,
                "[predict] capacity: what a rank may allocate; the runtime (CUDA context, libraries) holds %.2f GiB "
                "more, so a device shows about the peak + %.2f GiB in nvidia-smi\n",
                gib(p->runtime), gib(p->runtime));
    const char *uname;
    const double u = unit_of(p, &uname);
    fprintf(out, "[predict] device memory per rank at its peak, %s (each stage: its rank with the largest peak)\n",
            uname);
    fprintf(out, "[predict]   stage   rank  weights main_grads optimizer activations workspace comm_buffers     peak  "
                 "of capacity\n");
    for (int i = 0; i < p->nstages; i++) {
        const tr_predict_stage *s = &p->stage[i];
        if (!s->seen) continue;
        fprintf(out, "[predict] %7d %6d %8.2f %10.2f %9.2f %11.2f %9.2f %12.2f %8.2f %10.1f%%\n", i, s->rank,
                (double)s->parts[DEV_MEM_WEIGHTS] / u, (double)s->parts[DEV_MEM_MAIN_GRADS] / u,
                (double)s->parts[DEV_MEM_OPTIMIZER] / u, (double)s->parts[DEV_MEM_ACTIVATIONS] / u,
                (double)s->parts[DEV_MEM_WORKSPACE] / u, (double)s->parts[DEV_MEM_COMM] / u, (double)s->peak / u,
                p->capacity ? 100.0 * (double)s->peak / (double)p->capacity : 0.0);
    }
    int at;
    const size_t worst = train_predict_max_peak(p, &at);
    if (!p->capacity)
        fprintf(out, "[predict] no capacity to compare with: the largest peak is stage %d's %.2f %s\n", at,
                (double)worst / u, uname);
    else if (worst <= p->capacity)
        fprintf(out, "[predict] fits: the largest peak, stage %d's %.2f %s, is %.1f%% of %.2f GiB (%.2f GiB free)\n",
                at, (double)worst / u, uname, 100.0 * (double)worst / (double)p->capacity, gib(p->capacity),
                gib(p->capacity - worst));
    else
        fprintf(out,
                "[predict] does not fit: stage %d needs %.2f GiB, %.2f GiB more than the %.2f GiB of a %s (lower "
                "--micro-batch-size, add --recompute-granularity, or use more model parallelism)\n",
                at, gib(worst), gib(worst - p->capacity), gib(p->capacity), p->device);
    int lim = 0;
    const int largest = train_predict_largest_micro_batch(p, &lim);
    if (largest >= 0)
        fprintf(out,
                "[predict] micro-batch %d; the largest that fits is about %d (stage %d: weights, main grads and "
                "optimizer state stay, the rest grows with the micro-batch); `scenario plan` tries sizes and "
                "recomputation exactly\n",
                p->micro_batch, largest, lim);
    if (p->step_rank < 0) return;
    fprintf(out, "[predict] step time %.3f s (simulated on %s; the slowest rank, %d, in the last of %lld iterations)\n",
            p->step_time, p->device, p->step_rank, (long long)p->iterations);
    for (int i = 0; i < p->nstages; i++) {
        const tr_predict_stage *s = &p->stage[i];
        if (!s->seen || !(s->time.step > 0)) continue;
        const double st = s->time.step;
        fprintf(out,
                "[predict]   stage %d (rank %d): compute %.3f s (%.1f%%), exposed communication %.3f s (%.1f%%), "
                "pipeline bubble and waits %.3f s (%.1f%%)\n",
                i, s->rank, s->time.compute, 100.0 * s->time.compute / st, s->time.comm, 100.0 * s->time.comm / st,
                s->time.bubble, 100.0 * s->time.bubble / st);
    }
    fprintf(out,
            "[predict] throughput %.0f tokens/s (%.0f tokens a step); %.1f TFLOP/s per GPU of model FLOPs; MFU %.1f%% "
            "of %.1f TFLOP/s dense bf16\n",
            train_predict_tokens_per_s(p), p->tokens_per_step,
            p->step_time > 0 ? p->flops_per_step / p->step_time / p->world / 1e12 : 0.0, 100.0 * train_predict_mfu(p),
            p->peak_flops / 1e12);
}

int train_predict_write_json(const char *path, const tr_predict *p, char *err, size_t errlen) {
    cJSON *root = cJSON_CreateObject(), *stages = cJSON_CreateArray();
    if (!root || !stages) {
        cJSON_Delete(root), cJSON_Delete(stages);
        return tr_errf(err, errlen, "--predict-json %s: out of host memory", path);
    }
    cJSON_AddStringToObject(root, "device", p->device);
    cJSON_AddNumberToObject(root, "capacity_bytes", (double)p->capacity);
    cJSON_AddNumberToObject(root, "runtime_bytes", (double)p->runtime);
    cJSON_AddNumberToObject(root, "step_time_s", p->step_time);
    cJSON_AddNumberToObject(root, "tokens_per_s", train_predict_tokens_per_s(p));
    cJSON_AddNumberToObject(root, "mfu", train_predict_mfu(p));
    cJSON_AddItemToObject(root, "stages", stages);
    /* the JSON's part order (weights, main_grads, optimizer, activations, workspace, comm_buffers) */
    static const dev_mem_tag order[] = {DEV_MEM_WEIGHTS,     DEV_MEM_MAIN_GRADS, DEV_MEM_OPTIMIZER,
                                        DEV_MEM_ACTIVATIONS, DEV_MEM_WORKSPACE,  DEV_MEM_COMM};
    _Static_assert(sizeof order / sizeof order[0] == DEV_MEM_TAG_COUNT, "every purpose in the JSON");
    for (int i = 0; i < p->nstages; i++) {
        const tr_predict_stage *s = &p->stage[i];
        if (!s->seen) continue;
        cJSON *o = cJSON_CreateObject();
        if (!o) break;
        cJSON_AddNumberToObject(o, "stage", i);
        /* bytes up to 2^53 are exact in a JSON number (a double) */
        for (size_t k = 0; k < DEV_MEM_TAG_COUNT; k++)
            cJSON_AddNumberToObject(o, dev_mem_tag_name(order[k]), (double)s->parts[order[k]]);
        cJSON_AddNumberToObject(o, "peak", (double)s->peak);
        cJSON_AddItemToArray(stages, o);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return tr_errf(err, errlen, "--predict-json %s: out of host memory", path);
    /* a temporary name renamed over the old file once whole: a failed write leaves the old one */
    char why[512];
    tr_safe_file sf;
    int rc = tr_safe_open(&sf, path, true, NULL, why, sizeof why);
    if (!rc) {
        fputs(text, sf.f), fputc('\n', sf.f);
        rc = tr_safe_commit(&sf, why, sizeof why); /* a failed write is seen here (ferror, fflush) */
    }
    free(text);
    return rc ? tr_errf(err, errlen, "--predict-json %s", why) : 0;
}
