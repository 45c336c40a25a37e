/* blame: reads flight-recorder dumps of all ranks (twin or real backend) and says which
 * communicator is stuck in which collective, who never joined it, and which rank stopped first.
 *
 *   blame DUMP...        each file holds one or more rank dumps ('-' reads standard input)
 *
 * Exit status: 0 nothing is stuck, 1 a hang was found (report on stdout), 2 bad usage or input. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"
#include "twinrun/version.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = strcmp(path, "-") == 0 ? stdin : fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - n, f);
        if (n < cap) break;
        char *b = realloc(buf, cap *= 2);
        if (!b) free(buf);
        buf = b;
    }
    bool bad = ferror(f);
    if (f != stdin) fclose(f);
    if (bad) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "blame");
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fprintf(argc < 2 ? stderr : stdout,
                "usage: blame DUMP...\n"
                "  Reads flight-recorder dumps (twinrun-flight 1; one or more per file, '-' = stdin) from all\n"
                "  ranks and reports stuck collectives, the ranks that never joined them, and the rank that\n"
                "  stopped first. Exit: 0 nothing stuck, 1 hang found, 2 bad usage or input.\n");
        return argc < 2 ? 2 : 0;
    }
    flight_dump *dumps = NULL;
    size_t n = 0, cap = 0;
    int rc = 2;
    for (int a = 1; a < argc; a++) {
        size_t len = 0;
        char *text = slurp(argv[a], &len);
        if (!text) {
            fprintf(stderr, "blame: cannot read %s: %s\n", argv[a], strerror(errno));
            goto out;
        }
        size_t pos = 0, line = 0;
        for (;;) {
            if (n == cap) {
                flight_dump *d = realloc(dumps, sizeof *d * (cap = cap ? 2 * cap : 64));
                if (!d) {
                    free(text);
                    fprintf(stderr, "blame: out of memory\n");
                    goto out;
                }
                dumps = d;
            }
            char err[512];
            int got = flight_dump_parse(text, len, &pos, &line, &dumps[n], err, sizeof err);
            if (got < 0) {
                fprintf(stderr, "blame: %s: %s\n", argv[a], err);
                free(text);
                goto out;
            }
            if (got == 0) break;
            n++;
        }
        free(text);
    }
    flight_blame_result b;
    char err[512];
    if (flight_blame(dumps, n, &b, err, sizeof err)) {
        fprintf(stderr, "blame: %s\n", err);
        goto out;
    }
    printf("blame: %zu dumps of a world of %d ranks\n", n, dumps[0].world);
    flight_blame_print(stdout, &b, dumps, n);
    rc = b.nstuck ? 1 : 0;
    flight_blame_free(&b);
out:
    for (size_t i = 0; i < n; i++) flight_dump_free(&dumps[i]);
    free(dumps);
    return rc;
}
