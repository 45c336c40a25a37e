/* Vocab-parallel token embedding for the twin: this rank's slice [vocab_start, vocab_start + V) of
 * the table. The forward gathers the rows of the tokens inside the slice and writes zeros for the
 * others (the tensor-parallel all-reduce SUM adds the one rank that holds each token); the
 * backward scatter-adds only the rows of tokens inside the slice. kern_embedding.c is the case
 * vocab_start = 0 with every token inside.
 *
 * The backward must add rows in order n = 0..N-1 for every vocabulary row. Rather than a V x C
 * double accumulator (too large for a real vocabulary), the slice's token rows are ordered by
 * (token, n) and each distinct token's rows are summed in double, starting from dwte's old value,
 * in ascending n; one rounding per touched element.
 *
 * A slice cannot tell a token id past the end of the whole vocabulary from one held by another
 * rank, so only negative ids are caught here; ids >= the padded vocabulary must be checked where the
 * whole vocabulary is known (the full-vocabulary kernels, or the caller before the lookup). */
#include "kern_cpu.h"
#include "twinrun/kern.h"

/* True when token sits in [vocab_start, vocab_start + V); 64-bit so no sum can overflow. */
static int in_slice(int32_t token, int vocab_start, int V) {
    const int64_t local = (int64_t)token - (int64_t)vocab_start;
    return local >= 0 && local < (int64_t)V;
}

/* The token ids this twin can read (the arguments were checked by kern_X_check). */
static void check_tokens(const int32_t *tokens, int N, const char *who) {
    for (int n = 0; n < N; n++) {
        if (tokens[n] < 0)
            tr_fatal("%s: token id %d at position %d is negative; check that --vocab-size / the tokenizer matches "
                     "the data",
                     who, (int)tokens[n], n);
    }
}

/* Both directions' arguments. */
typedef struct embed_args {
    tr_buf out, wte;       /* forward: out [N, C], wte [V, C]; backward: dwte in wte, dout in out */
    const int32_t *tokens; /* [N] device */
    int vocab_start, N, C, V;
} embed_args;

static void embedding_forward_body(void *args) {
    const embed_args *a = args;
    const int32_t *tokens = a->tokens;
    const int vocab_start = a->vocab_start, N = a->N, C = a->C, V = a->V;
    for (int n = 0; n < N; n++) {
        const size_t dst = (size_t)n * (size_t)C;
        if (!in_slice(tokens[n], vocab_start, V)) {
            for (int c = 0; c < C; c++) st(a->out, dst + (size_t)c, 0.0f);
            continue;
        }
        const size_t src = (size_t)(tokens[n] - vocab_start) * (size_t)C;
        for (int c = 0; c < C; c++) st(a->out, dst + (size_t)c, ld(a->wte, src + (size_t)c));
    }
}

void kern_embedding_forward_slice(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int vocab_start, int N,
                                  int C, int V) {
    kern_cost(s, TWIN_K_EMBEDDING_FWD, 0.0, 2.0 * N * C * tr_dtype_size(out.dt), TR_F32);
    kern_embedding_forward_slice_check(s, out, tokens, wte, vocab_start, N, C, V);
    kern_access(s, "kernel embedding_forward_slice",
                (const twin_access[]){{out.p, kern_bytes(out, (size_t)N * (size_t)C), true},
                                      {tokens, (size_t)N * sizeof(int32_t), false},
                                      {wte.p, kern_bytes(wte, (size_t)V * (size_t)C), false}},
                3);
    if (kern_shape_only(s)) return;
    kern_drain(s); /* the ids as the work before this launch left them */
    check_tokens(tokens, N, "embedding forward");
    embed_args a = {out, wte, tokens, vocab_start, N, C, V};
    kern_submit(s, embedding_forward_body, &a, sizeof a);
}

typedef struct token_row {
    int32_t token; /* local row in the slice */
    int n;
} token_row;

/* Total order on (token, n): qsort's instability cannot matter since no two keys are equal. */
static int token_row_cmp(const void *pa, const void *pb) {
    const token_row *a = pa, *b = pb;
    if (a->token != b->token) return a->token < b->token ? -1 : 1;
    return (a->n > b->n) - (a->n < b->n);
}

static void embedding_backward_body(void *args) {
    const embed_args *a = args;
    const tr_buf dwte = a->wte, dout = a->out;
    const int32_t *tokens = a->tokens;
    const int vocab_start = a->vocab_start, N = a->N, C = a->C, V = a->V;

    token_row *rows = kern_scratch((size_t)N, sizeof *rows, "embedding row order"); /* [<= N] */
    int count = 0;
    for (int n = 0; n < N; n++)
        if (in_slice(tokens[n], vocab_start, V)) rows[count++] = (token_row){tokens[n] - vocab_start, n};
    qsort(rows, (size_t)count, sizeof *rows, token_row_cmp);

    double *acc = kern_scratch((size_t)C, sizeof *acc, "embedding row accumulator"); /* [C] */
    for (int i = 0; i < count;) {
        const int32_t tok = rows[i].token;
        const size_t wrow = (size_t)tok * (size_t)C;
        ld_row_d(acc, dwte, wrow, (size_t)C);
        for (; i < count && rows[i].token == tok; i++) {
            const size_t drow = (size_t)rows[i].n * (size_t)C;
            for (int c = 0; c < C; c++) acc[c] += ld(dout, drow + (size_t)c);
        }
        for (int c = 0; c < C; c++) st_d(dwte, wrow + (size_t)c, acc[c]);
    }
    free(acc);
    free(rows);
}

void kern_embedding_backward_slice(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int vocab_start,
                                   int N, int C, int V) {
    kern_cost(s, TWIN_K_EMBEDDING_BWD, (double)N * C, 3.0 * N * C * tr_dtype_size(dwte.dt), TR_F32);
    kern_embedding_backward_slice_check(s, dwte, dout, tokens, vocab_start, N, C, V);
    kern_access(s, "kernel embedding_backward_slice",
                (const twin_access[]){{dwte.p, kern_bytes(dwte, (size_t)V * (size_t)C), true},
                                      {dout.p, kern_bytes(dout, (size_t)N * (size_t)C), false},
                                      {tokens, (size_t)N * sizeof(int32_t), false}},
                3);
    if (kern_shape_only(s)) return;
    kern_drain(s);
    check_tokens(tokens, N, "embedding backward");
    embed_args a = {dout, dwte, tokens, vocab_start, N, C, V};
    kern_submit(s, embedding_backward_body, &a, sizeof a);
}
