/* Rank lists as compact ranges: "0-1023" for a world, "0-1016:8" for a data-parallel group, so a
 * thousand-rank communicator is one short token in every dump. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "flight/flight.h"
#include "twinrun/err.h"

void flight_ranks_format(FILE *f, const int *ranks, int n) {
    int i = 0;
    bool first = true;
    while (i < n) {
        /* the longest arithmetic run from i: length >= 3 is worth a range */
        int j = i + 1;
        int step = j < n ? ranks[j] - ranks[i] : 1;
        while (j < n && ranks[j] - ranks[j - 1] == step) j++;
        fputs(first ? "" : ",", f);
        first = false;
        if (j - i >= 3) {
            if (step == 1) fprintf(f, "%d-%d", ranks[i], ranks[j - 1]);
            else fprintf(f, "%d-%d:%d", ranks[i], ranks[j - 1], step);
            i = j;
        } else {
            fprintf(f, "%d", ranks[i]);
            i++;
        }
    }
}

static int parse_int(const char **p, long *out) {
    if (**p < '0' || **p > '9') return -1;
    errno = 0;
    char *end;
    long v = strtol(*p, &end, 10);
    if (errno || v > FLIGHT_MAX_WORLD) return -1;
    *out = v;
    *p = end;
    return 0;
}

static int push(int **ranks, int *n, int *cap, long v, int world, char *err, size_t errlen) {
    if (v < 0 || v >= world) return tr_errf(err, errlen, "rank %ld outside the world of %d", v, world);
    if (*n > 0 && v <= (*ranks)[*n - 1])
        return tr_errf(err, errlen, "rank %ld after %d: ranks must be ascending and unique", v, (*ranks)[*n - 1]);
    if (*n == *cap) {
        int c = *cap ? 2 * *cap : 16;
        int *r = realloc(*ranks, sizeof *r * (size_t)c);
        if (!r) return tr_errf(err, errlen, "out of memory for a rank list");
        *ranks = r;
        *cap = c;
    }
    (*ranks)[(*n)++] = (int)v;
    return 0;
}

int flight_ranks_parse(const char *s, int world, int **ranks, int *n, char *err, size_t errlen) {
    *ranks = NULL;
    *n = 0;
    int cap = 0;
    const char *p = s;
    for (;;) {
        long a, b, step = 1;
        if (parse_int(&p, &a)) goto bad;
        b = a;
        if (*p == '-') {
            p++;
            if (parse_int(&p, &b) || b < a) goto bad;
            if (*p == ':') {
                p++;
                if (parse_int(&p, &step) || step < 1) goto bad;
                if ((b - a) % step) {
                    tr_errf(err, errlen, "rank range '%ld-%ld:%ld' does not end on its step", a, b, step);
                    goto fail;
                }
            }
        }
        for (long v = a; v <= b; v += step)
            if (push(ranks, n, &cap, v, world, err, errlen)) goto fail;
        if (*p == '\0') return 0;
        if (*p != ',') goto bad;
        p++;
    }
bad:
    tr_errf(err, errlen, "bad rank list near '%.20s': want items N, A-B or A-B:STEP separated by commas", p);
fail:
    free(*ranks);
    *ranks = NULL;
    *n = 0;
    return -1;
}
