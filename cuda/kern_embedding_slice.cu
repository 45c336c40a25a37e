/* Vocab-parallel token embedding: this rank's slice [vocab_start, vocab_start + V) of the table.
 *
 * Forward: one block per token row; rows of tokens outside the slice are written as zeros (the
 * tensor-parallel all-reduce SUM supplies them). Backward, deterministic without atomics, as in
 * kern_embedding.cu: the rows of each in-slice token are linked in ascending n (in parallel,
 * kern_embedding_links.cuh), then one block per distinct token sums, per column, the old dwte
 * value and the token's dout rows in that order in fp32, rounding once into dwte's type (the twin
 * sums in double, same order).
 * A slice cannot tell an id past the end of the vocabulary from another rank's, so only negative ids
 * stop the kernel here (device-side check); the full-vocabulary kernels check the upper bound. */
#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_embedding_links.cuh"

/* Row of token in the slice, or -1 when another rank holds it (64-bit: no overflow). */
__device__ __forceinline__ int slice_row(int32_t token, int vocab_start, int V) {
    const long long local = (long long)token - (long long)vocab_start;
    return (local >= 0 && local < (long long)V) ? (int)local : -1;
}

__global__ void k_embedding_slice_fwd(tr_buf out, const int32_t *tokens, tr_buf wte, int vocab_start, int C, int V) {
    const int n = blockIdx.x;
    const int32_t tok = tokens[n];
    if (tok < 0) {
        if (threadIdx.x == 0)
            TR_DEVICE_FAIL("embedding forward (vocab slice): token %d at row %d is negative; check --vocab-size and "
                           "the tokenizer that wrote the data\n",
                           (int)tok, n);
        return;
    }
    const int r = slice_row(tok, vocab_start, V);
    const size_t dst = (size_t)n * (size_t)C;
    if (r < 0) {
        for (int c = threadIdx.x; c < C; c += blockDim.x) stf(out, dst + c, 0.0f);
        return;
    }
    const size_t src = (size_t)r * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) stf(out, dst + c, ldf(wte, src + c));
}

/* This rank's slice: tokens of other ranks are not ours; only negative ids stop the kernel. */
struct embedding_slice_rows {
    int vocab_start, V;
    __device__ int row(int32_t tok) const { return slice_row(tok, vocab_start, V); }
    __device__ void check(int32_t tok, int n) const {
        if (tok < 0) TR_DEVICE_FAIL("embedding backward (vocab slice): token %d at row %d is negative\n", (int)tok, n);
    }
};

/* Block n does the slice row of tokens[n] if n is that token's first row. */
__global__ void k_embedding_slice_bwd(tr_buf dwte, tr_buf dout, const int32_t *tokens, const unsigned char *first,
                                      const int *next, int vocab_start, int C, int V) {
    const int n = blockIdx.x;
    if (!first[n]) return;
    const int r = slice_row(tokens[n], vocab_start, V);
    const size_t wrow = (size_t)r * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = ldf(dwte, wrow + c);
        for (int m = n; m >= 0; m = next[m]) acc = acc + ldf(dout, (size_t)m * (size_t)C + c);
        stf(dwte, wrow + c, acc);
    }
}

extern "C" void kern_embedding_forward_slice(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte,
                                             int vocab_start, int N, int C, int V) {
    TR_PROF(s, "embedding_forward_slice");
    kern_embedding_forward_slice_check(s, out, tokens, wte, vocab_start, N, C, V);
    k_embedding_slice_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, tokens, wte, vocab_start, C, V);
    CU_CHECK_LAUNCH("k_embedding_slice_fwd");
}

extern "C" void kern_embedding_backward_slice(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens,
                                              int vocab_start, int N, int C, int V) {
    TR_PROF(s, "embedding_backward_slice");
    kern_embedding_backward_slice_check(s, dwte, dout, tokens, vocab_start, N, C, V);
    /* The link kernel checks the tokens before anything touches dwte (stream order). */
    int *next = (int *)tr_cu_scratch(s, (size_t)N * sizeof(int), "embedding slice backward links"); /* [N] */
    unsigned char *first = (unsigned char *)tr_cu_scratch(s, (size_t)N, "embedding slice backward first rows"); /* [N] */
    k_embedding_links<<<embedding_link_blocks(N), TR_BLOCK, 0, tr_cu_stream(s)>>>(next, first, tokens, N,
                                                                                  embedding_slice_rows{vocab_start, V});
    CU_CHECK_LAUNCH("k_embedding_links");
    k_embedding_slice_bwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(dwte, dout, tokens, first, next, vocab_start, C, V);
    CU_CHECK_LAUNCH("k_embedding_slice_bwd");
    tr_cu_scratch_free(s, first);
    tr_cu_scratch_free(s, next);
}
