/* bench_data: how fast the data path is.
 *   1. index building (document/sample/shuffle index, Megatron's algorithm) for --docs documents
 *      (default 10 million) whose lengths are uniform in [1, 1024] (numpy-compatible PCG64, seed 0),
 *      --seq-length tokens per sample, enough samples for two epochs (so a separate final epoch
 *      decision and a 2-epoch shuffle are included);
 *   2. loader throughput: tr_data_next_train over a written corpus (--corpus-docs documents,
 *      uint16) and over --mock-data, --seconds each; reported as samples/s and tokens/s.
 * usage: bench_data [--docs N] [--seq-length S] [--corpus-docs N] [--mbs B] [--seconds T] [--dir D] */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "data/batch.h"
#include "data/gpt_index.h"
#include "data/indexed_dataset.h"
#include "data/pcg64.h"
#include "twinrun/config.h"
#include "twinrun/version.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench_loader(const char *what, tr_config *c, double seconds) {
    char err[1024];
    double t0 = now();
    tr_data *d = tr_data_open(c, 0, 1, err, sizeof err);
    if (!d) {
        fprintf(stderr, "bench_data: %s: %s\n", what, err);
        return 1;
    }
    double t_open = now() - t0;
    size_t n = (size_t)c->micro_batch_size * (size_t)c->seq_length;
    int32_t *tok = malloc(n * 4), *lab = malloc(n * 4), *pos = malloc(n * 4);
    float *m = malloc(n * 4);
    int64_t batches = 0;
    t0 = now();
    double t = 0;
    while ((t = now() - t0) < seconds) {
        if (tr_data_next_train(d, tok, lab, m, pos, err, sizeof err)) {
            if (tr_data_set_consumed_samples(d, 0, err, sizeof err)) break; /* wrap around */
            continue;
        }
        batches++;
    }
    double sps = (double)(batches * c->micro_batch_size) / t;
    printf("loader %-8s: open %.3f s; %.0f samples/s, %.3g tokens/s (seq %d, mbs %d, %.1f s)\n", what, t_open, sps,
           sps * c->seq_length, c->seq_length, c->micro_batch_size, t);
    free(tok), free(lab), free(pos), free(m);
    tr_data_close(d);
    return 0;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "bench_data");
        return 0;
    }
    int64_t docs = 10000000, corpus_docs = 20000;
    int seq = 4096, mbs = 1;
    double seconds = 2.0;
    const char *dir = "/tmp";
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--docs")) docs = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--seq-length")) seq = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--corpus-docs")) corpus_docs = atoll(argv[i + 1]);
        else if (!strcmp(argv[i], "--mbs")) mbs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--dir")) dir = argv[i + 1];
        else {
            fprintf(stderr, "bench_data: unknown flag %s\n", argv[i]);
            return 2;
        }
    }
    if (docs < 1 || seq < 2 || corpus_docs < 1 || mbs < 1) {
        fprintf(stderr, "bench_data: --docs, --corpus-docs and --mbs must be at least 1, --seq-length at least 2\n");
        return 2;
    }
    /* 1. index building */
    int32_t *len = malloc((size_t)docs * 4);
    if (!len) return 1;
    tr_pcg64 g;
    tr_pcg64_seed(&g, 0);
    tr_pcg64_integers_i32(&g, 1, 1025, len, docs);
    int64_t tpe = 0;
    for (int64_t i = 0; i < docs; i++) tpe += len[i];
    int64_t per_epoch = (tpe - 1) / seq;
    tr_gpt_index_params p = {len, docs, 0, docs, per_epoch + per_epoch / 2, seq, 1234, 1};
    tr_gpt_index ix;
    char err[1024];
    double t0 = now();
    if (tr_gpt_index_build(&p, &ix, err, sizeof err)) {
        fprintf(stderr, "bench_data: %s\n", err);
        return 1;
    }
    double t_build = now() - t0;
    t0 = now();
    int ok = tr_gpt_index_check(&p, &ix, err, sizeof err) == 0;
    double t_check = now() - t0;
    printf("index build: %lld documents, %.3g tokens/epoch, seq %d, %lld samples, %d epochs%s: %.2f s "
           "(cache validation %.2f s%s)\n",
           (long long)docs, (double)tpe, seq, (long long)ix.n_samples, ix.epochs,
           ix.separate_final_epoch ? " (separate final)" : "", t_build, t_check, ok ? "" : ", FAILED");
    tr_gpt_index_free(&ix);
    free(len);
    /* 2. loader: a real corpus on disk */
    char prefix[512];
    snprintf(prefix, sizeof prefix, "%s/twinrun-bench-corpus-%ld", dir, (long)getpid());
    tr_idx_writer *w = tr_idx_writer_open(prefix, TR_IDX_UINT16, false, err, sizeof err);
    if (!w) {
        fprintf(stderr, "bench_data: %s\n", err);
        return 1;
    }
    int64_t *t = malloc(sizeof *t * 1024);
    tr_pcg64_seed(&g, 1);
    int64_t ntok = 0;
    for (int64_t k = 0; k < corpus_docs; k++) {
        int32_t l;
        tr_pcg64_integers_i32(&g, 1, 1025, &l, 1);
        for (int j = 0; j < l; j++) t[j] = (k * 7 + j) % 32000;
        t[l - 1] = 31999;
        if (tr_idx_writer_add(w, t, l, err, sizeof err)) return 1;
        ntok += l;
    }
    free(t);
    if (tr_idx_writer_finish(w, err, sizeof err)) return 1;
    tr_config c;
    tr_config_defaults(&c);
    c.n_data_path = 1;
    snprintf(c.data_path[0], TR_PATH_LEN, "%s", prefix);
    snprintf(c.split, sizeof c.split, "100,0,0");
    snprintf(c.data_cache_path, TR_PATH_LEN, "%s-cache", prefix);
    c.seq_length = seq;
    c.micro_batch_size = mbs;
    c.global_batch_size = mbs;
    c.train_samples = (ntok - 1) / seq;
    c.vocab_size = 32000;
    int rc = bench_loader("corpus", &c, seconds);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "rm -rf '%s.bin' '%s.idx' '%s-cache'", prefix, prefix, prefix);
    if (system(cmd) != 0) fprintf(stderr, "bench_data: could not remove %s.*\n", prefix);
    /* 3. loader: mock data */
    tr_config_defaults(&c);
    c.mock_data = true;
    c.vocab_size = 128256;
    c.seq_length = seq;
    c.micro_batch_size = mbs;
    c.global_batch_size = mbs;
    c.train_samples = 10000;
    c.eval_iters = 0;
    rc |= bench_loader("mock", &c, seconds);
    return rc;
}
