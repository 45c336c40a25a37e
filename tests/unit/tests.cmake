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
