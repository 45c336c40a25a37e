/* Private to the scenario loader (runner/): a small YAML tree (built from libyaml events, with the
 * position of every node), typed reads that name the key and the fix, and the loader's sections. */
#ifndef TWINRUN_RUNNER_SCENARIO_INTERNAL_H
#define TWINRUN_RUNNER_SCENARIO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "runner/scenario.h"

/* Bounds that keep a hostile or fuzzed file cheap to reject. */
#define SC_TEXT_MAX (8u << 20) /* bytes of a scenario file or hostfile */
#define SC_DEPTH_MAX 32        /* nesting of mappings and lists */
#define SC_MAP_MAX 1024        /* keys in one mapping (duplicates are found pairwise) */
#define SC_SEQ_MAX 10000       /* items in one list (faults: at most FAULT_PLAN_MAX) */
#define SC_NODES_MAX 200000    /* nodes in one file */
#define SC_NODES_CAP 65536     /* cluster.nodes */
#define SC_WORLD_MAX (1 << 20) /* ranks */
#define SC_FLAGS_MAX 512       /* flags after the preset */
#define SC_HOSTS_MAX 65536

typedef enum scn_kind { SCN_SCALAR, SCN_MAP, SCN_SEQ } scn_kind;

typedef struct scn_node {
    scn_kind kind;
    int line, col; /* 1-based */
    char *text;    /* scalar: NUL-terminated (len bytes; may hold NULs, which the reads refuse) */
    size_t len;
    bool plain;      /* scalar written without quotes (and without !!str): only those are numbers, bools, null */
    int n;           /* map: pairs (items[2i] key, items[2i+1] value); seq: items */
    int stored, cap; /* items[] entries in use and allocated (a map's key waits for its value) */
    struct scn_node **items;
} scn_node;

/* Parses one YAML document. Aliases, unknown tags, several documents, non-scalar keys and duplicate
 * keys are refused. *root is NULL for an empty stream. -1 with "NAME:LINE:COL: message" in err. */
int scenario_yaml_load(const char *text, size_t len, const char *name, scn_node **root, char *err, size_t errlen);
void scenario_yaml_free(scn_node *n);

/* Mapping access: the value of `key`, and its key node (for positions), or NULL. */
const scn_node *scenario_yaml_get(const scn_node *map, const char *key, const scn_node **key_node);

/* Where messages go and what they are about. */
typedef struct sc_ctx {
    const char *name; /* the scenario file as given, for messages and relative paths */
    char *err;
    size_t errlen;
} sc_ctx;

/* A scenario's name (given at `at`, or the file's when NULL) is one plain folder name: -1 with the
 * reason otherwise (runner/work_dir.c). */
int work_check_name(sc_ctx *c, const scn_node *at, const char *name);
/* "NAME:LINE:COL: <message>" at node `at` (1:1 when NULL); returns -1. */
int scenario_fail(sc_ctx *c, const scn_node *at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* "'many'", "a mapping", "a list", "nothing": what a node holds, for "expected X, got Y". */
void scenario_describe(const scn_node *v, char *out, size_t outlen);

bool scenario_is_null(const scn_node *v);
/* Plain true/false (any case YAML 1.2 allows): 1 true, 0 false, -1 not a bool. */
int scenario_bool_value(const scn_node *v);
/* Plain decimal integer that fits int64 / whole text a finite number: 0, else -1. */
int scenario_int_value(const scn_node *v, int64_t *out);
int scenario_number_value(const scn_node *v, double *out);

/* Typed reads of a value at `path` ("cluster.nodes"): -1 with the message when the type or range is off. */
int scenario_get_int(sc_ctx *c, const scn_node *v, const char *path, int64_t lo, int64_t hi, int64_t *out);
int scenario_get_u64(sc_ctx *c, const scn_node *v, const char *path, uint64_t *out);
int scenario_get_number(sc_ctx *c, const scn_node *v, const char *path, double *out);
int scenario_get_bool(sc_ctx *c, const scn_node *v, const char *path, bool *out);
/* A scalar as text (numbers included: "name: 2024" is the string "2024"); not null, no NUL bytes,
 * shorter than outlen; empty only when allow_empty. */
int scenario_get_string(sc_ctx *c, const scn_node *v, const char *path, char *out, size_t outlen, bool allow_empty);
int scenario_want_map(sc_ctx *c, const scn_node *v, const char *path);
int scenario_want_seq(sc_ctx *c, const scn_node *v, const char *path);
/* Every key of `map` must be one of `allowed` (NULL-terminated); else the unknown key's position,
 * the closest allowed one when it is a near miss, and the whole list. `path` "" for the top level. */
int scenario_check_keys(sc_ctx *c, const scn_node *map, const char *path, const char *const *allowed);

/* The closest of `names` (NULL-terminated) to `s` when it is a plausible typo, else NULL. */
const char *scenario_closest(const char *s, const char *const *names);

/* `rel` against the folder of the scenario file `base`, made absolute (the working directory for
 * a relative base). -1 when it does not fit. */
int scenario_resolve_path(const char *base, const char *rel, char *out, size_t outlen);
/* Reads a regular file of at most SC_TEXT_MAX bytes; -1 with errno-style text in why. */
int scenario_read_file(const char *path, char **text, size_t *len, char *why, size_t whylen);

/* ---- sections (scenario_*.c) ---- */
int scenario_load_cluster(sc_ctx *c, const scn_node *root, scenario *s);
int scenario_load_parallel(sc_ctx *c, const scn_node *root, scenario *s);
/* model:, training:, data: into s->flags; sets train_iters. */
int scenario_load_flags(sc_ctx *c, const scn_node *root, scenario *s);
int scenario_load_faults(sc_ctx *c, const scn_node *root, scenario *s);
int scenario_load_campaign(sc_ctx *c, const scn_node *root, scenario *s);
int scenario_load_expect(sc_ctx *c, const scn_node *root, scenario *s);

/* The last flag of that name ("num-layers"), or NULL: a later flag overrides an earlier one. */
const sc_flag *scenario_flag_last(const scenario *s, const char *name);
void scenario_flags_free(scenario *s);

#endif
