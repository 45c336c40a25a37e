# The architecture as a test: ci/check_boundaries.py passes on the tree and catches planted violations.
add_test(NAME arch_boundaries COMMAND ${CMAKE_CURRENT_LIST_DIR}/boundaries.sh ${PROJECT_SOURCE_DIR}
         ${CMAKE_CURRENT_BINARY_DIR}/arch_boundaries)
set_tests_properties(arch_boundaries PROPERTIES LABELS "${labels}")

# No mutable file-scope state in the libraries beyond the twin's documented hardware state.
set(arch_libs $<TARGET_FILE:twinrun_base> $<TARGET_FILE:twinrun_fault> $<TARGET_FILE:twinrun_engine>)
if(TWINRUN_BACKEND STREQUAL "twin")
  list(APPEND arch_libs $<TARGET_FILE:twinrun_twin> $<TARGET_FILE:twinrun_runner>)
endif()
add_test(NAME arch_globals COMMAND ${CMAKE_CURRENT_LIST_DIR}/globals.sh ${arch_libs})
set_tests_properties(arch_globals PROPERTIES LABELS "${labels}")
