/* The GPU benchmark tools' timing (attn_bench, flash_bench, gemm_fp8_bench): `runs` calls of f(arg) after
 * `warmup` untimed ones, each between two CUDA events on stream s, into ms[runs] sorted ascending, so a
 * tool takes the median it reports. */
#ifndef TWINRUN_CUDA_TOOLS_BENCH_TIME_H
#define TWINRUN_CUDA_TOOLS_BENCH_TIME_H

#include <stdlib.h>

#include "cuda_dev.h"

static int tr_cu_bench_cmp(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static void tr_cu_bench_times(dev_stream *s, int warmup, int runs, void (*f)(void *), void *arg, float *ms) {
    cudaStream_t st = tr_cu_stream(s);
    cudaEvent_t *ev = (cudaEvent_t *)malloc(sizeof *ev * 2 * (size_t)runs);
    if (!ev) tr_fatal("out of host memory for the benchmark's events");
    for (int i = 0; i < 2 * runs; i++) CU_CHECK(cudaEventCreate(&ev[i]));
    for (int i = 0; i < warmup; i++) f(arg);
    for (int i = 0; i < runs; i++) {
        CU_CHECK(cudaEventRecord(ev[2 * i], st));
        f(arg);
        CU_CHECK(cudaEventRecord(ev[2 * i + 1], st));
    }
    dev_stream_sync(s);
    for (int i = 0; i < runs; i++) CU_CHECK(cudaEventElapsedTime(&ms[i], ev[2 * i], ev[2 * i + 1]));
    for (int i = 0; i < 2 * runs; i++) CU_CHECK(cudaEventDestroy(ev[i]));
    free(ev);
    qsort(ms, (size_t)runs, sizeof ms[0], tr_cu_bench_cmp);
}

#endif
