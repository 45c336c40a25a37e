/* libFuzzer: the records the doctor's rank 0 receives from the other ranks (engine/doctor: "key=value"
 * lines and the test's times) on raw bytes, compared as rank 0 compares them: a rank of another build
 * sends what it sends, and the report must still come out whole. Four ranks on two nodes, the bytes
 * split among their records. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "doctor/doctor_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    enum { WORLD = 4 };
    doctor_wire *all = calloc(WORLD, sizeof *all);
    if (!all) return 0;
    const size_t part = size / WORLD;
    for (int r = 0; r < WORLD; r++) {
        const size_t n = part < DOCTOR_TEXT_LEN - 1 ? part : DOCTOR_TEXT_LEN - 1;
        memcpy(all[r].text, data + (size_t)r * part, n); /* the sender NUL-terminates; rank 0 relies on it */
        for (int i = 0; i < DOCTOR_TIMES; i++)
            all[r].times[i] = (double)((data[(i + r) % (size ? size : 1)] & 7) + 1) * 1e-4;
    }
    doctor_options o;
    doctor_options_default(&o);
    o.gpus_per_node = 2;
    o.tp = 2;
    o.nsizes = 1;
    o.ndirs = 2;
    strcpy(o.dirs[0].what, "data");
    strcpy(o.dirs[1].what, "data");
    doctor_report r;
    memset(&r, 0, sizeof r);
    r.world = WORLD, r.gpus_per_node = 2, r.nodes = 2, r.slow_node = -1;
    char v[64];
    doctor_fact(all[0].text, "build", v, sizeof v);
    doctor_compare(&o, &r, all);
    doctor_bandwidth(&o, &r, all);
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (f) {
        doctor_report_text(f, &r);
        doctor_report_json(f, &r);
        doctor_report_junit(f, &r);
        fclose(f);
    }
    free(out);
    doctor_report_free(&r);
    free(all);
    return 0;
}
