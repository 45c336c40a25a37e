/* The keys a fault takes (rank, node, group, ...), shared by the two ways a plan is written: the
 * compact TWINRUN_FAULTS string (fault_parse.c) and a scenario file's faults: list (runner/).
 * Private to fault/ and the scenario runner (runner/). */
#ifndef TWINRUN_FAULT_FAULT_KEYS_H
#define TWINRUN_FAULT_FAULT_KEYS_H

#include <stdbool.h>
#include <stddef.h>

#include "fault.h"

typedef enum fault_key {
    FAULT_KEY_RANK = 0,
    FAULT_KEY_NODE,
    FAULT_KEY_GROUP,
    FAULT_KEY_OP,
    FAULT_KEY_TENSOR,
    FAULT_KEY_LAYER,
    FAULT_KEY_INF,
    FAULT_KEY_FACTOR,
    FAULT_KEY_DEVICES,
    FAULT_KEY_VERSION,
    FAULT_KEY_DAMAGE,
    FAULT_KEY_DIR,
    FAULT_KEY_COUNT
} fault_key;

/* What a key's value is, so a YAML loader can check the scalar's type before converting it. */
typedef enum fault_key_type { FAULT_KT_INT, FAULT_KT_NUMBER, FAULT_KT_BOOL, FAULT_KT_NAME } fault_key_type;

const char *fault_key_name(fault_key k);
int fault_key_from_name(const char *name); /* -1 when unknown */
fault_key_type fault_key_type_of(fault_key k);
/* "rank, node, group, op, tensor, layer, inf, factor, devices, version, damage, dir" */
const char *fault_key_list(void);
/* The key a misspelt one most likely means, or NULL. */
const char *fault_key_suggest(const char *name);

/* Whether the key means anything for the kind (factor does for straggler, not for hang). */
bool fault_key_applies(fault_kind kind, fault_key k);
/* The keys that apply to a kind, for messages: "rank, group, op". */
void fault_kind_keys_text(fault_kind kind, char *out, size_t outlen);

/* Start-up kinds fire before iteration 1 and take step 0; node kinds target a node. */
bool fault_kind_is_startup(fault_kind kind);
bool fault_kind_is_node(fault_kind kind);

/* Communicator and collective names a hang or mismatch may name ("dp", "all_reduce", "any"). */
bool fault_group_valid(const char *group);
bool fault_op_valid(const char *op);

/* Converts `value` text for key k into f (strict: whole text, in range). -1 with err naming the
 * key and what it takes; the caller prefixes the fault's position. */
int fault_spec_set(fault_spec *f, fault_key k, const char *value, char *err, size_t errlen);

/* After all keys are set: a node kind given a rank targets that rank's node (rank cleared);
 * short_node without devices sees one device fewer. `given` has bit (1 << key) per key set. */
void fault_spec_normalize(fault_spec *f, unsigned given, int gpus_per_node);

/* Most faults a plan may hold, so a fuzzed or mistyped plan cannot ask for unbounded memory. */
#define FAULT_PLAN_MAX 10000

#endif
