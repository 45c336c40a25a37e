# tests/ckpt: checkpoint library and tools. Included by tests/CMakeLists.txt once per folder,
# after the test_*.c programs exist.
#
# The ckpt program on a checkpoint that test_ckpt_tool_fixture writes: inspect, verify, and verify
# after a byte of a shard is flipped (non-zero exit, the file named, the older checkpoint offered).
set(ckpt_bin ${PROJECT_BINARY_DIR}/bin/ckpt)
set(ckpt_dir ${CMAKE_CURRENT_BINARY_DIR}/ckpt_tool_dir)
add_test(NAME ckpt_tool_fixture COMMAND test_ckpt_save --write-fixture ${ckpt_dir})
set_tests_properties(ckpt_tool_fixture PROPERTIES LABELS "${labels}" FIXTURES_SETUP ckpt_tool)
twinrun_expect(NAME ckpt_inspect EXIT 0 LABELS ${labels} PROPERTIES FIXTURES_REQUIRED ckpt_tool
  OUTPUT "iteration: +20.*layout: +tp 2, pp 1, dp 2, cp 1 \\(4 ranks\\), distributed optimizer.*verification: +OK"
  COMMAND ${ckpt_bin} inspect ${ckpt_dir})
twinrun_expect(NAME ckpt_verify_ok EXIT 0 OUTPUT "verification: +OK \\(iteration 10" LABELS ${labels}
  PROPERTIES FIXTURES_REQUIRED ckpt_tool COMMAND ${ckpt_bin} verify ${ckpt_dir} --iteration 10)
twinrun_expect(NAME ckpt_verify_corrupt EXIT 1 LABELS ${labels} PROPERTIES FIXTURES_REQUIRED ckpt_tool
  OUTPUT "shard_00002.bin: .*checksum mismatch.*older complete checkpoint exists: iteration 10"
  COMMAND sh -c "printf 'X' | dd of=${ckpt_dir}/iter_0000020/shard_00002.bin bs=1 seek=300 conv=notrunc 2>/dev/null\n${ckpt_bin} verify ${ckpt_dir}")
set_tests_properties(ckpt_verify_corrupt PROPERTIES DEPENDS "ckpt_inspect;ckpt_verify_ok")

# The trainer's save and load with many ranks in one process: twin builds only (a GPU build runs one
# rank per process).
if(TWINRUN_BACKEND STREQUAL "twin")
# The trainer's save and load: bit-exact resume (one rank; TP2 PP2 DP2 + distributed optimizer + SP;
# fp32 and bf16) and resharding into other layouts.
add_test(NAME ckpt_continuity COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt/continuity.sh ${PROJECT_BINARY_DIR}/bin
  ${PROJECT_SOURCE_DIR} ${CMAKE_CURRENT_BINARY_DIR}/ckpt_continuity)
set_tests_properties(ckpt_continuity PROPERTIES LABELS "${labels}" TIMEOUT 600)
endif()

# --keep-last 2 with a save every 2 of 6 iterations keeps iterations 4 and 6 (the tracker's) only.
set(kl_dir ${CMAKE_CURRENT_BINARY_DIR}/ckpt_keep_last)
twinrun_expect_sh(ckpt_keep_last 0 "iter_0000004 iter_0000006 latest_checkpointed_iteration.txt"
  "rm -rf ${kl_dir} && ${PROJECT_BINARY_DIR}/bin/train_llama3 --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 2 --train-iters 6 --lr 1e-3 --mock-data --vocab-size 128 --eval-iters 0 --save ${kl_dir}/save --save-interval 2 --keep-last 2 >/dev/null && ls ${kl_dir}/save | tr '\\n' ' ' && rm -rf ${kl_dir}/save"
  LABELS ${labels} PROPERTIES FAIL_REGULAR_EXPRESSION "iter_0000002")

# --exit-duration-in-mins stops every rank at the same iteration (the twin's simulated clock) and saves.
if(TWINRUN_BACKEND STREQUAL "twin")
set(ed_dir ${CMAKE_CURRENT_BINARY_DIR}/ckpt_exit_duration)
twinrun_expect_sh(ckpt_exit_duration 0 "exiting program after 0.0005 minutes.*saved checkpoint at iteration [0-9]+ to.*verification: +OK"
  "rm -rf ${ed_dir} && WORLD_SIZE=2 ${PROJECT_BINARY_DIR}/bin/train_llama3 --num-layers 2 --hidden-size 32 --ffn-hidden-size 64 --num-attention-heads 4 --group-query-attention --num-query-groups 2 --seq-length 8 --max-position-embeddings 8 --position-embedding-type rope --normalization RMSNorm --swiglu --untie-embeddings-and-output-weights --disable-bias-linear --attention-dropout 0 --hidden-dropout 0 --micro-batch-size 1 --global-batch-size 2 --train-iters 100000 --lr 1e-3 --mock-data --vocab-size 128 --eval-iters 0 --log-interval 100000 --save ${ed_dir}/save --save-interval 100000 --exit-duration-in-mins 0.0005 && ${PROJECT_BINARY_DIR}/bin/ckpt verify ${ed_dir}/save && rm -rf ${ed_dir}/save"
  LABELS ${labels})
endif()

# Provenance: `ckpt inspect` prints it; a manifest edited after the save fails `ckpt verify` and --load
# with the fix, and the checkpoint's files stay the same bytes.
add_test(NAME ckpt_provenance COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/ckpt/provenance.sh ${PROJECT_BINARY_DIR}/bin
  ${CMAKE_CURRENT_BINARY_DIR}/ckpt_provenance)
set_tests_properties(ckpt_provenance PROPERTIES LABELS "${labels}" TIMEOUT 300)

# Nothing a user saved is replaced, and --load takes the guide's paths: the 70B guide's
# resume command (--load .../iter_0000004) continuing bit for bit, and each way a run used to lose its
# checkpoints, refused with the tree's hash unchanged and the fix named. tests/ckpt/safe.sh holds the cases.
foreach(case guide_resume save_iter_dir step_conflict fresh_over_complete no_tracker older_step missing
        not_checkpoint two_jobs read_only
        resume_changes resume_data fifo)
  add_test(NAME ckpt_safe_${case} COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/ckpt/safe.sh ${PROJECT_BINARY_DIR}/bin
    ${CMAKE_CURRENT_BINARY_DIR}/ckpt_safe ${case})
  set_tests_properties(ckpt_safe_${case} PROPERTIES LABELS "${labels}")
endforeach()
