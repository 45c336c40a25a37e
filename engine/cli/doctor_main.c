/* doctor: the pre-job checks of the 70B guide (§1.3, FAQ Q1-Q3) over a job's ranks, started as the job
 * will be (mpirun over the hostfile, torchrun-style variables, WORLD_SIZE on the twin). docs/doctor.md.
 *
 * Exit status: 0 every check passed (warnings allowed), 1 a check failed (each says what to fix), 2 a
 * usage or launcher error. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safe_file.h"
#include "doctor/doctor.h"
#include "fault/fault.h"
#include "launch/launch_vars.h"
#include "twinrun/err.h"
#include "twinrun/launch.h"
#include "twinrun/version.h"

static const char usage[] =
    "usage: doctor [OPTIONS]     (started as the job: mpirun/torchrun on GPUs, WORLD_SIZE=N on the twin)\n"
    "\n"
    "Checks a cluster before a job, over the job's ranks: twinrun build and commit; driver, runtime and\n"
    "NCCL/MCCL versions; the NCCL_*/MCCL_* and other settings that differ between nodes; GPUs per node and\n"
    "their health; clock skew; the hostfile's names; the job's directories (visible, writable, the same\n"
    "files from every node); then all-reduce, all-gather, reduce-scatter and send/recv on one node, two\n"
    "nodes, one model-parallel group and all ranks, with nccl-tests' bus bandwidth and the slowest link.\n"
    "\n"
    "directories (each may be given more than once, up to 16 in all):\n"
    "  --dataset_dir DIR       the 70B guide's shared directory: DIR/dataset, DIR/tokenizer, and DIR/checkpoints\n"
    "                          and DIR/logs (written to)\n"
    "  --data-dir DIR          read by the job          --tokenizer-dir DIR   read by the job\n"
    "  --checkpoint-dir DIR    written by the job (--save)   --log-dir DIR   written by the job\n"
    "  --dir DIR               any other directory every node must see\n"
    "layout:\n"
    "  --hostfile FILE         OpenMPI hostfile: its slots must add up to the ranks; every name must resolve\n"
    "  --gpus-per-node N       ranks per node (default LOCAL_WORLD_SIZE / OMPI_COMM_WORLD_LOCAL_SIZE, else 8)\n"
    "  --tensor-model-parallel-size N, --pipeline-model-parallel-size N, --context-parallel-size N\n"
    "                          the model-parallel group of the third stage (default 1: one node's ranks are\n"
    "                          then the tensor-parallel size)\n"
    "collective test:\n"
    "  --sizes LIST            nccl-tests' sizes, e.g. 8M,64M,512M (the default; K, M, G are powers of 1024)\n"
    "  --iters N               timed iterations per size after a warm-up (default 5; 1 on the twin)\n"
    "  --slow-ratio X          a group below X times its stage's median bus bandwidth fails (default 0.5)\n"
    "  --max-clock-skew S      seconds a clock may differ from rank 0's (default 1)\n"
    "  --timeout S             the collectives' watchdog, seconds (default 600)\n"
    "reports:\n"
    "  --json FILE             the report as JSON        --junit FILE   as JUnit XML (a test case per check)\n"
    "  --quiet                 no text report on stdout (the exit status and the files only)\n"
    "  --version, --help\n"
    "\n"
    "A rehearsal's faults come from TWINRUN_FAULTS (docs/faults.md): version_skew, short_node, slow_link and\n"
    "hidden_dir are the ones the doctor names.\n"
    "Exit status: 0 every check passed, 1 a check failed (each line says what to fix), 2 a usage error.\n";

/* "8M" -> 8 MiB; 0 when not a positive size. */
static size_t size_of(const char *s) {
    char *end;
    errno = 0;
    const unsigned long long v = strtoull(s, &end, 10);
    if (end == s || errno || v == 0 || *s == '-') return 0;
    unsigned shift = 0;
    if (*end == 'K' || *end == 'k') shift = 10, end++;
    else if (*end == 'M' || *end == 'm') shift = 20, end++;
    else if (*end == 'G' || *end == 'g') shift = 30, end++;
    if (*end || v > ((unsigned long long)1 << 40) >> shift) return 0;
    return (size_t)(v << shift);
}

static int sizes_of(const char *list, doctor_options *o) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->nsizes = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (o->nsizes == DOCTOR_MAX_SIZES) return -1;
        if (!(o->sizes[o->nsizes++] = size_of(t))) return -1;
    }
    return o->nsizes ? 0 : -1;
}

static int positive_int(const char *s, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (end == s || *end || errno || v < 1 || v > INT_MAX) return -1;
    *out = (int)v;
    return 0;
}

static int positive_number(const char *s, double *out) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || errno || !(v > 0) || v > 1e9) return -1;
    *out = v;
    return 0;
}

static int add_dir(doctor_options *o, const char *what, const char *path, bool writable) {
    if (o->ndirs == DOCTOR_MAX_DIRS || strlen(path) >= DOCTOR_PATH_LEN || !*path) return -1;
    doctor_dir *d = &o->dirs[o->ndirs++];
    snprintf(d->what, sizeof d->what, "%s", what);
    snprintf(d->path, sizeof d->path, "%s", path);
    /* "/data/shared/" and "/data/shared" are one directory */
    for (size_t n = strlen(d->path); n > 1 && d->path[n - 1] == '/'; n--) d->path[n - 1] = 0;
    d->writable = writable;
    return 0;
}

/* --dataset_dir: the 70B guide's §2.1 layout, as scripts/train_llama3_70b_multi_nodes.sh reads it */
static int dataset_dir(doctor_options *o, const char *dir) {
    char p[DOCTOR_PATH_LEN + 16];
    static const struct {
        const char *what, *sub;
        bool writable;
    } parts[] = {{"data", "dataset", false},
                 {"tokenizer", "tokenizer", false},
                 {"checkpoint", "checkpoints", true},
                 {"log", "logs", true}};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, parts[i].sub);
        if (add_dir(o, parts[i].what, p, parts[i].writable)) return -1;
    }
    return 0;
}

typedef struct cli {
    doctor_options o;
    const char *json, *junit;
    bool quiet, per_node_given, mp_given;
} cli;

/* Underscores and hyphens are one (--dataset_dir, --dataset-dir), as in the launch scripts. */
static bool is(const char *arg, const char *name) {
    if (strncmp(arg, "--", 2)) return false;
    arg += 2;
    for (; *arg && *name; arg++, name++)
        if (*arg != *name && !((*arg == '_' || *arg == '-') && (*name == '_' || *name == '-'))) return false;
    return !*arg && !*name;
}

static int parse(int argc, char **argv, cli *c, char *err, size_t errlen) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (is(a, "help") || !strcmp(a, "-h")) return 1;
        if (is(a, "quiet")) {
            c->quiet = true;
            continue;
        }
        if (i + 1 >= argc || (argv[i + 1][0] == '-' && argv[i + 1][1] == '-'))
            return tr_errf(err, errlen, "%s needs a value (doctor --help lists the options)", a);
        const char *v = argv[++i];
        int rc = 0;
        if (is(a, "dataset-dir")) rc = dataset_dir(&c->o, v);
        else if (is(a, "data-dir")) rc = add_dir(&c->o, "data", v, false);
        else if (is(a, "tokenizer-dir")) rc = add_dir(&c->o, "tokenizer", v, false);
        else if (is(a, "checkpoint-dir") || is(a, "save")) rc = add_dir(&c->o, "checkpoint", v, true);
        else if (is(a, "log-dir")) rc = add_dir(&c->o, "log", v, true);
        else if (is(a, "dir")) rc = add_dir(&c->o, "dir", v, false);
        else if (is(a, "hostfile"))
            rc = strlen(v) < sizeof c->o.hostfile ? (snprintf(c->o.hostfile, sizeof c->o.hostfile, "%s", v), 0) : -1;
        else if (is(a, "gpus-per-node")) rc = positive_int(v, &c->o.gpus_per_node), c->per_node_given = true;
        else if (is(a, "tensor-model-parallel-size") || is(a, "tp")) rc = positive_int(v, &c->o.tp), c->mp_given = true;
        else if (is(a, "pipeline-model-parallel-size") || is(a, "pp"))
            rc = positive_int(v, &c->o.pp), c->mp_given = true;
        else if (is(a, "context-parallel-size") || is(a, "cp")) rc = positive_int(v, &c->o.cp), c->mp_given = true;
        else if (is(a, "sizes")) rc = sizes_of(v, &c->o);
        else if (is(a, "iters")) rc = positive_int(v, &c->o.iters);
        else if (is(a, "slow-ratio")) rc = positive_number(v, &c->o.slow_ratio) || c->o.slow_ratio >= 1 ? -1 : 0;
        else if (is(a, "max-clock-skew")) rc = positive_number(v, &c->o.max_clock_skew_s);
        else if (is(a, "timeout")) rc = positive_number(v, &c->o.timeout_s);
        else if (is(a, "json")) c->json = v;
        else if (is(a, "junit")) c->junit = v;
        else return tr_errf(err, errlen, "unknown option '%s' (doctor --help lists them)", a);
        if (rc) return tr_errf(err, errlen, "%s: invalid value '%s' (doctor --help says what it takes)", a, v);
    }
    return 0;
}

static int write_report(const char *path, const char *flag, const doctor_report *r,
                        int (*writer)(FILE *, const doctor_report *)) {
    tr_safe_file sf;
    char err[512];
    if (tr_safe_open(&sf, path, true, NULL, err, sizeof err)) {
        fprintf(stderr, "doctor: %s %s\n", flag, err);
        return -1;
    }
    if (writer(sf.f, r)) {
        tr_safe_abort(&sf);
        fprintf(stderr, "doctor: %s %s: cannot write the report\n", flag, path);
        return -1;
    }
    if (tr_safe_commit(&sf, err, sizeof err)) {
        fprintf(stderr, "doctor: %s %s\n", flag, err);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (tr_version_requested(argc, argv)) {
        tr_version_print(stdout, "doctor");
        return 0;
    }
    cli c = {0};
    doctor_options_default(&c.o);
    char err[2048];
    int rc = parse(argc, argv, &c, err, sizeof err);
    if (rc == 1) {
        fputs(usage, stdout);
        return 0;
    }
    if (rc) {
        fprintf(stderr, "doctor: %s\n", err);
        return TR_EXIT_USAGE;
    }
    const int world = launch_world_size(err, sizeof err);
    if (world < 0) {
        fprintf(stderr, "doctor: %s\n", err);
        return TR_EXIT_USAGE;
    }
    /* nodes as the launcher laid them out, else of 8 GPUs (the twin's), or one node of a smaller job */
    tr_launch_vars lv;
    if (!c.per_node_given)
        c.o.gpus_per_node = tr_launch_vars_from_env(&lv, err, sizeof err) == 0 && lv.local_world > 0 ? lv.local_world
                            : world < 8                                                              ? world
                                                                                                     : 8;
    if (world % c.o.gpus_per_node) {
        fprintf(stderr, "doctor: %d ranks are not whole nodes of %d: set --gpus-per-node\n", world, c.o.gpus_per_node);
        return TR_EXIT_USAGE;
    }
    /* no layout given: the model-parallel group is one node's ranks, the usual tensor-parallel size */
    if (!c.mp_given) c.o.tp = c.o.gpus_per_node;
    const int mp = c.o.tp * c.o.pp * c.o.cp;
    if (world % mp) {
        fprintf(stderr,
                "doctor: the model-parallel group of TP %d x PP %d x CP %d = %d ranks does not divide the %d ranks\n",
                c.o.tp, c.o.pp, c.o.cp, mp, world);
        return TR_EXIT_USAGE;
    }
    fault_plan plan = {0};
    const char *faults = getenv("TWINRUN_FAULTS");
    if (faults && *faults) {
        if (fault_plan_parse(faults, world, c.o.gpus_per_node, &plan, err, sizeof err)) {
            fprintf(stderr, "doctor: TWINRUN_FAULTS: %s\n", err);
            return TR_EXIT_USAGE;
        }
        for (int i = 0; i < plan.n; i++) {
            const fault_kind k = plan.faults[i].kind;
            if (!fault_kind_is_doctor(k) && k != FAULT_VERSION_SKEW && k != FAULT_SHORT_NODE) {
                fprintf(stderr,
                        "doctor: TWINRUN_FAULTS: fault %d (%s) happens in training, which the doctor does not run: "
                        "rehearse it with train_llama3 (the doctor takes version_skew, short_node, slow_link and "
                        "hidden_dir)\n",
                        i + 1, fault_kind_name(k));
                fault_plan_free(&plan);
                return TR_EXIT_USAGE;
            }
        }
        c.o.faults = &plan;
    }
    if (!c.quiet) c.o.progress = stderr;
    doctor_report rep;
    rc = doctor_run(&c.o, world, &rep, err, sizeof err);
    fault_plan_free(&plan);
    if (rc) {
        fprintf(stderr, "doctor: %s\n", err);
        return TR_EXIT_FATAL;
    }
    int status = rep.exit_code ? TR_EXIT_FATAL : 0;
    /* the reports are rank 0's: the job's other processes only share its verdict */
    if (rep.reported) {
        if (!c.quiet) doctor_report_text(stdout, &rep);
        if (c.json && write_report(c.json, "--json", &rep, doctor_report_json)) status = TR_EXIT_USAGE;
        if (c.junit && write_report(c.junit, "--junit", &rep, doctor_report_junit)) status = TR_EXIT_USAGE;
    }
    doctor_report_free(&rep);
    return status;
}
