/* Hugging Face export: config.json from the Megatron-style config, weights in one safetensors file
 * or in shards with an index. The name mapping matches engine/model/llama_hf.c (the reader). */
#include "ckpt/hf_export.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt/ckpt_internal.h"
#include "io/safetensors.h"
#include "twinrun/err.h"

char *ckpt_hf_config_json(const tr_config *cfg, char *err, size_t errlen) {
    const char *why = NULL;
    if (cfg->normalization != TR_NORM_RMSNORM) why = "LayerNorm (Llama uses --normalization RMSNorm)";
    else if (!cfg->swiglu) why = "no --swiglu";
    else if (!cfg->untie_embeddings_and_output_weights)
        why = "tied embeddings (add --untie-embeddings-and-output-weights)";
    else if (cfg->position_embedding_type != TR_POS_ROPE) why = "positions other than RoPE";
    else if (cfg->apply_layernorm_1p) why = "--apply-layernorm-1p";
    else if (cfg->qk_layernorm) why = "--qk-layernorm (LlamaConfig has no q/k norms)";
    else if (cfg->rotary_percent != 1.0) why = "--rotary-percent below 1";
    else if (cfg->add_qkv_bias && cfg->disable_bias_linear)
        why = "biases on q/k/v only (--add-qkv-bias): LlamaConfig's attention_bias puts one on o_proj too";
    if (why) {
        tr_errf(err, errlen, "Hugging Face's LlamaConfig cannot describe this model: %s", why);
        return NULL;
    }
    int head_dim = cfg->kv_channels ? cfg->kv_channels : cfg->hidden_size / cfg->num_attention_heads;
    cJSON *r = cJSON_CreateObject(), *arch = cJSON_CreateArray(), *rope = cJSON_CreateObject();
    char *out = NULL;
    if (!r || !arch || !rope) {
        cJSON_Delete(arch), cJSON_Delete(rope);
        goto out;
    }
    cJSON_AddItemToArray(arch, cJSON_CreateString("LlamaForCausalLM"));
    cJSON_AddItemToObject(r, "architectures", arch);
    cJSON_AddStringToObject(r, "model_type", "llama");
    cJSON_AddNumberToObject(r, "hidden_size", cfg->hidden_size);
    cJSON_AddNumberToObject(r, "intermediate_size", cfg->ffn_hidden_size);
    cJSON_AddNumberToObject(r, "num_hidden_layers", cfg->num_layers);
    cJSON_AddNumberToObject(r, "num_attention_heads", cfg->num_attention_heads);
    cJSON_AddNumberToObject(r, "num_key_value_heads", cfg->num_query_groups);
    cJSON_AddNumberToObject(r, "head_dim", head_dim);
    cJSON_AddNumberToObject(r, "rms_norm_eps", cfg->norm_epsilon);
    /* 4.x reads the top-level rope_theta, 5.x rope_parameters: both, equal */
    cJSON_AddNumberToObject(r, "rope_theta", cfg->rotary_base);
    cJSON_AddNumberToObject(rope, "rope_theta", cfg->rotary_base);
    cJSON_AddStringToObject(rope, "rope_type", "default");
    cJSON_AddItemToObject(r, "rope_parameters", rope);
    cJSON_AddNumberToObject(r, "vocab_size", cfg->vocab_size);
    cJSON_AddNumberToObject(r, "max_position_embeddings", cfg->max_position_embeddings);
    cJSON_AddBoolToObject(r, "tie_word_embeddings", 0);
    /* Megatron's linear biases are transformers' attention_bias (q, k, v, o) and mlp_bias (gate, up, down) */
    cJSON_AddBoolToObject(r, "attention_bias", !cfg->disable_bias_linear);
    cJSON_AddBoolToObject(r, "mlp_bias", !cfg->disable_bias_linear);
    cJSON_AddStringToObject(r, "hidden_act", "silu");
    cJSON_AddNumberToObject(r, "initializer_range", cfg->init_method_std);
    cJSON_AddStringToObject(r, "torch_dtype", "float32"); /* 4.x */
    cJSON_AddStringToObject(r, "dtype", "float32");       /* 5.x */
    out = cJSON_Print(r);
out:
    cJSON_Delete(r);
    if (!out) tr_errf(err, errlen, "out of host memory writing config.json");
    return out;
}

/* One HF tensor: a slice of a parameter. */
typedef struct hf_tensor {
    char name[LLAMA_NAME_LEN + 16];
    int ndim;
    int64_t shape[2];
    const float *data;
    uint64_t bytes;
} hf_tensor;

static int hf_tensors(const llama_model *m, const float *host, hf_tensor **out) {
    hf_tensor *t = calloc((size_t)m->nparams * 2, sizeof *t);
    if (!t) return -1;
    int n = 0;
    for (int i = 0; i < m->nparams; i++) {
        const llama_param *p = &m->params_tab[i];
        char half_name[sizeof t->name];
        const bool fused = llama_hf_fc1_half(p->name, 0, half_name, sizeof half_name);
        for (int half = 0; half < (fused ? 2 : 1); half++) {
            hf_tensor *h = &t[n++];
            h->ndim = p->ndim, h->shape[0] = p->shape[0], h->shape[1] = p->shape[1];
            h->data = host + p->offset;
            if (fused) { /* [gate; up] rows */
                h->shape[0] /= 2, h->data += half * (p->numel / 2);
                llama_hf_fc1_half(p->name, half, h->name, sizeof h->name);
            } else {
                snprintf(h->name, sizeof h->name, "%s", p->name);
                if (i == m->p_embed || i == m->p_head) h->shape[0] = m->dims.vocab; /* padding dropped */
            }
            h->bytes = (uint64_t)h->shape[0] * (uint64_t)(h->ndim > 1 ? h->shape[1] : 1) * 4;
        }
    }
    *out = t;
    return n;
}

static int write_file(const hf_tensor *t, int from, int to, const char *path, char *err, size_t errlen) {
    st_writer *w = st_writer_new();
    if (!w) return tr_errf(err, errlen, "out of host memory writing %s", path);
    int rc = 0;
    for (int i = from; i < to && !rc; i++)
        rc = st_writer_add(w, t[i].name, ST_F32, t[i].shape, t[i].ndim, t[i].data, err, errlen);
    if (!rc) rc = st_writer_write(w, path, err, errlen);
    st_writer_free(w);
    return rc;
}

static int remove_stale(const char *path, char *err, size_t errlen) {
    if (unlink(path) && errno != ENOENT) return ckpt_io_err("unlink", path, errno, err, errlen);
    return 0;
}

static int write_sharded(const hf_tensor *t, int n, const char *dir, uint64_t limit, char *err, size_t errlen) {
    int *first = malloc((size_t)(n + 1) * sizeof *first), nshards = 0;
    cJSON *idx = cJSON_CreateObject(), *meta = cJSON_CreateObject(), *map = cJSON_CreateObject();
    char path[CKPT_PATH_MAX], name[64];
    char *json = NULL;
    int rc = -1;
    if (!first || !idx || !meta || !map) {
        cJSON_Delete(meta), cJSON_Delete(map);
        meta = map = NULL;
        tr_errf(err, errlen, "out of host memory");
        goto out;
    }
    cJSON_AddItemToObject(idx, "metadata", meta), cJSON_AddItemToObject(idx, "weight_map", map);
    uint64_t total = 0, cur = 0;
    for (int i = 0; i < n; i++) { /* greedy, in model order, like transformers' splitter */
        if (i == 0 || (cur > 0 && cur + t[i].bytes > limit)) first[nshards++] = i, cur = 0;
        cur += t[i].bytes, total += t[i].bytes;
    }
    first[nshards] = n;
    cJSON_AddNumberToObject(meta, "total_size", (double)total);
    for (int s = 0; s < nshards; s++) {
        snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", s + 1, nshards);
        ckpt_pathf(path, sizeof path, "%s/%s", dir, name);
        if (write_file(t, first[s], first[s + 1], path, err, errlen)) goto out;
        for (int i = first[s]; i < first[s + 1]; i++) cJSON_AddStringToObject(map, t[i].name, name);
    }
    json = cJSON_Print(idx);
    ckpt_pathf(path, sizeof path, "%s/model.safetensors.index.json", dir);
    if (!json || ckpt_write_atomic(ckpt_io_posix(), path, dir, json, strlen(json), err, errlen)) goto out;
    ckpt_pathf(path, sizeof path, "%s/model.safetensors", dir);
    rc = remove_stale(path, err, errlen);
out:
    free(first), free(json);
    cJSON_Delete(idx);
    return rc;
}

/* Which file of an export NAME is: 0..2 config.json, the single file, the index; 3 a shard; -1 none. */
static const char *const export_names[3] = {"config.json", "model.safetensors", "model.safetensors.index.json"};
static int export_file(const char *name) {
    for (int k = 0; k < 3; k++)
        if (!strcmp(name, export_names[k])) return k;
    int a, b, end = 0;
    return sscanf(name, "model-%5d-of-%5d.safetensors%n", &a, &b, &end) == 2 && name[end] == '\0' ? 3 : -1;
}

/* 1: dir is absent or an empty directory; 0: it exists with files, none of an export; -1 with err:
 * not a directory, unreadable, or (without overwrite) holding an export, whose files are named. */
static int export_target(const char *dir, bool overwrite, char *err, size_t errlen) {
    struct stat st;
    bool link = lstat(dir, &st) == 0 && S_ISLNK(st.st_mode); /* filled where it points, not replaced */
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT) return 1;
        return ckpt_io_err("stat", dir, errno, err, errlen);
    }
    if (!S_ISDIR(st.st_mode))
        return tr_errf(err, errlen, "%s is not a directory; give --hf the directory to export into", dir);
    DIR *d = opendir(dir);
    if (!d) return ckpt_io_err("opendir", dir, errno, err, errlen);
    int entries = 0, has[4] = {0};
    for (struct dirent *e; (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        entries++;
        int k = export_file(e->d_name);
        if (k >= 0) has[k]++;
    }
    closedir(d);
    if ((has[0] || has[1] || has[2] || has[3]) && !overwrite) {
        char found[160] = "";
        size_t len = 0;
        for (int k = 0; k < 3; k++)
            if (has[k])
                len += (size_t)snprintf(found + len, sizeof found - len, "%s%s", len ? ", " : "", export_names[k]);
        if (has[3]) snprintf(found + len, sizeof found - len, "%s%d shards", len ? ", " : "", has[3]);
        return tr_errf(err, errlen,
                       "%s already holds a Hugging Face export (%s): pass --overwrite to replace its files, or give "
                       "another --hf",
                       dir, found);
    }
    return entries == 0 && !link;
}

int ckpt_hf_export_check(const char *dir, bool overwrite, char *err, size_t errlen) {
    return export_target(dir, overwrite, err, errlen) < 0 ? -1 : 0;
}

/* Removes the files of an export being built in tmp (a directory this export made) and tmp itself. */
static void remove_tmp_dir(const char *tmp) {
    DIR *d = opendir(tmp);
    char path[CKPT_PATH_MAX];
    for (struct dirent *e; d && (e = readdir(d));) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        ckpt_pathf(path, sizeof path, "%s/%s", tmp, e->d_name);
        unlink(path);
    }
    if (d) closedir(d);
    rmdir(tmp);
}

static int export_into(const llama_model *m, const char *config, const float *host, const char *dir,
                       uint64_t shard_bytes, char *err, size_t errlen);

int ckpt_hf_export(const llama_model *m, const tr_config *cfg, const float *host, const char *dir, uint64_t shard_bytes,
                   bool overwrite, char *err, size_t errlen) {
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: path too long", dir);
    int fresh = export_target(dir, overwrite, err, errlen);
    if (fresh < 0) return -1;
    char *config = ckpt_hf_config_json(cfg, err, errlen);
    if (!config) return -1;
    if (!fresh) { /* files of the user's beside it (a tokenizer), or --overwrite: each file replaced whole */
        int rc = export_into(m, config, host, dir, shard_bytes, err, errlen);
        free(config);
        return rc;
    }
    /* a new export appears whole or not at all: built in DIR.tmp.PID, renamed to DIR (an empty DIR
     * is replaced by the rename) */
    char tmp[CKPT_PATH_MAX];
    ckpt_pathf(tmp, sizeof tmp, "%s.tmp.%ld", dir, (long)getpid());
    int rc = mkdir(tmp, 0755) ? ckpt_io_err("mkdir", tmp, errno, err, errlen) : 0;
    if (!rc) rc = export_into(m, config, host, tmp, shard_bytes, err, errlen);
    if (!rc && rename(tmp, dir))
        rc = tr_errf(err, errlen, "%s: cannot rename %s to it: %s (created or filled meanwhile?)", dir, tmp,
                     strerror(errno));
    if (rc) remove_tmp_dir(tmp);
    free(config);
    return rc;
}

static int export_into(const llama_model *m, const char *config, const float *host, const char *dir,
                       uint64_t shard_bytes, char *err, size_t errlen) {
    hf_tensor *t = NULL;
    int n = hf_tensors(m, host, &t), rc = n < 0 ? tr_errf(err, errlen, "out of host memory") : 0;
    uint64_t total = 0;
    for (int i = 0; i < n; i++) total += t[i].bytes;
    char path[CKPT_PATH_MAX];
    if (!rc && (shard_bytes == 0 || total <= shard_bytes)) {
        ckpt_pathf(path, sizeof path, "%s/model.safetensors", dir);
        rc = write_file(t, 0, n, path, err, errlen);
        ckpt_pathf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        if (!rc) rc = remove_stale(path, err, errlen);
    } else if (!rc) {
        rc = write_sharded(t, n, dir, shard_bytes, err, errlen);
    }
    ckpt_pathf(path, sizeof path, "%s/config.json", dir);
    if (!rc) rc = ckpt_write_atomic(ckpt_io_posix(), path, dir, config, strlen(config), err, errlen);
    free(t);
    return rc;
}
