/* Value conversion for one flag: strict numbers (the whole text, no junk, no overflow, finite),
 * Megatron's choices, bounded strings. */
#include "config/args_value.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/err.h"

static char *field(tr_config *cfg, const tr_flag *f) { return (char *)cfg + f->offset; }

void tr_flag_range_text(const tr_flag *f, char *buf, size_t len) {
    const tr_range *r = &f->range;
    if (r->has_min && r->has_max)
        snprintf(buf, len, "in %c%g, %g%c", r->min_open ? '(' : '[', r->min, r->max, r->max_open ? ')' : ']');
    else if (r->has_min) snprintf(buf, len, "%s %g", r->min_open ? "greater than" : "at least", r->min);
    else if (r->has_max) snprintf(buf, len, "%s %g", r->max_open ? "less than" : "at most", r->max);
    else if (len) buf[0] = 0;
}

/* The choices twinrun takes, then Megatron's choices it refuses: --help must not offer what a run refuses. */
void tr_flag_choices_text(const tr_flag *f, char *buf, size_t len) {
    size_t used = 0;
    if (len) buf[0] = 0;
    for (int refused = 0; refused < 2; refused++) {
        int listed = 0;
        for (const tr_choice *c = f->choices; c && c->name; c++) {
            if ((c->reject != NULL) != refused) continue;
            const char *sep = listed ? ", " : refused ? (used ? "; refused: " : "refused: ") : "";
            int k = snprintf(buf + used, len - used, "%s%s", sep, c->name);
            if (k < 0 || (size_t)k >= len - used) return;
            used += (size_t)k;
            listed++;
        }
    }
}

static int out_of_range(const tr_flag *f, double x) {
    const tr_range *r = &f->range;
    if (r->has_min && (r->min_open ? !(x > r->min) : !(x >= r->min))) return 1;
    if (r->has_max && (r->max_open ? !(x < r->max) : !(x <= r->max))) return 1;
    return 0;
}

static int range_error(const tr_flag *f, const char *v, char *err, size_t errlen) {
    char rt[96];
    tr_flag_range_text(f, rt, sizeof rt);
    return tr_errf(err, errlen, "invalid value for %s: '%s' (must be %s)", f->name, v, rt);
}

/* Digits with an optional sign and nothing else: what Python's int() takes, minus whitespace and '_'. */
static int is_integer_text(const char *v) {
    const char *p = v + (*v == '+' || *v == '-');
    if (!*p) return 0;
    for (; *p; p++)
        if (!isdigit((unsigned char)*p)) return 0;
    return 1;
}

static int store_integer(tr_config *cfg, const tr_flag *f, const char *v, char *err, size_t errlen) {
    if (!is_integer_text(v)) return tr_errf(err, errlen, "invalid value for %s: '%s' is not an integer", f->name, v);
    errno = 0;
    if (f->kind == TR_K_U64) {
        if (v[0] == '-') return range_error(f, v, err, errlen);
        unsigned long long u = strtoull(v, NULL, 10);
        if (errno == ERANGE)
            return tr_errf(err, errlen, "invalid value for %s: '%s' is too large (at most %llu)", f->name, v,
                           ULLONG_MAX);
        if (out_of_range(f, (double)u)) return range_error(f, v, err, errlen);
        uint64_t x = u;
        if (f->has_field) memcpy(field(cfg, f), &x, sizeof x);
        return 0;
    }
    long long x = strtoll(v, NULL, 10);
    long long lo = f->kind == TR_K_INT ? INT_MIN : LLONG_MIN, hi = f->kind == TR_K_INT ? INT_MAX : LLONG_MAX;
    if (errno == ERANGE || x < lo || x > hi)
        return tr_errf(err, errlen, "invalid value for %s: '%s' is out of range (at most %lld)", f->name, v, hi);
    if (out_of_range(f, (double)x)) return range_error(f, v, err, errlen);
    if (!f->has_field) return 0;
    if (f->kind == TR_K_INT) {
        int i = (int)x;
        memcpy(field(cfg, f), &i, sizeof i);
    } else {
        int64_t i = x;
        memcpy(field(cfg, f), &i, sizeof i);
    }
    return 0;
}

static int store_double(tr_config *cfg, const tr_flag *f, const char *v, char *err, size_t errlen) {
    /* strtod would also take hex floats, "inf", "nan" and leading blanks; Megatron's float() takes
     * some of those, but none is a sensible hyperparameter. */
    if (!*v || isspace((unsigned char)v[0]) || strpbrk(v, "xXnNiI"))
        return tr_errf(err, errlen, "invalid value for %s: '%s' is not a number", f->name, v);
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (end == v || *end) return tr_errf(err, errlen, "invalid value for %s: '%s' is not a number", f->name, v);
    if (errno == ERANGE || !isfinite(x))
        return tr_errf(err, errlen, "invalid value for %s: '%s' is out of the range of a double", f->name, v);
    if (out_of_range(f, x)) return range_error(f, v, err, errlen);
    if (f->has_field) memcpy(field(cfg, f), &x, sizeof x);
    return 0;
}

static int store_string(tr_config *cfg, const tr_flag *f, const char *v, char *err, size_t errlen) {
    size_t n = strlen(v);
    if (f->has_field && n >= f->size)
        return tr_errf(err, errlen, "value of %s is %zu bytes long; at most %zu fit", f->name, n, f->size - 1);
    if (f->check && f->check(f->name, v, err, errlen)) return -1;
    if (f->has_field) memcpy(field(cfg, f), v, n + 1);
    return 0;
}

static int store_enum(tr_config *cfg, const tr_flag *f, const char *v, char *err, size_t errlen) {
    for (const tr_choice *c = f->choices; c && c->name; c++) {
        if (strcmp(c->name, v) != 0) continue;
        if (c->reject) return tr_errf(err, errlen, "%s %s: %s", f->name, v, c->reject);
        if (!f->has_field) return 0;
        if (f->enum_as_string) {
            size_t n = strlen(c->name);
            if (n >= f->size) return tr_errf(err, errlen, "%s: '%s' does not fit", f->name, v);
            memcpy(field(cfg, f), c->name, n + 1);
        } else {
            memcpy(field(cfg, f), &c->value, sizeof c->value);
        }
        return 0;
    }
    char choices[512];
    tr_flag_choices_text(f, choices, sizeof choices);
    return tr_errf(err, errlen, "invalid value for %s: '%s' (choose from %s)", f->name, v, choices);
}

int tr_flag_store_value(tr_config *cfg, const tr_flag *f, const char *v, char *err, size_t errlen) {
    switch (f->kind) {
    case TR_K_INT:
    case TR_K_INT64:
    case TR_K_U64: return store_integer(cfg, f, v, err, errlen);
    case TR_K_DOUBLE: return store_double(cfg, f, v, err, errlen);
    case TR_K_STRING: return store_string(cfg, f, v, err, errlen);
    case TR_K_ENUM: return store_enum(cfg, f, v, err, errlen);
    default: return tr_errf(err, errlen, "%s: internal error: kind %d has no single value", f->name, (int)f->kind);
    }
}
