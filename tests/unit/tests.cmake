# Command-line behaviour of the programs: help, bad flags, a short run from Hugging Face weights.
set(bin ${PROJECT_BINARY_DIR}/bin)
# Exit codes: 0 success, 2 (TR_EXIT_USAGE) a usage error.
twinrun_expect(NAME cli_help EXIT 0 OUTPUT "--num-layers.*--calculate-per-token-loss" LABELS ${labels}
  COMMAND ${bin}/train_llama3 --help)
twinrun_expect(NAME cli_unknown_flag EXIT 2 OUTPUT "unknown flag --num-layer\\x3b did you mean --num-layers"
  LABELS ${labels} COMMAND ${bin}/train_llama3 --num-layer 2)
twinrun_expect(NAME cli_missing_value EXIT 2 OUTPUT "--hidden-size" LABELS ${labels}
  COMMAND ${bin}/train_llama3 --hidden-size)
# a vocabulary whose padding passes INT32_MAX is refused before anything starts (it wrapped to a negative
# size and a bogus out-of-memory advice)
twinrun_expect(NAME cli_vocab_overflow EXIT 2 LABELS ${labels}
  OUTPUT "--vocab-size 2147483647 padded to a multiple of 128 .* is 2147483648, beyond 2147483647 \\(token ids are 32-bit\\)\\x3b give the tokenizer's vocabulary"
  COMMAND ${bin}/train_llama3 --num-layers 2 --hidden-size 32 --num-attention-heads 4 --seq-length 8
  --max-position-embeddings 8 --micro-batch-size 1 --global-batch-size 1 --train-iters 1 --lr 1e-3 --mock-data
  --vocab-size 2147483647)
twinrun_expect(NAME cli_no_data EXIT 2 OUTPUT "no training data" LABELS ${labels}
  COMMAND ${bin}/train_llama3 --hf-load ${TWINRUN_TEST_DATA}/tiny_gqa --micro-batch-size 1 --global-batch-size 2
  --seq-length 16 --train-iters 2 --lr 1e-3)

# Three iterations from the reference model's weights on mock data; the log line must appear.
twinrun_expect(NAME cli_train_hf_mock EXIT 0 OUTPUT "iteration +3/ +3 \\| consumed samples: +6 \\|.*lm loss: [0-9]"
  LABELS ${labels}
  COMMAND ${bin}/train_llama3 --hf-load ${TWINRUN_TEST_DATA}/tiny_gqa
  --micro-batch-size 1 --global-batch-size 2 --seq-length 16 --train-iters 3 --lr 1e-3 --min-lr 1e-4
  --lr-decay-style cosine --lr-warmup-iters 1 --log-interval 1 --mock-data
  --eval-iters 0)

# Same config, same seed, same bits: two runs from a fresh init write identical metrics files
# (timing fields aside: simulated in the twin, but wall time on a GPU).
set(det_args --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4
  --group-query-attention --num-query-groups 2 --seq-length 16 --max-position-embeddings 16
  --position-embedding-type rope --normalization LayerNorm --apply-layernorm-1p --swiglu
  --untie-embeddings-and-output-weights --disable-bias-linear --micro-batch-size 2 --global-batch-size 4
  --train-iters 4 --lr 1e-3 --min-lr 1e-4 --lr-decay-style cosine --lr-warmup-iters 1 --bf16
  --grad-reduce-in-bf16 --mock-data --vocab-size 300 --eval-iters 0)
string(REPLACE ";" " " det_args_str "${det_args}")
# --deterministic-mode (Megatron's flag) as Megatron's rule wants it: with NCCL_ALGO pinned
add_test(NAME cli_deterministic COMMAND sh -c
  "export NCCL_ALGO=Ring && ${bin}/train_llama3 ${det_args_str} --deterministic-mode --metrics-jsonl det_a.jsonl >/dev/null && ${bin}/train_llama3 ${det_args_str} --deterministic-mode --metrics-jsonl det_b.jsonl >/dev/null && sed -E 's/\"(elapsed_ms_per_iter|tflops_per_gpu)\":[^,]*,//g' det_a.jsonl > det_a.bits && sed -E 's/\"(elapsed_ms_per_iter|tflops_per_gpu)\":[^,]*,//g' det_b.jsonl > det_b.bits && cmp det_a.bits det_b.bits && grep -q lm_loss det_a.bits && test $(wc -l < det_a.jsonl) -eq 4"
  WORKING_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR})
set_tests_properties(cli_deterministic PROPERTIES LABELS "${labels}")
twinrun_expect(NAME cli_deterministic_needs_nccl_algo EXIT 2
  OUTPUT "--deterministic-mode needs NCCL_ALGO set to Tree, Ring.*it is 'NVLS'.*export NCCL_ALGO=Ring"
  COMMAND env NCCL_ALGO=NVLS ${bin}/train_llama3 ${det_args} --deterministic-mode LABELS ${labels})

# Megatron parity: --version on every program, every configuration error of a
# job reported once, simulated figures labelled. tests/unit/cli_parity.sh holds the cases.
foreach(case version errors_once sigterm final_eval resume_finished resume_no_eval tokenizer ckpt_flags ln1p)
  add_test(NAME cli_parity_${case} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/cli_parity ${case})
  set_tests_properties(cli_parity_${case} PROPERTIES LABELS "${labels}")
endforeach()
if(TWINRUN_BACKEND STREQUAL "twin")
  add_test(NAME cli_parity_simulated COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/cli_parity simulated)
  set_tests_properties(cli_parity_simulated PROPERTIES LABELS "${labels}")
  # several ranks in one process (TWINRUN_FAULTS' preemption; the tensor-parallel export; the
  # pipeline-parallel banner): the twin's — a GPU build runs one rank a process
  foreach(case export banner)
    add_test(NAME cli_parity_${case} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
      ${CMAKE_CURRENT_BINARY_DIR}/cli_parity ${case})
    set_tests_properties(cli_parity_${case} PROPERTIES LABELS "${labels}")
  endforeach()
  add_test(NAME cli_parity_preempt COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_parity.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/cli_parity preempt)
  set_tests_properties(cli_parity_preempt PROPERTIES LABELS "${labels}")
endif()

# The tool programs (dataset, bench_data, ckpt's and launch_check's input errors; bench_twin on the twin;
# train_llama3 --tokens-file):
# happy paths on tiny inputs, every input error with its message. tests/unit/cli_tools.sh holds the cases.
set(cli_tools_cases preprocess_text preprocess_tiktoken check_tokenizer preprocess_text_errors dataset_preprocess dataset_errors dataset_samples bench_data ckpt_errors launch_check_errors)
if(TWINRUN_BACKEND STREQUAL "twin")
  # tokens_file runs DP 2 as two ranks in one process: the twin's (a GPU build has one rank a process)
  list(APPEND cli_tools_cases bench_twin tokens_file)
endif()
foreach(case ${cli_tools_cases})
  twinrun_expect_sh(cli_tools_${case} 0 "cli_tools ${case}: ok"
    "sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/cli_tools.sh ${bin} ${CMAKE_CURRENT_BINARY_DIR}/cli_tools ${case}" LABELS ${labels})
endforeach()

# Files a user made (datasets, exports, scenario work folders, reports) are never destroyed: each case
# refused or failed with the folder's hash unchanged and the fix named. tests/unit/safe_files.sh holds the cases.
set(safe_files_cases preprocess_ids preprocess_text ckpt_export)
if(TWINRUN_BACKEND STREQUAL "twin")
  list(APPEND safe_files_cases scenario_name scenario_work) # the scenario runner: twin builds
endif()
foreach(case ${safe_files_cases})
  add_test(NAME safe_files_${case} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/safe_files.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/safe_files ${case})
  set_tests_properties(safe_files_${case} PROPERTIES LABELS "${labels}")
endforeach()

# FP8 training (docs/fp8.md): resume bit for bit, layouts against one rank, a TP2 checkpoint resumed at TP1
# keeping the amax histories, bf16 and FP8 checkpoints into each other, --fp8-param-gather. tests/unit/fp8_train.sh
# holds the cases.
if(TWINRUN_BACKEND STREQUAL "twin") # the layouts run their ranks in one process: the twin's
  foreach(case resume layouts reshard shapes formats scratch gather)
    twinrun_expect_sh(fp8_train_${case} 0 "fp8_train ${case}: ok"
      "sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/fp8_train.sh ${bin} ${CMAKE_CURRENT_BINARY_DIR}/fp8_train ${case}" LABELS ${labels})
  endforeach()
endif()

# The optimizer step ahead of the next forward pass against the update on the model's stream: the same bits
# (docs/parallel.md). tests/unit/optim_ahead.sh holds the cases.
if(TWINRUN_BACKEND STREQUAL "twin")
  foreach(case bits layouts norm share rate)
    twinrun_expect_sh(optim_ahead_${case} 0 "optim_ahead ${case}: ok"
      "sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/optim_ahead.sh ${bin} ${CMAKE_CURRENT_BINARY_DIR}/optim_ahead ${case}" LABELS ${labels})
  endforeach()
endif()

# The same tools run directly, one call each, so that ci/memcheck.py runs them under valgrind (it leaves
# the cli_tools.sh script above out: valgrind follows no exec, so it would watch only the shell).
set(megatron_corpus ${PROJECT_SOURCE_DIR}/tests/data/megatron_data/gpt_u16_seq64/corpus)
twinrun_expect(NAME tool_dataset_inspect EXIT 0 LABELS ${labels}
  OUTPUT "sequences: +[0-9]+.*vocab: +ok \\(all ids < 32000\\)"
  COMMAND ${bin}/dataset inspect ${megatron_corpus} --vocab-size 32000)
twinrun_expect(NAME tool_dataset_samples EXIT 0 LABELS ${labels} OUTPUT "tokens.npy"
  COMMAND ${bin}/dataset samples --data-path ${megatron_corpus} --split 99,1,0 --seq-length 64 --seed 1234
  --train-iters 4 --global-batch-size 2 --vocab-size 32000 --split-name train --count 4
  --data-cache-path ${CMAKE_CURRENT_BINARY_DIR}/tool_dataset_samples/cache --out ${CMAKE_CURRENT_BINARY_DIR}/tool_dataset_samples)
twinrun_expect(NAME tool_bench_data EXIT 0 LABELS ${labels} OUTPUT "loader corpus +: open .*loader mock"
  COMMAND ${bin}/bench_data --docs 2000 --seq-length 64 --corpus-docs 40 --mbs 2 --seconds 0.05
  --dir ${CMAKE_CURRENT_BINARY_DIR})
# one process, its own rendezvous (the multi-process launches are launch_check_torchrun/_mpirun)
twinrun_expect(NAME tool_launch_check EXIT 0 LABELS ${labels} OUTPUT "launch_check: rank 0 of 1 .*via WORLD_SIZE"
  PROPERTIES TIMEOUT 60 COMMAND ${bin}/launch_check 20)
set_tests_properties(tool_launch_check PROPERTIES
  ENVIRONMENT "WORLD_SIZE=1;RANK=0;MASTER_ADDR=127.0.0.1;MASTER_PORT=29641")
if(TWINRUN_BACKEND STREQUAL "twin")
  twinrun_expect(NAME tool_bench_twin EXIT 0 LABELS ${labels} OUTPUT "8 ranks x 4 all-reduces of 64 bytes: .* simulated on H200"
    COMMAND ${bin}/bench_twin --ranks 8 --allreduces 4 --bytes 64 --switches 1000 --device H200)
endif()

# ci/compare_metrics.py, which the GPU checks' verdicts rest on: nothing to compare is a failure too.
twinrun_expect(NAME compare_metrics_cases EXIT 0 OUTPUT "test_compare_metrics: 11/11 cases: ok" LABELS ${labels}
  COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/unit/test_compare_metrics.py ${PROJECT_SOURCE_DIR})

# test_store_security's half that needs a second interface: exit 77 on a host with only loopback, which
# ctest reports as skipped (not as passed: nothing was checked there).
add_test(NAME test_store_security_other_interface COMMAND test_store_security other-interface)
set_tests_properties(test_store_security_other_interface PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77)

# The real Llama-3 tokenizer on this machine's man pages and docs against llama3-tokenizer-js and
# Hugging Face `tokenizers`, and Megatron's TikTokenizer against tiktoken (npm packages from
# ci/deps.sh): exit 77, reported as skipped, without them.
foreach(case hf tiktoken)
  add_test(NAME tok_llama3_real_text_${case} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/unit/tok_llama3.sh ${bin}
    ${CMAKE_CURRENT_BINARY_DIR}/tok_llama3_${case} ${case})
  set_tests_properties(tok_llama3_real_text_${case} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77)
endforeach()

# The doctor's health check against a fake libnvidia-ml (tests/tools/fake_nvml), opened by its path.
if(TARGET test_doctor_health)
  add_dependencies(test_doctor_health fake_nvml)
  target_compile_definitions(test_doctor_health PRIVATE FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>")
endif()
