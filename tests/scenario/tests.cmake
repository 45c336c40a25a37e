# tests/scenario: the scenario program end to end (twin builds only; tests/CMakeLists.txt).
# Tests labelled `heavy` rehearse hundreds of ranks or many trials: ci/test.sh runs them once (gcc),
# not again under clang, coverage (-O0) or valgrind, where they would take an hour.
set(scn ${PROJECT_BINARY_DIR}/bin/scenario)
set(scn_work ${CMAKE_CURRENT_BINARY_DIR}/scenario_work)

# Every fault kind that stops a job, recovered bit-exactly; the JUnit report is written and valid XML.
# Every `run` here passes --clean: a passed scenario's checkpoints and data cache (~150 MB a mock-data
# configuration) go, its logs and reports stay — this test checks that; the test tree fits a small disk.
twinrun_expect_sh(scenario_faults_8rank 0 "PASSED: [0-9]+/[0-9]+ expectations.*junit ok.*clean ok"
  "${scn} run ${PROJECT_SOURCE_DIR}/scenarios/faults_8rank.yaml --work ${scn_work} --clean --junit ${scn_work}/f8.xml --json ${scn_work}/f8.json && python3 -c \"import json,sys,xml.etree.ElementTree as E; r=E.parse('${scn_work}/f8.xml').getroot(); j=json.load(open('${scn_work}/f8.json')); assert r.get('failures')=='0' and int(r.get('tests'))>=10 and j['passed'], (r.attrib, j['passed']); import os; w='${scn_work}/faults_8rank'; assert not os.path.exists(w+'/checkpoints') and not os.path.exists(w+'/data_cache') and os.path.getsize(w+'/job.log') > 0, os.listdir(w); print('junit ok', r.get('tests'), 'clean ok')\""
  LABELS ${labels} PROPERTIES TIMEOUT 300)

# The runner can fail: wrong expectations are reported by name with the numbers, exit status 1.
twinrun_expect_sh(scenario_wrong_expectation 1 "fault 1 \\(hang\\) time to detect.*600\\.[0-9]+ s simulated \\(limit 60\\.0 s\\).*restarts.*1 restart\\(s\\), at most 0 expected.*FAILED: 2 of "
  "${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/wrong_expect.yaml --work ${scn_work} --clean"
  LABELS ${labels} PROPERTIES TIMEOUT 300)

# A random campaign at 64 ranks: every fault detected, blamed right, nothing lost.
twinrun_expect(NAME scenario_campaign_64 EXIT 0 OUTPUT "campaign: every blame correct.*PASSED"
  LABELS ${labels} heavy PROPERTIES TIMEOUT 900
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_64.yaml --work ${scn_work} --clean)

# The same campaign code at 4 ranks, in every stage (coverage included): 4 trials of 4 fault kinds, each
# detected, blamed right and recovered bit-identically. Under memcheck too: the ranks a node crash or the
# watchdog's abort ends mid-call have their state reclaimed by the twin (dev_set_reclaim), nothing leaks.
twinrun_expect(NAME scenario_campaign_small EXIT 0
  OUTPUT "campaign: 4 trials, 4 fired, 4 detected, 4 attributed, 4 continuity, 4 recovered.*per kind \\(ok/trials\\): node_crash 1/1 nan 1/1 coll_mismatch 1/1 ckpt_enospc 1/1.*PASSED: 8/8 expectations"
  LABELS ${labels} PROPERTIES TIMEOUT 300 FIXTURES_SETUP campaign_small_json
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_small.yaml --work ${scn_work} --clean
          --jobs 2 --json ${scn_work}/campaign_small.json)
# Its JSON report lists each trial's fault and fate (campaign.per_trial), agreeing with the totals.
twinrun_expect(NAME scenario_campaign_small_report EXIT 0 OUTPUT "per_trial ok" LABELS ${labels}
  PROPERTIES TIMEOUT 60 FIXTURES_REQUIRED campaign_small_json
  COMMAND ${Python3_EXECUTABLE} -c
  "import json, collections\nc = json.load(open('${scn_work}/campaign_small.json'))['campaign']\nt = c['per_trial']\nassert [x['trial'] for x in t] == list(range(1, c['trials'] + 1)), t\nfor key in ('fired', 'detected', 'attributed', 'continuity_ok'):\n    assert sum(x[key] for x in t) == c[key], key\nassert sum(x['completed'] for x in t) == c['recovered']\nkinds = collections.Counter(x['kind'] for x in t)\nassert kinds == collections.Counter({k: v['trials'] for k, v in c['per_kind'].items() if v['trials']}), kinds\nassert all(x['ok'] and x['description'] and x['diagnosis'] and x['attempt'] is not None for x in t), t\nprint('per_trial ok', sorted(kinds))")

# The trials run two at a time above, each in its own process and folder: one after another in this
# process (--jobs 1) they give every trial the same fault and fate, and `--campaign-seed 3 --trial 3`
# replays trial 3 alone with the same result (tests/scenario/campaign_jobs.py); a trial that went well
# leaves its logs and no checkpoints.
twinrun_expect(NAME scenario_campaign_jobs EXIT 0 OUTPUT "sequential = parallel: 4 trials.*replay of trial 3 = trial 3"
  LABELS ${labels} PROPERTIES TIMEOUT 300 FIXTURES_REQUIRED campaign_small_json
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scenario/campaign_jobs.py ${scn}
          ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_small.yaml ${scn_work}/campaign_small.json
          ${scn_work}/campaign_small ${scn_work}/campaign_jobs)

# A planted bug (TWINRUN_PLANTED_BUG=resume_lr:nan, test-only: the attempt after a NaN trains with
# another learning rate) fails exactly the campaign's NaN trial, and the replay command the report prints
# reproduces the failure alone (and passes without the bug).
twinrun_expect(NAME scenario_campaign_planted EXIT 0
  OUTPUT "the campaign failed trial [0-9]+ \\((NaN|Inf)\\) and no other.*its replay alone fails the same way.*passes without the bug"
  LABELS ${labels} PROPERTIES TIMEOUT 300
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scenario/campaign_planted.py ${scn}
          ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_small.yaml ${scn_work}/campaign_planted)

# Trials start from the fault-free run's checkpoints: 50 trials give every verdict (fault, fired,
# detected, blamed, recovered bit-exactly) as they do started from iteration 1 (--from-start).
# `heavy` (gcc only): ~30 s on 2 cores.
twinrun_expect(NAME scenario_campaign_snapshots EXIT 0
  OUTPUT "50 trials, every verdict the same from the snapshots and from iteration 1 \\(50 ok"
  LABELS ${labels} heavy PROPERTIES TIMEOUT 900
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scenario/campaign_snapshots.py ${scn}
          ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_snap.yaml ${scn_work}/campaign_snapshots)
# A trial's restart that starts from exactly what a verified fault-free resume started from is not run
# again: 50 trials give every verdict as they do with every restart run to its end (--to-the-end).
# `heavy` (gcc only): ~30 s on 2 cores.
twinrun_expect(NAME scenario_campaign_verified EXIT 0
  OUTPUT "50 trials, every verdict the same with verified resumes standing in for [0-9]+ restarts and with every restart run to its end \\(50 ok"
  LABELS ${labels} heavy PROPERTIES TIMEOUT 900
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tests/scenario/campaign_verified.py ${scn}
          ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_snap.yaml ${scn_work}/campaign_verified)

# A replay needs a campaign to draw from, and the numbers are checked.
twinrun_expect(NAME scenario_trial_no_campaign EXIT 2 OUTPUT "has no campaign \\(campaign: \\{count: N, seed: S\\}\\): --trial and --campaign-seed replay a campaign's trial"
  LABELS ${labels} PROPERTIES TIMEOUT 60
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/faults_8rank.yaml --work ${scn_work} --trial 2)
twinrun_expect(NAME scenario_jobs_bad EXIT 2 OUTPUT "--jobs 0: a whole number 1..1000000 please"
  LABELS ${labels} PROPERTIES TIMEOUT 60
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_small.yaml --work ${scn_work} --jobs 0)

# A campaign over a Megatron-written data file draws data_corrupt too (the job's copy damaged, refused by
# the loader naming it, restored for the next trial): seed 5 throws two and a crash. `slow` (vocabulary
# 32000: ~20 s here): the gcc stage only; `valgrind-skip`: 8 min under memcheck, where the campaign
# loop runs in scenario_campaign_small (the data file's damage and repair run under memcheck in
# scenario_data_damage).
twinrun_expect(NAME scenario_campaign_data EXIT 0
  OUTPUT "campaign: 3 trials, 3 fired, 3 detected, 3 attributed, 3 continuity, 3 recovered.*per kind \\(ok/trials\\): crash 1/1 data_corrupt 2/2.*PASSED"
  LABELS ${labels} slow valgrind-skip PROPERTIES TIMEOUT 300 FIXTURES_SETUP campaign_data_json
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_data.yaml --work ${scn_work} --clean
          --json ${scn_work}/campaign_data.json)
# lab/campaign_summary.py adds the report up, data_corrupt's trials per form of damage (campaign.per_trial).
twinrun_expect(NAME scenario_campaign_summary EXIT 0
  OUTPUT "crash +1 +1\ndata_corrupt +2 +2\n  bin_missing +1 +1\n  idx_dtype +1 +1\n1 slices: trials 3, fired 3, detected 3, attributed 3, continuity_ok 3, recovered 3"
  LABELS ${labels} slow valgrind-skip PROPERTIES TIMEOUT 60 FIXTURES_REQUIRED campaign_data_json
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/lab/campaign_summary.py ${scn_work}/campaign_data.json)

# Every form of data damage (fault key `damage`) in one job: each trips its own check of the loader, which
# names the file (the bad token mid-run, at iteration 2, naming the document too); the repair copies both
# files back, the next attempt resumes from the latest checkpoint and the last ends on the fault-free bits.
# Two ranks, a one-layer model 16 wide (the data's vocabulary of 32000 sets the cost): under a second
# natively, ~30 s under memcheck, so it runs in every stage and under memcheck. The program prints its
# report to stdout and what it damaged to stderr; scenario_data_damage_report reads the JSON report for
# each fault's diagnosis, which the text report cuts short.
twinrun_expect(NAME scenario_data_damage EXIT 0
  OUTPUT "1 corrupt data file \\(\\.bin cut short\\).* yes +yes .*2 corrupt data file \\(\\.bin missing\\).* yes +yes .*3 corrupt data file \\(\\.idx cut short\\).* yes +yes .*4 corrupt data file \\(\\.idx magic overwritten\\) read by .* yes +yes .*5 corrupt data file \\(\\.idx dtype zeroed\\).* yes +yes .*6 corrupt data file \\(a token outside the vocabulary\\).* yes +yes .*same bits as the fault-free run at 2/2 iterations.*PASSED: 16/16 expectations.*cut 2 bytes off [^\n]*/data_copies/corpus\\.bin\nt.*removed [^\n]*/data_copies/corpus\\.bin\nt.*cut 1 byte off [^\n]*/data_copies/corpus\\.idx\nt.*magic of [^\n]*/data_copies/corpus\\.idx\nt.*dtype code of [^\n]*/data_copies/corpus\\.idx\nt.*made the token at byte [0-9]+ of [^\n]*/data_copies/corpus\\.bin id 65535 \\(read at iteration 2\\)"
  LABELS ${labels} PROPERTIES TIMEOUT 300 FIXTURES_SETUP data_damage_json
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/data_damage.yaml --work ${scn_work} --clean
          --json ${scn_work}/data_damage.json)
twinrun_expect(NAME scenario_data_damage_report EXIT 0 OUTPUT "diagnoses ok" LABELS ${labels}
  PROPERTIES TIMEOUT 60 FIXTURES_REQUIRED data_damage_json
  COMMAND ${Python3_EXECUTABLE} -c
  "import json\nr = json.load(open('${scn_work}/data_damage.json'))\nwant = {'bin_cut': 'lies outside the 59286-byte .bin', 'bin_missing': 'corpus.bin: cannot open the token file', 'idx_cut': '.idx claims 300 sequences and 301 document entries, which need more than its 6041 bytes', 'idx_magic': 'not a Megatron .idx file', 'idx_dtype': 'unknown dtype code 0 in .idx', 'token': 'train sample 1 (${scn_work}/data_damage/data_copies/corpus: document '}\ngot = {f['damage']: f for f in r['faults']}\nassert sorted(got) == sorted(want), sorted(got)\nfor d, text in want.items():\n    f = got[d]\n    assert f['kind'] == 'data_corrupt' and f['detected'] and f['attributed'] and text in f['diagnosis'] and '/data_copies/corpus' in f['diagnosis'], (d, f)\na = r['attempts']\nassert r['passed'] and len(a) == 7 and (a[5]['start_iteration'], a[5]['end_iteration'], a[6]['start_iteration']) == (0, 1, 1), (r['passed'], a)\nassert 'token id 65535 at position 32 is outside the vocabulary' in got['token']['diagnosis'] and got['token']['step'] == 2, got['token']\nprint('diagnoses ok')")

# Faults while DDP buckets and parameter gathers overlap: every fault detected and blamed, the run's bits
# recovered; under memcheck, the ranks the watchdog's abort ends mid-call are reclaimed cleanly.
twinrun_expect(NAME scenario_overlap_faults EXIT 0
  OUTPUT "hang of rank 3 .*yes +yes.*crash of node 1 .*yes +yes.*crash of rank 6 .*yes +yes.*same bits as the fault-free run at 6/6 iterations.*PASSED: 13/13"
  LABELS ${labels} PROPERTIES TIMEOUT 300
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/overlap_faults.yaml --work ${scn_work} --clean)

# A campaign whose kinds cannot be thrown at its scenario fails an expectation that says what each needs.
twinrun_expect(NAME scenario_campaign_nokind EXIT 1
  OUTPUT "FAIL  campaign: a fault kind to draw: none of campaign.kinds can be thrown at this scenario: data_corrupt and data_stall need data.path"
  LABELS ${labels} PROPERTIES TIMEOUT 300
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_nokind.yaml --work ${scn_work} --clean)

# Checkpoint faults go to ranks that write a shard: seed 2 drew ckpt_crash for a rank without one.
# `valgrind-skip`: ~50 s under memcheck for the same campaign loop and reclaim paths that
# scenario_campaign_small runs there (the writer choice is a draw, no memory of its own).
twinrun_expect(NAME scenario_campaign_writer EXIT 0
  OUTPUT "campaign: 4 trials, 4 fired, 4 detected, 4 attributed, 4 continuity, 4 recovered.*PASSED"
  LABELS ${labels} valgrind-skip PROPERTIES TIMEOUT 300
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/campaign_writer.yaml --work ${scn_work} --clean)

# `scenario check` says what each good file sets up; the program's usage errors, each with its message.
twinrun_expect(NAME scenario_check_ok EXIT 0 LABELS ${labels}
  OUTPUT "faults_8rank.yaml: ok \\(8 ranks: 2 nodes x 4 H100. TP2 PP2 CP1 DP2. 6 faults\\)\n.*campaign_small.yaml: ok \\(4 ranks: 4 nodes x 1 H100. TP1 PP2 CP1 DP2. 0 faults, a campaign\\)"
  COMMAND ${scn} check ${PROJECT_SOURCE_DIR}/scenarios/faults_8rank.yaml ${CMAKE_CURRENT_SOURCE_DIR}/scenario/data/campaign_small.yaml)
twinrun_expect(NAME scenario_cli_usage EXIT 2 OUTPUT "^usage: scenario run FILE.yaml.DIR" LABELS ${labels} COMMAND ${scn})
twinrun_expect(NAME scenario_cli_unknown_option EXIT 2 OUTPUT "scenario: unknown option --bogus\nusage: " LABELS ${labels}
  COMMAND ${scn} run --bogus)
twinrun_expect(NAME scenario_cli_missing_value EXIT 2 OUTPUT "scenario: --work needs a value" LABELS ${labels}
  COMMAND ${scn} run ${CMAKE_CURRENT_SOURCE_DIR}/scenario/data/minimal.yaml --work)
# a folder without *.yaml (tests/scenario holds only data/ and sources)
twinrun_expect(NAME scenario_cli_no_files EXIT 2 OUTPUT "scenario: no scenario files given \\(a directory had no .\\.yaml\\?\\)"
  LABELS ${labels} COMMAND ${scn} run ${CMAKE_CURRENT_SOURCE_DIR}/scenario --work ${scn_work})

# `scenario check` refuses a bad file with FILE:LINE:COL and exit status 2.
twinrun_expect_sh(scenario_check_bad 2 "bad_alias.yaml:[0-9]+:[0-9]+: "
  "${scn} check ${PROJECT_SOURCE_DIR}/tests/scenario/data/bad_alias.yaml"
  LABELS ${labels})

# `scenario check` runs every check `scenario run` makes before training: the job's flags as the engine
# validates them (a missing lr passed check and failed run), in run's words; nothing is written.
set(nolr_dir ${CMAKE_CURRENT_BINARY_DIR}/scenario_check_job)
twinrun_expect_sh(scenario_check_job 2 "nolr.yaml: the job does not fit this layout: --lr is required and must be > 0.*check wrote nothing.*nolr.yaml: the job does not fit this layout: --lr is required and must be > 0"
  "rm -rf ${nolr_dir} && mkdir -p ${nolr_dir} && cd ${nolr_dir} && printf 'name: nolr\\ncluster: {nodes: 1, gpus_per_node: 1}\\nmodel: {preset: tiny}\\ntraining: {train-iters: 4, micro-batch-size: 1, global-batch-size: 1}\\ndata: {mock: true}\\n' >nolr.yaml && ${scn} check nolr.yaml --work w\ncheck=$?\n[ ! -e w ] && echo check wrote nothing\n${scn} run nolr.yaml --work w\nrun=$?\n[ $check = 2 ] && exit $run"
  LABELS ${labels} PROPERTIES FAIL_REGULAR_EXPRESSION ": ok \\(")

# The flagship, as the README's main command runs it.
twinrun_expect(NAME scenario_thousand_card EXIT 0 OUTPUT "PASSED: [0-9]+/[0-9]+ expectations"
  LABELS ${labels} heavy PROPERTIES TIMEOUT 1200
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/thousand_card.yaml --work ${scn_work} --clean)

# The data-loader watchdog at 1024 ranks (TP8 PP8 DP16, a Megatron-written file): a rank's read that never
# returns is named by its own watchdog at 300 s simulated (before the collectives' 600 s), with the file, the
# byte offset and the rank; the restarted job ends on the fault-free bits. ~10 s here.
twinrun_expect(NAME scenario_data_stall_1024 EXIT 0
  OUTPUT "1 data stall: a sample read of rank 613 .* yes +yes +300\\.000.*same bits as the fault-free run at 2/2 iterations.*PASSED: 7/7 expectations.*fault injected: data stall: a sample read of rank 613 never returns at iteration 2.*data watchdog: rank 613 waited 300\\.000 s \\(simulated\\) reading train sample [0-9]+ from [^\n]*/gpt_u16_seq64/corpus\\.bin at byte [0-9]+ \\(document [0-9]+, token [0-9]+\\)"
  LABELS ${labels} valgrind-skip PROPERTIES TIMEOUT 300
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/data_stall_1024.yaml --work ${scn_work} --clean)

# One scenario per fault kind (a folder run: every *.yaml in name order, one JUnit report).
twinrun_expect_sh(scenario_fault_kinds 0 "fault_version_skew.*PASSED: [0-9]+/[0-9]+ expectations\n17\n17 JSON reports, every one passed\n"
  "${scn} run ${PROJECT_SOURCE_DIR}/scenarios/faults --work ${scn_work} --clean --junit ${scn_work}/kinds.xml --json ${scn_work}/kinds.json && grep -c '<testsuite ' ${scn_work}/kinds.xml && python3 -c \"import json; r=json.load(open('${scn_work}/kinds.json')); assert all(x['passed'] for x in r), [x['name'] for x in r if not x['passed']]; print(len(r), 'JSON reports, every one passed')\""
  LABELS ${labels} PROPERTIES TIMEOUT 900 FAIL_REGULAR_EXPRESSION "FAILED")

# The 8B seed's two-node layout. `valgrind-skip`: since its CLI check runs the program itself, ci/memcheck.py
# would run this 16-rank rehearsal under valgrind (most of an hour); scenario_runner_memcheck covers the runner.
twinrun_expect(NAME scenario_llama3_8b_multinode EXIT 0 OUTPUT "PASSED: [0-9]+/[0-9]+ expectations"
  LABELS ${labels} valgrind-skip PROPERTIES TIMEOUT 300
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/llama3_8b_multinode.yaml --work ${scn_work} --clean)

# TWINRUN_FAULTS on a plain train_llama3 (what a GPU job uses): the NaN's origin is named and the job
# exits 16, Megatron's NaN code; a hung rank is blamed by the watchdog.
set(tiny_job --num-layers 4 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention
  --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope --normalization RMSNorm
  --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0
  --micro-batch-size 1 --global-batch-size 8 --train-iters 4 --lr 1e-3 --mock-data --vocab-size 128 --eval-iters 0
  --tensor-model-parallel-size 2 --pipeline-model-parallel-size 2)
string(REPLACE ";" " " tiny_job_str "${tiny_job}")
twinrun_expect_sh(faults_env_nan 16 "fault injected: .*iteration 3: NaN/Inf detected.*First non-finite value: rank 5 \\(tp 1, pp 1, cp 0, dp 0\\), layer 2 gradient"
  "WORLD_SIZE=8 TWINRUN_FAULTS='nan@3:rank=5,tensor=gradient,layer=2' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str}"
  LABELS ${labels})
twinrun_expect_sh(faults_env_hang 1 "watchdog: rank [0-9]+ waited 600.000 s.*stopped first: rank 6 "
  "WORLD_SIZE=8 TWINRUN_FAULTS='hang@2:rank=6,group=pp' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str}"
  LABELS ${labels})
# data_stall from TWINRUN_FAULTS: the rank's data watchdog stops it at --data-read-timeout-minutes, naming
# the sample it read (mock data: no file); with the watchdog off the rank stays stuck and the collectives'
# watchdog blames it at 600 s.
twinrun_expect_sh(faults_env_data_stall 1 "fault injected: data stall.*data watchdog: rank 5 waited 60.000 s \\(simulated\\) reading train sample [0-9]+ from mock data \\(no file\\); the rank stops \\(--data-read-timeout-minutes 1\\).*stopped first: rank 5 .*status failed 1"
  "WORLD_SIZE=8 TWINRUN_FAULTS='data_stall@2:rank=5' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str} --data-read-timeout-minutes 1"
  LABELS ${labels})
twinrun_expect_sh(faults_env_data_stall_off 1 "watchdog: rank [0-9]+ waited 600.000 s.*stopped first: rank 5 .*status blocked"
  "WORLD_SIZE=8 TWINRUN_FAULTS='data_stall@2:rank=5' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str} --data-read-timeout-minutes 0"
  LABELS ${labels} PROPERTIES FAIL_REGULAR_EXPRESSION "data watchdog")
# a fault that could never fire (a layer the model lacks, a step past the run) is refused before training
# by the check scenarios use (fault_spec_check_job), in the same words a scenario's fault gets
twinrun_expect_sh(faults_env_layer 2 "TWINRUN_FAULTS: fault 1 \\(NaN in the gradient of layer 4 on rank 5 at iteration 3\\): layer 4 does not exist: --num-layers is 4 \\(layers 0-3\\)"
  "WORLD_SIZE=8 TWINRUN_FAULTS='nan@3:rank=5,tensor=gradient,layer=4' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str}"
  LABELS ${labels} PROPERTIES FAIL_REGULAR_EXPRESSION "iteration +1/")
twinrun_expect_sh(faults_env_step 2 "TWINRUN_FAULTS: fault 1 \\(crash of rank 1 at iteration 9\\): step 9 is beyond --train-iters 4: it would never fire\\x3b use a step in 1-4"
  "WORLD_SIZE=8 TWINRUN_FAULTS='crash@9:rank=1' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str}"
  LABELS ${labels} PROPERTIES FAIL_REGULAR_EXPRESSION "iteration +1/")
twinrun_expect_sh(faults_env_bad 2 "TWINRUN_FAULTS: .*rank 8"
  "WORLD_SIZE=8 TWINRUN_FAULTS='hang@2:rank=8' ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str}"
  LABELS ${labels})

# The runner's own memory hygiene: this one runs the scenario program without a shell, so
# ci/memcheck.py runs it under valgrind (restarts, a damaged checkpoint moved aside, reports) — the sh -c tests
# above check behaviour, not leaks.
twinrun_expect(NAME scenario_runner_memcheck EXIT 0 OUTPUT "PASSED: 7/7 expectations"
  LABELS ${labels} PROPERTIES TIMEOUT 900
  COMMAND ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/faults/ckpt_corrupt.yaml
  --work ${scn_work}/memcheck --clean --json ${scn_work}/memcheck/report.json --junit ${scn_work}/memcheck/junit.xml)

# A fault that could never fire in the layout is refused before anything runs.
twinrun_expect_sh(scenario_check_placement 2 "nan_wrong_stage.yaml:9:5: layer 3 is on pipeline stage 1 \\(ranks 4-7\\), not on rank 1's stage 0"
  "${scn} check ${PROJECT_SOURCE_DIR}/tests/scenario/data/nan_wrong_stage.yaml"
  LABELS ${labels})

# mode: predict (docs/prediction.md): one shape-only run; the report names every stage, says it fits, and
# predict.json holds exactly the documented fields with each stage's parts summing to its peak.
twinrun_expect_sh(scenario_predict 0 "stage +rank +weights.*\n.* 0 .*\n.* 1 .*\\[predict\\] fits: .*PASSED: 2/2 expectations.*predict json ok"
  "${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/predict_small.yaml --work ${scn_work} --clean --json ${scn_work}/ps.json && python3 -c \"import json; p=json.load(open('${scn_work}/predict_small/predict.json')); r=json.load(open('${scn_work}/ps.json')); assert sorted(p)==sorted(['device','capacity_bytes','runtime_bytes','step_time_s','tokens_per_s','mfu','stages']), p; assert p['capacity_bytes']+p['runtime_bytes']==143771*2**20 and p['runtime_bytes']>0, p; assert p['device']=='H200' and len(p['stages'])==2, p; assert all(sum(s[k] for k in ['weights','main_grads','optimizer','activations','workspace','comm_buffers'])==s['peak'] for s in p['stages']), p; assert max(s['peak'] for s in p['stages'])==r['peak_bytes'] and r['predict']['step_time_s']==p['step_time_s'], (p, r); print('predict json ok')\""
  LABELS ${labels} PROPERTIES TIMEOUT 120)

# ... and refuses faults with it, at the mode's line, exit status 2; an unknown mode likewise (each
# status on a line of its own, matched whole: `exit=2` alone would match `exit=21`).
twinrun_expect_sh(scenario_predict_refused 0 "predict_faults.yaml:3:7: mode: predict runs the job shape-only .*faults: would test nothing.*\nexit=2\n.*_mode.yaml:1:7: mode: 'guess' is not a mode: use rehearse \\(the default\\), predict or doctor.*\nexit=2\n"
  "${scn} check ${PROJECT_SOURCE_DIR}/tests/scenario/data/predict_faults.yaml; echo exit=$?; printf 'mode: guess\\ncluster:\\n  nodes: 1\\n' > ${scn_work}_mode.yaml; ${scn} check ${scn_work}_mode.yaml; echo exit=$?"
  LABELS ${labels})

# The 70B seed's full job, shape-only: fits 80 GiB. Its wall time (the target: 60 s on 2 cores) is printed,
# not asserted: a timed test fails on a loaded machine (93 s beside a make test); docs/prediction.md
# has the figure on a quiet one.
twinrun_expect_sh(scenario_predict_70b 0 "\\[predict\\] fits: .*PASSED: 2/2 expectations.*wall=[0-9]+s"
  "start=$(date +%s); ${scn} run ${PROJECT_SOURCE_DIR}/scenarios/predict_70b.yaml --work ${scn_work} --clean\nrc=$?\necho wall=$(( $(date +%s) - start ))s\nexit $rc"
  LABELS ${labels} heavy PROPERTIES TIMEOUT 300)

# The planner (docs/prediction.md#the-planner) where the answer is known: 40 GiB cards force full
# recomputation (without it, or selective, micro-batch 1 does not fit), full fits micro-batches 1-4 and
# not 8, and micro-batch 1 is the fastest; every "yes" is under 95% of the capacity and every "no" over.
# Its step, extrapolated from 2 and 3 micro-batches, is the one a shape-only run of the whole job gives.
twinrun_expect_sh(scenario_plan 0 "\\* TP2 PP2 CP1 DP2 +1 full +16 .* yes .*best \\(\\*\\): TP2 PP2 CP1 DP2, micro-batch 1, full recomputation.*largest micro-batch that fits: no recomputation: none: micro-batch 1 does not fit.*full recomputation: 4 .*plan ok"
  "${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --work ${scn_work}/plan --json ${scn_work}/plan.json && ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_full.yaml --work ${scn_work} --clean --json ${scn_work}/plan_full.json > /dev/null && python3 -c \"import json; p=json.load(open('${scn_work}/plan.json')); c=p['candidates']; b=c[p['best']]; assert (b['micro_batch'], b['recompute'], b['status']) == (1, 'full', 'yes'), b; st={(x['micro_batch'], x['recompute']): x['status'] for x in c}; assert st[(1,'none')]=='no' and st[(1,'selective')]=='no' and st[(4,'full')]=='yes' and st[(8,'full')]=='no', st; lim=0.95*p['capacity_bytes']; assert all((x['peak_bytes']<=lim)==(x['status']=='yes') for x in c if x['peak_bytes']), c; assert all(x['step_time_s'] >= b['step_time_s'] for x in c if x['status']=='yes'), c; d=json.load(open('${scn_work}/plan_full.json'))['predict']['step_time_s']; assert abs(d-b['step_time_s']) <= 1e-9*d, (d, b); print('plan ok', b['step_time_s'], d)\""
  LABELS ${labels} PROPERTIES TIMEOUT 120)

# ... exit 1 when nothing fits; --layouts tries the factorisations of the 8 ranks and keeps the fastest
# that fits, which beats the scenario's own layout (there full recomputation is needed).
twinrun_expect_sh(scenario_plan_none_fits 1 "best: none fits"
  "${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --work ${scn_work}/plan --micro-batches 4,8 --recompute none,selective"
  LABELS ${labels} PROPERTIES TIMEOUT 120)
twinrun_expect_sh(scenario_plan_layouts 0 "layouts ok"
  "${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --work ${scn_work}/plan --layouts --json ${scn_work}/plan_layouts.json && python3 -c \"import json; p=json.load(open('${scn_work}/plan_layouts.json')); c=p['candidates']; lays={(x['tp'],x['pp'],x['cp'],x['dp']) for x in c}; assert len(lays) >= 8 and all(a*b*d*e==8 for a,b,d,e in lays), lays; b=c[p['best']]; assert b['status']=='yes' and all(x['step_time_s']>=b['step_time_s'] for x in c if x['status']=='yes'), b; own=min(x['step_time_s'] for x in c if x['status']=='yes' and (x['tp'],x['pp'],x['cp'])==(2,2,1)); assert b['step_time_s'] < own, (b, own); print('layouts ok', len(lays))\""
  LABELS ${labels} PROPERTIES TIMEOUT 300)

# Bad input: exit 2 with the reason.
twinrun_expect(NAME scenario_plan_bad_option EXIT 2 OUTPUT "--guess is not an option.*usage: scenario plan" LABELS ${labels}
  COMMAND ${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --guess 1)
twinrun_expect(NAME scenario_plan_bad_recompute EXIT 2 OUTPUT "--recompute some: want a list of none, selective, full"
  LABELS ${labels} COMMAND ${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --recompute some)
twinrun_expect(NAME scenario_plan_bad_micro EXIT 2 OUTPUT "--micro-batches 1,0: want positive integers" LABELS ${labels}
  COMMAND ${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --micro-batches 1,0)
twinrun_expect(NAME scenario_plan_bad_headroom EXIT 2 OUTPUT "--headroom 1.5: want a fraction" LABELS ${labels}
  COMMAND ${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --headroom 1.5)
twinrun_expect(NAME scenario_plan_bad_device EXIT 2 OUTPUT "unknown device 'B200'" LABELS ${labels}
  COMMAND ${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/plan_8b_40g.yaml --device B200 --work ${scn_work}/plan)
twinrun_expect(NAME scenario_plan_no_file EXIT 2 OUTPUT "nothing.yaml" LABELS ${labels}
  COMMAND ${scn} plan ${PROJECT_SOURCE_DIR}/tests/scenario/data/nothing.yaml)

# A bare name typed at the repository root finds the shipped scenario (README: `scenario run
# thousand_card.yaml`), saying so; one found nowhere names where it looked. `plan` the same (its B200 stops
# it right after the file is loaded). (\x3b: ';', which a CMake list would take apart.)
twinrun_expect_sh(scenario_find_shipped 0 "scenario: thousand_card.yaml: not in the current directory; using scenarios/thousand_card.yaml\nscenarios/thousand_card.yaml: ok \\(1024 ranks"
  "${scn} check thousand_card.yaml" LABELS ${labels} PROPERTIES WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
twinrun_expect(NAME scenario_find_nowhere EXIT 2
  OUTPUT "^scenario: thousand_card.yaml: no such file or directory \\(looked in ${CMAKE_CURRENT_BINARY_DIR} and in its scenarios/\\x3b give the path"
  LABELS ${labels} PROPERTIES WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR} COMMAND ${scn} run thousand_card.yaml)
twinrun_expect(NAME scenario_plan_find_shipped EXIT 2
  OUTPUT "^scenario plan: predict_70b.yaml: not in the current directory\\x3b using scenarios/predict_70b.yaml\nscenario plan: unknown device 'B200'"
  LABELS ${labels} PROPERTIES WORKING_DIRECTORY ${PROJECT_SOURCE_DIR}
  COMMAND ${scn} plan predict_70b.yaml --device B200 --work ${scn_work}/plan)

include(${CMAKE_CURRENT_LIST_DIR}/html.cmake) # the HTML report and its browser test

# A report that cannot be written whole leaves what was there: --predict-json and --json onto a
# directory fail with the path named, and the directory keeps its file.
set(keep_dir ${scn_work}/report_kept)
twinrun_expect_sh(report_write_keeps_old 0 "--predict-json .*report_kept.*cannot rename its temporary file over it.*\nexit=2\nscenario: --json .*report_kept.*\nexit=2\nkept\n"
  "rm -rf ${keep_dir} && mkdir -p ${keep_dir} && echo old > ${keep_dir}/f && WORLD_SIZE=4 ${PROJECT_BINARY_DIR}/bin/train_llama3 ${tiny_job_str} --predict --predict-json ${keep_dir} >/dev/null; echo exit=$?; ${scn} run ${PROJECT_SOURCE_DIR}/tests/scenario/data/predict_small.yaml --work ${scn_work}/rk --clean --json ${keep_dir} >/dev/null; echo exit=$?; test \"$(cat ${keep_dir}/f)\" = old && ! ls ${keep_dir}.tmp.* 2>/dev/null && echo kept"
  LABELS ${labels})

# mode: doctor (docs/doctor.md): the doctor over the 70B guide's 1024 ranks with a version skew, a short node,
# a slow link and a node that cannot see the shared directory; each named (its check, its node), no other
# check failed; the JSON and JUnit reports checked. Then the refusals: a doctor fault in a training scenario,
# a training fault in a doctor scenario, each at its line, exit status 2.
twinrun_expect_sh(scenario_doctor_1024 0 "PASSED: 10/10 expectations.*doctor reports ok\nrehearse: .*:10:5: faults\\[0\\] \\(slow_link\\): found by the doctor before a job, not by training.*\nexit=2\ndoctor: .*:10:5: faults\\[0\\] \\(hang\\): mode: doctor runs no training.*\nexit=2\n"
  "${scn} run ${PROJECT_SOURCE_DIR}/scenarios/doctor_1024.yaml --work ${scn_work} --json ${scn_work}/doctor.json --junit ${scn_work}/doctor.xml && python3 ${CMAKE_CURRENT_SOURCE_DIR}/scenario/doctor_reports.py ${scn_work}/doctor.json ${scn_work}/doctor.xml ${scn_work}/doctor_1024/doctor.json && for m in rehearse doctor; do k=slow_link; [ $m = doctor ] && k='hang, step: 1, rank: 3'; printf 'mode: %s\\ncluster: {nodes: 2, gpus_per_node: 8}\\nmodel: {preset: tiny}\\ntraining: {micro-batch-size: 1, global-batch-size: 2, train-iters: 2, lr: 1.0e-3}\\ndata: {mock: true}\\n\\n\\n\\nfaults:\\n  - {kind: %s, node: 1}\\n' $m \"$k\" | sed 's/, node: 1}/}/;s/kind: slow_link}/kind: slow_link, node: 1}/' > ${scn_work}_$m.yaml; printf '%s: ' $m; ${scn} check ${scn_work}_$m.yaml; echo exit=$?; done"
  LABELS ${labels} PROPERTIES TIMEOUT 300)
