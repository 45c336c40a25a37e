# Layout equivalence on the twin: TP/PP/CP/DP layouts (up to 1024 ranks) vs one rank, 20 steps, fp32.
add_test(NAME parallel_layouts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/parallel/layouts.sh ${PROJECT_BINARY_DIR}/bin
  ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/parallel_layouts 20)
set_tests_properties(parallel_layouts PROPERTIES LABELS "${labels}" TIMEOUT 900)

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
endif()

# Activation recomputation (issue 16): full uniform/block and selective on TP2 x PP2 x DP2, bit-identical
# to the run without it, each with its saving in the memory report.
add_test(NAME parallel_recompute COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/recompute.sh ${PROJECT_BINARY_DIR}/bin
  ${CMAKE_CURRENT_BINARY_DIR}/parallel_recompute)
set_tests_properties(parallel_recompute PROPERTIES LABELS "${labels}" TIMEOUT 300)

# Linear biases (issue 16) across TP/SP/PP/CP/DP layouts, within 1e-5 of one rank.
add_test(NAME parallel_biases COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/biases.sh ${PROJECT_BINARY_DIR}/bin
  ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/parallel_biases)
set_tests_properties(parallel_biases PROPERTIES LABELS "${labels}" TIMEOUT 300)

# Both seeds' arrays, verbatim (issue 16): the 70B guide's MODEL_ARGS and PARALLEL_ARGS, the 8B tutorial's
# every array (mock and real data, FP8 and profiling switches on), at TP2 x PP2 (x CP2) on 8 ranks.
foreach(seed llama3_70b llama3_8b_mock llama3_8b_real)
  add_test(NAME seed_${seed} COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/parallel/seeds.sh ${PROJECT_BINARY_DIR}/bin
    ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/seeds ${seed})
  set_tests_properties(seed_${seed} PROPERTIES LABELS "${labels}" TIMEOUT 300)
endforeach()
