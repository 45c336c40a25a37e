/* GPTDataset index building (see gpt_index.h). */
#include "data/gpt_index.h"

#include <stdlib.h>
#include <string.h>

#include "data/mt19937.h"
#include "twinrun/err.h"

void tr_gpt_index_free(tr_gpt_index *ix) {
    if (!ix) return;
    free(ix->doc_index);
    free(ix->sample_index);
    free(ix->shuffle_index);
    memset(ix, 0, sizeof *ix);
}

int tr_gpt_index_plan(const tr_gpt_index_params *p, tr_gpt_index *ix, char *err, size_t errlen) {
    memset(ix, 0, sizeof *ix);
    const int64_t X = p->add_extra_token ? 1 : 0, S = p->seq_length;
    if (S < 2) return tr_errf(err, errlen, "--seq-length %lld: must be at least 2", (long long)S);
    if (p->beg < 0 || p->end > p->n_lengths || p->beg > p->end)
        return tr_errf(err, errlen, "document range [%lld, %lld) is outside the %lld documents", (long long)p->beg,
                       (long long)p->end, (long long)p->n_lengths);
    if (p->end - p->beg > INT32_MAX)
        return tr_errf(err, errlen, "split has %lld documents; Megatron's document index is int32",
                       (long long)(p->end - p->beg));
    int64_t tpe = 0;
    for (int64_t i = p->beg; i < p->end; i++) tpe += p->lengths[i];
    ix->tokens_per_epoch = tpe;
    if (tpe <= X)
        return tr_errf(err, errlen,
                       "the split's %lld documents hold %lld tokens: too few for even one sample (Megatron would "
                       "loop forever); use more data or change --split",
                       (long long)(p->end - p->beg), (long long)tpe);
    int64_t E = 1;
    if (p->num_samples >= 0) {
        if (p->num_samples > (INT64_MAX - X) / S) return tr_errf(err, errlen, "too many samples requested");
        int64_t want = p->num_samples * S + X;
        E = (want + tpe - 1) / tpe;
        if (E < 1) E = 1;
        if (E > INT32_MAX) return tr_errf(err, errlen, "%lld epochs needed: the split is far too small", (long long)E);
    }
    if (E * (p->end - p->beg) > INT64_MAX / 8)
        return tr_errf(err, errlen, "%lld epochs over %lld documents is too large", (long long)E,
                       (long long)(p->end - p->beg));
    ix->epochs = (int32_t)E;
    ix->n_doc = E * (p->end - p->beg);
    ix->n_samples = (E * tpe - X) / S;
    if (E > 1) {
        int64_t sans = ((E - 1) * tpe - X) / S;
        int64_t final_n = p->num_samples - sans;
        int64_t per = (tpe - X) / S;
        if (final_n < 0 || final_n > per + 1)
            return tr_errf(err, errlen, "internal: final epoch holds %lld samples of %lld", (long long)final_n,
                           (long long)per);
        /* int(0.80 * per) in double, truncated toward zero */
        ix->separate_final_epoch = final_n < (int64_t)(0.80 * (double)per);
        ix->num_samples_sans_final = sans;
    }
    ix->sample64 = ix->n_doc > INT32_MAX;
    ix->shuffle64 = ix->n_samples >= (int64_t)UINT32_MAX - 1;
    return 0;
}

/* Fills a with the split's ids tiled `epochs` times and shuffles it. */
static void doc_epochs(const tr_gpt_index_params *p, int64_t epochs, int32_t *a, tr_mt19937 *mt) {
    int64_t n = p->end - p->beg, k = 0;
    for (int64_t e = 0; e < epochs; e++)
        for (int64_t i = 0; i < n; i++) a[k++] = (int32_t)(p->beg + i);
    tr_mt_shuffle_i32(mt, a, k);
}

#define BUILD_SAMPLES(T)                                                                                               \
    do {                                                                                                               \
        T *si = ix->sample_index;                                                                                      \
        int64_t k = 0, d = 0, off = 0;                                                                                 \
        si[0] = 0, si[1] = 0;                                                                                          \
        k = 1;                                                                                                         \
        while (k <= N) {                                                                                               \
            int64_t remaining = S + X;                                                                                 \
            while (remaining != 0) {                                                                                   \
                int64_t dlen = p->lengths[ix->doc_index[d]] - off;                                                     \
                remaining -= dlen;                                                                                     \
                if (remaining <= 0) {                                                                                  \
                    /* the sample ends inside this document; the extra token is shared */                              \
                    off += remaining + dlen - X;                                                                       \
                    remaining = 0;                                                                                     \
                } else {                                                                                               \
                    if (d == ix->n_doc - 1) {                                                                          \
                        off = p->lengths[ix->doc_index[d]] - X;                                                        \
                        break;                                                                                         \
                    }                                                                                                  \
                    d++;                                                                                               \
                    off = 0;                                                                                           \
                }                                                                                                      \
            }                                                                                                          \
            si[2 * k] = (T)d, si[2 * k + 1] = (T)off;                                                                  \
            k++;                                                                                                       \
        }                                                                                                              \
    } while (0)

#define BUILD_SHUFFLE(T, SHUF)                                                                                         \
    do {                                                                                                               \
        T *sh = ix->shuffle_index;                                                                                     \
        int64_t first = ix->separate_final_epoch ? ix->num_samples_sans_final : N;                                     \
        for (int64_t i = 0; i < N; i++) sh[i] = (T)i;                                                                  \
        SHUF(&mt, sh, first);                                                                                          \
        if (first < N) SHUF(&mt, sh + first, N - first);                                                               \
    } while (0)

int tr_gpt_index_build(const tr_gpt_index_params *p, tr_gpt_index *ix, char *err, size_t errlen) {
    if (tr_gpt_index_plan(p, ix, err, errlen)) return -1;
    const int64_t X = p->add_extra_token ? 1 : 0, S = p->seq_length, N = ix->n_samples;
    ix->doc_index = malloc((size_t)ix->n_doc * 4 + 4);
    ix->sample_index = malloc((size_t)(N + 1) * 2 * (ix->sample64 ? 8 : 4));
    ix->shuffle_index = malloc((size_t)N * (ix->shuffle64 ? 8 : 4) + 4);
    if (!ix->doc_index || !ix->sample_index || !ix->shuffle_index) {
        tr_gpt_index_free(ix);
        return tr_errf(err, errlen, "out of memory building indices for %lld samples", (long long)N);
    }
    tr_mt19937 mt;
    tr_mt_seed(&mt, p->seed);
    int64_t ndocs = p->end - p->beg;
    if (!ix->separate_final_epoch) {
        doc_epochs(p, ix->epochs, ix->doc_index, &mt);
    } else {
        doc_epochs(p, ix->epochs - 1, ix->doc_index, &mt);
        doc_epochs(p, 1, ix->doc_index + (int64_t)(ix->epochs - 1) * ndocs, &mt);
    }
    if (ix->sample64) BUILD_SAMPLES(int64_t);
    else BUILD_SAMPLES(int32_t);
    if (ix->shuffle64) BUILD_SHUFFLE(int64_t, tr_mt_shuffle_i64);
    else BUILD_SHUFFLE(uint32_t, tr_mt_shuffle_u32);
    return 0;
}

int tr_gpt_index_check(const tr_gpt_index_params *p, const tr_gpt_index *ix, char *err, size_t errlen) {
    const int64_t X = p->add_extra_token ? 1 : 0, S = p->seq_length, N = ix->n_samples;
    int64_t ndocs = p->end - p->beg;
    /* each epoch block (or the whole array when not separate) holds every split document equally
     * often: count occurrences */
    int32_t *seen = calloc((size_t)ndocs + 1, sizeof *seen);
    if (!seen) return tr_errf(err, errlen, "out of memory");
    for (int64_t i = 0; i < ix->n_doc; i++) {
        int64_t v = ix->doc_index[i];
        if (v < p->beg || v >= p->end) {
            free(seen);
            return tr_errf(err, errlen, "document_index[%lld] = %lld is outside the split's documents [%lld, %lld)",
                           (long long)i, (long long)v, (long long)p->beg, (long long)p->end);
        }
        seen[v - p->beg]++;
    }
    for (int64_t i = 0; i < ndocs; i++)
        if (seen[i] != ix->epochs) {
            int got = seen[i];
            free(seen);
            return tr_errf(err, errlen, "document_index holds document %lld %d times, expected %d (one per epoch)",
                           (long long)(p->beg + i), got, ix->epochs);
        }
    free(seen);
    /* samples: boundaries move forward and enclose exactly S + X tokens (the extra one shared) */
    if (tr_gpt_sample_doc(ix, 0) != 0 || tr_gpt_sample_off(ix, 0) != 0)
        return tr_errf(err, errlen, "sample_index[0] is not (0, 0)");
    for (int64_t k = 0; k < N; k++) {
        int64_t d0 = tr_gpt_sample_doc(ix, k), o0 = tr_gpt_sample_off(ix, k);
        int64_t d1 = tr_gpt_sample_doc(ix, k + 1), o1 = tr_gpt_sample_off(ix, k + 1);
        if (d1 < d0 || d1 >= ix->n_doc || o0 < 0 || o1 < 0 || o1 + X > p->lengths[ix->doc_index[d1]] ||
            o0 > p->lengths[ix->doc_index[d0]])
            return tr_errf(err, errlen, "sample_index[%lld..%lld] = (%lld, %lld)..(%lld, %lld) is out of range",
                           (long long)k, (long long)k + 1, (long long)d0, (long long)o0, (long long)d1, (long long)o1);
        int64_t tokens = 0;
        if (d0 == d1) tokens = o1 - o0 + X;
        else {
            tokens = p->lengths[ix->doc_index[d0]] - o0;
            for (int64_t d = d0 + 1; d < d1 && tokens <= S + X; d++) tokens += p->lengths[ix->doc_index[d]];
            tokens += o1 + X;
        }
        if (tokens != S + X)
            return tr_errf(err, errlen, "sample %lld spans %lld tokens, expected %lld", (long long)k, (long long)tokens,
                           (long long)(S + X));
    }
    /* shuffle: a permutation of [0, first) then of [first, N) */
    int64_t first = ix->separate_final_epoch ? ix->num_samples_sans_final : N;
    unsigned char *hit = calloc((size_t)N + 1, 1);
    if (!hit) return tr_errf(err, errlen, "out of memory");
    for (int64_t i = 0; i < N; i++) {
        int64_t v = tr_gpt_shuffle(ix, i);
        int64_t lo = i < first ? 0 : first, hi = i < first ? first : N;
        if (v < lo || v >= hi || hit[v]) {
            free(hit);
            return tr_errf(err, errlen, "shuffle_index[%lld] = %lld breaks the permutation of [%lld, %lld)",
                           (long long)i, (long long)v, (long long)lo, (long long)hi);
        }
        hit[v] = 1;
    }
    free(hit);
    return 0;
}
