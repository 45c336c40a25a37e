/* Token embedding lookup and its deterministic scatter-add backward.
 *
 * Backward, deterministic without atomics: one thread links each token's rows in ascending n
 * (k_embedding_link), then one block per distinct token sums, per column, the old dwte value and
 * the token's dout rows in that order in fp32, rounding once into dwte's type (the twin sums in
 * double and rounds once; same order, so the two agree to fp32 rounding). */
#include "kern_common.cuh"

__global__ void k_embedding_fwd(tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V) {
    const int n = blockIdx.x;
    const int32_t tok = tokens[n];
    if (tok < 0 || tok >= V) {
        if (threadIdx.x == 0)
            TR_DEVICE_FAIL("embedding: token %d at row %d is outside the vocabulary [0, %d); check --vocab-size "
                           "and the tokenizer that wrote the data\n",
                           (int)tok, n, V);
        return;
    }
    const size_t src = (size_t)tok * (size_t)C, dst = (size_t)n * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) stf(out, dst + c, ldf(wte, src + c));
}

/* One thread: checks every token and links the rows of each token in ascending n:
 * head[v] = first row with token v (or -1), next[n] = the next row with the same token (or -1).
 * O(N) on a single thread; N is the micro-batch's token count, so this is cheap enough for now. */
__global__ void k_embedding_link(int *head, int *next, const int32_t *tokens, int N, int V) {
    if (blockIdx.x != 0 || threadIdx.x != 0) return;
    for (int n = N - 1; n >= 0; n--) {
        const int32_t tok = tokens[n];
        if (tok < 0 || tok >= V)
            TR_DEVICE_FAIL("embedding backward: token %d at row %d is outside the vocabulary [0, %d)\n", (int)tok, n,
                           V);
        next[n] = head[tok];
        head[tok] = n;
    }
}

/* Block n does the vocabulary row of tokens[n] if n is that token's first row: thread c adds the
 * token's dout rows to dwte[tok, c] in ascending n in fp32 and rounds once into dwte's type. */
__global__ void k_embedding_bwd(tr_buf dwte, tr_buf dout, const int32_t *tokens, const int *head, const int *next,
                                int C) {
    const int n = blockIdx.x;
    const int32_t tok = tokens[n];
    if (head[tok] != n) return;
    const size_t wrow = (size_t)tok * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = ldf(dwte, wrow + c);
        for (int m = n; m >= 0; m = next[m]) acc = acc + ldf(dout, (size_t)m * (size_t)C + c);
        stf(dwte, wrow + c, acc);
    }
}

extern "C" void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C,
                                       int V) {
    kern_embedding_forward_check(s, out, tokens, wte, N, C, V);
    k_embedding_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, tokens, wte, N, C, V);
    CU_CHECK_LAUNCH("k_embedding_fwd");
}

extern "C" void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C,
                                        int V) {
    kern_embedding_backward_check(s, dwte, dout, tokens, N, C, V);
    /* The link kernel checks the tokens before anything touches dwte (stream order). */
    int *head = (int *)tr_cu_scratch(s, (size_t)V * sizeof(int), "embedding backward heads");
    int *next = (int *)tr_cu_scratch(s, (size_t)N * sizeof(int), "embedding backward links");
    CU_CHECK(cudaMemsetAsync(head, 0xff, (size_t)V * sizeof(int), tr_cu_stream(s))); /* -1 */
    k_embedding_link<<<1, 1, 0, tr_cu_stream(s)>>>(head, next, tokens, N, V);
    CU_CHECK_LAUNCH("k_embedding_link");
    k_embedding_bwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(dwte, dout, tokens, head, next, C);
    CU_CHECK_LAUNCH("k_embedding_bwd");
    tr_cu_scratch_free(s, next);
    tr_cu_scratch_free(s, head);
}
