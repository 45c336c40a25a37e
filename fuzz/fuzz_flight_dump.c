/* libFuzzer target: the flight-recorder dump reader and the blame analysis over what it accepts.
 * Seeds: fuzz/corpus/flight_dump/. Run: build/fuzz/fuzz/fuzz_flight_dump fuzz/corpus/flight_dump */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "flight/flight.h"

#define MAX_DUMPS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static FILE *sink;
    if (!sink) sink = fopen("/dev/null", "w");
    flight_dump dumps[MAX_DUMPS];
    size_t n = 0, pos = 0, line = 0;
    char err[256];
    while (n < MAX_DUMPS) {
        int rc = flight_dump_parse((const char *)data, size, &pos, &line, &dumps[n], err, sizeof err);
        if (rc <= 0) break;
        /* what the writer makes of an accepted dump must parse again */
        if (sink) flight_dump_write(sink, &dumps[n]);
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
