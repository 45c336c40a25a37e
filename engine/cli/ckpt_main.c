/* ckpt: look at twinrun checkpoints.
 *   ckpt inspect DIR [--iteration N] [--fp8]
 *                                      iteration, layout, samples, scheduler, provenance, files, verification, the
 *                                      FP8 state's summary (--fp8: every FP8 tensor's scale and amax history)
 *   ckpt verify DIR [--iteration N]    every checksum, the manifest's own too; non-zero exit naming the bad file
 *   ckpt export DIR --hf OUT [--iteration N] [--overwrite]
 *                                      verified weights as a Hugging Face model (config.json + safetensors) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "ckpt/hf_export.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "twinrun/err.h"
#include "twinrun/version.h"

/* ckpt_manifest_note's case, as verify says it (verify does not keep the manifest) */
#define OLD_MANIFEST "written before twinrun recorded provenance; its contents are not checked"

static const char *const styles[] = {"constant", "linear", "cosine", "inverse-square-root"};

static int usage(void) {
    fprintf(stderr, "usage: ckpt inspect DIR [--iteration N] [--fp8]\n       ckpt verify DIR [--iteration N]\n"
                    "       ckpt export DIR --hf OUT [--iteration N] [--overwrite]\n");
    return TR_EXIT_USAGE;
}

static int pick_iteration(const char *dir, const char *given, int64_t *it) {
    char err[1024];
    if (given) {
        char *end;
        long long v = strtoll(given, &end, 10);
        if (!*given || *end || v < 0) {
            fprintf(stderr, "ckpt: --iteration %s: not a non-negative integer\n", given);
            return -1;
        }
        *it = v;
        return 0;
    }
    int rc = ckpt_latest(dir, it, err, sizeof err);
    if (rc == 1) fprintf(stderr, "ckpt: %s: no %s; nothing was saved there\n", dir, CKPT_TRACKER);
    if (rc < 0) fprintf(stderr, "ckpt: %s\n", err);
    return rc ? -1 : 0;
}

static void print_provenance(const ckpt_manifest *m) {
    const ckpt_provenance *p = &m->prov;
    if (!p->present) {
        printf("provenance:             none (%s)\n", ckpt_manifest_note(m));
        return;
    }
    printf("written by:             twinrun %s, commit %s, backend %s\n", p->version, p->commit, p->backend);
    printf("batch:                  global %d, micro %d\n", p->global_batch_size, p->micro_batch_size);
    if (p->mock_data || p->n_data_path == 0) printf("data:                   %s", p->mock_data ? "mock data" : "none");
    else printf("data:                   %d path%s", p->n_data_path, p->n_data_path == 1 ? "" : "s");
    printf(", fingerprint %016llx\n", (unsigned long long)p->data_fingerprint);
    for (int i = 0; i < p->n_data_path; i++) printf("  %s\n", p->data_path[i]);
    printf("tokenizer:              %s%s%s, fingerprint %016llx\n", p->tokenizer_type[0] ? p->tokenizer_type : "none",
           p->tokenizer_model[0] ? " " : "", p->tokenizer_model, (unsigned long long)p->tokenizer_fingerprint);
}

static void print_manifest(const ckpt_manifest *m) {
    printf("iteration:              %lld\n", (long long)m->iteration);
    printf("layout:                 tp %d, pp %d, dp %d, cp %d (%d ranks)%s\n", m->layout.tp, m->layout.pp,
           m->layout.dp, m->layout.cp, ckpt_layout_world(&m->layout),
           m->layout.dist_opt ? ", distributed optimizer" : "");
    printf("consumed samples:       train %lld, valid %lld\n", (long long)m->consumed_train_samples,
           (long long)m->consumed_valid_samples);
    printf("model:                  %d layers, hidden %d, ffn %d, heads %d, groups %d, vocab %d, seq %d%s\n",
           m->model.num_layers, m->model.hidden_size, m->model.ffn_hidden_size, m->model.num_attention_heads,
           m->model.num_query_groups, m->model.vocab_size, m->model.seq_length, m->bf16 ? ", bf16" : ", fp32");
    printf("scheduler:              %s, max lr %g, min lr %g, warmup %lld, decay %lld samples, at %lld\n",
           styles[m->sched.style], m->sched.max_lr, m->sched.min_lr, (long long)m->sched.warmup_samples,
           (long long)m->sched.decay_samples, (long long)m->sched.num_steps);
    printf("optimizer steps:        %lld\nseed:                   %llu\n", (long long)m->optimizer_step,
           (unsigned long long)m->seed);
    print_provenance(m);
    uint64_t total = 0;
    for (int i = 0; i < m->n_files; i++) total += m->files[i].size;
    printf("files:                  %d shards, %llu bytes\n", m->n_files, (unsigned long long)total);
    for (int i = 0; i < m->n_files && i < 16; i++)
        printf("  %s  %12llu bytes  crc32 %08x\n", m->files[i].name, (unsigned long long)m->files[i].size,
               m->files[i].crc32);
    if (m->n_files > 16) printf("  ... %d more\n", m->n_files - 16);
}

/* The checkpoint's model as Hugging Face weights: whatever layout saved it, its tensors are read
 * back whole (reassembled from the shards) after every checksum is verified. */
static int export_hf(const char *dir, int64_t it, const char *out, bool overwrite) {
    char err[2048];
    if (ckpt_hf_export_check(out, overwrite, err, sizeof err)) {
        fprintf(stderr, "ckpt: export: %s\n", err);
        return TR_EXIT_USAGE;
    }
    ckpt_verify_report rep;
    if (ckpt_verify(dir, it, &rep, err, sizeof err)) {
        fprintf(stderr, "ckpt: %s\n", err);
        return TR_EXIT_FATAL;
    }
    ckpt_reader *rd = ckpt_reader_open(dir, it, err, sizeof err);
    if (!rd) {
        fprintf(stderr, "ckpt: %s\n", err);
        return TR_EXIT_FATAL;
    }
    const ckpt_manifest *man = ckpt_reader_manifest(rd);
    tr_config cfg;
    tr_config_defaults(&cfg);
    ckpt_model_to_config(&man->model, &cfg);
    cfg.seq_length = man->model.seq_length, cfg.micro_batch_size = 1;
    int rc = TR_EXIT_FATAL;
    float *host = NULL;
    llama_model *m = llama_create_table(&cfg, NULL, err, sizeof err);
    if (m && (host = malloc((m->total ? m->total : 1) * sizeof *host)) == NULL)
        snprintf(err, sizeof err, "out of host memory");
    if (m && host && !train_ckpt_read_weights(rd, m, host, err, sizeof err) &&
        !ckpt_hf_export(m, &cfg, host, out, CKPT_HF_SHARD_BYTES, overwrite, err, sizeof err)) {
        printf("exported iteration %lld of %s to %s (%zu parameters, Hugging Face LlamaForCausalLM)\n", (long long)it,
               dir, out, m->total);
        rc = TR_EXIT_OK;
    } else {
        fprintf(stderr, "ckpt: export to %s: %s\n", out, err);
    }
    free(host);
    llama_destroy(m);
    ckpt_reader_close(rd);
    return rc;
}

/* The FP8 state an FP8 run saved (model.layers.N.fp8_meta [12, history + 2]: engine/train/checkpoint.c):
 * how many layers have it, the history length, the range of the scales and the largest amax the
 * histories hold. Nothing for a bf16 run's checkpoint. */
static int print_fp8(const char *dir, int64_t it, int layers, bool tables) {
    static const char *const modules[] = {"qkv", "proj", "fc1", "fc2"}, *const roles[] = {"input", "weight", "grad"};
    char err[1024], name[64];
    ckpt_reader *rd = ckpt_reader_open(dir, it, err, sizeof err);
    if (!rd) {
        fprintf(stderr, "ckpt: %s\n", err);
        return -1;
    }
    int have = 0;
    int64_t cols = 0;
    float smin = INFINITY, smax = 0, amax = 0;
    for (int l = 0; l < layers; l++) {
        snprintf(name, sizeof name, "model.layers.%d.fp8_meta", l);
        ckpt_dtype dt;
        int ndim;
        int64_t shape[CKPT_MAX_DIMS];
        if (ckpt_reader_tensor(rd, name, &dt, &ndim, shape) || ndim != 2 || shape[1] < 3) continue;
        float *t = malloc((size_t)(shape[0] * shape[1]) * sizeof *t);
        TR_CHECK(t != NULL, "out of host memory");
        if (ckpt_read(rd, name, CKPT_F32, ckpt_place_slice(0, 0, shape[0]), t, err, sizeof err)) {
            fprintf(stderr, "ckpt: %s\n", err);
            free(t);
            ckpt_reader_close(rd);
            return -1;
        }
        cols = shape[1];
        for (int64_t r = 0; r < shape[0]; r++) {
            const float *row = t + r * cols;
            if (tables && shape[0] == 12) { /* %.9g: every float back bit for bit */
                printf("fp8 layer %d %s.%s: scale %.9g scale_inv %.9g history", l, modules[r / 3], roles[r % 3],
                       row[cols - 2], row[cols - 1]);
                for (int64_t i = 0; i < cols - 2; i++) printf(" %.9g", row[i]);
                printf("\n");
            }
            for (int64_t i = 0; i < cols - 2; i++) amax = isfinite(row[i]) && row[i] > amax ? row[i] : amax;
            smin = row[cols - 2] < smin ? row[cols - 2] : smin;
            smax = row[cols - 2] > smax ? row[cols - 2] : smax;
        }
        free(t);
        have++;
    }
    ckpt_reader_close(rd);
    if (have)
        printf("fp8 state:              %d of %d layers, amax history %lld, scales %.6g to %.6g, largest amax %.6g\n",
               have, layers, (long long)(cols - 2), smin, smax, amax);
    return 0;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "ckpt");
        return 0;
    }
    if (argc < 3) return usage();
    const char *cmd = argv[1], *dir = argv[2], *given = NULL, *hf = NULL;
    bool overwrite = false, fp8 = false;
    for (int i = 3; i < argc; i++) {
        if (strcmp(argv[i], "--iteration") == 0 && i + 1 < argc) given = argv[++i];
        else if (strcmp(argv[i], "--hf") == 0 && i + 1 < argc) hf = argv[++i];
        else if (strcmp(argv[i], "--overwrite") == 0 && strcmp(cmd, "export") == 0) overwrite = true;
        else if (strcmp(argv[i], "--fp8") == 0 && strcmp(cmd, "inspect") == 0) fp8 = true;
        else return usage();
    }
    int inspect = strcmp(cmd, "inspect") == 0, export = strcmp(cmd, "export") == 0;
    if ((!inspect && !export && strcmp(cmd, "verify") != 0) || (export != (hf != NULL))) return usage();
    int64_t it;
    if (pick_iteration(dir, given, &it)) return TR_EXIT_FATAL;
    if (export) return export_hf(dir, it, hf, overwrite);
    char err[2048];
    int layers = 0;
    if (inspect) {
        ckpt_manifest m;
        if (ckpt_manifest_load(dir, it, &m, err, sizeof err)) {
            fprintf(stderr, "ckpt: %s\n", err);
            return TR_EXIT_FATAL;
        }
        print_manifest(&m);
        layers = m.model.num_layers;
        ckpt_manifest_free(&m);
    }
    ckpt_verify_report rep;
    if (ckpt_verify(dir, it, &rep, err, sizeof err)) {
        printf("verification:           FAILED\nbad file:               %s\n", rep.bad_file);
        fprintf(stderr, "ckpt: %s\n", err);
        return TR_EXIT_FATAL;
    }
    printf("verification:           OK (iteration %lld: %d files, %llu bytes, %d tensors, every checksum)\n",
           (long long)it, rep.n_files, (unsigned long long)rep.total_bytes, rep.n_tensors);
    if (rep.manifest_checked) printf("manifest checksum:      OK (crc32 %08x)\n", rep.manifest_crc32);
    else printf("manifest checksum:      none: the manifest was %s\n", OLD_MANIFEST);
    if (inspect && print_fp8(dir, it, layers, fp8)) return TR_EXIT_FATAL;
    return TR_EXIT_OK;
}
