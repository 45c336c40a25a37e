/* Rotary position embedding, rotate-half convention, in place; forward and backward.
 *
 * As the twin (and Hugging Face): inv_freq_i = theta^(-2i/rot_dim) rounded to fp32 (computed on
 * the host in double, uploaded once per call through a small kernel argument table), the angle is
 * the fp32 product pos * inv_freq_i, and its cos/sin are evaluated in double and rounded to fp32
 * (so no fast sinf/cosf range-reduction error at long positions). The rotation is fp32.
 * One thread per (b, t, h, i < rot_dim/2) pair; dims >= rot_dim pass through untouched.
 * A block per token computes its rot_dim/2 cos/sin pairs once for all heads (double sin and cos per
 * pair and head cost more than the rotation itself: ~40 µs for a [4096, 32, 64] bf16 query), the
 * same values, so the same bits. Without explicit positions (every call but context parallelism's) the
 * positions are 0..T-1 at every call, so the pairs are computed once per (T, rot_dim, theta) into a table
 * kept for the process's life (T x rot_dim/2 x 8 bytes: 4 MB at T 8192, D 128) and only read after: the
 * double sin/cos were most of the kernel's time, at 4 calls a layer a step. */
#include <math.h>

#include "gpu_profile.h"
#include "kern_common.cuh"

#define TR_ROPE_MAX_HALF 512 /* head dims up to 1024 rotated */

typedef struct rope_freqs {
    float inv_freq[TR_ROPE_MAX_HALF];
} rope_freqs;

__global__ void k_rope(tr_buf x, const int32_t *positions, int T, int H, int D, int half, rope_freqs f, float sign,
                       size_t total) {
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < total;
         idx += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(idx % (size_t)half);
        const size_t bth = idx / (size_t)half; /* (b*T + t)*H + h */
        const size_t bt = bth / (size_t)H;
        const int32_t pos = positions ? positions[bt] : (int32_t)(bt % (size_t)T);
        const float a = (float)pos * f.inv_freq[i];
        const float c = (float)cos((double)a), sn = sign * (float)sin((double)a);
        const size_t i1 = bth * (size_t)D + (size_t)i, i2 = i1 + (size_t)half;
        const float x1 = ldf(x, i1), x2 = ldf(x, i2);
        stf(x, i1, x1 * c - x2 * sn);
        stf(x, i2, x2 * c + x1 * sn);
    }
}

/* Block per token (b, t): its rot_dim/2 (cos, sin) pairs once into shared memory, then thread j rotates
 * pair (h, i) = (j / half, j % half) of every head. */
__global__ void k_rope_tok(tr_buf x, const int32_t *positions, int T, int H, int D, int half, rope_freqs f,
                           float sign) {
    extern __shared__ float2 cs[]; /* [half] */
    const size_t bt = blockIdx.x;
    const int32_t pos = positions ? positions[bt] : (int32_t)(bt % (size_t)T);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        const float a = (float)pos * f.inv_freq[i];
        cs[i] = make_float2((float)cos((double)a), (float)sin((double)a));
    }
    __syncthreads();
    for (int j = threadIdx.x; j < H * half; j += blockDim.x) {
        const int h = j / half, i = j % half;
        const float c = cs[i].x, sn = sign * cs[i].y;
        const size_t i1 = (bt * (size_t)H + (size_t)h) * (size_t)D + (size_t)i, i2 = i1 + (size_t)half;
        const float x1 = ldf(x, i1), x2 = ldf(x, i2);
        stf(x, i1, x1 * c - x2 * sn);
        stf(x, i2, x2 * c + x1 * sn);
    }
}

/* cs[t * half + i] = (cos, sin) of t * inv_freq_i, exactly as k_rope_tok computes them */
__global__ void k_rope_table(float2 *cs, int T, int half, rope_freqs f) {
    const size_t n = (size_t)T * (size_t)half;
    for (size_t idx = blockIdx.x * (size_t)blockDim.x + threadIdx.x; idx < n; idx += (size_t)gridDim.x * blockDim.x) {
        const int i = (int)(idx % (size_t)half), t = (int)(idx / (size_t)half);
        const float a = (float)t * f.inv_freq[i];
        cs[idx] = make_float2((float)cos((double)a), (float)sin((double)a));
    }
}

/* k_rope_tok with the pairs read from the table (positions 0..T-1) */
__global__ void k_rope_tok_table(tr_buf x, const float2 *table, int T, int H, int D, int half, float sign) {
    const size_t bt = blockIdx.x;
    const float2 *cs = table + (bt % (size_t)T) * (size_t)half;
    for (int j = threadIdx.x; j < H * half; j += blockDim.x) {
        const int h = j / half, i = j % half;
        const float2 p = cs[i];
        const float c = p.x, sn = sign * p.y;
        const size_t i1 = (bt * (size_t)H + (size_t)h) * (size_t)D + (size_t)i, i2 = i1 + (size_t)half;
        const float x1 = ldf(x, i1), x2 = ldf(x, i2);
        stf(x, i1, x1 * c - x2 * sn);
        stf(x, i2, x2 * c + x1 * sn);
    }
}

/* The table of (T, half, the inv_freq values): one kept, rebuilt when another is asked for. One process
 * drives one device from one thread (cuda/README.md), so no lock. */
static const float2 *rope_table(cudaStream_t st, int T, int half, const rope_freqs *f) {
    static float2 *table;
    static int tT, thalf;
    static rope_freqs tf;
    if (table && tT == T && thalf == half && memcmp(tf.inv_freq, f->inv_freq, (size_t)half * sizeof(float)) == 0)
        return table;
    if (table) {
        CU_CHECK(cudaStreamSynchronize(st)); /* the kernels that read the old one are done */
        CU_CHECK(cudaFree(table));
        table = NULL;
    }
    const size_t n = (size_t)T * (size_t)half;
    CU_CHECK(cudaMalloc((void **)&table, n * sizeof(float2)));
    k_rope_table<<<grid_for(n), TR_BLOCK, 0, st>>>(table, T, half, *f);
    CU_CHECK_LAUNCH("k_rope_table");
    tT = T, thalf = half, tf = *f;
    return table;
}

static void rope_apply(dev_stream *s, const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B, int T, int H,
                       int D, float sign) {
    if (sign > 0) kern_rope_forward_check(s, rd, x, positions, B, T, H, D);
    else kern_rope_backward_check(s, rd, x, positions, B, T, H, D);
    TR_CHECK(rd->rot_dim / 2 <= TR_ROPE_MAX_HALF, "rope rot_dim above 1024 is not supported by the CUDA kernel");
    const int half = rd->rot_dim / 2;
    rope_freqs f;
    memset(&f, 0, sizeof f);
    for (int i = 0; i < half; i++) {
        const float e = (float)(2 * i) / (float)rd->rot_dim; /* the exponent exact in fp32, as in HF */
        f.inv_freq[i] = (float)(1.0 / pow((double)rd->theta, (double)e));
    }
    if (B == 0 || T == 0 || H == 0 || half == 0) return;
    if ((size_t)H * (size_t)half < (1u << 30)) {
        const int threads = H * half >= 1024 ? 1024 : ((H * half + 31) / 32) * 32;
        if (!positions) {
            const float2 *table = rope_table(tr_cu_stream(s), T, half, &f);
            k_rope_tok_table<<<(unsigned)((size_t)B * (size_t)T), threads, 0, tr_cu_stream(s)>>>(x, table, T, H, D,
                                                                                                 half, sign);
            CU_CHECK_LAUNCH("k_rope_tok_table");
            return;
        }
        k_rope_tok<<<(unsigned)((size_t)B * (size_t)T), threads, (size_t)half * sizeof(float2), tr_cu_stream(s)>>>(
            x, positions, T, H, D, half, f, sign);
        CU_CHECK_LAUNCH("k_rope_tok");
        return;
    }
    const size_t total = (size_t)B * (size_t)T * (size_t)H * (size_t)half;
    k_rope<<<grid_for(total), TR_BLOCK, 0, tr_cu_stream(s)>>>(x, positions, T, H, D, half, f, sign, total);
    CU_CHECK_LAUNCH("k_rope");
}

extern "C" void kern_rope_forward(dev_stream *s, const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B,
                                  int T, int H, int D) {
    TR_PROF(s, "rope_forward");
    rope_apply(s, rd, x, positions, B, T, H, D, 1.0f);
}

extern "C" void kern_rope_backward(dev_stream *s, const kern_rope_desc *rd, tr_buf dx, const int32_t *positions, int B,
                                   int T, int H, int D) {
    TR_PROF(s, "rope_backward");
    rope_apply(s, rd, dx, positions, B, T, H, D, -1.0f);
}
