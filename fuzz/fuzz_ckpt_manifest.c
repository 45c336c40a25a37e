/* libFuzzer target: ckpt_manifest_parse on raw bytes, its own checksum not checked (so every other
 * check is reached); what parses must serialize and parse back, checksum checked, to the same manifest
 * (no field silently lost or changed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_manifest m, back;
    char err[512] = "";
    if (ckpt_manifest_parse_ex(&m, (const char *)data, size, "fuzz/manifest.json", 0, err, sizeof err) != 0) {
        if (err[0] == '\0') abort(); /* a failure always says why */
        return 0;
    }
    if (m.n_files != ckpt_layout_world(&m.layout) || m.n_files < 1) abort();
    char *json = ckpt_manifest_to_json(&m, err, sizeof err);
    if (!json) abort();
    if (ckpt_manifest_parse(&back, json, strlen(json), "fuzz/again.json", err, sizeof err) != 0) abort();
    if (back.iteration != m.iteration || back.seed != m.seed || back.n_files != m.n_files ||
        memcmp(&back.layout, &m.layout, sizeof m.layout) != 0 || memcmp(&back.sched, &m.sched, sizeof m.sched) != 0 ||
        memcmp(back.files, m.files, (size_t)m.n_files * sizeof *m.files) != 0)
        abort();
    const ckpt_provenance *p = &m.prov, *q = &back.prov;
    if (p->present != q->present || p->n_data_path != q->n_data_path || strcmp(p->commit, q->commit) ||
        strcmp(p->version, q->version) || strcmp(p->backend, q->backend) ||
        strcmp(p->tokenizer_type, q->tokenizer_type) || strcmp(p->tokenizer_model, q->tokenizer_model) ||
        p->data_fingerprint != q->data_fingerprint || p->tokenizer_fingerprint != q->tokenizer_fingerprint ||
        p->global_batch_size != q->global_batch_size || p->micro_batch_size != q->micro_batch_size ||
        p->mock_data != q->mock_data)
        abort();
    for (int i = 0; i < p->n_data_path; i++)
        if (strcmp(p->data_path[i], q->data_path[i])) abort();
    free(json);
    ckpt_manifest_free(&back);
    ckpt_manifest_free(&m);
    return 0;
}
