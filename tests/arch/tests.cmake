# The architecture as a test: ci/check_boundaries.py passes on the tree and catches planted violations.
# Exit code and output both (twinrun_expect): the tree passes and the last planted violation was caught.
twinrun_expect(NAME arch_boundaries EXIT 0
  OUTPUT "^check_boundaries: every include respects the layers.*\ncaught guard: engine/ckpt/ckpt.h: include guard"
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/boundaries.sh ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/arch_boundaries
  LABELS ${labels})

# No mutable file-scope state in the libraries beyond the twin's documented hardware state.
set(arch_libs $<TARGET_FILE:twinrun_base> $<TARGET_FILE:twinrun_fault> $<TARGET_FILE:twinrun_engine>)
if(TWINRUN_BACKEND STREQUAL "twin")
  list(APPEND arch_libs $<TARGET_FILE:twinrun_twin> $<TARGET_FILE:twinrun_runner>)
endif()
twinrun_expect(NAME arch_globals EXIT 0 OUTPUT "globals: [0-9]+ mutable objects, all in the allow-list"
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/globals.sh ${arch_libs} LABELS ${labels})
