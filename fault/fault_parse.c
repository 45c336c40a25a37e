/* The compact plan syntax of TWINRUN_FAULTS: "kind@step:key=value,...;kind@step:...".
 * Strict, because a fault plan that silently drops a key tests less than it claims. */
#include <ctype.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fault.h"
#include "fault_keys.h"
#include "twinrun/err.h"

/* [b, e) with ASCII blanks trimmed on both ends. */
static void trim(const char **b, const char **e) {
    while (*b < *e && (**b == ' ' || **b == '\t')) (*b)++;
    while (*e > *b && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
}

/* Copies [b, e) into a NUL-terminated buffer; -1 when it does not fit. */
static int copy_span(char *out, size_t outlen, const char *b, const char *e) {
    size_t n = (size_t)(e - b);
    if (n >= outlen) return -1;
    memcpy(out, b, n);
    out[n] = 0;
    return 0;
}

static const char *span_end(const char *b, const char *e, char c) {
    const void *p = memchr(b, c, (size_t)(e - b));
    return p ? p : e;
}

/* One fault "kind[@step][:k=v,...]" from [b, e); idx is 1-based for messages. */
static int parse_one(const char *b, const char *e, int idx, int world, int gpn, fault_spec *f, char *err,
                     size_t errlen) {
    char item[72], kind[40], msg[384];
    snprintf(item, sizeof item, "%.*s%s", (int)(e - b > 60 ? 60 : e - b), b, e - b > 60 ? "..." : "");
    const char *colon = span_end(b, e, ':');
    const char *at = span_end(b, colon, '@');
    const char *kb = b, *ke = at;
    trim(&kb, &ke);
    if (kb == ke)
        return tr_errf(err, errlen, "fault %d ('%s'): no kind: start with one of hang, crash, nan, ...", idx, item);
    if (copy_span(kind, sizeof kind, kb, ke) || fault_kind_from_name(kind) < 0)
        return tr_errf(err, errlen,
                       "fault %d ('%s'): unknown kind '%.*s': use hang, crash, node_crash, nan, straggler, "
                       "coll_mismatch, ckpt_enospc, ckpt_crash, ckpt_corrupt, data_corrupt, oom, short_node, "
                       "version_skew, preempt, data_stall, slow_link or hidden_dir",
                       idx, item, (int)(ke - kb > 40 ? 40 : ke - kb), kb);
    fault_kind k = (fault_kind)fault_kind_from_name(kind);
    fault_spec_default(f, k);

    if (at < colon) {
        const char *sb = at + 1, *se = colon;
        trim(&sb, &se);
        char step[24];
        bool digits = sb < se;
        for (const char *p = sb; p < se; p++) digits = digits && isdigit((unsigned char)*p);
        errno = 0;
        long long v = digits && !copy_span(step, sizeof step, sb, se) ? strtoll(step, NULL, 10) : -1;
        if (!digits || v < 0 || errno == ERANGE)
            return tr_errf(err, errlen, "fault %d ('%s'): step '%.*s' is not a whole number: write %s@N", idx, item,
                           (int)(se - sb > 24 ? 24 : se - sb), sb, kind);
        f->step = v;
    } else if (!fault_kind_is_startup(k)) {
        return tr_errf(err, errlen, "fault %d ('%s'): %s needs @step, the iteration it fires at (e.g. %s@3:rank=0)",
                       idx, item, kind, kind);
    }

    unsigned given = 0;
    if (colon < e) {
        const char *p = colon + 1;
        const char *pe = e;
        trim(&p, &pe);
        if (p == pe)
            return tr_errf(err, errlen, "fault %d ('%s'): nothing after ':': give key=value pairs or drop the ':'", idx,
                           item);
        for (;;) {
            const char *q = span_end(p, pe, ',');
            const char *eq = span_end(p, q, '=');
            const char *nb = p, *ne = eq;
            trim(&nb, &ne);
            char key[24], val[FAULT_PATH_LEN];
            if (nb == ne)
                return tr_errf(err, errlen,
                               "fault %d ('%s'): empty key at '%.*s': write key=value pairs separated by ','", idx,
                               item, (int)(q - p > 24 ? 24 : q - p), p);
            int kk = copy_span(key, sizeof key, nb, ne) ? -1 : fault_key_from_name(key);
            if (kk < 0) {
                const char *s = ne - nb < (long)sizeof key ? fault_key_suggest(key) : NULL;
                return tr_errf(err, errlen, "fault %d ('%s'): unknown key '%.*s'%s%s%s; keys: %s", idx, item,
                               (int)(ne - nb > 24 ? 24 : ne - nb), nb, s ? "; did you mean '" : "", s ? s : "",
                               s ? "'?" : "", fault_key_list());
            }
            if (eq == q)
                return tr_errf(err, errlen, "fault %d ('%s'): key '%s' has no value: write %s=VALUE", idx, item, key,
                               key);
            if (given & (1u << kk))
                return tr_errf(err, errlen, "fault %d ('%s'): key '%s' given twice", idx, item, key);
            given |= 1u << kk;
            if (!fault_key_applies(k, (fault_key)kk)) {
                char ks[128];
                fault_kind_keys_text(k, ks, sizeof ks);
                return tr_errf(err, errlen, "fault %d ('%s'): key '%s' does not apply to %s (it takes: %s)", idx, item,
                               key, kind, ks);
            }
            const char *vb = eq + 1, *ve = q;
            trim(&vb, &ve);
            if (copy_span(val, sizeof val, vb, ve))
                return tr_errf(err, errlen, "fault %d ('%s'): key '%s': value longer than %zu bytes", idx, item, key,
                               sizeof val - 1);
            if (fault_spec_set(f, (fault_key)kk, val, msg, sizeof msg))
                return tr_errf(err, errlen, "fault %d ('%s'): %s", idx, item, msg);
            if (q == pe) break;
            p = q + 1;
        }
    }
    if (fault_spec_check(f, world, gpn, msg, sizeof msg))
        return tr_errf(err, errlen, "fault %d ('%s'): %s", idx, item, msg);
    fault_spec_normalize(f, given, gpn);
    return 0;
}

int fault_plan_parse(const char *text, int world, int gpus_per_node, fault_plan *out, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!out) return tr_errf(err, errlen, "fault_plan_parse: no plan");
    memset(out, 0, sizeof *out);
    out->gpus_per_node = gpus_per_node;
    if (gpus_per_node <= 0 || world <= 0 || world % gpus_per_node != 0)
        return tr_errf(err, errlen, "fault plan: a world of %d ranks is not whole nodes of %d GPUs", world,
                       gpus_per_node);
    if (!text) return 0;
    const char *b = text, *e = text + strlen(text);
    trim(&b, &e);
    if (b == e) return 0; /* TWINRUN_FAULTS="" is no faults, as an unset variable is */

    size_t n = 1;
    for (const char *p = b; p < e; p++) n += *p == ';';
    if (n > FAULT_PLAN_MAX)
        return tr_errf(err, errlen, "fault plan: %zu faults; at most %d fit in one plan", n, FAULT_PLAN_MAX);
    if (fault_plan_init(out, (int)n, gpus_per_node)) return tr_errf(err, errlen, "fault plan: out of memory");
    int idx = 0;
    for (const char *p = b;;) {
        const char *q = span_end(p, e, ';');
        const char *ib = p, *ie = q;
        trim(&ib, &ie);
        if (ib == ie) {
            fault_plan_free(out);
            return tr_errf(err, errlen, "fault %d is empty: remove the extra ';'", idx + 1);
        }
        if (parse_one(ib, ie, idx + 1, world, gpus_per_node, &out->faults[idx], err, errlen)) {
            fault_plan_free(out);
            return -1;
        }
        idx++;
        if (q == e) break;
        p = q + 1;
    }
    return 0;
}
