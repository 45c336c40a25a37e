/* Token embedding lookup and its deterministic scatter-add backward.
 *
 * Backward, deterministic without atomics: each token's rows are linked in ascending n
 * (k_embedding_links, kern_embedding_links.cuh), then one block per distinct token sums, per
 * column, the old dwte value and the token's dout rows in that order in fp32, rounding once into
 * dwte's type (the twin sums in double and rounds once; same order, so the two agree to fp32
 * rounding). */
#include "gpu_profile.h"
#include "kern_common.cuh"
#include "kern_embedding_links.cuh"

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

/* The full vocabulary: every token is ours, and one outside [0, V) stops the kernel. */
struct embedding_full_rows {
    int V;
    __device__ int row(int32_t tok) const { return tok; }
    __device__ void check(int32_t tok, int n) const {
        if (tok < 0 || tok >= V)
            TR_DEVICE_FAIL("embedding backward: token %d at row %d is outside the vocabulary [0, %d)\n", (int)tok, n,
                           V);
    }
};

/* Block n does the vocabulary row of tokens[n] if n is that token's first row: thread c adds the
 * token's dout rows to dwte[tok, c] in ascending n in fp32 and rounds once into dwte's type. */
__global__ void k_embedding_bwd(tr_buf dwte, tr_buf dout, const int32_t *tokens, const unsigned char *first,
                                const int *next, int C) {
    const int n = blockIdx.x;
    if (!first[n]) return;
    const int32_t tok = tokens[n];
    const size_t wrow = (size_t)tok * (size_t)C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
        float acc = ldf(dwte, wrow + c);
        for (int m = n; m >= 0; m = next[m]) acc = acc + ldf(dout, (size_t)m * (size_t)C + c);
        stf(dwte, wrow + c, acc);
    }
}

extern "C" void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C,
                                       int V) {
    TR_PROF(s, "embedding_forward");
    kern_embedding_forward_check(s, out, tokens, wte, N, C, V);
    k_embedding_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, tokens, wte, N, C, V);
    CU_CHECK_LAUNCH("k_embedding_fwd");
}

extern "C" void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C,
                                        int V) {
    TR_PROF(s, "embedding_backward");
    kern_embedding_backward_check(s, dwte, dout, tokens, N, C, V);
    /* The link kernel checks the tokens before anything touches dwte (stream order). */
    int *next = (int *)tr_cu_scratch(s, (size_t)N * sizeof(int), "embedding backward links"); /* [N] */
    unsigned char *first = (unsigned char *)tr_cu_scratch(s, (size_t)N, "embedding backward first rows"); /* [N] */
    k_embedding_links<<<embedding_link_blocks(N), TR_BLOCK, 0, tr_cu_stream(s)>>>(next, first, tokens, N,
                                                                                  embedding_full_rows{V});
    CU_CHECK_LAUNCH("k_embedding_links");
    k_embedding_bwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(dwte, dout, tokens, first, next, C);
    CU_CHECK_LAUNCH("k_embedding_bwd");
    tr_cu_scratch_free(s, first);
    tr_cu_scratch_free(s, next);
}
