/* A loaded scenario as the argv tr_config_parse takes: the flags (the last of each name: an
 * override or training flag wins over the preset's), then the layout and the seed. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scenario_internal.h"

static bool overridden_later(const scenario *s, int i) {
    for (int j = i + 1; j < s->nflags; j++)
        if (strcmp(s->flags[j].name, s->flags[i].name) == 0) return true;
    return false;
}

static int push(char **argv, int *argc, const char *a, const char *b) {
    size_t n = strlen(a) + (b ? strlen(b) : 0) + 1;
    char *x = malloc(n);
    if (!x) return -1;
    snprintf(x, n, "%s%s", a, b ? b : "");
    argv[(*argc)++] = x;
    return 0;
}

int scenario_argv(const scenario *s, char ***argv_out, int *argc_out) {
    *argv_out = NULL;
    *argc_out = 0;
    /* upper bound: every flag with all its values, the layout's 8 items, the NULL */
    size_t cap = 16;
    for (int i = 0; i < s->nflags; i++) cap += 2 + (size_t)s->flags[i].nvalues;
    char **argv = calloc(cap, sizeof *argv);
    if (!argv) return -1;
    int argc = 0, rc = 0;
    char num[32];
    for (int i = 0; i < s->nflags && rc == 0; i++) {
        const sc_flag *f = &s->flags[i];
        if (overridden_later(s, i)) continue;
        rc = push(argv, &argc, "--", f->name);
        if (f->nvalues > 0)
            for (int j = 0; j < f->nvalues && rc == 0; j++) rc = push(argv, &argc, f->values[j], NULL);
        else if (f->value && rc == 0) rc = push(argv, &argc, f->value, NULL);
    }
    const struct {
        const char *flag;
        int value;
    } layout[] = {{"--tensor-model-parallel-size", s->tp},
                  {"--pipeline-model-parallel-size", s->pp},
                  {"--context-parallel-size", s->cp}};
    for (size_t i = 0; i < sizeof layout / sizeof layout[0] && rc == 0; i++) {
        snprintf(num, sizeof num, "%d", layout[i].value);
        rc = push(argv, &argc, layout[i].flag, NULL) || push(argv, &argc, num, NULL);
    }
    if (rc == 0 && s->sequence_parallel) rc = push(argv, &argc, "--sequence-parallel", NULL);
    if (rc == 0 && s->distributed_optimizer) rc = push(argv, &argc, "--use-distributed-optimizer", NULL);
    snprintf(num, sizeof num, "%" PRIu64, s->seed);
    if (rc == 0) rc = push(argv, &argc, "--seed", NULL) || push(argv, &argc, num, NULL);
    if (rc) {
        scenario_argv_free(argv, argc);
        return -1;
    }
    argv[argc] = NULL; /* argv[argc] == NULL, as main's is */
    *argv_out = argv;
    *argc_out = argc;
    return 0;
}

void scenario_argv_free(char **argv, int argc) {
    if (!argv) return;
    for (int i = 0; i < argc; i++) free(argv[i]);
    free(argv);
}
