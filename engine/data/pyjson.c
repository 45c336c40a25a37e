/* Python json.dumps(indent=4) text (see pyjson.h). */
#include "data/pyjson.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

void tr_pyjson_init(tr_pyjson *j) { memset(j, 0, sizeof *j); }
void tr_pyjson_free(tr_pyjson *j) {
    free(j->buf);
    memset(j, 0, sizeof *j);
}

static void put(tr_pyjson *j, const char *s, size_t n) {
    if (j->failed) return;
    if (j->len + n + 1 > j->cap) {
        size_t nc = j->cap ? j->cap : 256;
        while (nc < j->len + n + 1) nc *= 2;
        char *nb = realloc(j->buf, nc);
        if (!nb) {
            j->failed = 1;
            return;
        }
        j->buf = nb;
        j->cap = nc;
    }
    memcpy(j->buf + j->len, s, n);
    j->len += n;
    j->buf[j->len] = '\0';
}
static void puts_(tr_pyjson *j, const char *s) { put(j, s, strlen(s)); }

static void newline_indent(tr_pyjson *j, int depth) {
    puts_(j, "\n");
    for (int i = 0; i < depth; i++) puts_(j, "    ");
}

/* Separator and indentation before a value (or a key) inside the current container. */
static void before_item(tr_pyjson *j) {
    if (j->after_key) {
        j->after_key = 0;
        return;
    }
    if (j->depth == 0) return;
    if (j->items[j->depth - 1]++ > 0) puts_(j, ",");
    newline_indent(j, j->depth);
}

static void open_(tr_pyjson *j, const char *c) {
    before_item(j);
    puts_(j, c);
    if (j->depth >= TR_PYJSON_MAX_DEPTH) {
        j->failed = 1;
        return;
    }
    j->items[j->depth++] = 0;
}
static void close_(tr_pyjson *j, const char *c) {
    if (j->depth == 0) {
        j->failed = 1;
        return;
    }
    int had = j->items[--j->depth];
    if (had) newline_indent(j, j->depth);
    puts_(j, c);
}
void tr_pyjson_obj_begin(tr_pyjson *j) { open_(j, "{"); }
void tr_pyjson_obj_end(tr_pyjson *j) { close_(j, "}"); }
void tr_pyjson_arr_begin(tr_pyjson *j) { open_(j, "["); }
void tr_pyjson_arr_end(tr_pyjson *j) { close_(j, "]"); }

static void quoted(tr_pyjson *j, const char *s) {
    puts_(j, "\"");
    const unsigned char *p = (const unsigned char *)s;
    char tmp[16];
    while (*p) {
        unsigned c = *p;
        if (c == '"') puts_(j, "\\\""), p++;
        else if (c == '\\') puts_(j, "\\\\"), p++;
        else if (c == '\n') puts_(j, "\\n"), p++;
        else if (c == '\r') puts_(j, "\\r"), p++;
        else if (c == '\t') puts_(j, "\\t"), p++;
        else if (c == '\b') puts_(j, "\\b"), p++;
        else if (c == '\f') puts_(j, "\\f"), p++;
        else if (c < 0x20) snprintf(tmp, sizeof tmp, "\\u%04x", c), puts_(j, tmp), p++;
        else if (c < 0x80) put(j, (const char *)p++, 1);
        else {
            /* ensure_ascii: decode UTF-8, write \uXXXX (surrogate pairs above the BMP);
             * a byte that does not start a valid sequence is written as its code point */
            unsigned cp = c, n = 0;
            if ((c & 0xe0) == 0xc0) cp = c & 0x1f, n = 1;
            else if ((c & 0xf0) == 0xe0) cp = c & 0x0f, n = 2;
            else if ((c & 0xf8) == 0xf0) cp = c & 0x07, n = 3;
            unsigned k = 1;
            for (; k <= n; k++) {
                if ((p[k] & 0xc0) != 0x80) break;
                cp = cp << 6 | (p[k] & 0x3f);
            }
            if (n == 0 || k <= n) cp = c, n = 0;
            p += n + 1;
            if (cp >= 0x10000) {
                cp -= 0x10000;
                snprintf(tmp, sizeof tmp, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
            } else {
                snprintf(tmp, sizeof tmp, "\\u%04x", cp);
            }
            puts_(j, tmp);
        }
    }
    puts_(j, "\"");
}

void tr_pyjson_key(tr_pyjson *j, const char *key) {
    before_item(j);
    quoted(j, key);
    puts_(j, ": ");
    j->after_key = 1;
}
void tr_pyjson_str(tr_pyjson *j, const char *s) {
    if (!s) {
        tr_pyjson_null(j);
        return;
    }
    before_item(j);
    quoted(j, s);
}
void tr_pyjson_int(tr_pyjson *j, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%lld", (long long)v);
    before_item(j);
    puts_(j, b);
}
void tr_pyjson_float(tr_pyjson *j, double v) {
    char b[40];
    tr_pyjson_float_repr(v, b, sizeof b);
    before_item(j);
    puts_(j, b);
}
void tr_pyjson_null(tr_pyjson *j) {
    before_item(j);
    puts_(j, "null");
}
void tr_pyjson_bool(tr_pyjson *j, int v) {
    before_item(j);
    puts_(j, v ? "true" : "false");
}

static void emit(tr_pyjson *j, const cJSON *v) {
    if (cJSON_IsObject(v)) {
        tr_pyjson_obj_begin(j);
        for (const cJSON *c = v->child; c; c = c->next) {
            tr_pyjson_key(j, c->string);
            emit(j, c);
        }
        tr_pyjson_obj_end(j);
    } else if (cJSON_IsArray(v)) {
        tr_pyjson_arr_begin(j);
        for (const cJSON *c = v->child; c; c = c->next) emit(j, c);
        tr_pyjson_arr_end(j);
    } else if (cJSON_IsString(v)) {
        tr_pyjson_str(j, v->valuestring);
    } else if (cJSON_IsBool(v)) {
        tr_pyjson_bool(j, cJSON_IsTrue(v));
    } else if (cJSON_IsNumber(v)) {
        /* integral values within double's exact range print as ints (cJSON keeps no literal) */
        double d = v->valuedouble;
        if (d == floor(d) && fabs(d) < 9007199254740992.0) tr_pyjson_int(j, (int64_t)d);
        else tr_pyjson_float(j, d);
    } else {
        tr_pyjson_null(j);
    }
}

int tr_pyjson_raw(tr_pyjson *j, const char *json_text) {
    cJSON *v = cJSON_Parse(json_text);
    if (!v) return -1;
    emit(j, v);
    cJSON_Delete(v);
    return 0;
}

void tr_pyjson_float_repr(double v, char *out, size_t cap) {
    if (isnan(v)) {
        snprintf(out, cap, "NaN"); /* json.dumps spelling */
        return;
    }
    if (isinf(v)) {
        snprintf(out, cap, v > 0 ? "Infinity" : "-Infinity");
        return;
    }
    /* shortest round-trip digits, via %.*e */
    char e[40];
    int prec;
    for (prec = 0; prec < 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec, v);
        if (strtod(e, NULL) == v) break;
    }
    if (prec == 17) snprintf(e, sizeof e, "%.16e", v);
    /* split e into sign, digits and exponent */
    const char *p = e;
    int neg = 0;
    if (*p == '-') neg = 1, p++;
    char digits[24];
    int nd = 0;
    for (; *p && *p != 'e'; p++)
        if (*p != '.') digits[nd++] = *p;
    digits[nd] = '\0';
    int exp10 = atoi(p + 1);
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = '\0';
    char r[64];
    size_t n = 0;
    if (neg) r[n++] = '-';
    if (exp10 >= 16 || exp10 < -4) {
        /* Python's repr switches to exponent notation outside 1e-4 <= |v| < 1e16 */
        r[n++] = digits[0];
        if (nd > 1) {
            r[n++] = '.';
            for (int i = 1; i < nd; i++) r[n++] = digits[i];
        }
        n += (size_t)snprintf(r + n, sizeof r - n, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        r[n++] = '0';
        r[n++] = '.';
        for (int i = 0; i < -exp10 - 1; i++) r[n++] = '0';
        for (int i = 0; i < nd; i++) r[n++] = digits[i];
    } else {
        for (int i = 0; i <= exp10; i++) r[n++] = i < nd ? digits[i] : '0';
        r[n++] = '.';
        if (nd > exp10 + 1)
            for (int i = exp10 + 1; i < nd; i++) r[n++] = digits[i];
        else r[n++] = '0';
    }
    r[n] = '\0';
    snprintf(out, cap, "%s", r);
}
