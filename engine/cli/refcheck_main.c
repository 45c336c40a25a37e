/* refcheck DIR: compares the engine with a Hugging Face reference directory
 * (config.json, model.safetensors, reference.safetensors, reference.json — the format of
 * tests/data/tiny_gqa): step-0 logits, loss and every gradient, then K AdamW steps' losses,
 * grad norms and final weights, in fp32 and in bf16. Prints each error beside its tolerance and
 * exits non-zero on any miss. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/hf_config.h"
#include "io/safetensors.h"
#include "model/llama.h"
#include "model/llama_hf.h"
#include "optim/lr_schedule.h"
#include "optim/optimizer.h"
#include "train/step.h"
#include "twinrun/config.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

typedef struct refcase {
    char dir[1024];
    int K, B, T1;        /* steps, batch, sequence + 1 */
    int32_t *tokens;     /* [K, B, T1] */
    double *lr_per_step; /* [K] */
    tr_config cfg;
    st_file ref;
} refcase;

typedef struct tolerances {
    double logits, loss, grads, step_loss, grad_norm, weights;
} tolerances;

static int misses;

static void report(const char *what, double error, double tol) {
    int ok = error <= tol && isfinite(error);
    if (!ok) misses++;
    printf("  %-58s %.3e  (tolerance %.0e)  %s\n", what, error, tol, ok ? "ok" : "MISS");
}

static double rel_l2(const float *a, const float *ref, size_t n) {
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)a[i] - (double)ref[i];
        num += d * d;
        den += (double)ref[i] * ref[i];
    }
    return den > 0 ? sqrt(num / den) : sqrt(num);
}

static char *read_text(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        tr_errf(err, errlen, "cannot open %s", path);
        return NULL;
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (!s || fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        fclose(f);
        tr_errf(err, errlen, "cannot read %s", path);
        return NULL;
    }
    s[n] = 0;
    fclose(f);
    return s;
}

static int json_number(const cJSON *obj, const char *path, const char *key, double *out, char *err, size_t errlen) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v)) return tr_errf(err, errlen, "%s: \"%s\" missing or not a number", path, key);
    *out = v->valuedouble;
    return 0;
}

/* reference.json: optimizer hyper-parameters, the lr schedule and the per-step lrs. */
static int load_reference_json(refcase *rc, char *err, size_t errlen) {
    char path[1100];
    snprintf(path, sizeof path, "%s/reference.json", rc->dir);
    char *text = read_text(path, err, errlen);
    if (!text) return -1;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root) return tr_errf(err, errlen, "%s: not valid JSON", path);
    int r = -1;
    const cJSON *opt = cJSON_GetObjectItemCaseSensitive(root, "optimizer");
    const cJSON *sched = opt ? cJSON_GetObjectItemCaseSensitive(opt, "lr_schedule") : NULL;
    const cJSON *betas = opt ? cJSON_GetObjectItemCaseSensitive(opt, "betas") : NULL;
    const cJSON *lrs = opt ? cJSON_GetObjectItemCaseSensitive(opt, "lr_per_step") : NULL;
    double b1, b2, eps, wd, clip, max_lr, min_lr, warm, decay, gbs;
    if (!opt || !sched || !cJSON_IsArray(betas) || cJSON_GetArraySize(betas) != 2 || !cJSON_IsArray(lrs)) {
        tr_errf(err, errlen, "%s: needs optimizer.{betas[2], lr_per_step[], lr_schedule{}}", path);
        goto out;
    }
    b1 = cJSON_GetArrayItem(betas, 0)->valuedouble;
    b2 = cJSON_GetArrayItem(betas, 1)->valuedouble;
    if (json_number(opt, path, "eps", &eps, err, errlen) || json_number(opt, path, "weight_decay", &wd, err, errlen) ||
        json_number(opt, path, "clip_grad_global_norm", &clip, err, errlen) ||
        json_number(sched, path, "max_lr", &max_lr, err, errlen) ||
        json_number(sched, path, "min_lr", &min_lr, err, errlen) ||
        json_number(sched, path, "warmup_samples", &warm, err, errlen) ||
        json_number(sched, path, "decay_samples", &decay, err, errlen) ||
        json_number(sched, path, "global_batch", &gbs, err, errlen))
        goto out;
    const cJSON *style = cJSON_GetObjectItemCaseSensitive(sched, "style");
    if (!cJSON_IsString(style)) {
        tr_errf(err, errlen, "%s: optimizer.lr_schedule.style missing", path);
        goto out;
    }
    tr_config *c = &rc->cfg;
    if (!strcmp(style->valuestring, "cosine")) c->lr_decay_style = TR_LR_COSINE;
    else if (!strcmp(style->valuestring, "linear")) c->lr_decay_style = TR_LR_LINEAR;
    else if (!strcmp(style->valuestring, "constant")) c->lr_decay_style = TR_LR_CONSTANT;
    else {
        tr_errf(err, errlen, "%s: unknown lr style \"%s\"", path, style->valuestring);
        goto out;
    }
    c->adam_beta1 = b1, c->adam_beta2 = b2, c->adam_eps = eps, c->weight_decay = wd, c->clip_grad = clip;
    c->lr = max_lr, c->min_lr = min_lr;
    c->lr_warmup_samples = (int64_t)warm, c->lr_decay_samples = (int64_t)decay;
    c->global_batch_size = (int)gbs;
    if (cJSON_GetArraySize(lrs) != rc->K) {
        tr_errf(err, errlen, "%s: %d lrs for %d steps", path, cJSON_GetArraySize(lrs), rc->K);
        goto out;
    }
    rc->lr_per_step = calloc((size_t)rc->K, sizeof *rc->lr_per_step);
    for (int k = 0; k < rc->K; k++) rc->lr_per_step[k] = cJSON_GetArrayItem(lrs, k)->valuedouble;
    r = 0;
out:
    cJSON_Delete(root);
    return r;
}

static int load_case(refcase *rc, const char *dir, char *err, size_t errlen) {
    memset(rc, 0, sizeof *rc);
    snprintf(rc->dir, sizeof rc->dir, "%s", dir);
    char path[1100];
    tr_config_defaults(&rc->cfg);
    hf_llama_config hf;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (hf_config_load(&hf, path, err, errlen) || hf_config_apply(&hf, &rc->cfg, err, errlen)) return -1;
    snprintf(path, sizeof path, "%s/reference.safetensors", dir);
    if (st_open(&rc->ref, path, err, errlen)) return -1;
    const st_tensor *t = st_find(&rc->ref, "tokens");
    if (!t || t->ndim != 3) return tr_errf(err, errlen, "%s: needs tokens [steps, batch, seq+1]", path);
    rc->K = (int)t->shape[0], rc->B = (int)t->shape[1], rc->T1 = (int)t->shape[2];
    rc->tokens = malloc((size_t)rc->K * rc->B * rc->T1 * sizeof *rc->tokens);
    if (st_read_i32(&rc->ref, "tokens", rc->tokens, t->shape, 3, err, errlen)) return -1;
    tr_config *c = &rc->cfg;
    c->micro_batch_size = rc->B;
    c->seq_length = rc->T1 - 1;
    c->train_iters = 0; /* reference.json's schedule is in samples: a sample-based run */
    c->train_samples = (int64_t)rc->K * rc->B;
    if (load_reference_json(rc, err, errlen)) return -1;
    if (c->global_batch_size != rc->B)
        return tr_errf(err, errlen, "reference global batch %d differs from the token batch %d", c->global_batch_size,
                       rc->B);
    return 0;
}

typedef struct batch_ctx {
    const refcase *rc;
    int step;
} batch_ctx;

/* Step k's micro-batch: tokens[k][:, :-1] predict tokens[k][:, 1:], every token counts. */
static int ref_batch(void *ctx, int micro, int32_t *tokens, int32_t *labels, float *mask, int32_t *pos, char *err,
                     size_t errlen) {
    (void)micro, (void)err, (void)errlen;
    const batch_ctx *bc = ctx;
    const refcase *rc = bc->rc;
    int T = rc->T1 - 1;
    for (int b = 0; b < rc->B; b++)
        for (int t = 0; t < T; t++) {
            const int32_t *row = rc->tokens + ((size_t)bc->step * rc->B + b) * rc->T1;
            tokens[b * T + t] = row[t];
            labels[b * T + t] = row[t + 1];
            mask[b * T + t] = 1.0f;
            pos[b * T + t] = t;
        }
    return 0;
}

/* Reads reference tensor "<prefix><hf name>" for internal parameter i (gate/up split, vocab rows). */
static int read_ref_param(const refcase *rc, const llama_model *m, int i, const char *prefix, float *dst, char *err,
                          size_t errlen) {
    const llama_param *p = &m->params_tab[i];
    char name[256];
    int64_t shape[2] = {p->shape[0], p->shape[1]};
    char half[LLAMA_NAME_LEN + 8];
    if (llama_hf_fc1_half(p->name, 0, half, sizeof half)) { /* gate rows, then up rows */
        shape[0] /= 2;
        snprintf(name, sizeof name, "%s%s", prefix, half);
        if (st_read_f32(&rc->ref, name, dst, shape, p->ndim, err, errlen)) return -1;
        llama_hf_fc1_half(p->name, 1, half, sizeof half);
        snprintf(name, sizeof name, "%s%s", prefix, half);
        return st_read_f32(&rc->ref, name, dst + p->numel / 2, shape, p->ndim, err, errlen);
    }
    if (i == m->p_embed || i == m->p_head) shape[0] = m->dims.vocab;
    snprintf(name, sizeof name, "%s%s", prefix, p->name);
    return st_read_f32(&rc->ref, name, dst, shape, p->ndim, err, errlen);
}

static size_t ref_numel(const llama_model *m, int i) {
    const llama_param *p = &m->params_tab[i];
    return (i == m->p_embed || i == m->p_head) ? (size_t)m->dims.vocab * m->dims.C : p->numel;
}

static int run_case(refcase *rc, bool bf16, const tolerances *tol, char *err, size_t errlen) {
    tr_config cfg = rc->cfg;
    cfg.bf16 = bf16;
    printf("%s (%s):\n", rc->dir, bf16 ? "bf16 weights and activations, fp32 master and optimizer" : "fp32");
    dev_device *d = dev_open(0, 0, err, errlen);
    if (!d) return -1;
    dev_stream *s = dev_stream_default(d);
    llama_model *m = llama_create(&cfg, d, s, err, errlen);
    if (!m) return -1;
    tr_optimizer *o = optim_create(m, &cfg, NULL, err, errlen);
    if (!o) return -1;
    if (llama_hf_load(m, rc->dir, err, errlen)) return -1;

    const llama_dims *dm = &m->dims;
    const int N = dm->B * dm->T;
    float *host = malloc(m->total * sizeof *host), *ref = malloc(m->total * sizeof *ref);
    float *logits = malloc((size_t)N * dm->V * sizeof *logits);
    float *ref_logits = malloc((size_t)N * dm->vocab * sizeof *ref_logits);
    float *packed = malloc((size_t)N * dm->vocab * sizeof *packed);
    int r = -1;
    char what[160];

    /* step 0: logits (before backward reuses their buffer), loss and gradients on tokens[0] */
    batch_ctx bc = {rc, 0};
    tr_step_result res;
    {
        int32_t *tok = malloc((size_t)N * 8), *pos = malloc((size_t)N * 4);
        float *mask = malloc((size_t)N * 4);
        ref_batch(&bc, 0, tok, tok + N, mask, pos, err, errlen);
        llama_forward(m, tok, tok + N, pos);
        llama_get_logits(m, logits);
        free(tok), free(pos), free(mask);
    }
    if (train_forward_backward(m, o, &cfg, NULL, 1, ref_batch, &bc, &res, err, errlen)) goto out;
    int64_t lshape[3] = {rc->B, rc->T1 - 1, dm->vocab};
    if (st_read_f32(&rc->ref, "logits", ref_logits, lshape, 3, err, errlen)) goto out;
    for (int n = 0; n < N; n++) memcpy(packed + (size_t)n * dm->vocab, logits + (size_t)n * dm->V, dm->vocab * 4);
    report("step 0 logits (relative L2)", rel_l2(packed, ref_logits, (size_t)N * dm->vocab), tol->logits);
    float ref_loss;
    int64_t one = 1;
    if (st_read_f32(&rc->ref, "loss", &ref_loss, &one, 1, err, errlen)) goto out;
    float our_loss = (float)res.loss;
    report("step 0 loss (relative)", rel_l2(&our_loss, &ref_loss, 1), tol->loss);
    llama_get_grads(m, host);
    double worst = 0;
    for (int i = 0; i < m->nparams; i++) {
        if (read_ref_param(rc, m, i, "grad.", ref + m->params_tab[i].offset, err, errlen)) goto out;
        double e = rel_l2(host + m->params_tab[i].offset, ref + m->params_tab[i].offset, ref_numel(m, i));
        if (e > worst) worst = e;
        snprintf(what, sizeof what, "step 0 grad %s", m->params_tab[i].name);
        report(what, e, tol->grads);
    }

    /* K AdamW steps from the same weights, at the schedule's lrs (checked against reference.json) */
    if (llama_hf_load(m, rc->dir, err, errlen)) goto out;
    tr_lr_schedule sched;
    if (tr_lr_schedule_init(&sched, &cfg, err, errlen)) goto out;
    float *losses = calloc((size_t)rc->K, 4), *norms = calloc((size_t)rc->K, 4);
    float *ref_losses = calloc((size_t)rc->K, 4), *ref_norms = calloc((size_t)rc->K, 4);
    double lr_err = 0;
    for (int k = 0; k < rc->K; k++) {
        double lr = tr_lr_at(&sched, (int64_t)k * cfg.global_batch_size);
        double e = fabs(lr - rc->lr_per_step[k]) / (rc->lr_per_step[k] > 0 ? rc->lr_per_step[k] : 1.0);
        if (e > lr_err) lr_err = e;
        bc.step = k;
        int sr = train_step(m, o, &cfg, NULL, 1, lr, ref_batch, &bc, &res, err, errlen);
        if (sr) {
            free(losses), free(norms), free(ref_losses), free(ref_norms);
            goto out;
        }
        losses[k] = (float)res.loss;
        norms[k] = (float)res.grad_norm;
    }
    int64_t kshape = rc->K;
    if (st_read_f32(&rc->ref, "train.losses", ref_losses, &kshape, 1, err, errlen) ||
        st_read_f32(&rc->ref, "train.grad_norms", ref_norms, &kshape, 1, err, errlen)) {
        free(losses), free(norms), free(ref_losses), free(ref_norms);
        goto out;
    }
    report("lr schedule vs reference.json lr_per_step (max relative)", lr_err, 1e-12);
    for (int k = 0; k < rc->K; k++) {
        snprintf(what, sizeof what, "step %d loss %.6f vs %.6f", k, losses[k], ref_losses[k]);
        report(what, rel_l2(&losses[k], &ref_losses[k], 1), tol->step_loss);
        snprintf(what, sizeof what, "step %d grad norm %.6f vs %.6f", k, norms[k], ref_norms[k]);
        report(what, rel_l2(&norms[k], &ref_norms[k], 1), tol->grad_norm);
    }
    free(losses), free(norms), free(ref_losses), free(ref_norms);
    llama_get_master(m, host);
    for (int i = 0; i < m->nparams; i++) {
        if (read_ref_param(rc, m, i, "final.", ref + m->params_tab[i].offset, err, errlen)) goto out;
        snprintf(what, sizeof what, "final weight %s", m->params_tab[i].name);
        report(what, rel_l2(host + m->params_tab[i].offset, ref + m->params_tab[i].offset, ref_numel(m, i)),
               tol->weights);
    }
    r = 0;
out:
    free(host), free(ref), free(logits), free(ref_logits), free(packed);
    optim_destroy(o, m);
    llama_destroy(m);
    dev_close(d);
    return r;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "refcheck");
        return 0;
    }
    /* --fp32-only: a reference whose bf16 pass says nothing about correctness (tests/data/README.md) */
    const bool fp32_only = argc == 3 && !strcmp(argv[1], "--fp32-only");
    const char *dir = fp32_only ? argv[2] : argv[1];
    if (!(argc == 2 || fp32_only) || !strcmp(dir, "--help") || !strcmp(dir, "-h")) {
        fprintf(argc == 2 ? stdout : stderr,
                "usage: refcheck [--fp32-only] DIR\n"
                "Compares twinrun with a Hugging Face reference directory (config.json, model.safetensors,\n"
                "reference.safetensors, reference.json; see tests/data/tiny_gqa) in fp32 and bf16 (fp32 alone\n"
                "with --fp32-only).\n"
                "Exits 0 when every error is within its tolerance, 1 on a miss, 2 on bad input.\n");
        return argc == 2 ? 0 : TR_EXIT_USAGE;
    }
    char err[1024] = "";
    refcase rc;
    if (load_case(&rc, dir, err, sizeof err)) {
        fprintf(stderr, "refcheck: %s\n", err);
        return TR_EXIT_USAGE;
    }
    /* DESIGN.md section 6: fp32 logits 1e-5, grads 1e-4; steps 1e-5, weights 1e-4; bf16 2e-2. */
    const tolerances fp32 = {1e-5, 1e-5, 1e-4, 1e-5, 1e-5, 1e-4};
    const tolerances bf16 = {2e-2, 2e-2, 2e-2, 2e-2, 2e-2, 2e-2};
    if (run_case(&rc, false, &fp32, err, sizeof err) || (!fp32_only && run_case(&rc, true, &bf16, err, sizeof err))) {
        fprintf(stderr, "refcheck: %s\n", err);
        return TR_EXIT_USAGE;
    }
    st_close(&rc.ref);
    free(rc.tokens);
    free(rc.lr_per_step);
    printf("refcheck: %s\n", misses ? "MISS" : "all within tolerance");
    if (misses) printf("refcheck: %d check(s) outside tolerance\n", misses);
    return misses ? 1 : 0;
}
