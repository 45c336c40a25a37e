/* bench_tok: the tokenizer's encoding throughput and ids, to set beside Hugging Face `tokenizers`
 * (lab/bench/tok/hf_encode.mjs) on the same text and tokenizer.
 *   Every {"KEY": "..."} text of --input is read into memory, then encoded --rounds times on one
 *   thread (the best round is reported: text MB/s and tokens/s), then by --workers threads at once
 *   (each encoding the whole set), so that per-core scaling shows. --ids-out writes each text's ids
 *   as a JSON line ([1, 2, 3], as Python's json.dumps writes a list) and checks that they decode back
 *   to the text byte for byte: a text that does not (or does not encode) is named, and the exit is 1.
 * usage: bench_tok --tokenizer-model DIR --input TEXTS.jsonl [--key text] [--rounds N] [--workers N]
 *        [--ids-out FILE] [--tokenizer-type TikTokenizer --tiktoken-pattern v1|v2 [--vocab-size V]
 *        [--tiktoken-num-special-tokens N]] */
#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tok/tok_dir.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct {
    const tr_tok *tok;
    char **text;
    size_t *len;
    int64_t n, tokens;
    double seconds;
} job;

static void *encode_all(void *arg) {
    job *j = arg;
    tr_tok_buf b = {0};
    char err[256];
    double t0 = now();
    j->tokens = 0;
    for (int64_t i = 0; i < j->n; i++)
        if (!tr_tok_encode(j->tok, &b, j->text[i], j->len[i], false, err, sizeof err)) j->tokens += b.n;
    j->seconds = now() - t0;
    tr_tok_buf_free(&b);
    return NULL;
}

static int read_texts(const char *path, const char *key, job *j) {
    FILE *f = fopen(path, "r");
    if (!f) return fprintf(stderr, "bench_tok: cannot open %s\n", path), -1;
    char *line = NULL;
    size_t cap = 0;
    int64_t tcap = 0, lineno = 0;
    while (getline(&line, &cap, f) > 0) {
        lineno++;
        cJSON *o = cJSON_Parse(line);
        const cJSON *s = cJSON_GetObjectItemCaseSensitive(o, key);
        if (!cJSON_IsString(s)) {
            fprintf(stderr, "bench_tok: %s:%lld: no string \"%s\"\n", path, (long long)lineno, key);
            cJSON_Delete(o);
            continue;
        }
        if (j->n == tcap) {
            tcap = tcap ? 2 * tcap : 1024;
            j->text = realloc(j->text, (size_t)tcap * sizeof *j->text);
            j->len = realloc(j->len, (size_t)tcap * sizeof *j->len);
            if (!j->text || !j->len) return fprintf(stderr, "bench_tok: out of memory\n"), -1;
        }
        j->len[j->n] = strlen(s->valuestring);
        j->text[j->n++] = strdup(s->valuestring);
        cJSON_Delete(o);
    }
    free(line);
    fclose(f);
    return 0;
}

static int write_ids(const job *j, const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return fprintf(stderr, "bench_tok: cannot create %s\n", path), -1;
    tr_tok_buf b = {0};
    char err[256], *back = NULL;
    size_t bcap = 0;
    int64_t bad = 0;
    for (int64_t i = 0; i < j->n; i++) {
        size_t blen = 0;
        if (tr_tok_encode(j->tok, &b, j->text[i], j->len[i], false, err, sizeof err)) {
            fprintf(stderr, "bench_tok: text %lld: %s\n", (long long)i, err);
            b.n = 0;
            bad++;
        } else if (tr_tok_decode(j->tok, b.ids, b.n, false, &back, &blen, &bcap, err, sizeof err) ||
                   blen != j->len[i] || memcmp(back, j->text[i], blen)) {
            fprintf(stderr, "bench_tok: text %lld (%zu bytes): its %lld ids decode to %zu other bytes\n", (long long)i,
                    j->len[i], (long long)b.n, blen);
            bad++;
        }
        fputc('[', f);
        for (int64_t k = 0; k < b.n; k++) fprintf(f, k ? ", %d" : "%d", b.ids[k]);
        fputs("]\n", f);
    }
    free(back);
    tr_tok_buf_free(&b);
    if (bad)
        fprintf(stderr, "bench_tok: %lld of %lld texts did not encode and decode back\n", (long long)bad,
                (long long)j->n);
    return fclose(f) || bad ? -1 : 0;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) return tr_version_print(stdout, "bench_tok"), 0;
    const char *model = NULL, *input = NULL, *key = "text", *ids_out = NULL, *type = "HuggingFaceTokenizer";
    long rounds = 3, workers = 1, vocab = 0, nspecial = 1000;
    tr_tok_tiktoken tk = {0};
    for (int i = 1; i < argc; i += 2) {
        if (i + 1 == argc) return fprintf(stderr, "bench_tok: %s needs a value\n", argv[i]), TR_EXIT_USAGE;
        char *end = NULL;
        if (!strcmp(argv[i], "--tokenizer-model")) model = argv[i + 1];
        else if (!strcmp(argv[i], "--input")) input = argv[i + 1];
        else if (!strcmp(argv[i], "--key")) key = argv[i + 1];
        else if (!strcmp(argv[i], "--ids-out")) ids_out = argv[i + 1];
        else if (!strcmp(argv[i], "--tokenizer-type")) type = argv[i + 1];
        else if (!strcmp(argv[i], "--tiktoken-pattern")) tk.pattern = argv[i + 1];
        else if (!strcmp(argv[i], "--vocab-size")) vocab = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--tiktoken-num-special-tokens")) nspecial = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--rounds")) rounds = strtol(argv[i + 1], &end, 10);
        else if (!strcmp(argv[i], "--workers")) workers = strtol(argv[i + 1], &end, 10);
        else return fprintf(stderr, "bench_tok: unknown flag %s\n", argv[i]), TR_EXIT_USAGE;
        if (end && (*end || end == argv[i + 1]))
            return fprintf(stderr, "bench_tok: %s %s: not an integer\n", argv[i], argv[i + 1]), TR_EXIT_USAGE;
    }
    if (!model || !input || rounds < 1 || rounds > 1000 || workers < 1 || workers > 256) {
        fprintf(stderr, "usage: bench_tok --tokenizer-model DIR --input TEXTS.jsonl [--key text] [--rounds 1..1000] "
                        "[--workers 1..256] [--ids-out FILE] [--tokenizer-type TikTokenizer --tiktoken-pattern v1|v2 "
                        "[--vocab-size V] [--tiktoken-num-special-tokens N]]\n");
        return TR_EXIT_USAGE;
    }
    char err[1024];
    tr_tok_specials sp;
    job j = {0};
    tk.vocab_size = vocab;
    tk.num_special = nspecial;
    j.tok = tr_tok_open(type, model, &tk, &sp, err, sizeof err);
    if (!j.tok) return fprintf(stderr, "bench_tok: %s\n", err), TR_EXIT_USAGE;
    if (read_texts(input, key, &j)) return TR_EXIT_FATAL;
    double bytes = 0, best = 1e30;
    for (int64_t i = 0; i < j.n; i++) bytes += (double)j.len[i];
    for (int r = 0; r < rounds; r++) {
        encode_all(&j);
        if (j.seconds < best) best = j.seconds;
    }
    printf("bench_tok: %lld texts, %.0f bytes, %lld tokens; 1 thread, best of %ld: %.3f s, %.2f MB/s, %.3f M "
           "tokens/s\n",
           (long long)j.n, bytes, (long long)j.tokens, rounds, best, bytes / best / 1e6, (double)j.tokens / best / 1e6);
    if (workers > 1) {
        job *w = calloc((size_t)workers, sizeof *w);
        pthread_t *th = calloc((size_t)workers, sizeof *th);
        double t0 = now();
        for (int k = 0; k < workers; k++) w[k] = j, pthread_create(&th[k], NULL, encode_all, &w[k]);
        for (int k = 0; k < workers; k++) pthread_join(th[k], NULL);
        double s = now() - t0;
        printf("bench_tok: %ld threads, each all texts: %.3f s, %.2f MB/s in all (%.2fx one thread's best)\n", workers,
               s, workers * bytes / s / 1e6, workers * bytes / s / (bytes / best));
        free(w);
        free(th);
    }
    int rc = ids_out ? write_ids(&j, ids_out) : 0;
    for (int64_t i = 0; i < j.n; i++) free(j.text[i]);
    free(j.text);
    free(j.len);
    tr_tok_free((tr_tok *)j.tok);
    return rc ? TR_EXIT_FATAL : 0;
}
