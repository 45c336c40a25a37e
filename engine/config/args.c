/* tr_config_parse: Megatron-LM's command line into tr_config, driven by the flag table
 * (flags_table.c). argparse's rules as Megatron uses them: exact names (no abbreviations),
 * "--flag value" and "--flag=value", bool flags take no value, a repeated flag keeps its last
 * value, a list flag takes every token up to the next one starting with "--". Never exits. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/args_value.h"
#include "config/flags.h"
#include "core/text.h"
#include "twinrun/err.h"

static bool is_number(const char *t) {
    char *end;
    if (!*t) return false;
    double x = strtod(t, &end);
    (void)x;
    return *end == 0;
}

/* Megatron's blend list: one prefix; prefixes; or weight prefix pairs (all weights, or none). */
static int check_data_path(const tr_config *cfg, const char *flag, char *err, size_t errlen) {
    int n = cfg->n_data_path, weights = 0;
    if (n == 1) return 0;
    for (int i = 0; i < n; i += 2) weights += is_number(cfg->data_path[i]);
    if (n % 2 == 1) {
        for (int i = 0; i < n; i++)
            if (is_number(cfg->data_path[i]))
                return tr_errf(err, errlen,
                               "%s: %d values and '%s' looks like a weight; give weight prefix pairs "
                               "(0.3 A 0.7 B) or only prefixes (A B)",
                               flag, n, cfg->data_path[i]);
        return 0;
    }
    if (weights == 0) return 0;
    if (weights != n / 2)
        return tr_errf(err, errlen,
                       "%s mixes weights and prefixes; give weight prefix pairs (0.3 A 0.7 B) or only "
                       "prefixes (A B)",
                       flag);
    double sum = 0;
    for (int i = 0; i < n; i += 2) {
        double w = strtod(cfg->data_path[i], NULL);
        if (!(w >= 0) || w > 1e300)
            return tr_errf(err, errlen, "%s: weight '%s' must be a finite number >= 0", flag, cfg->data_path[i]);
        sum += w;
    }
    if (!(sum > 0)) return tr_errf(err, errlen, "%s: the weights add up to 0; give at least one positive weight", flag);
    return 0;
}

/* Consumes the values of a list flag starting at argv[*i + 1] (or the one after '='). */
static int parse_list(tr_config *cfg, const tr_flag *f, const char *eq_value, int argc, char **argv, int *i, char *err,
                      size_t errlen) {
    int n = 0;
    if (f->has_field) cfg->n_data_path = 0; /* a repeated --data-path replaces the list, as argparse does */
    for (;;) {
        const char *v;
        if (eq_value) {
            if (n == 1) break; /* --flag=value carries exactly one value */
            v = eq_value;
        } else {
            if (*i + 1 >= argc || !argv[*i + 1] || strncmp(argv[*i + 1], "--", 2) == 0) break;
            v = argv[++*i];
        }
        if (f->check && f->check(f->name, v, err, errlen)) return -1;
        if (f->has_field) {
            if (n >= TR_MAX_PATHS) return tr_errf(err, errlen, "%s takes at most %d values", f->name, TR_MAX_PATHS);
            size_t len = strlen(v);
            if (len >= TR_PATH_LEN)
                return tr_errf(err, errlen, "%s: value is %zu bytes long; at most %d fit", f->name, len,
                               TR_PATH_LEN - 1);
            if (len == 0) return tr_errf(err, errlen, "%s: empty value", f->name);
            memcpy(cfg->data_path[n], v, len + 1);
            cfg->n_data_path = n + 1;
        }
        n++;
    }
    if (n == 0) return tr_errf(err, errlen, "%s needs at least one value (%s)", f->name, f->metavar);
    return f->has_field ? check_data_path(cfg, f->name, err, errlen) : 0;
}

static int unknown_flag(const char *a, size_t len, char *err, size_t errlen) {
    const char *why = tr_megatron_flag_unsupported(a, len);
    if (why)
        return tr_errf(err, errlen, "%.*s: a Megatron-LM flag that twinrun does not support (%s)", (int)len, a, why);
    const tr_flag *s = tr_flag_suggest(a, len);
    if (s) return tr_errf(err, errlen, "unknown flag %.*s; did you mean %s?", (int)len, a, s->name);
    return tr_errf(err, errlen, "unknown flag %.*s; see --help for the flags twinrun knows", (int)len, a);
}

/* A Megatron flag twinrun refuses: said as such, with the reason. A flag Megatron itself dropped says so. */
static int tr_flag_refuse(const tr_flag *f, char *err, size_t errlen) {
    if (strstr(f->reason, "is gone from Megatron")) return tr_errf(err, errlen, "%s: %s", f->name, f->reason);
    return tr_errf(err, errlen, "%s: a Megatron-LM flag that twinrun does not support (%s)", f->name, f->reason);
}

static const tr_flag *seen_flag(const unsigned char *seen, const char *name) {
    size_t n;
    const tr_flag *t = tr_flags(&n), *f = tr_flag_find(name, strlen(name));
    return f && seen[f - t] ? f : NULL;
}

/* What Megatron changes or assumes silently once all flags are in; twinrun does the same, aloud. */
static void after_parse(tr_config *cfg, const unsigned char *seen) {
    if (cfg->sequence_parallel && cfg->tensor_model_parallel_size == 1) {
        cfg->sequence_parallel = false;
        tr_config_warn(cfg, "--sequence-parallel turned off: it needs --tensor-model-parallel-size > 1 "
                            "(Megatron does the same)");
    }
    if (cfg->n_data_path > 0 && !seen_flag(seen, "--split"))
        tr_config_warn(cfg, "--data-path without --split: using Megatron's legacy default --split '%s'", cfg->split);
    if (seen_flag(seen, "--num-query-groups") && !cfg->group_query_attention)
        tr_config_warn(cfg,
                       "--num-query-groups %d ignored without --group-query-attention (every head gets its own "
                       "K/V, as in Megatron); add --group-query-attention for GQA",
                       cfg->num_query_groups);
    if (cfg->group_query_attention && cfg->num_query_groups == 0 && !cfg->hf_load[0])
        tr_config_warn(cfg, "--group-query-attention without --num-query-groups: Megatron's default is 1 group "
                            "(multi-query attention); Llama 3 uses --num-query-groups 8");
}

int tr_config_parse(tr_config *cfg, int argc, char **argv, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (!cfg) return tr_errf(err, errlen, "tr_config_parse: no config");
    if (argc < 0 || (argc > 0 && !argv)) return tr_errf(err, errlen, "tr_config_parse: bad argument vector");

    size_t nflags;
    const tr_flag *table = tr_flags(&nflags);
    unsigned char seen[TR_FLAGS_MAX] = {0};

    for (int i = 0; i < argc && argv[i]; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            tr_config_print_help(stdout);
            return 1;
        }
        if (strcmp(a, "--") == 0) return tr_errf(err, errlen, "unexpected '--': twinrun takes no positional arguments");
        if (a[0] != '-' || a[1] == 0)
            return tr_errf(err, errlen,
                           "unexpected argument '%s': a value goes right after its flag "
                           "(e.g. --num-layers 32), and a value with spaces needs quotes",
                           a);

        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        const tr_flag *f = tr_flag_find(a, nlen);
        if (!f) return unknown_flag(a, nlen, err, errlen);
        seen[f - table] = 1;
        if (f->status == TR_ST_REJECTED) return tr_flag_refuse(f, err, errlen);

        if (f->kind == TR_K_BOOL || f->kind == TR_K_BOOL_OFF) {
            if (eq) return tr_errf(err, errlen, "%s takes no value (got '%s'); drop '=%s'", f->name, eq + 1, eq + 1);
            if (f->has_field) *((bool *)((char *)cfg + f->offset)) = f->kind == TR_K_BOOL;
        } else if (f->kind == TR_K_LIST) {
            if (parse_list(cfg, f, eq ? eq + 1 : NULL, argc, argv, &i, err, errlen)) return -1;
        } else {
            const char *v;
            if (eq) {
                v = eq + 1;
            } else {
                if (i + 1 >= argc || !argv[i + 1] || tr_looks_like_flag(argv[i + 1]))
                    return tr_errf(err, errlen, "%s needs a value (%s)%s%s", f->name, f->metavar,
                                   i + 1 < argc && argv[i + 1] ? " but is followed by " : "",
                                   i + 1 < argc && argv[i + 1] ? argv[i + 1] : "");
                v = argv[++i];
            }
            if (tr_flag_store_value(cfg, f, v, err, errlen)) return -1;
        }
        if (f->apply) f->apply(cfg);
        if (f->status == TR_ST_WARNED) tr_config_warn(cfg, "%s ignored: %s", f->name, f->reason);
    }
    after_parse(cfg, seen);
    return 0;
}
