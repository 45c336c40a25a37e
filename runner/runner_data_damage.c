/* data_corrupt's files: the job reads copies of its --data-path files from the work folder (the
 * user's data is never touched); a fault damages a copy in one of several ways (fault_damage), and
 * the repair copies both files again from the originals, as an operator restoring a dataset would. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/data_origin.h"
#include "runner_internal.h"

static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    int rc = in && out ? 0 : -1;
    while (!rc && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, out) != n) rc = -1;
    if (in) fclose(in);
    if (out && fclose(out)) rc = -1;
    return rc;
}

/* Writes one byte at `offset` of an existing file. */
static int patch_byte(const char *path, off_t offset, unsigned char value) {
    int fd = open(path, O_WRONLY);
    if (fd < 0) return -1;
    int rc = pwrite(fd, &value, 1, offset) == 1 ? 0 : -1;
    if (close(fd)) rc = -1;
    return rc;
}

/* damage token: the token iteration `step` reads first (tr_data_token_origin) overwritten with all
 * ones: -1 for a signed dtype, the largest id for an unsigned one, which must then be outside the
 * vocabulary. Float dtypes hold no ids to damage. */
static int damage_token(const tr_config *cfg, int64_t step, char *path, size_t pathlen, char *what, size_t whatlen) {
    int64_t at;
    int code, size;
    char err[512];
    if (tr_data_token_origin(cfg, step, path, pathlen, &at, &code, &size, err, sizeof err)) {
        fprintf(stderr, "twinrun: data_corrupt (token) not injected: %s\n", err);
        return -1;
    }
    const bool is_unsigned = code == 1 || code == 8, is_float = code == 6 || code == 7; /* Megatron's DType codes */
    const int64_t top = is_unsigned ? (size == 1 ? 255 : 65535) : -1;
    if (is_float || (is_unsigned && top < cfg->vocab_size)) {
        fprintf(stderr,
                "twinrun: data_corrupt (token) not injected: %s holds %s ids, none of which is outside a vocabulary "
                "of %d\n",
                path, is_float ? "float" : "unsigned", cfg->vocab_size);
        return -1;
    }
    snprintf(what, whatlen, "made the token at byte %lld of %s id %lld (read at iteration %lld)", (long long)at, path,
             (long long)top, (long long)step);
    for (int b = 0; b < size; b++)
        if (patch_byte(path, (off_t)(at + b), 0xff)) return -1;
    return 0;
}

/* Damages the copy <prefix>.bin / <prefix>.idx as `how` says. `path` gets the damaged file and
 * `what` the act, for the log. Offsets are those of Megatron's .idx header: 9 bytes of magic, an
 * 8-byte version, then the dtype code at byte 17 (docs/data.md). */
static int damage_copy(const char *prefix, fault_damage how, char *path, size_t pathlen, char *what, size_t whatlen) {
    const bool idx = how == FAULT_D_IDX_CUT || how == FAULT_D_IDX_MAGIC || how == FAULT_D_IDX_DTYPE;
    snprintf(path, pathlen, "%s%s", prefix, idx ? ".idx" : ".bin");
    struct stat st;
    if (stat(path, &st)) return -1;
    switch (how) {
    case FAULT_D_BIN_CUT:
        snprintf(what, whatlen, "cut 2 bytes off %s", path);
        return truncate(path, st.st_size > 2 ? st.st_size - 2 : 0);
    case FAULT_D_BIN_MISSING: snprintf(what, whatlen, "removed %s", path); return unlink(path);
    case FAULT_D_IDX_CUT:
        snprintf(what, whatlen, "cut 1 byte off %s", path);
        return truncate(path, st.st_size > 1 ? st.st_size - 1 : 0);
    case FAULT_D_IDX_MAGIC:
        snprintf(what, whatlen, "overwrote the first byte of the magic of %s", path);
        return patch_byte(path, 0, 'X');
    case FAULT_D_IDX_DTYPE:
        snprintf(what, whatlen, "zeroed the dtype code of %s", path);
        return patch_byte(path, 17, 0);
    case FAULT_D_TOKEN: /* damage_token: it needs the job's config */
    case FAULT_DAMAGE_COUNT: break;
    }
    return -1;
}

int runner_data_copies(sc_job *j, const char *work, const fault_spec *damage, char *first, size_t firstlen, char *what,
                       size_t whatlen) {
    tr_config *cfg = j->cfg;
    int n = 0;
    for (int i = 0; i < cfg->n_data_path; i++) {
        char idx[TR_PATH_LEN + 8], dst[SC_PATH_LEN + TR_PATH_LEN + 64], base[TR_PATH_LEN];
        const char *orig = cfg->data_path[i];
        const bool copied = strstr(orig, "/data_copies/") != NULL;
        /* a blend weight has neither file; a path's .idx is there in the original and in a copy whatever
         * was damaged, since no form of damage removes it */
        snprintf(idx, sizeof idx, "%s.idx", orig);
        if (access(idx, R_OK) != 0) continue;
        if (!copied) { /* first time: take copies of the originals */
            const char *slash = strrchr(orig, '/');
            snprintf(base, sizeof base, "%s", slash ? slash + 1 : orig);
            char dir[SC_PATH_LEN + 32];
            snprintf(dir, sizeof dir, "%s/data_copies", work);
            (void)mkdir(dir, 0755);
            snprintf(dst, sizeof dst, "%s/%s", dir, base);
            for (int e = 0; e < 2; e++) {
                char a[TR_PATH_LEN + 8], b[sizeof dst + 8];
                snprintf(a, sizeof a, "%s%s", orig, e ? ".idx" : ".bin");
                snprintf(b, sizeof b, "%s%s", dst, e ? ".idx" : ".bin");
                if (copy_file(a, b)) return -1;
            }
            char keep[sizeof dst + 8];
            snprintf(keep, sizeof keep, "%s.orig", dst);
            if (symlink(orig, keep) && errno != EEXIST) return -1; /* where the repair copies from */
            snprintf(cfg->data_path[i], sizeof cfg->data_path[i], "%.*s", (int)sizeof cfg->data_path[i] - 1, dst);
        } else { /* repair: copy both originals again */
            char keep[TR_PATH_LEN + 8], target[PATH_MAX];
            snprintf(keep, sizeof keep, "%s.orig", orig);
            ssize_t k = readlink(keep, target, sizeof target - 1);
            if (k <= 0) return -1;
            target[k] = 0;
            for (int e = 0; e < 2; e++) {
                char a[PATH_MAX + 8], b[TR_PATH_LEN + 8];
                snprintf(a, sizeof a, "%s%s", target, e ? ".idx" : ".bin");
                snprintf(b, sizeof b, "%s%s", orig, e ? ".idx" : ".bin");
                if (copy_file(a, b)) return -1;
            }
        }
        if (damage && n == 0 && damage->damage != FAULT_D_TOKEN &&
            damage_copy(cfg->data_path[i], damage->damage, first, firstlen, what, whatlen))
            return -1;
        n++;
    }
    /* the token's file is whichever of the copies the iteration reads: after every copy is in place */
    if (damage && n > 0 && damage->damage == FAULT_D_TOKEN &&
        damage_token(cfg, damage->step, first, firstlen, what, whatlen))
        return -1;
    return n;
}
