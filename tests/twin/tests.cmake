# The blame program on dump files (label twin): exit 1 when it finds a hang, 2 on a bad dump.
twinrun_expect(NAME twin_blame_cli EXIT 1 LABELS twin
  OUTPUT "seq 2 all_reduce count 4 fp32 sum: 3 joined since t=3.000000000 s\\x3b 1 never joined: 1\n.*stopped first: rank 1"
  COMMAND $<TARGET_FILE:blame> ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/hang_rank1_missing.txt)
twinrun_expect(NAME twin_blame_cli_bad_input EXIT 2 LABELS twin
  OUTPUT "bad_rank.txt: line 9: rank outside \\x5b0, world\\)" # \x5b: '[', which a CMake list would take apart
  COMMAND $<TARGET_FILE:blame> ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/bad_rank.txt)

# Thread-count independence (docs/twin.md#threads): a 16-rank TP/PP/CP/DP training run and the 8-rank fault
# scenario at 1, 2, 4 and "lazy" threads give the same metrics, checkpoints, reports, traces and logs, byte
# for byte (wall-clock figures masked). `valgrind-skip`: ci/memcheck.py would run it all under valgrind.
twinrun_expect_sh(twin_threads_identical 0 "threads identical: ok"
  "${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/twin/threads_identical.py ${PROJECT_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/twin_threads_identical"
  LABELS twin valgrind-skip PROPERTIES TIMEOUT 600)

# The worker pool under helgrind (docs/twin.md#threads): test_twin_pool's runs with 2 and 4 threads and the
# lazy mode, no data race reported. `valgrind-skip`: ci/memcheck.py would run valgrind inside valgrind.
# gcc builds only: valgrind 3.19 cannot read clang 14's DWARF 5 ("possibly corrupted debuginfo"); not in the
# coverage build, whose gcov counters every thread bumps without atomics (helgrind rightly calls them races).
find_program(VALGRIND valgrind)
if(VALGRIND AND CMAKE_C_COMPILER_ID STREQUAL "GNU" AND NOT TWINRUN_COVERAGE)
  add_test(NAME twin_pool_helgrind COMMAND ${VALGRIND} --tool=helgrind --error-exitcode=9 $<TARGET_FILE:test_twin_pool>)
  # `gcc-plain`: ci/test.sh's gcc stage runs them (the coverage build, which runs the other twin tests, has none)
  set_tests_properties(twin_pool_helgrind PROPERTIES LABELS "twin;valgrind-skip;gcc-plain" TIMEOUT 300) # exit 9: a race
  # kern_init_param's memo (sim/kern/kern_init_memo.h), called from 4 threads at once
  add_test(NAME twin_init_memo_helgrind COMMAND ${VALGRIND} --tool=helgrind --error-exitcode=9
    $<TARGET_FILE:test_kern_init_memo>)
  set_tests_properties(twin_init_memo_helgrind PROPERTIES LABELS "twin;valgrind-skip;gcc-plain" TIMEOUT 300)
endif()

# The cost model's calibration (docs/prediction.md#calibration). The fit recovers known efficiencies from a
# fixture, reads the old profile format, refuses bad input.
twinrun_expect(NAME calib_fit_fixture EXIT 0 OUTPUT "test_fit_cost_model: ok" LABELS twin
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/twin/test_fit_cost_model.py ${PROJECT_SOURCE_DIR})
# The H200 table built into the twin is the fit of the committed measurements (the twin replays their
# flags in predict mode for its ledgers).
twinrun_expect_sh(calib_fit_committed 0 "matches the fit of"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/fit_cost_model.py docs/results/calibration/h200-2026-12-02b --bin $<TARGET_FILE:train_llama3> --check sim/cost/calibration_h200.c --md-out ${CMAKE_CURRENT_BINARY_DIR}/calib_fit.md"
  LABELS twin)
# The same for the H100's (H100-cal): its data are lab/gpu_calibrate.sh's on an H100 at 2b9506d, its FP8 classes
# the FP8 run of the 8B layer that lab/gpu_bench.sh --profile measured at e658664.
twinrun_expect_sh(calib_fit_committed_h100 0 "matches the fit of"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/fit_cost_model.py docs/results/calibration/h100-2026-12-07b --source docs/results/calibration/h100-2026-12-07b --fp8-data docs/results/calibration/h100-2026-12-07-fp8 --bin $<TARGET_FILE:train_llama3> --check sim/cost/calibration_h100.c --md-out ${CMAKE_CURRENT_BINARY_DIR}/calib_fit_h100.md"
  LABELS twin)
# The background stream's rate in the H100-cal spec is the fit of the committed step times (the twin
# replays their flags in predict mode), and a spec that does not hold the fit is caught: the plain H100's
# roofline (no rate) against the fit on its own predictions.
twinrun_expect_sh(calib_background_rate_committed 0 "\\| llama70b-2l_seq8192_mb1 \\| yes \\| 252.8 \\|.*the H100-cal spec holds the fitted rate 0.53"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/calib/fit_background_rate.py docs/results/calibration/h100-2026-12-07b --device H100-cal --bin $<TARGET_FILE:train_llama3> --check"
  LABELS twin)
twinrun_expect_sh(calib_background_rate_planted 1 "the H100 spec's own rate predicts .* otherwise than the fitted"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/calib/fit_background_rate.py docs/results/calibration/h100-2026-12-07b --bin $<TARGET_FILE:train_llama3> --device H100 --check"
  LABELS twin)
# The memory test: the twin's predict mode prints the CUDA build's own `[memory]` line, purpose by purpose,
# for the flags of every config the H100 calibration ran (lab/calib/memory_parts.py over its logs); an older
# build's logs (the H200's of 484ab84, whose weights held the whole fp32 master) differ and are caught.
twinrun_expect_sh(calib_memory_parts 0 "\\| llama70b-2l_seq8192_mb1 \\| 14544.16 \\| 14544.16 \\| 29088.31 \\| 8440.59 \\| 66617.22 \\| equal \\|.*11 of 11 configs: every part equal"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/calib/memory_parts.py docs/results/calibration/h100-2026-12-07b docs/results/calibration/h100-2026-12-07b-holdout --bin $<TARGET_FILE:train_llama3>"
  LABELS twin)
twinrun_expect_sh(calib_memory_parts_older_build 1 "\\| seq1024_mb4 \\| \\*\\*8574.39 ≠ 5716.26\\*\\* \\|.*0 of 6 configs: every part equal\\; 6 differ"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/calib/memory_parts.py docs/results/calibration/h200-2026-12-02b --bin $<TARGET_FILE:train_llama3>"
  LABELS twin)
# The GPU benchmark's step times as a folder predict_vs_measured.py reads (lab/calib/bench_calibration.py):
# the flags of gpu_calibrate.sh's folder, "fitted" where that folder profiled the config, and a config the
# template lacks refused.
twinrun_expect_sh(calib_bench_folder 0 "llama70b-2l_seq8192_mb1 +254.7 ms +65.06 GiB +.fitted.*\"commit\": \"2b9506d\""
  "cd ${PROJECT_SOURCE_DIR} && D=${CMAKE_CURRENT_BINARY_DIR}/calib_bench && rm -rf $D && ${Python3_EXECUTABLE} lab/calib/bench_calibration.py docs/results/gpu_bench_h100.json docs/results/calibration/h100-2026-12-07b $D && cmp $D/calibration.json docs/results/calibration/h100-2026-12-07b-bench/calibration.json && grep commit $D/calibration.json"
  LABELS twin)
twinrun_expect_sh(calib_bench_folder_no_template 1 "llama70b-2l_seq8192_mb1: no such config in the template"
  "cd ${PROJECT_SOURCE_DIR} && ${Python3_EXECUTABLE} lab/calib/bench_calibration.py docs/results/gpu_bench_h100.json docs/results/calibration/h100-2026-12-07b-holdout ${CMAKE_CURRENT_BINARY_DIR}/calib_bench_bad"
  LABELS twin)
# On a GPU the twin has no spec for, lab/gpu_calibrate.sh stops before its first run and says how to name one
# (a stand-in nvidia-smi naming another GPU first on PATH).
twinrun_expect_sh(calib_unknown_gpu 1 "the twin has no spec for 'Tesla V100-SXM2-32GB': set TWINRUN_CALIB_DEVICE"
  "D=${CMAKE_CURRENT_BINARY_DIR}/calib_unknown && rm -rf $D && mkdir -p $D/bin && printf '#!/bin/sh\\necho Tesla V100-SXM2-32GB\\n' > $D/bin/nvidia-smi && chmod +x $D/bin/nvidia-smi && cd ${PROJECT_SOURCE_DIR} && PATH=$D/bin:$PATH TWINRUN_CALIB_TINY=1 TWINRUN_CALIB_BIN=$<TARGET_FILE:train_llama3> TWINRUN_CALIB_WORK=$D/work lab/gpu_calibrate.sh $D/out; rc=$?; if test -e $D/work/calib/tiny_seq32_mb2.log; then echo 'a run came before the refusal'; exit 3; fi; exit $rc"
  LABELS twin)
# lab/gpu_bench.sh says whether the twin's calibration for the GPU is older than the kernels
# (lab/calib/calibration_age.py), on a repository the test makes.
twinrun_expect_sh(calib_age 0 "ok current\nok tools do not count\nok a kernel changed .working tree.\nok a kernel changed .committed.\nok no table\nok a dirty measurement\nok a commit not in the history\nok GIT_DIR elsewhere\nok no git\ncalibration_age: ok"
  "${CMAKE_CURRENT_SOURCE_DIR}/twin/calibration_age.sh ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/calib_age"
  LABELS twin)
# lab/gpu_calibrate.sh's dry run on the twin (a tiny model), end to end through predict_vs_measured.py: the
# twin's own runs are what its predict mode predicts (step time and peak), so every target holds.
# It leaves three files, and the tarball holds the folder the scripts read.
twinrun_expect_sh(calib_dry_run 0 "calibration.json\ngpu_calibrate.tar.gz\nsummary.txt\n.*tiny_seq64_mb2_full \\| [0-9.]+ \\| [0-9.]+ \\| [+-]0\\.0%.*targets missed: none.*\"name\": \"tiny_seq64_mb2_full\",\n *\"held_out\": (true|false),\n *\"measured_step_s\": [0-9.e-]+,\n *\"predicted_step_s\": [0-9.e-]+,\n *\"measured_peak_bytes\": [0-9]+,\n *\"predicted_peak_bytes\": [0-9]+"
  "cd ${PROJECT_SOURCE_DIR} && D=${CMAKE_CURRENT_BINARY_DIR}/calib_dry && rm -rf $D && TWINRUN_TWIN_DEVICE=H200 TWINRUN_CALIB_TINY=1 TWINRUN_CALIB_BIN=$<TARGET_FILE:train_llama3> TWINRUN_CALIB_WORK=$D/work lab/gpu_calibrate.sh $D/out && ls $D/out && mkdir $D/back && tar -xzf $D/out/gpu_calibrate.tar.gz -C $D/back && ${Python3_EXECUTABLE} lab/predict_vs_measured.py $D/back/calib --strict --bin $<TARGET_FILE:train_llama3> --json-out $D/pvm.json && cat $D/pvm.json"
  LABELS twin)

# TWINRUN_CALIB_SET=fp8's dry run: its configs carry the 8B seed's FP8 flags (the folder --fp8-data reads), the
# runs succeed, and the twin's predict mode predicts its own FP8 runs; an unknown set is refused before any run.
twinrun_expect_sh(calib_dry_run_fp8 0 "^--fp8-format\nhybrid\n--fp8-amax-history-len\n1024\n--fp8-amax-compute-algo\nmax\n.*tiny_seq32_mb2_fp8 \\| [0-9.]+ \\| [0-9.]+ \\| [+-]0\\.0%.*targets missed: none"
  "cd ${PROJECT_SOURCE_DIR} && D=${CMAKE_CURRENT_BINARY_DIR}/calib_dry8 && rm -rf $D && TWINRUN_TWIN_DEVICE=H200 TWINRUN_CALIB_SET=fp8 TWINRUN_CALIB_TINY=1 TWINRUN_CALIB_BIN=$<TARGET_FILE:train_llama3> TWINRUN_CALIB_WORK=$D/work lab/gpu_calibrate.sh $D/out >/dev/null && mkdir $D/back && tar -xzf $D/out/gpu_calibrate.tar.gz -C $D/back && tail -n 6 $D/back/calib/tiny_seq32_mb2_fp8.args && ${Python3_EXECUTABLE} lab/predict_vs_measured.py $D/back/calib --strict --bin $<TARGET_FILE:train_llama3>"
  LABELS twin)
twinrun_expect_sh(calib_set_unknown 1 "TWINRUN_CALIB_SET=fp16: give fit .the default., holdout or fp8"
  "cd ${PROJECT_SOURCE_DIR} && D=${CMAKE_CURRENT_BINARY_DIR}/calib_set_bad && rm -rf $D && TWINRUN_CALIB_SET=fp16 TWINRUN_CALIB_TINY=1 TWINRUN_CALIB_BIN=$<TARGET_FILE:train_llama3> TWINRUN_CALIB_WORK=$D/work lab/gpu_calibrate.sh $D/out; rc=$?; if ls $D/work/calib/*.log >/dev/null 2>&1; then echo 'a run came before the refusal'; exit 3; fi; exit $rc"
  LABELS twin)

# lab/gpu_multi_bench.sh's dry run on the twin (docs/benchmarks.md): 2 simulated GPUs, the tiny
# stand-in model in L1, TP2, DP2 and PP2 through scripts/launch_llama3.sh (the "measured" side: the twin's own
# runs, H200 spec), the twin's predictions, lab/gpu_multi.sh's correctness checks on the twin (their twin
# side from lab/twin_multi.sh), the report. Asserts the four files it leaves, then every
# layout's figures (efficiency in (0, 1.5], wait share in [0, 1], twin step > 0 and, the measured side being
# the twin itself, within 2% of it; no failed check), and the same from the tarball alone (what a run cut
# short leaves). `valgrind-skip`: under ci/memcheck.py valgrind would watch only the shell.
twinrun_expect_sh(multi_bench_dry_run 0 "summary: 14 passed, 0 failed.*\ngpu_multi_bench.json\ngpu_multi_bench.md\ngpu_multi_bench_runs.tar.gz\ngpu_multi_logs.tar.gz\ncheck: 4 layouts, every figure in range.*check: 4 layouts, every figure in range"
  "cd ${PROJECT_SOURCE_DIR} && D=${CMAKE_CURRENT_BINARY_DIR}/multi_bench_dry && rm -rf $D && TWINRUN_MULTI_BENCH_DRY=1 TWINRUN_MULTI_BENCH_GPUS=2 TWINRUN_MULTI_BENCH_BIN=$<TARGET_FILE:train_llama3> TWINRUN_MULTI_BENCH_WORK=$D/work lab/gpu_multi_bench.sh $D/out && ls $D/out && C='check --layouts tiny_L1,tiny_TP2,tiny_DP2,tiny_PP2 --twin-tolerance 0.02' && ${Python3_EXECUTABLE} lab/bench/multi_bench_report.py $C $D/out/gpu_multi_bench.json && mkdir $D/back && tar -xzf $D/out/gpu_multi_bench_runs.tar.gz -C $D/back && ${Python3_EXECUTABLE} lab/bench/multi_bench_report.py report $D/back/runs --gpus 2 --dry-run --quiet --json $D/back/j.json --md $D/back/t.md && ${Python3_EXECUTABLE} lab/bench/multi_bench_report.py $C $D/back/j.json"
  LABELS twin valgrind-skip PROPERTIES TIMEOUT 600)
# The dry run's assertions refuse what is out of range: an efficiency of 2, a wait share of 1.2, a zero twin
# step, GPUs that are not TP x PP x DP, a missing layout, a failed correctness check.
twinrun_expect(NAME multi_bench_check_refuses EXIT 1 LABELS twin
  OUTPUT "layout tiny_PP2 missing.*tiny_TP2: scaling_efficiency 2.0 not in .0, 1.5..*tiny_TP2: collective_wait_share 1.2 not in .0, 1..*tiny_TP2: twin_step_s 0 not > 0.*tiny_DP2: gpus 4 != tp x pp x dp.*correctness checks failed"
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/lab/bench/multi_bench_report.py check
    ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/multi_bench_bad.json --layouts tiny_L1,tiny_TP2,tiny_DP2,tiny_PP2)

# lab/attn_bench.sh --rounds' summary (lab/bench/attn_ab.py): each side's median over its ABBA rounds and
# the ratios torch ms / twinrun ms, on made-up rounds (medians of an even count: the two middle ones'
# mean); a shape whose torch rounds are missing is refused.
twinrun_expect(NAME lab_attn_ab EXIT 0 LABELS twin
  OUTPUT "\\| 64 \\| 1024 × 4 \\| 1 \\| 0.061 / 0.233 .*\\| 1.000 \\| 0.983 \\| 184.3 \\|\n\\| 128 \\| 8192 × 1 \\| 4 \\| 0.873 / 2.655 \\(0.860–0.880, 2.640–2.700\\) \\| 0.877 / 2.638 .* \\| 1.006 \\| 0.993 \\| 517.7 \\|"
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/lab/bench/attn_ab.py ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/attn_rounds.txt)
twinrun_expect(NAME lab_attn_ab_one_side EXIT 1 LABELS twin
  OUTPUT "D 64 T 1024 B 4: 1 twinrun round\\(s\\), 0 torch round\\(s\\)"
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/lab/bench/attn_ab.py ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/attn_rounds_one_side.txt)

# `valgrind-skip`: test_twin_streams's race cases end their ranks at the racing operation on purpose
# (the twin's verdict), abandoning what those ranks had allocated, which memcheck counts as leaks; its
# race-free cases are the same code as parallel_overlap's, which memcheck runs.
set_property(TEST test_twin_streams APPEND PROPERTY LABELS valgrind-skip)
