/* FP8 linear layers with per-tensor delayed scaling, as Megatron runs them through Transformer Engine
 * (--fp8-format; docs/fp8.md).
 *
 * Each decoder layer's four linear modules (qkv, proj, fc1, fc2) run their GEMMs in FP8: the forward
 * on the quantised input and weight (E4M3), the data and weight gradients on the quantised output
 * gradient (E5M2 with hybrid) and the same quantised weight and input. Every FP8 tensor has a scale
 * from the amax history of the passes before this one; each quantisation records its tensor's amax in
 * the history's row 0, and at the end of a micro-batch's forward (the inputs and weights) or backward
 * pass (the gradients) the rows are reduced (max) over the tensor-, context- and data-parallel ranks of
 * this stage — Megatron's amax reduction group — and every scale is updated on the device
 * (kern_fp8_scale_update), so ranks that share a tensor quantise it alike and no step waits for the host.
 *
 * The backward pass quantises the input and the weight again instead of keeping their FP8 copies:
 * with the scales the micro-batch's forward used (kept per activation slot, since 1F1B runs other
 * forwards in between) the bytes are the forward's own, and no FP8 activation outlives its layer —
 * peak memory stays at bf16's plus the amax histories: the scratch buffers live inside the logits
 * buffer where they can (scratch_logits). Hopper's FP8 GEMMs take both operands K-major, so the
 * backward's casts write the layouts its GEMMs read — the input and the weight transposed, the output
 * gradient both ways — in the one pass over the bf16 tensor (kern_fp8_cast_transpose), and every FP8
 * GEMM runs in the layout the GPU takes as it is. The embedding, the output layer, attention's
 * core, the norms and the optimizer stay in bf16 / fp32, as in Transformer Engine.
 *
 * With --fp8-param-gather the weights are Transformer Engine's FP8 parameters: after each update the
 * optimizer casts its shard of them into an FP8 copy with the weight's current scale (recording the
 * shard's amax), and the distributed optimizer all-gathers that copy in FP8, one byte an element. The
 * forward reads the copy as it is and records no weight amax; the data gradient reads its byte
 * transpose. One micro-batch a step gives the bytes and scales of the run without it; with more, the
 * later micro-batches reuse the step's weight bytes and scale, as Transformer Engine's do. The copy lies
 * in the bf16 bytes of the other shards' halves of its bucket where it can (place_copies), so with the
 * distributed optimizer over two or more ranks it takes no memory of its own. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/llama.h"
#include "twinrun/err.h"

static int fwd_index(int l, int mod, int role) { return (l * LLAMA_FP8_MODULES + mod) * 2 + role; }
static int bwd_index(int l, int mod) { return l * LLAMA_FP8_MODULES + mod; }

/* A module's weights: q, k and v for qkv (one fused weight in Megatron), else one. */
static int module_weights(const llama_model *m, int l, int mod, int *p) {
    const llama_layer_params *lp = &m->layer[l];
    switch (mod) {
    case LLAMA_FP8_QKV: p[0] = lp->wq, p[1] = lp->wk, p[2] = lp->wv; return 3;
    case LLAMA_FP8_PROJ: p[0] = lp->wo; return 1;
    case LLAMA_FP8_FC1: p[0] = lp->fc1; return 1;
    default: p[0] = lp->fc2; return 1;
    }
}

void llama_fp8_mark_stored(llama_model *m) {
    for (int l = 0; l < m->dims.nl; l++)
        for (int mod = 0; mod < LLAMA_FP8_MODULES; mod++) {
            int p[3];
            const int np = module_weights(m, l, mod, p);
            for (int i = 0; i < np; i++) m->params_tab[p[i]].fp8_stored = true;
        }
}

/* Scratch pieces start on 256-byte boundaries (cuBLASLt's FP8 operands want 16). */
static size_t scratch_round(size_t bytes) { return (bytes + 255) & ~(size_t)255; }

uint8_t *llama_fp8_stored_at(const llama_model *m, size_t e) {
    const llama_fp8 *f = &m->fp8;
    const int k = f->stored && e < m->total_alloc ? llama_bucket_of(m, e) : -1;
    if (k < 0 || !f->wq_at[k])
        tr_fatal("llama_fp8_stored_at: parameter-buffer element %zu lies in no FP8 weights' bucket", e);
    return f->wq_at[k] + (e - m->bucket_begin[k]);
}

/* Whether a copy of FP8 bucket k starting at byte `at` of the bucket's bf16 bytes keeps every weight's copy
 * 16 bytes from an aligned start (the GPU's FP8 GEMMs read the copy in place: cuBLASLt wants 16-byte
 * aligned operands). */
static bool copy_aligned(const llama_model *m, int k, size_t at) {
    const size_t b = m->bucket_begin[k], e = m->bucket_begin[k + 1];
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *w = &m->params_tab[i];
        if (w->fp8_stored && w->offset >= b && w->offset < e && (2 * b + at + (w->offset - b)) % 16) return false;
    }
    return true;
}

/* Where FP8 bucket k's copy [n bytes] can lie inside its bf16 parameters [2n bytes] (llama.h, wq_at): at
 * a byte `at` past this rank's shard's bytes [lo, hi) (at in [hi, n]) or before them (at + n <= lo),
 * aligned (copy_aligned); NULL when there is none: one shard, or a shard across the middle. */
static uint8_t *copy_in_params(const llama_model *m, int k, int shards) {
    if (shards < 2 || m->dims.act_dt != TR_BF16) return NULL;
    const size_t b = m->bucket_begin[k], n = m->bucket_begin[k + 1] - b;
    const llama_seg sg = llama_shard_seg(m, shards, m->layout.opt_shard, k);
    const size_t lo = 2 * (sg.begin - b), hi = lo + 2 * sg.len; /* the shard's bytes in the bucket's */
    for (size_t at = hi; at <= n && at < hi + 16; at++)
        if (copy_aligned(m, k, at)) return (uint8_t *)m->params + 2 * b + at;
    for (size_t at = 0; at + n <= lo && at < 16; at++)
        if (copy_aligned(m, k, at)) return (uint8_t *)m->params + 2 * b + at;
    return NULL;
}

/* Places every FP8 bucket's copy (llama.h, wq_at): inside the parameters where it can be, the rest in wq,
 * each bucket's on a 256-byte boundary. */
static int place_copies(llama_model *m, char *err, size_t errlen) {
    llama_fp8 *f = &m->fp8;
    const char *env = getenv("TWINRUN_FP8_WEIGHTS");
    if (env && *env && strcmp(env, "own") != 0 && strcmp(env, "params") != 0)
        return tr_errf(err, errlen,
                       "TWINRUN_FP8_WEIGHTS=%s: use params (--fp8-param-gather's FP8 copy inside the bf16 parameters "
                       "where it can be, the default) or own (a buffer of its own always)",
                       env);
    const bool own = env && strcmp(env, "own") == 0;
    const int shards = llama_master_sharded(m) ? (int)(m->total_alloc / m->master_len) : 1;
    f->wq_at = calloc((size_t)m->nbuckets, sizeof *f->wq_at);
    size_t *own_off = calloc((size_t)m->nbuckets, sizeof *own_off);
    if (!f->wq_at || !own_off) {
        free(own_off);
        return tr_errf(err, errlen, "out of host memory");
    }
    size_t need = 0;
    for (int k = 0; k < m->nbuckets; k++) {
        if (!m->bucket_fp8[k]) continue;
        const size_t n = m->bucket_begin[k + 1] - m->bucket_begin[k];
        f->wq_at[k] = own ? NULL : copy_in_params(m, k, shards);
        if (f->wq_at[k]) {
            f->wq_in_params += n;
        } else {
            own_off[k] = need;
            need += scratch_round(n);
        }
    }
    f->wq_len = need;
    if (need) {
        const dev_mem_tag tag = dev_mem_tag_set(m->dev, DEV_MEM_WEIGHTS);
        f->wq = dev_alloc(m->dev, need, "fp8 weights"); /* [wq_len] */
        dev_mem_tag_set(m->dev, tag);
        if (!f->wq) {
            free(own_off);
            return tr_errf(err, errlen, "out of device memory for the FP8 weights (%zu bytes)", need);
        }
        dev_memset_zero(m->stream, f->wq, need); /* the buckets' padding, gathered with them, stays defined */
        for (int k = 0; k < m->nbuckets; k++)
            if (m->bucket_fp8[k] && !f->wq_at[k]) f->wq_at[k] = f->wq + own_off[k];
    }
    free(own_off);
    return 0;
}

/* Where the FP8 scratch may live without memory of its own: the output layer's logits [N, Vl] bf16, when
 * this rank computes them (the last stage) and holds one micro-batch at a time (one activation slot). The
 * logits are live only from the output layer's forward to its backward (which overwrites them with their
 * gradient and reads that last), and no FP8 module runs in between: the decoder layers run before the
 * output layer forward, and backward (recomputation included) after it. With more slots, 1F1B runs other
 * micro-batches' layers while one's logits wait for its backward, so the scratch has its own buffers, as
 * it has when the logits are smaller than the three pieces or TWINRUN_FP8_SCRATCH=own. NULL: own buffers. */
static uint8_t *scratch_logits(const llama_model *m, size_t need) {
    const char *env = getenv("TWINRUN_FP8_SCRATCH");
    if (env && *env && strcmp(env, "own") != 0 && strcmp(env, "logits") != 0)
        tr_fatal("TWINRUN_FP8_SCRATCH=%s: use logits (the FP8 scratch inside the logits buffer where it can be, the "
                 "default) or own (its own buffers always)",
                 env);
    if ((env && strcmp(env, "own") == 0) || !m->dims.last || m->layout.slots != 1 || !m->acts[0].logits) return NULL;
    const size_t logits = (size_t)m->dims.B * m->dims.T * (size_t)m->dims.Vl * tr_dtype_size(m->dims.act_dt);
    return need <= logits ? (uint8_t *)m->acts[0].logits : NULL;
}

int llama_fp8_create(llama_model *m, const tr_config *cfg, char *err, size_t errlen) {
    llama_fp8 *f = &m->fp8;
    memset(f, 0, sizeof *f);
    if (cfg->fp8 == TR_FP8_MODE_NONE) return 0;
    const llama_dims *dm = &m->dims;
    if (dm->act_dt != TR_BF16) return tr_errf(err, errlen, "--fp8-format needs --bf16");
    f->on = true;
    f->wgrad = cfg->fp8_wgrad;
    f->fwd_fmt = TR_FP8_E4M3;
    f->bwd_fmt = cfg->fp8 == TR_FP8_MODE_HYBRID ? TR_FP8_E5M2 : TR_FP8_E4M3;
    f->algo = cfg->fp8_amax_compute_algo == 0 ? TR_FP8_AMAX_MAX : TR_FP8_AMAX_MOST_RECENT;
    f->len = cfg->fp8_amax_history_len;
    f->margin = cfg->fp8_margin;
    f->nfwd = dm->nl * LLAMA_FP8_MODULES * 2;
    f->nbwd = dm->nl * LLAMA_FP8_MODULES;
    f->record = true;
    /* Hopper's FP8 GEMMs take 16-byte aligned rows of 16-multiple sizes (Transformer Engine refuses other
     * shapes the same way): the twin runs any shape (its rehearsals shrink the widths), so a shape the GPU
     * would refuse is a note the reporter prints (observe_fp8.c), and the CUDA backend stops on it */
    const size_t N = (size_t)dm->B * dm->T;
    size_t max_in = 0, max_out = 0, max_w = 0;
    for (int l = 0; l < dm->nl; l++)
        for (int mod = 0; mod < LLAMA_FP8_MODULES; mod++) {
            int p[3];
            const int np = module_weights(m, l, mod, p);
            for (int i = 0; i < np; i++) {
                const llama_param *w = &m->params_tab[p[i]];
                const size_t out = (size_t)w->shape[0], in = (size_t)w->shape[1];
                if ((out % 16 || in % 16 || N % 16) && !f->shape_note[0])
                    snprintf(f->shape_note, sizeof f->shape_note,
                             "--fp8-format: %s is [%zu, %zu] for %zu tokens a micro-batch; the twin runs it, but "
                             "Hopper's FP8 GEMMs (cuBLASLt) need every dimension a multiple of 16 (Transformer "
                             "Engine's rule; twinrun's q, k and v projections are three GEMMs): on a GPU change "
                             "the widths, heads, --micro-batch-size or --seq-length, or run the dequantising "
                             "fallback (TWINRUN_GEMM=blas)",
                             w->name, out, in, N);
                max_in = in > max_in ? in : max_in;
                max_out = out > max_out ? out : max_out;
                max_w = out * in > max_w ? out * in : max_w;
            }
        }
    dev_device *d = m->dev;
    const dev_mem_tag tag0 = dev_mem_tag_set(d, DEV_MEM_WORKSPACE);
    const size_t hist = (size_t)f->len * (size_t)(f->nfwd + f->nbwd) * 4, scales = (size_t)2 * (f->nfwd + f->nbwd) * 4;
    f->fwd_hist = dev_alloc(d, hist + scales, "fp8 amax histories and scales"); /* one block, split below */
    f->slot_scale = dev_alloc(d, (size_t)m->layout.slots * 2 * f->nfwd * 4, "fp8 scales of the micro-batches");
    const size_t bx = scratch_round(N * max_in), bw = scratch_round(max_w), bg = scratch_round(N * max_out);
    uint8_t *logits = scratch_logits(m, bx + bw + 2 * bg);
    f->scratch_in_logits = logits != NULL;
    if (logits) {
        f->qx = logits, f->qw = logits + bx, f->qg = logits + bx + bw, f->qgt = logits + bx + bw + bg;
    } else {
        f->qx = dev_alloc(d, N * max_in, "fp8 linear input");                        /* [N, in] or [in, N] */
        f->qw = dev_alloc(d, max_w, "fp8 linear weight");                            /* [out, in] or [in, out] */
        f->qg = dev_alloc(d, N * max_out, "fp8 linear output gradient");             /* [N, out] */
        f->qgt = dev_alloc(d, N * max_out, "fp8 linear output gradient transposed"); /* [out, N] */
    }
    f->qw_len = max_w;
    if (cfg->fp8_param_gather) {
        f->stored = true;
        f->wq_scale = dev_alloc(d, (size_t)2 * f->nfwd * 4, "fp8 weights' scales"); /* [2, nfwd] */
        if (!f->wq_scale) {
            dev_mem_tag_set(d, tag0);
            return tr_errf(err, errlen, "out of device memory for the FP8 weights' scales");
        }
        if (place_copies(m, err, errlen)) {
            dev_mem_tag_set(d, tag0);
            return -1;
        }
    }
    dev_mem_tag_set(d, tag0);
    if (!f->fwd_hist || !f->slot_scale || !f->qx || !f->qw || !f->qg || !f->qgt)
        return tr_errf(err, errlen, "out of device memory for the FP8 scratch (%zu + %zu + 2 x %zu bytes)", N * max_in,
                       max_w, N * max_out);
    f->host = malloc(2 * (size_t)f->nfwd * sizeof *f->host); /* nfwd = 2 nbwd */
    if (!f->host) return tr_errf(err, errlen, "out of host memory");
    f->bwd_hist = f->fwd_hist + (size_t)f->len * f->nfwd;
    f->fwd_scale = f->bwd_hist + (size_t)f->len * f->nbwd;
    f->bwd_scale = f->fwd_scale + 2 * (size_t)f->nfwd;
    /* histories start at zero, scales (and their inverses) at one: Transformer Engine's initial state */
    const size_t n = llama_fp8_state_count(m);
    float *h = calloc(n, sizeof *h);
    TR_CHECK(h != NULL, "out of host memory");
    for (size_t i = (size_t)f->len * (f->nfwd + f->nbwd); i < n; i++) h[i] = 1.0f;
    llama_fp8_set_state(m, h);
    free(h);
    return 0;
}

void llama_fp8_destroy(llama_model *m) {
    llama_fp8 *f = &m->fp8;
    if (!m->dev) return;
    dev_free(m->dev, f->fwd_hist);
    dev_free(m->dev, f->slot_scale);
    dev_free(m->dev, f->wq);
    dev_free(m->dev, f->wq_scale);
    free(f->wq_at);
    if (!f->scratch_in_logits) { /* else they lie in the logits buffer, which its owner frees */
        dev_free(m->dev, f->qx);
        dev_free(m->dev, f->qw);
        dev_free(m->dev, f->qg);
        dev_free(m->dev, f->qgt);
    }
    free(f->host);
    memset(f, 0, sizeof *f);
}

size_t llama_fp8_state_count(const llama_model *m) {
    const llama_fp8 *f = &m->fp8;
    return f->on ? ((size_t)f->len + 2) * (size_t)(f->nfwd + f->nbwd) : 0;
}

/* The state is one device block in the host arrays' order. */
void llama_fp8_get_state(llama_model *m, float *host) {
    const size_t n = llama_fp8_state_count(m);
    if (!n) return;
    dev_copy_d2h(m->stream, host, m->fp8.fwd_hist, n * 4);
    dev_stream_sync(m->stream);
}

void llama_fp8_set_state(llama_model *m, const float *host) {
    const size_t n = llama_fp8_state_count(m);
    if (!n) return;
    dev_copy_h2d(m->stream, m->fp8.fwd_hist, host, n * 4);
    dev_stream_sync(m->stream);
}

/* The slot's forward scales (row 0) and their inverses (row 1): [2, nfwd]. */
static float *slot_scales(const llama_model *m, int slot) {
    return m->fp8.slot_scale + (size_t)slot * 2 * (size_t)m->fp8.nfwd;
}

void llama_fp8_forward_begin(llama_model *m, int slot) {
    llama_fp8 *f = &m->fp8;
    if (!f->on) return;
    f->slot = slot;
    f->record = true;
    dev_copy_d2d(m->stream, slot_scales(m, slot), f->fwd_scale, (size_t)2 * f->nfwd * 4);
}

/* This rank's own amaxes of the pass (row, before the reduction) against the scales it quantised with:
 * a tensor whose amax is LLAMA_FP8_SPIKE_RATIO times what its scale allowed (the format's largest,
 * less the margin) spiked here. The largest is kept in m->fp8.spike for the trainer to report; the
 * hook (a fault) may change the amaxes first. One small copy to the host a pass: the reduction that
 * follows waits for the pass anyway. */
static void check_spikes(llama_model *m, bool fwd, float *row, const float *scale, int n) {
    llama_fp8 *f = &m->fp8;
    if (dev_shape_only(m->dev)) return; /* --predict: no values */
    float *amax = f->host, *sc = f->host + n;
    dev_copy_d2h(m->stream, amax, row, (size_t)n * 4);
    dev_copy_d2h(m->stream, sc, scale, (size_t)n * 4);
    dev_stream_sync(m->stream);
    if (f->amax_hook && f->amax_hook(f->amax_hook_arg, fwd, amax, n, m->dims.l0)) {
        dev_copy_h2d(m->stream, row, amax, (size_t)n * 4);
        dev_stream_sync(m->stream); /* the host array is reused */
    }
    const float allowed = ldexpf(tr_fp8_spec_of(fwd ? f->fwd_fmt : f->bwd_fmt).max, -f->margin);
    for (int t = 0; t < n; t++) {
        const float ratio = amax[t] * sc[t] / allowed;
        if (!(ratio >= LLAMA_FP8_SPIKE_RATIO) || ratio <= f->spike.ratio) continue; /* a NaN amax is the NaN probe's */
        const int mt = fwd ? t / 2 : t;
        f->spike = (struct llama_fp8_spike){
            ratio, amax[t], sc[t], m->dims.l0 + mt / LLAMA_FP8_MODULES, mt % LLAMA_FP8_MODULES, fwd ? t % 2 : 2};
    }
}

/* Row 0 of a history (this pass's amaxes) reduced with max over the amax reduction group. */
static void reduce_amax(llama_model *m, float *row, int n) {
    if (m->layout.tp > 1) coll_all_reduce(m->tp_comm, m->stream, row, row, (size_t)n, TR_F32, COLL_MAX);
    if (m->fp8.dp_cp_comm) coll_all_reduce(m->fp8.dp_cp_comm, m->stream, row, row, (size_t)n, TR_F32, COLL_MAX);
}

void llama_fp8_forward_end(llama_model *m) {
    llama_fp8 *f = &m->fp8;
    if (!f->on) return;
    check_spikes(m, true, f->fwd_hist, slot_scales(m, f->slot), f->nfwd);
    reduce_amax(m, f->fwd_hist, f->nfwd);
    kern_fp8_scale_update(m->stream, f->fwd_hist, f->fwd_scale, f->fwd_scale + f->nfwd, f->nfwd, f->len, f->algo,
                          f->fwd_fmt, f->margin);
}

void llama_fp8_backward_begin(llama_model *m, int slot) {
    llama_fp8 *f = &m->fp8;
    if (!f->on) return;
    f->slot = slot;
    f->record = false; /* recomputation and the backward's own quantisations of inputs and weights */
}

void llama_fp8_backward_end(llama_model *m) {
    llama_fp8 *f = &m->fp8;
    if (!f->on) return;
    check_spikes(m, false, f->bwd_hist, f->bwd_scale, f->nbwd);
    reduce_amax(m, f->bwd_hist, f->nbwd);
    kern_fp8_scale_update(m->stream, f->bwd_hist, f->bwd_scale, f->bwd_scale + f->nbwd, f->nbwd, f->len, f->algo,
                          f->bwd_fmt, f->margin);
}

/* One forward tensor's operand: bytes q quantised with the slot's scale t. */
static kern_fp8_operand fwd_operand(const llama_model *m, const uint8_t *q, int t) {
    return (kern_fp8_operand){q, m->fp8.fwd_fmt, slot_scales(m, m->fp8.slot) + m->fp8.nfwd + t};
}

void llama_fp8_quantize_input(llama_model *m, tr_buf x, int N, int in, int l, int mod, bool transposed) {
    llama_fp8 *f = &m->fp8;
    const int t = fwd_index(l, mod, 0);
    kern_fp8_cast_transpose(m->stream, transposed ? NULL : f->qx, transposed ? f->qx : NULL,
                            f->record ? f->fwd_hist + t : NULL, x, slot_scales(m, f->slot) + t, N, in, f->fwd_fmt);
}

void llama_fp8_cast_begin(llama_model *m) {
    llama_fp8 *f = &m->fp8;
    if (!f->stored) return;
    dev_copy_d2d(m->stream, f->wq_scale, f->fwd_scale, (size_t)2 * f->nfwd * 4);
}

/* The FP8 weights' elements of parameter-buffer range [lo, hi) cast on s with the stored weights' scales,
 * each weight's amax into its history's row 0: into dst[e - lo], or into the FP8 copy when dst is NULL. */
static void cast_weights(llama_model *m, dev_stream *s, size_t lo, size_t hi, uint8_t *dst) {
    llama_fp8 *f = &m->fp8;
    const tr_buf params = tr_buf_make(m->params, m->dims.act_dt);
    for (int l = 0; l < m->dims.nl; l++)
        for (int mod = 0; mod < LLAMA_FP8_MODULES; mod++) {
            int p[3];
            const int np = module_weights(m, l, mod, p), t = fwd_index(l, mod, 1);
            for (int i = 0; i < np; i++) {
                const llama_param *w = &m->params_tab[p[i]];
                const size_t b = w->offset > lo ? w->offset : lo;
                const size_t e = w->offset + w->numel < hi ? w->offset + w->numel : hi;
                if (b < e)
                    kern_fp8_quantize(s, dst ? dst + (b - lo) : llama_fp8_stored_at(m, b), f->fwd_hist + t,
                                      tr_buf_at(params, b), f->wq_scale + t, e - b, f->fwd_fmt);
            }
        }
}

void llama_fp8_cast_stored(llama_model *m, dev_stream *s, size_t lo, size_t hi) {
    if (m->fp8.stored) cast_weights(m, s, lo, hi, NULL);
}

/* Every bucket's copy from its bf16 parameters. A copy inside them, at byte `at` of the bucket's bf16
 * bytes, puts element i's byte on bf16 element (at + i) / 2: one in [at, i] for i >= at, in [i, at) for
 * i < at. So the elements from `at` up are cast upwards, then those below `at` downwards, and each byte
 * written lands on a value cast already — chunk by chunk, staged in the weight scratch, since a chunk's
 * bytes land on its own values too. */
void llama_fp8_cast_all(llama_model *m) {
    llama_fp8 *f = &m->fp8;
    if (!f->stored) return;
    llama_fp8_cast_begin(m);
    const size_t chunk = f->qw_len ? f->qw_len : 1;
    for (int k = 0; k < m->nbuckets; k++) {
        if (!m->bucket_fp8[k]) continue;
        const size_t b = m->bucket_begin[k], e = m->bucket_begin[k + 1], n = e - b;
        uint8_t *bf = (uint8_t *)m->params + 2 * b;          /* the bucket's bf16 bytes [2n] */
        if (f->wq_at[k] < bf || f->wq_at[k] >= bf + 2 * n) { /* a buffer of its own */
            cast_weights(m, m->stream, b, e, NULL);
            continue;
        }
        const size_t at = (size_t)(f->wq_at[k] - bf); /* <= n: copy_in_params */
        for (int up = 1; up >= 0; up--)               /* [at, n) upwards, then [0, at) downwards */
            for (size_t done = 0, span = up ? n - at : at; done < span; done += chunk) {
                const size_t len = span - done < chunk ? span - done : chunk;
                const size_t i = up ? at + done : at - done - len; /* the chunk [i, i + len) of the bucket */
                dev_memset_zero(m->stream, f->qw, len);            /* the bucket's padding: zero bytes, as in wq */
                cast_weights(m, m->stream, b + i, b + i + len, f->qw);
                dev_copy_d2d(m->stream, f->wq_at[k] + i, f->qw, len);
            }
    }
    dev_stream_sync(m->stream);
}

/* Weight p in FP8 for module (l, mod) in the weight scratch: [out, in] for the forward, transposed
 * [in, out] for the data gradient — quantised with the slot's weight scale, or with --fp8-param-gather
 * the stored bytes (the forward reads them in place) with the scale they were cast with. */
static kern_fp8_operand weight_operand(llama_model *m, int p, int l, int mod, bool transposed) {
    llama_fp8 *f = &m->fp8;
    const llama_param *w = &m->params_tab[p];
    const int t = fwd_index(l, mod, 1), out = (int)w->shape[0], in = (int)w->shape[1];
    if (f->stored) {
        uint8_t *q = llama_fp8_stored_at(m, w->offset);
        if (transposed) kern_fp8_transpose(m->stream, f->qw, q, out, in);
        return (kern_fp8_operand){transposed ? f->qw : q, f->fwd_fmt, f->wq_scale + f->nfwd + t};
    }
    kern_fp8_cast_transpose(m->stream, transposed ? NULL : f->qw, transposed ? f->qw : NULL,
                            f->record ? f->fwd_hist + t : NULL, llama_weight(m, p), slot_scales(m, f->slot) + t, out,
                            in, f->fwd_fmt);
    return fwd_operand(m, f->qw, t);
}

void llama_fp8_linear_forward(llama_model *m, tr_buf y, int p, int N, int l, int mod) {
    const llama_param *w = &m->params_tab[p];
    const int out = (int)w->shape[0], in = (int)w->shape[1];
    const kern_fp8_operand wq = weight_operand(m, p, l, mod, false);
    /* y[N, out] = x[N, in] @ W[out, in]^T */
    kern_gemm_fp8(m->stream, y, fwd_operand(m, m->fp8.qx, fwd_index(l, mod, 0)), wq, N, out, in, false, true, 1.0f,
                  0.0f, true);
}

void llama_fp8_linear_backward(llama_model *m, tr_buf dw, bool first, tr_buf dx, tr_buf dy, int p, int N,
                               bool accumulate, int l, int mod) {
    llama_fp8 *f = &m->fp8;
    const llama_param *w = &m->params_tab[p];
    const int out = (int)w->shape[0], in = (int)w->shape[1];
    const int tg = bwd_index(l, mod);
    /* dy [N, out] as the data gradient reads it, and transposed [out, N] for the weight gradient; its amax
     * recorded either way (a pass with neither GEMM still keeps the row layout for the history) */
    const bool rows = dx.p || !f->wgrad;
    kern_fp8_cast_transpose(m->stream, rows ? f->qg : NULL, f->wgrad ? f->qgt : NULL, f->bwd_hist + tg, dy,
                            f->bwd_scale + tg, N, out, f->bwd_fmt);
    const float *g_inv = f->bwd_scale + f->nbwd + tg;
    if (f->wgrad) /* dW[out, in] (+)= dy^T [out, N] @ (x^T [in, N])^T */
        kern_gemm_fp8(m->stream, dw, (kern_fp8_operand){f->qgt, f->bwd_fmt, g_inv},
                      fwd_operand(m, f->qx, fwd_index(l, mod, 0)), out, in, N, false, true, 1.0f, first ? 0.0f : 1.0f,
                      false);
    if (!dx.p) return;
    const kern_fp8_operand wt = weight_operand(m, p, l, mod, true);
    /* dx[N, in] (+)= dy[N, out] @ (W^T [in, out])^T */
    kern_gemm_fp8(m->stream, dx, (kern_fp8_operand){f->qg, f->bwd_fmt, g_inv}, wt, N, in, out, false, true, 1.0f,
                  accumulate ? 1.0f : 0.0f, false);
}
