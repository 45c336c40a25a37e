/* The one table of command-line flags (flags_table.c) and what the parser, the help text, the
 * docs generator and the tests need to read it. Private to engine/config and its tests. */
#ifndef TWINRUN_ENGINE_CONFIG_FLAGS_H
#define TWINRUN_ENGINE_CONFIG_FLAGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "twinrun/config.h"

/* Upper bound on table entries, so the parser can keep a "seen" mark per flag on the stack. */
#define TR_FLAGS_MAX 512

typedef enum tr_flag_kind {
    TR_K_BOOL,     /* no value; sets the bool field */
    TR_K_BOOL_OFF, /* no value; clears the bool field (--no-*, Megatron's store_false) */
    TR_K_INT,      /* int field */
    TR_K_INT64,    /* int64_t field */
    TR_K_U64,      /* uint64_t field */
    TR_K_DOUBLE,   /* double field, finite */
    TR_K_STRING,   /* char[] field, copied verbatim */
    TR_K_ENUM,     /* one of `choices`: stores the choice's value into an int-sized enum field,
                    * or the choice's name into a char[] field when `enum_as_string` */
    TR_K_LIST,     /* one or more values up to the next "--" token (--data-path) */
} tr_flag_kind;

typedef enum tr_flag_status {
    TR_ST_IMPLEMENTED, /* stored in tr_config and used by the engine */
    TR_ST_ACCEPTED,    /* parsed and checked, no effect; `reason` says why that is harmless */
    TR_ST_WARNED,      /* parsed and checked, no effect, and a warning says so: results differ from Megatron's */
    TR_ST_ZERO_ONLY,   /* parsed, checked and stored; only 0 is what the engine does, any other value is
                        * ignored with a warning (config_finalize.c), since results then differ from Megatron's */
    TR_ST_REJECTED,    /* known to Megatron, refused with `reason` as the fix */
} tr_flag_status;

typedef enum tr_flag_section {
    TR_SEC_MODEL,
    TR_SEC_TRAINING,
    TR_SEC_OPTIMIZER,
    TR_SEC_PARALLEL,
    TR_SEC_DATA,
    TR_SEC_LOGGING,
    TR_SEC_CHECKPOINT,
    TR_SEC_PERF, /* kernel fusion and memory knobs of Megatron's PyTorch stack */
    TR_SEC_TWINRUN,
    TR_SEC_COUNT,
} tr_flag_section;

/* One allowed enum value. A non-NULL `reject` makes the value known but refused with that fix. */
typedef struct tr_choice {
    const char *name;
    int value;
    const char *reject;
} tr_choice;

/* Range of a numeric value; a bound is active when its has_ flag is set. */
typedef struct tr_range {
    bool has_min, min_open, has_max, max_open;
    double min, max;
} tr_range;

/* Extra check of a string value (e.g. --split); returns 0 or -1 with err. */
typedef int (*tr_flag_check_fn)(const char *flag, const char *value, char *err, size_t errlen);
/* Side effect after the flag is stored (e.g. a deprecated alias setting another field). */
typedef void (*tr_flag_apply_fn)(tr_config *cfg);

typedef struct tr_flag {
    const char *name; /* "--num-layers" */
    tr_flag_kind kind;
    tr_flag_section section;
    bool has_field;
    size_t offset, size;      /* the tr_config member, when has_field */
    tr_range range;           /* numeric kinds */
    const tr_choice *choices; /* TR_K_ENUM: terminated by a NULL name */
    bool enum_as_string;      /* TR_K_ENUM into a char[] field */
    tr_flag_check_fn check;   /* optional */
    tr_flag_apply_fn apply;   /* optional */
    const char *metavar;      /* "N", "LR", "DIR" ...; NULL for bool flags */
    const char *def;          /* default as shown in --help and docs/flags.md */
    tr_flag_status status;
    const char *reason; /* ACCEPTED/WARNED: why; REJECTED: the fix (becomes the error) */
    const char *help;   /* one line */
} tr_flag;

/* The table, in help order. */
const tr_flag *tr_flags(size_t *count);
const char *tr_flag_section_title(tr_flag_section s);
const char *tr_flag_status_name(tr_flag_status s);

/* Exact lookup by name ("--lr"); NULL when unknown. */
const tr_flag *tr_flag_find(const char *name, size_t len);
/* The known flag closest to `name` by edit distance, or NULL when nothing is plausibly meant. */
const tr_flag *tr_flag_suggest(const char *name, size_t len);

/* A flag Megatron-LM has and twinrun's table does not: why twinrun leaves it out (one clause), or NULL
 * when Megatron has no such flag either. */
const char *tr_megatron_flag_unsupported(const char *name, size_t len);

/* Writes docs/flags.md (the reference, generated from the table). */
void tr_config_print_flags_md(FILE *out);

#endif
