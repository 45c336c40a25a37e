/* The input embedding's lookup of a pending AdamW update, for the twin (twinrun/kern.h,
 * kern_embedding_forward_adamw): each looked-up element of the slice's table updated as kern_adamw.c
 * would update it (kern_adamw_math.h, the same operations), rounded into the model's type as that
 * update stores it, then stored into out as kern_embedding_slice.c's lookup stores the model's value.
 * Nothing is written back: the step ahead's update of the whole table follows on its own stream. */
#include "kern_adamw_math.h"
#include "kern_cpu.h"
#include "twinrun/kern.h"
#include "twinrun/kern_check.h"
#include "twinrun/master_split.h"

typedef struct embedding_adamw_args {
    kern_adamw_desc ad; /* copied: the caller's descriptor may be gone when the body runs */
    tr_buf out, wte, grad;
    const float *master, *m, *v; /* [V, C] (master NULL: rem) */
    const int16_t *rem;          /* [V, C] or NULL */
    const int32_t *tokens;       /* [N] */
    int vocab_start, N, C, V;
} embedding_adamw_args;

/* The value the model's copy of element i holds after the update (kern_adamw.c's stores). */
static float updated_model_value(const embedding_adamw_args *a, const twin_adamw_consts *k, size_t i) {
    float m = a->m[i], v = a->v[i];
    if (a->rem) {
        const uint16_t hi0 = ((const uint16_t *)a->wte.p)[i];
        const float w = twin_adamw_element(k, ld(a->grad, i), &m, &v, tr_master_join(hi0, a->rem[i]));
        uint16_t hi;
        int16_t r;
        tr_master_split(w, &hi, &r);
        return tr_bf16_to_f32(hi);
    }
    const float w = twin_adamw_element(k, ld(a->grad, i), &m, &v, a->master[i]);
    if (a->wte.p == (const void *)a->master) return w; /* fp32 training: the master is the model */
    float one[1];
    uint16_t one16[1];
    const tr_buf cell = tr_buf_make(a->wte.dt == TR_BF16 ? (void *)one16 : (void *)one, a->wte.dt);
    st(cell, 0, w);
    return ld(cell, 0);
}

static void embedding_adamw_body(void *args) {
    const embedding_adamw_args *a = args;
    const twin_adamw_consts k = twin_adamw_consts_of(&a->ad);
    const int C = a->C;
    for (int n = 0; n < a->N; n++) {
        const size_t dst = (size_t)n * (size_t)C;
        const int64_t row = (int64_t)a->tokens[n] - (int64_t)a->vocab_start;
        const bool ours = row >= 0 && row < (int64_t)a->V;
        for (int c = 0; c < C; c++)
            st(a->out, dst + (size_t)c, ours ? updated_model_value(a, &k, (size_t)row * (size_t)C + (size_t)c) : 0.0f);
    }
}

void kern_embedding_forward_adamw(dev_stream *s, tr_buf out, const int32_t *tokens, const kern_adamw_desc *ad,
                                  const float *master, const int16_t *master_rem, tr_buf wte, tr_buf grad,
                                  const float *m, const float *v, int vocab_start, int N, int C, int V) {
    /* per looked-up element: m, v, grad and the master (4 bytes: fp32, or remainder and model) read; out
     * written */
    const double nc = (double)N * (double)C;
    kern_cost(s, TWIN_K_ADAMW, 16.0 * nc, nc * (12.0 + tr_dtype_size(grad.dt) + tr_dtype_size(out.dt)), TR_F32);
    kern_embedding_forward_adamw_check(s, out, tokens, ad, master, master_rem, wte, grad, m, v, vocab_start, N, C, V);
    const size_t vc = (size_t)V * (size_t)C;
    kern_access(s, "kernel embedding_forward_adamw",
                (const twin_access[]){{out.p, kern_bytes(out, (size_t)N * (size_t)C), true},
                                      {tokens, (size_t)N * sizeof(int32_t), false},
                                      {master, master ? vc * sizeof *master : 0, false},
                                      {master_rem, master_rem ? vc * sizeof *master_rem : 0, false},
                                      {wte.p, kern_bytes(wte, vc), false},
                                      {grad.p, kern_bytes(grad, vc), false},
                                      {m, vc * sizeof *m, false},
                                      {v, vc * sizeof *v, false}},
                8);
    if (kern_shape_only(s)) return;
    kern_drain(s); /* the ids as the work before this launch left them */
    for (int n = 0; n < N; n++)
        if (tokens[n] < 0)
            tr_fatal("embedding forward: token id %d at position %d is negative; check that --vocab-size / the "
                     "tokenizer matches the data",
                     (int)tokens[n], n);
    embedding_adamw_args a = {*ad, out, wte, grad, master, m, v, master_rem, tokens, vocab_start, N, C, V};
    kern_submit(s, embedding_adamw_body, &a, sizeof a);
}
