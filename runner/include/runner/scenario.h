/* Scenario files: the cluster, the job, the faults to throw at it and what must hold.
 *
 * A scenario is YAML (parsed with libyaml; docs/scenarios.md is the format). Loading checks every
 * key and value and reports "FILE:LINE:COL: message" with the fix. The loaded scenario is plain
 * data; runner/runner.c rehearses it. */
#ifndef TWINRUN_RUNNER_RUNNER_SCENARIO_H
#define TWINRUN_RUNNER_RUNNER_SCENARIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fault/fault.h"
#include "launch/hostfile.h"

#define SC_NAME_LEN 128
#define SC_PATH_LEN 1024

/* One Megatron flag as the scenario sets it: name without leading dashes ("hidden-size"), value
 * as text, or NULL for a switch that is on ("bf16: true"). A switch set to false is left out. */
typedef struct sc_flag {
    char *name;
    char *value;
    int line, col;
    /* List flags (data-path): the values one by one, as argv gets them; value is then the same
     * joined with spaces, for messages. nvalues is 0 for every other flag. */
    int nvalues;
    char **values;
} sc_flag;

/* One host line of an OpenMPI hostfile: "node001 slots=8" (base/launch/hostfile.h). */
typedef tr_host sc_host;

typedef struct sc_campaign {
    int count;                  /* random single-fault trials; 0 = no campaign */
    uint64_t seed;              /* picks kind, rank/node, step and place of each trial */
    unsigned kinds;             /* bit (1 << fault_kind) per kind drawn from; default: every kind */
    int64_t step_min, step_max; /* steps faults fire at; default 1 .. train-iters */
} sc_campaign;

typedef struct sc_expect {
    bool completes;             /* the job reaches train-iters, restarts included (default true) */
    bool detected;              /* every fault that fired was detected (default true) */
    bool attributed;            /* ... and its diagnosis names the right rank or node and kind (default true) */
    double max_detect_seconds;  /* simulated seconds from a fault to its detection; 0 = no limit */
    bool continuity;            /* every iteration's loss bit-identical to the fault-free run (default true) */
    bool final_weights;         /* final weights bit-identical to the fault-free run (default true) */
    bool memory_under_capacity; /* every rank's device peak under the device's capacity (default true) */
    int max_restarts;           /* the run needs at most this many restarts; -1 = no limit (default) */
    int expect_failure_kind;    /* -1 (default): none. A fault_kind the job must stop on without recovering
                                 (preflight faults: short_node, version_skew, data_corrupt) */
    int line, col;              /* of the expect: mapping, for messages */
} sc_expect;

typedef struct scenario {
    char path[SC_PATH_LEN]; /* the file, as given */
    char name[SC_NAME_LEN]; /* name: (default: the file name without .yaml) */
    char description[512];
    uint64_t seed; /* --seed of the job and the twin's scheduler seed (default 1234) */
    bool predict;  /* mode: predict (docs/prediction.md): one shape-only run at full size, no faults; default
                      mode: rehearse */
    bool doctor;   /* mode: doctor (docs/doctor.md): the pre-job checks over the cluster, no training; its faults
                      are the ones the doctor names (version_skew, short_node, slow_link, hidden_dir) */

    /* cluster: */
    int nodes, gpus_per_node;
    char device[32];            /* "H100" "H200" "A100" "MTT-S5000" (sim/cost/device_spec.c) */
    double capacity_scale;      /* device memory scale for a CPU-sized model (default 1) */
    char hostfile[SC_PATH_LEN]; /* resolved against the scenario's folder; "" when none */
    int nhosts;
    sc_host *hosts; /* [nhosts] from the hostfile; slots must add up to nodes * gpus_per_node */

    /* parallel: */
    int tp, pp, cp, dp; /* dp derived when not given; world = tp*pp*cp*dp = nodes*gpus_per_node */
    bool sequence_parallel, distributed_optimizer;

    /* model: preset + overrides, then training: — flags in order, a later one wins */
    char model_preset[32]; /* "llama3-8b", "llama3-70b", "tiny"; "" = none */
    int nflags;
    sc_flag *flags;      /* preset flags first, then model overrides, then training flags */
    int64_t train_iters; /* from --train-iters, for step checks */

    /* checkpoint: */
    int save_interval; /* 0 = no checkpoints (then a restart starts from scratch) */
    int keep_last;     /* 0 = keep all */

    /* supervisor: */
    int max_restarts;        /* the runner gives up after this many (default 5) */
    double watchdog_seconds; /* collective timeout (simulated); default --distributed-timeout-minutes * 60 */

    fault_plan faults; /* faults: ; gpus_per_node set */
    sc_campaign campaign;
    sc_expect expect;
} scenario;

/* The file or folder ARG names on the command line, into PATH: ARG itself when it exists or holds a '/';
 * else scenarios/ARG when that exists (the shipped scenarios, from the repository root). Returns 0 (ARG),
 * 1 (found under scenarios/) or -1 with ERR naming where it looked. */
int scenario_find(const char *arg, char *path, size_t cap, char *err, size_t errlen);
/* Loads and checks a scenario file. Returns 0, or -1 with "FILE:LINE:COL: message" in err. */
int scenario_load(const char *path, scenario *out, char *err, size_t errlen);
/* The same from memory (fuzz target, tests); `name` stands for the file in messages and relative
 * paths (hostfile) resolve against its folder. */
int scenario_parse(const char *text, size_t len, const char *name, scenario *out, char *err, size_t errlen);
void scenario_free(scenario *s);

/* An OpenMPI hostfile: "host [slots=N] [max_slots=N]" per line, '#' comments. Returns 0 or -1 with
 * "FILE:LINE: message". hosts is allocated. */
int scenario_hostfile_parse(const char *text, size_t len, const char *name, sc_host **hosts, int *nhosts, char *err,
                            size_t errlen);

/* The flags of a model preset ("llama3-70b": 80 layers, hidden 8192, ...), NULL-terminated pairs
 * {name, value}; value NULL for switches. NULL when the preset is unknown. */
const char *const *scenario_model_preset(const char *name);
/* Comma-separated list of presets for messages. */
const char *scenario_model_preset_names(void);

/* The argv for tr_config_parse: every flag as "--name" [value], plus the layout flags
 * (--tensor-model-parallel-size ..., --seed). Allocated: free with scenario_argv_free. */
int scenario_argv(const scenario *s, char ***argv, int *argc);
void scenario_argv_free(char **argv, int argc);

#endif
