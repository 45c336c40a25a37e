/* The `dataset` program: Megatron-style data preparation and inspection.
 *   dataset preprocess --input DOCS.jsonl --output-prefix P --tokenizer-type HuggingFaceTokenizer
 *       --tokenizer-model DIR [--json-keys text ...] [--append-eod] [--workers N] [--partitions N]
 *       [--keep-sequential-samples] [--skip-bad-lines] [--log-interval N] [--overwrite]
 *       JSON lines of text -> P_KEY_document.bin/.idx, as Megatron's tools/preprocess_data.py; or
 *       --tokenizer-type TikTokenizer --tokenizer-model RANKS.json --tiktoken-pattern v1|v2
 *       [--vocab-size V] [--tiktoken-num-special-tokens N] [--tiktoken-special-tokens T ...].
 *   dataset preprocess --input DOCS.jsonl --output-prefix P [--append-eod] [--vocab-size V] [--eod-id N]
 *       [--overwrite]
 *       JSON lines {"ids": [...]} (already tokenized) -> P.bin + P.idx (Megatron's MMIDIDX v1).
 *   Both write under temporary names and rename on success: a failed run leaves an earlier dataset as
 *   it was, and an existing one is replaced only with --overwrite.
 *   dataset inspect PREFIX [--vocab-size V]
 *       counts, dtype, token and length ranges; fails if a token id is >= V.
 *   dataset samples <train_llama3 data flags> --split-name train|valid|test --count N --out DIR
 *       [--tokenizer-identity JSON]: DIR/tokens.npy and DIR/labels.npy (int64 [N, seq]) - the
 *       split's first N samples in the order the trainer sees them; --decode (with the data's
 *       --tokenizer-type/--tokenizer-model) prints each as text, --out then optional.
 *   dataset check-tokenizer PREFIX --tokenizer-model M [--tokenizer-type T] [--count N]
 *       whether PREFIX was made with this tokenizer: N sequences spread over it decoded and encoded
 *       again; exit 1 naming the first that differs. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/batch.h"
#include "data/indexed_dataset.h"
#include "data/jsonl.h"
#include "data/npy.h"
#include "data/preprocess.h"
#include "tok/tok_dir.h"
#include "twinrun/config.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

#define ERRLEN 1024

static int usage(void) {
    fprintf(
        stderr,
        "usage: dataset preprocess --input DOCS.jsonl --output-prefix PREFIX --tokenizer-type HuggingFaceTokenizer "
        "--tokenizer-model DIR [--json-keys KEY ...] [--append-eod] [--workers N] [--partitions N] "
        "[--keep-sequential-samples] [--skip-bad-lines] [--log-interval N] "
        "[--tokenizer-hf-no-include-special-tokens] [--overwrite]\n"
        "       dataset preprocess ... --tokenizer-type TikTokenizer --tokenizer-model RANKS.json --tiktoken-pattern "
        "v1|v2 [--vocab-size V] [--tiktoken-num-special-tokens N] [--tiktoken-special-tokens T ...]\n"
        "       dataset preprocess --input IDS.jsonl --output-prefix PREFIX [--append-eod] [--vocab-size V] "
        "[--eod-id N] [--overwrite]\n"
        "       dataset inspect PREFIX [--vocab-size V]\n"
        "       dataset samples [train_llama3 data flags] --split-name train|valid|test --count N --out DIR "
        "[--tokenizer-identity JSON] [--decode --tokenizer-type T --tokenizer-model M]\n"
        "       dataset check-tokenizer PREFIX --tokenizer-model M [--tokenizer-type T] [--count N] "
        "[--tiktoken-pattern v1|v2 --vocab-size V --tiktoken-num-special-tokens N]\n");
    return TR_EXIT_USAGE;
}

static int parse_i64(const char *flag, const char *s, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s ? s : "", &end, 10);
    if (!s || !*s || *end || errno) {
        fprintf(stderr, "dataset: %s expects an integer, got '%s'\n", flag, s ? s : "");
        return -1;
    }
    *v = x;
    return 0;
}

static int parse_int(const char *flag, const char *s, int lo, int hi, int *v) {
    int64_t x;
    if (parse_i64(flag, s, &x)) return -1;
    if (x < lo || x > hi) {
        fprintf(stderr, "dataset preprocess: %s %lld: use %d..%d\n", flag, (long long)x, lo, hi);
        return -1;
    }
    *v = (int)x;
    return 0;
}

/* Megatron's flags for text input; 0, or an exit code. */
static int text_flags(int argc, char **argv, tr_pre_opts *o, const char **type, const char **model,
                      tr_tok_tiktoken *tk) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int x;
        if (!strcmp(a, "--input") && v) o->input = argv[++i];
        else if (!strcmp(a, "--output-prefix") && v) o->prefix = argv[++i];
        else if (!strcmp(a, "--tokenizer-type") && v) *type = argv[++i];
        else if (!strcmp(a, "--tokenizer-model") && v) *model = argv[++i];
        else if (!strcmp(a, "--append-eod")) o->append_eod = true;
        else if (!strcmp(a, "--keep-sequential-samples")) o->keep_sequential = true;
        else if (!strcmp(a, "--skip-bad-lines")) o->skip_bad = true;
        else if (!strcmp(a, "--overwrite")) o->overwrite = true;
        else if (!strcmp(a, "--tokenizer-hf-no-include-special-tokens")) o->add_special = false;
        else if (!strcmp(a, "--tiktoken-pattern") && v) tk->pattern = argv[++i];
        else if (!strcmp(a, "--tiktoken-num-special-tokens") || !strcmp(a, "--vocab-size")) {
            if (parse_int(a, v, 1, 1 << 24, &x)) return TR_EXIT_USAGE;
            *(a[2] == 't' ? &tk->num_special : &tk->vocab_size) = x;
            i++;
        } else if (!strcmp(a, "--tiktoken-special-tokens")) {
            /* Megatron's nargs='+': the tokens up to the next flag */
            tk->special = (const char *const *)&argv[i + 1];
            tk->nspecial = 0;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2)) tk->nspecial++, i++;
            if (!tk->nspecial)
                return fprintf(stderr, "dataset preprocess: --tiktoken-special-tokens needs at least one token\n"),
                       usage();
        } else if (!strcmp(a, "--json-keys")) {
            o->nkeys = 0;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) && o->nkeys < TR_PRE_MAX_KEYS)
                o->keys[o->nkeys++] = argv[++i];
            if (!o->nkeys) return fprintf(stderr, "dataset preprocess: --json-keys needs at least one key\n"), usage();
        } else if (!strcmp(a, "--workers") || !strcmp(a, "--partitions") || !strcmp(a, "--log-interval")) {
            if (parse_int(a, v, a[2] == 'l' ? 0 : 1, a[2] == 'l' ? 1 << 30 : 256, &x)) return TR_EXIT_USAGE;
            *(a[2] == 'w' ? &o->workers : a[2] == 'p' ? &o->partitions : &x) = x;
            if (a[2] == 'l') o->log_interval = x;
            i++;
        } else if (!strcmp(a, "--split-sentences")) {
            fprintf(stderr, "dataset preprocess: --split-sentences (NLTK's punkt) is not implemented; preprocess "
                            "without it, or give each document as a JSON list of sentences\n");
            return TR_EXIT_USAGE;
        } else {
            fprintf(stderr, "dataset preprocess: unknown or incomplete flag '%s'\n", a);
            return usage();
        }
    }
    if (!o->input || !o->prefix) return usage();
    if (o->workers % o->partitions) {
        fprintf(stderr,
                "dataset preprocess: --workers %d is not divisible by --partitions %d (Megatron's tool "
                "refuses it too); give workers = partitions x workers-per-partition\n",
                o->workers, o->partitions);
        return TR_EXIT_USAGE;
    }
    return 0;
}

static int cmd_preprocess_text(int argc, char **argv) {
    tr_pre_opts o = {
        .keys = {"text"}, .nkeys = 1, .add_special = true, .workers = 1, .partitions = 1, .log_interval = 1000};
    const char *type = NULL, *model = NULL;
    tr_tok_tiktoken tk = {.num_special = 1000}; /* Megatron's default */
    int rc = text_flags(argc, argv, &o, &type, &model, &tk);
    if (rc) return rc;
    char err[ERRLEN];
    if (tr_pre_check_outputs(&o, err, sizeof err)) {
        fprintf(stderr, "dataset preprocess: %s\n", err);
        return TR_EXIT_USAGE;
    }
    tr_tok_specials sp;
    tr_tok *tok = tr_tok_open(type, model, &tk, &sp, err, sizeof err);
    if (!tok) {
        fprintf(stderr, "dataset preprocess: %s\n", err);
        return TR_EXIT_USAGE;
    }
    o.tok = tok;
    o.eod = sp.eos;
    if (o.append_eod && o.eod < 0) {
        fprintf(stderr,
                "dataset preprocess: --append-eod: %s/tokenizer_config.json names no eos_token (Megatron's "
                "eod); add \"eos_token\" to it\n",
                model);
        tr_tok_free(tok);
        return TR_EXIT_USAGE;
    }
    tr_pre_stats st;
    rc = tr_pre_run(&o, &st, err, sizeof err);
    tr_tok_free(tok);
    if (rc) {
        fprintf(stderr, "dataset preprocess: %s\n", err);
        return TR_EXIT_FATAL;
    }
    if (st.bad_lines)
        fprintf(stderr, "dataset preprocess: skipped %lld bad lines, the first %s:%lld: %s\n", (long long)st.bad_lines,
                o.input, (long long)st.first_bad_line, st.first_bad);
    for (int k = 0; k < o.nkeys; k++) printf("wrote %s_%s_document.bin and .idx\n", o.prefix, o.keys[k]);
    printf("%lld documents, %lld tokens, %.1f MB in %.2f s (%.2f MB/s, %d workers)\n", (long long)st.docs,
           (long long)st.tokens, (double)st.bytes / 1048576.0, st.seconds,
           (double)st.bytes / 1048576.0 / (st.seconds > 0 ? st.seconds : 1e-9), o.workers);
    return 0;
}

static int cmd_preprocess(int argc, char **argv) {
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--tokenizer-type") && i + 1 < argc && strcmp(argv[i + 1], "NullTokenizer"))
            return cmd_preprocess_text(argc, argv);
    const char *input = NULL, *prefix = NULL;
    int append_eod = 0;
    bool overwrite = false;
    int64_t vocab = 0, eod = -1;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--input") && v) input = argv[++i];
        else if (!strcmp(a, "--output-prefix") && v) prefix = argv[++i];
        else if (!strcmp(a, "--append-eod")) append_eod = 1;
        else if (!strcmp(a, "--overwrite")) overwrite = true;
        else if (!strcmp(a, "--vocab-size")) {
            if (parse_i64(a, v, &vocab)) return TR_EXIT_USAGE;
            i++;
        } else if (!strcmp(a, "--eod-id")) {
            if (parse_i64(a, v, &eod)) return TR_EXIT_USAGE;
            i++;
        } else {
            fprintf(stderr, "dataset preprocess: unknown or incomplete flag '%s'\n", a);
            return usage();
        }
    }
    if (!input || !prefix) return usage();
    if (append_eod && eod < 0) {
        if (vocab <= 0) {
            fprintf(stderr, "dataset preprocess: --append-eod needs --eod-id N (or --vocab-size V: eod = V - 1)\n");
            return TR_EXIT_USAGE;
        }
        eod = vocab - 1;
    }
    char err[ERRLEN];
    if (!overwrite && tr_idx_writer_check_new(prefix, err, sizeof err)) {
        fprintf(stderr, "dataset preprocess: %s\n", err);
        return TR_EXIT_USAGE;
    }
    FILE *in = fopen(input, "r");
    if (!in) {
        fprintf(stderr, "dataset preprocess: %s: %s\n", input, strerror(errno));
        return TR_EXIT_FATAL;
    }
    /* Megatron's choice: uint16 below 65500 ids, int32 otherwise (and when the vocab is unknown) */
    int code = tr_idx_optimal_code(vocab > 0 ? vocab : 1 << 30);
    tr_idx_writer *w = tr_idx_writer_open(prefix, code, overwrite, err, sizeof err);
    if (!w) {
        fclose(in);
        fprintf(stderr, "dataset preprocess: %s\n", err);
        return TR_EXIT_FATAL;
    }
    char *line = NULL;
    size_t lcap = 0;
    int64_t *ids = NULL, cap = 0, docs = 0, tokens = 0, lineno = 0;
    ssize_t got;
    int rc = 0;
    while ((got = getline(&line, &lcap, in)) >= 0) {
        lineno++;
        if (strspn(line, " \t\r\n") == (size_t)got) continue; /* blank lines */
        int64_t n = tr_jsonl_ids(line, &ids, &cap, vocab, err, sizeof err);
        if (n < 0) {
            fprintf(stderr, "dataset preprocess: %s:%lld: %s\n", input, (long long)lineno, err);
            rc = TR_EXIT_FATAL;
            break;
        }
        if (append_eod) ids[n++] = eod;
        if (tr_idx_writer_add(w, ids, n, err, sizeof err)) {
            fprintf(stderr, "dataset preprocess: %s:%lld: %s\n", input, (long long)lineno, err);
            rc = TR_EXIT_FATAL;
            break;
        }
        docs++;
        tokens += n;
    }
    free(line);
    free(ids);
    fclose(in);
    if (rc) {
        tr_idx_writer_abort(w);
        return rc;
    }
    if (tr_idx_writer_finish(w, err, sizeof err)) {
        fprintf(stderr, "dataset preprocess: %s\n", err);
        return TR_EXIT_FATAL;
    }
    printf("wrote %s.bin and %s.idx: %lld documents, %lld tokens, dtype %s\n", prefix, prefix, (long long)docs,
           (long long)tokens, tr_idx_dtype_name(code));
    return 0;
}

static int cmd_inspect(int argc, char **argv) {
    const char *prefix = NULL;
    int64_t vocab = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--vocab-size")) {
            if (parse_i64(argv[i], i + 1 < argc ? argv[i + 1] : NULL, &vocab)) return TR_EXIT_USAGE;
            i++;
        } else if (!prefix && argv[i][0] != '-') prefix = argv[i];
        else return usage();
    }
    if (!prefix) return usage();
    char err[ERRLEN];
    tr_idx_dataset *d = tr_idx_open(prefix, true, err, sizeof err);
    if (!d) {
        fprintf(stderr, "dataset inspect: %s\n", err);
        return TR_EXIT_FATAL;
    }
    int64_t S = tr_idx_num_sequences(d), total = 0, lo = INT64_MAX, hi = INT64_MIN, bad = 0, first_bad = -1;
    int64_t lmin = INT64_MAX, lmax = 0;
    const int32_t *len = tr_idx_lengths(d);
    int64_t *buf = NULL, bcap = 0;
    int rc = 0;
    for (int64_t s = 0; s < S && !rc; s++) {
        if (len[s] > bcap) {
            int64_t *nb = realloc(buf, (size_t)len[s] * sizeof *nb);
            if (!nb) {
                rc = TR_EXIT_FATAL;
                break;
            }
            buf = nb;
            bcap = len[s];
        }
        if (tr_idx_read(d, s, 0, len[s], buf, err, sizeof err)) {
            fprintf(stderr, "dataset inspect: %s\n", err);
            rc = TR_EXIT_FATAL;
            break;
        }
        total += len[s];
        lmin = len[s] < lmin ? len[s] : lmin;
        lmax = len[s] > lmax ? len[s] : lmax;
        for (int64_t k = 0; k < len[s]; k++) {
            lo = buf[k] < lo ? buf[k] : lo;
            hi = buf[k] > hi ? buf[k] : hi;
            if (buf[k] < 0 || (vocab > 0 && buf[k] >= vocab)) {
                if (first_bad < 0) first_bad = s;
                bad++;
            }
        }
    }
    free(buf);
    if (!rc) {
        printf("prefix:     %s\n", prefix);
        printf("dtype:      %s (code %d)\n", tr_idx_dtype_name(tr_idx_dtype(d)), tr_idx_dtype(d));
        printf("sequences:  %lld\n", (long long)S);
        printf("documents:  %lld\n", (long long)tr_idx_num_documents(d));
        printf("tokens:     %lld\n", (long long)total);
        if (S) printf("lengths:    %lld .. %lld\n", (long long)lmin, (long long)lmax);
        if (total) printf("token ids:  %lld .. %lld\n", (long long)lo, (long long)hi);
        printf("modes:      %s\n", tr_idx_modes(d) ? "present (multimodal)" : "none");
        if (vocab > 0) {
            if (bad) {
                printf("vocab:      FAIL: %lld token ids outside [0, %lld), first in sequence %lld\n", (long long)bad,
                       (long long)vocab, (long long)first_bad);
                rc = TR_EXIT_FATAL;
            } else {
                printf("vocab:      ok (all ids < %lld)\n", (long long)vocab);
            }
        }
    }
    tr_idx_close(d);
    return rc;
}

/* The tokenizer train_llama3's flags name (--tokenizer-type, --tokenizer-model). */
static tr_tok *open_config_tokenizer(const tr_config *cfg, char *err, size_t errlen) {
    if (!cfg->tokenizer_model[0]) {
        tr_errf(err, errlen, "give the tokenizer: --tokenizer-type HuggingFaceTokenizer --tokenizer-model DIR");
        return NULL;
    }
    tr_tok_specials sp;
    return tr_tok_open(cfg->tokenizer_type[0] ? cfg->tokenizer_type : "HuggingFaceTokenizer", cfg->tokenizer_model,
                       NULL, &sp, err, errlen);
}

/* Text as Python's decode(errors="replace") shows it: each invalid UTF-8 sequence one U+FFFD (a
 * sample may start or end inside a character: byte-level tokens split them). */
static void put_text(const char *s, size_t n) {
    for (size_t i = 0; i < n;) {
        size_t v = tr_tok_utf8_valid(s + i, n - i);
        fwrite(s + i, 1, v, stdout);
        i += v;
        if (i >= n) break;
        fputs("\xef\xbf\xbd", stdout);
        size_t k = 1;
        while (i + k < n && k < 3 && ((unsigned char)s[i + k] & 0xc0) == 0x80) k++;
        i += k;
    }
}

/* One sample's S + 1 tokens (the tokens and the last label) as text, special tokens included. */
static int print_decoded(const tr_tok *t, const char *split, int64_t i, const int64_t *ids, int64_t n, char *err,
                         size_t errlen) {
    int32_t *id32 = malloc(sizeof *id32 * (size_t)n);
    char *text = NULL;
    size_t len = 0, cap = 0;
    int rc = id32 ? 0 : tr_errf(err, errlen, "out of memory");
    for (int64_t k = 0; !rc && k < n; k++) {
        if (ids[k] < 0 || ids[k] > INT32_MAX)
            rc = tr_errf(err, errlen, "%s sample %lld: token id %lld is not a tokenizer's id", split, (long long)i,
                         (long long)ids[k]);
        else id32[k] = (int32_t)ids[k];
    }
    char why[512];
    if (!rc && tr_tok_decode(t, id32, n, false, &text, &len, &cap, why, sizeof why))
        rc = tr_errf(err, errlen, "%s sample %lld: %s", split, (long long)i, why);
    if (!rc) {
        printf("---- %s sample %lld (%lld tokens) ----\n", split, (long long)i, (long long)n);
        put_text(text, len);
        putchar('\n');
    }
    free(id32);
    free(text);
    return rc;
}

/* dataset check-tokenizer PREFIX --tokenizer-model M [--tokenizer-type T] [tiktoken flags] [--count N]:
 * N sequences spread over the dataset, each decoded and encoded again (tr_tok_check_ids). */
static int cmd_check_tokenizer(int argc, char **argv) {
    const char *prefix = NULL, *type = "HuggingFaceTokenizer", *model = NULL;
    tr_tok_tiktoken tk = {.num_special = 1000};
    int64_t count = 1000;
    int x;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--tokenizer-type") && v) type = argv[++i];
        else if (!strcmp(a, "--tokenizer-model") && v) model = argv[++i];
        else if (!strcmp(a, "--tiktoken-pattern") && v) tk.pattern = argv[++i];
        else if (!strcmp(a, "--count")) {
            if (parse_i64(a, v, &count)) return TR_EXIT_USAGE;
            if (count < 1) return fprintf(stderr, "dataset check-tokenizer: --count must be at least 1\n"), usage();
            i++;
        } else if (!strcmp(a, "--vocab-size") || !strcmp(a, "--tiktoken-num-special-tokens")) {
            if (parse_int(a, v, 1, 1 << 24, &x)) return TR_EXIT_USAGE;
            *(a[2] == 'v' ? &tk.vocab_size : &tk.num_special) = x;
            i++;
        } else if (!prefix && a[0] != '-') prefix = a;
        else {
            fprintf(stderr, "dataset check-tokenizer: unknown or incomplete flag '%s'\n", a);
            return usage();
        }
    }
    if (!prefix || !model) return usage();
    char err[ERRLEN], why[1024];
    tr_tok_specials sp;
    tr_tok *t = tr_tok_open(type, model, &tk, &sp, err, sizeof err);
    if (!t) {
        fprintf(stderr, "dataset check-tokenizer: %s\n", err);
        return TR_EXIT_USAGE;
    }
    tr_idx_dataset *d = tr_idx_open(prefix, true, err, sizeof err);
    if (!d) {
        fprintf(stderr, "dataset check-tokenizer: %s\n", err);
        tr_tok_free(t);
        return TR_EXIT_FATAL;
    }
    int64_t S = tr_idx_num_sequences(d), n = count < S ? count : S, same = 0, first = -1;
    const int32_t *len = tr_idx_lengths(d);
    int64_t *buf = NULL, bcap = 0;
    tr_tok_buf b = {0};
    int rc = 0;
    for (int64_t k = 0; k < n && !rc; k++) {
        int64_t s = n < S ? k * S / n : k; /* evenly spread: the first and every S/n-th */
        if (len[s] > bcap) {
            int64_t *nb = realloc(buf, (size_t)len[s] * sizeof *nb);
            if (!nb) rc = TR_EXIT_FATAL;
            else buf = nb, bcap = len[s];
        }
        if (!rc && tr_idx_read(d, s, 0, len[s], buf, err, sizeof err)) {
            fprintf(stderr, "dataset check-tokenizer: %s\n", err);
            rc = TR_EXIT_FATAL;
        }
        int ok = rc ? -1 : tr_tok_check_ids(t, &b, buf, len[s], why, sizeof why);
        if (ok < 0 && !rc) rc = TR_EXIT_FATAL;
        if (ok == 1) same++;
        if (ok == 0 && first < 0) {
            first = s;
            printf("sequence %lld: %s\n", (long long)s, why);
        }
    }
    if (!rc) {
        printf("%lld of %lld sequences (of %lld) are what %s makes of their text: %s\n", (long long)same, (long long)n,
               (long long)S, model,
               same == n ? "the data was made with this tokenizer"
                         : "the data was NOT made with this tokenizer (another vocabulary, or another version of it); "
                           "tokenize the text again with dataset preprocess");
        if (same < n) rc = 1;
    }
    free(buf);
    tr_tok_buf_free(&b);
    tr_idx_close(d);
    tr_tok_free(t);
    return rc;
}

static int cmd_samples(int argc, char **argv) {
    const char *split_name = "train", *out = NULL, *ident = NULL;
    int64_t count = -1;
    bool decode = false;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    int nrest = 0;
    if (!rest) return TR_EXIT_FATAL;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--split-name") && v) split_name = argv[++i];
        else if (!strcmp(a, "--out") && v) out = argv[++i];
        else if (!strcmp(a, "--tokenizer-identity") && v) ident = argv[++i];
        else if (!strcmp(a, "--decode")) decode = true;
        else if (!strcmp(a, "--count")) {
            if (parse_i64(a, v, &count)) {
                free(rest);
                return TR_EXIT_USAGE;
            }
            i++;
        } else rest[nrest++] = argv[i];
    }
    int split = !strcmp(split_name, "train")   ? TR_SPLIT_TRAIN
                : !strcmp(split_name, "valid") ? TR_SPLIT_VALID
                : !strcmp(split_name, "test")  ? TR_SPLIT_TEST
                                               : -1;
    if (split < 0 || (!out && !decode) || count < 0) {
        free(rest);
        if (split < 0) fprintf(stderr, "dataset samples: --split-name is train, valid or test\n");
        return usage();
    }
    tr_config cfg;
    tr_config_defaults(&cfg);
    char err[ERRLEN];
    int prc = tr_config_parse(&cfg, nrest, rest, err, sizeof err);
    free(rest);
    if (prc) {
        if (prc < 0) fprintf(stderr, "dataset samples: %s\n", err);
        return prc < 0 ? TR_EXIT_USAGE : 0;
    }
    tr_tok *tk = NULL;
    if (decode && !(tk = open_config_tokenizer(&cfg, err, sizeof err))) {
        fprintf(stderr, "dataset samples: --decode: %s\n", err);
        return TR_EXIT_USAGE;
    }
    /* the sampler is not used here; only the dataset sizes matter */
    if (cfg.micro_batch_size < 1) cfg.micro_batch_size = 1;
    tr_data_options opt = {ident, -1};
    tr_data *d = tr_data_open_ex(&cfg, 0, 1, &opt, err, sizeof err);
    if (!d) {
        fprintf(stderr, "dataset samples: %s\n", err);
        tr_tok_free(tk);
        return TR_EXIT_FATAL;
    }
    char info[8192];
    tr_data_describe(d, split, info, sizeof info);
    fputs(info, stdout);
    int rc = 0;
    int64_t avail = tr_data_split_len(d, split);
    if (count > avail) {
        fprintf(stderr, "dataset samples: the %s split has %lld samples; --count %lld is too many\n", split_name,
                (long long)avail, (long long)count);
        rc = TR_EXIT_FATAL;
    }
    const int S = tr_data_seq_length(d);
    int64_t *tok = rc ? NULL : malloc(sizeof *tok * (size_t)(count * S + 1));
    int64_t *lab = rc ? NULL : malloc(sizeof *lab * (size_t)(count * S + 1));
    int64_t *text = malloc(sizeof *text * (size_t)(S + 1));
    if (!rc && (!tok || !lab || !text)) rc = TR_EXIT_FATAL;
    for (int64_t i = 0; !rc && i < count; i++) {
        if (tr_data_sample(d, split, i, text, err, sizeof err)) {
            fprintf(stderr, "dataset samples: %s\n", err);
            rc = TR_EXIT_FATAL;
            break;
        }
        memcpy(tok + i * S, text, sizeof *text * (size_t)S);
        memcpy(lab + i * S, text + 1, sizeof *text * (size_t)S);
        if (tk && print_decoded(tk, split_name, i, text, S + 1, err, sizeof err)) {
            fprintf(stderr, "dataset samples: --decode: %s\n", err);
            rc = TR_EXIT_FATAL;
        }
    }
    if (!rc && out) {
        char path[4200];
        int64_t shape[2] = {count, S};
        if (tr_data_mkdirs(out, err, sizeof err)) rc = TR_EXIT_FATAL;
        snprintf(path, sizeof path, "%s/tokens.npy", out);
        if (!rc && tr_npy_save(path, TR_NPY_INT64, 2, shape, tok, err, sizeof err)) rc = TR_EXIT_FATAL;
        snprintf(path, sizeof path, "%s/labels.npy", out);
        if (!rc && tr_npy_save(path, TR_NPY_INT64, 2, shape, lab, err, sizeof err)) rc = TR_EXIT_FATAL;
        if (rc) fprintf(stderr, "dataset samples: %s\n", err);
        else
            printf("wrote %s/tokens.npy and %s/labels.npy: %lld %s samples of %d tokens\n", out, out, (long long)count,
                   split_name, S);
    }
    free(tok);
    free(lab);
    free(text);
    tr_data_close(d);
    tr_tok_free(tk);
    return rc;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "dataset");
        return 0;
    }
    if (argc < 2) return usage();
    if (!strcmp(argv[1], "preprocess")) return cmd_preprocess(argc - 2, argv + 2);
    if (!strcmp(argv[1], "inspect")) return cmd_inspect(argc - 2, argv + 2);
    if (!strcmp(argv[1], "samples")) return cmd_samples(argc - 2, argv + 2);
    if (!strcmp(argv[1], "check-tokenizer")) return cmd_check_tokenizer(argc - 2, argv + 2);
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage();
        return 0;
    }
    fprintf(stderr, "dataset: unknown command '%s'\n", argv[1]);
    return usage();
}
