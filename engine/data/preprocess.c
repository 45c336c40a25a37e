/* `dataset preprocess` from text: the input is mapped, cut into chunks of lines; each chunk's lines
 * are encoded by --workers threads (contiguous slices), then written in input order, so the output
 * does not depend on the number of workers. --partitions N orders documents as Megatron's tool does:
 * its partition files take the lines round-robin (contiguously with --keep-sequential-samples) and are
 * merged partition by partition; twinrun writes no partition files, only that order. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "data/indexed_dataset.h"
#include "data/preprocess.h"
#include "twinrun/err.h"

#define CHUNK_LINES 4096      /* per worker */
#define CHUNK_BYTES (8 << 20) /* per worker */

typedef struct {
    const char *s;
    size_t n;
    int64_t lineno; /* 1-based */
} line_ref;

typedef struct {
    const tr_pre_opts *o;
    const line_ref *lines;
    int64_t from, to;
    tr_tok_buf buf;
    tr_pre_doc doc[TR_PRE_MAX_KEYS];
    int32_t *ids; /* [nids]: the slice's documents, key by key, line by line */
    int64_t nids, idcap;
    int64_t *lens; /* [nlens]: their sequences' lengths */
    int64_t nlens, lcap;
    int64_t *nseq; /* [(to - from) * nkeys]; -1: a bad line */
    int64_t bad_line;
    char bad[512];
    int oom;
} worker;

static int grow(void **p, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t nc = *cap ? *cap : 4096;
    while (nc < need) nc *= 2;
    void *g = realloc(*p, (size_t)nc * size);
    if (!g) return -1;
    *p = g;
    *cap = nc;
    return 0;
}

static int keep(worker *w, int64_t i) {
    int nk = w->o->nkeys;
    for (int k = 0; k < nk; k++) {
        const tr_pre_doc *d = &w->doc[k];
        if (grow((void **)&w->ids, &w->idcap, w->nids + d->n, sizeof *w->ids) ||
            grow((void **)&w->lens, &w->lcap, w->nlens + d->nseq, sizeof *w->lens))
            return -1;
        memcpy(w->ids + w->nids, d->ids, (size_t)d->n * sizeof *d->ids);
        memcpy(w->lens + w->nlens, d->lens, (size_t)d->nseq * sizeof *d->lens);
        w->nids += d->n;
        w->nlens += d->nseq;
        w->nseq[(i - w->from) * nk + k] = d->nseq;
    }
    return 0;
}

static void *encode_slice(void *arg) {
    worker *w = arg;
    w->nids = w->nlens = 0;
    w->bad_line = -1;
    for (int64_t i = w->from; i < w->to && !w->oom; i++) {
        char why[512];
        if (tr_pre_line(w->o, &w->buf, w->lines[i].s, w->lines[i].n, w->doc, why, sizeof why)) {
            w->nseq[(i - w->from) * w->o->nkeys] = -1;
            if (w->bad_line < 0) {
                w->bad_line = w->lines[i].lineno;
                snprintf(w->bad, sizeof w->bad, "%s", why);
            }
            continue;
        }
        if (keep(w, i)) w->oom = 1;
    }
    return NULL;
}

typedef struct {
    const tr_pre_opts *o;
    tr_pre_stats *st;
    tr_idx_writer *out[TR_PRE_MAX_KEYS];
    worker *w;
    line_ref *lines;
    int64_t nlines, cap;
    int64_t *wide; /* [wcap]: one sequence widened for the writer */
    int64_t wcap;
    struct timespec t0;
    int64_t logged;
} run;

static double since(const struct timespec *t0) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)(t.tv_sec - t0->tv_sec) + 1e-9 * (double)(t.tv_nsec - t0->tv_nsec);
}

/* Writes worker w's slice in order; a bad line stops the run unless skip_bad. */
static int write_slice(run *r, worker *w, char *err, size_t errlen) {
    int nk = r->o->nkeys;
    int64_t id_at = 0, len_at = 0;
    for (int64_t i = w->from; i < w->to; i++) {
        if (w->nseq[(i - w->from) * nk] < 0) {
            if (!r->st->bad_lines++) {
                r->st->first_bad_line = r->lines[i].lineno;
                snprintf(r->st->first_bad, sizeof r->st->first_bad, "%s",
                         w->bad_line == r->lines[i].lineno ? w->bad : "");
            }
            if (!r->o->skip_bad)
                return tr_errf(err, errlen, "%s:%lld: %s (--skip-bad-lines skips such lines and counts them)",
                               r->o->input, (long long)r->lines[i].lineno, w->bad);
            continue;
        }
        for (int k = 0; k < nk; k++) {
            for (int64_t q = 0; q < w->nseq[(i - w->from) * nk + k]; q++) {
                int64_t n = w->lens[len_at++];
                if (grow((void **)&r->wide, &r->wcap, n, sizeof *r->wide)) return tr_errf(err, errlen, "out of memory");
                for (int64_t j = 0; j < n; j++) r->wide[j] = w->ids[id_at + j];
                id_at += n;
                r->st->tokens += n;
                if (tr_idx_writer_add_sequence(r->out[k], r->wide, n, err, errlen)) return -1;
            }
            if (tr_idx_writer_end_document(r->out[k], err, errlen)) return -1;
        }
        r->st->docs++;
        r->st->bytes += (int64_t)r->lines[i].n + 1;
    }
    return 0;
}

static int flush(run *r, char *err, size_t errlen) {
    int nw = r->o->workers;
    int64_t per = (r->nlines + nw - 1) / nw;
    pthread_t th[256];
    int started[256] = {0};
    for (int k = 0; k < nw; k++) {
        worker *w = &r->w[k];
        w->lines = r->lines;
        w->from = k * per < r->nlines ? k * per : r->nlines;
        w->to = (k + 1) * per < r->nlines ? (k + 1) * per : r->nlines;
        int64_t need = (w->to - w->from) * r->o->nkeys;
        free(w->nseq);
        w->nseq = calloc((size_t)need + 1, sizeof *w->nseq);
        if (!w->nseq) return tr_errf(err, errlen, "out of memory");
        if (nw == 1) encode_slice(w);
        else started[k] = pthread_create(&th[k], NULL, encode_slice, w) == 0;
        if (nw > 1 && !started[k]) encode_slice(w);
    }
    for (int k = 0; k < nw; k++)
        if (started[k]) pthread_join(th[k], NULL);
    for (int k = 0; k < nw; k++) {
        if (r->w[k].oom) return tr_errf(err, errlen, "out of memory");
        if (write_slice(r, &r->w[k], err, errlen)) return -1;
    }
    r->nlines = 0;
    int64_t li = r->o->log_interval;
    if (li > 0 && r->st->docs / li > r->logged) {
        r->logged = r->st->docs / li;
        double s = since(&r->t0);
        fprintf(stderr, "Processed %lld documents (%.1f docs/s, %.2f MB/s).\n", (long long)r->st->docs,
                (double)r->st->docs / s, (double)r->st->bytes / s / 1048576.0);
    }
    return 0;
}

static int add_line(run *r, const char *s, size_t n, int64_t lineno, char *err, size_t errlen) {
    if (n && s[n - 1] == '\r') n--; /* Python reads text with universal newlines */
    if (grow((void **)&r->lines, &r->cap, r->nlines + 1, sizeof *r->lines))
        return tr_errf(err, errlen, "out of memory");
    r->lines[r->nlines++] = (line_ref){s, n, lineno};
    if (r->nlines >= (int64_t)CHUNK_LINES * r->o->workers) return flush(r, err, errlen);
    return 0;
}

/* The lines of partition p of P, in order (P == 1: all of them). */
static int pass(run *r, const char *data, size_t size, int p, int P, char *err, size_t errlen) {
    int64_t lineno = 0;
    size_t at = 0, pending = 0;
    while (at < size) {
        const char *nl = memchr(data + at, '\n', size - at);
        size_t end = nl ? (size_t)(nl - data) : size;
        if ((lineno++ % P) == p) {
            if (add_line(r, data + at, end - at, lineno, err, errlen)) return -1;
            pending += end - at;
            if (pending > (size_t)CHUNK_BYTES * (size_t)r->o->workers) {
                if (flush(r, err, errlen)) return -1;
                pending = 0;
            }
        }
        at = end + 1;
    }
    return flush(r, err, errlen);
}

static int run_all(run *r, const char *data, size_t size, char *err, size_t errlen) {
    int P = r->o->keep_sequential ? 1 : r->o->partitions;
    for (int p = 0; p < P; p++)
        if (pass(r, data, size, p, P, err, errlen)) return -1;
    return 0;
}

static int key_prefix(const tr_pre_opts *o, int k, char *prefix, size_t cap, char *err, size_t errlen) {
    if (snprintf(prefix, cap, "%s_%s_document", o->prefix, o->keys[k]) >= (int)cap)
        return tr_errf(err, errlen, "--output-prefix %s: too long", o->prefix);
    return 0;
}

int tr_pre_check_outputs(const tr_pre_opts *o, char *err, size_t errlen) {
    char prefix[1024];
    for (int k = 0; !o->overwrite && k < o->nkeys; k++)
        if (key_prefix(o, k, prefix, sizeof prefix, err, errlen) || tr_idx_writer_check_new(prefix, err, errlen))
            return -1;
    return 0;
}

static int open_outputs(run *r, char *err, size_t errlen) {
    int code = tr_idx_optimal_code(tr_tok_vocab_size(r->o->tok));
    for (int k = 0; k < r->o->nkeys; k++) {
        char prefix[1024];
        if (key_prefix(r->o, k, prefix, sizeof prefix, err, errlen)) return -1;
        if (!(r->out[k] = tr_idx_writer_open(prefix, code, r->o->overwrite, err, errlen))) return -1;
    }
    return 0;
}

int tr_pre_run(const tr_pre_opts *o, tr_pre_stats *st, char *err, size_t errlen) {
    memset(st, 0, sizeof *st);
    if (o->workers < 1 || o->workers > 256) return tr_errf(err, errlen, "--workers %d: use 1..256", o->workers);
    int fd = open(o->input, O_RDONLY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0) {
        int e = errno;
        if (fd >= 0) close(fd);
        return tr_errf(err, errlen, "--input %s: %s", o->input, strerror(e));
    }
    size_t size = (size_t)sb.st_size;
    const char *data = size ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : "";
    close(fd);
    if (data == MAP_FAILED) return tr_errf(err, errlen, "--input %s: cannot map: %s", o->input, strerror(errno));
    run r = {.o = o, .st = st};
    clock_gettime(CLOCK_MONOTONIC, &r.t0);
    r.w = calloc((size_t)o->workers, sizeof *r.w);
    for (int k = 0; r.w && k < o->workers; k++) r.w[k].o = o;
    int rc = !r.w ? tr_errf(err, errlen, "out of memory") : open_outputs(&r, err, errlen);
    if (!rc) rc = run_all(&r, data, size, err, errlen);
    /* every key's files written and synced before any is renamed: all keys are kept, or none */
    for (int k = 0; !rc && k < o->nkeys; k++) rc = tr_idx_writer_close(r.out[k], err, errlen);
    for (int k = 0; k < o->nkeys; k++) {
        if (!r.out[k]) continue;
        if (rc) tr_idx_writer_abort(r.out[k]);
        else rc = tr_idx_writer_commit(r.out[k], err, errlen);
    }
    for (int k = 0; r.w && k < o->workers; k++) {
        tr_tok_buf_free(&r.w[k].buf);
        for (int j = 0; j < TR_PRE_MAX_KEYS; j++) tr_pre_doc_free(&r.w[k].doc[j]);
        free(r.w[k].ids);
        free(r.w[k].lens);
        free(r.w[k].nseq);
    }
    free(r.w);
    free(r.lines);
    free(r.wide);
    if (size) munmap((void *)data, size);
    st->seconds = since(&r.t0);
    return rc;
}
