/* Token embedding lookup and its deterministic scatter-add backward.
 *
 * Backward: thread c owns column c of dwte and walks the token rows in order n = 0..N-1, adding
 * dout[n,c] into dwte[tokens[n],c] with one fp32 add rounded to dwte's type each time, exactly
 * the twin's order, so a repeated token sums its rows in a fixed order. Parallel over C only:
 * slow for long batches (N serial steps), correct and deterministic; speed is a later issue. */
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

__global__ void k_embedding_check(const int32_t *tokens, int N, int V) {
    for (int n = blockIdx.x * blockDim.x + threadIdx.x; n < N; n += gridDim.x * blockDim.x) {
        const int32_t tok = tokens[n];
        if (tok < 0 || tok >= V)
            TR_DEVICE_FAIL("embedding backward: token %d at row %d is outside the vocabulary [0, %d)\n", (int)tok,
                           n, V);
    }
}

__global__ void k_embedding_bwd(tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    for (int n = 0; n < N; n++) {
        const size_t dst = (size_t)tokens[n] * (size_t)C + c;
        stf(dwte, dst, ldf(dwte, dst) + ldf(dout, (size_t)n * (size_t)C + c));
    }
}

extern "C" void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C,
                                       int V) {
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding needs N, C and V positive");
    TR_CHECK(tokens != NULL, "embedding needs a token array");
    kern_check_float_buf(out, "embedding out");
    kern_check_float_buf(wte, "embedding wte");
    k_embedding_fwd<<<N, TR_BLOCK, 0, tr_cu_stream(s)>>>(out, tokens, wte, N, C, V);
    CU_CHECK_LAUNCH("k_embedding_fwd");
}

extern "C" void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C,
                                        int V) {
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding backward needs N, C and V positive");
    TR_CHECK(tokens != NULL, "embedding backward needs a token array");
    kern_check_float_buf(dwte, "embedding dwte");
    kern_check_float_buf(dout, "embedding dout");
    /* Fail before touching dwte (stream order: the check kernel traps first). */
    k_embedding_check<<<grid_for((size_t)N), TR_BLOCK, 0, tr_cu_stream(s)>>>(tokens, N, V);
    CU_CHECK_LAUNCH("k_embedding_check");
    k_embedding_bwd<<<(C + 127) / 128, 128, 0, tr_cu_stream(s)>>>(dwte, dout, tokens, N, C);
    CU_CHECK_LAUNCH("k_embedding_bwd");
}
