/* Megatron's training_log line, field for field (format strings read from Megatron-LM's
 * training.py: "iteration {:8d}/{:8d}", "consumed samples: {:12d}", "{:.1f}", "{:.6E}", "{:5d}",
 * "grad norm: {:.3f}", "{:3d}"), and Megatron's FLOPs formula on the worked value in
 * ../shared/notes/megatron.md (Llama3-8B at s 8192: 5.147e10 FLOPs per token). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "train/memory_report.h"
#include "train/train_log.h"

static char *render(const tr_log_line *l, int throughput) {
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    train_log_write_line(f, "2025-01-02 03:04:05.678901", l, throughput);
    fclose(f);
    return buf;
}

static void test_megatron_line(void **state) {
    (void)state;
    tr_log_line l = {.iteration = 100,
                     .train_iters = 1000,
                     .consumed_samples = 12800,
                     .elapsed_ms_per_iter = 5123.4,
                     .tflops_per_gpu = 612.3,
                     .lr = 1.5e-4,
                     .global_batch_size = 128,
                     .lm_loss = 3.456789,
                     .grad_norm = 1.2345,
                     .skipped_iters = 0,
                     .nan_iters = 0};
    char *s = render(&l, 1);
    const char *want =
        " [2025-01-02 03:04:05.678901] iteration      100/    1000 | consumed samples:        12800 |"
        " elapsed time per iteration (ms): 5123.4 | throughput per GPU (TFLOP/s/GPU): 612.3 |"
        " learning rate: 1.500000E-04 | global batch size:   128 | lm loss: 3.456789E+00 | loss scale: 1.0 |"
        " grad norm: 1.234 | number of skipped iterations:   0 | number of nan iterations:   0 |\n";
    assert_string_equal(s, want);
    free(s);
    s = render(&l, 0); /* without --log-throughput the field is absent */
    assert_null(strstr(s, "throughput"));
    free(s);
}

static void test_json_line_has_no_nan(void **state) {
    (void)state;
    tr_log_line l = {.iteration = 3, .lm_loss = NAN, .grad_norm = 2.5, .lr = 1e-3, .global_batch_size = 8};
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    train_log_write_json(f, &l);
    fclose(f);
    assert_non_null(strstr(buf, "\"lm_loss\":null"));
    assert_non_null(strstr(buf, "\"grad_norm\":2.5"));
    assert_non_null(strstr(buf, "\"iteration\":3"));
    free(buf);
}

/* evaluate_and_print_results: the rule is one dash longer than the line */
static void test_validation_block(void **state) {
    (void)state;
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    train_log_write_validation(f, 100, 25.0);
    fclose(f);
    const char *line = " validation loss at iteration 100 | lm loss value: 2.500000E+01 | lm loss PPL: 4.851652E+08 | ";
    size_t len = strlen(line);
    char want[512];
    memset(want, '-', len + 1);
    want[len + 1] = '\n';
    strcpy(want + len + 2, line);
    want[2 * len + 2] = '\n';
    memset(want + 2 * len + 3, '-', len + 1);
    strcpy(want + 3 * len + 4, "\n"); /* PPL capped at exp(20) = 4.851652E+08, as Megatron does */
    assert_string_equal(buf, want);
    free(buf);
}

static void test_flops_llama3_8b(void **state) {
    (void)state;
    tr_config c;
    tr_config_defaults(&c);
    c.global_batch_size = 1, c.seq_length = 8192, c.hidden_size = 4096, c.num_layers = 32;
    c.num_attention_heads = 32, c.group_query_attention = true, c.num_query_groups = 8, c.kv_channels = 128;
    c.ffn_hidden_size = 14336, c.swiglu = true;
    double per_token = train_flops_per_iteration(&c, 128256) / 8192.0;
    assert_true(fabs(per_token / 5.147e10 - 1.0) < 1e-3);
}

/* ../shared/notes/megatron.md's worked value (from Megatron's theoretical_memory_usage.py): Llama3-8B,
 * TP1 PP1 DP8, untied, distributed optimizer: weights and optimizer 57436.90 MB. */
static void test_megatron_memory_formula(void **state) {
    (void)state;
    tr_config c;
    tr_config_defaults(&c);
    c.hidden_size = 4096, c.num_layers = 32, c.num_attention_heads = 32, c.group_query_attention = true;
    c.num_query_groups = 8, c.kv_channels = 128, c.ffn_hidden_size = 14336, c.swiglu = true;
    c.untie_embeddings_and_output_weights = true, c.use_distributed_optimizer = true;
    c.normalization = TR_NORM_RMSNORM;
    double mb = train_megatron_weight_optimizer_bytes(&c, 128256, 8) / (1024.0 * 1024.0);
    assert_true(fabs(mb - 57436.90) < 0.01);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_megatron_line),           cmocka_unit_test(test_json_line_has_no_nan),
        cmocka_unit_test(test_validation_block),        cmocka_unit_test(test_flops_llama3_8b),
        cmocka_unit_test(test_megatron_memory_formula),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
