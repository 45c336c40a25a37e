/* Roofline for kernels and alpha-beta for collectives (see twin_cost.h). */
#include <math.h>

#include "twin_cost.h"
#include "twinrun/err.h"

double twin_kernel_seconds(const twin_device_spec *spec, double flops, double bytes, tr_dtype dt) {
    TR_CHECK(spec != NULL, "no device spec for the kernel cost");
    TR_CHECK(flops >= 0 && bytes >= 0, "kernel cost with negative FLOPs or bytes");
    const double peak = dt == TR_BF16 ? spec->bf16_flops : spec->fp32_flops;
    const double compute = flops / peak, memory = bytes / spec->mem_bandwidth;
    return spec->launch_overhead + (compute > memory ? compute : memory);
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
