/* The kernel seam: every numeric kernel the Llama-3 engine needs, forward and backward.
 *
 * Resolved at link time: the files in sim/kern/ (twin: plain deterministic C, the oracle) or
 * cuda/kern_*.cu (CUDA; also built for MUSA through a name-mapping header).
 *
 * Conventions
 * - All pointers are device pointers; all tensors row-major and contiguous.
 * - Shapes: B micro-batch, T sequence, C hidden, NH query heads, KV query groups, D head dim,
 *   F ffn hidden, V vocab (this rank's slice), N = B*T token rows.
 * - tr_buf carries the element type (fp32 or bf16); arithmetic is fp32 whatever the storage.
 * - "accumulate" means the kernel adds into its output (gradients across micro-batches and
 *   residual branches); "overwrite" means it writes it.
 * - Twin kernels are deterministic: a fixed reduction order, no fast-math, no fused multiply-add
 *   contraction; same inputs give the same bits on any x86-64 machine.
 */
#ifndef TWINRUN_BASE_KERN_H
#define TWINRUN_BASE_KERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/fp8.h"
#include "twinrun/fp8_scaling.h"

/* ---- linear algebra -------------------------------------------------------------------- */

/* c[m,n] = alpha * op(a) @ op(b) + beta * c, fp32 accumulation.
 * op(a) is [m,k]: a is [m,k], or [k,m] when ta. op(b) is [k,n]: b is [k,n], or [n,k] when tb.
 * beta == 0 overwrites c (its old contents, even NaN, are ignored). */
void kern_gemm(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
               float beta);

/* ---- elementwise ------------------------------------------------------------------------- */

/* out[n] = a[n] + b[n] (out may alias a or b) */
void kern_add(dev_stream *s, tr_buf out, tr_buf a, tr_buf b, size_t n);
/* x[n] *= alpha */
void kern_scale(dev_stream *s, tr_buf x, float alpha, size_t n);
/* dst[n] = src[n], converting between element types (bf16 rounding is nearest-even) */
void kern_cast(dev_stream *s, tr_buf dst, tr_buf src, size_t n);
/* out[0] += sum(x[i]^2) in fp32 (a NaN or Inf in x shows up in out) */
void kern_sum_squares(dev_stream *s, float *out, tr_buf x, size_t n);

/* ---- embedding --------------------------------------------------------------------------- */

/* out[N,C] = wte[tokens[n], :] (overwrite). tokens [N] int32, each in [0, V). */
void kern_embedding_forward(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V);
/* dwte[V,C] += scatter of dout[N,C] by tokens (accumulate; rows added in order n = 0..N-1). */
void kern_embedding_backward(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C, int V);

/* ---- normalisation ----------------------------------------------------------------------- */

typedef enum kern_norm_kind { KERN_NORM_RMS = 0, KERN_NORM_LAYER = 1 } kern_norm_kind;

typedef struct kern_norm_desc {
    kern_norm_kind kind;
    float eps;
    bool zero_centered_gamma; /* --apply-layernorm-1p: the scale used is (1 + weight) */
} kern_norm_desc;

/* out[N,C] = norm(inp[N,C]) * gamma + bias (overwrite).
 * RMS:   out = inp * rstd * gamma,               rstd = 1/sqrt(mean(inp^2) + eps)
 * Layer: out = (inp - mean) * rstd * gamma + bias, rstd = 1/sqrt(var(inp) + eps)
 * gamma = weight, or 1 + weight with zero_centered_gamma. weight [C]; bias [C] (Layer only; p may be NULL).
 * mean [N] fp32 is written for Layer (may be NULL for RMS); rstd [N] fp32 always written. */
void kern_norm_forward(dev_stream *s, const kern_norm_desc *nd, tr_buf out, float *mean, float *rstd, tr_buf inp,
                       tr_buf weight, tr_buf bias, int N, int C);
/* dinp[N,C] += d/dinp (accumulate, so the residual stream's gradient flows through);
 * dweight[C] += ..., dbias[C] += ... (accumulate; dbias.p may be NULL). */
void kern_norm_backward(dev_stream *s, const kern_norm_desc *nd, tr_buf dinp, tr_buf dweight, tr_buf dbias, tr_buf dout,
                        tr_buf inp, tr_buf weight, const float *mean, const float *rstd, int N, int C);

/* ---- rotary position embedding ----------------------------------------------------------- */

typedef struct kern_rope_desc {
    float theta; /* --rotary-base */
    int rot_dim; /* rotated leading dims of each head: D * --rotary-percent, even */
} kern_rope_desc;

/* In place on x[B,T,H,D]: the first rot_dim dims of each head rotate with the rotate-half
 * convention (dim i pairs with i + rot_dim/2, i < rot_dim/2, inv_freq_i = theta^(-2i/rot_dim),
 * as Hugging Face and Megatron do); the rest pass through. positions [B*T] int32, or NULL for
 * position = t. Angles are computed in fp32 as cos/sin(pos * inv_freq_i) with inv_freq in fp32. */
void kern_rope_forward(dev_stream *s, const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B, int T, int H,
                       int D);
/* In place on dx[B,T,H,D]: the transpose (rotation by the negative angle). */
void kern_rope_backward(dev_stream *s, const kern_rope_desc *rd, tr_buf dx, const int32_t *positions, int B, int T,
                        int H, int D);

/* ---- attention --------------------------------------------------------------------------- */

/* Causal grouped-query attention, scale 1/sqrt(D). q [B,T,NH,D], k and v [B,T,KV,D]; query head h
 * reads group h / (NH/KV). out [B,T,NH,D] (overwrite); lse [B,NH,T] fp32, the log-sum-exp of each
 * query's scaled scores, kept for the backward pass (which recomputes the probabilities). */
void kern_attention_forward(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int T, int NH,
                            int KV, int D);
/* dq [B,T,NH,D], dk and dv [B,T,KV,D] (overwrite). */
void kern_attention_backward(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v,
                             tr_buf out, const float *lse, int B, int T, int NH, int KV, int D);

/* ---- MLP --------------------------------------------------------------------------------- */

/* h [N,2F]: each row is [gate (F) | up (F)], the output of the fused fc1 (HF gate_proj rows, then
 * up_proj rows). out [N,F] = silu(gate) * up (overwrite). */
void kern_swiglu_forward(dev_stream *s, tr_buf out, tr_buf h, int N, int F);
/* dh [N,2F] (overwrite) from dout [N,F] and h. */
void kern_swiglu_backward(dev_stream *s, tr_buf dh, tr_buf dout, tr_buf h, int N, int F);

/* ---- loss -------------------------------------------------------------------------------- */

/* losses [N] fp32 = logsumexp(logits[n,:]) - logits[n, targets[n]] (overwrite). logits [N,V]. */
void kern_cross_entropy_forward(dev_stream *s, float *losses, tr_buf logits, const int32_t *targets, int N, int V);
/* dlogits[N,V] = (softmax(logits[n,:]) - onehot(targets[n])) * dloss[n] (overwrite).
 * dlogits may alias logits (in place). dloss [N] fp32 carries the loss mask and the normaliser. */
void kern_cross_entropy_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const int32_t *targets,
                                 const float *dloss, int N, int V);

/* ---- tensor- and context-parallel pieces -------------------------------------------------
 * With tensor parallelism each rank holds a slice [vocab_start, vocab_start + V) of the padded
 * vocabulary (V is the slice's size); with context parallelism a rank holds some query positions and
 * sees the keys of the whole sequence. Megatron's vocab-parallel embedding and cross-entropy and the
 * all-gathered-K/V attention are built from these and the collectives in between. */

/* out[N,C] = wte[tokens[n] - vocab_start, :] for tokens inside the slice, 0 elsewhere (overwrite);
 * an all-reduce SUM over the tensor-parallel group completes the lookup. tokens in [0, vocab). */
void kern_embedding_forward_slice(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int vocab_start, int N,
                                  int C, int V);
/* dwte[V,C] += rows of dout for tokens inside the slice (accumulate, in order n = 0..N-1). */
void kern_embedding_backward_slice(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int vocab_start,
                                   int N, int C, int V);

/* Vocab-parallel cross-entropy in three passes around two all-reduces:
 * 1. row_max[n] = max_j logits[n, j] over the slice        -> all-reduce MAX over TP
 * 2. sum_exp[n] = sum_j exp(logits[n, j] - row_max[n]),
 *    target_logit[n] = logits[n, targets[n] - vocab_start] when the target is in the slice, else 0
 *                                                            -> all-reduce SUM over TP (both)
 * 3. losses[n] = log(sum_exp[n]) + row_max[n] - target_logit[n]
 * logits [N,V] (this slice); row_max, sum_exp, target_logit, losses [N] fp32 (overwrite).
 * Only the first V_real columns (0 <= V_real <= V) are vocabulary: the rest pad the vocabulary to a
 * multiple of --make-vocab-size-divisible-by x TP and take no part (not in the max or the sum, zero
 * gradient), as in Hugging Face's loss. V_real = V is the unpadded softmax, bit for bit. */
void kern_ce_slice_max(dev_stream *s, float *row_max, tr_buf logits, int N, int V, int V_real);
void kern_ce_slice_sums(dev_stream *s, float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,
                        const int32_t *targets, int vocab_start, int N, int V, int V_real);
void kern_ce_loss_from_stats(dev_stream *s, float *losses, const float *row_max, const float *sum_exp,
                             const float *target_logit, int N);
/* dlogits[n,j] = (exp(logits[n,j] - row_max[n]) / sum_exp[n] - [j + vocab_start == targets[n]]) * dloss[n]
 * for j < V_real and 0 for the padding columns (overwrite; may alias logits), with row_max and sum_exp
 * the all-reduced statistics. */
void kern_ce_slice_backward(dev_stream *s, tr_buf dlogits, tr_buf logits, const float *row_max, const float *sum_exp,
                            const int32_t *targets, int vocab_start, const float *dloss, int N, int V, int V_real);

/* Attention where queries and keys carry explicit positions (context parallelism): q [B,Tq,NH,D],
 * k and v [B,Tk,KV,D], q_pos [Tq] and k_pos [Tk] int32 (device); query i sees key j iff
 * k_pos[j] <= q_pos[i]; every query sees at least one key. out [B,Tq,NH,D], lse [B,NH,Tq] (overwrite).
 * With Tq = Tk and q_pos = k_pos = 0..T-1 it is kern_attention_forward. */
void kern_attention_forward_pos(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                                int D);
/* dq [B,Tq,NH,D], dk and dv [B,Tk,KV,D] (overwrite; a reduce-scatter over CP completes dk and dv). */
void kern_attention_backward_pos(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                 tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos, const int32_t *k_pos,
                                 int B, int Tq, int Tk, int NH, int KV, int D);

/* ---- initialisation ------------------------------------------------------------------------ */

/* How one parameter shard is initialised (twinrun/init_normal.h has the generator). */
typedef struct kern_init_desc {
    bool normal;         /* N(0, std) from the generator; false: every element is `constant` */
    float constant;      /* 1 (norm weights) or 0 */
    uint64_t key;        /* tr_init_key(seed, name) */
    double std;          /* already scaled for o_proj/down_proj */
    int64_t cols;        /* local columns; 1 for a 1-D parameter */
    int64_t gcols;       /* global columns; 1 for 1-D */
    int64_t col0;        /* global column of local column 0 (row-parallel shards) */
    int nseg;            /* 1, or 2 for the fused fc1 (gate rows, then up rows) */
    int64_t seg_local1;  /* local row where the second segment starts (nseg 2) */
    int64_t seg_global0; /* global row of local row 0 */
    int64_t seg_global1; /* global row of local row seg_local1 (nseg 2) */
    int64_t first;       /* local element that out[0] holds: a distributed optimizer's shard may start
                            inside the parameter (0: the whole shard from its start) */
} kern_init_desc;

/* out[n] fp32 (overwrite): out[i] gets (float)tr_init_normal_double(key, global index of local element
 * first + i, std), bit for bit the host's value, or the constant. */
void kern_init_param(dev_stream *s, const kern_init_desc *d, float *out, size_t n);

/* ---- optimizer --------------------------------------------------------------------------- */

typedef struct kern_adamw_desc {
    float lr;
    float beta1, beta2, eps;
    float weight_decay; /* 0 for 1-D parameters (Megatron's rule) */
    float grad_scale;   /* multiplies the gradient first: the clipping coefficient, 1 if none */
    int step;           /* 1-based, for bias correction */
} kern_adamw_desc;

/* Decoupled AdamW on n elements, as torch.optim.AdamW / Megatron's FusedAdam:
 *   g = grad * grad_scale; m = b1 m + (1-b1) g; v = b2 v + (1-b2) g^2
 *   master = master * (1 - lr wd) - lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 *   model = master (cast to model's type; model.p may equal master for fp32 training).
 * The master is either master [n] fp32 (master_rem NULL), or, master NULL, model's bf16 [n] joined
 * with master_rem [n] (twinrun/master_split.h: model then gets the split's rounding, not the cast's).
 * m, v [n] fp32; grad [n] fp32 or bf16. */
void kern_adamw_update(dev_stream *s, const kern_adamw_desc *ad, float *master, int16_t *master_rem, tr_buf model,
                       tr_buf grad, float *m, float *v, size_t n);

/* model [n] bf16 and rem [n] (NULL: model only): w [n] fp32 split as twinrun/master_split.h does. */
void kern_master_split(dev_stream *s, tr_buf model, int16_t *rem, const float *w, size_t n);

/* ---- multi-tensor forms (the whole parameter buffer in one or a few launches) ------------ */

/* Elements [begin, end) of buffers indexed alike: one parameter of the buffer a model keeps its
 * parameters in, back to back, with the weight decay the optimizer gives it. Ranges ascend and do
 * not overlap. */
typedef struct kern_range {
    size_t begin, end;
    float weight_decay;
} kern_range;

/* out[0] += sum of x[i]^2 over each range in turn, the last range first: the same as kern_sum_squares
 * range by range, from the last to the first. Descending, as a backward pass finishes the parameters:
 * the grad norm sums each layer's gradients as soon as they are written, and one call over every range
 * gives the same bits as calls over consecutive pieces of them, the highest piece first. */
void kern_sum_squares_ranges(dev_stream *s, float *out, tr_buf x, const kern_range *ranges, int nranges);
/* kern_adamw_update of every range (each with its own weight decay; ad->weight_decay is unused);
 * master (or master_rem), model, grad, m and v are all indexed by the ranges' element indices. */
void kern_adamw_update_ranges(dev_stream *s, const kern_adamw_desc *ad, const kern_range *ranges, int nranges,
                              float *master, int16_t *master_rem, tr_buf model, tr_buf grad, float *m, float *v);
/* ---- FP8 (per-tensor delayed scaling; twinrun/fp8.h, twinrun/fp8_scaling.h, docs/fp8.md) ------
 * A linear layer's GEMMs in FP8, as Transformer Engine's DelayedScaling runs them: each operand is
 * quantised with its tensor's scale (from the amax history of earlier passes), the product of the FP8
 * values is accumulated in fp32 and multiplied by both operands' scale_inv. Scales, histories and
 * amaxes live on the device so no step waits for the host. */

/* q[n] = fp8(x[n] * scale[0]) in fmt (fp32 product, then round to nearest even, saturating:
 * tr_fp8_from_f32); when amax is not NULL, amax[0] = max(amax[0], max |x[i]|) (fmaxf: a NaN in x is
 * skipped, an infinity counts) — several tensors that share a scale may accumulate into one amax.
 * x [n] fp32 or bf16; q [n] bytes. */
void kern_fp8_quantize(dev_stream *s, uint8_t *q, float *amax, tr_buf x, const float *scale, size_t n,
                       tr_fp8_format fmt);

/* kern_fp8_quantize's bytes of x [rows, cols] written as q [rows, cols] and as its transpose qt
 * [cols, rows], either of them NULL (not both): Hopper's FP8 GEMMs take both operands K-major, so a
 * backward pass's GEMMs read transposes, and one pass over x writes them (Transformer Engine's
 * cast-transpose) where a cast and a byte transpose would read the bytes again. amax as
 * kern_fp8_quantize's. x fp32 or bf16. */
void kern_fp8_cast_transpose(dev_stream *s, uint8_t *q, uint8_t *qt, float *amax, tr_buf x, const float *scale,
                             int rows, int cols, tr_fp8_format fmt);

/* qt [cols, rows] = q [rows, cols]^T, bytes: an FP8 tensor kept in FP8 (--fp8-param-gather's weights)
 * in the K-major layout another GEMM reads, without the bf16 tensor it was cast from. q and qt distinct. */
void kern_fp8_transpose(dev_stream *s, uint8_t *qt, const uint8_t *q, int rows, int cols);

/* One FP8 operand of a GEMM: its bytes, their format and the factor that undoes their scale. */
typedef struct kern_fp8_operand {
    const uint8_t *p;
    tr_fp8_format fmt;
    const float *scale_inv; /* [1] device: 1 / the scale the bytes were quantised with */
} kern_fp8_operand;

/* c[m,n] = alpha * (a.scale_inv[0] * b.scale_inv[0]) * (op(a) @ op(b)) + beta * c: the products of the
 * FP8 values summed in fp32 (exact in the twin's double), op as for kern_gemm (a [m,k], or [k,m] when
 * ta; b [k,n], or [n,k] when tb; ta = false, tb = true is the layout a GPU takes as it is, any other is
 * transposed first). c fp32 or bf16; beta == 0 overwrites c. fast_accum: the forward pass's GEMM, which
 * a GPU may sum in the tensor cores' own accumulator (Transformer Engine's fprop); the gradients' GEMMs
 * pass false (its split accumulator, partial sums promoted to fp32). The twin's sum is exact either way. */
void kern_gemm_fp8(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k, bool ta,
                   bool tb, float alpha, float beta, bool fast_accum);

/* The end of a pass for n tensors sharing a format: for each t, tr_fp8_scale_update of its history
 * hist[i * n + t], i = 0..len-1 (entry 0 this pass's amax) and of scale[t], scale_inv[t] — the same
 * bits on both builds. hist [len, n], scale and scale_inv [n] fp32 (device). */
void kern_fp8_scale_update(dev_stream *s, float *hist, float *scale, float *scale_inv, int n, int len,
                           tr_fp8_amax_algo algo, tr_fp8_format fmt, int margin);

/* ---- the list --------------------------------------------------------------------------
 * Every kernel above, once, as X(name, (parameters)): the backends' argument checks
 * (twinrun/kern_check.h declares kern_X_check with the same parameters), the GPU oracle's renamed twin
 * kernels (tests/tools/kern_oracle.c; cuda/CMakeLists.txt reads the names from here) and
 * the compiler's check that this list and the prototypes above agree (base/kern/kern_check.c)
 * expand it. A new kernel goes above and here. */
#define TR_KERNELS(X)                                                                                                  \
    X(kern_gemm,                                                                                                       \
      (dev_stream * s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha, float beta))  \
    X(kern_add, (dev_stream * s, tr_buf out, tr_buf a, tr_buf b, size_t n))                                            \
    X(kern_scale, (dev_stream * s, tr_buf x, float alpha, size_t n))                                                   \
    X(kern_cast, (dev_stream * s, tr_buf dst, tr_buf src, size_t n))                                                   \
    X(kern_sum_squares, (dev_stream * s, float *out, tr_buf x, size_t n))                                              \
    X(kern_embedding_forward, (dev_stream * s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V))    \
    X(kern_embedding_backward, (dev_stream * s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C, int V)) \
    X(kern_norm_forward, (dev_stream * s, const kern_norm_desc *nd, tr_buf out, float *mean, float *rstd, tr_buf inp,  \
                          tr_buf weight, tr_buf bias, int N, int C))                                                   \
    X(kern_norm_backward,                                                                                              \
      (dev_stream * s, const kern_norm_desc *nd, tr_buf dinp, tr_buf dweight, tr_buf dbias, tr_buf dout, tr_buf inp,   \
       tr_buf weight, const float *mean, const float *rstd, int N, int C))                                             \
    X(kern_rope_forward,                                                                                               \
      (dev_stream * s, const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B, int T, int H, int D))      \
    X(kern_rope_backward,                                                                                              \
      (dev_stream * s, const kern_rope_desc *rd, tr_buf dx, const int32_t *positions, int B, int T, int H, int D))     \
    X(kern_attention_forward,                                                                                          \
      (dev_stream * s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int T, int NH, int KV, int D))     \
    X(kern_attention_backward, (dev_stream * s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,      \
                                tr_buf v, tr_buf out, const float *lse, int B, int T, int NH, int KV, int D))          \
    X(kern_swiglu_forward, (dev_stream * s, tr_buf out, tr_buf h, int N, int F))                                       \
    X(kern_swiglu_backward, (dev_stream * s, tr_buf dh, tr_buf dout, tr_buf h, int N, int F))                          \
    X(kern_cross_entropy_forward,                                                                                      \
      (dev_stream * s, float *losses, tr_buf logits, const int32_t *targets, int N, int V))                            \
    X(kern_cross_entropy_backward,                                                                                     \
      (dev_stream * s, tr_buf dlogits, tr_buf logits, const int32_t *targets, const float *dloss, int N, int V))       \
    X(kern_embedding_forward_slice,                                                                                    \
      (dev_stream * s, tr_buf out, const int32_t *tokens, tr_buf wte, int vocab_start, int N, int C, int V))           \
    X(kern_embedding_backward_slice,                                                                                   \
      (dev_stream * s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int vocab_start, int N, int C, int V))         \
    X(kern_ce_slice_max, (dev_stream * s, float *row_max, tr_buf logits, int N, int V, int V_real))                    \
    X(kern_ce_slice_sums, (dev_stream * s, float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,   \
                           const int32_t *targets, int vocab_start, int N, int V, int V_real))                         \
    X(kern_ce_loss_from_stats,                                                                                         \
      (dev_stream * s, float *losses, const float *row_max, const float *sum_exp, const float *target_logit, int N))   \
    X(kern_ce_slice_backward,                                                                                          \
      (dev_stream * s, tr_buf dlogits, tr_buf logits, const float *row_max, const float *sum_exp,                      \
       const int32_t *targets, int vocab_start, const float *dloss, int N, int V, int V_real))                         \
    X(kern_attention_forward_pos,                                                                                      \
      (dev_stream * s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, const int32_t *q_pos,                     \
       const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D))                                            \
    X(kern_attention_backward_pos,                                                                                     \
      (dev_stream * s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v, tr_buf out,         \
       const float *lse, const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D))    \
    X(kern_adamw_update, (dev_stream * s, const kern_adamw_desc *ad, float *master, int16_t *master_rem, tr_buf model, \
                          tr_buf grad, float *m, float *v, size_t n))                                                  \
    X(kern_master_split, (dev_stream * s, tr_buf model, int16_t * rem, const float *w, size_t n))                      \
    X(kern_init_param, (dev_stream * s, const kern_init_desc *d, float *out, size_t n))                                \
    X(kern_sum_squares_ranges, (dev_stream * s, float *out, tr_buf x, const kern_range *ranges, int nranges))          \
    X(kern_adamw_update_ranges, (dev_stream * s, const kern_adamw_desc *ad, const kern_range *ranges, int nranges,     \
                                 float *master, int16_t *master_rem, tr_buf model, tr_buf grad, float *m, float *v))   \
    X(kern_fp8_quantize,                                                                                               \
      (dev_stream * s, uint8_t * q, float *amax, tr_buf x, const float *scale, size_t n, tr_fp8_format fmt))           \
    X(kern_fp8_cast_transpose, (dev_stream * s, uint8_t * q, uint8_t * qt, float *amax, tr_buf x, const float *scale,  \
                                int rows, int cols, tr_fp8_format fmt))                                                \
    X(kern_fp8_transpose, (dev_stream * s, uint8_t * qt, const uint8_t *q, int rows, int cols))                        \
    X(kern_gemm_fp8, (dev_stream * s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k, bool ta,  \
                      bool tb, float alpha, float beta, bool fast_accum))                                              \
    X(kern_fp8_scale_update, (dev_stream * s, float *hist, float *scale, float *scale_inv, int n, int len,             \
                              tr_fp8_amax_algo algo, tr_fp8_format fmt, int margin))

#endif
