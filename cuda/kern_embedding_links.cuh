/* The links the embedding backward sums along, built in parallel: for each token row n,
 * next[n] = the next row m > n with the same token (-1: none) and first[n] = 1 when no earlier row
 * has it, for the rows whose token this call owns (row_of.row(tok) >= 0; others get -1 and 0).
 * Every thread scans all N tokens through a shared-memory tile: O(N^2) comparisons, ~10 us for
 * N = 16384 on an H200, where the single-thread linked list it replaces walked N dependent loads
 * (milliseconds). The links are those of the single-thread version, so the sums (ascending n)
 * and their bits are unchanged. Tokens the owner calls invalid stop the kernel (row_of.check). */
#ifndef TWINRUN_CUDA_KERN_EMBEDDING_LINKS_CUH
#define TWINRUN_CUDA_KERN_EMBEDDING_LINKS_CUH

#include "kern_common.cuh"

template <class RowOf>
__global__ void k_embedding_links(int *next, unsigned char *first, const int32_t *tokens, int N, RowOf row_of) {
    __shared__ int32_t tile[TR_BLOCK];
    const int n = blockIdx.x * TR_BLOCK + threadIdx.x;
    const bool active = n < N;
    const int32_t tok = active ? tokens[n] : 0;
    if (active) row_of.check(tok, n);
    const bool mine = active && row_of.row(tok) >= 0;
    int nx = -1;
    bool earlier = false;
    for (int m0 = 0; m0 < N; m0 += TR_BLOCK) {
        __syncthreads(); /* the previous tile is no longer read */
        if (m0 + (int)threadIdx.x < N) tile[threadIdx.x] = tokens[m0 + threadIdx.x];
        __syncthreads();
        if (!mine) continue;
        const int cnt = min(TR_BLOCK, N - m0);
        for (int j = 0; j < cnt; j++) {
            const int m = m0 + j;
            if (tile[j] != tok || m == n) continue;
            if (m < n) earlier = true;
            else if (nx < 0) nx = m; /* tiles run in ascending m: the first match after n */
        }
    }
    if (active) {
        next[n] = mine ? nx : -1;
        first[n] = mine && !earlier ? 1 : 0;
    }
}

/* Blocks for one thread per token row. */
static inline unsigned embedding_link_blocks(int N) { return (unsigned)((N + TR_BLOCK - 1) / TR_BLOCK); }

#endif
