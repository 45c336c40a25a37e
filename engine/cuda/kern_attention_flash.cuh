/* The device code of kern_attention_flash.cu (see there for what the kernels do), in a header of its
 * own so that tools/flash_emu.cpp can run these very kernels on the CPU, one coroutine per CUDA
 * thread, with the tensor-core instructions emulated from their PTX definitions: the only way this
 * code could be exercised on a machine without a GPU.
 *
 * The includer provides tr_bf16_bits_to_f32 and TR_DEVICE_FAIL (kern_common.cuh on the device). With
 * FL_EMULATED defined it also provides the primitives below (mma16816, ldsm_x4, ldsm_x4_trans, pack_bf16,
 * __shfl_xor_sync, __syncthreads) and FL_SMEM. */
#ifndef TWINRUN_ENGINE_CUDA_KERN_ATTENTION_FLASH_CUH
#define TWINRUN_ENGINE_CUDA_KERN_ATTENTION_FLASH_CUH

#include <math.h>
#include <stdint.h>

namespace tr_flash {

constexpr int FL_THREADS = 128; /* 4 warps */
constexpr int FL_BM = 64;       /* query rows of a forward / dQ block: 16 per warp */
constexpr int FL_BN = 64;       /* keys of a tile (forward, dQ) and of a dK/dV block: 16 per warp */
constexpr int FL_BQ = 32;       /* query rows of a tile in the dK/dV kernel */
constexpr float FL_LOG2E = 1.4426950408889634f, FL_LN2 = 0.6931471805599453f;
constexpr unsigned FL_FULL = 0xffffffffu;

#ifndef FL_EMULATED
#define FL_SMEM(name) extern __shared__ __align__(16) unsigned char name[]

__device__ __forceinline__ void mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* Four 8x8 b16 matrices: lanes 8m..8m+7 give the row addresses of matrix m; register m of lane l
 * holds row l/4, columns 2(l%4) and 2(l%4)+1 of matrix m — the mma operands' layout. One instruction
 * where 32-bit shared loads need four. */
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const uint16_t *row) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* Four 8x8 b16 matrices, transposed: lanes 8m..8m+7 give the row addresses of matrix m. */
__device__ __forceinline__ void ldsm_x4_trans(uint32_t r[4], const uint16_t *row) {
    const unsigned addr = (unsigned)__cvta_generic_to_shared(row);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
}

/* 16 bytes global -> shared without passing through registers; valid = false writes 16 zero bytes
 * (src-size 0: nothing is read). Visible to the block after cp_async_wait and a barrier. */
__device__ __forceinline__ void cp_async16(void *smem, const void *gmem, bool valid) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(smem);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}

/* Closes the group of this thread's cp.async issued since the last commit (possibly empty). */
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* Waits until at most N of this thread's committed groups are still in flight. */
template <int N>
__device__ __forceinline__ void cp_async_wait() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

/* Two fp32 -> bf16x2 (nearest-even), lo in the low half. */
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
}

#endif

/* A operand (16x16) from a row-major tile in shared memory: rows r0.., columns c0... The four 8x8
 * matrices (rows +0/+8, columns +0/+8) by one ldmatrix: lane l addresses row l%8 of matrix l/8. */
__device__ __forceinline__ void frag_a(uint32_t a[4], const uint16_t *sm, int lds, int r0, int c0, int gr, int tig) {
    const int lane = gr * 4 + tig, m = lane >> 3;
    ldsm_x4(a, sm + (r0 + (lane & 7) + (m & 1) * 8) * lds + c0 + (m >> 1) * 8);
}

/* B operands of two n-tiles (16x8 each) = X^T for X row-major [n][k] in shared memory: B[k][n] =
 * X[n0 + n][k0 + k]. b[0], b[1]: n-tile n0..n0+7; b[2], b[3]: n0+8..n0+15 (one ldmatrix). */
__device__ __forceinline__ void frag_bt2(uint32_t b[4], const uint16_t *sm, int lds, int n0, int k0, int gr, int tig) {
    const int lane = gr * 4 + tig, m = lane >> 3;
    ldsm_x4(b, sm + (n0 + (lane & 7) + (m >> 1) * 8) * lds + k0 + (m & 1) * 8);
}

/* B operands of two n-tiles (16 x 16) = X for X row-major [k][n] in shared memory: B[k][n] =
 * X[k0 + k][n0 + n]. r[0], r[1]: n-tile n0..n0+7; r[2], r[3]: n0+8..n0+15. */
__device__ __forceinline__ void frag_b_trans(uint32_t r[4], const uint16_t *sm, int lds, int k0, int n0, int lane) {
    const int m = lane >> 3;
    ldsm_x4_trans(r, sm + (k0 + (m & 1) * 8 + (lane & 7)) * lds + n0 + (m >> 1) * 8);
}

/* The A operand (16x16 bf16) made of two fp32 accumulator tiles (16x8 each, side by side). */
__device__ __forceinline__ void frag_a_from_c(uint32_t a[4], const float c0[4], const float c1[4]) {
    a[0] = pack_bf16(c0[0], c0[1]);
    a[1] = pack_bf16(c0[2], c0[3]);
    a[2] = pack_bf16(c1[0], c1[1]);
    a[3] = pack_bf16(c1[2], c1[3]);
}

template <int NT>
__device__ __forceinline__ void zero_tiles(float c[NT][4]) {
#pragma unroll
    for (int nt = 0; nt < NT; nt++) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
}

/* c = A B^T over D for this warp's 16 rows (from wr) of the row-major tile A and the NT * 8 rows of
 * the row-major tile B: S = Q K^T, dP = dO V^T and their transposes. Two products that share the
 * loop (each with its own A and B) are done together. */
template <int D, int NT>
__device__ __forceinline__ void tile_products(float c1[NT][4], const uint16_t *A1, const uint16_t *B1, float c2[NT][4],
                                              const uint16_t *A2, const uint16_t *B2, int lds, int wr, int gr,
                                              int tig) {
    zero_tiles<NT>(c1);
    zero_tiles<NT>(c2);
#pragma unroll
    for (int kk = 0; kk < D / 16; kk++) {
        uint32_t a1[4], a2[4];
        frag_a(a1, A1, lds, wr, kk * 16, gr, tig);
        frag_a(a2, A2, lds, wr, kk * 16, gr, tig);
#pragma unroll
        for (int nt = 0; nt < NT; nt += 2) {
            uint32_t b[4];
            frag_bt2(b, B1, lds, nt * 8, kk * 16, gr, tig);
            mma16816(c1[nt], a1, b[0], b[1]);
            mma16816(c1[nt + 1], a1, b[2], b[3]);
            frag_bt2(b, B2, lds, nt * 8, kk * 16, gr, tig);
            mma16816(c2[nt], a2, b[0], b[1]);
            mma16816(c2[nt + 1], a2, b[2], b[3]);
        }
    }
}

/* acc[D/8] += P X for P the fp32 tiles p[KT*2] (16 rows x 16*KT keys, rounded to bf16) and X the
 * row-major [keys][D] tile in shared memory: O += P V, dQ += dS K, dV += P^T dO, dK += dS^T Q. */
template <int D, int KT>
__device__ __forceinline__ void accumulate_pv(float acc[D / 8][4], const float p[KT * 2][4], const uint16_t *X, int lds,
                                              int lane) {
#pragma unroll
    for (int kk = 0; kk < KT; kk++) {
        uint32_t a[4];
        frag_a_from_c(a, p[2 * kk], p[2 * kk + 1]);
#pragma unroll
        for (int dd = 0; dd < D / 16; dd++) {
            uint32_t bx[4];
            frag_b_trans(bx, X, lds, kk * 16, dd * 16, lane);
            mma16816(acc[2 * dd], a, bx[0], bx[1]);
            mma16816(acc[2 * dd + 1], a, bx[2], bx[3]);
        }
    }
}

/* Row r (0: gr, 1: gr + 8) of this warp's accumulator tiles, times mul, as bf16 into dst [D]. */
template <int D>
__device__ __forceinline__ void store_row(uint16_t *dst, const float acc[D / 8][4], int r, float mul, int tig) {
    uint32_t *row = (uint32_t *)dst;
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) row[dt * 4 + tig] = pack_bf16(acc[dt][2 * r] * mul, acc[dt][2 * r + 1] * mul);
}

/* Row r of this warp's accumulator tiles as fp32 into dst [D] (the dK/dV shares of k_flash_bwd_dkv). */
template <int D>
__device__ __forceinline__ void store_row_f32(float *dst, const float acc[D / 8][4], int r, int tig) {
#pragma unroll
    for (int dt = 0; dt < D / 8; dt++) {
        dst[dt * 8 + tig * 2] = acc[dt][2 * r];
        dst[dt * 8 + tig * 2 + 1] = acc[dt][2 * r + 1];
    }
}

/* Issues the copy of rows [row0, row0 + ROWS) of a strided [rows_valid, D] bf16 slice into shared
 * memory (row stride lds elements), zeros past rows_valid, in 16-byte cp.async pieces; the caller
 * commits, waits and synchronises before reading. */
template <int ROWS, int D>
__device__ __forceinline__ void load_rows_async(uint16_t *sm, int lds, const uint16_t *g, size_t stride, int row0,
                                                int rows_valid) {
    constexpr int CH = D / 8;
    for (int c = threadIdx.x; c < ROWS * CH; c += FL_THREADS) {
        const int r = c / CH, cc = c % CH;
        const bool ok = row0 + r < rows_valid;
        cp_async16(sm + r * lds + cc * 8, ok ? g + (size_t)(row0 + r) * stride + (size_t)cc * 8 : g, ok);
    }
}

/* Causal: Tq = Tk, query i sees keys j <= i. */
struct fl_causal {
    __device__ bool visible(int i, int j) const { return j <= i; }
    /* key tiles a block of queries [m0, m0 + FL_BM) needs */
    __device__ int key_tiles(int m0, int Tq, int Tk) const {
        const int last = min(m0 + FL_BM, Tq) - 1;
        return min(last / FL_BN + 1, (Tk + FL_BN - 1) / FL_BN);
    }
    /* first query tile (of FL_BQ rows) that can see a key of the block starting at n0 */
    __device__ int first_query_tile(int n0) const { return n0 / FL_BQ; }
    __device__ int position(int i) const { return i; }
    /* whether every query from i_lo on sees every key up to j_hi (a tile below the diagonal) */
    __device__ bool all_visible(int i_lo, int j_hi) const { return j_hi <= i_lo; }
};

/* Positions (context parallelism): query i sees key j iff k_pos[j] <= q_pos[i]; no tile is skipped. */
struct fl_positions {
    const int32_t *q_pos, *k_pos;
    __device__ bool visible(int i, int j) const { return k_pos[j] <= q_pos[i]; }
    __device__ int key_tiles(int, int, int Tk) const { return (Tk + FL_BN - 1) / FL_BN; }
    __device__ int first_query_tile(int) const { return 0; }
    __device__ int position(int i) const { return q_pos[i]; }
    __device__ bool all_visible(int, int) const { return false; }
};

/* Shared memory: the block's own rows once, the streamed tiles twice (double buffering: the next tile
 * is in flight while the warps compute on this one). */
template <int D>
constexpr size_t fwd_smem() { return (size_t)(FL_BM + 4 * FL_BN) * (D + 8) * sizeof(uint16_t); }
template <int D>
constexpr size_t dq_smem() { return (size_t)(2 * FL_BM + 4 * FL_BN) * (D + 8) * sizeof(uint16_t); }
template <int D>
constexpr size_t dkv_smem() {
    return (size_t)(2 * FL_BN + 4 * FL_BQ) * (D + 8) * sizeof(uint16_t) + 4 * FL_BQ * sizeof(float);
}

/* out [B,Tq,NH,D], lse [B,NH,Tq]; q [B,Tq,NH,D]; k, v [B,Tk,KV,D]. Grid (ceil(Tq/64), NH, B). */
template <int D, class Mask>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v, int Tq, int Tk,
                int NH, int KV, float scale_log2, Mask mask) {
    constexpr int LDS = D + 8;
    FL_SMEM(fl_smem);
    uint16_t *Qs = (uint16_t *)fl_smem, *KVs = Qs + FL_BM * LDS; /* K, V of buffer u: KVs + (2u + 0|1) * FL_BN * LDS */
    const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * FL_BM; /* the longest causal rows first */
    const int h = blockIdx.y, b = blockIdx.z, grp = h / (NH / KV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tig = lane & 3, wr = warp * 16;
    const size_t qstride = (size_t)NH * D, kstride = (size_t)KV * D;
    const uint16_t *qb = q + ((size_t)b * Tq * NH + h) * D;
    const uint16_t *kb = k + ((size_t)b * Tk * KV + grp) * D, *vb = v + ((size_t)b * Tk * KV + grp) * D;
    const int rows[2] = {m0 + wr + gr, m0 + wr + gr + 8};
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    float o[D / 8][4];
    zero_tiles<D / 8>(o);

    const int ntiles = mask.key_tiles(m0, Tq, Tk);
    load_rows_async<FL_BM, D>(Qs, LDS, qb, qstride, m0, Tq); /* group 0: Q and the first K/V tile */
    load_rows_async<FL_BN, D>(KVs, LDS, kb, kstride, 0, Tk);
    load_rows_async<FL_BN, D>(KVs + FL_BN * LDS, LDS, vb, kstride, 0, Tk);
    cp_async_commit();
    for (int t = 0; t < ntiles; t++) {
        const int n0 = t * FL_BN;
        if (t + 1 < ntiles) { /* the next tile into the other buffer, freed by the last iteration's barrier */
            uint16_t *nb = KVs + (size_t)(2 * ((t + 1) & 1)) * FL_BN * LDS;
            load_rows_async<FL_BN, D>(nb, LDS, kb, kstride, n0 + FL_BN, Tk);
            load_rows_async<FL_BN, D>(nb + FL_BN * LDS, LDS, vb, kstride, n0 + FL_BN, Tk);
        }
        cp_async_commit();
        cp_async_wait<1>(); /* everything but the group just committed: tile t (and Q) have landed */
        __syncthreads();
        const uint16_t *Ks = KVs + (size_t)(2 * (t & 1)) * FL_BN * LDS, *Vs = Ks + FL_BN * LDS;
        float sc[FL_BN / 8][4];
        zero_tiles<FL_BN / 8>(sc);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t a[4];
            frag_a(a, Qs, LDS, wr, kk * 16, gr, tig);
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt += 2) {
                uint32_t bk[4];
                frag_bt2(bk, Ks, LDS, nt * 8, kk * 16, gr, tig);
                mma16816(sc[nt], a, bk[0], bk[1]);
                mma16816(sc[nt + 1], a, bk[2], bk[3]);
            }
        }
        float mx[2] = {-INFINITY, -INFINITY};
        /* a tile every row of the block sees whole (below the diagonal, inside T) needs no mask */
        if (m0 + FL_BM <= Tq && n0 + FL_BN <= Tk && mask.all_visible(m0, n0 + FL_BN - 1)) {
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    sc[nt][e] = sc[nt][e] * scale_log2;
                    mx[e >> 1] = fmaxf(mx[e >> 1], sc[nt][e]);
                }
        } else {
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = rows[e >> 1], j = n0 + nt * 8 + tig * 2 + (e & 1);
                    float x = sc[nt][e] * scale_log2;
                    if (i >= Tq || j >= Tk || !mask.visible(i, j)) x = -INFINITY;
                    sc[nt][e] = x;
                    mx[e >> 1] = fmaxf(mx[e >> 1], x);
                }
        }
        float alpha[2], ref[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(FL_FULL, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(FL_FULL, mx[r], 2));
            const float mn = fmaxf(m_run[r], mx[r]);
            /* a row that has seen no visible key yet keeps m = -inf: nothing to rescale, p = 0 */
            alpha[r] = mn == -INFINITY ? 1.0f : exp2f(m_run[r] - mn);
            ref[r] = mn == -INFINITY ? 0.0f : mn;
            m_run[r] = mn;
            l_run[r] *= alpha[r];
        }
#pragma unroll
        for (int dt = 0; dt < D / 8; dt++) {
            o[dt][0] *= alpha[0];
            o[dt][1] *= alpha[0];
            o[dt][2] *= alpha[1];
            o[dt][3] *= alpha[1];
        }
#pragma unroll
        for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float p = exp2f(sc[nt][e] - ref[e >> 1]);
                sc[nt][e] = p;
                l_run[e >> 1] += p;
            }
        accumulate_pv<D, FL_BN / 16>(o, sc, Vs, LDS, lane);
        __syncthreads(); /* this buffer is read; the next iteration may refill it */
    }
    cp_async_wait<0>();
    float l[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        l[r] = l_run[r] + __shfl_xor_sync(FL_FULL, l_run[r], 1);
        l[r] = l[r] + __shfl_xor_sync(FL_FULL, l[r], 2);
    }
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = rows[r];
        if (i >= Tq) continue;
        if (l[r] == 0.0f)
            TR_DEVICE_FAIL("attention forward: query %d at position %d sees no key; with context parallelism, "
                           "check the chunk layout and that k_pos covers the all-gathered sequence\n",
                           i, mask.position(i));
        store_row<D>(out + (((size_t)b * Tq + i) * NH + h) * D, o, r, 1.0f / l[r], tig);
        if (tig == 0) lse[((size_t)b * NH + h) * Tq + i] = (m_run[r] + log2f(l[r])) * FL_LN2;
    }
}

/* delta [B,NH,Tq] = rowsum(dout * out) over D, one warp per row of [B*Tq*NH, D]. */
template <int D>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash_delta(float *delta, const uint16_t *dout, const uint16_t *out, int Tq, int NH, size_t rows) {
    const size_t row = (size_t)blockIdx.x * (FL_THREADS / 32) + (threadIdx.x >> 5);
    if (row >= rows) return; /* warp-uniform */
    const int lane = threadIdx.x & 31;
    const uint16_t *a = dout + row * D, *o = out + row * D;
    float acc = 0.0f;
    for (int d = lane * 2; d < D; d += 64)
        acc = acc + tr_bf16_bits_to_f32(a[d]) * tr_bf16_bits_to_f32(o[d]) +
              tr_bf16_bits_to_f32(a[d + 1]) * tr_bf16_bits_to_f32(o[d + 1]);
    for (int off = 16; off > 0; off >>= 1) acc = acc + __shfl_xor_sync(FL_FULL, acc, off);
    if (lane == 0) {
        const int h = (int)(row % (size_t)NH);
        const size_t bi = row / (size_t)NH;
        const int i = (int)(bi % (size_t)Tq);
        const size_t b = bi / (size_t)Tq;
        delta[(b * NH + h) * Tq + i] = acc;
    }
}

/* dq [B,Tq,NH,D] (overwrite). Grid (ceil(Tq/64), NH, B). */
template <int D, class Mask>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash_bwd_dq(uint16_t *dq, const uint16_t *dout, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                   const float *lse, const float *delta, int Tq, int Tk, int NH, int KV, float scale,
                   float scale_log2, Mask mask) {
    constexpr int LDS = D + 8;
    FL_SMEM(fl_smem);
    uint16_t *Qs = (uint16_t *)fl_smem, *dOs = Qs + FL_BM * LDS, *KVs = dOs + FL_BM * LDS; /* K/V double-buffered */
    const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * FL_BM;
    const int h = blockIdx.y, b = blockIdx.z, grp = h / (NH / KV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tig = lane & 3, wr = warp * 16;
    const size_t qstride = (size_t)NH * D, kstride = (size_t)KV * D;
    const size_t qoff = ((size_t)b * Tq * NH + h) * D, koff = ((size_t)b * Tk * KV + grp) * D;
    const int rows[2] = {m0 + wr + gr, m0 + wr + gr + 8};
    float lse2[2], dl[2];
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const bool ok = rows[r] < Tq;
        lse2[r] = ok ? lse[((size_t)b * NH + h) * Tq + rows[r]] * FL_LOG2E : 0.0f;
        dl[r] = ok ? delta[((size_t)b * NH + h) * Tq + rows[r]] : 0.0f;
    }
    float acc[D / 8][4];
    zero_tiles<D / 8>(acc);

    const int ntiles = mask.key_tiles(m0, Tq, Tk);
    load_rows_async<FL_BM, D>(Qs, LDS, q + qoff, qstride, m0, Tq); /* group 0: Q, dO and the first K/V tile */
    load_rows_async<FL_BM, D>(dOs, LDS, dout + qoff, qstride, m0, Tq);
    load_rows_async<FL_BN, D>(KVs, LDS, k + koff, kstride, 0, Tk);
    load_rows_async<FL_BN, D>(KVs + FL_BN * LDS, LDS, v + koff, kstride, 0, Tk);
    cp_async_commit();
    for (int t = 0; t < ntiles; t++) {
        const int n0 = t * FL_BN;
        if (t + 1 < ntiles) {
            uint16_t *nb = KVs + (size_t)(2 * ((t + 1) & 1)) * FL_BN * LDS;
            load_rows_async<FL_BN, D>(nb, LDS, k + koff, kstride, n0 + FL_BN, Tk);
            load_rows_async<FL_BN, D>(nb + FL_BN * LDS, LDS, v + koff, kstride, n0 + FL_BN, Tk);
        }
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        const uint16_t *Ks = KVs + (size_t)(2 * (t & 1)) * FL_BN * LDS, *Vs = Ks + FL_BN * LDS;
        float sc[FL_BN / 8][4], dp[FL_BN / 8][4]; /* S = Q K^T, dP = dO V^T */
        tile_products<D, FL_BN / 8>(sc, Qs, Ks, dp, dOs, Vs, LDS, wr, gr, tig);
        if (m0 + FL_BM <= Tq && n0 + FL_BN <= Tk && mask.all_visible(m0, n0 + FL_BN - 1)) { /* no mask */
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float p = exp2f(sc[nt][e] * scale_log2 - lse2[e >> 1]);
                    sc[nt][e] = p * (dp[nt][e] - dl[e >> 1]); /* dS */
                }
        } else {
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = rows[e >> 1], j = n0 + nt * 8 + tig * 2 + (e & 1);
                    float p = 0.0f;
                    if (i < Tq && j < Tk && mask.visible(i, j)) p = exp2f(sc[nt][e] * scale_log2 - lse2[e >> 1]);
                    sc[nt][e] = p * (dp[nt][e] - dl[e >> 1]); /* dS */
                }
        }
        accumulate_pv<D, FL_BN / 16>(acc, sc, Ks, LDS, lane); /* dQ += dS K */
        __syncthreads();
    }
    cp_async_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int i = rows[r];
        if (i >= Tq) continue;
        store_row<D>(dq + (((size_t)b * Tq + i) * NH + h) * D, acc, r, scale, tig);
    }
}

/* dK, dV of one head h for 64 keys. Grid (ceil(Tk/64), NH, B). With one head a group (part_k == NULL)
 * the results are the gradients: dk, dv [B,Tk,KV,D] bf16 (overwrite; a key no query sees gets 0).
 * Otherwise each head writes its fp32 share, dK unscaled, into part_k, part_v [B,Tk,NH,D] and
 * k_flash_dkv_reduce sums a group's heads in order: a block per (keys, head) instead of per (keys,
 * group) gives NH/KV times more blocks (a 4096-token micro-batch of 8 groups had 512 for 132 SMs,
 * the first of them 4x longer than the average: the causal tail set the kernel's time). */
template <int D, class Mask>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash_bwd_dkv(uint16_t *dk, uint16_t *dv, float *part_k, float *part_v, const uint16_t *dout, const uint16_t *q,
                    const uint16_t *k, const uint16_t *v, const float *lse, const float *delta, int Tq, int Tk, int NH,
                    int KV, float scale, float scale_log2, Mask mask) {
    constexpr int LDS = D + 8;
    FL_SMEM(fl_smem);
    /* K, V of the block; then per buffer u (double buffering): Q, dO tiles and lse, delta rows */
    uint16_t *Ks = (uint16_t *)fl_smem, *Vs = Ks + FL_BN * LDS, *QdO = Vs + FL_BN * LDS;
    float *stats = (float *)(QdO + 4 * FL_BQ * LDS); /* [2][2][FL_BQ]: lse (log2 domain), delta */
    const int n0 = blockIdx.x * FL_BN, h = blockIdx.y, b = blockIdx.z, grp = h / (NH / KV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tig = lane & 3, wr = warp * 16;
    const size_t qstride = (size_t)NH * D, kstride = (size_t)KV * D;
    const size_t koff = ((size_t)b * Tk * KV + grp) * D;
    const int keys[2] = {n0 + wr + gr, n0 + wr + gr + 8};
    float adk[D / 8][4], adv[D / 8][4];
    zero_tiles<D / 8>(adk);
    zero_tiles<D / 8>(adv);

    const int qt0 = mask.first_query_tile(n0), nqt = (Tq + FL_BQ - 1) / FL_BQ;
    /* the head's query tiles in order, streamed through two buffers */
    const int items = nqt > qt0 ? nqt - qt0 : 0;
    auto issue = [&](int it) { /* Q/dO tiles by cp.async, lse and delta by plain stores, into buffer it & 1 */
        const int i0 = (qt0 + it) * FL_BQ;
        const size_t qoff = ((size_t)b * Tq * NH + h) * D;
        uint16_t *qs = QdO + (size_t)(2 * (it & 1)) * FL_BQ * LDS;
        load_rows_async<FL_BQ, D>(qs, LDS, q + qoff, qstride, i0, Tq);
        load_rows_async<FL_BQ, D>(qs + FL_BQ * LDS, LDS, dout + qoff, qstride, i0, Tq);
        float *st = stats + (it & 1) * 2 * FL_BQ;
        const float *lse_h = lse + ((size_t)b * NH + h) * Tq, *dl_h = delta + ((size_t)b * NH + h) * Tq;
        for (int c = threadIdx.x; c < FL_BQ; c += FL_THREADS) {
            const bool ok = i0 + c < Tq;
            st[c] = ok ? lse_h[i0 + c] * FL_LOG2E : 0.0f;
            st[FL_BQ + c] = ok ? dl_h[i0 + c] : 0.0f;
        }
    };
    load_rows_async<FL_BN, D>(Ks, LDS, k + koff, kstride, n0, Tk); /* group 0: K, V and the first Q/dO tile */
    load_rows_async<FL_BN, D>(Vs, LDS, v + koff, kstride, n0, Tk);
    if (items > 0) issue(0);
    cp_async_commit();
    for (int it = 0; it < items; it++) {
        if (it + 1 < items) issue(it + 1);
        cp_async_commit();
        cp_async_wait<1>();
        __syncthreads();
        {
            const int i0 = (qt0 + it) * FL_BQ;
            const uint16_t *Qs = QdO + (size_t)(2 * (it & 1)) * FL_BQ * LDS, *dOs = Qs + FL_BQ * LDS;
            const float *lse_s = stats + (it & 1) * 2 * FL_BQ, *dl_s = lse_s + FL_BQ;
            float st[FL_BQ / 8][4], dpt[FL_BQ / 8][4]; /* S^T = K Q^T, dP^T = V dO^T: 16 keys x FL_BQ queries */
            tile_products<D, FL_BQ / 8>(st, Ks, Qs, dpt, Vs, dOs, LDS, wr, gr, tig);
            if (i0 + FL_BQ <= Tq && n0 + FL_BN <= Tk && mask.all_visible(i0, n0 + FL_BN - 1)) { /* no mask */
#pragma unroll
                for (int nt = 0; nt < FL_BQ / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int c = nt * 8 + tig * 2 + (e & 1);
                        const float p = exp2f(st[nt][e] * scale_log2 - lse_s[c]);
                        st[nt][e] = p;
                        dpt[nt][e] = p * (dpt[nt][e] - dl_s[c]); /* dS^T */
                    }
            } else {
#pragma unroll
                for (int nt = 0; nt < FL_BQ / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = keys[e >> 1], c = nt * 8 + tig * 2 + (e & 1), i = i0 + c;
                        float p = 0.0f;
                        if (i < Tq && j < Tk && mask.visible(i, j)) p = exp2f(st[nt][e] * scale_log2 - lse_s[c]);
                        st[nt][e] = p;
                        dpt[nt][e] = p * (dpt[nt][e] - dl_s[c]); /* dS^T */
                    }
            }
            accumulate_pv<D, FL_BQ / 16>(adv, st, dOs, LDS, lane);  /* dV += P^T dO */
            accumulate_pv<D, FL_BQ / 16>(adk, dpt, Qs, LDS, lane); /* dK += dS^T Q */
        }
        __syncthreads(); /* this buffer is read; the next iteration may refill it */
    }
    cp_async_wait<0>();
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int j = keys[r];
        if (j >= Tk) continue;
        if (part_k) {
            const size_t off = (((size_t)b * Tk + j) * NH + h) * D;
            store_row_f32<D>(part_k + off, adk, r, tig);
            store_row_f32<D>(part_v + off, adv, r, tig);
        } else {
            const size_t off = (((size_t)b * Tk + j) * KV + grp) * D;
            store_row<D>(dk + off, adk, r, scale, tig);
            store_row<D>(dv + off, adv, r, 1.0f, tig);
        }
    }
}

/* dk, dv [B,Tk,KV,D] bf16 = the sums over each group's rep heads, in head order, of part_k (times
 * scale) and part_v [B,Tk,NH,D]. One thread per output element. */
__global__ void k_flash_dkv_reduce(uint16_t *dk, uint16_t *dv, const float *part_k, const float *part_v, int KV,
                                   int rep, int D, float scale, size_t n) {
    const size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= n) return;
    const size_t d = idx % (size_t)D, bjg = idx / (size_t)D; /* (b * Tk + j) * KV + g */
    const size_t g = bjg % (size_t)KV, bj = bjg / (size_t)KV;
    const size_t src = ((bj * (size_t)KV + g) * (size_t)rep) * (size_t)D + d; /* head g * rep of row bj */
    float sk = 0.0f, sv = 0.0f;
    for (int r = 0; r < rep; r++) {
        sk = sk + part_k[src + (size_t)r * D];
        sv = sv + part_v[src + (size_t)r * D];
    }
    dk[idx] = pack_bf16(sk * scale, 0.0f) & 0xffffu;
    dv[idx] = pack_bf16(sv, 0.0f) & 0xffffu;
}


} /* namespace tr_flash */

#endif
