/* Token embedding lookup and its scatter-add backward, for the twin. */
#include "kern_cpu.h"
#include "twinrun/kern.h"

static void check_token(const int32_t *tokens, int n, int V) {
    const int32_t tok = tokens[n];
    if (tok < 0 || tok >= V)
        tr_fatal("embedding: token %d at row %d is outside the vocabulary [0, %d); check --vocab-size and the "
                 "tokenizer that wrote the data",
                 (int)tok, n, V);
}

void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V) {
    (void)s;
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding needs N, C and V positive");
    TR_CHECK(tokens != NULL, "embedding needs a token array");
    kern_check_float_buf(out, "embedding out");
    kern_check_float_buf(wte, "embedding wte");
    for (int n = 0; n < N; n++) {
        check_token(tokens, n, V);
        const size_t src = (size_t)tokens[n] * (size_t)C, dst = (size_t)n * (size_t)C;
        for (int c = 0; c < C; c++) st(out, dst + (size_t)c, ld(wte, src + (size_t)c));
    }
}

void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C, int V) {
    (void)s;
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding backward needs N, C and V positive");
    TR_CHECK(tokens != NULL, "embedding backward needs a token array");
    kern_check_float_buf(dwte, "embedding dwte");
    kern_check_float_buf(dout, "embedding dout");
    for (int n = 0; n < N; n++) check_token(tokens, n, V); /* fail before touching dwte */
    /* Rows are added one at a time in order n = 0..N-1 with an fp32 add rounded to dwte's type,
     * so a token seen twice gets its rows summed in a fixed order. */
    for (int n = 0; n < N; n++) {
        const size_t dst = (size_t)tokens[n] * (size_t)C, src = (size_t)n * (size_t)C;
        for (int c = 0; c < C; c++) st(dwte, dst + (size_t)c, ld(dwte, dst + (size_t)c) + ld(dout, src + (size_t)c));
    }
}
