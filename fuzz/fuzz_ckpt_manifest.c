/* libFuzzer target: ckpt_manifest_parse on raw bytes; what parses must serialize and parse back
 * to the same manifest (no field silently lost or changed). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ckpt_manifest m, back;
    char err[512] = "";
    if (ckpt_manifest_parse(&m, (const char *)data, size, "fuzz/manifest.json", err, sizeof err) != 0) {
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
    free(json);
    ckpt_manifest_free(&back);
    ckpt_manifest_free(&m);
    return 0;
}
