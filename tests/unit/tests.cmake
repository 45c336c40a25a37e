# Command-line behaviour of the programs: help, bad flags, a short run from Hugging Face weights.
set(bin ${PROJECT_BINARY_DIR}/bin)
add_test(NAME cli_help COMMAND ${bin}/train_llama3 --help)
set_tests_properties(cli_help PROPERTIES LABELS "${labels}"
  PASS_REGULAR_EXPRESSION "--num-layers.*--calculate-per-token-loss")

add_test(NAME cli_unknown_flag COMMAND ${bin}/train_llama3 --num-layer 2)
set_tests_properties(cli_unknown_flag PROPERTIES LABELS "${labels}" WILL_FAIL FALSE
  PASS_REGULAR_EXPRESSION "unknown flag --num-layer; did you mean --num-layers")

add_test(NAME cli_missing_value COMMAND ${bin}/train_llama3 --hidden-size)
set_tests_properties(cli_missing_value PROPERTIES LABELS "${labels}" PASS_REGULAR_EXPRESSION "--hidden-size")

add_test(NAME cli_no_data COMMAND ${bin}/train_llama3 --hf-load ${TWINRUN_TEST_DATA}/tiny_gqa
  --micro-batch-size 1 --global-batch-size 2 --seq-length 16 --train-iters 2 --lr 1e-3)
set_tests_properties(cli_no_data PROPERTIES LABELS "${labels}" PASS_REGULAR_EXPRESSION "no training data")

# Three iterations from the reference model's weights on mock data; the log line must appear.
add_test(NAME cli_train_hf_mock COMMAND ${bin}/train_llama3 --hf-load ${TWINRUN_TEST_DATA}/tiny_gqa
  --micro-batch-size 1 --global-batch-size 2 --seq-length 16 --train-iters 3 --lr 1e-3 --min-lr 1e-4
  --lr-decay-style cosine --lr-warmup-iters 1 --log-interval 1 --mock-data
  --data-cache-path ${CMAKE_CURRENT_BINARY_DIR}/cli_train_hf_mock_cache --eval-iters 0)
set_tests_properties(cli_train_hf_mock PROPERTIES LABELS "${labels}"
  PASS_REGULAR_EXPRESSION "iteration +3/ +3 \\| consumed samples: +6 \\|.*lm loss: [0-9]")

# Same config, same seed, same bits: two runs from a fresh init write identical metrics files
# (timing fields aside: simulated in the twin, but wall time on a GPU).
set(det_args --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4
  --group-query-attention --num-query-groups 2 --seq-length 16 --max-position-embeddings 16
  --position-embedding-type rope --normalization LayerNorm --apply-layernorm-1p --swiglu
  --untie-embeddings-and-output-weights --disable-bias-linear --micro-batch-size 2 --global-batch-size 4
  --train-iters 4 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --bf16
  --grad-reduce-in-bf16 --mock-data --vocab-size 300 --eval-iters 0
  --data-cache-path ${CMAKE_CURRENT_BINARY_DIR}/cli_det_cache)
string(REPLACE ";" " " det_args_str "${det_args}")
add_test(NAME cli_deterministic COMMAND sh -c
  "${bin}/train_llama3 ${det_args_str} --metrics-jsonl det_a.jsonl >/dev/null && ${bin}/train_llama3 ${det_args_str} --metrics-jsonl det_b.jsonl >/dev/null && sed -E 's/\"(elapsed_ms_per_iter|tflops_per_gpu)\":[^,]*,//g' det_a.jsonl > det_a.bits && sed -E 's/\"(elapsed_ms_per_iter|tflops_per_gpu)\":[^,]*,//g' det_b.jsonl > det_b.bits && cmp det_a.bits det_b.bits && grep -q lm_loss det_a.bits && test $(wc -l < det_a.jsonl) -eq 4"
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli_deterministic PROPERTIES LABELS "${labels}")

# Issue 16 (Megatron parity, first run): --version on every program, every configuration error of a
# job reported once, simulated figures labelled. tests/unit/cli_parity.sh holds the cases.
foreach(case version errors_once sigterm final_eval resume_finished resume_no_eval tokenizer ckpt_flags ln1p export banner)
  add_test(NAME cli_parity_${case} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/cli_parity ${case})
  set_tests_properties(cli_parity_${case} PROPERTIES LABELS "${labels}")
endforeach()
if(TWINRUN_BACKEND STREQUAL "twin")
  add_test(NAME cli_parity_simulated COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/cli_parity simulated)
  set_tests_properties(cli_parity_simulated PROPERTIES LABELS "${labels}")
  # TWINRUN_FAULTS' preemption runs four ranks in one process: the twin's
  add_test(NAME cli_parity_preempt COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/cli_parity preempt)
  set_tests_properties(cli_parity_preempt PROPERTIES LABELS "${labels}")
endif()
