/* Config completion and batch-source selection for the training entry. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <stdlib.h>

#include "ckpt/ckpt.h"
#include "data/batch.h"
#include "io/hf_config.h"
#include "model/llama.h"
#include "tok/tok_dir.h"
#include "train/batch_source.h"
#include "train/checkpoint.h"
#include "train/resume_check.h"
#include "train/trainer.h"
#include "twinrun/err.h"

/* --use-checkpoint-args: the model flags of the checkpoint --load would read replace the command
 * line's (Megatron's load_args_from_checkpoint); without a checkpoint the command line's stand, as
 * Megatron says and does. */
static int use_checkpoint_args(tr_config *cfg, char *err, size_t errlen) {
    int64_t it;
    int r = train_ckpt_pick(cfg, &it, NULL, 0, err, errlen);
    if (r < 0) return -1;
    if (r == 1) {
        tr_config_warn(cfg,
                       "--use-checkpoint-args: no checkpoint in %s to provide arguments, using the command "
                       "line's",
                       cfg->load);
        return 0;
    }
    ckpt_manifest m;
    if (ckpt_manifest_load(cfg->load, it, &m, err, errlen)) return -1;
    ckpt_model_to_config(&m.model, cfg);
    ckpt_manifest_free(&m);
    return 0;
}

/* HuggingFaceTokenizer and TikTokenizer: the tokenizer is read as Megatron's start-up reads it (a
 * TikTokenizer with --tiktoken-pattern, --tiktoken-num-special-tokens and --vocab-size, Megatron's
 * 131072 without it), so a directory or rank file that Megatron could not load fails here, at once, with the file and the fix; its vocabulary (the model's
 * when --vocab-size is not given, as Megatron takes it) and eos/bos ids go into cfg. */
static void read_tokenizer(tr_config *cfg, tr_errlist *el) {
    char err[1024];
    tr_tok_specials sp;
    tr_tok_tiktoken tk = {.pattern = cfg->tiktoken_pattern[0] ? cfg->tiktoken_pattern : NULL,
                          .vocab_size = cfg->vocab_size > 0 ? cfg->vocab_size : 0,
                          .num_special = cfg->tiktoken_num_special_tokens};
    tr_tok *t = tr_tok_open(cfg->tokenizer_type, cfg->tokenizer_model, &tk, &sp, err, sizeof err);
    if (!t) {
        tr_errlist_add(el, "%s", err);
        return;
    }
    cfg->tokenizer_vocab = tr_tok_vocab_size(t);
    cfg->tokenizer_eod = sp.eos;
    cfg->tokenizer_bos = sp.bos;
    tr_tok_free(t);
    if (cfg->vocab_size <= 0) cfg->vocab_size = (int)cfg->tokenizer_vocab;
    int64_t mult = cfg->make_vocab_size_divisible_by > 0 ? cfg->make_vocab_size_divisible_by : 1;
    int64_t padded = (cfg->vocab_size + mult - 1) / mult * mult;
    if (cfg->tokenizer_vocab > padded)
        tr_errlist_add(el,
                       "--tokenizer-model %s has %lld tokens, more than the model's vocabulary (--vocab-size %d, "
                       "padded to %lld); give --vocab-size %lld or leave it out",
                       cfg->tokenizer_model, (long long)cfg->tokenizer_vocab, cfg->vocab_size, (long long)padded,
                       (long long)cfg->tokenizer_vocab);
}

/* --tokenizer-model names files Megatron's tokenizer opens at start-up (all but NullTokenizer, which
 * ignores it): a path that is not there fails Megatron's run, so it fails here too, at once. */
static void check_tokenizer_model(tr_config *cfg, tr_errlist *el) {
    bool readable =
        !strcmp(cfg->tokenizer_type, "HuggingFaceTokenizer") || !strcmp(cfg->tokenizer_type, "TikTokenizer");
    if (readable && cfg->tokenizer_model[0]) {
        read_tokenizer(cfg, el);
        return;
    }
    if (!cfg->tokenizer_model[0] || !strcmp(cfg->tokenizer_type, "NullTokenizer")) return;
    struct stat st;
    if (stat(cfg->tokenizer_model, &st) != 0)
        tr_errlist_add(el,
                       "--tokenizer-model %s: %s; give the tokenizer's directory (tokenizer.json, "
                       "tokenizer_config.json) or model file as it is on this machine (twinrun does not download "
                       "from the Hugging Face hub)",
                       cfg->tokenizer_model, strerror(errno));
}

int train_prepare_config(tr_config *cfg, int world, char *err, size_t errlen) {
    if (cfg->hf_load[0]) {
        char path[TR_PATH_LEN + 16];
        snprintf(path, sizeof path, "%s/config.json", cfg->hf_load);
        hf_llama_config hf;
        if (hf_config_load(&hf, path, err, errlen) || hf_config_apply(&hf, cfg, err, errlen)) return -1;
    }
    if (train_ckpt_resolve_paths(cfg, err, errlen)) return -1;
    if (cfg->use_checkpoint_args && cfg->load[0] && use_checkpoint_args(cfg, err, errlen)) return -1;
    /* every problem of the job at once, before any rank starts: one report, not one per rank */
    tr_errlist el;
    tr_errlist_init(&el);
    tr_config_collect_errors(cfg, world, &el);
    llama_check_config(cfg, &el);
    check_tokenizer_model(cfg, &el);
    if (tr_errlist_format(&el, err, errlen)) return -1;
    if (tr_config_finalize(cfg, world, err, errlen)) return -1;
    return train_resume_check(cfg, err, errlen); /* what a resume changes of its checkpoint, before any rank */
}

static int data_next(void *ctx, int micro, int32_t *tokens, int32_t *labels, float *mask, int32_t *pos, char *err,
                     size_t errlen) {
    (void)micro; /* Megatron's sampler hands out micro-batches in order */
    return tr_data_next_train(ctx, tokens, labels, mask, pos, err, errlen);
}

static int data_next_valid(void *ctx, int micro, int32_t *tokens, int32_t *labels, float *mask, int32_t *pos, char *err,
                           size_t errlen) {
    (void)micro;
    return tr_data_next_valid(ctx, tokens, labels, mask, pos, err, errlen);
}

static void data_close(void *ctx) { tr_data_close(ctx); }

static int data_set_position(void *ctx, int64_t train, int64_t valid, char *err, size_t errlen) {
    if (tr_data_set_consumed_samples(ctx, train, err, errlen)) return -1;
    return tr_data_has_split(ctx, 1) ? tr_data_set_consumed_valid_samples(ctx, valid, err, errlen) : 0;
}

static int64_t data_valid_consumed(void *ctx) { return tr_data_consumed_valid_samples(ctx); }

int train_job_data_open(tr_data **out, const tr_config *cfg, char *err, size_t errlen) {
    *out = NULL;
    if (cfg->tokens_file[0]) return 0;
    if (!cfg->mock_data && cfg->n_data_path == 0)
        return tr_errf(err, errlen, "no training data: give --data-path PREFIX, --mock-data, or --tokens-file FILE");
    *out = tr_data_open(cfg, 0, 1, err, errlen);
    return *out ? 0 : -1;
}

int train_batch_source_open(tr_batch_source *src, const tr_config *cfg, tr_data *shared, int dp_rank, int dp_size,
                            char *err, size_t errlen) {
    src->data = NULL;
    if (!shared) return train_tokens_file_open(src, cfg, dp_rank, dp_size, err, errlen);
    tr_data *d = tr_data_view(shared, dp_rank, dp_size, err, errlen);
    if (!d) return -1;
    src->next = data_next;
    src->next_valid = data_next_valid;
    src->ctx = d;
    src->close = data_close;
    src->set_position = data_set_position;
    src->valid_consumed = data_valid_consumed;
    src->data = d;
    return 0;
}
