/* A Hugging Face model directory: model.safetensors, or model.safetensors.index.json and the
 * shards its weight_map names, cross-checked so that every name maps to exactly one tensor. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/safe_file.h"
#include "io/safetensors.h"
#include "twinrun/err.h"

#define ST_SINGLE_NAME "model.safetensors"
#define ST_INDEX_NAME "model.safetensors.index.json"
#define ST_MAX_INDEX_BYTES (256u << 20) /* a 405B model's index is a few hundred KB */

struct st_model_entry {
    const char *name; /* the tensor's own name, owned by its st_file */
    int file;
    const st_tensor *t;
};

static bool is_file(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

static int join(char *out, size_t outlen, const char *dir, const char *name, char *err, size_t errlen) {
    int n = snprintf(out, outlen, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= outlen)
        return tr_errf(err, errlen, "%s/%s: path longer than %zu bytes; use a shorter directory", dir, name,
                       outlen - 1);
    return 0;
}

static char *slurp(const char *path, size_t *len_out, char *err, size_t errlen) {
    char why[256];
    FILE *fp = tr_safe_fopen_regular(path, why, sizeof why);
    if (!fp) {
        tr_errf(err, errlen, "%s: cannot open: %s", path, why);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= ST_MAX_INDEX_BYTES) {
                tr_errf(err, errlen,
                        "%s: larger than %u bytes, too big for a safetensors index; is it the right "
                        "file?",
                        path, ST_MAX_INDEX_BYTES);
                goto fail;
            }
            cap = cap ? cap * 2 : 65536;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                tr_errf(err, errlen, "%s: out of memory", path);
                goto fail;
            }
            buf = nb;
        }
        size_t r = fread(buf + len, 1, cap - len, fp);
        len += r;
        if (r == 0) break;
    }
    if (ferror(fp)) {
        tr_errf(err, errlen, "%s: read failed: %s", path, strerror(errno));
        goto fail;
    }
    fclose(fp);
    buf[len] = '\0';
    *len_out = len;
    return buf;
fail:
    free(buf);
    fclose(fp);
    return NULL;
}

/* A shard name from the index must stay inside the model directory. */
static int check_shard_name(const char *index_path, const char *tensor, const char *file, char *err, size_t errlen) {
    if (!file[0] || strchr(file, '/') || strchr(file, '\\') || strstr(file, ".."))
        return tr_errf(err, errlen,
                       "%s: weight_map puts '%s' in \"%s\", which is not a plain file name in the model "
                       "directory (no '/', '\\' or '..' allowed); fix the index",
                       index_path, tensor, file);
    return 0;
}

static int add_file(st_model *m, const char *dir, const char *name, char *err, size_t errlen) {
    char path[1024];
    if (join(path, sizeof path, dir, name, err, errlen) != 0) return -1;
    if (!is_file(path))
        return tr_errf(err, errlen,
                       "%s: shard named by %s/" ST_INDEX_NAME " does not exist; the download is "
                       "incomplete, fetch the missing shard",
                       path, dir);
    st_file *nf = realloc(m->files, ((size_t)m->nfiles + 1) * sizeof *nf);
    if (!nf) return tr_errf(err, errlen, "%s: out of memory", path);
    m->files = nf;
    if (st_open(&m->files[m->nfiles], path, err, errlen) != 0) return -1;
    m->nfiles++;
    return 0;
}

static int find_file(const st_model *m, const char *dir, const char *name) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    for (int i = 0; i < m->nfiles; i++)
        if (strcmp(m->files[i].path, path) == 0) return i;
    return -1;
}

/* One weight_map line: tensor name -> shard file (both owned by the parsed JSON). */
typedef struct map_entry {
    const char *name, *shard;
    int file; /* index into m->files */
} map_entry;

static int cmp_map_entry(const void *a, const void *b) {
    return strcmp(((const map_entry *)a)->name, ((const map_entry *)b)->name);
}

static int open_sharded(st_model *m, const char *dir, const char *index_path, char *err, size_t errlen) {
    map_entry *map = NULL;
    size_t len;
    char *text = slurp(index_path, &len, err, errlen);
    if (!text) return -1;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(text, len + 1, &end, 1);
    int rc = 0;
    if (!root) {
        size_t off = end && end >= text && end <= text + len ? (size_t)(end - text) : len;
        rc = tr_errf(err, errlen, "%s: malformed JSON at byte %zu near \"%.20s\"; fix or re-download the index",
                     index_path, off, text + off);
        goto out;
    }
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm)) {
        rc = tr_errf(err, errlen,
                     "%s: expected {\"metadata\": {...}, \"weight_map\": {tensor: shard file}}; "
                     "\"weight_map\" is %s",
                     index_path, wm ? "not an object" : "missing");
        goto out;
    }
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(root, "metadata");
    const cJSON *total = cJSON_IsObject(meta) ? cJSON_GetObjectItemCaseSensitive(meta, "total_size") : NULL;
    if ((meta && !cJSON_IsObject(meta) && !cJSON_IsNull(meta)) ||
        (total && !cJSON_IsNull(total) && (!cJSON_IsNumber(total) || total->valuedouble < 0))) {
        rc =
            tr_errf(err, errlen, "%s: \"metadata\" must be an object whose \"total_size\" is a byte count", index_path);
        goto out;
    }
    /* shards in order of first mention; the map sorted by name, so that checks stay n log n even
     * for a hostile index */
    int n = cJSON_GetArraySize(wm), k = 0;
    map = calloc((size_t)n + 1, sizeof *map);
    if (!map) {
        rc = tr_errf(err, errlen, "%s: out of memory", index_path);
        goto out;
    }
    for (const cJSON *c = wm->child; c; c = c->next, k++) {
        if (!cJSON_IsString(c)) {
            rc = tr_errf(err, errlen, "%s: weight_map entry '%s' is not a file name string; fix the index", index_path,
                         c->string);
            goto out;
        }
        if ((rc = check_shard_name(index_path, c->string, c->valuestring, err, errlen)) != 0) goto out;
        int fi = find_file(m, dir, c->valuestring);
        if (fi < 0) {
            if ((rc = add_file(m, dir, c->valuestring, err, errlen)) != 0) goto out;
            fi = m->nfiles - 1;
        }
        map[k] = (map_entry){c->string, c->valuestring, fi};
    }
    qsort(map, (size_t)n, sizeof *map, cmp_map_entry);
    for (k = 0; k < n; k++) {
        if (k > 0 && strcmp(map[k].name, map[k - 1].name) == 0) {
            rc = tr_errf(err, errlen, "%s: weight_map lists '%s' twice; fix the index", index_path, map[k].name);
            goto out;
        }
        if (!st_find(&m->files[map[k].file], map[k].name)) {
            rc = tr_errf(err, errlen,
                         "%s: weight_map says '%s' is in %s, but that shard has no such tensor; the index "
                         "and shards come from different exports, re-download them together",
                         index_path, map[k].name, map[k].shard);
            goto out;
        }
    }
    for (int fi = 0; fi < m->nfiles; fi++) {
        const st_file *f = &m->files[fi];
        for (int i = 0; i < f->n; i++) {
            map_entry key = {f->tensors[i].name, NULL, 0};
            const map_entry *where = bsearch(&key, map, (size_t)n, sizeof *map, cmp_map_entry);
            if (!where || where->file != fi) {
                rc = tr_errf(err, errlen,
                             "%s: holds tensor '%s', which %s does not assign to it (%s); the index and "
                             "shards come from different exports, re-download them together",
                             f->path, f->tensors[i].name, index_path, where ? where->shard : "not listed at all");
                goto out;
            }
        }
    }
out:
    free(map);
    cJSON_Delete(root);
    free(text);
    return rc;
}

static int cmp_entry(const void *a, const void *b) {
    return strcmp(((const st_model_entry *)a)->name, ((const st_model_entry *)b)->name);
}

static int build_entries(st_model *m, char *err, size_t errlen) {
    size_t total = 0;
    for (int i = 0; i < m->nfiles; i++) total += (size_t)m->files[i].n;
    m->entries = calloc(total + 1, sizeof *m->entries);
    m->read = calloc(total + 1, sizeof *m->read);
    if (!m->entries || !m->read) return tr_errf(err, errlen, "out of memory indexing %zu tensors", total);
    for (int fi = 0; fi < m->nfiles; fi++) {
        for (int i = 0; i < m->files[fi].n; i++) {
            st_model_entry *e = &m->entries[m->n++];
            e->name = m->files[fi].tensors[i].name;
            e->file = fi;
            e->t = &m->files[fi].tensors[i];
        }
    }
    qsort(m->entries, (size_t)m->n, sizeof *m->entries, cmp_entry);
    for (int i = 1; i < m->n; i++)
        if (strcmp(m->entries[i].name, m->entries[i - 1].name) == 0)
            return tr_errf(err, errlen, "tensor '%s' is in both %s and %s; remove the stale shard", m->entries[i].name,
                           m->files[m->entries[i - 1].file].path, m->files[m->entries[i].file].path);
    return 0;
}

int st_model_open(st_model *m, const char *dir, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    char single[1024], index[1024];
    if (join(single, sizeof single, dir, ST_SINGLE_NAME, err, errlen) != 0 ||
        join(index, sizeof index, dir, ST_INDEX_NAME, err, errlen) != 0)
        return -1;
    int rc;
    /* transformers prefers the single file when both are present; so do we */
    if (is_file(single)) rc = add_file(m, dir, ST_SINGLE_NAME, err, errlen);
    else if (is_file(index)) rc = open_sharded(m, dir, index, err, errlen);
    else
        rc = tr_errf(err, errlen,
                     "%s: neither " ST_SINGLE_NAME " nor " ST_INDEX_NAME " is there; point at a Hugging "
                     "Face model directory (the one holding config.json and the weights)",
                     dir);
    if (rc == 0) rc = build_entries(m, err, errlen);
    if (rc != 0) st_model_close(m);
    return rc;
}

void st_model_close(st_model *m) {
    if (!m) return;
    for (int i = 0; i < m->nfiles; i++) st_close(&m->files[i]);
    free(m->files);
    free(m->entries);
    free(m->read);
    memset(m, 0, sizeof *m);
}

static int entry_index(const st_model *m, const char *name) {
    int lo = 0, hi = m->n - 1;
    while (lo <= hi) {
        int mid = lo + (hi - lo) / 2;
        int c = strcmp(name, m->entries[mid].name);
        if (c == 0) return mid;
        if (c < 0) hi = mid - 1;
        else lo = mid + 1;
    }
    return -1;
}

const st_tensor *st_model_find(const st_model *m, const char *name, const st_file **file_out) {
    int i = entry_index(m, name);
    if (i < 0) return NULL;
    if (file_out) *file_out = &m->files[m->entries[i].file];
    return m->entries[i].t;
}

static int entry_or_err(const st_model *m, const char *name, char *err, size_t errlen) {
    int i = entry_index(m, name);
    if (i < 0)
        tr_errf(err, errlen,
                "model has no tensor named '%s' (%d tensors in %d file%s, first %s); the checkpoint is "
                "for a different model or was saved with other names",
                name, m->n, m->nfiles, m->nfiles == 1 ? "" : "s", m->nfiles ? m->files[0].path : "none");
    return i;
}

int st_model_read_f32(const st_model *m, const char *name, float *dst, const int64_t *shape, int ndim, char *err,
                      size_t errlen) {
    int i = entry_or_err(m, name, err, errlen);
    if (i < 0) return -1;
    const st_model_entry *e = &m->entries[i];
    if (st_tensor_read_f32(&m->files[e->file], e->t, dst, shape, ndim, err, errlen) != 0) return -1;
    m->read[i] = true;
    return 0;
}

int st_model_count(const st_model *m) { return m->n; }

const char *st_model_name(const st_model *m, int i) { return i >= 0 && i < m->n ? m->entries[i].name : NULL; }

int st_model_unread(const st_model *m, const char **names, int max) {
    int k = 0;
    for (int i = 0; i < m->n; i++) {
        if (m->read[i]) continue;
        if (k < max) names[k] = m->entries[i].name;
        k++;
    }
    return k;
}
