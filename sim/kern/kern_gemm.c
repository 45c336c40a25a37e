/* kern_gemm for the twin: c = alpha * op(a) @ op(b) + beta * c.
 *
 * op(a) and op(b) are packed once into double scratch laid out as [m,k] and [k,n] row-major, so
 * every transpose combination runs the same i-k-j loop over contiguous rows. Each c[i,j] is the
 * sum over p = 0..k-1 in ascending order of a[i,p]*b[p,j] (exact products in double, double sum);
 * tiling over i, j and k changes only which elements are in flight, never that per-element order,
 * so results do not depend on the tile sizes. The epilogue alpha*acc + beta*c is done in double
 * and rounded once. */
#include <stdbool.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

enum {
    GEMM_TILE_M = 32,  /* rows of c in flight */
    GEMM_TILE_N = 256, /* columns of c in flight: a 32x256 double tile is 64 KiB */
    GEMM_TILE_K = 128, /* rows of packed b touched per pass: 128x256 doubles, 256 KiB */
};

/* dst[rows, cols] (double, row-major) = src viewed as [rows, cols], or as [cols, rows] transposed. */
static void pack_op(double *dst, tr_buf src, size_t rows, size_t cols, bool transposed) {
    if (!transposed) {
        ld_row_d(dst, src, 0, rows * cols);
        return;
    }
    for (size_t c = 0; c < cols; c++)
        for (size_t r = 0; r < rows; r++) dst[r * cols + c] = ld(src, c * rows + r);
}

/* acc[mt, nt] += ap[i0.., p0..p1) @ bp[p0..p1), j0..]; acc has row stride nt. */
static void tile_accumulate(double *acc, const double *ap, const double *bp, size_t i0, size_t mt, size_t j0,
                            size_t nt, size_t p0, size_t p1, size_t k, size_t n) {
    for (size_t i = 0; i < mt; i++) {
        double *acc_row = acc + i * nt;
        const double *a_row = ap + (i0 + i) * k;
        for (size_t p = p0; p < p1; p++) {
            const double a_ip = a_row[p];
            const double *b_row = bp + p * n + j0;
            for (size_t j = 0; j < nt; j++) acc_row[j] += a_ip * b_row[j];
        }
    }
}

void kern_gemm(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
               float beta) {
    (void)s;
    TR_CHECK(m > 0 && n > 0 && k > 0, "gemm dimensions m, n, k must be positive");
    kern_check_float_buf(c, "gemm c");
    kern_check_float_buf(a, "gemm a");
    kern_check_float_buf(b, "gemm b");
    const size_t M = (size_t)m, N = (size_t)n, K = (size_t)k;

    double *ap = kern_scratch(M * K, sizeof *ap, "gemm packed a"); /* [m,k] */
    double *bp = kern_scratch(K * N, sizeof *bp, "gemm packed b"); /* [k,n] */
    double *acc = kern_scratch((size_t)GEMM_TILE_M * GEMM_TILE_N, sizeof *acc, "gemm tile"); /* [TM,TN] */
    pack_op(ap, a, M, K, ta);
    pack_op(bp, b, K, N, tb);

    for (size_t i0 = 0; i0 < M; i0 += GEMM_TILE_M) {
        const size_t mt = M - i0 < GEMM_TILE_M ? M - i0 : GEMM_TILE_M;
        for (size_t j0 = 0; j0 < N; j0 += GEMM_TILE_N) {
            const size_t nt = N - j0 < GEMM_TILE_N ? N - j0 : GEMM_TILE_N;
            memset(acc, 0, mt * nt * sizeof *acc);
            for (size_t p0 = 0; p0 < K; p0 += GEMM_TILE_K) {
                const size_t p1 = K - p0 < GEMM_TILE_K ? K : p0 + GEMM_TILE_K;
                tile_accumulate(acc, ap, bp, i0, mt, j0, nt, p0, p1, K, N);
            }
            for (size_t i = 0; i < mt; i++) {
                for (size_t j = 0; j < nt; j++) {
                    const size_t idx = (i0 + i) * N + j0 + j;
                    double v = (double)alpha * acc[i * nt + j];
                    if (beta != 0.0f) v += (double)beta * (double)ld(c, idx); /* beta == 0: old c unread */
                    st_d(c, idx, v);
                }
            }
        }
    }
    free(acc);
    free(bp);
    free(ap);
}
