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

/* Length of the well-formed UTF-8 sequence at c, or 0: the document says UTF-8, and one stray
 * byte from a diagnosis would make a CI's parser reject the whole report. */
static int utf8_len(const unsigned char *c) {
    const int n = *c >= 0xC2 && *c <= 0xDF ? 2 : *c >= 0xE0 && *c <= 0xEF ? 3 : *c >= 0xF0 && *c <= 0xF4 ? 4 : 0;
    for (int i = 1; i < n; i++)
        if ((c[i] & 0xC0) != 0x80) return 0;
    return n;
}

void tr_xml_text(FILE *f, const char *s, bool attribute) {
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c >= 0x80) {
            const int n = utf8_len(c);
            if (n == 0) {
                fputc('?', f);
                continue;
            }
            fwrite(c, 1, (size_t)n, f);
            c += n - 1;
            continue;
        }
        switch (*c) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        case '\n': fputs(attribute ? "&#10;" : "\n", f); break;
        case '\t': fputs(attribute ? "&#9;" : "\t", f); break;
        default:
            if (*c >= 0x20 && *c != 0x7f) fputc(*c, f);
        }
    }
}
