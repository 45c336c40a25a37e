/* tr_errlist: several configuration errors reported together (see twinrun/err.h). */
#include <stdio.h>
#include <string.h>

#include "twinrun/err.h"

void tr_errlist_init(tr_errlist *el) {
    el->n = 0;
    el->len = 0;
    el->text[0] = 0;
}

int tr_errlist_add(tr_errlist *el, const char *fmt, ...) {
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line - 1, fmt, ap);
    va_end(ap);
    /* the list is printed line by line: a message never spans lines */
    for (char *p = line; *p; p++)
        if (*p == '\n') *p = ' ';
    strcat(line, "\n");
    size_t n = strlen(line);
    for (const char *p = el->text; (p = strstr(p, line)) != NULL; p++)
        if (p == el->text || p[-1] == '\n') return -1; /* the same problem found twice is one problem */
    el->n++;
    if (el->len + n < sizeof el->text) {
        memcpy(el->text + el->len, line, n + 1);
        el->len += n;
    }
    return -1;
}

int tr_errlist_format(const tr_errlist *el, char *err, size_t errlen) {
    if (el->n == 0) return 0;
    if (!err || errlen == 0) return -1;
    if (el->n == 1) {
        snprintf(err, errlen, "%.*s", el->len > 0 ? (int)el->len - 1 : 0, el->text);
        return -1;
    }
    size_t used = (size_t)snprintf(err, errlen, "%d problems in the configuration:", el->n);
    for (const char *p = el->text; *p && used + 1 < errlen;) {
        const char *nl = strchr(p, '\n');
        int k = snprintf(err + used, errlen - used, "\n  %.*s", (int)(nl - p), p);
        if (k < 0) break;
        used += (size_t)k;
        p = nl + 1;
    }
    return -1;
}
