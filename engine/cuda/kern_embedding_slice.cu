/* Vocab-parallel token embedding: this rank's slice [vocab_start, vocab_start + V) of the table.
 *
 * Forward: one block per token row; rows of tokens outside the slice are written as zeros (the
 * tensor-parallel all-reduce SUM supplies them). Backward, deterministic without atomics, as in
 * kern_embedding.cu: one thread links the rows of each in-slice token in ascending n, then one block
 * per distinct token sums, per column, the old dwte value and the token's dout rows in that order in
 * fp32, rounding once into dwte's type (the twin sums in double, same order).
 * A slice cannot tell an id past the end of the vocabulary from another rank's, so only negative ids
 * stop the kernel here (device-side check); the full-vocabulary kernels check the upper bound. */
#include "kern_common.cuh"

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

/* One thread: checks every token and links the rows of each in-slice token in ascending n:
 * head[r] = first row with slice row r (or -1), next[n] = the next row with the same token (or -1). */
__global__ void k_embedding_slice_link(int *head, int *next, const int32_t *tokens, int vocab_start, int N, int V) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (int n = N - 1; n >= 0; n--) {
        const int32_t tok = tokens[n];
        if (tok < 0)
            TR_DEVICE_FAIL("embedding backward (vocab slice): token %d at row %d is negative\n", (int)tok, n);
        const int r = slice_row(tok, vocab_start, V);
        next[n] = -1;
        if (r < 0) continue;
        next[n] = head[r];
        head[r] = n;
    }
}

/* Block n does the slice row of tokens[n] if n is that token's first row. */
__global__ void k_embedding_slice_bwd(tr_buf dwte, tr_buf dout, const int32_t *tokens, const int *head,
                                      const int *next, int vocab_start, int C, int V) {
    const int n = blockIdx.x;
    const int r = slice_row(tokens[n], vocab_start, V);
    if (r < 0 || head[r] != n) return;
    const size_t wrow = (size_t)r * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = ldf(dwte, wrow + c);
        for (int m = n; m >= 0; m = next[m]) acc = acc + ldf(dout, (size_t)m * (size_t)C + c);
        stf(dwte, wrow + c, acc);
    }
}

extern "C" void kern_embedding_forward_slice(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte,
                                             int vocab_start, int N, int C, int V) {
    kern_embedding_forward_slice_check(s, out, tokens, wte, vocab_start, N, C, V);
    k_embedding_slice_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, tokens, wte, vocab_start, C, V);
    CU_CHECK_LAUNCH("k_embedding_slice_fwd");
}

extern "C" void kern_embedding_backward_slice(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens,
                                              int vocab_start, int N, int C, int V) {
    kern_embedding_backward_slice_check(s, dwte, dout, tokens, vocab_start, N, C, V);
    /* The link kernel checks the tokens before anything touches dwte (stream order). */
    int *head = (int *)tr_cu_scratch(s, (size_t)V * sizeof(int), "embedding slice backward heads");   /* [V] */
    int *next = (int *)tr_cu_scratch(s, (size_t)N * sizeof(int), "embedding slice backward links");   /* [N] */
    CU_CHECK(cudaMemsetAsync(head, 0xff, (size_t)V * sizeof(int), tr_cu_stream(s))); /* -1 */
    k_embedding_slice_link<<<1, 1, 0, tr_cu_stream(s)>>>(head, next, tokens, vocab_start, N, V);
    CU_CHECK_LAUNCH("k_embedding_slice_link");
    k_embedding_slice_bwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(dwte, dout, tokens, head, next, vocab_start, C, V);
    CU_CHECK_LAUNCH("k_embedding_slice_bwd");
    tr_cu_scratch_free(s, next);
    tr_cu_scratch_free(s, head);
}
