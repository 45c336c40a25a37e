/* --split parsing (see split.h). */
#include "data/split.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

const char *tr_split_name(int s) {
    static const char *const n[TR_NSPLITS] = {"train", "valid", "test"};
    return s >= 0 && s < TR_NSPLITS ? n[s] : "?";
}

/* Python's float() on a run of digits and dots: at most one dot and at least one digit. */
static int run_to_double(const char *s, size_t n, double *v) {
    int dots = 0, digits = 0;
    for (size_t i = 0; i < n; i++) s[i] == '.' ? dots++ : digits++;
    if (dots > 1 || digits == 0) return -1;
    char buf[64];
    if (n >= sizeof buf) {
        /* Python would parse it; so do we, past our buffer, via a heap copy */
        char *h = malloc(n + 1);
        if (!h) return -1;
        memcpy(h, s, n);
        h[n] = '\0';
        *v = strtod(h, NULL);
        free(h);
        return 0;
    }
    memcpy(buf, s, n);
    buf[n] = '\0';
    *v = strtod(buf, NULL);
    return 0;
}

int tr_split_parse(const char *text, tr_split *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    double w[TR_NSPLITS] = {0, 0, 0};
    int n = 0;
    const char *p = text;
    while (*p) {
        if (!(*p == '.' || (*p >= '0' && *p <= '9'))) {
            p++;
            continue;
        }
        const char *s = p;
        while (*p == '.' || (*p >= '0' && *p <= '9')) p++;
        if (n >= TR_NSPLITS)
            return tr_errf(err, errlen, "--split '%s' has more than three numbers (train, valid, test)", text);
        if (run_to_double(s, (size_t)(p - s), &w[n]))
            return tr_errf(err, errlen, "--split '%s': '%.*s' is not a number", text, (int)(p - s), s);
        if (!isfinite(w[n])) return tr_errf(err, errlen, "--split '%s': weights must be finite", text);
        n++;
    }
    if (n == 0) return tr_errf(err, errlen, "--split '%s' has no numbers; write e.g. --split 99,1,0", text);
    /* numpy.sum of three float64 is ((a + b) + c) */
    double sum = (w[0] + w[1]) + w[2];
    if (!(sum > 0))
        return tr_errf(err, errlen, "--split '%s' sums to zero; give at least one split a positive weight", text);
    for (int i = 0; i < TR_NSPLITS; i++) out->weight[i] = w[i] / sum;
    double b[TR_NSPLITS + 1];
    b[0] = 0.0;
    for (int i = 0; i < TR_NSPLITS; i++) b[i + 1] = b[i] + out->weight[i];
    for (int i = 0; i < TR_NSPLITS; i++) {
        out->lo[i] = b[i];
        out->hi[i] = b[i + 1];
        out->present[i] = b[i + 1] > b[i];
    }
    return 0;
}

void tr_split_range(const tr_split *sp, int s, int64_t n, int64_t *beg, int64_t *end) {
    /* int(round(x * float(n))): rint rounds half to even in the default rounding mode */
    *beg = (int64_t)rint(sp->lo[s] * (double)n);
    *end = (int64_t)rint(sp->hi[s] * (double)n);
}
