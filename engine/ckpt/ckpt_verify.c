/* Full verification of one checkpoint, and on failure the search for an older one that is whole,
 * so the message can tell the user what they can still resume from. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"
#include "twinrun/err.h"

static int verify_one(const char *dir, int64_t iteration, ckpt_verify_report *rep, char *err, size_t errlen) {
    char idir[TR_CKPT_PATH_MAX], path[TR_CKPT_PATH_MAX];
    ckpt_iter_dir(idir, sizeof idir, dir, iteration);
    ckpt_pathf(rep->bad_file, sizeof rep->bad_file, "%s/%s", idir, CKPT_MANIFEST);
    ckpt_manifest m;
    if (ckpt_manifest_load(dir, iteration, &m, err, errlen)) return -1;
    rep->manifest_checked = m.prov.present, rep->manifest_crc32 = m.manifest_crc32;
    ckpt_shard_header *hs = calloc((size_t)m.n_files, sizeof *hs);
    int rc = hs ? 0 : tr_errf(err, errlen, "out of host memory");
    for (int r = 0; !rc && r < m.n_files; r++) {
        ckpt_pathf(path, sizeof path, "%s/%s", idir, m.files[r].name);
        ckpt_pathf(rep->bad_file, sizeof rep->bad_file, "%s", path);
        ckpt_file_info info;
        rc = ckpt_shard_check(path, iteration, &m.layout, r, 1, &info, &hs[r], err, errlen);
        if (!rc && (info.size != m.files[r].size || info.crc32 != m.files[r].crc32))
            rc = tr_errf(err, errlen, "%s: %llu bytes with CRC %08x, the manifest says %llu bytes with CRC %08x", path,
                         (unsigned long long)info.size, info.crc32, (unsigned long long)m.files[r].size,
                         m.files[r].crc32);
        if (!rc) rep->n_files++, rep->total_bytes += info.size;
    }
    if (!rc) {
        ckpt_pathf(rep->bad_file, sizeof rep->bad_file, "%s", idir);
        rc = ckpt_coverage_check(hs, m.n_files, idir, &rep->n_tensors, err, errlen);
    }
    if (!rc) rep->bad_file[0] = '\0';
    for (int r = 0; hs && r < m.n_files; r++) ckpt_shard_header_free(&hs[r]);
    free(hs);
    ckpt_manifest_free(&m);
    return rc;
}

int ckpt_verify(const char *dir, int64_t iteration, ckpt_verify_report *rep, char *err, size_t errlen) {
    ckpt_verify_report local;
    if (!rep) rep = &local;
    memset(rep, 0, sizeof *rep);
    rep->older_complete = -1;
    if (strlen(dir) > 3000) return tr_errf(err, errlen, "%.100s...: checkpoint path too long", dir);
    if (verify_one(dir, iteration, rep, err, errlen) == 0) return 0;
    /* newest first: the first older checkpoint that verifies is the one to fall back to */
    int64_t iters[4096];
    char e2[512];
    int n = ckpt_list(dir, iters, 4096, e2, sizeof e2);
    if (n > 4096) n = 4096;
    for (int i = n - 1; i >= 0; i--) {
        if (iters[i] >= iteration) continue;
        ckpt_verify_report older;
        memset(&older, 0, sizeof older);
        if (verify_one(dir, iters[i], &older, e2, sizeof e2) == 0) {
            rep->older_complete = iters[i];
            break;
        }
    }
    if (!err || !errlen) return -1;
    size_t l = strlen(err);
    if (rep->older_complete >= 0)
        snprintf(err + l, errlen - l, "; an older complete checkpoint exists: iteration %lld (iter_%07lld)",
                 (long long)rep->older_complete, (long long)rep->older_complete);
    else snprintf(err + l, errlen - l, "; no older complete checkpoint in %s", dir);
    return -1;
}
