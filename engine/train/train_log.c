#include "train/train_log.h"

#include <math.h>
#include <time.h>

void train_log_timestamp(char *buf, size_t n, double seconds) {
    time_t whole = (time_t)floor(seconds);
    long micros = (long)((seconds - floor(seconds)) * 1e6);
    struct tm tm;
    gmtime_r(&whole, &tm);
    char date[32];
    strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
    snprintf(buf, n, "%s.%06ld", date, micros);
}

void train_log_write_line(FILE *out, const char *timestamp, const tr_log_line *l, int log_throughput) {
    /* the twin's figures come from its cost model, not a clock: said next to each number, after it,
     * so a parser of Megatron's lines still reads the number */
    char sim[48] = "";
    if (l->simulated) snprintf(sim, sizeof sim, " (simulated, %.16s spec)", l->simulated);
    fprintf(out, " [%s] iteration %8lld/%8lld | consumed samples: %12lld | elapsed time per iteration (ms): %.1f%s |",
            timestamp, (long long)l->iteration, (long long)l->train_iters, (long long)l->consumed_samples,
            l->elapsed_ms_per_iter, sim);
    if (log_throughput) fprintf(out, " throughput per GPU (TFLOP/s/GPU): %.1f%s |", l->tflops_per_gpu, sim);
    fprintf(out, " learning rate: %.6E |", l->lr);
    if (l->has_decoupled_lr) fprintf(out, " decoupled learning rate: %.6E |", l->decoupled_lr);
    fprintf(out, " global batch size: %5d |", l->global_batch_size);
    if (l->lm_loss > 0.0) fprintf(out, " lm loss: %.6E |", l->lm_loss); /* Megatron prints only averages > 0 */
    fprintf(out,
            " loss scale: 1.0 | grad norm: %.3f | number of skipped iterations: %3d |"
            " number of nan iterations: %3d |\n",
            l->grad_norm, l->skipped_iters, l->nan_iters);
    fflush(out);
}

void train_log_write_validation(FILE *out, int64_t iteration, double loss) {
    char at[48];
    snprintf(at, sizeof at, "iteration %lld", (long long)iteration);
    train_log_write_validation_at(out, at, loss);
}

void train_log_write_validation_at(FILE *out, const char *at, double loss) {
    char line[320];
    int n = snprintf(line, sizeof line, " validation loss at %.128s | lm loss value: %.6E | lm loss PPL: %.6E | ", at,
                     loss, exp(loss < 20.0 ? loss : 20.0));
    for (int i = 0; i < n + 1; i++) fputc('-', out);
    fprintf(out, "\n%s\n", line);
    for (int i = 0; i < n + 1; i++) fputc('-', out);
    fputc('\n', out);
    fflush(out);
}

static void json_double(FILE *out, const char *key, double v, int last) {
    if (isfinite(v)) fprintf(out, "\"%s\":%.17g%s", key, v, last ? "" : ",");
    else fprintf(out, "\"%s\":null%s", key, last ? "" : ","); /* JSON has no NaN */
}

void train_log_write_json(FILE *out, const tr_log_line *l) {
    fprintf(out, "{\"iteration\":%lld,\"consumed_samples\":%lld,", (long long)l->iteration,
            (long long)l->consumed_samples);
    json_double(out, "lm_loss", l->lm_loss, 0);
    json_double(out, "grad_norm", l->grad_norm, 0);
    json_double(out, "learning_rate", l->lr, 0);
    json_double(out, "elapsed_ms_per_iter", l->elapsed_ms_per_iter, 0);
    json_double(out, "tflops_per_gpu", l->tflops_per_gpu, 0);
    fprintf(out, "\"global_batch_size\":%d,\"skipped_iterations\":%d,\"nan_iterations\":%d,\"simulated\":%s}\n",
            l->global_batch_size, l->skipped_iters, l->nan_iters, l->simulated ? "true" : "false");
    fflush(out);
}

double train_flops_per_iteration(const tr_config *c, int V) {
    double B = c->global_batch_size, s = c->seq_length, h = c->hidden_size, L = c->num_layers;
    double kv = c->kv_channels > 0 ? c->kv_channels : h / c->num_attention_heads;
    double groups = c->group_query_attention ? c->num_query_groups : c->num_attention_heads;
    double q = c->num_attention_heads * kv, k = groups * kv;
    double mlp = 6.0 * h * c->ffn_hidden_size * (c->swiglu ? 3.0 : 2.0) * L;
    double attn_proj = 6.0 * L * (h * (q + 2.0 * k) + q * h);
    double logits = 6.0 * h * V;
    return B * s * (mlp + attn_proj + logits) + B * s * s * 6.0 * q * L;
}
