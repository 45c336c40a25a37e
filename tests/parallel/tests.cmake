# Layout equivalence on the twin: TP/PP/CP/DP layouts (up to 1024 ranks) vs one rank, 20 steps, fp32.
add_test(NAME parallel_layouts COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/parallel/layouts.sh ${PROJECT_BINARY_DIR}/bin
  ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/parallel_layouts 20)
set_tests_properties(parallel_layouts PROPERTIES LABELS "${labels}" TIMEOUT 900)
