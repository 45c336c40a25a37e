/* The multi-tensor forms of the optimizer's kernels: the grad norm's sum of squares and AdamW over
 * every parameter of the buffer in one launch per TR_RANGE_CHUNK parameters (a 1.5B Llama: 2 launches
 * each, instead of ~150 and ~300 kernels plus ~150 scratch allocations a step).
 *
 * A chunk of ranges travels by value in the kernel's arguments (under 4 KiB: no large-parameter
 * support needed, MUSA included). The ranges are laid end to end in a virtual index space
 * (vstart[r] = elements of ranges before r); a thread walks its grid-stride virtual indices in
 * ascending order and finds their range with a binary search once, then by stepping forward.
 * Sums are deterministic: fixed blocks, fixed per-thread order, fixed tree, chunks in order. */
#include <math.h>

#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_optim_common.cuh"

#define TR_RANGE_CHUNK 128

typedef struct range_chunk {
    unsigned long long begin[TR_RANGE_CHUNK];      /* element index of range r's first element */
    unsigned long long vstart[TR_RANGE_CHUNK + 1]; /* virtual index of range r's first element; [n] = total */
    float decay[TR_RANGE_CHUNK];                   /* weight decay of range r (AdamW) */
    int n;
} range_chunk;

__device__ __forceinline__ int range_of(const range_chunk &rc, unsigned long long v) {
    int lo = 0, hi = rc.n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (rc.vstart[mid] <= v) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* Element index of virtual index v, advancing the thread's range cursor r (v only grows). */
__device__ __forceinline__ size_t range_element(const range_chunk &rc, unsigned long long v, int *r) {
    if (*r < 0) *r = range_of(rc, v);
    while (v >= rc.vstart[*r + 1]) (*r)++;
    return (size_t)(rc.begin[*r] + (v - rc.vstart[*r]));
}

__global__ void k_sumsq_ranges_partial(float *partial, tr_buf x, range_chunk rc) {
    __shared__ float sh[TR_BLOCK];
    const unsigned long long total = rc.vstart[rc.n];
    float acc = 0.0f;
    int r = -1;
    for (unsigned long long v = blockIdx.x * (unsigned long long)TR_BLOCK + threadIdx.x; v < total;
         v += (unsigned long long)gridDim.x * TR_BLOCK) {
        const float e = ldf(x, range_element(rc, v, &r));
        acc = acc + e * e;
    }
    const float s = block_sum(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

__global__ void k_adamw_ranges(float *master, tr_buf model, bool write_model, tr_buf grad, float *m, float *v,
                               range_chunk rc, double b1, double b2, double lr, double eps, double bc1, double bc2,
                               double grad_scale) {
    const unsigned long long total = rc.vstart[rc.n];
    int r = -1;
    for (unsigned long long vi = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x; vi < total;
         vi += (unsigned long long)gridDim.x * blockDim.x) {
        const size_t i = range_element(rc, vi, &r);
        adamw_element(i, master, model, write_model, grad, m, v, b1, b2, lr, eps, 1.0 - lr * (double)rc.decay[r], bc1,
                      bc2, grad_scale);
    }
}

/* The chunk of ranges [r0, r0 + TR_RANGE_CHUNK), empty ranges dropped; its element count. */
static unsigned long long chunk_of(range_chunk *rc, const kern_range *ranges, int nranges, int r0) {
    memset(rc, 0, sizeof *rc);
    unsigned long long total = 0;
    for (int r = r0; r < nranges && r < r0 + TR_RANGE_CHUNK; r++) {
        if (ranges[r].end == ranges[r].begin) continue;
        rc->begin[rc->n] = ranges[r].begin;
        rc->vstart[rc->n] = total;
        rc->decay[rc->n] = ranges[r].weight_decay;
        total += ranges[r].end - ranges[r].begin;
        rc->n++;
    }
    rc->vstart[rc->n] = total;
    return total;
}

extern "C" void kern_sum_squares_ranges(dev_stream *s, float *out, tr_buf x, const kern_range *ranges, int nranges) {
    TR_PROF(s, "sum_squares_ranges");
    kern_sum_squares_ranges_check(s, out, x, ranges, nranges);
    if (nranges == 0) return;
    range_chunk rc;
    for (int r0 = 0; r0 < nranges; r0 += TR_RANGE_CHUNK) {
        const unsigned long long total = chunk_of(&rc, ranges, nranges, r0);
        if (total == 0) continue;
        const unsigned G = sumsq_blocks(total);
        float *partial = (float *)tr_cu_scratch(s, G * sizeof(float), "sum_squares partials"); /* [G] */
        k_sumsq_ranges_partial<<<G, TR_BLOCK, 0, tr_cu_stream(s)>>>(partial, x, rc);
        CU_CHECK_LAUNCH("k_sumsq_ranges_partial");
        k_sumsq_final<<<1, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, partial, G);
        CU_CHECK_LAUNCH("k_sumsq_final");
        tr_cu_scratch_free(s, partial);
    }
}

extern "C" void kern_adamw_update_ranges(dev_stream *s, const kern_adamw_desc *ad, const kern_range *ranges,
                                         int nranges, float *master, tr_buf model, tr_buf grad, float *m, float *v) {
    TR_PROF(s, "adamw_update_ranges");
    kern_adamw_update_ranges_check(s, ad, ranges, nranges, master, model, grad, m, v);
    if (nranges == 0) return;
    const bool write_model = model.p != NULL && model.p != (void *)master;
    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr;
    const double bc1 = 1.0 - pow(b1, (double)ad->step), bc2 = 1.0 - pow(b2, (double)ad->step);
    range_chunk rc;
    for (int r0 = 0; r0 < nranges; r0 += TR_RANGE_CHUNK) {
        const unsigned long long total = chunk_of(&rc, ranges, nranges, r0);
        if (total == 0) continue;
        k_adamw_ranges<<<grid_for((size_t)total), TR_BLOCK, 0, tr_cu_stream(s)>>>(
            master, model, write_model, grad, m, v, rc, b1, b2, lr, (double)ad->eps, bc1, bc2, (double)ad->grad_scale);
        CU_CHECK_LAUNCH("k_adamw_ranges");
    }
}
