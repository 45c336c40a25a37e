/* manifest.json: what a checkpoint is (iteration, samples, model shape, layout, scheduler,
 * optimizer step, seed), where it came from (build, batch, data, tokenizer), its files with sizes and
 * CRCs, and last its own CRC. Parsed strictly: it comes from disk. */
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

void ckpt_provenance_free(ckpt_provenance *p) {
    for (int i = 0; p->data_path && i < p->n_data_path; i++) free(p->data_path[i]);
    free(p->data_path);
    p->data_path = NULL, p->n_data_path = 0;
}

int ckpt_provenance_set_paths(ckpt_provenance *p, int n, const char *const *paths) {
    ckpt_provenance_free(p);
    if (n < 0 || n > CKPT_PROV_MAX_PATHS) return -1;
    p->data_path = n ? calloc((size_t)n, sizeof *p->data_path) : NULL;
    if (n && !p->data_path) return -1;
    p->n_data_path = n; /* calloc'd: a failure below frees what was copied */
    for (int i = 0; i < n; i++)
        if (!(p->data_path[i] = strdup(paths[i]))) return ckpt_provenance_free(p), -1;
    return 0;
}

void ckpt_manifest_free(ckpt_manifest *m) {
    free(m->files);
    ckpt_provenance_free(&m->prov);
    memset(m, 0, sizeof *m);
}

const char *ckpt_manifest_note(const ckpt_manifest *m) {
    return m->prov.present ? NULL
                           : "written before twinrun recorded provenance: the manifest has no checksum of its own "
                             "and a resume cannot name what changed (the next save records both)";
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

static void add_hex64(cJSON *o, const char *key, uint64_t v) {
    char hex[24];
    snprintf(hex, sizeof hex, "%016" PRIx64, v); /* a string: 64 bits do not fit a JSON double */
    cJSON_AddStringToObject(o, key, hex);
}

static int add_provenance(cJSON *r, const ckpt_provenance *p) {
    cJSON *tw = obj_in(r, "twinrun"), *tr = obj_in(r, "training"), *da = obj_in(r, "data");
    cJSON *to = obj_in(r, "tokenizer"), *paths = cJSON_CreateArray();
    if (!tw || !tr || !da || !to || !paths) return cJSON_Delete(paths), -1;
    cJSON_AddStringToObject(tw, "version", p->version);
    cJSON_AddStringToObject(tw, "commit", p->commit);
    cJSON_AddStringToObject(tw, "backend", p->backend);
    cJSON_AddNumberToObject(tr, "global_batch_size", p->global_batch_size);
    cJSON_AddNumberToObject(tr, "micro_batch_size", p->micro_batch_size);
    cJSON_AddItemToObject(da, "paths", paths);
    for (int i = 0; i < p->n_data_path; i++) cJSON_AddItemToArray(paths, cJSON_CreateString(p->data_path[i]));
    cJSON_AddBoolToObject(da, "mock_data", p->mock_data);
    add_hex64(da, "fingerprint", p->data_fingerprint);
    cJSON_AddStringToObject(to, "type", p->tokenizer_type);
    cJSON_AddStringToObject(to, "model", p->tokenizer_model);
    add_hex64(to, "fingerprint", p->tokenizer_fingerprint);
    return 0;
}

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
    if (m->prov.present && add_provenance(r, &m->prov)) goto out;
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
    if (m->prov.present) {
        char *compact = cJSON_PrintUnformatted(r);
        if (!compact) goto out;
        snprintf(crc, sizeof crc, "%08x", ckpt_crc32(0, compact, strlen(compact)));
        free(compact);
        cJSON_AddStringToObject(r, "manifest_crc32", crc);
    }
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

/* A string of at most cap-1 bytes without control characters (it is printed to a terminal). */
static int get_str(const pctx *c, const cJSON *obj, const char *key, char *out, size_t cap) {
    const cJSON *v = need(c, obj, key);
    if (!v) return -1;
    const char *s = cJSON_IsString(v) ? v->valuestring : NULL;
    int ok = s && strlen(s) < cap;
    for (const char *p = s; ok && *p; p++) ok = (unsigned char)*p >= 0x20 && *p != 0x7f;
    if (!ok)
        return tr_errf(c->err, c->errlen, "%s: \"%s\" must be a string of at most %zu printable bytes", c->path, key,
                       cap - 1);
    memcpy(out, s, strlen(s) + 1);
    return 0;
}

static int get_hex64(const pctx *c, const cJSON *obj, const char *key, uint64_t *out) {
    const cJSON *v = need(c, obj, key);
    if (!v) return -1;
    if (!cJSON_IsString(v) || !all_digits(v->valuestring, 16, 16))
        return tr_errf(c->err, c->errlen, "%s: \"%s\" must be 16 hex digits", c->path, key);
    *out = strtoull(v->valuestring, NULL, 16);
    return 0;
}

static const char *const PROV_KEYS[] = {"twinrun", "training", "data", "tokenizer"};

static int parse_provenance(const pctx *c, const cJSON *r, ckpt_provenance *p) {
    const cJSON *o[4];
    for (int i = 0; i < 4; i++)
        if (!(o[i] = get_obj(c, r, PROV_KEYS[i]))) return -1;
    if (get_str(c, o[0], "version", p->version, sizeof p->version) ||
        get_str(c, o[0], "commit", p->commit, sizeof p->commit) ||
        get_str(c, o[0], "backend", p->backend, sizeof p->backend) ||
        get_int(c, o[1], "global_batch_size", 1, 1 << 30, &p->global_batch_size) ||
        get_int(c, o[1], "micro_batch_size", 1, 1 << 30, &p->micro_batch_size) ||
        get_bool(c, o[2], "mock_data", &p->mock_data) || get_hex64(c, o[2], "fingerprint", &p->data_fingerprint) ||
        get_str(c, o[3], "type", p->tokenizer_type, sizeof p->tokenizer_type) ||
        get_str(c, o[3], "model", p->tokenizer_model, sizeof p->tokenizer_model) ||
        get_hex64(c, o[3], "fingerprint", &p->tokenizer_fingerprint))
        return -1;
    const cJSON *paths = need(c, o[2], "paths");
    if (!paths) return -1;
    int n = cJSON_IsArray(paths) ? cJSON_GetArraySize(paths) : -1;
    if (n < 0 || n > CKPT_PROV_MAX_PATHS)
        return tr_errf(c->err, c->errlen, "%s: data.paths must be an array of at most %d strings", c->path,
                       CKPT_PROV_MAX_PATHS);
    p->data_path = n ? calloc((size_t)n, sizeof *p->data_path) : NULL;
    if (n && !p->data_path) return tr_errf(c->err, c->errlen, "%s: out of host memory", c->path);
    int i = 0;
    for (const cJSON *e = paths->child; e; e = e->next, i++) {
        const char *s = cJSON_IsString(e) ? e->valuestring : NULL;
        int ok = s && strlen(s) < CKPT_PROV_PATH;
        for (const char *q = s; ok && *q; q++) ok = (unsigned char)*q >= 0x20 && *q != 0x7f;
        if (!ok)
            return tr_errf(c->err, c->errlen, "%s: data.paths[%d] must be a string of at most %d printable bytes",
                           c->path, i, CKPT_PROV_PATH - 1);
        if (!(p->data_path[i] = strdup(s))) return tr_errf(c->err, c->errlen, "%s: out of host memory", c->path);
        p->n_data_path = i + 1;
    }
    p->present = true;
    return 0;
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
    /* written by newer versions; a manifest without them is an older checkpoint, not a damaged one */
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

static int parse_root(const pctx *c, const cJSON *r, bool has_crc, ckpt_manifest *m) {
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
    if (parse_files(c, files, m)) return -1;
    if (has_crc) return parse_provenance(c, r, &m->prov);
    for (int i = 0; i < 4; i++) /* provenance is only ever written with the checksum that covers it */
        if (cJSON_GetObjectItemCaseSensitive(r, PROV_KEYS[i]))
            return tr_errf(c->err, c->errlen,
                           "%s: \"%s\" without \"manifest_crc32\": the manifest's checksum was removed after it "
                           "was written; restore the manifest from a copy or resume from an older checkpoint",
                           c->path, PROV_KEYS[i]);
    return 0;
}

/* Takes "manifest_crc32" out of r and checks it against the compact text of the rest: 0 (with
 * *has_crc false when there is none: an older manifest), -1 with err. */
static int take_crc(const pctx *c, cJSON *r, int check, bool *has_crc, uint32_t *crc_out) {
    *has_crc = false;
    if (!cJSON_GetObjectItemCaseSensitive(r, "manifest_crc32")) return 0;
    const cJSON *v = need(c, r, "manifest_crc32");
    if (!v) return -1;
    if (!cJSON_IsString(v) || !all_digits(v->valuestring, 16, 8))
        return tr_errf(c->err, c->errlen, "%s: \"manifest_crc32\" must be 8 hex digits", c->path);
    const uint32_t said = (uint32_t)strtoul(v->valuestring, NULL, 16);
    cJSON_Delete(cJSON_DetachItemFromObjectCaseSensitive(r, "manifest_crc32"));
    char *compact = cJSON_PrintUnformatted(r);
    if (!compact) return tr_errf(c->err, c->errlen, "%s: out of host memory", c->path);
    const uint32_t got = ckpt_crc32(0, compact, strlen(compact));
    free(compact);
    if (check && got != said)
        return tr_errf(c->err, c->errlen,
                       "%s: the manifest's own checksum does not match its contents (CRC %08x, it says %08x): it was "
                       "edited or damaged after it was written; restore it from a copy, or resume from an older "
                       "checkpoint",
                       c->path, got, said);
    *has_crc = true, *crc_out = said;
    return 0;
}

int ckpt_manifest_parse_ex(ckpt_manifest *m, const char *json, size_t len, const char *path, int check_crc, char *err,
                           size_t errlen) {
    memset(m, 0, sizeof *m);
    pctx c = {path, err, errlen};
    cJSON *r = cJSON_ParseWithLength(json, len);
    if (!r || !cJSON_IsObject(r)) {
        cJSON_Delete(r);
        return tr_errf(err, errlen, "%s: not a JSON object; the manifest is corrupt", path);
    }
    bool has_crc;
    int rc = take_crc(&c, r, check_crc, &has_crc, &m->manifest_crc32);
    if (!rc) rc = parse_root(&c, r, has_crc, m);
    cJSON_Delete(r);
    if (rc) ckpt_manifest_free(m);
    return rc;
}

int ckpt_manifest_parse(ckpt_manifest *m, const char *json, size_t len, const char *path, char *err, size_t errlen) {
    return ckpt_manifest_parse_ex(m, json, len, path, 1, err, errlen);
}
