/* train_llama3: Megatron-LM's pretrain_gpt.py flags, one rank, on whichever backend this binary
 * was linked with (the twin or CUDA). */
#include <stdio.h>
#include <string.h>

#include "train/batch_source.h"
#include "train/trainer.h"
#include "twinrun/config.h"
#include "twinrun/err.h"

int main(int argc, char **argv) {
    tr_config cfg;
    char err[2048] = "";
    tr_config_defaults(&cfg);
    int rc = tr_config_parse(&cfg, argc - 1, argv + 1, err, sizeof err);
    if (rc == 1) return 0; /* --help */
    if (rc) {
        fprintf(stderr, "train_llama3: %s\n", err);
        return TR_EXIT_USAGE;
    }
    if (tr_train_prepare_config(&cfg, err, sizeof err)) {
        fputs(cfg.warnings, stderr);
        fprintf(stderr, "train_llama3: %s\n", err);
        return TR_EXIT_USAGE;
    }
    fputs(cfg.warnings, stderr);
    tr_batch_source src;
    if (tr_batch_source_open(&src, &cfg, err, sizeof err)) {
        fprintf(stderr, "train_llama3: %s\n", err);
        return TR_EXIT_USAGE;
    }
    tr_train_summary sum;
    rc = tr_train(&cfg, &src, stdout, &sum, err, sizeof err);
    src.close(src.ctx);
    if (rc) {
        fprintf(stderr, "train_llama3: %s\n", err);
        return rc;
    }
    printf("[after training] %lld iterations, %lld samples, lm loss %.6E -> %.6E, device memory peak %.1f MiB\n",
           (long long)sum.iterations, (long long)sum.consumed_samples, sum.first_loss, sum.last_loss,
           sum.device_peak_bytes / 1048576.0);
    return 0;
}
