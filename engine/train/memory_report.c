#include "train/memory_report.h"

void train_memory_report_of(tr_memory_report *r, const llama_model *m, const tr_optimizer *o) {
    const llama_dims *dm = &m->dims;
    /* measured, not derived from the formula below, so that the report checks the formula */
    r->weights = m->weight_bytes;
    r->gradients = m->grad_bytes;
    r->optimizer = o->state_bytes;
    r->params = m->param_elems;
    r->fp8_weights = m->fp8.stored ? m->fp8.wq_len : 0;
    r->fp8_weights_in_params = m->fp8.stored ? m->fp8.wq_in_params : 0;
    r->act_bytes = (int)tr_dtype_size(dm->act_dt), r->grad_bytes = (int)tr_dtype_size(dm->grad_dt);
    r->state_bytes = m->master_rem ? 10 : m->master != m->params ? 12 : 8; /* + 2 or 4 of master, 8 of m and v */
    r->distributed = o->distributed;
    r->dp = o->distributed && o->shard_len ? (int)(m->total_alloc / o->shard_len) : 1;
    r->peak = dev_mem_peak(m->dev);
    size_t fixed = r->weights + r->gradients + r->optimizer + r->fp8_weights;
    r->activations = r->peak > fixed ? r->peak - fixed : 0;
    r->recompute = m->recompute;
    r->act_storage = m->act_bytes, r->act_storage_plain = m->act_bytes_plain;
    r->nbuckets = m->nbuckets, r->overlap = o->comm != NULL;
    r->bucket_min = r->bucket_max = 0;
    for (int k = 0; k < m->nbuckets; k++) {
        const size_t n = m->bucket_begin[k + 1] - m->bucket_begin[k];
        if (k == 0 || n < r->bucket_min) r->bucket_min = n;
        if (n > r->bucket_max) r->bucket_max = n;
    }
}

double train_memory_formula_per_param(const tr_memory_report *r) {
    return r->act_bytes + r->grad_bytes + (double)r->state_bytes / r->dp;
}

double train_megatron_per_param(bool distributed, int dp) { return distributed ? 6.0 + 12.0 / dp : 18.0; }

double train_megatron_weight_optimizer_bytes(const tr_config *c, int V, int dp) {
    double h = c->hidden_size, L = c->num_layers, heads = c->num_attention_heads;
    double kv = c->kv_channels > 0 ? c->kv_channels : h / heads;
    double groups = c->group_query_attention ? c->num_query_groups : heads;
    double gated = c->swiglu ? 1.5 : 1.0;
    double norm_size = c->normalization == TR_NORM_RMSNORM ? 1.0 : 2.0;    /* LayerNorm has a bias */
    double attn = 2.0 * h * h * (1.0 + groups / heads) * (kv * heads / h); /* q, k, v, o */
    double mlp = 2.0 * h * c->ffn_hidden_size * gated;
    double norms = 2.0 * h * norm_size, final_norm = h * norm_size;
    double emb = h * V;
    int tp = c->tensor_model_parallel_size, pp = c->pipeline_model_parallel_size;
    /* the most loaded shard: its stage's layers and one embedding table, split by TP; norms are replicated */
    double shard = ((attn + mlp) * L / pp + emb) / tp + (norms * L + final_norm) / pp;
    if (c->untie_embeddings_and_output_weights && pp == 1) shard += emb / tp;
    return shard * train_megatron_per_param(c->use_distributed_optimizer, dp);
}

void train_memory_report_print(FILE *out, int rank, const tr_memory_report *r, double megatron) {
    const double MB = 1024.0 * 1024.0;
    fprintf(
        out,
        "[memory] rank %d: weights %.2f MB | gradients %.2f MB | optimizer %.2f MB | activations and scratch %.2f MB "
        "| device peak %.2f MB | Megatron's theoretical weights+optimizer (most loaded shard) %.2f MB\n",
        rank, r->weights / MB, r->gradients / MB, r->optimizer / MB, r->activations / MB, r->peak / MB, megatron / MB);
    /* per parameter, twinrun's formula beside Megatron's (docs/parallel.md) */
    const size_t fixed = r->weights + r->gradients + r->optimizer;
    fprintf(out,
            "[memory] rank %d: weights+gradients+optimizer %.2f MB for %zu parameters = %.3f bytes/parameter; "
            "formula %d + %d + %d/DP at DP %d = %.3f%s; Megatron's %s = %.3f\n",
            rank, fixed / MB, r->params, r->params ? (double)fixed / (double)r->params : 0.0, r->act_bytes,
            r->grad_bytes, r->state_bytes, r->dp, train_memory_formula_per_param(r),
            r->distributed ? " (distributed optimizer)" : "", r->distributed ? "6 + 12/DP" : "18",
            train_megatron_per_param(r->distributed, r->dp));
    if (r->fp8_weights || r->fp8_weights_in_params) /* the bf16 parameters also hold the master's upper halves */
        fprintf(out,
                "[memory] rank %d: FP8 weights (--fp8-param-gather) %.2f MB inside the bf16 parameters (the bytes of "
                "the other optimizer shards' halves of their buckets) and %.2f MB of their own (one byte for each "
                "FP8 layer's weight element where no half is free and aligned: one shard, or the middle one of an odd "
                "count)\n",
                rank, r->fp8_weights_in_params / MB, r->fp8_weights / MB);
    if (r->nbuckets > 1) /* Megatron's DDP logs its buckets too */
        fprintf(out,
                "[memory] rank %d: %d gradient buckets of %zu to %zu elements (padding included), reduced over data "
                "parallelism %s\n",
                rank, r->nbuckets, r->bucket_min, r->bucket_max,
                r->overlap ? "as the backward pass writes them, on a stream of their own" : "after the backward pass");
    if (r->recompute != TR_RECOMPUTE_NONE) /* in kB: the saving of a small model must not print as 0.00 */
        fprintf(out,
                "[memory] rank %d: activation recompute (%s): activations kept %.1f kB instead of %.1f kB, "
                "%.1f kB (%.0f%%) saved\n",
                rank, r->recompute == TR_RECOMPUTE_FULL ? "full" : "selective", r->act_storage / 1024.0,
                r->act_storage_plain / 1024.0, ((double)r->act_storage_plain - (double)r->act_storage) / 1024.0,
                r->act_storage_plain ? 100.0 * (1.0 - (double)r->act_storage / (double)r->act_storage_plain) : 0.0);
}
