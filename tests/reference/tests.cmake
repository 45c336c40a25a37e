# refcheck against the project's copy of the Hugging Face tiny_gqa reference (fp32 and bf16).
# Exit code and output both (twinrun_expect): the verdict line, after every tensor's own line.
twinrun_expect(NAME refcheck_tiny_gqa EXIT 0 OUTPUT "model.norm.weight .* ok\n.*refcheck: all within tolerance\n"
  COMMAND ${PROJECT_BINARY_DIR}/bin/refcheck ${TWINRUN_TEST_DATA}/tiny_gqa LABELS ${labels})

# The same with Megatron's linear biases (transformers' attention_bias and mlp_bias) and a 500-token
# vocabulary twinrun pads to 512: made by lab/make_reference_bias.py (transformers is
# not installed where the project builds). fp32 only: its bf16 pass misses 2e-2 on layer 1's q/k
# gradients (2.7-4.3 %: larger pre-softmax scores lose more to bf16 rounding) and on the k bias,
# whose gradient is ~0 up to RoPE (AdamW turns that noise into full steps); tests/data/README.md.
if(EXISTS ${TWINRUN_TEST_DATA}/tiny_gqa_bias/reference.safetensors)
  twinrun_expect(NAME refcheck_tiny_gqa_bias EXIT 0 OUTPUT "lm_head.weight .* ok\nrefcheck: all within tolerance\n"
    COMMAND ${PROJECT_BINARY_DIR}/bin/refcheck --fp32-only ${TWINRUN_TEST_DATA}/tiny_gqa_bias LABELS ${labels})
endif()
