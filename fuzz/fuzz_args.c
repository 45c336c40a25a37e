/* libFuzzer target for the Megatron command-line parser: the input, split on NUL and whitespace,
 * is an argv; it is parsed, validated on a few world sizes and finalized. Beyond the sanitizers,
 * it checks the parser's promises: -1 comes with a one-line message (validation: one line per problem),
 * warnings stay terminated,
 * and finalize leaves a config that validates again. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "twinrun/config.h"

#define MAX_ARGS 256

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    /* --help prints the flag list; keep it out of the fuzzer's output */
    if (!freopen("/dev/null", "w", stdout)) abort();
    return 0;
}

static int is_sep(uint8_t c) { return c == 0 || c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void check_message(const char *err, size_t len) {
    if (memchr(err, 0, len) == NULL) __builtin_trap(); /* terminated */
    if (err[0] == 0) __builtin_trap();                 /* an error always says something */
    /* one line per problem: no empty line, none trailing (validate lists several under a count) */
    if (err[strlen(err) - 1] == '\n' || strstr(err, "\n\n")) __builtin_trap();
}

/* The parser stops at its first problem: one line. */
static void check_one_line(const char *err, size_t len) {
    check_message(err, len);
    if (strchr(err, '\n')) __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 1 << 16) return 0;
    char *text = malloc(size + 1);
    char *argv[MAX_ARGS + 1];
    int argc = 0;
    memcpy(text, data, size);
    text[size] = 0;
    for (size_t i = 0; i < size && argc < MAX_ARGS;) {
        while (i < size && is_sep(data[i])) text[i++] = 0;
        if (i >= size) break;
        argv[argc++] = text + i;
        while (i < size && !is_sep(data[i])) i++;
    }
    argv[argc] = NULL;

    tr_config *cfg = malloc(sizeof *cfg);
    char err[512];
    tr_config_defaults(cfg);
    int rc = tr_config_parse(cfg, argc, argv, err, sizeof err);
    if (rc == -1) check_one_line(err, sizeof err);
    else if (rc != 0 && rc != 1) __builtin_trap();
    if (memchr(cfg->warnings, 0, sizeof cfg->warnings) == NULL) __builtin_trap();
    if (rc == 0) {
        static const int worlds[] = {1, 8, 1000, 1024, 0, -3, 2147483647};
        for (size_t w = 0; w < sizeof worlds / sizeof worlds[0]; w++)
            if (tr_config_validate(cfg, worlds[w], err, sizeof err)) check_message(err, sizeof err);
        /* one replica's worth of ranks, when that fits in an int, so finalize gets past the layout */
        int world = cfg->tensor_model_parallel_size;
        if (cfg->pipeline_model_parallel_size <= 2147483647 / world) world *= cfg->pipeline_model_parallel_size;
        if (cfg->context_parallel_size <= 2147483647 / world) world *= cfg->context_parallel_size;
        if (tr_config_finalize(cfg, world, err, sizeof err) == 0) {
            if (tr_config_validate(cfg, world, err, sizeof err)) __builtin_trap(); /* finalize is idempotent */
        } else {
            check_message(err, sizeof err);
        }
    }
    free(cfg);
    free(text);
    return 0;
}
