/* manifest.json: what a checkpoint is (iteration, samples, model shape, layout, scheduler,
 * optimizer step, seed) and its files with sizes and CRCs. Parsed strictly: it comes from disk. */
#include <cjson/cJSON.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/config.h"
#include "twinrun/err.h"

#define MAX_JSON_INT 9007199254740992.0 /* 2^53: integers above lose digits in JSON doubles */
#define MAX_FILES (1 << 20)

static const char *const styles[] = {"constant", "linear", "cosine", "inverse-square-root"};
static const char *const norms[] = {"LayerNorm", "RMSNorm"};

void ckpt_manifest_free(ckpt_manifest *m) {
    free(m->files);
    memset(m, 0, sizeof *m);
}

/* ---- writing ---- */

static cJSON *obj_in(cJSON *parent, const char *key) {
    cJSON *o = cJSON_CreateObject();
    if (o) cJSON_AddItemToObject(parent, key, o);
    return o;
}

/* The model shape's integer fields, in the order of ckpt_model_shape's ints in the writer and the
 * parser: the manifest's "model" keys. */
#define MODEL_INTS 10
static const char *const MODEL_INT_KEYS[MODEL_INTS] = {"num_layers",
                                                       "hidden_size",
                                                       "ffn_hidden_size",
                                                       "num_attention_heads",
                                                       "num_query_groups",
                                                       "kv_channels",
                                                       "vocab_size",
                                                       "make_vocab_size_divisible_by",
                                                       "max_position_embeddings",
                                                       "seq_length"};

char *ckpt_manifest_to_json(const ckpt_manifest *m, char *err, size_t errlen) {
    if (m->sched.style < 0 || m->sched.style > 3 || m->model.normalization < 0 || m->model.normalization > 1) {
        tr_errf(err, errlen, "manifest: lr style %d or normalization %d unknown", m->sched.style,
                m->model.normalization);
        return NULL;
    }
    cJSON *r = cJSON_CreateObject();
    cJSON *mo = r ? obj_in(r, "model") : NULL, *lo = r ? obj_in(r, "layout") : NULL;
    cJSON *so = r ? obj_in(r, "scheduler") : NULL, *oo = r ? obj_in(r, "optimizer") : NULL;
    cJSON *rng = r ? obj_in(r, "rng") : NULL, *files = cJSON_CreateArray();
    char *out = NULL;
    if (!mo || !lo || !so || !oo || !rng || !files) goto out;
    cJSON_AddStringToObject(r, "format", "twinrun-checkpoint");
    cJSON_AddNumberToObject(r, "version", CKPT_FORMAT_VERSION);
    cJSON_AddNumberToObject(r, "iteration", (double)m->iteration);
    cJSON_AddNumberToObject(r, "consumed_train_samples", (double)m->consumed_train_samples);
    cJSON_AddNumberToObject(r, "consumed_valid_samples", (double)m->consumed_valid_samples);
    cJSON_AddBoolToObject(r, "bf16", m->bf16);
    const ckpt_model_shape *s = &m->model;
    const int ints[] = {s->num_layers,
                        s->hidden_size,
                        s->ffn_hidden_size,
                        s->num_attention_heads,
                        s->num_query_groups,
                        s->kv_channels,
                        s->vocab_size,
                        s->make_vocab_size_divisible_by,
                        s->max_position_embeddings,
                        s->seq_length};
    for (int i = 0; i < MODEL_INTS; i++) cJSON_AddNumberToObject(mo, MODEL_INT_KEYS[i], ints[i]);
    cJSON_AddStringToObject(mo, "normalization", norms[s->normalization]);
    cJSON_AddBoolToObject(mo, "swiglu", s->swiglu);
    cJSON_AddBoolToObject(mo, "untie_embeddings_and_output_weights", s->untie_embeddings_and_output_weights);
    cJSON_AddNumberToObject(mo, "rotary_base", s->rotary_base);
    cJSON_AddNumberToObject(mo, "norm_epsilon", s->norm_epsilon);
    if (s->has_architecture) {
        cJSON_AddBoolToObject(mo, "apply_layernorm_1p", s->apply_layernorm_1p);
        cJSON_AddBoolToObject(mo, "add_bias_linear", s->add_bias_linear);
        cJSON_AddBoolToObject(mo, "add_qkv_bias", s->add_qkv_bias);
        cJSON_AddBoolToObject(mo, "qk_layernorm", s->qk_layernorm);
        cJSON_AddNumberToObject(mo, "rotary_percent", s->rotary_percent);
    }
    cJSON_AddNumberToObject(lo, "tp", m->layout.tp);
    cJSON_AddNumberToObject(lo, "pp", m->layout.pp);
    cJSON_AddNumberToObject(lo, "dp", m->layout.dp);
    cJSON_AddNumberToObject(lo, "cp", m->layout.cp);
    cJSON_AddNumberToObject(lo, "world", ckpt_layout_world(&m->layout));
    cJSON_AddBoolToObject(lo, "use_distributed_optimizer", m->layout.dist_opt);
    cJSON_AddNumberToObject(so, "max_lr", m->sched.max_lr);
    cJSON_AddNumberToObject(so, "min_lr", m->sched.min_lr);
    cJSON_AddNumberToObject(so, "init_lr", m->sched.init_lr);
    cJSON_AddNumberToObject(so, "warmup_samples", (double)m->sched.warmup_samples);
    cJSON_AddNumberToObject(so, "decay_samples", (double)m->sched.decay_samples);
    cJSON_AddNumberToObject(so, "num_steps", (double)m->sched.num_steps);
    cJSON_AddStringToObject(so, "decay_style", styles[m->sched.style]);
    cJSON_AddNumberToObject(oo, "step", (double)m->optimizer_step);
    char seed[32], crc[16];
    snprintf(seed, sizeof seed, "%" PRIu64, m->seed); /* a string: 64-bit seeds do not fit a JSON double */
    cJSON_AddStringToObject(rng, "seed", seed);
    cJSON_AddItemToObject(r, "files", files);
    for (int i = 0; i < m->n_files; i++) {
        cJSON *f = cJSON_CreateObject();
        if (!f) goto out;
        cJSON_AddItemToArray(files, f);
        ckpt_coords c = ckpt_coords_of(&m->layout, i);
        cJSON_AddStringToObject(f, "name", m->files[i].name);
        cJSON_AddNumberToObject(f, "rank", i);
        cJSON_AddNumberToObject(f, "tp", c.tp);
        cJSON_AddNumberToObject(f, "pp", c.pp);
        cJSON_AddNumberToObject(f, "dp", c.dp);
        cJSON_AddNumberToObject(f, "cp", c.cp);
        cJSON_AddNumberToObject(f, "size", (double)m->files[i].size);
        snprintf(crc, sizeof crc, "%08x", m->files[i].crc32);
        cJSON_AddStringToObject(f, "crc32", crc);
    }
    files = NULL;
    out = cJSON_Print(r);
out:
    if (files) cJSON_Delete(files);
    cJSON_Delete(r);
    if (!out) tr_errf(err, errlen, "manifest: out of host memory");
    return out;
}

/* ---- reading ---- */

typedef struct pctx {
    const char *path;
    char *err;
    size_t errlen;
} pctx;

static const cJSON *need(const pctx *c, const cJSON *obj, const char *key) {
    const cJSON *v = NULL;
    int seen = 0;
    for (const cJSON *i = obj->child; i; i = i->next)
        if (i->string && strcmp(i->string, key) == 0) v = i, seen++;
    if (seen > 1) tr_errf(c->err, c->errlen, "%s: \"%s\" appears %d times", c->path, key, seen);
    else if (!v) tr_errf(c->err, c->errlen, "%s: \"%s\" is missing", c->path, key);
    return seen == 1 ? v : NULL;
}

static int get_i64(const pctx *c, const cJSON *obj, const char *key, int64_t lo, int64_t hi, int64_t *out) {
    const cJSON *v = need(c, obj, key);
    if (!v) return -1;
    double d = cJSON_IsNumber(v) ? v->valuedouble : NAN;
    if (!(d == floor(d)) || d < (double)lo || d > (double)hi || fabs(d) > MAX_JSON_INT)
        return tr_errf(c->err, c->errlen, "%s: \"%s\" must be an integer in [%lld, %lld]", c->path, key, (long long)lo,
                       (long long)hi);
    *out = (int64_t)d;
    return 0;
}

static int get_int(const pctx *c, const cJSON *obj, const char *key, int lo, int hi, int *out) {
    int64_t v = 0; /* set by get_i64 on success; initialised for -O3, which cannot see tr_errf returns -1 */
    if (get_i64(c, obj, key, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

static int get_double(const pctx *c, const cJSON *obj, const char *key, double *out) {
    const cJSON *v = need(c, obj, key);
    if (!v) return -1;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return tr_errf(c->err, c->errlen, "%s: \"%s\" must be a finite number", c->path, key);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const pctx *c, const cJSON *obj, const char *key, bool *out) {
    const cJSON *v = need(c, obj, key);
    if (!v) return -1;
    if (!cJSON_IsBool(v)) return tr_errf(c->err, c->errlen, "%s: \"%s\" must be true or false", c->path, key);
    *out = cJSON_IsTrue(v);
    return 0;
}

/* s is 1..20 decimal digits (base 10) or exactly `exact` hex digits (base 16). */
static int all_digits(const char *s, int base, size_t exact) {
    size_t n = strlen(s);
    if (n == 0 || (exact && n != exact) || (base == 10 && n > 20)) return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = (ch >= '0' && ch <= '9') || (base == 16 && ((ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')));
        if (!ok) return 0;
    }
    return 1;
}

static int get_enum(const pctx *c, const cJSON *obj, const char *key, const char *const *names, int n, int *out) {
    const cJSON *v = need(c, obj, key);
    if (!v) return -1;
    for (int i = 0; cJSON_IsString(v) && i < n; i++)
        if (strcmp(v->valuestring, names[i]) == 0) return *out = i, 0;
    char list[128] = "";
    for (int i = 0; i < n; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", names[i]);
    return tr_errf(c->err, c->errlen, "%s: \"%s\" must be one of: %s", c->path, key, list);
}

static const cJSON *get_obj(const pctx *c, const cJSON *obj, const char *key) {
    const cJSON *v = need(c, obj, key);
    if (v && !cJSON_IsObject(v)) {
        tr_errf(c->err, c->errlen, "%s: \"%s\" must be an object", c->path, key);
        return NULL;
    }
    return v;
}

static int parse_model(const pctx *c, const cJSON *mo, ckpt_model_shape *s) {
    int *const ints[] = {&s->num_layers,
                         &s->hidden_size,
                         &s->ffn_hidden_size,
                         &s->num_attention_heads,
                         &s->num_query_groups,
                         &s->kv_channels,
                         &s->vocab_size,
                         &s->make_vocab_size_divisible_by,
                         &s->max_position_embeddings,
                         &s->seq_length};
    for (int i = 0; i < MODEL_INTS; i++)
        if (get_int(c, mo, MODEL_INT_KEYS[i], 0, 1 << 30, ints[i])) return -1;
    if (get_enum(c, mo, "normalization", norms, 2, &s->normalization) || get_bool(c, mo, "swiglu", &s->swiglu) ||
        get_bool(c, mo, "untie_embeddings_and_output_weights", &s->untie_embeddings_and_output_weights) ||
        get_double(c, mo, "rotary_base", &s->rotary_base) || get_double(c, mo, "norm_epsilon", &s->norm_epsilon))
        return -1;
    /* written since issue 16; a manifest without them is an older checkpoint, not a damaged one */
    s->has_architecture = cJSON_GetObjectItemCaseSensitive(mo, "apply_layernorm_1p") != NULL;
    if (!s->has_architecture) return 0;
    return get_bool(c, mo, "apply_layernorm_1p", &s->apply_layernorm_1p) ||
                   get_bool(c, mo, "add_bias_linear", &s->add_bias_linear) ||
                   get_bool(c, mo, "add_qkv_bias", &s->add_qkv_bias) ||
                   get_bool(c, mo, "qk_layernorm", &s->qk_layernorm) ||
                   get_double(c, mo, "rotary_percent", &s->rotary_percent)
               ? -1
               : 0;
}

static int parse_files(const pctx *c, const cJSON *arr, ckpt_manifest *m) {
    int world = ckpt_layout_world(&m->layout);
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) != world)
        return tr_errf(c->err, c->errlen, "%s: \"files\" must list %d shards, one per rank of tp%d pp%d dp%d cp%d",
                       c->path, world, m->layout.tp, m->layout.pp, m->layout.dp, m->layout.cp);
    m->files = calloc((size_t)world, sizeof *m->files);
    if (!m->files) return tr_errf(c->err, c->errlen, "%s: out of host memory", c->path);
    m->n_files = world;
    int i = 0;
    for (const cJSON *f = arr->child; f; f = f->next, i++) {
        char want[CKPT_FILE_NAME_LEN];
        ckpt_shard_name(want, sizeof want, i);
        int64_t rank = -1, size = 0;
        if (!cJSON_IsObject(f)) return tr_errf(c->err, c->errlen, "%s: files[%d] must be an object", c->path, i);
        const cJSON *name = need(c, f, "name"), *crc = name ? need(c, f, "crc32") : NULL;
        if (!crc || get_i64(c, f, "rank", 0, world - 1, &rank) ||
            get_i64(c, f, "size", 0, (int64_t)MAX_JSON_INT, &size))
            return -1;
        if (!cJSON_IsString(name) || strcmp(name->valuestring, want) != 0 || rank != i)
            return tr_errf(c->err, c->errlen, "%s: files[%d] must be rank %d's \"%s\"", c->path, i, i, want);
        if (!cJSON_IsString(crc) || !all_digits(crc->valuestring, 16, 8))
            return tr_errf(c->err, c->errlen, "%s: files[%d].crc32 must be 8 hex digits", c->path, i);
        strcpy(m->files[i].name, want);
        m->files[i].size = (uint64_t)size, m->files[i].crc32 = (uint32_t)strtoul(crc->valuestring, NULL, 16);
    }
    return 0;
}

static int parse_root(const pctx *c, const cJSON *r, ckpt_manifest *m) {
    const cJSON *fmt = need(c, r, "format");
    if (!fmt) return -1;
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "twinrun-checkpoint") != 0)
        return tr_errf(c->err, c->errlen, "%s: \"format\" is not \"twinrun-checkpoint\"", c->path);
    if (get_int(c, r, "version", 0, 1 << 30, &m->version)) return -1;
    if (m->version != CKPT_FORMAT_VERSION)
        return tr_errf(c->err, c->errlen, "%s: format version %d; this build reads version %d", c->path, m->version,
                       CKPT_FORMAT_VERSION);
    const int64_t big = (int64_t)MAX_JSON_INT;
    if (get_i64(c, r, "iteration", 0, big, &m->iteration) ||
        get_i64(c, r, "consumed_train_samples", 0, big, &m->consumed_train_samples) ||
        get_i64(c, r, "consumed_valid_samples", 0, big, &m->consumed_valid_samples) || get_bool(c, r, "bf16", &m->bf16))
        return -1;
    const cJSON *mo = get_obj(c, r, "model"), *lo = mo ? get_obj(c, r, "layout") : NULL;
    const cJSON *so = lo ? get_obj(c, r, "scheduler") : NULL, *oo = so ? get_obj(c, r, "optimizer") : NULL;
    const cJSON *rng = oo ? get_obj(c, r, "rng") : NULL, *files = rng ? need(c, r, "files") : NULL;
    if (!files || parse_model(c, mo, &m->model)) return -1;
    int world;
    if (get_int(c, lo, "tp", 1, 1 << 20, &m->layout.tp) || get_int(c, lo, "pp", 1, 1 << 20, &m->layout.pp) ||
        get_int(c, lo, "dp", 1, 1 << 20, &m->layout.dp) || get_int(c, lo, "cp", 1, 1 << 20, &m->layout.cp) ||
        get_int(c, lo, "world", 1, 1 << 20, &world) ||
        get_bool(c, lo, "use_distributed_optimizer", &m->layout.dist_opt))
        return -1;
    int64_t ranks = (int64_t)m->layout.tp * m->layout.pp; /* each <= 2^20: check before every product */
    if (ranks <= world) ranks *= m->layout.dp;
    if (ranks <= world) ranks *= m->layout.cp;
    if (ranks != world)
        return tr_errf(c->err, c->errlen, "%s: layout world %d != tp%d x pp%d x dp%d x cp%d", c->path, world,
                       m->layout.tp, m->layout.pp, m->layout.dp, m->layout.cp);
    if (get_double(c, so, "max_lr", &m->sched.max_lr) || get_double(c, so, "min_lr", &m->sched.min_lr) ||
        get_double(c, so, "init_lr", &m->sched.init_lr) ||
        get_i64(c, so, "warmup_samples", 0, big, &m->sched.warmup_samples) ||
        get_i64(c, so, "decay_samples", 0, big, &m->sched.decay_samples) ||
        get_i64(c, so, "num_steps", 0, big, &m->sched.num_steps) ||
        get_enum(c, so, "decay_style", styles, 4, &m->sched.style) ||
        get_i64(c, oo, "step", 0, big, &m->optimizer_step))
        return -1;
    const cJSON *seed = need(c, rng, "seed");
    if (!seed) return -1;
    const char *sv = cJSON_IsString(seed) ? seed->valuestring : "";
    if (!all_digits(sv, 10, 0) || (strlen(sv) == 20 && strcmp(sv, "18446744073709551615") > 0))
        return tr_errf(c->err, c->errlen, "%s: rng.seed must be a decimal string of a 64-bit integer", c->path);
    m->seed = strtoull(sv, NULL, 10);
    return parse_files(c, files, m);
}

int ckpt_manifest_parse(ckpt_manifest *m, const char *json, size_t len, const char *path, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    pctx c = {path, err, errlen};
    cJSON *r = cJSON_ParseWithLength(json, len);
    if (!r || !cJSON_IsObject(r)) {
        cJSON_Delete(r);
        return tr_errf(err, errlen, "%s: not a JSON object; the manifest is corrupt", path);
    }
    int rc = parse_root(&c, r, m);
    cJSON_Delete(r);
    if (rc) ckpt_manifest_free(m);
    return rc;
}
