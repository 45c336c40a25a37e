#include "train/nan_probe.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/coll.h"
#include "twinrun/err.h"
#include "twinrun/kern.h"

/* Sites of one micro-batch in causal order: forward layers l0.., the loss, backward layers ..l0. */
static int site_index(const tr_nan_probe *p, llama_site site, int layer, int micro) {
    const int nl = p->m->dims.nl, per = 2 * nl + 1, l = layer - p->m->dims.l0;
    switch (site) {
    case LLAMA_SITE_ACTIVATION: return micro * per + l;
    case LLAMA_SITE_LOSS: return micro * per + nl;
    case LLAMA_SITE_GRADIENT: return micro * per + nl + 1 + (nl - 1 - l);
    }
    return -1;
}

/* A key that orders sites across stages too: a NaN in micro-batch m's forward at layer l can only
 * reach sites with a larger key. */
static double site_key(const tr_nan_probe *p, llama_site site, int layer, int micro) {
    const int L = p->layers;
    double within = site == LLAMA_SITE_ACTIVATION ? layer : site == LLAMA_SITE_LOSS ? L : L + 1 + (L - 1 - layer);
    return (double)micro * (2.0 * L + 1.0) + within;
}

static void observe(void *arg, llama_site site, int layer, int micro, tr_buf x, size_t n) {
    tr_nan_probe *p = arg;
    if (!p->active) return;
    static const fault_tensor as_fault[] = {FAULT_T_ACTIVATION, FAULT_T_LOSS, FAULT_T_GRADIENT};
    fault_tensor_site(p->faults, as_fault[site], layer, p->m->stream, x.p, x.dt, n);
    if (!p->check || micro >= p->num_micro) return;
    const int i = site_index(p, site, layer, micro);
    TR_CHECK(i >= 0 && i < p->nsites, "NaN probe site out of range");
    kern_sum_squares(p->m->stream, p->sites + i, x, n);
}

int train_nan_probe_init(tr_nan_probe *p, llama_model *m, int num_micro, int layers, bool check, fault_rank *faults) {
    memset(p, 0, sizeof *p);
    p->m = m, p->check = check, p->faults = faults, p->num_micro = num_micro, p->layers = layers;
    if (!check && !faults) return 0;
    if (check) {
        p->nsites = num_micro * (2 * m->dims.nl + 1);
        p->sites = dev_alloc(m->dev, sizeof(float) * (size_t)p->nsites, "NaN/Inf probe sums");
        p->host = malloc(sizeof(float) * (size_t)p->nsites);
        if (!p->sites || !p->host) return -1;
    }
    m->site = observe;
    m->site_arg = p;
    return 0;
}

void train_nan_probe_free(tr_nan_probe *p) {
    if (p->m && p->m->site_arg == p) p->m->site = NULL, p->m->site_arg = NULL;
    if (p->sites) dev_free(p->m->dev, p->sites);
    free(p->host);
    memset(p, 0, sizeof *p);
}

void train_nan_probe_begin(tr_nan_probe *p) {
    if (p->sites) dev_memset_zero(p->m->stream, p->sites, sizeof(float) * (size_t)p->nsites);
    p->active = true;
}

void train_nan_probe_end(tr_nan_probe *p) { p->active = false; }

void train_nan_probe_origin(tr_nan_probe *p, const tr_groups *gr, tr_nan_origin *out) {
    /* this rank's earliest non-finite site: {key, site, layer, micro}; key -1 = none */
    float mine[4] = {-1, 0, 0, 0};
    if (p->sites) {
        dev_copy_d2h(p->m->stream, p->host, p->sites, sizeof(float) * (size_t)p->nsites);
        dev_stream_sync(p->m->stream);
        const int nl = p->m->dims.nl, per = 2 * nl + 1;
        for (int i = 0; i < p->nsites && mine[0] < 0; i++) {
            if (isfinite(p->host[i])) continue;
            const int micro = i / per, j = i % per;
            llama_site site = j < nl ? LLAMA_SITE_ACTIVATION : j == nl ? LLAMA_SITE_LOSS : LLAMA_SITE_GRADIENT;
            int layer = site == LLAMA_SITE_ACTIVATION ? p->m->dims.l0 + j
                        : site == LLAMA_SITE_LOSS     ? -1
                                                      : p->m->dims.l0 + (nl - 1 - (j - nl - 1));
            mine[0] = (float)site_key(p, site, layer, micro), mine[1] = (float)site, mine[2] = (float)layer;
            mine[3] = (float)micro;
        }
    }
    out->rank = -1, out->layer = -1, out->micro = -1, out->site = LLAMA_SITE_ACTIVATION;
    coll_comm *world = gr ? gr->world : NULL;
    const int n = world ? coll_comm_size(world) : 1;
    float *all = malloc(sizeof(float) * 4 * (size_t)n);
    TR_CHECK(all != NULL, "out of host memory for the NaN origin");
    if (world && n > 1) {
        float *d = dev_alloc(p->m->dev, sizeof(float) * 4 * ((size_t)n + 1), "NaN origin exchange");
        TR_CHECK(d != NULL, "out of device memory for the NaN origin exchange");
        dev_copy_h2d(p->m->stream, d, mine, sizeof mine);
        coll_all_gather(world, p->m->stream, d, d + 4, 4, TR_F32);
        dev_copy_d2h(p->m->stream, all, d + 4, sizeof(float) * 4 * (size_t)n);
        dev_stream_sync(p->m->stream);
        dev_free(p->m->dev, d);
    } else {
        memcpy(all, mine, sizeof mine);
    }
    for (int r = 0; r < n; r++) { /* earliest key; ties go to the lowest rank */
        const float *e = all + 4 * r;
        if (e[0] < 0 || (out->rank >= 0 && e[0] >= all[4 * out->rank])) continue;
        out->rank = r, out->site = (llama_site)(int)e[1], out->layer = (int)e[2], out->micro = (int)e[3];
    }
    free(all);
}

const char *train_nan_site_name(llama_site s) {
    return s == LLAMA_SITE_ACTIVATION ? "activation" : s == LLAMA_SITE_LOSS ? "loss" : "gradient";
}

void train_nan_origin_describe(const tr_nan_origin *o, const tr_grid *g, char *out, size_t outlen) {
    if (o->rank < 0) {
        snprintf(out, outlen,
                 "no probed tensor was non-finite (it arose after the backward pass: the gradient "
                 "reduction or the grad norm)");
        return;
    }
    char where[96] = "";
    if (g)
        snprintf(where, sizeof where, " (tp %d, pp %d, cp %d, dp %d)", g->coord[TR_AXIS_TP], g->coord[TR_AXIS_PP],
                 g->coord[TR_AXIS_CP], g->coord[TR_AXIS_DP]);
    if (o->site == LLAMA_SITE_LOSS)
        snprintf(out, outlen, "rank %d%s, the loss, micro-batch %d", o->rank, where, o->micro);
    else
        snprintf(out, outlen, "rank %d%s, layer %d %s, micro-batch %d", o->rank, where, o->layer,
                 train_nan_site_name(o->site), o->micro);
}
