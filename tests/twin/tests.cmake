# The blame program on dump files (label twin): exit 1 when it finds a hang, 2 on a bad dump.
twinrun_expect(NAME twin_blame_cli EXIT 1 LABELS twin
  OUTPUT "seq 2 all_reduce count 4 fp32 sum: 3 joined since t=3.000000000 s; 1 never joined: 1\n.*stopped first: rank 1"
  COMMAND $<TARGET_FILE:blame> ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/hang_rank1_missing.txt)
twinrun_expect(NAME twin_blame_cli_bad_input EXIT 2 LABELS twin
  OUTPUT "bad_rank.txt: line 9: rank outside \\x5b0, world\\)" # \x5b: '[', which a CMake list would take apart
  COMMAND $<TARGET_FILE:blame> ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/bad_rank.txt)

# Thread-count independence (docs/twin.md#threads): a 16-rank TP/PP/CP/DP training run and the 8-rank fault
# scenario at 1, 2, 4 and "lazy" threads give the same metrics, checkpoints, reports, traces and logs, byte
# for byte (wall-clock figures masked). `valgrind-skip`: ci/memcheck.py would run it all under valgrind.
add_test(NAME twin_threads_identical COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/twin/threads_identical.py
  ${PROJECT_BINARY_DIR}/bin ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/twin_threads_identical)
set_tests_properties(twin_threads_identical PROPERTIES LABELS "twin;valgrind-skip" TIMEOUT 600
  PASS_REGULAR_EXPRESSION "threads identical: ok")

# The worker pool under helgrind (docs/twin.md#threads): test_twin_pool's runs with 2 and 4 threads and the
# lazy mode, no data race reported. `valgrind-skip`: ci/memcheck.py would run valgrind inside valgrind.
# gcc builds only: valgrind 3.19 cannot read clang 14's DWARF 5 ("possibly corrupted debuginfo").
find_program(VALGRIND valgrind)
if(VALGRIND AND CMAKE_C_COMPILER_ID STREQUAL "GNU")
  add_test(NAME twin_pool_helgrind COMMAND ${VALGRIND} --tool=helgrind --error-exitcode=9 $<TARGET_FILE:test_twin_pool>)
  set_tests_properties(twin_pool_helgrind PROPERTIES LABELS "twin;valgrind-skip" TIMEOUT 300) # exit 9: a race
endif()
