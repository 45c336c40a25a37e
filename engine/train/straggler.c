#include "train/straggler.h"

#include <stdlib.h>
#include <string.h>

#include "twinrun/coll.h"
#include "twinrun/err.h"

void train_straggler_init(tr_straggler *s, dev_device *d, int64_t next_iteration) {
    memset(s, 0, sizeof *s);
    s->busy_start = dev_busy_seconds(d);
    s->first_iteration = next_iteration;
    s->worst_rank = -1;
    s->first_listed = -1;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void train_straggler_report(tr_straggler *s, const tr_groups *gr, dev_device *d, int64_t it, FILE *log) {
    const int64_t n_it = it - s->first_iteration + 1;
    const double busy = dev_busy_seconds(d);
    float mine = n_it > 0 ? (float)((busy - s->busy_start) / (double)n_it) : 0.0f;
    s->busy_start = busy;
    s->first_iteration = it + 1;
    const int n = coll_comm_size(gr->world);
    float *all = malloc(sizeof(float) * 2 * (size_t)n);
    float *dbuf = dev_alloc(d, sizeof(float) * ((size_t)n + 1), "straggler report");
    TR_CHECK(all && dbuf, "out of memory for the straggler report");
    dev_stream *st = dev_stream_default(d);
    dev_copy_h2d(st, dbuf, &mine, sizeof mine);
    coll_all_gather(gr->world, st, dbuf, dbuf + 1, 1, TR_F32);
    dev_copy_d2h(st, all, dbuf + 1, sizeof(float) * (size_t)n);
    dev_stream_sync(st);
    dev_free(d, dbuf);
    float *sorted = all + n;
    memcpy(sorted, all, sizeof(float) * (size_t)n);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_float);
    const double median = n % 2 ? sorted[n / 2] : 0.5 * ((double)sorted[n / 2 - 1] + sorted[n / 2]);
    int slow = 0, fast = 0;
    for (int r = 1; r < n; r++) {
        if (all[r] > all[slow]) slow = r;
        if (all[r] < all[fast]) fast = r;
    }
    const double ratio = median > 0 ? all[slow] / median : 1.0;
    if (ratio > s->worst_ratio) s->worst_ratio = ratio, s->worst_rank = slow;
    if (ratio > TR_STRAGGLER_RATIO && s->first_listed < 0) s->first_listed = dev_clock_now(d);
    if (log) {
        fprintf(log,
                " straggler report (iterations %lld-%lld): busy time per iteration median %.3f ms; slowest rank %d "
                "%.3f ms (%.2fx median); fastest rank %d %.3f ms",
                (long long)(it - n_it + 1), (long long)it, median * 1e3, slow, all[slow] * 1e3, ratio, fast,
                all[fast] * 1e3);
        int listed = 0;
        for (int r = 0; r < n && median > 0; r++)
            if (all[r] > TR_STRAGGLER_RATIO * median)
                fprintf(log, "%s%d", listed++ ? "," : "; ranks above 1.5x median: ", r);
        fputc('\n', log);
    }
    free(all);
}
