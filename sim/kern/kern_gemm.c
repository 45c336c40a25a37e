/* kern_gemm for the twin: c = alpha * op(a) @ op(b) + beta * c.
 *
 * Each c[i,j] is the sum over p = 0..k-1, in ascending order, of a[i,p]*b[p,j]: products of fp32
 * values are exact in double and the sum is a double, rounded once in the epilogue
 * alpha*acc + beta*c (also double). Tiling only decides which elements are in flight, never that
 * per-element order, so the bits do not depend on the tile sizes.
 *
 * For cache-friendly inner loops op(a) and op(b) are packed into double tiles laid out as
 * row-major [rows of c, p] and [p, columns of c], so all four transpose combinations run the same
 * contiguous i-p-j loop. Each column panel of op(b) (k x GEMM_TILE_N) is packed once; row panels of
 * op(a) (GEMM_TILE_M x k) are repacked per column panel, 1/GEMM_TILE_N of the multiply work. Scratch
 * is bounded by k, whatever m and n are. */
#include <stdbool.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

enum {
    GEMM_TILE_M = 32,  /* rows of c in flight */
    GEMM_TILE_N = 256, /* columns of c in flight: the 32x256 double accumulator is 64 KiB */
    GEMM_TILE_K = 128, /* depth per pass: a 128x256 block of the op(b) panel (256 KiB) stays in cache */
};

/* dst[r - r0, c - c0] for r in [r0, r1), c in [c0, c1) (row stride c1 - c0) = op(src)[r, c], where
 * op(src) is [rows, cols]: src itself, or src [cols, rows] read transposed. */
static void pack_tile(double *dst, tr_buf src, size_t rows, size_t cols, bool transposed, size_t r0, size_t r1,
                      size_t c0, size_t c1) {
    const size_t w = c1 - c0;
    if (!transposed) {
        for (size_t r = r0; r < r1; r++) ld_row_d(dst + (r - r0) * w, src, r * cols + c0, w);
        return;
    }
    /* Walk the source's rows (op's columns) so reads stay contiguous. */
    for (size_t c = c0; c < c1; c++)
        for (size_t r = r0; r < r1; r++) dst[(r - r0) * w + (c - c0)] = ld(src, c * rows + r);
}

void kern_gemm(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
               float beta) {
    kern_cost(s, 2.0 * m * n * (double)k,
              (double)m * k * tr_dtype_size(a.dt) + (double)k * n * tr_dtype_size(b.dt) +
                  (double)m * n * tr_dtype_size(c.dt) * (beta != 0.0f ? 2.0 : 1.0),
              a.dt);
    kern_gemm_check(s, c, a, b, m, n, k, ta, tb, alpha, beta);
    const size_t M = (size_t)m, N = (size_t)n, K = (size_t)k;

    double *bp = kern_scratch(K * GEMM_TILE_N, sizeof *bp, "gemm b panel");                         /* [k,TN] */
    double *ap = kern_scratch((size_t)GEMM_TILE_M * K, sizeof *ap, "gemm a panel");                 /* [TM,k] */
    double *acc = kern_scratch((size_t)GEMM_TILE_M * GEMM_TILE_N, sizeof *acc, "gemm accumulator"); /* [TM,TN] */

    for (size_t j0 = 0; j0 < N; j0 += GEMM_TILE_N) {
        const size_t nt = N - j0 < GEMM_TILE_N ? N - j0 : GEMM_TILE_N;
        pack_tile(bp, b, K, N, tb, 0, K, j0, j0 + nt);
        for (size_t i0 = 0; i0 < M; i0 += GEMM_TILE_M) {
            const size_t mt = M - i0 < GEMM_TILE_M ? M - i0 : GEMM_TILE_M;
            pack_tile(ap, a, M, K, ta, i0, i0 + mt, 0, K);
            memset(acc, 0, mt * nt * sizeof *acc);
            for (size_t p0 = 0; p0 < K; p0 += GEMM_TILE_K) {
                const size_t p1 = K - p0 < GEMM_TILE_K ? K : p0 + GEMM_TILE_K;
                for (size_t i = 0; i < mt; i++) {
                    double *acc_row = acc + i * nt;
                    const double *a_row = ap + i * K;
                    for (size_t p = p0; p < p1; p++) {
                        const double a_ip = a_row[p];
                        const double *b_row = bp + p * nt;
                        for (size_t j = 0; j < nt; j++) acc_row[j] += a_ip * b_row[j];
                    }
                }
            }
            for (size_t i = 0; i < mt; i++)
                for (size_t j = 0; j < nt; j++) {
                    const size_t idx = (i0 + i) * N + j0 + j;
                    double v = (double)alpha * acc[i * nt + j];
                    if (beta != 0.0f) v += (double)beta * (double)ld(c, idx); /* beta == 0: old c unread */
                    st_d(c, idx, v);
                }
        }
    }
    free(acc);
    free(ap);
    free(bp);
}
