# The architecture as a test: ci/check_boundaries.py passes on the tree and catches planted violations.
add_test(NAME arch_boundaries COMMAND ${CMAKE_CURRENT_LIST_DIR}/boundaries.sh ${PROJECT_SOURCE_DIR}
         ${CMAKE_CURRENT_BINARY_DIR}/arch_boundaries)
set_tests_properties(arch_boundaries PROPERTIES LABELS "${labels}")
