/* OpenMPI hostfiles, as the seeds' launch scripts use them (read by scenarios and by the doctor): "train-node-000 slots=8" per line,
 * '#' comments, blank lines. Checked strictly, because a hostfile whose slots do not add up to
 * the world size is the first thing that goes wrong on a new cluster. */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launch/hostfile.h"
#include "twinrun/err.h"

#define HOST_SLOTS_MAX 65536

static bool host_char(int ch) { return isalnum(ch) || ch == '.' || ch == '-' || ch == '_' || ch == ':'; }

/* "slots=8" -> 8; -1 when the value is not a whole number in 1..HOST_SLOTS_MAX. */
static long slot_value(const char *v, size_t n) {
    if (n == 0 || n > 6) return -1;
    long x = 0;
    for (size_t i = 0; i < n; i++) {
        if (!isdigit((unsigned char)v[i])) return -1;
        x = x * 10 + (v[i] - '0');
    }
    return x >= 1 && x <= HOST_SLOTS_MAX ? x : -1;
}

typedef struct hostfile_line {
    const char *name;
    size_t name_len;
    long slots, max_slots;
} hostfile_line;

/* One line without its comment: [b, e). 1 = a host, 0 = blank, -1 = error in err. */
static int parse_line(const char *b, const char *e, const char *file, int line, hostfile_line *h, char *err,
                      size_t errlen) {
    h->name = NULL;
    h->name_len = 0;
    h->slots = 1; /* OpenMPI counts a host without slots= as one slot */
    h->max_slots = 0;
    bool seen_slots = false, seen_max = false;
    for (const char *p = b;;) {
        while (p < e && isspace((unsigned char)*p)) p++;
        if (p == e) break;
        const char *t = p;
        while (p < e && !isspace((unsigned char)*p)) p++;
        size_t n = (size_t)(p - t);
        if (!h->name) {
            for (size_t i = 0; i < n; i++)
                if (!host_char((unsigned char)t[i]) || t[i] == '=')
                    return tr_errf(err, errlen, "%s:%d: '%.*s' is not a host name: letters, digits and .-_: only", file,
                                   line, (int)(n > 60 ? 60 : n), t);
            if (n >= TR_HOST_NAME_LEN)
                return tr_errf(err, errlen, "%s:%d: host name is %zu characters; at most %d fit", file, line, n,
                               TR_HOST_NAME_LEN - 1);
            h->name = t;
            h->name_len = n;
            continue;
        }
        const char *eq = memchr(t, '=', n);
        size_t kl = eq ? (size_t)(eq - t) : n;
        bool is_slots = kl == 5 && memcmp(t, "slots", 5) == 0;
        bool is_max = kl == 9 && (memcmp(t, "max_slots", 9) == 0 || memcmp(t, "max-slots", 9) == 0);
        if (!eq || (!is_slots && !is_max))
            return tr_errf(err, errlen, "%s:%d: unexpected '%.*s': a host line is 'HOST slots=N [max_slots=N]'", file,
                           line, (int)(n > 60 ? 60 : n), t);
        if ((is_slots && seen_slots) || (is_max && seen_max))
            return tr_errf(err, errlen, "%s:%d: %.*s given twice", file, line, (int)kl, t);
        long v = slot_value(eq + 1, (size_t)(p - eq - 1));
        if (v < 0)
            return tr_errf(err, errlen, "%s:%d: %.*s: '%.*s' is not a whole number of slots in 1-%d", file, line,
                           (int)kl, t, (int)((size_t)(p - eq - 1) > 20 ? 20 : (size_t)(p - eq - 1)), eq + 1,
                           HOST_SLOTS_MAX);
        if (is_slots) h->slots = v, seen_slots = true;
        else h->max_slots = v, seen_max = true;
    }
    if (!h->name) return 0;
    if (seen_max && h->max_slots < h->slots)
        return tr_errf(err, errlen, "%s:%d: max_slots=%ld is below slots=%ld: OpenMPI would refuse it", file, line,
                       h->max_slots, h->slots);
    return 1;
}

static int by_name_then_line(const void *a, const void *b) {
    const tr_host *x = *(const tr_host *const *)a, *y = *(const tr_host *const *)b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->line > y->line) - (x->line < y->line);
}

/* OpenMPI would merge a host listed twice, but the seeds' checks count lines as nodes, so a
 * repeated line is a copy-paste slip that skews the world size: refused. Sorted, so a 65536-host
 * file costs n log n; the earliest repeated line is reported. */
static int find_duplicate(tr_host *hs, int n, const char *file, char *err, size_t errlen) {
    const tr_host **idx = malloc((size_t)n * sizeof *idx);
    if (!idx) return tr_errf(err, errlen, "%s: out of memory", file);
    for (int i = 0; i < n; i++) idx[i] = &hs[i];
    qsort(idx, (size_t)n, sizeof *idx, by_name_then_line);
    const tr_host *first = NULL, *again = NULL;
    for (int i = 1; i < n; i++)
        if (strcmp(idx[i - 1]->name, idx[i]->name) == 0 && (!again || idx[i]->line < again->line))
            first = idx[i - 1], again = idx[i];
    free(idx);
    if (!again) return 0;
    return tr_errf(err, errlen,
                   "%s:%d: host %s is listed again (first on line %d): give each host one line with all its "
                   "slots",
                   file, again->line, again->name, first->line);
}

int tr_launch_hostfile_parse(const char *text, size_t len, const char *name, tr_host **hosts, int *nhosts, char *err,
                             size_t errlen) {
    const char *file = name ? name : "<hostfile>";
    *hosts = NULL;
    *nhosts = 0;
    if (len > TR_HOSTFILE_TEXT_MAX)
        return tr_errf(err, errlen, "%s:1: %zu bytes; a hostfile has at most %u", file, len, TR_HOSTFILE_TEXT_MAX);
    int cap = 0, n = 0, line = 0;
    tr_host *hs = NULL;
    const char *p = text, *end = text + len;
    while (p < end) {
        line++;
        const char *eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol) eol = end;
        const char *hash = memchr(p, '#', (size_t)(eol - p));
        const char *nul = memchr(p, '\0', (size_t)(eol - p));
        hostfile_line h;
        int rc = -1;
        if (nul) tr_errf(err, errlen, "%s:%d: a NUL byte: a hostfile is text", file, line);
        else rc = parse_line(p, hash ? hash : eol, file, line, &h, err, errlen);
        if (rc < 0) goto fail;
        p = eol + (eol < end);
        if (rc == 0) continue;
        if (n >= TR_HOSTFILE_HOSTS_MAX) {
            tr_errf(err, errlen, "%s:%d: more than %d hosts", file, line, TR_HOSTFILE_HOSTS_MAX);
            goto fail;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            tr_host *grown = realloc(hs, (size_t)cap * sizeof *hs);
            if (!grown) {
                tr_errf(err, errlen, "%s:%d: out of memory", file, line);
                goto fail;
            }
            hs = grown;
        }
        memset(&hs[n], 0, sizeof hs[n]);
        memcpy(hs[n].name, h.name, h.name_len);
        hs[n].slots = (int)h.slots;
        hs[n].line = line;
        n++;
    }
    if (n == 0) {
        tr_errf(err, errlen, "%s:%d: no hosts: write one 'HOST slots=N' line per node", file, line > 0 ? line : 1);
        goto fail;
    }
    if (find_duplicate(hs, n, file, err, errlen)) goto fail;
    *hosts = hs;
    *nhosts = n;
    return 0;
fail:
    free(hs);
    return -1;
}
