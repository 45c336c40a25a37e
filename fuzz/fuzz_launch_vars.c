/* libFuzzer target: the launcher environment parser (base/launch/launch_vars.c). The input is a
 * list of NAME=value lines standing for the environment; whatever it holds, parsing returns 0 with
 * a consistent result or -1 with a message. Seeds: fuzz/corpus/fuzz_launch_vars/. */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "launch/launch_vars.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct env {
    char *names[64], *values[64];
    int n;
} env;

static const char *get(const char *name, void *ctx) {
    const env *e = ctx;
    for (int i = 0; i < e->n; i++)
        if (strcmp(e->names[i], name) == 0) return e->values[i];
    return NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    env e = {.n = 0};
    for (char *line = text, *next; line && e.n < 64; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        char *eq = strchr(line, '=');
        if (!eq) continue;
        *eq = '\0';
        e.names[e.n] = line;
        e.values[e.n++] = eq + 1;
    }
    tr_launch_vars v;
    char err[512];
    if (tr_launch_vars_parse(get, &e, &v, err, sizeof err) == 0) {
        if (v.world < 1 || v.rank < 0 || v.rank >= v.world || v.local_rank < 0) abort();
        if (v.local_world && v.local_rank >= v.local_world) abort();
        if (v.has_master && (v.master_port < 1 || v.master_port > 65535 || !v.master_addr[0])) abort();
    } else if (!err[0]) {
        abort(); /* every refusal says why */
    }
    free(text);
    return 0;
}
