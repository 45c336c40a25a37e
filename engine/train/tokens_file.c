#include <stdio.h>
#include <stdlib.h>

#include "core/safe_file.h"
#include "train/batch_source.h"
#include "twinrun/err.h"

typedef struct tokens_file {
    FILE *f;
    int64_t rows, next_row; /* rows of seq+1 tokens; read in order, mbs per micro-batch */
    int mbs, gbs, T, dp_rank, dp_size;
    char path[TR_PATH_LEN];
} tokens_file;

static int tokens_file_next(void *ctx, int micro, int32_t *tokens, int32_t *labels, float *mask, int32_t *pos,
                            char *err, size_t errlen) {
    tokens_file *tf = ctx;
    (void)micro;
    if (tf->next_row + (int64_t)tf->mbs * tf->dp_size > tf->rows)
        return tr_errf(err, errlen, "%s holds %lld iterations of %d samples and is used up; lower --train-iters",
                       tf->path, (long long)(tf->rows / tf->gbs), tf->gbs);
    int T1 = tf->T + 1;
    int32_t *row = malloc((size_t)T1 * sizeof *row);
    if (!row) return tr_errf(err, errlen, "out of host memory");
    for (int b = 0; b < tf->mbs; b++) {
        long long r = tf->next_row + (long long)tf->dp_rank * tf->mbs + b;
        if (fseek(tf->f, (long)(r * T1 * 4), SEEK_SET) || fread(row, 4, (size_t)T1, tf->f) != (size_t)T1) {
            free(row);
            return tr_errf(err, errlen, "%s: short read at row %lld", tf->path, r);
        }
        for (int t = 0; t < tf->T; t++) {
            tokens[b * tf->T + t] = row[t];
            labels[b * tf->T + t] = row[t + 1];
            mask[b * tf->T + t] = 1.0f;
            pos[b * tf->T + t] = t;
        }
    }
    free(row);
    tf->next_row += (int64_t)tf->mbs * tf->dp_size;
    return 0;
}

static int tokens_file_set_position(void *ctx, int64_t train, int64_t valid, char *err, size_t errlen) {
    (void)valid; /* a tokens file has no validation split */
    tokens_file *tf = ctx;
    if (train < 0 || train > tf->rows)
        return tr_errf(err, errlen, "%s: cannot resume at sample %lld of %lld", tf->path, (long long)train,
                       (long long)tf->rows);
    tf->next_row = train;
    return 0;
}

static int64_t tokens_file_valid_consumed(void *ctx) {
    (void)ctx;
    return 0;
}

static void tokens_file_close(void *ctx) {
    tokens_file *tf = ctx;
    if (tf->f) fclose(tf->f);
    free(tf);
}

int train_tokens_file_open(tr_batch_source *src, const tr_config *cfg, int dp_rank, int dp_size, char *err,
                           size_t errlen) {
    tokens_file *tf = calloc(1, sizeof *tf);
    if (!tf) return tr_errf(err, errlen, "out of host memory");
    tf->dp_rank = dp_rank, tf->dp_size = dp_size;
    snprintf(tf->path, sizeof tf->path, "%s", cfg->tokens_file);
    char why[256];
    tf->f = tr_safe_fopen_regular(cfg->tokens_file, why, sizeof why);
    if (!tf->f) {
        tokens_file_close(tf);
        return tr_errf(err, errlen, "--tokens-file %s: cannot open: %s", cfg->tokens_file, why);
    }
    tf->mbs = cfg->micro_batch_size, tf->gbs = cfg->global_batch_size, tf->T = cfg->seq_length;
    fseek(tf->f, 0, SEEK_END);
    long size = ftell(tf->f);
    long block = (long)tf->gbs * (tf->T + 1) * 4;
    if (size <= 0 || block <= 0 || size % block) {
        tokens_file_close(tf);
        return tr_errf(err, errlen,
                       "--tokens-file %s: %ld bytes is not a whole number of int32 [global batch %d, seq+1 %d] "
                       "blocks",
                       cfg->tokens_file, size, cfg->global_batch_size, cfg->seq_length + 1);
    }
    tf->rows = size / block * tf->gbs;
    src->next = tokens_file_next;
    src->next_valid = NULL;
    src->set_position = tokens_file_set_position;
    src->valid_consumed = tokens_file_valid_consumed;
    src->ctx = tf;
    src->close = tokens_file_close;
    return 0;
}
