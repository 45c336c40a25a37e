#include "core/text.h"

#include <stdlib.h>

size_t tr_edit_distance(const char *a, size_t la, const char *b, size_t lb) {
    size_t row[TR_EDIT_MAX + 1];
    if (la > TR_EDIT_MAX) la = TR_EDIT_MAX;
    if (lb > TR_EDIT_MAX) lb = TR_EDIT_MAX;
    for (size_t j = 0; j <= lb; j++) row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

bool tr_looks_like_flag(const char *t) {
    if (t[0] != '-' || t[1] == 0) return false;
    if (t[1] == '-') return true;
    char *end;
    if ((t[1] >= '0' && t[1] <= '9') || t[1] == '.') {
        (void)strtod(t, &end);
        if (*end == 0) return false;
    }
    return true;
}
