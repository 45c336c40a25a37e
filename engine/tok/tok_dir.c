/* Opening a tokenizer as Megatron's --tokenizer-type/--tokenizer-model name it. HuggingFaceTokenizer:
 * a directory with tokenizer.json and tokenizer_config.json (what AutoTokenizer.from_pretrained reads;
 * bos/eos come from the config's bos_token/eos_token, or special_tokens_map.json's). Every way the
 * files can be wrong is named with its fix. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/safe_file.h"
#include "tok/tok_dir.h"
#include "twinrun/err.h"

#define HF_FIX                                                                                                         \
    "a Hugging Face tokenizer directory holds tokenizer.json and tokenizer_config.json "                               \
    "(tokenizer.save_pretrained(DIR) writes both)"

/* The whole file, NUL-terminated; NULL with err (missing, unreadable, empty). */
static char *slurp(const char *path, size_t *len, char *err, size_t errlen) {
    char why[256];
    FILE *f = tr_safe_fopen_regular(path, why, sizeof why);
    if (!f) {
        tr_errf(err, errlen, "%s: %s; %s", path, why, HF_FIX);
        return NULL;
    }
    char *s = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (n + 65536 + 1 > cap) {
            char *g = realloc(s, cap = 2 * cap + 65536 + 1);
            if (!g) break;
            s = g;
        }
        got = fread(s + n, 1, cap - n - 1, f);
        n += got;
    } while (got > 0);
    int bad = ferror(f) || !s;
    fclose(f);
    if (bad || n == 0) {
        tr_errf(err, errlen, bad ? "%s: read failed" : "%s is empty (0 bytes); %s", path, HF_FIX);
        free(s);
        return NULL;
    }
    s[n] = 0;
    *len = n;
    return s;
}

/* bos_token/eos_token: a string, or an AddedToken object {"content": ...}. */
static const char *token_name(const cJSON *cfg, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int special(const tr_tok *t, const cJSON *a, const cJSON *b, const char *key, const char *file, int32_t *id,
                   char *err, size_t errlen) {
    const char *name = token_name(a, key);
    if (!name) name = token_name(b, key);
    *id = -1;
    if (!name) return 0;
    *id = tr_tok_token_id(t, name);
    if (*id < 0) return tr_errf(err, errlen, "%s: %s '%s' is not a token of tokenizer.json", file, key, name);
    return 0;
}

static cJSON *read_json(const char *path, bool required, char *err, size_t errlen, int *rc) {
    size_t len;
    struct stat st;
    *rc = 0;
    if (!required && stat(path, &st) != 0) return NULL;
    char *s = slurp(path, &len, err, errlen);
    cJSON *j = s ? cJSON_ParseWithLength(s, len) : NULL;
    free(s);
    if (s && !cJSON_IsObject(j)) tr_errf(err, errlen, "%s: not a JSON object; %s", path, HF_FIX);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        *rc = -1;
        return NULL;
    }
    return j;
}

static tr_tok *open_hf(const char *dir, tr_tok_specials *sp, char *err, size_t errlen) {
    char path[4200];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    size_t len;
    char *json = slurp(path, &len, err, errlen);
    if (!json) return NULL;
    tr_tok *t = tr_tok_from_json(json, len, path, err, errlen);
    free(json);
    if (!t) return NULL;
    int rc;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    cJSON *cfg = read_json(path, true, err, errlen, &rc);
    char map_path[4200];
    snprintf(map_path, sizeof map_path, "%s/special_tokens_map.json", dir);
    cJSON *map = rc ? NULL : read_json(map_path, false, err, errlen, &rc);
    if (!rc) rc = special(t, cfg, map, "bos_token", path, &sp->bos, err, errlen);
    if (!rc) rc = special(t, cfg, map, "eos_token", path, &sp->eos, err, errlen);
    cJSON_Delete(cfg);
    cJSON_Delete(map);
    if (rc) {
        tr_tok_free(t);
        return NULL;
    }
    return t;
}

/* TikTokenizer: model is Megatron's rank file (a .json, as CustomTikTokenizer asserts); bos and eos
 * are <s> and </s>, where the special tokens put them. */
static tr_tok *open_tiktoken(const char *path, const tr_tok_tiktoken *tk, tr_tok_specials *sp, char *err,
                             size_t errlen) {
    size_t n = strlen(path), len;
    if (n < 5 || strcmp(path + n - 5, ".json")) {
        tr_errf(err, errlen,
                "--tokenizer-model %s: TikTokenizer reads Megatron's rank file, a .json list of {\"rank\", "
                "\"token_bytes\", \"token_str\"} (Megatron refuses any other name)",
                path);
        return NULL;
    }
    char *json = slurp(path, &len, err, errlen);
    if (!json) return NULL;
    static const tr_tok_tiktoken none = {.num_special = 1000};
    tr_tok *t = tr_tok_from_tiktoken(json, len, path, tk ? tk : &none, err, errlen);
    free(json);
    if (t) {
        sp->bos = tr_tok_token_id(t, "<s>");
        sp->eos = tr_tok_token_id(t, "</s>");
    }
    return t;
}

tr_tok *tr_tok_open(const char *type, const char *model, const tr_tok_tiktoken *tk, tr_tok_specials *sp, char *err,
                    size_t errlen) {
    sp->bos = sp->eos = -1;
    bool tiktoken = !strcmp(type, "TikTokenizer");
    if (strcmp(type, "HuggingFaceTokenizer") && !tiktoken) {
        tr_errf(err, errlen,
                "--tokenizer-type %s: twinrun reads HuggingFaceTokenizer (tokenizer.json) and TikTokenizer (Megatron's "
                "rank file) tokenizers",
                type);
        return NULL;
    }
    if (!model || !model[0]) {
        tr_errf(err, errlen, "--tokenizer-type %s needs --tokenizer-model %s", type,
                tiktoken ? "FILE.json (Megatron's TikTokenizer rank file)" : "DIR; " HF_FIX);
        return NULL;
    }
    struct stat st;
    if (stat(model, &st) != 0) {
        tr_errf(err, errlen,
                "--tokenizer-model %s: %s; give the tokenizer's %s as it is on this machine (twinrun downloads "
                "nothing)",
                model, strerror(errno), tiktoken ? "rank file" : "directory");
        return NULL;
    }
    if (tiktoken) return open_tiktoken(model, tk, sp, err, errlen);
    if (!S_ISDIR(st.st_mode)) {
        tr_errf(err, errlen, "--tokenizer-model %s is a file; give the directory that holds it (%s)", model, HF_FIX);
        return NULL;
    }
    return open_hf(model, sp, err, errlen);
}
