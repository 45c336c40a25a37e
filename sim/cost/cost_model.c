/* Roofline (or a calibration's fitted efficiencies) for kernels and alpha-beta for collectives (see
 * twin_cost.h). */
#include <math.h>
#include <string.h>

#include "twin_cost.h"
#include "twinrun/err.h"

double twin_kernel_peak(const twin_device_spec *spec, twin_kernel_kind kind, tr_dtype dt) {
    if (kind == TWIN_K_GEMM_FP8 && spec->fp8_flops > 0) return spec->fp8_flops;
    return dt == TR_BF16 ? spec->bf16_flops : spec->fp32_flops;
}

static double roofline(const twin_device_spec *spec, double peak, double flops, double bytes) {
    const double compute = flops / peak, memory = bytes / spec->mem_bandwidth;
    return spec->launch_overhead + (compute > memory ? compute : memory);
}

double twin_kernel_seconds(const twin_device_spec *spec, double flops, double bytes, tr_dtype dt) {
    TR_CHECK(spec != NULL, "no device spec for the kernel cost");
    TR_CHECK(flops >= 0 && bytes >= 0, "kernel cost with negative FLOPs or bytes");
    return roofline(spec, twin_kernel_peak(spec, TWIN_K_GEMM, dt), flops, bytes);
}

static const char *const kind_names[TWIN_K_COUNT] = {
    [TWIN_K_GEMM] = "gemm",
    [TWIN_K_GEMM_WGRAD] = "gemm_wgrad",
    [TWIN_K_ATTENTION_FWD] = "attention_forward",
    [TWIN_K_ATTENTION_BWD] = "attention_backward",
    [TWIN_K_NORM_FWD] = "norm_forward",
    [TWIN_K_NORM_BWD] = "norm_backward",
    [TWIN_K_ROPE_FWD] = "rope_forward",
    [TWIN_K_ROPE_BWD] = "rope_backward",
    [TWIN_K_SWIGLU_FWD] = "swiglu_forward",
    [TWIN_K_SWIGLU_BWD] = "swiglu_backward",
    [TWIN_K_ADD] = "add",
    [TWIN_K_SCALE] = "scale",
    [TWIN_K_CAST] = "cast",
    [TWIN_K_SUM_SQUARES] = "sum_squares",
    [TWIN_K_ADAMW] = "adamw_update",
    [TWIN_K_EMBEDDING_FWD] = "embedding_forward_slice",
    [TWIN_K_EMBEDDING_BWD] = "embedding_backward_slice",
    [TWIN_K_CE_MAX] = "ce_slice_max",
    [TWIN_K_CE_SUMS] = "ce_slice_sums",
    [TWIN_K_CE_LOSS] = "ce_loss_from_stats",
    [TWIN_K_CE_BWD] = "ce_slice_backward",
    [TWIN_K_XENT_FWD] = "cross_entropy_forward",
    [TWIN_K_XENT_BWD] = "cross_entropy_backward",
    [TWIN_K_MEMSET] = "memset",
    [TWIN_K_GEMM_FP8] = "gemm_fp8",
    [TWIN_K_FP8_QUANTIZE] = "fp8_quantize",
    [TWIN_K_FP8_SCALE_UPDATE] = "fp8_scale_update",
};

const char *twin_kernel_kind_name(twin_kernel_kind kind) {
    return (int)kind >= 0 && kind < TWIN_K_COUNT ? kind_names[kind] : NULL;
}

int twin_kernel_kind_find(const char *name) {
    for (int k = 0; name && k < TWIN_K_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0) return k;
    return -1;
}

double twin_kernel_roofline_seconds(const twin_device_spec *spec, const twin_kernel_cost *kc) {
    return roofline(spec, twin_kernel_peak(spec, kc->kind, kc->dt), kc->flops, kc->bytes);
}

double twin_kernel_cost_seconds(const twin_device_spec *spec, const twin_kernel_cost *kc) {
    TR_CHECK(spec != NULL && kc != NULL, "no device spec or launch for the kernel cost");
    TR_CHECK((int)kc->kind >= 0 && kc->kind < TWIN_K_COUNT, "kernel cost of an unknown kind");
    TR_CHECK(kc->flops >= 0 && kc->bytes >= 0, "kernel cost with negative FLOPs or bytes");
    const twin_kernel_eff *e = spec->cal ? &spec->cal->kind[kc->kind] : NULL;
    if (!e || e->flops_eff <= 0) /* not calibrated: the roofline; a memset cost nothing before calibration */
        return kc->kind == TWIN_K_MEMSET ? 0.0 : twin_kernel_roofline_seconds(spec, kc);
    const double peak = twin_kernel_peak(spec, kc->kind, kc->dt);
    const double compute = kc->flops / (peak * e->flops_eff), memory = kc->bytes / (spec->mem_bandwidth * e->bytes_eff);
    return e->latency + (e->additive ? compute + memory : compute > memory ? compute : memory);
}

static bool spans_nodes(const int *ranks, int n, int gpus_per_node) {
    /* ranks ascending: the group stays in one node iff its first and last do */
    return ranks[0] / gpus_per_node != ranks[n - 1] / gpus_per_node;
}

static double ceil_log2(int n) {
    double l = 0;
    for (int v = 1; v < n; v *= 2) l += 1;
    return l;
}

double twin_coll_seconds(const twin_device_spec *spec, int gpus_per_node, twin_coll_kind kind, const int *ranks, int n,
                         double bytes) {
    TR_CHECK(spec != NULL && gpus_per_node > 0 && n >= 1 && bytes >= 0, "invalid collective cost query");
    if (n == 1) return 0.0;
    const bool net = spans_nodes(ranks, n, gpus_per_node);
    const double alpha = net ? spec->net_latency : spec->link_latency;
    const double beta = net ? spec->net_bandwidth : spec->link_bandwidth;
    const double steps = n - 1, hops = ceil_log2(n);
    double ring, tree;
    switch (kind) {
    case TWIN_COST_ALL_REDUCE:
        ring = 2 * steps * alpha + 2 * steps / n * bytes / beta;
        tree = 2 * hops * alpha + 2 * bytes / beta;
        return fmin(ring, tree);
    case TWIN_COST_ALL_GATHER:
    case TWIN_COST_REDUCE_SCATTER: return steps * alpha + steps * bytes / beta;
    case TWIN_COST_BROADCAST:
        ring = steps * alpha + bytes / beta;
        tree = hops * alpha + bytes / beta;
        return fmin(ring, tree);
    case TWIN_COST_P2P: return alpha + bytes / beta;
    case TWIN_COST_BARRIER: return fmin(2 * steps * alpha, 2 * hops * alpha);
    }
    tr_fatal("unknown collective kind %d in the cost model", (int)kind);
}
