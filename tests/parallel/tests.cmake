# Layout equivalence on the twin: TP/PP/CP/DP layouts (up to 1024 ranks) vs one rank, 20 steps, fp32,
# as two tests (up to 64 ranks; the thousand-card TP8 PP8 DP16) that ctest runs side by side.
# The coverage build (-O0 --coverage, ci/test.sh's stage 5) runs a short form instead: 3 steps, layouts
# up to 64 ranks — the same code paths; the full sweep took longer than its 900 s timeout there.
set(layouts_sh ${CMAKE_CURRENT_SOURCE_DIR}/parallel/layouts.sh ${PROJECT_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR})
if(TWINRUN_COVERAGE)
  add_test(NAME parallel_layouts COMMAND ${layouts_sh} ${CMAKE_CURRENT_BINARY_DIR}/parallel_layouts 3 1-64)
  set_tests_properties(parallel_layouts PROPERTIES LABELS "${labels}" TIMEOUT 900)
else()
  add_test(NAME parallel_layouts COMMAND ${layouts_sh} ${CMAKE_CURRENT_BINARY_DIR}/parallel_layouts 20 1-64)
  set_tests_properties(parallel_layouts PROPERTIES LABELS "${labels}" TIMEOUT 900)
  add_test(NAME parallel_layouts_1024 COMMAND ${layouts_sh} ${CMAKE_CURRENT_BINARY_DIR}/parallel_layouts_1024 20 65-1024)
  set_tests_properties(parallel_layouts_1024 PROPERTIES LABELS "${labels}" TIMEOUT 900)
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
endif()
