# refcheck against the project's copy of the Hugging Face tiny_gqa reference (fp32 and bf16).
add_test(NAME refcheck_tiny_gqa COMMAND ${PROJECT_BINARY_DIR}/bin/refcheck ${TWINRUN_TEST_DATA}/tiny_gqa)
set_tests_properties(refcheck_tiny_gqa PROPERTIES LABELS "${labels}")

# The same with Megatron's linear biases (transformers' attention_bias and mlp_bias) and a 500-token
# vocabulary twinrun pads to 512: made on the GPU machine by ci/make_reference_bias.py (transformers is
# not installed where the project builds); the test runs once tests/data/tiny_gqa_bias is there.
if(EXISTS ${TWINRUN_TEST_DATA}/tiny_gqa_bias/reference.safetensors)
  add_test(NAME refcheck_tiny_gqa_bias COMMAND ${PROJECT_BINARY_DIR}/bin/refcheck ${TWINRUN_TEST_DATA}/tiny_gqa_bias)
  set_tests_properties(refcheck_tiny_gqa_bias PROPERTIES LABELS "${labels}")
endif()
