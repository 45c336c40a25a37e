/* Token embedding for the twin: gather rows forward, scatter-add rows backward.
 *
 * The backward must add rows in order n = 0..N-1 for every vocabulary row. Rather than a V x C
 * double accumulator (too large for a real vocabulary), the N token rows are ordered by
 * (token, n) and each distinct token's rows are summed in double, starting from dwte's old value,
 * in ascending n; one rounding per touched element. */
#include <stdio.h>

#include "kern_cpu.h"
#include "twinrun/kern.h"

/* Fatal with the offending token, its position and the vocabulary size: a bad token id is
 * almost always a tokenizer/vocab-size mismatch, so say so. */
static void check_tokens(const int32_t *tokens, int N, int V, const char *who) {
    for (int n = 0; n < N; n++) {
        if (tokens[n] < 0 || tokens[n] >= V)
            tr_fatal("%s: token id %d at position %d is outside the vocabulary [0, %d); check that "
                     "--vocab-size / the tokenizer matches the data",
                     who, (int)tokens[n], n, V);
    }
}

void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V) {
    kern_cost(s, 0.0, 2.0 * N * C * tr_dtype_size(out.dt), TR_F32);
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding needs N, C, V > 0");
    TR_CHECK(tokens != NULL, "embedding needs token ids");
    kern_check_float_buf(out, "embedding out");
    kern_check_float_buf(wte, "embedding wte");
    check_tokens(tokens, N, V, "embedding forward");
    for (int n = 0; n < N; n++) {
        const size_t src = (size_t)tokens[n] * (size_t)C, dst = (size_t)n * (size_t)C;
        for (int c = 0; c < C; c++) st(out, dst + (size_t)c, ld(wte, src + (size_t)c));
    }
}

typedef struct token_row {
    int32_t token;
    int n;
} token_row;

/* Total order on (token, n): qsort's instability cannot matter since no two keys are equal. */
static int token_row_cmp(const void *pa, const void *pb) {
    const token_row *a = pa, *b = pb;
    if (a->token != b->token) return a->token < b->token ? -1 : 1;
    return (a->n > b->n) - (a->n < b->n);
}

void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C, int V) {
    kern_cost(s, (double)N * C, 3.0 * N * C * tr_dtype_size(dwte.dt), TR_F32);
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding needs N, C, V > 0");
    TR_CHECK(tokens != NULL, "embedding needs token ids");
    kern_check_float_buf(dwte, "embedding dwte");
    kern_check_float_buf(dout, "embedding dout");
    check_tokens(tokens, N, V, "embedding backward");

    token_row *rows = kern_scratch((size_t)N, sizeof *rows, "embedding row order"); /* [N] */
    for (int n = 0; n < N; n++) rows[n] = (token_row){tokens[n], n};
    qsort(rows, (size_t)N, sizeof *rows, token_row_cmp);

    double *acc = kern_scratch((size_t)C, sizeof *acc, "embedding row accumulator"); /* [C] */
    for (int i = 0; i < N;) {
        const int32_t tok = rows[i].token;
        const size_t wrow = (size_t)tok * (size_t)C;
        ld_row_d(acc, dwte, wrow, (size_t)C);
        for (; i < N && rows[i].token == tok; i++) {
            const size_t drow = (size_t)rows[i].n * (size_t)C;
            for (int c = 0; c < C; c++) acc[c] += ld(dout, drow + (size_t)c);
        }
        for (int c = 0; c < C; c++) st_d(dwte, wrow + (size_t)c, acc[c]);
    }
    free(acc);
    free(rows);
}
