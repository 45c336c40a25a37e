/* model:, training: and data: become Megatron flags, checked against the engine's own flag table
 * and value parser so a scenario fails at load, at its line, rather than when the job starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/args_value.h"
#include "config/flags.h"
#include "core/text.h"
#include "scenario_internal.h"
#include "twinrun/config.h"

/* Flags the scenario sets elsewhere: the layout and checkpoints belong to the runner, which varies
 * them between attempts, and data paths resolve against the scenario's folder. */
static const struct {
    const char *flag, *where;
} elsewhere[] = {
    {"tensor-model-parallel-size", "parallel: as tensor:"},
    {"model-parallel-size", "parallel: as tensor:"},
    {"pipeline-model-parallel-size", "parallel: as pipeline:"},
    {"context-parallel-size", "parallel: as context:"},
    {"sequence-parallel", "parallel: as sequence_parallel: true"},
    {"use-distributed-optimizer", "parallel: as distributed_optimizer: true"},
    {"seed", "the top level as seed:"},
    {"save", "checkpoint: (the runner picks the directory; set checkpoint.interval)"},
    {"load", "checkpoint: (the runner resumes from its own saves; set checkpoint.interval)"},
    {"save-interval", "checkpoint: as interval:"},
    {"keep-last", "checkpoint: as keep_last:"},
    {"data-path", "data: as path:"},
    {"mock-data", "data: as mock: true"},
    {"split", "data: as split:"},
    {"data-cache-path", "data: as cache:"},
};

const sc_flag *scenario_flag_last(const scenario *s, const char *name) {
    for (int i = s->nflags - 1; i >= 0; i--)
        if (strcmp(s->flags[i].name, name) == 0) return &s->flags[i];
    return NULL;
}

static void flag_clear(sc_flag *f) {
    free(f->name);
    free(f->value);
    for (int j = 0; j < f->nvalues; j++) free(f->values[j]);
    free(f->values);
    memset(f, 0, sizeof *f);
}

void scenario_flags_free(scenario *s) {
    for (int i = 0; i < s->nflags; i++) flag_clear(&s->flags[i]);
    free(s->flags);
    s->flags = NULL;
    s->nflags = 0;
}

/* Appends a flag; values [nvalues] for a list flag (value is then their joined text). */
static int flag_add(sc_ctx *c, scenario *s, const scn_node *at, const char *name, const char *value,
                    const char *const *values, int nvalues) {
    if (s->nflags >= SC_FLAGS_MAX + 64) return scenario_fail(c, at, "more than %d flags", SC_FLAGS_MAX);
    sc_flag *grown = realloc(s->flags, (size_t)(s->nflags + 1) * sizeof *grown);
    if (!grown) return scenario_fail(c, at, "out of memory");
    s->flags = grown;
    sc_flag *f = &s->flags[s->nflags];
    memset(f, 0, sizeof *f);
    f->line = at ? at->line : 0;
    f->col = at ? at->col : 0;
    f->name = strdup(name);
    bool ok = f->name != NULL;
    if (nvalues > 0) {
        size_t total = 0;
        for (int i = 0; i < nvalues; i++) total += strlen(values[i]) + 1;
        f->values = calloc((size_t)nvalues, sizeof *f->values);
        f->value = malloc(total);
        ok = ok && f->values && f->value;
        if (ok) f->value[0] = 0;
        for (int i = 0; ok && i < nvalues; i++) {
            f->values[i] = strdup(values[i]);
            ok = f->values[i] != NULL;
            f->nvalues = i + 1;
            if (ok) strcat(strcat(f->value, i ? " " : ""), values[i]);
        }
    } else if (value) {
        f->value = strdup(value);
        ok = ok && f->value;
    }
    s->nflags++; /* counted even when half-built, so scenario_free releases it */
    return ok ? 0 : scenario_fail(c, at, "out of memory");
}

/* A switch set to false undoes the same switch set earlier (by the preset, say). */
static void flag_remove(scenario *s, const char *name) {
    int w = 0;
    for (int i = 0; i < s->nflags; i++) {
        if (strcmp(s->flags[i].name, name) == 0) flag_clear(&s->flags[i]);
        else s->flags[w++] = s->flags[i];
    }
    s->nflags = w;
}

/* A scalar that may go on the command line: text, no NUL, not flag-like, not too long. */
static int flag_text(sc_ctx *c, const scn_node *v, const char *path, const tr_flag *f, char *out, size_t outlen) {
    if (scenario_get_string(c, v, path, out, outlen, false)) return -1;
    if (tr_looks_like_flag(out)) /* tr_config_parse would take it for the next flag */
        return scenario_fail(c, v,
                             "%s: '%.60s' would be read as a flag on the command line: give a value that does not "
                             "start with '-'",
                             path, out);
    (void)f;
    return 0;
}

/* One "name: value" of training: or model.overrides:, checked and appended. */
static int load_flag(sc_ctx *c, scenario *s, const scn_node *k, const scn_node *v, const char *section,
                     tr_config *scratch) {
    char path[160], dashed[112], msg[512];
    snprintf(path, sizeof path, "%s.%.100s", section, k->text);
    if (strlen(k->text) != k->len || k->len == 0 || k->len > 100)
        return scenario_fail(c, k, "%s: not a flag name", section);
    if (k->text[0] == '-') {
        const char *bare = k->text;
        while (*bare == '-') bare++;
        return scenario_fail(c, k, "%s: write flag names without the leading dashes: '%s'", path, bare);
    }
    for (size_t i = 0; i < sizeof elsewhere / sizeof elsewhere[0]; i++)
        if (strcmp(k->text, elsewhere[i].flag) == 0)
            return scenario_fail(c, k, "%s: not a %s flag in a scenario: set it under %s instead", path, section,
                                 elsewhere[i].where);
    snprintf(dashed, sizeof dashed, "--%s", k->text);
    const tr_flag *f = tr_flag_find(dashed, strlen(dashed));
    if (!f) {
        const tr_flag *near = tr_flag_suggest(dashed, strlen(dashed));
        if (near)
            return scenario_fail(c, k, "%s: unknown flag --%s; did you mean '%s'?", path, k->text, near->name + 2);
        return scenario_fail(c, k, "%s: unknown flag --%s; `train_llama3 --help` lists the flags twinrun knows", path,
                             k->text);
    }
    /* a refused switch set to false asks for nothing twinrun refuses */
    bool off = (f->kind == TR_K_BOOL || f->kind == TR_K_BOOL_OFF) && scenario_bool_value(v) == 0;
    if (f->status == TR_ST_REJECTED && !off)
        return scenario_fail(c, k, "%s: twinrun refuses %s: %s", path, f->name, f->reason);

    char got[96];
    scenario_describe(v, got, sizeof got);
    if (v->kind == SCN_MAP || scenario_is_null(v))
        return scenario_fail(c, v, "%s: expected a value, got %s: write %s: VALUE (or remove the line)", path, got,
                             k->text);
    int b = scenario_bool_value(v);
    if (f->kind == TR_K_BOOL || f->kind == TR_K_BOOL_OFF) {
        if (b < 0) return scenario_fail(c, v, "%s: %s is a switch: write true or false, got %s", path, f->name, got);
        if (b) return flag_add(c, s, k, k->text, NULL, NULL, 0);
        flag_remove(s, k->text);
        return 0;
    }
    if (b >= 0 && v->plain)
        return scenario_fail(c, v, "%s: %s takes a value (%s), not %s", path, f->name,
                             f->metavar ? f->metavar : "VALUE", got);
    if (f->kind == TR_K_LIST) {
        const scn_node *one = v;
        int n = v->kind == SCN_SEQ ? v->n : 1;
        if (n == 0 || n > TR_MAX_PATHS)
            return scenario_fail(c, v, "%s: give 1-%d values, got %d", path, TR_MAX_PATHS, n);
        char **vals = calloc((size_t)n, sizeof *vals);
        if (!vals) return scenario_fail(c, v, "out of memory");
        int rc = 0;
        for (int i = 0; i < n && rc == 0; i++) {
            one = v->kind == SCN_SEQ ? v->items[i] : v;
            char ipath[176];
            snprintf(ipath, sizeof ipath, "%s[%d]", path, i);
            vals[i] = malloc(TR_PATH_LEN);
            rc = vals[i] ? flag_text(c, one, v->kind == SCN_SEQ ? ipath : path, f, vals[i], TR_PATH_LEN)
                         : scenario_fail(c, one, "out of memory");
        }
        if (rc == 0) rc = flag_add(c, s, k, k->text, NULL, (const char *const *)vals, n);
        for (int i = 0; i < n; i++) free(vals[i]);
        free(vals);
        return rc;
    }
    if (v->kind == SCN_SEQ)
        return scenario_fail(c, v, "%s: %s takes one value, got a list (only list flags such as data-path take lists)",
                             path, f->name);
    char text[TR_PATH_LEN];
    if (flag_text(c, v, path, f, text, sizeof text)) return -1;
    if (tr_flag_store_value(scratch, f, text, msg, sizeof msg)) return scenario_fail(c, v, "%s: %s", path, msg);
    return flag_add(c, s, k, k->text, text, NULL, 0);
}

static int load_flag_map(sc_ctx *c, scenario *s, const scn_node *map, const char *section, tr_config *scratch) {
    if (scenario_want_map(c, map, section)) return -1;
    for (int i = 0; i < map->n; i++)
        if (load_flag(c, s, map->items[2 * i], map->items[2 * i + 1], section, scratch)) return -1;
    return 0;
}

static int load_model(sc_ctx *c, const scn_node *root, scenario *s, tr_config *scratch) {
    const scn_node *model = scenario_yaml_get(root, "model", NULL);
    if (!model) return 0;
    static const char *const keys[] = {"preset", "overrides", NULL};
    if (scenario_want_map(c, model, "model") || scenario_check_keys(c, model, "model", keys)) return -1;
    const scn_node *preset = scenario_yaml_get(model, "preset", NULL);
    if (preset) {
        if (scenario_get_string(c, preset, "model.preset", s->model_preset, sizeof s->model_preset, false)) return -1;
        const char *const *p = scenario_model_preset(s->model_preset);
        if (!p) {
            static const char *const names[] = {"llama3-8b", "llama3-70b", "tiny", NULL};
            const char *near = scenario_closest(s->model_preset, names);
            return scenario_fail(c, preset, "model.preset: unknown preset '%s'%s%s%s; presets: %s", s->model_preset,
                                 near ? "; did you mean '" : "", near ? near : "", near ? "'?" : "",
                                 scenario_model_preset_names());
        }
        for (; p[0]; p += 2)
            if (flag_add(c, s, preset, p[0], p[1], NULL, 0)) return -1;
    }
    const scn_node *ov = scenario_yaml_get(model, "overrides", NULL);
    return ov ? load_flag_map(c, s, ov, "model.overrides", scratch) : 0;
}

/* Megatron's reading of --data-path: weight prefix pairs when the first of an even count is a
 * number, else prefixes. Prefixes resolve against the scenario's folder; weights stay as written. */
static int load_data_path(sc_ctx *c, scenario *s, const scn_node *k, const scn_node *v) {
    if (v->kind == SCN_MAP || scenario_is_null(v)) {
        char got[96];
        scenario_describe(v, got, sizeof got);
        return scenario_fail(
            c, v, "data.path: expected a prefix or a list of prefixes (or weight prefix pairs), got %s", got);
    }
    int n = v->kind == SCN_SEQ ? v->n : 1;
    if (n == 0 || n > TR_MAX_PATHS) return scenario_fail(c, v, "data.path: give 1-%d values, got %d", TR_MAX_PATHS, n);
    double w;
    bool weighted = n > 1 && n % 2 == 0 && scenario_number_value(v->items[0], &w) == 0;
    char **vals = calloc((size_t)n, sizeof *vals);
    if (!vals) return scenario_fail(c, v, "out of memory");
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        const scn_node *one = v->kind == SCN_SEQ ? v->items[i] : v;
        char path[48], text[TR_PATH_LEN];
        snprintf(path, sizeof path, v->kind == SCN_SEQ ? "data.path[%d]" : "data.path", i);
        vals[i] = malloc(TR_PATH_LEN);
        if (!vals[i]) {
            rc = scenario_fail(c, one, "out of memory");
        } else if (weighted && i % 2 == 0) {
            if (scenario_number_value(one, &w) || !(w >= 0))
                rc = scenario_fail(c, one, "%s: expected a weight >= 0 (the list is weight prefix pairs), got '%.60s'",
                                   path, one->kind == SCN_SCALAR ? one->text : "a mapping or list");
            else snprintf(vals[i], TR_PATH_LEN, "%s", one->text);
        } else if ((rc = scenario_get_string(c, one, path, text, sizeof text, false)) == 0) {
            if (n > 1 && !weighted && scenario_number_value(one, &w) == 0)
                rc = scenario_fail(c, one,
                                   "%s: '%s' looks like a weight: give weight prefix pairs (0.3, A, 0.7, B) or only "
                                   "prefixes (A, B)",
                                   path, text);
            else if (scenario_resolve_path(c->name, text, vals[i], TR_PATH_LEN))
                rc = scenario_fail(c, one, "%s: the resolved path is longer than %d bytes", path, TR_PATH_LEN - 1);
        }
    }
    if (rc == 0) rc = flag_add(c, s, k, "data-path", NULL, (const char *const *)vals, n);
    for (int i = 0; i < n; i++) free(vals[i]);
    free(vals);
    return rc;
}

static int load_data(sc_ctx *c, const scn_node *root, scenario *s, tr_config *scratch) {
    const scn_node *dk, *data = scenario_yaml_get(root, "data", &dk);
    if (!data) return 0;
    static const char *const keys[] = {"mock", "path", "split", "cache", NULL};
    if (scenario_want_map(c, data, "data") || scenario_check_keys(c, data, "data", keys)) return -1;
    const scn_node *mk, *pk, *sk, *ck;
    const scn_node *mock = scenario_yaml_get(data, "mock", &mk), *path = scenario_yaml_get(data, "path", &pk);
    const scn_node *split = scenario_yaml_get(data, "split", &sk), *cache = scenario_yaml_get(data, "cache", &ck);
    bool is_mock = false;
    if (mock && scenario_get_bool(c, mock, "data.mock", &is_mock)) return -1;
    if (is_mock && path) return scenario_fail(c, pk, "data: mock: true and path: both given: keep one");
    if (!is_mock && !path) return scenario_fail(c, dk, "data: give mock: true (Megatron's mock data) or path: PREFIX");
    if (is_mock && flag_add(c, s, mk, "mock-data", NULL, NULL, 0)) return -1;
    if (path && load_data_path(c, s, pk, path)) return -1;
    char text[TR_PATH_LEN], msg[512];
    if (split) {
        const tr_flag *f = tr_flag_find("--split", 7);
        if (scenario_get_string(c, split, "data.split", text, sizeof text, false)) return -1;
        if (f && tr_flag_store_value(scratch, f, text, msg, sizeof msg))
            return scenario_fail(c, split, "data.split: %s", msg);
        if (flag_add(c, s, sk, "split", text, NULL, 0)) return -1;
    }
    if (cache) {
        char abs[TR_PATH_LEN];
        if (scenario_get_string(c, cache, "data.cache", text, sizeof text, false)) return -1;
        if (scenario_resolve_path(c->name, text, abs, sizeof abs))
            return scenario_fail(c, cache, "data.cache: the resolved path is longer than %d bytes", TR_PATH_LEN - 1);
        if (flag_add(c, s, ck, "data-cache-path", abs, NULL, 0)) return -1;
    }
    return 0;
}

int scenario_load_flags(sc_ctx *c, const scn_node *root, scenario *s) {
    tr_config *scratch = malloc(sizeof *scratch); /* values are checked by storing them, as the engine does */
    if (!scratch) return scenario_fail(c, root, "out of memory");
    tr_config_defaults(scratch);
    const scn_node *tk, *training = scenario_yaml_get(root, "training", &tk);
    int rc = load_model(c, root, s, scratch);
    if (rc == 0 && training) rc = load_flag_map(c, s, training, "training", scratch);
    if (rc == 0) rc = load_data(c, root, s, scratch);
    free(scratch);
    if (rc) return -1;
    const sc_flag *ti = scenario_flag_last(s, "train-iters");
    if (!ti && s->doctor) return 0; /* the doctor trains nothing */
    if (!ti)
        return scenario_fail(c, training ? tk : NULL,
                             "training.train-iters is missing: scenarios count iterations; add `train-iters: N` under "
                             "training:");
    s->train_iters = strtoll(ti->value, NULL, 10);
    return 0;
}
