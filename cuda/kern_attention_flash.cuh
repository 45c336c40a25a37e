/* The device code of kern_attention_flash.cu (see there for what the kernels do), in a header of its
 * own so that tools/flash_emu.cpp can run these very kernels on the CPU, one coroutine per CUDA
 * thread, with the tensor-core instructions emulated from their PTX definitions: the only way this
 * code could be exercised on a machine without a GPU.
 *
 * The includer provides tr_bf16_bits_to_f32 and TR_DEVICE_FAIL (kern_common.cuh on the device). With
 * FL_EMULATED defined it also provides the primitives below (mma16816, ldsm_x4, ldsm_x4_trans, cp_async16,
 * cp_async_commit, cp_async_wait, pack_bf16, ex2_ftz, __fmaf_rn, __shfl_xor_sync, __syncthreads) and FL_SMEM. */
#ifndef TWINRUN_CUDA_KERN_ATTENTION_FLASH_CUH
#define TWINRUN_CUDA_KERN_ATTENTION_FLASH_CUH

#include <math.h>
#include <stdint.h>

namespace tr_flash {

constexpr int FL_THREADS = 128; /* 4 warps */
constexpr int FL_BM = 64;       /* query rows of a forward / dQ block: 16 per warp */
constexpr int FL_BN = 64;       /* keys of a tile (forward, dQ) and of a dK/dV block: 16 per warp */
constexpr int FL_BQ = 32;       /* query rows of a tile in the dK/dV kernel */
constexpr float FL_LOG2E = 1.4426950408889634f, FL_LN2 = 0.6931471805599453f;
constexpr unsigned FL_FULL = 0xffffffffu;

/* Variants, chosen at run time by TWINRUN_FLASH_VARIANT (kern_attention_flash.cu): a kernel's last
 * template argument V is a set of these flags, 0 the kernels as first tuned. Each flag is a guess at
 * the H200's limit, prepared to be timed against the others (tools/flash_bench):
 *   FLV_RT2   forward, D 64: two row tiles of 16 per warp (128 queries a block), so each K/V fragment
 *             read from shared memory feeds two mma instead of one (the ldmatrix bytes per mma halve;
 *             K/V tiles also cross from L2 half as often). Same arithmetic per row: same bits.
 *   FLV_OCC   dQ, dK/dV at D 64: __launch_bounds__(128, 4), at most 128 registers, 4 blocks an SM
 *             instead of 3 (bwd_min_blocks). Same bits.
 *   FLV_BQ64  dK/dV: 64-query tiles instead of 32: K/V fragments read once per 64 queries, half the
 *             barriers. The 16-query steps are accumulated in the same order: same bits.
 *   FLV_EX2   exponentials by ex2.approx.ftz (one MUFU.EX2; exp2f adds the subnormal-range scaling
 *             around it) of a single rounded FMA, score * scale_log2 - offset, instead of a rounded
 *             multiply, then a subtraction. NOT the same bits: the argument differs by at most an ulp
 *             of |score * scale_log2| (~2e-6 relative in p), p below 2^-126 becomes 0, and
 *             ex2.approx's 2 ulp error is exp2f's; each far below the bf16 rounding of P (2^-9). */
constexpr unsigned FLV_RT2 = 1u, FLV_OCC = 2u, FLV_BQ64 = 4u, FLV_EX2 = 8u;
constexpr unsigned FLV_ALL = FLV_RT2 | FLV_OCC | FLV_BQ64 | FLV_EX2;
/* the flags each kernel reads (the host instantiates only these subsets) */
constexpr unsigned FLV_FWD_FLAGS = FLV_RT2 | FLV_EX2, FLV_DQ_FLAGS = FLV_OCC | FLV_EX2,
                   FLV_DKV_FLAGS = FLV_OCC | FLV_BQ64 | FLV_EX2;

/* row tiles of 16 per warp in the forward: 2 only at D 64 (at D 128 the doubled output accumulator
 * alone would take 128 registers a thread) */
template <int D, unsigned V>
constexpr int fwd_row_tiles = (V & FLV_RT2) && D == 64 ? 2 : 1;
template <int D, unsigned V>
constexpr int fwd_bm = FL_BM * fwd_row_tiles<D, V>;
template <unsigned V>
constexpr int dkv_bq = (V & FLV_BQ64) ? 2 * FL_BQ : FL_BQ;
/* __launch_bounds__'s minimum blocks an SM of dQ and dK/dV (0: none). FLV_OCC asks one block more than
 * their 160-190 registers at D 64 allow (4, or 3 beside the larger tiles of FLV_BQ64), which ptxas
 * meets with at most 20 bytes of spills; at D 128 (166-255 registers) a cap of 128 spilled ~1 KB a
 * thread, so it does not apply there. */
template <int D, unsigned V>
constexpr int bwd_min_blocks = (V & FLV_OCC) && D == 64 ? ((V & FLV_BQ64) ? 3 : 4) : 0;

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

/* 2^x by the special-function unit alone (MUFU.EX2): subnormal inputs and results flush to zero. */
__device__ __forceinline__ float ex2_ftz(float x) {
    float r;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(r) : "f"(x));
    return r;
}

#endif

/* 2^(x * mul - sub): a rounded product, a rounded difference and exp2f; with FLV_EX2 one FMA and
 * ex2_ftz (see FLV_EX2 for the difference). */
template <bool EX2>
__device__ __forceinline__ float exp2_scaled(float x, float mul, float sub) {
    if constexpr (EX2) return ex2_ftz(__fmaf_rn(x, mul, -sub));
    else return exp2f(x * mul - sub);
}

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

/* acc[u][D/8] += P_u X for RT row tiles u: P_u the fp32 tiles p[u][KT*2] (16 rows x 16*KT keys,
 * rounded to bf16) and X the row-major [keys][D] tile in shared memory: O += P V, dQ += dS K,
 * dV += P^T dO, dK += dS^T Q. Each fragment of X read from shared memory serves the RT tiles. */
template <int D, int KT, int RT>
__device__ __forceinline__ void accumulate_pv_rows(float acc[RT][D / 8][4], const float p[RT][KT * 2][4],
                                                   const uint16_t *X, int lds, int lane) {
#pragma unroll
    for (int kk = 0; kk < KT; kk++) {
        uint32_t a[RT][4];
#pragma unroll
        for (int u = 0; u < RT; u++) frag_a_from_c(a[u], p[u][2 * kk], p[u][2 * kk + 1]);
#pragma unroll
        for (int dd = 0; dd < D / 16; dd++) {
            uint32_t bx[4];
            frag_b_trans(bx, X, lds, kk * 16, dd * 16, lane);
#pragma unroll
            for (int u = 0; u < RT; u++) {
                mma16816(acc[u][2 * dd], a[u], bx[0], bx[1]);
                mma16816(acc[u][2 * dd + 1], a[u], bx[2], bx[3]);
            }
        }
    }
}

/* The same for one row tile: acc[D/8] += P X, P = p[KT*2]. */
template <int D, int KT>
__device__ __forceinline__ void accumulate_pv(float acc[D / 8][4], const float p[KT * 2][4], const uint16_t *X, int lds,
                                              int lane) {
    accumulate_pv_rows<D, KT, 1>(reinterpret_cast<float(*)[D / 8][4]>(acc),
                                 reinterpret_cast<const float(*)[KT * 2][4]>(p), X, lds, lane);
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
    /* key tiles a block of queries [m0, m0 + bm) needs */
    __device__ int key_tiles(int m0, int bm, int Tq, int Tk) const {
        const int last = min(m0 + bm, Tq) - 1;
        return min(last / FL_BN + 1, (Tk + FL_BN - 1) / FL_BN);
    }
    /* first query tile (of bq rows) that can see a key of the block starting at n0 */
    __device__ int first_query_tile(int n0, int bq) const { return n0 / bq; }
    __device__ int position(int i) const { return i; }
    /* whether every query from i_lo on sees every key up to j_hi (a tile below the diagonal) */
    __device__ bool all_visible(int i_lo, int j_hi) const { return j_hi <= i_lo; }
};

/* Positions (context parallelism): query i sees key j iff k_pos[j] <= q_pos[i]; no tile is skipped. */
struct fl_positions {
    const int32_t *q_pos, *k_pos;
    __device__ bool visible(int i, int j) const { return k_pos[j] <= q_pos[i]; }
    __device__ int key_tiles(int, int, int, int Tk) const { return (Tk + FL_BN - 1) / FL_BN; }
    __device__ int first_query_tile(int, int) const { return 0; }
    __device__ int position(int i) const { return q_pos[i]; }
    __device__ bool all_visible(int, int) const { return false; }
};

/* Shared memory: the block's own rows once, the streamed tiles twice (double buffering: the next tile
 * is in flight while the warps compute on this one). */
template <int D, unsigned V = 0>
constexpr size_t fwd_smem() { return (size_t)(fwd_bm<D, V> + 4 * FL_BN) * (D + 8) * sizeof(uint16_t); }
template <int D, unsigned V = 0>
constexpr size_t dq_smem() { return (size_t)(2 * FL_BM + 4 * FL_BN) * (D + 8) * sizeof(uint16_t); }
template <int D, unsigned V = 0>
constexpr size_t dkv_smem() {
    return (size_t)(2 * FL_BN + 4 * dkv_bq<V>) * (D + 8) * sizeof(uint16_t) + 4 * dkv_bq<V> * sizeof(float);
}

/* out [B,Tq,NH,D], lse [B,NH,Tq]; q [B,Tq,NH,D]; k, v [B,Tk,KV,D]. Grid (ceil(Tq/BM), NH, B), BM =
 * fwd_bm<D, V>: 64, or 128 with FLV_RT2 (each warp then owns two row tiles of 16, rows wr + 16u..). */
template <int D, class Mask, unsigned V = 0>
__global__ void __launch_bounds__(FL_THREADS)
    k_flash_fwd(uint16_t *out, float *lse, const uint16_t *q, const uint16_t *k, const uint16_t *v, int Tq, int Tk,
                int NH, int KV, float scale_log2, Mask mask) {
    constexpr int LDS = D + 8, RT = fwd_row_tiles<D, V>, BM = fwd_bm<D, V>;
    constexpr bool EX2 = (V & FLV_EX2) != 0;
    FL_SMEM(fl_smem);
    uint16_t *Qs = (uint16_t *)fl_smem, *KVs = Qs + BM * LDS; /* K, V of buffer u: KVs + (2u + 0|1) * FL_BN * LDS */
    const int m0 = (int)(gridDim.x - 1 - blockIdx.x) * BM; /* the longest causal rows first */
    const int h = blockIdx.y, b = blockIdx.z, grp = h / (NH / KV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tig = lane & 3, wr = warp * 16 * RT;
    const size_t qstride = (size_t)NH * D, kstride = (size_t)KV * D;
    const uint16_t *qb = q + ((size_t)b * Tq * NH + h) * D;
    const uint16_t *kb = k + ((size_t)b * Tk * KV + grp) * D, *vb = v + ((size_t)b * Tk * KV + grp) * D;
    /* per row tile u: the rows of accumulator elements 0-1 and 2-3, their running max and sum */
    int rows[RT][2];
    float m_run[RT][2], l_run[RT][2];
    float o[RT][D / 8][4];
#pragma unroll
    for (int u = 0; u < RT; u++) {
        rows[u][0] = m0 + wr + 16 * u + gr, rows[u][1] = m0 + wr + 16 * u + gr + 8;
        m_run[u][0] = m_run[u][1] = -INFINITY;
        l_run[u][0] = l_run[u][1] = 0.0f;
        zero_tiles<D / 8>(o[u]);
    }

    const int ntiles = mask.key_tiles(m0, BM, Tq, Tk);
    load_rows_async<BM, D>(Qs, LDS, qb, qstride, m0, Tq); /* group 0: Q and the first K/V tile */
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
        float sc[RT][FL_BN / 8][4];
#pragma unroll
        for (int u = 0; u < RT; u++) zero_tiles<FL_BN / 8>(sc[u]);
#pragma unroll
        for (int kk = 0; kk < D / 16; kk++) {
            uint32_t a[RT][4];
#pragma unroll
            for (int u = 0; u < RT; u++) frag_a(a[u], Qs, LDS, wr + 16 * u, kk * 16, gr, tig);
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt += 2) {
                uint32_t bk[4];
                frag_bt2(bk, Ks, LDS, nt * 8, kk * 16, gr, tig);
#pragma unroll
                for (int u = 0; u < RT; u++) {
                    mma16816(sc[u][nt], a[u], bk[0], bk[1]);
                    mma16816(sc[u][nt + 1], a[u], bk[2], bk[3]);
                }
            }
        }
        /* sc becomes the scores in the log2 domain (with FLV_EX2: still raw, scaled inside the exponent's
         * FMA), -inf where masked; mx their row maxima */
        float mx[RT][2];
#pragma unroll
        for (int u = 0; u < RT; u++) mx[u][0] = mx[u][1] = -INFINITY;
        /* a tile every row of the block sees whole (below the diagonal, inside T) needs no mask */
        if (m0 + BM <= Tq && n0 + FL_BN <= Tk && mask.all_visible(m0, n0 + FL_BN - 1)) {
#pragma unroll
            for (int u = 0; u < RT; u++)
#pragma unroll
                for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        if constexpr (!EX2) sc[u][nt][e] = sc[u][nt][e] * scale_log2;
                        mx[u][e >> 1] = fmaxf(mx[u][e >> 1], sc[u][nt][e]);
                    }
        } else {
#pragma unroll
            for (int u = 0; u < RT; u++)
#pragma unroll
                for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int i = rows[u][e >> 1], j = n0 + nt * 8 + tig * 2 + (e & 1);
                        float x = EX2 ? sc[u][nt][e] : sc[u][nt][e] * scale_log2;
                        if (i >= Tq || j >= Tk || !mask.visible(i, j)) x = -INFINITY;
                        sc[u][nt][e] = x;
                        mx[u][e >> 1] = fmaxf(mx[u][e >> 1], x);
                    }
        }
        float ref[RT][2];
#pragma unroll
        for (int u = 0; u < RT; u++) {
            float alpha[2];
#pragma unroll
            for (int r = 0; r < 2; r++) {
                mx[u][r] = fmaxf(mx[u][r], __shfl_xor_sync(FL_FULL, mx[u][r], 1));
                mx[u][r] = fmaxf(mx[u][r], __shfl_xor_sync(FL_FULL, mx[u][r], 2));
                /* rounding is monotonic: the scaled maximum is the maximum of the scaled scores */
                if constexpr (EX2) mx[u][r] = mx[u][r] * scale_log2;
                const float mn = fmaxf(m_run[u][r], mx[u][r]);
                /* a row that has seen no visible key yet keeps m = -inf: nothing to rescale, p = 0 */
                alpha[r] = mn == -INFINITY ? 1.0f : EX2 ? ex2_ftz(m_run[u][r] - mn) : exp2f(m_run[u][r] - mn);
                ref[u][r] = mn == -INFINITY ? 0.0f : mn;
                m_run[u][r] = mn;
                l_run[u][r] *= alpha[r];
            }
#pragma unroll
            for (int dt = 0; dt < D / 8; dt++) {
                o[u][dt][0] *= alpha[0];
                o[u][dt][1] *= alpha[0];
                o[u][dt][2] *= alpha[1];
                o[u][dt][3] *= alpha[1];
            }
        }
#pragma unroll
        for (int u = 0; u < RT; u++)
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const float p = EX2 ? exp2_scaled<true>(sc[u][nt][e], scale_log2, ref[u][e >> 1])
                                        : exp2f(sc[u][nt][e] - ref[u][e >> 1]);
                    sc[u][nt][e] = p;
                    l_run[u][e >> 1] += p;
                }
        accumulate_pv_rows<D, FL_BN / 16, RT>(o, sc, Vs, LDS, lane);
        __syncthreads(); /* this buffer is read; the next iteration may refill it */
    }
    cp_async_wait<0>();
#pragma unroll
    for (int u = 0; u < RT; u++) {
        float l[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            l[r] = l_run[u][r] + __shfl_xor_sync(FL_FULL, l_run[u][r], 1);
            l[r] = l[r] + __shfl_xor_sync(FL_FULL, l[r], 2);
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const int i = rows[u][r];
            if (i >= Tq) continue;
            if (l[r] == 0.0f)
                TR_DEVICE_FAIL("attention forward: query %d at position %d sees no key; with context parallelism, "
                               "check the chunk layout and that k_pos covers the all-gathered sequence\n",
                               i, mask.position(i));
            store_row<D>(out + (((size_t)b * Tq + i) * NH + h) * D, o[u], r, 1.0f / l[r], tig);
            if (tig == 0) lse[((size_t)b * NH + h) * Tq + i] = (m_run[u][r] + log2f(l[r])) * FL_LN2;
        }
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
template <int D, class Mask, unsigned V = 0>
__global__ void __launch_bounds__(FL_THREADS, bwd_min_blocks<D, V>)
    k_flash_bwd_dq(uint16_t *dq, const uint16_t *dout, const uint16_t *q, const uint16_t *k, const uint16_t *v,
                   const float *lse, const float *delta, int Tq, int Tk, int NH, int KV, float scale,
                   float scale_log2, Mask mask) {
    constexpr int LDS = D + 8;
    FL_SMEM(fl_smem);
    constexpr bool EX2 = (V & FLV_EX2) != 0;
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

    const int ntiles = mask.key_tiles(m0, FL_BM, Tq, Tk);
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
                    const float p = exp2_scaled<EX2>(sc[nt][e], scale_log2, lse2[e >> 1]);
                    sc[nt][e] = p * (dp[nt][e] - dl[e >> 1]); /* dS */
                }
        } else {
#pragma unroll
            for (int nt = 0; nt < FL_BN / 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int i = rows[e >> 1], j = n0 + nt * 8 + tig * 2 + (e & 1);
                    float p = 0.0f;
                    if (i < Tq && j < Tk && mask.visible(i, j)) p = exp2_scaled<EX2>(sc[nt][e], scale_log2, lse2[e >> 1]);
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
template <int D, class Mask, unsigned V = 0>
__global__ void __launch_bounds__(FL_THREADS, bwd_min_blocks<D, V>)
    k_flash_bwd_dkv(uint16_t *dk, uint16_t *dv, float *part_k, float *part_v, const uint16_t *dout, const uint16_t *q,
                    const uint16_t *k, const uint16_t *v, const float *lse, const float *delta, int Tq, int Tk, int NH,
                    int KV, float scale, float scale_log2, Mask mask) {
    constexpr int LDS = D + 8, BQ = dkv_bq<V>;
    constexpr bool EX2 = (V & FLV_EX2) != 0;
    FL_SMEM(fl_smem);
    /* K, V of the block; then per buffer u (double buffering): Q, dO tiles and lse, delta rows */
    uint16_t *Ks = (uint16_t *)fl_smem, *Vs = Ks + FL_BN * LDS, *QdO = Vs + FL_BN * LDS;
    float *stats = (float *)(QdO + 4 * BQ * LDS); /* [2][2][BQ]: lse (log2 domain), delta */
    const int n0 = blockIdx.x * FL_BN, h = blockIdx.y, b = blockIdx.z, grp = h / (NH / KV);
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gr = lane >> 2, tig = lane & 3, wr = warp * 16;
    const size_t qstride = (size_t)NH * D, kstride = (size_t)KV * D;
    const size_t koff = ((size_t)b * Tk * KV + grp) * D;
    const int keys[2] = {n0 + wr + gr, n0 + wr + gr + 8};
    float adk[D / 8][4], adv[D / 8][4];
    zero_tiles<D / 8>(adk);
    zero_tiles<D / 8>(adv);

    const int qt0 = mask.first_query_tile(n0, BQ), nqt = (Tq + BQ - 1) / BQ;
    /* the head's query tiles in order, streamed through two buffers */
    const int items = nqt > qt0 ? nqt - qt0 : 0;
    auto issue = [&](int it) { /* Q/dO tiles by cp.async, lse and delta by plain stores, into buffer it & 1 */
        const int i0 = (qt0 + it) * BQ;
        const size_t qoff = ((size_t)b * Tq * NH + h) * D;
        uint16_t *qs = QdO + (size_t)(2 * (it & 1)) * BQ * LDS;
        load_rows_async<BQ, D>(qs, LDS, q + qoff, qstride, i0, Tq);
        load_rows_async<BQ, D>(qs + BQ * LDS, LDS, dout + qoff, qstride, i0, Tq);
        float *st = stats + (it & 1) * 2 * BQ;
        const float *lse_h = lse + ((size_t)b * NH + h) * Tq, *dl_h = delta + ((size_t)b * NH + h) * Tq;
        for (int c = threadIdx.x; c < BQ; c += FL_THREADS) {
            const bool ok = i0 + c < Tq;
            st[c] = ok ? lse_h[i0 + c] * FL_LOG2E : 0.0f;
            st[BQ + c] = ok ? dl_h[i0 + c] : 0.0f;
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
            const int i0 = (qt0 + it) * BQ;
            const uint16_t *Qs = QdO + (size_t)(2 * (it & 1)) * BQ * LDS, *dOs = Qs + BQ * LDS;
            const float *lse_s = stats + (it & 1) * 2 * BQ, *dl_s = lse_s + BQ;
            float st[BQ / 8][4], dpt[BQ / 8][4]; /* S^T = K Q^T, dP^T = V dO^T: 16 keys x BQ queries */
            tile_products<D, BQ / 8>(st, Ks, Qs, dpt, Vs, dOs, LDS, wr, gr, tig);
            if (i0 + BQ <= Tq && n0 + FL_BN <= Tk && mask.all_visible(i0, n0 + FL_BN - 1)) { /* no mask */
#pragma unroll
                for (int nt = 0; nt < BQ / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int c = nt * 8 + tig * 2 + (e & 1);
                        const float p = exp2_scaled<EX2>(st[nt][e], scale_log2, lse_s[c]);
                        st[nt][e] = p;
                        dpt[nt][e] = p * (dpt[nt][e] - dl_s[c]); /* dS^T */
                    }
            } else {
#pragma unroll
                for (int nt = 0; nt < BQ / 8; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const int j = keys[e >> 1], c = nt * 8 + tig * 2 + (e & 1), i = i0 + c;
                        float p = 0.0f;
                        if (i < Tq && j < Tk && mask.visible(i, j)) p = exp2_scaled<EX2>(st[nt][e], scale_log2, lse_s[c]);
                        st[nt][e] = p;
                        dpt[nt][e] = p * (dpt[nt][e] - dl_s[c]); /* dS^T */
                    }
            }
            accumulate_pv<D, BQ / 16>(adv, st, dOs, LDS, lane);  /* dV += P^T dO */
            accumulate_pv<D, BQ / 16>(adk, dpt, Qs, LDS, lane); /* dK += dS^T Q */
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
 * scale) and part_v [B,Tk,NH,D]. One thread per output element. A template (Bits is uint16_t, deduced)
 * only so that every translation unit that launches it may define it (kern_attention_flash_d*.cu). */
template <class Bits>
__global__ void k_flash_dkv_reduce(Bits *dk, Bits *dv, const float *part_k, const float *part_v, int KV, int rep,
                                   int D, float scale, size_t n) {
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
