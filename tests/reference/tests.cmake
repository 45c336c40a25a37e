# refcheck against the project's copy of the Hugging Face tiny_gqa reference (fp32 and bf16).
add_test(NAME refcheck_tiny_gqa COMMAND ${PROJECT_BINARY_DIR}/bin/refcheck ${TWINRUN_TEST_DATA}/tiny_gqa)
set_tests_properties(refcheck_tiny_gqa PROPERTIES LABELS "${labels}")
