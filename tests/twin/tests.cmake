# The blame program on dump files (label twin). blame exits 1 when it finds a hang, so these
# tests judge by output only.
add_test(NAME twin_blame_cli COMMAND blame ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/hang_rank1_missing.txt)
set_tests_properties(twin_blame_cli PROPERTIES LABELS twin
  PASS_REGULAR_EXPRESSION "seq 2 all_reduce count 4 fp32 sum: 3 joined since t=3.000000000 s; 1 never joined: 1\n.*stopped first: rank 1")
add_test(NAME twin_blame_cli_bad_input COMMAND blame ${CMAKE_CURRENT_SOURCE_DIR}/twin/data/bad_rank.txt)
set_tests_properties(twin_blame_cli_bad_input PROPERTIES LABELS twin
  PASS_REGULAR_EXPRESSION "bad_rank.txt: line 9: rank outside \\[0, world\\)")
