/* Token embedding for the twin over the whole vocabulary: the slice kernels of
 * kern_embedding_slice.c with vocab_start = 0, after checking every token id against V (a bad id
 * is almost always a tokenizer/vocab-size mismatch, and only the whole vocabulary can tell). The
 * order of the backward's sums and the roofline cost are those of the slice kernels. */

#include "kern_cpu.h"
#include "twinrun/kern.h"

/* Fatal with the offending token, its position and the vocabulary size. */
static void check_tokens(const int32_t *tokens, int N, int V, const char *who) {
    for (int n = 0; n < N; n++) {
        if (tokens[n] < 0 || tokens[n] >= V)
            tr_fatal("%s: token id %d at position %d is outside the vocabulary [0, %d); check that "
                     "--vocab-size / the tokenizer matches the data",
                     who, (int)tokens[n], n, V);
    }
}

void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V) {
    kern_embedding_forward_check(s, out, tokens, wte, N, C, V);
    kern_access(s, "kernel embedding_forward",
                (const twin_access[]){{out.p, kern_bytes(out, (size_t)N * (size_t)C), true},
                                      {tokens, (size_t)N * sizeof(int32_t), false},
                                      {wte.p, kern_bytes(wte, (size_t)V * (size_t)C), false}},
                3);
    if (!kern_shape_only(s)) { /* tokens: device memory, only an address in predict mode */
        kern_drain(s);         /* the ids as the work before this launch left them */
        check_tokens(tokens, N, V, "embedding forward");
    }
    kern_embedding_forward_slice(s, out, tokens, wte, 0, N, C, V);
}

void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C, int V) {
    kern_embedding_backward_check(s, dwte, dout, tokens, N, C, V);
    kern_access(s, "kernel embedding_backward",
                (const twin_access[]){{dwte.p, kern_bytes(dwte, (size_t)V * (size_t)C), true},
                                      {dout.p, kern_bytes(dout, (size_t)N * (size_t)C), false},
                                      {tokens, (size_t)N * sizeof(int32_t), false}},
                3);
    if (!kern_shape_only(s)) {
        kern_drain(s);
        check_tokens(tokens, N, V, "embedding backward");
    }
    kern_embedding_backward_slice(s, dwte, dout, tokens, 0, N, C, V);
}
