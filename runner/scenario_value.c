/* Typed reads of YAML values, with messages that say where, what was expected and what was
 * found; plus the file and path helpers the sections share. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/safe_file.h"
#include "core/text.h"
#include "scenario_internal.h"

int scenario_fail(sc_ctx *c, const scn_node *at, const char *fmt, ...) {
    if (!c->err || c->errlen == 0) return -1;
    int k = snprintf(c->err, c->errlen, "%s:%d:%d: ", c->name, at ? at->line : 1, at ? at->col : 1);
    if (k < 0 || (size_t)k >= c->errlen) return -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->err + k, c->errlen - (size_t)k, fmt, ap);
    va_end(ap);
    return -1;
}

void scenario_describe(const scn_node *v, char *out, size_t outlen) {
    if (!v || scenario_is_null(v)) snprintf(out, outlen, "nothing");
    else if (v->kind == SCN_MAP) snprintf(out, outlen, "a mapping");
    else if (v->kind == SCN_SEQ) snprintf(out, outlen, "a list");
    else snprintf(out, outlen, "'%.60s%s'", v->text, v->len > 60 ? "..." : "");
}

bool scenario_is_null(const scn_node *v) {
    if (!v) return true;
    if (v->kind != SCN_SCALAR || !v->plain) return false;
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL"};
    for (size_t i = 0; i < sizeof nulls / sizeof nulls[0]; i++)
        if (strcmp(v->text, nulls[i]) == 0) return true;
    return false;
}

int scenario_bool_value(const scn_node *v) {
    if (!v || v->kind != SCN_SCALAR || !v->plain) return -1;
    if (!strcmp(v->text, "true") || !strcmp(v->text, "True") || !strcmp(v->text, "TRUE")) return 1;
    if (!strcmp(v->text, "false") || !strcmp(v->text, "False") || !strcmp(v->text, "FALSE")) return 0;
    return -1;
}

int scenario_int_value(const scn_node *v, int64_t *out) {
    if (!v || v->kind != SCN_SCALAR || !v->plain || strlen(v->text) != v->len) return -1;
    const char *p = v->text + (v->text[0] == '-' || v->text[0] == '+');
    if (!*p) return -1;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q)) return -1;
    errno = 0;
    long long x = strtoll(v->text, NULL, 10);
    if (errno == ERANGE) return -1;
    *out = x;
    return 0;
}

int scenario_number_value(const scn_node *v, double *out) {
    if (!v || v->kind != SCN_SCALAR || !v->plain || strlen(v->text) != v->len) return -1;
    const char *t = v->text;
    /* strtod takes leading blanks, hex, "inf" and "nan"; a scenario's numbers are decimal and finite */
    if (!*t || isspace((unsigned char)*t) || strpbrk(t, "xXpP")) return -1;
    char *end;
    errno = 0;
    double d = strtod(t, &end);
    if (*end || errno == ERANGE || !isfinite(d)) return -1;
    *out = d;
    return 0;
}

int scenario_get_int(sc_ctx *c, const scn_node *v, const char *path, int64_t lo, int64_t hi, int64_t *out) {
    int64_t x;
    char got[96];
    if (scenario_int_value(v, &x)) {
        scenario_describe(v, got, sizeof got);
        return scenario_fail(c, v, "%s: expected an integer, got %s", path, got);
    }
    if (x < lo || x > hi) {
        if (hi == INT64_MAX || (hi == INT_MAX && lo >= 0))
            return scenario_fail(c, v, "%s: %lld is out of range: it must be at least %lld", path, (long long)x,
                                 (long long)lo);
        return scenario_fail(c, v, "%s: %lld is out of range: it must be in %lld-%lld", path, (long long)x,
                             (long long)lo, (long long)hi);
    }
    *out = x;
    return 0;
}

int scenario_get_u64(sc_ctx *c, const scn_node *v, const char *path, uint64_t *out) {
    char got[96];
    bool ok = v && v->kind == SCN_SCALAR && v->plain && v->len > 0 && strlen(v->text) == v->len;
    for (const char *p = ok ? v->text : ""; ok && *p; p++) ok = isdigit((unsigned char)*p);
    if (!ok) {
        scenario_describe(v, got, sizeof got);
        return scenario_fail(c, v, "%s: expected a non-negative integer, got %s", path, got);
    }
    errno = 0;
    unsigned long long x = strtoull(v->text, NULL, 10);
    if (errno == ERANGE) return scenario_fail(c, v, "%s: %s is too large (at most %llu)", path, v->text, ULLONG_MAX);
    *out = x;
    return 0;
}

int scenario_get_number(sc_ctx *c, const scn_node *v, const char *path, double *out) {
    char got[96];
    if (scenario_number_value(v, out)) {
        scenario_describe(v, got, sizeof got);
        return scenario_fail(c, v, "%s: expected a number, got %s", path, got);
    }
    return 0;
}

int scenario_get_bool(sc_ctx *c, const scn_node *v, const char *path, bool *out) {
    int b = scenario_bool_value(v);
    if (b < 0) {
        char got[96];
        scenario_describe(v, got, sizeof got);
        return scenario_fail(c, v, "%s: expected true or false, got %s", path, got);
    }
    *out = b == 1;
    return 0;
}

int scenario_get_string(sc_ctx *c, const scn_node *v, const char *path, char *out, size_t outlen, bool allow_empty) {
    char got[96];
    if (!v || v->kind != SCN_SCALAR || (scenario_is_null(v) && !(allow_empty && v->len == 0))) {
        scenario_describe(v, got, sizeof got);
        return scenario_fail(c, v, "%s: expected a string, got %s", path, got);
    }
    if (strlen(v->text) != v->len) return scenario_fail(c, v, "%s: the text holds a NUL character", path);
    if (v->len == 0 && !allow_empty) return scenario_fail(c, v, "%s: is empty: give a value", path);
    if (v->len >= outlen) return scenario_fail(c, v, "%s: %zu bytes long; at most %zu fit", path, v->len, outlen - 1);
    memcpy(out, v->text, v->len + 1);
    return 0;
}

int scenario_want_map(sc_ctx *c, const scn_node *v, const char *path) {
    if (v && v->kind == SCN_MAP) return 0;
    char got[96];
    scenario_describe(v, got, sizeof got);
    return scenario_fail(c, v, "%s: expected a mapping (key: value lines indented under it), got %s", path, got);
}

int scenario_want_seq(sc_ctx *c, const scn_node *v, const char *path) {
    if (v && v->kind == SCN_SEQ) return 0;
    char got[96];
    scenario_describe(v, got, sizeof got);
    return scenario_fail(c, v, "%s: expected a list ('- item' lines or [a, b]), got %s", path, got);
}

const char *scenario_closest(const char *s, const char *const *names) {
    size_t best = SIZE_MAX, len = strlen(s);
    const char *hit = NULL;
    for (; *names; names++) {
        size_t d = tr_edit_distance(s, strlen(s), *names, strlen(*names));
        if (d < best) best = d, hit = *names;
    }
    size_t limit = len / 3 > 2 ? len / 3 : 2;
    return best <= limit && best < len ? hit : NULL;
}

int scenario_check_keys(sc_ctx *c, const scn_node *map, const char *path, const char *const *allowed) {
    for (int i = 0; i < map->n; i++) {
        const scn_node *k = map->items[2 * i];
        bool ok = false;
        for (const char *const *a = allowed; *a && !ok; a++) ok = strlen(*a) == k->len && strcmp(*a, k->text) == 0;
        if (ok) continue;
        char list[512];
        size_t used = 0;
        list[0] = 0;
        for (const char *const *a = allowed; *a; a++) {
            int w = snprintf(list + used, sizeof list - used, "%s%s", used ? ", " : "", *a);
            if (w < 0 || (size_t)w >= sizeof list - used) break;
            used += (size_t)w;
        }
        const char *near = strlen(k->text) == k->len ? scenario_closest(k->text, allowed) : NULL;
        char where[96];
        if (path[0]) snprintf(where, sizeof where, "in %s:", path);
        else snprintf(where, sizeof where, "at the top level");
        return scenario_fail(c, k, "unknown key '%.60s' %s%s%s%s; allowed: %s", k->text, where,
                             near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "", list);
    }
    return 0;
}

int scenario_resolve_path(const char *base, const char *rel, char *out, size_t outlen) {
    char dir[SC_PATH_LEN * 2];
    if (rel[0] == '/') {
        if (strlen(rel) >= outlen) return -1;
        snprintf(out, outlen, "%s", rel);
        return 0;
    }
    const char *slash = base ? strrchr(base, '/') : NULL;
    size_t dlen = slash ? (size_t)(slash - base) : 0;
    if (slash && dlen == 0) dlen = 1; /* a file in "/" */
    if (base && base[0] == '/') {
        if (dlen >= sizeof dir) return -1;
        memcpy(dir, base, dlen);
        dir[dlen] = 0;
    } else {
        char cwd[SC_PATH_LEN];
        if (!getcwd(cwd, sizeof cwd)) return -1;
        int w = snprintf(dir, sizeof dir, "%s%s%.*s", cwd, dlen ? "/" : "", (int)dlen, base ? base : "");
        if (w < 0 || (size_t)w >= sizeof dir) return -1;
    }
    /* "./x" and "a/./b" read better without the dots in messages and manifests */
    while (rel[0] == '.' && rel[1] == '/') rel += 2;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/') dir[--dl] = 0;
    int w = snprintf(out, outlen, "%s%s%s", dir, dl == 1 && dir[0] == '/' ? "" : "/", rel);
    return w < 0 || (size_t)w >= outlen ? -1 : 0;
}

int scenario_read_file(const char *path, char **text, size_t *len, char *why, size_t whylen) {
    *text = NULL;
    *len = 0;
    FILE *f = tr_safe_fopen_regular(path, why, whylen);
    if (!f) return -1;
    struct stat st;
    /* a FIFO or device would never end or never stop: only regular files */
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whylen, "not a regular file");
        fclose(f);
        return -1;
    }
    if ((unsigned long long)st.st_size > SC_TEXT_MAX) {
        snprintf(why, whylen, "%lld bytes; at most %u are read", (long long)st.st_size, SC_TEXT_MAX);
        fclose(f);
        return -1;
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (!buf) {
        snprintf(why, whylen, "out of memory");
        fclose(f);
        return -1;
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (bad || got != n) {
        snprintf(why, whylen, "read error");
        free(buf);
        return -1;
    }
    buf[n] = 0;
    *text = buf;
    *len = n;
    return 0;
}
