# Layout equivalence on the twin: TP/PP/CP/DP layouts (up to 1024 ranks) vs one rank, 20 steps, fp32,
# as three tests that ctest runs side by side (layouts of up to 8 ranks, of 16, and the thousand-card
# TP8 PP8 DP16): one sweep took 639 s of a 900 s timeout on a loaded 2-core runner.
# The coverage build (ci/test.sh's stage 5) runs a short form instead: 3 steps, layouts up to 64 ranks —
# the same code paths; the full sweep took longer than its 900 s timeout there when it was built at -O0.
# ci/memcheck.py leaves the sweep out (a script: valgrind would watch only bash); `valgrind-skip` on the
# larger parts says so by label too.
set(layouts_sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/layouts.sh ${PROJECT_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR})
if(TWINRUN_COVERAGE)
  add_test(NAME parallel_layouts COMMAND ${layouts_sh} ${CMAKE_CURRENT_BINARY_DIR}/parallel_layouts 3 1-64)
  set_tests_properties(parallel_layouts PROPERTIES LABELS "${labels}" TIMEOUT 900)
else()
  foreach(part "parallel_layouts;1-8" "parallel_layouts_16;9-64" "parallel_layouts_1024;65-1024")
    list(GET part 0 name)
    list(GET part 1 worlds)
    add_test(NAME ${name} COMMAND ${layouts_sh} ${CMAKE_CURRENT_BINARY_DIR}/${name} 20 ${worlds})
    # `gcc-plain`: ci/test.sh's gcc stage runs these (the coverage build has only the short form)
    set(test_labels ${labels} gcc-plain)
    if(NOT name STREQUAL "parallel_layouts")
      list(APPEND test_labels valgrind-skip)
    endif()
    set_tests_properties(${name} PROPERTIES LABELS "${test_labels}" TIMEOUT 900)
  endforeach()
endif()

# The twin across processes (docs/multiprocess.md): mpirun and torchrun-style jobs byte-identical to one
# process; kill -9 and SIGSTOP of a process blamed by every survivor; bad input refused at once. `heavy`:
# scripts that mostly wait out watchdogs run in ci/test.sh's first stage only (test_twin_xproc covers the
# same code under clang, valgrind and coverage).
find_program(MPIRUN mpirun)
if(MPIRUN)
  foreach(mode identical kill stop mpirun_kill bad_input)
    add_test(NAME multiproc_${mode} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/parallel/multiproc.sh
      ${PROJECT_BINARY_DIR}/bin ${CMAKE_CURRENT_BINARY_DIR}/multiproc_${mode} ${mode})
    set_tests_properties(multiproc_${mode} PROPERTIES LABELS "${labels};heavy" TIMEOUT 180)
  endforeach()
  # 12 back-to-back 2- and 4-process jobs beside two busy loops, large and small messages: every one
  # ends cleanly (the long run: 200 jobs, docs/benchmarks.md)
  twinrun_expect_sh(multiproc_stress 0 "12/12 jobs ended cleanly"
    "bash ${CMAKE_CURRENT_SOURCE_DIR}/parallel/multiproc_stress.sh ${PROJECT_BINARY_DIR}/bin ${CMAKE_CURRENT_BINARY_DIR}/multiproc_stress 12 even"
    LABELS ${labels} heavy PROPERTIES TIMEOUT 600)
endif()

# Activation recomputation: full uniform/block and selective on TP2 x PP2 x DP2, bit-identical
# to the run without it, each with its saving in the memory report.
add_test(NAME parallel_recompute COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/recompute.sh ${PROJECT_BINARY_DIR}/bin
  ${CMAKE_CURRENT_BINARY_DIR}/parallel_recompute)
set_tests_properties(parallel_recompute PROPERTIES LABELS "${labels}" TIMEOUT 300)

# Linear biases across TP/SP/PP/CP/DP layouts, within 1e-5 of one rank.
add_test(NAME parallel_biases COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/biases.sh ${PROJECT_BINARY_DIR}/bin
  ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/parallel_biases)
set_tests_properties(parallel_biases PROPERTIES LABELS "${labels}" TIMEOUT 300)

# Both seeds' arrays, verbatim: the 70B guide's MODEL_ARGS and PARALLEL_ARGS, the 8B tutorial's
# every array (mock and real data, FP8 and profiling switches on), at TP2 x PP2 (x CP2) on 8 ranks.
foreach(seed llama3_70b llama3_8b_mock llama3_8b_real)
  add_test(NAME seed_${seed} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/parallel/seeds.sh ${PROJECT_BINARY_DIR}/bin
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/seeds ${seed})
  set_tests_properties(seed_${seed} PROPERTIES LABELS "${labels}" TIMEOUT 300)
endforeach()

# The distributed optimizer's static memory per rank against the documented per-parameter formula
# (bf16 2 + 4 + 10/DP, 12/DP with a whole fp32 master: Megatron's 6 + 12/DP) at TP2 PP2 DP2 and the 70B
# seed's TP8 PP8 DP16.
if(TWINRUN_BACKEND STREQUAL "twin")
twinrun_expect_sh(parallel_memory_formula 0 "memory formula: OK"
  "sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/memory_formula.sh ${PROJECT_BINARY_DIR}/bin ${CMAKE_CURRENT_BINARY_DIR}/parallel_memory_formula"
  LABELS ${labels} PROPERTIES TIMEOUT 300)
endif()

# Gradient buckets and --overlap-grad-reduce: equal to no buckets and to one rank, resume
# bit-exact, the checkpoint loads without buckets.
add_test(NAME parallel_overlap COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/overlap.sh ${PROJECT_BINARY_DIR}/bin
  ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/parallel_overlap)
set_tests_properties(parallel_overlap PROPERTIES LABELS "${labels}" TIMEOUT 600)
