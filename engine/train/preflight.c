#include "train/preflight.h"
#include "core/safe_file.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/hash.h"
#include "core/majority.h"
#include "twinrun/coll.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

enum { FP_WORDS = 8 }; /* build lo/hi, config lo/hi, data lo/hi, devices, spare — as int32 for the all-gather */

uint64_t train_config_fingerprint(const tr_config *cfg) {
    /* the struct's bytes (defaults start from memset, so padding is zero) minus what is not a flag */
    size_t upto = offsetof(tr_config, n_warnings);
    return tr_fnv1a(TR_FNV_OFFSET, cfg, upto);
}

static void put64(int32_t *w, uint64_t v) { w[0] = (int32_t)(uint32_t)v, w[1] = (int32_t)(uint32_t)(v >> 32); }

const char *train_preflight_issue_name(tr_preflight_issue i) {
    static const char *const names[] = {"ok", "build version", "device count", "flags", "data files"};
    return (unsigned)i < sizeof names / sizeof *names ? names[i] : "?";
}

static int64_t word_of(const int32_t *all, int r, int w, int words) {
    return ((int64_t)all[r * FP_WORDS + w] & 0xffffffff) | (words == 2 ? (int64_t)all[r * FP_WORDS + w + 1] << 32 : 0);
}

/* The value most ranks hold (core/majority.h), else rank 0's: one odd node is then the odd one out. */
static int64_t majority(const int32_t *all, int world, int w, int words, bool *has_majority) {
    uint64_t *v = malloc(sizeof *v * (size_t)world);
    TR_CHECK(v != NULL, "out of memory for the preflight fingerprints");
    for (int r = 0; r < world; r++) v[r] = (uint64_t)word_of(all, r, w, words);
    const int64_t m = (int64_t)tr_majority_u64(v, NULL, world, has_majority);
    free(v);
    return m;
}

int train_preflight(const tr_config *cfg, const tr_groups *gr, dev_device *d, int rank, int world, uint64_t data_fp,
                    fault_rank *faults, tr_preflight_result *res, char *err, size_t errlen) {
    memset(res, 0, sizeof *res);
    res->first_rank = -1;
    dev_info info;
    dev_get_info(d, &info);
    /* the build: version, the commit it was built from (two builds of one version differ in code) and the
     * backend; a version_skew fault replaces the whole string on its rank */
    char build[160];
    snprintf(build, sizeof build, "%s commit %s", TR_VERSION, tr_version_commit());
    const char *version = fault_build_version(faults, build);
    int32_t mine[FP_WORDS] = {0};
    put64(mine + 0,
          tr_fnv1a(TR_FNV_OFFSET, version, strlen(version)) ^ tr_fnv1a(0, info.backend, strlen(info.backend)));
    put64(mine + 2, train_config_fingerprint(cfg));
    put64(mine + 4, data_fp);
    mine[6] = fault_visible_devices(faults, info.count);
    if (world == 1 || !gr || !gr->world) return 0;

    int32_t *all = malloc(sizeof(int32_t) * FP_WORDS * (size_t)world);
    int32_t *dbuf = dev_alloc(d, sizeof(int32_t) * FP_WORDS * ((size_t)world + 1), "preflight fingerprints");
    TR_CHECK(all && dbuf, "out of memory for the preflight fingerprints");
    dev_stream *s = dev_stream_default(d);
    dev_copy_h2d(s, dbuf, mine, sizeof mine);
    coll_all_gather(gr->world, s, dbuf, dbuf + FP_WORDS, FP_WORDS, TR_I32);
    dev_copy_d2h(s, all, dbuf + FP_WORDS, sizeof(int32_t) * FP_WORDS * (size_t)world);
    dev_stream_sync(s);
    dev_free(d, dbuf);

    static const struct {
        int word, words;
        tr_preflight_issue issue;
    } checks[] = {{0, 2, TR_PREFLIGHT_VERSION},
                  {6, 1, TR_PREFLIGHT_DEVICES},
                  {2, 2, TR_PREFLIGHT_CONFIG},
                  {4, 2, TR_PREFLIGHT_DATA}};
    size_t used = 0;
    int shown = 0;
    for (size_t c = 0; c < sizeof checks / sizeof *checks; c++) {
        const int w = checks[c].word, nw = checks[c].words;
        bool has_majority;
        const int64_t want = majority(all, world, w, nw, &has_majority);
        for (int r = 0; r < world; r++) {
            const int64_t v = word_of(all, r, w, nw);
            if (v == want) continue;
            if (res->issue == TR_PREFLIGHT_OK) {
                res->issue = checks[c].issue;
                res->first_rank = r;
                used += (size_t)snprintf(err + used, errlen > used ? errlen - used : 0,
                                         "preflight: the ranks do not agree on their %s; the job stops before "
                                         "training.\n  rank   what                      this rank        %s\n",
                                         train_preflight_issue_name(checks[c].issue),
                                         has_majority ? "most ranks" : "rank 0 (no majority: the ranks split evenly)");
            }
            if (checks[c].issue != res->issue) continue;
            res->ndiffer++;
            if (shown++ < 16 && used < errlen) {
                if (nw == 1)
                    used +=
                        (size_t)snprintf(err + used, errlen - used, "  %-6d %-25s %-16lld %lld\n", r,
                                         train_preflight_issue_name(checks[c].issue), (long long)v, (long long)want);
                else
                    used += (size_t)snprintf(err + used, errlen - used, "  %-6d %-25s %016llx %016llx\n", r,
                                             train_preflight_issue_name(checks[c].issue), (unsigned long long)v,
                                             (unsigned long long)want);
            }
        }
    }
    free(all);
    if (res->issue == TR_PREFLIGHT_OK) return 0;
    static const char *const fixes[] = {
        "", "install the same twinrun build (version and commit: train_llama3 --version) on every node",
        "check the node's GPUs (nvidia-smi / mthreads-gmi) and CUDA_VISIBLE_DEVICES; drain it from the hostfile",
        "launch every rank with the same flags", "give every node the same data files (--data-path)"};
    if (used < errlen)
        snprintf(err + used, errlen - used, "  (%d ranks differ%s) fix: %s", res->ndiffer,
                 shown > 16 ? ", the first 16 shown" : "", fixes[res->issue]);
    (void)rank;
    return -1;
}

uint64_t train_data_fingerprint(const tr_config *cfg) {
    uint64_t h = 0;
    for (int i = 0; i < cfg->n_data_path; i++) {
        /* weights and prefixes alike: only names with a .idx beside them count */
        static const char *const ext[] = {".idx", ".bin"};
        for (int e = 0; e < 2; e++) {
            char path[TR_PATH_LEN + 8];
            snprintf(path, sizeof path, "%s%s", cfg->data_path[i], ext[e]);
            FILE *f = tr_safe_fopen_regular(path, NULL, 0);
            if (!f) continue;
            if (!h) h = TR_FNV_OFFSET;
            /* the whole index (small) and the data file's size and first megabyte */
            unsigned char buf[65536];
            size_t n, total = 0, limit = e == 0 ? (size_t)1 << 30 : (size_t)1 << 20;
            while (total < limit && (n = fread(buf, 1, sizeof buf, f)) > 0) h = tr_fnv1a(h, buf, n), total += n;
            if (fseek(f, 0, SEEK_END) == 0) {
                long size = ftell(f);
                h = tr_fnv1a(h, &size, sizeof size);
            }
            fclose(f);
        }
    }
    return h;
}
