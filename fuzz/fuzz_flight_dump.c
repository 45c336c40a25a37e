/* libFuzzer target: the flight-recorder dump reader and the blame analysis over what it accepts; every
 * accepted dump, written out, parses back to a dump that writes the same text (the round trip).
 * Seeds: fuzz/corpus/fuzz_flight_dump/ (the folder is named after the target: ci/test.sh copies
 * fuzz/corpus/<target>/). Run: build/fuzz/fuzz/fuzz_flight_dump fuzz/corpus/fuzz_flight_dump */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"

#define MAX_DUMPS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* d written to memory, as flight_dump_write makes it (a malloc'd buffer and its length) */
static char *written(const flight_dump *d, size_t *len) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    if (!f) abort();
    flight_dump_write(f, d);
    fclose(f);
    return buf;
}

/* what the writer makes of an accepted dump parses again, to the same dump: its text written again is
 * the same text (abort: libFuzzer keeps the input) */
static void round_trip(const flight_dump *d) {
    size_t na = 0, nb = 0, pos = 0, line = 0;
    char err[256];
    char *a = written(d, &na);
    flight_dump back;
    if (flight_dump_parse(a, na, &pos, &line, &back, err, sizeof err) != 1) {
        fprintf(stderr, "fuzz_flight_dump: the written dump does not parse back: %s\n%.*s", err, (int)na, a);
        abort();
    }
    char *b = written(&back, &nb);
    if (na != nb || memcmp(a, b, na) != 0) {
        fprintf(stderr, "fuzz_flight_dump: the round trip changed the dump:\n%.*s---\n%.*s", (int)na, a, (int)nb, b);
        abort();
    }
    flight_dump_free(&back);
    free(a);
    free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    flight_dump dumps[MAX_DUMPS];
    size_t n = 0, pos = 0, line = 0;
    char err[256];
    while (n < MAX_DUMPS) {
        int rc = flight_dump_parse((const char *)data, size, &pos, &line, &dumps[n], err, sizeof err);
        if (rc <= 0) break;
        round_trip(&dumps[n]);
        n++;
    }
    if (n) {
        flight_blame_result b;
        if (flight_blame(dumps, n, &b, err, sizeof err) == 0) {
            if (sink) flight_blame_print(sink, &b, dumps, n);
            flight_blame_free(&b);
        }
    }
    for (size_t i = 0; i < n; i++) flight_dump_free(&dumps[i]);
    return 0;
}
