#include "train/provenance.h"
#include "core/safe_file.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "core/hash.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

_Static_assert(TR_MAX_PATHS <= CKPT_PROV_MAX_PATHS && TR_PATH_LEN <= CKPT_PROV_PATH &&
                   sizeof(((tr_config *)0)->tokenizer_type) <= CKPT_PROV_STR,
               "the manifest holds every --data-path and the tokenizer as given");

/* Adds a file's name and bytes to h (h unchanged when it cannot be read). */
static uint64_t hash_file(uint64_t h, const char *path, const char *name) {
    FILE *f = tr_safe_fopen_regular(path, NULL, 0);
    if (!f) return h;
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) return fclose(f), h;
    h = tr_fnv1a(h ? h : TR_FNV_OFFSET, name, strlen(name) + 1);
    unsigned char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) h = tr_fnv1a(h, buf, n);
    fclose(f);
    return h;
}

uint64_t train_tokenizer_fingerprint(const tr_config *cfg) {
    if (!cfg->tokenizer_model[0] || !strcmp(cfg->tokenizer_type, "NullTokenizer")) return 0;
    struct stat st;
    if (stat(cfg->tokenizer_model, &st) != 0) return 0;
    if (!S_ISDIR(st.st_mode)) return hash_file(0, cfg->tokenizer_model, "");
    static const char *const names[] = {"tokenizer.json", "tokenizer.model", "tokenizer_config.json", "vocab.json",
                                        "merges.txt"};
    uint64_t h = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        char path[TR_PATH_LEN + 32];
        snprintf(path, sizeof path, "%s/%s", cfg->tokenizer_model, names[i]);
        h = hash_file(h, path, names[i]);
    }
    return h;
}

int train_provenance_of(const tr_config *cfg, uint64_t data_fp, ckpt_provenance *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    out->present = true;
    snprintf(out->version, sizeof out->version, "%s", TR_VERSION_NUMBER);
    snprintf(out->commit, sizeof out->commit, "%s", tr_version_commit());
    snprintf(out->backend, sizeof out->backend, "%s", tr_version_backend());
    out->global_batch_size = cfg->global_batch_size, out->micro_batch_size = cfg->micro_batch_size;
    out->mock_data = cfg->mock_data;
    out->data_fingerprint = data_fp;
    snprintf(out->tokenizer_type, sizeof out->tokenizer_type, "%s", cfg->tokenizer_type);
    snprintf(out->tokenizer_model, sizeof out->tokenizer_model, "%s", cfg->tokenizer_model);
    out->tokenizer_fingerprint = train_tokenizer_fingerprint(cfg);
    const char *paths[TR_MAX_PATHS];
    for (int i = 0; i < cfg->n_data_path; i++) paths[i] = cfg->data_path[i];
    if (ckpt_provenance_set_paths(out, cfg->n_data_path, paths))
        return tr_errf(err, errlen, "out of host memory for the checkpoint's provenance");
    return 0;
}
