/* The multi-tensor forms of the optimizer's kernels: the grad norm's sum of squares and AdamW over
 * every parameter of the buffer in one launch per TR_RANGE_CHUNK parameters (a 1.5B Llama: 2 launches
 * each, instead of ~150 and ~300 kernels plus ~150 scratch allocations a step).
 *
 * A chunk of ranges travels by value in the kernel's arguments (under 4 KiB: no large-parameter
 * support needed, MUSA included). Each range is cut into tiles of a fixed number of elements and
 * block b takes tile b of the chunk: it finds its range once (a binary search on the ranges' first
 * tiles, the same answer for the whole block), then each thread loads all its elements before it
 * computes or stores any (the stores could alias later loads, so the compiler would not hoist them:
 * this is what keeps enough loads in flight to reach the memory's bandwidth). A range's last tile is
 * partial; no tile spans two ranges.
 * Sums are deterministic: one partial per tile (fixed per-thread order, fixed tree), then one block
 * sums each range's partials and adds the range's sum to the total, range by range from the last to
 * the first (twinrun/kern.h): how the ranges are split between calls (the optimizer sums each layer's
 * as soon as the backward pass has written it) does not change the bits. */
#include <math.h>

#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_optim_common.cuh"

#define TR_RANGE_CHUNK 128
#define TR_ADAMW_PER_THREAD 8  /* elements of a thread in one AdamW tile */
#define TR_SUMSQ_PER_THREAD 16 /* elements of a thread in one sum-of-squares tile */

typedef struct range_chunk {
    unsigned long long begin[TR_RANGE_CHUNK];      /* element index of range r's first element */
    unsigned long long vstart[TR_RANGE_CHUNK + 1]; /* elements of the ranges before r; [n] = total */
    unsigned tile0[TR_RANGE_CHUNK + 1];            /* range r's first tile; [n] = tiles of the chunk */
    float decay[TR_RANGE_CHUNK];                   /* weight decay of range r (AdamW) */
    int n;
} range_chunk;
static_assert(sizeof(range_chunk) <= 4000, "range_chunk travels in the kernel's parameters (4 KiB at most)");

/* The range of tile b (uniform over a block: every thread takes the same path). */
__device__ __forceinline__ int range_of_tile(const range_chunk &rc, unsigned b) {
    int lo = 0, hi = rc.n - 1;
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (rc.tile0[mid] <= b) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

/* partial[b] = sum of squares of tile b: thread t takes t, t + TR_BLOCK, ... of the tile in order. */
__global__ void k_sumsq_tiles(float *partial, tr_buf x, range_chunk rc) {
    __shared__ float sh[TR_BLOCK];
    const int r = range_of_tile(rc, blockIdx.x);
    const unsigned long long len = rc.vstart[r + 1] - rc.vstart[r];
    const unsigned long long off0 = (unsigned long long)(blockIdx.x - rc.tile0[r]) * (TR_BLOCK * TR_SUMSQ_PER_THREAD);
    const size_t base = (size_t)rc.begin[r];
    float e[TR_SUMSQ_PER_THREAD];
#pragma unroll
    for (int k = 0; k < TR_SUMSQ_PER_THREAD; k++) {
        const unsigned long long off = off0 + (unsigned long long)k * TR_BLOCK + threadIdx.x;
        e[k] = off < len ? ldf(x, base + (size_t)off) : 0.0f;
    }
    float acc = 0.0f;
#pragma unroll
    for (int k = 0; k < TR_SUMSQ_PER_THREAD; k++) acc = acc + e[k] * e[k];
    const float s = block_sum(acc, sh);
    if (threadIdx.x == 0) partial[blockIdx.x] = s;
}

/* out[0] += the sum of range r's tile partials, for r = n - 1, n - 2, ..., 0 in turn (one block). */
__global__ void k_sumsq_final_ranges(float *out, const float *partial, range_chunk rc) {
    __shared__ float sh[TR_BLOCK];
    float total = threadIdx.x == 0 ? out[0] : 0.0f;
    for (int r = rc.n - 1; r >= 0; r--) {
        float acc = 0.0f;
        for (unsigned i = rc.tile0[r] + threadIdx.x; i < rc.tile0[r + 1]; i += TR_BLOCK) acc = acc + partial[i];
        const float s = block_sum(acc, sh);
        if (threadIdx.x == 0) total = total + s;
    }
    if (threadIdx.x == 0) out[0] = total;
}
__global__ void k_adamw_tiles(float *master, int16_t *rem, tr_buf model, bool write_model, tr_buf grad, float *m,
                              float *v, range_chunk rc, double b1, double b2, double lr, double eps, double ibc1, double ibc2,
                              double grad_scale) {
    const int r = range_of_tile(rc, blockIdx.x);
    const unsigned long long len = rc.vstart[r + 1] - rc.vstart[r];
    const unsigned long long off0 = (unsigned long long)(blockIdx.x - rc.tile0[r]) * (TR_BLOCK * TR_ADAMW_PER_THREAD);
    const size_t base = (size_t)rc.begin[r];
    const double decay = 1.0 - lr * (double)rc.decay[r];
    float g[TR_ADAMW_PER_THREAD], mi[TR_ADAMW_PER_THREAD], vi[TR_ADAMW_PER_THREAD], w[TR_ADAMW_PER_THREAD];
#pragma unroll
    for (int k = 0; k < TR_ADAMW_PER_THREAD; k++) {
        const unsigned long long off = off0 + (unsigned long long)k * TR_BLOCK + threadIdx.x;
        if (off < len) {
            const size_t i = base + (size_t)off;
            g[k] = ldf(grad, i);
            mi[k] = m[i];
            vi[k] = v[i];
            w[k] = master_load(i, master, rem, model);
        }
    }
#pragma unroll
    for (int k = 0; k < TR_ADAMW_PER_THREAD; k++) {
        const unsigned long long off = off0 + (unsigned long long)k * TR_BLOCK + threadIdx.x;
        if (off < len) {
            const size_t i = base + (size_t)off;
            adamw_math(g[k], &mi[k], &vi[k], &w[k], b1, b2, lr, eps, decay, ibc1, ibc2, grad_scale);
            m[i] = mi[k];
            v[i] = vi[k];
            master_store(i, w[k], master, rem, model, write_model);
        }
    }
}

/* k_adamw_tiles on a master kept as remainders, each thread on 8 consecutive elements with 16-byte
 * loads and stores (the two-byte weights and remainders at one element a thread left the kernel at
 * 2.6 TB/s on an H100, below the fp32 master's 2.9). Every range starts at a multiple of 8 and every
 * buffer is 16-byte aligned (the caller checks); a range's last elements, past its last multiple of
 * 8, go one by one. The arithmetic of each element is adamw_math's, as in k_adamw_tiles: the same bits. */
template <typename G>
__global__ void k_adamw_rem8(int16_t *rem, tr_buf model, tr_buf gradb, float *m, float *v, range_chunk rc, double b1,
                             double b2, double lr, double eps, double ibc1, double ibc2, double grad_scale) {
    uint16_t *hi = (uint16_t *)model.p;
    const G *grad = (const G *)gradb.p;
    const int r = range_of_tile(rc, blockIdx.x);
    const unsigned long long len = rc.vstart[r + 1] - rc.vstart[r];
    const unsigned long long off = (unsigned long long)(blockIdx.x - rc.tile0[r]) * (TR_BLOCK * TR_ADAMW_PER_THREAD) +
                                   (unsigned long long)threadIdx.x * TR_ADAMW_PER_THREAD;
    if (off >= len) return;
    const size_t i = (size_t)rc.begin[r] + (size_t)off;
    const double decay = 1.0 - lr * (double)rc.decay[r];
    if (off + TR_ADAMW_PER_THREAD > len) { /* the range's tail */
        for (size_t e = i; e < (size_t)rc.begin[r] + (size_t)len; e++)
            adamw_element(e, NULL, rem, model, true, gradb, m, v, b1, b2, lr, eps, decay, ibc1, ibc2, grad_scale);
        return;
    }
    float g[8], mi[8], vi[8], w[8];
    ld8<G>(grad + i, g);
    ld8<float>(m + i, mi);
    ld8<float>(v + i, vi);
    const uint4 hu = *reinterpret_cast<const uint4 *>(hi + i), ru = *reinterpret_cast<const uint4 *>(rem + i);
    const uint32_t hw[4] = {hu.x, hu.y, hu.z, hu.w}, rw[4] = {ru.x, ru.y, ru.z, ru.w};
#pragma unroll
    for (int k = 0; k < 8; k++)
        w[k] = tr_master_join((uint16_t)(hw[k / 2] >> (16 * (k % 2))), (int16_t)(uint16_t)(rw[k / 2] >> (16 * (k % 2))));
    uint32_t ho[4] = {0, 0, 0, 0}, ro[4] = {0, 0, 0, 0};
#pragma unroll
    for (int k = 0; k < 8; k++) {
        adamw_math(g[k], &mi[k], &vi[k], &w[k], b1, b2, lr, eps, decay, ibc1, ibc2, grad_scale);
        uint16_t h;
        int16_t rr;
        tr_master_split(w[k], &h, &rr);
        ho[k / 2] |= (uint32_t)h << (16 * (k % 2));
        ro[k / 2] |= (uint32_t)(uint16_t)rr << (16 * (k % 2));
    }
    st8<float>(m + i, mi);
    st8<float>(v + i, vi);
    *reinterpret_cast<uint4 *>(hi + i) = make_uint4(ho[0], ho[1], ho[2], ho[3]);
    *reinterpret_cast<uint4 *>(rem + i) = make_uint4(ro[0], ro[1], ro[2], ro[3]);
}

/* Whether k_adamw_rem8 takes these buffers: ranges from multiples of 8, buffers 16-byte aligned. */
static bool adamw_rem8_fits(const kern_range *ranges, int nranges, const int16_t *rem, tr_buf model, tr_buf grad,
                            const float *m, const float *v) {
    if (!rem || model.dt != TR_BF16 || !tr_aligned16(rem) || !tr_aligned16(model.p) || !tr_aligned16(grad.p) ||
        !tr_aligned16(m) || !tr_aligned16(v))
        return false;
    for (int r = 0; r < nranges; r++)
        if (ranges[r].begin % TR_ADAMW_PER_THREAD) return false;
    return true;
}

/* The chunk of ranges [r0, r0 + TR_RANGE_CHUNK), empty ranges dropped, cut into tiles of `tile`
 * elements; its element count (its tile count is rc->tile0[rc->n]). */
static unsigned long long chunk_of(range_chunk *rc, const kern_range *ranges, int nranges, int r0,
                                   unsigned long long tile) {
    memset(rc, 0, sizeof *rc);
    unsigned long long total = 0, tiles = 0;
    for (int r = r0; r < nranges && r < r0 + TR_RANGE_CHUNK; r++) {
        if (ranges[r].end == ranges[r].begin) continue;
        rc->begin[rc->n] = ranges[r].begin;
        rc->vstart[rc->n] = total;
        rc->decay[rc->n] = ranges[r].weight_decay;
        rc->tile0[rc->n] = (unsigned)tiles;
        total += ranges[r].end - ranges[r].begin;
        tiles += (ranges[r].end - ranges[r].begin + tile - 1) / tile;
        TR_CHECK(tiles < (1ull << 31), "a chunk of parameter ranges needs more than 2^31 tiles (over 2^40 elements)");
        rc->n++;
    }
    rc->vstart[rc->n] = total;
    rc->tile0[rc->n] = (unsigned)tiles;
    return total;
}

extern "C" void kern_sum_squares_ranges(dev_stream *s, float *out, tr_buf x, const kern_range *ranges, int nranges) {
    TR_PROF(s, "sum_squares_ranges");
    kern_sum_squares_ranges_check(s, out, x, ranges, nranges);
    if (nranges == 0) return;
    range_chunk rc;
    for (int r0 = (nranges - 1) / TR_RANGE_CHUNK * TR_RANGE_CHUNK; r0 >= 0; r0 -= TR_RANGE_CHUNK) { /* last first */
        const unsigned long long total = chunk_of(&rc, ranges, nranges, r0, TR_BLOCK * TR_SUMSQ_PER_THREAD);
        if (total == 0) continue;
        const unsigned G = rc.tile0[rc.n];
        float *partial = (float *)tr_cu_scratch(s, G * sizeof(float), "sum_squares partials"); /* [G] */
        k_sumsq_tiles<<<G, TR_BLOCK, 0, tr_cu_stream(s)>>>(partial, x, rc);
        CU_CHECK_LAUNCH("k_sumsq_tiles");
        k_sumsq_final_ranges<<<1, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, partial, rc);
        CU_CHECK_LAUNCH("k_sumsq_final_ranges");
        tr_cu_scratch_free(s, partial);
    }
}

extern "C" void kern_adamw_update_ranges(dev_stream *s, const kern_adamw_desc *ad, const kern_range *ranges,
                                         int nranges, float *master, int16_t *master_rem, tr_buf model, tr_buf grad,
                                         float *m, float *v) {
    TR_PROF(s, "adamw_update_ranges");
    kern_adamw_update_ranges_check(s, ad, ranges, nranges, master, master_rem, model, grad, m, v);
    if (nranges == 0) return;
    const bool write_model = model.p != NULL && model.p != (void *)master;
    const double b1 = ad->beta1, b2 = ad->beta2, lr = ad->lr;
    const double ibc1 = 1.0 / (1.0 - pow(b1, (double)ad->step)), ibc2 = 1.0 / (1.0 - pow(b2, (double)ad->step));
    range_chunk rc;
    const bool rem8 = adamw_rem8_fits(ranges, nranges, master_rem, model, grad, m, v);
    for (int r0 = 0; r0 < nranges; r0 += TR_RANGE_CHUNK) {
        const unsigned long long total = chunk_of(&rc, ranges, nranges, r0, TR_BLOCK * TR_ADAMW_PER_THREAD);
        if (total == 0) continue;
        if (rem8) {
            if (grad.dt == TR_F32)
                k_adamw_rem8<float><<<rc.tile0[rc.n], TR_BLOCK, 0, tr_cu_stream(s)>>>(
                    master_rem, model, grad, m, v, rc, b1, b2, lr, (double)ad->eps, ibc1, ibc2, (double)ad->grad_scale);
            else
                k_adamw_rem8<uint16_t><<<rc.tile0[rc.n], TR_BLOCK, 0, tr_cu_stream(s)>>>(
                    master_rem, model, grad, m, v, rc, b1, b2, lr, (double)ad->eps, ibc1, ibc2, (double)ad->grad_scale);
            CU_CHECK_LAUNCH("k_adamw_rem8");
            continue;
        }
        k_adamw_tiles<<<rc.tile0[rc.n], TR_BLOCK, 0, tr_cu_stream(s)>>>(
            master, master_rem, model, write_model, grad, m, v, rc, b1, b2, lr, (double)ad->eps, ibc1, ibc2, (double)ad->grad_scale);
        CU_CHECK_LAUNCH("k_adamw_tiles");
    }
}
