#include "model/llama_hf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"
#include "twinrun/err.h"

/* The fused fc1 (weight and bias) is two HF tensors each; everything else maps one to one. */
static int is_gate_up(const char *name) {
    char half[LLAMA_NAME_LEN + 8];
    return llama_hf_fc1_half(name, 0, half, sizeof half);
}

static int is_vocab_param(const llama_model *m, int i) { return i == m->p_embed || i == m->p_head; }

/* Reads global parameter p (HF layout; the fused fc1 from its two halves) into full[gshape]. */
static int read_global(const llama_model *m, const st_model *sm, const llama_param *p, int is_vocab, float *full,
                       char *err, size_t errlen) {
    int64_t shape[2] = {p->place.gshape[0], p->place.gshape[1]};
    if (is_gate_up(p->name)) {
        char name[LLAMA_NAME_LEN + 8];
        shape[0] /= 2;
        size_t half = (size_t)shape[0] * (size_t)(p->ndim == 2 ? shape[1] : 1);
        llama_hf_fc1_half(p->name, 0, name, sizeof name);
        if (st_model_read_f32(sm, name, full, shape, p->ndim, err, errlen)) return -1;
        llama_hf_fc1_half(p->name, 1, name, sizeof name);
        return st_model_read_f32(sm, name, full + half, shape, p->ndim, err, errlen);
    }
    if (is_vocab) {
        size_t rows = (size_t)p->place.gshape[0];
        memset(full, 0, rows * (size_t)shape[1] * sizeof *full); /* padded rows stay zero */
        shape[0] = m->dims.vocab;
    }
    return st_model_read_f32(sm, p->name, full, shape, p->ndim, err, errlen);
}

int llama_hf_read(const llama_model *m, const char *dir, float *host, char *err, size_t errlen) {
    st_model sm;
    if (st_model_open(&sm, dir, err, errlen)) return -1;
    memset(host, 0, m->total * sizeof *host);
    int rc = 0;
    for (int i = 0; i < m->nparams && !rc; i++) {
        const llama_param *p = &m->params_tab[i];
        size_t gnumel = (size_t)p->place.gshape[0] * (size_t)(p->ndim == 2 ? p->place.gshape[1] : 1);
        float *full = malloc(gnumel * sizeof *full);
        if (!full) {
            rc = tr_errf(err, errlen, "out of host memory reading %s", p->name);
            break;
        }
        rc = read_global(m, &sm, p, is_vocab_param(m, i), full, err, errlen);
        for (size_t e = 0; !rc && e < p->numel; e++) host[p->offset + e] = full[llama_global_index(p, e)];
        free(full);
    }
    /* tensors of other stages are not this rank's: only a whole-model rank can judge leftovers */
    if (!rc && (m->layout.pp > 1)) {
        st_model_close(&sm);
        return 0;
    }
    if (!rc) {
        int n = st_model_unread(&sm, NULL, 0);
        const char **unread = n > 0 ? malloc((size_t)n * sizeof *unread) : NULL;
        if (n > 0 && !unread) rc = tr_errf(err, errlen, "out of host memory");
        if (unread) st_model_unread(&sm, unread, n);
        for (int k = 0; unread && k < n; k++) {
            if (strstr(unread[k], "rotary_emb.inv_freq")) continue; /* a cached buffer old exports carry */
            rc = tr_errf(err, errlen,
                         "%s: tensor '%s' has no place in twinrun's Llama as config.json describes it (a bias "
                         "without attention_bias/mlp_bias, tied or extra weights); remove it or fix config.json",
                         dir, unread[k]);
            break;
        }
        free(unread);
    }
    st_model_close(&sm);
    return rc;
}

int llama_hf_load(llama_model *m, const char *dir, char *err, size_t errlen) {
    float *host = malloc(m->total * sizeof *host);
    if (!host) return tr_errf(err, errlen, "out of host memory loading %s", dir);
    int rc = llama_hf_read(m, dir, host, err, errlen);
    if (!rc) llama_set_master(m, host);
    free(host);
    return rc;
}

int llama_hf_write(const llama_model *m, const float *host, const char *path, const char *prefix, char *err,
                   size_t errlen) {
    if (m->layout.tp > 1 || m->layout.pp > 1)
        return tr_errf(err, errlen, "%s: export needs the whole model on one rank (TP 1, PP 1); gather it first", path);
    st_writer *w = st_writer_new();
    if (!w) return tr_errf(err, errlen, "out of host memory writing %s", path);
    int rc = 0;
    char name[LLAMA_NAME_LEN + 64], half[LLAMA_NAME_LEN + 8];
    for (int i = 0; i < m->nparams && !rc; i++) {
        const llama_param *p = &m->params_tab[i];
        int64_t shape[2] = {p->shape[0], p->shape[1]};
        if (is_gate_up(p->name)) {
            shape[0] = p->shape[0] / 2;
            llama_hf_fc1_half(p->name, 0, half, sizeof half);
            snprintf(name, sizeof name, "%s%s", prefix, half);
            rc = st_writer_add(w, name, ST_F32, shape, p->ndim, host + p->offset, err, errlen);
            llama_hf_fc1_half(p->name, 1, half, sizeof half);
            snprintf(name, sizeof name, "%s%s", prefix, half);
            if (!rc) rc = st_writer_add(w, name, ST_F32, shape, p->ndim, host + p->offset + p->numel / 2, err, errlen);
        } else {
            if (is_vocab_param(m, i)) shape[0] = m->dims.vocab;
            snprintf(name, sizeof name, "%s%s", prefix, p->name);
            rc = st_writer_add(w, name, ST_F32, shape, p->ndim, host + p->offset, err, errlen);
        }
    }
    if (!rc) rc = st_writer_write(w, path, err, errlen);
    st_writer_free(w);
    return rc;
}
