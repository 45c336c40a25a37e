/* The kernel contract both backends check (twinrun/kern_check.h): one function per kernel of
 * TR_KERNELS, with the kernel's own parameters. Checks that need the contents of device memory
 * (token ids, targets, positions) are the backends' own. */
#include "twinrun/kern_check.h"

#include <stdbool.h>

#include "twinrun/err.h"

/* The list and the documented prototypes of twinrun/kern.h agree: a difference is a conflicting
 * redeclaration here. */
#define TR_KERNEL_DECLARE(name, params) void name params;
TR_KERNELS(TR_KERNEL_DECLARE)
#undef TR_KERNEL_DECLARE

void kern_check_float_buf(tr_buf b, const char *what) {
    if (b.dt != TR_F32 && b.dt != TR_BF16)
        tr_fatal("kernel: %s has element type %s; kernels take fp32 or bf16 tensors", what, tr_dtype_name(b.dt));
    if (!b.p) tr_fatal("kernel: %s is a NULL device pointer", what);
}

/* ---- linear algebra and elementwise ------------------------------------------------------ */

void kern_gemm_check(dev_stream *s, tr_buf c, tr_buf a, tr_buf b, int m, int n, int k, bool ta, bool tb, float alpha,
                     float beta) {
    (void)s, (void)ta, (void)tb, (void)alpha, (void)beta;
    TR_CHECK(m > 0 && n > 0 && k > 0, "gemm dimensions m, n, k must be positive");
    kern_check_float_buf(c, "gemm c");
    kern_check_float_buf(a, "gemm a");
    kern_check_float_buf(b, "gemm b");
}

/* n == 0 is a no-op: nothing is read, so nothing is checked. */
void kern_add_check(dev_stream *s, tr_buf out, tr_buf a, tr_buf b, size_t n) {
    (void)s;
    if (n == 0) return;
    kern_check_float_buf(out, "add out");
    kern_check_float_buf(a, "add a");
    kern_check_float_buf(b, "add b");
}

void kern_scale_check(dev_stream *s, tr_buf x, float alpha, size_t n) {
    (void)s, (void)alpha;
    if (n == 0) return;
    kern_check_float_buf(x, "scale x");
}

/* Between equal element types a cast is a bit copy, int32 included. */
void kern_cast_check(dev_stream *s, tr_buf dst, tr_buf src, size_t n) {
    (void)s;
    if (n == 0) return;
    TR_CHECK(dst.p && src.p, "cast needs non-NULL source and destination");
    if (dst.dt == src.dt) return;
    kern_check_float_buf(dst, "cast dst");
    kern_check_float_buf(src, "cast src");
}

void kern_sum_squares_check(dev_stream *s, float *out, tr_buf x, size_t n) {
    (void)s;
    TR_CHECK(out != NULL, "sum_squares needs an output scalar");
    if (n == 0) return;
    kern_check_float_buf(x, "sum_squares x");
}

/* ---- embedding --------------------------------------------------------------------------- */

static void check_embedding(const int32_t *tokens, int vocab_start, int N, int C, int V) {
    TR_CHECK(N > 0 && C > 0 && V > 0, "embedding needs N, C, V > 0");
    TR_CHECK(tokens != NULL, "embedding needs token ids");
    TR_CHECK(vocab_start >= 0, "embedding slice: vocab_start is a row of the padded vocabulary, so >= 0");
}

void kern_embedding_forward_slice_check(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int vocab_start,
                                        int N, int C, int V) {
    (void)s;
    check_embedding(tokens, vocab_start, N, C, V);
    kern_check_float_buf(out, "embedding out");
    kern_check_float_buf(wte, "embedding wte");
}

void kern_embedding_backward_slice_check(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens,
                                         int vocab_start, int N, int C, int V) {
    (void)s;
    check_embedding(tokens, vocab_start, N, C, V);
    kern_check_float_buf(dwte, "embedding dwte");
    kern_check_float_buf(dout, "embedding dout");
}

void kern_embedding_forward_check(dev_stream *s, tr_buf out, const int32_t *tokens, tr_buf wte, int N, int C, int V) {
    kern_embedding_forward_slice_check(s, out, tokens, wte, 0, N, C, V);
}

void kern_embedding_backward_check(dev_stream *s, tr_buf dwte, tr_buf dout, const int32_t *tokens, int N, int C,
                                   int V) {
    kern_embedding_backward_slice_check(s, dwte, dout, tokens, 0, N, C, V);
}

/* ---- normalisation and rotary embedding -------------------------------------------------- */

static bool check_norm(const kern_norm_desc *nd, int N, int C) {
    TR_CHECK(nd != NULL, "norm needs a descriptor");
    TR_CHECK(nd->kind == KERN_NORM_RMS || nd->kind == KERN_NORM_LAYER, "norm kind must be RMS or Layer");
    TR_CHECK(N > 0 && C > 0, "norm needs N and C positive");
    TR_CHECK(nd->eps >= 0.0f, "norm epsilon must not be negative; check --norm-epsilon");
    return nd->kind == KERN_NORM_LAYER;
}

void kern_norm_forward_check(dev_stream *s, const kern_norm_desc *nd, tr_buf out, float *mean, float *rstd, tr_buf inp,
                             tr_buf weight, tr_buf bias, int N, int C) {
    (void)s;
    const bool layer = check_norm(nd, N, C);
    kern_check_float_buf(out, "norm out");
    kern_check_float_buf(inp, "norm inp");
    kern_check_float_buf(weight, "norm weight");
    TR_CHECK(rstd != NULL, "norm forward always writes rstd");
    TR_CHECK(!layer || mean != NULL, "LayerNorm forward writes mean; pass a [N] fp32 buffer");
    TR_CHECK(layer || bias.p == NULL, "RMSNorm has no bias; pass tr_buf_none()");
    if (bias.p) kern_check_float_buf(bias, "norm bias");
}

void kern_norm_backward_check(dev_stream *s, const kern_norm_desc *nd, tr_buf dinp, tr_buf dweight, tr_buf dbias,
                              tr_buf dout, tr_buf inp, tr_buf weight, const float *mean, const float *rstd, int N,
                              int C) {
    (void)s;
    const bool layer = check_norm(nd, N, C);
    kern_check_float_buf(dinp, "norm dinp");
    kern_check_float_buf(dweight, "norm dweight");
    kern_check_float_buf(dout, "norm dout");
    kern_check_float_buf(inp, "norm inp");
    kern_check_float_buf(weight, "norm weight");
    TR_CHECK(rstd != NULL, "norm backward needs the forward's rstd");
    TR_CHECK(!layer || mean != NULL, "LayerNorm backward needs the forward's mean");
    TR_CHECK(layer || dbias.p == NULL, "RMSNorm has no bias gradient; pass tr_buf_none()");
    if (dbias.p) kern_check_float_buf(dbias, "norm dbias");
}

static void check_rope(const kern_rope_desc *rd, tr_buf x, int B, int T, int H, int D) {
    TR_CHECK(rd != NULL, "rope needs a descriptor");
    TR_CHECK(B > 0 && T > 0 && H > 0 && D > 0, "rope needs B, T, H and D positive");
    TR_CHECK(rd->rot_dim > 0 && rd->rot_dim % 2 == 0, "rope rot_dim must be even and positive; check --rotary-percent");
    TR_CHECK(rd->rot_dim <= D, "rope rot_dim exceeds the head dim; check --rotary-percent and --kv-channels");
    TR_CHECK(rd->theta > 0.0f, "rope theta must be positive; check --rotary-base");
    kern_check_float_buf(x, "rope x");
}

void kern_rope_forward_check(dev_stream *s, const kern_rope_desc *rd, tr_buf x, const int32_t *positions, int B, int T,
                             int H, int D) {
    (void)s, (void)positions;
    check_rope(rd, x, B, T, H, D);
}

void kern_rope_backward_check(dev_stream *s, const kern_rope_desc *rd, tr_buf dx, const int32_t *positions, int B,
                              int T, int H, int D) {
    (void)s, (void)positions;
    check_rope(rd, dx, B, T, H, D);
}

/* ---- attention --------------------------------------------------------------------------- */

static void check_attention(int B, int Tq, int Tk, int NH, int KV, int D) {
    TR_CHECK(B > 0 && Tq > 0 && Tk > 0 && NH > 0 && KV > 0 && D > 0, "attention needs B, T, NH, KV, D > 0");
    TR_CHECK(NH % KV == 0, "attention heads must be a multiple of query groups (--num-query-groups)");
}

static void check_attention_forward_bufs(tr_buf out, const float *lse, tr_buf q, tr_buf k, tr_buf v) {
    kern_check_float_buf(out, "attention out");
    kern_check_float_buf(q, "attention q");
    kern_check_float_buf(k, "attention k");
    kern_check_float_buf(v, "attention v");
    TR_CHECK(lse != NULL, "attention forward writes lse[B, NH, Tq]");
}

/* out is not read by the twin, which forms sum(p * dp) exactly; the CUDA kernel checks it itself. */
static void check_attention_backward_bufs(tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k, tr_buf v,
                                          const float *lse) {
    kern_check_float_buf(dq, "attention dq");
    kern_check_float_buf(dk, "attention dk");
    kern_check_float_buf(dv, "attention dv");
    kern_check_float_buf(dout, "attention dout");
    kern_check_float_buf(q, "attention q");
    kern_check_float_buf(k, "attention k");
    kern_check_float_buf(v, "attention v");
    TR_CHECK(lse != NULL, "attention backward reads the forward's lse[B, NH, Tq]");
}

void kern_attention_forward_check(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v, int B, int T,
                                  int NH, int KV, int D) {
    (void)s;
    check_attention(B, T, T, NH, KV, D);
    check_attention_forward_bufs(out, lse, q, k, v);
}

void kern_attention_backward_check(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                   tr_buf v, tr_buf out, const float *lse, int B, int T, int NH, int KV, int D) {
    (void)s;
    (void)out;
    check_attention(B, T, T, NH, KV, D);
    check_attention_backward_bufs(dq, dk, dv, dout, q, k, v, lse);
}

void kern_attention_forward_pos_check(dev_stream *s, tr_buf out, float *lse, tr_buf q, tr_buf k, tr_buf v,
                                      const int32_t *q_pos, const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV,
                                      int D) {
    (void)s;
    check_attention(B, Tq, Tk, NH, KV, D);
    TR_CHECK(q_pos != NULL && k_pos != NULL, "attention with positions needs q_pos[Tq] and k_pos[Tk]");
    check_attention_forward_bufs(out, lse, q, k, v);
}

void kern_attention_backward_pos_check(dev_stream *s, tr_buf dq, tr_buf dk, tr_buf dv, tr_buf dout, tr_buf q, tr_buf k,
                                       tr_buf v, tr_buf out, const float *lse, const int32_t *q_pos,
                                       const int32_t *k_pos, int B, int Tq, int Tk, int NH, int KV, int D) {
    (void)s;
    check_attention(B, Tq, Tk, NH, KV, D);
    TR_CHECK(q_pos != NULL && k_pos != NULL, "attention with positions needs q_pos[Tq] and k_pos[Tk]");
    (void)out;
    check_attention_backward_bufs(dq, dk, dv, dout, q, k, v, lse);
}

/* ---- MLP and loss ------------------------------------------------------------------------ */

void kern_swiglu_forward_check(dev_stream *s, tr_buf out, tr_buf h, int N, int F) {
    (void)s;
    TR_CHECK(N > 0 && F > 0, "swiglu needs N and F positive; check --ffn-hidden-size");
    kern_check_float_buf(out, "swiglu out");
    kern_check_float_buf(h, "swiglu h");
}

void kern_swiglu_backward_check(dev_stream *s, tr_buf dh, tr_buf dout, tr_buf h, int N, int F) {
    (void)s;
    TR_CHECK(N > 0 && F > 0, "swiglu backward needs N and F positive; check --ffn-hidden-size");
    kern_check_float_buf(dh, "swiglu dh");
    kern_check_float_buf(dout, "swiglu dout");
    kern_check_float_buf(h, "swiglu h");
}

void kern_cross_entropy_forward_check(dev_stream *s, float *losses, tr_buf logits, const int32_t *targets, int N,
                                      int V) {
    (void)s;
    TR_CHECK(N > 0 && V > 0, "cross entropy needs N and V positive");
    TR_CHECK(losses != NULL && targets != NULL, "cross entropy needs losses and targets");
    kern_check_float_buf(logits, "cross entropy logits");
}

void kern_cross_entropy_backward_check(dev_stream *s, tr_buf dlogits, tr_buf logits, const int32_t *targets,
                                       const float *dloss, int N, int V) {
    (void)s;
    TR_CHECK(N > 0 && V > 0, "cross entropy backward needs N and V positive");
    TR_CHECK(dloss != NULL && targets != NULL, "cross entropy backward needs dloss and targets");
    kern_check_float_buf(dlogits, "cross entropy dlogits");
    kern_check_float_buf(logits, "cross entropy logits");
}

/* The first V_real columns of a slice are vocabulary, the rest padding. */
static void check_real(int V, int V_real) {
    TR_CHECK(V_real >= 0 && V_real <= V, "cross entropy: the real vocabulary columns V_real must be in [0, V]");
}

void kern_ce_slice_max_check(dev_stream *s, float *row_max, tr_buf logits, int N, int V, int V_real) {
    (void)s;
    TR_CHECK(N > 0 && V > 0, "cross entropy needs N and V positive");
    check_real(V, V_real);
    TR_CHECK(row_max != NULL, "vocab-parallel cross entropy writes row_max[N]");
    kern_check_float_buf(logits, "cross entropy logits");
}

static void check_targets(const int32_t *targets, int vocab_start) {
    TR_CHECK(targets != NULL, "vocab-parallel cross entropy needs targets");
    TR_CHECK(vocab_start >= 0, "vocab-parallel cross entropy: vocab_start is a row of the padded vocabulary, so >= 0");
}

void kern_ce_slice_sums_check(dev_stream *s, float *sum_exp, float *target_logit, tr_buf logits, const float *row_max,
                              const int32_t *targets, int vocab_start, int N, int V, int V_real) {
    (void)s;
    TR_CHECK(N > 0 && V > 0, "cross entropy needs N and V positive");
    check_real(V, V_real);
    TR_CHECK(sum_exp != NULL && target_logit != NULL && row_max != NULL,
             "vocab-parallel cross entropy sums need sum_exp[N], target_logit[N] and row_max[N]");
    kern_check_float_buf(logits, "cross entropy logits");
    check_targets(targets, vocab_start);
}

void kern_ce_loss_from_stats_check(dev_stream *s, float *losses, const float *row_max, const float *sum_exp,
                                   const float *target_logit, int N) {
    (void)s;
    TR_CHECK(N > 0, "cross entropy needs N positive");
    TR_CHECK(losses != NULL && row_max != NULL && sum_exp != NULL && target_logit != NULL,
             "vocab-parallel cross entropy loss needs losses, row_max, sum_exp and target_logit [N]");
}

void kern_ce_slice_backward_check(dev_stream *s, tr_buf dlogits, tr_buf logits, const float *row_max,
                                  const float *sum_exp, const int32_t *targets, int vocab_start, const float *dloss,
                                  int N, int V, int V_real) {
    (void)s;
    TR_CHECK(N > 0 && V > 0, "cross entropy backward needs N and V positive");
    check_real(V, V_real);
    TR_CHECK(dloss != NULL && row_max != NULL && sum_exp != NULL,
             "vocab-parallel cross entropy backward needs dloss, row_max and sum_exp [N]");
    kern_check_float_buf(dlogits, "cross entropy dlogits");
    kern_check_float_buf(logits, "cross entropy logits");
    check_targets(targets, vocab_start);
}

/* ---- optimizer --------------------------------------------------------------------------- */

static void check_adamw_desc(const kern_adamw_desc *ad) {
    TR_CHECK(ad != NULL, "adamw needs a descriptor");
    TR_CHECK(ad->step >= 1, "adamw step is 1-based; the first update is step 1");
    TR_CHECK(ad->beta1 >= 0.0f && ad->beta1 < 1.0f && ad->beta2 >= 0.0f && ad->beta2 < 1.0f,
             "adamw betas must lie in [0, 1); check --adam-beta1 and --adam-beta2");
}

static void check_adamw_buffers(const float *master, const int16_t *rem, tr_buf model, tr_buf grad, const float *m,
                                const float *v) {
    TR_CHECK((master != NULL) != (rem != NULL),
             "adamw takes the master weights either fp32 or as remainders, one of them");
    TR_CHECK(m != NULL && v != NULL, "adamw needs both moments");
    kern_check_float_buf(grad, "adamw grad");
    /* remainders: the master's upper halves are the bf16 model's */
    TR_CHECK(rem == NULL || (model.p != NULL && model.dt == TR_BF16),
             "adamw with master remainders needs the bf16 model weights they complete");
    /* model.p NULL: the master weights are the only copy; model.p == master: fp32 training */
    if (model.p != NULL && model.p != (const void *)master) kern_check_float_buf(model, "adamw model");
    TR_CHECK(model.p != (const void *)master || model.dt == TR_F32, "adamw model aliases master only when it is fp32");
}

void kern_adamw_update_check(dev_stream *s, const kern_adamw_desc *ad, float *master, int16_t *master_rem, tr_buf model,
                             tr_buf grad, float *m, float *v, size_t n) {
    (void)s;
    check_adamw_desc(ad);
    if (n == 0) return;
    check_adamw_buffers(master, master_rem, model, grad, m, v);
}

void kern_master_split_check(dev_stream *s, tr_buf model, int16_t *rem, const float *w, size_t n) {
    (void)s, (void)rem;
    if (n == 0) return;
    TR_CHECK(w != NULL && model.p != NULL, "master split reads w[n] and writes model[n]");
    TR_CHECK(model.dt == TR_BF16, "master split writes bf16 weights");
}

/* ---- multi-tensor forms and initialisation ------------------------------------------------ */

/* Ranges ascend without overlapping; true when any holds an element. */
static bool check_ranges(const kern_range *ranges, int nranges) {
    TR_CHECK(nranges >= 0 && (ranges != NULL || nranges == 0), "multi-tensor kernel needs its ranges");
    bool any = false;
    for (int r = 0; r < nranges; r++) {
        TR_CHECK(ranges[r].begin <= ranges[r].end && (r == 0 || ranges[r - 1].end <= ranges[r].begin),
                 "multi-tensor kernel: ranges must ascend without overlapping");
        any = any || ranges[r].end > ranges[r].begin;
    }
    return any;
}

void kern_sum_squares_ranges_check(dev_stream *s, float *out, tr_buf x, const kern_range *ranges, int nranges) {
    (void)s;
    TR_CHECK(out != NULL, "sum_squares needs an output scalar");
    if (check_ranges(ranges, nranges)) kern_check_float_buf(x, "sum_squares x");
}

void kern_adamw_update_ranges_check(dev_stream *s, const kern_adamw_desc *ad, const kern_range *ranges, int nranges,
                                    float *master, int16_t *master_rem, tr_buf model, tr_buf grad, float *m, float *v) {
    (void)s;
    check_adamw_desc(ad);
    if (check_ranges(ranges, nranges)) check_adamw_buffers(master, master_rem, model, grad, m, v);
}

void kern_init_param_check(dev_stream *s, const kern_init_desc *d, float *out, size_t n) {
    (void)s;
    TR_CHECK(d != NULL, "init needs a descriptor");
    if (n == 0) return;
    TR_CHECK(out != NULL, "init writes out[n]");
    TR_CHECK(d->cols > 0 && d->gcols >= d->cols && d->col0 >= 0 && (d->nseg == 1 || d->nseg == 2),
             "init: the shard's placement is not a placement (cols, gcols, col0, segments)");
    TR_CHECK(d->first >= 0, "init: the first local element is negative");
}

/* ---- FP8 --------------------------------------------------------------------------------- */

static void check_fp8_format(tr_fp8_format fmt, const char *what) {
    if (fmt != TR_FP8_E4M3 && fmt != TR_FP8_E5M2)
        tr_fatal("kernel: %s has FP8 format %d; e4m3 (0) or e5m2 (1)", what, fmt);
}

void kern_fp8_quantize_check(dev_stream *s, uint8_t *q, float *amax, tr_buf x, const float *scale, size_t n,
                             tr_fp8_format fmt) {
    (void)s, (void)amax;
    check_fp8_format(fmt, "fp8_quantize");
    if (n == 0) return;
    TR_CHECK(q != NULL && scale != NULL, "fp8_quantize writes q[n] with scale[0]: neither may be NULL");
    kern_check_float_buf(x, "fp8_quantize x");
}

void kern_fp8_cast_transpose_check(dev_stream *s, uint8_t *q, uint8_t *qt, float *amax, tr_buf x, const float *scale,
                                   int rows, int cols, tr_fp8_format fmt) {
    (void)s, (void)amax;
    check_fp8_format(fmt, "fp8_cast_transpose");
    TR_CHECK(rows >= 0 && cols >= 0, "fp8_cast_transpose: rows and cols must not be negative");
    TR_CHECK(q != NULL || qt != NULL, "fp8_cast_transpose writes q[rows, cols], qt[cols, rows] or both: not neither");
    if ((size_t)rows * (size_t)cols == 0) return;
    TR_CHECK(scale != NULL, "fp8_cast_transpose quantises with scale[0]: it may not be NULL");
    TR_CHECK(q != qt, "fp8_cast_transpose: q and qt are one buffer");
    kern_check_float_buf(x, "fp8_cast_transpose x");
}

void kern_fp8_transpose_check(dev_stream *s, uint8_t *qt, const uint8_t *q, int rows, int cols) {
    (void)s;
    TR_CHECK(rows >= 0 && cols >= 0, "fp8_transpose: rows and cols must not be negative");
    if ((size_t)rows * (size_t)cols == 0) return;
    TR_CHECK(q != NULL && qt != NULL,
             "fp8_transpose reads q[rows, cols] and writes qt[cols, rows]: neither may be NULL");
    TR_CHECK((const uint8_t *)qt != q, "fp8_transpose: q and qt are one buffer (it does not transpose in place)");
}

void kern_gemm_fp8_check(dev_stream *s, tr_buf c, kern_fp8_operand a, kern_fp8_operand b, int m, int n, int k, bool ta,
                         bool tb, float alpha, float beta, bool fast_accum) {
    (void)s, (void)ta, (void)tb, (void)alpha, (void)beta, (void)fast_accum;
    TR_CHECK(m > 0 && n > 0 && k > 0, "gemm_fp8 dimensions m, n, k must be positive");
    kern_check_float_buf(c, "gemm_fp8 c");
    TR_CHECK(a.p && b.p && a.scale_inv && b.scale_inv, "gemm_fp8 operands need their bytes and scale_inv");
    check_fp8_format(a.fmt, "gemm_fp8 a");
    check_fp8_format(b.fmt, "gemm_fp8 b");
    TR_CHECK(!(a.fmt == TR_FP8_E5M2 && b.fmt == TR_FP8_E5M2),
             "gemm_fp8: both operands e5m2 (Hopper's FP8 GEMMs take at most one e5m2 operand)");
}

void kern_fp8_scale_update_check(dev_stream *s, float *hist, float *scale, float *scale_inv, int n, int len,
                                 tr_fp8_amax_algo algo, tr_fp8_format fmt, int margin) {
    (void)s, (void)margin;
    check_fp8_format(fmt, "fp8_scale_update");
    TR_CHECK(algo == TR_FP8_AMAX_MAX || algo == TR_FP8_AMAX_MOST_RECENT, "fp8_scale_update: unknown amax algorithm");
    TR_CHECK(n >= 0 && len >= 1, "fp8_scale_update needs n >= 0 tensors and a history of len >= 1");
    if (n == 0) return;
    TR_CHECK(hist && scale && scale_inv, "fp8_scale_update needs hist, scale and scale_inv");
}
