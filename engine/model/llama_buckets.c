/* Gradient buckets and the distributed optimizer's shard of each (Megatron's DDP buckets).
 *
 * The backward pass writes gradients from the last parameter to the first, so a bucket is a contiguous
 * range of the parameter buffers: planned from the last parameter back, closed once it holds
 * bucket_elems elements, at a parameter's start. Its reduction over data parallelism can start as soon
 * as the backward pass has gone below its start (train/grad_buckets.c). With the distributed optimizer
 * each bucket is reduce-scattered on its own, so each is padded to a multiple of the shards and every
 * rank owns one slice of every bucket: its shard is a list of segments, kept back to back in its
 * sharded buffers (master weights, Adam's moments). One bucket is the layout without buckets: the
 * offsets of the table, a contiguous shard per rank. */
#include <stdint.h>
#include <stdlib.h>

#include "model/llama.h"
#include "twinrun/err.h"

static size_t round_up(size_t x, size_t to) { return to > 1 ? (x + to - 1) / to * to : x; }

/* first[k]: the first parameter of bucket k, ascending; returns the count. A bucket also starts where
 * the parameter before it is of the other kind (fp8_stored or not). */
static int plan_first_params(const llama_model *m, size_t bucket_elems, int *first) {
    int n = 0;
    size_t acc = 0;
    for (int i = m->nparams - 1; i >= 0; i--) {
        acc += m->params_tab[i].numel;
        if (acc >= bucket_elems || i == 0 || m->params_tab[i - 1].fp8_stored != m->params_tab[i].fp8_stored)
            first[n++] = i, acc = 0;
    }
    for (int a = 0, b = n - 1; a < b; a++, b--) { /* reverse: ascending offsets */
        int t = first[a];
        first[a] = first[b], first[b] = t;
    }
    return n;
}

int llama_plan_buckets(llama_model *m, size_t pad_to, int shards, char *err, size_t errlen) {
    if (pad_to < 1) pad_to = 1;
    if (shards < 1) shards = 1;
    size_t elems = 0;
    for (int i = 0; i < m->nparams; i++) elems += m->params_tab[i].numel;
    m->param_elems = elems;
    bool fp8_stored = false;
    for (int i = 0; i < m->nparams; i++) fp8_stored |= m->params_tab[i].fp8_stored;
    const bool bucketed = (m->layout.bucket_elems > 0 || fp8_stored) && m->nparams > 0;
    const size_t bucket_elems = m->layout.bucket_elems > 0 ? m->layout.bucket_elems : SIZE_MAX;
    int *first = calloc((size_t)(m->nparams > 0 ? m->nparams : 1), sizeof *first);
    if (!first) return tr_errf(err, errlen, "out of host memory planning gradient buckets");
    const int nb = bucketed ? plan_first_params(m, bucket_elems, first) : 1;
    free(m->bucket_begin), free(m->bucket_fp8);
    m->bucket_begin = calloc((size_t)nb + 1, sizeof *m->bucket_begin);
    m->bucket_fp8 = calloc((size_t)nb, sizeof *m->bucket_fp8);
    if (!m->bucket_begin || !m->bucket_fp8) {
        free(first);
        return tr_errf(err, errlen, "out of host memory planning gradient buckets");
    }
    m->nbuckets = nb;
    if (!bucketed) {
        m->total_alloc = round_up(m->total, pad_to);
        m->bucket_begin[1] = m->total_alloc;
        free(first);
        return 0;
    }
    /* the offsets again, each bucket padded to a multiple of the shards (the padding stays zero) */
    size_t off = 0;
    for (int k = 0; k < nb; k++) {
        const int end = k + 1 < nb ? first[k + 1] : m->nparams;
        m->bucket_begin[k] = off;
        m->bucket_fp8[k] = m->params_tab[first[k]].fp8_stored;
        for (int i = first[k]; i < end; i++) {
            m->params_tab[i].offset = off;
            off += m->params_tab[i].numel;
        }
        m->total = off; /* the end of the last parameter so far */
        off = m->bucket_begin[k] + round_up(off - m->bucket_begin[k], (size_t)shards);
    }
    free(first);
    TR_CHECK(pad_to == 1 || pad_to % (size_t)shards == 0 || shards == 1, "pad_to must be a multiple of the shards");
    m->total_alloc = round_up(off, pad_to);
    m->bucket_begin[nb] = m->total_alloc; /* the last bucket takes the rounding: still a multiple */
    return 0;
}

llama_seg llama_shard_seg(const llama_model *m, int shards, int shard, int k) {
    TR_CHECK(k >= 0 && k < m->nbuckets && shards >= 1 && shard >= 0 && shard < shards, "llama_shard_seg out of range");
    llama_seg s = {0, 0, 0};
    for (int j = 0; j <= k; j++) {
        const size_t len = (m->bucket_begin[j + 1] - m->bucket_begin[j]) / (size_t)shards;
        if (j < k) s.local += len;
        else s.begin = m->bucket_begin[j] + (size_t)shard * len, s.len = len;
    }
    return s;
}

int llama_bucket_of(const llama_model *m, size_t e) {
    int lo = 0, hi = m->nbuckets - 1; /* the last bucket whose begin <= e */
    while (lo < hi) {
        const int mid = (lo + hi + 1) / 2;
        if (m->bucket_begin[mid] <= e) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

size_t llama_master_index(const llama_model *m, size_t e) {
    if (!llama_master_sharded(m)) return e;
    const int shards = (int)(m->total_alloc / m->master_len);
    const llama_seg s = llama_shard_seg(m, shards, m->layout.opt_shard, llama_bucket_of(m, e));
    TR_CHECK(e >= s.begin && e < s.begin + s.len, "llama_master_index: element outside this rank's shard");
    return s.local + (e - s.begin);
}

size_t llama_layer_first_offset(const llama_model *m, int l) {
    TR_CHECK(l >= 0 && l < m->dims.nl, "llama_layer_first_offset: layer out of range");
    return m->params_tab[m->layer[l].ln1_w].offset;
}

void llama_layer_need_ends(const llama_model *m, int l, size_t ends[LLAMA_LAYER_NEEDS]) {
    TR_CHECK(l >= 0 && l < m->dims.nl, "llama_layer_need_ends: layer out of range");
    const llama_layer_params *lp = &m->layer[l];
    /* the stage's layers end where the final norm and output layer begin (the last stage), else at the end */
    const size_t layers_end = m->dims.last && m->p_lnf_w >= 0 ? m->params_tab[m->p_lnf_w].offset : m->total;
    ends[0] = m->params_tab[lp->wo].offset;
    ends[1] = m->params_tab[lp->ln2_w].offset;
    ends[2] = m->params_tab[lp->fc2].offset;
    ends[3] = l + 1 < m->dims.nl ? llama_layer_first_offset(m, l + 1) : layers_end;
}
