/* Scenario files: a full file round-trips into every field and into an argv the engine parses;
 * every class of mistake is reported at its FILE:LINE:COL with the fix; hostfiles and presets. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/assert_text.h"
#include "runner/scenario.h"
#include "twinrun/config.h"

#define ERRLEN 1024
#define DATA TWINRUN_TEST_DATA "/../scenario/data"

/* Parses `text` as if it were the file DATA/NAME; returns the error text (empty on success). */
static int parse(const char *text, const char *name, scenario *s, char *err) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", DATA, name);
    return scenario_parse(text, strlen(text), path, s, err, ERRLEN);
}

/* The loader must refuse `text`; the message must start with "bad.yaml:LINE:COL: " and hold `needle`. */
static void expect_error(const char *text, int line, int col, const char *needle) {
    scenario s;
    char err[ERRLEN] = "", prefix[1200];
    int rc = scenario_parse(text, strlen(text), "dir/bad.yaml", &s, err, sizeof err);
    if (rc != -1) fail_msg("accepted, expected \"%s\":\n%s", needle, text);
    snprintf(prefix, sizeof prefix, "dir/bad.yaml:%d:%d: ", line, col);
    if (strncmp(err, prefix, strlen(prefix)) != 0) fail_msg("\"%s\"\n  does not start with \"%s\"", err, prefix);
    assert_contains(err, needle);
    /* a failed load leaves nothing to free, and freeing it again is harmless */
    assert_int_equal(s.nflags, 0);
    assert_null(s.flags);
    assert_null(s.hosts);
    assert_null(s.faults.faults);
    scenario_free(&s);
}

/* A valid scenario with one section swapped in, so error tests stay short and positions fixed. */
#define BASE_CLUSTER "cluster:\n  nodes: 128\n  gpus_per_node: 8\n"
#define BASE_TRAINING "training:\n  train-iters: 10\n  micro-batch-size: 1\n"

static const char *flag_value(const scenario *s, const char *name) {
    for (int i = s->nflags - 1; i >= 0; i--)
        if (strcmp(s->flags[i].name, name) == 0) return s->flags[i].value ? s->flags[i].value : "(switch)";
    return NULL;
}

static void test_full_round_trip(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "", cwd[1024], want[2048];
    if (scenario_load(DATA "/full.yaml", &s, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(err, "");
    assert_string_equal(s.path, DATA "/full.yaml");
    assert_string_equal(s.name, "full-format");
    assert_string_equal(s.description, "every key of docs/scenarios.md");
    assert_int_equal(s.seed, 4242);

    assert_int_equal(s.nodes, 2);
    assert_int_equal(s.gpus_per_node, 4);
    assert_string_equal(s.device, "H200"); /* canonical name from the device table */
    assert_true(s.capacity_scale == 0.5);
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_string_equal(s.hostfile, DATA "/hosts.txt");
    assert_int_equal(s.nhosts, 2);
    assert_string_equal(s.hosts[0].name, "node-a");
    assert_int_equal(s.hosts[0].slots, 4);
    assert_int_equal(s.hosts[0].line, 2);
    assert_string_equal(s.hosts[1].name, "node-b");
    assert_int_equal(s.hosts[1].line, 3);

    assert_int_equal(s.tp, 2);
    assert_int_equal(s.pp, 2);
    assert_int_equal(s.cp, 1);
    assert_int_equal(s.dp, 2); /* derived: 8 / (2 x 2 x 1) */
    assert_true(s.sequence_parallel);
    assert_true(s.distributed_optimizer);

    assert_string_equal(s.model_preset, "tiny");
    assert_string_equal(flag_value(&s, "num-layers"), "4"); /* the override wins */
    assert_string_equal(flag_value(&s, "vocab-size"), "512");
    assert_string_equal(flag_value(&s, "hidden-size"), "64"); /* from the preset */
    assert_string_equal(flag_value(&s, "swiglu"), "(switch)");
    assert_string_equal(flag_value(&s, "bf16"), "(switch)");
    assert_null(flag_value(&s, "fp16")); /* false: left out */
    assert_string_equal(flag_value(&s, "lr"), "3.0e-3");
    assert_string_equal(flag_value(&s, "lr-decay-style"), "cosine");
    assert_int_equal(s.train_iters, 8);
    /* positions: the override's key, the training flag's key */
    for (int i = 0; i < s.nflags; i++) {
        if (strcmp(s.flags[i].name, "lr") == 0) {
            assert_int_equal(s.flags[i].line, 30);
            assert_int_equal(s.flags[i].col, 3);
        }
        if (strcmp(s.flags[i].name, "num-layers") == 0 && strcmp(s.flags[i].value, "4") == 0) {
            assert_int_equal(s.flags[i].line, 23);
            assert_int_equal(s.flags[i].col, 5);
        }
    }

    /* data: the list flag keeps its values one by one, prefixes resolved against the file's folder */
    const sc_flag *dp = NULL;
    for (int i = 0; i < s.nflags; i++)
        if (strcmp(s.flags[i].name, "data-path") == 0) dp = &s.flags[i];
    assert_non_null(dp);
    assert_int_equal(dp->nvalues, 4);
    assert_string_equal(dp->values[0], "0.3");
    assert_string_equal(dp->values[1], DATA "/corpus/a_text_document");
    assert_string_equal(dp->values[2], "0.7");
    assert_string_equal(dp->values[3], "/data/b_text_document");
    snprintf(want, sizeof want, "0.3 %s/corpus/a_text_document 0.7 /data/b_text_document", DATA);
    assert_string_equal(dp->value, want);
    assert_string_equal(flag_value(&s, "split"), "969,30,1");
    assert_string_equal(flag_value(&s, "data-cache-path"), DATA "/cache");

    assert_int_equal(s.save_interval, 2);
    assert_int_equal(s.keep_last, 2);
    assert_int_equal(s.max_restarts, 3);
    assert_true(s.watchdog_seconds == 300);

    assert_int_equal(s.faults.n, 7);
    assert_int_equal(s.faults.gpus_per_node, 4);
    assert_non_null(s.faults.fired);
    for (int i = 0; i < s.faults.n; i++) assert_false(s.faults.fired[i].fired);
    const fault_spec *f = s.faults.faults;
    assert_int_equal(f[0].kind, FAULT_HANG);
    assert_int_equal(f[0].step, 3);
    assert_int_equal(f[0].rank, 5);
    assert_int_equal(f[0].node, -1);
    assert_string_equal(f[0].group, "dp");
    assert_string_equal(f[0].op, "all_reduce");
    assert_int_equal(f[0].line, 52);
    assert_int_equal(f[0].col, 5);
    assert_int_equal(f[1].kind, FAULT_NAN);
    assert_int_equal(f[1].tensor, FAULT_T_GRADIENT);
    assert_int_equal(f[1].layer, 3);
    assert_true(f[1].inf);
    assert_int_equal(f[1].line, 57);
    assert_int_equal(f[1].col, 5);
    assert_int_equal(f[2].kind, FAULT_NODE_CRASH); /* a rank names its node */
    assert_int_equal(f[2].node, 1);
    assert_int_equal(f[2].rank, -1);
    assert_int_equal(f[3].kind, FAULT_STRAGGLER);
    assert_true(f[3].factor == 2.5);
    assert_int_equal(f[4].kind, FAULT_CKPT_CRASH);
    assert_int_equal(f[4].step, 4);
    assert_int_equal(f[5].kind, FAULT_SHORT_NODE);
    assert_int_equal(f[5].step, 0);
    assert_int_equal(f[5].node, 1);
    assert_int_equal(f[5].devices, 3); /* one fewer than gpus_per_node */
    assert_int_equal(f[6].kind, FAULT_VERSION_SKEW);
    assert_string_equal(f[6].version, "twinrun-9.9");

    assert_int_equal(s.campaign.count, 10);
    assert_int_equal(s.campaign.seed, 7);
    assert_int_equal(s.campaign.kinds, (1u << FAULT_HANG) | (1u << FAULT_CRASH));
    assert_int_equal(s.campaign.step_min, 2);
    assert_int_equal(s.campaign.step_max, 6);

    assert_true(s.expect.completes);
    assert_true(s.expect.detected);
    assert_false(s.expect.attributed);
    assert_true(s.expect.max_detect_seconds == 700);
    assert_true(s.expect.continuity);
    assert_false(s.expect.final_weights);
    assert_true(s.expect.memory_under_capacity);
    assert_int_equal(s.expect.max_restarts, 3);
    assert_int_equal(s.expect.expect_failure_kind, -1);
    assert_int_equal(s.expect.line, 80);
    assert_int_equal(s.expect.col, 1);
    scenario_free(&s);
    scenario_free(&s); /* idempotent */
}

static void test_defaults(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "";
    if (scenario_load(DATA "/minimal.yaml", &s, err, sizeof err)) fail_msg("%s", err);
    assert_string_equal(s.name, "minimal"); /* the file name without .yaml */
    assert_int_equal(s.seed, 1234);
    assert_int_equal(s.gpus_per_node, 1);
    assert_string_equal(s.device, "H100");
    assert_true(s.capacity_scale == 1);
    assert_string_equal(s.hostfile, "");
    assert_int_equal(s.tp * s.pp * s.cp * s.dp, 1);
    assert_false(s.sequence_parallel);
    assert_int_equal(s.save_interval, 0);
    assert_int_equal(s.max_restarts, 5);
    assert_true(s.watchdog_seconds == 600); /* Megatron's --distributed-timeout-minutes 10 */
    assert_int_equal(s.faults.n, 0);
    assert_int_equal(s.campaign.count, 0);
    assert_int_equal(s.campaign.kinds, ((1u << FAULT_KIND_COUNT) - 1) & ~(1u << FAULT_PREEMPT) &
                                           ~(1u << FAULT_DATA_STALL) & ~(1u << FAULT_SLOW_LINK) &
                                           ~(1u << FAULT_HIDDEN_DIR) & ~(1u << FAULT_AMAX_SPIKE));
    assert_int_equal(s.campaign.step_min, 1);
    assert_int_equal(s.campaign.step_max, 4);
    assert_int_equal(s.campaign.seed, 1234);
    assert_true(s.expect.completes && s.expect.detected && s.expect.attributed && s.expect.continuity &&
                s.expect.final_weights && s.expect.memory_under_capacity);
    assert_int_equal(s.expect.max_restarts, -1);
    assert_int_equal(s.expect.expect_failure_kind, -1);
    assert_true(s.expect.max_detect_seconds == 0);
    assert_string_equal(flag_value(&s, "mock-data"), "(switch)");
    scenario_free(&s);
}

/* The argv is exactly the flags (last of each name), the layout and the seed, and the engine's
 * own parser takes it. */
static void test_argv(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "";
    if (scenario_load(DATA "/full.yaml", &s, err, sizeof err)) fail_msg("%s", err);
    char **argv;
    int argc;
    assert_int_equal(scenario_argv(&s, &argv, &argc), 0);
    assert_null(argv[argc]);
    char joined[8192] = "";
    for (int i = 0; i < argc; i++) {
        strcat(joined, i ? " " : "");
        strcat(joined, argv[i]);
    }
    char want[8192];
    snprintf(want, sizeof want,
             "--hidden-size 64 --ffn-hidden-size 176 --num-attention-heads 4 --num-query-groups 2 --seq-length 32 "
             "--max-position-embeddings 32 --group-query-attention --position-embedding-type rope --rotary-base 500000 "
             "--normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear "
             "--attention-dropout 0 --hidden-dropout 0 --num-layers 4 --vocab-size 512 --micro-batch-size 1 "
             "--global-batch-size 8 --train-iters 8 --lr 3.0e-3 --min-lr 3.0e-4 --lr-decay-style cosine "
             "--lr-warmup-iters 2 --bf16 --distributed-timeout-minutes 5 --data-path 0.3 %s/corpus/a_text_document "
             "0.7 /data/b_text_document --split 969,30,1 --data-cache-path %s/cache --tensor-model-parallel-size 2 "
             "--pipeline-model-parallel-size 2 --context-parallel-size 1 --sequence-parallel "
             "--use-distributed-optimizer --seed 4242",
             DATA, DATA);
    assert_string_equal(joined, want);

    tr_config *cfg = malloc(sizeof *cfg);
    assert_non_null(cfg);
    tr_config_defaults(cfg);
    if (tr_config_parse(cfg, argc, argv, err, sizeof err) != 0) fail_msg("the engine refuses the argv: %s", err);
    assert_int_equal(cfg->num_layers, 4);
    assert_int_equal(cfg->tensor_model_parallel_size, 2);
    assert_int_equal(cfg->seed, 4242);
    assert_int_equal(cfg->n_data_path, 4);
    free(cfg);
    scenario_argv_free(argv, argc);
    scenario_free(&s);
}

static void test_switch_false_removes_preset_switch(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "";
    const char *text = "cluster: {nodes: 1, gpus_per_node: 1}\nmodel: {preset: tiny}\n"
                       "training: {train-iters: 2, swiglu: false, disable-bias-linear: true}\n";
    assert_int_equal(parse(text, "x.yaml", &s, err), 0);
    assert_null(flag_value(&s, "swiglu"));
    char **argv;
    int argc, switches = 0;
    assert_int_equal(scenario_argv(&s, &argv, &argc), 0);
    for (int i = 0; i < argc; i++) {
        assert_string_not_equal(argv[i], "--swiglu");
        switches += strcmp(argv[i], "--disable-bias-linear") == 0;
    }
    assert_int_equal(switches, 1); /* preset and training both set it: emitted once */
    scenario_argv_free(argv, argc);
    scenario_free(&s);
}

static void test_presets(void **state) {
    (void)state;
    const char *const *p = scenario_model_preset("llama3-70b");
    assert_non_null(p);
    int found = 0;
    for (; p[0]; p += 2) {
        if (!strcmp(p[0], "num-layers")) found += !strcmp(p[1], "80");
        if (!strcmp(p[0], "hidden-size")) found += !strcmp(p[1], "8192");
        if (!strcmp(p[0], "ffn-hidden-size")) found += !strcmp(p[1], "28672");
        if (!strcmp(p[0], "num-attention-heads")) found += !strcmp(p[1], "64");
        if (!strcmp(p[0], "num-query-groups")) found += !strcmp(p[1], "8");
        if (!strcmp(p[0], "rotary-base")) found += !strcmp(p[1], "500000");
        if (!strcmp(p[0], "vocab-size")) found += !strcmp(p[1], "128256");
        if (!strcmp(p[0], "group-query-attention")) found += p[1] == NULL;
    }
    assert_int_equal(found, 8);
    p = scenario_model_preset("llama3-8b");
    assert_non_null(p);
    assert_string_equal(p[0], "num-layers");
    assert_string_equal(p[1], "32");
    assert_null(scenario_model_preset("llama3-7b"));
    assert_null(scenario_model_preset(NULL));
    assert_string_equal(scenario_model_preset_names(), "llama3-8b, llama3-70b, tiny");

    /* every preset is a model the engine accepts, on its own */
    const char *names[] = {"llama3-8b", "llama3-70b", "tiny"};
    for (int k = 0; k < 3; k++) {
        char text[256], err[ERRLEN] = "";
        snprintf(text, sizeof text,
                 "cluster: {nodes: 1, gpus_per_node: 1}\nmodel: {preset: %s}\n"
                 "training: {train-iters: 1, micro-batch-size: 1, lr: 3.0e-4}\ndata: {mock: true}\n",
                 names[k]);
        scenario s;
        assert_int_equal(parse(text, "p.yaml", &s, err), 0);
        char **argv;
        int argc;
        assert_int_equal(scenario_argv(&s, &argv, &argc), 0);
        tr_config *cfg = malloc(sizeof *cfg);
        tr_config_defaults(cfg);
        if (tr_config_parse(cfg, argc, argv, err, sizeof err) || tr_config_finalize(cfg, 1, err, sizeof err))
            fail_msg("preset %s: %s", names[k], err);
        free(cfg);
        scenario_argv_free(argv, argc);
        scenario_free(&s);
    }
}

static void test_errors_keys_and_types(void **state) {
    (void)state;
    expect_error(BASE_CLUSTER "clustr: {}\n" BASE_TRAINING, 4, 1,
                 "unknown key 'clustr' at the top level; did you mean 'cluster'?; allowed: name, description, seed,");
    expect_error("cluster:\n  nodes: 2\n  gpus_per_nod: 8\n" BASE_TRAINING, 3, 3,
                 "unknown key 'gpus_per_nod' in cluster:; did you mean 'gpus_per_node'?");
    expect_error("cluster:\n  nodes: many\n" BASE_TRAINING, 2, 10, "cluster.nodes: expected an integer, got 'many'");
    expect_error("cluster:\n  nodes: \"2\"\n" BASE_TRAINING, 2, 10, "cluster.nodes: expected an integer, got '2'");
    expect_error("cluster:\n  nodes: 0\n" BASE_TRAINING, 2, 10,
                 "cluster.nodes: 0 is out of range: it must be in 1-65536");
    expect_error("cluster:\n  nodes: 1\n  gpus_per_node: 65\n" BASE_TRAINING, 3, 18,
                 "cluster.gpus_per_node: 65 is out of range: it must be in 1-64");
    expect_error("cluster:\n  nodes: 1\n  device: B200\n" BASE_TRAINING, 3, 11,
                 "cluster.device: unknown device 'B200'; devices: H100, H200, A100, MTT-S5000");
    expect_error("cluster:\n  nodes: 1\n  capacity_scale: 0\n" BASE_TRAINING, 3, 19, "must be in (0, 1e6]");
    expect_error(BASE_CLUSTER "parallel:\n  sequence_parallel: yes\n" BASE_TRAINING, 5, 22,
                 "parallel.sequence_parallel: expected true or false, got 'yes'");
    expect_error(BASE_CLUSTER "parallel: [1, 2]\n" BASE_TRAINING, 4, 11, "parallel: expected a mapping");
    expect_error("seed: -1\n" BASE_CLUSTER BASE_TRAINING, 1, 7, "seed: expected a non-negative integer, got '-1'");
    expect_error("name:\n" BASE_CLUSTER BASE_TRAINING, 1, 6, "name: expected a string, got nothing");
    expect_error(BASE_CLUSTER BASE_TRAINING "  train-iters: 5\n", 7, 3,
                 "duplicate key 'train-iters' (first at line 5, column 3)");
    expect_error("- a\n- b\n", 1, 1, "a scenario is a mapping (name:, cluster:, training:, ...), got a list");
    expect_error("", 1, 1, "the file is empty");
    expect_error("# only a comment\n", 1, 1, "the file is empty");
    expect_error(BASE_CLUSTER "training: {train-iters: 2\n", 5, 1, "YAML syntax error");
    expect_error(BASE_CLUSTER BASE_TRAINING "---\nname: x\n", 7, 1, "a second YAML document");
    expect_error(BASE_CLUSTER BASE_TRAINING "name: !custom x\n", 7, 7, "tag '!custom' is not supported");
    expect_error("training: {train-iters: 2}\n", 1, 1, "cluster: is missing");
    expect_error(BASE_CLUSTER, 1, 1, "training.train-iters is missing");
    expect_error(BASE_CLUSTER "training:\n  lr: 0.1\n", 4, 1, "training.train-iters is missing");
}

static void test_errors_alias(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "";
    assert_int_equal(scenario_load(DATA "/bad_alias.yaml", &s, err, sizeof err), -1);
    assert_contains(err, DATA "/bad_alias.yaml:5:19: alias *iters: aliases are not supported in scenario files; write "
                              "the value out in full");
    expect_error(BASE_CLUSTER "training: &t {train-iters: 2}\nmodel: *t\n", 5, 8, "alias *t");
    assert_int_equal(scenario_load(DATA "/no_such.yaml", &s, err, sizeof err), -1);
    assert_contains(err, DATA "/no_such.yaml: cannot read: No such file or directory");
}

static void test_errors_layout(void **state) {
    (void)state;
    expect_error(BASE_CLUSTER "parallel:\n  tensor: 8\n  pipeline: 8\n  data: 15\n" BASE_TRAINING, 7, 9,
                 "parallel: tensor 8 x pipeline 8 x context 1 x data 15 = 960 ranks, but cluster has 128 nodes x 8 = "
                 "1024: set data: 16, or leave data out to derive it");
    expect_error("cluster:\n  nodes: 100\n  gpus_per_node: 8\nparallel:\n  tensor: 8\n  pipeline: 8\n" BASE_TRAINING, 4,
                 1,
                 "parallel: tensor 8 x pipeline 8 x context 1 = 64 does not divide the cluster's 100 nodes x 8 = 800 "
                 "ranks: use 96 or 104 nodes, or change tensor/pipeline/context");
    expect_error("cluster:\n  nodes: 1\n  gpus_per_node: 4\nparallel: {tensor: 8}\n" BASE_TRAINING, 4, 1,
                 "= 8 does not divide the cluster's 1 nodes x 4 = 4 ranks: use 2 nodes");
    /* the thousand-card layout of the seeds is fine */
    scenario s;
    char err[ERRLEN] = "";
    assert_int_equal(parse(BASE_CLUSTER "parallel: {tensor: 8, pipeline: 8}\n" BASE_TRAINING, "t.yaml", &s, err), 0);
    assert_int_equal(s.dp, 16);
    scenario_free(&s);
}

static void test_errors_hostfile(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "";
    const char *slots = "cluster:\n  nodes: 4\n  hostfile: hosts_slots.txt\n" BASE_TRAINING;
    assert_int_equal(parse(slots, "h.yaml", &s, err), -1);
    assert_contains(err, DATA "/h.yaml:3:13: cluster.hostfile: " DATA "/hosts_slots.txt:3: host node-c has slots=4 but "
                              "cluster.gpus_per_node is 8: every node runs one rank per GPU; write 'node-c slots=8' "
                              "(the hostfile's 28 slots must equal 4 nodes x 8 = 32 ranks)");
    const char *count = "cluster:\n  nodes: 4\n  gpus_per_node: 8\n  hostfile: hosts_short.txt\n" BASE_TRAINING;
    assert_int_equal(parse(count, "h.yaml", &s, err), -1);
    assert_contains(err,
                    DATA "/h.yaml:4:13: cluster.hostfile: " DATA "/hosts_short.txt:5: 3 hosts with 24 slots, but "
                         "cluster has 4 nodes x 8 = 32 ranks: add the missing hosts to the hostfile, or set nodes: 3");
    assert_int_equal(parse("cluster: {hostfile: nowhere.txt}\n" BASE_TRAINING, "h.yaml", &s, err), -1);
    assert_contains(err, "h.yaml:1:21: cluster.hostfile: cannot read " DATA "/nowhere.txt: No such file or directory");
    /* nodes and gpus_per_node may come from the hostfile alone */
    assert_int_equal(parse("cluster: {hostfile: hosts.txt}\n" BASE_TRAINING, "h.yaml", &s, err), 0);
    assert_int_equal(s.nodes, 2);
    assert_int_equal(s.gpus_per_node, 4);
    scenario_free(&s);
}

static void test_errors_flags(void **state) {
    (void)state;
    expect_error(BASE_CLUSTER BASE_TRAINING "  micro-batch-sise: 2\n", 7, 3,
                 "training.micro-batch-sise: unknown flag --micro-batch-sise; did you mean 'micro-batch-size'?");
    expect_error(BASE_CLUSTER BASE_TRAINING "  tensor-model-parallel-size: 2\n", 7, 3,
                 "training.tensor-model-parallel-size: not a training flag in a scenario: set it under parallel: as "
                 "tensor: instead");
    expect_error(BASE_CLUSTER BASE_TRAINING "  save: /ckpt\n", 7, 3, "set it under checkpoint:");
    expect_error(BASE_CLUSTER BASE_TRAINING "  seed: 5\n", 7, 3, "set it under the top level as seed: instead");
    expect_error(BASE_CLUSTER BASE_TRAINING "  data-path: [a]\n", 7, 3, "set it under data: as path: instead");
    expect_error(BASE_CLUSTER BASE_TRAINING "  --lr: 0.1\n", 7, 3, "write flag names without the leading dashes: 'lr'");
    expect_error(BASE_CLUSTER BASE_TRAINING "  lr: abc\n", 7, 7, "training.lr: invalid value for --lr");
    expect_error(BASE_CLUSTER BASE_TRAINING "  lr: true\n", 7, 7, "training.lr: --lr takes a value");
    expect_error(BASE_CLUSTER BASE_TRAINING "  lr:\n", 7, 6, "training.lr: expected a value, got nothing");
    expect_error(BASE_CLUSTER BASE_TRAINING "  bf16: 1\n", 7, 9,
                 "training.bf16: --bf16 is a switch: write true or false");
    expect_error(BASE_CLUSTER BASE_TRAINING "  lr: [1, 2]\n", 7, 7, "--lr takes one value, got a list");
    expect_error(BASE_CLUSTER BASE_TRAINING "  lr-decay-style: -x\n", 7, 19, "would be read as a flag");
    expect_error(BASE_CLUSTER BASE_TRAINING "  lr-decay-style: cosin\n", 7, 19, "training.lr-decay-style: ");
    expect_error(BASE_CLUSTER "model: {preset: llama3-7b}\n" BASE_TRAINING, 4, 17,
                 "model.preset: unknown preset 'llama3-7b'; did you mean 'llama3-8b'?; presets: llama3-8b, llama3-70b, "
                 "tiny");
    expect_error(BASE_CLUSTER "model:\n  overrides:\n    hiden-size: 8\n" BASE_TRAINING, 6, 5,
                 "model.overrides.hiden-size: unknown flag --hiden-size; did you mean 'hidden-size'?");
    expect_error(BASE_CLUSTER "data: {mock: true, path: x}\n" BASE_TRAINING, 4, 20,
                 "data: mock: true and path: both given");
    expect_error(BASE_CLUSTER "data: {split: '1,1,1'}\n" BASE_TRAINING, 4, 1, "data: give mock: true");
    expect_error(BASE_CLUSTER "data: {path: [a, 0.5]}\n" BASE_TRAINING, 4, 18,
                 "data.path[1]: '0.5' looks like a weight: give weight prefix pairs");
    expect_error(BASE_CLUSTER "data: {path: [0.5, a, b, c]}\n" BASE_TRAINING, 4, 23,
                 "data.path[2]: expected a weight >= 0 (the list is weight prefix pairs), got 'b'");
    expect_error(BASE_CLUSTER "data: {mock: true, split: 'a,b'}\n" BASE_TRAINING, 4, 27, "data.split: ");
    expect_error(BASE_CLUSTER BASE_TRAINING "  distributed-timeout-minutes: 5\nsupervisor: {watchdog_minutes: 6}\n", 8,
                 32, "supervisor.watchdog_minutes 6 and training.distributed-timeout-minutes 5 disagree");
}

static void test_errors_faults(void **state) {
    (void)state;
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - kind: hang\n    step: 3\n    rank: 1024\n", 8, 5,
                 "faults[0] (hang): rank 1024 does not exist: the world has 1024 ranks (0-1023)");
    expect_error(
        BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: crash, step: 1, rank: 0}\n  - {kind: crash, step: 11, "
                                   "rank: 3}\n",
        9, 25, "faults[1] (crash): step 11 is beyond training.train-iters 10: it would never fire; use a step in 1-10");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: crash, rank: 3}\n", 8, 5,
                 "faults[0] (crash): step is missing: the iteration it fires at, 1-10");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: hang, step: 1, rank: 3, factor: 2}\n", 8, 36,
                 "faults[0].factor: factor does not apply to hang (it takes: rank, group, op)");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: hang, step: 1, rank: 3, group: dpp}\n", 8, 43,
                 "faults[0]: group: 'dpp' is not a communicator");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: data_corrupt, damage: flipped}\n", 8, 34,
                 "faults[0]: damage: 'flipped' is not bin_cut, bin_missing, idx_cut, idx_magic, idx_dtype or token");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: data_corrupt, damage: token, step: 11}\n", 8, 47,
                 "faults[0] (data_corrupt): step 11 is beyond training.train-iters 10: it would never fire");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: crash, step: 1, rank: 3, damage: idx_cut}\n", 8, 37,
                 "faults[0].damage: damage does not apply to crash (it takes: rank)");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: hng, step: 1, rank: 3}\n", 8, 12,
                 "faults[0].kind: unknown fault kind 'hng'; did you mean 'hang'?");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: hang, step: 1, rnk: 3}\n", 8, 27,
                 "unknown key 'rnk' in faults[0]:; did you mean 'rank'?");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: node_crash, step: 1, node: 128}\n", 8, 5,
                 "faults[0] (node_crash): node 128 does not exist: the cluster has 128 nodes of 8 GPUs (0-127)");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: straggler, step: 1, rank: 0, factor: 1}\n", 8, 5,
                 "straggler: factor 1 must be in (1, 1000]");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: straggler, step: 1, rank: 0, factor: fast}\n", 8, 49,
                 "faults[0].factor: expected a number, got 'fast'");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: short_node, node: 1, devices: 8}\n", 8, 5,
                 "short_node: devices 8 must be in 0-7");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: short_node, step: 2, node: 1}\n", 8, 5,
                 "short_node happens at start-up, before iteration 1: leave out the step (got 2)");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: ckpt_crash, step: 2, rank: 1}\n", 8, 5,
                 "faults[0] (ckpt_crash): the job saves no checkpoints: set checkpoint.interval");
    expect_error(BASE_CLUSTER BASE_TRAINING "checkpoint: {interval: 4}\nfaults:\n  - {kind: ckpt_enospc, step: 3, "
                                            "rank: 1}\n",
                 9, 31,
                 "no checkpoint is saved at iteration 3: use a multiple of checkpoint.interval 4 (or train-iters 10)");
    expect_error(BASE_CLUSTER "model: {preset: tiny}\n" BASE_TRAINING "faults:\n  - {kind: nan, step: 1, rank: 0, "
                              "layer: 2}\n",
                 9, 42, "faults[0] (nan): layer 2 does not exist: num-layers is 2 (layers 0-1)");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults: {kind: hang}\n", 7, 9, "faults: expected a list");
    expect_error(BASE_CLUSTER BASE_TRAINING "faults:\n  - 3\n", 8, 5, "faults[0]: expected a mapping");
    expect_error(BASE_CLUSTER BASE_TRAINING "campaign: {count: 3, kinds: [hang, hang]}\n", 7, 36,
                 "campaign.kinds[1]: hang is listed twice");
    expect_error(BASE_CLUSTER BASE_TRAINING "campaign: {steps: [0, 4]}\n", 7, 20,
                 "campaign.steps[0]: 0 is out of range: it must be in 1-10");
    expect_error(BASE_CLUSTER BASE_TRAINING "campaign: {steps: [5, 4]}\n", 7, 19,
                 "campaign.steps: first 5 is after last 4");
    expect_error(BASE_CLUSTER BASE_TRAINING "expect: {failure: short_node, completes: true}\n", 7, 42,
                 "expect.completes: true contradicts failure: short_node");
    expect_error(BASE_CLUSTER BASE_TRAINING "expect: {max_restarts: -2}\n", 7, 24,
                 "expect.max_restarts: -2 is out of range: it must be in -1-1000000");
    expect_error(BASE_CLUSTER BASE_TRAINING "expect: {complete: true}\n", 7, 10,
                 "unknown key 'complete' in expect:; did you mean 'completes'?");
}

static void test_expect_failure(void **state) {
    (void)state;
    scenario s;
    char err[ERRLEN] = "";
    const char *text = BASE_CLUSTER BASE_TRAINING "faults:\n  - {kind: version_skew, rank: 17}\n"
                                                  "  - {kind: data_corrupt}\n  - {kind: data_corrupt, damage: "
                                                  "idx_magic}\nexpect: {failure: version_skew}\n";
    assert_int_equal(parse(text, "f.yaml", &s, err), 0);
    assert_int_equal(s.expect.expect_failure_kind, FAULT_VERSION_SKEW);
    assert_false(s.expect.completes);
    assert_false(s.expect.continuity);
    assert_false(s.expect.final_weights);
    assert_true(s.expect.detected);
    assert_int_equal(s.faults.faults[0].node, 2);
    assert_int_equal(s.faults.faults[0].rank, -1);
    assert_string_equal(s.faults.faults[0].version, "twinrun-0.0-skew");
    assert_int_equal(s.faults.faults[1].rank, -1);
    assert_int_equal(s.faults.faults[1].step, 0);
    assert_int_equal(s.faults.faults[1].damage, FAULT_D_BIN_CUT);
    assert_int_equal(s.faults.faults[2].damage, FAULT_D_IDX_MAGIC);
    scenario_free(&s);
}

static void test_hostfile_parse(void **state) {
    (void)state;
    sc_host *h;
    int n;
    char err[ERRLEN] = "";
    const char *ok = "# cluster A\n\ntrain-node-000 slots=8\n  train-node-001   slots=8 max_slots=8 # spare\n"
                     "train-node-002\n";
    assert_int_equal(scenario_hostfile_parse(ok, strlen(ok), "hf", &h, &n, err, sizeof err), 0);
    assert_int_equal(n, 3);
    assert_string_equal(h[1].name, "train-node-001");
    assert_int_equal(h[1].slots, 8);
    assert_int_equal(h[1].line, 4);
    assert_int_equal(h[2].slots, 1); /* OpenMPI's count for a host without slots= */
    free(h);

    struct {
        const char *text, *msg;
    } bad[] = {
        {"a slots=8\nb slots=eight\n", "hf:2: slots: 'eight' is not a whole number of slots in 1-65536"},
        {"a slots=0\n", "hf:1: slots: '0' is not a whole number"},
        {"a slots=8 cpus=4\n", "hf:1: unexpected 'cpus=4': a host line is 'HOST slots=N [max_slots=N]'"},
        {"a slots=8 slots=4\n", "hf:1: slots given twice"},
        {"a slots=8 max_slots=4\n", "hf:1: max_slots=4 is below slots=8"},
        {"a slots=8\nb slots=8\na slots=8\nb slots=8\n", "hf:3: host a is listed again (first on line 1)"},
        {"# nothing\n\n", "hf:2: no hosts"},
        {"", "hf:1: no hosts"},
        {"bad/name slots=1\n", "hf:1: 'bad/name' is not a host name"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        h = (sc_host *)1;
        assert_int_equal(scenario_hostfile_parse(bad[i].text, strlen(bad[i].text), "hf", &h, &n, err, sizeof err), -1);
        assert_null(h);
        assert_contains(err, bad[i].msg);
    }
    const char nul[] = "a slots=8\nb\0 slots=8\n";
    assert_int_equal(scenario_hostfile_parse(nul, sizeof nul - 1, "hf", &h, &n, err, sizeof err), -1);
    assert_contains(err, "hf:2: a NUL byte");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_round_trip),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_argv),
        cmocka_unit_test(test_switch_false_removes_preset_switch),
        cmocka_unit_test(test_presets),
        cmocka_unit_test(test_errors_keys_and_types),
        cmocka_unit_test(test_errors_alias),
        cmocka_unit_test(test_errors_layout),
        cmocka_unit_test(test_errors_hostfile),
        cmocka_unit_test(test_errors_flags),
        cmocka_unit_test(test_errors_faults),
        cmocka_unit_test(test_expect_failure),
        cmocka_unit_test(test_hostfile_parse),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
