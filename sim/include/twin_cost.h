/* The twin's cost model: a device spec table, a roofline for kernels, an alpha-beta model for
 * collectives. Costs advance simulated clocks only; they never change results.
 *
 * The hook for kernels: twin_cost_kernel(stream, flops, bytes, compute dtype) advances the clock
 * of the rank that owns the stream by launch overhead + max(flops / peak, bytes / bandwidth).
 * The CPU kernels in sim/kern call it with the FLOPs and bytes each launch moves. */
#ifndef TWINRUN_SIM_TWIN_COST_H
#define TWINRUN_SIM_TWIN_COST_H

#include <stdbool.h>
#include <stddef.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"

typedef struct twin_device_spec {
    const char *name;       /* "H100", "H200", "A100", "MTT-S5000" */
    const char *full_name;  /* as in dev_info.name */
    double bf16_flops;      /* dense tensor-core peak, FLOP/s */
    double fp32_flops;      /* non-tensor fp32 peak, FLOP/s */
    double mem_bandwidth;   /* HBM, bytes/s */
    size_t mem_bytes;       /* device memory */
    double link_bandwidth;  /* intra-node GPU-to-GPU, one direction, bytes/s */
    double link_latency;    /* intra-node per-hop latency, seconds */
    double net_bandwidth;   /* inter-node per GPU (one NIC per GPU), one direction, bytes/s */
    double net_latency;     /* inter-node per-hop latency, seconds */
    double launch_overhead; /* per kernel, seconds */
    const char *source;     /* where the numbers come from */
} twin_device_spec;

/* NULL when unknown; names compare case-insensitively ("h100", "MTT-S5000", "s5000"). */
const twin_device_spec *twin_device_spec_find(const char *name);
int twin_device_spec_count(void);
const twin_device_spec *twin_device_spec_at(int i);

/* Roofline time for a kernel of `flops` and `bytes` on spec, compute in `dt` (bf16 runs at the
 * tensor-core rate, fp32 at the fp32 rate). */
double twin_kernel_seconds(const twin_device_spec *spec, double flops, double bytes, tr_dtype dt);

/* The hook: advances the clock of the rank owning s by twin_kernel_seconds of the run's spec. */
void twin_cost_kernel(dev_stream *s, double flops, double bytes, tr_dtype dt);
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
