/* The twin's cost model: a device spec table, a roofline for kernels, an alpha-beta model for
 * collectives. Costs advance simulated clocks only; they never change results.
 *
 * The hook for kernels: twin_cost_kernel(stream, what the launch is) advances the clock of the rank
 * that owns the stream by launch overhead + max(flops / peak, bytes / bandwidth) — or, on a spec
 * with a calibration (H200: fitted to the real build's kernel times, docs/prediction.md), by the
 * launch's class's fitted latency + max(flops / (peak x efficiency), bytes / (bandwidth x
 * efficiency)). The CPU kernels in sim/kern call it with the FLOPs and bytes each launch moves. */
#ifndef TWINRUN_SIM_TWIN_COST_H
#define TWINRUN_SIM_TWIN_COST_H

#include <stdbool.h>
#include <stddef.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"

/* The kinds of kernel launch the twin charges: one per cost call site of sim/kern (its name is the
 * GPU profile's kind of the same entry point, cuda/gpu_profile.h), GEMMs in two classes
 * (their fitted efficiencies differ by 10%): bf16 output, and bf16 inputs accumulated into an fp32
 * output (the weight gradients into the main grads). TWIN_K_MEMSET is dev_memset_zero, charged
 * only on a calibrated spec (uncalibrated twin timelines stay as they were). */
typedef enum twin_kernel_kind {
    TWIN_K_GEMM,
    TWIN_K_GEMM_WGRAD,
    TWIN_K_ATTENTION_FWD,
    TWIN_K_ATTENTION_BWD,
    TWIN_K_NORM_FWD,
    TWIN_K_NORM_BWD,
    TWIN_K_ROPE_FWD,
    TWIN_K_ROPE_BWD,
    TWIN_K_SWIGLU_FWD,
    TWIN_K_SWIGLU_BWD,
    TWIN_K_ADD,
    TWIN_K_SCALE,
    TWIN_K_CAST,
    TWIN_K_SUM_SQUARES,
    TWIN_K_ADAMW,
    TWIN_K_EMBEDDING_FWD,
    TWIN_K_EMBEDDING_BWD,
    TWIN_K_CE_MAX,
    TWIN_K_CE_SUMS,
    TWIN_K_CE_LOSS,
    TWIN_K_CE_BWD,
    TWIN_K_XENT_FWD,
    TWIN_K_XENT_BWD,
    TWIN_K_MEMSET,
    TWIN_K_GEMM_FP8,
    TWIN_K_FP8_QUANTIZE,
    TWIN_K_FP8_SCALE_UPDATE,
    TWIN_K_COUNT
} twin_kernel_kind;

/* "gemm", "attention_forward", ...; NULL outside the enum. */
const char *twin_kernel_kind_name(twin_kernel_kind kind);
/* The kind of that name (twin_kernel_kind_name's), or -1. */
int twin_kernel_kind_find(const char *name);

/* One launch, as the cost model sees it. */
typedef struct twin_kernel_cost {
    twin_kernel_kind kind;
    double flops, bytes;
    tr_dtype dt; /* compute type: bf16 at the tensor-core rate, fp32 at the fp32 rate */
    /* GEMMs only: the shape and types, which name the launch in TWINRUN_TWIN_PROFILE as the GPU profile
     * does ("gemm 4096x2048x2048 NT bf16.bf16>bf16"); m == 0 for other kinds */
    int m, n, k;
    bool ta, tb, accumulate;
    tr_dtype a_dt, b_dt, c_dt;
} twin_kernel_cost;

/* A kind's fitted cost: latency + max(flops / (peak x flops_eff), bytes / (bandwidth x bytes_eff)), or
 * with `additive` the two terms summed (flash attention: a cost per query row — loading a tile of
 * queries, writing its output — besides the one per (query, key) pair; the rows are what its bytes
 * count). flops_eff == 0: the kind is not calibrated (the spec's roofline applies). */
typedef struct twin_kernel_eff {
    double latency;   /* seconds a launch costs beyond its roofline: launch, ramp, tail */
    double flops_eff; /* achieved fraction of the compute peak */
    double bytes_eff; /* achieved fraction of the memory bandwidth */
    bool additive;    /* the compute and memory terms add instead of overlapping */
} twin_kernel_eff;

typedef struct twin_calibration {
    const char *name;   /* "H200 2026-12-02" */
    const char *source; /* the measurements and the script that fitted them */
    twin_kernel_eff kind[TWIN_K_COUNT];
} twin_calibration;

typedef struct twin_device_spec {
    const char *name;            /* "H100", "H200", "A100", "MTT-S5000" */
    const char *full_name;       /* as in dev_info.name */
    double bf16_flops;           /* dense tensor-core peak, FLOP/s */
    double fp32_flops;           /* non-tensor fp32 peak, FLOP/s */
    double fp8_flops;            /* dense FP8 tensor-core peak, FLOP/s; 0: none (FP8 GEMMs run at bf16_flops) */
    double mem_bandwidth;        /* HBM, bytes/s */
    size_t mem_bytes;            /* device memory */
    size_t runtime_bytes;        /* of it, what the runtime holds beside the engine's allocations (the CUDA
                                  * context, libraries, the scratch pool): predict mode's capacity leaves it out */
    double link_bandwidth;       /* intra-node GPU-to-GPU, one direction, bytes/s */
    double link_latency;         /* intra-node per-hop latency, seconds */
    double net_bandwidth;        /* inter-node per GPU (one NIC per GPU), one direction, bytes/s */
    double net_latency;          /* inter-node per-hop latency, seconds */
    double launch_overhead;      /* per kernel, seconds */
    int sms;                     /* multiprocessors; 0: its GEMMs leave none to a background stream */
    double background_rate;      /* a background stream's kernels beside the model's: the fraction of their
                                  * own speed they run at (fitted to measured steps); 0: full speed */
    const char *source;          /* where the numbers come from */
    const twin_calibration *cal; /* kernel efficiencies fitted to real runs; NULL: the pure roofline */
} twin_device_spec;

/* NULL when unknown; names compare case-insensitively ("h100", "MTT-S5000", "s5000"). */
const twin_device_spec *twin_device_spec_find(const char *name);
int twin_device_spec_count(void);
const twin_device_spec *twin_device_spec_at(int i);

/* Roofline time for a kernel of `flops` and `bytes` on spec, compute in `dt` (bf16 runs at the
 * tensor-core rate, fp32 at the fp32 rate). */
double twin_kernel_seconds(const twin_device_spec *spec, double flops, double bytes, tr_dtype dt);
/* The compute peak a launch of `kind` in `dt` runs at: FP8 GEMMs at the FP8 rate (the bf16 one on a device
 * without), bf16 at the tensor cores', the rest at fp32's. The ledger's compute term divides by it too, so a
 * calibration's efficiency is relative to the peak the cost model applies it to. */
double twin_kernel_peak(const twin_device_spec *spec, twin_kernel_kind kind, tr_dtype dt);
/* The roofline time of one launch at its kind's peak (twin_kernel_seconds with the FP8 rate for FP8 GEMMs). */
double twin_kernel_roofline_seconds(const twin_device_spec *spec, const twin_kernel_cost *kc);
/* The time one launch costs on spec: its kind's calibrated cost where the spec has one, else the
 * roofline (a memset: nothing, as before calibration). */
double twin_kernel_cost_seconds(const twin_device_spec *spec, const twin_kernel_cost *kc);

/* The hook: advances the clock of the rank owning s by twin_kernel_cost_seconds of the run's spec. */
void twin_cost_kernel(dev_stream *s, const twin_kernel_cost *kc);
/* Whether s's device is in shape-only (predict) mode (dev_set_shape_only): its kernels charge their
 * time and check their arguments, then compute nothing. */
bool twin_stream_shape_only(const dev_stream *s);

typedef enum twin_coll_kind {
    TWIN_COST_ALL_REDUCE,
    TWIN_COST_ALL_GATHER,     /* bytes = one rank's contribution */
    TWIN_COST_REDUCE_SCATTER, /* bytes = one rank's result block */
    TWIN_COST_BROADCAST,
    TWIN_COST_P2P,
    TWIN_COST_BARRIER,
} twin_coll_kind;

/* Alpha-beta time of a collective over `ranks` (global ids, ascending) with `gpus_per_node`:
 * the slowest link class the group crosses sets alpha and beta; ring and tree are both costed
 * and the cheaper is taken, as NCCL's tuner does. bytes per kind as documented above. */
double twin_coll_seconds(const twin_device_spec *spec, int gpus_per_node, twin_coll_kind kind, const int *ranks, int n,
                         double bytes);

#endif
