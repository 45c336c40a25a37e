/* Megatron's start-up prints (arguments.py: "using world size", _print_args; tokenizer.py: padded
 * vocab; training.py: parameters per model-parallel rank), in its words, from twinrun's config. */
#include "train/banner.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/args_value.h"
#include "config/flags.h"
#include "model/llama.h"
#include "train/checkpoint.h"
#include "twinrun/version.h"

#define ARG_LINE_MAX 1200

/* Python's repr of a float: the fewest significant digits that read back the same, in fixed notation
 * with ".0" on whole numbers unless the exponent is below -4 or at least 16 ("1e-08", "10.0", "0.0003"). */
static void py_float(char *buf, size_t n, double x) {
    int prec = 1;
    for (; prec < 17; prec++) {
        snprintf(buf, n, "%.*e", prec - 1, x);
        if (strtod(buf, NULL) == x) break;
    }
    const int e = x != 0 ? atoi(strchr(buf, 'e') + 1) : 0;
    if (e < -4 || e >= 16) {
        snprintf(buf, n, "%.*e", prec - 1, x);
        return;
    }
    snprintf(buf, n, "%.*f", prec - 1 - e > 0 ? prec - 1 - e : 0, x);
    if (!strchr(buf, '.')) strncat(buf, ".0", n - strlen(buf) - 1);
}

/* Megatron's argument name: the flag's dest (dashes to underscores; --no-X and --disable-X print
 * as X, store_false). Returns whether the printed value is the field's negation. */
static bool arg_name(const tr_flag *f, char *name, size_t n) {
    const char *s = f->name + 2;
    bool negate = false;
    if (f->kind == TR_K_BOOL_OFF && !strncmp(s, "no-", 3)) s += 3;
    else if (f->kind == TR_K_BOOL && !strncmp(s, "disable-", 8)) s += 8, negate = true;
    snprintf(name, n, "%s%s", negate ? "add_" : "", s);
    for (char *p = name; *p; p++)
        if (*p == '-') *p = '_';
    return negate;
}

/* The value as Megatron prints it: True/False, numbers, names, None for what was not given. */
static void arg_value(const tr_flag *f, const tr_config *cfg, bool negate, char *buf, size_t n) {
    const char *field = (const char *)cfg + f->offset;
    /* not given and without a value of its own (none, or another flag's: "--train-iters") */
    const bool none_default = !strncmp(f->def, "none", 4) || !strncmp(f->def, "this or", 7) || f->def[0] == '-';
    switch (f->kind) {
    case TR_K_BOOL:
    case TR_K_BOOL_OFF: {
        bool v = *(const bool *)field;
        snprintf(buf, n, "%s", v != negate ? "True" : "False");
        return;
    }
    case TR_K_INT: {
        int v;
        memcpy(&v, field, sizeof v);
        if (v == 0 && none_default) snprintf(buf, n, "None");
        else snprintf(buf, n, "%d", v);
        return;
    }
    case TR_K_INT64:
    case TR_K_U64: {
        int64_t v;
        memcpy(&v, field, sizeof v);
        if ((v == 0 && none_default) || (f->kind == TR_K_INT64 && v < 0)) snprintf(buf, n, "None");
        else if (f->kind == TR_K_U64) snprintf(buf, n, "%llu", (unsigned long long)(uint64_t)v);
        else snprintf(buf, n, "%lld", (long long)v);
        return;
    }
    case TR_K_DOUBLE: {
        double v;
        memcpy(&v, field, sizeof v);
        if (v < 0 || (v == 0 && none_default)) snprintf(buf, n, "None");
        else py_float(buf, n, v);
        return;
    }
    case TR_K_STRING: snprintf(buf, n, "%s", *field ? field : "None"); return;
    case TR_K_ENUM:
        if (f->enum_as_string) {
            snprintf(buf, n, "%s", *field ? field : "None");
        } else {
            int v;
            memcpy(&v, field, sizeof v);
            snprintf(buf, n, "None");
            for (const tr_choice *c = f->choices; c->name; c++)
                if (c->value == v && !c->reject) snprintf(buf, n, "%s", c->name);
        }
        return;
    case TR_K_LIST: {
        size_t used = (size_t)snprintf(buf, n, cfg->n_data_path ? "[" : "None");
        for (int i = 0; i < cfg->n_data_path && used + 8 < n; i++)
            used += (size_t)snprintf(buf + used, n - used, "%s'%.200s'", i ? ", " : "", cfg->data_path[i]);
        if (cfg->n_data_path && used + 2 < n) strcat(buf, "]");
        return;
    }
    }
}

static int by_lower(const void *a, const void *b) { return strcasecmp(*(char *const *)a, *(char *const *)b); }

static void print_arguments(FILE *out, const tr_config *cfg, int world) {
    size_t nflags;
    const tr_flag *t = tr_flags(&nflags);
    char **lines = calloc(nflags + 4, sizeof *lines);
    size_t n = 0;
    if (!lines) return;
    for (size_t i = 0; i < nflags; i++) {
        if (!t[i].has_field) continue;
        bool dup = false; /* one field, several spellings (--disable-bias-linear, --add-bias-linear): once */
        for (size_t j = 0; j < i && !dup; j++) dup = t[j].has_field && t[j].offset == t[i].offset;
        if (dup) continue;
        char name[96], value[1024];
        bool negate = arg_name(&t[i], name, sizeof name);
        arg_value(&t[i], cfg, negate, value, sizeof value);
        char *line = malloc(ARG_LINE_MAX);
        if (!line) break;
        int dots = 48 - (int)strlen(name);
        snprintf(line, ARG_LINE_MAX, "  %s %.*s %s", name, dots > 0 ? dots : 0,
                 "................................................", value);
        lines[n++] = line;
    }
    char *ws = malloc(ARG_LINE_MAX);
    if (ws) {
        snprintf(ws, ARG_LINE_MAX, "  world_size %.38s %d", "......................................", world);
        lines[n++] = ws;
    }
    qsort(lines, n, sizeof *lines, by_lower);
    fputs("------------------------ arguments ------------------------\n", out);
    for (size_t i = 0; i < n; i++) fprintf(out, "%s\n", lines[i]), free(lines[i]);
    fputs("-------------------- end of arguments ---------------------\n", out);
    free(lines);
}

void train_banner_print(FILE *out, const char *program, const tr_config *cfg, int world) {
    tr_version_print(out, program);
    const int tp = cfg->tensor_model_parallel_size, pp = cfg->pipeline_model_parallel_size;
    const int cp = cfg->context_parallel_size, dp = world / (tp * pp * cp);
    fprintf(out,
            "using world size: %d, data-parallel size: %d, context-parallel size: %d, hierarchical "
            "context-parallel sizes: None, tensor-model-parallel size: %d, pipeline-model-parallel size: %d\n",
            world, dp, cp, tp, pp);
    print_arguments(out, cfg, world);
    if (cfg->tokenizer_vocab > 0) /* what train/setup.c read from --tokenizer-model */
        fprintf(out, " > building %s tokenizer from %s: %lld tokens, eod %lld, bos %lld\n", cfg->tokenizer_type,
                cfg->tokenizer_model, (long long)cfg->tokenizer_vocab, (long long)cfg->tokenizer_eod,
                (long long)cfg->tokenizer_bos);
    char load[TR_PATH_LEN * 2 + 1024];
    train_ckpt_describe_load(cfg, load, sizeof load);
    if (load[0]) fprintf(out, " > checkpoint: %s\n", load);
    const int mult = cfg->make_vocab_size_divisible_by * tp;
    const int padded = (cfg->vocab_size + mult - 1) / mult * mult;
    fprintf(out, " > padded vocab (size: %d) with %d dummy tokens (new size: %d)\n", cfg->vocab_size,
            padded - cfg->vocab_size, padded);
    /* every (tensor, pipeline) rank, as Megatron's data-parallel rank 0 of each prints it */
    for (int p = 0; p < pp; p++)
        for (int r = 0; r < tp; r++) {
            const llama_layout lay = {.tp = tp, .tp_rank = r, .pp = pp, .pp_rank = p, .cp = cp, .slots = 1};
            char err[256];
            llama_model *m = llama_create_table(cfg, &lay, err, sizeof err);
            if (!m) return;
            fprintf(out, " > number of parameters on (tensor, pipeline) model parallel rank (%d, %d): %zu\n", r, p,
                    m->total);
            llama_destroy(m);
        }
    fflush(out);
}
