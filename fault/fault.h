/* Faults: what a scenario throws at a job, and the injection sites both builds share.
 *
 * A fault plan is a list of fault_spec, each firing at most once in a job's life (across the
 * supervisor's restarts: `fired` is kept by whoever owns the plan), at (step, rank or node, place).
 * The engine calls the fault_* hooks below at fixed places; with no plan every hook is a no-op.
 * The plan is built from a scenario file (runner/) or, in any build, from the compact string
 * of TWINRUN_FAULTS (fault_plan_parse; docs/faults.md). */
#ifndef TWINRUN_FAULT_FAULT_H
#define TWINRUN_FAULT_FAULT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "twinrun/coll.h"
#include "twinrun/dev.h"
#include "twinrun/dtype.h"
#include "twinrun/file_io.h"

typedef enum fault_kind {
    FAULT_HANG = 0,      /* the rank stops forever before a collective (group, op) */
    FAULT_CRASH,         /* the rank's process dies */
    FAULT_NODE_CRASH,    /* every rank of a node dies */
    FAULT_NAN,           /* NaN (or Inf) written into a tensor: loss, a layer's activation or gradient */
    FAULT_STRAGGLER,     /* the rank computes `factor` times slower from `step` on */
    FAULT_COLL_MISMATCH, /* the rank issues a collective its group does not */
    FAULT_CKPT_ENOSPC,   /* the rank's checkpoint write fails with ENOSPC */
    FAULT_CKPT_CRASH,    /* the rank dies in the middle of writing its checkpoint shard */
    FAULT_CKPT_CORRUPT,  /* a byte of the rank's shard of the checkpoint saved at `step` is flipped on disk */
    FAULT_DATA_CORRUPT,  /* the data file is damaged before the job starts (the runner does it) */
    FAULT_OOM,           /* the rank allocates more device memory than it has */
    FAULT_SHORT_NODE,    /* a node sees `devices` devices instead of gpus_per_node */
    FAULT_VERSION_SKEW,  /* a node runs another build (`version`) */
    FAULT_PREEMPT,       /* the scheduler preempts the job: SIGTERM reaches the rank at the start of `step` */
    FAULT_DATA_STALL,    /* the rank's first sample read of iteration `step` never returns (a hung file system) */
    /* The doctor's kinds (engine/doctor, docs/doctor.md): what a pre-job check finds, not training */
    FAULT_SLOW_LINK,  /* a node's network link is `factor` times slower (a degraded NIC or cable) */
    FAULT_HIDDEN_DIR, /* a node cannot see a shared directory (`dir`; every one the doctor checks when none) */
    FAULT_AMAX_SPIKE, /* --fp8-format jobs: the rank's amax of one FP8 tensor is `factor` times its value at `step`
                         (an outlier): the qkv input of `layer` (tensor activation) or its output gradient */
    FAULT_KIND_COUNT
} fault_kind;

typedef enum fault_tensor { FAULT_T_LOSS = 0, FAULT_T_ACTIVATION, FAULT_T_GRADIENT } fault_tensor;

/* data_corrupt: what happened to the job's copy of the data file; each form trips a different check
 * of the loader (docs/faults.md), as a copy that stopped short or a file from another tool would. */
typedef enum fault_damage {
    FAULT_D_BIN_CUT = 0, /* the .bin two bytes short: the last sequence lies outside it */
    FAULT_D_BIN_MISSING, /* the .bin gone (only the .idx was copied) */
    FAULT_D_IDX_CUT,     /* the .idx one byte short: its size no longer fits its counts */
    FAULT_D_IDX_MAGIC,   /* the .idx's first byte overwritten: not a Megatron index */
    FAULT_D_IDX_DTYPE,   /* the .idx's dtype code zeroed: a token type no reader knows */
    FAULT_D_TOKEN,       /* a token of the first sample of iteration `step` made an id outside the vocabulary:
                            found mid-run, when that batch is read */
    FAULT_DAMAGE_COUNT
} fault_damage;

#define FAULT_NAME_LEN 32
#define FAULT_PATH_LEN 256

typedef struct fault_spec {
    fault_kind kind;
    int64_t step;               /* iteration it fires at (1-based); 0 for the start-up kinds (short_node, version_skew,
                        data_corrupt but its damage token) */
    int rank;                   /* global rank; -1 when `node` names the target */
    int node;                   /* node index (rank / gpus_per_node); -1 when `rank` names the target */
    char group[FAULT_NAME_LEN]; /* hang, mismatch: communicator name "tp" "pp" "dp" "cp" "dp_cp" "world", or "any" */
    char op[FAULT_NAME_LEN];    /* hang, mismatch: "all_reduce" "all_gather" "reduce_scatter" "broadcast" "send"
                                   "recv" "barrier", or "any" */
    fault_tensor tensor;        /* nan */
    int layer;                  /* nan: activation/gradient of this global layer index (0-based); -1 = any */
    bool inf;                   /* nan: write +Inf instead of NaN */
    double factor;              /* straggler, slow_link: > 1 */
    int devices;                /* short_node: devices the node sees, < gpus_per_node */
    char version[FAULT_NAME_LEN]; /* version_skew: the other build's version string */
    fault_damage damage;          /* data_corrupt */
    char dir[FAULT_PATH_LEN];     /* hidden_dir: the directory, or the end of its path ("shared" hides /data/shared);
                                     "" = every directory the doctor checks */
    int line, col;                /* where the scenario file defined it (0 when not from a file) */
} fault_spec;

/* What became of one fault of a plan. */
typedef struct fault_firing {
    bool fired; /* it fired; survives restarts while the plan's owner keeps the plan */
    /* supervised plans only: */
    int attempt; /* the attempt it fired in + 1; 0 = not yet */
    double at;   /* when, in simulated seconds */
    int rank;    /* the first rank it fired on */
} fault_firing;

typedef struct fault_plan {
    int n;
    fault_spec *faults;  /* [n] */
    fault_firing *fired; /* [n] */
    int gpus_per_node;   /* node of rank r = r / gpus_per_node */
    /* A supervisor keeps the plan across restarts: `attempt` is the attempt now running, and a fault
     * fires in one attempt only (every rank of a node in that attempt), recorded in fired[i]. */
    bool supervised;
    int attempt;
} fault_plan;

const char *fault_kind_name(fault_kind k);     /* "hang", "crash", "node_crash", "nan", ... */
int fault_kind_from_name(const char *name);    /* -1 when unknown */
const char *fault_tensor_name(fault_tensor t); /* "loss", "activation", "gradient" */
int fault_tensor_from_name(const char *name);  /* -1 when unknown */
const char *fault_damage_name(fault_damage d); /* "bin_cut", "bin_missing", "idx_cut", ... */
int fault_damage_from_name(const char *name);  /* -1 when unknown */
/* Fills a spec with the kind's defaults (rank/node -1, group/op "any", layer -1, factor 4, ...). */
void fault_spec_default(fault_spec *f, fault_kind k);
/* Checks one spec against a world of `world` ranks on nodes of `gpus_per_node`; -1 with err naming
 * the field and the fix. */
int fault_spec_check(const fault_spec *f, int world, int gpus_per_node, char *err, size_t errlen);
/* What a fault is checked against beyond the world: the job's length, model and saves, each with the name
 * its caller gives the setting (a scenario's "training.train-iters", train_llama3's "--train-iters"). A
 * value of 0 is unknown and not checked (train_iters, num_layers); save_interval 0: no checkpoints. */
typedef struct fault_job {
    int world, gpus_per_node;
    int64_t train_iters;
    int num_layers, save_interval;
    const char *iters_name, *layers_name, *interval_name;
    bool fp8; /* the job trains in FP8 (--fp8-format): amax_spike needs it */
} fault_job;
/* Which part of a fault fault_spec_check_job found wrong (a scenario points at that line). */
typedef enum fault_check_at { FAULT_AT_SPEC, FAULT_AT_STEP, FAULT_AT_LAYER } fault_check_at;
/* The one check of a fault against its job, for TWINRUN_FAULTS and scenarios alike: fault_spec_check,
 * then a step within train_iters (it would never fire), a layer the model has, and a checkpoint fault at
 * an iteration the job saves. -1 with err naming the setting and the fix, *at (may be NULL) what is wrong. */
int fault_spec_check_job(const fault_spec *f, const fault_job *j, fault_check_at *at, char *err, size_t errlen);
/* One line describing the fault: "hang of rank 213 before dp all_reduce at iteration 3". */
void fault_spec_describe(const fault_spec *f, char *out, size_t outlen);
/* True when the fault targets global rank r (its rank, or a rank of its node). */
bool fault_targets_rank(const fault_spec *f, int r, int gpus_per_node);

/* Compact plan syntax, for TWINRUN_FAULTS and tests: faults separated by ';', each
 * "kind@step:key=value,key=value", e.g. "hang@3:rank=5,group=dp,op=all_reduce;nan@5:rank=2,tensor=activation,layer=1".
 * Returns 0 with a plan (free with fault_plan_free) or -1 with err naming the fault and key. */
int fault_plan_parse(const char *text, int world, int gpus_per_node, fault_plan *out, char *err, size_t errlen);
int fault_plan_init(fault_plan *p, int n, int gpus_per_node); /* n zeroed specs, fired cleared */
void fault_plan_free(fault_plan *p);

/* ---- injection sites (engine) -------------------------------------------------------------------
 * One fault_rank per rank; every hook accepts NULL (no plan) and then does nothing. */
typedef struct fault_rank fault_rank;

fault_rank *fault_rank_open(fault_plan *plan, int rank, int world, dev_device *d);
void fault_rank_close(fault_rank *fr);
/* amax_spike: whether one fires on this rank, whose stage holds layers [first_layer, first_layer + nlayers),
 * in this iteration's forward (gradient false) or backward pass; then *layer (global: the fault's, or the
 * stage's first) and *factor. Marks it fired. */
bool fault_amax_spike(fault_rank *fr, bool gradient, int first_layer, int nlayers, int *layer, double *factor);
/* Watches a communicator's calls (hang, mismatch). */
void fault_rank_watch(fault_rank *fr, coll_comm *c);
/* Start of iteration `it`: crash, node crash and OOM fire here. */
void fault_step_begin(fault_rank *fr, int64_t it);
/* A preemption of this rank at the iteration fault_step_begin started: true once (it has fired). The
 * engine treats it as a SIGTERM: with --exit-signal-handler the job saves and stops, without it the
 * rank dies as SIGTERM's default action kills a process (exit 143). */
bool fault_preempt(fault_rank *fr);
/* Before a sample read: how many seconds this read stalls (INFINITY once, at the first read of the
 * iteration a data_stall targets; 0 otherwise). The data-loader watchdog (engine/train/data_watch.c)
 * sleeps up to its deadline and reports the read. */
double fault_data_stall(fault_rank *fr);
/* End of the iteration's compute: a straggler sleeps (factor-1) x the iteration's busy time. */
void fault_step_end(fault_rank *fr, double busy_seconds);
/* After the engine produced a tensor x [n] of dt on stream s: NaN/Inf fires here when (tensor, layer) match. */
void fault_tensor_site(fault_rank *fr, fault_tensor t, int layer, dev_stream *s, void *x, tr_dtype dt, size_t n);
/* The file I/O the rank's checkpoint save at iteration `it` goes through: `base` itself, or a
 * wrapper that fails shard writes with ENOSPC (ckpt_enospc) or ends the rank half-way through its
 * shard (ckpt_crash). Valid until the next call. */
const tr_file_io *fault_ckpt_io(fault_rank *fr, int64_t it, const tr_file_io *base);
/* What this rank reports at start-up: device count and build version (short_node, version_skew). */
int fault_visible_devices(fault_rank *fr, int devices);
const char *fault_build_version(fault_rank *fr, const char *version);
/* The doctor's kinds. slow_link: when one targets this rank's node, its links are made `factor` times
 * slower through the seam (coll_set_link_slowdown: the twin's cost model charges it; a real network
 * cannot be slowed). hidden_dir: whether `path` is hidden from this rank (its node's fault names it). */
void fault_slow_links(fault_rank *fr);
bool fault_dir_hidden(fault_rank *fr, const char *path);
/* Whether a kind is one only the doctor notices (slow_link, hidden_dir): training has no judge for it. */
bool fault_kind_is_doctor(fault_kind kind);

#endif
