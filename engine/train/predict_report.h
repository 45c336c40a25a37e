/* The predict report (--predict, docs/prediction.md): per pipeline stage, the device memory peak and
 * its parts against the capacity; the simulated step time and its split; tokens/s and MFU.
 *
 * Every rank adds what its device counted (train_predict_add_rank) when its run ends; the job prints the
 * report once, and writes it as JSON with --predict-json. Ranks of one stage differ only in which shard
 * they hold, so a stage is represented by its rank with the largest peak. */
#ifndef TWINRUN_ENGINE_TRAIN_PREDICT_REPORT_H
#define TWINRUN_ENGINE_TRAIN_PREDICT_REPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "twinrun/dev.h"

/* One rank's last iteration, simulated seconds: compute + comm + bubble = step (dev_wait_split: bubble is
 * the waits for other ranks, the pipeline's bubble above all). */
typedef struct tr_predict_time {
    double step, compute, comm, bubble;
} tr_predict_time;

typedef struct tr_predict_stage {
    bool seen;
    int rank;                        /* the stage's rank with the largest peak: the parts are its */
    size_t parts[DEV_MEM_TAG_COUNT]; /* bytes at that rank's peak, by purpose; they sum to peak */
    size_t peak;                     /* bytes */
    tr_predict_time time;            /* that rank's last iteration */
} tr_predict_stage;

typedef struct tr_predict {
    int nstages;             /* pipeline stages */
    tr_predict_stage *stage; /* [nstages] */
    int world, ranks;        /* ranks in the job, ranks that reported */
    int64_t iterations;      /* iterations the run simulated (the step time is the last one's) */
    double step_time;        /* the slowest rank's last iteration, seconds */
    int step_rank;           /* that rank */
    double flops_per_step;   /* model FLOPs of one iteration (the TFLOP/s column's formula) */
    double tokens_per_step;  /* global batch x sequence length */
    char device[64];         /* the spec's name ("H100") */
    size_t capacity;         /* bytes per rank the engine may allocate (the device's memory less runtime) */
    size_t runtime;          /* bytes per rank the runtime holds beside them (CUDA context, libraries) */
    double peak_flops;       /* dense bf16 FLOP/s per device */
    int micro_batch;         /* --micro-batch-size (0: unknown): the report's estimate of the largest that fits */
} tr_predict;

/* 0, or -1 when out of host memory. */
int train_predict_init(tr_predict *p, int nstages, int world);
void train_predict_free(tr_predict *p);

/* Rank `rank` of stage `stage`, its device d (peak and parts as counted) and its last iteration's times. */
void train_predict_add_rank(tr_predict *p, int stage, int rank, const dev_device *d, const tr_predict_time *t);

/* Derived figures. */
size_t train_predict_max_peak(const tr_predict *p, int *stage);
/* The largest micro-batch that would fit the capacity, estimated from this run: each stage's weights, main
 * grads and optimizer state stay, the rest of its peak grows in proportion to the micro-batch. -1 when
 * unknown (no capacity or micro-batch); *stage: the stage that limits it. */
int train_predict_largest_micro_batch(const tr_predict *p, int *stage);
double train_predict_tokens_per_s(const tr_predict *p);
double train_predict_mfu(const tr_predict *p); /* 0 when the step time or the peak is unknown */

void train_predict_print(FILE *out, const tr_predict *p);
/* The JSON report (docs/prediction.md): exactly device, capacity_bytes, runtime_bytes, step_time_s,
 * tokens_per_s, mfu and stages[{stage, weights, main_grads, optimizer, activations, workspace, comm_buffers,
 * peak}]. 0, or -1 with err. */
int train_predict_write_json(const char *path, const tr_predict *p, char *err, size_t errlen);

#endif
