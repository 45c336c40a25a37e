/* libFuzzer: the compact fault plan syntax (TWINRUN_FAULTS, fault_plan_parse). Any text either
 * fails with a message that names a fault, or yields faults that each pass fault_spec_check in
 * the same world, with nothing fired yet. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fault/fault.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* the first byte picks one of a few worlds, so node arithmetic is exercised beyond one shape */
    static const int worlds[][2] = {{1024, 8}, {16, 8}, {8, 1}, {64, 64}};
    int w = size ? data[0] % 4 : 0;
    fault_plan p;
    char err[512] = "";
    if (fault_plan_parse(text, worlds[w][0], worlds[w][1], &p, err, sizeof err) == 0) {
        size_t seps = 1;
        for (const char *c = text; *c; c++) seps += *c == ';';
        if ((size_t)p.n > seps || p.gpus_per_node != worlds[w][1]) abort();
        for (int i = 0; i < p.n; i++) {
            if (p.fired[i].fired) abort();
            if (fault_spec_check(&p.faults[i], worlds[w][0], worlds[w][1], err, sizeof err)) abort();
            char d[256];
            fault_spec_describe(&p.faults[i], d, sizeof d);
            if (!d[0]) abort();
            if (i >= 64) continue; /* the rank sweep below is for the first few: plans may hold 10000 */
            int hit = 0;
            for (int r = 0; r < worlds[w][0]; r++) hit += fault_targets_rank(&p.faults[i], r, worlds[w][1]);
            if (hit == 0) abort(); /* every fault reaches at least one rank */
        }
        fault_plan_free(&p);
    } else {
        if (!err[0] || p.faults || p.fired || p.n) abort();
    }
    free(text);
    return 0;
}
