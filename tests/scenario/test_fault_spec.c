/* Fault specs and the compact plan syntax (TWINRUN_FAULTS): names, defaults, the check against
 * a world with its messages, descriptions, which ranks a fault hits, and strict parsing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/assert_text.h"
#include "fault/fault.h"

#define ERRLEN 512

static void test_names(void **state) {
    (void)state;
    const char *names[] = {"hang",         "crash",      "node_crash",   "nan",          "straggler",  "coll_mismatch",
                           "ckpt_enospc",  "ckpt_crash", "ckpt_corrupt", "data_corrupt", "oom",        "short_node",
                           "version_skew", "preempt",    "data_stall",   "slow_link",    "hidden_dir", "amax_spike"};
    assert_int_equal(sizeof names / sizeof names[0], FAULT_KIND_COUNT);
    for (int k = 0; k < FAULT_KIND_COUNT; k++) {
        assert_string_equal(fault_kind_name((fault_kind)k), names[k]);
        assert_int_equal(fault_kind_from_name(names[k]), k);
    }
    assert_int_equal(fault_kind_from_name("Hang"), -1);
    assert_int_equal(fault_kind_from_name(""), -1);
    assert_int_equal(fault_kind_from_name(NULL), -1);
    assert_string_equal(fault_kind_name(FAULT_KIND_COUNT), "?");
    assert_string_equal(fault_tensor_name(FAULT_T_LOSS), "loss");
    assert_string_equal(fault_tensor_name(FAULT_T_ACTIVATION), "activation");
    assert_string_equal(fault_tensor_name(FAULT_T_GRADIENT), "gradient");
    assert_int_equal(fault_tensor_from_name("gradient"), FAULT_T_GRADIENT);
    assert_int_equal(fault_tensor_from_name("weights"), -1);
    const char *damages[] = {"bin_cut", "bin_missing", "idx_cut", "idx_magic", "idx_dtype", "token"};
    assert_int_equal(sizeof damages / sizeof damages[0], FAULT_DAMAGE_COUNT);
    for (int d = 0; d < FAULT_DAMAGE_COUNT; d++) {
        assert_string_equal(fault_damage_name((fault_damage)d), damages[d]);
        assert_int_equal(fault_damage_from_name(damages[d]), d);
    }
    assert_int_equal(fault_damage_from_name("bin"), -1);
    assert_int_equal(fault_damage_from_name(NULL), -1);
    assert_string_equal(fault_damage_name(FAULT_DAMAGE_COUNT), "?");
}

static void test_defaults(void **state) {
    (void)state;
    fault_spec f;
    memset(&f, 0x5a, sizeof f);
    fault_spec_default(&f, FAULT_STRAGGLER);
    assert_int_equal(f.kind, FAULT_STRAGGLER);
    assert_int_equal(f.step, 0);
    assert_int_equal(f.rank, -1);
    assert_int_equal(f.node, -1);
    assert_string_equal(f.group, "any");
    assert_string_equal(f.op, "any");
    assert_int_equal(f.tensor, FAULT_T_ACTIVATION);
    assert_int_equal(f.layer, -1);
    assert_false(f.inf);
    assert_true(f.factor == 4.0);
    assert_int_equal(f.devices, 0);
    assert_string_equal(f.version, "twinrun-0.0-skew");
    assert_int_equal(f.damage, FAULT_D_BIN_CUT);
    assert_int_equal(f.line, 0);
}

static fault_spec make(fault_kind k, int64_t step, int rank, int node) {
    fault_spec f;
    fault_spec_default(&f, k);
    f.step = step;
    f.rank = rank;
    f.node = node;
    return f;
}

static void refused_by_check(const fault_spec *f, const char *msg) {
    char err[ERRLEN] = "";
    assert_int_equal(fault_spec_check(f, 1024, 8, err, sizeof err), -1);
    assert_contains(err, msg);
}

static void test_check(void **state) {
    (void)state;
    char err[ERRLEN] = "";
    fault_spec f = make(FAULT_HANG, 3, 213, -1);
    assert_int_equal(fault_spec_check(&f, 1024, 8, err, sizeof err), 0);
    f = make(FAULT_HANG, 3, 1024, -1);
    refused_by_check(&f, "rank 1024 does not exist: the world has 1024 ranks (0-1023)");
    f = make(FAULT_CRASH, 3, -1, -1);
    refused_by_check(&f, "crash needs a target: give rank (0-1023)");
    f = make(FAULT_CRASH, 3, -1, 4);
    refused_by_check(&f, "crash hits one rank, not a node: give rank (0-1023) instead of node");
    f = make(FAULT_HANG, 0, 5, -1);
    refused_by_check(&f, "hang needs a step >= 1, the iteration it fires at (got 0)");
    f = make(FAULT_NODE_CRASH, 2, -1, 128);
    refused_by_check(&f, "node 128 does not exist: the cluster has 128 nodes of 8 GPUs (0-127)");
    f = make(FAULT_NODE_CRASH, 2, -1, -1);
    refused_by_check(&f, "node_crash needs a target: give node (0-127), or a rank (0-1023) to hit its node");
    f = make(FAULT_NODE_CRASH, 2, 17, -1); /* the node of rank 17 */
    assert_int_equal(fault_spec_check(&f, 1024, 8, err, sizeof err), 0);
    f = make(FAULT_NODE_CRASH, 2, 17, 3);
    refused_by_check(&f, "node_crash: rank 17 is on node 2, not node 3: give only node (or only rank)");
    f = make(FAULT_SHORT_NODE, 1, -1, 3);
    refused_by_check(&f, "short_node happens at start-up, before iteration 1: leave out the step (got 1)");
    f = make(FAULT_SHORT_NODE, 0, -1, 3);
    f.devices = 8;
    refused_by_check(&f, "short_node: devices 8 must be in 0-7");
    f.devices = 6;
    assert_int_equal(fault_spec_check(&f, 1024, 8, err, sizeof err), 0);
    f = make(FAULT_DATA_CORRUPT, 0, -1, -1); /* the shared file: no rank needed */
    assert_int_equal(fault_spec_check(&f, 1024, 8, err, sizeof err), 0);
    f = make(FAULT_HANG, 3, 0, -1);
    strcpy(f.group, "ep");
    refused_by_check(&f, "group 'ep' is not a communicator: use tp, pp, dp, cp, dp_cp, world or any");
    strcpy(f.group, "dp_cp");
    strcpy(f.op, "alltoall");
    refused_by_check(&f, "op 'alltoall' is not a collective");
    f = make(FAULT_STRAGGLER, 3, 0, -1);
    f.factor = 1;
    refused_by_check(&f, "straggler: factor 1 must be in (1, 1000]");
    f.factor = 1001;
    refused_by_check(&f, "straggler: factor 1001 must be in (1, 1000]");
    f = make(FAULT_NAN, 3, 0, -1);
    f.tensor = FAULT_T_LOSS;
    f.layer = 1;
    refused_by_check(&f, "nan: layer 1 applies to activation and gradient, not loss");
    f = make(FAULT_VERSION_SKEW, 0, -1, 0);
    f.version[0] = 0;
    refused_by_check(&f, "version_skew: version is empty");
    f = make(FAULT_CRASH, 1, 0, -1);
    assert_int_equal(fault_spec_check(&f, 12, 8, err, sizeof err), -1);
    assert_contains(err, "a world of 12 ranks is not whole nodes of 8 GPUs");
}

static void describe(const fault_spec *f, const char *want) {
    char out[256];
    fault_spec_describe(f, out, sizeof out);
    assert_string_equal(out, want);
}

static void test_describe(void **state) {
    (void)state;
    fault_spec f = make(FAULT_HANG, 3, 213, -1);
    strcpy(f.group, "dp");
    strcpy(f.op, "all_reduce");
    describe(&f, "hang of rank 213 before dp all_reduce at iteration 3");
    f = make(FAULT_HANG, 2, 1, -1);
    describe(&f, "hang of rank 1 before a collective at iteration 2");
    f = make(FAULT_CRASH, 7, 12, -1);
    describe(&f, "crash of rank 12 at iteration 7");
    f = make(FAULT_NODE_CRASH, 4, -1, 3);
    describe(&f, "crash of node 3 (all its ranks) at iteration 4");
    f = make(FAULT_NAN, 5, 2, -1);
    f.layer = 1;
    describe(&f, "NaN in the activation of layer 1 on rank 2 at iteration 5");
    f.inf = true;
    f.tensor = FAULT_T_GRADIENT;
    f.layer = -1;
    describe(&f, "Inf in a gradient (any layer) on rank 2 at iteration 5");
    f = make(FAULT_NAN, 5, 2, -1);
    f.tensor = FAULT_T_LOSS;
    describe(&f, "NaN in the loss of rank 2 at iteration 5");
    f = make(FAULT_STRAGGLER, 3, 7, -1);
    f.factor = 2.5;
    describe(&f, "straggler: rank 7 computes 2.5x slower from iteration 3");
    f = make(FAULT_COLL_MISMATCH, 2, 3, -1);
    strcpy(f.group, "tp");
    describe(&f, "collective mismatch: rank 3 issues a tp collective its group does not, at iteration 2");
    f = make(FAULT_CKPT_ENOSPC, 10, 4, -1);
    describe(&f, "ENOSPC on the checkpoint write of rank 4 at iteration 10");
    f = make(FAULT_CKPT_CRASH, 10, 4, -1);
    describe(&f, "crash of rank 4 while writing its checkpoint shard at iteration 10");
    f = make(FAULT_CKPT_CORRUPT, 10, 4, -1);
    describe(&f, "a flipped byte in the checkpoint shard of rank 4 saved at iteration 10");
    f = make(FAULT_DATA_CORRUPT, 0, -1, -1);
    describe(&f, "corrupt data file (.bin cut short), before the job starts");
    f.rank = 3;
    f.damage = FAULT_D_IDX_MAGIC;
    describe(&f, "corrupt data file (.idx magic overwritten) read by rank 3, before the job starts");
    f.damage = FAULT_D_BIN_MISSING;
    describe(&f, "corrupt data file (.bin missing) read by rank 3, before the job starts");
    f.damage = FAULT_D_TOKEN;
    f.step = 4;
    describe(&f, "corrupt data file (a token outside the vocabulary), read at iteration 4");
    f = make(FAULT_OOM, 6, 9, -1);
    describe(&f, "out of device memory on rank 9 at iteration 6");
    f = make(FAULT_SHORT_NODE, 0, -1, 5);
    f.devices = 7;
    describe(&f, "short node: node 5 sees only 7 devices at start-up");
    f = make(FAULT_VERSION_SKEW, 0, -1, 1);
    describe(&f, "version skew: node 1 runs build 'twinrun-0.0-skew' at start-up");
    char small[8];
    fault_spec_describe(&f, small, sizeof small); /* truncates, terminated */
    assert_string_equal(small, "version");
}

static void test_targets(void **state) {
    (void)state;
    fault_spec f = make(FAULT_CRASH, 1, 9, -1);
    assert_true(fault_targets_rank(&f, 9, 8));
    assert_false(fault_targets_rank(&f, 8, 8));
    f = make(FAULT_NODE_CRASH, 1, -1, 1);
    for (int r = 0; r < 24; r++) assert_int_equal(fault_targets_rank(&f, r, 8), r >= 8 && r < 16);
    f = make(FAULT_SHORT_NODE, 0, 20, -1); /* a node kind named by a rank: that rank's node */
    assert_true(fault_targets_rank(&f, 16, 8));
    assert_false(fault_targets_rank(&f, 24, 8));
    f = make(FAULT_DATA_CORRUPT, 0, -1, -1);
    assert_true(fault_targets_rank(&f, 0, 8));
    assert_true(fault_targets_rank(&f, 1023, 8));
    assert_false(fault_targets_rank(NULL, 0, 8));
}

static void test_plan_parse(void **state) {
    (void)state;
    fault_plan p;
    char err[ERRLEN] = "";
    const char *doc = "hang@3:rank=5,group=dp,op=all_reduce;nan@5:rank=2,tensor=activation,layer=1";
    assert_int_equal(fault_plan_parse(doc, 16, 8, &p, err, sizeof err), 0);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.gpus_per_node, 8);
    assert_non_null(p.fired);
    assert_false(p.fired[0].fired || p.fired[1].fired);
    assert_int_equal(p.faults[0].kind, FAULT_HANG);
    assert_int_equal(p.faults[0].step, 3);
    assert_int_equal(p.faults[0].rank, 5);
    assert_string_equal(p.faults[0].group, "dp");
    assert_string_equal(p.faults[0].op, "all_reduce");
    assert_int_equal(p.faults[1].kind, FAULT_NAN);
    assert_int_equal(p.faults[1].tensor, FAULT_T_ACTIVATION);
    assert_int_equal(p.faults[1].layer, 1);
    assert_int_equal(p.faults[1].line, 0);
    fault_plan_free(&p);
    assert_null(p.faults);
    assert_int_equal(p.n, 0);

    /* start-up kinds without @step; blanks around items and keys; node kinds by rank */
    const char *more = " short_node:node=1 ; version_skew:rank=9,version=v2.1 ;data_corrupt; node_crash@2:rank=15;"
                       "straggler@1:rank=0,factor=2.5;nan@2:rank=3,tensor=loss,inf=true;oom@4:rank=1;"
                       "data_corrupt:damage=idx_dtype;data_corrupt@3:damage=token";
    assert_int_equal(fault_plan_parse(more, 16, 8, &p, err, sizeof err), 0);
    assert_int_equal(p.n, 9);
    assert_int_equal(p.faults[8].damage, FAULT_D_TOKEN);
    assert_int_equal(p.faults[8].step, 3);
    assert_int_equal(p.faults[2].damage, FAULT_D_BIN_CUT);
    assert_int_equal(p.faults[7].damage, FAULT_D_IDX_DTYPE);
    assert_int_equal(p.faults[0].kind, FAULT_SHORT_NODE);
    assert_int_equal(p.faults[0].devices, 7); /* one fewer than gpus_per_node */
    assert_int_equal(p.faults[1].node, 1);
    assert_int_equal(p.faults[1].rank, -1);
    assert_string_equal(p.faults[1].version, "v2.1");
    assert_int_equal(p.faults[2].kind, FAULT_DATA_CORRUPT);
    assert_int_equal(p.faults[3].node, 1);
    assert_true(p.faults[4].factor == 2.5);
    assert_true(p.faults[5].inf);
    assert_int_equal(p.faults[5].tensor, FAULT_T_LOSS);
    fault_plan_free(&p);

    assert_int_equal(fault_plan_parse("", 16, 8, &p, err, sizeof err), 0);
    assert_int_equal(p.n, 0);
    fault_plan_free(&p);
    assert_int_equal(fault_plan_parse(NULL, 16, 8, &p, err, sizeof err), 0);
    assert_int_equal(p.n, 0);
    fault_plan_free(&p);
}

static void test_plan_parse_errors(void **state) {
    (void)state;
    struct {
        const char *text, *msg;
    } bad[] = {
        {"hang@3:rank=5,tensr=loss", "fault 1 ('hang@3:rank=5,tensr=loss'): unknown key 'tensr'; did you mean "
                                     "'tensor'?; keys: rank, node,"},
        {"crash@1:rank=1;hang@3:rank=5,rank=6", "fault 2 ('hang@3:rank=5,rank=6'): key 'rank' given twice"},
        {"crash@1:rank=1;", "fault 2 is empty: remove the extra ';'"},
        {"crash@1:rank=1;;crash@2:rank=2", "fault 2 is empty"},
        {"crash@1:rank=x", "fault 1 ('crash@1:rank=x'): rank: expected a non-negative integer, got 'x'"},
        {"crash@1:rank=5 extra", "rank: expected a non-negative integer, got '5 extra'"},
        {"crash@1:rank=-1", "rank: expected a non-negative integer, got '-1'"},
        {"crash@1x:rank=1", "fault 1 ('crash@1x:rank=1'): step '1x' is not a whole number: write crash@N"},
        {"crash@:rank=1", "step '' is not a whole number"},
        {"crash:rank=1", "crash needs @step, the iteration it fires at (e.g. crash@3:rank=0)"},
        {"crash@0:rank=1", "crash needs a step >= 1"},
        {"crsh@1:rank=1", "fault 1 ('crsh@1:rank=1'): unknown kind 'crsh'"},
        {"@1:rank=1", "fault 1 ('@1:rank=1'): no kind"},
        {"hang@1:rank=1,factor=3", "key 'factor' does not apply to hang (it takes: rank, group, op)"},
        {"crash@1:node=1", "key 'node' does not apply to crash (it takes: rank)"},
        {"hang@1:rank=1,group=ep", "group: 'ep' is not a communicator"},
        {"hang@1:rank=1,op=alltoall", "op: 'alltoall' is not a collective"},
        {"nan@1:rank=1,tensor=weights", "tensor: 'weights' is not loss, activation or gradient"},
        {"nan@1:rank=1,inf=1", "inf: expected true or false, got '1'"},
        {"straggler@1:rank=1,factor=fast", "factor: expected a number, got 'fast'"},
        {"straggler@1:rank=1,factor=0x10", "factor: expected a number, got '0x10'"},
        {"straggler@1:rank=1,factor=0.5", "straggler: factor 0.5 must be in (1, 1000]"},
        {"short_node:node=1,devices=0", "devices: a node seeing 0 devices is not a short node"},
        {"version_skew:node=1,version=a b", "version: 'a b' must be 1-31 letters, digits or ._+- characters"},
        {"crash@1:rank=16", "fault 1 ('crash@1:rank=16'): rank 16 does not exist: the world has 16 ranks (0-15)"},
        {"crash@1:", "fault 1 ('crash@1:'): nothing after ':'"},
        {"crash@1:rank", "key 'rank' has no value: write rank=VALUE"},
        {"crash@1:rank=1,", "empty key at ''"},
        {"crash@1:=1", "empty key at '=1'"},
        {"short_node@3:node=1", "short_node happens at start-up"},
        {"data_corrupt:damage=bits",
         "damage: 'bits' is not bin_cut, bin_missing, idx_cut, idx_magic, idx_dtype or token"},
        {"data_corrupt:damage=token", "data_corrupt with damage token needs a step >= 1: the iteration whose first"},
        {"data_corrupt@2:damage=idx_cut", "data_corrupt happens at start-up, before iteration 1: leave out the step"},
        {"crash@1:rank=1,damage=idx_cut", "key 'damage' does not apply to crash (it takes: rank)"},
        {"data_corrupt:damge=idx_cut", "unknown key 'damge'; did you mean 'damage'?"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        fault_plan p;
        char err[ERRLEN] = "";
        if (fault_plan_parse(bad[i].text, 16, 8, &p, err, sizeof err) != -1) fail_msg("accepted \"%s\"", bad[i].text);
        assert_contains(err, bad[i].msg);
        assert_null(p.faults);
        assert_null(p.fired);
        assert_int_equal(p.n, 0);
    }
    fault_plan p;
    char err[ERRLEN] = "";
    assert_int_equal(fault_plan_parse("crash@1:rank=1", 12, 8, &p, err, sizeof err), -1);
    assert_contains(err, "a world of 12 ranks is not whole nodes of 8 GPUs");
    /* more faults than a plan holds: refused before anything is allocated */
    size_t n = 10001;
    char *many = malloc(n * 2);
    for (size_t i = 0; i < n; i++) many[2 * i] = 'x', many[2 * i + 1] = ';';
    many[2 * n - 1] = 0;
    assert_int_equal(fault_plan_parse(many, 16, 8, &p, err, sizeof err), -1);
    assert_contains(err, "10001 faults; at most 10000 fit in one plan");
    free(many);
}

static void test_plan_init(void **state) {
    (void)state;
    fault_plan p;
    assert_int_equal(fault_plan_init(&p, 3, 4), 0);
    assert_int_equal(p.n, 3);
    assert_int_equal(p.gpus_per_node, 4);
    for (int i = 0; i < 3; i++) {
        assert_false(p.fired[i].fired);
        assert_int_equal(p.fired[i].attempt, 0);
        assert_int_equal(p.faults[i].rank, 0); /* zeroed, not defaulted */
    }
    assert_false(p.supervised);
    fault_plan_free(&p);
    assert_null(p.fired);
    assert_int_equal(p.n, 0);
    assert_int_equal(fault_plan_init(&p, 0, 8), 0);
    assert_null(p.faults);
    fault_plan_free(&p);
    assert_int_equal(fault_plan_init(&p, -1, 8), -1);
    fault_plan_free(NULL);
}

/* The doctor's kinds: node targets, no step, factor and dir checked by the one validator. */
static void test_doctor_kinds(void **state) {
    (void)state;
    fault_plan p;
    char err[ERRLEN] = "";
    assert_int_equal(
        fault_plan_parse("slow_link:rank=20,factor=3;hidden_dir:node=1,dir=/data/shared/;hidden_dir:node=2", 32, 8, &p,
                         err, sizeof err),
        0);
    assert_int_equal(p.faults[0].kind, FAULT_SLOW_LINK);
    assert_int_equal(p.faults[0].node, 2); /* a rank names its node */
    assert_int_equal(p.faults[0].rank, -1);
    assert_true(p.faults[0].factor == 3);
    assert_string_equal(p.faults[1].dir, "/data/shared"); /* the trailing '/' dropped */
    assert_string_equal(p.faults[2].dir, "");
    assert_true(fault_kind_is_doctor(FAULT_SLOW_LINK) && fault_kind_is_doctor(FAULT_HIDDEN_DIR));
    assert_false(fault_kind_is_doctor(FAULT_VERSION_SKEW));
    char what[256];
    fault_spec_describe(&p.faults[0], what, sizeof what);
    assert_string_equal(what, "slow link: the network of node 2 is 3x slower");
    fault_spec_describe(&p.faults[1], what, sizeof what);
    assert_string_equal(what, "hidden directory: node 1 cannot see /data/shared");
    /* hidden_dir hides its directory and everything below it, matched by whole path components */
    fault_rank *fr = fault_rank_open(&p, 8, 32, NULL);
    assert_true(fault_dir_hidden(fr, "/data/shared/llama3-70b/logs"));
    assert_true(fault_dir_hidden(fr, "/data/shared"));
    fault_rank_close(fr);
    p.fired[1].fired = false;
    fr = fault_rank_open(&p, 8, 32, NULL);
    assert_false(fault_dir_hidden(fr, "/data/sharedx"));
    assert_false(fault_dir_hidden(fr, "/other/data/shared"));
    fault_rank_close(fr);
    fr = fault_rank_open(&p, 0, 32, NULL); /* node 0: no fault */
    assert_false(fault_dir_hidden(fr, "/data/shared"));
    fault_rank_close(fr);
    fault_plan_free(&p);
    struct {
        const char *text, *msg;
    } bad[] = {
        {"slow_link@2:node=1", "slow_link happens at start-up, before iteration 1: leave out the step"},
        {"slow_link:node=1,factor=1", "slow_link: factor 1 must be in (1, 1000]"},
        {"slow_link:node=4", "node 4 does not exist"},
        {"slow_link:node=1,dir=x", "key 'dir' does not apply to slow_link (it takes: rank, node, factor)"},
        {"hidden_dir:node=1,dir=../etc", "dir: '../etc' must be"},
        {"hidden_dir:node=1,dir=a b", "dir: 'a b' must be"},
        {"hidden_dir", "hidden_dir needs a target"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(fault_plan_parse(bad[i].text, 32, 8, &p, err, sizeof err), -1);
        assert_non_null(strstr(err, bad[i].msg));
    }
}

/* amax_spike: its keys, factor and tensor checked, only for an FP8 job, fired once on its rank and pass
 * when its layer is on the rank's stage. */
static void test_amax_spike(void **state) {
    (void)state;
    char err[ERRLEN];
    fault_plan p;
    assert_int_equal(fault_plan_parse("amax_spike@3:rank=2,layer=1,tensor=gradient", 8, 4, &p, err, sizeof err), 0);
    const fault_spec *f = &p.faults[0];
    assert_true(f->kind == FAULT_AMAX_SPIKE && f->factor == 1e4 && f->tensor == FAULT_T_GRADIENT && f->layer == 1);
    char what[256];
    fault_spec_describe(f, what, sizeof what);
    assert_string_equal(what,
                        "FP8 amax spike: the output gradient of layer 1's qkv on rank 2 is 10000x at iteration 3");
    fault_job job = {.world = 8,
                     .gpus_per_node = 4,
                     .train_iters = 10,
                     .num_layers = 4,
                     .iters_name = "--train-iters",
                     .layers_name = "--num-layers",
                     .interval_name = "--save-interval"};
    assert_int_equal(fault_spec_check_job(f, &job, NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "amax_spike needs a job that trains in FP8: add --fp8-format hybrid"));
    job.fp8 = true;
    assert_int_equal(fault_spec_check_job(f, &job, NULL, err, sizeof err), 0);
    /* fires on rank 2 only, in the backward pass of iteration 3, when layer 1 is on the stage */
    fault_rank *fr = fault_rank_open(&p, 2, 8, NULL);
    int layer;
    double factor;
    fault_step_begin(fr, 3);
    assert_false(fault_amax_spike(fr, false, 0, 4, &layer, &factor)); /* the forward pass: not its tensor */
    assert_false(fault_amax_spike(fr, true, 2, 2, &layer, &factor));  /* layers 2-3: not its layer */
    assert_true(fault_amax_spike(fr, true, 0, 2, &layer, &factor));
    assert_true(layer == 1 && factor == 1e4);
    assert_false(fault_amax_spike(fr, true, 0, 2, &layer, &factor)); /* once */
    fault_rank_close(fr);
    fault_plan_free(&p);
    struct {
        const char *text, *msg;
    } bad[] = {
        {"amax_spike@3:rank=2,tensor=loss", "amax_spike: the loss is not an FP8 tensor"},
        {"amax_spike@3:rank=2,factor=10", "amax_spike: factor 10 must be in [100, 1e30]"},
        {"amax_spike@3:rank=2,inf=true", "key 'inf' does not apply to amax_spike"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(fault_plan_parse(bad[i].text, 8, 4, &p, err, sizeof err), -1);
        if (!strstr(err, bad[i].msg)) fail_msg("%s: %s", bad[i].text, err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_doctor_kinds), cmocka_unit_test(test_names),
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_check),
        cmocka_unit_test(test_describe),     cmocka_unit_test(test_targets),
        cmocka_unit_test(test_plan_parse),   cmocka_unit_test(test_plan_parse_errors),
        cmocka_unit_test(test_plan_init),    cmocka_unit_test(test_amax_spike),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
