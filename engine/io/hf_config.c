/* Hugging Face LlamaConfig (config.json) -> hf_llama_config, strictly: anything twinrun's Llama
 * cannot reproduce exactly is an error rather than a silently different model. */
#include "io/hf_config.h"
#include "core/safe_file.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

#define HF_MAX_CONFIG_BYTES (16u << 20)

static const char *json_type_name(const cJSON *v) {
    if (cJSON_IsNull(v)) return "null";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsArray(v)) return "a list";
    if (cJSON_IsObject(v)) return "an object";
    return "an invalid value";
}

/* obj[key]; NULL when absent or null (transformers treats null as "use the default"). A key given
 * twice is an error: Python's json keeps the last, cJSON the first, so they would disagree. */
static int member(const cJSON *obj, const char *key, const cJSON **out, const char *where, char *err, size_t errlen) {
    const cJSON *found = NULL;
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (c->string && strcmp(c->string, key) == 0) {
            if (found) return tr_errf(err, errlen, "%s: \"%s\" appears twice; keep one", where, key);
            found = c;
        }
    }
    *out = cJSON_IsNull(found) ? NULL : found;
    return 0;
}

/* A positive integer that fits int. present_out (may be NULL) says whether the key was there. */
static int get_pos_int(const cJSON *obj, const char *key, bool required, int *out, bool *present_out, const char *where,
                       char *err, size_t errlen) {
    const cJSON *v = NULL;
    if (member(obj, key, &v, where, err, errlen)) return -1;
    if (present_out) *present_out = v != NULL;
    if (!v) {
        if (required)
            return tr_errf(err, errlen, "%s: required key \"%s\" is missing; is this a Llama config.json?", where, key);
        return 0;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble))
        return tr_errf(err, errlen, "%s: \"%s\" must be an integer, got %s", where, key,
                       cJSON_IsNumber(v) ? "a fraction" : json_type_name(v));
    if (v->valuedouble <= 0 || v->valuedouble > 2147483647.0)
        return tr_errf(err, errlen, "%s: \"%s\" is %.15g; it must be a positive integer (at most 2147483647)", where,
                       key, v->valuedouble);
    *out = (int)v->valuedouble;
    return 0;
}

/* A positive finite number. */
static int get_pos_double(const cJSON *obj, const char *key, bool required, double *out, bool *present_out,
                          const char *where, char *err, size_t errlen) {
    const cJSON *v = NULL;
    if (member(obj, key, &v, where, err, errlen)) return -1;
    if (present_out) *present_out = v != NULL;
    if (!v) {
        if (required) return tr_errf(err, errlen, "%s: required key \"%s\" is missing", where, key);
        return 0;
    }
    if (!cJSON_IsNumber(v))
        return tr_errf(err, errlen, "%s: \"%s\" must be a number, got %s", where, key, json_type_name(v));
    if (!(v->valuedouble > 0) || !isfinite(v->valuedouble))
        return tr_errf(err, errlen, "%s: \"%s\" is %.15g; it must be a positive number", where, key, v->valuedouble);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *obj, const char *key, bool dflt, bool *out, const char *where, char *err,
                    size_t errlen) {
    const cJSON *v = NULL;
    if (member(obj, key, &v, where, err, errlen)) return -1;
    if (!v) {
        *out = dflt;
        return 0;
    }
    if (!cJSON_IsBool(v))
        return tr_errf(err, errlen, "%s: \"%s\" must be true or false, got %s", where, key, json_type_name(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

/* NULL when absent; -1 when present but not a string. */
static int get_string(const cJSON *obj, const char *key, const char **out, const char *where, char *err,
                      size_t errlen) {
    const cJSON *v = NULL;
    if (member(obj, key, &v, where, err, errlen)) return -1;
    *out = NULL;
    if (!v) return 0;
    if (!cJSON_IsString(v))
        return tr_errf(err, errlen, "%s: \"%s\" must be a string, got %s", where, key, json_type_name(v));
    *out = v->valuestring;
    return 0;
}

/* One RoPE dictionary: 4.x rope_scaling or 5.x rope_parameters. */
typedef struct hf_rope {
    bool present;
    const char *key; /* "rope_scaling" or "rope_parameters", for messages */
    bool has_theta;
    double theta;
    bool llama3;
    double factor, low, high;
    int original_max;
} hf_rope;

static int parse_rope(const cJSON *root, const char *key, hf_rope *r, const char *path, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    r->key = key;
    const cJSON *d = NULL;
    if (member(root, key, &d, path, err, errlen)) return -1;
    if (!d) return 0;
    if (!cJSON_IsObject(d))
        return tr_errf(err, errlen, "%s: \"%s\" must be an object like {\"rope_type\": \"llama3\", ...}, got %s", path,
                       key, json_type_name(d));
    if (!d->child) return 0; /* {} means "no scaling" to transformers */
    char where[1100];
    snprintf(where, sizeof where, "%s: %s", path, key);
    r->present = true;
    const char *type = NULL, *legacy_type = NULL;
    if (get_string(d, "rope_type", &type, where, err, errlen) ||
        get_string(d, "type", &legacy_type, where, err, errlen))
        return -1;
    if (type && legacy_type && strcmp(type, legacy_type) != 0)
        return tr_errf(err, errlen, "%s: \"rope_type\" is \"%s\" but the legacy \"type\" says \"%s\"; keep one", where,
                       type, legacy_type);
    if (!type) type = legacy_type ? legacy_type : "default";
    if (get_pos_double(d, "rope_theta", false, &r->theta, &r->has_theta, where, err, errlen)) return -1;
    if (strcmp(type, "default") == 0) return 0;
    if (strcmp(type, "llama3") == 0) {
        r->llama3 = true;
        if (get_pos_double(d, "factor", true, &r->factor, NULL, where, err, errlen) ||
            get_pos_double(d, "low_freq_factor", true, &r->low, NULL, where, err, errlen) ||
            get_pos_double(d, "high_freq_factor", true, &r->high, NULL, where, err, errlen) ||
            get_pos_int(d, "original_max_position_embeddings", true, &r->original_max, NULL, where, err, errlen))
            return -1;
        if (r->factor < 1.0)
            return tr_errf(err, errlen, "%s: llama3 \"factor\" is %g; it must be at least 1 (Llama 3.1 uses 8)", where,
                           r->factor);
        if (!(r->high > r->low))
            return tr_errf(err, errlen,
                           "%s: llama3 \"high_freq_factor\" (%g) must be greater than \"low_freq_factor\" "
                           "(%g); Llama 3.1 uses 4 and 1",
                           where, r->high, r->low);
        return 0;
    }
    static const char *const known[] = {"linear", "dynamic", "yarn", "longrope"};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(type, known[i]) == 0)
            return tr_errf(err, errlen,
                           "%s: rope_type \"%s\" is not supported; twinrun implements \"default\" and "
                           "\"llama3\"",
                           where, type);
    return tr_errf(err, errlen,
                   "%s: unknown rope_type \"%.40s\"; transformers knows default, linear, dynamic, yarn, "
                   "longrope and llama3, and twinrun implements default and llama3",
                   where, type);
}

static bool rope_same(const hf_rope *a, const hf_rope *b) {
    if (a->llama3 != b->llama3) return false;
    if (a->has_theta && b->has_theta && a->theta != b->theta) return false;
    return !a->llama3 ||
           (a->factor == b->factor && a->low == b->low && a->high == b->high && a->original_max == b->original_max);
}

/* transformers 5 takes rope_scaling over rope_parameters, and rope_parameters.rope_theta over the
 * top-level rope_theta; here any disagreement between them is an error instead. */
static int parse_rope_all(const cJSON *root, hf_llama_config *out, const char *path, char *err, size_t errlen) {
    hf_rope scaling, params;
    if (parse_rope(root, "rope_scaling", &scaling, path, err, errlen) ||
        parse_rope(root, "rope_parameters", &params, path, err, errlen))
        return -1;
    if (scaling.present && params.present && !rope_same(&scaling, &params))
        return tr_errf(err, errlen,
                       "%s: \"rope_scaling\" (transformers 4.x) and \"rope_parameters\" (5.x) disagree; "
                       "keep one of them",
                       path);
    const hf_rope *r = scaling.present ? &scaling : &params;
    double top_theta = 0;
    bool has_top = false;
    if (get_pos_double(root, "rope_theta", false, &top_theta, &has_top, path, err, errlen)) return -1;
    const hf_rope *with_theta = r->has_theta ? r : (scaling.has_theta ? &scaling : params.has_theta ? &params : NULL);
    if (with_theta && has_top && with_theta->theta != top_theta)
        return tr_errf(err, errlen, "%s: \"rope_theta\" is %.15g but \"%s\".rope_theta is %.15g; keep one", path,
                       top_theta, with_theta->key, with_theta->theta);
    if (!with_theta && !has_top)
        return tr_errf(err, errlen,
                       "%s: no RoPE base: neither \"rope_theta\" (transformers 4.x) nor "
                       "\"rope_parameters\": {\"rope_theta\": ...} (5.x) is set; Llama 3 uses 500000.0",
                       path);
    out->rope_theta = with_theta ? with_theta->theta : top_theta;
    out->has_rope_scaling = r->llama3;
    if (r->llama3) {
        out->rope_factor = r->factor;
        out->rope_low_freq_factor = r->low;
        out->rope_high_freq_factor = r->high;
        out->rope_original_max_position_embeddings = r->original_max;
    }
    return 0;
}

static int parse_arch(const cJSON *root, hf_llama_config *out, const char *path, char *err, size_t errlen) {
    const char *model_type = NULL, *act = NULL;
    if (get_string(root, "model_type", &model_type, path, err, errlen)) return -1;
    if (!model_type)
        return tr_errf(err, errlen, "%s: required key \"model_type\" is missing; twinrun imports \"llama\" configs",
                       path);
    if (strcmp(model_type, "llama") != 0)
        return tr_errf(err, errlen, "%s: model_type is \"%.40s\"; twinrun imports only \"llama\" (LlamaForCausalLM)",
                       path, model_type);
    if (get_string(root, "hidden_act", &act, path, err, errlen)) return -1;
    if (act && strcmp(act, "silu") != 0)
        return tr_errf(err, errlen,
                       "%s: hidden_act is \"%.40s\"; twinrun's Llama MLP is SwiGLU, so it must be "
                       "\"silu\"",
                       path, act);
    if (get_bool(root, "attention_bias", false, &out->attention_bias, path, err, errlen) ||
        get_bool(root, "mlp_bias", false, &out->mlp_bias, path, err, errlen))
        return -1;
    /* Megatron's biases are all (--add-bias-linear) or none; --add-qkv-bias lacks o_proj's */
    if (out->attention_bias != out->mlp_bias)
        return tr_errf(err, errlen,
                       "%s: attention_bias is %s but mlp_bias is %s; Megatron (and twinrun) has biases "
                       "in every linear layer or in none (--add-qkv-bias covers q/k/v without o_proj), so set both "
                       "alike",
                       path, out->attention_bias ? "true" : "false", out->mlp_bias ? "true" : "false");
    double prf = 1.0;
    if (get_pos_double(root, "partial_rotary_factor", false, &prf, NULL, path, err, errlen)) return -1;
    if (prf != 1.0)
        return tr_errf(err, errlen, "%s: partial_rotary_factor is %g; Llama rotates whole heads, so it must be 1", path,
                       prf);
    return 0;
}

static int parse_shape(const cJSON *root, hf_llama_config *o, const char *path, char *err, size_t errlen) {
    bool has_kv = false, has_hd = false;
    if (get_pos_int(root, "hidden_size", true, &o->hidden_size, NULL, path, err, errlen) ||
        get_pos_int(root, "intermediate_size", true, &o->intermediate_size, NULL, path, err, errlen) ||
        get_pos_int(root, "num_hidden_layers", true, &o->num_hidden_layers, NULL, path, err, errlen) ||
        get_pos_int(root, "num_attention_heads", true, &o->num_attention_heads, NULL, path, err, errlen) ||
        get_pos_int(root, "num_key_value_heads", false, &o->num_key_value_heads, &has_kv, path, err, errlen) ||
        get_pos_int(root, "head_dim", false, &o->head_dim, &has_hd, path, err, errlen) ||
        get_pos_int(root, "vocab_size", true, &o->vocab_size, NULL, path, err, errlen) ||
        get_pos_int(root, "max_position_embeddings", true, &o->max_position_embeddings, NULL, path, err, errlen) ||
        get_pos_double(root, "rms_norm_eps", true, &o->rms_norm_eps, NULL, path, err, errlen) ||
        get_bool(root, "tie_word_embeddings", false, &o->tie_word_embeddings, path, err, errlen))
        return -1;
    if (!has_kv) o->num_key_value_heads = o->num_attention_heads;
    if (!has_hd) {
        if (o->hidden_size % o->num_attention_heads != 0)
            return tr_errf(err, errlen,
                           "%s: hidden_size %d is not divisible by num_attention_heads %d and there is no "
                           "head_dim; fix the sizes or give head_dim",
                           path, o->hidden_size, o->num_attention_heads);
        o->head_dim = o->hidden_size / o->num_attention_heads;
    }
    if (o->num_attention_heads % o->num_key_value_heads != 0)
        return tr_errf(err, errlen,
                       "%s: num_attention_heads %d is not divisible by num_key_value_heads %d; each KV "
                       "head must serve a whole group of query heads",
                       path, o->num_attention_heads, o->num_key_value_heads);
    return 0;
}

/* Where in the text a JSON syntax error sits, as "byte B (line L, column C)". */
static void describe_offset(char *out, size_t outlen, const char *text, size_t off) {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < off; i++) {
        if (text[i] == '\n') line++, col = 1;
        else col++;
    }
    snprintf(out, outlen, "byte %zu (line %zu, column %zu)", off, line, col);
}

int hf_config_parse(hf_llama_config *out, const char *json, size_t len, const char *path_for_messages, char *err,
                    size_t errlen) {
    const char *path = path_for_messages && path_for_messages[0] ? path_for_messages : "<config.json>";
    hf_llama_config cfg;
    memset(&cfg, 0, sizeof cfg);
    /* a terminated copy: cJSON then never reads past the text, whatever its version */
    char *text = malloc(len + 1);
    if (!text) return tr_errf(err, errlen, "%s: out of memory", path);
    if (len) memcpy(text, json, len);
    text[len] = '\0';
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    int rc = 0;
    if (!root) {
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        char at[96];
        describe_offset(at, sizeof at, text, off);
        rc = tr_errf(err, errlen, "%s: malformed JSON at %s near \"%.20s\"; fix the file (a missing comma or quote?)",
                     path, at, text + off);
    } else if (!cJSON_IsObject(root)) {
        rc = tr_errf(err, errlen, "%s: expected a JSON object {\"model_type\": \"llama\", ...}, got %s", path,
                     json_type_name(root));
    } else if (parse_arch(root, &cfg, path, err, errlen) || parse_shape(root, &cfg, path, err, errlen) ||
               parse_rope_all(root, &cfg, path, err, errlen)) {
        rc = -1;
    }
    cJSON_Delete(root);
    free(text);
    if (rc == 0) *out = cfg;
    return rc;
}

int hf_config_load(hf_llama_config *out, const char *path, char *err, size_t errlen) {
    char why[256];
    FILE *fp = tr_safe_fopen_regular(path, why, sizeof why);
    if (!fp) return tr_errf(err, errlen, "%s: cannot open: %s", path, why);
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int rc = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= HF_MAX_CONFIG_BYTES) {
                rc = tr_errf(err, errlen, "%s: larger than %u bytes; that is not a config.json", path,
                             HF_MAX_CONFIG_BYTES);
                break;
            }
            cap = cap ? cap * 2 : 16384;
            char *nb = realloc(buf, cap);
            if (!nb) {
                rc = tr_errf(err, errlen, "%s: out of memory", path);
                break;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, fp);
        len += r;
        if (r == 0) {
            if (ferror(fp)) rc = tr_errf(err, errlen, "%s: read failed: %s", path, strerror(errno));
            break;
        }
    }
    fclose(fp);
    if (rc == 0) rc = hf_config_parse(out, buf, len, path, err, errlen);
    free(buf);
    return rc;
}
